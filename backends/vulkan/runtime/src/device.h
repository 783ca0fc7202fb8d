// Instance and devices of the Vulkan backend: opening vulkan:N with the
// checks that name what is missing, pipelines made on first use, and
// staging copies for memory the host cannot map. Callers hold the
// backend's lock (BackendState::lock) where the comments say so.

#ifndef KILN_BACKENDS_VULKAN_RUNTIME_SRC_DEVICE_H_
#define KILN_BACKENDS_VULKAN_RUNTIME_SRC_DEVICE_H_

#include "state.h"

namespace kiln::backends::vulkan::internal {

// Creates the instance (with the validation layer and a debug messenger
// when asked) and lists the physical devices. Idempotent.
Error ensure_instance(BackendState& s);
// Opens vulkan:index: checks its Vulkan version, compute queue and limits,
// creates the logical device, command pool and pipeline cache. Idempotent.
Error ensure_device(BackendState& s, uint32_t index);
// The pipeline of `shader` with specialization constant 0 = `variant`,
// created on first use.
Result<VkPipeline> ensure_pipeline(BackendState& s, DeviceState& device, ShaderId shader, uint32_t variant);
// Records, submits and waits for one buffer-to-buffer copy through the
// device's transfer command buffer; with the lock held.
Error submit_copy(BackendState& s, DeviceState& device, VkBuffer src, uint64_t src_offset, VkBuffer dst,
                  uint64_t dst_offset, uint64_t bytes);
// A primary command buffer from the device's pool and an unsignalled fence
// to wait for its submission; `what` names them in errors.
Error create_commands(BackendState& s, DeviceState& device, VkCommandBuffer* commands, VkFence* fence,
                      const char* what);
// The staging buffer (kStagingBytes, host-visible), made on first use.
Error ensure_staging(BackendState& s, DeviceState& device);
// Destroys every object of the device; its arenas must be released.
void close_device(BackendState& s, DeviceState& device);
void close_instance(BackendState& s);

// A memory type for an arena: mappable and coherent when the device allows
// it without giving up device-local memory (or when it is a CPU or
// integrated GPU), else device-local. Tries candidates in that order;
// returns the first that accepts `size`, or an error.
Error allocate_arena_memory(BackendState& s, DeviceState& device, const VkMemoryRequirements& requirements,
                            VkDeviceMemory* out_memory, bool* out_mappable);

// Runs `undo` when the scope ends unless release() was called first: what
// an early return (a failed check) leaves to clean up.
template <typename F>
class Undo {
 public:
  explicit Undo(F undo) : undo_(undo) {}
  ~Undo() {
    if (armed_) undo_();
  }
  void release() { armed_ = false; }
  Undo(const Undo&) = delete;
  Undo& operator=(const Undo&) = delete;

 private:
  F undo_;
  bool armed_ = true;
};

// Spin lock over BackendState::lock.
class Lock {
 public:
  explicit Lock(BackendState& s) : s_(s) {
    while (s_.lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~Lock() { s_.lock.clear(std::memory_order_release); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  BackendState& s_;
};

}  // namespace kiln::backends::vulkan::internal

#endif  // KILN_BACKENDS_VULKAN_RUNTIME_SRC_DEVICE_H_
