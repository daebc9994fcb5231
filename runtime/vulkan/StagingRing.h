// StagingRing.h - host-visible memory for copies between the host and device-local buffers.
//
// One persistently mapped, host-coherent buffer handed out linearly. Space is valid until the
// submission that uses it has completed; the owner calls reset() after waiting for it (every
// flush waits, so a flush resets the ring). A request larger than what is left fails with
// ResourceExhausted and the caller splits the copy or flushes first.
#ifndef SINTER_RUNTIME_VULKAN_STAGINGRING_H
#define SINTER_RUNTIME_VULKAN_STAGINGRING_H

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/vulkan/VulkanDevice.h"
#include <vulkan/vulkan.h>

namespace sinter::runtime::vulkan {

/// A piece of the ring: `data` is its mapped address, (buffer, offset) what copies name.
struct StagingSpan {
  uint8_t *data = nullptr;
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;
  uint64_t size = 0;
};

class StagingRing {
public:
  /// Allocates and maps `bytes` of host-visible, host-coherent memory (host-cached preferred,
  /// since downloads read it).
  static absl::StatusOr<std::unique_ptr<StagingRing>> create(VkPhysicalDevice physical,
                                                             VkDevice device, uint64_t bytes);
  ~StagingRing();

  /// `bytes` bytes aligned to 16; ResourceExhausted when fewer remain before the next reset.
  absl::StatusOr<StagingSpan> take(uint64_t bytes);
  /// Everything taken is free again; the caller has waited for the work that used it.
  void reset() { used_ = 0; }
  uint64_t capacity() const { return capacity_; }
  uint64_t remaining() const { return capacity_ - used_; }

private:
  StagingRing() = default;
  VkDevice device_ = VK_NULL_HANDLE;
  MappedBuffer mapped_;
  uint64_t capacity_ = 0;
  uint64_t used_ = 0;
};

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_STAGINGRING_H
