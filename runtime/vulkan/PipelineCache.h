// PipelineCache.h - compute pipelines made from KernelBinary, kept in memory and on disk.
//
// Pipelines are keyed by a hash of the SPIR-V and the kernel's interface, so the same kernel
// compiles once per process; the driver's VkPipelineCache blob is saved under SINTER_CACHE_DIR
// (when set) so it compiles once per machine. The file carries its own length and checksum and is
// checked against the device's UUID; a corrupt or foreign file is a warning, never a failure.
#ifndef SINTER_RUNTIME_VULKAN_PIPELINECACHE_H
#define SINTER_RUNTIME_VULKAN_PIPELINECACHE_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/vulkan/VulkanDevice.h"

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
  /// Bytes of driver cache loaded from disk (0: none, absent or rejected).
  uint64_t loadedBytes = 0;
  bool diskFileRejected = false;
};

class PipelineCache {
public:
  /// `cacheDir` empty: in memory only. A present but unusable file prints one warning to stderr.
  PipelineCache(VkDevice device, const VkPhysicalDeviceProperties &props, std::string cacheDir);
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
  ~PipelineCache();

  /// The pipeline of `kernel` (compiled on first use). InvalidArgument for an empty module, a
  /// push-constant size that is not a multiple of 4 or above the device limit, or a local size
  /// above the device limits; Internal when the driver rejects the module.
  absl::StatusOr<const Pipeline *> get(const KernelBinary &kernel);
  /// Writes the driver cache to disk now (also done by the destructor). Errors are returned,
  /// the destructor only warns.
  absl::Status save();
  /// Where the disk cache lives ("" when in memory only).
  const std::string &path() const { return path_; }
  PipelineCacheStats stats() const { return stats_; }
  size_t size() const { return pipelines_.size(); }

private:
  void load();
  absl::StatusOr<std::unique_ptr<Pipeline>> build(const KernelBinary &kernel);
  void readStatistics(Pipeline &p, const std::string &name);

  VkDevice device_;
  VkPhysicalDeviceProperties props_;
  std::string path_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  struct Entry {
    std::vector<uint32_t> spirv;
    std::string entryPoint;
    uint32_t numBuffers, pushConstantBytes;
    bool requireFullSubgroups;
    uint32_t requiredSubgroupSize;
    std::unique_ptr<Pipeline> pipeline;
  };
  absl::flat_hash_map<uint64_t, std::vector<Entry>> pipelines_;
  uint64_t nextId_ = 1;
  PipelineCacheStats stats_;
  SubgroupFeatures features_;
  PFN_vkGetPipelineExecutablePropertiesKHR executableProperties_ = nullptr;
  PFN_vkGetPipelineExecutableStatisticsKHR executableStatistics_ = nullptr;
};

/// FNV-1a over bytes (stable across runs and builds, unlike absl::Hash).
uint64_t fnv1a(const void *data, size_t bytes, uint64_t seed = 14695981039346656037ull);

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_PIPELINECACHE_H
