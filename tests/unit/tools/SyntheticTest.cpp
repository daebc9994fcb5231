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
  o.dtype = DType::Q8_K;
  absl::StatusOr<ModelWeights> w = generatePreset("nano", o);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("Q8_K"));
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

// Which tensor gets which format in the llama.cpp-style mixes.
TEST(WeightMix, AssignsFormatsPerTensor) {
  WeightFormat f;
  ASSERT_TRUE(parseWeightFormat("q4_k_m", &f));
  EXPECT_EQ(f.dtype, DType::Q4_K);
  EXPECT_EQ(f.mix, WeightMix::Q4_K_M);
  EXPECT_EQ(weightFormatName(f), "q4_k_m");
  // 32 layers (llama-7b): the first and last 4, and 6, 9, ..., 27 between, get more bits.
  std::vector<uint32_t> more;
  for (uint32_t l = 0; l < 32; ++l)
    if (moreBits(l, 32))
      more.push_back(l);
  EXPECT_EQ(more,
            (std::vector<uint32_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  const uint64_t cols = 4096;
  EXPECT_EQ(tensorFormat(f, "blk.0.attn_v.weight", 32, cols, false), DType::Q6_K);
  EXPECT_EQ(tensorFormat(f, "blk.5.attn_v.weight", 32, cols, false), DType::Q4_K);
  EXPECT_EQ(tensorFormat(f, "blk.6.ffn_down.weight", 32, 11008 + 256, false), DType::Q6_K);
  EXPECT_EQ(tensorFormat(f, "blk.7.ffn_down.weight", 32, cols, false), DType::Q4_K);
  EXPECT_EQ(tensorFormat(f, "blk.0.attn_q.weight", 32, cols, false), DType::Q4_K);
  EXPECT_EQ(tensorFormat(f, "blk.0.ffn_up.weight", 32, cols, false), DType::Q4_K);
  EXPECT_EQ(tensorFormat(f, "blk.0.attn_norm.weight", 32, cols, false), DType::F32);
  EXPECT_EQ(tensorFormat(f, "output.weight", 32, cols, false), DType::Q6_K);
  EXPECT_EQ(tensorFormat(f, "token_embd.weight", 32, cols, false), DType::Q4_K);
  EXPECT_EQ(tensorFormat(f, "token_embd.weight", 32, cols, true), DType::Q6_K); // the classifier
  // Rows that are not whole 256-weight blocks fall back to 32-weight formats, then to F32.
  EXPECT_EQ(tensorFormat(f, "blk.5.attn_q.weight", 32, 64, false), DType::Q5_0);
  EXPECT_EQ(tensorFormat(f, "blk.0.attn_v.weight", 32, 64, false), DType::Q8_0);
  EXPECT_EQ(tensorFormat(f, "blk.0.ffn_down.weight", 32, 172, false), DType::F32);

  ASSERT_TRUE(parseWeightFormat("Q5_K_M", &f));
  EXPECT_EQ(f.dtype, DType::Q5_K);
  EXPECT_EQ(tensorFormat(f, "blk.5.attn_k.weight", 32, cols, false), DType::Q5_K);
  EXPECT_EQ(tensorFormat(f, "blk.31.attn_v.weight", 32, cols, false), DType::Q6_K);
  EXPECT_EQ(tensorFormat(f, "blk.5.attn_q.weight", 32, 64, false), DType::Q5_1);
  // A plain dtype is no mix: every matrix in it.
  ASSERT_TRUE(parseWeightFormat("q8_0", &f));
  EXPECT_EQ(f.mix, WeightMix::None);
  EXPECT_EQ(tensorFormat(f, "output.weight", 32, cols, false), DType::Q8_0);
  EXPECT_FALSE(parseWeightFormat("q4_k_s", &f));
}

// The generator and the requantizer both follow tensorFormat.
TEST(WeightMix, SyntheticAndRequantizedModelsFollowTheAssignment) {
  SyntheticOptions o;
  o.dtype = DType::Q4_K;
  o.mix = WeightMix::Q4_K_M;
  absl::StatusOr<ModelWeights> w = generatePreset("micro", o); // 2 layers: layer 1 gets more
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->layers[0].wq.dtype, DType::Q4_K);
  EXPECT_EQ(w->layers[0].wv.dtype, DType::Q4_K);
  EXPECT_EQ(w->layers[0].down.dtype, DType::Q4_K);
  EXPECT_EQ(w->layers[1].wk.dtype, DType::Q4_K);
  EXPECT_EQ(w->layers[1].wv.dtype, DType::Q6_K);
  EXPECT_EQ(w->layers[1].down.dtype, DType::Q6_K);
  EXPECT_EQ(w->output.dtype, DType::Q6_K);
  EXPECT_EQ(w->tokenEmbedding.dtype, DType::Q4_K);
  EXPECT_EQ(w->outputNorm.dtype, DType::F32);
  EXPECT_TRUE(validateWeights(*w).ok());

  ModelWeights f32 = generate("micro", DType::F32, 1, 1);
  std::vector<std::string> kept;
  ASSERT_TRUE(quantizeMatrices(f32, WeightFormat{DType::Q5_K, WeightMix::Q5_K_M}, &kept).ok());
  EXPECT_TRUE(kept.empty());
  for (const NamedTensor &nt : namedTensors(f32))
    EXPECT_EQ(nt.tensor->dtype,
              tensorFormat({DType::Q5_K, WeightMix::Q5_K_M}, nt.name, 2, nt.tensor->cols, false))
        << nt.name;
  EXPECT_EQ(f32.layers[0].up.dtype, DType::Q5_K);
  EXPECT_EQ(f32.layers[1].down.dtype, DType::Q6_K);
}

} // namespace
} // namespace sinter::model
