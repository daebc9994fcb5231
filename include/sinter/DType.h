// DType.h - weight formats, by their GGUF/ggml type ids.
//
// The ids, block sizes and bytes per block are those of the GGUF files llama.cpp writes
// (SEMANTICS.md, "Weight formats"). The table says which formats Sinter supports today, which come
// later (Unimplemented) and which are not weight formats at all (InvalidArgument).
#ifndef SINTER_DTYPE_H
#define SINTER_DTYPE_H

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace sinter {

/// A weight format; the numeric value is the GGUF/ggml type id.
enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};

/// How far Sinter supports a format as quantized_matmul weights.
enum class DTypeSupport : uint8_t {
  Supported,  ///< dequantization and every backend's contraction exist
  Later,      ///< a known weight format not implemented yet: Unimplemented
  NotAWeight, ///< integer and f64 tensors: InvalidArgument
};

/// Static facts about one format.
struct DTypeInfo {
  DType dtype;
  const char *name;       ///< GGUF's spelling, e.g. "Q4_0"
  uint32_t blockSize;     ///< weights per block (1 for scalar formats)
  uint32_t bytesPerBlock; ///< bytes per block
  DTypeSupport support;
};

/// The facts for GGUF type id `id`, or nullptr when the id names no format (4, 5, 31..33, > 35).
const DTypeInfo *lookupDType(uint32_t id);

/// The facts for a valid DType. Asserts on values that are not in the enum.
const DTypeInfo &dtypeInfo(DType dtype);

/// GGUF's name of the format ("Q4_K"); "unknown(N)" for an id that names nothing.
std::string dtypeName(DType dtype);

/// Parses a name such as "q4_0" or "Q4_0" (case-insensitive); false when unknown.
bool parseDType(std::string_view name, DType *out);

/// Ok when `dtype` can be used as quantized_matmul weights today; otherwise InvalidArgument for ids
/// that are not weight formats and Unimplemented for formats not supported yet. `op` prefixes the
/// message.
absl::Status checkWeightDType(DType dtype, std::string_view op);

/// Bytes of one row of `nWeights` weights; nWeights must be a multiple of the block size.
inline uint64_t rowBytes(const DTypeInfo &info, uint64_t nWeights) {
  return nWeights / info.blockSize * info.bytesPerBlock;
}

} // namespace sinter

#endif // SINTER_DTYPE_H
