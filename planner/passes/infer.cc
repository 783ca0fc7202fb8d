#include "passes/infer.h"

#include <optional>

#include "core/error.h"
#include "ops/op_registry.h"

namespace kiln::planner {

namespace {

// "64 MiB" for budgets (powers of two), exact bytes otherwise.
std::string bytes_str(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30) && bytes % (uint64_t{1} << 30) == 0) return str(bytes >> 30, " GiB");
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) return str(bytes >> 20, " MiB");
  return str(bytes, " bytes");
}

// Runs the op's inference. Helpers deep inside it (shape_numel, HostTensor)
// throw without knowing the node; their messages get the node's name here,
// so every error is one line naming the node.
void infer_naming_node(Graph& graph, const Node& node, const OpDef& op, OpContext& ctx) {
  const std::string where = graph.describe(node);
  auto named = [&](const PlanError& e) {
    const std::string message = e.what();
    return message.rfind(where, 0) == 0 ? message : where + ": " + message;
  };
  try {
    op.infer(ctx);
  } catch (const NotConstantError&) {
    throw;
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(named(e));
  } catch (const PlanError& e) {
    throw PlanError(named(e));
  }
}

// Compares every value's shape with ONNX shape inference's, where it gave
// a static one. Runs once per graph: later passes change shapes on purpose
// (tensor parallelism) and fold again.
void cross_check_onnx_shapes(Graph& graph) {
  if (!graph.onnx_shapes) return;
  const auto onnx_shapes = graph.onnx_shapes();
  graph.onnx_shapes = nullptr;
  for (const Value& v : graph.values) {
    const auto it = onnx_shapes.find(v.name);
    if (!v.has_shape || it == onnx_shapes.end() || it->second == v.shape) continue;
    const std::string where =
        v.producer >= 0 ? graph.describe(graph.nodes[static_cast<size_t>(v.producer)]) + ": " : "";
    fail(where, "output '", v.name, "' has shape ", shape_str(v.shape), " but ONNX shape inference says ",
         shape_str(it->second));
  }
}

}  // namespace

void infer_and_fold(Graph& graph, const InferOptions& options) {
  uint64_t folded_bytes = 0;  // outputs of the nodes folded so far, within options.budget.total_bytes
  const std::vector<int> order = graph.topological_order();
  size_t visited = 0;
  for (int n : order) {
    if (options.progress) options.progress(visited++, order.size());
    Node& node = graph.nodes[static_cast<size_t>(n)];
    const OpDef* op = find_op(node.domain, node.op_type);
    if (op == nullptr) {
      unsupported(graph.describe(node), ": op ", node.domain.empty() ? "" : node.domain + ".", node.op_type,
                  " is not supported");
    }
    OpContext ctx(graph, n);
    infer_naming_node(graph, node, *op, ctx);
    if (!options.fold || !op->foldable) continue;
    // A node folds when all its inputs are constants, or when it reads only
    // their static shapes.
    bool inputs_known = true;
    for (int v : node.inputs) {
      if (v >= 0 && !graph.values[static_cast<size_t>(v)].is_constant()) inputs_known = false;
    }
    if (!inputs_known && !(op->shape_only && op->evaluate != nullptr)) continue;
    if (op->evaluate == nullptr && (op->lower == nullptr || options.evaluator == nullptr)) continue;
    // Folding holds the outputs on the host: within the budget only. Beyond
    // it the node runs at run time, or is refused when its op has no kernels.
    uint64_t fold_bytes = 0;
    for (int v : node.outputs) {
      if (v >= 0) fold_bytes += graph.values[static_cast<size_t>(v)].nbytes();
    }
    const FoldBudget& budget = options.budget;
    const bool exempt = (node.inputs.empty() && op->lower == nullptr) || op->shape_only;
    if (!exempt && (fold_bytes > budget.tensor_bytes || fold_bytes > budget.total_bytes - folded_bytes)) {
      if (op->lower != nullptr) continue;
      if (fold_bytes > budget.tensor_bytes) {
        fail(graph.describe(node), ": folding would make a ", fold_bytes, "-byte constant, over the folding budget of ",
             bytes_str(budget.tensor_bytes), " per tensor, and op ", node.op_type, " cannot run at run time");
      }
      fail(graph.describe(node), ": folding its ", fold_bytes, "-byte output would take the constants folded past the ",
           "folding budget of ", bytes_str(budget.total_bytes), " in all, and op ", node.op_type,
           " cannot run at run time");
    }
    std::vector<HostTensor> outputs;
    try {
      if (op->evaluate != nullptr) {
        outputs = op->evaluate(ctx);
      } else {
        std::optional<std::vector<HostTensor>> computed = options.evaluator->evaluate(graph, n, budget.tensor_bytes);
        if (!computed) continue;  // its kernels need more working memory than the budget: run time
        outputs = std::move(*computed);
      }
    } catch (const PlanError& e) {
      fail(graph.describe(node), ": constant folding failed: ", e.what());
    }
    if (!exempt) folded_bytes += fold_bytes;
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
  if (options.progress) options.progress(order.size(), order.size());
  cross_check_onnx_shapes(graph);
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
