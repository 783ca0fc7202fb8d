// KernelEvaluator: constant folding's evaluator (passes/evaluator.h) that
// runs a node with the kernels the program would run. The node becomes a
// one-node graph (its inputs constants, its outputs graph outputs), which is
// lowered, memory-planned by greedy first fit, emitted and run on the CPU
// through the runtime (exec/run.h), exactly as `kiln run` would run it. Its
// working memory is the planned arenas (intermediates and kernel scratch).
//
// Stateless: one instance may serve any number of graphs and threads.

#ifndef KILN_PLANNER_EXEC_EVALUATE_H_
#define KILN_PLANNER_EXEC_EVALUATE_H_

#include <vector>

#include "passes/evaluator.h"

namespace kiln::planner {

class KernelEvaluator final : public ConstantEvaluator {
 public:
  std::optional<std::vector<HostTensor>> evaluate(const Graph& graph, int node, uint64_t max_work_bytes) const override;
};

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EXEC_EVALUATE_H_
