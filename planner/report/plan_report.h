// The memory plan report of `kiln plan --report DIR`:
//   plan.json   arenas (size, lower bound, where the peak is and what is
//               live there, device, kind, how the plan was made) and tensors
//               (arena, offset, size, first/last instruction, alias base,
//               device), for scripts; other parts of the planner add keys;
//   memory.svg  a picture of each arena: instructions left to right,
//               addresses bottom to top, one box per tensor (hover for name,
//               size and lifetime), the peak instruction and the lower bound
//               marked. Hand-written SVG, no dependencies.
// Pure functions of a planned LProgram; they do not modify it.

#ifndef KILN_PLANNER_REPORT_PLAN_REPORT_H_
#define KILN_PLANNER_REPORT_PLAN_REPORT_H_

#include <string>

#include "lower/program.h"

namespace kiln::planner {

// The method's plan as JSON (one method: the program's first).
std::string plan_json(const LProgram& program);
std::string memory_svg(const LProgram& program);

// Creates `dir` if needed and writes both files into it (atomically each).
void write_plan_report(const LProgram& program, const std::string& dir);

// "cpu:0", "cuda:1"
std::string device_name(const fb::Device& device);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_REPORT_PLAN_REPORT_H_
