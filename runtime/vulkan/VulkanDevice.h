// VulkanDevice.h - one Vulkan instance, physical device, logical device and compute queue.
//
// The entry point of the Vulkan runtime: picks a device (a discrete GPU first, lavapipe when it is
// all there is, SINTER_VK_DEVICE to choose), reports its capabilities for the SPIR-V code
// generator, owns the memory sub-allocator and the staging ring, and offers a one-shot dispatch
// so kernels can be tested before the command recorder runs whole Plans. Plain C API, no
// exceptions; every VkResult becomes a Status in VkStatus.cpp.
#ifndef SINTER_RUNTIME_VULKAN_VULKANDEVICE_H
#define SINTER_RUNTIME_VULKAN_VULKANDEVICE_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "runtime/vulkan/RangeAllocator.h"
#include <vulkan/vulkan.h>

namespace sinter::runtime::vulkan {

class VulkanMemory;
class StagingRing;
class PipelineCache;
class DescriptorCache;

/// What the code generator needs to know about the device.
struct DeviceCaps {
  std::string deviceName;
  VkPhysicalDeviceType deviceKind = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  bool discrete = false;
  uint32_t vendorId = 0;
  uint32_t deviceId = 0;
  /// VK_API_VERSION_* the device reports (the runtime asks for at most 1.3).
  uint32_t apiVersion = 0;
  /// Default subgroup size; with subgroup size control, the range a pipeline may ask for.
  uint32_t subgroupSize = 0;
  uint32_t minSubgroupSize = 0;
  uint32_t maxSubgroupSize = 0;
  /// VkSubgroupFeatureFlags supported in compute shaders (basic, vote, arithmetic, ballot, shuffle,
  /// shuffle relative, clustered, quad).
  VkSubgroupFeatureFlags subgroupOps = 0;
  /// 8/16-bit types in storage buffers (VK_KHR_8bit_storage / 16bit_storage features, enabled).
  bool storageBuffer8BitAccess = false;
  bool storageBuffer16BitAccess = false;
  bool storagePushConstant8 = false;
  bool storagePushConstant16 = false;
  /// Arithmetic types in shaders (enabled when supported).
  bool shaderFloat16 = false;
  bool shaderInt8 = false;
  bool shaderInt16 = false;
  bool shaderInt64 = false;
  /// SPV_KHR_integer_dot_product (Vulkan 1.3 core feature), enabled when supported; the second
  /// says whether the packed signed 4x8-bit form is hardware accelerated.
  bool integerDotProduct = false;
  bool integerDotProduct4x8PackedSignedAccelerated = false;
  /// Float controls (a Vulkan 1.2 property): kernels may keep f32 subnormals (SPIR-V's
  /// DenormPreserve execution mode) instead of the driver's default, which may flush them.
  bool shaderDenormPreserveFloat32 = false;
  /// Vulkan 1.2/1.3 features the SPIR-V may rely on (enabled when supported).
  bool scalarBlockLayout = false;
  bool vulkanMemoryModel = false;
  bool shaderSubgroupExtendedTypes = false;
  bool subgroupSizeControl = false;
  bool computeFullSubgroups = false;
  /// VK_KHR_pipeline_executable_properties with pipelineExecutableInfo (enabled only when
  /// pipeline statistics are asked for).
  bool pipelineExecutableInfo = false;
  std::array<uint32_t, 3> maxComputeWorkGroupSize = {0, 0, 0};
  std::array<uint32_t, 3> maxComputeWorkGroupCount = {0, 0, 0};
  uint32_t maxComputeWorkGroupInvocations = 0;
  /// Streaming multiprocessors (VK_NV_shader_sm_builtins' shaderSMCount); 0 where the device
  /// does not say (Vulkan has no portable count of compute units).
  uint32_t smCount = 0;
  uint32_t maxComputeSharedMemorySize = 0;
  uint32_t maxPushConstantsSize = 0;
  uint32_t maxStorageBufferRange = 0;
  uint64_t minStorageBufferOffsetAlignment = 0;
  uint32_t maxBoundDescriptorSets = 0;
  uint32_t maxPerStageDescriptorStorageBuffers = 0;
  /// Nanoseconds per timestamp tick; 0 when the compute queue has no timestamps.
  float timestampPeriod = 0;
  uint32_t timestampValidBits = 0;
};

/// Pipelines a device's PipelineCache keeps by default: a decode step of tinyllama-1.1b runs 6
/// distinct fused kernels (llama-7b the same kinds at other shapes), the first tokens' plans a few
/// more, so 256 leaves room for several models or shapes per device (a decode never evicts) while
/// bounding what a stream of distinct eps or freq_base values holds (lavapipe: 0.6 to 1.3 MB of
/// heap a pipeline).
inline constexpr size_t kDefaultPipelineCacheCapacity = 256;

struct VulkanDeviceOptions {
  /// Enables VK_LAYER_KHRONOS_validation with a debug messenger that counts its messages (also
  /// turned on by SINTER_VK_VALIDATION=1). Fails with FailedPrecondition when the layer is absent.
  bool validation = false;
  /// With validation: the layer's synchronization validation too (hazards between commands that
  /// no barrier orders, reported as messages; also SINTER_VK_SYNC_VALIDATION=1). Slow: for tests.
  bool syncValidation = false;
  /// Device index or a substring of its name; empty: SINTER_VK_DEVICE, then the best device.
  std::string deviceSelector;
  /// Size of each VkDeviceMemory block the sub-allocator takes (larger requests get their own).
  uint64_t memoryBlockBytes = 256ull << 20;
  /// Size of the host-visible staging ring used by write and read.
  uint64_t stagingBytes = 64ull << 20;
  /// Record per-dispatch timestamps (also set by SINTER_STATS=1).
  bool timestamps = false;
  /// Folder of the disk pipeline cache; empty: SINTER_CACHE_DIR, and in memory only when unset.
  std::string pipelineCacheDir;
  /// Pipelines the pipeline cache keeps (least recently used dropped first; pipelines a kernel
  /// still holds live on). A small one costs recompilations, never results.
  size_t pipelineCacheCapacity = kDefaultPipelineCacheCapacity;
  /// Capture the driver's statistics of every pipeline (registers, shared memory, spills: what
  /// VK_KHR_pipeline_executable_properties reports) into Pipeline::statistics and print one line
  /// per pipeline to stderr (also set by SINTER_VK_PIPELINE_STATS=1). Needs the extension:
  /// without it the statistics stay empty and one line says so.
  bool pipelineStatistics = false;
  /// How a submission waits for its fence. Block: vkWaitForFences (the thread sleeps in the
  /// driver). Spin: vkGetFenceStatus in a loop, for up to spinLimitMicros, then
  /// vkWaitForFences: no wake-up latency after the GPU finishes, for a core kept busy meanwhile
  /// (H100, 2026-12-06: 51 us less a tinyllama-1.1b token, 894 -> 945 tokens/s). Auto: Spin on
  /// a GPU, Block on a CPU device (lavapipe), whose workers need every core. SINTER_VK_WAIT=spin,
  /// =block or =auto overrides it (docs/ENVIRONMENT.md).
  enum class Wait : uint8_t { Auto, Block, Spin };
  Wait wait = Wait::Auto;
  uint64_t spinLimitMicros = 200000;
  /// Plans' parameter words in device-local memory that the host writes through a mapping
  /// (VulkanDevice::allocateMappedParams), where the device has such a memory type: no staging
  /// copy and no barrier at the start of each submission. SINTER_VK_DIRECT_PARAMS=0 turns it off.
  bool directParams = true;
  /// Bytes of that memory (one buffer, sub-allocated among the plans; a plan that finds it full
  /// stages its words instead).
  uint64_t directParamsBytes = 8ull << 20;
};

/// One VkBuffer bound over its own VkDeviceMemory, mapped for the host: the staging ring and the
/// direct parameter memory (createMappedBuffer in VulkanMemory.h).
struct MappedBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint8_t *host = nullptr;
};

/// A range of a device-local storage buffer. Several refs may share one VkBuffer (sub-allocation);
/// `offset` is a multiple of minStorageBufferOffsetAlignment.
struct BufferRef {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;
  uint64_t size = 0;
  /// The allocator's id of the range (0 for none); what freeBuffer releases.
  uint64_t allocation = 0;
};

/// A compute kernel: SPIR-V words and its interface. Bindings 0..numBuffers-1 of descriptor set 0
/// are storage buffers, bound in the order of the dispatch's buffer list; push constants
/// (pushConstantBytes, a multiple of 4) start at offset 0. localSize is informational (the SPIR-V
/// carries its own LocalSize) and checked against the device limits.
struct KernelBinary {
  std::vector<uint32_t> spirv;
  std::string entryPoint = "main";
  /// What pipeline statistics are printed under (empty: the entry point).
  std::string name;
  uint32_t numBuffers = 0;
  uint32_t pushConstantBytes = 0;
  std::array<uint32_t, 3> localSize = {1, 1, 1};
  /// Created with VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT (needs the
  /// computeFullSubgroups feature; ignored without it).
  bool requireFullSubgroups = false;
  /// Subgroup size the kernel assumes, requested through subgroup size control when the device
  /// varies it (0: the device's default).
  uint32_t requiredSubgroupSize = 0;
};

/// Messages the validation layer sent (warnings and errors; info and verbose are not counted).
struct ValidationLog {
  uint64_t count = 0;
  /// The first 64 messages, "severity: id: text".
  std::vector<std::string> messages;
};

/// Records one global memory barrier (no image or buffer barriers: buffers are sub-ranges and a
/// global barrier costs the same on every driver we target).
void recordMemoryBarrier(VkCommandBuffer cmd, VkPipelineStageFlags srcStages,
                         VkAccessFlags srcAccess, VkPipelineStageFlags dstStages,
                         VkAccessFlags dstAccess);

/// The barrier every command buffer of the runtime starts with: earlier submissions' shader and
/// transfer writes become visible to this one's shader and transfer accesses.
void recordEntryBarrier(VkCommandBuffer cmd);

/// InvalidArgument unless `buffers` and `pushConstants` match `k` and the groups and bound
/// ranges are within the device limits.
absl::Status checkDispatch(const DeviceCaps &caps, const KernelBinary &k,
                           absl::Span<const BufferRef> buffers,
                           absl::Span<const uint8_t> pushConstants, std::array<uint32_t, 3> groups);

/// The VulkanDevice is externally synchronized: one thread at a time calls its methods (the
/// backend holds its own lock), except validationLog(), deviceLost() and the memory allocator.
class VulkanDevice {
public:
  /// Creates the instance (with validation when asked), picks the physical device, creates the
  /// logical device with every feature in DeviceCaps that the device supports, a compute queue,
  /// the memory allocator and the staging ring. Unavailable when no Vulkan device exists;
  /// NotFound when SINTER_VK_DEVICE / deviceSelector matches none (the message lists them).
  static absl::StatusOr<std::unique_ptr<VulkanDevice>> create(VulkanDeviceOptions options = {});
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice &) = delete;
  VulkanDevice &operator=(const VulkanDevice &) = delete;

  const DeviceCaps &caps() const { return caps_; }
  /// Names of every physical device, in enumeration order (the indices SINTER_VK_DEVICE takes).
  const std::vector<std::string> &deviceNames() const { return deviceNames_; }
  bool validationEnabled() const { return validation_; }
  bool timestampsEnabled() const { return timestamps_; }
  /// Validation messages so far (count 0 and no messages when validation is off).
  ValidationLog validationLog() const;

  /// A device-local storage buffer range of `bytes` bytes (rounded up to 16; at least 16).
  /// ResourceExhausted when device memory runs out.
  absl::StatusOr<BufferRef> createBuffer(uint64_t bytes);
  /// Releases a range made by createBuffer; a null ref is ignored. The caller makes sure no
  /// pending work uses it (the one-shot paths below wait for completion).
  void freeBuffer(const BufferRef &ref);
  /// Copies `data` into the buffer at `offset` through the staging ring and waits.
  /// InvalidArgument when the range is outside the buffer.
  absl::Status write(const BufferRef &dst, absl::Span<const uint8_t> data, uint64_t offset = 0);
  /// Copies out.size() bytes from the buffer at `offset` into `out` and waits.
  absl::Status read(const BufferRef &src, absl::Span<uint8_t> out, uint64_t offset = 0);

  /// Runs one kernel and waits: builds (or finds in the pipeline cache) its pipeline, binds
  /// `buffers` to bindings 0..n-1, pushes `pushConstants`, dispatches `groups` workgroups.
  /// InvalidArgument when the buffer count or push-constant size disagrees with `k` or a limit
  /// is exceeded; Internal when the driver rejects the SPIR-V; Unavailable on device loss.
  absl::Status dispatchOnce(const KernelBinary &k, absl::Span<const BufferRef> buffers,
                            absl::Span<const uint8_t> pushConstants,
                            std::array<uint32_t, 3> groups);

  // Handles for the runtime's other objects (memory, staging, pipelines, command recorder).
  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physicalDevice() const { return physical_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queueFamily() const { return queueFamily_; }
  VulkanMemory &memory() { return *memory_; }
  StagingRing &staging() { return *staging_; }
  PipelineCache &pipelines() { return *pipelines_; }
  DescriptorCache &descriptors() { return *descriptors_; }

  /// Submits one primary command buffer to the compute queue and waits for it. Maps the result
  /// (and the fault hook's) to a Status; after device loss every later submit is Unavailable.
  absl::Status submitAndWait(VkCommandBuffer cmd);
  /// Submits without waiting (an overlapped flush, PlanArgs::mayFinishLater) and returns the
  /// submission's serial. Every command buffer begins with the entry barrier, so later
  /// submissions run after it; a submitAndWait's fence covers it (a fence signal includes every
  /// earlier submission); host work that touches what it may use (freeing buffers or command
  /// buffers, resetting descriptor pools) calls drain() first, which these methods here do.
  absl::StatusOr<uint64_t> submitNoWait(VkCommandBuffer cmd);
  /// Whether the submission `serial` from submitNoWait may still be running.
  bool mayBeRunning(uint64_t serial) const;
  /// Waits for every submission so far (nothing to do when none was made without a wait since
  /// the last wait).
  absl::Status drain();
  /// submitNoWait calls so far.
  uint64_t noWaitSubmissions() const;
  /// vkQueueSubmit calls so far, from every user of the device (plans, reads, writes, one-off
  /// dispatches): a decode step's count is its submissions, read-back included.
  uint64_t queueSubmissions() const;
  /// A one-time-submit command buffer from the device's pool, begun; give it to endOneShot.
  absl::StatusOr<VkCommandBuffer> beginOneShot();
  /// Ends, submits and waits for a command buffer from beginOneShot, then frees it.
  absl::Status endOneShot(VkCommandBuffer cmd);
  /// A command buffer from the device's pool, begun (with the entry barrier), one-time-submit
  /// or (oneShot false) to be submitted again and again with submitAndWait until the caller
  /// ends its life with freeCommands. The caller ends the recording (vkEndCommandBuffer).
  absl::StatusOr<VkCommandBuffer> beginCommands(bool oneShot);
  /// Frees a command buffer from beginCommands (null is ignored); none of its submissions may
  /// still be pending.
  void freeCommands(VkCommandBuffer cmd);

  /// A range of device-local, host-visible, host-coherent memory for a plan's parameter words,
  /// with its mapping: what the host writes there before a submission the submission sees, with
  /// no copy. NotFound when the device has no such memory type or VulkanDeviceOptions::
  /// directParams is off; ResourceExhausted when the arena is full. Either way the caller stages
  /// its words instead.
  struct MappedRange {
    BufferRef ref;
    uint8_t *host = nullptr;
  };
  absl::StatusOr<MappedRange> allocateMappedParams(uint64_t bytes);
  /// Returns a range from allocateMappedParams; no submission that reads it may be pending.
  void freeMappedParams(const BufferRef &ref);

  /// Test only: the next submitAndWait fails with `result` (VK_ERROR_DEVICE_LOST,
  /// VK_ERROR_OUT_OF_DEVICE_MEMORY, ...) instead of waiting for the queue; VK_SUCCESS clears it.
  void injectSubmitFaultForTesting(VkResult result);
  /// True once a submit saw VK_ERROR_DEVICE_LOST (real or injected).
  bool deviceLost() const;
  /// How submissions wait (VulkanDeviceOptions::wait with Auto resolved).
  VulkanDeviceOptions::Wait waitMode() const { return wait_; }

private:
  VulkanDevice() = default;
  absl::Status init(const VulkanDeviceOptions &options);
  absl::Status createInstance(bool validation, bool syncValidation);
  absl::Status pickPhysicalDevice(const std::string &selector);
  absl::Status createLogicalDevice(bool pipelineStatistics);
  void recordMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity, const char *id,
                     const char *text);
  static VKAPI_ATTR VkBool32 VKAPI_CALL onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT kinds,
                                                  const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                  void *self);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queueFamily_ = 0;
  VkCommandPool commandPool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  DeviceCaps caps_;
  std::vector<std::string> deviceNames_;
  std::string selectorSource_; ///< what chose the device, for the NotFound message
  bool validation_ = false;
  bool timestamps_ = false;
  std::unique_ptr<VulkanMemory> memory_;
  std::unique_ptr<StagingRing> staging_;
  std::unique_ptr<PipelineCache> pipelines_;
  std::unique_ptr<DescriptorCache> descriptors_;

  mutable absl::Mutex logMutex_;
  ValidationLog log_ ABSL_GUARDED_BY(logMutex_);
  mutable absl::Mutex submitMutex_;
  VkResult injectedFault_ ABSL_GUARDED_BY(submitMutex_) = VK_SUCCESS;
  bool lost_ ABSL_GUARDED_BY(submitMutex_) = false;
  uint64_t queueSubmissions_ ABSL_GUARDED_BY(submitMutex_) = 0;
  /// submitNoWait's serials: the last one handed out, and the last one known finished.
  uint64_t noWaitSerial_ ABSL_GUARDED_BY(submitMutex_) = 0;
  uint64_t finishedSerial_ ABSL_GUARDED_BY(submitMutex_) = 0;
  /// submitAndWait (wait) or submitNoWait: the lost-device check, the fault hook, the submission
  /// (with fence_ and its wait only when `wait`).
  absl::Status submitLocked(VkCommandBuffer cmd, bool wait)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(submitMutex_);
  /// Waits for fence_ after a submission with it; marks every earlier submission finished.
  VkResult finishWithFence() ABSL_EXCLUSIVE_LOCKS_REQUIRED(submitMutex_);
  /// VulkanDeviceOptions::wait and spinLimitMicros after SINTER_VK_WAIT.
  VulkanDeviceOptions::Wait wait_ = VulkanDeviceOptions::Wait::Block;
  uint64_t spinLimitMicros_ = 0;
  /// Waits for fence_ as wait_ says; the fence's result.
  VkResult waitForFence();
  /// allocateMappedParams' arena, made on first use (paramArenaState_: 0 not tried, 1 made,
  /// 2 unavailable).
  absl::Mutex paramArenaMutex_;
  int paramArenaState_ ABSL_GUARDED_BY(paramArenaMutex_) = 0;
  bool directParams_ = true;
  uint64_t directParamsBytes_ = 0;
  MappedBuffer paramArenaMemory_;
  std::unique_ptr<RangeAllocator> paramArena_ ABSL_GUARDED_BY(paramArenaMutex_);
};

} // namespace sinter::runtime::vulkan

#endif // SINTER_RUNTIME_VULKAN_VULKANDEVICE_H
