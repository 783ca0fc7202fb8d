// Lowerer: turns graph nodes into instructions of one method. Op
// definitions call it to create tensors and emit kernel calls; it maps graph
// values to method tensors (constants become constant tensors, once).

#ifndef KILN_PLANNER_LOWER_LOWERER_H_
#define KILN_PLANNER_LOWER_LOWERER_H_

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "lower/program.h"

namespace kiln::planner {

class Lowerer {
 public:
  Lowerer(Graph& graph, LProgram& program, LMethod& method)
      : graph_(graph), program_(program), method_(method) {}

  // The method tensor holding graph value `value` (created on first use).
  int tensor(int value);
  // A new intermediate tensor.
  int temp(const std::string& stem, DType dtype, std::vector<int64_t> shape);
  // A constant tensor holding `data`.
  int constant(const std::string& name, HostTensor data);

  // A kernel call. `scratch` tensors (from temp()) are planned memory the
  // kernel may use while it runs, such as packing buffers.
  LInstruction& kernel(std::string op, std::vector<int> inputs, std::vector<int> outputs,
                       fb::ParamsUnion params = {}, std::vector<int> scratch = {});
  // Bytes of `src` into `dst` unchanged (a reshape): a Copy kernel the
  // in-place pass can turn into a view.
  void view(int src, int dst);
  void copy(int src, int dst);

  void set_node(std::string name, std::string op_type) {
    node_name_ = std::move(name);
    node_op_ = std::move(op_type);
  }
  LMethod& method() { return method_; }
  LProgram& program() { return program_; }
  Graph& graph() { return graph_; }

 private:
  Graph& graph_;
  LProgram& program_;
  LMethod& method_;
  std::unordered_map<int, int> value_to_tensor_;
  std::string node_name_;
  std::string node_op_;
};

// Lowers the whole graph (after folding) into a new method of `program`.
// Graph inputs and outputs become user-provided tensors.
LMethod& lower_graph(Graph& graph, LProgram& program, const std::string& method_name);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_LOWER_LOWERER_H_
