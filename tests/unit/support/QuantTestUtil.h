// QuantTestUtil.h - small helpers shared by the quantization tests.
//
// Byte writers for building GGUF blocks by hand and a dequantize-to-vector wrapper, so that each
// test reads as "these bytes mean these weights".
#ifndef SINTER_TESTS_UNIT_SUPPORT_QUANTTESTUTIL_H
#define SINTER_TESTS_UNIT_SUPPORT_QUANTTESTUTIL_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sinter/DType.h"
#include "support/Quant.h"

namespace sinter::test {

/// Writes the little-endian half `bits` at `p`.
inline void putHalfBits(uint8_t *p, uint16_t bits) {
  p[0] = uint8_t(bits & 0xff);
  p[1] = uint8_t(bits >> 8);
}

/// Writes `value` (exactly representable as a half) at `p`.
inline void putHalf(uint8_t *p, float value) { putHalfBits(p, floatToHalf(value)); }

/// Dequantizes `blocks` (a whole number of blocks of `dtype`) into a new vector.
inline std::vector<float> dequantize(DType dtype, const std::vector<uint8_t> &blocks) {
  const DTypeInfo &info = dtypeInfo(dtype);
  uint64_t nWeights = blocks.size() / info.bytesPerBlock * info.blockSize;
  std::vector<float> out(nWeights, NAN);
  dequantizeRow(dtype, blocks.data(), out.data(), nWeights);
  return out;
}

/// The bit pattern of a float (to compare -0.0 and NaN exactly).
inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

/// The float with bit pattern `u`.
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

} // namespace sinter::test

#endif // SINTER_TESTS_UNIT_SUPPORT_QUANTTESTUTIL_H
