// What the two halves of the null backend agree on: the planner half sizes
// each delegate's host state with these figures, the runtime half
// static_asserts that its records fit them. Which kernels it runs, and
// which inputs each may overwrite, is the CPU kernels' own table
// (KernelEntry), read by both halves.

#ifndef KILN_BACKENDS_NULL_NULL_ABI_H_
#define KILN_BACKENDS_NULL_NULL_ABI_H_

#include <stdint.h>

namespace kiln::backends::null {

// A delegate's state: a header, one step per kernel call, one pointer per
// operand (inputs, outputs and scratch of every call).
constexpr uint64_t kDelegateHeaderBytes = 16;
constexpr uint64_t kStepBytes = 64;
constexpr uint64_t kOperandBytes = 8;

// Offsets in null arenas: what the widest vector kernels want.
constexpr uint32_t kArenaAlignment = 64;

// Devices null:0 .. null:3 may be addressed (all share one memory pool).
constexpr int kMaxDevices = 4;

}  // namespace kiln::backends::null

#endif  // KILN_BACKENDS_NULL_NULL_ABI_H_
