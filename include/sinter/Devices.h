// Devices.h - the devices Sinter can run on, and choosing one by index or name.
//
// listDevices() is what `sinter-run --list-devices`, sinter_device_count/sinter_device_get (C)
// and sinter::list_devices (Rust) report; BackendOptions::device takes an index or a name from
// it. The Vulkan devices come first, each with its Vulkan index as its index (the numbers
// SINTER_VK_DEVICE takes), then the host CPU, which the reference, lazy and cpu kinds run on.
#ifndef SINTER_DEVICES_H
#define SINTER_DEVICES_H

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sinter/ComputeBackend.h"

namespace sinter {

/// What a device is. The values are the C ABI's SINTER_DEVICE_TYPE_* and never change.
enum class DeviceType : uint32_t {
  Cpu = 0,           ///< the host CPU (reference, lazy, cpu kinds)
  DiscreteGpu = 1,   ///< a Vulkan GPU with its own memory
  IntegratedGpu = 2, ///< a Vulkan GPU sharing the host's memory
  VirtualGpu = 3,    ///< a Vulkan GPU of a virtual machine
  Software = 4,      ///< a Vulkan implementation on the CPU (Mesa's lavapipe, "llvmpipe")
  Other = 5,         ///< a Vulkan device of another type
};

/// "cpu", "discrete", "integrated", "virtual", "software" or "other".
const char *deviceTypeName(DeviceType type);

/// One device.
struct Device {
  /// What BackendOptions::device takes: a Vulkan device's Vulkan index; the CPU comes last.
  uint32_t index = 0;
  std::string name;
  /// BackendKind::Vulkan for a Vulkan device, BackendKind::Cpu for the host.
  BackendKind kind = BackendKind::Cpu;
  DeviceType type = DeviceType::Cpu;
  /// Device-local memory (Vulkan) or physical memory (CPU), in bytes.
  uint64_t memoryBytes = 0;
  /// CPU: hardware threads. Vulkan: compute units where the driver reports them (NVIDIA's SMs,
  /// AMD's compute units), 0 where it does not (lavapipe, Intel).
  uint32_t computeUnits = 0;
};

/// Every device Sinter can run on: the Vulkan devices with Vulkan 1.1 and a compute queue, then
/// the host CPU (always there). A machine without a Vulkan driver lists the CPU alone.
absl::StatusOr<std::vector<Device>> listDevices();

/// The device `selector` names among `devices`: its index, "cpu" (the host), or a
/// case-insensitive substring of its name ("lavapipe" also names Mesa's llvmpipe device); the
/// first match in list order. NotFound listing the devices when none matches.
absl::StatusOr<Device> findDevice(const std::vector<Device> &devices, absl::string_view selector);

/// One line describing a device, as `sinter-run --list-devices` prints it, e.g.
/// "0: NVIDIA H100 80GB HBM3: vulkan discrete, 79.6 GiB, 132 compute units" or
/// "1: AMD EPYC 7B13: cpu, 2 cores, 31.3 GiB".
std::string describeDevice(const Device &device);

} // namespace sinter

#endif // SINTER_DEVICES_H
