// The planner's side of kiln/planner/backend_planner.h: the views backends
// read nodes through, the table-driven planner half, and the registry of
// host runtime halves.

#include "kiln/planner/backend_planner.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "ir/graph.h"
#include "targets/target.h"

namespace kiln::planner {

fb::DType ValueView::dtype() const { return value_->dtype; }
bool ValueView::has_shape() const { return value_->has_shape; }
const std::vector<int64_t>& ValueView::shape() const { return value_->shape; }
int64_t ValueView::numel() const { return shape_numel(value_->shape); }
uint64_t ValueView::nbytes() const { return value_->nbytes(); }
bool ValueView::is_constant() const { return value_->is_constant(); }

const std::string& NodeView::op() const { return node_->op_type; }
const std::string& NodeView::domain() const { return node_->domain; }
size_t NodeView::num_inputs() const { return node_->inputs.size(); }
size_t NodeView::num_outputs() const { return node_->outputs.size(); }
bool NodeView::has_input(size_t i) const { return i < node_->inputs.size() && node_->inputs[i] >= 0; }
bool NodeView::has_output(size_t i) const { return i < node_->outputs.size() && node_->outputs[i] >= 0; }

ValueView NodeView::input(size_t i) const {
  if (!has_input(i)) fail("internal error: ", describe(), " has no input ", i);
  return ValueView(graph_->values[static_cast<size_t>(node_->inputs[i])]);
}

ValueView NodeView::output(size_t i) const {
  if (!has_output(i)) fail("internal error: ", describe(), " has no output ", i);
  return ValueView(graph_->values[static_cast<size_t>(node_->outputs[i])]);
}

std::string NodeView::describe() const { return graph_->describe(*node_); }

OpSupport op_support(std::string op, std::function<std::string(const NodeView&)> check,
                     std::vector<int> constant_inputs) {
  OpSupport s;
  s.op = std::move(op);
  s.check = std::move(check);
  s.constant_inputs = std::move(constant_inputs);
  return s;
}

namespace {

std::string operand_problem(const ValueView& v, const char* what, size_t i, const OperandLimits& limits) {
  const std::string operand = std::string(what) + " " + std::to_string(i);
  if (!v.has_shape()) return operand + " has no static shape";
  if (v.rank() > limits.max_rank) {
    return operand + " has rank " + std::to_string(v.rank()) + " (" + std::to_string(limits.max_rank) + " at most)";
  }
  if (v.numel() == 0) return operand + " is empty";
  if (v.numel() > limits.max_elements) return operand + " " + limits.too_large;
  return "";
}

}  // namespace

std::function<std::string(const NodeView&)> operand_rules(const OperandLimits& limits,
                                                          std::function<std::string(const NodeView&)> extra,
                                                          size_t tensor_inputs) {
  return [limits, extra, tensor_inputs](const NodeView& node) {
    for (size_t i = 0; i < node.num_inputs() && i < tensor_inputs; ++i) {
      if (!node.has_input(i)) continue;
      const std::string why = operand_problem(node.input(i), "input", i, limits);
      if (!why.empty()) return why;
    }
    for (size_t i = 0; i < node.num_outputs(); ++i) {
      if (!node.has_output(i)) continue;
      const std::string why = operand_problem(node.output(i), "output", i, limits);
      if (!why.empty()) return why;
    }
    return extra ? extra(node) : std::string();
  };
}

std::string windows_1d_2d(const NodeView& node) {
  const size_t rank = node.input(0).rank();
  if (node.num_outputs() > 1 && node.has_output(1)) return "MaxPool's Indices output runs on the CPU only";
  return rank == 3 || rank == 4 ? "" : "only 1-D and 2-D (NCW, NCHW) windows";
}

namespace {

class TableBackendPlanner final : public BackendPlanner {
 public:
  explicit TableBackendPlanner(TablePlannerSpec spec) : spec_(std::move(spec)) {
    for (const OpSupport& op : spec_.ops) by_op_[op.op] = &op;
    for (const KernelInplace& k : spec_.inplace) inplace_[k.kernel] = k.inputs;
  }
  std::string name() const override { return spec_.name; }
  fb::DeviceType device_type() const override { return spec_.device_type; }
  int max_devices() const override { return spec_.max_devices; }
  uint32_t arena_alignment() const override { return spec_.arena_alignment; }

  std::string unsupported_reason(const NodeView& node) const override {
    if (spec_.collectives && node.domain() == "com.microsoft" && node.op() == "AllReduce") return float32_only(node);
    if (!node.domain().empty()) return "op " + node.domain() + "." + node.op() + " is not supported";
    auto it = by_op_.find(node.op());
    if (it == by_op_.end()) return "op " + node.op() + " is not supported";
    const OpSupport& support = *it->second;
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      if (!node.has_input(i)) continue;
      const ValueView v = node.input(i);
      const auto& shape_args = support.constant_inputs;
      if (std::find(shape_args.begin(), shape_args.end(), static_cast<int>(i)) != shape_args.end()) {
        if (!v.is_constant()) return str("input ", i, " must be a constant");
        continue;
      }
      if (v.dtype() != fb::DType::FLOAT32) return str("input ", i, " is ", dtype_str(v.dtype()), " (float32 only)");
    }
    for (size_t i = 0; i < node.num_outputs(); ++i) {
      if (node.has_output(i) && node.output(i).dtype() != fb::DType::FLOAT32) return "non-float32 output";
    }
    return support.check ? support.check(node) : "";
  }

  // A collective's operands: float32 (what the device all-reduce sums).
  static std::string float32_only(const NodeView& node) {
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      if (node.has_input(i) && node.input(i).dtype() != fb::DType::FLOAT32) {
        return str("input ", i, " is ", dtype_str(node.input(i).dtype()), " (float32 only)");
      }
    }
    return "";
  }

  uint32_t inplace_inputs(const std::string& kernel) const override {
    auto it = inplace_.find(kernel);
    return it == inplace_.end() ? 0 : it->second;
  }

  KernelPlan plan_kernel(KernelCallInfo& call) const override {
    return spec_.plan_kernel ? spec_.plan_kernel(call) : KernelPlan{};
  }
  std::string precision_refusal(const std::string& precision) const override {
    for (const std::string& p : spec_.precisions) {
      if (p == precision) return "";
    }
    std::string runs;
    for (const std::string& p : spec_.precisions) runs += (runs.empty() ? "" : ", ") + p;
    return "it runs " + runs + " only";
  }
  uint64_t state_bytes(const DelegateSummary& delegate) const override {
    return spec_.state_bytes_fixed + spec_.state_bytes_per_kernel * delegate.kernels +
           spec_.state_bytes_per_operand * delegate.operands;
  }

  bool runs_collectives() const override { return spec_.collectives; }
  DeviceAllReduce device_all_reduce(uint64_t bytes) const override {
    return spec_.all_reduce ? spec_.all_reduce(bytes) : DeviceAllReduce{};
  }

 private:
  TablePlannerSpec spec_;
  std::map<std::string, const OpSupport*> by_op_;
  std::map<std::string, uint32_t> inplace_;
};

std::vector<HostBackendInfo>& host_backend_infos() {
  static std::vector<HostBackendInfo> all;
  return all;
}

}  // namespace

std::unique_ptr<BackendPlanner> make_table_planner(TablePlannerSpec spec) {
  return std::make_unique<TableBackendPlanner>(std::move(spec));
}

void register_host_backend(HostBackendInfo info) {
  for (HostBackendInfo& existing : host_backend_infos()) {
    if (existing.name == info.name) {
      existing = std::move(info);
      return;
    }
  }
  host_backend_infos().push_back(std::move(info));
}

const std::vector<HostBackendInfo>& host_backends() { return host_backend_infos(); }

}  // namespace kiln::planner
