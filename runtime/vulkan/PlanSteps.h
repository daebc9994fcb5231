// PlanSteps.h - what VulkanCompiler (VulkanCompiler.cpp) hands the plan it makes
// (VulkanPlan.cpp): the steps of a compiled program. Internal to runtime/vulkan.
#ifndef SINTER_RUNTIME_VULKAN_PLANSTEPS_H
#define SINTER_RUNTIME_VULKAN_PLANSTEPS_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/vulkan/HazardTracker.h"
#include "runtime/vulkan/LaunchGroups.h"
#include "runtime/vulkan/VulkanPlan.h"
#include "support/KernelProgram.h"

namespace sinter::runtime::vulkan {

// The single-op launches an attention step falls back to when its heads disagree at run time.
struct HeadFallback {
  std::vector<KernelMember> members;
  /// Where the members' seq_len come from (attentionUniform's check without binding them).
  SeqLenSources seqLens;
  std::vector<std::shared_ptr<const VulkanCompiler::Built>> built;
  std::vector<StepAccesses> access;
  std::array<uint32_t, 7> words{};
};

// One step of a plan.
struct Step {
  /// Host: the members run on the host with the reference kernels, between two submissions (a
  /// launch no kernel can be built for; VulkanPlan also runs a Dispatch step so when this run's
  /// buffers are too large to bind).
  enum class Kind : uint8_t { Upload, Copy, Dispatch, Host };
  Kind kind = Kind::Dispatch;
  /// Upload and Copy: the entry; Dispatch and Host: the anchor op (names, messages).
  KernelMember member;
  /// Dispatch and Host: every member op in KernelSpec order (one for a single-op kernel).
  std::vector<KernelMember> members;
  uint8_t anchor = 0;
  /// Dispatch: the kernel, held by the plan whatever the compiler's cache drops.
  std::shared_ptr<const VulkanCompiler::Built> built;
  uint32_t kernelIndex = 0; ///< the program kernel it belongs to
  /// Slots read and written (from opAccesses, over every member), for the barriers.
  StepAccesses access;
  /// Attention over heads: the heads' members run one by one when their seq_len differ.
  std::shared_ptr<const HeadFallback> heads;
  /// Dispatch: the grid depends on a plan parameter (VulkanKernel::gridInts), so it is
  /// dispatched indirectly from the parameter buffer.
  bool indirect = false;
};

/// The slots an entry reads and writes (from opAccesses).
StepAccesses accessesOf(const TraceEntry &e);

/// The plan of `steps` (VulkanPlanImpl, VulkanPlan.cpp).
std::unique_ptr<Plan> makeVulkanPlan(std::shared_ptr<VulkanDevice> device,
                                     std::shared_ptr<VulkanCompiler::Shared> shared,
                                     std::vector<Step> steps, size_t launches, size_t numSlots,
                                     std::string description, bool printTimes, bool checkValidation,
                                     bool replay, bool elideDeadScores);

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_PLANSTEPS_H
