// Op definitions: for every ONNX op the planner supports, how to infer its
// output types and static shapes (validating attributes on the way), and how
// to lower it into kernel calls. This table is the CPU target's op support;
// an op missing here is "unsupported" with a message naming the node.

#ifndef KILN_PLANNER_OPS_OP_REGISTRY_H_
#define KILN_PLANNER_OPS_OP_REGISTRY_H_

#include <string>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"
#include "ops/lowering_context.h"

namespace kiln::planner {

// What an op definition sees of one node.
class OpContext {
 public:
  OpContext(Graph& graph, int node) : graph_(graph), node_(graph.nodes[static_cast<size_t>(node)]) {}

  Graph& graph() { return graph_; }
  Node& node() { return node_; }
  int opset() const { return node_.opset; }
  std::string where() const { return graph_.describe(node_); }

  size_t num_inputs() const { return node_.inputs.size(); }
  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_input(size_t i) const { return i < node_.inputs.size() && node_.inputs[i] >= 0; }
  bool has_output(size_t i) const { return i < node_.outputs.size() && node_.outputs[i] >= 0; }
  Value& input(size_t i);
  Value& output(size_t i);
  int input_id(size_t i) const { return node_.inputs[i]; }
  int output_id(size_t i) const { return node_.outputs[i]; }
  const std::vector<int64_t>& shape(size_t i) { return input(i).shape; }
  DType dtype(size_t i) { return input(i).dtype; }
  int64_t rank(size_t i) { return static_cast<int64_t>(input(i).shape.size()); }

  // The value of input i, which must be a constant (a shape argument);
  // throws NotConstantError naming the graph input it comes from otherwise.
  const HostTensor& constant_input(size_t i, const char* what);

  bool has_attr(const std::string& key) const { return node_.has_attr(key); }
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attr_floats(const std::string& key, std::vector<float> fallback = {}) const;

  void set_output(size_t i, DType dtype, std::vector<int64_t> shape);
  // Normalises a possibly negative axis against `rank`; throws if out of range.
  int64_t axis(int64_t axis, int64_t rank, const char* what = "axis");

  // Checks the input and output counts; throws naming the node.
  void expect_inputs(size_t min, size_t max);
  void expect_dtype(size_t input, std::initializer_list<DType> allowed);

  template <typename... Args>
  [[noreturn]] void error(Args&&... args) const {
    fail(where(), ": ", std::forward<Args>(args)...);
  }
  template <typename... Args>
  [[noreturn]] void not_supported(Args&&... args) const {
    unsupported(where(), ": ", std::forward<Args>(args)...);
  }

 private:
  Graph& graph_;
  Node& node_;
};

struct OpDef {
  const char* op_type = nullptr;
  const char* domain = "";
  // Sets every output's dtype and shape. Throws PlanError or
  // UnsupportedError naming the node.
  void (*infer)(OpContext& ctx) = nullptr;
  // Emits the node's instructions.
  void (*lower)(OpContext& ctx, LoweringContext& lowerer) = nullptr;
  // Computes the outputs at plan time without kernels (Shape, Size,
  // ConstantOfShape, Range); ops without it fold by running their kernels.
  std::vector<HostTensor> (*evaluate)(OpContext& ctx) = nullptr;
  // False for ops that must never be folded.
  bool foldable = true;
  // `evaluate` reads only its inputs' static shapes, never their values
  // (Shape, Size): the node folds even when its input is computed at run time.
  bool shape_only = false;
};

// nullptr when the op is not supported.
const OpDef* find_op(const std::string& domain, const std::string& op_type);
// Every supported op, for `kiln ops` and documentation.
std::vector<const OpDef*> all_ops();

// Each family of ops adds its definitions (ops/*.cc).
void add_elementwise_ops(std::vector<OpDef>& ops);
void add_linear_ops(std::vector<OpDef>& ops);
void add_pool_ops(std::vector<OpDef>& ops);
void add_shape_ops(std::vector<OpDef>& ops);
void add_norm_ops(std::vector<OpDef>& ops);
void add_reduce_ops(std::vector<OpDef>& ops);
void add_resize_ops(std::vector<OpDef>& ops);
void add_collective_ops(std::vector<OpDef>& ops);
void add_math_ops(std::vector<OpDef>& ops);
void add_index_ops(std::vector<OpDef>& ops);
void add_einsum_ops(std::vector<OpDef>& ops);
void add_quant_ops(std::vector<OpDef>& ops);
void add_rnn_ops(std::vector<OpDef>& ops);
void add_signal_ops(std::vector<OpDef>& ops);
void add_linalg_ops(std::vector<OpDef>& ops);
void add_refused_ops(std::vector<OpDef>& ops);

// The activation passes/fuse moved into the node, as kernel parameters;
// nullptr when it carries none.
std::unique_ptr<fb::FusedActivationT> fused_activation(const Node& node);

// GenericParams (schema/program.fbs) holding `ints` and `floats`; their
// meaning per kernel is written beside the kernel's check function.
fb::ParamsUnion generic_params(std::vector<int64_t> ints, std::vector<float> floats);

// NumPy broadcast of two shapes; throws naming the node when they do not broadcast.
std::vector<int64_t> broadcast_shapes(const OpContext& ctx, const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_OPS_OP_REGISTRY_H_
