// ConstantEvaluator: how constant folding (passes/infer.h) computes a node
// whose inputs are all constants and whose op has no plan-time evaluate
// function. The passes see only this interface; the implementation that runs
// the node's kernels through the runtime lives with the back end
// (exec/evaluate.h), and the pipeline hands one to infer_and_fold.

#ifndef KILN_PLANNER_PASSES_EVALUATOR_H_
#define KILN_PLANNER_PASSES_EVALUATOR_H_

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::planner {

class ConstantEvaluator {
 public:
  virtual ~ConstantEvaluator() = default;

  // The outputs of node `node` of `graph`, whose inputs are all constants
  // (and whose outputs have their inferred dtypes and shapes), as host
  // tensors in output order; nothing when computing them would need more
  // than `max_work_bytes` of working memory besides inputs and outputs.
  // Throws PlanError when it cannot.
  virtual std::optional<std::vector<HostTensor>> evaluate(const Graph& graph, int node,
                                                          uint64_t max_work_bytes) const = 0;
};

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_EVALUATOR_H_
