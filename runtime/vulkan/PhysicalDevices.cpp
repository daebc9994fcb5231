// PhysicalDevices.cpp - describing the physical devices and choosing one (PhysicalDevices.h).
#include "runtime/vulkan/PhysicalDevices.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {
namespace {

bool hasComputeQueue(VkPhysicalDevice device) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &n, families.data());
  for (const VkQueueFamilyProperties &family : families)
    if (family.queueFlags & VK_QUEUE_COMPUTE_BIT)
      return true;
  return false;
}

bool hasExtension(VkPhysicalDevice device, const char *name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> available(n);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &n, available.data());
  for (const VkExtensionProperties &x : available)
    if (std::strcmp(x.extensionName, name) == 0)
      return true;
  return false;
}

// The compute units the driver reports: NVIDIA's streaming multiprocessors, AMD's active
// compute units; 0 elsewhere (Vulkan has no portable count).
uint32_t computeUnits(VkPhysicalDevice device, uint32_t apiVersion) {
  if (apiVersion < VK_API_VERSION_1_1)
    return 0;
  auto query =
      vkStruct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  if (hasExtension(device, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
    auto sm = vkStruct<VkPhysicalDeviceShaderSMBuiltinsPropertiesNV>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV);
    query.pNext = &sm;
    vkGetPhysicalDeviceProperties2(device, &query);
    return sm.shaderSMCount;
  }
  if (hasExtension(device, VK_AMD_SHADER_CORE_PROPERTIES_2_EXTENSION_NAME)) {
    auto cores = vkStruct<VkPhysicalDeviceShaderCoreProperties2AMD>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_2_AMD);
    query.pNext = &cores;
    vkGetPhysicalDeviceProperties2(device, &query);
    return cores.activeComputeUnitCount;
  }
  return 0;
}

int deviceScore(VkPhysicalDeviceType kind) {
  switch (kind) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    return 4;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    return 3;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
    return 2;
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return 1;
  default:
    return 0;
  }
}

} // namespace

absl::StatusOr<std::vector<PhysicalDeviceInfo>> describePhysicalDevices(VkInstance instance) {
  uint32_t n = 0;
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices"));
  std::vector<VkPhysicalDevice> handles(n);
  SINTER_RETURN_IF_ERROR(vkStatus(vkEnumeratePhysicalDevices(instance, &n, handles.data()),
                                  "vkEnumeratePhysicalDevices"));
  if (n == 0)
    return absl::UnavailableError("vulkan: no physical device");
  std::vector<PhysicalDeviceInfo> devices(n);
  for (uint32_t i = 0; i < n; ++i) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(handles[i], &props);
    VkPhysicalDeviceMemoryProperties memory;
    vkGetPhysicalDeviceMemoryProperties(handles[i], &memory);
    PhysicalDeviceInfo &d = devices[i];
    d.index = i;
    d.handle = handles[i];
    d.name = props.deviceName;
    d.type = props.deviceType;
    for (uint32_t h = 0; h < memory.memoryHeapCount; ++h)
      if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
        d.memoryBytes += memory.memoryHeaps[h].size;
    d.computeUnits = computeUnits(handles[i], props.apiVersion);
    d.usable = props.apiVersion >= VK_API_VERSION_1_1 && hasComputeQueue(handles[i]);
  }
  return devices;
}

namespace {
absl::StatusOr<std::vector<PhysicalDeviceInfo>> enumerateOnce() {
  keepDriversLoaded();
  auto app = vkStruct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "sinter-list-devices";
  app.apiVersion = VK_API_VERSION_1_1;
  auto info = vkStruct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  VkResult r = vkCreateInstance(&info, nullptr, &instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    return absl::UnavailableError("vulkan: no Vulkan driver (vkCreateInstance: "
                                  "VK_ERROR_INCOMPATIBLE_DRIVER)");
  SINTER_RETURN_IF_ERROR(vkStatus(r, "vulkan: vkCreateInstance"));
  absl::StatusOr<std::vector<PhysicalDeviceInfo>> devices = describePhysicalDevices(instance);
  vkDestroyInstance(instance, nullptr);
  return devices;
}
} // namespace

const absl::StatusOr<std::vector<PhysicalDeviceInfo>> &listPhysicalDevices() {
  static const auto *devices = new absl::StatusOr<std::vector<PhysicalDeviceInfo>>(enumerateOnce());
  return *devices;
}

absl::StatusOr<size_t> selectPhysicalDevice(const std::vector<PhysicalDeviceInfo> &devices,
                                            const std::string &selector, const char *source) {
  std::optional<size_t> chosen;
  uint32_t index = 0;
  if (!selector.empty() && absl::SimpleAtoi(selector, &index)) {
    for (size_t i = 0; i < devices.size() && !chosen; ++i)
      if (devices[i].index == index && devices[i].usable)
        chosen = i;
  } else if (!selector.empty()) {
    // Mesa's lavapipe names its device "llvmpipe (LLVM ...)": the driver's own name selects it too.
    std::string wanted = absl::AsciiStrToLower(selector);
    if (wanted == "lavapipe")
      wanted = "llvmpipe";
    for (size_t i = 0; i < devices.size() && !chosen; ++i)
      if (devices[i].usable && absl::StrContains(absl::AsciiStrToLower(devices[i].name), wanted))
        chosen = i;
  } else {
    for (size_t i = 0; i < devices.size(); ++i)
      if (devices[i].usable &&
          (!chosen || deviceScore(devices[i].type) > deviceScore(devices[*chosen].type)))
        chosen = i;
  }
  if (chosen)
    return *chosen;
  std::vector<std::string> listed;
  for (const PhysicalDeviceInfo &d : devices)
    listed.push_back(absl::StrCat(d.index, ": ", d.name, d.usable ? "" : " (unusable)"));
  if (selector.empty())
    return absl::UnavailableError(absl::StrCat("vulkan: none of ", devices.size(),
                                               " devices has Vulkan 1.1 and a compute queue (",
                                               absl::StrJoin(listed, ", "), ")"));
  return absl::NotFoundError(absl::StrCat("vulkan: ", source, " '", selector,
                                          "' matches no usable device (",
                                          absl::StrJoin(listed, ", "), ")"));
}

std::string deviceSelectorOrEnvironment(const std::string &selector) {
  if (!selector.empty())
    return selector;
  const char *env = std::getenv("SINTER_VK_DEVICE");
  return env ? env : "";
}

// The loader unloads the drivers when a process's last instance is destroyed and loads them again
// for the next one. NVIDIA's driver does not survive many such cycles: on an H200 (driver 580)
// vkCreateInstance failed with VK_ERROR_INCOMPATIBLE_DRIVER after a few dozen backends had been
// created and destroyed one after another (the conformance table makes one per case). One bare
// instance, made before the first device and kept for the life of the process, keeps the drivers
// loaded; it holds no device and no memory.
void keepDriversLoaded() {
  static const bool kept = [] {
    auto app = vkStruct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "sinter-driver-pin";
    app.apiVersion = VK_API_VERSION_1_1;
    auto info = vkStruct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    info.pApplicationInfo = &app;
    VkInstance pin = VK_NULL_HANDLE; // never destroyed, on purpose
    return vkCreateInstance(&info, nullptr, &pin) == VK_SUCCESS;
  }();
  (void)kept;
}

} // namespace sinter::runtime::vulkan
