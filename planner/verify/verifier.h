// The independent verifier: checks the memory plan of a finished .kiln file
// without trusting anything the planner computed. It reads the program,
// rebuilds every tensor's lifetime from the instruction list on its own, and
// reports:
//   - two tensors whose lifetimes overlap and whose bytes overlap in one
//     arena, unless one is a declared alias of the other;
//   - a tensor that lies outside its arena, or whose offset is not aligned;
//   - an alias larger than its base, or on another device.
// Each violation names both tensors. `kiln verify` and the planner (after
// every plan) run it.

#ifndef KILN_PLANNER_VERIFY_VERIFIER_H_
#define KILN_PLANNER_VERIFY_VERIFIER_H_

#include <string>
#include <vector>

namespace kiln::planner {

// Empty when the plan is valid. A file that is not a valid kiln flatbuffer
// gives one message saying so.
std::vector<std::string> verify_program(const std::string& bytes);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_VERIFY_VERIFIER_H_
