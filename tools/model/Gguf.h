// Gguf.h - the in-memory form of a GGUF v3 file: metadata key/values and tensor infos.
//
// GgufReader.cpp parses bytes into a GgufFile, GgufWriter.cpp serializes one, and GgufModel.cpp
// maps between a GgufFile of the llama architecture and ModelWeights. Values keep their exact
// GGUF type so that a file read and written again is byte for byte the same.
#ifndef SINTER_TOOLS_MODEL_GGUF_H
#define SINTER_TOOLS_MODEL_GGUF_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "sinter/DType.h"

namespace sinter::model {

/// GGUF metadata value types (gguf_type), by their ids in the file.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

/// "uint32", "string", ...; "type(N)" for an id outside the enum.
std::string ggufTypeName(GgufType type);
/// Bytes of a fixed-size value type in the file; 0 for String and Array (and unknown ids).
uint32_t ggufScalarSize(GgufType type);

/// One metadata value.
struct GgufValue {
  GgufType type = GgufType::U32;
  /// Scalars: the value's bits as stored (zero-extended), e.g. a float's IEEE bits.
  uint64_t bits = 0;
  std::string str; ///< String
  /// Array: element type; elements are in `raw` (fixed-size types, little-endian, back to back),
  /// `strings` (String) or `arrays` (Array).
  GgufType elemType = GgufType::U8;
  uint64_t count = 0; ///< Array: number of elements
  std::vector<uint8_t> raw;
  std::vector<std::string> strings;
  std::vector<GgufValue> arrays;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue stringArray(std::vector<std::string> v);
  static GgufValue f32Array(absl::Span<const float> v);
  static GgufValue i32Array(absl::Span<const int32_t> v);

  /// The value of an integer (or bool) scalar when it is >= 0 and fits in 64 bits.
  std::optional<uint64_t> asUnsigned() const;
  /// The value of a float or integer scalar as a double.
  std::optional<double> asDouble() const;

  friend bool operator==(const GgufValue &a, const GgufValue &b);
  friend bool operator!=(const GgufValue &a, const GgufValue &b) { return !(a == b); }
};

/// One metadata entry.
struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

/// One tensor info and, in a parsed file, its bytes.
struct GgufTensor {
  std::string name;
  std::vector<uint64_t> dims; ///< innermost first: dims[0] is the row length
  DType dtype = DType::F32;
  uint64_t offset = 0;            ///< from the start of the data section
  absl::Span<const uint8_t> data; ///< the tensor's bytes (reader: into the parsed buffer)

  uint64_t elementCount() const;
};

/// A GGUF file.
struct GgufFile {
  uint32_t version = 3;
  std::vector<GgufKeyValue> metadata;
  std::vector<GgufTensor> tensors;
  uint64_t alignment = 32; ///< general.alignment, or 32
  uint64_t dataOffset = 0; ///< start of the data section in the file (reader only)

  /// The entry called `key`, or nullptr.
  const GgufValue *find(std::string_view key) const;
  /// The tensor called `name`, or nullptr.
  const GgufTensor *findTensor(std::string_view name) const;
};

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_GGUF_H
