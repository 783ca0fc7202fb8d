// The semantic checks Program::load runs on a program that passed the
// flatbuffers Verifier, and the overflow-checked arithmetic they and the
// loader share. Not part of the public API.
//
// Trust boundary: validate once at load; execute runs without checks. Every
// fact the rest of the runtime relies on (indices in range, byte sizes that
// agree, tensors inside aligned arenas, no alias cycle, nothing read-only
// written, enough bookkeeping) is established here and nowhere else.

#ifndef KILN_RUNTIME_SRC_PROGRAM_VALIDATOR_H_
#define KILN_RUNTIME_SRC_PROGRAM_VALIDATOR_H_

#include <stdint.h>

#include "kiln/runtime/error.h"
#include "kiln/schema/program_generated.h"

namespace kiln {
namespace internal {

inline bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }
inline bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }
inline bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// Checks that every entry of `refs` (nullptr: none) lies inside the
// `segment_size`-byte data segment at a multiple of `alignment`. `what`
// names the table in messages ("constant", "delegate segment").
Error validate_data_refs(const flatbuffers::Vector<const fb::DataRef*>* refs, uint64_t segment_size, uint32_t alignment,
                         const char* what);

// Checks every semantic rule of `method`, one of `program`'s methods, after
// `program`'s constants and segments were checked with validate_data_refs.
// On failure, logs one line naming the method and the tensor, arena,
// delegate or instruction at fault.
Error validate_method(const fb::Program& program, const fb::Method& method);

// Checks Program.arena_groups, after every method was checked: method
// indices in range, each method in one group at most, and each group's
// buffer large enough for every member's host arenas (schema/arena_layout.h).
Error validate_arena_groups(const fb::Program& program);

}  // namespace internal
}  // namespace kiln

#endif  // KILN_RUNTIME_SRC_PROGRAM_VALIDATOR_H_
