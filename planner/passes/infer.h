// Shape inference and constant folding, in one walk over the graph in
// topological order: each node's op definition sets its outputs' static
// shapes; a node whose inputs are all constants is evaluated at plan time
// (by its evaluate function, or by running its kernels through the runtime)
// and disappears. What is left is the graph the runtime will execute.

#ifndef KILN_PLANNER_PASSES_INFER_H_
#define KILN_PLANNER_PASSES_INFER_H_

#include "ir/graph.h"

namespace kiln::planner {

struct InferOptions {
  bool fold = true;
};

// Throws UnsupportedError for an op without a definition, PlanError for a
// node whose inputs its op rejects.
void infer_and_fold(Graph& graph, const InferOptions& options);

// Removes nodes none of whose outputs are used (by a node or as a graph output).
void eliminate_dead_nodes(Graph& graph);

// Evaluates one node whose inputs are all constants, with the runtime's
// kernels.
std::vector<HostTensor> evaluate_node(const Graph& graph, int node);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_INFER_H_
