// Quant.h - dequantization and quantization of the GGUF weight formats.
//
// Block layouts and dequantized values are bit-exact with ggml's dequantize_row_* (SEMANTICS.md,
// "Weight formats"). The quantizers are round-to-nearest, like GGUF's reference quantizers, and
// exist so that tests, benchmarks and synthetic models can make weights.
#ifndef SINTER_SUPPORT_QUANT_H
#define SINTER_SUPPORT_QUANT_H

#include <cstdint>

#include "absl/status/status.h"
#include "sinter/DType.h"

namespace sinter {

/// IEEE half to float (exact; subnormals, infinities and NaN included).
float halfToFloat(uint16_t h);
/// Float to IEEE half, round-to-nearest-even (as ggml's GGML_FP32_TO_FP16 on x86 F16C).
uint16_t floatToHalf(float f);
/// bfloat16 to float (exact).
float bf16ToFloat(uint16_t b);
/// Float to bfloat16, round-to-nearest-even; NaN stays NaN (as ggml_compute_fp32_to_bf16).
uint16_t floatToBf16(float f);

/// Dequantizes `nWeights` weights (a whole number of blocks) of a Supported dtype from `src` to
/// `dst`. The caller has validated both (checkWeightDType, the block multiple).
void dequantizeRow(DType dtype, const uint8_t *src, float *dst, uint64_t nWeights);

/// True for the formats quantizeRow can write: every Supported weight format (F32, F16, BF16,
/// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
bool canQuantize(DType dtype);

/// Quantizes `nWeights` floats (a whole number of blocks) into `dst` (rowBytes(...) bytes).
/// Unimplemented for a format canQuantize rejects; InvalidArgument when nWeights is not a whole
/// number of blocks.
absl::Status quantizeRow(DType dtype, const float *src, uint8_t *dst, uint64_t nWeights);

} // namespace sinter

#endif // SINTER_SUPPORT_QUANT_H
