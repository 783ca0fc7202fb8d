// Internal state of a loaded Method, laid out in the bookkeeping buffer with
// the strides of schema/bookkeeping.h (abi::count_method gives the counts).
// Not part of the public API.

#ifndef KILN_RUNTIME_SRC_METHOD_INTERNAL_H_
#define KILN_RUNTIME_SRC_METHOD_INTERNAL_H_

#include <stdint.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/communicator.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/tensor.h"
#include "kiln/schema/bookkeeping.h"

namespace kiln {
namespace internal {

enum class InstructionKind : uint8_t {
  kKernel,
  kCopyHost,      // memcpy
  kCopyToDevice,  // host -> device
  kCopyToHost,    // device -> host
  kCopyOnDevice,  // device -> device, one backend
  kDelegate,
  kCollective,  // args.inputs[0] reduced into args.outputs[0]
  // A collective the device's backend runs with its own kernels: called
  // like a delegate (backend, delegate: the handle init_collective gave).
  kDeviceCollective,
};

// One per instruction. A copy uses args.inputs[0] as source and
// args.outputs[0] as destination; a delegate call its inputs and outputs.
struct ArenaState;

struct InstructionState {
  KernelArgs args;
  union {
    KernelRunFn run;           // kernels
    void* delegate;            // delegate calls and device collectives: the handle
    const ArenaState* arenas;  // copies and collectives: the method's arenas
  };
  Backend* backend;  // copies to, from or on a device; delegate calls; device collectives
  InstructionKind kind;
  fb::ReduceOp reduce_op;  // collectives
};

// Runs one resolved instruction (the execute loop and load-time uploads);
// a delegate call gets `tracer` and the instruction's index to add records to.
Error run_instruction(const InstructionState& state, EventTracer* tracer = nullptr, uint32_t index = 0);

struct ArenaState;
// The communicator's view of a collective's sum (its state's arenas set).
AllReduceArgs all_reduce_args(const InstructionState& state);

struct ArenaState {
  uint8_t* base;  // host arenas
  uint64_t size;
  DeviceBuffer device;  // device arenas
  Backend* backend;     // device arenas
  Device where;
  bool owned;  // allocated by the backend at load: released by ~Method
  // Symmetric arenas mapped by a communicator (released by ~Method); null
  // for ordinary arenas and for a one-rank group without one, whose
  // collectives are copies.
  Communicator* communicator;
  SymmetricMemory symmetric;
};

struct DelegateState {
  Backend* backend;
  void* handle;
};

// Tensor flags.
constexpr uint8_t kTensorUser = 1;   // bound by the application
constexpr uint8_t kTensorAlias = 2;  // data follows alias_root_
constexpr uint8_t kTensorConstant = 4;
constexpr uint8_t kTensorBound = 8;  // user tensor with memory: bound, or planned fallback

static_assert(sizeof(Tensor) <= abi::kTensorSlotBytes, "Tensor outgrew its bookkeeping slot");
static_assert(sizeof(InstructionState) <= abi::kInstructionSlotBytes, "InstructionState outgrew its bookkeeping slot");
static_assert(sizeof(const Tensor*) <= abi::kOperandSlotBytes, "operand slot");
static_assert(sizeof(ArenaState) <= abi::kArenaSlotBytes, "ArenaState outgrew its slot");
static_assert(sizeof(DelegateState) <= abi::kDelegateSlotBytes, "DelegateState outgrew its slot");

inline uint32_t list_size(const flatbuffers::Vector<uint32_t>* list) { return list != nullptr ? list->size() : 0; }

}  // namespace internal
}  // namespace kiln

#endif  // KILN_RUNTIME_SRC_METHOD_INTERNAL_H_
