// VulkanPlan.h - the PlanCompiler that runs KernelPrograms on a Vulkan device.
//
// Each kernel of a program becomes a compute pipeline (built once per KernelSpec key by an
// injected kernel builder, the SPIR-V code generator in production, hand-written SPIR-V in
// tests, and kept in an LRU of kernelCacheCapacity: plans hold the kernels they dispatch, so one
// dropped from the cache lives until its last plan is gone); copies become vkCmdCopyBuffer and
// uploads staged copies. A run resolves every step
// into commands (uploads, dispatches with their descriptor sets and grids, a global memory
// barrier only before a step that reads what an earlier step wrote, or writes what an earlier
// step read or wrote, per buffer slot), writes the kernels' integer words into a parameter
// buffer, and submits ONE command buffer for the whole flush and waits. When the commands are
// those of the plan's previous run (the decode's case: same buffers, new position and token),
// the command buffer that run recorded is submitted again: the host records nothing. Only when
// the uploads of a flush do not fit in the staging ring is the flush split (submit, wait,
// continue), and such a run is not kept for replay. A copy_from_device that ends the flush
// (PlanReadback: the decode's logits) is copied into staging by the same command buffer, so a
// decode step is one queue submission.
//
// A fused kernel the builder cannot generate (Unimplemented) runs as its member ops' single-op
// kernels, logged once per kernel; an op with no single-op kernel fails the compilation with
// Unimplemented, naming the op: results never silently come from somewhere else.
#ifndef SINTER_RUNTIME_VULKAN_VULKANPLAN_H
#define SINTER_RUNTIME_VULKAN_VULKANPLAN_H

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <atomic>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "codegen/KernelSpec.h"
#include "runtime/vulkan/PipelineCache.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "support/KernelProgram.h"
#include "support/LruMap.h"
#include "support/Plan.h"

namespace sinter::runtime::vulkan {

/// VulkanKernel::bindingMembers of a binding the plan provides (attention's scratch).
inline constexpr uint8_t kScratchBindingMember = 255;

/// One compiled kernel as the runtime dispatches it.
struct VulkanKernel {
  std::string name;
  /// The SPIR-V and its interface: binding i is buffer operand bindingOperands[i] of member
  /// bindingMembers[i] (members in KernelSpec order: prologue, anchor, epilogue); push-constant
  /// word j holds ints[pushConstantInts[j]] of member pushConstantMembers[j], as a u32. For a
  /// single-op kernel the member lists may stay empty (member 0, binding i = operand i).
  KernelBinary binary;
  std::vector<uint8_t> pushConstantInts;
  std::vector<uint8_t> pushConstantMembers;
  std::vector<uint8_t> bindingMembers;
  std::vector<uint8_t> bindingOperands;
  /// Attention over heads (KernelSpec::attentionOverHeads): the words codegen::AttentionWord
  /// lists follow the members' integers, and the grid is one workgroup per head.
  uint32_t extraPushWords = 0;
  bool perHead = false;
  /// Attention split over the positions: attentionSplits workgroups per head, and a binding
  /// (bindingMembers[i] == kScratchBindingMember) of scratchWordsPerHead u32s a head that the
  /// plan provides, zeroed once (the kernel leaves it zero).
  uint32_t attentionSplits = 1;
  uint32_t scratchWordsPerHead = 0;
  /// When nonzero, the push-constant words above (this many) are not pushed: they go into a
  /// storage buffer the plan binds at the last binding (binary.numBuffers - 1), a region per
  /// dispatch of a buffer the plan owns, so its recorded command buffer can be replayed with
  /// new integers.
  uint32_t paramWords = 0;
  /// Workgroups for the anchor's integer arguments (all of them); a zero count skips the dispatch.
  std::function<std::array<uint32_t, 3>(const int64_t *ints)> grid;
  /// The anchor's integer arguments grid() reads (bit i: ints[i]; all when unknown). When one
  /// of them is a plan parameter and the kernel has paramWords, the plan dispatches indirectly,
  /// the grid written beside the words, so the commands do not change with it.
  uint8_t gridInts = 0xff;
};

/// Builds the kernel of `spec`; Unimplemented when the generator has none for it.
using VulkanKernelBuilder =
    std::function<absl::StatusOr<VulkanKernel>(const codegen::KernelSpec &spec)>;

/// Counters over the life of a compiler and its plans.
struct VulkanCompilerStats {
  uint64_t plans = 0;
  uint64_t kernelsBuilt = 0;    ///< distinct kernels built (pipelines made)
  uint64_t kernelHits = 0;      ///< ops whose kernel was built before
  uint64_t cachedKernels = 0;   ///< kernels in the compiler's cache now (kernelCacheCapacity)
  uint64_t liveKernels = 0;     ///< kernels alive: in the cache or held by a plan
  uint64_t kernelEvictions = 0; ///< kernels dropped from the cache to make room
  uint64_t fusedFallbacks = 0;  ///< distinct fused kernels run as their members
  /// Launches compiled to run on the host (no kernel could be built for them).
  uint64_t hostSteps = 0;
  /// Runs of launches on the host: those compiled so, and dispatches whose buffers were too
  /// large to bind that run.
  uint64_t hostRuns = 0;
  uint64_t fusedDispatches = 0; ///< dispatches of generated fused kernels (several ops each)
  uint64_t runs = 0;
  uint64_t submissions = 0;
  uint64_t dispatches = 0;
  uint64_t copies = 0;   ///< vkCmdCopyBuffer of copy ops (uploads not counted)
  uint64_t uploads = 0;  ///< staged host copies
  uint64_t barriers = 0; ///< memory barriers between steps (the entry barrier not counted)
  /// Sum of the kernels' device time (timestamps), when they are on.
  double kernelSeconds = 0;
  /// With timestamps: the flushes' device time from the first dispatch's start to the last's
  /// end (gaps included), and their host time recording command buffers.
  double spanSeconds = 0;
  double recordSeconds = 0;
  /// The runs' host time from submitting to the fence signalling (always measured).
  double waitSeconds = 0;
  /// The runs' host time from their start to their last submission: resolving the steps,
  /// writing the parameter words, recording or replaying (always measured). In a run of one
  /// submission the device is idle through it.
  double presubmitSeconds = 0;
  /// Command buffers recorded by runs, and runs that submitted the command buffer an earlier
  /// run recorded (same buffers, grids and barriers; only the parameter words written anew).
  uint64_t recordings = 0;
  uint64_t replays = 0;
  /// Attention dispatches that left the scores buffer alone: a later step overwrote them
  /// (VulkanCompilerOptions::elideDeadScores).
  uint64_t deadScores = 0;
};

/// The counters of a compiler and its plans; tests and benchmarks may hold it after the backend
/// that owns the compiler is gone.
struct VulkanStatsSink {
  mutable absl::Mutex mu;
  VulkanCompilerStats stats ABSL_GUARDED_BY(mu);
  /// Kernels alive (VulkanCompilerStats::liveKernels): counted down by the last plan that
  /// lets one go, which may be after the compiler is gone.
  std::atomic<uint64_t> liveKernels{0};
  VulkanCompilerStats get() const {
    absl::MutexLock lock(&mu);
    VulkanCompilerStats s = stats;
    s.liveKernels = liveKernels;
    return s;
  }
};

/// Kernels a VulkanCompiler keeps by default: as many as the device's pipeline cache
/// (kDefaultPipelineCacheCapacity), whose pipelines they hold.
inline constexpr size_t kDefaultKernelCacheCapacity = kDefaultPipelineCacheCapacity;

struct VulkanCompilerOptions {
  /// One line on stderr per fused kernel that falls back to its members (once per kernel name).
  bool logFallbacks = true;
  /// Per-kernel timestamps printed after each flush (SINTER_STATS=1 sets it; needs timestamps,
  /// which VulkanDeviceOptions::timestamps or SINTER_STATS=1 turn on: with them and without
  /// this, the times only go to the stats).
  bool printKernelTimes = false;
  /// Where the counters go; a fresh sink when null.
  std::shared_ptr<VulkanStatsSink> stats;
  /// Fail a flush with Internal when the validation layer (if on) reported messages during it.
  bool failOnValidationMessages = true;
  /// Keep each plan's last command buffer and submit it again when a run would record the same
  /// commands (kernels with VulkanKernel::paramWords take their integers from a buffer, so new
  /// integers do not change the commands). False: record every run (SINTER_VK_REPLAY=0).
  bool replay = true;
  /// Gate and up as one launch where the generator builds it (LaunchOptions::siblingProducts;
  /// `SINTER_VK_QMATMUL=pairs=0` turns it off).
  bool siblingProducts = true;
  /// Q, K and V as one stacked launch where the generator builds it
  /// (LaunchOptions::stackedProducts; `SINTER_VK_QMATMUL=stack=0` turns it off).
  bool stackedProducts = true;
  /// An attention launch whose scores the next step touching the scores buffer overwrites
  /// whole (another attention launch over at least as many positions) does not store them
  /// (codegen::kAttnStoreScores = 0): dead values, and the normalizing pass on the last head's
  /// critical path. `SINTER_VK_QMATMUL=deadscores=0` stores every layer's.
  bool elideDeadScores = true;
  /// Kernels (SPIR-V and pipeline) the compiler keeps, least recently used dropped first.
  size_t kernelCacheCapacity = kDefaultKernelCacheCapacity;
};

class VulkanCompiler : public PlanCompiler {
public:
  VulkanCompiler(std::shared_ptr<VulkanDevice> device, VulkanKernelBuilder builder,
                 VulkanCompilerOptions options = {});
  ~VulkanCompiler() override;

  std::string name() const override { return "vulkan"; }
  /// The trace's unfused program: every entry its own kernel.
  absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                const std::vector<IntSlot> &params) override;
  /// A program from the fusion pipeline.
  absl::StatusOr<std::unique_ptr<Plan>> compileProgram(const KernelProgram &program);

  /// The counters, with cachedKernels and kernelEvictions as of now.
  VulkanCompilerStats stats() const;
  VulkanDevice &device() { return *device_; }

  /// A kernel built for one spec (or the error building it), shared by the cache and every plan
  /// that dispatches it.
  struct Built {
    absl::Status status;
    VulkanKernel kernel;
    std::shared_ptr<const Pipeline> pipeline;
  };
  using Shared = VulkanStatsSink;

private:
  std::shared_ptr<const Built> kernelFor(const codegen::KernelSpec &spec);

  std::shared_ptr<VulkanDevice> device_;
  VulkanKernelBuilder builder_;
  VulkanCompilerOptions options_;
  LruMap<std::string, std::shared_ptr<const Built>> kernels_;
  absl::flat_hash_map<std::string, bool> loggedFallbacks_;
  std::shared_ptr<Shared> shared_;
};

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_VULKANPLAN_H
