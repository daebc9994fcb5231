// VulkanMemory.cpp - blocks of VkDeviceMemory, each with one VkBuffer, sub-allocated.
#include "runtime/vulkan/VulkanMemory.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {

uint32_t findMemoryType(const VkPhysicalDeviceMemoryProperties &props, uint32_t typeBits,
                        VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    if (!(typeBits & (1u << i)))
      continue;
    VkMemoryPropertyFlags flags = props.memoryTypes[i].propertyFlags;
    if ((flags & required) != required)
      continue;
    if ((flags & preferred) == preferred)
      return i;
    if (fallback == UINT32_MAX)
      fallback = i;
  }
  return fallback;
}

absl::StatusOr<MappedBuffer> createMappedBuffer(VkPhysicalDevice physical, VkDevice device,
                                                uint64_t bytes, VkBufferUsageFlags usage,
                                                VkMemoryPropertyFlags required,
                                                VkMemoryPropertyFlags preferred,
                                                const std::string &what) {
  MappedBuffer out;
  auto info = vkStruct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = bytes;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  SINTER_RETURN_IF_ERROR(vkStatus(vkCreateBuffer(device, &info, nullptr, &out.buffer),
                                  absl::StrCat("vkCreateBuffer of ", what)));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, out.buffer, &req);
  VkPhysicalDeviceMemoryProperties props;
  vkGetPhysicalDeviceMemoryProperties(physical, &props);
  uint32_t type = findMemoryType(props, req.memoryTypeBits, required, preferred);
  absl::Status s;
  if (type == UINT32_MAX) {
    s = absl::NotFoundError(absl::StrCat("no memory type for ", what));
  } else {
    auto alloc = vkStruct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    s = vkStatus(vkAllocateMemory(device, &alloc, nullptr, &out.memory),
                 absl::StrCat("vkAllocateMemory of ", req.size, " bytes for ", what));
  }
  if (s.ok())
    s = vkStatus(vkBindBufferMemory(device, out.buffer, out.memory, 0), "vkBindBufferMemory");
  void *mapped = nullptr;
  if (s.ok())
    s = vkStatus(vkMapMemory(device, out.memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
  if (!s.ok()) {
    destroyMappedBuffer(device, out);
    return s;
  }
  out.host = static_cast<uint8_t *>(mapped);
  return out;
}

void destroyMappedBuffer(VkDevice device, MappedBuffer &buffer) {
  if (buffer.host)
    vkUnmapMemory(device, buffer.memory);
  if (buffer.buffer != VK_NULL_HANDLE)
    vkDestroyBuffer(device, buffer.buffer, nullptr);
  if (buffer.memory != VK_NULL_HANDLE)
    vkFreeMemory(device, buffer.memory, nullptr);
  buffer = MappedBuffer{};
}

static constexpr VkBufferUsageFlags kStorageUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT |
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

VulkanMemory::VulkanMemory(VkPhysicalDevice physical, VkDevice device, uint64_t blockBytes,
                           uint64_t alignment)
    : device_(device), blockBytes_(blockBytes), alignment_(std::max<uint64_t>(alignment, 16)) {
  vkGetPhysicalDeviceMemoryProperties(physical, &memoryProps_);
}

VulkanMemory::~VulkanMemory() {
  absl::MutexLock lock(&mutex_);
  for (auto &block : blocks_) {
    vkDestroyBuffer(device_, block->buffer, nullptr);
    vkFreeMemory(device_, block->memory, nullptr);
  }
}

void VulkanMemory::injectOutOfMemoryForTesting(int count) {
  absl::MutexLock lock(&mutex_);
  injectedFailures_ = count;
}

absl::StatusOr<VulkanMemory::Block *> VulkanMemory::newBlock(uint64_t bytes, bool dedicated) {
  if (injectedFailures_ > 0) {
    --injectedFailures_;
    return vkStatus(VK_ERROR_OUT_OF_DEVICE_MEMORY,
                    absl::StrCat("vkAllocateMemory of ", bytes, " bytes (injected)"));
  }
  auto block = std::make_unique<Block>();
  auto info = vkStruct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = bytes;
  info.usage = kStorageUsage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  SINTER_RETURN_IF_ERROR(vkStatus(vkCreateBuffer(device_, &info, nullptr, &block->buffer),
                                  absl::StrCat("vkCreateBuffer of ", bytes, " bytes")));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, block->buffer, &req);
  uint32_t type =
      findMemoryType(memoryProps_, req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type == UINT32_MAX) {
    vkDestroyBuffer(device_, block->buffer, nullptr);
    return absl::InternalError("no memory type for storage buffers");
  }
  auto alloc = vkStruct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = type;
  VkResult r = vkAllocateMemory(device_, &alloc, nullptr, &block->memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, block->buffer, nullptr);
    return vkStatus(r, absl::StrCat("vkAllocateMemory of ", req.size, " bytes"));
  }
  r = vkBindBufferMemory(device_, block->buffer, block->memory, 0);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, block->buffer, nullptr);
    vkFreeMemory(device_, block->memory, nullptr);
    return vkStatus(r, "vkBindBufferMemory");
  }
  block->ranges = std::make_unique<RangeAllocator>(bytes);
  block->dedicated = dedicated;
  blocks_.push_back(std::move(block));
  return blocks_.back().get();
}

void VulkanMemory::destroyBlock(Block *block) {
  ++destroyedBlocks_;
  vkDestroyBuffer(device_, block->buffer, nullptr);
  vkFreeMemory(device_, block->memory, nullptr);
  blocks_.erase(std::find_if(blocks_.begin(), blocks_.end(),
                             [&](const std::unique_ptr<Block> &b) { return b.get() == block; }));
}

absl::StatusOr<BufferRef> VulkanMemory::allocate(uint64_t bytes) {
  // Rounded to 16 bytes and bound whole: kernels may read (never write) up to 15 bytes past an
  // operand's end (whole words, vec4 loads; codegen/spirv/README.md).
  bytes = std::max<uint64_t>((bytes + 15) & ~uint64_t{15}, 16);
  absl::MutexLock lock(&mutex_);
  Block *chosen = nullptr;
  std::optional<uint64_t> offset;
  if (bytes <= blockBytes_) {
    for (auto &block : blocks_) {
      if (block->dedicated)
        continue;
      if ((offset = block->ranges->allocate(bytes, alignment_))) {
        chosen = block.get();
        break;
      }
    }
  }
  if (!chosen) {
    bool dedicated = bytes > blockBytes_;
    SINTER_ASSIGN_OR_RETURN(chosen, newBlock(dedicated ? bytes : blockBytes_, dedicated));
    offset = chosen->ranges->allocate(bytes, alignment_);
    assert(offset && "a fresh block must hold the request");
  }
  uint64_t id = nextId_++;
  allocations_[id] = Allocation{chosen, *offset};
  return BufferRef{chosen->buffer, *offset, bytes, id};
}

bool VulkanMemory::free(const BufferRef &ref) {
  absl::MutexLock lock(&mutex_);
  auto found = allocations_.find(ref.allocation);
  if (found == allocations_.end())
    return false;
  Block *block = found->second.block;
  block->ranges->free(found->second.offset);
  allocations_.erase(found);
  if (block->ranges->empty()) {
    size_t shared = std::count_if(blocks_.begin(), blocks_.end(),
                                  [](const std::unique_ptr<Block> &b) { return !b->dedicated; });
    // Keep the last shared block so an allocate/free loop does not hit vkAllocateMemory.
    if (block->dedicated || shared > 1)
      destroyBlock(block);
  }
  return true;
}

uint64_t VulkanMemory::destroyedBlocks() const {
  absl::MutexLock lock(&mutex_);
  return destroyedBlocks_;
}

MemoryStats VulkanMemory::stats() const {
  absl::MutexLock lock(&mutex_);
  MemoryStats s;
  for (auto &block : blocks_) {
    ++s.blocks;
    s.blockBytes += block->ranges->capacity();
    s.liveBytes += block->ranges->usedBytes();
  }
  s.liveAllocations = allocations_.size();
  return s;
}

} // namespace sinter::runtime::vulkan
