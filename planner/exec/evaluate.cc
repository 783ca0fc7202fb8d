#include "exec/evaluate.h"

#include <utility>

#include "emit/emitter.h"
#include "exec/run.h"
#include "lower/lowerer.h"
#include "memory/method_plan.h"

namespace kiln::planner {

std::optional<std::vector<HostTensor>> KernelEvaluator::evaluate(const Graph& graph, int node_index,
                                                                 uint64_t max_work_bytes) const {
  // A one-node graph: the inputs are constants, the outputs graph outputs.
  const Node& source = graph.nodes[static_cast<size_t>(node_index)];
  Graph g;
  g.opset = graph.opset;
  Node node = source;
  node.inputs.clear();
  node.outputs.clear();
  for (int v : source.inputs) {
    if (v < 0) {
      node.inputs.push_back(-1);
      continue;
    }
    Value value = graph.values[static_cast<size_t>(v)];
    value.producer = -1;
    value.is_graph_input = value.is_graph_output = false;
    const int existing = g.find_value(value.name);
    node.inputs.push_back(existing >= 0 ? existing : g.add_value(std::move(value)));
  }
  for (int v : source.outputs) {
    if (v < 0) {
      node.outputs.push_back(-1);
      continue;
    }
    Value value = graph.values[static_cast<size_t>(v)];
    value.producer = 0;
    value.is_graph_input = false;
    value.is_graph_output = true;
    const int id = g.add_value(std::move(value));
    node.outputs.push_back(id);
    g.outputs.push_back(id);
  }
  g.nodes.push_back(std::move(node));
  LProgram program;
  LMethod& method = lower_graph(g, program, "forward");
  memory::MethodPlanOptions plan;
  plan.solve.algorithm = memory::Algorithm::kGreedyFirstFit;
  memory::plan_method_memory(method, plan);
  uint64_t work_bytes = 0;
  for (const LArena& arena : method.arenas) work_bytes += arena.size;
  if (work_bytes > max_work_bytes) return std::nullopt;
  RunResult result = run_program(emit_program(program), {}, RunOptions{});
  return std::move(result.outputs);
}

}  // namespace kiln::planner
