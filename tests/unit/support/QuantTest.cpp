// QuantTest.cpp - tests of the 32-weight GGUF formats and of quantizeRow in support/Quant.cpp.
//
// Blocks are built byte by byte and the expected weights written as the format's formula
// (Q4_0: (q - 8) * d, Q4_1: q * d + m, ...), with scales chosen to make every product exact.
// Round trips check quantizeRow's error per format; K-quant blocks are in QuantKTest.cpp.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "QuantTestUtil.h"
#include "support/Quant.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using test::bitsOf;
using test::dequantize;
using test::putHalf;
using test::putHalfBits;

constexpr float kHalfMax = 65504.0f;
const float kHalfTiny = std::ldexp(1.0f, -24); // the smallest subnormal half, bits 0x0001

TEST(QuantTest, ScalarRows) {
  std::vector<uint8_t> f32(8);
  float values[2] = {1.5f, -0.0f};
  std::memcpy(f32.data(), values, 8);
  std::vector<float> out = dequantize(DType::F32, f32);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(bitsOf(out[1]), 0x80000000u);

  std::vector<uint8_t> f16(6);
  putHalfBits(&f16[0], 0x3c00);
  putHalfBits(&f16[2], 0x7bff);
  putHalfBits(&f16[4], 0x8001);
  out = dequantize(DType::F16, f16);
  EXPECT_EQ(out, (std::vector<float>{1.0f, kHalfMax, -kHalfTiny}));

  std::vector<uint8_t> bf16 = {0x80, 0x3f, 0x00, 0xc0, 0x80, 0x7f}; // 1, -2, inf
  out = dequantize(DType::BF16, bf16);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, INFINITY}));
}

// GGUF puts the 16 low nibbles of a Q4_0 block at weights 0..15 and the high nibbles at 16..31;
// yule's neighbouring-pair reading (weights 2i, 2i+1 from byte i) would give other values.
TEST(QuantTest, Q4_0NibblesFollowGguf) {
  std::vector<uint8_t> b(18, 0x88); // every nibble 8: weight 0
  putHalf(&b[0], 1.0f);
  b[2] = 0x1f; // low nibble 15 -> weight 0 = 7; high nibble 1 -> weight 16 = -7
  std::vector<float> y = dequantize(DType::Q4_0, b);
  EXPECT_EQ(y[0], 7.0f);
  EXPECT_EQ(y[16], -7.0f);
  EXPECT_EQ(y[1], 0.0f) << "weight 1 comes from byte 1, not from the high nibble of byte 0";
  for (int j = 2; j < 32; ++j)
    EXPECT_EQ(y[j], j == 16 ? -7.0f : 0.0f) << j;
}

TEST(QuantTest, Q4_0Block) {
  std::vector<uint8_t> b(18);
  putHalf(&b[0], 0.5f);
  for (int j = 0; j < 16; ++j)
    b[2 + j] = uint8_t(j | (15 - j) << 4);
  std::vector<float> y = dequantize(DType::Q4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[16 + j], ((15 - j) - 8) * 0.5f) << j;
  }
}

TEST(QuantTest, Q4_0EdgeScales) {
  std::vector<uint8_t> b(18);
  b[2] = 0xf0; // weight 0: q = 0, weight 16: q = 15
  struct Case {
    uint16_t dBits;
    float d;
  } cases[] = {{0x0000, 0.0f}, {0xc000, -2.0f}, {0x7bff, kHalfMax}, {0x0001, kHalfTiny}};
  for (const Case &c : cases) {
    putHalfBits(&b[0], c.dBits);
    std::vector<float> y = dequantize(DType::Q4_0, b);
    EXPECT_EQ(y[0], -8.0f * c.d) << c.dBits;
    EXPECT_EQ(y[16], 7.0f * c.d) << c.dBits;
  }
}

TEST(QuantTest, Q4_1Block) {
  std::vector<uint8_t> b(20);
  putHalf(&b[0], 0.5f);
  putHalf(&b[2], -3.0f);
  for (int j = 0; j < 16; ++j)
    b[4 + j] = uint8_t(j | (15 - j) << 4);
  std::vector<float> y = dequantize(DType::Q4_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 3.0f) << j;
    EXPECT_EQ(y[16 + j], (15 - j) * 0.5f - 3.0f) << j;
  }
  // Zero scale: every weight is the min. Negative scale with the fp16 max min.
  putHalf(&b[0], 0.0f);
  putHalf(&b[2], 1.25f);
  for (float v : dequantize(DType::Q4_1, b))
    EXPECT_EQ(v, 1.25f);
  putHalf(&b[0], -4.0f);
  putHalfBits(&b[2], 0x7bff);
  y = dequantize(DType::Q4_1, b);
  EXPECT_EQ(y[15], 15 * -4.0f + kHalfMax); // q = 15
  EXPECT_EQ(y[16], 15 * -4.0f + kHalfMax);
  EXPECT_EQ(y[0], kHalfMax);
}

TEST(QuantTest, Q5_0Block) {
  std::vector<uint8_t> b(22);
  putHalf(&b[0], 0.25f);
  // qh is a little-endian uint32: bit j is the fifth bit of weight j.
  uint32_t qh = 0x80000001u | 1u << 16 | 1u << 5;
  for (int i = 0; i < 4; ++i)
    b[2 + i] = uint8_t(qh >> (8 * i));
  for (int j = 0; j < 16; ++j)
    b[6 + j] = uint8_t(j | (15 - j) << 4);
  std::vector<float> y = dequantize(DType::Q5_0, b);
  for (int j = 0; j < 32; ++j) {
    int low = j < 16 ? j : 15 - (j - 16);
    int q = low | int((qh >> j) & 1) << 4;
    EXPECT_EQ(y[j], (q - 16) * 0.25f) << j;
  }
  EXPECT_EQ(y[0], 0.0f);        // low nibble 0 with the fifth bit: q = 16
  EXPECT_EQ(y[5], 5 * 0.25f);   // q = 5 | 16 = 21
  EXPECT_EQ(y[16], 15 * 0.25f); // q = 15 | 16 = 31, the largest
  EXPECT_EQ(y[1], -15 * 0.25f); // q = 1, no fifth bit
  EXPECT_EQ(y[17], -2 * 0.25f); // q = 14, no fifth bit
  putHalfBits(&b[0], 0x7bff);
  EXPECT_EQ(dequantize(DType::Q5_0, b)[16], 15 * kHalfMax);
}

TEST(QuantTest, Q5_1Block) {
  std::vector<uint8_t> b(24);
  putHalf(&b[0], 0.5f);
  putHalf(&b[2], -8.0f);
  uint32_t qh = 0xffff0000u; // weights 16..31 get the fifth bit
  for (int i = 0; i < 4; ++i)
    b[4 + i] = uint8_t(qh >> (8 * i));
  for (int j = 0; j < 16; ++j)
    b[8 + j] = uint8_t(j | j << 4);
  std::vector<float> y = dequantize(DType::Q5_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 8.0f) << j;
    EXPECT_EQ(y[16 + j], (j + 16) * 0.5f - 8.0f) << j;
  }
  EXPECT_EQ(y[31], 31 * 0.5f - 8.0f);
  putHalfBits(&b[0], 0x0001); // subnormal scale
  EXPECT_EQ(dequantize(DType::Q5_1, b)[31], 31 * kHalfTiny - 8.0f);
}

TEST(QuantTest, Q8_0Block) {
  std::vector<uint8_t> b(34);
  putHalf(&b[0], 0.25f);
  for (int j = 0; j < 32; ++j)
    b[2 + j] = uint8_t(int8_t(j * 8 - 128 + (j == 31 ? 7 : 0))); // -128 .. 127
  std::vector<float> y = dequantize(DType::Q8_0, b);
  for (int j = 0; j < 32; ++j)
    EXPECT_EQ(y[j], int8_t(b[2 + j]) * 0.25f) << j;
  EXPECT_EQ(y[0], -32.0f);
  EXPECT_EQ(y[31], 127 * 0.25f);
  putHalfBits(&b[0], 0xfbff); // -65504
  y = dequantize(DType::Q8_0, b);
  EXPECT_EQ(y[0], -128 * -kHalfMax);
}

TEST(QuantTest, RowsOfSeveralBlocks) {
  std::vector<uint8_t> b(3 * 34);
  for (int i = 0; i < 3; ++i) {
    putHalf(&b[34 * i], float(i + 1));
    b[34 * i + 2 + 5] = uint8_t(i + 1);
  }
  std::vector<float> y = dequantize(DType::Q8_0, b);
  ASSERT_EQ(y.size(), 96u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(y[32 * i + 5], float((i + 1) * (i + 1)));
    EXPECT_EQ(y[32 * i + 4], 0.0f);
  }
}

// Every format the DType table calls Supported has a dequantizer: zero bytes are zero weights
// (the helper fills its output with NaN first, so a skipped block shows).
TEST(QuantTest, EverySupportedDTypeDequantizes) {
  int supported = 0;
  for (uint32_t id = 0; id <= 35; ++id) {
    const DTypeInfo *info = lookupDType(id);
    if (!info || info->support != DTypeSupport::Supported)
      continue;
    ++supported;
    std::vector<uint8_t> zeros(2 * info->bytesPerBlock, 0);
    std::vector<float> y = dequantize(info->dtype, zeros);
    ASSERT_EQ(y.size(), 2u * info->blockSize) << info->name;
    for (float v : y)
      ASSERT_EQ(v, 0.0f) << info->name;
  }
  EXPECT_EQ(supported, 13);
}

TEST(QuantTest, CanQuantize) {
  for (uint32_t id = 0; id <= 35; ++id) {
    const DTypeInfo *info = lookupDType(id);
    if (!info)
      continue;
    DType t = info->dtype;
    // Every Supported weight format can be written; nothing else can.
    EXPECT_EQ(canQuantize(t), info->support == DTypeSupport::Supported) << info->name;
  }
}

TEST(QuantTest, QuantizeRowErrors) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(1024);
  absl::Status s = quantizeRow(DType::Q8_K, x.data(), out.data(), 256);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "quantizeRow: cannot quantize to dtype Q8_K");
  s = quantizeRow(DType::Q4_0, x.data(), out.data(), 33);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "quantizeRow: 33 weights are not a whole number of Q4_0 blocks of 32");
  s = quantizeRow(DType::Q6_K, x.data(), out.data(), 128);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(quantizeRow(DType::Q4_0, x.data(), out.data(), 0).ok());
}

// The reference quantizers pick d = max / -8 (Q4_0), d = max / -16 (Q5_0) and d = amax / 127
// (Q8_0), so weights on that grid come back exactly.
TEST(QuantTest, GridValuesRoundTripExactly) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j)
    x[j] = 0.5f * float(j % 16 - 8); // -4 .. 3.5; the largest magnitude is -4, so d = 0.5
  std::vector<uint8_t> b(18);
  ASSERT_TRUE(quantizeRow(DType::Q4_0, x.data(), b.data(), 32).ok());
  EXPECT_EQ(halfToFloat(uint16_t(b[0] | b[1] << 8)), 0.5f);
  EXPECT_EQ(dequantize(DType::Q4_0, b), x);

  std::vector<float> x8(32);
  for (int j = 0; j < 32; ++j)
    x8[j] = float(j * 8 - 127);
  x8[0] = -127.0f; // amax 127: d = 1
  std::vector<uint8_t> b8(34);
  ASSERT_TRUE(quantizeRow(DType::Q8_0, x8.data(), b8.data(), 32).ok());
  EXPECT_EQ(dequantize(DType::Q8_0, b8), x8);

  // A positive largest weight maps to q = 0 with d < 0.
  std::vector<float> x5(32, 0.0f);
  x5[7] = 16.0f;
  x5[8] = -2.0f;
  std::vector<uint8_t> b5(22);
  ASSERT_TRUE(quantizeRow(DType::Q5_0, x5.data(), b5.data(), 32).ok());
  EXPECT_EQ(halfToFloat(uint16_t(b5[0] | b5[1] << 8)), -1.0f);
  EXPECT_EQ(dequantize(DType::Q5_0, b5), x5);
}

TEST(QuantTest, ZeroAndConstantBlocks) {
  DType all[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                 DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                 DType::Q4_K, DType::Q5_K, DType::Q6_K};
  std::vector<float> zeros(512, 0.0f);
  for (DType t : all) {
    std::vector<uint8_t> b(rowBytes(dtypeInfo(t), 512), 0xa5);
    ASSERT_TRUE(quantizeRow(t, zeros.data(), b.data(), 512).ok());
    for (float v : dequantize(t, b))
      ASSERT_EQ(v, 0.0f) << dtypeName(t);
  }
  // An affine format stores a constant block as d = 0, m = the constant.
  std::vector<float> c(64, -0.75f);
  for (DType t : {DType::Q4_1, DType::Q5_1}) {
    std::vector<uint8_t> b(rowBytes(dtypeInfo(t), 64));
    ASSERT_TRUE(quantizeRow(t, c.data(), b.data(), 64).ok());
    EXPECT_EQ(dequantize(t, b), c) << dtypeName(t);
  }
}

struct RoundTripCase {
  DType dtype;
  double maxNmse;      // on N(0,1) weights
  double maxNmseSmall; // on the same weights times 1e-3 (Q6_K's fp16 d is then subnormal)
};

double roundTripNmse(DType dtype, const std::vector<float> &x) {
  std::vector<uint8_t> b(rowBytes(dtypeInfo(dtype), x.size()));
  absl::Status s = quantizeRow(dtype, x.data(), b.data(), x.size());
  EXPECT_TRUE(s.ok()) << s;
  std::vector<float> y = dequantize(dtype, b);
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    ref += double(x[i]) * x[i];
  }
  return err / ref;
}

TEST(QuantTest, RoundTripErrorIsBounded) {
  // Measured on this data (and within 1% on other seeds): F16 4.3e-8, BF16 2.8e-6, Q8_0 2.9e-5,
  // Q6_K 3.14e-4 (4.2e-4 scaled), Q5_1 1.43e-3, Q5_0 1.82e-3, Q4_K 5.10e-3, Q4_1 6.13e-3,
  // Q4_0 7.36e-3, the same as ggml's reference quantizers; Q5_K 1.30e-3 (1.37e-3 scaled), Q3_K
  // 2.32e-2, Q2_K 8.07e-2 (the dequantizers are ggml's, so a mispacked field would show here). The
  // bounds keep about 5% of margin, tight enough that dropping Q6_K's scale search (3.4e-4) fails.
  const RoundTripCase cases[] = {
      {DType::F32, 0.0, 0.0},          {DType::F16, 5e-8, 5e-8},
      {DType::BF16, 3e-6, 3e-6},       {DType::Q8_0, 3.05e-5, 3.15e-5},
      {DType::Q6_K, 3.3e-4, 4.45e-4},  {DType::Q5_1, 1.5e-3, 1.5e-3},
      {DType::Q5_0, 1.92e-3, 1.92e-3}, {DType::Q4_K, 5.35e-3, 5.4e-3},
      {DType::Q4_1, 6.45e-3, 6.45e-3}, {DType::Q4_0, 7.75e-3, 7.75e-3},
      {DType::Q5_K, 1.37e-3, 1.44e-3}, {DType::Q3_K, 2.44e-2, 2.44e-2},
      {DType::Q2_K, 8.5e-2, 8.5e-2},
  };

  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(512 * 256);
  for (float &v : x)
    v = normal(rng);
  // The same data scaled down: the fp16 scales must not lose the small blocks.
  std::vector<float> small(x);
  for (float &v : small)
    v *= 1e-3f;
  for (const RoundTripCase &c : cases) {
    double nmse = roundTripNmse(c.dtype, x);
    double nmseSmall = roundTripNmse(c.dtype, small);
    std::printf("round trip %-5s NMSE %.3e (bound %.2e), x1e-3: %.3e (bound %.2e)\n",
                dtypeName(c.dtype).c_str(), nmse, c.maxNmse, nmseSmall, c.maxNmseSmall);
    EXPECT_LE(nmse, c.maxNmse) << dtypeName(c.dtype);
    EXPECT_LE(nmseSmall, c.maxNmseSmall) << dtypeName(c.dtype);
  }
}

} // namespace
} // namespace sinter
