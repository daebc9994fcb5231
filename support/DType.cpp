// DType.cpp - the table of GGUF weight formats: ids, names, block sizes, support.
//
// One row per GGUF type id; lookups are by id so that a raw id read from a file or the C ABI can
// be checked before it is trusted as a DType.
#include "sinter/DType.h"

#include <array>
#include <cassert>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sinter {
namespace {

using S = DTypeSupport;

constexpr DTypeInfo kTable[] = {
    {DType::F32, "F32", 1, 4, S::Supported},        {DType::F16, "F16", 1, 2, S::Supported},
    {DType::Q4_0, "Q4_0", 32, 18, S::Supported},    {DType::Q4_1, "Q4_1", 32, 20, S::Supported},
    {DType::Q5_0, "Q5_0", 32, 22, S::Supported},    {DType::Q5_1, "Q5_1", 32, 24, S::Supported},
    {DType::Q8_0, "Q8_0", 32, 34, S::Supported},    {DType::Q8_1, "Q8_1", 32, 36, S::Later},
    {DType::Q2_K, "Q2_K", 256, 84, S::Supported},   {DType::Q3_K, "Q3_K", 256, 110, S::Supported},
    {DType::Q4_K, "Q4_K", 256, 144, S::Supported},  {DType::Q5_K, "Q5_K", 256, 176, S::Supported},
    {DType::Q6_K, "Q6_K", 256, 210, S::Supported},  {DType::Q8_K, "Q8_K", 256, 292, S::Later},
    {DType::IQ2_XXS, "IQ2_XXS", 256, 66, S::Later}, {DType::IQ2_XS, "IQ2_XS", 256, 74, S::Later},
    {DType::IQ3_XXS, "IQ3_XXS", 256, 98, S::Later}, {DType::IQ1_S, "IQ1_S", 256, 50, S::Later},
    {DType::IQ4_NL, "IQ4_NL", 32, 18, S::Later},    {DType::IQ3_S, "IQ3_S", 256, 110, S::Later},
    {DType::IQ2_S, "IQ2_S", 256, 82, S::Later},     {DType::IQ4_XS, "IQ4_XS", 256, 136, S::Later},
    {DType::I8, "I8", 1, 1, S::NotAWeight},         {DType::I16, "I16", 1, 2, S::NotAWeight},
    {DType::I32, "I32", 1, 4, S::NotAWeight},       {DType::I64, "I64", 1, 8, S::NotAWeight},
    {DType::F64, "F64", 1, 8, S::NotAWeight},       {DType::IQ1_M, "IQ1_M", 256, 56, S::Later},
    {DType::BF16, "BF16", 1, 2, S::Supported},      {DType::TQ1_0, "TQ1_0", 256, 54, S::Later},
    {DType::TQ2_0, "TQ2_0", 256, 66, S::Later},
};

constexpr uint32_t kMaxId = 35;

// Index by id; -1 where the id names no format.
constexpr std::array<int, kMaxId + 1> makeIndex() {
  std::array<int, kMaxId + 1> index{};
  for (auto &i : index)
    i = -1;
  for (int i = 0; i < int(sizeof(kTable) / sizeof(kTable[0])); ++i)
    index[static_cast<uint32_t>(kTable[i].dtype)] = i;
  return index;
}
constexpr std::array<int, kMaxId + 1> kIndex = makeIndex();

} // namespace

const DTypeInfo *lookupDType(uint32_t id) {
  if (id > kMaxId || kIndex[id] < 0)
    return nullptr;
  return &kTable[kIndex[id]];
}

const DTypeInfo &dtypeInfo(DType dtype) {
  const DTypeInfo *info = lookupDType(static_cast<uint32_t>(dtype));
  assert(info && "dtypeInfo: value is not a DType");
  return *info;
}

std::string dtypeName(DType dtype) {
  const DTypeInfo *info = lookupDType(static_cast<uint32_t>(dtype));
  if (!info)
    return absl::StrCat("unknown(", static_cast<uint32_t>(dtype), ")");
  return info->name;
}

bool parseDType(std::string_view name, DType *out) {
  for (const DTypeInfo &info : kTable) {
    std::string_view candidate = info.name;
    if (candidate.size() != name.size())
      continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == candidate[i];
    if (same) {
      *out = info.dtype;
      return true;
    }
  }
  return false;
}

absl::Status checkWeightDType(DType dtype, std::string_view op) {
  uint32_t id = static_cast<uint32_t>(dtype);
  const DTypeInfo *info = lookupDType(id);
  if (!info)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dtype id %u is not a GGUF weight format", op, id));
  switch (info->support) {
  case DTypeSupport::Supported:
    return absl::OkStatus();
  case DTypeSupport::Later:
    return absl::UnimplementedError(
        absl::StrFormat("%s: dtype %s (id %u) is not supported yet", op, info->name, id));
  case DTypeSupport::NotAWeight:
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dtype %s (id %u) is not a weight format", op, info->name, id));
  }
  return absl::InternalError("unreachable");
}

} // namespace sinter
