// Devices.cpp - listDevices: the Vulkan devices (runtime/vulkan/PhysicalDevices.h) and the host.
//
// The Vulkan part is enumerated once per process (runtime::vulkan::listPhysicalDevices).
#include "sinter/Devices.h"

#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "backends/VulkanBackend.h"
#include "runtime/vulkan/PhysicalDevices.h"

namespace sinter {
namespace {

using runtime::vulkan::PhysicalDeviceInfo;

DeviceType typeOf(VkPhysicalDeviceType type) {
  switch (type) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    return DeviceType::DiscreteGpu;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    return DeviceType::IntegratedGpu;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
    return DeviceType::VirtualGpu;
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return DeviceType::Software;
  default:
    return DeviceType::Other;
  }
}

// The CPU's model name from /proc/cpuinfo ("AMD EPYC 9R14 96-Core Processor"), else "host CPU".
std::string cpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "model name"))
      continue;
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      if (!name.empty())
        return name;
    }
  }
  return "host CPU";
}

uint64_t hostMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) : 0;
}

} // namespace

const char *deviceTypeName(DeviceType type) {
  switch (type) {
  case DeviceType::Cpu:
    return "cpu";
  case DeviceType::DiscreteGpu:
    return "discrete";
  case DeviceType::IntegratedGpu:
    return "integrated";
  case DeviceType::VirtualGpu:
    return "virtual";
  case DeviceType::Software:
    return "software";
  case DeviceType::Other:
    break;
  }
  return "other";
}

absl::StatusOr<std::vector<Device>> listDevices() {
  // Unavailable (no driver, no device) leaves the CPU alone; any other failure is reported.
  // Without the SPIR-V code generator the vulkan kind is not in this build: nothing runs there.
  static const absl::StatusOr<std::vector<PhysicalDeviceInfo>> kNone =
      absl::UnavailableError("no vulkan kind");
  const absl::StatusOr<std::vector<PhysicalDeviceInfo>> &physical =
      haveSpirvCodegen() ? runtime::vulkan::listPhysicalDevices() : kNone;
  if (!physical.ok() && physical.status().code() != absl::StatusCode::kUnavailable)
    return physical.status();
  std::vector<Device> devices;
  uint32_t cpuIndex = 0;
  if (physical.ok()) {
    for (const PhysicalDeviceInfo &d : *physical) {
      cpuIndex = d.index + 1;
      if (d.usable)
        devices.push_back(Device{d.index, d.name, BackendKind::Vulkan, typeOf(d.type),
                                 d.memoryBytes, d.computeUnits});
    }
  }
  devices.push_back(Device{cpuIndex, cpuName(), BackendKind::Cpu, DeviceType::Cpu,
                           hostMemoryBytes(), std::max(1u, std::thread::hardware_concurrency())});
  return devices;
}

absl::StatusOr<Device> findDevice(const std::vector<Device> &devices, absl::string_view selector) {
  std::string wanted = absl::AsciiStrToLower(absl::StripAsciiWhitespace(selector));
  uint32_t index = 0;
  const bool byIndex = absl::SimpleAtoi(wanted, &index);
  if (wanted == "lavapipe")
    wanted = "llvmpipe";
  for (const Device &d : devices) {
    if (byIndex ? d.index == index
                : !wanted.empty() && ((wanted == "cpu" && d.kind == BackendKind::Cpu) ||
                                      absl::StrContains(absl::AsciiStrToLower(d.name), wanted)))
      return d;
  }
  return absl::NotFoundError(
      absl::StrFormat("no device '%s'; the devices are: %s (an index, 'cpu', or part of a name)",
                      selector, absl::StrJoin(devices, "; ", [](std::string *out, const Device &d) {
                        absl::StrAppend(out, d.index, ": ", d.name);
                      })));
}

std::string describeDevice(const Device &d) {
  const double gib = d.memoryBytes / double(uint64_t(1) << 30);
  if (d.kind == BackendKind::Cpu)
    return absl::StrFormat("%u: %s: cpu, %u cores, %.1f GiB", d.index, d.name, d.computeUnits, gib);
  std::string units = d.computeUnits ? absl::StrCat(d.computeUnits, " compute units")
                                     : "compute units not reported";
  return absl::StrFormat("%u: %s: vulkan %s, %.1f GiB, %s", d.index, d.name, deviceTypeName(d.type),
                         gib, units);
}

} // namespace sinter
