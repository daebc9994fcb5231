// VkRunner.h - a minimal Vulkan compute runner for testing generated SPIR-V (test-only).
//
// Plain Vulkan C API, no runtime/ code: one instance with the Khronos validation layer and a
// messenger that records every warning and error, the first device with a compute queue, and for
// each run host-visible buffers, one pipeline, one dispatch and a read-back. The code generator
// is tested here without waiting for the Vulkan runtime.
#ifndef SINTER_TESTS_UNIT_SPIRV_VKRUNNER_H
#define SINTER_TESTS_UNIT_SPIRV_VKRUNNER_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

#include "absl/status/statusor.h"

namespace sinter::test {

/// One dispatch: SPIR-V words, push-constant bytes, the grid and which buffer each binding is.
struct VkDispatch {
  const std::vector<uint32_t> *words = nullptr;
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::vector<uint8_t> pushConstants;
  /// Binding i is buffers[bindingBuffers[i]] (two bindings may share a buffer); empty: identity.
  std::vector<uint32_t> bindingBuffers;
};

class VkRunner {
public:
  /// Unavailable (with the reason) when there is no Vulkan driver, device or validation layer.
  static absl::StatusOr<std::unique_ptr<VkRunner>> create();
  ~VkRunner();

  /// Runs `d` over `buffers` (each copied in, and back out after the dispatch).
  absl::Status run(const VkDispatch &d, std::vector<std::vector<uint8_t>> &buffers);

  uint32_t subgroupSize() const { return subgroupSize_; }
  uint32_t maxWorkgroupInvocations() const { return maxInvocations_; }
  /// shaderIntegerDotProduct (enabled when the device has it) and maxComputeSharedMemorySize.
  bool intDot() const { return intDot_; }
  uint32_t maxSharedMemory() const { return maxSharedMemory_; }
  const std::string &deviceName() const { return deviceName_; }
  /// Validation-layer warnings and errors since the last call (cleared by it).
  std::vector<std::string> takeMessages();

  /// Called by the debug messenger.
  void addMessage(std::string message) { messages_.push_back(std::move(message)); }

private:
  VkRunner() = default;
  absl::StatusOr<uint32_t> memoryType(uint32_t typeBits) const;

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queueFamily_ = 0;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  uint32_t subgroupSize_ = 0;
  uint32_t maxInvocations_ = 0;
  bool intDot_ = false;
  uint32_t maxSharedMemory_ = 0;
  std::string deviceName_;
  std::vector<std::string> messages_;
};

} // namespace sinter::test

#endif // SINTER_TESTS_UNIT_SPIRV_VKRUNNER_H
