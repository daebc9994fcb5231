// SyntheticTest.cpp - tests of tools/model/Synthetic.cpp and the presets of ModelConfig.cpp.
//
// The generator must be deterministic (seed in, same bytes out, whatever the thread count),
// shaped as asked, scaled as documented, and honest about matrices it could not quantize.
#include "tools/model/Synthetic.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::model {
namespace {

using ::testing::HasSubstr;

ModelWeights generate(const std::string &preset, DType dtype, uint64_t seed, unsigned threads,
                      std::vector<std::string> *kept = nullptr) {
  SyntheticOptions o;
  o.dtype = dtype;
  o.seed = seed;
  o.threads = threads;
  absl::StatusOr<ModelWeights> w = generatePreset(preset, o, kept);
  EXPECT_TRUE(w.ok()) << w.status();
  return std::move(*w);
}

bool sameBytes(const ModelWeights &a, const ModelWeights &b) {
  const auto ta = namedTensors(a), tb = namedTensors(b);
  if (ta.size() != tb.size())
    return false;
  for (size_t i = 0; i < ta.size(); ++i)
    if (!(*ta[i].tensor == *tb[i].tensor))
      return false;
  return true;
}

TEST(Synthetic, SameSeedSameBytesWhateverTheThreadCount) {
  const ModelWeights a = generate("micro", DType::Q4_0, 7, 1);
  const ModelWeights b = generate("micro", DType::Q4_0, 7, 3);
  EXPECT_TRUE(sameBytes(a, b));
  const ModelWeights c = generate("micro", DType::Q4_0, 8, 2);
  EXPECT_FALSE(sameBytes(a, c));
}

TEST(Synthetic, ShapesFollowThePreset) {
  const ModelWeights w = generate("micro", DType::Q8_0, 1, 2);
  EXPECT_TRUE(validateWeights(w).ok()) << validateWeights(w);
  EXPECT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.layers[0].wk.rows, 128u); // kv_dim = 256 / 4 * 2
  EXPECT_EQ(w.layers[0].wq.dtype, DType::Q8_0);
  EXPECT_EQ(w.tokenEmbedding.dtype, DType::Q8_0);
  EXPECT_EQ(w.layers[0].attnNorm.dtype, DType::F32);
  EXPECT_FALSE(w.sharedClassifier());
  ASSERT_EQ(w.vocab.size(), 256u);
  EXPECT_EQ(w.vocab[1], "<s>");
  EXPECT_EQ(w.vocab[5], "\u2581w5");
}

TEST(Synthetic, WeightsHaveTheDocumentedScale) {
  const ModelWeights w = generate("micro", DType::F32, 1, 2);
  auto stats = [](const WeightTensor &t, double *mean, double *sd) {
    const float *v = reinterpret_cast<const float *>(t.data.data());
    const size_t n = t.rows * t.cols;
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; ++i) {
      s += v[i];
      s2 += double(v[i]) * v[i];
    }
    *mean = s / n;
    *sd = std::sqrt(s2 / n - *mean * *mean);
  };
  double mean, sd;
  stats(w.layers[0].down, &mean, &sd); // rows of 512
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 1.0 / std::sqrt(512.0), 0.002);
  stats(w.layers[1].attnNorm, &mean, &sd);
  EXPECT_NEAR(mean, 1.0, 0.02);
  EXPECT_NEAR(sd, 0.1 / std::sqrt(3.0), 0.02);
}

TEST(Synthetic, KeepsF32WhereRowsAreNotWholeBlocks) {
  std::vector<std::string> kept;
  const ModelWeights w = generate("stories260K", DType::Q4_0, 1, 2, &kept);
  EXPECT_EQ(kept.size(), 5u); // ffn_down: rows of 172
  EXPECT_EQ(w.layers[0].down.dtype, DType::F32);
  EXPECT_EQ(w.layers[0].gate.dtype, DType::Q4_0);
  EXPECT_TRUE(w.sharedClassifier());
  EXPECT_TRUE(validateWeights(w).ok());
}

TEST(Synthetic, RejectsAFormatItCannotWrite) {
  SyntheticOptions o;
  o.dtype = DType::Q2_K;
  absl::StatusOr<ModelWeights> w = generatePreset("nano", o);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("Q2_K"));
}

TEST(Synthetic, RejectsAnUnknownPreset) {
  absl::StatusOr<ModelWeights> w = generatePreset("gpt-5", {});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("known: stories260K, tinyllama-1.1b"));
}

TEST(Presets, HaveThePublishedShapes) {
  const ModelConfig tiny = findPreset("tinyllama-1.1b")->config;
  EXPECT_EQ(tiny.nLayers, 22u);
  EXPECT_EQ(tiny.dim, 2048u);
  EXPECT_EQ(tiny.nHeads, 32u);
  EXPECT_EQ(tiny.nKvHeads, 4u);
  EXPECT_EQ(tiny.hiddenDim, 5632u);
  EXPECT_EQ(tiny.vocabSize, 32000u);
  EXPECT_NEAR(double(parameterCount(tiny, false)), 1.1e9, 0.01e9);
  const ModelConfig l7 = findPreset("llama-7b")->config;
  EXPECT_EQ(l7.nLayers, 32u);
  EXPECT_EQ(l7.dim, 4096u);
  EXPECT_EQ(l7.nHeads, 32u);
  EXPECT_EQ(l7.nKvHeads, 32u);
  EXPECT_EQ(l7.hiddenDim, 11008u);
  EXPECT_NEAR(double(parameterCount(l7, false)), 6.74e9, 0.01e9);
  const Preset s = *findPreset("stories260K");
  EXPECT_TRUE(s.sharedClassifier);
  EXPECT_EQ(s.config.hiddenDim, 172u);
  for (const Preset &p : presets())
    EXPECT_TRUE(validateConfig(p.config).ok()) << p.name;
}

TEST(ModelConfig, ValidateNamesTheField) {
  ModelConfig c = findPreset("nano")->config;
  c.nKvHeads = 3;
  EXPECT_THAT(std::string(validateConfig(c).message()),
              HasSubstr("n_heads 4 is not a multiple of n_kv_heads 3"));
  c = findPreset("nano")->config;
  c.vocabSize = 0;
  EXPECT_THAT(std::string(validateConfig(c).message()), HasSubstr("vocab_size is 0"));
  c = findPreset("nano")->config;
  c.nHeads = 32; // head size 32 / 32 = 1
  c.nKvHeads = 32;
  EXPECT_THAT(std::string(validateConfig(c).message()), HasSubstr("head size 1 is odd"));
}

} // namespace
} // namespace sinter::model
