// Lowerer: turns graph nodes into instructions of one method. Op
// definitions call it to create tensors and emit kernel calls; it maps graph
// values to method tensors (constants become constant tensors, once) and
// keeps devices apart:
//
//   - every value lives on the device of the node that produces it (graph
//     inputs and constants on the host, unless device_io);
//   - a kernel reading a tensor that lives on another device reads a copy on
//     its own device, made once per (tensor, device) and reused by every
//     later reader; a constant is uploaded once at load (an init
//     instruction), anything else is copied where it is first needed.

#ifndef KILN_PLANNER_LOWER_LOWERER_H_
#define KILN_PLANNER_LOWER_LOWERER_H_

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/device_plan.h"
#include "ir/graph.h"
#include "lower/program.h"
#include "ops/lowering_context.h"

namespace kiln::planner {

// The LoweringContext op definitions lower through (ops/lowering_context.h),
// and what lower_graph needs besides: the current node, explicit copies.
class Lowerer final : public LoweringContext {
 public:
  Lowerer(Graph& graph, LProgram& program, LMethod& method, const DevicePlan& devices, const LowerOptions& options = {})
      : graph_(graph), program_(program), method_(method), devices_(devices), options_(options) {}

  const LowerOptions& options() const override { return options_; }
  fb::Device device() const override { return device_; }
  int tensor(int value) override;
  int temp(const std::string& stem, DType dtype, std::vector<int64_t> shape) override;
  int constant(const std::string& name, HostTensor data) override;
  void collective(fb::CollectiveKind kind, fb::ReduceOp op, int input, int output) override;

  // An explicit copy instruction (across devices or into a user tensor).
  void copy(int src, int dst);

  void set_node(int node);
  void set_node_info(std::string name, std::string op_type) {
    node_name_ = std::move(name);
    node_op_ = std::move(op_type);
  }
  fb::Device value_device(int value) const;
  void set_input_device(int value, fb::Device device) { input_device_[value] = device; }
  // The copy of tensor `t` on `device` (t itself when it already lives there).
  int on_device(int t, fb::Device device);

  LMethod& method() { return method_; }
  LProgram& program() { return program_; }
  Graph& graph() { return graph_; }

 private:
  void add_kernel(std::string op, std::vector<int> inputs, std::vector<int> outputs, fb::ParamsUnion params,
                  std::vector<int> scratch) override;
  void plan_on_backend(LInstruction& instruction);

  Graph& graph_;
  LProgram& program_;
  LMethod& method_;
  const DevicePlan& devices_;
  LowerOptions options_;
  std::unordered_map<int, int> value_to_tensor_;
  std::map<std::pair<int, int>, int> copies_;  // (tensor, device key) -> tensor
  std::unordered_map<int, fb::Device> input_device_;
  fb::Device device_{fb::DeviceType::CPU, 0};
  std::string node_name_;
  std::string node_op_;
};

// Lowers the whole graph (after folding) into a new method of `program`.
// Graph inputs and outputs become user-provided tensors.
LMethod& lower_graph(Graph& graph, LProgram& program, const std::string& method_name, const DevicePlan& devices = {},
                     const LowerOptions& options = {});

}  // namespace kiln::planner

#endif  // KILN_PLANNER_LOWER_LOWERER_H_
