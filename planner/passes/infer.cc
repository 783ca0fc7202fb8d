#include "passes/infer.h"

#include "core/error.h"
#include "emit/emitter.h"
#include "exec/run.h"
#include "lower/lowerer.h"
#include "memory/method_plan.h"
#include "ops/op_registry.h"

namespace kiln::planner {

std::vector<HostTensor> evaluate_node(const Graph& graph, int node_index) {
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
  RunResult result = run_program(emit_program(program), {}, RunOptions{});
  return std::move(result.outputs);
}

void infer_and_fold(Graph& graph, const InferOptions& options) {
  for (int n : graph.topological_order()) {
    Node& node = graph.nodes[static_cast<size_t>(n)];
    const OpDef* op = find_op(node.domain, node.op_type);
    if (op == nullptr) {
      unsupported(graph.describe(node), ": op ", node.domain.empty() ? "" : node.domain + ".", node.op_type,
                  " is not supported");
    }
    OpContext ctx(graph, n);
    op->infer(ctx);
    if (!options.fold || !op->foldable) continue;
    // A node folds when all its inputs are constants, or when it reads only
    // their static shapes.
    bool inputs_known = true;
    for (int v : node.inputs) {
      if (v >= 0 && !graph.values[static_cast<size_t>(v)].is_constant()) inputs_known = false;
    }
    if (!inputs_known && !(op->shape_only && op->evaluate != nullptr)) continue;
    if (op->evaluate == nullptr && op->lower == nullptr) continue;
    std::vector<HostTensor> outputs;
    try {
      outputs = op->evaluate != nullptr ? op->evaluate(ctx) : evaluate_node(graph, n);
    } catch (const PlanError& e) {
      fail(graph.describe(node), ": constant folding failed: ", e.what());
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] < 0) continue;
      Value& value = graph.values[static_cast<size_t>(node.outputs[i])];
      if (i >= outputs.size()) fail(graph.describe(node), ": folding produced too few outputs");
      if (outputs[i].shape != value.shape || outputs[i].dtype != value.dtype) {
        fail(graph.describe(node), ": folded output '", value.name, "' is ", dtype_str(outputs[i].dtype),
             shape_str(outputs[i].shape), ", inference said ", dtype_str(value.dtype), shape_str(value.shape));
      }
      value.constant = std::make_shared<HostTensor>(std::move(outputs[i]));
      value.producer = -1;
    }
    node.dead = true;
  }
  graph.compact();
}

void eliminate_dead_nodes(Graph& graph) {
  bool changed = true;
  while (changed) {
    changed = false;
    const auto readers = graph.consumers();
    for (Node& node : graph.nodes) {
      if (node.dead) continue;
      bool used = false;
      for (int v : node.outputs) {
        if (v < 0) continue;
        const Value& value = graph.values[static_cast<size_t>(v)];
        if (value.is_graph_output || !readers[static_cast<size_t>(v)].empty()) used = true;
      }
      if (!used) {
        node.dead = true;
        changed = true;
      }
    }
  }
  graph.compact();
}

}  // namespace kiln::planner
