// VkStruct.h - a zeroed Vulkan struct with its sType set.
//
// `VkFooCreateInfo info{VK_STRUCTURE_TYPE_...}` leaves the other members value-initialized too,
// but -Wextra warns about every member; this says the same thing without the noise.
#ifndef SINTER_RUNTIME_VULKAN_VKSTRUCT_H
#define SINTER_RUNTIME_VULKAN_VKSTRUCT_H

#include <vulkan/vulkan.h>

namespace sinter::runtime::vulkan {

template <typename T> T vkStruct(VkStructureType kind) {
  T value{};
  value.sType = kind;
  return value;
}

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_VKSTRUCT_H
