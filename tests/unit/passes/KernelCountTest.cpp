// KernelCountTest.cpp - golden kernel counts of known workloads (as tinygrad's check_schedule).
//
// stories260K's decode step (213 calls over 5 layers) must come out of the fusion pipeline as
// 27 kernels: five per layer plus the final norm+classifier and the embedding lookup. A change
// in a pass that moves this number must change the golden on purpose. tinyllama-1.1b (22 layers,
// grouped-query attention, 32 heads) must come out as 112 = 5 x 22 + 2, of few enough distinct
// kernels that the compilers' bounded caches never evict one in a decode.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "codegen/CpuCompiler.h"
#include "passes/FusionCompiler.h"
#include "runtime/LazyBackend.h"
#include "tools/model/Decoder.h"
#include "tools/model/Llama2cLoader.h"
#include "tools/model/Synthetic.h"

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

// Runs nothing: the tinyllama test needs the calls a decode step makes, not their results, and the
// weights it uploads are all zero.
class NoRunPlan : public Plan {
public:
  absl::Status run(const PlanArgs &) override { return absl::OkStatus(); }
  size_t numKernels() const override { return 0; }
  std::string describe() const override { return "no-run"; }
};
class NoRunCompiler : public PlanCompiler {
public:
  std::string name() const override { return "no-run"; }
  absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &,
                                                const std::vector<IntSlot> &) override {
    return std::unique_ptr<Plan>(new NoRunPlan);
  }
};

TEST(KernelCountTest, TinyLlamaDecodeStepIsFiveKernelsPerLayerPlusTwo) {
  model::SyntheticOptions so;
  so.dtype = DType::Q4_0;
  so.zeroWeights = true;
  auto weights = model::generatePreset("tinyllama-1.1b", so);
  ASSERT_TRUE(weights.ok()) << weights.status();
  ASSERT_EQ(weights->config.nLayers, 22u);
  Trace last;
  std::vector<IntSlot> params;
  runtime::LazyBackendOptions o;
  o.compiler = std::make_unique<NoRunCompiler>();
  o.onFlush = [&](const Trace &t, absl::Span<const BufferHandle>) {
    if (t.entries.size() > 8) // not the weight uploads
      last = t;
  };
  runtime::LazyBackend lazy(std::move(o));
  auto decoder = model::Decoder::create(lazy, *weights);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  for (uint32_t pos = 0; pos < 2; ++pos)
    ASSERT_TRUE((*decoder)->step(1, pos).ok());
  // The second token's trace, with the parameters the plan cache found between the two.
  params = lazy.planParameters(last);
  EXPECT_FALSE(params.empty());
  last.payloads.clear();
  auto program = passes::compileTraceOnce(last, params, passes::FusionOptions{});
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(last.entries.size(), 2511u); // attention is called per head: 32 x 3 calls a layer
  EXPECT_EQ(program->numLaunches(), 112u);
  EXPECT_LE(program->numLaunches(), 5u * weights->config.nLayers + 2);
  // The layers share their kernels: the distinct ones (cpu functions, fused ones included) fit
  // a quarter of a compiler's kernel cache, so a decode never evicts.
  auto cpu = codegen::CpuCompiler::create();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::set<std::string> distinct;
  for (const codegen::CpuKernelFunctions &k : (*cpu)->functionsOf(*program))
    for (const codegen::KernelSpec &spec : k.specs)
      distinct.insert(spec.key());
  std::printf("tinyllama-1.1b decode step: %zu distinct cpu kernels\n", distinct.size());
  EXPECT_LE(distinct.size(), codegen::kDefaultKernelCacheCapacity / 4);
  // Fusion off is one kernel per call: the golden above is the passes' doing.
  passes::FusionOptions off;
  off.disabled = {"all"};
  auto unfused = passes::compileTraceOnce(last, params, off);
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  EXPECT_GT(unfused->numLaunches(), 2000u);
}

} // namespace
} // namespace sinter
