// CpuBackendTest.cpp - tests the `cpu` backend kind (backends/CpuBackend.cpp, EagerBackend.cpp):
// its three modes build and decode like the reference, eager runs every call on its own,
// disabledFusions reaches the fusion pipeline, and kernels that fail to compile fall back to the
// reference kernels with the reference's results byte for byte.
#include "backends/CpuBackend.h"

#include <gmock/gmock.h>

#include "backends/EagerBackend.h"
#include "runtime/LazyBackend.h"
#include "sinter/Factory.h"
#include "tests/support/BackendKinds.h"
#include "tests/support/Nmse.h"
#include "tools/model/Decoder.h"
#include "tools/model/Synthetic.h"

namespace sinter {
namespace {

using ::testing::HasSubstr;

BackendOptions cpuOptions(bool fusion, bool eager = false) {
  BackendOptions o;
  o.kind = "cpu";
  o.fusion = fusion;
  o.eager = eager;
  return o;
}

model::ModelWeights microModel(DType dtype) {
  model::SyntheticOptions so;
  so.dtype = dtype;
  so.withVocab = false;
  absl::StatusOr<model::ModelWeights> w = model::generatePreset("micro", so);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *w : model::ModelWeights{};
}

// The logits of `steps` decode steps (token i+1 at position i), concatenated.
std::vector<float> decode(ComputeBackend &backend, const model::ModelWeights &weights,
                          uint32_t steps) {
  absl::StatusOr<std::unique_ptr<model::Decoder>> decoder =
      model::Decoder::create(backend, weights);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (!decoder.ok())
    return {};
  std::vector<float> all;
  for (uint32_t pos = 0; pos < steps; ++pos) {
    absl::StatusOr<std::vector<float>> logits = (*decoder)->step(pos + 1, pos);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok())
      return {};
    all.insert(all.end(), logits->begin(), logits->end());
  }
  return all;
}

std::vector<float> referenceDecode(const model::ModelWeights &weights, uint32_t steps) {
  std::unique_ptr<ComputeBackend> reference =
      *createBackend(sinter::test::backendOptions("reference"));
  return decode(*reference, weights, steps);
}

TEST(CpuBackendTest, TheThreeModesBuildWithTheirNames) {
  struct Mode {
    BackendOptions options;
    const char *name;
  };
  for (const Mode &mode :
       {Mode{cpuOptions(true), "sinter-cpu"}, Mode{cpuOptions(false), "sinter-cpu-unfused"},
        Mode{cpuOptions(true, /*eager=*/true), "sinter-cpu-eager"}}) {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(mode.options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->name(), mode.name);
    EXPECT_EQ((*backend)->deviceInfo().kind, BackendKind::Cpu) << mode.name;
    EXPECT_THAT((*backend)->deviceInfo().name, HasSubstr("cpu-jit")) << mode.name;
  }
}

TEST(CpuBackendTest, EveryModeDecodesLikeTheReference) {
  for (DType dtype : {DType::F32, DType::Q4_0, DType::Q8_0}) {
    model::ModelWeights weights = microModel(dtype);
    std::vector<float> want = referenceDecode(weights, 4);
    ASSERT_FALSE(want.empty());
    for (bool eager : {false, true})
      for (bool fusion : {true, false}) {
        if (eager && !fusion)
          continue; // eager ignores fusion
        std::unique_ptr<ComputeBackend> cpu = *createBackend(cpuOptions(fusion, eager));
        std::vector<float> got = decode(*cpu, weights, 4);
        // Q4_0/Q8_0 kernels may quantize the activations (SEMANTICS.md's looser tolerance).
        double tolerance =
            dtype == DType::F32 ? test::kF32Tolerance : test::kQuantizedActivationTolerance;
        EXPECT_TRUE(test::nmseWithin<float>(got, want, tolerance))
            << cpu->name() << " " << dtypeName(dtype);
      }
  }
}

TEST(CpuBackendTest, EagerRunsEveryCallBeforeItReturns) {
  std::unique_ptr<ComputeBackend> backend = *createBackend(cpuOptions(true, /*eager=*/true));
  auto *eager = dynamic_cast<EagerBackend *>(backend.get());
  ASSERT_NE(eager, nullptr);
  BufferHandle a = *backend->allocate(64 * 4), b = *backend->allocate(64 * 4);
  std::vector<float> ones(64, 1.0f);
  ASSERT_TRUE(
      backend->copyToDevice({reinterpret_cast<const uint8_t *>(ones.data()), 64 * 4}, a).ok());
  ASSERT_TRUE(backend->add(a, a, b, 64).ok());
  ASSERT_TRUE(backend->silu(b, b, 64).ok());
  ASSERT_TRUE(backend->elementMul(a, b, b, 64).ok());
  runtime::LazyStats stats = eager->stats();
  EXPECT_EQ(stats.callsRecorded, 3u);
  EXPECT_EQ(stats.flushes, 3u) << "one flush per call";
  EXPECT_EQ(stats.kernelsLaunched, 3u);
  // A call the validation rejects fails at the call and runs nothing.
  EXPECT_FALSE(backend->add(a, a, b, 65).ok());
  EXPECT_EQ(eager->stats().flushes, 3u);
  std::vector<float> out(64);
  ASSERT_TRUE(backend->copyFromDevice(b, {reinterpret_cast<uint8_t *>(out.data()), 64 * 4}).ok());
  EXPECT_NEAR(out[0], 2.0f / (1.0f + std::exp(-2.0f)), 1e-6f);
}

// rms_norm feeding a matrix-vector product and a residual add: the fusion patterns merge them;
// with every pattern switched off the plan has one kernel per call.
TEST(CpuBackendTest, DisabledFusionsReachTheFusionPipeline) {
  auto kernelsOf = [](BackendOptions options) -> uint64_t {
    std::unique_ptr<ComputeBackend> backend = *createBackend(options);
    auto *lazy = dynamic_cast<runtime::LazyBackend *>(backend.get());
    EXPECT_NE(lazy, nullptr);
    if (!lazy)
      return 0;
    const uint32_t n = 64;
    BufferHandle x = *backend->allocate(n * 4), w = *backend->allocate(n * 4);
    BufferHandle m = *backend->allocate(n * n * 4), h = *backend->allocate(n * 4);
    BufferHandle y = *backend->allocate(n * 4);
    std::vector<float> values(n * n, 0.5f);
    auto bytes = [&](size_t count) {
      return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t *>(values.data()), count * 4);
    };
    EXPECT_TRUE(backend->copyToDevice(bytes(n), x).ok());
    EXPECT_TRUE(backend->copyToDevice(bytes(n), w).ok());
    EXPECT_TRUE(backend->copyToDevice(bytes(n * n), m).ok());
    EXPECT_TRUE(backend->rmsNorm(x, w, h, n, 1e-5f).ok());
    EXPECT_TRUE(backend->quantizedMatmul(m, h, y, n, n, DType::F32).ok());
    EXPECT_TRUE(backend->add(x, y, x, n).ok());
    EXPECT_TRUE(backend->synchronize().ok());
    return lazy->stats().kernelsLaunched;
  };
  BackendOptions fused = cpuOptions(true);
  BackendOptions allOff = cpuOptions(true);
  allOff.disabledFusions = {"all"};
  uint64_t fusedKernels = kernelsOf(fused);
  EXPECT_EQ(kernelsOf(allOff), 3u);
  EXPECT_LT(fusedKernels, 3u);
  EXPECT_EQ(kernelsOf(cpuOptions(false)), 3u);
}

// Every kernel fails to compile: each op runs on the reference kernel, so the decode matches the
// reference backend byte for byte, fused and unfused.
TEST(CpuBackendTest, KernelsThatFailToCompileGiveTheReferenceResults) {
  model::ModelWeights weights = microModel(DType::Q4_0);
  std::vector<float> want = referenceDecode(weights, 3);
  ASSERT_FALSE(want.empty());
  for (bool fusion : {true, false}) {
    int failed = 0;
    codegen::CpuCompilerOptions co;
    co.failCompile = [&failed](const OpCall &) {
      ++failed;
      return true;
    };
    co.logFallbacks = false;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> cpu = createCpuBackend(cpuOptions(fusion), co);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    std::vector<float> got = decode(**cpu, weights, 3);
    EXPECT_GT(failed, 0) << "the hook was asked";
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
        << (*cpu)->name() << ": not the reference's bytes";
  }
}

// Only the contractions fail: they run on the reference kernel, the rest on compiled kernels.
TEST(CpuBackendTest, APartialCompileFailureStillDecodesLikeTheReference) {
  model::ModelWeights weights = microModel(DType::F32);
  std::vector<float> want = referenceDecode(weights, 3);
  auto compiler = codegen::CpuCompiler::create([] {
    codegen::CpuCompilerOptions co;
    co.failCompile = [](const OpCall &op) { return op.kind == OpKind::QuantizedMatmul; };
    co.logFallbacks = false;
    return co;
  }());
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  std::shared_ptr<codegen::CpuCompiler> shared(std::move(*compiler));
  for (bool fusion : {true, false}) {
    std::unique_ptr<ComputeBackend> cpu = *createCpuBackend(cpuOptions(fusion), shared);
    std::vector<float> got = decode(*cpu, weights, 3);
    EXPECT_TRUE(test::nmseWithin<float>(got, want, test::kF32Tolerance)) << cpu->name();
  }
  EXPECT_GT(shared->stats().fallbacks, 0u);
  EXPECT_GT(shared->stats().kernelsCompiled, 0u);
}

TEST(CpuBackendTest, AMissingCompilerIsInvalidArgument) {
  EXPECT_EQ(
      createCpuBackend(cpuOptions(true), std::shared_ptr<codegen::CpuCompiler>()).status().code(),
      absl::StatusCode::kInvalidArgument);
}

} // namespace
} // namespace sinter
