// VulkanMemory.h - device-local storage buffers sub-allocated from a few large blocks.
//
// Each block is one VkDeviceMemory with one VkBuffer bound over all of it, so an allocation is a
// (VkBuffer, offset, size) range that descriptors bind directly. Requests larger than a block get
// a dedicated block, freed with them; an emptied block is released unless it is the last one.
// No vendored allocator: RangeAllocator does the bookkeeping.
#ifndef SINTER_RUNTIME_VULKAN_VULKANMEMORY_H
#define SINTER_RUNTIME_VULKAN_VULKANMEMORY_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/vulkan/RangeAllocator.h"
#include "runtime/vulkan/VulkanDevice.h"

namespace sinter::runtime::vulkan {

struct MemoryStats {
  uint64_t blocks = 0;
  uint64_t blockBytes = 0;
  uint64_t liveAllocations = 0;
  uint64_t liveBytes = 0;
};

/// Creates `bytes` of buffer with `usage` in a memory type that has every `required` flag (one
/// with the `preferred` flags too where there is one), binds and maps it. NotFound when no type
/// has the required flags; `what` names the buffer in the driver's errors. Nothing is left
/// behind on failure.
absl::StatusOr<MappedBuffer> createMappedBuffer(VkPhysicalDevice physical, VkDevice device,
                                                uint64_t bytes, VkBufferUsageFlags usage,
                                                VkMemoryPropertyFlags required,
                                                VkMemoryPropertyFlags preferred,
                                                const std::string &what);
/// Unmaps and releases a buffer from createMappedBuffer (null handles are skipped).
void destroyMappedBuffer(VkDevice device, MappedBuffer &buffer);

class VulkanMemory {
public:
  /// `alignment`: offset alignment of every range (the device's minStorageBufferOffsetAlignment,
  /// at least 16 so 16-byte vector loads stay aligned).
  VulkanMemory(VkPhysicalDevice physical, VkDevice device, uint64_t blockBytes, uint64_t alignment);
  ~VulkanMemory();

  /// A range of `bytes` bytes; ResourceExhausted when the device has no memory left.
  absl::StatusOr<BufferRef> allocate(uint64_t bytes);
  /// Releases a range from allocate; false when `ref.allocation` is unknown.
  bool free(const BufferRef &ref);
  MemoryStats stats() const;
  uint64_t alignment() const { return alignment_; }
  /// Counts destroyed blocks. A VkBuffer handle may be reused once its block is gone, so caches
  /// keyed by VkBuffer (DescriptorCache) must be cleared when this changes.
  uint64_t destroyedBlocks() const;

  /// Test only: the next `count` block allocations fail with VK_ERROR_OUT_OF_DEVICE_MEMORY.
  void injectOutOfMemoryForTesting(int count);

private:
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkBuffer buffer = VK_NULL_HANDLE;
    std::unique_ptr<RangeAllocator> ranges;
    bool dedicated = false;
  };
  struct Allocation {
    Block *block;
    uint64_t offset;
  };
  absl::StatusOr<Block *> newBlock(uint64_t bytes, bool dedicated)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void destroyBlock(Block *block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  VkDevice device_;
  uint64_t blockBytes_;
  uint64_t alignment_;
  uint32_t memoryType_ = UINT32_MAX;
  VkPhysicalDeviceMemoryProperties memoryProps_{};
  mutable absl::Mutex mutex_;
  std::vector<std::unique_ptr<Block>> blocks_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<uint64_t, Allocation> allocations_ ABSL_GUARDED_BY(mutex_);
  uint64_t nextId_ ABSL_GUARDED_BY(mutex_) = 1;
  int injectedFailures_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t destroyedBlocks_ ABSL_GUARDED_BY(mutex_) = 0;
};

/// The index of a memory type allowed by `typeBits` with all of `required` (and, when one exists,
/// all of `preferred`); UINT32_MAX when none has `required`.
uint32_t findMemoryType(const VkPhysicalDeviceMemoryProperties &props, uint32_t typeBits,
                        VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred);

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_VULKANMEMORY_H
