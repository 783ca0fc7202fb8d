// Inputs bounded above (`kiln plan --input-shape x=1:8x3x224x224`).
//
// A bounded dimension may take any value from MIN to MAX when the
// application binds the input. The method is lowered and its memory planned
// once, at MAX; what changes with the value is only the extent of tensors,
// which the runtime recomputes at bind time from the formulas found here
// (Method.dynamic_dims), without allocating.
//
// How the formulas are found: the method is lowered again at sample values
// of every symbol (each symbol alone, the others at MAX, then all together
// at MIN and halfway), and every lowering must be the one at MAX with other
// extents: the same instructions with the same parameters, the same tensors
// with the same dtypes, storage and ranks, the same constants (a constant
// that varies must be a prefix of its MAX bytes, as a Range of positions
// sliced to the sequence). Each extent that varies gets the simplest
//   scale * floor((mul * S + bias) / divisor) + offset
// (S the product of the symbols it depends on) that reproduces every
// sample: batch (S), Flatten (C*S), a strided convolution
// (floor((S + pads - kernel) / stride) + 1), a flattened batch of sequences
// (B*S). What differs in any other way (a parameter folded from the bound
// dimension, a kernel chosen by size) is refused naming the op, so a plan
// that is accepted runs the same instructions at every size; the runtime
// also runs every kernel's load-time check again at the new extents.
//
// Bounds unify by the model's dimension names: inputs whose bounded axes
// carry the same dim_param ("seq") share one symbol, and the runtime
// refuses bindings that disagree.

#ifndef KILN_PLANNER_PASSES_BOUNDS_H_
#define KILN_PLANNER_PASSES_BOUNDS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lower/program.h"

namespace kiln::planner {

// One `--input-shape` dimension given as MIN:MAX.
struct InputBound {
  std::string input;
  uint32_t axis = 0;
  int64_t min = 1;
  int64_t max = 1;
};

// The bounded dimensions that share one value.
struct BoundSymbol {
  std::string name;  // the model's dim_param, or "input[axis]"
  std::vector<std::pair<std::string, uint32_t>> dims;
  int64_t min = 1;
  int64_t max = 1;
};

// Groups bounds by the dim_param the model gives each (`dim_params`: input
// name -> one name per axis, "" where none). Throws PlanError when one name
// is bounded two ways.
std::vector<BoundSymbol> group_bounds(const std::vector<InputBound>& bounds,
                                      const std::map<std::string, std::vector<std::string>>& dim_params);

// The symbol values to lower at besides every symbol's max.
std::vector<std::vector<int64_t>> bound_samples(const std::vector<BoundSymbol>& symbols);

// Input shapes with every bounded dimension set to its symbol's `values`.
std::map<std::string, std::vector<int64_t>> shapes_at(const std::map<std::string, std::vector<int64_t>>& max_shapes,
                                                      const std::vector<BoundSymbol>& symbols,
                                                      const std::vector<int64_t>& values);

// Collects the lowerings at the samples against the one at max.
class BoundsFit {
 public:
  BoundsFit(const LMethod& reference, const LProgram& reference_program, std::vector<BoundSymbol> symbols);

  // Throws PlanError naming the first instruction, tensor or constant in
  // which `method` differs from the reference other than in its extents.
  void add_sample(const std::vector<int64_t>& values, const LMethod& method, const LProgram& program);

  // Fits every extent that varied; writes `method`'s symbols and
  // dynamic_dims (`method` is the reference, maybe with in-place reuse
  // applied since, which keeps tensor indices). Throws PlanError for an
  // extent no formula reproduces or a method no CPU kernel runs alone.
  void fit(LMethod& method) const;

  // The tensors whose extents vary (in-place Concat leaves them alone).
  std::set<int> dynamic_tensors() const;

 private:
  const LMethod& reference_;
  const LProgram& reference_program_;
  std::vector<BoundSymbol> symbols_;
  std::vector<std::vector<int64_t>> samples_;
  // (tensor, axis) -> the extent at each sample, in add_sample order.
  std::map<std::pair<int, uint32_t>, std::vector<int64_t>> extents_;
};

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_BOUNDS_H_
