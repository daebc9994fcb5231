// DescriptorCache.h - descriptor sets for dispatches, reused across flushes, bounded in number.
//
// A set is keyed by its pipeline and the exact (buffer, offset, size) of every binding, so a Plan
// replayed token after token binds the sets it made on the first token and never calls
// vkUpdateDescriptorSets again. Sets come from pools created as needed; when more than
// `maxSets` are alive, or the sets of destroyed pipelines (forgetPipeline) outnumber the live
// ones (and kDeadSetsBeforeReset), trim() (called between flushes, with no work in flight)
// resets every pool and forgets them all, so millions of distinct dispatches or pipelines never
// run out or leak. A reset costs the live plans one vkUpdateDescriptorSets per set and one
// recording; pipelines die only after their kernels left every cache, each of which cost a
// pipeline compilation, so resets stay rare next to those.
#ifndef SINTER_RUNTIME_VULKAN_DESCRIPTORCACHE_H
#define SINTER_RUNTIME_VULKAN_DESCRIPTORCACHE_H

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/vulkan/PipelineCache.h"

namespace sinter::runtime::vulkan {

struct DescriptorStats {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  uint64_t setsAllocated = 0;
  uint64_t resets = 0;
  uint64_t pools = 0;
  uint64_t liveSets = 0;
  /// Sets of destroyed pipelines still taking room in the pools (until the next reset).
  uint64_t deadSets = 0;
};

class DescriptorCache {
public:
  /// `setsPerPool` sets (with up to 16 buffers each on average) per VkDescriptorPool; a trim
  /// resets everything once more than `maxSets` sets are alive.
  DescriptorCache(VkDevice device, uint32_t setsPerPool = 1024, uint64_t maxSets = 1 << 16);
  ~DescriptorCache();
  DescriptorCache(const DescriptorCache &) = delete;
  DescriptorCache &operator=(const DescriptorCache &) = delete;

  /// The set binding `buffers` to bindings 0..n-1 of `p`'s layout, made and written on first use.
  /// The set stays valid until the next trim() that resets.
  absl::StatusOr<VkDescriptorSet> get(const Pipeline &p, absl::Span<const BufferRef> buffers);
  /// Dead sets (of destroyed pipelines) that never trigger a reset while fewer than the live.
  static constexpr uint64_t kDeadSetsBeforeReset = 64;

  /// Resets all pools when more than maxSets sets are alive, or when the dead sets of destroyed
  /// pipelines reach both kDeadSetsBeforeReset and the live sets' count (or always with
  /// `force`). Only call with no submitted work using the sets.
  void trim(bool force = false);
  /// Forgets the sets made for the pipeline with this id (Pipeline::id), which is being
  /// destroyed: no lookup can find them again, and they count as dead until a reset.
  void forgetPipeline(uint64_t pipelineId);
  /// Forgets every set (as trim(true)) when `destroyedBlocks` (VulkanMemory::destroyedBlocks)
  /// changed since the last call: a destroyed block's VkBuffer handle may come back for a new
  /// block, and a set keyed by it would bind freed memory. Only call with no work in flight.
  void invalidateIfBuffersDestroyed(uint64_t destroyedBlocks);
  DescriptorStats stats() const;
  /// Changes whenever sets are forgotten (a trim that resets, or buffers destroyed): a command
  /// buffer that bound sets of an older generation must not be submitted again.
  uint64_t generation() const { return stats_.resets; }
  /// Called before a reset, to wait for submitted work that may still use the sets
  /// (VulkanDevice::drain).
  void setBeforeReset(std::function<void()> f) { beforeReset_ = std::move(f); }

private:
  absl::StatusOr<VkDescriptorSet> allocate(VkDescriptorSetLayout layout, uint32_t numBuffers);

  struct Pool {
    VkDescriptorPool pool;
    uint32_t setsLeft;
    uint32_t descriptorsLeft;
    uint32_t descriptors;
  };
  VkDevice device_;
  uint32_t setsPerPool_;
  uint64_t maxSets_;
  std::vector<Pool> pools_;
  size_t current_ = 0;
  uint64_t destroyedBlocks_ = 0;
  uint64_t deadSets_ = 0;
  /// Keyed by the pipeline's id, then (buffer, offset, size) of every binding.
  absl::flat_hash_map<std::vector<uint64_t>, VkDescriptorSet> sets_;
  DescriptorStats stats_;
  std::function<void()> beforeReset_;
};

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_DESCRIPTORCACHE_H
