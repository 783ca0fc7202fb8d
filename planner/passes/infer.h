// Shape inference and constant folding, in one walk over the graph in
// topological order: each node's op definition sets its outputs' static
// shapes; a node whose inputs are all constants is evaluated at plan time
// (by its evaluate function, or by the ConstantEvaluator the caller gives,
// passes/evaluator.h) and disappears. What is left is the graph the runtime
// will execute.
//
// Folding holds every constant it makes in memory, so it works within a
// budget (FoldBudget): a node whose outputs would exceed it is left to run
// at run time (ConstantOfShape, Range, Expand, Tile, ... have kernels), or,
// for an op without kernels, refused in one line naming the node, the size
// and the budget. A hostile ConstantOfShape asking for 4 GiB therefore costs
// the planner nothing.

#ifndef KILN_PLANNER_PASSES_INFER_H_
#define KILN_PLANNER_PASSES_INFER_H_

#include <functional>

#include "ir/graph.h"
#include "passes/evaluator.h"

namespace kiln::planner {

// How much constant data folding may make. A node is folded only when its
// outputs together fit `tensor_bytes` and the bytes folded so far in this
// call plus its outputs fit `total_bytes`; the same bound holds for the
// working memory (arenas) of a node folded by running its kernels. Exempt:
// Constant (no inputs, no kernels: its value is the model's own bytes) and
// ops that read only shapes (Shape, Size: a few integers).
struct FoldBudget {
  uint64_t tensor_bytes = uint64_t{64} << 20;  // 64 MiB
  uint64_t total_bytes = uint64_t{1} << 30;    // 1 GiB
};

struct InferOptions {
  bool fold = true;
  FoldBudget budget;
  // Folds nodes whose op has no evaluate function (not owned; must outlive
  // the call). nullptr: only ops with an evaluate function fold.
  const ConstantEvaluator* evaluator = nullptr;
  // Called after each node with the nodes visited and the total (a large
  // model's folding takes seconds; kiln plan shows it on a terminal).
  std::function<void(size_t done, size_t total)> progress;
};

// Throws UnsupportedError for an op without a definition, PlanError for a
// node whose inputs its op rejects.
void infer_and_fold(Graph& graph, const InferOptions& options);

// Removes nodes none of whose outputs are used (by a node or as a graph output).
void eliminate_dead_nodes(Graph& graph);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_INFER_H_
