// The memory plan report of `kiln plan --report DIR`:
//   plan.json   arenas (size, lower bound, where the peak is and what is
//               live there, device, kind, how the plan was made) and tensors
//               (arena, offset, size, first/last instruction, alias base,
//               device), for scripts; other parts of the planner add keys;
//   memory.svg  a picture of each arena: instructions left to right,
//               addresses bottom to top, one box per tensor (hover for name,
//               size and lifetime), the peak instruction and the lower bound
//               marked. Hand-written SVG, no dependencies.
// Pure functions of a plan; they do not modify it.

#ifndef KILN_PLANNER_REPORT_PLAN_REPORT_H_
#define KILN_PLANNER_REPORT_PLAN_REPORT_H_

#include <string>

#include "lower/program.h"
#include "pipeline.h"

namespace kiln::planner {

// The method's plan as JSON (one method: the program's first). Beside
// arenas and tensors: "inplace" (counts and bytes saved), "aliases" (each
// alias, its base, and whether an in-place kernel or a view made it),
// "delegates" (each run of kernels on one device that becomes a delegate
// call), "copies" (cross-device copies per run and at load).
std::string plan_json(const PlanResult& result);
std::string memory_svg(const LProgram& program);

// Creates `dir` if needed and writes both files into it (atomically each).
void write_plan_report(const PlanResult& result, const std::string& dir);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_REPORT_PLAN_REPORT_H_
