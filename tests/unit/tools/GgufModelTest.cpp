// GgufModelTest.cpp - tests of tools/model/GgufModel.cpp: llama GGUF <-> ModelWeights.
//
// Generated models of every writable dtype must come back bit-identically (through memory and
// through a file); files whose metadata or tensors do not describe a usable llama model are
// rejected with the error naming the key or tensor.
#include "tools/model/GgufModel.h"

#include <cstdio>
#include <unistd.h>

#include "support/Quant.h"
#include "tools/model/GgufReader.h"
#include "tools/model/GgufWriter.h"
#include "tools/model/Synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::model {
namespace {

using ::testing::HasSubstr;

ModelWeights micro(DType dtype, bool withVocab = true) {
  SyntheticOptions o;
  o.dtype = dtype;
  o.withVocab = withVocab;
  absl::StatusOr<ModelWeights> w = generatePreset("micro", o);
  EXPECT_TRUE(w.ok()) << w.status();
  return std::move(*w);
}

void expectSameWeights(const ModelWeights &a, const ModelWeights &b) {
  EXPECT_TRUE(a.config == b.config)
      << describeConfig(a.config) << " vs " << describeConfig(b.config);
  const std::vector<NamedTensor> ta = namedTensors(a), tb = namedTensors(b);
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].name, tb[i].name);
    EXPECT_TRUE(*ta[i].tensor == *tb[i].tensor) << ta[i].name;
  }
  EXPECT_EQ(a.vocab, b.vocab);
}

class GgufModelRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(GgufModelRoundTrip, LoadsBackBitIdentically) {
  const ModelWeights w = micro(GetParam());
  const GgufFile file = ggufFromModel(w, "micro");
  absl::StatusOr<std::vector<uint8_t>> bytes = serializeGguf(file);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<GgufFile> parsed = parseGguf(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<ModelWeights> back = modelFromGguf(*parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  expectSameWeights(w, *back);
  // Writing what was read gives the same bytes.
  absl::StatusOr<std::vector<uint8_t>> again = serializeGguf(ggufFromModel(*back, "micro"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes);
}

INSTANTIATE_TEST_SUITE_P(EveryWritableDType, GgufModelRoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0,
                                           DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                           DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto &info) { return dtypeName(info.param); });

TEST(GgufModel, WritesAndLoadsAFile) {
  const ModelWeights w = micro(DType::Q8_0);
  const std::string path =
      ::testing::TempDir() + "/micro_q8_0_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(writeGguf(ggufFromModel(w, "micro"), path).ok());
  absl::StatusOr<ModelWeights> back = loadGguf(path);
  ASSERT_TRUE(back.ok()) << back.status();
  expectSameWeights(w, *back);
  // The streamed file equals the in-memory serialization.
  absl::StatusOr<std::vector<uint8_t>> bytes = serializeGguf(ggufFromModel(w, "micro"));
  FILE *f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<uint8_t> onDisk(bytes->size() + 1);
  onDisk.resize(std::fread(onDisk.data(), 1, onDisk.size(), f));
  std::fclose(f);
  EXPECT_EQ(onDisk, *bytes);
  std::remove(path.c_str());
}

// Every weight format, written by the GGUF writer from f32 weights and read back: the blocks
// come back byte for byte, and their values are the f32 weights within the format's error.
TEST(GgufModel, EveryFormatRoundTripsThroughAFile) {
  const ModelWeights f32 = micro(DType::F32);
  // Normalized squared error of uniform weights; QuantTest bounds it tightly per format.
  const std::pair<DType, double> cases[] = {
      {DType::F16, 1e-6},  {DType::BF16, 1e-4}, {DType::Q8_0, 1e-4}, {DType::Q6_K, 1e-3},
      {DType::Q5_1, 3e-3}, {DType::Q5_0, 3e-3}, {DType::Q5_K, 3e-3}, {DType::Q4_1, 1e-2},
      {DType::Q4_0, 1e-2}, {DType::Q4_K, 1e-2}, {DType::Q3_K, 4e-2}, {DType::Q2_K, 1.2e-1}};
  for (const auto &[dtype, bound] : cases) {
    ModelWeights w = f32;
    ASSERT_TRUE(quantizeMatrices(w, dtype, nullptr).ok()) << dtypeName(dtype);
    ASSERT_EQ(w.layers[0].wq.dtype, dtype);
    const std::string path = ::testing::TempDir() + "/micro_" + dtypeName(dtype) + "_" +
                             std::to_string(getpid()) + ".gguf";
    ASSERT_TRUE(writeGguf(ggufFromModel(w, "micro"), path).ok());
    absl::StatusOr<ModelWeights> back = loadGguf(path);
    std::remove(path.c_str());
    ASSERT_TRUE(back.ok()) << dtypeName(dtype) << ": " << back.status();
    expectSameWeights(w, *back);
    const WeightTensor &t = back->layers[1].up;
    ASSERT_EQ(t.dtype, dtype);
    EXPECT_EQ(t.data.size(),
              t.rows * t.cols / dtypeInfo(dtype).blockSize * dtypeInfo(dtype).bytesPerBlock);
    std::vector<float> got = *dequantizeTensor(t), want = *dequantizeTensor(f32.layers[1].up);
    double err = 0, ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      ref += double(want[i]) * want[i];
    }
    EXPECT_LE(err / ref, bound) << dtypeName(dtype);
    EXPECT_GT(err / ref, dtype == DType::F32 ? -1.0 : 0.0) << dtypeName(dtype);
  }
}

TEST(GgufModel, SharedClassifierWhenOutputIsAbsent) {
  SyntheticOptions o;
  absl::StatusOr<ModelWeights> w = generatePreset("nano", o);
  ASSERT_TRUE(w.ok());
  w->output = WeightTensor();
  absl::StatusOr<std::vector<uint8_t>> bytes = serializeGguf(ggufFromModel(*w, "nano"));
  absl::StatusOr<GgufFile> parsed = parseGguf(*bytes);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->findTensor("output.weight"), nullptr);
  absl::StatusOr<ModelWeights> back = modelFromGguf(*parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->sharedClassifier());
}

// A GgufFile of the micro model with one edit applied, for the error tests.
class GgufModelErrors : public ::testing::Test {
protected:
  GgufModelErrors() : weights_(micro(DType::Q8_0, false)), file_(ggufFromModel(weights_, "m")) {}

  GgufValue *key(const std::string &k) {
    for (GgufKeyValue &kv : file_.metadata)
      if (kv.key == k)
        return &kv.value;
    return nullptr;
  }
  void dropKey(const std::string &k) {
    for (size_t i = 0; i < file_.metadata.size(); ++i)
      if (file_.metadata[i].key == k)
        file_.metadata.erase(file_.metadata.begin() + i);
  }
  GgufTensor *tensor(const std::string &name) {
    for (GgufTensor &t : file_.tensors)
      if (t.name == name)
        return &t;
    return nullptr;
  }
  void expectError(absl::StatusCode code, const std::string &message) {
    absl::StatusOr<ModelWeights> w = modelFromGguf(file_);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().code(), code) << w.status();
    EXPECT_THAT(std::string(w.status().message()), HasSubstr(message));
  }

  ModelWeights weights_;
  GgufFile file_;
};

TEST_F(GgufModelErrors, UnsupportedArchitecture) {
  key("general.architecture")->str = "gpt2";
  expectError(absl::StatusCode::kUnimplemented,
              "gguf: architecture 'gpt2' is not supported (only llama)");
}

TEST_F(GgufModelErrors, MissingArchitecture) {
  dropKey("general.architecture");
  expectError(absl::StatusCode::kInvalidArgument, "metadata key general.architecture is missing");
}

TEST_F(GgufModelErrors, MissingRequiredKey) {
  dropKey("llama.block_count");
  expectError(absl::StatusCode::kInvalidArgument, "metadata key llama.block_count is missing");
}

TEST_F(GgufModelErrors, KeyOfTheWrongType) {
  *key("llama.embedding_length") = GgufValue::string("256");
  expectError(absl::StatusCode::kInvalidArgument,
              "metadata key llama.embedding_length is a string, expected an unsigned integer");
}

TEST_F(GgufModelErrors, ShapeThatIsNotUsable) {
  *key("llama.attention.head_count") = GgufValue::u32(3);
  expectError(absl::StatusCode::kInvalidArgument, "dim 256 is not a multiple of n_heads 3");
}

TEST_F(GgufModelErrors, MissingTensor) {
  file_.tensors.erase(file_.tensors.begin() + 3);
  expectError(absl::StatusCode::kInvalidArgument, "tensor blk.0.attn_k.weight is missing");
}

TEST_F(GgufModelErrors, TensorWithTheWrongDims) {
  tensor("blk.1.ffn_down.weight")->dims = {256, 512};
  expectError(absl::StatusCode::kInvalidArgument,
              "tensor blk.1.ffn_down.weight has dims [256, 512], expected [512, 256]");
}

TEST_F(GgufModelErrors, WeightFormatNotSupportedYet) {
  std::vector<uint8_t> data(256 / 256 * 66 * 256);
  GgufTensor *t = tensor("blk.0.attn_q.weight");
  t->dtype = DType::IQ2_XXS;
  t->data = data;
  expectError(absl::StatusCode::kUnimplemented, "IQ2_XXS");
}

TEST_F(GgufModelErrors, IntegerTensorIsNotAWeight) {
  std::vector<uint8_t> data(256 * 256 * 4);
  GgufTensor *t = tensor("blk.0.attn_q.weight");
  t->dtype = DType::I32;
  t->data = data;
  expectError(absl::StatusCode::kInvalidArgument, "I32");
}

TEST_F(GgufModelErrors, PartialRope) {
  *key("llama.rope.dimension_count") = GgufValue::u32(32);
  expectError(absl::StatusCode::kUnimplemented,
              "llama.rope.dimension_count 32 differs from the head size 64");
}

TEST(GgufModel, ConvertsF16NormsToF32) {
  ModelWeights w = micro(DType::F32, false);
  WeightTensor &norm = w.outputNorm;
  std::vector<float> values(norm.cols);
  std::memcpy(values.data(), norm.data.data(), norm.data.size());
  norm.dtype = DType::F16;
  norm.data.resize(norm.cols * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = floatToHalf(values[i]);
    std::memcpy(norm.data.data() + 2 * i, &h, 2);
  }
  absl::StatusOr<std::vector<uint8_t>> bytes = serializeGguf(ggufFromModel(w, "m"));
  absl::StatusOr<ModelWeights> back = modelFromGguf(*parseGguf(*bytes));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->outputNorm.dtype, DType::F32);
  float first;
  std::memcpy(&first, back->outputNorm.data.data(), 4);
  EXPECT_EQ(first, halfToFloat(floatToHalf(values[0])));
}

TEST(GgufModel, LoadReportsAMissingFile) {
  absl::StatusOr<ModelWeights> w = loadGguf("/nonexistent/model.gguf");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("/nonexistent/model.gguf"));
}

} // namespace
} // namespace sinter::model
