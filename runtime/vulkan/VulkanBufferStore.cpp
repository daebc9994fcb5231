// VulkanBufferStore.cpp - device-local buffers for the lazy backend (see VulkanBufferStore.h).
#include "runtime/vulkan/VulkanBufferStore.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "runtime/vulkan/VulkanMemory.h"
#include "sinter/Status.h"
#include "support/BufferIds.h"

namespace sinter::runtime::vulkan {

uint64_t deviceLocalBytes(VkPhysicalDevice physical) {
  VkPhysicalDeviceMemoryProperties props;
  vkGetPhysicalDeviceMemoryProperties(physical, &props);
  uint64_t best = 0;
  for (uint32_t i = 0; i < props.memoryHeapCount; ++i)
    if (props.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      best = std::max<uint64_t>(best, props.memoryHeaps[i].size);
  return best;
}

VulkanBufferStore::VulkanBufferStore(std::shared_ptr<VulkanDevice> device, uint64_t limitBytes)
    : device_(std::move(device)) {
  uint64_t heap = deviceLocalBytes(device_->physicalDevice());
  limit_ = limitBytes && limitBytes < heap ? limitBytes : heap;
}

VulkanBufferStore::~VulkanBufferStore() {
  for (auto &[id, buffer] : buffers_)
    device_->freeBuffer(buffer.ref);
}

absl::StatusOr<BufferHandle> VulkanBufferStore::allocate(uint64_t sizeBytes) {
  if (sizeBytes > limit_ - used_)
    return absl::ResourceExhaustedError(
        absl::StrFormat("allocate: %d bytes requested, %d of the %d-byte device limit available",
                        sizeBytes, limit_ - used_, limit_));
  absl::StatusOr<BufferRef> ref = device_->createBuffer(sizeBytes);
  if (!ref.ok())
    return absl::Status(ref.status().code(), absl::StrFormat("allocate: %d bytes: %s", sizeBytes,
                                                             ref.status().message()));
  // Buffers start zeroed (SEMANTICS.md); recycled ranges hold old bytes.
  absl::StatusOr<VkCommandBuffer> cmd = device_->beginOneShot();
  absl::Status filled = cmd.status();
  if (cmd.ok()) {
    vkCmdFillBuffer(*cmd, ref->buffer, ref->offset, ref->size, 0);
    filled = device_->endOneShot(*cmd);
  }
  if (!filled.ok()) {
    device_->freeBuffer(*ref);
    return absl::Status(filled.code(), absl::StrFormat("allocate: zero-filling %d bytes: %s",
                                                       sizeBytes, filled.message()));
  }
  BufferHandle handle{nextBufferId()};
  buffers_[handle.id] = Buffer{*ref, sizeBytes};
  used_ += sizeBytes;
  return handle;
}

absl::Status VulkanBufferStore::release(BufferHandle handle) {
  auto found = buffers_.find(handle.id);
  if (found == buffers_.end())
    return absl::NotFoundError(absl::StrFormat("free: buffer %d not found", handle.id));
  device_->freeBuffer(found->second.ref);
  used_ -= found->second.size;
  buffers_.erase(found);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> VulkanBufferStore::size(BufferHandle handle) const {
  auto found = buffers_.find(handle.id);
  if (found == buffers_.end())
    return absl::NotFoundError(absl::StrFormat("buffer %d not found", handle.id));
  return found->second.size;
}

absl::Status VulkanBufferStore::write(BufferHandle handle, absl::Span<const uint8_t> data) {
  return device_->write(buffers_.at(handle.id).ref, data);
}

absl::Status VulkanBufferStore::read(BufferHandle handle, absl::Span<uint8_t> out) {
  return device_->read(buffers_.at(handle.id).ref, out);
}

void *VulkanBufferStore::deviceRef(BufferHandle handle) const {
  auto found = buffers_.find(handle.id);
  return found == buffers_.end() ? nullptr : const_cast<BufferRef *>(&found->second.ref);
}

DeviceInfo VulkanBufferStore::deviceInfo(const std::string &compiler) const {
  // Vulkan does not report a count of compute units; the workgroup invocation limit is no
  // substitute, so this says 1 (one queue) rather than invent a number.
  return DeviceInfo{absl::StrFormat("%s (vulkan, %s)", device_->caps().deviceName, compiler),
                    BackendKind::Vulkan, limit_, 1};
}

} // namespace sinter::runtime::vulkan
