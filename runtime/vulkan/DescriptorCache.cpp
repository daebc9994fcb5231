// DescriptorCache.cpp - keyed descriptor sets over growable pools (see DescriptorCache.h).
#include "runtime/vulkan/DescriptorCache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {

DescriptorCache::DescriptorCache(VkDevice device, uint32_t setsPerPool, uint64_t maxSets)
    : device_(device), setsPerPool_(setsPerPool), maxSets_(maxSets) {}

DescriptorCache::~DescriptorCache() {
  for (Pool &p : pools_)
    vkDestroyDescriptorPool(device_, p.pool, nullptr);
}

absl::StatusOr<VkDescriptorSet> DescriptorCache::allocate(VkDescriptorSetLayout layout,
                                                          uint32_t numBuffers) {
  // Counting what each pool has left (instead of waiting for VK_ERROR_OUT_OF_POOL_MEMORY) keeps
  // the path free of expected errors.
  while (current_ < pools_.size() &&
         (pools_[current_].setsLeft == 0 || pools_[current_].descriptorsLeft < numBuffers))
    ++current_;
  if (current_ == pools_.size()) {
    uint32_t descriptors = std::max<uint32_t>(setsPerPool_ * 16, numBuffers);
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
    auto info = vkStruct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    info.maxSets = setsPerPool_;
    info.poolSizeCount = 1;
    info.pPoolSizes = &size;
    VkDescriptorPool pool;
    SINTER_RETURN_IF_ERROR(
        vkStatus(vkCreateDescriptorPool(device_, &info, nullptr, &pool),
                 absl::StrCat("vkCreateDescriptorPool of ", setsPerPool_, " sets")));
    pools_.push_back(Pool{pool, setsPerPool_, descriptors, descriptors});
    ++stats_.pools;
  }
  Pool &p = pools_[current_];
  auto info = vkStruct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  info.descriptorPool = p.pool;
  info.descriptorSetCount = 1;
  info.pSetLayouts = &layout;
  VkDescriptorSet set;
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkAllocateDescriptorSets(device_, &info, &set), "vkAllocateDescriptorSets"));
  --p.setsLeft;
  p.descriptorsLeft -= numBuffers;
  ++stats_.setsAllocated;
  return set;
}

absl::StatusOr<VkDescriptorSet> DescriptorCache::get(const Pipeline &p,
                                                     absl::Span<const BufferRef> buffers) {
  ++stats_.lookups;
  std::vector<uint64_t> key;
  key.reserve(1 + 3 * buffers.size());
  key.push_back(p.id);
  for (const BufferRef &b : buffers) {
    key.push_back(reinterpret_cast<uint64_t>(b.buffer));
    key.push_back(b.offset);
    key.push_back(b.size);
  }
  auto found = sets_.find(key);
  if (found != sets_.end()) {
    ++stats_.hits;
    return found->second;
  }
  SINTER_ASSIGN_OR_RETURN(VkDescriptorSet set, allocate(p.setLayout, p.numBuffers));
  std::vector<VkDescriptorBufferInfo> infos(buffers.size());
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    infos[i] = VkDescriptorBufferInfo{buffers[i].buffer, buffers[i].offset, buffers[i].size};
    writes[i] = vkStruct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  if (!writes.empty())
    vkUpdateDescriptorSets(device_, static_cast<uint32_t>(writes.size()), writes.data(), 0,
                           nullptr);
  sets_.emplace(std::move(key), set);
  return set;
}

void DescriptorCache::trim(bool force) {
  const bool manyDead = deadSets_ >= std::max<uint64_t>(kDeadSetsBeforeReset, sets_.size());
  if (!force && sets_.size() <= maxSets_ && !manyDead)
    return;
  if (beforeReset_)
    beforeReset_();
  for (Pool &p : pools_) {
    vkResetDescriptorPool(device_, p.pool, 0);
    p.setsLeft = setsPerPool_;
    p.descriptorsLeft = p.descriptors;
  }
  current_ = 0;
  sets_.clear();
  deadSets_ = 0;
  ++stats_.resets;
}

void DescriptorCache::forgetPipeline(uint64_t pipelineId) {
  // A scan: pipelines die rarely (evicted from every cache and no plan left using them).
  for (auto it = sets_.begin(); it != sets_.end();) {
    if (it->first[0] != pipelineId) {
      ++it;
      continue;
    }
    sets_.erase(it++);
    ++deadSets_;
  }
}

void DescriptorCache::invalidateIfBuffersDestroyed(uint64_t destroyedBlocks) {
  if (destroyedBlocks == destroyedBlocks_)
    return;
  destroyedBlocks_ = destroyedBlocks;
  if (!sets_.empty())
    trim(/*force=*/true);
}

DescriptorStats DescriptorCache::stats() const {
  DescriptorStats s = stats_;
  s.liveSets = sets_.size();
  s.deadSets = deadSets_;
  return s;
}

} // namespace sinter::runtime::vulkan
