// VulkanStories260KTest.cpp - stories260K on the `vulkan` kind decodes the pinned golden.
//
// The golden is established in tests/e2e/Stories260KTest.cpp (the engine on the reference backend
// and an independent llama2.c forward pass agree on it). Here the same 40 greedy tokens must come
// out of the SPIR-V kernels, fused and unfused (and fused with command-buffer replay off), under
// the validation layer with zero messages and one queue submission per flush. Skips when the model
// (../shared), the SPIR-V generator or a Vulkan device is missing.
#include <cstdlib>
#include <string>
#include <vector>

#include "VulkanTestUtil.h"
#include "backends/VulkanBackend.h"
#include "runtime/LazyBackend.h"
#include "tools/model/Decoder.h"
#include "tools/model/Llama2cLoader.h"
#include "tools/model/Sampler.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

const std::vector<uint32_t> kGolden = {461, 461, 401, 401, 401, 461, 378, 455, 473, 456,
                                       435, 299, 362, 409, 283, 264, 283, 452, 288, 13,
                                       431, 431, 431, 431, 431, 431, 431, 431, 431, 431,
                                       431, 431, 431, 293, 430, 417, 363, 416, 315, 342};

std::string modelPath() {
  const char *env = std::getenv("SINTER_SHARED_DIR");
  return std::string(env ? env : SINTER_SHARED_DIR) + "/models/stories260K.bin";
}

// What both tests need: the model, the SPIR-V generator and a Vulkan device (each missing one
// skips, saying which), a `vulkan` backend on that device, and the greedy decode of the golden's
// length from token 1 (the decoder made first: its weight uploads are not the decode's).
class Stories260KOnVulkan : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveSpirvCodegen())
      GTEST_SKIP() << "the SPIR-V code generator is not in this build";
    auto weights = model::loadLlama2c(modelPath());
    if (!weights.ok())
      GTEST_SKIP() << "stories260K.bin not loadable at " << modelPath()
                   << " (needs ../shared): " << weights.status();
    weights_ = std::move(*weights);
    device_ = runtime::vulkan::test::makeDevice();
    if (!device_)
      GTEST_SKIP() << "no Vulkan device on this machine";
  }

  /// A `vulkan` backend on the test's device with these options (device, stats sink and quiet
  /// fallbacks filled in); null after a failed assertion.
  std::unique_ptr<ComputeBackend> makeBackend(bool fusion, VulkanBackendOptions vulkan) {
    BackendOptions options;
    options.kind = "vulkan";
    options.fusion = fusion;
    vulkan.device = device_;
    vulkan.stats = stats_;
    vulkan.logFallbacks = false;
    auto backend = createVulkanBackend(options, vulkan);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  /// The greedy tokens `decoder` makes after token 1, as many as the golden has.
  static absl::StatusOr<std::vector<uint32_t>> decode(model::Decoder &decoder) {
    model::Sampler greedy({});
    const uint32_t prompt[] = {1};
    return model::generate(decoder, prompt, uint32_t(kGolden.size()), greedy, 1u);
  }

  model::ModelWeights weights_;
  std::shared_ptr<runtime::vulkan::VulkanDevice> device_;
  std::shared_ptr<runtime::vulkan::VulkanStatsSink> stats_ =
      std::make_shared<runtime::vulkan::VulkanStatsSink>();
};

struct Mode {
  bool fusion;
  bool replay;
};

class VulkanStories260K : public Stories260KOnVulkan, public ::testing::WithParamInterface<Mode> {};

TEST_P(VulkanStories260K, DecodesTheGolden) {
  const Mode mode = GetParam();
  VulkanBackendOptions vulkan;
  vulkan.replay = mode.replay;
  std::unique_ptr<ComputeBackend> backend = makeBackend(mode.fusion, vulkan);
  ASSERT_TRUE(backend);
  auto decoder = model::Decoder::create(*backend, weights_);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  const uint64_t runsBefore = stats_->get().runs;
  const uint64_t submitsBefore = device_->queueSubmissions();
  auto tokens = decode(**decoder);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, kGolden);
  runtime::vulkan::VulkanCompilerStats s = stats_->get();
  // One queue submission a token, the logits' read-back included (it ends the flush's commands).
  EXPECT_EQ(device_->queueSubmissions() - submitsBefore, s.runs - runsBefore);
  EXPECT_EQ(s.runs - runsBefore, kGolden.size()) << "a flush a token";
  EXPECT_GE(s.runs, kGolden.size());
  EXPECT_EQ(s.submissions, s.runs) << "one submission per flush";
  EXPECT_LE(s.plans, 8u) << "a decode loop compiles a few plans, then replays them";
  // Golden launch counts per token: unfused, every op but the copies (192); fused, per layer
  // rms_norm+Q+rope, K+rope+K-cache write and V+V-cache write stacked as one launch, attention
  // over the heads, wo+add, rms_norm+up, rms_norm+gate+swiglu, down+add (6, all fused), and the
  // final rms_norm+classifier: 5 * 6 + 1 = 31. Barriers: one before each launch (gate's swiglu
  // reads up): 5 * 6 + 1 = 31. From the
  // second token on the position and the token are plan parameters, and the copies that take
  // them run as the generated copy kernel rather than vkCmdCopyBuffer, so that the command
  // buffer replays unchanged: the embedding row (fused: the cache writes are epilogues), and
  // unfused also K and V into the caches (1 + 5 * 2).
  const uint64_t paramCopies = mode.replay ? (mode.fusion ? 1 : 11) * (s.runs - 1) : 0;
  if (mode.fusion) {
    EXPECT_EQ(s.fusedFallbacks, 0u);
    EXPECT_EQ(s.dispatches, 31u * s.runs + paramCopies);
    EXPECT_EQ(s.fusedDispatches, 31u * s.runs);
    EXPECT_EQ(s.barriers, 31u * s.runs);
  } else {
    EXPECT_EQ(s.dispatches, 192u * s.runs + paramCopies);
    EXPECT_EQ(s.fusedDispatches, 0u);
  }
  EXPECT_EQ(s.recordings + s.replays, s.submissions);
  if (mode.replay) {
    // Every flush after the first of each plan (and the one that zeroes attention's scratch)
    // submits the command buffer its plan recorded before, whatever the position and token.
    EXPECT_LE(s.recordings, 2 * s.plans) << s.replays << " replays";
    EXPECT_GE(s.replays, s.runs - 2 * s.plans);
  } else {
    EXPECT_EQ(s.replays, 0u);
  }
  runtime::vulkan::test::expectNoValidationMessages(*device_);
}

// Overlapped flushes (VulkanBackendOptions::overlapCalls): every residual add that leaves 30
// calls pending flushes them without waiting, so a token is several submissions that the device
// runs while the engine records the rest. The same golden comes out, the pieces cut between
// fused kernels (31 launches a token, as one flush makes), and the pieces do not wait.
using VulkanStories260KOverlap = Stories260KOnVulkan;

TEST_F(VulkanStories260KOverlap, OverlappedFlushesDecodeTheGolden) {
  VulkanBackendOptions vulkan;
  vulkan.overlapCalls = 30;
  vulkan.overlapGrowth = 1; // every piece 30 calls or more: a piece a layer
  std::unique_ptr<ComputeBackend> backend = makeBackend(/*fusion=*/true, vulkan);
  ASSERT_TRUE(backend);
  auto &lazy = dynamic_cast<runtime::LazyBackend &>(*backend);
  auto decoder = model::Decoder::create(*backend, weights_);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  const uint64_t runsBefore = stats_->get().runs;
  const uint64_t noWaitBefore = device_->noWaitSubmissions();
  const uint64_t overlapsBefore = lazy.stats().overlapFlushes;
  auto tokens = decode(**decoder);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, kGolden);
  runtime::vulkan::VulkanCompilerStats s = stats_->get();
  const uint64_t overlaps = lazy.stats().overlapFlushes - overlapsBefore;
  // stories260K's layers are about 40 calls: a piece every layer, the last one with the logits.
  EXPECT_EQ(overlaps, 5u * kGolden.size());
  EXPECT_EQ(s.runs - runsBefore, overlaps + kGolden.size());
  // All but the first two tokens' pieces (compiled, the second time with the position as a
  // parameter; a new plan zeroes attention's scratch first) run without a wait.
  EXPECT_GE(device_->noWaitSubmissions() - noWaitBefore, overlaps - 10u);
  EXPECT_EQ(s.fusedFallbacks, 0u);
  EXPECT_EQ(s.fusedDispatches, 31u * kGolden.size()) << "the pieces cut between fused kernels";
  EXPECT_LE(s.plans, 16u) << "a plan a piece, then replayed";
  runtime::vulkan::test::expectNoValidationMessages(*device_);
}

INSTANTIATE_TEST_SUITE_P(Modes, VulkanStories260K,
                         ::testing::Values(Mode{true, true}, Mode{false, true}, Mode{true, false}),
                         [](const ::testing::TestParamInfo<Mode> &info) {
                           return std::string(info.param.fusion ? "fused" : "unfused") +
                                  (info.param.replay ? "" : "_replay_off");
                         });

} // namespace
} // namespace sinter
