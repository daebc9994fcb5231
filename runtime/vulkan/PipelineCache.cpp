// PipelineCache.cpp - pipelines from KernelBinary in an LRU of shared pipelines; the driver
// cache blob on disk.
#include "runtime/vulkan/PipelineCache.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {

uint64_t fnv1a(const void *data, size_t bytes, uint64_t seed) {
  const auto *p = static_cast<const uint8_t *>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The file: magic, payload length, FNV-1a of the payload, then the driver's blob.
static constexpr char kMagic[8] = {'S', 'N', 'T', 'R', 'V', 'K', 'P', '1'};
static constexpr size_t kFileHeader = 8 + 8 + 8;

PipelineCache::PipelineCache(VkDevice device, const VkPhysicalDeviceProperties &props,
                             std::string cacheDir, size_t capacity)
    : device_(device), props_(props), capacity_(std::max<size_t>(capacity, 1)),
      pipelines_(capacity_) {
  if (!cacheDir.empty()) {
    std::string uuid;
    for (uint8_t b : props.pipelineCacheUUID)
      uuid += absl::StrFormat("%02x", b);
    path_ = absl::StrFormat("%s/vulkan-pipelines-%04x-%04x-%s.bin", cacheDir, props.vendorID,
                            props.deviceID, uuid);
  }
  load();
}

void PipelineCache::load() {
  std::vector<uint8_t> blob;
  if (!path_.empty()) {
    std::ifstream in(path_, std::ios::binary);
    if (in) {
      std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
      uint64_t length = 0, sum = 0;
      bool ok = file.size() >= kFileHeader && std::memcmp(file.data(), kMagic, 8) == 0;
      if (ok) {
        std::memcpy(&length, file.data() + 8, 8);
        std::memcpy(&sum, file.data() + 16, 8);
        ok = length == file.size() - kFileHeader && fnv1a(file.data() + kFileHeader, length) == sum;
      }
      // The driver's own header (VkPipelineCacheHeaderVersionOne): 32 bytes naming the device.
      if (ok && length >= 32) {
        uint32_t vendor, deviceId;
        std::memcpy(&vendor, file.data() + kFileHeader + 8, 4);
        std::memcpy(&deviceId, file.data() + kFileHeader + 12, 4);
        ok = vendor == props_.vendorID && deviceId == props_.deviceID &&
             std::memcmp(file.data() + kFileHeader + 16, props_.pipelineCacheUUID, VK_UUID_SIZE) ==
                 0;
      }
      if (ok) {
        blob.assign(file.begin() + kFileHeader, file.end());
      } else {
        stats_.diskFileRejected = true;
        std::fprintf(stderr,
                     "sinter: warning: ignoring pipeline cache %s (%zu bytes): corrupt or made "
                     "for another device\n",
                     path_.c_str(), file.size());
      }
    }
  }
  auto info = vkStruct<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
  info.initialDataSize = blob.size();
  info.pInitialData = blob.empty() ? nullptr : blob.data();
  if (vkCreatePipelineCache(device_, &info, nullptr, &cache_) != VK_SUCCESS) {
    // A driver that rejects the blob anyway: start empty.
    info.initialDataSize = 0;
    info.pInitialData = nullptr;
    blob.clear();
    if (vkCreatePipelineCache(device_, &info, nullptr, &cache_) != VK_SUCCESS)
      cache_ = VK_NULL_HANDLE;
  }
  stats_.loadedBytes = blob.size();
}

absl::Status PipelineCache::save() {
  absl::MutexLock lock(&mu_);
  if (path_.empty() || cache_ == VK_NULL_HANDLE)
    return absl::OkStatus();
  size_t size = 0;
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkGetPipelineCacheData(device_, cache_, &size, nullptr), "vkGetPipelineCacheData"));
  std::vector<uint8_t> file(kFileHeader + size);
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkGetPipelineCacheData(device_, cache_, &size, file.data() + kFileHeader),
               "vkGetPipelineCacheData"));
  file.resize(kFileHeader + size);
  uint64_t length = size, sum = fnv1a(file.data() + kFileHeader, size);
  std::memcpy(file.data(), kMagic, 8);
  std::memcpy(file.data() + 8, &length, 8);
  std::memcpy(file.data() + 16, &sum, 8);
  // Write then rename, so a concurrent reader never sees half a file.
  std::string tmp = absl::StrCat(path_, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(file.data()),
              static_cast<std::streamsize>(file.size()));
    if (!out)
      return absl::UnavailableError(absl::StrCat("pipeline cache: cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0)
    return absl::UnavailableError(absl::StrCat("pipeline cache: cannot rename ", tmp));
  return absl::OkStatus();
}

PipelineCache::~PipelineCache() {
  absl::Status saved = save();
  if (!saved.ok())
    std::fprintf(stderr, "sinter: warning: %s\n", std::string(saved.message()).c_str());
  {
    absl::MutexLock lock(&mu_);
    pipelines_.clear();
  }
  assert(live_ == 0 && "a pipeline outlives its cache (and the VulkanDevice)");
  if (cache_ != VK_NULL_HANDLE)
    vkDestroyPipelineCache(device_, cache_, nullptr);
}

// The cache key: everything that makes two kernels' pipelines differ (the entry point, the
// interface and the words).
static std::string keyOf(const KernelBinary &k) {
  const uint32_t iface[4] = {k.numBuffers, k.pushConstantBytes, k.requireFullSubgroups,
                             k.requiredSubgroupSize};
  std::string key(reinterpret_cast<const char *>(iface), sizeof iface);
  key.append(k.entryPoint);
  key.push_back('\0');
  key.append(reinterpret_cast<const char *>(k.spirv.data()), k.spirv.size() * 4);
  return key;
}

absl::StatusOr<std::shared_ptr<const Pipeline>> PipelineCache::get(const KernelBinary &k) {
  std::string key = keyOf(k);
  absl::MutexLock lock(&mu_);
  ++stats_.lookups;
  if (const std::shared_ptr<const Pipeline> *cached = pipelines_.find(key))
    return *cached;
  if (builtIntoDriverCache_ >= 4 * capacity_)
    resetDriverCache();
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> built, build(k));
  ++builtIntoDriverCache_;
  ++stats_.compiled;
  ++live_;
  std::shared_ptr<const Pipeline> p(built.release(), [this](const Pipeline *q) { destroy(q); });
  // May drop (and destroy, when nobody else holds it) the least recently used pipeline.
  pipelines_.insert(key, p);
  return p;
}

void PipelineCache::resetDriverCache() {
  if (cache_ != VK_NULL_HANDLE)
    vkDestroyPipelineCache(device_, cache_, nullptr);
  auto info = vkStruct<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
  if (vkCreatePipelineCache(device_, &info, nullptr, &cache_) != VK_SUCCESS)
    cache_ = VK_NULL_HANDLE; // pipelines are then built without one
  builtIntoDriverCache_ = 0;
  ++stats_.driverCacheResets;
}

void PipelineCache::destroy(const Pipeline *p) {
  if (beforeDestroy_)
    beforeDestroy_(*p);
  vkDestroyPipeline(device_, p->pipeline, nullptr);
  vkDestroyPipelineLayout(device_, p->layout, nullptr);
  vkDestroyDescriptorSetLayout(device_, p->setLayout, nullptr);
  vkDestroyShaderModule(device_, p->module, nullptr);
  delete p;
  --live_;
}

PipelineCacheStats PipelineCache::stats() const {
  absl::MutexLock lock(&mu_);
  PipelineCacheStats s = stats_;
  s.cached = pipelines_.size();
  s.evictions = pipelines_.evictions();
  s.live = live_;
  return s;
}

size_t PipelineCache::size() const {
  absl::MutexLock lock(&mu_);
  return pipelines_.size();
}

absl::StatusOr<std::unique_ptr<Pipeline>> PipelineCache::build(const KernelBinary &k) {
  const VkPhysicalDeviceLimits &lim = props_.limits;
  if (k.spirv.size() < 5 || k.spirv[0] != 0x07230203u)
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel ", k.entryPoint, ": not a SPIR-V module (", k.spirv.size(), " words)"));
  if (k.pushConstantBytes % 4 != 0 || k.pushConstantBytes > lim.maxPushConstantsSize)
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", k.entryPoint, ": push constants of ", k.pushConstantBytes,
                     " bytes (a multiple of 4 up to ", lim.maxPushConstantsSize, " allowed)"));
  if (k.numBuffers > lim.maxPerStageDescriptorStorageBuffers)
    return absl::InvalidArgumentError(absl::StrCat("kernel ", k.entryPoint, ": ", k.numBuffers,
                                                   " buffers, the device allows ",
                                                   lim.maxPerStageDescriptorStorageBuffers));
  uint64_t invocations = uint64_t{k.localSize[0]} * k.localSize[1] * k.localSize[2];
  for (int d = 0; d < 3; ++d) {
    if (k.localSize[d] == 0 || k.localSize[d] > lim.maxComputeWorkGroupSize[d] ||
        invocations > lim.maxComputeWorkGroupInvocations)
      return absl::InvalidArgumentError(
          absl::StrCat("kernel ", k.entryPoint, ": local size ", k.localSize[0], "x",
                       k.localSize[1], "x", k.localSize[2], " exceeds the device limits (",
                       lim.maxComputeWorkGroupInvocations, " invocations)"));
  }
  auto p = std::make_unique<Pipeline>();
  p->numBuffers = k.numBuffers;
  p->pushConstantBytes = k.pushConstantBytes;
  p->localSize = k.localSize;
  p->id = nextId_++;
  auto fail = [&](VkResult r, const char *what) {
    vkDestroyPipelineLayout(device_, p->layout, nullptr);
    vkDestroyDescriptorSetLayout(device_, p->setLayout, nullptr);
    vkDestroyShaderModule(device_, p->module, nullptr);
    absl::Status s = vkStatus(r, absl::StrCat("kernel ", k.entryPoint, ": ", what));
    // A driver rejecting a module is a codegen bug, not a runtime condition.
    return r == VK_ERROR_DEVICE_LOST || s.code() == absl::StatusCode::kResourceExhausted
               ? s
               : absl::InternalError(s.message());
  };
  auto mod = vkStruct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  mod.codeSize = k.spirv.size() * 4;
  mod.pCode = k.spirv.data();
  if (VkResult r = vkCreateShaderModule(device_, &mod, nullptr, &p->module); r != VK_SUCCESS)
    return fail(r, "vkCreateShaderModule");
  std::vector<VkDescriptorSetLayoutBinding> bindings(k.numBuffers);
  for (uint32_t i = 0; i < k.numBuffers; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  auto setInfo = vkStruct<VkDescriptorSetLayoutCreateInfo>(
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  setInfo.bindingCount = k.numBuffers;
  setInfo.pBindings = bindings.data();
  if (VkResult r = vkCreateDescriptorSetLayout(device_, &setInfo, nullptr, &p->setLayout);
      r != VK_SUCCESS)
    return fail(r, "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, k.pushConstantBytes};
  auto layoutInfo =
      vkStruct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  layoutInfo.setLayoutCount = 1;
  layoutInfo.pSetLayouts = &p->setLayout;
  layoutInfo.pushConstantRangeCount = k.pushConstantBytes ? 1 : 0;
  layoutInfo.pPushConstantRanges = &range;
  if (VkResult r = vkCreatePipelineLayout(device_, &layoutInfo, nullptr, &p->layout);
      r != VK_SUCCESS)
    return fail(r, "vkCreatePipelineLayout");
  auto info = vkStruct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = p->module;
  info.stage.pName = k.entryPoint.c_str();
  auto subgroup = vkStruct<VkPipelineShaderStageRequiredSubgroupSizeCreateInfo>(
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO);
  bool requireSize = k.requiredSubgroupSize && features_.subgroupSizeControl &&
                     features_.minSubgroupSize != features_.maxSubgroupSize;
  if (requireSize) {
    subgroup.requiredSubgroupSize = k.requiredSubgroupSize;
    info.stage.pNext = &subgroup;
  }
  // Full subgroups need a local size that is a whole number of them (VUID-...-flags-02758/9).
  uint32_t lanes = requireSize ? k.requiredSubgroupSize : features_.maxSubgroupSize;
  if (k.requireFullSubgroups && features_.computeFullSubgroups && lanes &&
      k.localSize[0] % lanes == 0)
    info.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  info.layout = p->layout;
  if (executableStatistics_)
    info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  if (VkResult r = vkCreateComputePipelines(device_, cache_, 1, &info, nullptr, &p->pipeline);
      r != VK_SUCCESS)
    return fail(r, "vkCreateComputePipelines");
  if (executableStatistics_)
    readStatistics(*p, k.name.empty() ? k.entryPoint : k.name);
  return p;
}

void PipelineCache::captureStatistics() {
  executableProperties_ = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(device_, "vkGetPipelineExecutablePropertiesKHR"));
  executableStatistics_ = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(device_, "vkGetPipelineExecutableStatisticsKHR"));
  if (!executableProperties_ || !executableStatistics_) {
    std::fprintf(stderr, "sinter: vulkan: no vkGetPipelineExecutable*KHR entry points\n");
    executableProperties_ = nullptr;
    executableStatistics_ = nullptr;
  }
}

void PipelineCache::readStatistics(Pipeline &p, const std::string &name) {
  auto pipelineInfo = vkStruct<VkPipelineInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR);
  pipelineInfo.pipeline = p.pipeline;
  uint32_t count = 0;
  if (executableProperties_(device_, &pipelineInfo, &count, nullptr) != VK_SUCCESS)
    return;
  std::vector<VkPipelineExecutablePropertiesKHR> executables(
      count, vkStruct<VkPipelineExecutablePropertiesKHR>(
                 VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR));
  if (executableProperties_(device_, &pipelineInfo, &count, executables.data()) != VK_SUCCESS)
    return;
  for (uint32_t i = 0; i < count; ++i) {
    auto execInfo =
        vkStruct<VkPipelineExecutableInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR);
    execInfo.pipeline = p.pipeline;
    execInfo.executableIndex = i;
    uint32_t n = 0;
    if (executableStatistics_(device_, &execInfo, &n, nullptr) != VK_SUCCESS)
      continue;
    std::vector<VkPipelineExecutableStatisticKHR> stats(
        n, vkStruct<VkPipelineExecutableStatisticKHR>(
               VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR));
    if (executableStatistics_(device_, &execInfo, &n, stats.data()) != VK_SUCCESS)
      continue;
    for (uint32_t j = 0; j < n; ++j) {
      const VkPipelineExecutableStatisticKHR &s = stats[j];
      std::string value;
      switch (s.format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        value = s.value.b32 ? "true" : "false";
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        value = absl::StrCat(s.value.i64);
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        value = absl::StrCat(s.value.u64);
        break;
      default:
        value = absl::StrFormat("%g", s.value.f64);
        break;
      }
      std::string stat = absl::StrCat(s.name, "=", value);
      if (count > 1)
        stat = absl::StrCat(executables[i].name, ": ", stat);
      p.statistics.push_back(std::move(stat));
    }
  }
  std::fprintf(stderr, "sinter: vulkan pipeline %s: %s\n", name.c_str(),
               absl::StrJoin(p.statistics, ", ").c_str());
}

} // namespace sinter::runtime::vulkan
