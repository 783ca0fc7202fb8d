// Memory planning of a lowered method: lifetimes from the instruction list,
// one arena per (device, kind) or per memory region (memory/regions.h),
// aliases merged into their base, and each arena solved as a bare Problem
// (memory/problem.h).

#ifndef KILN_PLANNER_MEMORY_METHOD_PLAN_H_
#define KILN_PLANNER_MEMORY_METHOD_PLAN_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "lower/program.h"
#include "memory/problem.h"
#include "memory/regions.h"

namespace kiln::planner::memory {

struct MethodPlanOptions {
  SolveOptions solve;
  // Arena alignment: every planned offset is a multiple of it.
  uint32_t alignment = 64;
  // Alignment of device arenas, when a device needs more (by device).
  std::function<uint32_t(const fb::Device&)> device_alignment;
  // Memory regions of the host (memory/regions.h); empty: one host arena.
  std::vector<MemoryRegion> regions;
  // With regions: copy the constants read most per byte into the fast
  // regions' room left after planning, at load (memory/regions.h).
  bool hot_constants = false;
};

// First and last instruction touching each tensor's bytes, per root tensor
// (an alias extends its base's lifetime); -1 for tensors nothing touches.
// User tensors with fallback memory live across the whole method.
struct Lifetimes {
  std::vector<int> first;
  std::vector<int> last;
};
Lifetimes compute_lifetimes(const LMethod& method);

// Fills LTensor::arena/offset and LMethod::arenas.
void plan_method_memory(LMethod& method, const MethodPlanOptions& options);

}  // namespace kiln::planner::memory

#endif  // KILN_PLANNER_MEMORY_METHOD_PLAN_H_
