// VulkanTransfers.cpp - buffers, staged copies, submission with fault mapping, one-shot dispatch.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/FaultInjection.h"
#include "runtime/vulkan/DescriptorCache.h"
#include "runtime/vulkan/PipelineCache.h"
#include "runtime/vulkan/StagingRing.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "runtime/vulkan/VulkanMemory.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {

void recordMemoryBarrier(VkCommandBuffer cmd, VkPipelineStageFlags srcStages,
                         VkAccessFlags srcAccess, VkPipelineStageFlags dstStages,
                         VkAccessFlags dstAccess) {
  auto barrier = vkStruct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  barrier.srcAccessMask = srcAccess;
  barrier.dstAccessMask = dstAccess;
  vkCmdPipelineBarrier(cmd, srcStages, dstStages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

static constexpr VkPipelineStageFlags kWorkStages =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;

void recordEntryBarrier(VkCommandBuffer cmd) {
  recordMemoryBarrier(cmd, kWorkStages, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                      kWorkStages,
                      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
}

absl::StatusOr<BufferRef> VulkanDevice::createBuffer(uint64_t bytes) {
  return memory_->allocate(bytes);
}

void VulkanDevice::freeBuffer(const BufferRef &ref) {
  if (ref.allocation == 0)
    return;
  (void)drain(); // a failure marks the device lost: the next submission reports it
  memory_->free(ref);
}

void VulkanDevice::injectSubmitFaultForTesting(VkResult result) {
  absl::MutexLock lock(&submitMutex_);
  injectedFault_ = result;
}

bool VulkanDevice::deviceLost() const {
  absl::MutexLock lock(&submitMutex_);
  return lost_;
}

uint64_t VulkanDevice::queueSubmissions() const {
  absl::MutexLock lock(&submitMutex_);
  return queueSubmissions_;
}

absl::Status VulkanDevice::submitAndWait(VkCommandBuffer cmd) {
  absl::MutexLock lock(&submitMutex_);
  return submitLocked(cmd, /*wait=*/true);
}

absl::Status VulkanDevice::submitLocked(VkCommandBuffer cmd, bool wait) {
  if (lost_)
    return absl::UnavailableError("vulkan: the device was lost earlier; recreate the backend");
  VkResult r = injectedFault_ != VK_SUCCESS ? injectedFault_
                                            : VkResult(runtime::fault::injectedSubmitResult());
  injectedFault_ = VK_SUCCESS;
  const char *what = "vulkan: queue submission (injected fault)";
  if (r == VK_SUCCESS) {
    what = "vulkan: vkQueueSubmit";
    auto info = vkStruct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    info.commandBufferCount = 1;
    info.pCommandBuffers = &cmd;
    r = vkQueueSubmit(queue_, 1, &info, wait ? fence_ : VK_NULL_HANDLE);
    ++queueSubmissions_;
    if (r == VK_SUCCESS && wait) {
      what = "vulkan: vkWaitForFences";
      r = finishWithFence();
    }
  }
  if (r == VK_ERROR_DEVICE_LOST)
    lost_ = true;
  return vkStatus(r, what);
}

VkResult VulkanDevice::finishWithFence() {
  VkResult r = waitForFence();
  vkResetFences(device_, 1, &fence_);
  if (r == VK_SUCCESS)
    finishedSerial_ = noWaitSerial_;
  return r;
}

absl::StatusOr<uint64_t> VulkanDevice::submitNoWait(VkCommandBuffer cmd) {
  absl::MutexLock lock(&submitMutex_);
  SINTER_RETURN_IF_ERROR(submitLocked(cmd, /*wait=*/false));
  return ++noWaitSerial_;
}

bool VulkanDevice::mayBeRunning(uint64_t serial) const {
  absl::MutexLock lock(&submitMutex_);
  return serial > finishedSerial_;
}

uint64_t VulkanDevice::noWaitSubmissions() const {
  absl::MutexLock lock(&submitMutex_);
  return noWaitSerial_;
}

absl::Status VulkanDevice::drain() {
  absl::MutexLock lock(&submitMutex_);
  if (finishedSerial_ == noWaitSerial_)
    return absl::OkStatus();
  if (lost_)
    return absl::UnavailableError("vulkan: the device was lost earlier; recreate the backend");
  // No command buffers: the fence signals once everything submitted before it has finished.
  VkResult r = vkQueueSubmit(queue_, 0, nullptr, fence_);
  if (r == VK_SUCCESS)
    r = finishWithFence();
  if (r == VK_ERROR_DEVICE_LOST)
    lost_ = true;
  return vkStatus(r, "vulkan: waiting for submissions made without a wait");
}

VkResult VulkanDevice::waitForFence() {
  if (wait_ == VulkanDeviceOptions::Wait::Spin) {
    // Poll until the fence is signalled, an error comes, or the spin's time is up (then sleep
    // in the driver like Block: a long wait should not burn a core).
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::microseconds(spinLimitMicros_);
    for (uint32_t polls = 0;; ++polls) {
      VkResult r = vkGetFenceStatus(device_, fence_);
      if (r != VK_NOT_READY)
        return r;
      if (polls % 64 == 63 && std::chrono::steady_clock::now() >= until)
        break;
    }
  }
  return vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
}

absl::StatusOr<VkCommandBuffer> VulkanDevice::beginOneShot() { return beginCommands(true); }

absl::StatusOr<VkCommandBuffer> VulkanDevice::beginCommands(bool oneShot) {
  auto alloc =
      vkStruct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  alloc.commandPool = commandPool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd;
  SINTER_RETURN_IF_ERROR(
      vkStatus(vkAllocateCommandBuffers(device_, &alloc, &cmd), "vkAllocateCommandBuffers"));
  auto begin = vkStruct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  begin.flags = oneShot ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
  absl::Status s = vkStatus(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
  if (!s.ok()) {
    vkFreeCommandBuffers(device_, commandPool_, 1, &cmd);
    return s;
  }
  recordEntryBarrier(cmd);
  return cmd;
}

absl::Status VulkanDevice::endOneShot(VkCommandBuffer cmd) {
  absl::Status s = vkStatus(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  if (s.ok())
    s = submitAndWait(cmd);
  vkFreeCommandBuffers(device_, commandPool_, 1, &cmd);
  return s;
}

void VulkanDevice::freeCommands(VkCommandBuffer cmd) {
  if (cmd == VK_NULL_HANDLE)
    return;
  (void)drain(); // the command buffer may be pending
  vkFreeCommandBuffers(device_, commandPool_, 1, &cmd);
}

static absl::Status checkRange(const BufferRef &ref, uint64_t offset, uint64_t bytes,
                               const char *what) {
  if (ref.buffer == VK_NULL_HANDLE)
    return absl::InvalidArgumentError(absl::StrCat("vulkan ", what, ": null buffer"));
  if (offset > ref.size || bytes > ref.size - offset)
    return absl::InvalidArgumentError(absl::StrCat("vulkan ", what, ": ", bytes,
                                                   " bytes at offset ", offset,
                                                   " exceed the buffer's ", ref.size, " bytes"));
  return absl::OkStatus();
}

absl::Status VulkanDevice::write(const BufferRef &dst, absl::Span<const uint8_t> data,
                                 uint64_t offset) {
  SINTER_RETURN_IF_ERROR(checkRange(dst, offset, data.size(), "write"));
  for (uint64_t done = 0; done < data.size();) {
    staging_->reset();
    uint64_t chunk = std::min<uint64_t>(data.size() - done, staging_->capacity());
    SINTER_ASSIGN_OR_RETURN(StagingSpan span, staging_->take(chunk));
    std::memcpy(span.data, data.data() + done, chunk);
    SINTER_ASSIGN_OR_RETURN(VkCommandBuffer cmd, beginOneShot());
    VkBufferCopy region{span.offset, dst.offset + offset + done, chunk};
    vkCmdCopyBuffer(cmd, span.buffer, dst.buffer, 1, &region);
    SINTER_RETURN_IF_ERROR(endOneShot(cmd));
    done += chunk;
  }
  return absl::OkStatus();
}

absl::Status VulkanDevice::read(const BufferRef &src, absl::Span<uint8_t> out, uint64_t offset) {
  SINTER_RETURN_IF_ERROR(checkRange(src, offset, out.size(), "read"));
  for (uint64_t done = 0; done < out.size();) {
    staging_->reset();
    uint64_t chunk = std::min<uint64_t>(out.size() - done, staging_->capacity());
    SINTER_ASSIGN_OR_RETURN(StagingSpan span, staging_->take(chunk));
    SINTER_ASSIGN_OR_RETURN(VkCommandBuffer cmd, beginOneShot());
    VkBufferCopy region{src.offset + offset + done, span.offset, chunk};
    vkCmdCopyBuffer(cmd, src.buffer, span.buffer, 1, &region);
    recordMemoryBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                        VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    SINTER_RETURN_IF_ERROR(endOneShot(cmd));
    std::memcpy(out.data() + done, span.data, chunk);
    done += chunk;
  }
  return absl::OkStatus();
}

absl::Status checkDispatch(const DeviceCaps &caps, const KernelBinary &k,
                           absl::Span<const BufferRef> buffers,
                           absl::Span<const uint8_t> pushConstants,
                           std::array<uint32_t, 3> groups) {
  if (buffers.size() != k.numBuffers)
    return absl::InvalidArgumentError(
        absl::StrCat("dispatch of ", k.entryPoint, ": ", buffers.size(),
                     " buffers given, the kernel has ", k.numBuffers));
  if (pushConstants.size() != k.pushConstantBytes)
    return absl::InvalidArgumentError(
        absl::StrCat("dispatch of ", k.entryPoint, ": ", pushConstants.size(),
                     " push-constant bytes given, the kernel has ", k.pushConstantBytes));
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].buffer == VK_NULL_HANDLE || buffers[i].size == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("dispatch of ", k.entryPoint, ": buffer ", i, " is null or empty"));
    if (buffers[i].size > caps.maxStorageBufferRange)
      return absl::InvalidArgumentError(
          absl::StrCat("dispatch of ", k.entryPoint, ": buffer ", i, " binds ", buffers[i].size,
                       " bytes, above maxStorageBufferRange ", caps.maxStorageBufferRange));
  }
  for (int d = 0; d < 3; ++d) {
    if (groups[d] > caps.maxComputeWorkGroupCount[d])
      return absl::InvalidArgumentError(
          absl::StrCat("dispatch of ", k.entryPoint, ": ", groups[d], " workgroups in dimension ",
                       d, ", the device allows ", caps.maxComputeWorkGroupCount[d]));
  }
  return absl::OkStatus();
}

absl::Status VulkanDevice::dispatchOnce(const KernelBinary &k, absl::Span<const BufferRef> buffers,
                                        absl::Span<const uint8_t> pushConstants,
                                        std::array<uint32_t, 3> groups) {
  SINTER_RETURN_IF_ERROR(checkDispatch(caps_, k, buffers, pushConstants, groups));
  descriptors_->invalidateIfBuffersDestroyed(memory_->destroyedBlocks());
  SINTER_ASSIGN_OR_RETURN(std::shared_ptr<const Pipeline> p, pipelines_->get(k));
  SINTER_ASSIGN_OR_RETURN(VkDescriptorSet set, descriptors_->get(*p, buffers));
  SINTER_ASSIGN_OR_RETURN(VkCommandBuffer cmd, beginOneShot());
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, nullptr);
  if (!pushConstants.empty())
    vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<uint32_t>(pushConstants.size()), pushConstants.data());
  vkCmdDispatch(cmd, groups[0], groups[1], groups[2]);
  absl::Status s = endOneShot(cmd);
  // Nothing is in flight after the wait, so the cache may reset its pools here.
  descriptors_->trim();
  return s;
}

} // namespace sinter::runtime::vulkan
