// The null backend's runtime half: the smallest complete backend, and the
// template to copy for a new one. Its "device" is host memory and its
// delegates run the CPU kernels, so every part of the seam a real
// accelerator uses (device arenas allocated at load, copies at device
// boundaries, constants uploaded once, delegate init/execute/destroy,
// in-place rules checked by the backend) runs for real on any machine.
//
//   static uint8_t pool[1 << 20];
//   kiln::backends::null::NullOptions options;
//   options.memory = {pool, sizeof(pool)};
//   static kiln::backends::null::NullBackend backend(options);
//   backend_registry.register_backend(&backend);
//
// Memory: device arenas are carved from `NullOptions::memory` (not owned;
// must outlive the backend), first come first served; the pool is reused
// once every arena is released. Nothing is allocated on the heap.
// Delegates: init() resolves each kernel call of the delegate's blob in
// the kernel registry, checks its operands (the kernel's own check, and
// that an output shares bytes with an input only where the kernel declares
// it may), and lays its steps out in the delegate's state bytes; execute()
// runs the steps in order without further checks.
//
// Threading: as for every backend, one thread loads or executes a given
// Method at a time; allocation is not thread safe.

#ifndef KILN_BACKENDS_NULL_NULL_BACKEND_H_
#define KILN_BACKENDS_NULL_NULL_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/kernel.h"

namespace kiln::backends::null {

struct NullOptions {
  // Memory for device arenas. Must outlive the backend.
  Span<uint8_t> memory;
  // Where kernel names resolve (not owned); nullptr: the global registry.
  const KernelRegistry* kernels = nullptr;
};

class NullBackend final : public Backend {
 public:
  explicit NullBackend(const NullOptions& options) : options_(options) {}

  const char* id() const override { return "null"; }
  DeviceType device_type() const override { return DeviceType::NULL_DEVICE; }
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
  void destroy(void* delegate) override {}

  // Bytes of the pool in use by live arenas (and their alignment padding).
  uint64_t bytes_in_use() const { return used_; }
  // Arenas allocated and not yet released.
  uint32_t live_arenas() const { return live_; }

 private:
  NullOptions options_;
  uint64_t used_ = 0;
  uint32_t live_ = 0;
};

}  // namespace kiln::backends::null

#endif  // KILN_BACKENDS_NULL_NULL_BACKEND_H_
