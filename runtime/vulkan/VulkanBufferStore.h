// VulkanBufferStore.h - the lazy backend's buffers in Vulkan device-local memory.
//
// Each BufferHandle is one sub-allocated range (VulkanMemory), zero-filled on the device when it
// is made. write and read go through the staging ring and wait; Plans get each slot's BufferRef
// through PlanArgs::slotDevice. The byte limit is the device-local heap unless a smaller one is
// given, so running out is ResourceExhausted at allocate (SEMANTICS.md), not at a later flush.
#ifndef SINTER_RUNTIME_VULKAN_VULKANBUFFERSTORE_H
#define SINTER_RUNTIME_VULKAN_VULKANBUFFERSTORE_H

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "runtime/LazyBackend.h"
#include "runtime/vulkan/VulkanDevice.h"

namespace sinter::runtime::vulkan {

class VulkanBufferStore final : public BufferStore {
public:
  /// `limitBytes` 0: the size of the device's largest device-local heap.
  explicit VulkanBufferStore(std::shared_ptr<VulkanDevice> device, uint64_t limitBytes = 0);
  ~VulkanBufferStore() override;

  absl::StatusOr<BufferHandle> allocate(uint64_t sizeBytes) override;
  absl::Status release(BufferHandle handle) override;
  absl::StatusOr<uint64_t> size(BufferHandle handle) const override;
  bool contains(BufferHandle handle) const override { return buffers_.contains(handle.id); }
  absl::Status write(BufferHandle handle, absl::Span<const uint8_t> data) override;
  absl::Status read(BufferHandle handle, absl::Span<uint8_t> out) override;
  uint8_t *hostData(BufferHandle) const override { return nullptr; }
  /// Waits for what an overlapped flush left running (VulkanDevice::drain).
  absl::Status drain() override { return device_->drain(); }
  /// A `const BufferRef *` (see refOf).
  void *deviceRef(BufferHandle handle) const override;
  DeviceInfo deviceInfo(const std::string &compiler) const override;

  /// The range a deviceRef names.
  static const BufferRef &refOf(void *deviceRef) {
    return *static_cast<const BufferRef *>(deviceRef);
  }
  uint64_t limitBytes() const { return limit_; }
  uint64_t usedBytes() const { return used_; }
  size_t count() const { return buffers_.size(); }
  VulkanDevice &device() { return *device_; }

private:
  struct Buffer {
    BufferRef ref;
    uint64_t size = 0; ///< as requested (ref.size is rounded up to 16)
  };
  std::shared_ptr<VulkanDevice> device_;
  absl::flat_hash_map<uint64_t, Buffer> buffers_;
  uint64_t limit_ = 0;
  uint64_t used_ = 0;
};

/// The size of the largest device-local heap of `physical`.
uint64_t deviceLocalBytes(VkPhysicalDevice physical);

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_VULKANBUFFERSTORE_H
