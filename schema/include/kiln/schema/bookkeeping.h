// The runtime's bookkeeping ABI: how many bytes a method's state takes.
//
// The planner writes Method.bookkeeping_bytes with bookkeeping_bytes() below,
// and the runtime lays its per-method state out with exactly these strides
// (it static_asserts that its structs fit their slots). So the number an app
// reads from MethodMeta, or from the header `kiln pack` writes, is the exact
// size of the buffer to hand the bookkeeping allocator: not an estimate, and
// the same on 32-bit firmware and 64-bit hosts.
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
//   Instructions count those run at load (init_instructions) too.
//   each section rounded up to 16 bytes; empty sections take no bytes.

#ifndef KILN_SCHEMA_BOOKKEEPING_H_
#define KILN_SCHEMA_BOOKKEEPING_H_

#include <cstdint>

namespace kiln {
namespace abi {

constexpr uint64_t kBookkeepingAlignment = 16;
constexpr uint64_t kTensorSlotBytes = 64;
constexpr uint64_t kInstructionSlotBytes = 80;
constexpr uint64_t kOperandSlotBytes = 8;
constexpr uint64_t kArenaSlotBytes = 48;
constexpr uint64_t kDelegateSlotBytes = 32;

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
};

constexpr uint64_t bookkeeping_bytes(const MethodCounts& c) {
  return round_up_bookkeeping(c.tensors * kTensorSlotBytes) +
         round_up_bookkeeping(c.instructions * kInstructionSlotBytes) +
         round_up_bookkeeping(c.operands * kOperandSlotBytes) +
         round_up_bookkeeping(c.arenas * kArenaSlotBytes) +
         round_up_bookkeeping(c.delegates * kDelegateSlotBytes) +
         round_up_bookkeeping(c.delegate_state_bytes);
}

}  // namespace abi
}  // namespace kiln

#endif  // KILN_SCHEMA_BOOKKEEPING_H_
