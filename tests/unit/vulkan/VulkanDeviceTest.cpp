// VulkanDeviceTest.cpp - device creation, capabilities, staged copies and the one-shot dispatch,
// all under the Khronos validation layer with zero messages.
#include "runtime/vulkan/VulkanDevice.h"

#include <cstdlib>
#include <cstring>

#include "VulkanTestUtil.h"
#include "runtime/vulkan/PipelineCache.h"
#include "gtest/gtest.h"

namespace sinter::runtime::vulkan {
namespace {

using test::asBytes;
using test::asWritableBytes;
using test::bytesOf;

TEST(VulkanDeviceTest, ReportsCapabilities) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  const DeviceCaps &c = device->caps();
  const char *env = std::getenv("SINTER_VK_VALIDATION");
  EXPECT_EQ(device->validationEnabled(), !(env && std::string(env) == "0"));
  EXPECT_FALSE(c.deviceName.empty());
  EXPECT_GE(c.subgroupSize, 1u);
  EXPECT_TRUE(c.subgroupOps & VK_SUBGROUP_FEATURE_BASIC_BIT);
  EXPECT_GE(c.maxComputeWorkGroupInvocations, 128u);
  EXPECT_GE(c.maxComputeSharedMemorySize, 16384u);
  EXPECT_GE(c.maxStorageBufferRange, 1u << 27);
  EXPECT_GE(c.maxPushConstantsSize, 128u);
  EXPECT_FALSE(device->deviceNames().empty());
  test::expectNoValidationMessages(*device);
}

TEST(VulkanDeviceTest, WriteThenReadRoundTrips) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  std::vector<uint8_t> data(1000003);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 7 + 3);
  auto buf = device->createBuffer(data.size());
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(device->write(*buf, data).ok());
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE(device->read(*buf, absl::MakeSpan(back)).ok());
  EXPECT_EQ(back, data);
  // A sub-range at an odd offset.
  std::vector<uint8_t> part(17, 0xAB);
  ASSERT_TRUE(device->write(*buf, part, 5).ok());
  std::vector<uint8_t> window(19);
  ASSERT_TRUE(device->read(*buf, absl::MakeSpan(window), 4).ok());
  EXPECT_EQ(window[0], data[4]);
  EXPECT_EQ(window[1], 0xAB);
  EXPECT_EQ(window[17], 0xAB);
  EXPECT_EQ(window[18], data[22]);
  device->freeBuffer(*buf);
  test::expectNoValidationMessages(*device);
}

TEST(VulkanDeviceTest, CopiesLargerThanTheStagingRingAreSplit) {
  VulkanDeviceOptions options;
  options.stagingBytes = 4096;
  SINTER_VK_DEVICE_OR_SKIP(device, options);
  std::vector<uint32_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint32_t>(i * 2654435761u);
  auto buf = device->createBuffer(data.size() * 4);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(device->write(*buf, asBytes(data)).ok());
  std::vector<uint32_t> back(data.size());
  ASSERT_TRUE(device->read(*buf, asWritableBytes(back)).ok());
  EXPECT_EQ(back, data);
  test::expectNoValidationMessages(*device);
}

TEST(VulkanDeviceTest, OutOfRangeCopyIsInvalidArgument) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  auto buf = device->createBuffer(64);
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> data(65);
  absl::Status s = device->write(*buf, data);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "vulkan write: 65 bytes at offset 0 exceed the buffer's 64 bytes");
  std::vector<uint8_t> out(8);
  EXPECT_EQ(device->read(*buf, absl::MakeSpan(out), 60).code(), absl::StatusCode::kInvalidArgument);
  test::expectNoValidationMessages(*device);
}

TEST(VulkanDeviceTest, DispatchOnceAddsTwoVectors) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  KernelBinary k = test::loadKernel("add_f32", 3, 4);
  const uint32_t n = 1000;
  std::vector<float> a(n), b(n), y(n, -1.0f);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = 0.5f * i;
    b[i] = 1000.0f - i;
  }
  auto ba = device->createBuffer(n * 4), bb = device->createBuffer(n * 4);
  auto by = device->createBuffer(n * 4);
  ASSERT_TRUE(ba.ok() && bb.ok() && by.ok());
  ASSERT_TRUE(device->write(*ba, asBytes(a)).ok());
  ASSERT_TRUE(device->write(*bb, asBytes(b)).ok());
  ASSERT_TRUE(device->write(*by, asBytes(y)).ok());
  BufferRef refs[] = {*ba, *bb, *by};
  absl::Status s = device->dispatchOnce(k, refs, bytesOf(n), {(n + 63) / 64, 1, 1});
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(device->read(*by, asWritableBytes(y)).ok());
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(y[i], a[i] + b[i]) << "at " << i;
  // The same kernel again hits the pipeline cache.
  ASSERT_TRUE(device->dispatchOnce(k, refs, bytesOf(n), {(n + 63) / 64, 1, 1}).ok());
  test::expectNoValidationMessages(*device);
}

// Spin waits poll the fence; with no spin time left they sleep in the driver as Block does. Both
// must see every dispatch's results, and an injected loss must still come back as Unavailable.
TEST(VulkanDeviceTest, SpinWaitSeesEveryResultAndReportsLoss) {
  for (uint64_t limit : {uint64_t{200000}, uint64_t{0}}) {
    VulkanDeviceOptions options;
    options.wait = VulkanDeviceOptions::Wait::Spin;
    options.spinLimitMicros = limit;
    SINTER_VK_DEVICE_OR_SKIP(device, options);
    KernelBinary k = test::loadKernel("add_f32", 3, 4);
    const uint32_t n = 4096;
    std::vector<float> a(n, 1.5f), y(n, 0.0f);
    auto ba = device->createBuffer(n * 4), by = device->createBuffer(n * 4);
    ASSERT_TRUE(ba.ok() && by.ok());
    ASSERT_TRUE(device->write(*ba, asBytes(a)).ok());
    ASSERT_TRUE(device->write(*by, asBytes(y)).ok());
    // y += a, eight times: each dispatch must see the one before it finished.
    BufferRef refs[] = {*by, *ba, *by};
    for (int i = 0; i < 8; ++i)
      ASSERT_TRUE(device->dispatchOnce(k, refs, bytesOf(n), {(n + 63) / 64, 1, 1}).ok());
    ASSERT_TRUE(device->read(*by, asWritableBytes(y)).ok());
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(y[i], 12.0f) << "at " << i << " with a spin limit of " << limit << " us";
    device->injectSubmitFaultForTesting(VK_ERROR_DEVICE_LOST);
    EXPECT_EQ(device->write(*by, asBytes(y)).code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(device->deviceLost());
  }
}

// Direct parameter memory: what the host writes through the mapping, a dispatch reads with no
// copy; the arena refuses what it cannot hold and takes a freed range back.
TEST(VulkanDeviceTest, MappedParameterMemoryIsReadByDispatches) {
  VulkanDeviceOptions options;
  options.directParamsBytes = 64 << 10;
  SINTER_VK_DEVICE_OR_SKIP(device, options);
  const uint32_t n = 1000;
  auto a = device->allocateMappedParams(n * 4), b = device->allocateMappedParams(n * 4);
  if (a.status().code() == absl::StatusCode::kNotFound)
    GTEST_SKIP() << device->caps().deviceName << ": " << a.status().message();
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  EXPECT_EQ(a->ref.buffer, b->ref.buffer);
  EXPECT_GE(b->ref.offset, a->ref.offset + n * 4);
  EXPECT_EQ(a->ref.offset % device->caps().minStorageBufferOffsetAlignment, 0u);
  auto y = device->createBuffer(n * 4);
  ASSERT_TRUE(y.ok());
  KernelBinary k = test::loadKernel("add_f32", 3, 4);
  BufferRef refs[] = {a->ref, b->ref, *y};
  for (int round = 0; round < 2; ++round) {
    std::vector<float> x(n), z(n);
    for (uint32_t i = 0; i < n; ++i) {
      x[i] = 0.25f * i + round;
      z[i] = 3.0f - i;
    }
    std::memcpy(a->host, x.data(), n * 4);
    std::memcpy(b->host, z.data(), n * 4);
    ASSERT_TRUE(device->dispatchOnce(k, refs, bytesOf(n), {(n + 63) / 64, 1, 1}).ok());
    std::vector<float> got(n);
    ASSERT_TRUE(device->read(*y, asWritableBytes(got)).ok());
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], x[i] + z[i]) << "at " << i << ", round " << round;
  }
  auto big = device->allocateMappedParams(60 << 10);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(big.status().message(), "vulkan: the direct parameter memory has no 61440 bytes left");
  device->freeMappedParams(a->ref);
  device->freeMappedParams(b->ref);
  EXPECT_TRUE(device->allocateMappedParams(60 << 10).ok());
  test::expectNoValidationMessages(*device);
}

TEST(VulkanDeviceTest, UnknownWaitModeIsInvalidArgument) {
  SINTER_VK_DEVICE_OR_SKIP(first);
  const char *old = std::getenv("SINTER_VK_WAIT");
  std::string saved = old ? old : "";
  setenv("SINTER_VK_WAIT", "sometimes", 1);
  auto bad = VulkanDevice::create({});
  setenv("SINTER_VK_WAIT", "spin", 1);
  auto spin = VulkanDevice::create({});
  if (old)
    setenv("SINTER_VK_WAIT", saved.c_str(), 1);
  else
    unsetenv("SINTER_VK_WAIT");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "vulkan: SINTER_VK_WAIT is 'sometimes'; use spin, block or auto");
  ASSERT_TRUE(spin.ok()) << spin.status();
  EXPECT_EQ((*spin)->waitMode(), VulkanDeviceOptions::Wait::Spin);
  // Auto: spin on a GPU, block on a CPU device (lavapipe's workers need the cores).
  if (!old) {
    VulkanDeviceOptions options;
    EXPECT_EQ(options.wait, VulkanDeviceOptions::Wait::Auto);
    auto automatic = VulkanDevice::create(options);
    ASSERT_TRUE(automatic.ok()) << automatic.status();
    EXPECT_EQ((*automatic)->waitMode(),
              (*automatic)->caps().deviceKind == VK_PHYSICAL_DEVICE_TYPE_CPU
                  ? VulkanDeviceOptions::Wait::Block
                  : VulkanDeviceOptions::Wait::Spin);
  }
}

TEST(VulkanDeviceTest, PipelineStatisticsAreCapturedWhereTheDriverHasThem) {
  VulkanDeviceOptions options;
  options.pipelineStatistics = true;
  SINTER_VK_DEVICE_OR_SKIP(device, options);
  if (!device->caps().pipelineExecutableInfo)
    GTEST_SKIP() << device->caps().deviceName << " has no VK_KHR_pipeline_executable_properties";
  KernelBinary k = test::loadKernel("add_f32", 3, 4);
  k.name = "add_f32";
  absl::StatusOr<std::shared_ptr<const Pipeline>> p = device->pipelines().get(k);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_FALSE((*p)->statistics.empty());
  for (const std::string &stat : (*p)->statistics)
    EXPECT_NE(stat.find('='), std::string::npos) << stat;
  // Without the option nothing is captured.
  SINTER_VK_DEVICE_OR_SKIP(plain);
  absl::StatusOr<std::shared_ptr<const Pipeline>> q = plain->pipelines().get(k);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE((*q)->statistics.empty());
  test::expectNoValidationMessages(*device);
  test::expectNoValidationMessages(*plain);
}

TEST(VulkanDeviceTest, DispatchRejectsAMismatchedInterface) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  KernelBinary k = test::loadKernel("add_f32", 3, 4);
  auto buf = device->createBuffer(256);
  ASSERT_TRUE(buf.ok());
  BufferRef two[] = {*buf, *buf};
  absl::Status s = device->dispatchOnce(k, two, bytesOf(uint32_t{1}), {1, 1, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "dispatch of main: 2 buffers given, the kernel has 3");
  BufferRef three[] = {*buf, *buf, *buf};
  s = device->dispatchOnce(k, three, {}, {1, 1, 1});
  EXPECT_EQ(s.message(), "dispatch of main: 0 push-constant bytes given, the kernel has 4");
  KernelBinary junk = k;
  junk.spirv = {1, 2, 3};
  s = device->dispatchOnce(junk, three, bytesOf(uint32_t{1}), {1, 1, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  test::expectNoValidationMessages(*device);
}

TEST(VulkanDeviceTest, SelectorChoosesByIndexAndRejectsUnknownNames) {
  SINTER_VK_DEVICE_OR_SKIP(first);
  VulkanDeviceOptions byIndex;
  byIndex.deviceSelector = "0";
  auto d0 = VulkanDevice::create(byIndex);
  ASSERT_TRUE(d0.ok()) << d0.status();
  EXPECT_EQ((*d0)->caps().deviceName, first->deviceNames()[0]);
  VulkanDeviceOptions byName;
  byName.deviceSelector = "no-such-gpu-anywhere";
  auto none = VulkanDevice::create(byName);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no-such-gpu-anywhere"), std::string::npos);
}

// Mesa's lavapipe reports itself as "llvmpipe (LLVM ...)"; "lavapipe" (any case) selects it too.
TEST(VulkanDeviceTest, LavapipeSelectsMesasLlvmpipeDevice) {
  SINTER_VK_DEVICE_OR_SKIP(first);
  bool hasLlvmpipe = false;
  for (const std::string &name : first->deviceNames())
    hasLlvmpipe |= name.find("llvmpipe") != std::string::npos;
  VulkanDeviceOptions options;
  options.deviceSelector = "LavaPipe";
  auto d = VulkanDevice::create(options);
  if (!hasLlvmpipe) {
    EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound) << d.status();
    return;
  }
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NE((*d)->caps().deviceName.find("llvmpipe"), std::string::npos) << (*d)->caps().deviceName;
}

TEST(VulkanDeviceTest, InjectedDeviceLossIsUnavailableAndSticks) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  auto buf = device->createBuffer(16);
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> data(16, 1);
  device->injectSubmitFaultForTesting(VK_ERROR_DEVICE_LOST);
  absl::Status s = device->write(*buf, data);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("VK_ERROR_DEVICE_LOST"), std::string::npos) << s;
  EXPECT_TRUE(device->deviceLost());
  EXPECT_EQ(device->write(*buf, data).code(), absl::StatusCode::kUnavailable);
}

TEST(VulkanDeviceTest, InjectedOutOfMemoryAtSubmitIsResourceExhausted) {
  SINTER_VK_DEVICE_OR_SKIP(device);
  auto buf = device->createBuffer(16);
  ASSERT_TRUE(buf.ok());
  std::vector<uint8_t> data(16, 1);
  device->injectSubmitFaultForTesting(VK_ERROR_OUT_OF_DEVICE_MEMORY);
  EXPECT_EQ(device->write(*buf, data).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(device->deviceLost());
  EXPECT_TRUE(device->write(*buf, data).ok());
  test::expectNoValidationMessages(*device);
}

} // namespace
} // namespace sinter::runtime::vulkan
