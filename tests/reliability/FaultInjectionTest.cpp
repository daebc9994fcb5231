// FaultInjectionTest.cpp - every fault site of runtime/FaultInjection.h on every backend kind.
//
// For each fault: the right Status at the right call (the call itself for allocate and host
// reads; the next synchronize or copy_from_device for deferred work, or the op call itself on the
// eager kind), buffers the failed work did not touch keep their bytes, and the backend accepts
// new work afterwards, computing what the reference computes. A kernel that fails to compile
// falls back to unfused kernels: results stay identical (bit for bit when every kernel fails,
// since the last fallback is the reference kernel).
#include "runtime/FaultInjection.h"

#include <atomic>
#include <cstdio>
#include <ostream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/ReferenceBackend.h"
#include "runtime/LazyBackend.h"
#include "runtime/PlanInterpreter.h"
#include "sinter/Factory.h"
#include "sinter/sinter.h"
#include "tests/reliability/MiniDecoder.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"

namespace sinter::test {
namespace {

using runtime::fault::ScopedFault;
using runtime::fault::Site;
using ::testing::HasSubstr;

std::atomic<uint64_t> faultsInjected{0};

// Counts the faults a ScopedFault injected when it goes out of scope.
struct CountedFault : ScopedFault {
  using ScopedFault::ScopedFault;
  ~CountedFault() { faultsInjected += fired(); }
};

class FaultFigures : public ::testing::Environment {
public:
  void TearDown() override {
    std::printf("fault injection: %llu faults injected\n",
                static_cast<unsigned long long>(faultsInjected.load()));
  }
};
const auto *const kFigures = ::testing::AddGlobalTestEnvironment(new FaultFigures);

struct Kind {
  const char *label;
  BackendOptions options;
  bool eager = false;
  bool bitExact = false; ///< runs the reference kernels, so equal bytes are expected
  bool compiles = false; ///< has a kernel compiler (KernelCompile applies)
};

void PrintTo(const Kind &kind, std::ostream *os) { *os << kind.label; }

// The Vulkan kind calls the KernelCompile site for fused kernels only
// (runtime/vulkan/VulkanPlan.cpp): a plan without one does not reach it.
bool compileSiteMissing(const Kind &kind, const ScopedFault &fault) {
  return std::string(kind.label) == "vulkan" && fault.hits() == 0;
}

BackendOptions opts(const char *kind, bool fusion = true, bool eager = false) {
  BackendOptions o;
  o.kind = kind;
  o.fusion = fusion;
  o.eager = eager;
  o.memoryLimitBytes = 4 << 20;
  return o;
}

const Kind kKinds[] = {
    {"lazy", opts("lazy"), false, true, false},
    {"lazy_unfused", opts("lazy", false), false, true, false},
    {"cpu", opts("cpu"), false, false, true},
    {"cpu_unfused", opts("cpu", false), false, false, true},
    {"cpu_eager", opts("cpu", true, true), true, false, true},
    {"vulkan", opts("vulkan"), false, false, true},
};

// The decoder's output on the backend under test against the reference decoder's.
void expectSameOutput(const Kind &kind, const std::vector<uint8_t> &got,
                      const std::vector<uint8_t> &want, const std::string &what) {
  if (kind.bitExact) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  // Q8_0 weights: the compiled kernels quantize activations to 8 bits.
  expectNmse(bytesFloats(got), bytesFloats(want), kQuantizedActivationTolerance, what);
}

class FaultTest : public ::testing::TestWithParam<Kind> {
protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> made = createBackend(GetParam().options);
    if (!made.ok())
      GTEST_SKIP() << "backend kind '" << GetParam().options.kind
                   << "' is not available here: " << made.status();
    backend_ = std::move(*made);
    reference_ = std::make_unique<ReferenceBackend>();
  }

  // Runs `token` on both decoders and compares the outputs.
  void stepBoth(MiniDecoder &d, MiniDecoder &r, uint64_t token) {
    ASSERT_TRUE(d.step(token).ok());
    ASSERT_TRUE(r.step(token).ok());
    std::vector<uint8_t> got, want;
    ASSERT_TRUE(d.read(got).ok());
    ASSERT_TRUE(r.read(want).ok());
    expectSameOutput(GetParam(), got, want, "token " + std::to_string(token));
  }

  std::unique_ptr<ComputeBackend> backend_;
  std::unique_ptr<ComputeBackend> reference_;
};

TEST_P(FaultTest, AllocateFailureCreatesNothingAndTheBackendGoesOn) {
  const uint64_t limit = GetParam().options.memoryLimitBytes;
  {
    CountedFault fault(Site::Allocate);
    absl::StatusOr<BufferHandle> failed = backend_->allocate(limit);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(failed.status().message()), HasSubstr("injected fault allocate"));
    EXPECT_EQ(fault.fired(), 1u);
  }
  // Nothing was created: the whole limit is still there.
  absl::StatusOr<BufferHandle> whole = backend_->allocate(limit);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(backend_->free(*whole).ok());
  MiniDecoder d(*backend_, 1), r(*reference_, 1);
  ASSERT_TRUE(d.status().ok() && r.status().ok());
  // A failure inside a step (the churn allocation): the step stops there; a retry computes it.
  stepBoth(d, r, 0);
  {
    CountedFault fault(Site::Allocate);
    absl::Status step = d.step(1);
    EXPECT_EQ(step.code(), absl::StatusCode::kResourceExhausted) << step;
    EXPECT_EQ(fault.fired(), 1u);
  }
  ASSERT_TRUE(backend_->synchronize().ok());
  stepBoth(d, r, 1);
  stepBoth(d, r, 2);
}

TEST_P(FaultTest, FlushAllocationFailureIsDeferredAndTouchesNothing) {
  MiniDecoder d(*backend_, 2), r(*reference_, 2);
  ASSERT_TRUE(d.status().ok() && r.status().ok());
  BufferHandle sentinel = uploadFloats(*backend_, MiniDecoder::input(12345));
  stepBoth(d, r, 0);
  stepBoth(d, r, 1);
  std::vector<uint8_t> before;
  ASSERT_TRUE(d.read(before).ok());
  std::vector<uint8_t> weightsBefore = downloadBytes(*backend_, d.weights(), 64 * 64 * 4);
  absl::Status reported;
  {
    CountedFault fault(Site::FlushAllocate);
    absl::Status step = d.step(2);
    absl::Status sync = backend_->synchronize();
    EXPECT_EQ(fault.fired(), 1u);
    // Lazy kinds report it at the flush point; the eager kind at the op call that flushed.
    if (GetParam().eager) {
      EXPECT_TRUE(sync.ok()) << sync;
      reported = step;
    } else {
      EXPECT_TRUE(step.ok()) << step;
      reported = sync;
    }
  }
  EXPECT_EQ(reported.code(), absl::StatusCode::kResourceExhausted) << reported;
  EXPECT_THAT(std::string(reported.message()), HasSubstr("deferred work failed"));
  EXPECT_THAT(std::string(reported.message()), HasSubstr("injected fault flush-allocate"));
  // The failed flush ran no kernel: the output, the weights and an unrelated buffer are intact.
  std::vector<uint8_t> after;
  ASSERT_TRUE(d.read(after).ok());
  EXPECT_EQ(after, before);
  EXPECT_EQ(downloadBytes(*backend_, d.weights(), 64 * 64 * 4), weightsBefore);
  EXPECT_EQ(downloadBytes(*backend_, sentinel, MiniDecoder::kDim * 4),
            floatBytes(MiniDecoder::input(12345)));
  // The error was reported once; the retried step and later ones compute the reference's.
  EXPECT_TRUE(backend_->synchronize().ok());
  stepBoth(d, r, 2);
  stepBoth(d, r, 3);
  ASSERT_TRUE(backend_->free(sentinel).ok());
}

TEST_P(FaultTest, FlushFailureIsReportedByCopyFromDevice) {
  MiniDecoder d(*backend_, 3), r(*reference_, 3);
  ASSERT_TRUE(d.status().ok() && r.status().ok());
  stepBoth(d, r, 0);
  if (GetParam().eager)
    GTEST_SKIP() << "the eager kind flushes at each op call (covered by the synchronize test)";
  ASSERT_TRUE(d.step(1).ok());
  std::vector<uint8_t> out;
  {
    CountedFault fault(Site::FlushAllocate);
    absl::Status read = d.read(out);
    EXPECT_EQ(read.code(), absl::StatusCode::kResourceExhausted) << read;
    EXPECT_THAT(std::string(read.message()), HasSubstr("flush at copy_from_device"));
  }
  stepBoth(d, r, 1);
}

TEST_P(FaultTest, HostReadFailureLeavesTheBufferReadable) {
  MiniDecoder d(*backend_, 4), r(*reference_, 4);
  ASSERT_TRUE(d.status().ok() && r.status().ok());
  stepBoth(d, r, 0);
  std::vector<uint8_t> want;
  ASSERT_TRUE(r.read(want).ok());
  std::vector<uint8_t> got;
  {
    CountedFault fault(Site::HostRead);
    absl::Status read = d.read(got);
    EXPECT_EQ(read.code(), absl::StatusCode::kInternal) << read;
    EXPECT_THAT(std::string(read.message()), HasSubstr("copy_from_device: injected fault"));
    EXPECT_EQ(fault.fired(), 1u);
  }
  ASSERT_TRUE(d.read(got).ok());
  expectSameOutput(GetParam(), got, want, "read after a failed read");
  stepBoth(d, r, 1);
}

TEST_P(FaultTest, EveryKernelFailingToCompileGivesTheReferenceBitForBit) {
  if (!GetParam().compiles)
    GTEST_SKIP() << "kind '" << GetParam().label << "' compiles no kernels";
  // A fresh backend, so that no kernel is cached from before the fault was armed.
  CountedFault fault(Site::KernelCompile, 0, -1);
  absl::StatusOr<std::unique_ptr<ComputeBackend>> made = createBackend(GetParam().options);
  ASSERT_TRUE(made.ok()) << made.status();
  MiniDecoder d(**made, 5), r(*reference_, 5);
  ASSERT_TRUE(d.status().ok() && r.status().ok());
  ::testing::internal::CaptureStderr();
  for (uint64_t token = 0; token < 4; ++token) {
    ASSERT_TRUE(d.step(token).ok());
    ASSERT_TRUE(r.step(token).ok());
    std::vector<uint8_t> got, want;
    ASSERT_TRUE(d.read(got).ok());
    ASSERT_TRUE(r.read(want).ok());
    if (GetParam().options.kind == "vulkan")
      expectSameOutput(GetParam(), got, want, "token " + std::to_string(token));
    else
      EXPECT_EQ(got, want) << "token " << token; // the last fallback is the reference kernel
  }
  std::string log = ::testing::internal::GetCapturedStderr();
  if (compileSiteMissing(GetParam(), fault))
    GTEST_SKIP() << "codegen/spirv does not call fault::fires(Site::KernelCompile) yet";
  EXPECT_GT(fault.fired(), 0u);
  EXPECT_THAT(log, HasSubstr("failed to compile")) << "a fallback must say so in the log";
}

TEST_P(FaultTest, SomeKernelsFailingToCompileChangeNoResult) {
  if (!GetParam().compiles)
    GTEST_SKIP() << "kind '" << GetParam().label << "' compiles no kernels";
  absl::StatusOr<std::unique_ptr<ComputeBackend>> made = createBackend(GetParam().options);
  ASSERT_TRUE(made.ok()) << made.status();
  MiniDecoder d(**made, 6), r(*reference_, 6);
  ASSERT_TRUE(d.status().ok() && r.status().ok());
  ::testing::internal::CaptureStderr();
  {
    // The 3rd and 4th kernels looked up fail; the rest compile. On the vulkan kind only fused
    // kernels have a fallback (their members), and the mini decoder's plans have one: it fails,
    // its single-op kernels build.
    const bool vulkan = GetParam().options.kind == "vulkan";
    CountedFault fault(Site::KernelCompile, vulkan ? 0 : 2, vulkan ? 1 : 2);
    for (uint64_t token = 0; token < 3; ++token)
      stepBoth(d, r, token);
    if (compileSiteMissing(GetParam(), fault)) {
      (void)::testing::internal::GetCapturedStderr();
      GTEST_SKIP() << "codegen/spirv does not call fault::fires(Site::KernelCompile) yet";
    }
    EXPECT_EQ(fault.fired(), vulkan ? 1u : 2u);
  }
  // Disarmed: the backend goes on with the kernels it has.
  for (uint64_t token = 3; token < 6; ++token)
    stepBoth(d, r, token);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("failed to compile"));
}

INSTANTIATE_TEST_SUITE_P(Kinds, FaultTest, ::testing::ValuesIn(kKinds),
                         [](const ::testing::TestParamInfo<Kind> &info) {
                           return std::string(info.param.label);
                         });

// A kernel that fails in the middle of a plan (the plan interpreter's fault hook): kernels
// before it ran, the failing kernel and the ones after it did not, and the message names it.
TEST(FaultMidPlanTest, KernelsAfterTheFailingOneDoNotRun) {
  std::atomic<bool> failSilu{true};
  runtime::LazyBackendOptions options;
  options.compiler = std::make_unique<runtime::InterpreterCompiler>([&](const OpCall &op) {
    if (failSilu && op.kind == OpKind::Silu)
      return absl::UnavailableError("injected device fault");
    return absl::OkStatus();
  });
  runtime::LazyBackend lazy(std::move(options));
  std::vector<float> a = {1, 2, 3, 4};
  BufferHandle ha = uploadFloats(lazy, a);
  BufferHandle hb = uploadFloats(lazy, {9, 9, 9, 9});
  BufferHandle hc = uploadFloats(lazy, {7, 7, 7, 7});
  BufferHandle hd = uploadFloats(lazy, {5, 5, 5, 5});
  ASSERT_TRUE(lazy.add(ha, ha, hb, 4).ok());
  ASSERT_TRUE(lazy.silu(hb, hc, 4).ok());
  ASSERT_TRUE(lazy.add(hb, hb, hd, 4).ok());
  absl::Status sync = lazy.synchronize();
  EXPECT_EQ(sync.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(sync.message()), HasSubstr("'silu'"));
  EXPECT_THAT(std::string(sync.message()), HasSubstr("injected device fault"));
  faultsInjected += 1;
  EXPECT_EQ(downloadFloats(lazy, ha, 4), a);
  EXPECT_EQ(downloadFloats(lazy, hb, 4), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(downloadFloats(lazy, hc, 4), (std::vector<float>{7, 7, 7, 7}));
  EXPECT_EQ(downloadFloats(lazy, hd, 4), (std::vector<float>{5, 5, 5, 5}));
  failSilu = false;
  ASSERT_TRUE(lazy.add(hb, hb, hd, 4).ok());
  EXPECT_EQ(downloadFloats(lazy, hd, 4), (std::vector<float>{4, 8, 12, 16}));
}

// The C ABI returns the same codes and keeps the message.
TEST(FaultCApiTest, InjectedFaultsComeBackAsStatusCodes) {
  sinter_backend *backend = nullptr;
  ASSERT_EQ(sinter_backend_create("lazy", &backend), SINTER_OK);
  sinter_buffer buffer = 77;
  {
    CountedFault fault(Site::Allocate);
    EXPECT_EQ(sinter_allocate(backend, 64, &buffer), SINTER_RESOURCE_EXHAUSTED);
    EXPECT_EQ(buffer, 0u);
    EXPECT_THAT(std::string(sinter_last_error()), HasSubstr("injected fault allocate"));
  }
  ASSERT_EQ(sinter_allocate(backend, 64, &buffer), SINTER_OK);
  ASSERT_EQ(sinter_silu(backend, buffer, buffer, 16), SINTER_OK);
  {
    CountedFault fault(Site::FlushAllocate);
    EXPECT_EQ(sinter_synchronize(backend), SINTER_RESOURCE_EXHAUSTED);
  }
  ASSERT_EQ(sinter_silu(backend, buffer, buffer, 16), SINTER_OK);
  uint8_t bytes[64];
  {
    CountedFault fault(Site::HostRead);
    EXPECT_EQ(sinter_copy_from_device(backend, buffer, bytes, sizeof bytes), SINTER_INTERNAL);
  }
  EXPECT_EQ(sinter_copy_from_device(backend, buffer, bytes, sizeof bytes), SINTER_OK);
  EXPECT_EQ(sinter_free(backend, buffer), SINTER_OK);
  sinter_backend_destroy(backend);
}

// Vulkan: device lost and out of device memory at the queue submit. Skips (saying why) where the
// vulkan kind is not built, has no device, or its runtime does not call the submit site yet.
class VulkanSubmitFaultTest : public ::testing::TestWithParam<Site> {};

TEST_P(VulkanSubmitFaultTest, SubmitFailureIsDeferredAndTheBackendRecovers) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> made = createBackend(opts("vulkan"));
  if (!made.ok())
    GTEST_SKIP() << "vulkan kind not available: " << made.status();
  ComputeBackend &vk = **made;
  ReferenceBackend reference;
  MiniDecoder d(vk, 7), r(reference, 7);
  ASSERT_TRUE(d.status().ok() && r.status().ok());
  BufferHandle sentinel = uploadFloats(vk, MiniDecoder::input(777));
  ASSERT_TRUE(d.step(0).ok());
  ASSERT_TRUE(r.step(0).ok());
  std::vector<uint8_t> before, want;
  ASSERT_TRUE(d.read(before).ok());
  absl::Status sync;
  uint64_t hits = 0;
  {
    CountedFault fault(GetParam());
    // The first submit fails: the flush at synchronize, or an upload the step made directly
    // (the Vulkan store stages copy_to_device at once when nothing is pending). Either way the
    // error comes back from the call whose submit failed.
    absl::Status stepped = d.step(1);
    sync = stepped.ok() ? vk.synchronize() : stepped;
    hits = fault.hits();
  }
  if (hits == 0)
    GTEST_SKIP() << "runtime/vulkan does not call fault::injectedSubmitResult() at its queue "
                    "submit yet";
  if (GetParam() == Site::SubmitDeviceLost) {
    EXPECT_EQ(sync.code(), absl::StatusCode::kUnavailable) << sync;
    // A lost device stays lost: later work fails with Unavailable (never crashes) until the
    // engine creates a new backend, which works.
    absl::Status again = d.step(1);
    std::vector<uint8_t> out;
    if (again.ok())
      again = d.read(out);
    if (!again.ok()) {
      EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable) << again;
      absl::StatusOr<std::unique_ptr<ComputeBackend>> fresh = createBackend(opts("vulkan"));
      ASSERT_TRUE(fresh.ok()) << fresh.status();
      ReferenceBackend reference2;
      MiniDecoder d2(**fresh, 7), r2(reference2, 7);
      for (uint64_t token = 0; token < 2; ++token) {
        std::vector<uint8_t> got;
        ASSERT_TRUE(d2.step(token).ok());
        ASSERT_TRUE(r2.step(token).ok());
        ASSERT_TRUE(d2.read(got).ok());
        ASSERT_TRUE(r2.read(want).ok());
        expectNmse(bytesFloats(got), bytesFloats(want), kQuantizedActivationTolerance);
      }
      return;
    }
  } else {
    EXPECT_EQ(sync.code(), absl::StatusCode::kResourceExhausted) << sync;
  }
  EXPECT_EQ(downloadBytes(vk, sentinel, MiniDecoder::kDim * 4),
            floatBytes(MiniDecoder::input(777)));
  std::vector<uint8_t> after;
  ASSERT_TRUE(d.read(after).ok());
  EXPECT_EQ(after, before) << "the failed submit's work must not have run";
  for (uint64_t token = 1; token < 3; ++token) {
    ASSERT_TRUE(d.step(token).ok());
    ASSERT_TRUE(r.step(token).ok());
    std::vector<uint8_t> got;
    ASSERT_TRUE(d.read(got).ok());
    ASSERT_TRUE(r.read(want).ok());
    expectNmse(bytesFloats(got), bytesFloats(want), kQuantizedActivationTolerance);
  }
  ASSERT_TRUE(vk.free(sentinel).ok());
}

INSTANTIATE_TEST_SUITE_P(Sites, VulkanSubmitFaultTest,
                         ::testing::Values(Site::SubmitDeviceLost, Site::SubmitOutOfDeviceMemory),
                         [](const ::testing::TestParamInfo<Site> &info) {
                           return info.param == Site::SubmitDeviceLost ? "DeviceLost"
                                                                       : "OutOfDeviceMemory";
                         });

TEST(FaultSiteTest, InertUnlessArmedAndCountsHits) {
  EXPECT_FALSE(runtime::fault::fires(Site::KernelCompile));
  {
    ScopedFault fault(Site::KernelCompile, 1, 2);
    EXPECT_FALSE(runtime::fault::fires(Site::KernelCompile)); // skipped
    EXPECT_FALSE(runtime::fault::fires(Site::HostRead));      // another site
    EXPECT_TRUE(runtime::fault::fires(Site::KernelCompile));
    EXPECT_TRUE(runtime::fault::fires(Site::KernelCompile));
    EXPECT_FALSE(runtime::fault::fires(Site::KernelCompile)); // count used up
    EXPECT_EQ(fault.hits(), 4u);
    EXPECT_EQ(fault.fired(), 2u);
  }
  EXPECT_FALSE(runtime::fault::fires(Site::KernelCompile));
  {
    ScopedFault fault(Site::SubmitOutOfDeviceMemory);
    EXPECT_EQ(runtime::fault::injectedSubmitResult(), -2);
    EXPECT_EQ(runtime::fault::injectedSubmitResult(), 0);
  }
  EXPECT_EQ(runtime::fault::check(Site::Allocate, "allocate"), absl::OkStatus());
}

} // namespace
} // namespace sinter::test
