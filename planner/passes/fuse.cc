#include "passes/fuse.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"

namespace kiln::planner {
namespace {

const Value& value_of(const Graph& graph, int v) { return graph.values[static_cast<size_t>(v)]; }

bool constant_input(const Graph& graph, const Node& node, size_t i) {
  return i < node.inputs.size() && node.inputs[i] >= 0 && value_of(graph, node.inputs[i]).is_constant();
}

// The node's first output is read by `reader` alone and is no graph output;
// no other output of the node is used.
bool only_reader(const Graph& graph, const std::vector<std::vector<int>>& readers, const Node& node,
                 int reader) {
  if (node.outputs.empty() || node.outputs[0] < 0) return false;
  const int out = node.outputs[0];
  if (value_of(graph, out).is_graph_output) return false;
  if (readers[static_cast<size_t>(out)] != std::vector<int>{reader}) return false;
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    const int v = node.outputs[i];
    if (v >= 0 && (value_of(graph, v).is_graph_output || !readers[static_cast<size_t>(v)].empty())) return false;
  }
  return true;
}

// `absorbed` (reading `into`'s output) disappears: `into` writes its output.
void absorb(Graph& graph, Node& into, Node& absorbed, int into_index) {
  Value& old_output = graph.values[static_cast<size_t>(into.outputs[0])];
  old_output.producer = -1;
  into.outputs[0] = absorbed.outputs[0];
  graph.values[static_cast<size_t>(into.outputs[0])].producer = into_index;
  absorbed.dead = true;
}

// A constant the graph did not have, for folded weights.
int add_constant(Graph& graph, const std::string& stem, HostTensor data) {
  Value value;
  value.name = graph.unique_name(stem);
  value.dtype = data.dtype;
  value.has_type = true;
  value.shape = data.shape;
  value.has_shape = true;
  value.constant = std::make_shared<HostTensor>(std::move(data));
  return graph.add_value(std::move(value));
}

bool fold_one_batch_norm(Graph& graph, const std::vector<std::vector<int>>& readers, int bn_index) {
  Node& bn = graph.nodes[static_cast<size_t>(bn_index)];
  if (bn.inputs.size() != 5 || bn.outputs.empty() || bn.outputs[0] < 0) return false;
  for (size_t i = 1; i < 5; ++i) {
    if (!constant_input(graph, bn, i) || value_of(graph, bn.inputs[i]).dtype != DType::FLOAT32) return false;
  }
  for (size_t i = 1; i < bn.outputs.size(); ++i) {
    if (bn.outputs[i] >= 0) return false;  // training outputs
  }
  const int y = bn.inputs[0];
  const int conv_index = value_of(graph, y).producer;
  if (conv_index < 0) return false;
  Node& conv = graph.nodes[static_cast<size_t>(conv_index)];
  if (conv.op_type != "Conv" || !conv.domain.empty() || !conv.activation.op.empty()) return false;
  if (!constant_input(graph, conv, 1) || (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && !constant_input(graph, conv, 2))) {
    return false;
  }
  if (!only_reader(graph, readers, conv, bn_index)) return false;
  const HostTensor& w = *value_of(graph, conv.inputs[1]).constant;
  if (w.dtype != DType::FLOAT32 || w.shape.empty()) return false;
  const int64_t m = w.shape[0];
  const int64_t per_channel = w.numel() / std::max<int64_t>(m, 1);
  for (size_t i = 1; i < 5; ++i) {
    if (value_of(graph, bn.inputs[i]).constant->numel() != m) return false;
  }
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
  const HostTensor* bias = has_bias ? value_of(graph, conv.inputs[2]).constant.get() : nullptr;
  if (bias != nullptr && (bias->dtype != DType::FLOAT32 || bias->numel() != m)) return false;

  const auto attr = bn.attrs.find("epsilon");
  const double epsilon = attr != bn.attrs.end() ? attr->second.f : 1e-5;
  const HostTensor& scale = *value_of(graph, bn.inputs[1]).constant;
  const HostTensor& shift = *value_of(graph, bn.inputs[2]).constant;
  const HostTensor& mean = *value_of(graph, bn.inputs[3]).constant;
  const HostTensor& var = *value_of(graph, bn.inputs[4]).constant;
  HostTensor new_w(DType::FLOAT32, w.shape);
  HostTensor new_b(DType::FLOAT32, {m});
  for (int64_t c = 0; c < m; ++c) {
    const double s = scale.float_at(c) / std::sqrt(var.float_at(c) + epsilon);
    for (int64_t i = 0; i < per_channel; ++i) {
      const int64_t at = c * per_channel + i;
      new_w.data<float>()[at] = static_cast<float>(w.data<float>()[at] * s);
    }
    const double b = bias != nullptr ? bias->float_at(c) : 0.0;
    new_b.data<float>()[c] = static_cast<float>((b - mean.float_at(c)) * s + shift.float_at(c));
  }
  const std::string stem = conv.name.empty() ? "conv" : conv.name;
  conv.inputs.resize(3, -1);
  conv.inputs[1] = add_constant(graph, stem + "/folded_weight", std::move(new_w));
  conv.inputs[2] = add_constant(graph, stem + "/folded_bias", std::move(new_b));
  absorb(graph, conv, bn, conv_index);
  return true;
}

// The activation `node` computes as a NodeActivation, or an empty op when
// it is none the kernels fuse (or its bounds are not constant).
NodeActivation activation_of(const Graph& graph, const Node& node) {
  NodeActivation a;
  if (!node.domain.empty() || node.inputs.empty() || node.inputs[0] < 0) return a;
  const auto attr = [&](const char* key, float fallback) {
    const auto it = node.attrs.find(key);
    return it != node.attrs.end() ? it->second.f : fallback;
  };
  const std::string& op = node.op_type;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh") {
    a.op = op;
  } else if (op == "LeakyRelu") {
    a.op = op;
    a.alpha = attr("alpha", 0.01f);
  } else if (op == "HardSigmoid") {
    a.op = op;
    a.alpha = attr("alpha", 0.2f);
    a.beta = attr("beta", 0.5f);
  } else if (op == "HardSwish") {
    a.op = op;
    a.alpha = 1.f / 6.f;
    a.beta = 0.5f;
  } else if (op == "Clip") {
    a.alpha = attr("min", -std::numeric_limits<float>::infinity());
    a.beta = attr("max", std::numeric_limits<float>::infinity());
    for (size_t i = 1; i < node.inputs.size(); ++i) {
      if (node.inputs[i] < 0) continue;
      if (!constant_input(graph, node, i)) return a;
      const HostTensor& bound = *value_of(graph, node.inputs[i]).constant;
      if (bound.dtype != DType::FLOAT32 || bound.numel() != 1) return a;
      (i == 1 ? a.alpha : a.beta) = static_cast<float>(bound.float_at(0));
    }
    a.op = op;
  }
  return a;
}

bool fuses_activations(const Node& node) {
  static const std::set<std::string> ops = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div"};
  return node.domain.empty() && ops.count(node.op_type) != 0;
}

bool on_cpu(const DevicePlan& devices, int node) {
  return devices.node_device.empty() ||
         devices.node_device[static_cast<size_t>(node)].type() == fb::DeviceType::CPU;
}

// Removes dead nodes: compacts the graph when `devices` names no node,
// otherwise takes them out of its schedule (node indices stay valid).
void drop_dead(Graph& graph, DevicePlan& devices) {
  if (devices.node_device.empty() && devices.order.empty()) {
    graph.compact();
  } else {
    std::erase_if(devices.order, [&](int i) { return graph.nodes[static_cast<size_t>(i)].dead; });
  }
}

// A constant with one float per column of `out` (shape [..., N]), every
// other dimension 1: a bias that broadcasts over rows only.
bool column_bias(const Graph& graph, int v, const std::vector<int64_t>& out) {
  if (v < 0 || !value_of(graph, v).is_constant()) return false;
  const Value& bias = value_of(graph, v);
  if (bias.dtype != DType::FLOAT32 || bias.shape.empty() || bias.shape.size() > out.size()) return false;
  if (bias.shape.back() != out.back()) return false;
  for (size_t i = 0; i + 1 < bias.shape.size(); ++i) {
    if (bias.shape[i] != 1) return false;
  }
  return true;
}

}  // namespace

int fuse_matmul_biases(Graph& graph, DevicePlan& devices) {
  int fused = 0;
  const auto readers = graph.consumers();
  for (int n : graph.topological_order()) {
    Node& add = graph.nodes[static_cast<size_t>(n)];
    if (add.dead || add.op_type != "Add" || !add.domain.empty() || add.inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      const int product = add.inputs[static_cast<size_t>(side)];
      const int bias = add.inputs[static_cast<size_t>(1 - side)];
      if (product < 0 || value_of(graph, product).producer < 0) continue;
      const int mm_index = value_of(graph, product).producer;
      Node& mm = graph.nodes[static_cast<size_t>(mm_index)];
      if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2 || !mm.activation.op.empty()) continue;
      if (!constant_input(graph, mm, 1) || value_of(graph, mm.inputs[1]).shape.size() != 2) continue;
      if (value_of(graph, mm.inputs[0]).shape.size() < 2 || value_of(graph, product).dtype != DType::FLOAT32) continue;
      const std::vector<int64_t>& out = value_of(graph, product).shape;
      if (!column_bias(graph, bias, out) || value_of(graph, add.outputs[0]).shape != out) continue;
      if (!on_cpu(devices, n) || !on_cpu(devices, mm_index) || !only_reader(graph, readers, mm, n)) continue;
      mm.inputs.push_back(bias);
      absorb(graph, mm, add, mm_index);
      ++fused;
      break;
    }
  }
  if (fused > 0) drop_dead(graph, devices);
  return fused;
}

int fold_batch_norms(Graph& graph) {
  int folded = 0;
  const auto readers = graph.consumers();
  for (int n : graph.topological_order()) {
    const Node& node = graph.nodes[static_cast<size_t>(n)];
    if (node.dead || node.op_type != "BatchNormalization" || !node.domain.empty()) continue;
    // Each fold touches only its own Conv and BatchNormalization, so the
    // readers computed up front stay right for the others.
    if (fold_one_batch_norm(graph, readers, n)) ++folded;
  }
  if (folded > 0) graph.compact();
  return folded;
}

int fuse_activations(Graph& graph, DevicePlan& devices) {
  int fused = 0;
  const auto readers = graph.consumers();
  for (int n : graph.topological_order()) {
    Node& act = graph.nodes[static_cast<size_t>(n)];
    if (act.dead) continue;
    const NodeActivation activation = activation_of(graph, act);
    if (activation.op.empty() || act.outputs.empty() || act.outputs[0] < 0) continue;
    const int producer = value_of(graph, act.inputs[0]).producer;
    if (producer < 0) continue;
    Node& node = graph.nodes[static_cast<size_t>(producer)];
    if (!fuses_activations(node) || !node.activation.op.empty()) continue;
    if (value_of(graph, act.inputs[0]).dtype != DType::FLOAT32) continue;
    if (!on_cpu(devices, n) || !on_cpu(devices, producer)) continue;
    if (!only_reader(graph, readers, node, n)) continue;
    node.activation = activation;
    absorb(graph, node, act, producer);
    ++fused;
  }
  if (fused > 0) drop_dead(graph, devices);
  return fused;
}

}  // namespace kiln::planner
