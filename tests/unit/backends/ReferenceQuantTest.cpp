// ReferenceQuantTest.cpp - quantized_matmul on the reference backend, for every Supported dtype.
//
// Dequantization itself is tested against ggml's layouts in the Quant tests; here the question is
// whether the matrix-vector product walks rows, blocks and columns correctly: hand-built blocks
// with known values, then random valid rows of every format against dequantize-then-dot in
// double.
#include <random>

#include "backends/ReferenceBackend.h"
#include "support/Quant.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using test::dequantizeWeights;
using test::downloadFloats;
using test::isPoison;
using test::poisonedFloats;
using test::randomFloats;
using test::randomWeights;
using test::uploadBytes;
using test::uploadFloats;
using ::testing::ElementsAre;

TEST(ReferenceQuantTest, F32WeightsByHand) {
  ReferenceBackend backend;
  BufferHandle w = uploadFloats(backend, {1, 2, 3, 4, 5, 6}); // 3 rows of 2
  BufferHandle x = uploadFloats(backend, {10, 1});
  BufferHandle out = poisonedFloats(backend, 4);
  ASSERT_EQ(backend.quantizedMatmul(w, x, out, 3, 2, DType::F32), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, 4);
  EXPECT_THAT(std::vector<float>(got.begin(), got.begin() + 3), ElementsAre(12, 34, 56));
  EXPECT_TRUE(isPoison(got[3]));
}

TEST(ReferenceQuantTest, Q8_0BlockByHand) {
  // d = 0.5 (fp16 0x3800), q[i] = i - 16: the weights sum to 0.5 * (496 - 512) = -8.
  std::vector<uint8_t> block = {0x00, 0x38};
  for (int i = 0; i < 32; ++i)
    block.push_back(static_cast<uint8_t>(int8_t(i - 16)));
  ReferenceBackend backend;
  BufferHandle w = uploadBytes(backend, block);
  BufferHandle x = uploadFloats(backend, std::vector<float>(32, 1.0f));
  BufferHandle out = poisonedFloats(backend, 1);
  ASSERT_EQ(backend.quantizedMatmul(w, x, out, 1, 32, DType::Q8_0), absl::OkStatus());
  EXPECT_THAT(downloadFloats(backend, out, 1), ElementsAre(-8.0f));
}

TEST(ReferenceQuantTest, Q4_0UsesGgufNibbleOrder) {
  // d = 1 (fp16 0x3C00); every byte 0x98: low nibbles (weights 0..15) are 8 - 8 = 0, high nibbles
  // (weights 16..31) are 9 - 8 = 1. With x[c] = c the product is 16 + ... + 31 = 376; reading the
  // nibbles as neighbours (yule's order) would weight the odd columns: 1 + 3 + ... + 31 = 256.
  std::vector<uint8_t> block = {0x00, 0x3C};
  block.insert(block.end(), 16, 0x98);
  std::vector<float> x(32);
  for (int c = 0; c < 32; ++c)
    x[c] = float(c);
  ReferenceBackend backend;
  BufferHandle w = uploadBytes(backend, block), hx = uploadFloats(backend, x);
  BufferHandle out = poisonedFloats(backend, 1);
  ASSERT_EQ(backend.quantizedMatmul(w, hx, out, 1, 32, DType::Q4_0), absl::OkStatus());
  EXPECT_THAT(downloadFloats(backend, out, 1), ElementsAre(376.0f));
}

TEST(ReferenceQuantTest, RowsAreBackToBack) {
  // Two Q8_0 rows of two blocks each: row r, block b has d = 1 and every q = 10*r + b + 1.
  std::vector<uint8_t> weights;
  for (int r = 0; r < 2; ++r)
    for (int b = 0; b < 2; ++b) {
      weights.push_back(0x00);
      weights.push_back(0x3C);
      weights.insert(weights.end(), 32, static_cast<uint8_t>(10 * r + b + 1));
    }
  ReferenceBackend backend;
  BufferHandle w = uploadBytes(backend, weights);
  BufferHandle x = uploadFloats(backend, std::vector<float>(64, 1.0f));
  BufferHandle out = poisonedFloats(backend, 2);
  ASSERT_EQ(backend.quantizedMatmul(w, x, out, 2, 64, DType::Q8_0), absl::OkStatus());
  EXPECT_THAT(downloadFloats(backend, out, 2), ElementsAre(32 * (1 + 2), 32 * (11 + 12)));
}

class ReferenceQuantDTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(ReferenceQuantDTypeTest, RandomRowsMatchDequantizeThenDot) {
  DType dtype = GetParam();
  const DTypeInfo &info = dtypeInfo(dtype);
  const uint32_t nRows = 5, nCols = 2 * (info.blockSize > 32 ? info.blockSize : 64);
  std::mt19937 rng(static_cast<uint32_t>(dtype) + 7);
  std::vector<uint8_t> weights = randomWeights(dtype, nRows, nCols, rng);
  std::vector<float> x = randomFloats(nCols, rng);
  std::vector<float> w = dequantizeWeights(dtype, weights, nRows, nCols);
  std::vector<double> ref(nRows);
  for (uint32_t r = 0; r < nRows; ++r)
    for (uint32_t c = 0; c < nCols; ++c)
      ref[r] += double(w[r * nCols + c]) * x[c];

  ReferenceBackend backend;
  BufferHandle hw = uploadBytes(backend, weights), hx = uploadFloats(backend, x);
  BufferHandle out = poisonedFloats(backend, nRows + 1);
  ASSERT_EQ(backend.quantizedMatmul(hw, hx, out, nRows, nCols, dtype), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, nRows + 1);
  EXPECT_TRUE(isPoison(got.back())) << "row past n_rows was written";
  got.pop_back();
  test::expectNmse(got, ref);
  // The weights are not all zero, so the comparison above is not vacuous.
  double norm = 0.0;
  for (double v : ref)
    norm += v * v;
  EXPECT_GT(norm, 0.0);
}

std::vector<DType> supportedDTypes() {
  std::vector<DType> out;
  for (uint32_t id = 0; id < 64; ++id)
    if (const DTypeInfo *info = lookupDType(id); info && info->support == DTypeSupport::Supported)
      out.push_back(info->dtype);
  return out;
}

INSTANTIATE_TEST_SUITE_P(EverySupported, ReferenceQuantDTypeTest,
                         ::testing::ValuesIn(supportedDTypes()),
                         [](const ::testing::TestParamInfo<DType> &info) {
                           return dtypeName(info.param);
                         });

TEST(ReferenceQuantTest, EverySupportedDTypeIsCovered) {
  // SEMANTICS.md's "must be supported" column: 13 formats.
  EXPECT_EQ(supportedDTypes().size(), 13u);
}

} // namespace
} // namespace sinter
