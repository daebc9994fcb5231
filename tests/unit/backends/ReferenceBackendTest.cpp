// ReferenceBackendTest.cpp - buffers, element-wise ops, matmul, softmax, rms_norm and copies.
//
// Each op gets a case worked out by hand, a random case against a double-precision formula
// written here, a check that it touches only the elements it names (poisoned outputs) and, where
// SEMANTICS.md allows it, the in-place form. Attention ops and quantized_matmul have their own
// files.
#include <cmath>
#include <random>
#include <thread>

#include "backends/ReferenceBackend.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using test::downloadBytes;
using test::downloadFloats;
using test::expectNmse;
using test::isPoison;
using test::poisonedFloats;
using test::randomFloats;
using test::uploadBytes;
using test::uploadFloats;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

class ReferenceBackendTest : public ::testing::Test {
protected:
  ReferenceBackend backend;
  std::mt19937 rng{1234};
};

TEST_F(ReferenceBackendTest, DescribesItself) {
  EXPECT_EQ(backend.name(), "reference");
  DeviceInfo info = backend.deviceInfo();
  EXPECT_EQ(info.name, "host (reference)");
  EXPECT_EQ(info.kind, BackendKind::Cpu);
  EXPECT_GT(info.memoryBytes, 0u);
  EXPECT_EQ(info.computeUnits, std::thread::hardware_concurrency());
  EXPECT_STREQ(backendKindName(info.kind), "Cpu");
  EXPECT_STREQ(backendKindName(BackendKind::Vulkan), "Vulkan");
}

TEST_F(ReferenceBackendTest, MemoryLimitIsReported) {
  BackendOptions options;
  options.memoryLimitBytes = 4096;
  EXPECT_EQ(ReferenceBackend(options).deviceInfo().memoryBytes, 4096u);
}

TEST_F(ReferenceBackendTest, AllocateGivesZeroedBuffersWithFreshIds) {
  absl::StatusOr<BufferHandle> a = backend.allocate(64);
  absl::StatusOr<BufferHandle> b = backend.allocate(0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->id, 0u);
  EXPECT_GT(b->id, a->id);
  EXPECT_EQ(downloadBytes(backend, *a, 64), std::vector<uint8_t>(64, 0));
  EXPECT_EQ(backend.free(*a), absl::OkStatus());
  EXPECT_EQ(backend.free(*b), absl::OkStatus());
  absl::StatusOr<BufferHandle> c = backend.allocate(64);
  ASSERT_TRUE(c.ok());
  EXPECT_GT(c->id, b->id) << "ids are never reused";
}

TEST_F(ReferenceBackendTest, HostTransfersUseOffsetZeroAndPartialSlices) {
  BufferHandle h = uploadBytes(backend, {1, 2, 3, 4, 5, 6});
  std::vector<uint8_t> two = {9, 8};
  ASSERT_EQ(backend.copyToDevice(two, h), absl::OkStatus());
  EXPECT_THAT(downloadBytes(backend, h, 6), ElementsAre(9, 8, 3, 4, 5, 6));
  EXPECT_THAT(downloadBytes(backend, h, 3), ElementsAre(9, 8, 3));
  EXPECT_EQ(backend.synchronize(), absl::OkStatus());
}

TEST_F(ReferenceBackendTest, MatmulByHand) {
  BufferHandle a = uploadFloats(backend, {1, 2, 3, 4, 5, 6});    // 2x3
  BufferHandle b = uploadFloats(backend, {7, 8, 9, 10, 11, 12}); // 3x2
  BufferHandle out = poisonedFloats(backend, 5);
  ASSERT_EQ(backend.matmul(a, b, out, 2, 2, 3), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, 5);
  EXPECT_THAT(std::vector<float>(got.begin(), got.begin() + 4), ElementsAre(58, 64, 139, 154));
  EXPECT_TRUE(isPoison(got[4])) << "element past m*n was written";
}

TEST_F(ReferenceBackendTest, MatmulRandomMatchesDouble) {
  const uint32_t m = 5, n = 7, k = 33;
  std::vector<float> a = randomFloats(m * k, rng), b = randomFloats(k * n, rng);
  BufferHandle ha = uploadFloats(backend, a), hb = uploadFloats(backend, b);
  BufferHandle out = poisonedFloats(backend, m * n);
  ASSERT_EQ(backend.matmul(ha, hb, out, m, n, k), absl::OkStatus());
  std::vector<double> ref(m * n);
  for (uint32_t i = 0; i < m; ++i)
    for (uint32_t j = 0; j < n; ++j)
      for (uint32_t p = 0; p < k; ++p)
        ref[i * n + j] += double(a[i * k + p]) * b[p * n + j];
  expectNmse(downloadFloats(backend, out, m * n), ref);
}

TEST_F(ReferenceBackendTest, MatmulWithZeroKWritesZeros) {
  BufferHandle a = uploadFloats(backend, {}), b = uploadFloats(backend, {});
  BufferHandle out = poisonedFloats(backend, 6);
  ASSERT_EQ(backend.matmul(a, b, out, 2, 3, 0), absl::OkStatus());
  EXPECT_THAT(downloadFloats(backend, out, 6), ElementsAre(0, 0, 0, 0, 0, 0));
}

TEST_F(ReferenceBackendTest, SoftmaxByHand) {
  BufferHandle in = uploadFloats(backend, {0.0f, std::log(3.0f), 1000.0f, 1000.0f});
  BufferHandle out = poisonedFloats(backend, 3);
  ASSERT_EQ(backend.softmax(in, out, 2), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, 3);
  EXPECT_NEAR(got[0], 0.25f, 1e-7);
  EXPECT_NEAR(got[1], 0.75f, 1e-7);
  EXPECT_TRUE(isPoison(got[2]));
  // Large equal inputs: subtracting the max keeps exp finite.
  BufferHandle big = uploadFloats(backend, {1000.0f, 1000.0f});
  ASSERT_EQ(backend.softmax(big, big, 2), absl::OkStatus());
  EXPECT_THAT(downloadFloats(backend, big, 2), ElementsAre(0.5f, 0.5f));
}

TEST_F(ReferenceBackendTest, SoftmaxRandomMatchesDoubleAndInPlaceAgrees) {
  const uint32_t size = 37;
  std::vector<float> x = randomFloats(size, rng, -8.0f, 8.0f);
  double maxValue = -INFINITY, sum = 0.0;
  for (float v : x)
    maxValue = std::max(maxValue, double(v));
  for (float v : x)
    sum += std::exp(v - maxValue);
  std::vector<double> ref(size);
  for (uint32_t i = 0; i < size; ++i)
    ref[i] = std::exp(x[i] - maxValue) / sum;
  BufferHandle in = uploadFloats(backend, x), out = poisonedFloats(backend, size);
  ASSERT_EQ(backend.softmax(in, out, size), absl::OkStatus());
  expectNmse(downloadFloats(backend, out, size), ref);
  ASSERT_EQ(backend.softmax(in, in, size), absl::OkStatus());
  EXPECT_EQ(downloadFloats(backend, in, size), downloadFloats(backend, out, size));
}

TEST_F(ReferenceBackendTest, SoftmaxOfSizeZeroChangesNothing) {
  BufferHandle in = uploadFloats(backend, {1, 2}), out = poisonedFloats(backend, 2);
  ASSERT_EQ(backend.softmax(in, out, 0), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, 2);
  EXPECT_TRUE(isPoison(got[0]) && isPoison(got[1]));
}

TEST_F(ReferenceBackendTest, RmsNormByHandPutsEpsInsideTheRoot) {
  // mean(in^2) = 1, eps = 3: the scale is 1/sqrt(4) = 0.5.
  BufferHandle in = uploadFloats(backend, {1, -1, 1, -1, 100});
  BufferHandle w = uploadFloats(backend, {1, 2, 3, 4});
  BufferHandle out = poisonedFloats(backend, 5);
  ASSERT_EQ(backend.rmsNorm(in, w, out, 4, 3.0f), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, 5);
  EXPECT_THAT(std::vector<float>(got.begin(), got.begin() + 4), ElementsAre(0.5, -1, 1.5, -2));
  EXPECT_TRUE(isPoison(got[4]));
}

TEST_F(ReferenceBackendTest, RmsNormRandomMatchesDoubleAndInPlaceAgrees) {
  const uint32_t size = 100;
  const float eps = 1e-5f;
  std::vector<float> x = randomFloats(size, rng), w = randomFloats(size, rng, 0.5f, 1.5f);
  double sumSquares = 0.0;
  for (float v : x)
    sumSquares += double(v) * v;
  double scale = 1.0 / std::sqrt(sumSquares / size + double(eps));
  std::vector<double> ref(size);
  for (uint32_t i = 0; i < size; ++i)
    ref[i] = double(x[i]) * w[i] * scale;
  BufferHandle in = uploadFloats(backend, x), hw = uploadFloats(backend, w);
  BufferHandle out = poisonedFloats(backend, size);
  ASSERT_EQ(backend.rmsNorm(in, hw, out, size, eps), absl::OkStatus());
  expectNmse(downloadFloats(backend, out, size), ref);
  ASSERT_EQ(backend.rmsNorm(in, hw, in, size, eps), absl::OkStatus());
  EXPECT_EQ(downloadFloats(backend, in, size), downloadFloats(backend, out, size));
  // The weight may be the output too.
  BufferHandle in2 = uploadFloats(backend, x);
  ASSERT_EQ(backend.rmsNorm(in2, hw, hw, size, eps), absl::OkStatus());
  EXPECT_EQ(downloadFloats(backend, hw, size), downloadFloats(backend, out, size));
}

TEST_F(ReferenceBackendTest, SiluByHand) {
  BufferHandle in = uploadFloats(backend, {0.0f, 1.0f, -1.0f, 30.0f});
  BufferHandle out = poisonedFloats(backend, 5);
  ASSERT_EQ(backend.silu(in, out, 4), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, 5);
  // silu(1) = 1/(1+e^-1) = 0.7310585786; silu(-1) = -1/(1+e) = -0.2689414214.
  EXPECT_THAT(std::vector<float>(got.begin(), got.begin() + 4),
              Pointwise(FloatNear(1e-7f), {0.0f, 0.7310585786f, -0.2689414214f, 30.0f}));
  EXPECT_TRUE(isPoison(got[4]));
}

TEST_F(ReferenceBackendTest, SiluRandomMatchesDoubleAndInPlaceAgrees) {
  const uint32_t size = 64;
  std::vector<float> x = randomFloats(size, rng, -10.0f, 10.0f);
  std::vector<double> ref(size);
  for (uint32_t i = 0; i < size; ++i)
    ref[i] = x[i] / (1.0 + std::exp(-double(x[i])));
  BufferHandle in = uploadFloats(backend, x), out = poisonedFloats(backend, size);
  ASSERT_EQ(backend.silu(in, out, size), absl::OkStatus());
  expectNmse(downloadFloats(backend, out, size), ref);
  ASSERT_EQ(backend.silu(in, in, size), absl::OkStatus());
  EXPECT_EQ(downloadFloats(backend, in, size), downloadFloats(backend, out, size));
}

TEST_F(ReferenceBackendTest, ElementMulAndAddByHand) {
  BufferHandle a = uploadFloats(backend, {1, 2, 3}), b = uploadFloats(backend, {4, 5, 6});
  BufferHandle prod = poisonedFloats(backend, 4), sum = poisonedFloats(backend, 4);
  ASSERT_EQ(backend.elementMul(a, b, prod, 3), absl::OkStatus());
  ASSERT_EQ(backend.add(a, b, sum, 3), absl::OkStatus());
  std::vector<float> p = downloadFloats(backend, prod, 4), s = downloadFloats(backend, sum, 4);
  EXPECT_THAT(std::vector<float>(p.begin(), p.begin() + 3), ElementsAre(4, 10, 18));
  EXPECT_THAT(std::vector<float>(s.begin(), s.begin() + 3), ElementsAre(5, 7, 9));
  EXPECT_TRUE(isPoison(p[3]) && isPoison(s[3]));
}

TEST_F(ReferenceBackendTest, ElementMulAndAddRandomInEveryAliasing) {
  const uint32_t size = 50;
  std::vector<float> a = randomFloats(size, rng), b = randomFloats(size, rng);
  std::vector<double> prod(size), sum(size), square(size);
  for (uint32_t i = 0; i < size; ++i) {
    prod[i] = double(a[i]) * b[i];
    sum[i] = double(a[i]) + b[i];
    square[i] = double(a[i]) * a[i];
  }
  // out separate, out == a, out == b, and a == b == out.
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE(form);
    BufferHandle ha = uploadFloats(backend, a), hb = uploadFloats(backend, b);
    BufferHandle hm = form == 0 ? poisonedFloats(backend, size) : form == 2 ? hb : ha;
    BufferHandle hbm = form == 3 ? ha : hb;
    ASSERT_EQ(backend.elementMul(ha, hbm, hm, size), absl::OkStatus());
    expectNmse(downloadFloats(backend, hm, size), form == 3 ? square : prod);
    BufferHandle sa = uploadFloats(backend, a), sb = uploadFloats(backend, b);
    BufferHandle hs = form == 0 ? poisonedFloats(backend, size) : form == 2 ? sb : sa;
    ASSERT_EQ(backend.add(sa, form == 3 ? sa : sb, hs, size), absl::OkStatus());
    std::vector<double> doubled(size);
    for (uint32_t i = 0; i < size; ++i)
      doubled[i] = 2.0 * a[i];
    expectNmse(downloadFloats(backend, hs, size), form == 3 ? doubled : sum);
  }
}

TEST_F(ReferenceBackendTest, CopyBufferCopiesBytesFromOffsetZero) {
  BufferHandle src = uploadBytes(backend, {1, 2, 3, 4, 5, 6, 7});
  BufferHandle dst = uploadBytes(backend, {9, 9, 9, 9, 9, 9, 9, 9, 9});
  ASSERT_EQ(backend.copyBuffer(src, dst, 5), absl::OkStatus());
  EXPECT_THAT(downloadBytes(backend, dst, 9), ElementsAre(1, 2, 3, 4, 5, 9, 9, 9, 9));
  ASSERT_EQ(backend.copyBuffer(src, src, 7), absl::OkStatus()) << "a copy onto itself";
  EXPECT_THAT(downloadBytes(backend, src, 7), ElementsAre(1, 2, 3, 4, 5, 6, 7));
}

TEST_F(ReferenceBackendTest, CopyBufferOffsetCopiesTheNamedBytes) {
  BufferHandle src = uploadBytes(backend, {1, 2, 3, 4, 5, 6, 7});
  BufferHandle dst = uploadBytes(backend, {0, 0, 0, 0, 0, 0, 0, 0});
  ASSERT_EQ(backend.copyBufferOffset(src, dst, 1, 5, 3), absl::OkStatus());
  EXPECT_THAT(downloadBytes(backend, dst, 8), ElementsAre(0, 0, 0, 0, 0, 2, 3, 4));
  ASSERT_EQ(backend.copyBufferOffset(src, dst, 7, 8, 0), absl::OkStatus()) << "empty at the end";
}

TEST_F(ReferenceBackendTest, CopyBufferOffsetOverlapActsAsMemmoveBothWays) {
  std::vector<uint8_t> start = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  BufferHandle forward = uploadBytes(backend, start);
  ASSERT_EQ(backend.copyBufferOffset(forward, forward, 0, 2, 6), absl::OkStatus());
  EXPECT_THAT(downloadBytes(backend, forward, 10), ElementsAre(0, 1, 0, 1, 2, 3, 4, 5, 8, 9));
  BufferHandle backward = uploadBytes(backend, start);
  ASSERT_EQ(backend.copyBufferOffset(backward, backward, 2, 0, 6), absl::OkStatus());
  EXPECT_THAT(downloadBytes(backend, backward, 10), ElementsAre(2, 3, 4, 5, 6, 7, 6, 7, 8, 9));
}

TEST_F(ReferenceBackendTest, FreedBufferIsGoneButOthersStay) {
  BufferHandle a = uploadFloats(backend, {1, 2}), b = uploadFloats(backend, {3, 4});
  ASSERT_EQ(backend.free(a), absl::OkStatus());
  EXPECT_EQ(backend.free(a).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(downloadFloats(backend, b, 2), ElementsAre(3, 4));
}

} // namespace
} // namespace sinter
