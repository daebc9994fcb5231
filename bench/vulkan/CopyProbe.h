// CopyProbe.h - the device's copy bandwidth as the Vulkan issue's floor counts it (bytes read plus
// written a second), from a hand-written streaming copy kernel: vkCmdCopyBuffer reaches a fifth
// of what the memory does on NVIDIA's driver, so it cannot be the floor's denominator.
#ifndef SINTER_BENCH_VULKAN_COPYPROBE_H
#define SINTER_BENCH_VULKAN_COPYPROBE_H

#include "absl/status/statusor.h"
#include "runtime/vulkan/VulkanDevice.h"

namespace sinter::bench {

/// Copies 16-byte vectors from one buffer to another with a grid-stride loop (workgroups of 256,
/// four loads issued before their four stores, 1056 workgroups: 2048 invocations for each of 132
/// cores, fewer where the largest binding is small), over 1 GiB (or the device's largest binding)
/// and over an eighth of that, one submit-and-wait each. Returns the slope's bytes read plus
/// written per second (the submission cancels), the median of `rounds` pairs. Checks the copy (both
/// halves of the source hold different words, and both must arrive) and says so in the error when
/// it is wrong.
absl::StatusOr<double> measureCopyBandwidth(runtime::vulkan::VulkanDevice &device, int rounds = 5);

} // namespace sinter::bench

#endif // SINTER_BENCH_VULKAN_COPYPROBE_H
