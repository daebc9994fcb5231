// MixedFormatTest.cpp - models requantized to the llama.cpp-style mixes decode alike everywhere.
//
// q4_k_m and q5_k_m give a model tensors of several formats (tensorFormat): stories260K's rows of
// 64 weights fall back to Q5_0/Q5_1 with Q8_0 for its classifier and two layers' attn_v (and F32
// for ffn_down, 172 wide), so the stacked Q/K/V of those layers mixes formats; the micro preset
// (rows of 256 and 512) gets real Q4_K/Q5_K with Q6_K in layer 1's attn_v and ffn_down. The
// lazy, cpu and vulkan kinds, fused, must give the reference backend's greedy tokens on the same
// requantized weights. Skips stories260K when ../shared is absent, vulkan without a device.
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "sinter/Factory.h"
#include "sinter/Status.h"
#include "tools/model/Decoder.h"
#include "tools/model/Llama2cLoader.h"
#include "tools/model/Sampler.h"
#include "tools/model/Synthetic.h"
#include "gtest/gtest.h"

namespace sinter::model {
namespace {

std::string modelPath() {
  const char *env = std::getenv("SINTER_SHARED_DIR");
  return std::string(env ? env : SINTER_SHARED_DIR) + "/models/stories260K.bin";
}

absl::StatusOr<std::vector<uint32_t>> greedyOn(const std::string &kind, const ModelWeights &w,
                                               uint32_t steps) {
  BackendOptions options;
  options.kind = kind;
  SINTER_ASSIGN_OR_RETURN(auto backend, createBackend(options));
  SINTER_ASSIGN_OR_RETURN(auto decoder, Decoder::create(*backend, w));
  Sampler greedy({});
  const uint32_t prompt[] = {1};
  return generate(*decoder, prompt, steps, greedy, 1u);
}

using Case = std::tuple<std::string /*model*/, WeightMix, std::string /*kind*/>;

class MixedFormat : public ::testing::TestWithParam<Case> {};

TEST_P(MixedFormat, MatchesTheReference) {
  const auto &[modelName, mix, kind] = GetParam();
  const WeightFormat format{mix == WeightMix::Q4_K_M ? DType::Q4_K : DType::Q5_K, mix};
  ModelWeights w;
  if (modelName == "stories260K") {
    absl::StatusOr<ModelWeights> loaded = loadLlama2c(modelPath());
    if (!loaded.ok())
      GTEST_SKIP() << "stories260K.bin not loadable at " << modelPath() << ": " << loaded.status();
    w = std::move(*loaded);
    std::vector<std::string> kept;
    ASSERT_TRUE(quantizeMatrices(w, format, &kept).ok());
    // The stacked Q/K/V of layer 2 mixes formats; the fallbacks are llama.cpp's.
    const DType base = mix == WeightMix::Q4_K_M ? DType::Q5_0 : DType::Q5_1;
    EXPECT_EQ(w.layers[2].wq.dtype, base);
    EXPECT_EQ(w.layers[2].wk.dtype, base);
    EXPECT_EQ(w.layers[2].wv.dtype, DType::Q8_0);
    EXPECT_EQ(w.layers[1].wv.dtype, base);
    EXPECT_EQ(w.layers[0].down.dtype, DType::F32);
    EXPECT_EQ(w.tokenEmbedding.dtype, DType::Q8_0);
  } else {
    SyntheticOptions o;
    o.dtype = format.dtype;
    o.mix = mix;
    absl::StatusOr<ModelWeights> made = generatePreset("micro", o);
    ASSERT_TRUE(made.ok()) << made.status();
    w = std::move(*made);
    EXPECT_EQ(w.layers[1].wq.dtype, format.dtype);
    EXPECT_EQ(w.layers[1].wv.dtype, DType::Q6_K);
    EXPECT_EQ(w.layers[1].down.dtype, DType::Q6_K);
  }
  const uint32_t steps = kind == "vulkan" ? 4 : 16;
  if (kind == "vulkan") {
    BackendOptions probe;
    probe.kind = "vulkan";
    if (!createBackend(probe).ok())
      GTEST_SKIP() << "no Vulkan device";
  }
  absl::StatusOr<std::vector<uint32_t>> want = greedyOn("reference", w, steps);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), steps);
  absl::StatusOr<std::vector<uint32_t>> got = greedyOn(kind, w, steps);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  const auto &[model, mix, kind] = info.param;
  return model + (mix == WeightMix::Q4_K_M ? "_q4_k_m_" : "_q5_k_m_") + kind;
}

INSTANTIATE_TEST_SUITE_P(Kinds, MixedFormat,
                         ::testing::Combine(::testing::Values("stories260K", "micro"),
                                            ::testing::Values(WeightMix::Q4_K_M, WeightMix::Q5_K_M),
                                            ::testing::Values("lazy", "cpu", "vulkan")),
                         caseName);

} // namespace
} // namespace sinter::model
