// StagingRing.cpp - one mapped host-visible buffer handed out linearly (see StagingRing.h).
#include "runtime/vulkan/StagingRing.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "runtime/vulkan/VulkanMemory.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {

absl::StatusOr<std::unique_ptr<StagingRing>> StagingRing::create(VkPhysicalDevice physical,
                                                                 VkDevice device, uint64_t bytes) {
  std::unique_ptr<StagingRing> ring(new StagingRing());
  ring->device_ = device;
  ring->capacity_ = bytes;
  auto info = vkStruct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkCreateBuffer(device, &info, nullptr, &ring->buffer_),
               absl::StrCat("vkCreateBuffer of a ", bytes, "-byte staging ring")));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, ring->buffer_, &req);
  VkPhysicalDeviceMemoryProperties props;
  vkGetPhysicalDeviceMemoryProperties(physical, &props);
  uint32_t type =
      findMemoryType(props, req.memoryTypeBits,
                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                     VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (type == UINT32_MAX)
    return absl::InternalError("no host-visible coherent memory type for staging");
  auto alloc = vkStruct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = type;
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkAllocateMemory(device, &alloc, nullptr, &ring->memory_),
               absl::StrCat("vkAllocateMemory of ", req.size, " staging bytes")));
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkBindBufferMemory(device, ring->buffer_, ring->memory_, 0), "vkBindBufferMemory"));
  void *mapped = nullptr;
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkMapMemory(device, ring->memory_, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory"));
  ring->mapped_ = static_cast<uint8_t *>(mapped);
  return ring;
}

StagingRing::~StagingRing() {
  if (mapped_)
    vkUnmapMemory(device_, memory_);
  vkDestroyBuffer(device_, buffer_, nullptr);
  vkFreeMemory(device_, memory_, nullptr);
}

absl::StatusOr<StagingSpan> StagingRing::take(uint64_t bytes) {
  uint64_t start = (used_ + 15) & ~uint64_t{15};
  if (start + bytes > capacity_)
    return absl::ResourceExhaustedError(absl::StrCat("staging ring: ", bytes, " bytes requested, ",
                                                     capacity_ - std::min(start, capacity_), " of ",
                                                     capacity_, " left"));
  used_ = start + bytes;
  return StagingSpan{mapped_ + start, buffer_, start, bytes};
}

} // namespace sinter::runtime::vulkan
