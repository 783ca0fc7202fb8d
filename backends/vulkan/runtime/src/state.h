// Internal state of the Vulkan backend: the instance, each opened device
// with its pipelines, the device arenas, and the record of one delegate.
// All of it lives in the VulkanBackend object (BackendState) or in the
// method's bookkeeping (DelegateRecord); nothing is on the heap.

#ifndef KILN_BACKENDS_VULKAN_RUNTIME_SRC_STATE_H_
#define KILN_BACKENDS_VULKAN_RUNTIME_SRC_STATE_H_

#include <vulkan/vulkan.h>

#include <atomic>

#include "backends/vulkan/vulkan_abi.h"
#include "host_pool.h"
#include "kiln/backends/vulkan/vulkan_backend.h"
#include "shaders.h"
#include "vk_status.h"

namespace kiln::backends::vulkan::internal {

// Storage buffers of the shader with the most (LayerNormalization,
// BatchNormalization).
constexpr uint32_t kMaxBindings = 6;
// Push constants every shader gets: the 128 bytes every device supports.
constexpr uint32_t kPushConstantBytes = 128;
// Device arenas open at once across all methods.
constexpr uint32_t kMaxArenas = 32;
// Bytes copied per staging round trip on devices without mappable memory.
constexpr uint64_t kStagingBytes = 4u << 20;

// The device limits kiln's shaders and recording rely on.
struct Limits {
  uint32_t api_version = 0;
  uint64_t min_storage_offset_alignment = 0;
  uint64_t max_storage_range = 0;
  uint64_t max_allocation = 0;
  uint32_t max_group_count[3] = {};
  // Gemm, MatMul and Conv accumulate in registers instead of staging tiles
  // in shared memory (VulkanOptions::Kernels).
  bool register_blocks = false;
};

struct DeviceState {
  bool open = false;
  uint32_t index = 0;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  char name[96] = {};
  Limits limits;
  VkPhysicalDeviceMemoryProperties memory = {};
  VkPipelineCache cache = VK_NULL_HANDLE;
  VkCommandPool command_pool = VK_NULL_HANDLE;
  // Indexed by binding count.
  VkDescriptorSetLayout set_layouts[kMaxBindings + 1] = {};
  VkPipelineLayout pipeline_layouts[kMaxBindings + 1] = {};
  VkShaderModule modules[kShaderCount] = {};
  VkPipeline pipelines[kPipelineCount] = {};
  // Staging for arenas the host cannot map; made on first use.
  VkBuffer staging = VK_NULL_HANDLE;
  VkDeviceMemory staging_memory = VK_NULL_HANDLE;
  uint8_t* staging_mapped = nullptr;
  VkCommandBuffer transfer = VK_NULL_HANDLE;
  VkFence transfer_fence = VK_NULL_HANDLE;
};

// One device arena; DeviceBuffer::handle points at it.
struct ArenaState {
  bool used = false;
  uint32_t device = 0;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint8_t* mapped = nullptr;  // null: reached through staging copies
  uint64_t size = 0;
};

// One initialised delegate, in memory from DelegateContext::allocator.
struct DelegateRecord {
  DeviceState* device = nullptr;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  VkDescriptorPool descriptors = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  uint32_t dispatches = 0;
  uint32_t barriers = 0;
};
static_assert(sizeof(DelegateRecord) + alignof(DelegateRecord) <= kDelegateStateBytes,
              "DelegateRecord outgrew the state bytes the planner reserves (vulkan_abi.h)");

struct BackendState {
  VulkanOptions options;
  HostPool pool;
  VkAllocationCallbacks callbacks = {};
  bool instance_failed = false;
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  uint32_t physical_count = 0;
  VkPhysicalDevice physical[kMaxDevices] = {};
  DeviceState devices[kMaxDevices];
  ArenaState arenas[kMaxArenas];
  std::atomic<uint64_t> validation_messages{0};
  // Validation messages already turned into an error by init/execute.
  std::atomic<uint64_t> validation_reported{0};
  // Serialises what Vulkan wants externally synchronised across methods:
  // the queue, the command pools, recording, staging copies.
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  VulkanStats stats;

  // What every vkCreate/vkDestroy/vkAllocate/vkFree call passes.
  const VkAllocationCallbacks* allocator() const { return pool.empty() ? nullptr : &callbacks; }
};

}  // namespace kiln::backends::vulkan::internal

#endif  // KILN_BACKENDS_VULKAN_RUNTIME_SRC_STATE_H_
