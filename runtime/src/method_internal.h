// Internal state of a loaded Method, laid out in the bookkeeping buffer with
// the strides of schema/bookkeeping.h. Not part of the public API.

#ifndef KILN_RUNTIME_SRC_METHOD_INTERNAL_H_
#define KILN_RUNTIME_SRC_METHOD_INTERNAL_H_

#include <stdint.h>

#include "kiln/runtime/kernel.h"
#include "kiln/runtime/tensor.h"
#include "kiln/schema/bookkeeping.h"

namespace kiln {
namespace internal {

enum class InstructionKind : uint8_t { kKernel, kCopy, kDelegate, kCollective };

// One per instruction. A copy uses args.inputs[0] as source and
// args.outputs[0] as destination.
struct InstructionState {
  KernelRunFn run;
  KernelArgs args;
  InstructionKind kind;
};

struct ArenaState {
  uint8_t* base;
  uint64_t size;
};

// Tensor flags.
constexpr uint8_t kTensorUser = 1;      // bound by the application
constexpr uint8_t kTensorAlias = 2;     // data follows alias_root_
constexpr uint8_t kTensorConstant = 4;
constexpr uint8_t kTensorBound = 8;     // user tensor with memory: bound, or planned fallback

static_assert(sizeof(Tensor) <= abi::kTensorSlotBytes, "Tensor outgrew its bookkeeping slot");
static_assert(sizeof(InstructionState) <= abi::kInstructionSlotBytes,
              "InstructionState outgrew its bookkeeping slot");
static_assert(sizeof(const Tensor*) <= abi::kOperandSlotBytes, "operand slot");
static_assert(sizeof(ArenaState) <= abi::kArenaSlotBytes, "ArenaState outgrew its slot");

// Counts the runtime's bookkeeping needs for `method`; the program must have
// passed validation.
abi::MethodCounts count_method(const fb::Method& method);

}  // namespace internal
}  // namespace kiln

#endif  // KILN_RUNTIME_SRC_METHOD_INTERNAL_H_
