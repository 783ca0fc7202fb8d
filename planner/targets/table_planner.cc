#include "targets/table_planner.h"

#include <algorithm>

#include "core/error.h"

namespace kiln::planner {

TableBackendPlanner::TableBackendPlanner(TablePlannerSpec spec) : spec_(std::move(spec)) {
  for (const OpSupport& op : spec_.ops) by_op_[op.op] = &op;
}

std::string TableBackendPlanner::unsupported_reason(const Graph& graph, const Node& node) const {
  if (!node.domain.empty()) return "op " + node.domain + "." + node.op_type + " is not supported";
  auto it = by_op_.find(node.op_type);
  if (it == by_op_.end()) return "op " + node.op_type + " is not supported";
  const OpSupport& support = *it->second;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] < 0) continue;
    const Value& v = graph.values[static_cast<size_t>(node.inputs[i])];
    const bool shape_argument =
        std::find(support.constant_inputs.begin(), support.constant_inputs.end(), static_cast<int>(i)) !=
        support.constant_inputs.end();
    if (shape_argument) {
      if (!v.is_constant()) return str("input ", i, " must be a constant");
      continue;
    }
    if (v.dtype != DType::FLOAT32) return str("input ", i, " is ", dtype_str(v.dtype), " (float32 only)");
  }
  for (int out : node.outputs) {
    if (out >= 0 && graph.values[static_cast<size_t>(out)].dtype != DType::FLOAT32) return "non-float32 output";
  }
  return support.check ? support.check(graph, node) : "";
}

uint32_t TableBackendPlanner::inplace_inputs(const std::string& op) const {
  auto it = by_op_.find(op);
  return it == by_op_.end() ? 0 : it->second->inplace_inputs;
}

int64_t node_attr_int(const Node& node, const std::string& key, int64_t fallback) {
  auto it = node.attrs.find(key);
  return it == node.attrs.end() ? fallback : it->second.i;
}

std::string node_attr_string(const Node& node, const std::string& key, const std::string& fallback) {
  auto it = node.attrs.find(key);
  return it == node.attrs.end() ? fallback : it->second.s;
}

const Value& node_input(const Graph& graph, const Node& node, size_t i) {
  return graph.values[static_cast<size_t>(node.inputs.at(i))];
}

}  // namespace kiln::planner
