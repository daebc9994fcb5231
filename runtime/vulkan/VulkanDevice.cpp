// VulkanDevice.cpp - instance, validation messenger, device selection, capabilities, queue.
//
// Transfers, submission and the one-shot dispatch are in VulkanTransfers.cpp.
#include "runtime/vulkan/VulkanDevice.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/vulkan/DescriptorCache.h"
#include "runtime/vulkan/PhysicalDevices.h"
#include "runtime/vulkan/PipelineCache.h"
#include "runtime/vulkan/StagingRing.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "runtime/vulkan/VulkanMemory.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {

static constexpr const char *kValidationLayer = "VK_LAYER_KHRONOS_validation";

static bool envIsOne(const char *name) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

static bool envIsZero(const char *name) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}

absl::StatusOr<std::unique_ptr<VulkanDevice>> VulkanDevice::create(VulkanDeviceOptions options) {
  std::unique_ptr<VulkanDevice> d(new VulkanDevice());
  SINTER_RETURN_IF_ERROR(d->init(options));
  return d;
}

absl::Status VulkanDevice::init(const VulkanDeviceOptions &options) {
  validation_ = options.validation || envIsOne("SINTER_VK_VALIDATION");
  timestamps_ = options.timestamps || envIsOne("SINTER_STATS");
  directParams_ = options.directParams && !envIsZero("SINTER_VK_DIRECT_PARAMS");
  directParamsBytes_ = options.directParamsBytes;
  wait_ = options.wait;
  spinLimitMicros_ = options.spinLimitMicros;
  if (const char *env = std::getenv("SINTER_VK_WAIT"); env && *env) {
    if (std::strcmp(env, "spin") == 0)
      wait_ = VulkanDeviceOptions::Wait::Spin;
    else if (std::strcmp(env, "block") == 0)
      wait_ = VulkanDeviceOptions::Wait::Block;
    else if (std::strcmp(env, "auto") == 0)
      wait_ = VulkanDeviceOptions::Wait::Auto;
    else
      return absl::InvalidArgumentError(
          absl::StrCat("vulkan: SINTER_VK_WAIT is '", env, "'; use spin, block or auto"));
  }
  selectorSource_ = options.deviceSelector.empty() ? "SINTER_VK_DEVICE" : "device";
  const std::string selector = deviceSelectorOrEnvironment(options.deviceSelector);
  SINTER_RETURN_IF_ERROR(createInstance(
      validation_,
      validation_ && (options.syncValidation || envIsOne("SINTER_VK_SYNC_VALIDATION"))));
  SINTER_RETURN_IF_ERROR(pickPhysicalDevice(selector));
  const bool statistics = options.pipelineStatistics || envIsOne("SINTER_VK_PIPELINE_STATS");
  SINTER_RETURN_IF_ERROR(createLogicalDevice(statistics));
  timestamps_ = timestamps_ && caps_.timestampValidBits > 0;
  if (wait_ == VulkanDeviceOptions::Wait::Auto)
    wait_ = caps_.deviceKind == VK_PHYSICAL_DEVICE_TYPE_CPU ? VulkanDeviceOptions::Wait::Block
                                                            : VulkanDeviceOptions::Wait::Spin;
  memory_ = std::make_unique<VulkanMemory>(physical_, device_, options.memoryBlockBytes,
                                           caps_.minStorageBufferOffsetAlignment);
  SINTER_ASSIGN_OR_RETURN(staging_, StagingRing::create(physical_, device_, options.stagingBytes));
  std::string cacheDir = options.pipelineCacheDir;
  if (cacheDir.empty()) {
    if (const char *env = std::getenv("SINTER_CACHE_DIR"))
      cacheDir = env;
  }
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical_, &props);
  pipelines_ =
      std::make_unique<PipelineCache>(device_, props, cacheDir, options.pipelineCacheCapacity);
  pipelines_->setSubgroupFeatures({caps_.computeFullSubgroups, caps_.subgroupSizeControl,
                                   caps_.minSubgroupSize, caps_.maxSubgroupSize});
  if (statistics && !caps_.pipelineExecutableInfo)
    std::fprintf(stderr,
                 "sinter: vulkan: pipeline statistics asked for, but %s has no "
                 "VK_KHR_pipeline_executable_properties\n",
                 caps_.deviceName.c_str());
  else if (statistics)
    pipelines_->captureStatistics();
  descriptors_ = std::make_unique<DescriptorCache>(device_);
  descriptors_->setBeforeReset([this] { (void)drain(); });
  // A pipeline dies when its last user lets go: a plan (which waited for its submissions) or a
  // cache. Waiting here too costs nothing when nothing is in flight, and keeps the rule local.
  pipelines_->setBeforeDestroy([this](const Pipeline &p) {
    (void)drain();
    if (descriptors_)
      descriptors_->forgetPipeline(p.id);
  });
  return absl::OkStatus();
}

VulkanDevice::~VulkanDevice() {
  if (device_ != VK_NULL_HANDLE)
    vkDeviceWaitIdle(device_);
  pipelines_.reset(); // its hook forgets descriptor sets
  descriptors_.reset();
  staging_.reset();
  memory_.reset();
  destroyMappedBuffer(device_, paramArenaMemory_);
  if (fence_ != VK_NULL_HANDLE)
    vkDestroyFence(device_, fence_, nullptr);
  if (commandPool_ != VK_NULL_HANDLE)
    vkDestroyCommandPool(device_, commandPool_, nullptr);
  if (device_ != VK_NULL_HANDLE)
    vkDestroyDevice(device_, nullptr);
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy)
      destroy(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE)
    vkDestroyInstance(instance_, nullptr);
}

absl::StatusOr<VulkanDevice::MappedRange> VulkanDevice::allocateMappedParams(uint64_t bytes) {
  absl::MutexLock lock(&paramArenaMutex_);
  if (paramArenaState_ == 0) {
    paramArenaState_ = 2;
    if (!directParams_ || directParamsBytes_ == 0)
      return absl::NotFoundError("vulkan: direct parameter memory is off");
    const VkMemoryPropertyFlags need = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    absl::StatusOr<MappedBuffer> mapped =
        createMappedBuffer(physical_, device_, directParamsBytes_,
                           VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
                           need, need, "the direct parameter memory");
    if (mapped.status().code() == absl::StatusCode::kNotFound)
      return absl::NotFoundError("vulkan: no device-local host-visible coherent memory type");
    SINTER_RETURN_IF_ERROR(mapped.status());
    paramArenaMemory_ = *mapped;
    paramArena_ = std::make_unique<RangeAllocator>(directParamsBytes_);
    paramArenaState_ = 1;
  }
  if (paramArenaState_ != 1)
    return absl::NotFoundError("vulkan: no direct parameter memory");
  std::optional<uint64_t> at =
      paramArena_->allocate(bytes, std::max<uint64_t>(caps_.minStorageBufferOffsetAlignment, 16));
  if (!at)
    return absl::ResourceExhaustedError(
        absl::StrCat("vulkan: the direct parameter memory has no ", bytes, " bytes left"));
  return MappedRange{BufferRef{paramArenaMemory_.buffer, *at, bytes, 0},
                     paramArenaMemory_.host + *at};
}

void VulkanDevice::freeMappedParams(const BufferRef &ref) {
  (void)drain(); // the words may be read by a submission still running
  absl::MutexLock lock(&paramArenaMutex_);
  if (paramArena_ && ref.buffer == paramArenaMemory_.buffer)
    paramArena_->free(ref.offset);
}

VKAPI_ATTR VkBool32 VKAPI_CALL VulkanDevice::onMessage(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT kinds,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *self) {
  static_cast<VulkanDevice *>(self)->recordMessage(
      severity, data->pMessageIdName ? data->pMessageIdName : "", data->pMessage);
  return VK_FALSE;
}

void VulkanDevice::recordMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity, const char *id,
                                 const char *text) {
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
    return;
  absl::MutexLock lock(&logMutex_);
  ++log_.count;
  if (log_.messages.size() < 64)
    log_.messages.push_back(absl::StrCat(
        severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning", ": ", id,
        ": ", text ? text : ""));
}

ValidationLog VulkanDevice::validationLog() const {
  absl::MutexLock lock(&logMutex_);
  return log_;
}

absl::Status VulkanDevice::createInstance(bool validation, bool syncValidation) {
  keepDriversLoaded();
  uint32_t loaderVersion = VK_API_VERSION_1_1;
  if (vkEnumerateInstanceVersion(&loaderVersion) != VK_SUCCESS)
    loaderVersion = VK_API_VERSION_1_1;
  std::vector<const char *> layers, extensions;
  auto messengerInfo = vkStruct<VkDebugUtilsMessengerCreateInfoEXT>(
      VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
  messengerInfo.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                  VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messengerInfo.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messengerInfo.pfnUserCallback = &VulkanDevice::onMessage;
  messengerInfo.pUserData = this;
  if (validation) {
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> available(n);
    vkEnumerateInstanceLayerProperties(&n, available.data());
    bool found = std::any_of(available.begin(), available.end(), [](const VkLayerProperties &l) {
      return std::strcmp(l.layerName, kValidationLayer) == 0;
    });
    if (!found)
      return absl::FailedPreconditionError(absl::StrCat("vulkan: validation requested but ",
                                                        kValidationLayer, " is not installed (", n,
                                                        " layers present)"));
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  // The layer's synchronization validation: a feature the layer reads from the instance's chain
  // (VK_EXT_validation_features, which the layer provides).
  const VkValidationFeatureEnableEXT syncFeature =
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  auto features = vkStruct<VkValidationFeaturesEXT>(VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT);
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &syncFeature;
  if (syncValidation) {
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    features.pNext = &messengerInfo; // the messenger's own info takes no chain
  }
  auto app = vkStruct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "sinter";
  app.pEngineName = "sinter";
  app.apiVersion = std::min<uint32_t>(loaderVersion, VK_API_VERSION_1_3);
  auto info = vkStruct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  // Chained so messages from vkCreateInstance itself are counted too.
  info.pNext = syncValidation ? static_cast<const void *>(&features)
               : validation   ? static_cast<const void *>(&messengerInfo)
                              : nullptr;
  VkResult r = vkCreateInstance(&info, nullptr, &instance_);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    return absl::UnavailableError("vulkan: no Vulkan driver (vkCreateInstance: "
                                  "VK_ERROR_INCOMPATIBLE_DRIVER)");
  SINTER_RETURN_IF_ERROR(vkStatus(r, "vulkan: vkCreateInstance"));
  if (!validation)
    return absl::OkStatus();
  auto createMessenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
  if (!createMessenger)
    return absl::FailedPreconditionError("vulkan: VK_EXT_debug_utils has no messenger entry point");
  return vkStatus(createMessenger(instance_, &messengerInfo, nullptr, &messenger_),
                  "vulkan: vkCreateDebugUtilsMessengerEXT");
}

absl::Status VulkanDevice::pickPhysicalDevice(const std::string &selector) {
  SINTER_ASSIGN_OR_RETURN(std::vector<PhysicalDeviceInfo> devices,
                          describePhysicalDevices(instance_));
  for (const PhysicalDeviceInfo &d : devices)
    deviceNames_.push_back(d.name);
  SINTER_ASSIGN_OR_RETURN(size_t chosen,
                          selectPhysicalDevice(devices, selector, selectorSource_.c_str()));
  physical_ = devices[chosen].handle;
  return absl::OkStatus();
}

} // namespace sinter::runtime::vulkan
