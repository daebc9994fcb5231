// VkRunner.cpp - instance, device and one-dispatch runs for the SPIR-V kernel tests.
//
// Every run creates and destroys its own buffers, layouts, pipeline and descriptor set: slow, but
// each kernel test is then independent and the validation layer sees complete object lifetimes.
#include "tests/unit/spirv/VkRunner.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"

namespace sinter::test {

namespace {

absl::Status check(VkResult r, const char *what) {
  if (r == VK_SUCCESS)
    return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: VkResult ", static_cast<int>(r)));
}

#define VK_TRY(call)                                                                               \
  do {                                                                                             \
    absl::Status s_ = check((call), #call);                                                        \
    if (!s_.ok())                                                                                  \
      return s_;                                                                                   \
  } while (0)

VKAPI_ATTR VkBool32 VKAPI_CALL onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                         VkDebugUtilsMessageTypeFlagsEXT,
                                         const VkDebugUtilsMessengerCallbackDataEXT *data,
                                         void *user) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
    static_cast<VkRunner *>(user)->addMessage(data->pMessage ? data->pMessage : "");
  return VK_FALSE;
}

} // namespace

absl::StatusOr<std::unique_ptr<VkRunner>> VkRunner::create() {
  std::unique_ptr<VkRunner> r(new VkRunner());
  const char *layer = "VK_LAYER_KHRONOS_validation";
  const char *extension = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "sinter-spirv-test";
  app.apiVersion = VK_API_VERSION_1_1;
  VkDebugUtilsMessengerCreateInfoEXT messenger{
      VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = onMessage;
  messenger.pUserData = r.get();
  // SINTER_VK_VALIDATION=0 (a machine without the layer, e.g. bench/vulkan/run-h200.sh): no
  // layer, said once, as the Vulkan runtime tests do.
  const char *env = std::getenv("SINTER_VK_VALIDATION");
  const bool validation = !(env && std::string(env) == "0");
  if (!validation)
    std::fprintf(stderr,
                 "note: SINTER_VK_VALIDATION=0: SPIR-V kernel tests run without validation\n");
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pNext = validation ? &messenger : nullptr;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = validation ? 1 : 0;
  info.ppEnabledLayerNames = &layer;
  info.enabledExtensionCount = validation ? 1 : 0;
  info.ppEnabledExtensionNames = &extension;
  VkResult result = vkCreateInstance(&info, nullptr, &r->instance_);
  if (result != VK_SUCCESS)
    return absl::UnavailableError(absl::StrCat("vkCreateInstance",
                                               validation ? " with the validation layer" : "",
                                               " failed (VkResult ", int(result), ")"));
  auto createMessenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(r->instance_, "vkCreateDebugUtilsMessengerEXT"));
  if (validation && createMessenger)
    VK_TRY(createMessenger(r->instance_, &messenger, nullptr, &r->messenger_));

  uint32_t count = 0;
  vkEnumeratePhysicalDevices(r->instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(r->instance_, &count, devices.data());
  for (VkPhysicalDevice d : devices) {
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(d, &families, nullptr);
    std::vector<VkQueueFamilyProperties> props(families);
    vkGetPhysicalDeviceQueueFamilyProperties(d, &families, props.data());
    for (uint32_t f = 0; f < families && !r->physical_; ++f)
      if (props[f].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        r->physical_ = d;
        r->queueFamily_ = f;
      }
  }
  if (!r->physical_)
    return absl::UnavailableError("no Vulkan device with a compute queue");
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(r->physical_, &props);
  r->subgroupSize_ = subgroup.subgroupSize;
  r->maxInvocations_ = props.properties.limits.maxComputeWorkGroupInvocations;
  r->deviceName_ = props.properties.deviceName;
  VkSubgroupFeatureFlags needed = VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
                                  VK_SUBGROUP_FEATURE_SHUFFLE_BIT | VK_SUBGROUP_FEATURE_BASIC_BIT;
  if ((subgroup.supportedOperations & needed) != needed ||
      !(subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
    return absl::UnavailableError(
        absl::StrCat(r->deviceName_, " lacks subgroup arithmetic/shuffle in compute"));

  r->maxSharedMemory_ = props.properties.limits.maxComputeSharedMemorySize;
  // Integer dot products (quantized_matmul's int8 x) through VK_KHR_shader_integer_dot_product,
  // where the device has it.
  uint32_t extensionCount = 0;
  vkEnumerateDeviceExtensionProperties(r->physical_, nullptr, &extensionCount, nullptr);
  std::vector<VkExtensionProperties> extensions(extensionCount);
  vkEnumerateDeviceExtensionProperties(r->physical_, nullptr, &extensionCount, extensions.data());
  const char *dotExtension = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
  bool hasDot = false;
  for (const VkExtensionProperties &e : extensions)
    hasDot = hasDot || std::string(e.extensionName) == dotExtension;
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  if (hasDot) {
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &dot;
    vkGetPhysicalDeviceFeatures2(r->physical_, &features);
    r->intDot_ = dot.shaderIntegerDotProduct;
  }

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = r->queueFamily_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo deviceInfo{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  deviceInfo.queueCreateInfoCount = 1;
  deviceInfo.pQueueCreateInfos = &queue;
  if (r->intDot_) {
    deviceInfo.pNext = &dot;
    deviceInfo.enabledExtensionCount = 1;
    deviceInfo.ppEnabledExtensionNames = &dotExtension;
  }
  VK_TRY(vkCreateDevice(r->physical_, &deviceInfo, nullptr, &r->device_));
  vkGetDeviceQueue(r->device_, r->queueFamily_, 0, &r->queue_);
  VkCommandPoolCreateInfo poolInfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  poolInfo.queueFamilyIndex = r->queueFamily_;
  VK_TRY(vkCreateCommandPool(r->device_, &poolInfo, nullptr, &r->pool_));
  return r;
}

VkRunner::~VkRunner() {
  if (device_) {
    vkDestroyCommandPool(device_, pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    destroy(instance_, messenger_, nullptr);
  }
  if (instance_)
    vkDestroyInstance(instance_, nullptr);
}

std::vector<std::string> VkRunner::takeMessages() { return std::move(messages_); }

absl::StatusOr<uint32_t> VkRunner::memoryType(uint32_t typeBits) const {
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(physical_, &mem);
  VkMemoryPropertyFlags want =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
    if ((typeBits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) == want)
      return i;
  return absl::UnavailableError("no host-visible coherent memory type");
}

absl::Status VkRunner::run(const VkDispatch &d, std::vector<std::vector<uint8_t>> &buffers) {
  std::vector<std::function<void()>> cleanup;
  struct Cleanup {
    std::vector<std::function<void()>> &list;
    ~Cleanup() {
      for (auto it = list.rbegin(); it != list.rend(); ++it)
        (*it)();
    }
  } guard{cleanup};
  VkDevice dev = device_;
  uint32_t n = static_cast<uint32_t>(buffers.size());
  std::vector<VkBuffer> vkBuffers(n);
  std::vector<void *> mapped(n);
  for (uint32_t i = 0; i < n; ++i) {
    // Sizes rounded up to 16 bytes, as the runtime allocates them (codegen/spirv/README.md).
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = (buffers[i].size() + 15) / 16 * 16 + 16;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    VK_TRY(vkCreateBuffer(dev, &info, nullptr, &vkBuffers[i]));
    VkBuffer buffer = vkBuffers[i];
    cleanup.push_back([=] { vkDestroyBuffer(dev, buffer, nullptr); });
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, buffer, &req);
    absl::StatusOr<uint32_t> type = memoryType(req.memoryTypeBits);
    if (!type.ok())
      return type.status();
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = *type;
    VkDeviceMemory memory;
    VK_TRY(vkAllocateMemory(dev, &alloc, nullptr, &memory));
    cleanup.push_back([=] { vkFreeMemory(dev, memory, nullptr); });
    VK_TRY(vkBindBufferMemory(dev, buffer, memory, 0));
    VK_TRY(vkMapMemory(dev, memory, 0, VK_WHOLE_SIZE, 0, &mapped[i]));
    std::memset(mapped[i], 0, info.size);
    std::memcpy(mapped[i], buffers[i].data(), buffers[i].size());
  }

  std::vector<uint32_t> bufferOf = d.bindingBuffers;
  for (uint32_t i = 0; bufferOf.empty() && i < n; ++i)
    bufferOf.push_back(i);
  uint32_t numBindings = static_cast<uint32_t>(bufferOf.size());
  std::vector<VkDescriptorSetLayoutBinding> bindings(numBindings);
  for (uint32_t i = 0; i < numBindings; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo setInfo{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  setInfo.bindingCount = numBindings;
  setInfo.pBindings = bindings.data();
  VkDescriptorSetLayout setLayout;
  VK_TRY(vkCreateDescriptorSetLayout(dev, &setInfo, nullptr, &setLayout));
  cleanup.push_back([=] { vkDestroyDescriptorSetLayout(dev, setLayout, nullptr); });
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0,
                            static_cast<uint32_t>(d.pushConstants.size())};
  VkPipelineLayoutCreateInfo layoutInfo{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layoutInfo.setLayoutCount = 1;
  layoutInfo.pSetLayouts = &setLayout;
  layoutInfo.pushConstantRangeCount = range.size ? 1 : 0;
  layoutInfo.pPushConstantRanges = &range;
  VkPipelineLayout layout;
  VK_TRY(vkCreatePipelineLayout(dev, &layoutInfo, nullptr, &layout));
  cleanup.push_back([=] { vkDestroyPipelineLayout(dev, layout, nullptr); });
  VkShaderModuleCreateInfo moduleInfo{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  moduleInfo.codeSize = d.words->size() * 4;
  moduleInfo.pCode = d.words->data();
  VkShaderModule module;
  VK_TRY(vkCreateShaderModule(dev, &moduleInfo, nullptr, &module));
  cleanup.push_back([=] { vkDestroyShaderModule(dev, module, nullptr); });
  VkComputePipelineCreateInfo pipeInfo{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pipeInfo.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  pipeInfo.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeInfo.stage.module = module;
  pipeInfo.stage.pName = "main";
  pipeInfo.layout = layout;
  VkPipeline pipeline;
  VK_TRY(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &pipeInfo, nullptr, &pipeline));
  cleanup.push_back([=] { vkDestroyPipeline(dev, pipeline, nullptr); });

  VkDescriptorPoolSize poolSize{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, numBindings};
  VkDescriptorPoolCreateInfo poolInfo{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  poolInfo.maxSets = 1;
  poolInfo.poolSizeCount = 1;
  poolInfo.pPoolSizes = &poolSize;
  VkDescriptorPool descriptorPool;
  VK_TRY(vkCreateDescriptorPool(dev, &poolInfo, nullptr, &descriptorPool));
  cleanup.push_back([=] { vkDestroyDescriptorPool(dev, descriptorPool, nullptr); });
  VkDescriptorSetAllocateInfo setAlloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  setAlloc.descriptorPool = descriptorPool;
  setAlloc.descriptorSetCount = 1;
  setAlloc.pSetLayouts = &setLayout;
  VkDescriptorSet set;
  VK_TRY(vkAllocateDescriptorSets(dev, &setAlloc, &set));
  std::vector<VkDescriptorBufferInfo> infos(numBindings);
  std::vector<VkWriteDescriptorSet> writes(numBindings);
  for (uint32_t i = 0; i < numBindings; ++i) {
    infos[i] = {vkBuffers[bufferOf[i]], 0, VK_WHOLE_SIZE};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev, numBindings, writes.data(), 0, nullptr);

  VkCommandBufferAllocateInfo cmdAlloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cmdAlloc.commandPool = pool_;
  cmdAlloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cmdAlloc.commandBufferCount = 1;
  VkCommandBuffer cmd;
  VK_TRY(vkAllocateCommandBuffers(dev, &cmdAlloc, &cmd));
  VkCommandPool pool = pool_;
  cleanup.push_back([=] { vkFreeCommandBuffers(dev, pool, 1, &cmd); });
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_TRY(vkBeginCommandBuffer(cmd, &begin));
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, nullptr);
  if (range.size)
    vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, range.size,
                       d.pushConstants.data());
  if (d.grid[0] && d.grid[1] && d.grid[2])
    vkCmdDispatch(cmd, d.grid[0], d.grid[1], d.grid[2]);
  VkMemoryBarrier toHost{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  toHost.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  toHost.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &toHost, 0, nullptr, 0, nullptr);
  VK_TRY(vkEndCommandBuffer(cmd));
  VkFenceCreateInfo fenceInfo{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  VK_TRY(vkCreateFence(dev, &fenceInfo, nullptr, &fence));
  cleanup.push_back([=] { vkDestroyFence(dev, fence, nullptr); });
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  VK_TRY(vkQueueSubmit(queue_, 1, &submit, fence));
  VK_TRY(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
  for (uint32_t i = 0; i < n; ++i)
    std::memcpy(buffers[i].data(), mapped[i], buffers[i].size());
  return absl::OkStatus();
}

} // namespace sinter::test
