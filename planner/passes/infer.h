// Shape inference and constant folding, in one walk over the graph in
// topological order: each node's op definition sets its outputs' static
// shapes; a node whose inputs are all constants is evaluated at plan time
// (by its evaluate function, or by the ConstantEvaluator the caller gives,
// passes/evaluator.h) and disappears. What is left is the graph the runtime
// will execute.

#ifndef KILN_PLANNER_PASSES_INFER_H_
#define KILN_PLANNER_PASSES_INFER_H_

#include "ir/graph.h"
#include "passes/evaluator.h"

namespace kiln::planner {

struct InferOptions {
  bool fold = true;
  // Folds nodes whose op has no evaluate function (not owned; must outlive
  // the call). nullptr: only ops with an evaluate function fold.
  const ConstantEvaluator* evaluator = nullptr;
};

// Throws UnsupportedError for an op without a definition, PlanError for a
// node whose inputs its op rejects.
void infer_and_fold(Graph& graph, const InferOptions& options);

// Removes nodes none of whose outputs are used (by a node or as a graph output).
void eliminate_dead_nodes(Graph& graph);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_INFER_H_
