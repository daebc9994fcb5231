// GgufBytes.h - builds GGUF byte strings field by field, for tests of malformed files.
//
// The writer can only produce valid files; error tests need exact control over every count,
// length and offset, so they assemble the bytes with this little-endian builder.
#ifndef SINTER_TESTS_UNIT_TOOLS_GGUFBYTES_H
#define SINTER_TESTS_UNIT_TOOLS_GGUFBYTES_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sinter::model::testing {

class GgufBytes {
public:
  GgufBytes &u8(uint8_t v) { return raw(&v, 1); }
  GgufBytes &u32(uint32_t v) { return raw(&v, 4); }
  GgufBytes &u64(uint64_t v) { return raw(&v, 8); }
  GgufBytes &f32(float v) { return raw(&v, 4); }
  GgufBytes &str(const std::string &s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  GgufBytes &raw(const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  /// "GGUF", version, tensor count, metadata count.
  GgufBytes &header(uint64_t nTensors, uint64_t nKv, uint32_t version = 3) {
    raw("GGUF", 4);
    u32(version);
    u64(nTensors);
    return u64(nKv);
  }
  /// A metadata entry with a u32 value (type 4).
  GgufBytes &kvU32(const std::string &key, uint32_t v) { return str(key).u32(4).u32(v); }
  /// A metadata entry with a string value (type 8).
  GgufBytes &kvStr(const std::string &key, const std::string &v) { return str(key).u32(8).str(v); }
  /// A tensor info.
  GgufBytes &tensor(const std::string &name, std::vector<uint64_t> dims, uint32_t type,
                    uint64_t offset) {
    str(name).u32(uint32_t(dims.size()));
    for (uint64_t d : dims)
      u64(d);
    return u32(type).u64(offset);
  }
  /// Zero bytes up to the next multiple of `align`.
  GgufBytes &pad(size_t align = 32) {
    bytes.resize((bytes.size() + align - 1) / align * align, 0);
    return *this;
  }
  GgufBytes &zeros(size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }

  std::vector<uint8_t> bytes;
};

} // namespace sinter::model::testing

#endif // SINTER_TESTS_UNIT_TOOLS_GGUFBYTES_H
