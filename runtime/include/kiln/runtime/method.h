// Method: one loaded method of a Program, ready to execute.
//
// The planner fixed every address; loading a method only resolves them: each
// tensor gets the pointer its storage names (an arena offset, a constant in
// the program's segment, or memory the application binds), each instruction
// its kernel. execute() then runs the flat instruction list, nothing else: no
// search, no allocation, no validation beyond what load did.
//
// Memory (MemoryManager):
//   - bookkeeping: the method's own state; MethodMeta::bookkeeping_bytes()
//     bytes, 16-byte aligned, exactly.
//   - arenas: one span per arena of the method, in the order of
//     MethodMeta::arena(i), each at least that size and aligned as stated.
//     Spans of device arenas are left empty.
//   - device_arenas (optional): device buffers the application provides for
//     device arenas; an arena without one is allocated by its backend at
//     load (one allocation per arena) and released by ~Method.
// The Method does not own any of this memory; all of it, the Program and its
// data must outlive the Method.
//
// Ranks: a method with collectives runs on every rank of its communicator
// groups at once, each rank loading the same program. Loading maps the
// symmetric arenas through the communicators (a collective step: every rank
// loads its methods in the same order), checks that the group has the size
// the program was planned for and that every rank planned the same layout
// (kCommunicatorMismatch otherwise), and picks this rank's shard of every
// per-rank constant.
//
// Devices: tensors on a device are reached through their backend. Binding a
// host buffer to a device tensor (or the reverse) is kDeviceMismatch; device
// inputs and outputs (planned with `kiln plan --device-io`) live in the
// device arena, and location() tells where.
//
// Inputs and outputs are bound, zero copy, with set_input()/set_output(): the
// application's buffers are used in place until they are re-bound.
//
// Not thread safe: one thread executes a Method at a time. Separate Methods
// (with separate bookkeeping and arenas) may run concurrently. Within one
// execute(), kernels split large work across the ThreadPool the application
// sets (set_thread_pool); the results are the same bits with or without it.

#ifndef KILN_RUNTIME_METHOD_H_
#define KILN_RUNTIME_METHOD_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/bump_allocator.h"
#include "kiln/runtime/communicator.h"
#include "kiln/runtime/event_tracer.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/method_meta.h"
#include "kiln/runtime/result.h"
#include "kiln/runtime/span.h"
#include "kiln/runtime/tensor.h"
#include "kiln/runtime/thread_pool.h"

namespace kiln {

struct MemoryManager {
  BumpAllocator* bookkeeping = nullptr;
  // Read during load only; the memory the spans point to must outlive the Method.
  Span<const Span<uint8_t>> arenas;
  // Optional, indexed like arenas: a buffer with a null handle is allocated
  // by the backend.
  Span<const DeviceBuffer> device_arenas;
  // Optional, indexed by communicator group: communicators[g] runs group
  // g's collectives and maps its symmetric arenas (whose spans in `arenas`
  // are then ignored). A group of one rank needs none: its symmetric arenas
  // are host arenas like any other and its collectives copies. Not owned;
  // each must outlive the Method. See communicator.h.
  Span<Communicator* const> communicators;
};

class BackendRegistry;

namespace internal {
struct InstructionState;
struct ArenaState;
struct DelegateState;
}  // namespace internal

class Method {
 public:
  Method(Method&& other) noexcept;
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;
  Method& operator=(Method&&) = delete;
  ~Method();

  MethodMeta meta() const { return MethodMeta(method_); }
  size_t num_inputs() const;
  size_t num_outputs() const;

  // Binds `size` bytes at `data` as input `index` (read, never written).
  // kInvalidArgument for an index out of range or null data, kBufferTooSmall
  // when size < the input's byte size, kBufferMisaligned when data is not
  // aligned to the element size.
  Error set_input(size_t index, const void* data, size_t size);
  // Binds memory the method writes output `index` into.
  Error set_output(size_t index, void* data, size_t size);

  // Binds a tensor the application describes, checking it against what the
  // method expects first: kDTypeMismatch, kShapeMismatch or kDeviceMismatch
  // when it differs, then as above. The tensor's dims need not outlive the
  // call; its data must stay valid while bound.
  Error set_input(size_t index, const Tensor& tensor);
  Error set_output(size_t index, const Tensor& tensor);

  // The input or output tensor (its data is what is bound, or the planned
  // fallback); nullptr for an index out of range.
  const Tensor* input(size_t index) const;
  const Tensor* output(size_t index) const;

  // Where a tensor's bytes are: for a device tensor, its arena's device
  // buffer and the offset in it.
  struct Location {
    Device device;
    DeviceBuffer buffer;
    uint64_t offset = 0;
    uint64_t nbytes = 0;
  };
  // kInvalidArgument for an index out of range, kDeviceMismatch for a tensor
  // on the host (use input()/output()).
  Result<Location> input_location(size_t index) const;
  Result<Location> output_location(size_t index) const;

  // Runs every instruction once. kNotBound when an input or output without
  // planned fallback memory is not bound.
  Error execute();

  // Called after every instruction with its index and the ticks it took
  // (kiln_pal_ticks); nullptr to stop. For profiling; adds two tick reads
  // per instruction while set.
  using InstructionObserver = void (*)(void* context, size_t instruction, uint64_t ticks);
  void set_observer(InstructionObserver observer, void* context) {
    observer_ = observer;
    observer_context_ = context;
  }
  // Records every execute() and instruction into `tracer` (not owned; must
  // outlive the Method or be unset with nullptr); delegates may add their
  // own records. See event_tracer.h.
  void set_tracer(EventTracer* tracer) { tracer_ = tracer; }
  // Lends `pool`'s threads to the CPU kernels from the next execute() on;
  // nullptr runs them on the calling thread (the default). Not owned; must
  // outlive the Method or be unset first. See thread_pool.h.
  void set_thread_pool(ThreadPool* pool);

 private:
  friend class MethodLoader;
  Method() = default;
  Error bind(uint32_t tensor_index, void* data, size_t size);
  Error bind_checked(uint32_t tensor_index, const Tensor& given);
  void refresh_aliases();
  // Recomputes every extent that follows a bounded input from the inputs'
  // bound shapes, then runs the kernels' checks at the changed extents.
  Error refresh_shapes();
  // A bit per axis of tensor t that follows a bounded input.
  uint32_t dynamic_axes(uint32_t t) const;
  Result<Location> location(uint32_t tensor_index) const;
  void release();

  const fb::Method* method_ = nullptr;
  Tensor* tensors_ = nullptr;
  uint32_t num_tensors_ = 0;
  internal::InstructionState* instructions_ = nullptr;
  uint32_t num_instructions_ = 0;
  internal::ArenaState* arenas_ = nullptr;
  uint32_t num_arenas_ = 0;
  internal::DelegateState* delegates_ = nullptr;
  uint32_t num_delegates_ = 0;
  // Inputs bounded above: each symbol's value (Method.symbols) and each
  // instruction's kernel check, run again when the values change.
  int64_t* symbol_values_ = nullptr;
  uint32_t num_symbols_ = 0;
  const KernelCheckFn* checks_ = nullptr;
  bool aliases_stale_ = true;
  bool shapes_stale_ = false;
  bool moved_from_ = false;
  InstructionObserver observer_ = nullptr;
  void* observer_context_ = nullptr;
  EventTracer* tracer_ = nullptr;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_METHOD_H_
