// VkStatus.cpp - VkResult to absl::Status (see VkStatus.h for the mapping).
#include "runtime/vulkan/VkStatus.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace sinter::runtime::vulkan {

std::string vkResultName(VkResult result) {
  switch (result) {
#define SINTER_VK_NAME(r)                                                                          \
  case r:                                                                                          \
    return #r;
    SINTER_VK_NAME(VK_SUCCESS)
    SINTER_VK_NAME(VK_NOT_READY)
    SINTER_VK_NAME(VK_TIMEOUT)
    SINTER_VK_NAME(VK_INCOMPLETE)
    SINTER_VK_NAME(VK_ERROR_OUT_OF_HOST_MEMORY)
    SINTER_VK_NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    SINTER_VK_NAME(VK_ERROR_INITIALIZATION_FAILED)
    SINTER_VK_NAME(VK_ERROR_DEVICE_LOST)
    SINTER_VK_NAME(VK_ERROR_MEMORY_MAP_FAILED)
    SINTER_VK_NAME(VK_ERROR_LAYER_NOT_PRESENT)
    SINTER_VK_NAME(VK_ERROR_EXTENSION_NOT_PRESENT)
    SINTER_VK_NAME(VK_ERROR_FEATURE_NOT_PRESENT)
    SINTER_VK_NAME(VK_ERROR_INCOMPATIBLE_DRIVER)
    SINTER_VK_NAME(VK_ERROR_TOO_MANY_OBJECTS)
    SINTER_VK_NAME(VK_ERROR_FORMAT_NOT_SUPPORTED)
    SINTER_VK_NAME(VK_ERROR_FRAGMENTED_POOL)
    SINTER_VK_NAME(VK_ERROR_UNKNOWN)
    SINTER_VK_NAME(VK_ERROR_OUT_OF_POOL_MEMORY)
    SINTER_VK_NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    SINTER_VK_NAME(VK_ERROR_FRAGMENTATION)
    SINTER_VK_NAME(VK_ERROR_INVALID_SHADER_NV)
#undef SINTER_VK_NAME
  default:
    return absl::StrCat("VkResult ", static_cast<int>(result));
  }
}

absl::Status vkStatus(VkResult result, std::string_view what) {
  if (result >= 0)
    return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": ", vkResultName(result));
  switch (result) {
  case VK_ERROR_DEVICE_LOST:
    return absl::UnavailableError(message);
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
  case VK_ERROR_OUT_OF_HOST_MEMORY:
  case VK_ERROR_OUT_OF_POOL_MEMORY:
  case VK_ERROR_TOO_MANY_OBJECTS:
  case VK_ERROR_FRAGMENTED_POOL:
  case VK_ERROR_FRAGMENTATION:
    return absl::ResourceExhaustedError(message);
  case VK_ERROR_LAYER_NOT_PRESENT:
  case VK_ERROR_EXTENSION_NOT_PRESENT:
  case VK_ERROR_FEATURE_NOT_PRESENT:
  case VK_ERROR_INCOMPATIBLE_DRIVER:
    return absl::FailedPreconditionError(message);
  default:
    return absl::InternalError(message);
  }
}

} // namespace sinter::runtime::vulkan
