// The runtime's bookkeeping ABI: how many bytes a method's state takes.
//
// One definition for both sides of the contract: the planner writes
// Method.bookkeeping_bytes with method_bookkeeping_bytes() below (it packs
// the method it built and counts the packed table), the runtime's loader
// checks that figure with the same function and lays its per-method state
// out from count_method() with exactly these strides (it static_asserts
// that its structs fit their slots). So the number an app reads from
// MethodMeta, or from the header `kiln pack` writes, is the exact size of
// the buffer to hand the bookkeeping allocator: not an estimate, and the
// same on 32-bit firmware and 64-bit hosts. Header-only, no heap, usable in
// firmware.
//
// The figure assumes the buffer starts at a multiple of kBookkeepingAlignment;
// every array the runtime takes from it is a multiple of that size, so no
// padding is ever inserted between them.
//
// Layout of a method's bookkeeping buffer:
//
//   +----------------------+-------------------------+---------------+----------+------------+-------------+
//   | tensors              | instructions            | operands      | arenas   | delegates  | delegate    |
//   | n_tensors * 64       | n_instructions * 80     | n_operands * 8| n * 48   | n * 32     | state bytes |
//   +----------------------+-------------------------+---------------+----------+------------+-------------+
//   then, for a method with inputs bounded above (Method.symbols), one
//   8-byte value per symbol, one 64-byte slot of dimensions (kMaxRank
//   int64) per tensor that has a DynamicDim on an axis, and one 8-byte
//   slot per instruction (its kernel's check, run again when sizes change).
//   Instructions count those run at load (init_instructions) too. The
//   delegate state bytes are every delegate's, then every collective's a
//   device backend runs (CollectiveCall.state_bytes).
//   each section rounded up to 16 bytes; empty sections take no bytes.

#ifndef KILN_SCHEMA_BOOKKEEPING_H_
#define KILN_SCHEMA_BOOKKEEPING_H_

#include <cstdint>

#include "kiln/schema/program_generated.h"

namespace kiln {
namespace abi {

constexpr uint64_t kBookkeepingAlignment = 16;
constexpr uint64_t kTensorSlotBytes = 64;
constexpr uint64_t kInstructionSlotBytes = 80;
constexpr uint64_t kOperandSlotBytes = 8;
constexpr uint64_t kArenaSlotBytes = 80;
// Communicator groups a method may name (0 to kMaxCommunicatorGroups - 1).
constexpr uint32_t kMaxCommunicatorGroups = 8;
constexpr uint64_t kDelegateSlotBytes = 32;
constexpr uint64_t kSymbolSlotBytes = 8;
constexpr uint64_t kDynamicTensorSlotBytes = 64;
constexpr uint64_t kCheckSlotBytes = 8;
// DynamicDim.axis of an alias's byte offset.
constexpr uint32_t kAliasOffset = 0xFFFFFFFFu;

constexpr uint64_t round_up_bookkeeping(uint64_t n) {
  return (n + kBookkeepingAlignment - 1) / kBookkeepingAlignment * kBookkeepingAlignment;
}

struct MethodCounts {
  uint64_t tensors = 0;
  uint64_t instructions = 0;
  // Sum over instructions of the tensor indices the runtime resolves:
  // kernel inputs + outputs + scratch, delegate and collective inputs +
  // outputs, 2 per copy.
  uint64_t operands = 0;
  uint64_t arenas = 0;
  uint64_t delegates = 0;
  // Host bytes the delegates' backends declared for their own state.
  uint64_t delegate_state_bytes = 0;
  // Method.symbols, and the tensors with a DynamicDim on an axis.
  uint64_t symbols = 0;
  uint64_t dynamic_tensors = 0;
};

constexpr uint64_t bookkeeping_bytes(const MethodCounts& c) {
  return round_up_bookkeeping(c.tensors * kTensorSlotBytes) +
         round_up_bookkeeping(c.instructions * kInstructionSlotBytes) +
         round_up_bookkeeping(c.operands * kOperandSlotBytes) + round_up_bookkeeping(c.arenas * kArenaSlotBytes) +
         round_up_bookkeeping(c.delegates * kDelegateSlotBytes) + round_up_bookkeeping(c.delegate_state_bytes) +
         round_up_bookkeeping(c.symbols * kSymbolSlotBytes) +
         round_up_bookkeeping(c.dynamic_tensors * kDynamicTensorSlotBytes) +
         round_up_bookkeeping((c.symbols > 0 ? c.instructions : 0) * kCheckSlotBytes);
}

// Adds the instructions of `list` (nullptr: none) and the tensor indices they
// resolve to `out_counts`.
inline void add_instruction_counts(const flatbuffers::Vector<flatbuffers::Offset<fb::Instruction>>* list,
                                   MethodCounts* out_counts) {
  if (list == nullptr) return;
  auto size = [](const flatbuffers::Vector<int32_t>* operands) -> uint64_t {
    return operands != nullptr ? operands->size() : 0;
  };
  out_counts->instructions += list->size();
  for (const fb::Instruction* instruction : *list) {
    switch (instruction->kind_type()) {
      case fb::InstructionKind::KernelCall: {
        const fb::KernelCall* call = instruction->kind_as_KernelCall();
        out_counts->operands += size(call->inputs()) + size(call->outputs()) + size(call->scratch());
        break;
      }
      case fb::InstructionKind::CopyCall: out_counts->operands += 2; break;
      case fb::InstructionKind::DelegateCall: {
        const fb::DelegateCall* call = instruction->kind_as_DelegateCall();
        out_counts->operands += size(call->inputs()) + size(call->outputs());
        break;
      }
      case fb::InstructionKind::CollectiveCall: {
        const fb::CollectiveCall* call = instruction->kind_as_CollectiveCall();
        out_counts->operands += size(call->inputs()) + size(call->outputs());
        break;
      }
      default: break;
    }
  }
}

// What `method`'s bookkeeping holds. Reads only vector sizes and the
// instructions' kinds; the runtime calls it on programs that passed
// flatbuffer verification.
inline MethodCounts count_method(const fb::Method& method) {
  MethodCounts counts;
  counts.tensors = method.tensors() != nullptr ? method.tensors()->size() : 0;
  counts.arenas = method.arenas() != nullptr ? method.arenas()->size() : 0;
  if (method.delegates() != nullptr) {
    counts.delegates = method.delegates()->size();
    for (const fb::Delegate* delegate : *method.delegates()) {
      // Each delegate's state starts 16-byte aligned.
      counts.delegate_state_bytes += round_up_bookkeeping(delegate->state_bytes());
    }
  }
  // A collective a device backend runs (CollectiveCall.algorithm) keeps its
  // state after the delegates', in instruction order.
  if (method.instructions() != nullptr) {
    for (const fb::Instruction* instruction : *method.instructions()) {
      const fb::CollectiveCall* call = instruction->kind_as_CollectiveCall();
      if (call != nullptr) counts.delegate_state_bytes += round_up_bookkeeping(call->state_bytes());
    }
  }
  add_instruction_counts(method.init_instructions(), &counts);
  add_instruction_counts(method.instructions(), &counts);
  counts.symbols = method.symbols() != nullptr ? method.symbols()->size() : 0;
  if (method.dynamic_dims() != nullptr) {
    // Sorted by tensor: each tensor with an axis entry counts once.
    uint64_t last = ~uint64_t{0};
    for (const fb::DynamicDim* d : *method.dynamic_dims()) {
      if (d->axis() == kAliasOffset || d->tensor() == last) continue;
      last = d->tensor();
      ++counts.dynamic_tensors;
    }
  }
  return counts;
}

// The figure the planner writes into Method.bookkeeping_bytes.
inline uint64_t method_bookkeeping_bytes(const fb::Method& method) { return bookkeeping_bytes(count_method(method)); }

}  // namespace abi
}  // namespace kiln

#endif  // KILN_SCHEMA_BOOKKEEPING_H_
