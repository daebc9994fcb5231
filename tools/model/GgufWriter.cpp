// GgufWriter.cpp - GGUF v3 serialization (little-endian hosts).
//
// The header is built in memory (it is small); tensor data is appended or streamed after it so
// that writing a multi-gigabyte model does not need a second copy of the weights.
#include "tools/model/GgufWriter.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sinter/Status.h"

namespace sinter::model {
namespace {

class Out {
public:
  template <typename T> void put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void putString(const std::string &s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> bytes;
};

absl::Status putValue(Out &out, const GgufValue &v, const std::string &key) {
  if (v.type == GgufType::String) {
    out.putString(v.str);
    return absl::OkStatus();
  }
  if (v.type != GgufType::Array) {
    const uint32_t size = ggufScalarSize(v.type);
    if (size == 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("gguf write: key %s has unknown type %u", key, uint32_t(v.type)));
    const size_t at = out.bytes.size();
    out.bytes.resize(at + size);
    std::memcpy(out.bytes.data() + at, &v.bits, size);
    return absl::OkStatus();
  }
  out.put<uint32_t>(uint32_t(v.elemType));
  out.put<uint64_t>(v.count);
  const uint32_t size = ggufScalarSize(v.elemType);
  const uint64_t have = size                             ? v.raw.size() / size
                        : v.elemType == GgufType::String ? v.strings.size()
                                                         : v.arrays.size();
  if (have != v.count || (size && v.raw.size() % size != 0))
    return absl::InvalidArgumentError(
        absl::StrFormat("gguf write: array %s says %u elements, holds %u", key, v.count, have));
  if (size) {
    out.bytes.insert(out.bytes.end(), v.raw.begin(), v.raw.end());
    return absl::OkStatus();
  }
  if (v.elemType == GgufType::String) {
    for (const std::string &s : v.strings)
      out.putString(s);
    return absl::OkStatus();
  }
  for (const GgufValue &item : v.arrays) {
    if (item.type != GgufType::Array)
      return absl::InvalidArgumentError(absl::StrFormat("gguf write: array %s of arrays holds a %s",
                                                        key, ggufTypeName(item.type)));
    SINTER_RETURN_IF_ERROR(putValue(out, item, key));
  }
  return absl::OkStatus();
}

uint64_t alignUp(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

} // namespace

absl::StatusOr<std::vector<uint8_t>> serializeGgufHeader(const GgufFile &file,
                                                         std::vector<uint64_t> *offsets) {
  const uint64_t align = file.alignment;
  if (align == 0 || (align & (align - 1)) != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("gguf write: alignment %u is not a power of two", align));
  if (const GgufValue *a = file.find("general.alignment"); a && a->asUnsigned() != align)
    return absl::InvalidArgumentError(
        absl::StrFormat("gguf write: general.alignment disagrees with the alignment %u", align));
  Out out;
  out.bytes = {'G', 'G', 'U', 'F'};
  out.put<uint32_t>(3);
  out.put<uint64_t>(file.tensors.size());
  out.put<uint64_t>(file.metadata.size());
  for (const GgufKeyValue &kv : file.metadata) {
    out.putString(kv.key);
    out.put<uint32_t>(uint32_t(kv.value.type));
    SINTER_RETURN_IF_ERROR(putValue(out, kv.value, kv.key));
  }
  offsets->clear();
  uint64_t offset = 0;
  for (const GgufTensor &t : file.tensors) {
    const DTypeInfo &info = dtypeInfo(t.dtype);
    if (t.dims.empty() || t.dims[0] % info.blockSize != 0 ||
        t.data.size() != t.elementCount() / info.blockSize * info.bytesPerBlock)
      return absl::InvalidArgumentError(absl::StrFormat(
          "gguf write: tensor %s holds %u bytes, which does not match its %u dims of %s", t.name,
          t.data.size(), t.dims.size(), info.name));
    out.putString(t.name);
    out.put<uint32_t>(uint32_t(t.dims.size()));
    for (uint64_t d : t.dims)
      out.put<uint64_t>(d);
    out.put<uint32_t>(uint32_t(t.dtype));
    out.put<uint64_t>(offset);
    offsets->push_back(offset);
    offset = alignUp(offset + t.data.size(), align);
  }
  out.bytes.resize(alignUp(out.bytes.size(), align), 0);
  return std::move(out.bytes);
}

absl::StatusOr<std::vector<uint8_t>> serializeGguf(const GgufFile &file) {
  std::vector<uint64_t> offsets;
  SINTER_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serializeGgufHeader(file, &offsets));
  const uint64_t base = bytes.size();
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    bytes.resize(base + offsets[i], 0);
    bytes.insert(bytes.end(), file.tensors[i].data.begin(), file.tensors[i].data.end());
  }
  return bytes;
}

absl::Status writeGguf(const GgufFile &file, const std::string &path) {
  std::vector<uint64_t> offsets;
  SINTER_ASSIGN_OR_RETURN(std::vector<uint8_t> header, serializeGgufHeader(file, &offsets));
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  uint64_t written = 0; // bytes of the data section so far
  const std::vector<uint8_t> zeros(file.alignment, 0);
  for (size_t i = 0; ok && i < file.tensors.size(); ++i) {
    const uint64_t pad = offsets[i] - written;
    ok = std::fwrite(zeros.data(), 1, pad, f) == pad;
    const auto &d = file.tensors[i].data;
    ok = ok && (d.empty() || std::fwrite(d.data(), 1, d.size(), f) == d.size());
    written = offsets[i] + d.size();
  }
  const int err = errno;
  if (std::fclose(f) != 0 || !ok)
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  return absl::OkStatus();
}

} // namespace sinter::model
