// DeviceCaps.cpp - query the chosen device's capabilities and create the logical device.
//
// Every optional feature DeviceCaps lists is enabled when the device supports it, and only
// those (robust buffer access and the like cost speed and stay off). The 1.2/1.3 feature structs
// are chained only when the device reports that version.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/vulkan/VkStatus.h"
#include "runtime/vulkan/VkStruct.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "sinter/Status.h"

namespace sinter::runtime::vulkan {

absl::Status VulkanDevice::createLogicalDevice(bool pipelineStatistics) {
  auto props =
      vkStruct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  auto subgroup = vkStruct<VkPhysicalDeviceSubgroupProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  auto sizeControl = vkStruct<VkPhysicalDeviceSubgroupSizeControlProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES);
  auto dot = vkStruct<VkPhysicalDeviceShaderIntegerDotProductProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES);
  vkGetPhysicalDeviceProperties(physical_, &props.properties);
  uint32_t api = props.properties.apiVersion;
  props.pNext = &subgroup;
  if (api >= VK_API_VERSION_1_3) {
    subgroup.pNext = &sizeControl;
    sizeControl.pNext = &dot;
  }
  vkGetPhysicalDeviceProperties2(physical_, &props);
  uint32_t extensionCount = 0;
  vkEnumerateDeviceExtensionProperties(physical_, nullptr, &extensionCount, nullptr);
  std::vector<VkExtensionProperties> available(extensionCount);
  vkEnumerateDeviceExtensionProperties(physical_, nullptr, &extensionCount, available.data());
  auto supports = [&](const char *name) {
    for (const VkExtensionProperties &x : available)
      if (std::strcmp(x.extensionName, name) == 0)
        return true;
    return false;
  };
  // Float controls (Vulkan 1.2 core): whether a kernel may ask for f32 subnormals to be kept.
  bool denormPreserve32 = false;
  if (api >= VK_API_VERSION_1_2) {
    auto p12 = vkStruct<VkPhysicalDeviceVulkan12Properties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES);
    auto query =
        vkStruct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    query.pNext = &p12;
    vkGetPhysicalDeviceProperties2(physical_, &query);
    denormPreserve32 = p12.shaderDenormPreserveFloat32;
  }
  // NVIDIA's count of streaming multiprocessors (what schedules compare a grid's size with).
  uint32_t smCount = 0;
  if (supports(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
    auto sm = vkStruct<VkPhysicalDeviceShaderSMBuiltinsPropertiesNV>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV);
    auto query =
        vkStruct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    query.pNext = &sm;
    vkGetPhysicalDeviceProperties2(physical_, &query);
    smCount = sm.shaderSMCount;
  }

  auto features = vkStruct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  auto f11 = vkStruct<VkPhysicalDeviceVulkan11Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
  auto f12 = vkStruct<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  auto f13 = vkStruct<VkPhysicalDeviceVulkan13Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);
  if (api >= VK_API_VERSION_1_2) {
    features.pNext = &f11;
    f11.pNext = &f12;
    if (api >= VK_API_VERSION_1_3)
      f12.pNext = &f13;
  }
  vkGetPhysicalDeviceFeatures2(physical_, &features);

  const VkPhysicalDeviceLimits &lim = props.properties.limits;
  DeviceCaps &c = caps_;
  c.deviceName = props.properties.deviceName;
  c.deviceKind = props.properties.deviceType;
  c.discrete = c.deviceKind == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  c.vendorId = props.properties.vendorID;
  c.deviceId = props.properties.deviceID;
  c.apiVersion = api;
  c.subgroupSize = subgroup.subgroupSize;
  c.smCount = smCount;
  c.subgroupOps =
      (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ? subgroup.supportedOperations : 0;
  c.minSubgroupSize = api >= VK_API_VERSION_1_3 ? sizeControl.minSubgroupSize : c.subgroupSize;
  c.maxSubgroupSize = api >= VK_API_VERSION_1_3 ? sizeControl.maxSubgroupSize : c.subgroupSize;
  c.storageBuffer16BitAccess = f11.storageBuffer16BitAccess;
  c.storagePushConstant16 = f11.storagePushConstant16;
  c.storageBuffer8BitAccess = f12.storageBuffer8BitAccess;
  c.storagePushConstant8 = f12.storagePushConstant8;
  c.shaderFloat16 = f12.shaderFloat16;
  c.shaderInt8 = f12.shaderInt8;
  c.shaderInt16 = features.features.shaderInt16;
  c.shaderInt64 = features.features.shaderInt64;
  c.scalarBlockLayout = f12.scalarBlockLayout;
  c.vulkanMemoryModel = f12.vulkanMemoryModel;
  c.shaderSubgroupExtendedTypes = f12.shaderSubgroupExtendedTypes;
  c.subgroupSizeControl = f13.subgroupSizeControl;
  c.computeFullSubgroups = f13.computeFullSubgroups;
  c.shaderDenormPreserveFloat32 = denormPreserve32;
  c.integerDotProduct = f13.shaderIntegerDotProduct;
  c.integerDotProduct4x8PackedSignedAccelerated =
      c.integerDotProduct && dot.integerDotProduct4x8BitPackedSignedAccelerated;
  for (int d = 0; d < 3; ++d) {
    c.maxComputeWorkGroupSize[d] = lim.maxComputeWorkGroupSize[d];
    c.maxComputeWorkGroupCount[d] = lim.maxComputeWorkGroupCount[d];
  }
  c.maxComputeWorkGroupInvocations = lim.maxComputeWorkGroupInvocations;
  c.maxComputeSharedMemorySize = lim.maxComputeSharedMemorySize;
  c.maxPushConstantsSize = lim.maxPushConstantsSize;
  c.maxStorageBufferRange = lim.maxStorageBufferRange;
  c.minStorageBufferOffsetAlignment = lim.minStorageBufferOffsetAlignment;
  c.maxBoundDescriptorSets = lim.maxBoundDescriptorSets;
  c.maxPerStageDescriptorStorageBuffers = lim.maxPerStageDescriptorStorageBuffers;
  uint32_t family = 0, timestampBits = 0;
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, families.data());
  for (uint32_t i = 0; i < n; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      family = i;
      timestampBits = families[i].timestampValidBits;
      break;
    }
  }
  queueFamily_ = family;
  c.timestampValidBits = timestampBits;
  c.timestampPeriod = timestampBits ? lim.timestampPeriod : 0;

  // Enable exactly the capabilities above.
  auto on = vkStruct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  auto on11 = vkStruct<VkPhysicalDeviceVulkan11Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
  auto on12 = vkStruct<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  auto on13 = vkStruct<VkPhysicalDeviceVulkan13Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);
  on.features.shaderInt16 = c.shaderInt16;
  on.features.shaderInt64 = c.shaderInt64;
  if (api >= VK_API_VERSION_1_2) {
    on.pNext = &on11;
    on11.pNext = &on12;
    on11.storageBuffer16BitAccess = c.storageBuffer16BitAccess;
    on11.uniformAndStorageBuffer16BitAccess = f11.uniformAndStorageBuffer16BitAccess;
    on11.storagePushConstant16 = c.storagePushConstant16;
    on12.storageBuffer8BitAccess = c.storageBuffer8BitAccess;
    on12.uniformAndStorageBuffer8BitAccess = f12.uniformAndStorageBuffer8BitAccess;
    on12.storagePushConstant8 = c.storagePushConstant8;
    on12.shaderFloat16 = c.shaderFloat16;
    on12.shaderInt8 = c.shaderInt8;
    on12.scalarBlockLayout = c.scalarBlockLayout;
    on12.vulkanMemoryModel = c.vulkanMemoryModel;
    on12.vulkanMemoryModelDeviceScope = f12.vulkanMemoryModelDeviceScope;
    on12.shaderSubgroupExtendedTypes = c.shaderSubgroupExtendedTypes;
    on12.hostQueryReset = f12.hostQueryReset;
    if (api >= VK_API_VERSION_1_3) {
      on12.pNext = &on13;
      on13.subgroupSizeControl = c.subgroupSizeControl;
      on13.computeFullSubgroups = c.computeFullSubgroups;
      on13.shaderIntegerDotProduct = c.integerDotProduct;
      on13.maintenance4 = f13.maintenance4;
    }
  }
  // Pipeline statistics: only when asked for (capturing them may cost compile time).
  std::vector<const char *> extensions;
  auto executable = vkStruct<VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR);
  if (pipelineStatistics) {
    bool present = supports(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    if (present) {
      auto query =
          vkStruct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
      query.pNext = &executable;
      vkGetPhysicalDeviceFeatures2(physical_, &query);
      executable.pNext = nullptr;
    }
    if (present && executable.pipelineExecutableInfo) {
      c.pipelineExecutableInfo = true;
      extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
      executable.pNext = on.pNext;
      on.pNext = &executable;
    }
  }
  float priority = 1.0f;
  auto queueInfo = vkStruct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  queueInfo.queueFamilyIndex = family;
  queueInfo.queueCount = 1;
  queueInfo.pQueuePriorities = &priority;
  auto info = vkStruct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  info.pNext = &on;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queueInfo;
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  SINTER_RETURN_IF_ERROR(vkStatus(vkCreateDevice(physical_, &info, nullptr, &device_),
                                  absl::StrCat("vulkan: vkCreateDevice on ", c.deviceName)));
  vkGetDeviceQueue(device_, family, 0, &queue_);
  auto poolInfo = vkStruct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  poolInfo.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  poolInfo.queueFamilyIndex = family;
  SINTER_RETURN_IF_ERROR(vkStatus(vkCreateCommandPool(device_, &poolInfo, nullptr, &commandPool_),
                                  "vkCreateCommandPool"));
  auto fenceInfo = vkStruct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  return vkStatus(vkCreateFence(device_, &fenceInfo, nullptr, &fence_), "vkCreateFence");
}

} // namespace sinter::runtime::vulkan
