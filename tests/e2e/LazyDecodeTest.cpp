// LazyDecodeTest.cpp - stories260K through the lazy backend: the reference's tokens, and the plan
// cache's promise for a decode loop (issue 4): 64 tokens compile once or twice (the second time
// when the per-token integers are discovered as parameters), every later token is a hit.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "passes/FusionCompiler.h"
#include "runtime/LazyBackend.h"
#include "runtime/PlanInterpreter.h"
#include "sinter/Factory.h"
#include "tests/support/BackendKinds.h"
#include "tools/model/Decoder.h"
#include "tools/model/Llama2cLoader.h"
#include "tools/model/Sampler.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

constexpr uint32_t kTokens = 64;

std::string modelPath() {
  const char *env = std::getenv("SINTER_SHARED_DIR");
  return std::string(env ? env : SINTER_SHARED_DIR) + "/models/stories260K.bin";
}

// Greedy tokens after BOS, on `backend`, without stopping at BOS.
std::vector<uint32_t> greedy(ComputeBackend &backend, const model::ModelWeights &weights) {
  auto decoder = model::Decoder::create(backend, weights);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (!decoder.ok())
    return {};
  std::vector<uint32_t> tokens;
  uint32_t token = 1;
  for (uint32_t pos = 0; pos < kTokens; ++pos) {
    absl::StatusOr<std::vector<float>> logits = (*decoder)->step(token, pos);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok())
      return tokens;
    uint32_t best = 0;
    for (uint32_t i = 1; i < logits->size(); ++i)
      if ((*logits)[i] > (*logits)[best])
        best = i;
    tokens.push_back(token = best);
  }
  return tokens;
}

class LazyDecode : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    if (!std::ifstream(modelPath()))
      GTEST_SKIP() << "needs ../shared/models/stories260K.bin, which is absent: " << modelPath();
    auto weights = model::loadLlama2c(modelPath());
    ASSERT_TRUE(weights.ok()) << weights.status();
    weights_ = std::move(*weights);
    auto reference = createBackend(sinter::test::backendOptions("reference"));
    ASSERT_TRUE(reference.ok()) << reference.status();
    expected_ = greedy(**reference, weights_);
    ASSERT_EQ(expected_.size(), kTokens);
  }
  model::ModelWeights weights_;
  std::vector<uint32_t> expected_;
};

TEST_P(LazyDecode, SixtyFourTokensLikeTheReferenceWithAtMostTwoCompiles) {
  const bool fused = GetParam();
  runtime::LazyBackendOptions options;
  if (fused)
    options.compiler = std::make_unique<passes::FusionCompiler>();
  else
    options.compiler = std::make_unique<runtime::InterpreterCompiler>();
  runtime::LazyBackend lazy(std::move(options));
  EXPECT_EQ(greedy(lazy, weights_), expected_);
  runtime::LazyStats stats = lazy.stats();
  // One flush per token (the logits read); the weight upload ran directly (nothing pending).
  EXPECT_EQ(stats.flushes, kTokens);
  EXPECT_EQ(stats.cache.newStructures, 1u);
  EXPECT_EQ(stats.cache.misses, 2u); // token 0, then token 1 finds pos, seq_len, offsets
  EXPECT_EQ(stats.cache.hits, kTokens - 2);
  EXPECT_EQ(stats.kernelsLaunched / kTokens, fused ? 27u : 213u);
}

INSTANTIATE_TEST_SUITE_P(FusionOnOff, LazyDecode, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? std::string("Fused") : std::string("Unfused");
                         });

} // namespace
} // namespace sinter
