// VulkanBackendTest.cpp - the vulkan backend (LazyBackend + VulkanBufferStore + VulkanCompiler)
// on hand-written SPIR-V kernels (add, element_mul, silu), so the runtime is tested without the
// SPIR-V code generator: one submission per flush, barriers only on dependencies, staged uploads,
// copies, descriptor reuse over many flushes, and the error paths. Validation on, zero messages.
#include "backends/VulkanBackend.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "VulkanTestUtil.h"
#include "backends/ReferenceBackend.h"
#include "runtime/LazyBackend.h"
#include "runtime/vulkan/DescriptorCache.h"
#include "runtime/vulkan/VulkanMemory.h"
#include "support/Ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using runtime::vulkan::KernelBinary;
using runtime::vulkan::VulkanDevice;
using runtime::vulkan::VulkanKernel;
using runtime::vulkan::VulkanStatsSink;
using ::testing::HasSubstr;

// Kernels for add, element_mul and silu from tests/unit/vulkan/*.spvasm; everything else is
// Unimplemented, as a code generator without that kernel would say.
runtime::vulkan::VulkanKernelBuilder handWrittenKernels() {
  return [](const codegen::KernelSpec &spec) -> absl::StatusOr<VulkanKernel> {
    if (!spec.prologue.empty() || !spec.epilogue.empty())
      return absl::UnimplementedError("fused kernels are not hand-written");
    const char *file = nullptr;
    uint32_t buffers = 3;
    switch (spec.anchor.kind) {
    case OpKind::Add:
      file = "add_f32";
      break;
    case OpKind::ElementMul:
      file = "mul_f32";
      break;
    case OpKind::Silu:
      file = "silu_f32";
      buffers = 2;
      break;
    default:
      return absl::UnimplementedError(absl::StrCat("no hand-written kernel for ", spec.name()));
    }
    VulkanKernel k;
    k.name = file;
    k.binary = runtime::vulkan::test::loadKernel(file, buffers, 4);
    k.pushConstantInts = {0}; // size
    k.grid = [](const int64_t *ints) {
      return std::array<uint32_t, 3>{uint32_t((ints[0] + 63) / 64), 1, 1};
    };
    return k;
  };
}

double nmse(const std::vector<float> &out, const std::vector<float> &ref);

class VulkanBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto device = runtime::vulkan::test::makeDevice(deviceOptions());
    if (!device)
      GTEST_SKIP() << "no Vulkan device on this machine";
    device_ = std::move(device);
  }
  void TearDown() override {
    backend_.reset();
    if (device_)
      runtime::vulkan::test::expectNoValidationMessages(*device_);
  }
  virtual runtime::vulkan::VulkanDeviceOptions deviceOptions() {
    runtime::vulkan::VulkanDeviceOptions o;
    o.timestamps = true; // only read when SINTER_STATS asks for kernel times
    return o;
  }

  /// make()'s VulkanBackendOptions::overlapCalls.
  size_t overlap_ = 0;

  ComputeBackend &make(bool fusion = false, uint64_t memoryLimit = 0, bool eager = false,
                       bool replay = true) {
    BackendOptions options;
    options.kind = "vulkan";
    options.fusion = fusion;
    options.eager = eager;
    options.memoryLimitBytes = memoryLimit;
    VulkanBackendOptions vulkan;
    vulkan.device = device_;
    vulkan.builder = handWrittenKernels();
    vulkan.stats = stats_;
    vulkan.logFallbacks = false;
    vulkan.replay = replay;
    vulkan.overlapCalls = overlap_;
    auto backend = createVulkanBackend(options, vulkan);
    EXPECT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(backend).value();
    return *backend_;
  }

  BufferHandle buffer(ComputeBackend &b, const std::vector<float> &values) {
    BufferHandle h = b.allocate(values.size() * 4).value();
    EXPECT_TRUE(b.copyToDevice(runtime::vulkan::test::asBytes(values), h).ok());
    return h;
  }
  std::vector<float> read(ComputeBackend &b, BufferHandle h, size_t n) {
    std::vector<float> out(n);
    absl::Status s = b.copyFromDevice(h, runtime::vulkan::test::asWritableBytes(out));
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  std::vector<float> random(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-3, 3);
    std::vector<float> v(n);
    for (float &x : v)
      x = d(rng);
    return v;
  }

  // attn_score with a growing seq_len through the generated kernels (indirect grids, words in
  // the parameter buffer) against the reference: the body of the Grids... tests below.
  void checkIndirectGrids() {
    BackendOptions options;
    options.kind = "vulkan";
    options.fusion = false;
    VulkanBackendOptions vulkan;
    vulkan.device = device_;
    vulkan.stats = stats_;
    auto backend = createVulkanBackend(options, vulkan);
    ASSERT_TRUE(backend.ok()) << backend.status();
    ComputeBackend &b = **backend;
    ReferenceBackend ref;
    const uint32_t headDim = 64, maxT = 100;
    std::vector<float> q = random(headDim, 31), k = random(headDim * maxT, 32);
    BufferHandle hq = buffer(b, q), hk = buffer(b, k), hs = b.allocate(maxT * 4).value();
    BufferHandle rq = buffer(ref, q), rk = buffer(ref, k), rs = ref.allocate(maxT * 4).value();
    for (uint32_t t = 1; t <= maxT; ++t) {
      ASSERT_TRUE(b.attnScore(hq, hk, hs, headDim, t, 0, 0, headDim).ok());
      ASSERT_TRUE(ref.attnScore(rq, rk, rs, headDim, t, 0, 0, headDim).ok());
      std::vector<float> got = read(b, hs, t), want = read(ref, rs, t);
      ASSERT_LT(nmse(got, want), 1e-7) << "seq_len " << t;
    }
    runtime::vulkan::VulkanCompilerStats st = stats_->get();
    EXPECT_EQ(st.runs, maxT);
    EXPECT_LE(st.recordings, 3u) << st.replays << " replays over " << st.plans << " plans";
    EXPECT_GE(st.replays, maxT - 3);
  }

  std::shared_ptr<VulkanDevice> device_;
  std::shared_ptr<VulkanStatsSink> stats_ = std::make_shared<VulkanStatsSink>();
  std::unique_ptr<ComputeBackend> backend_;
};

double nmse(const std::vector<float> &out, const std::vector<float> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(out[i]))
      return INFINITY;
    num += (out[i] - ref[i]) * double(out[i] - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return den == 0 ? num : num / den;
}

TEST_F(VulkanBackendTest, ReportsTheVulkanDevice) {
  ComputeBackend &b = make();
  DeviceInfo info = b.deviceInfo();
  EXPECT_EQ(info.kind, BackendKind::Vulkan);
  EXPECT_THAT(info.name, HasSubstr(device_->caps().deviceName));
  EXPECT_GT(info.memoryBytes, 0u);
  EXPECT_EQ(b.name(), "sinter-vulkan-unfused");
}

TEST_F(VulkanBackendTest, ChainRunsInOneSubmissionWithABarrierPerDependency) {
  ComputeBackend &b = make();
  const uint32_t n = 1000;
  std::vector<float> a = random(n, 1), c = random(n, 2);
  BufferHandle ha = buffer(b, a), hc = buffer(b, c);
  BufferHandle t = b.allocate(n * 4).value(), u = b.allocate(n * 4).value(),
               v = b.allocate(n * 4).value();
  ASSERT_TRUE(b.add(ha, hc, t, n).ok());
  ASSERT_TRUE(b.elementMul(t, hc, u, n).ok());
  ASSERT_TRUE(b.silu(u, v, n).ok());
  std::vector<float> out = read(b, v, n);
  auto s = stats_->get();
  EXPECT_EQ(s.runs, 1u);
  EXPECT_EQ(s.submissions, 1u);
  EXPECT_EQ(s.dispatches, 3u);
  EXPECT_EQ(s.barriers, 2u) << "mul reads add's output, silu reads mul's";
  EXPECT_GT(s.waitSeconds, 0.0) << "the host waited for the fence";
  EXPECT_GT(s.presubmitSeconds, 0.0) << "the host resolved and recorded before submitting";
  ReferenceBackend ref;
  BufferHandle ra = buffer(ref, a), rc = buffer(ref, c);
  BufferHandle rt = ref.allocate(n * 4).value(), ru = ref.allocate(n * 4).value(),
               rv = ref.allocate(n * 4).value();
  ASSERT_TRUE(ref.add(ra, rc, rt, n).ok());
  ASSERT_TRUE(ref.elementMul(rt, rc, ru, n).ok());
  ASSERT_TRUE(ref.silu(ru, rv, n).ok());
  EXPECT_LE(nmse(out, read(ref, rv, n)), 1e-7);
  EXPECT_EQ(read(b, t, n), read(ref, rt, n)) << "add is exact";
}

TEST_F(VulkanBackendTest, IndependentOpsShareNoBarrierAndWriteAfterReadGetsOne) {
  ComputeBackend &b = make();
  const uint32_t n = 256;
  std::vector<float> a = random(n, 3), c = random(n, 4);
  BufferHandle ha = buffer(b, a), hc = buffer(b, c);
  BufferHandle x = b.allocate(n * 4).value(), y = b.allocate(n * 4).value();
  ASSERT_TRUE(b.add(ha, hc, x, n).ok());
  ASSERT_TRUE(b.elementMul(ha, hc, y, n).ok());
  ASSERT_TRUE(b.synchronize().ok());
  EXPECT_EQ(stats_->get().barriers, 0u) << "two readers of a and c, distinct outputs";
  // Overwriting a after reading it (WAR), in place (a = a * c reads and writes a in one op).
  ASSERT_TRUE(b.add(ha, hc, x, n).ok());
  ASSERT_TRUE(b.elementMul(ha, hc, ha, n).ok());
  std::vector<float> gotX = read(b, x, n), gotA = read(b, ha, n);
  EXPECT_EQ(stats_->get().barriers, 1u);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(gotX[i], a[i] + c[i]) << i;
    ASSERT_EQ(gotA[i], a[i] * c[i]) << i;
  }
}

TEST_F(VulkanBackendTest, UploadsInsideAFlushAreOrderedWithTheKernels) {
  ComputeBackend &b = make();
  const uint32_t n = 300;
  std::vector<float> a = random(n, 5), a2 = random(n, 6), c = random(n, 7);
  BufferHandle ha = buffer(b, a), hc = buffer(b, c);
  BufferHandle x = b.allocate(n * 4).value(), y = b.allocate(n * 4).value();
  ASSERT_TRUE(b.add(ha, hc, x, n).ok());
  // `a` is in the pending trace: this upload is recorded and runs between the two adds.
  ASSERT_TRUE(b.copyToDevice(runtime::vulkan::test::asBytes(a2), ha).ok());
  ASSERT_TRUE(b.add(ha, hc, y, n).ok());
  std::vector<float> gotX = read(b, x, n), gotY = read(b, y, n);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(gotX[i], a[i] + c[i]) << i;
    ASSERT_EQ(gotY[i], a2[i] + c[i]) << i;
  }
  auto s = stats_->get();
  EXPECT_EQ(s.uploads, 1u);
  EXPECT_EQ(s.submissions, 1u);
  EXPECT_EQ(s.barriers, 2u) << "WAR before the upload, RAW after it";
}

class SmallStagingTest : public VulkanBackendTest {
  runtime::vulkan::VulkanDeviceOptions deviceOptions() override {
    runtime::vulkan::VulkanDeviceOptions o;
    o.stagingBytes = 256 << 10;
    return o;
  }
};

TEST_F(SmallStagingTest, UploadsLargerThanTheStagingRingSplitTheSubmission) {
  ComputeBackend &b = make();
  const uint32_t n = 300000; // 1.2 MB, about five rings
  std::vector<float> a = random(n, 8), a2 = random(n, 9), c = random(n, 10);
  BufferHandle ha = buffer(b, a), hc = buffer(b, c);
  BufferHandle x = b.allocate(n * 4).value(), y = b.allocate(n * 4).value();
  ASSERT_TRUE(b.add(ha, hc, x, n).ok());
  ASSERT_TRUE(b.copyToDevice(runtime::vulkan::test::asBytes(a2), ha).ok());
  ASSERT_TRUE(b.add(ha, hc, y, n).ok());
  std::vector<float> gotX = read(b, x, n), gotY = read(b, y, n);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(gotX[i], a[i] + c[i]) << i;
    ASSERT_EQ(gotY[i], a2[i] + c[i]) << i;
  }
  EXPECT_GE(stats_->get().submissions, 5u);
}

TEST_F(VulkanBackendTest, CopiesMatchTheReferenceIncludingOverlappingMoves) {
  ComputeBackend &b = make();
  ReferenceBackend ref;
  const uint32_t n = 1024;
  std::vector<float> a = random(n, 11);
  BufferHandle ha = buffer(b, a), ra = buffer(ref, a);
  BufferHandle hb = b.allocate(n * 4).value(), rb = ref.allocate(n * 4).value();
  for (ComputeBackend *be :
       {static_cast<ComputeBackend *>(&b), static_cast<ComputeBackend *>(&ref)}) {
    BufferHandle src = be == &b ? ha : ra, dst = be == &b ? hb : rb;
    ASSERT_TRUE(be->copyBuffer(src, dst, 1000).ok());
    ASSERT_TRUE(be->copyBufferOffset(src, dst, 7, 2001, 333).ok());
    ASSERT_TRUE(be->copyBufferOffset(dst, dst, 0, 100, 2000).ok()) << "overlap, forward";
    ASSERT_TRUE(be->copyBufferOffset(dst, dst, 150, 3, 1500).ok()) << "overlap, backward";
    ASSERT_TRUE(be->copyBufferOffset(src, dst, 0, 0, 0).ok()) << "empty";
  }
  std::vector<float> got = read(b, hb, n), want = read(ref, rb, n);
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << "at float " << i;
  EXPECT_EQ(stats_->get().copies, 4u);
}

TEST_F(VulkanBackendTest, ReplayedFlushesReuseDescriptorSets) {
  ComputeBackend &b = make();
  const uint32_t n = 128;
  std::vector<float> a = random(n, 12), c = random(n, 13);
  BufferHandle ha = buffer(b, a), hc = buffer(b, c);
  BufferHandle x = b.allocate(n * 4).value(), y = b.allocate(n * 4).value();
  uint64_t setsAfterWarmup = 0;
  for (int iter = 0; iter < 300; ++iter) {
    a[0] = float(iter);
    ASSERT_TRUE(b.copyToDevice(runtime::vulkan::test::asBytes(a), ha).ok());
    ASSERT_TRUE(b.add(ha, hc, x, n).ok());
    ASSERT_TRUE(b.elementMul(x, hc, y, n).ok());
    std::vector<float> got = read(b, y, n);
    ASSERT_EQ(got[0], (float(iter) + c[0]) * c[0]) << iter;
    if (iter == 1)
      setsAfterWarmup = device_->descriptors().stats().setsAllocated;
  }
  EXPECT_EQ(device_->descriptors().stats().setsAllocated, setsAfterWarmup);
  EXPECT_EQ(stats_->get().plans, 1u) << "one structure, one plan";
  EXPECT_EQ(stats_->get().submissions, 300u);
  // The upload's payload changes every flush, its staging range does not: after the first
  // flush every one submits the command buffer the first recorded.
  EXPECT_EQ(stats_->get().recordings, 1u);
  EXPECT_EQ(stats_->get().replays, 299u);
}

TEST_F(VulkanBackendTest, ChangedCommandsAreRecordedAgain) {
  ComputeBackend &b = make();
  const uint32_t n = 256;
  std::vector<float> a = random(n, 21), c = random(n, 22);
  BufferHandle ha = buffer(b, a), hc = buffer(b, c), x = b.allocate(n * 4).value();
  auto addOf = [&](uint32_t count, int iter) {
    ASSERT_TRUE(b.copyBuffer(hc, x, n * 4).ok()); // x = c, then x[0, count) = a + c
    ASSERT_TRUE(b.add(ha, hc, x, count).ok());
    std::vector<float> got = read(b, x, n);
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], i < count ? a[i] + c[i] : c[i])
          << "count " << count << " at " << i << ", iteration " << iter;
  };
  // The hand-written kernels push their integers: a new count is a new push constant (and
  // grid), so the commands change and the run records; the same count again replays.
  for (int iter = 0; iter < 3; ++iter)
    addOf(256, iter);
  uint64_t recorded = stats_->get().recordings, replayed = stats_->get().replays;
  EXPECT_GE(replayed, 1u);
  addOf(64, 3);
  addOf(64, 4);
  addOf(256, 5);
  EXPECT_EQ(stats_->get().recordings, recorded + 2) << "64 records, 64 replays, 256 records";
  EXPECT_EQ(stats_->get().replays, replayed + 1);
  // Descriptor sets forgotten (as when buffers are destroyed): the kept command buffer binds
  // stale sets and must not be submitted again.
  device_->descriptors().trim(/*force=*/true);
  addOf(256, 6);
  EXPECT_EQ(stats_->get().recordings, recorded + 3);
  addOf(256, 7);
  EXPECT_EQ(stats_->get().replays, replayed + 2);
}

// attn_score's grid follows seq_len (a workgroup per few positions): once seq_len is a plan
// parameter, the generated kernel is dispatched indirectly, the grid written with the words, so
// a growing context keeps replaying one command buffer.
TEST_F(VulkanBackendTest, GridsThatFollowAParameterAreDispatchedIndirectly) {
  if (!haveSpirvCodegen())
    GTEST_SKIP() << "the SPIR-V code generator is not in this build";
  checkIndirectGrids();
}

// The parameter words staged and copied at the start of each submission, as on a device without
// device-local host-visible memory: off by option, and with an arena too small for the plan.
class StagedParamsTest : public VulkanBackendTest {
  runtime::vulkan::VulkanDeviceOptions deviceOptions() override {
    runtime::vulkan::VulkanDeviceOptions o;
    o.directParams = false;
    return o;
  }
};
class TinyParamArenaTest : public VulkanBackendTest {
  runtime::vulkan::VulkanDeviceOptions deviceOptions() override {
    runtime::vulkan::VulkanDeviceOptions o;
    o.directParamsBytes = 16;
    return o;
  }
};

TEST_F(StagedParamsTest, GridsThatFollowAParameterAreDispatchedIndirectly) {
  if (!haveSpirvCodegen())
    GTEST_SKIP() << "the SPIR-V code generator is not in this build";
  EXPECT_EQ(device_->allocateMappedParams(64).status().code(), absl::StatusCode::kNotFound);
  checkIndirectGrids();
}

TEST_F(TinyParamArenaTest, GridsThatFollowAParameterAreDispatchedIndirectly) {
  if (!haveSpirvCodegen())
    GTEST_SKIP() << "the SPIR-V code generator is not in this build";
  absl::StatusCode full = device_->allocateMappedParams(64).status().code();
  EXPECT_TRUE(full == absl::StatusCode::kResourceExhausted || full == absl::StatusCode::kNotFound)
      << full;
  checkIndirectGrids();
}

TEST_F(VulkanBackendTest, ReplayOffRecordsEveryFlush) {
  ComputeBackend &b = make(/*fusion=*/false, /*memoryLimit=*/0, /*eager=*/false, /*replay=*/false);
  const uint32_t n = 64;
  std::vector<float> a = random(n, 23);
  BufferHandle ha = buffer(b, a), y = b.allocate(n * 4).value();
  for (int iter = 0; iter < 4; ++iter) {
    ASSERT_TRUE(b.add(ha, ha, y, n).ok());
    EXPECT_EQ(read(b, y, n)[5], a[5] + a[5]);
  }
  EXPECT_EQ(stats_->get().replays, 0u);
  EXPECT_EQ(stats_->get().recordings, stats_->get().submissions);
}

// An op the kernel builder has no kernel for runs on the host, in order between the device's
// launches: a flush never fails (or drops its other work) for want of a kernel.
TEST_F(VulkanBackendTest, AnOpWithoutAKernelRunsOnTheHostInOrder) {
  ComputeBackend &b = make();
  const uint32_t n = 64;
  std::vector<float> a = random(n, 14);
  BufferHandle ha = buffer(b, a), y = b.allocate(n * 4).value(), z = b.allocate(n * 4).value();
  for (int token = 0; token < 2; ++token) { // the second flush replays the compiled plan
    ASSERT_TRUE(b.add(ha, ha, y, n).ok());  // device
    ASSERT_TRUE(b.softmax(y, z, n).ok());   // host: no hand-written softmax
    ASSERT_TRUE(b.add(z, z, y, n).ok());    // device, after the host step
    ASSERT_TRUE(b.synchronize().ok());
  }
  ReferenceBackend ref;
  BufferHandle ra = buffer(ref, a), ry = ref.allocate(n * 4).value(),
               rz = ref.allocate(n * 4).value();
  ASSERT_TRUE(ref.add(ra, ra, ry, n).ok());
  ASSERT_TRUE(ref.softmax(ry, rz, n).ok());
  ASSERT_TRUE(ref.add(rz, rz, ry, n).ok());
  EXPECT_LE(nmse(read(b, y, n), read(ref, ry, n)), 1e-12);
  EXPECT_LE(nmse(read(b, z, n), read(ref, rz, n)), 1e-12);
  EXPECT_EQ(stats_->get().hostSteps, 1u) << "compiled once";
  EXPECT_EQ(stats_->get().hostRuns, 2u) << "run each flush";
}

TEST_F(VulkanBackendTest, FreeRightAfterRecordingAReadIsLegal) {
  ComputeBackend &b = make();
  const uint32_t n = 100;
  std::vector<float> a = random(n, 15);
  BufferHandle ha = buffer(b, a), y = b.allocate(n * 4).value();
  ASSERT_TRUE(b.add(ha, ha, y, n).ok());
  ASSERT_TRUE(b.free(ha).ok());
  EXPECT_EQ(b.free(ha).code(), absl::StatusCode::kNotFound);
  std::vector<float> got = read(b, y, n);
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], a[i] + a[i]);
}

TEST_F(VulkanBackendTest, NewBuffersAreZeroEvenWhenMemoryIsRecycled) {
  ComputeBackend &b = make();
  BufferHandle h = buffer(b, std::vector<float>(1000, 7.0f));
  ASSERT_TRUE(b.free(h).ok());
  BufferHandle again = b.allocate(4000).value();
  EXPECT_EQ(read(b, again, 1000), std::vector<float>(1000, 0.0f));
}

TEST_F(VulkanBackendTest, DeviceLossAtAFlushIsUnavailable) {
  ComputeBackend &b = make();
  BufferHandle a = buffer(b, random(64, 16)), y = b.allocate(256).value();
  ASSERT_TRUE(b.add(a, a, y, 64).ok());
  device_->injectSubmitFaultForTesting(VK_ERROR_DEVICE_LOST);
  absl::Status s = b.synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("VK_ERROR_DEVICE_LOST"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("add_f32"));
  EXPECT_TRUE(device_->deviceLost());
}

TEST_F(VulkanBackendTest, OutOfDeviceMemoryAtAFlushIsResourceExhausted) {
  ComputeBackend &b = make();
  BufferHandle a = buffer(b, random(64, 17)), y = b.allocate(256).value();
  ASSERT_TRUE(b.add(a, a, y, 64).ok());
  device_->injectSubmitFaultForTesting(VK_ERROR_OUT_OF_DEVICE_MEMORY);
  EXPECT_EQ(b.synchronize().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(b.add(a, a, y, 64).ok());
  EXPECT_TRUE(b.synchronize().ok()) << "not sticky, unlike device loss";
}

TEST_F(VulkanBackendTest, AllocationBeyondTheLimitIsResourceExhausted) {
  ComputeBackend &b = make(/*fusion=*/false, /*memoryLimit=*/4096);
  auto big = b.allocate(8192);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("8192 bytes requested"));
  EXPECT_TRUE(b.allocate(4096).ok());
  device_->memory().injectOutOfMemoryForTesting(1);
  ComputeBackend &c = make();
  // The first shared block exists already; a request above the block size needs a new one.
  EXPECT_EQ(c.allocate(512ull << 20).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(VulkanBackendTest, FusedKernelsFallBackToTheirMembers) {
  ComputeBackend &b = make(/*fusion=*/true);
  EXPECT_EQ(b.name(), "sinter-vulkan");
  ReferenceBackend ref;
  const uint32_t n = 512;
  std::vector<float> a = random(n, 18), c = random(n, 19);
  std::vector<float> results[2];
  for (int r = 0; r < 2; ++r) {
    ComputeBackend &be = r == 0 ? b : static_cast<ComputeBackend &>(ref);
    BufferHandle ha = buffer(be, a), hc = buffer(be, c);
    BufferHandle s = be.allocate(n * 4).value(), m = be.allocate(n * 4).value(),
                 y = be.allocate(n * 4).value();
    ASSERT_TRUE(be.silu(ha, s, n).ok());
    ASSERT_TRUE(be.elementMul(s, hc, m, n).ok());
    ASSERT_TRUE(be.add(m, ha, y, n).ok());
    results[r] = read(be, y, n);
  }
  EXPECT_LE(nmse(results[0], results[1]), 1e-7);
  EXPECT_EQ(stats_->get().dispatches, 3u);
}

TEST_F(VulkanBackendTest, EagerModeRunsAndWaitsForEveryCall) {
  ComputeBackend &b = make(/*fusion=*/false, /*memoryLimit=*/0, /*eager=*/true);
  EXPECT_EQ(b.name(), "sinter-vulkan-eager");
  const uint32_t n = 200;
  std::vector<float> a = random(n, 21);
  BufferHandle ha = buffer(b, a), x = b.allocate(n * 4).value(), y = b.allocate(n * 4).value();
  ASSERT_TRUE(b.add(ha, ha, x, n).ok());
  EXPECT_EQ(stats_->get().submissions, 1u) << "ran before add returned";
  ASSERT_TRUE(b.elementMul(x, ha, y, n).ok());
  EXPECT_EQ(stats_->get().submissions, 2u);
  std::vector<float> got = read(b, y, n);
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], (a[i] + a[i]) * a[i]) << i;
  EXPECT_EQ(stats_->get().barriers, 0u) << "one op per command buffer";
}

// Overlapped flushes (LazyBackendOptions::overlapCalls): an add that leaves 2 calls pending
// flushes them without waiting for the device, and everything after must still see that work
// done: the next flush's kernels, a read, a write of a buffer the running work reads (it lands
// after the reads), and a free of a buffer it reads (its bytes stay until the work is done).
// Under the validation layer, which reports a command buffer freed or submitted again while
// pending and a descriptor pool reset under work in flight.
TEST_F(VulkanBackendTest, OverlappedFlushesReturnBeforeTheDeviceAndOrderWhatFollows) {
  overlap_ = 2;
  ComputeBackend &b = make();
  auto &lazy = dynamic_cast<runtime::LazyBackend &>(b);
  const uint32_t n = 5000;
  std::vector<float> a = random(n, 41), c = random(n, 42);
  BufferHandle ha = buffer(b, a), hc = buffer(b, c);
  BufferHandle x = b.allocate(n * 4).value(), y = b.allocate(n * 4).value();
  BufferHandle z = b.allocate(n * 4).value(), w = b.allocate(n * 4).value();
  const uint64_t noWaitBefore = device_->noWaitSubmissions();
  for (int iter = 0; iter < 4; ++iter) {
    BufferHandle hd = buffer(b, c); // freed below while the overlapped flush reads it
    const uint64_t overlapsBefore = lazy.stats().overlapFlushes;
    ASSERT_TRUE(b.add(ha, hc, x, n).ok());       // 1 pending: no flush
    ASSERT_TRUE(b.elementMul(x, hd, y, n).ok()); // 2
    ASSERT_TRUE(b.add(y, ha, z, n).ok());        // 3 pending after an add: flushed, not waited for
    EXPECT_EQ(lazy.pendingEntries(), 0u) << "iteration " << iter;
    EXPECT_EQ(lazy.stats().overlapFlushes - overlapsBefore, 1u) << "iteration " << iter;
    // The running work reads a and d: write a, free d.
    std::vector<float> aOld = a;
    a[iter] += 1000.0f;
    ASSERT_TRUE(b.copyToDevice(runtime::vulkan::test::asBytes(a), ha).ok());
    ASSERT_TRUE(b.free(hd).ok());
    ASSERT_TRUE(b.elementMul(z, hc, w, n).ok()); // 1 pending: a complete flush at the read
    std::vector<float> gotW = read(b, w, n), gotZ = read(b, z, n);
    for (uint32_t i = 0; i < n; ++i) {
      const float zi = (aOld[i] + c[i]) * c[i] + aOld[i];
      ASSERT_EQ(gotZ[i], zi) << "z at " << i << ", iteration " << iter;
      ASSERT_EQ(gotW[i], zi * c[i]) << "w at " << i << ", iteration " << iter;
    }
    ASSERT_TRUE(b.synchronize().ok());
  }
  // The overlapped pieces ran without a wait (the first of them too: its recording is kept).
  EXPECT_EQ(device_->noWaitSubmissions() - noWaitBefore, 4u);
  EXPECT_GE(stats_->get().replays, 3u) << "each piece replays its command buffer";
  // Nothing pending and an overlapped flush last: synchronize waits for it.
  ASSERT_TRUE(b.add(ha, hc, x, n).ok());
  ASSERT_TRUE(b.add(x, hc, y, n).ok());
  EXPECT_EQ(lazy.pendingEntries(), 0u);
  ASSERT_TRUE(b.synchronize().ok());
  std::vector<float> gotY = read(b, y, n);
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(gotY[i], (a[i] + c[i]) + c[i]) << "y at " << i;
}

// copy_from_device of a buffer the pending work writes: the flush's own submission copies the
// bytes out (a decode step's logits: one submission a token, not two), and the same read every
// flush keeps the command buffer replayed. A read of a buffer no pending work touches, and a
// read of part of a buffer, come back right too.
TEST_F(VulkanBackendTest, AReadOfPendingWorkComesBackInTheFlushSubmission) {
  ComputeBackend &b = make();
  auto &lazy = dynamic_cast<runtime::LazyBackend &>(b);
  const uint32_t n = 1000;
  std::vector<float> a = random(n, 31), c = random(n, 32);
  BufferHandle ha = buffer(b, a), hc = buffer(b, c);
  BufferHandle x = b.allocate(n * 4).value(), y = b.allocate(n * 4).value();
  auto expectY = [&](const std::vector<float> &got, size_t count, int iter) {
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[i], (a[i] + c[i]) * c[i]) << "y at " << i << ", iteration " << iter;
  };
  for (int iter = 0; iter < 5; ++iter) {
    a[0] = float(iter);
    ASSERT_TRUE(b.copyToDevice(runtime::vulkan::test::asBytes(a), ha).ok()); // written now
    const uint64_t submitsBefore = device_->queueSubmissions();
    const uint64_t foldedBefore = lazy.stats().foldedReads;
    ASSERT_TRUE(b.add(ha, hc, x, n).ok());
    ASSERT_TRUE(b.elementMul(x, hc, y, n).ok());
    expectY(read(b, y, n), n, iter);
    EXPECT_EQ(device_->queueSubmissions() - submitsBefore, 1u) << "iteration " << iter;
    EXPECT_EQ(lazy.stats().foldedReads - foldedBefore, 1u) << "iteration " << iter;
    // x: no pending work, an ordinary read (a submission of its own).
    std::vector<float> gotX = read(b, x, n);
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(gotX[i], a[i] + c[i]) << "x at " << i << ", iteration " << iter;
    EXPECT_EQ(device_->queueSubmissions() - submitsBefore, 2u) << "iteration " << iter;
    EXPECT_EQ(lazy.stats().foldedReads - foldedBefore, 1u) << "iteration " << iter;
  }
  EXPECT_EQ(stats_->get().recordings, 1u) << "the same read each flush: replayed";
  EXPECT_EQ(stats_->get().replays, 4u);
  // Another slot read, and only the first 10 floats of it: new commands, recorded again.
  ASSERT_TRUE(b.add(ha, hc, x, n).ok());
  ASSERT_TRUE(b.elementMul(x, hc, y, n).ok());
  std::vector<float> head(10, -1.0f);
  ASSERT_TRUE(b.copyFromDevice(x, runtime::vulkan::test::asWritableBytes(head)).ok());
  for (uint32_t i = 0; i < 10; ++i)
    ASSERT_EQ(head[i], a[i] + c[i]) << "x at " << i;
  EXPECT_EQ(lazy.stats().foldedReads, 6u);
  EXPECT_EQ(stats_->get().recordings, 2u);
  expectY(read(b, y, n), n, 5);
}

TEST_F(VulkanBackendTest, StatsModeTimesEveryKernel) {
  if (!device_->timestampsEnabled())
    GTEST_SKIP() << "device has no compute-queue timestamps";
  setenv("SINTER_STATS", "1", 1);
  ComputeBackend &b = make();
  unsetenv("SINTER_STATS");
  BufferHandle a = buffer(b, random(4096, 20)), y = b.allocate(4096 * 4).value();
  ASSERT_TRUE(b.add(a, a, y, 4096).ok());
  ASSERT_TRUE(b.silu(y, y, 4096).ok());
  testing::internal::CaptureStderr();
  ASSERT_TRUE(b.synchronize().ok());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("sinter-stats: vulkan kernel #0 add_f32: "));
  EXPECT_THAT(err, HasSubstr("sinter-stats: vulkan kernel #1 silu_f32: "));
  EXPECT_THAT(err, HasSubstr("2 dispatches"));
  EXPECT_GT(stats_->get().kernelSeconds, 0.0);
}

// SINTER_STATS=1's bytes of a generated attention launch over heads: this run's seq_len (a plan
// parameter, 0 in the plan's entry), and each K/V head's cache rows once although two query
// heads read them (what the decode benchmark's floor counts).
TEST_F(VulkanBackendTest, StatsModeCountsAttentionBytesWithTheRunsSeqLenAndEachCacheRowOnce) {
  if (!device_->timestampsEnabled())
    GTEST_SKIP() << "device has no compute-queue timestamps";
  setenv("SINTER_STATS", "1", 1);
  BackendOptions options;
  options.kind = "vulkan";
  options.fusion = true;
  VulkanBackendOptions vulkan;
  vulkan.device = device_;
  vulkan.stats = stats_;
  auto backend = createVulkanBackend(options, vulkan); // the generated kernels
  unsetenv("SINTER_STATS");
  ASSERT_TRUE(backend.ok()) << backend.status();
  ComputeBackend &b = **backend;
  const uint32_t heads = 4, kvHeads = 2, dim = 64, maxT = 16;
  BufferHandle q = buffer(b, random(heads * dim, 41));
  BufferHandle kc = buffer(b, random(maxT * kvHeads * dim, 42));
  BufferHandle vc = buffer(b, random(maxT * kvHeads * dim, 43));
  BufferHandle scores = b.allocate(maxT * 4).value(), out = b.allocate(heads * dim * 4).value();
  for (uint32_t t : {8u, 12u, 16u}) { // later runs: one plan, seq_len its parameter
    for (uint32_t h = 0; h < heads; ++h) {
      const uint32_t kvOff = h / (heads / kvHeads) * dim;
      ASSERT_TRUE(b.attnScore(q, kc, scores, dim, t, h * dim, kvOff, kvHeads * dim).ok());
      ASSERT_TRUE(b.softmax(scores, scores, t).ok());
      ASSERT_TRUE(b.attnValue(scores, vc, out, dim, t, kvOff, kvHeads * dim, h * dim).ok());
    }
    testing::internal::CaptureStderr();
    ASSERT_TRUE(b.synchronize().ok());
    std::string err = testing::internal::GetCapturedStderr();
    // K and V: 2 K/V heads x t positions x 64 floats each; softmax: 4 heads x t x 8 bytes.
    const uint64_t bytes = 2 * kvHeads * t * dim * 4 + heads * t * 8;
    EXPECT_THAT(err, HasSubstr(absl::StrCat("attn_score_hd64_softmax_attn_value_heads: "))) << err;
    EXPECT_THAT(err, HasSubstr(absl::StrCat(" us, ", bytes, " bytes, "))) << "seq_len " << t;
  }
  EXPECT_EQ(stats_->get().plans, 2u) << "the second trace's plan takes seq_len as a parameter";
}

// With kernel times on (SINTER_STATS=1), an overlapped flush waits like any other, so that its
// kernels are timed too.
TEST_F(VulkanBackendTest, StatsModeTimesTheKernelsOfOverlappedFlushes) {
  if (!device_->timestampsEnabled())
    GTEST_SKIP() << "device has no compute-queue timestamps";
  overlap_ = 1;
  setenv("SINTER_STATS", "1", 1);
  ComputeBackend &b = make();
  unsetenv("SINTER_STATS");
  auto &lazy = dynamic_cast<runtime::LazyBackend &>(b);
  BufferHandle a = buffer(b, random(4096, 20)), y = b.allocate(4096 * 4).value();
  const uint64_t noWaitBefore = device_->noWaitSubmissions();
  testing::internal::CaptureStderr();
  ASSERT_TRUE(b.add(a, a, y, 4096).ok()); // 1 pending after an add: an overlapped flush
  ASSERT_TRUE(b.silu(y, y, 4096).ok());
  ASSERT_TRUE(b.synchronize().ok());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(lazy.stats().overlapFlushes, 1u);
  EXPECT_EQ(device_->noWaitSubmissions(), noWaitBefore) << "timed pieces are waited for";
  EXPECT_THAT(err, HasSubstr("sinter-stats: vulkan kernel #0 add_f32: "));
  EXPECT_THAT(err, HasSubstr("sinter-stats: vulkan kernel #0 silu_f32: "));
}

// SINTER_VK_QMATMUL is read when a builder is made: words=1 changes the int8-x Q4_0 kernel,
// words=4 is the default's, and empty or unknown items (or a key without a value) change nothing.
TEST_F(VulkanBackendTest, QmatmulOverridesFromTheEnvironmentChangeTheKernel) {
  if (!haveSpirvCodegen())
    GTEST_SKIP() << "the SPIR-V code generator is not in this build";
  if (!device_->caps().integerDotProduct)
    GTEST_SKIP() << "the device has no integer dot products (words=N is int8 x)";
  auto build = [&](const char *knobs) {
    const char *was = std::getenv("SINTER_VK_QMATMUL");
    const std::string saved = was ? was : "";
    if (knobs)
      setenv("SINTER_VK_QMATMUL", knobs, 1);
    else
      unsetenv("SINTER_VK_QMATMUL");
    runtime::vulkan::VulkanKernelBuilder builder = spirvCodegenBuilder(device_->caps());
    if (was)
      setenv("SINTER_VK_QMATMUL", saved.c_str(), 1);
    else
      unsetenv("SINTER_VK_QMATMUL");
    OpCall op = ops::quantizedMatmul(BufferHandle{1}, BufferHandle{2}, BufferHandle{3}, 64, 4096,
                                     DType::Q4_0);
    absl::StatusOr<VulkanKernel> k = builder(codegen::singleOpSpec(op, 0));
    EXPECT_TRUE(k.ok()) << (knobs ? knobs : "(unset)") << ": " << k.status();
    return k.ok() ? k->binary.spirv : std::vector<uint32_t>{};
  };
  const std::vector<uint32_t> base = build(nullptr), one = build("words=1");
  ASSERT_FALSE(base.empty());
  EXPECT_NE(base, one) << "words=1 changed nothing";
  EXPECT_EQ(base, build("words=4"));
  EXPECT_EQ(one, build("bogus=3,,words=1,pairs"));
}

} // namespace
} // namespace sinter
