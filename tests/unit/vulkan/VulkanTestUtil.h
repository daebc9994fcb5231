// VulkanTestUtil.h - shared helpers of the Vulkan runtime tests: a validated device and the
// SPIR-V kernels assembled from tests/unit/vulkan/*.spvasm at build time.
#ifndef SINTER_TESTS_UNIT_VULKAN_VULKANTESTUTIL_H
#define SINTER_TESTS_UNIT_VULKAN_VULKANTESTUTIL_H

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "runtime/vulkan/VulkanDevice.h"
#include "gtest/gtest.h"

namespace sinter::runtime::vulkan::test {

/// A device with the validation layer on; null (and the test is skipped with the reason) only
/// when the machine has no Vulkan driver at all. SINTER_VK_VALIDATION=0 runs without the layer
/// (for a machine that lacks it, e.g. the H200 runs of bench/vulkan/run-h200.sh), saying so once.
inline std::unique_ptr<VulkanDevice> makeDevice(VulkanDeviceOptions options = {}) {
  const char *env = std::getenv("SINTER_VK_VALIDATION");
  options.validation = !(env && std::string(env) == "0");
  static bool told = false;
  if (!options.validation && !told) {
    told = true;
    std::fprintf(stderr, "note: SINTER_VK_VALIDATION=0: Vulkan tests run without validation\n");
  }
  auto device = VulkanDevice::create(options);
  if (!device.ok()) {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable) << device.status();
    return nullptr;
  }
  return std::move(device).value();
}

#define SINTER_VK_DEVICE_OR_SKIP(var, ...)                                                         \
  auto var = ::sinter::runtime::vulkan::test::makeDevice(__VA_ARGS__);                             \
  if (!var)                                                                                        \
  GTEST_SKIP() << "no Vulkan device on this machine"

/// Kernel `name` (add_f32, ...) from the build's assembled .spv files.
inline KernelBinary loadKernel(const std::string &name, uint32_t numBuffers,
                               uint32_t pushConstantBytes, uint32_t localX = 64) {
  KernelBinary k;
  // SINTER_VK_TEST_SPV_DIR overrides the build's folder (binaries carried to another machine).
  const char *dir = std::getenv("SINTER_VK_TEST_SPV_DIR");
  std::ifstream in(std::string(dir && *dir ? dir : SINTER_VK_TEST_SPV_DIR) + "/" + name + ".spv",
                   std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(bytes.empty()) << "missing " << name << ".spv";
  k.spirv.resize(bytes.size() / 4);
  std::memcpy(k.spirv.data(), bytes.data(), k.spirv.size() * 4);
  k.numBuffers = numBuffers;
  k.pushConstantBytes = pushConstantBytes;
  k.localSize = {localX, 1, 1};
  return k;
}

/// The bytes of a trivially copyable value, for push constants.
template <typename T> std::vector<uint8_t> bytesOf(const T &value) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

template <typename T> absl::Span<const uint8_t> asBytes(const std::vector<T> &v) {
  return {reinterpret_cast<const uint8_t *>(v.data()), v.size() * sizeof(T)};
}
template <typename T> absl::Span<uint8_t> asWritableBytes(std::vector<T> &v) {
  return {reinterpret_cast<uint8_t *>(v.data()), v.size() * sizeof(T)};
}

/// Expects that the validation layer said nothing, printing what it said otherwise.
inline void expectNoValidationMessages(const VulkanDevice &device) {
  ValidationLog log = device.validationLog();
  EXPECT_EQ(log.count, 0u);
  for (const std::string &m : log.messages)
    ADD_FAILURE() << m;
}

} // namespace sinter::runtime::vulkan::test

#endif // SINTER_TESTS_UNIT_VULKAN_VULKANTESTUTIL_H
