// The planner's graph IR: values (typed, statically shaped, possibly
// constant) and nodes (ONNX-level ops with attributes), in the form the ONNX
// importer produces and the passes rewrite, before lowering to kernel calls.

#ifndef KILN_PLANNER_IR_GRAPH_H_
#define KILN_PLANNER_IR_GRAPH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/host_tensor.h"

namespace kiln::planner {

struct Attribute {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kOther };
  Kind kind = Kind::kOther;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::shared_ptr<const HostTensor> tensor;
};

struct Value {
  std::string name;
  DType dtype = DType::FLOAT32;
  bool has_type = false;
  std::vector<int64_t> shape;
  bool has_shape = false;
  // Set for constants: initializers, Constant nodes, folded values.
  std::shared_ptr<const HostTensor> constant;
  // The node that produces it, or -1 (graph input, initializer).
  int producer = -1;
  bool is_graph_input = false;
  bool is_graph_output = false;
  // A graph input or output made quantized by quantize_io (passes/qdq.h):
  // it carries int8/uint8 values, real = (q - io_zero_point) * io_scale.
  bool io_quantized = false;
  float io_scale = 0.f;
  int32_t io_zero_point = 0;

  bool is_constant() const { return constant != nullptr; }
  uint64_t nbytes() const { return static_cast<uint64_t>(shape_numel(shape)) * dtype_bytes(dtype); }
};

// An activation fused into the node that produces its input
// (passes/fuse.h): the ONNX op it came from and its parameters, resolved.
struct NodeActivation {
  std::string op;  // "Relu", "Clip", ...; empty: none
  float alpha = 0.f;
  float beta = 0.f;
};

// A per-channel affine map (and Relu) fused ahead of the node's input 0
// (passes/fuse.h: a BatchNormalization and Relu ahead of a 1x1 Conv):
// `value` is a constant [2, C] float32, scales then shifts; -1 for none.
struct NodeInputAffine {
  int value = -1;
  bool relu = false;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for the default ONNX domain
  int opset = 0;             // opset version of the node's domain
  std::vector<int> inputs;   // value ids; -1 for an absent optional input
  std::vector<int> outputs;  // value ids; -1 for an unused optional output
  std::map<std::string, Attribute> attrs;
  // Applied to output 0 by the node's kernel (set by passes/fuse).
  NodeActivation activation;
  // Applied to input 0 channel by channel as the kernel reads it (Conv).
  NodeInputAffine input_affine;
  bool dead = false;

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
};

class Graph {
 public:
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;  // graph inputs (values that are not constants)
  std::vector<int> outputs;
  int opset = 0;  // default-domain opset of the model
  // How many ranks run the graph together: the size of communicator group 0,
  // which its collectives (AllReduce) reduce over. Set by --ranks or the
  // tensor-parallel pass.
  uint32_t ranks = 1;
  // ONNX's own shape inference over the imported model (value name ->
  // static shape), to cross-check the planner's. Set by the importer and
  // called once by infer_and_fold after the planner's inference has accepted
  // every node: libonnx trusts attributes (a Conv stride of 0 divides by
  // zero inside it), so it only ever sees models kiln has validated.
  std::function<std::map<std::string, std::vector<int64_t>>()> onnx_shapes;

  // Adds a value; its name must be unique.
  int add_value(Value value);
  // -1 when no value has that name.
  int find_value(const std::string& name) const;
  // A fresh value name starting with `stem`.
  std::string unique_name(const std::string& stem);
  // Adds a constant value (a fresh name from `stem`, type and shape from
  // `data`) that no node produces; returns its id.
  int add_constant(const std::string& stem, HostTensor data);

  // For every value, the live nodes that read it (in node order).
  std::vector<std::vector<int>> consumers() const;
  // Live node indices in an order where every producer comes before its
  // consumers. Throws PlanError naming a node on a cycle.
  std::vector<int> topological_order() const;
  // Removes dead nodes and renumbers producers.
  void compact();
  // "node 'conv1' (Conv)"
  std::string describe(const Node& node) const;

 private:
  std::unordered_map<std::string, int> by_name_;
  int next_unique_ = 0;
};

}  // namespace kiln::planner

#endif  // KILN_PLANNER_IR_GRAPH_H_
