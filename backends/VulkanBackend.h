// VulkanBackend.h - the `vulkan` backend kind: the lazy recorder over Vulkan device memory.
//
// LazyBackend (recorder, plan cache, parameter discovery) with a VulkanBufferStore for the
// buffers and a VulkanCompiler for the Plans: with fusion on the fusion pipeline's KernelProgram,
// with fusion off one kernel per call, in eager mode one waited-for flush per call. Kernels
// come from the SPIR-V code generator (codegen/spirv) unless the options bring their own builder
// (tests use hand-written SPIR-V). Without the generator in the build, the factory's kind is
// Unimplemented instead of a backend whose every flush would fail.
#ifndef SINTER_BACKENDS_VULKANBACKEND_H
#define SINTER_BACKENDS_VULKANBACKEND_H

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "runtime/vulkan/VulkanPlan.h"
#include "sinter/ComputeBackend.h"
#include "sinter/Factory.h"

namespace sinter {

struct VulkanBackendOptions {
  /// The device to run on (shared with the caller, e.g. a test that reads its validation log);
  /// created from `deviceOptions` when null.
  std::shared_ptr<runtime::vulkan::VulkanDevice> device;
  runtime::vulkan::VulkanDeviceOptions deviceOptions;
  /// Builds kernels; the SPIR-V code generator when null.
  runtime::vulkan::VulkanKernelBuilder builder;
  /// Receives the compiler's counters; may be null.
  std::shared_ptr<runtime::vulkan::VulkanStatsSink> stats;
  bool logFallbacks = true;
  /// Plans keep their command buffer and submit it again while the commands stay the same
  /// (the generated kernels then read their integers from a parameter buffer, not push
  /// constants); false records every flush. SINTER_VK_REPLAY=0 makes it false.
  bool replay = true;
  /// LazyBackendOptions::overlapCalls (SINTER_OVERLAP overrides): flush early without waiting
  /// after an add that leaves this many calls pending, so the device overlaps the recording.
  size_t overlapCalls = 0;
  /// LazyBackendOptions::overlapGrowth (SINTER_OVERLAP_GROWTH overrides).
  size_t overlapGrowth = 8;
  /// VulkanCompilerOptions::kernelCacheCapacity: kernels the compiler keeps (plans hold theirs).
  size_t kernelCacheCapacity = runtime::vulkan::kDefaultKernelCacheCapacity;
};

/// True when this build has the SPIR-V code generator (codegen/spirv).
bool haveSpirvCodegen();

/// The SPIR-V code generator as a kernel builder for `caps` (Unimplemented for every spec when
/// the generator is not in the build); `paramsInBuffer`: the kernels' integers in a parameter
/// buffer (VulkanKernel::paramWords) rather than push constants.
runtime::vulkan::VulkanKernelBuilder spirvCodegenBuilder(const runtime::vulkan::DeviceCaps &caps,
                                                         bool paramsInBuffer = true);

/// The vulkan backend `options` describe (kind is not looked at). Unavailable when the machine
/// has no Vulkan device; Unimplemented when no builder is given and the generator is not built.
absl::StatusOr<std::unique_ptr<ComputeBackend>>
createVulkanBackend(const BackendOptions &options, VulkanBackendOptions vulkan = {});

} // namespace sinter

#endif // SINTER_BACKENDS_VULKANBACKEND_H
