// PhysicalDevices.h - the Vulkan devices of the machine, described and chosen in one place.
//
// VulkanDevice picks its physical device with selectPhysicalDevice; the device listing
// (sinter::listDevices, `sinter-run --list-devices`) and the factory's `auto` kind describe
// the same devices with listPhysicalDevices, so the three cannot disagree about what a device
// is or which one a selector names.
#ifndef SINTER_RUNTIME_VULKAN_PHYSICALDEVICES_H
#define SINTER_RUNTIME_VULKAN_PHYSICALDEVICES_H

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include <vulkan/vulkan.h>

namespace sinter::runtime::vulkan {

/// One physical device as Vulkan reports it.
struct PhysicalDeviceInfo {
  uint32_t index = 0; ///< Vulkan's enumeration index (the numbers SINTER_VK_DEVICE takes)
  VkPhysicalDevice handle = VK_NULL_HANDLE; ///< valid while the instance that listed it lives
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  /// Bytes of the device-local memory heaps.
  uint64_t memoryBytes = 0;
  /// Compute units where the driver reports them (NVIDIA's SM count, AMD's compute units);
  /// 0 where Vulkan does not say (lavapipe, Intel).
  uint32_t computeUnits = 0;
  /// Sinter can run on it: Vulkan 1.1 and a compute queue.
  bool usable = false;
};

/// Describes every physical device of `instance`, in enumeration order. Unavailable when there
/// is none.
absl::StatusOr<std::vector<PhysicalDeviceInfo>> describePhysicalDevices(VkInstance instance);

/// describePhysicalDevices on an instance of its own (created and destroyed here), once per
/// process: drivers do not come and go while a process runs, and the factory's `auto` kind asks
/// whenever it builds a backend. Unavailable when the machine has no Vulkan driver or device.
const absl::StatusOr<std::vector<PhysicalDeviceInfo>> &listPhysicalDevices();

/// The position in `devices` of the device `selector` names: a Vulkan index, or a
/// case-insensitive substring of the name ("lavapipe" also names Mesa's "llvmpipe (LLVM ...)"),
/// the first usable match; empty: the best usable device (discrete, integrated, virtual, CPU).
/// NotFound listing the devices when nothing usable matches (`source` names the setting, e.g.
/// "SINTER_VK_DEVICE"), Unavailable when no device is usable at all.
absl::StatusOr<size_t> selectPhysicalDevice(const std::vector<PhysicalDeviceInfo> &devices,
                                            const std::string &selector, const char *source);

/// The setting that chose the device: the code's selector when not empty, else SINTER_VK_DEVICE
/// (empty when unset).
std::string deviceSelectorOrEnvironment(const std::string &selector);

/// Creates, once per process, a bare instance that is never destroyed, so the loader keeps the
/// drivers loaded between instances (VulkanDevice.cpp says why).
void keepDriversLoaded();

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_PHYSICALDEVICES_H
