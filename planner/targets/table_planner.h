// A backend planner half described by a table: for each supported ONNX op,
// a check of dtypes and attributes. Backends whose support is a list of ops
// (Vulkan, CUDA) build one of these in their own folder.

#ifndef KILN_PLANNER_TARGETS_TABLE_PLANNER_H_
#define KILN_PLANNER_TARGETS_TABLE_PLANNER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "targets/target.h"

namespace kiln::planner {

struct OpSupport {
  std::string op;
  // Extra conditions beyond "every tensor operand is float32": empty string
  // when supported, else the reason. May be empty (no extra conditions).
  std::function<std::string(const Graph&, const Node&)> check;
  // Inputs the backend's kernel may write its output over (bit i).
  uint32_t inplace_inputs = 0;
  // Inputs that must be constants (shape arguments) and are exempt from the
  // float32 rule.
  std::vector<int> constant_inputs;
};

inline OpSupport op_support(std::string op, std::function<std::string(const Graph&, const Node&)> check = nullptr,
                            uint32_t inplace_inputs = 0, std::vector<int> constant_inputs = {}) {
  OpSupport s;
  s.op = std::move(op);
  s.check = std::move(check);
  s.inplace_inputs = inplace_inputs;
  s.constant_inputs = std::move(constant_inputs);
  return s;
}

struct TablePlannerSpec {
  std::string name;
  fb::DeviceType device_type = fb::DeviceType::CPU;
  int max_devices = 1;
  uint32_t arena_alignment = 256;
  uint64_t state_bytes_fixed = 0;       // per delegate
  uint64_t state_bytes_per_kernel = 0;  // per kernel call in it
  std::vector<OpSupport> ops;
};

class TableBackendPlanner final : public BackendPlanner {
 public:
  explicit TableBackendPlanner(TablePlannerSpec spec);
  std::string name() const override { return spec_.name; }
  fb::DeviceType device_type() const override { return spec_.device_type; }
  int max_devices() const override { return spec_.max_devices; }
  std::string unsupported_reason(const Graph& graph, const Node& node) const override;
  uint32_t arena_alignment() const override { return spec_.arena_alignment; }
  uint32_t inplace_inputs(const std::string& op) const override;
  uint64_t state_bytes(size_t kernels) const override {
    return spec_.state_bytes_fixed + spec_.state_bytes_per_kernel * kernels;
  }

 private:
  TablePlannerSpec spec_;
  std::map<std::string, const OpSupport*> by_op_;
};

// Helpers for OpSupport checks.
int64_t node_attr_int(const Node& node, const std::string& key, int64_t fallback);
std::string node_attr_string(const Node& node, const std::string& key, const std::string& fallback);
const Value& node_input(const Graph& graph, const Node& node, size_t i);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_TARGETS_TABLE_PLANNER_H_
