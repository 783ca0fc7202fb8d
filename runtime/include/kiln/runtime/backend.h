// Backends: what the runtime needs from a device (CUDA, Vulkan) to run the
// parts of a program the planner gave it.
//
//   - Device memory: one allocation per device arena, made once when a
//     method is loaded (unless the application provides the buffer) and
//     released when the Method is destroyed; copies between host and device
//     and within a device, which the runtime issues for CopyCall
//     instructions.
//   - Delegates: init() once per delegate at method load (compile, upload,
//     record the work: every address is fixed by the plan), execute() per
//     DelegateCall, destroy() with the Method.
//
// A backend is an object the application (or the backend's own
// registration function) creates and registers; the runtime never owns or
// frees it. Backends take host memory for their own bookkeeping from the
// allocator they are handed (see Backend::state_bytes), never from the heap
// of the runtime. Threading: a backend's functions are called from the
// thread that loads or executes a Method.
//
// Adding a backend: a backend is a folder, backends/<name>/, that registers
// itself: a class implementing this interface and the backend's own
// register_<name>_backend() function, which the application calls once.
// Nothing in runtime/ changes.

#ifndef KILN_RUNTIME_BACKEND_H_
#define KILN_RUNTIME_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/bump_allocator.h"
#include "kiln/runtime/error.h"
#include "kiln/runtime/event_tracer.h"
#include "kiln/runtime/result.h"
#include "kiln/runtime/span.h"
#include "kiln/runtime/tensor.h"
#include "kiln/schema/device.h"

namespace kiln {

// One block of device memory (a device arena). `handle` is the backend's
// (a CUDA device pointer, a Vulkan buffer record); `size` its byte size.
struct DeviceBuffer {
  void* handle = nullptr;
  uint64_t size = 0;
};

// What a delegate reads of its method at init: every tensor (Tensor::arena()
// and Tensor::offset() locate device tensors) and every arena's device
// buffer (empty for host arenas).
class MethodView {
 public:
  virtual uint32_t num_tensors() const = 0;
  virtual const Tensor& tensor(uint32_t index) const = 0;
  virtual uint32_t num_arenas() const = 0;
  virtual DeviceBuffer arena(uint32_t index) const = 0;

 protected:
  ~MethodView() = default;
};

// What a delegate sees at init. Valid during init() only; the tensors and
// buffers it describes outlive the delegate.
struct DelegateContext {
  const fb::Delegate* delegate = nullptr;
  // The backend's blob (inline or from the program's data segment).
  Span<const uint8_t> blob;
  const MethodView* method = nullptr;
  // Host memory for the delegate's own state: the Delegate's state_bytes,
  // which the planner sized (Backend::state_bytes() must not exceed it).
  BumpAllocator* allocator = nullptr;
};

// The operands of one DelegateCall.
struct DelegateCallArgs {
  const Tensor* const* inputs = nullptr;
  const Tensor* const* outputs = nullptr;
  uint16_t num_inputs = 0;
  uint16_t num_outputs = 0;
  // Set while the Method is traced: the delegate may add TraceKind::kBackend
  // records of its own work (instruction is this call's index).
  EventTracer* tracer = nullptr;
  uint32_t instruction = 0;
};

class Communicator;
struct AllReduceArgs;
struct DevicePeers;

// What a device backend sees of one all-reduce it runs with kernels of its
// own (CollectiveCall.algorithm ONE_SHOT or TWO_SHOT) when a method loads.
// Valid during init_collective() only; the tensors, buffers and peers it
// describes outlive the handle.
struct CollectiveContext {
  const fb::CollectiveCall* call = nullptr;
  const char* name = "";  // the instruction's, for messages
  Device device;
  // The input, in the symmetric arena `input_arena` (this rank's copy), and
  // the output, in `output_arena` (a device arena of the same device).
  const Tensor* input = nullptr;
  const Tensor* output = nullptr;
  DeviceBuffer input_arena;
  DeviceBuffer output_arena;
  // Addends fused into the write (CollectiveCall.inputs after the first):
  // element i of the output adds element i mod numel of each, in order,
  // after the sum. Each lies in its arena, addend_arenas[a], on the device.
  const Tensor* addends[kMaxCollectiveAddends] = {};
  DeviceBuffer addend_arenas[kMaxCollectiveAddends];
  uint32_t num_addends = 0;
  // Every rank's copy of the symmetric arena (Communicator::device_peers),
  // and the communicator, to be told when a peer does not arrive
  // (Communicator::mark_failed). Not owned. `peers` nullptr: the
  // communicator hands out none, but enqueues the sum itself on a stream of
  // the device (Communicator::enqueue_all_reduce of `all_reduce`, the sum
  // as all_reduce() would take it, which the runtime has checked it
  // enqueues); the backend runs it where its kernel would run, then adds
  // the addends; kNotSupported where the backend cannot. `all_reduce` is
  // valid during init_collective only.
  const DevicePeers* peers = nullptr;
  Communicator* communicator = nullptr;
  const AllReduceArgs* all_reduce = nullptr;
  uint32_t rank = 0;
  // Host memory for the call's state: CollectiveCall.state_bytes.
  BumpAllocator* allocator = nullptr;
};

class Backend {
 public:
  // "vulkan", "cuda": the id the planner writes in Delegate.backend.
  virtual const char* id() const = 0;
  virtual DeviceType device_type() const = 0;

  // Device memory.
  virtual Error allocate(Device device, uint64_t size, uint32_t alignment, DeviceBuffer* out_buffer) = 0;
  virtual void release(Device device, DeviceBuffer buffer) = 0;
  virtual Error copy_to_device(Device device, DeviceBuffer dst, uint64_t dst_offset, const void* src,
                               uint64_t bytes) = 0;
  virtual Error copy_to_host(Device device, void* dst, DeviceBuffer src, uint64_t src_offset, uint64_t bytes) = 0;
  virtual Error copy_on_device(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src,
                               uint64_t src_offset, uint64_t bytes) = 0;
  // dst[i] += src[i mod period] for i < count, float32 elements on
  // `device`, ordered after the work already issued to it, as a copy is:
  // the addends of a collective that a communicator reduced (one without
  // device peers; CollectiveCall). count 0 asks whether the backend can.
  virtual Error accumulate(Device device, DeviceBuffer dst, uint64_t dst_offset, DeviceBuffer src, uint64_t src_offset,
                           uint64_t count, uint64_t period) {
    return Error::kNotSupported;
  }
  // A host-visible pointer for the bytes at `offset`, or nullptr when the
  // device's memory is not addressable from the host this way.
  virtual void* address(DeviceBuffer buffer, uint64_t offset) { return nullptr; }

  // Host bytes a delegate of this backend takes from DelegateContext::allocator.
  virtual uint64_t state_bytes(const fb::Delegate& delegate, Span<const uint8_t> blob) const = 0;
  // Returns the delegate's handle (in memory taken from context.allocator).
  virtual Result<void*> init(const DelegateContext& context) = 0;
  virtual Error execute(void* delegate, const DelegateCallArgs& args) = 0;
  virtual void destroy(void* delegate) = 0;

  // Device collectives: an all-reduce the backend runs with its own kernels
  // over the peers' symmetric arenas. Returns the call's handle (in memory
  // from context.allocator), which execute() runs (with the call's one
  // input and one output as args) and destroy() releases, as a delegate's.
  // kNotSupported (the default): the backend runs none; the runtime then
  // refuses to load the program.
  virtual Result<void*> init_collective(const CollectiveContext& context) {
    (void)context;
    return Error::kNotSupported;
  }

 protected:
  ~Backend() = default;
};

// A fixed-size table of backends, filled by explicit registration calls.
class BackendRegistry {
 public:
  static constexpr size_t kCapacity = 8;
  constexpr BackendRegistry() = default;

  // Adds `backend` (not owned; must outlive every Method using it), replacing
  // one with the same id. kRegistryFull when the table has no room.
  Error register_backend(Backend* backend);
  // nullptr when none has that id.
  Backend* find(const char* id) const;
  // The backend serving `type`, or nullptr.
  Backend* for_device(DeviceType type) const;

 private:
  Backend* backends_[kCapacity] = {};
  size_t count_ = 0;
};

// The registry Program::load_method uses unless given another.
BackendRegistry& global_backend_registry();

}  // namespace kiln

#endif  // KILN_RUNTIME_BACKEND_H_
