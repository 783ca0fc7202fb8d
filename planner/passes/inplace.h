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
//   2. in's bytes appear in no other operand of k, except as another input
//      the kernel also declares holding the very same elements (same offset,
//      shape and dtype: `x * x`), which it reads at each index before it
//      writes that index;
//   3. in's bytes are not a method input, method output or constant, and out
//      is not a method output (both are planned memory);
//   4. in and out have the same byte size, dtype and device (a broadcast that
//      makes the output larger never aliases);
// Chains resolve to one buffer: an output placed over an alias joins the
// alias's base, so relu -> sigmoid -> tanh use one set of bytes.
//
// Concat in place (policy: the op "Concat"), decided first, before any
// element-wise reuse: where every dim of the output before the axis is 1
// (NCHW batch 1 on the channels), each input is one contiguous block of the
// output, at the byte offset of the inputs before it:
//
//   out:  [ in0 bytes | in1 bytes | in2 bytes ]      (in_i: alias of out
//          ^0          ^n0         ^n0+n1              at its offset)
//
// An input's producer then writes straight into the output. An input takes
// its block when it is planned memory (no method input or output, no
// constant), written by one CPU kernel and by nothing else, not already an
// alias (its first use in this Concat only; a second use copies), on the
// CPU, no collective's operand; the output's bytes are planned CPU memory
// too (the output itself, or a block of a later Concat it was placed in).
// Inputs that cannot alias are copied to their blocks by Copy instructions;
// a Concat whose inputs all alias is removed. Concats are taken last first,
// so a Concat whose inputs already lie consecutively, in order, in one base
// (DenseNet: concat(x0..xk) is a prefix of concat(x0..xk+1)) becomes a view
// of that base at the first input's offset, with no instruction left.
// Every block is written once, by one producer, and no two blocks overlap;
// the element-wise rules above then see the whole base as one set of bytes
// (its last use is the last use of any block), and memory planning gives the
// base a lifetime covering every alias's uses.
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
  // Tensors whose extents vary with a bounded input (passes/bounds.h): a
  // Concat reading or writing one is not placed in place, since its
  // blocks' offsets would move with the size.
  std::set<int> varying_tensors;
};

struct InplaceStats {
  int outputs_in_place = 0;   // kernel outputs written over a dying input
  int views = 0;              // view ops that became aliases (no instruction left)
  int concats_removed = 0;    // Concats with every input written in place
  int concat_pieces = 0;      // Concat inputs written into their block by their producer
  uint64_t concat_bytes = 0;  // bytes those Concats no longer copy
};

// The ONNX ops whose lowering is a pure view of the input's bytes.
const std::set<std::string>& view_ops();

// Rewrites `method`: outputs placed in place become aliases, view copies are
// removed. Run after lowering, before memory planning.
InplaceStats apply_inplace(LMethod& method, const InplaceOptions& options);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_INPLACE_H_
