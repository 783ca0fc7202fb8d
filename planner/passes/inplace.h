// In-place reuse: an element-wise output takes the bytes of an input that
// dies at that op, and pure views (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, inference Dropout) take their input's bytes with no instruction.
//
// Two questions, answered by two parties:
//   - may the kernel write its output over input i? The kernel declares it
//     (KernelEntry::inplace_inputs): it reads each element before writing it.
//   - should the planner do it for this op? The policy: by default every op
//     whose kernel declares an input; `kiln plan --inplace-ops LIST` names the
//     ONNX ops instead, `--no-inplace` turns reuse off.
//
// Safety rules, checked for an output `out` of instruction k and a declared
// input `in` (input 0 first, then input 1):
//   1. the last use of in's bytes (through any alias of them) is k;
//   2. in's bytes appear in no other operand of k;
//   3. in's bytes are not a method input, method output or constant, and out
//      is not a method output (both are planned memory);
//   4. in and out have the same byte size, dtype and device (a broadcast that
//      makes the output larger never aliases);
// Chains resolve to one buffer: an output placed over an alias joins the
// alias's base, so relu -> sigmoid -> tanh use one set of bytes.
// The alias is explicit in the program (AliasStorage names the base), and
// the verifier accepts an overlap only through such a declared alias.

#ifndef KILN_PLANNER_PASSES_INPLACE_H_
#define KILN_PLANNER_PASSES_INPLACE_H_

#include <optional>
#include <set>
#include <string>

#include "lower/program.h"

namespace kiln::planner {

struct InplaceOptions {
  bool enabled = true;
  // ONNX op types allowed to reuse in place; nullopt: every op whose kernel
  // declares an input (and the pure views).
  std::optional<std::set<std::string>> ops;
};

struct InplaceStats {
  int outputs_in_place = 0;  // kernel outputs written over a dying input
  int views = 0;             // view ops that became aliases (no instruction left)
};

// The ONNX ops whose lowering is a pure view of the input's bytes.
const std::set<std::string>& view_ops();

// Rewrites `method`: outputs placed in place become aliases, view copies are
// removed. Run after lowering, before memory planning.
InplaceStats apply_inplace(LMethod& method, const InplaceOptions& options);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_INPLACE_H_
