// PipelineCache.h - compute pipelines made from KernelBinary, kept in memory and on disk.
//
// Pipelines are keyed by the SPIR-V and the kernel's interface, so the same kernel compiles once
// while it stays in the cache; the driver's VkPipelineCache blob is saved under SINTER_CACHE_DIR
// (when set) so it compiles once per machine. The file carries its own length and checksum and is
// checked against the device's UUID; a corrupt or foreign file is a warning, never a failure.
//
// The cache keeps the `capacity` most recently used pipelines. A pipeline is shared: the cache and
// every kernel that uses it hold it, and its Vulkan objects are destroyed when the last one lets
// go (after the beforeDestroy hook, which waits for submitted work and forgets its descriptor
// sets). A stream of kernels with distinct baked-in scalars therefore holds a bounded number. The
// driver's VkPipelineCache keeps what it learns of every pipeline created through it, destroyed
// ones included (NVIDIA's does; Mesa 22's lavapipe keeps nothing): after 4 x capacity pipelines
// it is replaced by an empty one, so it is bounded too, and the file saved at exit then holds
// the pipelines built since (a decode's few dozen never get there).
#ifndef SINTER_RUNTIME_VULKAN_PIPELINECACHE_H
#define SINTER_RUNTIME_VULKAN_PIPELINECACHE_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "support/LruMap.h"

namespace sinter::runtime::vulkan {

/// One compiled kernel and the layouts its dispatches bind with.
struct Pipeline {
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t numBuffers = 0;
  uint32_t pushConstantBytes = 0;
  std::array<uint32_t, 3> localSize = {1, 1, 1};
  /// Distinct per pipeline in this process (descriptor reuse keys on it).
  uint64_t id = 0;
  /// The driver's statistics of the pipeline's executables, "name=value" (empty unless
  /// PipelineCache::captureStatistics).
  std::vector<std::string> statistics;
};

struct PipelineCacheStats {
  uint64_t lookups = 0;
  uint64_t compiled = 0;
  uint64_t cached = 0;            ///< pipelines in the cache now (at most its capacity)
  uint64_t live = 0;              ///< pipelines whose Vulkan objects exist (cached or still held)
  uint64_t evictions = 0;         ///< pipelines dropped from the cache to make room
  uint64_t driverCacheResets = 0; ///< VkPipelineCaches replaced by an empty one (4 x capacity)
  /// Bytes of driver cache loaded from disk (0: none, absent or rejected).
  uint64_t loadedBytes = 0;
  bool diskFileRejected = false;
};

class PipelineCache {
public:
  /// `cacheDir` empty: in memory only. A present but unusable file prints one warning to stderr.
  /// Keeps the `capacity` most recently used pipelines (at least 1).
  PipelineCache(VkDevice device, const VkPhysicalDeviceProperties &props, std::string cacheDir,
                size_t capacity = kDefaultPipelineCacheCapacity);
  /// The subgroup features pipelines may ask for (the device enabled them); none by default.
  struct SubgroupFeatures {
    bool computeFullSubgroups = false;
    bool subgroupSizeControl = false;
    uint32_t minSubgroupSize = 0, maxSubgroupSize = 0;
  };
  void setSubgroupFeatures(SubgroupFeatures features) { features_ = features; }
  /// Builds later pipelines with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR, keeps their
  /// statistics and prints one line per pipeline to stderr (the device enabled
  /// VK_KHR_pipeline_executable_properties).
  void captureStatistics();
  /// Drops the cached pipelines. Every pipeline handed out must have been released before: its
  /// destruction needs this cache (the VulkanDevice, which owns it, outlives its users).
  ~PipelineCache();

  /// Called with each pipeline just before its Vulkan objects are destroyed (VulkanDevice waits
  /// for submitted work there and drops the descriptor sets made for it).
  void setBeforeDestroy(std::function<void(const Pipeline &)> f) { beforeDestroy_ = std::move(f); }

  /// The pipeline of `kernel` (compiled on first use, or after the cache dropped it). It lives
  /// while the caller holds it. InvalidArgument for an empty module, a push-constant size that
  /// is not a multiple of 4 or above the device limit, or a local size above the device limits;
  /// Internal when the driver rejects the module. Thread-safe.
  absl::StatusOr<std::shared_ptr<const Pipeline>> get(const KernelBinary &kernel);
  /// Writes the driver cache to disk now (also done by the destructor). Errors are returned,
  /// the destructor only warns.
  absl::Status save();
  /// Where the disk cache lives ("" when in memory only).
  const std::string &path() const { return path_; }
  PipelineCacheStats stats() const;
  /// Pipelines in the cache now.
  size_t size() const;
  size_t capacity() const { return capacity_; }

private:
  void load() ABSL_NO_THREAD_SAFETY_ANALYSIS; // the constructor's, before any sharing
  absl::StatusOr<std::unique_ptr<Pipeline>> build(const KernelBinary &kernel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void readStatistics(Pipeline &p, const std::string &name);
  /// The hook, then the pipeline's Vulkan objects and the pipeline itself.
  void destroy(const Pipeline *p);
  /// Replaces the driver's cache by an empty one (builtIntoDriverCache_ reached its limit).
  void resetDriverCache() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  VkDevice device_;
  VkPhysicalDeviceProperties props_;
  std::string path_;
  size_t capacity_;
  mutable absl::Mutex mu_;
  VkPipelineCache cache_ ABSL_GUARDED_BY(mu_) = VK_NULL_HANDLE;
  /// Pipelines built through cache_ since it was made (those of a loaded blob not counted).
  uint64_t builtIntoDriverCache_ ABSL_GUARDED_BY(mu_) = 0;
  /// Keyed by the interface, the entry point and the SPIR-V words (keyOf).
  LruMap<std::string, std::shared_ptr<const Pipeline>> pipelines_ ABSL_GUARDED_BY(mu_);
  uint64_t nextId_ ABSL_GUARDED_BY(mu_) = 1;
  PipelineCacheStats stats_ ABSL_GUARDED_BY(mu_);
  /// Outside mu_: a pipeline may be destroyed while get() holds it (an eviction).
  std::atomic<uint64_t> live_{0};
  std::function<void(const Pipeline &)> beforeDestroy_;
  SubgroupFeatures features_;
  PFN_vkGetPipelineExecutablePropertiesKHR executableProperties_ = nullptr;
  PFN_vkGetPipelineExecutableStatisticsKHR executableStatistics_ = nullptr;
};

/// FNV-1a over bytes (stable across runs and builds, unlike absl::Hash).
uint64_t fnv1a(const void *data, size_t bytes, uint64_t seed = 14695981039346656037ull);

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_PIPELINECACHE_H
