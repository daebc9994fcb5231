// HostSteps.h - launches a Vulkan plan runs on the host: what the device cannot bind or build.
//
// A device binds at most maxStorageBufferRange bytes of a buffer to a kernel, while allocate
// accepts any buffer the memory holds. A launch that reaches past that range, or one no kernel
// can be built for, runs its member ops on the host with the reference kernels between two
// submissions (VulkanPlan.cpp decides when; docs/CONTRACT.md says what a caller sees).
#ifndef SINTER_RUNTIME_VULKAN_HOSTSTEPS_H
#define SINTER_RUNTIME_VULKAN_HOSTSTEPS_H

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/vulkan/HazardTracker.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "support/KernelProgram.h"
#include "support/Plan.h"

namespace sinter::runtime::vulkan {

/// The largest range a descriptor binds: maxStorageBufferRange in whole 16-byte words.
inline uint64_t bindLimit(const DeviceCaps &caps) {
  return caps.maxStorageBufferRange & ~uint64_t(15);
}

/// True when every byte `members` touch this run (integers bound from `args`) of each slot in
/// `access` that is larger than bindLimit lies inside its first bindLimit bytes, so a dispatch
/// binding just those computes the same.
bool membersFitBindings(const DeviceCaps &caps, absl::Span<const KernelMember> members,
                        const StepAccesses &access, const PlanArgs &args);

/// Runs `members` in order with the reference kernels on host copies of the bytes they touch,
/// read from and written back to their slots' device buffers through staging (the device must
/// have finished the work before them). The copies cover [0, end) of a slot with only the bytes
/// touched filled, so only those pages are committed.
absl::Status runMembersOnHost(VulkanDevice &device, absl::Span<const KernelMember> members,
                              const PlanArgs &args);

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_HOSTSTEPS_H
