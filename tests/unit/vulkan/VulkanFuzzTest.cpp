// VulkanFuzzTest.cpp - the `vulkan` kind, fused and unfused, against the reference backend on
// random graphs and on a synthetic grouped-query model, under the validation layer.
//
// FusionFuzz: the fusion fuzzer's random call sequences (tests/support/FuzzGraph.h), 400 by
// default (SINTER_FUZZ_GRAPHS=N for more), every buffer read back within SEMANTICS.md's f32 NMSE
// of the reference. SyntheticDecode: the "micro" preset
// (4 heads sharing 2 K/V heads, head_dim 64) in Q4_0 and Q8_0, eight decode steps whose logits
// must agree with the reference's, with the fused launches (rms_norm prologues, epilogues,
// attention over the heads) actually taken. Skips when there is no Vulkan device or SPIR-V
// generator.
#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "VulkanTestUtil.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "backends/VulkanBackend.h"
#include "sinter/Factory.h"
#include "tests/support/BackendKinds.h"
#include "tests/support/FuzzCompare.h"
#include "tests/support/FuzzGraph.h"
#include "tests/support/Nmse.h"
#include "tests/support/ScopedEnv.h"
#include "tools/model/Decoder.h"
#include "tools/model/Synthetic.h"

namespace sinter {
namespace {

using runtime::vulkan::VulkanDevice;

// One device and one memo of built kernels for every backend of the suite: each kernel shape
// goes through MLIR once.
struct Shared {
  std::shared_ptr<VulkanDevice> device;
  runtime::vulkan::VulkanKernelBuilder builder;
  /// Built with SINTER_PRECISE=1: activations stay f32 (no int8 x in quantized_matmul).
  runtime::vulkan::VulkanKernelBuilder precise;
  /// SINTER_PRECISE=1 and SINTER_VK_QMATMUL=attnsplit=4: attention split over the positions, 4
  /// workgroups a head; `splitSeen` is the most splits of any kernel it built.
  runtime::vulkan::VulkanKernelBuilder split;
  std::shared_ptr<std::atomic<uint32_t>> splitSeen = std::make_shared<std::atomic<uint32_t>>(0);
};

runtime::vulkan::VulkanKernelBuilder memoized(runtime::vulkan::VulkanKernelBuilder inner) {
  auto memo = std::make_shared<std::pair<
      absl::Mutex, std::map<std::string, absl::StatusOr<runtime::vulkan::VulkanKernel>>>>();
  return [inner, memo](const codegen::KernelSpec &spec) {
    absl::MutexLock lock(&memo->first);
    auto found = memo->second.find(spec.key());
    if (found == memo->second.end())
      found = memo->second.emplace(spec.key(), inner(spec)).first;
    return found->second;
  };
}

Shared &shared() {
  static Shared *s = [] {
    auto *made = new Shared;
    made->device = runtime::vulkan::test::makeDevice();
    if (!made->device || !haveSpirvCodegen())
      return made;
    made->builder = memoized(spirvCodegenBuilder(made->device->caps()));
    const char *was = std::getenv("SINTER_PRECISE");
    std::string saved = was ? was : "";
    setenv("SINTER_PRECISE", "1", 1);
    made->precise = memoized(spirvCodegenBuilder(made->device->caps()));
    const char *knobs = std::getenv("SINTER_VK_QMATMUL");
    std::string savedKnobs = knobs ? knobs : "";
    setenv("SINTER_VK_QMATMUL", "attnsplit=4", 1);
    runtime::vulkan::VulkanKernelBuilder split = spirvCodegenBuilder(made->device->caps());
    if (knobs)
      setenv("SINTER_VK_QMATMUL", savedKnobs.c_str(), 1);
    else
      unsetenv("SINTER_VK_QMATMUL");
    made->split = memoized([split, seen = made->splitSeen](const codegen::KernelSpec &spec) {
      absl::StatusOr<runtime::vulkan::VulkanKernel> k = split(spec);
      if (k.ok() && k->attentionSplits > seen->load())
        seen->store(k->attentionSplits);
      return k;
    });
    if (was)
      setenv("SINTER_PRECISE", saved.c_str(), 1);
    else
      unsetenv("SINTER_PRECISE");
    return made;
  }();
  return *s;
}

/// `builder`: instead of the suite's (precise / split choose among those).
std::unique_ptr<ComputeBackend> vulkanBackend(bool fusion,
                                              std::shared_ptr<runtime::vulkan::VulkanStatsSink> st,
                                              bool precise = false, bool split = false,
                                              runtime::vulkan::VulkanKernelBuilder builder = {}) {
  BackendOptions o;
  o.kind = "vulkan";
  o.fusion = fusion;
  VulkanBackendOptions v;
  v.device = shared().device;
  v.builder = builder   ? builder
              : split   ? shared().split
              : precise ? shared().precise
                        : shared().builder;
  v.stats = std::move(st);
  v.logFallbacks = false;
  absl::StatusOr<std::unique_ptr<ComputeBackend>> b = createVulkanBackend(o, v);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

class VulkanFuzzTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveSpirvCodegen())
      GTEST_SKIP() << "the SPIR-V code generator is not in this build";
    if (!shared().device)
      GTEST_SKIP() << "no Vulkan device on this machine";
  }
  void TearDown() override {
    if (shared().device)
      runtime::vulkan::test::expectNoValidationMessages(*shared().device);
  }
};

TEST_F(VulkanFuzzTest, FusionFuzzGraphsAgreeWithTheReference) {
  int n = test::fuzzGraphCount(400);
  int first = 1;
  if (const char *s = std::getenv("SINTER_FUZZ_SEED"); s && absl::SimpleAtoi(s, &first))
    n = first; // reproduce one graph: SINTER_FUZZ_SEED=N
  auto stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
  int failures = 0;
  for (int seed = first; seed <= n && failures < 5; ++seed) {
    std::unique_ptr<ComputeBackend> fused = vulkanBackend(true, stats);
    std::unique_ptr<ComputeBackend> unfused = vulkanBackend(false, nullptr);
    std::unique_ptr<ComputeBackend> reference =
        *createBackend(sinter::test::backendOptions("reference"));
    ASSERT_TRUE(fused && unfused);
    test::FuzzGraphResult r =
        test::runFuzzGraph(uint32_t(seed), {fused.get(), unfused.get(), reference.get()});
    std::string problem = r.error;
    if (problem.empty())
      if (std::string p = test::compareFuzzBytes(r.bytes[0], r.bytes[2]); !p.empty())
        problem = "fused vs reference: " + p;
    if (problem.empty())
      if (std::string p = test::compareFuzzBytes(r.bytes[1], r.bytes[2]); !p.empty())
        problem = "unfused vs reference: " + p;
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << "graph seed " << seed << ": " << problem;
    }
  }
  runtime::vulkan::VulkanCompilerStats s = stats->get();
  std::printf("%d graphs: %llu dispatches, %llu of fused kernels, %llu fused fallbacks\n",
              n - first + 1, static_cast<unsigned long long>(s.dispatches),
              static_cast<unsigned long long>(s.fusedDispatches),
              static_cast<unsigned long long>(s.fusedFallbacks));
  if (first == 1 && n >= 400) { // the default graphs include fused launches; one seed may not
    EXPECT_GT(s.fusedDispatches, 0u) << "the graphs exercise generated fused kernels";
  }
  RecordProperty("graphs", n);
}

class VulkanSyntheticDecode : public VulkanFuzzTest, public ::testing::WithParamInterface<DType> {};

// The fused decode of a synthetic model against the reference: within 5e-4 where the device's
// integer dot products quantize x (Q4_0, Q8_0; SEMANTICS.md's bound for quantized activations),
// and within the f32 bound with SINTER_PRECISE=1.
TEST_P(VulkanSyntheticDecode, LogitsAgreeWithTheReference) {
  model::SyntheticOptions so;
  so.dtype = GetParam();
  absl::StatusOr<model::ModelWeights> w = model::generatePreset("micro", so);
  ASSERT_TRUE(w.ok()) << w.status();
  auto stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
  std::unique_ptr<ComputeBackend> fused = vulkanBackend(true, stats);
  std::unique_ptr<ComputeBackend> precise = vulkanBackend(true, nullptr, true);
  std::unique_ptr<ComputeBackend> reference =
      *createBackend(sinter::test::backendOptions("reference"));
  ASSERT_TRUE(fused && precise);
  auto a = model::Decoder::create(*fused, *w);
  auto p = model::Decoder::create(*precise, *w);
  auto b = model::Decoder::create(*reference, *w);
  ASSERT_TRUE(a.ok() && p.ok() && b.ok());
  const bool int8 = shared().device->caps().integerDotProduct;
  std::vector<float> got(w->config.vocabSize), f32(w->config.vocabSize), want(w->config.vocabSize);
  for (uint32_t pos = 0; pos < 8; ++pos) {
    uint32_t token = (pos * 37 + 5) % w->config.vocabSize;
    ASSERT_TRUE((*a)->step(token, pos, absl::MakeSpan(got)).ok());
    ASSERT_TRUE((*p)->step(token, pos, absl::MakeSpan(f32)).ok());
    ASSERT_TRUE((*b)->step(token, pos, absl::MakeSpan(want)).ok());
    EXPECT_TRUE(test::nmseWithin<float>(
        got, want, int8 ? test::kQuantizedActivationTolerance : test::kF32Tolerance))
        << "position " << pos;
    EXPECT_TRUE(test::nmseWithin<float>(f32, want, test::kF32Tolerance))
        << "SINTER_PRECISE=1, position " << pos;
    if (int8) {
      EXPECT_NE(got, f32) << "int8 x changes the logits (position " << pos << ")";
    }
  }
  runtime::vulkan::VulkanCompilerStats s = stats->get();
  EXPECT_EQ(s.fusedFallbacks, 0u);
  // Per layer 5 fused launches (Q, K and V stacked as one with rope and the cache writes as
  // epilogues, attention, wo, gate and up as one, down), plus the final norm and classifier;
  // besides them only the embedding row's copy kernel. Gate and up are one launch for Q4_0 and
  // Q8_0 (the split schedule's formats), two for the others.
  const uint32_t perLayer = GetParam() == DType::Q4_0 || GetParam() == DType::Q8_0 ? 5 : 6;
  EXPECT_EQ(s.fusedDispatches, (perLayer * w->config.nLayers + 1) * s.runs);
  EXPECT_LE(s.dispatches, s.fusedDispatches + s.runs);
}

// Decodes `positions` tokens of the micro model in `dtype` through a fused backend whose
// generator refuses (Unimplemented) the specs `refuse` matches, each step's logits against the
// reference; the refusals, the compiler's counters and the layer count come back.
void decodeRefusing(DType dtype, std::function<bool(const codegen::KernelSpec &)> refuse,
                    uint32_t positions, uint32_t *refusals,
                    runtime::vulkan::VulkanCompilerStats *counters, uint32_t *layers) {
  model::SyntheticOptions so;
  so.dtype = dtype;
  absl::StatusOr<model::ModelWeights> w = model::generatePreset("micro", so);
  ASSERT_TRUE(w.ok()) << w.status();
  auto stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
  auto rejected = std::make_shared<std::atomic<uint32_t>>(0);
  runtime::vulkan::VulkanKernelBuilder refusing =
      [inner = shared().precise, rejected,
       refuse](const codegen::KernelSpec &spec) -> absl::StatusOr<runtime::vulkan::VulkanKernel> {
    if (refuse(spec)) {
      ++*rejected;
      return absl::UnimplementedError("test: refused");
    }
    return inner(spec);
  };
  std::unique_ptr<ComputeBackend> fused = vulkanBackend(true, stats, false, false, refusing);
  ASSERT_TRUE(fused);
  std::unique_ptr<ComputeBackend> reference =
      *createBackend(sinter::test::backendOptions("reference"));
  auto a = model::Decoder::create(*fused, *w);
  auto b = model::Decoder::create(*reference, *w);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> got(w->config.vocabSize), want(w->config.vocabSize);
  for (uint32_t pos = 0; pos < positions; ++pos) {
    uint32_t token = (pos * 37 + 5) % w->config.vocabSize;
    ASSERT_TRUE((*a)->step(token, pos, absl::MakeSpan(got)).ok());
    ASSERT_TRUE((*b)->step(token, pos, absl::MakeSpan(want)).ok());
    EXPECT_TRUE(test::nmseWithin<float>(got, want, test::kF32Tolerance)) << "position " << pos;
  }
  *refusals = rejected->load();
  *counters = stats->get();
  *layers = w->config.nLayers;
}

// A generator that cannot build the projections' rope and cache-write epilogues: the kernel is
// planned again with rope and the copies launched on their own (not all its members), and the
// decode still agrees with the reference.
TEST_F(VulkanFuzzTest, ProjectionTailsThatDoNotBuildLaunchOnTheirOwn) {
  auto tails = [](const codegen::KernelSpec &spec) {
    for (const codegen::OpShape &m : spec.epilogue)
      if (m.kind == OpKind::Rope || m.kind == OpKind::CopyBufferOffset)
        return true;
    return false;
  };
  uint32_t refusals = 0, layers = 0;
  runtime::vulkan::VulkanCompilerStats s;
  ASSERT_NO_FATAL_FAILURE(decodeRefusing(DType::Q8_0, tails, 6, &refusals, &s, &layers));
  EXPECT_GT(refusals, 0u);
  EXPECT_GT(s.fusedFallbacks, 0u);
  // Still 7 fused launches a layer (the norm and the projections; gate and up as one), rope
  // launched on its own.
  EXPECT_EQ(s.fusedDispatches, (7u * layers + 1) * s.runs);
  EXPECT_GE(s.dispatches, s.fusedDispatches + layers * s.runs) << "rope";
}

// A generator that cannot build gate and up as one kernel: that kernel is planned again with
// them launched one after the other (the swiglu still gate's epilogue), and the decode agrees.
TEST_F(VulkanFuzzTest, SiblingProductsThatDoNotBuildLaunchApart) {
  uint32_t refusals = 0, layers = 0;
  runtime::vulkan::VulkanCompilerStats s;
  ASSERT_NO_FATAL_FAILURE(
      decodeRefusing(DType::Q4_0, codegen::hasSiblingProduct, 4, &refusals, &s, &layers));
  EXPECT_GT(refusals, 0u);
  EXPECT_GT(s.fusedFallbacks, 0u);
  // 6 fused launches a layer: up, then gate with the swiglu; Q, K and V stay one stacked
  // launch with rope and the cache writes as epilogues (built at the first attempt).
  EXPECT_EQ(s.fusedDispatches, (6u * layers + 1) * s.runs);
}

// A generator that cannot build Q, K and V as one stacked kernel (too many bindings for the
// device, say): the projections are planned again as a launch each, their rope and cache writes
// still epilogues, and the decode agrees.
TEST_F(VulkanFuzzTest, StackedProductsThatDoNotBuildLaunchApart) {
  uint32_t refusals = 0, layers = 0;
  runtime::vulkan::VulkanCompilerStats s;
  auto stacked = [](const codegen::KernelSpec &spec) { return spec.stackedProducts; };
  ASSERT_NO_FATAL_FAILURE(decodeRefusing(DType::Q4_0, stacked, 4, &refusals, &s, &layers));
  EXPECT_GT(refusals, 0u);
  EXPECT_GT(s.fusedFallbacks, 0u);
  EXPECT_EQ(s.fusedDispatches, (7u * layers + 1) * s.runs);
  EXPECT_LE(s.dispatches, s.fusedDispatches + s.runs) << "rope or a copy launched on its own";
}

// SINTER_VK_QMATMUL=stack=0 (side-by-side timing): Q, K and V launch one by one, the decode
// unchanged in what it computes.
TEST_F(VulkanFuzzTest, StackOffLaunchesTheProjectionsOneByOne) {
  model::SyntheticOptions so;
  so.dtype = DType::Q4_0;
  absl::StatusOr<model::ModelWeights> w = model::generatePreset("micro", so);
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<std::vector<float>> logits;
  std::vector<runtime::vulkan::VulkanCompilerStats> counters;
  for (const char *knobs : {"stack=0", "stack=1"}) {
    auto stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
    std::unique_ptr<ComputeBackend> b;
    {
      test::ScopedEnv env("SINTER_VK_QMATMUL", knobs); // read when the backend is created
      b = vulkanBackend(true, stats);
    }
    ASSERT_TRUE(b);
    auto d = model::Decoder::create(*b, *w);
    ASSERT_TRUE(d.ok()) << d.status();
    std::vector<float> got(w->config.vocabSize);
    for (uint32_t pos = 0; pos < 3; ++pos)
      ASSERT_TRUE((*d)->step((pos * 37 + 5) % w->config.vocabSize, pos, absl::MakeSpan(got)).ok());
    logits.push_back(got);
    counters.push_back(stats->get());
  }
  const uint32_t layers = w->config.nLayers;
  EXPECT_EQ(counters[0].fusedDispatches, (7u * layers + 1) * counters[0].runs) << "stack=0";
  EXPECT_EQ(counters[1].fusedDispatches, (5u * layers + 1) * counters[1].runs) << "stack=1";
  EXPECT_EQ(counters[0].fusedFallbacks + counters[1].fusedFallbacks, 0u);
  EXPECT_TRUE(test::nmseWithin<float>(logits[0], logits[1], test::kQuantizedActivationTolerance));
}

// The validation layer's synchronization validation over a decode, fused, unfused and fused with
// overlapped flushes: every hazard between the plan's commands (dispatches, the parameter words'
// copy, the embedding row's copy, the read of the logits), and between the overlapped pieces'
// submissions, has its barrier; the three agree (the overlapped decode exactly with the fused).
TEST_F(VulkanFuzzTest, SynchronizationValidationFindsNoHazardInADecode) {
  const char *env = std::getenv("SINTER_VK_VALIDATION");
  if (env && std::string(env) == "0")
    GTEST_SKIP() << "SINTER_VK_VALIDATION=0: synchronization validation needs the layer";
  runtime::vulkan::VulkanDeviceOptions options;
  options.syncValidation = true;
  std::shared_ptr<VulkanDevice> device = runtime::vulkan::test::makeDevice(options);
  ASSERT_TRUE(device) << "the suite's device was created, this one with sync validation was not";
  model::SyntheticOptions so;
  so.dtype = DType::Q4_0;
  absl::StatusOr<model::ModelWeights> w = model::generatePreset("micro", so);
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<std::vector<float>> logits;
  // Fused, unfused, and fused with overlapped flushes (a piece at every add after 10 calls:
  // submissions without a fence between them, where a missing dependency would show).
  for (int mode : {0, 1, 2}) {
    const bool fusion = mode != 1;
    BackendOptions o;
    o.kind = "vulkan";
    o.fusion = fusion;
    VulkanBackendOptions v;
    v.device = device;
    v.builder = shared().builder;
    v.logFallbacks = false;
    v.overlapCalls = mode == 2 ? 10 : 0;
    v.overlapGrowth = 1;
    const uint64_t noWaitBefore = device->noWaitSubmissions();
    absl::StatusOr<std::unique_ptr<ComputeBackend>> b = createVulkanBackend(o, v);
    ASSERT_TRUE(b.ok()) << b.status();
    auto d = model::Decoder::create(**b, *w);
    ASSERT_TRUE(d.ok()) << d.status();
    std::vector<float> got(w->config.vocabSize);
    // A hazard fails the flush (the plan checks the layer's messages after each).
    const char *what = mode == 2 ? "overlapped" : fusion ? "fused" : "unfused";
    for (uint32_t pos = 0; pos < 3; ++pos) {
      absl::Status st = (*d)->step((pos * 37 + 5) % w->config.vocabSize, pos, absl::MakeSpan(got));
      ASSERT_TRUE(st.ok()) << what << ", position " << pos << ": " << st;
    }
    if (mode == 2) {
      EXPECT_GT(device->noWaitSubmissions(), noWaitBefore) << "the pieces ran without a wait";
    }
    logits.push_back(got);
    runtime::vulkan::test::expectNoValidationMessages(*device);
  }
  EXPECT_TRUE(test::nmseWithin<float>(logits[0], logits[1], test::kQuantizedActivationTolerance));
  EXPECT_EQ(logits[2], logits[0]) << "overlapped flushes run the same kernels";
}

// Attention split over the positions (attnsplit=4, scratch and an atomic merge per head) agrees
// with the reference over 24 positions: shares empty at first, then uneven.
TEST_F(VulkanFuzzTest, SplitAttentionDecodeAgreesWithTheReference) {
  model::SyntheticOptions so;
  so.dtype = DType::Q8_0;
  absl::StatusOr<model::ModelWeights> w = model::generatePreset("micro", so);
  ASSERT_TRUE(w.ok()) << w.status();
  auto stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
  std::unique_ptr<ComputeBackend> split = vulkanBackend(true, stats, true, true);
  std::unique_ptr<ComputeBackend> reference =
      *createBackend(sinter::test::backendOptions("reference"));
  ASSERT_TRUE(split);
  auto a = model::Decoder::create(*split, *w);
  auto b = model::Decoder::create(*reference, *w);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> got(w->config.vocabSize), want(w->config.vocabSize);
  for (uint32_t pos = 0; pos < 24; ++pos) {
    uint32_t token = (pos * 37 + 5) % w->config.vocabSize;
    ASSERT_TRUE((*a)->step(token, pos, absl::MakeSpan(got)).ok());
    ASSERT_TRUE((*b)->step(token, pos, absl::MakeSpan(want)).ok());
    EXPECT_TRUE(test::nmseWithin<float>(got, want, test::kF32Tolerance)) << "position " << pos;
  }
  EXPECT_EQ(shared().splitSeen->load(), 4u) << "the attention kernels were not split";
  runtime::vulkan::VulkanCompilerStats s = stats->get();
  EXPECT_EQ(s.fusedFallbacks, 0u);
  // Q, K and V stacked as one launch, gate and up as one.
  EXPECT_EQ(s.fusedDispatches, (5u * w->config.nLayers + 1) * s.runs);
}

// Two layers' attention in one flush sharing the scores buffer, with an add between them that
// gives the second its own q: the first layer's scores are dead when the second writes at least
// as many positions, so its launch skips them (VulkanCompilerStats::deadScores); with fewer, the
// first layer's weights past the second's positions stay observable and are stored. Either way
// every buffer agrees with the reference, and `deadscores=0` stores them all.
TEST_F(VulkanFuzzTest, DeadAttentionScoresAreSkippedAndLiveOnesKept) {
  const uint32_t heads = 4, group = 2, dim = 64, maxT = 40, kvStride = heads / group * dim;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  auto values = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = u(rng);
    return v;
  };
  const std::vector<float> q = values(heads * dim), dq = values(heads * dim);
  const std::vector<float> k = values(maxT * kvStride), v = values(maxT * kvStride);
  struct Case {
    uint32_t first, second;
    bool knobOff;
    uint64_t dead;
  };
  for (const Case &c : {Case{33, 33, false, 1}, Case{20, 37, false, 1}, Case{37, 20, false, 0},
                        Case{33, 33, true, 0}}) {
    const std::string what = "seq_len " + std::to_string(c.first) + " then " +
                             std::to_string(c.second) + (c.knobOff ? ", deadscores=0" : "");
    auto stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
    std::unique_ptr<ComputeBackend> gpu;
    {
      std::optional<test::ScopedEnv> env;
      if (c.knobOff)
        env.emplace("SINTER_VK_QMATMUL", "deadscores=0");
      gpu = vulkanBackend(true, stats);
    }
    ASSERT_TRUE(gpu);
    std::unique_ptr<ComputeBackend> ref = *createBackend(sinter::test::backendOptions("reference"));
    std::vector<std::vector<float>> scores, outs;
    for (ComputeBackend *b : {gpu.get(), ref.get()}) {
      auto upload = [&](const std::vector<float> &x) {
        BufferHandle h = b->allocate(4 * x.size()).value();
        EXPECT_TRUE(
            b->copyToDevice(
                 absl::MakeConstSpan(reinterpret_cast<const uint8_t *>(x.data()), 4 * x.size()), h)
                .ok());
        return h;
      };
      BufferHandle hq = upload(q), hdq = upload(dq), hk = upload(k), hv = upload(v);
      BufferHandle hs = b->allocate(4 * maxT).value(), ho = b->allocate(4 * heads * dim).value();
      ASSERT_TRUE(b->synchronize().ok());
      for (uint32_t seqLen : {c.first, c.second}) {
        for (uint32_t h = 0; h < heads; ++h) {
          uint32_t kv = h / group * dim;
          ASSERT_TRUE(b->attnScore(hq, hk, hs, dim, seqLen, h * dim, kv, kvStride).ok());
          ASSERT_TRUE(b->softmax(hs, hs, seqLen).ok());
          ASSERT_TRUE(b->attnValue(hs, hv, ho, dim, seqLen, kv, kvStride, h * dim).ok());
        }
        ASSERT_TRUE(b->add(hq, hdq, hq, heads * dim).ok()); // the next layer's q
      }
      std::vector<float> sc(maxT), out(heads * dim);
      ASSERT_TRUE(
          b->copyFromDevice(hs, absl::MakeSpan(reinterpret_cast<uint8_t *>(sc.data()), 4 * maxT))
              .ok());
      ASSERT_TRUE(b->copyFromDevice(
                       ho, absl::MakeSpan(reinterpret_cast<uint8_t *>(out.data()), 4 * out.size()))
                      .ok());
      scores.push_back(sc);
      outs.push_back(out);
    }
    EXPECT_TRUE(test::nmseWithin<float>(scores[0], scores[1], test::kF32Tolerance))
        << what << ": scores";
    EXPECT_TRUE(test::nmseWithin<float>(outs[0], outs[1], test::kF32Tolerance)) << what << ": out";
    runtime::vulkan::VulkanCompilerStats st = stats->get();
    EXPECT_GE(st.fusedDispatches, 2u) << what << ": the attention launches were not taken";
    EXPECT_EQ(st.deadScores, c.dead) << what;
  }
}

// With replay, a copy whose offsets are plan parameters runs as the generated copy kernel; from a
// buffer larger than the device lets a kernel bind (maxStorageBufferRange: an embedding table on
// lavapipe) it goes back to vkCmdCopyBuffer, and copies the right rows.
TEST_F(VulkanFuzzTest, CopiesFromBuffersTooWideToBindUseTheCopyCommand) {
  const uint64_t range = shared().device->caps().maxStorageBufferRange;
  if (range > (uint64_t(1) << 30))
    GTEST_SKIP() << "maxStorageBufferRange is " << range
                 << " bytes: a buffer above it is too large for this test";
  auto stats = std::make_shared<runtime::vulkan::VulkanStatsSink>();
  std::unique_ptr<ComputeBackend> b = vulkanBackend(false, stats);
  ASSERT_TRUE(b);
  const uint64_t rowBytes = 4096, rows = range / rowBytes + 2;
  BufferHandle table = *b->allocate(rows * rowBytes), row = *b->allocate(rowBytes);
  std::vector<uint8_t> marks(rowBytes);
  for (uint64_t r : {uint64_t(0), uint64_t(7), rows - 1}) { // a row below the range and one above
    for (uint64_t i = 0; i < rowBytes; ++i)
      marks[i] = uint8_t(r * 31 + i);
    BufferHandle staged = *b->allocate(rowBytes);
    ASSERT_TRUE(b->copyToDevice(marks, staged).ok());
    ASSERT_TRUE(b->copyBufferOffset(staged, table, 0, r * rowBytes, rowBytes).ok());
    ASSERT_TRUE(b->free(staged).ok());
  }
  std::vector<uint8_t> got(rowBytes);
  for (int round = 0; round < 2; ++round)
    for (uint64_t r : {rows - 1, uint64_t(7), uint64_t(0), rows - 1}) {
      ASSERT_TRUE(b->copyBufferOffset(table, row, r * rowBytes, 0, rowBytes).ok());
      ASSERT_TRUE(b->copyFromDevice(row, absl::MakeSpan(got)).ok());
      for (uint64_t i = 0; i < rowBytes; ++i)
        ASSERT_EQ(got[i], uint8_t(r * 31 + i)) << "row " << r << " byte " << i;
    }
  EXPECT_GT(stats->get().copies, 0u);
}

INSTANTIATE_TEST_SUITE_P(DTypes, VulkanSyntheticDecode, ::testing::Values(DType::Q4_0, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType> &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace
} // namespace sinter
