// How a method's host arenas lie in one buffer: the layout both the planner
// (Program.arena_groups' host_bytes) and the runtime (MethodMeta's
// host_arena_bytes and split_host_arenas) use, so a buffer sized from the
// program is always large enough.
//
// The host arenas (those on the CPU) in method order, each at the next
// multiple of its alignment from where the one before ended:
//
//   buffer start (aligned to the largest alignment)
//   +----------+-----+------------+-----+----------+
//   | arena 0  | pad | arena 2    | pad | arena 3  |   (arena 1 on a device:
//   +----------+-----+------------+-----+----------+    no bytes here)
//
// Methods that never run at the same time (one ArenaGroup) each lay their
// arenas from the start of the same buffer. Header-only, no heap, usable in
// firmware. Sums saturate at UINT64_MAX, which no buffer has.

#ifndef KILN_SCHEMA_ARENA_LAYOUT_H_
#define KILN_SCHEMA_ARENA_LAYOUT_H_

#include <cstdint>

#include "kiln/schema/program_generated.h"

namespace kiln {
namespace abi {

constexpr uint64_t kNoHostArena = UINT64_MAX;

// Where an arena of `size` bytes aligned to `alignment` starts when the one
// before ends at `end`, and (through out_end) where it ends.
inline uint64_t next_arena_offset(uint64_t end, uint64_t size, uint32_t alignment, uint64_t* out_end) {
  const uint64_t a = alignment == 0 ? 1 : alignment;
  const uint64_t offset = end > UINT64_MAX - (a - 1) ? UINT64_MAX : (end + a - 1) / a * a;
  *out_end = offset > UINT64_MAX - size ? UINT64_MAX : offset + size;
  return offset;
}

inline bool is_host_arena(const fb::Arena& arena) {
  return arena.device() == nullptr || arena.device()->type() == fb::DeviceType::CPU;
}

// The offset of arena `index` of `method` in its host buffer, or
// kNoHostArena for an arena on a device. Through out_end, where the method's
// host arenas end: the bytes its buffer needs.
inline uint64_t host_arena_offset(const fb::Method& method, uint32_t index, uint64_t* out_end) {
  uint64_t end = 0;
  uint64_t found = kNoHostArena;
  const auto* arenas = method.arenas();
  for (uint32_t i = 0; arenas != nullptr && i < arenas->size(); ++i) {
    const fb::Arena& arena = *arenas->Get(i);
    if (!is_host_arena(arena)) continue;
    const uint64_t offset = next_arena_offset(end, arena.size(), arena.alignment(), &end);
    if (i == index) found = offset;
  }
  *out_end = end;
  return found;
}

// Bytes of one buffer holding all of the method's host arenas.
inline uint64_t host_arena_bytes(const fb::Method& method) {
  uint64_t end = 0;
  (void)host_arena_offset(method, UINT32_MAX, &end);
  return end;
}

// The alignment the buffer's start needs: the largest of the host arenas'.
inline uint32_t host_arena_alignment(const fb::Method& method) {
  uint32_t alignment = 1;
  const auto* arenas = method.arenas();
  for (uint32_t i = 0; arenas != nullptr && i < arenas->size(); ++i) {
    const fb::Arena& arena = *arenas->Get(i);
    if (is_host_arena(arena) && arena.alignment() > alignment) alignment = arena.alignment();
  }
  return alignment;
}

}  // namespace abi
}  // namespace kiln

#endif  // KILN_SCHEMA_ARENA_LAYOUT_H_
