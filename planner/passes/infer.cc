#include "passes/infer.h"

#include "core/error.h"
#include "ops/op_registry.h"

namespace kiln::planner {

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
    if (op->evaluate == nullptr && (op->lower == nullptr || options.evaluator == nullptr)) continue;
    std::vector<HostTensor> outputs;
    try {
      outputs = op->evaluate != nullptr ? op->evaluate(ctx) : options.evaluator->evaluate(graph, n);
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
