// LargeBufferTest.cpp - every op on buffers larger than a device binds, on every backend kind.
//
// Lavapipe binds at most 128 MiB of a buffer to a kernel (maxStorageBufferRange); real GPUs have
// such limits too. allocate accepts larger buffers, so every op must compute on them: a dispatch
// that touches only the first bindable bytes binds just those; one that reaches past them runs
// on the host; copies use vkCmdCopyBuffer. Each case puts one 144 MiB buffer in an op, touched
// either inside its first 128 MiB or past them, and compares every byte of every buffer with
// the reference. Only the Vulkan kinds have a binding limit: the others' address arithmetic is
// 64-bit (ExtremeArgsTest), and 144 MiB cases cost seconds each.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/ReferenceBackend.h"
#include "tests/support/BackendKinds.h"
#include "tests/support/CallOp.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"
#include "tools/model/Decoder.h"
#include "tools/model/Synthetic.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBig = 144 * kMiB; ///< past lavapipe's 128 MiB binding limit
constexpr uint64_t kBigFloats = kBig / 4;
constexpr uint64_t kLimitFloats = 128 * kMiB / 4;

struct LargeCase {
  const char *name;
  OpCall op;
  std::vector<uint64_t> sizes; ///< bytes of buffer j, bound as BufferHandle{j + 1}
  bool reachesPastLimit;       ///< a Vulkan kind with a 128 MiB limit must leave the device
};

BufferHandle slot(uint64_t j) { return BufferHandle{j + 1}; }

const std::vector<LargeCase> &largeCases() {
  BufferHandle b0 = slot(0), b1 = slot(1), b2 = slot(2);
  const uint32_t n = kBigFloats; // a whole big buffer of floats
  // attention over a cache of 4 heads of 64 per position, its rows past the limit (or before).
  const uint32_t stride = 256, seq = 64, lastRows = kBigFloats / stride - seq;
  static const auto *all = new std::vector<LargeCase>{
      {"matmul_a", ops::matmul(b0, b1, b2, 4, 4, kBigFloats / 4), {kBig, kBig, 64}, true},
      {"softmax", ops::softmax(b0, b1, n), {kBig, kBig}, true},
      {"rms_norm", ops::rmsNorm(b0, b1, b2, n, 1e-5f), {kBig, kBig, kBig}, true},
      {"rope", ops::rope(b0, b1, 7, 64, 10000.0f, n / 64, 2), {kBig, 512}, true},
      {"silu", ops::silu(b0, b1, n), {kBig, kBig}, true},
      {"element_mul", ops::elementMul(b0, b1, b2, n), {kBig, kBig, kBig}, true},
      {"add", ops::add(b0, b1, b2, n), {kBig, kBig, kBig}, true},
      // Small ops on big buffers: only their first bytes are bound.
      {"add_in_prefix", ops::add(b0, b1, b2, 1024), {kBig, 4096, kBig}, false},
      {"copy_buffer", ops::copyBuffer(b0, b1, kBig), {kBig, kBig}, false},
      {"copy_buffer_offset_tail",
       ops::copyBufferOffset(b0, b1, kBig - 4096, 12, 4000),
       {kBig, 8192},
       false},
      {"attn_score_tail",
       ops::attnScore(b0, b1, b2, 64, seq, 0, lastRows * stride + 128, stride),
       {256, kBig, seq * 4},
       true},
      {"attn_score_prefix",
       ops::attnScore(b0, b1, b2, 64, seq, 0, 64, stride),
       {256, kBig, seq * 4},
       false},
      {"attn_value_tail",
       ops::attnValue(b0, b1, b2, 64, seq, lastRows * stride + 192, stride, 0),
       {seq * 4, kBig, 256},
       true},
      {"attn_value_within_limit",
       ops::attnValue(b0, b1, b2, 64, seq, (kLimitFloats / stride - seq) * stride, stride, 64),
       {seq * 4, kBig, 512},
       false},
      // The Q8_0 32000 x 4096 classifier: 139 MB of weights.
      {"quantized_matmul_q8_0",
       ops::quantizedMatmul(b0, b1, b2, 32000, 4096, DType::Q8_0),
       {32000ull * 4096 / 32 * 34, 4096 * 4, 32000 * 4},
       true},
  };
  return *all;
}

// Bytes of buffer j: floats in [-1, 1) from a cheap generator (most buffers are 144 MiB), or
// valid Q8_0 blocks for a product's weights.
std::vector<uint8_t> initialBytes(const OpCall &op, uint64_t size, uint64_t j) {
  if (op.kind == OpKind::QuantizedMatmul && j == 0) {
    std::mt19937 rng(9);
    return test::randomWeights(op.dtype, op.ints[0], op.ints[1], rng);
  }
  std::vector<uint8_t> bytes(size);
  uint64_t state = 0x9E3779B97F4A7C15ull * (j + 1);
  for (uint64_t i = 0; i + 4 <= size; i += 4) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    float f = float(int32_t(state >> 40) - (1 << 23)) / float(1 << 23);
    std::memcpy(&bytes[i], &f, 4);
  }
  return bytes;
}

class LargeBufferTest : public ::testing::TestWithParam<std::tuple<int, int>> {
protected:
  void TearDown() override {
    backend_.reset();
    kinds_.expectNoValidationMessages();
  }
  test::BackendKindFixture kinds_;
  std::unique_ptr<ComputeBackend> backend_;
};

TEST_P(LargeBufferTest, ComputesAsTheReference) {
  const test::BackendKind &kind = test::backendKinds()[std::get<0>(GetParam())];
  const LargeCase &c = largeCases()[std::get<1>(GetParam())];
  backend_ = kinds_.make(kind);
  if (!kinds_.skipped().empty())
    GTEST_SKIP() << "no Vulkan device on this machine: " << kinds_.skipped();
  ASSERT_TRUE(backend_);
  ComputeBackend &backend = *backend_;
  ReferenceBackend reference;
  const int numBuffers = opInfo(c.op.kind).numBuffers;
  std::vector<BufferHandle> mine, theirs;
  for (int j = 0; j < numBuffers; ++j) {
    std::vector<uint8_t> bytes = initialBytes(c.op, c.sizes[j], j);
    mine.push_back(test::uploadBytes(backend, bytes));
    theirs.push_back(test::uploadBytes(reference, bytes));
  }
  ASSERT_TRUE(test::callOp(reference, test::bindSlots(c.op, theirs)).ok());
  // An unrelated op recorded in the same flush must run too.
  std::vector<float> small = {1, 2, 3, 4};
  BufferHandle other = test::uploadFloats(backend, small), otherOut = *backend.allocate(16);
  ASSERT_TRUE(backend.add(other, other, otherOut, 4).ok());
  absl::Status called = test::callOp(backend, test::bindSlots(c.op, mine));
  ASSERT_TRUE(called.ok()) << called;
  absl::Status synced = backend.synchronize();
  ASSERT_TRUE(synced.ok()) << synced;
  EXPECT_EQ(test::downloadFloats(backend, otherOut, 4), (std::vector<float>{2, 4, 6, 8}));
  const double tolerance = c.op.kind == OpKind::QuantizedMatmul
                               ? test::kQuantizedActivationTolerance
                               : test::kF32Tolerance;
  for (int j = 0; j < numBuffers; ++j) {
    std::vector<uint8_t> out = test::downloadBytes(backend, mine[j], c.sizes[j]);
    std::vector<uint8_t> ref = test::downloadBytes(reference, theirs[j], c.sizes[j]);
    if (out == ref)
      continue;
    std::string what = absl::StrCat(c.name, ", buffer ", opInfo(c.op.kind).bufferNames[j]);
    ASSERT_FALSE(c.op.kind == OpKind::CopyBuffer || c.op.kind == OpKind::CopyBufferOffset) << what;
    EXPECT_TRUE(test::nmseWithin<float>(test::bytesFloats(out), test::bytesFloats(ref), tolerance))
        << what;
  }
  // Where the device binds less than the case touches, the launch ran on the host.
  if (kind.options.kind == "vulkan" && kinds_.device() &&
      kinds_.device()->caps().maxStorageBufferRange <= 128 * kMiB) {
    uint64_t hostRuns = kinds_.vulkanStats()->get().hostRuns;
    if (c.reachesPastLimit)
      EXPECT_GT(hostRuns, 0u) << c.name;
    else
      EXPECT_EQ(hostRuns, 0u) << c.name << " fits the binding limit: it should stay on the device";
  }
}

// The indices of the Vulkan kinds, fused and unfused (eager runs the unfused kernels).
std::vector<int> vulkanKinds() {
  std::vector<int> v;
  for (int i = 0; i < static_cast<int>(test::backendKinds().size()); ++i)
    if (test::backendKinds()[i].options.kind == "vulkan" && !test::backendKinds()[i].options.eager)
      v.push_back(i);
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    EveryOp, LargeBufferTest,
    ::testing::Combine(::testing::ValuesIn(vulkanKinds()),
                       ::testing::Range(0, static_cast<int>(largeCases().size()))),
    [](const ::testing::TestParamInfo<std::tuple<int, int>> &info) {
      return absl::StrCat(test::backendKinds()[std::get<0>(info.param)].name, "_",
                          largeCases()[std::get<1>(info.param)].name);
    });

// A legal llama2.c-shaped model whose tied F32 classifier (the token embedding, 32000 x 1280)
// is 164 MB: its decode on Vulkan gives the reference's tokens and logits.
class TiedClassifierDecode : public ::testing::TestWithParam<int> {
protected:
  void TearDown() override { kinds_.expectNoValidationMessages(); }
  test::BackendKindFixture kinds_;
};

std::vector<std::vector<float>> decode(ComputeBackend &backend, const model::ModelWeights &weights,
                                       int steps) {
  std::vector<std::vector<float>> all;
  absl::StatusOr<std::unique_ptr<model::Decoder>> decoder =
      model::Decoder::create(backend, weights);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (!decoder.ok())
    return all;
  uint32_t token = 1;
  for (int pos = 0; pos < steps; ++pos) {
    absl::StatusOr<std::vector<float>> logits = (*decoder)->step(token, pos);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok())
      return all;
    token = uint32_t(std::max_element(logits->begin(), logits->end()) - logits->begin());
    all.push_back(std::move(*logits));
  }
  return all;
}

TEST_P(TiedClassifierDecode, DecodesAsTheReference) {
  // dim, hidden, layers, heads, kv heads, vocab, seq, rope base, eps
  const model::ModelConfig config{1280, 256, 1, 10, 5, 32000, 16, 10000.0f, 1e-5f};
  model::SyntheticOptions options;
  options.withVocab = false;
  absl::StatusOr<model::ModelWeights> weights =
      model::generateSynthetic(config, /*sharedClassifier=*/true, options);
  ASSERT_TRUE(weights.ok()) << weights.status();
  ASSERT_GT(uint64_t(config.vocabSize) * config.dim * 4, 128 * kMiB);
  std::unique_ptr<ComputeBackend> backend = kinds_.make(test::backendKinds()[GetParam()]);
  if (!kinds_.skipped().empty())
    GTEST_SKIP() << "no Vulkan device on this machine: " << kinds_.skipped();
  ASSERT_TRUE(backend);
  ReferenceBackend reference;
  constexpr int kSteps = 3;
  std::vector<std::vector<float>> got = decode(*backend, *weights, kSteps);
  std::vector<std::vector<float>> want = decode(reference, *weights, kSteps);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(test::nmseWithin<float>(got[i], want[i], test::kF32Tolerance)) << "token " << i;
  if (kinds_.device()->caps().maxStorageBufferRange <= 128 * kMiB)
    EXPECT_GE(kinds_.vulkanStats()->get().hostRuns, uint64_t(kSteps))
        << "the classifier, each token";
}

INSTANTIATE_TEST_SUITE_P(VulkanKinds, TiedClassifierDecode, ::testing::ValuesIn(vulkanKinds()),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(test::backendKinds()[info.param].name);
                         });

} // namespace
} // namespace sinter
