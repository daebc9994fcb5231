// Stories260KCpuTest.cpp - stories260K on the `cpu` backend kind decodes the pinned golden.
//
// The golden (Stories260KTest.cpp, where two independent computations establish it) is the
// reference backend's greedy decode; the JIT-compiled kernels, fused, unfused and eager, must
// give the same 40 tokens. Skips when ../shared (the model) is absent.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sinter/Factory.h"
#include "tools/model/Decoder.h"
#include "tools/model/Llama2cLoader.h"
#include "tools/model/Sampler.h"
#include "gtest/gtest.h"

namespace {

const std::vector<uint32_t> kGolden = {461, 461, 401, 401, 401, 461, 378, 455, 473, 456,
                                       435, 299, 362, 409, 283, 264, 283, 452, 288, 13,
                                       431, 431, 431, 431, 431, 431, 431, 431, 431, 431,
                                       431, 431, 431, 293, 430, 417, 363, 416, 315, 342};

std::string modelPath() {
  const char *env = std::getenv("SINTER_SHARED_DIR");
  return std::string(env ? env : SINTER_SHARED_DIR) + "/models/stories260K.bin";
}

std::vector<uint32_t> greedyOn(const sinter::BackendOptions &options,
                               const sinter::model::ModelWeights &weights, size_t limit) {
  auto backend = sinter::createBackend(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok())
    return {};
  auto decoder = sinter::model::Decoder::create(**backend, weights);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (!decoder.ok())
    return {};
  sinter::model::Sampler greedy({});
  const uint32_t prompt[] = {1};
  auto tokens = sinter::model::generate(**decoder, prompt, uint32_t(limit), greedy, 1u);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  return tokens.ok() ? *tokens : std::vector<uint32_t>{};
}

class Stories260KCpu : public ::testing::TestWithParam<int> {
protected:
  void SetUp() override {
    auto weights = sinter::model::loadLlama2c(modelPath());
    if (!weights.ok())
      GTEST_SKIP() << "stories260K.bin not loadable at " << modelPath()
                   << " (needs ../shared): " << weights.status();
    weights_ = std::move(*weights);
  }
  sinter::model::ModelWeights weights_;
};

TEST_P(Stories260KCpu, DecodesTheGolden) {
  sinter::BackendOptions options;
  options.kind = "cpu";
  options.fusion = GetParam() == 0;
  options.eager = GetParam() == 2;
  EXPECT_EQ(greedyOn(options, weights_, kGolden.size()), kGolden);
}

std::string modeName(const ::testing::TestParamInfo<int> &info) {
  static const char *const kNames[] = {"fused", "unfused", "eager"};
  return kNames[info.param];
}

INSTANTIATE_TEST_SUITE_P(Modes, Stories260KCpu, ::testing::Values(0, 1, 2), modeName);

} // namespace
