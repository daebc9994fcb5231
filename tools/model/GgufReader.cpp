// GgufReader.cpp - a bounds-checked GGUF parser.
//
// Layout (GGUF v3): magic "GGUF", u32 version, u64 tensor count, u64 metadata count; metadata
// entries (string key, u32 type, value); tensor infos (string name, u32 n_dims, u64 dims[n_dims],
// u32 type, u64 offset); padding to general.alignment; the data section. Strings are a u64 length
// and that many bytes. Every multi-byte number is little-endian.
#include "tools/model/GgufReader.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sinter/Status.h"

namespace sinter::model {
namespace {

constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;
// Smallest file footprint of one metadata entry (empty key, type, one-byte value) and of one
// tensor info (empty name, n_dims, one dim, type, offset): counts are capped by these.
constexpr uint64_t kMinEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

absl::Status malformed(const std::string &msg) {
  return absl::InvalidArgumentError(absl::StrCat("gguf: ", msg));
}

class Reader {
public:
  explicit Reader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }
  uint64_t size() const { return bytes_.size(); }

  absl::Status need(uint64_t n, const char *what) const {
    if (n > left())
      return malformed(absl::StrFormat("truncated at offset %u: %s needs %u bytes, %u left", pos_,
                                       what, n, left()));
    return absl::OkStatus();
  }

  template <typename T> absl::StatusOr<T> read(const char *what) {
    SINTER_RETURN_IF_ERROR(need(sizeof(T), what));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  absl::StatusOr<std::string> readString(const char *what) {
    const uint64_t at = pos_;
    SINTER_ASSIGN_OR_RETURN(uint64_t len, read<uint64_t>(what));
    if (len > left())
      return malformed(absl::StrFormat("%s at offset %u has length %u, only %u bytes left", what,
                                       at, len, left()));
    std::string s(reinterpret_cast<const char *>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  /// Copies n <= 8 bytes into the low bytes of `out` (little-endian host).
  absl::Status readInto(uint64_t n, uint64_t *out, const char *what) {
    SINTER_RETURN_IF_ERROR(need(n, what));
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status readRaw(uint64_t n, std::vector<uint8_t> *out, const char *what) {
    SINTER_RETURN_IF_ERROR(need(n, what));
    out->assign(bytes_.data() + pos_, bytes_.data() + pos_ + n);
    pos_ += n;
    return absl::OkStatus();
  }

private:
  absl::Span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

bool knownType(uint32_t t) { return t <= uint32_t(GgufType::F64); }

absl::StatusOr<GgufValue> readValue(Reader &r, GgufType type, int depth, const std::string &key);

absl::Status readArray(Reader &r, GgufValue &v, int depth, const std::string &key) {
  const uint64_t at = r.pos();
  SINTER_ASSIGN_OR_RETURN(uint32_t elem, r.read<uint32_t>("array element type"));
  if (!knownType(elem))
    return malformed(absl::StrFormat(
        "metadata '%s': array at offset %u has unknown element type %u", key, at, elem));
  v.elemType = GgufType(elem);
  SINTER_ASSIGN_OR_RETURN(v.count, r.read<uint64_t>("array length"));
  const uint64_t scalar = ggufScalarSize(v.elemType);
  // A string takes at least its 8-byte length, a nested array its 12-byte header.
  const uint64_t minElem = scalar ? scalar : (v.elemType == GgufType::String ? 8 : 12);
  if (v.count > r.left() / minElem)
    return malformed(
        absl::StrFormat("metadata '%s': array at offset %u has %u %s elements, only %u bytes left",
                        key, at, v.count, ggufTypeName(v.elemType), r.left()));
  if (scalar)
    return r.readRaw(v.count * scalar, &v.raw, "array data");
  if (v.elemType == GgufType::String) {
    v.strings.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i) {
      SINTER_ASSIGN_OR_RETURN(std::string s, r.readString("array string"));
      v.strings.push_back(std::move(s));
    }
    return absl::OkStatus();
  }
  if (depth + 1 >= kMaxArrayDepth)
    return malformed(absl::StrFormat("metadata '%s': arrays nested deeper than %d at offset %u",
                                     key, kMaxArrayDepth, at));
  v.arrays.reserve(v.count);
  for (uint64_t i = 0; i < v.count; ++i) {
    SINTER_ASSIGN_OR_RETURN(GgufValue item, readValue(r, GgufType::Array, depth + 1, key));
    v.arrays.push_back(std::move(item));
  }
  return absl::OkStatus();
}

absl::StatusOr<GgufValue> readValue(Reader &r, GgufType type, int depth, const std::string &key) {
  GgufValue v;
  v.type = type;
  if (type == GgufType::String) {
    SINTER_ASSIGN_OR_RETURN(v.str, r.readString("string value"));
    return v;
  }
  if (type == GgufType::Array) {
    SINTER_RETURN_IF_ERROR(readArray(r, v, depth, key));
    return v;
  }
  SINTER_RETURN_IF_ERROR(r.readInto(ggufScalarSize(type), &v.bits, "metadata value"));
  return v;
}

absl::Status readMetadata(Reader &r, uint64_t count, GgufFile &file) {
  absl::flat_hash_set<std::string> seen;
  file.metadata.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t at = r.pos();
    SINTER_ASSIGN_OR_RETURN(std::string key, r.readString("metadata key"));
    SINTER_ASSIGN_OR_RETURN(uint32_t type, r.read<uint32_t>("metadata value type"));
    if (!knownType(type))
      return malformed(
          absl::StrFormat("metadata '%s' at offset %u has unknown value type %u", key, at, type));
    if (!seen.insert(key).second)
      return malformed(absl::StrFormat("duplicate metadata key '%s' at offset %u", key, at));
    SINTER_ASSIGN_OR_RETURN(GgufValue value, readValue(r, GgufType(type), 0, key));
    file.metadata.push_back({std::move(key), std::move(value)});
  }
  if (const GgufValue *a = file.find("general.alignment")) {
    const std::optional<uint64_t> align = a->asUnsigned();
    if (!align || *align == 0 || (*align & (*align - 1)) != 0 || *align > (1u << 30))
      return malformed(absl::StrCat("general.alignment must be a power of two up to 2^30, got ",
                                    align ? absl::StrCat(*align) : ggufTypeName(a->type)));
    file.alignment = *align;
  }
  return absl::OkStatus();
}

absl::Status readTensorInfo(Reader &r, GgufTensor &t) {
  const uint64_t at = r.pos();
  SINTER_ASSIGN_OR_RETURN(t.name, r.readString("tensor name"));
  SINTER_ASSIGN_OR_RETURN(uint32_t nDims, r.read<uint32_t>("tensor n_dims"));
  if (nDims == 0 || nDims > kMaxDims)
    return malformed(absl::StrFormat("tensor %s at offset %u has %u dims (1..%u allowed)", t.name,
                                     at, nDims, kMaxDims));
  uint64_t elements = 1;
  for (uint32_t d = 0; d < nDims; ++d) {
    SINTER_ASSIGN_OR_RETURN(uint64_t n, r.read<uint64_t>("tensor dim"));
    // Capped at 2^54 elements, so that bytes (at most 292 per block) stay inside 64 bits.
    if (n > 0 && elements > (uint64_t(1) << 54) / n)
      return malformed(
          absl::StrFormat("tensor %s at offset %u: element count overflows", t.name, at));
    elements *= n;
    t.dims.push_back(n);
  }
  SINTER_ASSIGN_OR_RETURN(uint32_t typeId, r.read<uint32_t>("tensor type"));
  const DTypeInfo *info = lookupDType(typeId);
  if (!info)
    return absl::UnimplementedError(absl::StrFormat(
        "gguf: tensor %s at offset %u has unsupported type id %u", t.name, at, typeId));
  t.dtype = info->dtype;
  if (t.dims[0] % info->blockSize != 0)
    return malformed(absl::StrFormat("tensor %s: row length %u is not a multiple of the %s block "
                                     "size %u",
                                     t.name, t.dims[0], info->name, info->blockSize));
  SINTER_ASSIGN_OR_RETURN(t.offset, r.read<uint64_t>("tensor offset"));
  return absl::OkStatus();
}

// Bytes of a tensor; its element count is at most 2^54 (readTensorInfo), so this cannot overflow.
uint64_t tensorBytes(const GgufTensor &t) {
  const DTypeInfo &info = dtypeInfo(t.dtype);
  return t.elementCount() / info.blockSize * info.bytesPerBlock;
}

} // namespace

absl::StatusOr<GgufFile> parseGguf(absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  GgufFile file;
  SINTER_ASSIGN_OR_RETURN(uint32_t magic, r.read<uint32_t>("magic"));
  if (std::memcmp(&magic, "GGUF", 4) != 0)
    return malformed(absl::StrFormat("bad magic 0x%08x (expected \"GGUF\", 0x46554747)", magic));
  SINTER_ASSIGN_OR_RETURN(file.version, r.read<uint32_t>("version"));
  if (file.version != 2 && file.version != 3)
    return absl::UnimplementedError(
        absl::StrFormat("gguf: version %u is not supported (2 and 3 are)", file.version));
  SINTER_ASSIGN_OR_RETURN(uint64_t nTensors, r.read<uint64_t>("tensor count"));
  SINTER_ASSIGN_OR_RETURN(uint64_t nKv, r.read<uint64_t>("metadata count"));
  if (nKv > r.left() / kMinEntryBytes)
    return malformed(
        absl::StrFormat("metadata count %u cannot fit in the %u bytes left", nKv, r.left()));
  SINTER_RETURN_IF_ERROR(readMetadata(r, nKv, file));
  if (nTensors > r.left() / kMinTensorInfoBytes)
    return malformed(
        absl::StrFormat("tensor count %u cannot fit in the %u bytes left", nTensors, r.left()));
  file.tensors.resize(nTensors);
  absl::flat_hash_set<std::string> names;
  for (GgufTensor &t : file.tensors) {
    SINTER_RETURN_IF_ERROR(readTensorInfo(r, t));
    if (!names.insert(t.name).second)
      return malformed(absl::StrCat("duplicate tensor name ", t.name));
  }
  const uint64_t align = file.alignment;
  file.dataOffset = (r.pos() + align - 1) / align * align;
  for (GgufTensor &t : file.tensors) {
    if (t.offset % align != 0)
      return malformed(absl::StrFormat("tensor %s: offset %u is not a multiple of the alignment %u",
                                       t.name, t.offset, align));
    const uint64_t size = tensorBytes(t);
    const uint64_t fileSize = r.size();
    if (file.dataOffset > fileSize || t.offset > fileSize - file.dataOffset ||
        size > fileSize - file.dataOffset - t.offset)
      return malformed(absl::StrFormat(
          "tensor %s at offset %u + %u bytes exceeds file size %u (data section at %u)", t.name,
          t.offset, size, fileSize, file.dataOffset));
    t.data = bytes.subspan(file.dataOffset + t.offset, size);
  }
  return file;
}

} // namespace sinter::model
