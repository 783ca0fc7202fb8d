#include "device.h"

#include <stdio.h>
#include <string.h>

#include "kiln/runtime/check.h"

namespace kiln::backends::vulkan::internal {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// What kiln's shaders and recording need of a device beyond Vulkan 1.1.
constexpr uint32_t kNeededSharedMemory = 8 * 1024;
constexpr uint32_t kNeededInvocations = 64;

// Validation messages (warnings and errors) are counted: init() and
// execute() turn them into errors. Others are logged as they come.
VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT types,
                                                const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  BackendState& s = *static_cast<BackendState*>(user);
  const char* text = data != nullptr && data->pMessage != nullptr ? data->pMessage : "";
  const bool counted = (types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT) != 0 &&
                       severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
  if (counted) {
    s.validation_messages.fetch_add(1, std::memory_order_relaxed);
    KILN_LOG(ERROR, "vulkan validation: %s", text);
  } else {
    KILN_LOG(WARNING, "vulkan: %s", text);
  }
  return VK_FALSE;
}

VKAPI_ATTR void* VKAPI_CALL pool_allocate(void* user, size_t size, size_t alignment, VkSystemAllocationScope) {
  BackendState& s = *static_cast<BackendState*>(user);
  void* p = s.pool.allocate(size, alignment);
  if (p == nullptr) {
    KILN_LOG(ERROR, "vulkan: host memory pool (%llu bytes, %llu in use) cannot give the driver %llu bytes",
             static_cast<unsigned long long>(s.pool.capacity()), static_cast<unsigned long long>(s.pool.bytes_in_use()),
             static_cast<unsigned long long>(size));
  }
  return p;
}

VKAPI_ATTR void* VKAPI_CALL pool_reallocate(void* user, void* original, size_t size, size_t alignment,
                                            VkSystemAllocationScope scope) {
  BackendState& s = *static_cast<BackendState*>(user);
  if (size == 0) {
    s.pool.free(original);
    return nullptr;
  }
  if (original == nullptr) return pool_allocate(user, size, alignment, scope);
  return s.pool.reallocate(original, size, alignment);
}

VKAPI_ATTR void VKAPI_CALL pool_free(void* user, void* memory) { static_cast<BackendState*>(user)->pool.free(memory); }

bool has_layer(const char* name) {
  VkLayerProperties layers[64];
  uint32_t count = 64;
  const VkResult result = vkEnumerateInstanceLayerProperties(&count, layers);
  if (result != VK_SUCCESS && result != VK_INCOMPLETE) return false;
  for (uint32_t i = 0; i < count; ++i) {
    if (strcmp(layers[i].layerName, name) == 0) return true;
  }
  return false;
}

// What vkCreateInstance's failure means for the user: the driver that is
// missing, or the VkResult.
const char* instance_failure(VkResult result) {
  return result == VK_ERROR_INCOMPATIBLE_DRIVER
             ? "no Vulkan driver found (for a CPU device install Mesa's lavapipe, Debian: mesa-vulkan-drivers)"
             : result_name(result);
}

// With validation: the layer, and the messenger chained into instance
// creation so it also reports on creation and destruction.
struct InstanceRequest {
  VkApplicationInfo app = {};
  VkDebugUtilsMessengerCreateInfoEXT messenger = {};
  VkValidationFeatureEnableEXT enables[1] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features = {};
  const char* layers[1] = {kValidationLayer};
  const char* extensions[2] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
  VkInstanceCreateInfo info = {};

  InstanceRequest(BackendState& s, bool validation) {
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "kiln";
    app.pEngineName = "kiln";
    app.apiVersion = VK_API_VERSION_1_1;
    messenger.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    messenger.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger.pfnUserCallback = on_debug_message;
    messenger.pUserData = &s;
    // Synchronization validation too: it checks that the barriers recorded
    // between dispatches cover every hazard.
    features.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
    features.pNext = &messenger;
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = enables;
    info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    info.pApplicationInfo = &app;
    if (validation) {
      info.pNext = &features;
      info.enabledLayerCount = 1;
      info.ppEnabledLayerNames = layers;
      info.enabledExtensionCount = 2;
      info.ppEnabledExtensionNames = extensions;
    }
  }
  InstanceRequest(const InstanceRequest&) = delete;
  InstanceRequest& operator=(const InstanceRequest&) = delete;
};

// The instance's messenger and its physical devices; `s.instance` exists.
Error open_instance(BackendState& s, const InstanceRequest& request) {
  if (s.options.validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(s.instance, "vkCreateDebugUtilsMessengerEXT"));
    KILN_CHECK_OR_RETURN(create != nullptr, Error::kNotSupported,
                         "vulkan: cannot install the validation message callback (%s)",
                         VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    KILN_VK_CHECK(create(s.instance, &request.messenger, s.allocator(), &s.messenger), Error::kNotSupported,
                  "vulkan: cannot install the validation message callback (%s)", VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  uint32_t count = kMaxDevices;
  const VkResult listed = vkEnumeratePhysicalDevices(s.instance, &count, s.physical);
  KILN_CHECK_OR_RETURN(listed == VK_SUCCESS || listed == VK_INCOMPLETE, Error::kDeviceError,
                       "vulkan: vkEnumeratePhysicalDevices failed: %s", result_name(listed));
  s.physical_count = count;
  return Error::kOk;
}

}  // namespace

Error ensure_instance(BackendState& s) {
  if (s.instance != VK_NULL_HANDLE) return Error::kOk;
  KILN_CHECK_OR_RETURN(!s.instance_failed, Error::kDeviceError, "vulkan: no instance (opening it failed before)");
  s.instance_failed = true;  // until it succeeds
  if (!s.pool.empty()) {
    s.callbacks.pUserData = &s;
    s.callbacks.pfnAllocation = pool_allocate;
    s.callbacks.pfnReallocation = pool_reallocate;
    s.callbacks.pfnFree = pool_free;
  }
  uint32_t loader_version = VK_API_VERSION_1_0;
  KILN_CHECK_OR_RETURN(
      vkEnumerateInstanceVersion(&loader_version) == VK_SUCCESS && loader_version >= VK_API_VERSION_1_1,
      Error::kNotSupported, "vulkan: the Vulkan loader supports only Vulkan 1.0; kiln needs 1.1");
  KILN_CHECK_OR_RETURN(!s.options.validation || has_layer(kValidationLayer), Error::kNotSupported,
                       "vulkan: validation was requested but %s is not installed (Debian: vulkan-validationlayers)",
                       kValidationLayer);
  const InstanceRequest request(s, s.options.validation);
  VkInstance instance = VK_NULL_HANDLE;
  KILN_CHECK_STATUS(vkCreateInstance(&request.info, s.allocator(), &instance), VK_SUCCESS, instance_failure,
                    Error::kDeviceError, "vulkan: creating the instance");
  s.instance = instance;
  const Error opened = open_instance(s, request);
  if (opened != Error::kOk) {
    close_instance(s);
    return opened;
  }
  s.instance_failed = false;
  return Error::kOk;
}

namespace {

// "vulkan:0 'llvmpipe ...', vulkan:1 '...'" into `names`, for the message
// that a device does not exist.
void list_devices(const BackendState& s, char* names, size_t size) {
  size_t used = 0;
  names[0] = '\0';
  for (uint32_t i = 0; i < s.physical_count && used + 8 < size; ++i) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(s.physical[i], &p);
    const size_t len = strlen(p.deviceName);
    const size_t room = size - used - 8;
    used += static_cast<size_t>(snprintf(names + used, size - used, "%svulkan:%u '%.*s'", i ? ", " : ": ", i,
                                         static_cast<int>(len < room ? len : room), p.deviceName));
  }
}

// The device's version and the limits kiln's shaders and programs need,
// each refusal naming what is missing; fills d.limits.
Error check_device(const BackendState& s, DeviceState& d, const VkPhysicalDeviceProperties& p,
                   const VkPhysicalDeviceMaintenance3Properties& maintenance3) {
  KILN_CHECK_OR_RETURN(p.apiVersion >= VK_API_VERSION_1_1, Error::kNotSupported,
                       "vulkan: vulkan:%u '%s' supports Vulkan %u.%u; kiln needs 1.1", d.index, d.name,
                       VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion));
  const VkPhysicalDeviceLimits& l = p.limits;
  struct Need {
    const char* what;
    uint64_t has;
    uint64_t needs;
  } const needs[] = {
      {"maxPerStageDescriptorStorageBuffers", l.maxPerStageDescriptorStorageBuffers, kMaxBindings},
      {"maxComputeWorkGroupInvocations", l.maxComputeWorkGroupInvocations, kNeededInvocations},
      {"maxComputeWorkGroupSize[0]", l.maxComputeWorkGroupSize[0], kNeededInvocations},
      {"maxComputeWorkGroupSize[1]", l.maxComputeWorkGroupSize[1], 8},
      {"maxComputeSharedMemorySize", l.maxComputeSharedMemorySize, kNeededSharedMemory},
      {"maxPushConstantsSize", l.maxPushConstantsSize, kPushConstantBytes},
  };
  for (const Need& n : needs) {
    KILN_CHECK_OR_RETURN(n.has >= n.needs, Error::kNotSupported,
                         "vulkan: vulkan:%u '%s' has %s = %llu; kiln's shaders need %llu", d.index, d.name, n.what,
                         static_cast<unsigned long long>(n.has), static_cast<unsigned long long>(n.needs));
  }
  KILN_CHECK_OR_RETURN(l.minStorageBufferOffsetAlignment <= kArenaAlignment, Error::kNotSupported,
                       "vulkan: vulkan:%u '%s' aligns storage buffers to %llu bytes; programs align to %u", d.index,
                       d.name, static_cast<unsigned long long>(l.minStorageBufferOffsetAlignment), kArenaAlignment);
  d.limits.api_version = p.apiVersion;
  d.limits.min_storage_offset_alignment = l.minStorageBufferOffsetAlignment;
  d.limits.max_storage_range = l.maxStorageBufferRange;
  d.limits.max_allocation = maintenance3.maxMemoryAllocationSize;
  for (int i = 0; i < 3; ++i) d.limits.max_group_count[i] = l.maxComputeWorkGroupCount[i];
  const VulkanOptions::Kernels kernels = s.options.kernels;
  d.limits.register_blocks = kernels == VulkanOptions::Kernels::kRegisterBlocks ||
                             (kernels == VulkanOptions::Kernels::kAuto && d.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
  return Error::kOk;
}

// The logical device on d's first queue family with compute, its queue,
// command pool and pipeline cache.
Error create_device(BackendState& s, DeviceState& d) {
  VkQueueFamilyProperties families[16];
  uint32_t family_count = 16;
  vkGetPhysicalDeviceQueueFamilyProperties(d.physical, &family_count, families);
  uint32_t family = 0;
  while (family < family_count && (families[family].queueFlags & VK_QUEUE_COMPUTE_BIT) == 0) ++family;
  KILN_CHECK_OR_RETURN(family < family_count, Error::kNotSupported,
                       "vulkan: vulkan:%u '%s' has no queue family with compute", d.index, d.name);
  d.queue_family = family;
  const float priority = 1.f;
  VkDeviceQueueCreateInfo queue = {};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = d.queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo info = {};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  KILN_VK_CHECK(vkCreateDevice(d.physical, &info, s.allocator(), &d.device), Error::kDeviceError,
                "vulkan: vulkan:%u '%s': creating the device", d.index, d.name);
  d.open = true;
  vkGetDeviceQueue(d.device, d.queue_family, 0, &d.queue);
  VkCommandPoolCreateInfo pool = {};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = d.queue_family;
  KILN_VK_CHECK(vkCreateCommandPool(d.device, &pool, s.allocator(), &d.command_pool), Error::kDeviceError,
                "vulkan: vulkan:%u: creating the command pool", d.index);
  VkPipelineCacheCreateInfo cache = {};
  cache.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  cache.initialDataSize = s.options.pipeline_cache.size();
  cache.pInitialData = s.options.pipeline_cache.data();
  KILN_VK_CHECK(vkCreatePipelineCache(d.device, &cache, s.allocator(), &d.cache), Error::kDeviceError,
                "vulkan: vulkan:%u: creating the pipeline cache", d.index);
  return Error::kOk;
}

}  // namespace

Error ensure_device(BackendState& s, uint32_t index) {
  KILN_RETURN_IF_ERROR(ensure_instance(s));
  if (index < kMaxDevices && s.devices[index].open) return Error::kOk;
  if (index >= s.physical_count) {
    char names[256];
    list_devices(s, names, sizeof(names));
    KILN_RETURN_ERROR(Error::kNotFound, "vulkan: device vulkan:%u was requested but %u Vulkan device%s found%s", index,
                      s.physical_count, s.physical_count == 1 ? " is" : "s are", names);
  }
  DeviceState& d = s.devices[index];
  d = DeviceState();
  d.index = index;
  d.physical = s.physical[index];
  VkPhysicalDeviceMaintenance3Properties maintenance3 = {};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceProperties2 properties2 = {};
  properties2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties2.pNext = &maintenance3;
  vkGetPhysicalDeviceProperties2(d.physical, &properties2);
  const VkPhysicalDeviceProperties& p = properties2.properties;
  snprintf(d.name, sizeof(d.name), "%.*s", static_cast<int>(sizeof(d.name) - 1), p.deviceName);
  d.type = p.deviceType;
  KILN_RETURN_IF_ERROR(check_device(s, d, p, maintenance3));
  vkGetPhysicalDeviceMemoryProperties(d.physical, &d.memory);
  const Error created = create_device(s, d);
  if (created != Error::kOk) close_device(s, d);
  return created;
}

Result<VkPipeline> ensure_pipeline(BackendState& s, DeviceState& d, ShaderId shader, uint32_t variant) {
  const ShaderInfo& info = shader_info(shader);
  KILN_CHECK_OR_RETURN(variant < info.variants, Error::kInternal, "vulkan: shader '%s' has no variant %u", info.name,
                       variant);
  VkPipeline& pipeline = d.pipelines[info.first_pipeline + variant];
  if (pipeline != VK_NULL_HANDLE) return pipeline;
  if (d.modules[shader] == VK_NULL_HANDLE) {
    VkShaderModuleCreateInfo module = {};
    module.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    module.codeSize = info.code_bytes;
    module.pCode = info.code;
    KILN_VK_CHECK(vkCreateShaderModule(d.device, &module, s.allocator(), &d.modules[shader]), Error::kDeviceError,
                  "vulkan: vulkan:%u: creating the module of shader '%s'", d.index, info.name);
  }
  const uint32_t n = info.bindings;
  if (d.set_layouts[n] == VK_NULL_HANDLE) {
    VkDescriptorSetLayoutBinding bindings[kMaxBindings] = {};
    for (uint32_t i = 0; i < n; ++i) {
      bindings[i].binding = i;
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo set = {};
    set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    set.bindingCount = n;
    set.pBindings = bindings;
    KILN_VK_CHECK(vkCreateDescriptorSetLayout(d.device, &set, s.allocator(), &d.set_layouts[n]), Error::kDeviceError,
                  "vulkan: vulkan:%u: creating the set layout of %u bindings", d.index, n);
  }
  if (d.pipeline_layouts[n] == VK_NULL_HANDLE) {
    VkPushConstantRange push = {VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
    VkPipelineLayoutCreateInfo layout = {};
    layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    layout.setLayoutCount = 1;
    layout.pSetLayouts = &d.set_layouts[n];
    layout.pushConstantRangeCount = 1;
    layout.pPushConstantRanges = &push;
    KILN_VK_CHECK(vkCreatePipelineLayout(d.device, &layout, s.allocator(), &d.pipeline_layouts[n]), Error::kDeviceError,
                  "vulkan: vulkan:%u: creating the pipeline layout of %u bindings", d.index, n);
  }
  VkSpecializationMapEntry entry = {0, 0, sizeof(uint32_t)};
  VkSpecializationInfo specialization = {1, &entry, sizeof(uint32_t), &variant};
  VkComputePipelineCreateInfo create = {};
  create.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  create.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  create.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  create.stage.module = d.modules[shader];
  create.stage.pName = "main";
  create.stage.pSpecializationInfo = info.variants > 1 ? &specialization : nullptr;
  create.layout = d.pipeline_layouts[n];
  VkPipeline created = VK_NULL_HANDLE;
  KILN_VK_CHECK(vkCreateComputePipelines(d.device, d.cache, 1, &create, s.allocator(), &created), Error::kDeviceError,
                "vulkan: vulkan:%u: creating the pipeline of shader '%s' (variant %u)", d.index, info.name, variant);
  pipeline = created;
  ++s.stats.pipelines_created;
  return pipeline;
}

namespace {

int find_memory_type(const DeviceState& d, uint32_t bits, VkMemoryPropertyFlags wanted, int after = -1) {
  for (uint32_t i = static_cast<uint32_t>(after + 1); i < d.memory.memoryTypeCount; ++i) {
    if ((bits & (1u << i)) && (d.memory.memoryTypes[i].propertyFlags & wanted) == wanted) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

Error allocate_arena_memory(BackendState& s, DeviceState& d, const VkMemoryRequirements& requirements,
                            VkDeviceMemory* out_memory, bool* out_mappable) {
  const VkMemoryPropertyFlags mappable = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  const bool unified = d.type == VK_PHYSICAL_DEVICE_TYPE_CPU || d.type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  const bool map = !s.options.force_staging;
  // Candidates in order of preference; -1 entries are skipped.
  const int candidates[] = {
      map ? find_memory_type(d, requirements.memoryTypeBits, local | mappable) : -1,
      map && unified ? find_memory_type(d, requirements.memoryTypeBits, mappable) : -1,
      find_memory_type(d, requirements.memoryTypeBits, local),
      find_memory_type(d, requirements.memoryTypeBits, 0),
  };
  VkResult last = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  for (int type : candidates) {
    if (type < 0) continue;
    VkMemoryAllocateInfo info = {};
    info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    info.allocationSize = requirements.size;
    info.memoryTypeIndex = static_cast<uint32_t>(type);
    last = vkAllocateMemory(d.device, &info, s.allocator(), out_memory);
    if (last == VK_SUCCESS) {
      *out_mappable = map && (d.memory.memoryTypes[type].propertyFlags & mappable) == mappable;
      return Error::kOk;
    }
  }
  KILN_RETURN_ERROR(Error::kDeviceAllocationFailed,
                    "vulkan: vulkan:%u: allocating %llu bytes of device memory failed: %s", d.index,
                    static_cast<unsigned long long>(requirements.size), result_name(last));
}

Error ensure_staging(BackendState& s, DeviceState& d) {
  if (d.staging != VK_NULL_HANDLE) return Error::kOk;
  VkBufferCreateInfo buffer = {};
  buffer.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  buffer.size = kStagingBytes;
  buffer.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  buffer.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  KILN_VK_CHECK(vkCreateBuffer(d.device, &buffer, s.allocator(), &d.staging), Error::kDeviceError,
                "vulkan: vulkan:%u: the staging buffer", d.index);
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(d.device, d.staging, &requirements);
  const int type = find_memory_type(d, requirements.memoryTypeBits,
                                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  KILN_CHECK_OR_RETURN(type >= 0, Error::kNotSupported,
                       "vulkan: vulkan:%u '%s' has no host-visible coherent memory for staging", d.index, d.name);
  VkMemoryAllocateInfo info = {};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.allocationSize = requirements.size;
  info.memoryTypeIndex = static_cast<uint32_t>(type);
  KILN_VK_CHECK(vkAllocateMemory(d.device, &info, s.allocator(), &d.staging_memory), Error::kDeviceError,
                "vulkan: vulkan:%u: the staging buffer", d.index);
  KILN_VK_CHECK(vkBindBufferMemory(d.device, d.staging, d.staging_memory, 0), Error::kDeviceError,
                "vulkan: vulkan:%u: the staging buffer", d.index);
  void* mapped = nullptr;
  KILN_VK_CHECK(vkMapMemory(d.device, d.staging_memory, 0, VK_WHOLE_SIZE, 0, &mapped), Error::kDeviceError,
                "vulkan: vulkan:%u: the staging buffer", d.index);
  d.staging_mapped = static_cast<uint8_t*>(mapped);
  return create_commands(s, d, &d.transfer, &d.transfer_fence, "staging");
}

Error create_commands(BackendState& s, DeviceState& d, VkCommandBuffer* commands, VkFence* fence, const char* what) {
  VkCommandBufferAllocateInfo command = {};
  command.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  command.commandPool = d.command_pool;
  command.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  command.commandBufferCount = 1;
  KILN_VK_CHECK(vkAllocateCommandBuffers(d.device, &command, commands), Error::kDeviceError,
                "vulkan: vulkan:%u: the %s command buffer", d.index, what);
  VkFenceCreateInfo info = {};
  info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  KILN_VK_CHECK(vkCreateFence(d.device, &info, s.allocator(), fence), Error::kDeviceError,
                "vulkan: vulkan:%u: the %s fence", d.index, what);
  return Error::kOk;
}

// The copy waits for every earlier compute or transfer write and makes its
// own writes visible to later shaders, transfers and host reads.
Error submit_copy(BackendState& s, DeviceState& d, VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset,
                  uint64_t bytes) {
  VkCommandBufferBeginInfo begin = {};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  KILN_VK_CHECK(vkBeginCommandBuffer(d.transfer, &begin), Error::kDeviceError, "vulkan: vulkan:%u: a staging copy",
                d.index);
  VkMemoryBarrier before = {};
  before.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(d.transfer, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
  VkBufferCopy region = {src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(d.transfer, src, dst, 1, &region);
  VkMemoryBarrier after = {};
  after.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  after.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                        VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(
      d.transfer, VK_PIPELINE_STAGE_TRANSFER_BIT,
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after,
      0, nullptr, 0, nullptr);
  KILN_VK_CHECK(vkEndCommandBuffer(d.transfer), Error::kDeviceError, "vulkan: vulkan:%u: a staging copy", d.index);
  VkSubmitInfo submit = {};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &d.transfer;
  KILN_VK_CHECK(vkQueueSubmit(d.queue, 1, &submit, d.transfer_fence), Error::kDeviceError,
                "vulkan: vulkan:%u: a staging copy", d.index);
  ++s.stats.submits;
  KILN_VK_CHECK(vkWaitForFences(d.device, 1, &d.transfer_fence, VK_TRUE, UINT64_MAX), Error::kDeviceError,
                "vulkan: vulkan:%u: a staging copy", d.index);
  KILN_VK_CHECK(vkResetFences(d.device, 1, &d.transfer_fence), Error::kDeviceError, "vulkan: vulkan:%u: a staging copy",
                d.index);
  return Error::kOk;
}

void close_device(BackendState& s, DeviceState& d) {
  if (d.device != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(d.device);
    const VkAllocationCallbacks* a = s.allocator();
    for (VkPipeline& p : d.pipelines) {
      if (p != VK_NULL_HANDLE) vkDestroyPipeline(d.device, p, a);
    }
    for (VkShaderModule& m : d.modules) {
      if (m != VK_NULL_HANDLE) vkDestroyShaderModule(d.device, m, a);
    }
    for (uint32_t n = 0; n <= kMaxBindings; ++n) {
      if (d.pipeline_layouts[n] != VK_NULL_HANDLE) vkDestroyPipelineLayout(d.device, d.pipeline_layouts[n], a);
      if (d.set_layouts[n] != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(d.device, d.set_layouts[n], a);
    }
    if (d.transfer_fence != VK_NULL_HANDLE) vkDestroyFence(d.device, d.transfer_fence, a);
    if (d.staging != VK_NULL_HANDLE) vkDestroyBuffer(d.device, d.staging, a);
    if (d.staging_memory != VK_NULL_HANDLE) vkFreeMemory(d.device, d.staging_memory, a);
    if (d.command_pool != VK_NULL_HANDLE) vkDestroyCommandPool(d.device, d.command_pool, a);
    if (d.cache != VK_NULL_HANDLE) vkDestroyPipelineCache(d.device, d.cache, a);
    vkDestroyDevice(d.device, a);
  }
  d = DeviceState();
}

void close_instance(BackendState& s) {
  if (s.instance == VK_NULL_HANDLE) return;
  if (s.messenger != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(s.instance, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy != nullptr) destroy(s.instance, s.messenger, s.allocator());
    s.messenger = VK_NULL_HANDLE;
  }
  vkDestroyInstance(s.instance, s.allocator());
  s.instance = VK_NULL_HANDLE;
  s.physical_count = 0;
}

const char* result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
    case VK_ERROR_FRAGMENTATION: return "VK_ERROR_FRAGMENTATION";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VK_ERROR_UNKNOWN";
  }
}

}  // namespace kiln::backends::vulkan::internal
