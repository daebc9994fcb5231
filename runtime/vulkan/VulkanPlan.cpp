// VulkanPlan.cpp - a plan's run: steps (upload, copy, dispatch) -> commands -> one command
// buffer per run, recorded again only when the commands change (VulkanCompiler.cpp makes the
// steps).
//
// The plan is compiled once per trace structure; a run binds this flush's buffers and integers,
// resolves every step into commands with only the barriers the slots' accesses need (the
// kernels' integer words go to a parameter buffer, written in place where the device has
// host-visible device memory), then submits once and waits: the command
// buffer of the previous run when its commands are the same, else a new recording.
#include "runtime/vulkan/VulkanPlan.h"
#include "runtime/vulkan/PlanSteps.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/FaultInjection.h"
#include "runtime/vulkan/DescriptorCache.h"
#include "runtime/vulkan/HazardTracker.h"
#include "runtime/vulkan/HostSteps.h"
#include "runtime/vulkan/LaunchGroups.h"
#include "runtime/vulkan/PipelineCache.h"
#include "runtime/vulkan/StagingRing.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "runtime/vulkan/VulkanMemory.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {
namespace {

constexpr VkPipelineStageFlags kWorkStages =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr std::array<uint32_t, 3> kOneGroup = {1, 1, 1};

// One command of a run's command buffer, resolved from the steps and this run's buffers and
// integers. Two runs with equal commands (and push-constant words) record the same command
// buffer, so the later one submits the earlier one's again.
struct Command {
  enum class Kind : uint8_t { ResetQueries, Fill, Barrier, Copy, Dispatch };
  /// Dispatch: the grid is read at run time from (src, srcOffset), not `groups`.
  bool indirect = false;
  Kind kind = Kind::Barrier;
  // Copy: src -> dst; Fill: dst (zeros).
  VkBuffer src = VK_NULL_HANDLE, dst = VK_NULL_HANDLE;
  uint64_t srcOffset = 0, dstOffset = 0, size = 0;
  // Barrier.
  VkPipelineStageFlags srcStages = 0, dstStages = 0;
  VkAccessFlags srcAccess = 0, dstAccess = 0;
  // Dispatch: push-constant words [pushFirst, pushFirst + pushWords) of the run's list.
  const Pipeline *pipeline = nullptr;
  VkDescriptorSet set = VK_NULL_HANDLE;
  std::array<uint32_t, 3> groups{};
  uint32_t pushFirst = 0, pushWords = 0;
  /// Dispatch: its timestamp pair (-1: untimed); ResetQueries: the query count.
  int64_t query = -1;

  auto tie() const {
    return std::tie(kind, indirect, src, dst, srcOffset, dstOffset, size, srcStages, dstStages,
                    srcAccess, dstAccess, pipeline, set, groups, pushFirst, pushWords, query);
  }
  friend bool operator==(const Command &a, const Command &b) { return a.tie() == b.tie(); }
};

Command barrierCommand(VkPipelineStageFlags srcStages, VkAccessFlags srcAccess,
                       VkPipelineStageFlags dstStages, VkAccessFlags dstAccess) {
  Command c;
  c.kind = Command::Kind::Barrier;
  c.srcStages = srcStages;
  c.srcAccess = srcAccess;
  c.dstStages = dstStages;
  c.dstAccess = dstAccess;
  return c;
}

Command copyCommand(VkBuffer src, uint64_t srcOffset, VkBuffer dst, uint64_t dstOffset,
                    uint64_t size) {
  Command c;
  c.kind = Command::Kind::Copy;
  c.src = src;
  c.srcOffset = srcOffset;
  c.dst = dst;
  c.dstOffset = dstOffset;
  c.size = size;
  return c;
}

void recordCommands(VkCommandBuffer cmd, absl::Span<const Command> commands,
                    absl::Span<const uint32_t> push, VkQueryPool queries) {
  for (const Command &c : commands) {
    switch (c.kind) {
    case Command::Kind::ResetQueries:
      vkCmdResetQueryPool(cmd, queries, 0, static_cast<uint32_t>(c.query));
      break;
    case Command::Kind::Fill:
      vkCmdFillBuffer(cmd, c.dst, c.dstOffset, c.size, 0);
      break;
    case Command::Kind::Barrier:
      recordMemoryBarrier(cmd, c.srcStages, c.srcAccess, c.dstStages, c.dstAccess);
      break;
    case Command::Kind::Copy: {
      VkBufferCopy region{c.srcOffset, c.dstOffset, c.size};
      vkCmdCopyBuffer(cmd, c.src, c.dst, 1, &region);
      break;
    }
    case Command::Kind::Dispatch:
      vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeline->pipeline);
      vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c.pipeline->layout, 0, 1, &c.set,
                              0, nullptr);
      if (c.pushWords > 0)
        vkCmdPushConstants(cmd, c.pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4 * c.pushWords,
                           push.data() + c.pushFirst);
      if (c.query >= 0)
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries,
                            static_cast<uint32_t>(2 * c.query));
      if (c.indirect)
        vkCmdDispatchIndirect(cmd, c.src, c.srcOffset);
      else
        vkCmdDispatch(cmd, c.groups[0], c.groups[1], c.groups[2]);
      if (c.query >= 0)
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries,
                            static_cast<uint32_t>(2 * c.query + 1));
      break;
    }
  }
}

class VulkanPlanImpl : public Plan {
public:
  VulkanPlanImpl(std::shared_ptr<VulkanDevice> device,
                 std::shared_ptr<VulkanCompiler::Shared> shared, std::vector<Step> steps,
                 size_t launches, size_t numSlots, std::string description, bool printTimes,
                 bool checkValidation, bool replay, bool elideDeadScores)
      : device_(std::move(device)), shared_(std::move(shared)), steps_(std::move(steps)),
        launches_(launches), numSlots_(numSlots), description_(std::move(description)),
        timed_(device_->timestampsEnabled()), printTimes_(printTimes && timed_),
        checkValidation_(checkValidation && device_->validationEnabled()), replay_(replay) {
    // A parameter region per dispatch the plan can make (an attention step that falls back
    // makes one per head), each as large as the largest kernel's words and an indirect grid.
    uint64_t regions = 0, words = 0;
    for (const Step &s : steps_) {
      if (s.kind != Step::Kind::Dispatch)
        continue;
      ++dispatches_;
      regions += 1 + (s.heads ? s.heads->members.size() : 0);
      words = std::max<uint64_t>(words, s.built->kernel.paramWords);
      if (s.heads)
        for (const std::shared_ptr<const VulkanCompiler::Built> &b : s.heads->built)
          words = std::max<uint64_t>(words, b->kernel.paramWords);
    }
    if (words > 0) {
      paramStride_ = alignScratch(4 * (words + 3));
      paramBytes_ = regions * paramStride_;
    }
    if (elideDeadScores)
      findScoresOverwrites();
  }
  ~VulkanPlanImpl() override {
    device_->freeCommands(replayCmd_);
    if (queries_ != VK_NULL_HANDLE)
      vkDestroyQueryPool(device_->device(), queries_, nullptr);
    device_->freeBuffer(scratch_);
    device_->freeBuffer(attentionScratch_);
    if (paramsMapped_)
      device_->freeMappedParams(params_);
    else
      device_->freeBuffer(params_);
    for (const BufferRef &r : retired_)
      device_->freeBuffer(r);
  }

  absl::Status run(const PlanArgs &args) override;
  size_t numKernels() const override { return launches_; }
  std::string describe() const override { return description_; }

private:
  /// Starts the commands of a submission at `step`: the parameter words' copy into params_
  /// (from staging the run then fills) and its barrier.
  absl::Status beginSegment(size_t step);
  /// Records the commands so far into a one-time command buffer, submits it and waits (a split
  /// flush), then begins the next segment at `step`.
  absl::Status splitAt(size_t step);
  /// Submits the commands: the kept command buffer when they equal its commands, else a new
  /// recording (kept for the next run when `keep`).
  absl::Status submitCommands(size_t endStep, bool keep, bool noWait = false);
  /// A copy step compiled as the copy kernel whose buffers this run are too large to bind.
  bool copyTooWideToBind(const Step &s, const PlanArgs &args) const;
  /// False when a buffer of a dispatch step is larger than the device can bind and the step
  /// reads or writes it past the largest range it can (resolveDispatch binds such buffers from
  /// their start up to that range when the step stays inside it).
  bool fitsBindings(const Step &s, const PlanArgs &args) const;
  /// Runs step `index`'s members on the host with the reference kernels: what is recorded so far
  /// is submitted and waited for, the bytes the members touch come back through staging, the
  /// bytes they write go out again, and the next segment begins after the step.
  absl::Status runOnHost(size_t index, const PlanArgs &args);
  absl::Status nameFailure(absl::Status s, size_t endStep) const;
  /// A read that follows the flush (copy_from_device of a slot, PlanReadback): its copy into
  /// staging ends the submission, so the bytes come back without a second one, and the same read
  /// each token (the logits) records the same commands, so the command buffer is still replayed.
  /// An empty span when the plan cannot take it (the caller then reads after the run).
  StagingSpan recordReadback(const PlanArgs &args);
  absl::Status resolveUpload(size_t index, const PlanArgs &args, HazardTracker &hazards);
  absl::Status resolveCopy(const OpCall &op, const PlanArgs &args, HazardTracker &hazards);
  absl::Status resolveDispatch(const VulkanCompiler::Built &built, absl::Span<const OpCall> ops,
                               size_t anchor, const std::array<uint32_t, 7> *attentionWords,
                               const PlanArgs &args, int64_t query, bool indirect = false);
  void barrier() {
    commands_.push_back(barrierCommand(
        kWorkStages, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, kWorkStages,
        VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
            VK_ACCESS_TRANSFER_WRITE_BIT));
    ++barriers_;
  }
  std::string stepName(size_t i) const;
  /// Fills scoresOverwrittenBy_: for each attention step, the next step that touches its scores
  /// slot when that is an attention step too (which writes the scores before reading them).
  void findScoresOverwrites();
  /// Whether attention step i's scores are dead this run: the step scoresOverwrittenBy_ names
  /// runs as one attention launch (its heads agree) over at least as many positions, so it
  /// overwrites every score step i would leave.
  bool scoresDead(size_t i, const PlanArgs &args);
  /// attentionUniform for attention step i this run, computed once (uniform_): scoresDead asks
  /// it of the next attention step before the loop reaches that step.
  bool headsAgree(size_t i, const PlanArgs &args) {
    if (uniform_[i] == 0)
      uniform_[i] = seqLensAgree(steps_[i].heads->seqLens, args.params) ? 1 : 2;
    return uniform_[i] == 1;
  }
  /// Reads the flush's timestamps into the stats (kernel time, span, host time) and, with
  /// printTimes_, prints a line per dispatch and one for the flush.
  void collectTimes(const std::vector<uint32_t> &dispatchSteps, double recordSeconds,
                    absl::Span<const uint64_t> params);

  std::shared_ptr<VulkanDevice> device_;
  std::shared_ptr<VulkanCompiler::Shared> shared_;
  std::vector<Step> steps_;
  /// Per step: the attention step that overwrites its scores before anything reads them, or
  /// kNoStep (findScoresOverwrites).
  static constexpr size_t kNoStep = ~size_t(0);
  std::vector<size_t> scoresOverwrittenBy_;
  /// Per step, this run: 0 not yet known, 1 its heads agree (one attention launch), 2 not.
  std::vector<uint8_t> uniform_;
  uint64_t deadScores_ = 0;
  size_t launches_;
  size_t numSlots_;
  std::string description_;
  /// Timestamps around each dispatch (the device has them on), and a line per dispatch printed.
  bool timed_;
  bool printTimes_;
  bool checkValidation_;
  bool replay_;
  size_t dispatches_ = 0;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  /// Overlapping same-buffer copies go through this (grown as needed, kept for the next run).
  BufferRef scratch_;
  /// Split attention's counters and shares: a region per dispatch, zeroed when (re)allocated.
  BufferRef attentionScratch_;
  uint64_t attentionCursor_ = 0;
  static uint64_t attentionScratchBytes(const VulkanKernel &k,
                                        const std::array<uint32_t, 7> *attentionWords) {
    return attentionWords ? uint64_t(4) * k.scratchWordsPerHead * (*attentionWords)[0] : 0;
  }
  uint64_t alignScratch(uint64_t bytes) const {
    uint64_t a = std::max<uint64_t>(device_->caps().minStorageBufferOffsetAlignment, 4);
    return (bytes + a - 1) / a * a;
  }
  std::vector<BufferRef> retired_; ///< outgrown scratch ranges, freed after the submission
  /// The kernels' integer words (VulkanKernel::paramWords): a region of paramStride_ bytes per
  /// dispatch in params_: device-local memory the run writes through its mapping where the
  /// device has it (paramsMapped_), else device memory filled at the start of each submission
  /// from staging that the run writes (paramsHost_ points at whichever the run writes).
  uint64_t paramStride_ = 0, paramBytes_ = 0;
  BufferRef params_;
  uint8_t *paramsHost_ = nullptr;
  /// params_ is device memory the host writes directly (VulkanDevice::allocateMappedParams):
  /// paramsHost_ is then its mapping, and a submission starts with no copy and no barrier.
  uint8_t *paramsMapped_ = nullptr;
  uint64_t paramCursor_ = 0;
  // Each dispatch's (in the order resolved) descriptor set of its last run, and what it binds.
  struct LastSet {
    const Pipeline *pipeline = nullptr;
    uint64_t generation = 0;
    absl::InlinedVector<BufferRef, 12> refs;
    VkDescriptorSet set = VK_NULL_HANDLE;
  };
  std::vector<LastSet> lastSets_;
  size_t resolved_ = 0;
  // The run in progress: its commands, push-constant words and first step of the submission.
  std::vector<Command> commands_;
  std::vector<uint32_t> push_;
  size_t segmentStart_ = 0;
  // The last run's command buffer, kept for replay, and what it was recorded from.
  VkCommandBuffer replayCmd_ = VK_NULL_HANDLE;
  std::vector<Command> replayCommands_;
  std::vector<uint32_t> replayPush_;
  uint64_t replayGeneration_ = 0;
  // Counters of the run in progress.
  uint64_t barriers_ = 0, submissions_ = 0, copies_ = 0, uploads_ = 0, dispatched_ = 0;
  uint64_t hostRuns_ = 0; ///< steps run on the host this run
  uint64_t fusedDispatched_ = 0, recordings_ = 0, replays_ = 0;
  /// When the run began, and the host's time from then to its last submission.
  std::chrono::steady_clock::time_point recordStart_;
  double hostSeconds_ = 0;
  /// The host's time from handing command buffers to the queue to their fences signalling.
  double waitSeconds_ = 0;
  std::chrono::steady_clock::time_point submitTime_;
  void markSubmit() {
    submitTime_ = std::chrono::steady_clock::now();
    hostSeconds_ = std::chrono::duration<double>(submitTime_ - recordStart_).count();
  }
  absl::Status timedSubmit(VkCommandBuffer cmd, bool noWait) {
    if (noWait) {
      absl::StatusOr<uint64_t> serial = device_->submitNoWait(cmd);
      if (serial.ok())
        noWaitSerial_ = *serial;
      return serial.status();
    }
    absl::Status s = device_->submitAndWait(cmd);
    waitSeconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - submitTime_).count();
    return s;
  }
  /// The serial of this plan's last submission made without a wait (VulkanDevice::
  /// submitNoWait); its next run waits for it before touching its words or command buffer.
  uint64_t noWaitSerial_ = 0;
};

bool VulkanPlanImpl::copyTooWideToBind(const Step &s, const PlanArgs &args) const {
  if (s.kind != Step::Kind::Dispatch || s.heads || s.members.size() != 1)
    return false;
  const OpCall &op = s.member.entry.op;
  if (op.kind != OpKind::CopyBuffer && op.kind != OpKind::CopyBufferOffset)
    return false;
  for (int i = 0; i < 2; ++i) {
    const auto *ref = static_cast<const BufferRef *>(args.slotDevice[Trace::slotOf(op.buffers[i])]);
    if (ref && ref->size > device_->caps().maxStorageBufferRange)
      return true;
  }
  return false;
}

bool VulkanPlanImpl::fitsBindings(const Step &s, const PlanArgs &args) const {
  return membersFitBindings(device_->caps(), s.heads ? s.heads->members : s.members, s.access,
                            args);
}

absl::Status VulkanPlanImpl::runOnHost(size_t index, const PlanArgs &args) {
  const Step &s = steps_[index];
  SINTER_RETURN_IF_ERROR(submitCommands(index, /*keep=*/false));
  SINTER_RETURN_IF_ERROR(runMembersOnHost(*device_, s.heads ? s.heads->members : s.members, args));
  ++hostRuns_;
  return beginSegment(index + 1);
}

std::string VulkanPlanImpl::stepName(size_t i) const {
  const Step &s = steps_[i];
  switch (s.kind) {
  case Step::Kind::Upload:
    return absl::StrCat("upload to slot ", s.member.entry.uploadSlot);
  case Step::Kind::Copy:
    return absl::StrCat("kernel #", s.kernelIndex, " ", opInfo(s.member.entry.op.kind).name);
  case Step::Kind::Dispatch:
    return absl::StrCat("kernel #", s.kernelIndex, " ", s.built->kernel.name);
  case Step::Kind::Host:
    return absl::StrCat("kernel #", s.kernelIndex, " ", opInfo(s.member.entry.op.kind).name,
                        " on the host");
  }
  return "";
}

absl::Status VulkanPlanImpl::beginSegment(size_t step) {
  segmentStart_ = step;
  commands_.clear();
  push_.clear();
  paramsHost_ = nullptr;
  if (paramBytes_ == 0)
    return absl::OkStatus();
  if (paramsMapped_) {
    // The host's writes before vkQueueSubmit are visible to the submission (host-coherent
    // memory); an earlier segment that read these words has finished (splitAt waits).
    paramsHost_ = paramsMapped_;
    return absl::OkStatus();
  }
  SINTER_ASSIGN_OR_RETURN(StagingSpan span, device_->staging().take(paramBytes_));
  paramsHost_ = span.data;
  commands_.push_back(
      copyCommand(span.buffer, span.offset, params_.buffer, params_.offset, paramBytes_));
  // Setup, not a dependency of the graph: not counted in barriers_.
  commands_.push_back(
      barrierCommand(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
                     VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_INDIRECT_COMMAND_READ_BIT));
  return absl::OkStatus();
}

absl::Status VulkanPlanImpl::nameFailure(absl::Status s, size_t endStep) const {
  if (s.ok() || endStep <= segmentStart_)
    return s;
  // The device cannot say which dispatch failed: name the range the submission held.
  return absl::Status(s.code(),
                      absl::StrCat("vulkan: the submission of steps ", segmentStart_, "..",
                                   endStep - 1, " (", stepName(segmentStart_), " ... ",
                                   stepName(endStep - 1), ") failed: ", s.message()));
}

absl::Status VulkanPlanImpl::submitCommands(size_t endStep, bool keep, bool noWait) {
  absl::Status s;
  ++submissions_;
  if (keep && replayCmd_ != VK_NULL_HANDLE &&
      replayGeneration_ == device_->descriptors().generation() && commands_ == replayCommands_ &&
      push_ == replayPush_) {
    ++replays_;
    markSubmit();
    s = timedSubmit(replayCmd_, noWait);
    if (!s.ok()) {
      device_->freeCommands(std::exchange(replayCmd_, VK_NULL_HANDLE));
      replayCommands_.clear();
    }
  } else {
    ++recordings_;
    // The recording kept for replay is replaced: freed before this submission, which may not
    // wait (freeing waits for every submission that may be running).
    if (keep) {
      device_->freeCommands(std::exchange(replayCmd_, VK_NULL_HANDLE));
      replayCommands_.clear();
    }
    absl::StatusOr<VkCommandBuffer> cmd = device_->beginCommands(/*oneShot=*/!keep);
    s = cmd.status();
    if (s.ok()) {
      recordCommands(*cmd, commands_, push_, queries_);
      s = vkStatus(vkEndCommandBuffer(*cmd), "vkEndCommandBuffer");
      markSubmit();
      if (s.ok())
        s = timedSubmit(*cmd, noWait);
      if (s.ok() && keep) {
        replayCmd_ = *cmd;
        replayCommands_.swap(commands_);
        replayPush_.swap(push_);
        replayGeneration_ = device_->descriptors().generation();
      } else {
        device_->freeCommands(*cmd);
      }
    }
  }
  device_->staging().reset();
  for (const BufferRef &r : retired_)
    device_->freeBuffer(r);
  retired_.clear();
  return nameFailure(std::move(s), endStep);
}

absl::Status VulkanPlanImpl::splitAt(size_t step) {
  SINTER_RETURN_IF_ERROR(submitCommands(step, /*keep=*/false));
  return beginSegment(step);
}

absl::Status VulkanPlanImpl::resolveUpload(size_t index, const PlanArgs &args,
                                           HazardTracker &hazards) {
  const Step &s = steps_[index];
  const TraceEntry &e = s.member.entry;
  const std::vector<uint8_t> &payload = *args.payloads[e.payload];
  const BufferRef &dst = *static_cast<const BufferRef *>(args.slotDevice[e.uploadSlot]);
  StagingRing &ring = device_->staging();
  for (uint64_t done = 0; done < e.uploadBytes;) {
    uint64_t left = e.uploadBytes - done;
    // take() aligns to 16 bytes: keep that much in hand.
    uint64_t available = ring.remaining() > 16 ? ring.remaining() - 16 : 0;
    if (available < std::min<uint64_t>(left, 64 << 10)) {
      // The ring is full: run what is resolved, then continue in a fresh command buffer (it
      // starts with the entry barrier, so only this step's own write is left to track).
      SINTER_RETURN_IF_ERROR(splitAt(index));
      hazards.clear();
      hazards.mark(s.access);
      available = ring.remaining() > 16 ? ring.remaining() - 16 : 0;
    }
    uint64_t chunk = std::min(left, available);
    SINTER_ASSIGN_OR_RETURN(StagingSpan span, ring.take(chunk));
    std::memcpy(span.data, payload.data() + done, chunk);
    commands_.push_back(
        copyCommand(span.buffer, span.offset, dst.buffer, dst.offset + done, chunk));
    done += chunk;
  }
  ++uploads_;
  return absl::OkStatus();
}

absl::Status VulkanPlanImpl::resolveCopy(const OpCall &op, const PlanArgs &args,
                                         HazardTracker &hazards) {
  const BufferRef &src =
      *static_cast<const BufferRef *>(args.slotDevice[Trace::slotOf(op.buffers[0])]);
  const BufferRef &dst =
      *static_cast<const BufferRef *>(args.slotDevice[Trace::slotOf(op.buffers[1])]);
  uint64_t so = 0, dO = 0, size = op.ints[0];
  if (op.kind == OpKind::CopyBufferOffset) {
    so = op.ints[0];
    dO = op.ints[1];
    size = op.ints[2];
  }
  if (size == 0)
    return absl::OkStatus();
  ++copies_;
  bool overlap = src.buffer == dst.buffer && src.offset + so < dst.offset + dO + size &&
                 dst.offset + dO < src.offset + so + size;
  if (!overlap) {
    commands_.push_back(
        copyCommand(src.buffer, src.offset + so, dst.buffer, dst.offset + dO, size));
    return absl::OkStatus();
  }
  // memmove: vkCmdCopyBuffer forbids overlapping regions, so copy through scratch memory.
  if (scratch_.size < size) {
    // The command buffer being built (or the kept one) may use the old range: free it after
    // the submission.
    retired_.push_back(std::exchange(scratch_, BufferRef{}));
    SINTER_ASSIGN_OR_RETURN(scratch_, device_->createBuffer(size));
  }
  commands_.push_back(
      copyCommand(src.buffer, src.offset + so, scratch_.buffer, scratch_.offset, size));
  barrier();
  commands_.push_back(
      copyCommand(scratch_.buffer, scratch_.offset, dst.buffer, dst.offset + dO, size));
  // The next overlapping copy reuses the scratch range: order it after this one.
  barrier();
  hazards.clear();
  return absl::OkStatus();
}

absl::Status VulkanPlanImpl::resolveDispatch(const VulkanCompiler::Built &built,
                                             absl::Span<const OpCall> ops, size_t anchor,
                                             const std::array<uint32_t, 7> *attentionWords,
                                             const PlanArgs &args, int64_t query, bool indirect) {
  const VulkanKernel &k = built.kernel;
  const Pipeline &p = *built.pipeline;
  const OpCall &op = ops[anchor];
  int64_t ints[5];
  for (int i = 0; i < 5; ++i)
    ints[i] = static_cast<int64_t>(op.ints[i]);
  std::array<uint32_t, 3> groups =
      k.perHead
          ? std::array<uint32_t, 3>{attentionWords
                                        ? (*attentionWords)[0] * std::max(k.attentionSplits, 1u)
                                        : 0u,
                                    1, 1}
          : k.grid(ints);
  const bool empty = groups[0] == 0 || groups[1] == 0 || groups[2] == 0;
  indirect = indirect && k.paramWords > 0;
  if (empty && !indirect)
    return absl::OkStatus(); // an indirect dispatch of no groups keeps the commands the same
  // The integer words: push constants, or this dispatch's region of the parameter buffer.
  std::array<uint32_t, 32> words{};
  size_t count = k.pushConstantInts.size() + k.extraPushWords;
  if (count > words.size() || (k.extraPushWords > 0 && !attentionWords) ||
      (k.paramWords > 0 && k.paramWords != count))
    return absl::InternalError(
        absl::StrCat("vulkan: kernel ", k.name, " wants ", count, " integer words"));
  for (size_t j = 0; j < k.pushConstantInts.size(); ++j) {
    size_t m = k.pushConstantMembers.empty() ? 0 : k.pushConstantMembers[j];
    words[j] = static_cast<uint32_t>(ops[m].ints[k.pushConstantInts[j]]);
  }
  for (uint32_t j = 0; j < k.extraPushWords && j < attentionWords->size(); ++j)
    words[k.pushConstantInts.size() + j] = (*attentionWords)[j];
  absl::InlinedVector<BufferRef, 12> refs;
  uint32_t storageBindings = k.binary.numBuffers - (k.paramWords > 0 ? 1 : 0);
  for (uint32_t i = 0; i < storageBindings; ++i) {
    size_t m = k.bindingMembers.empty() ? 0 : k.bindingMembers[i];
    size_t operand = k.bindingOperands.empty() ? i : k.bindingOperands[i];
    if (m == kScratchBindingMember) {
      // This dispatch's region of the attention scratch (sized and zeroed by run()).
      uint64_t bytes = attentionScratchBytes(k, attentionWords);
      if (!attentionWords || attentionCursor_ + bytes > attentionScratch_.size)
        return absl::InternalError(
            absl::StrCat("vulkan: kernel ", k.name, " needs attention scratch the plan lacks"));
      refs.push_back(
          BufferRef{attentionScratch_.buffer, attentionScratch_.offset + attentionCursor_, bytes});
      attentionCursor_ += alignScratch(bytes);
      continue;
    }
    if (m >= ops.size())
      return absl::InternalError(
          absl::StrCat("vulkan: kernel ", k.name, " binds member ", m, " of ", ops.size()));
    BufferRef ref =
        *static_cast<const BufferRef *>(args.slotDevice[Trace::slotOf(ops[m].buffers[operand])]);
    // A buffer larger than the device binds: its first bindLimit bytes, which hold every byte
    // this dispatch touches (fitsBindings, or the run goes to the host).
    ref.size = std::min(ref.size, bindLimit(device_->caps()));
    refs.push_back(ref);
  }
  absl::Span<const uint8_t> pushBytes;
  uint64_t gridOffset = 0;
  if (k.paramWords > 0) {
    if (!paramsHost_ || paramCursor_ + paramStride_ > paramBytes_)
      return absl::InternalError(
          absl::StrCat("vulkan: kernel ", k.name, " has no parameter region left"));
    std::memcpy(paramsHost_ + paramCursor_, words.data(), 4 * count);
    gridOffset = params_.offset + paramCursor_ + 4 * count;
    std::memcpy(paramsHost_ + paramCursor_ + 4 * count, groups.data(), sizeof groups);
    refs.push_back(BufferRef{params_.buffer, params_.offset + paramCursor_, 4 * count});
    paramCursor_ += paramStride_;
  } else {
    pushBytes = absl::MakeConstSpan(reinterpret_cast<const uint8_t *>(words.data()),
                                    k.binary.pushConstantBytes);
  }
  absl::Span<const BufferRef> bound(refs.data(), refs.size());
  SINTER_RETURN_IF_ERROR(
      checkDispatch(device_->caps(), k.binary, bound, pushBytes, empty ? kOneGroup : groups));
  Command c;
  c.kind = Command::Kind::Dispatch;
  // The set this dispatch bound last run, when its buffers are the same (no hashing then).
  if (resolved_ >= lastSets_.size())
    lastSets_.resize(resolved_ + 1);
  LastSet &last = lastSets_[resolved_++];
  const uint64_t generation = device_->descriptors().generation();
  bool same =
      last.pipeline == &p && last.generation == generation && last.refs.size() == refs.size();
  for (size_t i = 0; same && i < refs.size(); ++i)
    same = last.refs[i].buffer == refs[i].buffer && last.refs[i].offset == refs[i].offset &&
           last.refs[i].size == refs[i].size;
  if (same) {
    c.set = last.set;
  } else {
    SINTER_ASSIGN_OR_RETURN(c.set, device_->descriptors().get(p, bound));
    last = LastSet{&p, generation, refs, c.set};
  }
  if (indirect) {
    c.indirect = true;
    c.src = params_.buffer;
    c.srcOffset = gridOffset;
  } else {
    c.groups = groups;
  }
  c.pipeline = &p;
  c.pushFirst = static_cast<uint32_t>(push_.size());
  c.pushWords = static_cast<uint32_t>(pushBytes.size() / 4);
  push_.insert(push_.end(), words.begin(), words.begin() + c.pushWords);
  c.query = queries_ != VK_NULL_HANDLE ? query : -1;
  commands_.push_back(c);
  dispatched_ += !empty;
  fusedDispatched_ += !empty && ops.size() > 1;
  return absl::OkStatus();
}

StagingSpan VulkanPlanImpl::recordReadback(const PlanArgs &args) {
  PlanReadback *rb = args.readback;
  if (!rb || rb->out.empty() || rb->slot >= numSlots_)
    return {};
  const auto *src = static_cast<const BufferRef *>(args.slotDevice[rb->slot]);
  if (!src || rb->out.size() > src->size)
    return {};
  // A buffer of at most 1 MiB is copied whole, so that reads of a changing length (a growing
  // context's scores) still record the same commands.
  const uint64_t bytes = src->size <= (uint64_t(1) << 20) ? src->size : rb->out.size();
  absl::StatusOr<StagingSpan> span = device_->staging().take(bytes);
  if (!span.ok()) // no room left in staging: the caller reads after the run instead
    return {};
  commands_.push_back(barrierCommand(kWorkStages,
                                     VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                                     VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT));
  commands_.push_back(copyCommand(src->buffer, src->offset, span->buffer, span->offset, bytes));
  commands_.push_back(barrierCommand(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                                     VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT));
  return *span;
}

void VulkanPlanImpl::findScoresOverwrites() {
  scoresOverwrittenBy_.assign(steps_.size(), kNoStep);
  auto scoresSlot = [](const Step &s) { return Trace::slotOf(s.members[0].entry.op.buffers[2]); };
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step &s = steps_[i];
    if (s.kind != Step::Kind::Dispatch || !s.heads || s.members.empty())
      continue;
    const uint32_t scores = scoresSlot(s);
    for (size_t j = i + 1; j < steps_.size(); ++j) {
      const StepAccesses &a = steps_[j].access;
      bool touches = false;
      for (int k = 0; k < a.count && !touches; ++k)
        touches = a.slots[k] == scores;
      if (!touches)
        continue;
      const Step &next = steps_[j];
      if (next.kind == Step::Kind::Dispatch && next.heads && !next.members.empty() &&
          scoresSlot(next) == scores)
        scoresOverwrittenBy_[i] = j;
      break;
    }
  }
}

bool VulkanPlanImpl::scoresDead(size_t i, const PlanArgs &args) {
  if (i >= scoresOverwrittenBy_.size() || scoresOverwrittenBy_[i] == kNoStep)
    return false;
  const size_t j = scoresOverwrittenBy_[i];
  if (!headsAgree(j, args))
    return false;
  // seq_len of head 0's attn_score: what the launch writes scores for.
  const uint64_t mine = boundOp(steps_[i].heads->members[0], args.params).ints[1];
  const uint64_t theirs = boundOp(steps_[j].heads->members[0], args.params).ints[1];
  return theirs >= mine;
}

absl::Status VulkanPlanImpl::run(const PlanArgs &args) {
  if (args.slotDevice.size() < numSlots_)
    return absl::FailedPreconditionError(
        "vulkan plan: the buffers are not in Vulkan device memory (no slotDevice references)");
  // This plan's last run may still be running (an overlapped flush): its words, scratch and
  // command buffer are this run's.
  if (noWaitSerial_ && device_->mayBeRunning(noWaitSerial_))
    SINTER_RETURN_IF_ERROR(device_->drain());
  recordStart_ = std::chrono::steady_clock::now();
  barriers_ = submissions_ = copies_ = uploads_ = dispatched_ = fusedDispatched_ = hostRuns_ = 0;
  recordings_ = replays_ = 0;
  waitSeconds_ = hostSeconds_ = 0;
  uint64_t messagesBefore = checkValidation_ ? device_->validationLog().count : 0;
  DescriptorCache &descriptors = device_->descriptors();
  descriptors.invalidateIfBuffersDestroyed(device_->memory().destroyedBlocks());
  device_->staging().reset();
  if (timed_ && queries_ == VK_NULL_HANDLE && dispatches_ > 0) {
    auto info = vkStruct<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = static_cast<uint32_t>(2 * dispatches_);
    SINTER_RETURN_IF_ERROR(vkStatus(vkCreateQueryPool(device_->device(), &info, nullptr, &queries_),
                                    "vkCreateQueryPool"));
  }
  if (paramBytes_ > 0 && params_.size == 0) {
    if (absl::StatusOr<VulkanDevice::MappedRange> mapped =
            device_->allocateMappedParams(paramBytes_);
        mapped.ok()) {
      params_ = mapped->ref;
      paramsMapped_ = mapped->host;
    } else {
      SINTER_ASSIGN_OR_RETURN(params_, device_->createBuffer(paramBytes_));
    }
  }
  // Split attention's scratch: one region per dispatch, zeroed once when allocated (each
  // dispatch leaves its counters zero again).
  attentionCursor_ = 0;
  paramCursor_ = 0;
  resolved_ = 0;
  uint64_t attentionBytes = 0;
  for (const Step &s : steps_)
    if (s.kind == Step::Kind::Dispatch && s.heads && s.built && s.built->kernel.scratchWordsPerHead)
      attentionBytes += alignScratch(attentionScratchBytes(s.built->kernel, &s.heads->words));
  bool zeroAttention = attentionScratch_.size < attentionBytes;
  if (zeroAttention) {
    device_->freeBuffer(std::exchange(attentionScratch_, BufferRef{})); // no run in flight
    SINTER_ASSIGN_OR_RETURN(attentionScratch_, device_->createBuffer(attentionBytes));
  }
  absl::Status status = beginSegment(0);
  if (status.ok() && queries_ != VK_NULL_HANDLE) {
    Command reset;
    reset.kind = Command::Kind::ResetQueries;
    reset.query = static_cast<int64_t>(2 * dispatches_);
    commands_.push_back(reset);
  }
  if (status.ok() && zeroAttention) {
    Command fill;
    fill.kind = Command::Kind::Fill;
    fill.dst = attentionScratch_.buffer;
    fill.dstOffset = attentionScratch_.offset;
    fill.size = attentionScratch_.size;
    commands_.push_back(fill);
    // Setup, not a dependency of the graph: not counted in barriers_.
    commands_.push_back(barrierCommand(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT));
  }
  HazardTracker hazards(numSlots_);
  std::vector<uint32_t> dispatchSteps;
  uniform_.assign(steps_.size(), 0);
  deadScores_ = 0;
  bool split = false;
  for (size_t i = 0; i < steps_.size() && status.ok(); ++i) {
    const Step &s = steps_[i];
    if (hazards.needsBarrier(s.access)) {
      barrier();
      hazards.clear();
    }
    hazards.mark(s.access);
    if (s.kind == Step::Kind::Upload) {
      uint64_t before = submissions_;
      status = resolveUpload(i, args, hazards);
      split |= submissions_ != before;
    } else if (s.kind == Step::Kind::Copy || copyTooWideToBind(s, args)) {
      // A copy kernel (replay's stand-in for vkCmdCopyBuffer) cannot bind a buffer above
      // maxStorageBufferRange (a 262 MB embedding table on lavapipe): vkCmdCopyBuffer then, its
      // offsets baked in (such a run re-records its commands).
      status = resolveCopy(boundOp(s.member, args.params), args, hazards);
    } else if (s.kind == Step::Kind::Host || !fitsBindings(s, args)) {
      // After its submission and wait, a host step begins a fresh segment: no hazard is left.
      status = runOnHost(i, args);
      split = true;
      hazards.clear();
    } else {
      absl::InlinedVector<OpCall, 4> ops;
      for (const KernelMember &m : s.members)
        ops.push_back(boundOp(m, args.params));
      if (s.heads && !s.built->kernel.perHead) {
        // Never: an attention step always has the per-head kernel.
        status = absl::InternalError("vulkan: attention step without its kernel");
      } else if (s.heads && !headsAgree(i, args)) {
        // The heads see different seq_len this run: the members, one launch each.
        const HeadFallback &f = *s.heads;
        for (size_t h = 0; h < f.members.size() && status.ok(); ++h) {
          if (hazards.needsBarrier(f.access[h])) {
            barrier();
            hazards.clear();
          }
          hazards.mark(f.access[h]);
          OpCall op = boundOp(f.members[h], args.params);
          status = resolveDispatch(*f.built[h], absl::MakeConstSpan(&op, 1), 0, nullptr, args, -1);
        }
      } else {
        std::array<uint32_t, 7> words{};
        if (s.heads) {
          words = s.heads->words;
          if (scoresDead(i, args)) {
            words[kAttentionStoreScoresWord] = 0;
            ++deadScores_;
          }
        }
        status = resolveDispatch(*s.built, ops, s.anchor, s.heads ? &words : nullptr, args,
                                 static_cast<int64_t>(dispatchSteps.size()), s.indirect);
        dispatchSteps.push_back(static_cast<uint32_t>(i));
      }
    }
    if (!status.ok())
      status =
          absl::Status(status.code(), absl::StrCat(stepName(i), " (", describeOp(s.member.entry.op),
                                                   "): ", status.message()));
  }
  if (!status.ok()) {
    // Nothing of this segment runs (what earlier segments of a split flush did stays done).
    commands_.clear();
    device_->staging().reset();
    return status;
  }
  StagingSpan readSpan = recordReadback(args);
  // No exit barrier: every later command buffer starts with the entry barrier. A split flush
  // (or one that zeroed the attention scratch) is not kept: the next run's commands differ.
  // An overlapped flush (PlanArgs::mayFinishLater) returns right after its submission when
  // nothing of the run must outlive it on the host: a command buffer kept for replay, no
  // staging (uploads, staged words, a read-back), no buffers to retire, and no kernel times to
  // print (SINTER_STATS=1 waits for every piece so that each kernel is timed; otherwise an
  // overlapped run's timestamps are not read).
  const bool keep = replay_ && !split && !zeroAttention;
  const bool noWait = args.mayFinishLater && keep && !readSpan.data && retired_.empty() &&
                      !printTimes_ &&
                      device_->staging().remaining() == device_->staging().capacity();
  SINTER_RETURN_IF_ERROR(submitCommands(steps_.size(), keep, noWait));
  if (readSpan.data) { // the ring was reset after the wait, not overwritten: nothing runs now
    std::memcpy(args.readback->out.data(), readSpan.data, args.readback->out.size());
    args.readback->done = true;
  }
  descriptors.trim();
  if (timed_ && !noWait)
    collectTimes(dispatchSteps, hostSeconds_, args.params);
  {
    absl::MutexLock lock(&shared_->mu);
    VulkanCompilerStats &st = shared_->stats;
    ++st.runs;
    st.submissions += submissions_;
    st.dispatches += dispatched_;
    st.fusedDispatches += fusedDispatched_;
    st.copies += copies_;
    st.uploads += uploads_;
    st.barriers += barriers_;
    st.recordings += recordings_;
    st.replays += replays_;
    st.deadScores += deadScores_;
    st.hostRuns += hostRuns_;
    st.waitSeconds += waitSeconds_;
    st.presubmitSeconds += hostSeconds_;
  }
  if (checkValidation_) {
    ValidationLog log = device_->validationLog();
    if (log.count > messagesBefore)
      return absl::InternalError(absl::StrCat(
          "vulkan: the validation layer reported ", log.count - messagesBefore,
          " message(s) during the flush; first: ",
          messagesBefore < log.messages.size() ? log.messages[messagesBefore] : "(not kept)"));
  }
  return absl::OkStatus();
}

namespace {

/// The bytes a dispatch step reads and writes, for SINTER_STATS=1's GB/s: each member's
/// workBytes with this run's integers (a plan parameter, such as attention's seq_len, is 0 in
/// the plan's entry). Attention over heads counts each K and V range once: the query heads of
/// one K/V head (grouped-query attention) read the same cache rows, and the floor counts them
/// once too.
double stepBytes(const Step &s, absl::Span<const uint64_t> params) {
  double bytes = 0;
  std::vector<std::array<uint64_t, 3>> seen; // (kind, cache buffer, kv_off) of K/V reads counted
  for (const KernelMember &m : s.heads ? s.heads->members : s.members) {
    const OpCall op = boundOp(m, params);
    if (s.heads && (op.kind == OpKind::AttnScore || op.kind == OpKind::AttnValue)) {
      const int kvOff = op.kind == OpKind::AttnScore ? 3 : 2; // SEMANTICS.md's argument order
      std::array<uint64_t, 3> key{uint64_t(op.kind), op.buffers[1].id, op.ints[kvOff]};
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        continue;
      seen.push_back(key);
    }
    int64_t ints[5];
    for (int i = 0; i < 5; ++i)
      ints[i] = static_cast<int64_t>(op.ints[i]);
    bytes += double(codegen::workBytes(op.kind, op.dtype, ints));
  }
  return bytes;
}

} // namespace

void VulkanPlanImpl::collectTimes(const std::vector<uint32_t> &dispatchSteps, double recordSeconds,
                                  absl::Span<const uint64_t> params) {
  if (queries_ == VK_NULL_HANDLE || dispatchSteps.empty())
    return;
  std::vector<uint64_t> ticks(2 * dispatchSteps.size());
  VkResult r =
      vkGetQueryPoolResults(device_->device(), queries_, 0, static_cast<uint32_t>(ticks.size()),
                            ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS)
    return;
  double period = device_->caps().timestampPeriod, total = 0, gaps = 0, widest = 0;
  size_t widestBefore = 0; // the dispatch the widest gap precedes
  for (size_t q = 0; q < dispatchSteps.size(); ++q) {
    const Step &s = steps_[dispatchSteps[q]];
    double seconds = double(ticks[2 * q + 1] - ticks[2 * q]) * period * 1e-9;
    total += seconds;
    if (q > 0 && ticks[2 * q] > ticks[2 * q - 1]) {
      // From the end of the previous dispatch to the start of this one (launches that overlap,
      // with no barrier between them, leave no gap).
      double gap = double(ticks[2 * q] - ticks[2 * q - 1]) * period * 1e-9;
      gaps += gap;
      if (gap > widest) {
        widest = gap;
        widestBefore = q;
      }
    }
    if (!printTimes_)
      continue;
    const double bytes = stepBytes(s, params);
    std::fprintf(stderr, "sinter-stats: vulkan %s: %.3f us, %.0f bytes, %.2f GB/s\n",
                 stepName(dispatchSteps[q]).c_str(), seconds * 1e6, bytes,
                 seconds > 0 ? bytes / seconds * 1e-9 : 0.0);
  }
  double span = double(ticks.back() - ticks.front()) * period * 1e-9;
  if (printTimes_)
    std::fprintf(stderr,
                 "sinter-stats: vulkan flush: %zu dispatches, %.3f us of kernel time, %.3f us from "
                 "first start to last end, %.3f us of gaps between dispatches (widest %.3f us, "
                 "before %s), "
                 "%.3f us on the host before submitting (%s)\n",
                 dispatchSteps.size(), total * 1e6, span * 1e6, gaps * 1e6, widest * 1e6,
                 stepName(dispatchSteps[widestBefore]).c_str(), recordSeconds * 1e6,
                 replays_ > 0 ? "replayed the kept command buffer" : "recorded");
  absl::MutexLock lock(&shared_->mu);
  shared_->stats.kernelSeconds += total;
  shared_->stats.spanSeconds += span;
  shared_->stats.recordSeconds += recordSeconds;
}

} // namespace

std::unique_ptr<Plan> makeVulkanPlan(std::shared_ptr<VulkanDevice> device,
                                     std::shared_ptr<VulkanCompiler::Shared> shared,
                                     std::vector<Step> steps, size_t launches, size_t numSlots,
                                     std::string description, bool printTimes, bool checkValidation,
                                     bool replay, bool elideDeadScores) {
  return std::make_unique<VulkanPlanImpl>(std::move(device), std::move(shared), std::move(steps),
                                          launches, numSlots, std::move(description), printTimes,
                                          checkValidation, replay, elideDeadScores);
}

} // namespace sinter::runtime::vulkan
