// The Vulkan backend: device memory, copies and the delegate lifecycle
// (validate and record at init, submit at execute). Devices, pipelines and
// staging are in device.cc, the kernels' launches in lower.cc.

#include "kiln/backends/vulkan/vulkan_backend.h"

#include <string.h>

#include <new>

#include "backends/vulkan/vulkan_kernels.h"
#include "device.h"
#include "kiln/backends/common/delegate_graph.h"
#include "kiln/runtime/check.h"
#include "lower.h"
#include "state.h"

namespace kiln::backends::vulkan {

using internal::ArenaState;
using internal::BackendState;
using internal::DelegateRecord;
using internal::DeviceState;
using internal::Launch;
using internal::Lock;

namespace {

static_assert(sizeof(BackendState) <= VulkanBackend::kStateBytes, "BackendState outgrew VulkanBackend::kStateBytes");
static_assert(alignof(BackendState) <= 16, "BackendState needs more alignment than its storage has");

// The record behind `buffer`, or nullptr when it is not an arena of ours.
ArenaState* arena_of(BackendState& s, DeviceBuffer buffer) {
  auto* arena = static_cast<ArenaState*>(buffer.handle);
  if (arena < s.arenas || arena >= s.arenas + internal::kMaxArenas || !arena->used) return nullptr;
  return arena;
}

// kDeviceError when the validation layer reported anything since the last
// check: a run with a validation message must not pass. Methods on several
// threads check at once: each message is reported by the one check that
// moves the mark past it.
Error check_validation(BackendState& s, const char* during) {
  const uint64_t total = s.validation_messages.load(std::memory_order_relaxed);
  uint64_t reported = s.validation_reported.load(std::memory_order_relaxed);
  while (reported < total && !s.validation_reported.compare_exchange_weak(reported, total, std::memory_order_relaxed)) {
  }
  KILN_CHECK_OR_RETURN(total <= reported, Error::kDeviceError,
                       "vulkan: the validation layer reported %llu message(s) %s",
                       static_cast<unsigned long long>(total - reported), during);
  return Error::kOk;
}

// The checks every operand of every kernel passes before any shader sees
// it, beyond the shared ones (operand indices, in-place rules): a float32
// tensor of this device, inside one of our arenas, at an offset the device
// can bind, within the range a binding may have.
class OperandChecker {
 public:
  OperandChecker(BackendState& s, const DeviceState& device, const MethodView& method)
      : s_(s), device_(device), method_(method) {}

  Error check(const KernelView& k) {
    for (uint32_t i = 0; i < k.num_inputs(); ++i) {
      if (k.input(i) != nullptr) KILN_RETURN_IF_ERROR(check_tensor(k, "input", i, *k.input(i)));
    }
    for (uint32_t o = 0; o < k.num_outputs(); ++o) KILN_RETURN_IF_ERROR(check_tensor(k, "output", o, k.output(o)));
    return Error::kOk;
  }

 private:
  Error check_tensor(const KernelView& k, const char* what, uint32_t i, const Tensor& t) {
    KILN_VIEW_CHECK(k, t.device().type() == DeviceType::VULKAN && t.device().index() == device_.index,
                    "%s %u is not a tensor of this Vulkan device", what, i);
    KILN_VIEW_CHECK(k, t.dtype() == DType::FLOAT32, "%s %u is not float32", what, i);
    KILN_VIEW_CHECK(k, t.arena() >= 0 && static_cast<uint32_t>(t.arena()) < method_.num_arenas(),
                    "%s %u is not planned in a device arena", what, i);
    const ArenaState* arena = arena_of(s_, method_.arena(static_cast<uint32_t>(t.arena())));
    KILN_VIEW_CHECK(k, arena != nullptr && arena->device == device_.index,
                    "%s %u lives in an arena this backend did not allocate on this device", what, i);
    KILN_VIEW_CHECK(k, t.nbytes() != 0 && t.offset() + t.nbytes() <= arena->size, "%s %u is empty or outside its arena",
                    what, i);
    KILN_VIEW_CHECK(k, t.offset() % device_.limits.min_storage_offset_alignment == 0,
                    "%s %u is at offset %llu, not a multiple of the device's minStorageBufferOffsetAlignment %llu",
                    what, i, static_cast<unsigned long long>(t.offset()),
                    static_cast<unsigned long long>(device_.limits.min_storage_offset_alignment));
    KILN_CHECK_OR_RETURN(t.nbytes() <= device_.limits.max_storage_range, Error::kNotSupported,
                         "vulkan: node '%s' (%s): %s %u has %llu bytes; vulkan:%u binds at most %llu "
                         "(maxStorageBufferRange)",
                         k.node, k.op, what, i, static_cast<unsigned long long>(t.nbytes()), device_.index,
                         static_cast<unsigned long long>(device_.limits.max_storage_range));
    return Error::kOk;
  }

  BackendState& s_;
  const DeviceState& device_;
  const MethodView& method_;
};

// First pass: how many dispatches and descriptors, and every pipeline made.
class CountingSink final : public internal::LaunchSink {
 public:
  CountingSink(BackendState& s, DeviceState& device) : s_(s), device_(device) {}
  Error emit(const Launch& d) override {
    Result<VkPipeline> pipeline = internal::ensure_pipeline(s_, device_, d.shader, d.variant);
    if (!pipeline.ok()) return pipeline.error();
    ++dispatches;
    descriptors += d.num_bindings;
    return Error::kOk;
  }
  uint32_t dispatches = 0;
  uint32_t descriptors = 0;

 private:
  BackendState& s_;
  DeviceState& device_;
};

// Second pass: writes each dispatch's descriptor set and records it, with
// a barrier first when it conflicts with what the dispatches recorded since
// the last barrier read or wrote.
//
// Hazards are found on byte ranges of the arenas, so memory the planner
// reuses within the delegate is covered: a dispatch that reads bytes an
// earlier one wrote (read after write), or writes bytes an earlier one read
// or wrote (write after read, write after write), waits for it. The
// dispatches of one Concat write disjoint columns of their output and do
// not wait for each other.
class RecordingSink final : public internal::LaunchSink {
 public:
  RecordingSink(BackendState& s, DeviceState& device, const MethodView& method, DelegateRecord& record)
      : s_(s), device_(device), method_(method), record_(record) {}

  void set_kernel(uint32_t kernel) { kernel_ = kernel; }

  Error emit(const Launch& d) override {
    const uint32_t n = d.num_bindings;
    VkDescriptorSetAllocateInfo allocate = {};
    allocate.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    allocate.descriptorPool = record_.descriptors;
    allocate.descriptorSetCount = 1;
    allocate.pSetLayouts = &device_.set_layouts[n];
    VkDescriptorSet set = VK_NULL_HANDLE;
    KILN_VK_CHECK(vkAllocateDescriptorSets(device_.device, &allocate, &set), Error::kDeviceError,
                  "vulkan: vulkan:%u: a descriptor set", device_.index);
    VkDescriptorBufferInfo buffers[internal::kMaxBindings];
    VkWriteDescriptorSet writes[internal::kMaxBindings];
    for (uint32_t i = 0; i < n; ++i) {
      const internal::Binding& b = d.bindings[i];
      buffers[i].buffer = arena_of(s_, method_.arena(b.arena))->buffer;
      buffers[i].offset = b.offset;
      buffers[i].range = b.bytes;
      writes[i] = {};
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = set;
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &buffers[i];
    }
    vkUpdateDescriptorSets(device_.device, n, writes, 0, nullptr);

    if (conflicts(d) || pending_ + n > kPending) barrier();
    for (uint32_t i = 0; i < n; ++i) {
      const internal::Binding& b = d.bindings[i];
      accesses_[pending_++] = {b.arena, b.offset, b.offset + b.bytes, b.write, kernel_, d.disjoint_writes};
    }

    const VkPipeline pipeline = device_.pipelines[internal::shader_info(d.shader).first_pipeline + d.variant];
    const VkCommandBuffer cb = record_.commands;
    if (pipeline != bound_) {
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
      bound_ = pipeline;
    }
    const VkPipelineLayout layout = device_.pipeline_layouts[n];
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, internal::kPushConstantBytes, d.push);
    vkCmdDispatch(cb, d.groups[0], d.groups[1], d.groups[2]);
    ++record_.dispatches;
    return Error::kOk;
  }

  // Shader writes recorded so far become visible to later shader reads
  // and writes.
  void barrier() {
    VkMemoryBarrier memory = {};
    memory.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    memory.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    memory.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(record_.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         0, 1, &memory, 0, nullptr, 0, nullptr);
    ++record_.barriers;
    pending_ = 0;
  }

 private:
  struct Access {
    uint32_t arena;
    uint64_t begin, end;
    bool write;
    uint32_t kernel;
    bool disjoint;
  };
  static constexpr uint32_t kPending = 96;

  bool conflicts(const Launch& d) const {
    for (uint32_t i = 0; i < d.num_bindings; ++i) {
      const internal::Binding& b = d.bindings[i];
      for (uint32_t p = 0; p < pending_; ++p) {
        const Access& a = accesses_[p];
        if (a.arena != b.arena || a.end <= b.offset || b.offset + b.bytes <= a.begin) continue;
        if (!a.write && !b.write) continue;
        const bool sibling_writes = a.write && b.write && a.disjoint && d.disjoint_writes && a.kernel == kernel_;
        if (!sibling_writes) return true;
      }
    }
    return false;
  }

  BackendState& s_;
  DeviceState& device_;
  const MethodView& method_;
  DelegateRecord& record_;
  uint32_t kernel_ = 0;
  VkPipeline bound_ = VK_NULL_HANDLE;
  Access accesses_[kPending];
  uint32_t pending_ = 0;
};

// The buffer of `bytes` and its memory (mapped where the host can map it)
// behind `arena`, which is then in use; nothing is left on failure.
Error create_arena(BackendState& s, DeviceState& d, uint64_t bytes, ArenaState* arena) {
  VkBufferCreateInfo info = {};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  KILN_VK_CHECK(vkCreateBuffer(d.device, &info, s.allocator(), &buffer), Error::kDeviceError,
                "vulkan: vulkan:%u: an arena's buffer", d.index);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  internal::Undo undo([&] {
    if (memory != VK_NULL_HANDLE) vkFreeMemory(d.device, memory, s.allocator());
    vkDestroyBuffer(d.device, buffer, s.allocator());
  });
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(d.device, buffer, &requirements);
  bool mappable = false;
  KILN_RETURN_IF_ERROR(internal::allocate_arena_memory(s, d, requirements, &memory, &mappable));
  KILN_VK_CHECK(vkBindBufferMemory(d.device, buffer, memory, 0), Error::kDeviceError,
                "vulkan: vulkan:%u: binding arena memory", d.index);
  void* mapped = nullptr;
  if (mappable) {
    KILN_VK_CHECK(vkMapMemory(d.device, memory, 0, VK_WHOLE_SIZE, 0, &mapped), Error::kDeviceError,
                  "vulkan: vulkan:%u: mapping arena memory", d.index);
  }
  undo.release();
  arena->used = true;
  arena->buffer = buffer;
  arena->memory = memory;
  arena->mapped = static_cast<uint8_t*>(mapped);
  return Error::kOk;
}

void destroy_record(BackendState& s, DelegateRecord& r) {
  if (r.device == nullptr) return;
  const VkDevice device = r.device->device;
  if (r.fence != VK_NULL_HANDLE) vkDestroyFence(device, r.fence, s.allocator());
  if (r.commands != VK_NULL_HANDLE) vkFreeCommandBuffers(device, r.device->command_pool, 1, &r.commands);
  if (r.descriptors != VK_NULL_HANDLE) vkDestroyDescriptorPool(device, r.descriptors, s.allocator());
  r = DelegateRecord();
}

Error record(BackendState& s, DeviceState& device, const fb::DelegateGraph& graph, const MethodView& method,
             uint32_t descriptors, DelegateRecord& r) {
  const VkAllocationCallbacks* a = s.allocator();
  if (r.dispatches > 0) {
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
    VkDescriptorPoolCreateInfo pool = {};
    pool.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    pool.maxSets = r.dispatches;
    pool.poolSizeCount = 1;
    pool.pPoolSizes = &size;
    KILN_VK_CHECK(vkCreateDescriptorPool(device.device, &pool, a, &r.descriptors), Error::kDeviceError,
                  "vulkan: vulkan:%u: a delegate's descriptor pool", device.index);
  }
  KILN_RETURN_IF_ERROR(create_commands(s, device, &r.commands, &r.fence, "delegate"));

  VkCommandBufferBeginInfo begin = {};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  KILN_VK_CHECK(vkBeginCommandBuffer(r.commands, &begin), Error::kDeviceError,
                "vulkan: vulkan:%u: recording a delegate", device.index);
  // What earlier submissions (other delegates, staging copies) wrote is
  // visible to this one's shaders; host writes are, by vkQueueSubmit.
  VkMemoryBarrier entry = {};
  entry.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  entry.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  entry.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(r.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &entry, 0, nullptr, 0, nullptr);
  r.dispatches = 0;
  RecordingSink sink(s, device, method, r);
  const Error recorded = for_each_kernel_call("vulkan", graph, method, [&](uint32_t k, const KernelView& view) {
    sink.set_kernel(k);
    return internal::lower_kernel(view, device.limits, sink);
  });
  KILN_RETURN_IF_ERROR(recorded);
  // This delegate's writes are visible to the host (mapped copies), to
  // transfers (staging copies) and, through the next entry barrier, to
  // later delegates.
  VkMemoryBarrier exit = {};
  exit.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  exit.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  exit.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(r.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &exit, 0, nullptr, 0,
                       nullptr);
  KILN_VK_CHECK(vkEndCommandBuffer(r.commands), Error::kDeviceError, "vulkan: vulkan:%u: recording a delegate",
                device.index);
  return Error::kOk;
}

}  // namespace

// ---------------------------------------------------------------------------

VulkanBackend::VulkanBackend(const VulkanOptions& options) {
  BackendState* s = new (storage_) BackendState();
  s->options = options;
  s->pool.reset(options.host_memory.data(), options.host_memory.size());
}

VulkanBackend::~VulkanBackend() {
  shutdown();
  state().~BackendState();
}

BackendState& VulkanBackend::state() { return *reinterpret_cast<BackendState*>(storage_); }
const BackendState& VulkanBackend::state() const { return *reinterpret_cast<const BackendState*>(storage_); }

Error VulkanBackend::allocate(Device device, uint64_t size, uint32_t alignment, DeviceBuffer* out_buffer) {
  BackendState& s = state();
  KILN_CHECK_OR_RETURN(device.type() == DeviceType::VULKAN && out_buffer != nullptr, Error::kInvalidArgument,
                       "vulkan: bad arena request");
  Lock lock(s);
  KILN_RETURN_IF_ERROR(internal::ensure_device(s, device.index()));
  DeviceState& d = s.devices[device.index()];
  ArenaState* arena = s.arenas;
  while (arena < s.arenas + internal::kMaxArenas && arena->used) ++arena;
  KILN_CHECK_OR_RETURN(arena < s.arenas + internal::kMaxArenas, Error::kOutOfMemory,
                       "vulkan: all %u arena slots are in use", internal::kMaxArenas);
  // Buffers may not be empty; round to whole words for the shaders.
  const uint64_t bytes = size < 16 ? 16 : (size + 3) / 4 * 4;
  KILN_CHECK_OR_RETURN(d.limits.max_allocation == 0 || bytes <= d.limits.max_allocation, Error::kDeviceAllocationFailed,
                       "vulkan: vulkan:%u allocates at most %llu bytes at once (maxMemoryAllocationSize); the arena "
                       "needs %llu",
                       d.index, static_cast<unsigned long long>(d.limits.max_allocation),
                       static_cast<unsigned long long>(bytes));
  KILN_RETURN_IF_ERROR(create_arena(s, d, bytes, arena));
  arena->device = device.index();
  arena->size = size;
  out_buffer->handle = arena;
  out_buffer->size = size;
  return Error::kOk;
}

void VulkanBackend::release(Device device, DeviceBuffer buffer) {
  BackendState& s = state();
  Lock lock(s);
  ArenaState* arena = arena_of(s, buffer);
  if (arena == nullptr) return;
  DeviceState& d = s.devices[arena->device];
  if (d.device != VK_NULL_HANDLE) {
    if (arena->mapped != nullptr) vkUnmapMemory(d.device, arena->memory);
    vkDestroyBuffer(d.device, arena->buffer, s.allocator());
    vkFreeMemory(d.device, arena->memory, s.allocator());
  }
  *arena = ArenaState();
}

Error VulkanBackend::copy_to_device(Device device, DeviceBuffer dst, uint64_t dst_offset, const void* src,
                                    uint64_t bytes) {
  BackendState& s = state();
  ArenaState* arena = arena_of(s, dst);
  KILN_CHECK_OR_RETURN(arena != nullptr && dst_offset + bytes <= arena->size && (src != nullptr || bytes == 0),
                       Error::kInvalidArgument, "vulkan: copy to vulkan:%u outside its arena", device.index());
  if (arena->mapped != nullptr) {
    memcpy(arena->mapped + dst_offset, src, static_cast<size_t>(bytes));
    return Error::kOk;
  }
  Lock lock(s);
  DeviceState& d = s.devices[arena->device];
  KILN_RETURN_IF_ERROR(internal::ensure_staging(s, d));
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = bytes - done < internal::kStagingBytes ? bytes - done : internal::kStagingBytes;
    memcpy(d.staging_mapped, static_cast<const uint8_t*>(src) + done, static_cast<size_t>(n));
    KILN_RETURN_IF_ERROR(internal::submit_copy(s, d, d.staging, 0, arena->buffer, dst_offset + done, n));
    done += n;
  }
  return check_validation(s, "while copying to the device");
}

Error VulkanBackend::copy_to_host(Device device, void* dst, DeviceBuffer src, uint64_t src_offset, uint64_t bytes) {
  BackendState& s = state();
  ArenaState* arena = arena_of(s, src);
  KILN_CHECK_OR_RETURN(arena != nullptr && src_offset + bytes <= arena->size && (dst != nullptr || bytes == 0),
                       Error::kInvalidArgument, "vulkan: copy from vulkan:%u outside its arena", device.index());
  if (arena->mapped != nullptr) {
    memcpy(dst, arena->mapped + src_offset, static_cast<size_t>(bytes));
    return Error::kOk;
  }
  Lock lock(s);
  DeviceState& d = s.devices[arena->device];
  KILN_RETURN_IF_ERROR(internal::ensure_staging(s, d));
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = bytes - done < internal::kStagingBytes ? bytes - done : internal::kStagingBytes;
    KILN_RETURN_IF_ERROR(internal::submit_copy(s, d, arena->buffer, src_offset + done, d.staging, 0, n));
    memcpy(static_cast<uint8_t*>(dst) + done, d.staging_mapped, static_cast<size_t>(n));
    done += n;
  }
  return check_validation(s, "while copying to the host");
}

Error VulkanBackend::copy_on_device(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src,
                                    uint64_t src_offset, uint64_t bytes) {
  BackendState& s = state();
  ArenaState* to = arena_of(s, dst);
  ArenaState* from = arena_of(s, src);
  KILN_CHECK_OR_RETURN(to != nullptr && from != nullptr && to->device == from->device &&
                           dst_offset + bytes <= to->size && src_offset + bytes <= from->size,
                       Error::kInvalidArgument, "vulkan: copy on vulkan:%u outside its arenas", device.index());
  if (bytes == 0) return Error::kOk;
  if (to->mapped != nullptr && from->mapped != nullptr) {
    memmove(to->mapped + dst_offset, from->mapped + src_offset, static_cast<size_t>(bytes));
    return Error::kOk;
  }
  KILN_CHECK_OR_RETURN(to != from || dst_offset >= src_offset + bytes || src_offset >= dst_offset + bytes,
                       Error::kInvalidArgument, "vulkan: a copy within one arena between overlapping ranges");
  Lock lock(s);
  KILN_RETURN_IF_ERROR(
      internal::submit_copy(s, s.devices[to->device], from->buffer, src_offset, to->buffer, dst_offset, bytes));
  return check_validation(s, "while copying on the device");
}

void* VulkanBackend::address(DeviceBuffer buffer, uint64_t offset) {
  ArenaState* arena = arena_of(state(), buffer);
  return arena != nullptr && arena->mapped != nullptr ? arena->mapped + offset : nullptr;
}

uint64_t VulkanBackend::state_bytes(const fb::Delegate& delegate, Span<const uint8_t> blob) const {
  return kDelegateStateBytes;
}

// Validates the blob and every kernel, creates the pipelines it needs,
// then allocates the descriptor sets and records the command buffer.
Result<void*> VulkanBackend::init(const DelegateContext& context) {
  BackendState& s = state();
  KILN_ASSIGN_OR_RETURN(const fb::DelegateGraph* graph, delegate_graph_of("vulkan", context));
  const fb::Device* where = context.delegate->device();
  KILN_CHECK_OR_RETURN(where != nullptr && where->type() == DeviceType::VULKAN, Error::kInvalidProgram,
                       "vulkan: a delegate for the Vulkan backend names no Vulkan device");
  Lock lock(s);
  KILN_RETURN_IF_ERROR(internal::ensure_device(s, where->index()));
  DeviceState& device = s.devices[where->index()];

  const MethodView& method = *context.method;
  OperandChecker checker(s, device, method);
  const Error checked = for_each_kernel_call("vulkan", *graph, method, [&](uint32_t, const KernelView& view) -> Error {
    const KernelInfo* info = kKernels.find(view.op);
    KILN_CHECK_OR_RETURN(info != nullptr, Error::kNotSupported, "vulkan: node '%s': kernel '%s' has no Vulkan shader",
                         view.node, view.op);
    KILN_RETURN_IF_ERROR(check_operand_indices(view));
    KILN_RETURN_IF_ERROR(checker.check(view));
    return check_inplace(view, info->inplace_inputs);
  });
  KILN_RETURN_IF_ERROR(checked);
  CountingSink counting(s, device);
  const Error counted = for_each_kernel_call("vulkan", *graph, method, [&](uint32_t, const KernelView& view) {
    return internal::lower_kernel(view, device.limits, counting);
  });
  KILN_RETURN_IF_ERROR(counted);

  KILN_ASSIGN_OR_RETURN(uint8_t * memory,
                        allocate_state("vulkan", context, sizeof(DelegateRecord), alignof(DelegateRecord)));
  DelegateRecord* r = new (memory) DelegateRecord();
  r->device = &device;
  r->dispatches = counting.dispatches;
  internal::Undo undo([&] { destroy_record(s, *r); });
  KILN_RETURN_IF_ERROR(record(s, device, *graph, method, counting.descriptors, *r));
  ++s.stats.delegates_recorded;
  s.stats.dispatches_recorded += r->dispatches;
  s.stats.barriers_recorded += r->barriers;
  KILN_RETURN_IF_ERROR(check_validation(s, "while initialising a delegate"));
  undo.release();
  return static_cast<void*>(r);
}

Error VulkanBackend::execute(void* delegate, const DelegateCallArgs& args) {
  BackendState& s = state();
  DelegateRecord& r = *static_cast<DelegateRecord*>(delegate);
  if (r.dispatches == 0) return Error::kOk;
  const VkDevice device = r.device->device;
  {
    Lock lock(s);
    VkSubmitInfo submit = {};
    submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &r.commands;
    KILN_VK_CHECK(vkQueueSubmit(r.device->queue, 1, &submit, r.fence), Error::kDeviceError,
                  "vulkan: vulkan:%u: running a delegate", r.device->index);
    ++s.stats.submits;
  }
  KILN_VK_CHECK(vkWaitForFences(device, 1, &r.fence, VK_TRUE, UINT64_MAX), Error::kDeviceError,
                "vulkan: vulkan:%u: running a delegate", r.device->index);
  KILN_VK_CHECK(vkResetFences(device, 1, &r.fence), Error::kDeviceError, "vulkan: vulkan:%u: running a delegate",
                r.device->index);
  return check_validation(s, "while executing a delegate");
}

void VulkanBackend::destroy(void* delegate) {
  BackendState& s = state();
  Lock lock(s);
  DelegateRecord& r = *static_cast<DelegateRecord*>(delegate);
  destroy_record(s, r);
  r.~DelegateRecord();
}

Result<uint32_t> VulkanBackend::device_count() {
  BackendState& s = state();
  Lock lock(s);
  KILN_RETURN_IF_ERROR(internal::ensure_instance(s));
  return s.physical_count;
}

const char* VulkanBackend::device_name(uint32_t index) {
  BackendState& s = state();
  Lock lock(s);
  if (internal::ensure_instance(s) != Error::kOk || index >= s.physical_count) return "";
  DeviceState& d = s.devices[index];
  if (d.name[0] == '\0') {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(s.physical[index], &p);
    snprintf(d.name, sizeof(d.name), "%.*s", static_cast<int>(sizeof(d.name) - 1), p.deviceName);
  }
  return d.name;
}

VulkanStats VulkanBackend::stats() const {
  const BackendState& s = state();
  VulkanStats stats = s.stats;
  stats.host_allocations = s.pool.allocations();
  stats.host_bytes_in_use = s.pool.bytes_in_use();
  stats.host_bytes_peak = s.pool.bytes_peak();
  stats.validation_messages = s.validation_messages.load(std::memory_order_relaxed);
  return stats;
}

uint64_t VulkanBackend::validation_messages() const {
  return state().validation_messages.load(std::memory_order_relaxed);
}

size_t VulkanBackend::pipeline_cache_data(uint32_t index, void* out, size_t capacity) {
  BackendState& s = state();
  Lock lock(s);
  if (index >= kMaxDevices || !s.devices[index].open) return 0;
  const DeviceState& d = s.devices[index];
  size_t size = 0;
  if (vkGetPipelineCacheData(d.device, d.cache, &size, nullptr) != VK_SUCCESS) return 0;
  if (out != nullptr) {
    size_t written = capacity;
    const VkResult result = vkGetPipelineCacheData(d.device, d.cache, &written, out);
    if (result != VK_SUCCESS && result != VK_INCOMPLETE) return 0;
  }
  return size;
}

void VulkanBackend::shutdown() {
  BackendState& s = state();
  Lock lock(s);
  for (ArenaState& arena : s.arenas) {
    if (!arena.used) continue;
    KILN_LOG(WARNING, "vulkan: an arena of %llu bytes on vulkan:%u was still allocated at shutdown",
             static_cast<unsigned long long>(arena.size), arena.device);
    DeviceState& d = s.devices[arena.device];
    if (d.device != VK_NULL_HANDLE) {
      if (arena.mapped != nullptr) vkUnmapMemory(d.device, arena.memory);
      vkDestroyBuffer(d.device, arena.buffer, s.allocator());
      vkFreeMemory(d.device, arena.memory, s.allocator());
    }
    arena = ArenaState();
  }
  for (DeviceState& d : s.devices) internal::close_device(s, d);
  internal::close_instance(s);
  s.instance_failed = false;
}

Error register_vulkan_backend(BackendRegistry& registry, VulkanBackend* backend) {
  return registry.register_backend(backend);
}

}  // namespace kiln::backends::vulkan
