// Llama2cLoaderTest.cpp - tests of tools/model/Llama2cLoader.cpp.
//
// Checkpoints are made by serializeLlama2c from synthetic models (shared and separate
// classifier); stories260K, when ../shared is there, must load with the shape its README gives.
#include "tools/model/Llama2cLoader.h"

#include <cstdlib>
#include <cstring>

#include "tools/model/Synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::model {
namespace {

using ::testing::HasSubstr;

ModelWeights nano(bool shared) {
  absl::StatusOr<Preset> p = findPreset("nano");
  SyntheticOptions o;
  o.withVocab = false;
  absl::StatusOr<ModelWeights> w = generateSynthetic(p->config, shared, o);
  EXPECT_TRUE(w.ok()) << w.status();
  return std::move(*w);
}

void expectSame(const ModelWeights &a, const ModelWeights &b) {
  EXPECT_TRUE(a.config == b.config);
  const auto ta = namedTensors(a), tb = namedTensors(b);
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i)
    EXPECT_TRUE(*ta[i].tensor == *tb[i].tensor) << ta[i].name;
}

TEST(Llama2cLoader, RoundTripsSharedClassifier) {
  const ModelWeights w = nano(true);
  absl::StatusOr<std::vector<uint8_t>> bytes = serializeLlama2c(w);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  int32_t vocab;
  std::memcpy(&vocab, bytes->data() + 20, 4);
  EXPECT_EQ(vocab, 32);
  absl::StatusOr<ModelWeights> back = parseLlama2c(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->sharedClassifier());
  expectSame(w, *back);
}

TEST(Llama2cLoader, RoundTripsSeparateClassifier) {
  const ModelWeights w = nano(false);
  absl::StatusOr<std::vector<uint8_t>> bytes = serializeLlama2c(w);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  int32_t vocab;
  std::memcpy(&vocab, bytes->data() + 20, 4);
  EXPECT_EQ(vocab, -32); // negative: the classifier follows
  absl::StatusOr<ModelWeights> back = parseLlama2c(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->sharedClassifier());
  expectSame(w, *back);
}

TEST(Llama2cLoader, RejectsShortHeader) {
  const std::vector<uint8_t> bytes(20);
  absl::StatusOr<ModelWeights> w = parseLlama2c(bytes);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("llama2c: file holds 20 bytes, the header needs 28"));
}

TEST(Llama2cLoader, RejectsZeroField) {
  std::vector<uint8_t> bytes = *serializeLlama2c(nano(true));
  std::memset(bytes.data() + 8, 0, 4); // n_layers
  absl::StatusOr<ModelWeights> w = parseLlama2c(bytes);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("header field 2 is 0"));
}

TEST(Llama2cLoader, RejectsUnusableShape) {
  std::vector<uint8_t> bytes = *serializeLlama2c(nano(true));
  const int32_t heads = 5;
  std::memcpy(bytes.data() + 12, &heads, 4);
  absl::StatusOr<ModelWeights> w = parseLlama2c(bytes);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("llama2c: model: dim 32 is not a multiple of n_heads 5"));
}

TEST(Llama2cLoader, RejectsTruncatedFile) {
  std::vector<uint8_t> bytes = *serializeLlama2c(nano(true));
  const size_t full = bytes.size();
  bytes.resize(full - 4);
  absl::StatusOr<ModelWeights> w = parseLlama2c(bytes);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("llama2c: file holds " + std::to_string(full - 4) + " bytes"));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("implies " + std::to_string(full)));
}

TEST(Llama2cLoader, RejectsTrailingBytes) {
  std::vector<uint8_t> bytes = *serializeLlama2c(nano(true));
  bytes.resize(bytes.size() + 64);
  EXPECT_FALSE(parseLlama2c(bytes).ok());
}

TEST(Llama2cLoader, HugeHeaderDoesNotOverflowTheSizeCheck) {
  std::vector<uint8_t> bytes = *serializeLlama2c(nano(true));
  const int32_t big[7] = {131072, 131072, 4096, 64, 64, -(1 << 24), 1 << 24};
  std::memcpy(bytes.data(), big, sizeof(big));
  absl::StatusOr<ModelWeights> w = parseLlama2c(bytes);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("implies"));
}

TEST(Llama2cLoader, SerializeRejectsQuantizedWeights) {
  ModelWeights w = nano(true);
  ASSERT_TRUE(quantizeMatrices(w, DType::Q8_0, nullptr).ok());
  absl::StatusOr<std::vector<uint8_t>> bytes = serializeLlama2c(w);
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("is Q8_0, not F32"));
}

TEST(Llama2cLoader, LoadsStories260K) {
  const char *env = std::getenv("SINTER_SHARED_DIR");
  const std::string path = std::string(env ? env : SINTER_SHARED_DIR) + "/models/stories260K.bin";
  absl::StatusOr<ModelWeights> w = loadLlama2c(path);
  if (!w.ok() && w.status().code() == absl::StatusCode::kNotFound)
    GTEST_SKIP() << "stories260K.bin not found at " << path << " (needs ../shared)";
  ASSERT_TRUE(w.ok()) << w.status();
  const ModelConfig &c = w->config;
  EXPECT_EQ(c.dim, 64u);
  EXPECT_EQ(c.hiddenDim, 172u);
  EXPECT_EQ(c.nLayers, 5u);
  EXPECT_EQ(c.nHeads, 8u);
  EXPECT_EQ(c.nKvHeads, 4u);
  EXPECT_EQ(c.vocabSize, 512u);
  EXPECT_EQ(c.seqLen, 512u);
  EXPECT_TRUE(w->sharedClassifier());
  EXPECT_TRUE(validateWeights(*w).ok());

  // On-load quantization: every matrix but ffn_down (rows of 172, not whole blocks) becomes Q8_0.
  std::vector<std::string> kept;
  ASSERT_TRUE(quantizeMatrices(*w, DType::Q8_0, &kept).ok());
  EXPECT_EQ(kept.size(), 5u);
  EXPECT_EQ(kept[0], "blk.0.ffn_down.weight");
  EXPECT_EQ(w->layers[0].wq.dtype, DType::Q8_0);
  EXPECT_EQ(w->layers[0].down.dtype, DType::F32);
  EXPECT_TRUE(validateWeights(*w).ok());
}

TEST(Llama2cLoader, LoadReportsAMissingFile) {
  absl::StatusOr<ModelWeights> w = loadLlama2c("/nonexistent/stories.bin");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
}

} // namespace
} // namespace sinter::model
