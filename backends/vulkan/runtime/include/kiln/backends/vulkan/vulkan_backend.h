// The Vulkan backend's runtime half: runs delegates of a program on any
// Vulkan 1.1 device (a GPU, or Mesa's lavapipe on a CPU) with compute
// shaders compiled to SPIR-V when kiln is built.
//
//   kiln::backends::vulkan::VulkanOptions options;
//   options.host_memory = {pool, sizeof(pool)};     // optional, see below
//   static kiln::backends::vulkan::VulkanBackend vulkan(options);
//   kiln::backends::vulkan::register_vulkan_backend(kiln::global_backend_registry(), &vulkan);
//
// What it does, and when:
//   - Device vulkan:N is the N-th physical device the Vulkan loader lists.
//     It is opened when a method first needs it (its arena is allocated or
//     a delegate initialised); a missing device, or one without Vulkan 1.1,
//     a compute queue or the limits kiln's shaders need, is an Error then,
//     with a log line naming what is missing.
//   - Memory: one VkDeviceMemory and one VkBuffer per device arena; tensors
//     are ranges of it at the offsets the planner fixed (aligned to 256
//     bytes, kArenaAlignment). Memory the host can map (lavapipe, integrated
//     GPUs) is mapped once and copies are memcpy; otherwise copies go
//     through a staging buffer and one small transfer submission each.
//   - Delegates: init() validates the delegate's kernels, creates the
//     pipelines it needs (once per device, through a VkPipelineCache),
//     allocates every descriptor set and records one command buffer, with
//     a barrier only where a dispatch touches bytes an earlier one of the
//     same command buffer wrote, or writes bytes it read. execute() submits
//     that command buffer and waits for its fence: no allocation, no
//     recording, no descriptor update.
//
// Host memory: the backend's own state lives inside this object (no heap);
// each delegate's record comes from the method's bookkeeping
// (kDelegateStateBytes). What the Vulkan driver allocates on the host for
// its objects goes through VkAllocationCallbacks backed by
// `VulkanOptions::host_memory` when the application gives one; without
// it the driver uses its own allocator (malloc, typically). Device memory
// is never host memory of ours.
//
// Validation: with `VulkanOptions::validation` the Khronos validation layer
// is enabled and every message it reports (warning or error) is logged and
// counted; execute() and init() then fail with kDeviceError, so a test run
// cannot pass with a validation message.
//
// Threading: a method is executed by one thread at a time; queue
// submissions are serialised inside the backend, so methods may run on
// several threads. The object must outlive every Method that uses it;
// shutdown() (or the destructor) releases every Vulkan object.

#ifndef KILN_BACKENDS_VULKAN_VULKAN_BACKEND_H_
#define KILN_BACKENDS_VULKAN_VULKAN_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/backend.h"

namespace kiln::backends::vulkan {

struct VulkanOptions {
  // Enable VK_LAYER_KHRONOS_validation (Debian: vulkan-validationlayers).
  // Opening a device fails when the layer is missing.
  bool validation = false;
  // Host memory for the driver's own allocations (VkAllocationCallbacks).
  // Empty: the driver allocates on its own. Must outlive the backend.
  Span<uint8_t> host_memory;
  // Initial contents of the pipeline cache (from pipeline_cache_data() of
  // an earlier run), or empty.
  Span<const uint8_t> pipeline_cache;
  // Never map device memory: every copy goes through the staging buffer,
  // as on a discrete GPU. For tests of that path on lavapipe.
  bool force_staging = false;
  // How Gemm, MatMul and Conv run: tiles staged in shared memory (what GPUs
  // want), or blocks accumulated in registers without shared memory (what
  // CPU devices such as lavapipe want: there a barrier switches coroutines
  // and shared memory is plain memory). kAuto picks by device type.
  enum class Kernels { kAuto, kSharedMemoryTiles, kRegisterBlocks };
  Kernels kernels = Kernels::kAuto;
};

// Counters for tests and profiles.
struct VulkanStats {
  uint64_t delegates_recorded = 0;  // command buffers recorded (at init)
  uint64_t dispatches_recorded = 0;
  uint64_t barriers_recorded = 0;
  uint64_t submits = 0;  // delegate executions and staging copies
  uint64_t pipelines_created = 0;
  uint64_t host_allocations = 0;  // driver allocations from host_memory
  uint64_t host_bytes_in_use = 0;
  uint64_t host_bytes_peak = 0;
  uint64_t validation_messages = 0;
};

namespace internal {
struct BackendState;
}  // namespace internal

class VulkanBackend final : public Backend {
 public:
  // Bytes of this object's internal state (devices, pipelines, arenas).
  static constexpr size_t kStateBytes = 24 * 1024;

  explicit VulkanBackend(const VulkanOptions& options = VulkanOptions());
  ~VulkanBackend();
  VulkanBackend(const VulkanBackend&) = delete;
  VulkanBackend& operator=(const VulkanBackend&) = delete;

  // Backend
  const char* id() const override { return "vulkan"; }
  DeviceType device_type() const override { return DeviceType::VULKAN; }
  Error allocate(Device device, uint64_t size, uint32_t alignment, DeviceBuffer* out_buffer) override;
  void release(Device device, DeviceBuffer buffer) override;
  Error copy_to_device(Device device, DeviceBuffer dst, uint64_t dst_offset, const void* src, uint64_t bytes) override;
  Error copy_to_host(Device device, void* dst, DeviceBuffer src, uint64_t src_offset, uint64_t bytes) override;
  Error copy_on_device(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src, uint64_t src_offset,
                       uint64_t bytes) override;
  void* address(DeviceBuffer buffer, uint64_t offset) override;
  uint64_t state_bytes(const fb::Delegate& delegate, Span<const uint8_t> blob) const override;
  Result<void*> init(const DelegateContext& context) override;
  Error execute(void* delegate, const DelegateCallArgs& args) override;
  void destroy(void* delegate) override;

  // How many Vulkan devices the loader lists (opens the instance).
  Result<uint32_t> device_count();
  // The name of device vulkan:index ("llvmpipe (LLVM 15.0.6, 256 bits)"),
  // or "" when it does not exist.
  const char* device_name(uint32_t index);

  VulkanStats stats() const;
  // Validation messages reported so far (0 without validation).
  uint64_t validation_messages() const;

  // Writes up to `capacity` bytes of device vulkan:index's pipeline cache
  // into `out` (null: only the size) and returns the full size, or 0 when
  // the device is not open.
  size_t pipeline_cache_data(uint32_t index, void* out, size_t capacity);

  // Destroys every Vulkan object. Every Method using the backend must be
  // gone. Afterwards the backend may open devices again.
  void shutdown();

 private:
  internal::BackendState& state();
  const internal::BackendState& state() const;

  alignas(16) unsigned char storage_[kStateBytes];
};

// Registers `backend` (not owned) in `registry`.
Error register_vulkan_backend(BackendRegistry& registry, VulkanBackend* backend);

}  // namespace kiln::backends::vulkan

#endif  // KILN_BACKENDS_VULKAN_VULKAN_BACKEND_H_
