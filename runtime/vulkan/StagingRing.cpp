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
  absl::StatusOr<MappedBuffer> mapped = createMappedBuffer(
      physical, device, bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
      VK_MEMORY_PROPERTY_HOST_CACHED_BIT, absl::StrCat("a ", bytes, "-byte staging ring"));
  if (mapped.status().code() == absl::StatusCode::kNotFound)
    return absl::InternalError("no host-visible coherent memory type for staging");
  SINTER_RETURN_IF_ERROR(mapped.status());
  ring->mapped_ = *mapped;
  return ring;
}

StagingRing::~StagingRing() { destroyMappedBuffer(device_, mapped_); }

absl::StatusOr<StagingSpan> StagingRing::take(uint64_t bytes) {
  uint64_t start = (used_ + 15) & ~uint64_t{15};
  if (start + bytes > capacity_)
    return absl::ResourceExhaustedError(absl::StrCat("staging ring: ", bytes, " bytes requested, ",
                                                     capacity_ - std::min(start, capacity_), " of ",
                                                     capacity_, " left"));
  used_ = start + bytes;
  return StagingSpan{mapped_.host + start, mapped_.buffer, start, bytes};
}

} // namespace sinter::runtime::vulkan
