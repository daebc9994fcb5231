// VkStatus.h - the one place a VkResult becomes an absl::Status.
//
// Device loss is Unavailable (the device is gone; the caller may recreate it), running out of
// device or host memory is ResourceExhausted, everything else the driver reports is Internal.
// Messages carry the call that failed and the VkResult's name.
#ifndef SINTER_RUNTIME_VULKAN_VKSTATUS_H
#define SINTER_RUNTIME_VULKAN_VKSTATUS_H

#include <string_view>

#include "absl/status/status.h"
#include <vulkan/vulkan.h>

namespace sinter::runtime::vulkan {

/// The VkResult's enumerator name ("VK_ERROR_DEVICE_LOST"), or its number when unknown.
std::string vkResultName(VkResult result);

/// Ok for VK_SUCCESS (and the other non-negative results); else the mapped error
/// "`what`: VK_ERROR_...".
absl::Status vkStatus(VkResult result, std::string_view what);

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_VKSTATUS_H
