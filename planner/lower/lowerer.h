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

#include "ir/graph.h"
#include "lower/program.h"

namespace kiln::planner {

// Where each node runs, and in which order.
struct DevicePlan {
  std::vector<fb::Device> node_device;  // per node; empty: all on the CPU
  std::vector<int> order;               // node schedule; empty: topological order
  // Graph inputs live on the device of their first reader, outputs stay on
  // the device that produced them (for applications that bind device memory).
  bool device_io = false;
};

// Choices of kernel that trade memory for speed.
struct LowerOptions {
  // Conv, Gemm and MatMul get scratch tensors for their packed, blocked
  // product (kernels/portable/include/kiln/kernels/gemm_blocking.h). Off:
  // plain loops and smaller arenas (microcontrollers).
  bool packing_scratch = true;
};

class Lowerer {
 public:
  Lowerer(Graph& graph, LProgram& program, LMethod& method, const DevicePlan& devices,
          const LowerOptions& options = {})
      : graph_(graph), program_(program), method_(method), devices_(devices), options_(options) {}

  const LowerOptions& options() const { return options_; }

  // The method tensor holding graph value `value` where it lives (created on
  // first use).
  int tensor(int value);
  // A new intermediate tensor on the current node's device.
  int temp(const std::string& stem, DType dtype, std::vector<int64_t> shape);
  // A constant tensor holding `data`.
  int constant(const std::string& name, HostTensor data);

  // A kernel call on the current node's device; inputs that live elsewhere
  // are replaced by their copy on this device. `scratch` tensors (from
  // temp()) are planned memory the kernel may use while it runs.
  LInstruction& kernel(std::string op, std::vector<int> inputs, std::vector<int> outputs,
                       fb::ParamsUnion params = {}, std::vector<int> scratch = {});
  // Bytes of `src` into `dst` unchanged (a reshape): a Copy kernel the
  // in-place pass can turn into a view.
  void view(int src, int dst);
  // An explicit copy instruction (across devices or into a user tensor).
  void copy(int src, int dst);

  void set_node(int node);
  void set_node_info(std::string name, std::string op_type) {
    node_name_ = std::move(name);
    node_op_ = std::move(op_type);
  }
  fb::Device device() const { return device_; }
  fb::Device value_device(int value) const;
  void set_input_device(int value, fb::Device device) { input_device_[value] = device; }
  // The copy of tensor `t` on `device` (t itself when it already lives there).
  int on_device(int t, fb::Device device);

  LMethod& method() { return method_; }
  LProgram& program() { return program_; }
  Graph& graph() { return graph_; }

 private:
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
LMethod& lower_graph(Graph& graph, LProgram& program, const std::string& method_name,
                     const DevicePlan& devices = {}, const LowerOptions& options = {});

// "cpu:0", "vulkan:1"
std::string device_str(const fb::Device& device);
bool same_device(const fb::Device& a, const fb::Device& b);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_LOWER_LOWERER_H_
