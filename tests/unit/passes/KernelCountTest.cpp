// KernelCountTest.cpp - golden kernel counts of known workloads (as tinygrad's check_schedule).
//
// stories260K's decode step (213 calls over 5 layers) must come out of the fusion pipeline as
// 27 kernels: five per layer plus the final norm+classifier and the embedding lookup. A change
// in a pass that moves this number must change the golden on purpose.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "passes/FusionCompiler.h"
#include "runtime/LazyBackend.h"
#include "tools/model/Decoder.h"
#include "tools/model/Llama2cLoader.h"

namespace sinter {
namespace {

std::string modelPath() {
  const char *dir = std::getenv("SINTER_SHARED_DIR");
  return std::string(dir ? dir : SINTER_SHARED_DIR) + "/models/stories260K.bin";
}

TEST(KernelCountTest, Stories260KDecodeStepIsFiveKernelsPerLayerPlusTwo) {
  if (!std::ifstream(modelPath()))
    GTEST_SKIP() << "needs ../shared/models/stories260K.bin, which is absent: " << modelPath();
  auto weights = model::loadLlama2c(modelPath());
  ASSERT_TRUE(weights.ok()) << weights.status();
  size_t lastKernels = 0, lastCalls = 0;
  runtime::LazyBackendOptions o;
  o.compiler = std::make_unique<passes::FusionCompiler>();
  o.onFlush = [&](const Trace &t, absl::Span<const BufferHandle>) { lastCalls = t.entries.size(); };
  runtime::LazyBackend lazy(std::move(o));
  auto decoder = model::Decoder::create(lazy, *weights);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  for (uint32_t pos = 0; pos < 3; ++pos) {
    uint64_t before = lazy.stats().kernelsLaunched;
    ASSERT_TRUE((*decoder)->step(1, pos).ok());
    lastKernels = lazy.stats().kernelsLaunched - before;
  }
  EXPECT_EQ(lastCalls, 213u);
  EXPECT_EQ(lastKernels, 27u) << lazy.lastPlanDescription();
  EXPECT_LE(lastKernels, 5u * weights->config.nLayers + 2);
}

} // namespace
} // namespace sinter
