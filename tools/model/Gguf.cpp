// Gguf.cpp - value constructors, accessors and lookups of the in-memory GGUF form.
//
// Kept apart from the reader and writer so that both (and the fuzzer) share one definition of
// what a value is and how it compares.
#include "tools/model/Gguf.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sinter::model {

std::string ggufTypeName(GgufType type) {
  switch (type) {
  case GgufType::U8:
    return "uint8";
  case GgufType::I8:
    return "int8";
  case GgufType::U16:
    return "uint16";
  case GgufType::I16:
    return "int16";
  case GgufType::U32:
    return "uint32";
  case GgufType::I32:
    return "int32";
  case GgufType::F32:
    return "float32";
  case GgufType::Bool:
    return "bool";
  case GgufType::String:
    return "string";
  case GgufType::Array:
    return "array";
  case GgufType::U64:
    return "uint64";
  case GgufType::I64:
    return "int64";
  case GgufType::F64:
    return "float64";
  }
  return absl::StrCat("type(", uint32_t(type), ")");
}

uint32_t ggufScalarSize(GgufType type) {
  switch (type) {
  case GgufType::U8:
  case GgufType::I8:
  case GgufType::Bool:
    return 1;
  case GgufType::U16:
  case GgufType::I16:
    return 2;
  case GgufType::U32:
  case GgufType::I32:
  case GgufType::F32:
    return 4;
  case GgufType::U64:
  case GgufType::I64:
  case GgufType::F64:
    return 8;
  case GgufType::String:
  case GgufType::Array:
    return 0;
  }
  return 0;
}

namespace {
GgufValue scalar(GgufType type, uint64_t bits) {
  GgufValue v;
  v.type = type;
  v.bits = bits;
  return v;
}
template <typename T> GgufValue fixedArray(GgufType elem, absl::Span<const T> values) {
  GgufValue v;
  v.type = GgufType::Array;
  v.elemType = elem;
  v.count = values.size();
  v.raw.resize(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(v.raw.data(), values.data(), v.raw.size());
  return v;
}
} // namespace

GgufValue GgufValue::u32(uint32_t v) { return scalar(GgufType::U32, v); }
GgufValue GgufValue::i32(int32_t v) { return scalar(GgufType::I32, uint32_t(v)); }
GgufValue GgufValue::u64(uint64_t v) { return scalar(GgufType::U64, v); }
GgufValue GgufValue::f32(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return scalar(GgufType::F32, b);
}
GgufValue GgufValue::boolean(bool v) { return scalar(GgufType::Bool, v ? 1 : 0); }
GgufValue GgufValue::string(std::string s) {
  GgufValue v;
  v.type = GgufType::String;
  v.str = std::move(s);
  return v;
}
GgufValue GgufValue::stringArray(std::vector<std::string> s) {
  GgufValue v;
  v.type = GgufType::Array;
  v.elemType = GgufType::String;
  v.count = s.size();
  v.strings = std::move(s);
  return v;
}
GgufValue GgufValue::f32Array(absl::Span<const float> v) { return fixedArray(GgufType::F32, v); }
GgufValue GgufValue::i32Array(absl::Span<const int32_t> v) { return fixedArray(GgufType::I32, v); }

std::optional<uint64_t> GgufValue::asUnsigned() const {
  switch (type) {
  case GgufType::U8:
  case GgufType::U16:
  case GgufType::U32:
  case GgufType::U64:
  case GgufType::Bool:
    return bits;
  case GgufType::I8:
    return int8_t(bits) < 0 ? std::nullopt : std::optional<uint64_t>(bits);
  case GgufType::I16:
    return int16_t(bits) < 0 ? std::nullopt : std::optional<uint64_t>(bits);
  case GgufType::I32:
    return int32_t(bits) < 0 ? std::nullopt : std::optional<uint64_t>(bits);
  case GgufType::I64:
    return int64_t(bits) < 0 ? std::nullopt : std::optional<uint64_t>(bits);
  default:
    return std::nullopt;
  }
}

std::optional<double> GgufValue::asDouble() const {
  if (type == GgufType::F32) {
    float f;
    const uint32_t b = uint32_t(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (type == GgufType::F64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  switch (type) {
  case GgufType::I8:
    return double(int8_t(bits));
  case GgufType::I16:
    return double(int16_t(bits));
  case GgufType::I32:
    return double(int32_t(bits));
  case GgufType::I64:
    return double(int64_t(bits));
  default:
    break;
  }
  if (std::optional<uint64_t> u = asUnsigned())
    return double(*u);
  return std::nullopt;
}

bool operator==(const GgufValue &a, const GgufValue &b) {
  if (a.type != b.type)
    return false;
  if (a.type == GgufType::String)
    return a.str == b.str;
  if (a.type != GgufType::Array)
    return a.bits == b.bits;
  return a.elemType == b.elemType && a.count == b.count && a.raw == b.raw &&
         a.strings == b.strings && a.arrays == b.arrays;
}

uint64_t GgufTensor::elementCount() const {
  uint64_t n = 1;
  for (uint64_t d : dims)
    n *= d;
  return n;
}

const GgufValue *GgufFile::find(std::string_view key) const {
  for (const GgufKeyValue &kv : metadata)
    if (kv.key == key)
      return &kv.value;
  return nullptr;
}

const GgufTensor *GgufFile::findTensor(std::string_view name) const {
  for (const GgufTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

} // namespace sinter::model
