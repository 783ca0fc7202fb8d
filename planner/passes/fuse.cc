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
bool only_reader(const Graph& graph, const std::vector<std::vector<int>>& readers, const Node& node, int reader) {
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

// An inference BatchNormalization with constant statistics as the map it
// applies per channel, y = x * scale + shift, in double:
//   scale = S / sqrt(var + epsilon),  shift = B - mean * scale.
struct ChannelMap {
  std::vector<double> scale, shift;
};

ChannelMap batch_norm_map(const Graph& graph, const Node& bn) {
  const auto attr = bn.attrs.find("epsilon");
  const double epsilon = attr != bn.attrs.end() ? attr->second.f : 1e-5;
  const HostTensor& s = *value_of(graph, bn.inputs[1]).constant;
  const HostTensor& b = *value_of(graph, bn.inputs[2]).constant;
  const HostTensor& mean = *value_of(graph, bn.inputs[3]).constant;
  const HostTensor& var = *value_of(graph, bn.inputs[4]).constant;
  ChannelMap map;
  for (int64_t c = 0; c < s.numel(); ++c) {
    map.scale.push_back(s.float_at(c) / std::sqrt(var.float_at(c) + epsilon));
    map.shift.push_back(b.float_at(c) - mean.float_at(c) * map.scale.back());
  }
  return map;
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
  if (!constant_input(graph, conv, 1) ||
      (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && !constant_input(graph, conv, 2))) {
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

  const ChannelMap map = batch_norm_map(graph, bn);
  HostTensor new_w(DType::FLOAT32, w.shape);
  HostTensor new_b(DType::FLOAT32, {m});
  for (int64_t c = 0; c < m; ++c) {
    const double s = map.scale[static_cast<size_t>(c)];
    for (int64_t i = 0; i < per_channel; ++i) {
      const int64_t at = c * per_channel + i;
      new_w.data<float>()[at] = static_cast<float>(w.data<float>()[at] * s);
    }
    const double b = bias != nullptr ? bias->float_at(c) : 0.0;
    new_b.data<float>()[c] = static_cast<float>(b * s + map.shift[static_cast<size_t>(c)]);
  }
  const std::string stem = conv.name.empty() ? "conv" : conv.name;
  conv.inputs.resize(3, -1);
  conv.inputs[1] = graph.add_constant(stem + "/folded_weight", std::move(new_w));
  conv.inputs[2] = graph.add_constant(stem + "/folded_bias", std::move(new_b));
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
  return devices.node_device.empty() || devices.node_device[static_cast<size_t>(node)].type() == fb::DeviceType::CPU;
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

// A float32 constant holding one value (any shape of one element).
bool scalar_constant(const Graph& graph, int v, float* out) {
  if (v < 0 || !value_of(graph, v).is_constant()) return false;
  const HostTensor& t = *value_of(graph, v).constant;
  if (t.dtype != DType::FLOAT32 || t.numel() != 1) return false;
  *out = static_cast<float>(t.float_at(0));
  return true;
}

// The node producing `v`, if it is a live node of `op_type` in the default
// domain whose first output is `v`; nullptr otherwise.
Node* producer_of(Graph& graph, int v, const char* op_type) {
  if (v < 0 || value_of(graph, v).producer < 0) return nullptr;
  Node& node = graph.nodes[static_cast<size_t>(value_of(graph, v).producer)];
  if (node.dead || node.op_type != op_type || !node.domain.empty() || node.outputs.empty() || node.outputs[0] != v) {
    return nullptr;
  }
  return &node;
}

// `v` is read by exactly the nodes `want` (each once or more) and is no
// graph output.
bool read_only_by(const Graph& graph, const std::vector<std::vector<int>>& readers, int v, std::set<int> want) {
  if (value_of(graph, v).is_graph_output) return false;
  const std::vector<int>& r = readers[static_cast<size_t>(v)];
  return std::set<int>(r.begin(), r.end()) == want;
}

// No output of `node` but the first is read or is a graph output.
bool other_outputs_unused(const Graph& graph, const std::vector<std::vector<int>>& readers, const Node& node) {
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    const int v = node.outputs[i];
    if (v >= 0 && (value_of(graph, v).is_graph_output || !readers[static_cast<size_t>(v)].empty())) return false;
  }
  return true;
}

int index_of(const Graph& graph, const Node* node) { return static_cast<int>(node - graph.nodes.data()); }

// Mul(x, gate(x)), possibly followed by a division, that computes x times
// a sigmoid-like function of x: what fuse_gated_activations rewrites.
struct Gated {
  int x = -1;
  NodeActivation activation;  // "Silu", "Gelu", or "HardSwish" with its alpha and beta
  std::vector<int> nodes;     // every node of the pattern, the last one writing the result
};

// gate = Clip(Add(x, k), 0, h): with a division by h after it, this is
// HardSwish's clamp(alpha x + beta, 0, 1) with alpha = 1 / h, beta = k / h.
// Appends the Add and the Clip to `nodes`.
bool shifted_clip(Graph& graph, int clip_out, int x, NodeActivation* out, std::vector<int>* nodes) {
  Node* clip = producer_of(graph, clip_out, "Clip");
  if (clip == nullptr || !clip->activation.op.empty()) return false;
  const NodeActivation bounds = activation_of(graph, *clip);
  if (bounds.op != "Clip" || bounds.alpha != 0.f || !(bounds.beta > 0.f) || std::isinf(bounds.beta)) return false;
  Node* add = producer_of(graph, clip->inputs[0], "Add");
  if (add == nullptr || add->inputs.size() != 2 || !add->activation.op.empty()) return false;
  float k = 0.f;
  if (!(add->inputs[0] == x && scalar_constant(graph, add->inputs[1], &k)) &&
      !(add->inputs[1] == x && scalar_constant(graph, add->inputs[0], &k))) {
    return false;
  }
  out->op = "HardSwish";
  out->alpha = 1.f / bounds.beta;
  out->beta = k / bounds.beta;
  nodes->push_back(index_of(graph, add));
  nodes->push_back(index_of(graph, clip));
  return true;
}

// A division of `v` by the constant `d` (Div(v, d) or Mul(v, 1 / d) within
// a float's rounding).
bool divides_by(const Graph& graph, const Node& node, int v, float d) {
  if (!node.domain.empty() || node.inputs.size() != 2 || node.dead) return false;
  float c = 0.f;
  if (node.op_type == "Div") return node.inputs[0] == v && scalar_constant(graph, node.inputs[1], &c) && c == d;
  if (node.op_type != "Mul") return false;
  const bool found = (node.inputs[0] == v && scalar_constant(graph, node.inputs[1], &c)) ||
                     (node.inputs[1] == v && scalar_constant(graph, node.inputs[0], &c));
  return found && std::fabs(c * d - 1.f) <= 1e-6f;
}

// Every value inside the pattern has its one reader inside it (x aside).
bool closed_pattern(const Graph& graph, const std::vector<std::vector<int>>& readers, const Gated& g) {
  for (size_t i = 0; i + 1 < g.nodes.size(); ++i) {
    const Node& node = graph.nodes[static_cast<size_t>(g.nodes[i])];
    if (node.outputs.size() != 1 || value_of(graph, node.outputs[0]).dtype != DType::FLOAT32) return false;
    const std::vector<int>& r = readers[static_cast<size_t>(node.outputs[0])];
    const std::set<int> distinct(r.begin(), r.end());
    if (value_of(graph, node.outputs[0]).is_graph_output || distinct.size() != 1 ||
        std::find(g.nodes.begin(), g.nodes.end(), *distinct.begin()) == g.nodes.end()) {
      return false;
    }
  }
  return true;
}

// The other input of a two-input node when one is the scalar constant
// `c` (within `tolerance`), else -1.
int operand_beside(const Graph& graph, const Node& node, float c, float tolerance) {
  if (node.inputs.size() != 2 || !node.activation.op.empty()) return -1;
  for (int side = 0; side < 2; ++side) {
    float v = 0.f;
    if (scalar_constant(graph, node.inputs[static_cast<size_t>(side)], &v) && std::fabs(v - c) <= tolerance) {
      return node.inputs[static_cast<size_t>(1 - side)];
    }
  }
  return -1;
}

// 1 + erf(x / sqrt 2) as Add(Erf(Div(x, sqrt 2) or Mul(x, 1 / sqrt 2)), 1):
// x, with the three nodes appended to `nodes`, or -1.
int erf_plus_one(Graph& graph, int v, std::vector<int>* nodes) {
  Node* add = producer_of(graph, v, "Add");
  if (add == nullptr) return -1;
  Node* erf = producer_of(graph, operand_beside(graph, *add, 1.f, 0.f), "Erf");
  if (erf == nullptr || !erf->activation.op.empty()) return -1;
  const int d = erf->inputs[0];
  if (d < 0 || value_of(graph, d).producer < 0) return -1;
  Node& scale = graph.nodes[static_cast<size_t>(value_of(graph, d).producer)];
  if (scale.dead || !scale.domain.empty() || scale.outputs.empty() || scale.outputs[0] != d) return -1;
  int x = -1;
  float c = 0.f;
  if (scale.op_type == "Div" && scale.inputs.size() == 2 && scalar_constant(graph, scale.inputs[1], &c) &&
      std::fabs(c - 1.41421356f) <= 1e-6f && scale.activation.op.empty()) {
    x = scale.inputs[0];
  } else if (scale.op_type == "Mul") {
    x = operand_beside(graph, scale, 0.70710678f, 1e-6f);
  }
  if (x < 0) return -1;
  nodes->insert(nodes->end(), {index_of(graph, &scale), index_of(graph, erf), index_of(graph, add)});
  return x;
}

// GELU as exporters write it, anchored at the last Mul:
//   Mul(Mul(x, 1 + erf(x / sqrt 2)), 0.5)      (PyTorch)
//   Mul(Mul(x, 0.5), 1 + erf(x / sqrt 2))
bool match_gelu(Graph& graph, const std::vector<std::vector<int>>& readers, int mul_index, Gated* out) {
  const Node& mul = graph.nodes[static_cast<size_t>(mul_index)];
  if (mul.dead || mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2 || mul.outputs.empty() ||
      mul.outputs[0] < 0 || !mul.activation.op.empty()) {
    return false;
  }
  Gated g;
  // Mul(Mul(x, 1 + erf(...)), 0.5)
  if (Node* inner = producer_of(graph, operand_beside(graph, mul, 0.5f, 0.f), "Mul");
      inner != nullptr && inner->inputs.size() == 2 && inner->activation.op.empty()) {
    for (int side = 0; side < 2 && g.x < 0; ++side) {
      std::vector<int> nodes;
      const int x = erf_plus_one(graph, inner->inputs[static_cast<size_t>(1 - side)], &nodes);
      if (x >= 0 && x == inner->inputs[static_cast<size_t>(side)]) {
        g.x = x;
        g.nodes = nodes;
        g.nodes.push_back(index_of(graph, inner));
      }
    }
  }
  // Mul(Mul(x, 0.5), 1 + erf(x / sqrt 2))
  for (int side = 0; side < 2 && g.x < 0; ++side) {
    Node* half = producer_of(graph, mul.inputs[static_cast<size_t>(side)], "Mul");
    if (half == nullptr) continue;
    const int x = operand_beside(graph, *half, 0.5f, 0.f);
    std::vector<int> nodes;
    if (x >= 0 && erf_plus_one(graph, mul.inputs[static_cast<size_t>(1 - side)], &nodes) == x) {
      g.x = x;
      g.nodes = nodes;
      g.nodes.push_back(index_of(graph, half));
    }
  }
  if (g.x < 0 || value_of(graph, g.x).dtype != DType::FLOAT32 ||
      value_of(graph, g.x).shape != value_of(graph, mul.outputs[0]).shape) {
    return false;
  }
  g.nodes.push_back(mul_index);
  g.activation.op = "Gelu";
  if (!closed_pattern(graph, readers, g)) return false;
  *out = std::move(g);
  return true;
}

// Matches the patterns exporters write for SiLU and HardSwish, anchored at
// the Mul `mul_index`:
//   Mul(x, Sigmoid(x))                          -> Silu
//   Mul(x, HardSigmoid(x))                      -> HardSwish(alpha, beta)
//   Mul(x, Clip(Add(x, 3), 0, 6) / 6)           -> HardSwish(1/6, 1/2)
//   Mul(x, Clip(Add(x, 3), 0, 6)) / 6           -> HardSwish(1/6, 1/2)
// Every intermediate has one reader; x may have others.
bool match_gated(Graph& graph, const std::vector<std::vector<int>>& readers, int mul_index, Gated* out) {
  const Node& mul = graph.nodes[static_cast<size_t>(mul_index)];
  if (mul.dead || mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2 || mul.outputs.empty() ||
      mul.outputs[0] < 0 || !mul.activation.op.empty()) {
    return false;
  }
  for (int side = 0; side < 2; ++side) {
    const int x = mul.inputs[static_cast<size_t>(side)];
    const int gate = mul.inputs[static_cast<size_t>(1 - side)];
    if (x < 0 || gate < 0 || x == gate || value_of(graph, x).dtype != DType::FLOAT32) continue;
    if (value_of(graph, x).shape != value_of(graph, mul.outputs[0]).shape) continue;
    Gated g;
    g.x = x;
    const int gate_producer = value_of(graph, gate).producer;
    Node* sig = producer_of(graph, gate, "Sigmoid");
    Node* hs = producer_of(graph, gate, "HardSigmoid");
    if (sig != nullptr && sig->inputs[0] == x && sig->activation.op.empty()) {
      g.activation.op = "Silu";
      g.nodes = {index_of(graph, sig), mul_index};
    } else if (hs != nullptr && hs->inputs[0] == x && hs->activation.op.empty()) {
      g.activation = activation_of(graph, *hs);
      g.activation.op = "HardSwish";
      g.nodes = {index_of(graph, hs), mul_index};
    } else if (producer_of(graph, gate, "Clip") != nullptr) {
      // Mul(x, Clip(Add(x, k), 0, h)) / h: the division reads the product.
      if (!shifted_clip(graph, gate, x, &g.activation, &g.nodes)) continue;
      const int product = mul.outputs[0];
      const std::vector<int>& r = readers[static_cast<size_t>(product)];
      if (r.size() != 1 || value_of(graph, product).is_graph_output) continue;
      const Node& div = graph.nodes[static_cast<size_t>(r[0])];
      if (!div.activation.op.empty() || !divides_by(graph, div, product, 1.f / g.activation.alpha) ||
          div.outputs.size() != 1 || value_of(graph, div.outputs[0]).shape != value_of(graph, product).shape) {
        continue;
      }
      g.nodes.push_back(mul_index);
      g.nodes.push_back(r[0]);
    } else if (gate_producer >= 0 && graph.nodes[static_cast<size_t>(gate_producer)].inputs.size() == 2 &&
               graph.nodes[static_cast<size_t>(gate_producer)].activation.op.empty()) {
      // Mul(x, Clip(Add(x, k), 0, h) / h)
      const Node& div = graph.nodes[static_cast<size_t>(gate_producer)];
      float c = 0.f;
      const int clipped = scalar_constant(graph, div.inputs[1], &c) ? div.inputs[0] : div.inputs[1];
      if (!shifted_clip(graph, clipped, x, &g.activation, &g.nodes) ||
          !divides_by(graph, div, clipped, 1.f / g.activation.alpha)) {
        continue;
      }
      g.nodes.push_back(gate_producer);
      g.nodes.push_back(mul_index);
    } else {
      continue;
    }
    if (g.nodes.empty()) continue;
    if (!closed_pattern(graph, readers, g)) continue;
    *out = std::move(g);
    return true;
  }
  return false;
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

int fuse_activations(Graph& graph, DevicePlan& devices, FuseStats* stats) {
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
    ++stats->activations_fused;
    ++stats->activations_by_kind[activation.op];
    ++fused;
  }
  if (fused > 0) drop_dead(graph, devices);
  return fused;
}

int fuse_gated_activations(Graph& graph, DevicePlan& devices, FuseStats* stats) {
  int fused = 0;
  const auto readers = graph.consumers();
  for (int n : graph.topological_order()) {
    Gated g;
    if (!match_gated(graph, readers, n, &g) && !match_gelu(graph, readers, n, &g)) continue;
    bool cpu = true;
    for (int i : g.nodes) cpu = cpu && on_cpu(devices, i);
    if (!cpu) continue;
    Node& last = graph.nodes[static_cast<size_t>(g.nodes.back())];
    const int result = last.outputs[0];
    // Into the producer of x when it applies fused activations and nothing
    // but the pattern reads x.
    const int producer = value_of(graph, g.x).producer;
    std::set<int> pattern_readers;
    for (int i : g.nodes) {
      for (int in : graph.nodes[static_cast<size_t>(i)].inputs) {
        if (in == g.x) pattern_readers.insert(i);
      }
    }
    if (producer >= 0 && on_cpu(devices, producer)) {
      Node& p = graph.nodes[static_cast<size_t>(producer)];
      if (fuses_activations(p) && p.activation.op.empty() && !p.outputs.empty() && p.outputs[0] == g.x &&
          read_only_by(graph, readers, g.x, pattern_readers) && other_outputs_unused(graph, readers, p)) {
        p.activation = g.activation;
        graph.values[static_cast<size_t>(g.x)].producer = -1;
        p.outputs[0] = result;
        graph.values[static_cast<size_t>(result)].producer = producer;
        for (int i : g.nodes) graph.nodes[static_cast<size_t>(i)].dead = true;
        ++stats->activations_fused;
        ++stats->activations_by_kind[g.activation.op];
        ++stats->gated_into_producer;
        ++fused;
        continue;
      }
    }
    // Otherwise one element-wise pass: kiln's Silu, the erf Gelu, or ONNX
    // HardSwish when its constants are the standard ones.
    const bool standard = g.activation.op == "Silu" || g.activation.op == "Gelu" ||
                          (g.activation.alpha == 1.f / 6.f && g.activation.beta == 0.5f);
    if (!standard) continue;
    Node single;
    single.name = last.name.empty() ? graph.unique_name(g.activation.op) : last.name;
    single.op_type = g.activation.op;
    single.domain = g.activation.op == "Silu" ? "kiln" : g.activation.op == "Gelu" ? "com.microsoft" : "";
    single.opset = g.activation.op == "HardSwish" ? 14 : 1;
    single.inputs = {g.x};
    single.outputs = {result};
    for (int i : g.nodes) graph.nodes[static_cast<size_t>(i)].dead = true;
    // The last node of the pattern becomes the single one, so the schedule
    // (devices.order) keeps its place.
    last = std::move(single);
    graph.values[static_cast<size_t>(result)].producer = g.nodes.back();
    ++stats->gated_standalone;
    ++fused;
  }
  if (fused > 0) drop_dead(graph, devices);
  return fused;
}

namespace {

// An attribute of ints absent or every entry `v`.
bool ints_all(const Node& node, const char* name, int64_t v) {
  const auto it = node.attrs.find(name);
  if (it == node.attrs.end()) return true;
  return std::all_of(it->second.ints.begin(), it->second.ints.end(), [v](int64_t x) { return x == v; });
}

// A Conv reading its input 0 as a plain matrix: 1x1 kernel (constant 4-D
// float weights), stride 1, no padding, one group, on a 4-D input.
bool pointwise_conv(const Graph& graph, const Node& conv) {
  if (conv.op_type != "Conv" || !conv.domain.empty() || conv.input_affine.value >= 0) return false;
  if (conv.inputs.empty() || conv.inputs[0] < 0 || !constant_input(graph, conv, 1)) return false;
  const Value& x = value_of(graph, conv.inputs[0]);
  const HostTensor& w = *value_of(graph, conv.inputs[1]).constant;
  if (!x.has_shape || x.shape.size() != 4 || x.dtype != DType::FLOAT32) return false;
  if (w.dtype != DType::FLOAT32 || w.shape.size() != 4 || w.shape[2] != 1 || w.shape[3] != 1) return false;
  const auto pad = conv.attrs.find("auto_pad");
  if (pad != conv.attrs.end() && pad->second.s != "NOTSET" && pad->second.s != "VALID") return false;
  const auto group = conv.attrs.find("group");
  if (group != conv.attrs.end() && group->second.i != 1) return false;
  return ints_all(conv, "pads", 0) && ints_all(conv, "strides", 1) && w.shape[1] == x.shape[1];
}

}  // namespace

int fuse_input_affines(Graph& graph, DevicePlan& devices, FuseStats* stats) {
  int fused = 0;
  const auto readers = graph.consumers();
  for (int bn_index : graph.topological_order()) {
    Node& bn = graph.nodes[static_cast<size_t>(bn_index)];
    if (bn.dead || bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5) continue;
    if (bn.outputs.empty() || bn.outputs[0] < 0 || !on_cpu(devices, bn_index)) continue;
    bool statistics = true;
    for (size_t i = 1; i < 5; ++i) {
      statistics = statistics && constant_input(graph, bn, i) && value_of(graph, bn.inputs[i]).dtype == DType::FLOAT32;
    }
    for (size_t i = 1; i < bn.outputs.size(); ++i) statistics = statistics && bn.outputs[i] < 0;
    if (!statistics) continue;
    // BN -> [Relu ->] Conv, each intermediate read by the next node alone.
    const std::vector<int>& bn_readers = readers[static_cast<size_t>(bn.outputs[0])];
    if (bn_readers.size() != 1) continue;
    int relu_index = -1, conv_index = bn_readers[0];
    if (graph.nodes[static_cast<size_t>(conv_index)].op_type == "Relu" &&
        graph.nodes[static_cast<size_t>(conv_index)].domain.empty()) {
      relu_index = conv_index;
      const Node& relu = graph.nodes[static_cast<size_t>(relu_index)];
      if (!only_reader(graph, readers, bn, relu_index) || relu.outputs.empty() || relu.outputs[0] < 0) continue;
      const std::vector<int>& relu_readers = readers[static_cast<size_t>(relu.outputs[0])];
      if (relu_readers.size() != 1 || !on_cpu(devices, relu_index)) continue;
      conv_index = relu_readers[0];
      if (!only_reader(graph, readers, relu, conv_index)) continue;
    } else if (!only_reader(graph, readers, bn, conv_index)) {
      continue;
    }
    Node& conv = graph.nodes[static_cast<size_t>(conv_index)];
    const int fed = relu_index >= 0 ? graph.nodes[static_cast<size_t>(relu_index)].outputs[0] : bn.outputs[0];
    if (!on_cpu(devices, conv_index) || !pointwise_conv(graph, conv) || conv.inputs[0] != fed) continue;
    // The Conv reads the normalised value once, as input 0, and nowhere else.
    if (std::count(conv.inputs.begin(), conv.inputs.end(), fed) != 1) continue;
    const Value& x = value_of(graph, bn.inputs[0]);
    if (!x.has_shape || x.shape != value_of(graph, fed).shape || x.dtype != DType::FLOAT32) continue;
    const int64_t c = x.shape[1];
    bool sizes = true;
    for (size_t i = 1; i < 5; ++i) sizes = sizes && value_of(graph, bn.inputs[i]).constant->numel() == c;
    if (!sizes) continue;
    const ChannelMap map = batch_norm_map(graph, bn);
    HostTensor affine(DType::FLOAT32, {2, c});
    for (int64_t i = 0; i < c; ++i) {
      affine.data<float>()[i] = static_cast<float>(map.scale[static_cast<size_t>(i)]);
      affine.data<float>()[c + i] = static_cast<float>(map.shift[static_cast<size_t>(i)]);
    }
    conv.input_affine.value =
        graph.add_constant((conv.name.empty() ? "conv" : conv.name) + "/input_affine", std::move(affine));
    conv.input_affine.relu = relu_index >= 0;
    conv.inputs[0] = bn.inputs[0];
    bn.dead = true;
    if (relu_index >= 0) graph.nodes[static_cast<size_t>(relu_index)].dead = true;
    ++stats->input_affines_fused;
    ++fused;
  }
  if (fused > 0) drop_dead(graph, devices);
  return fused;
}

}  // namespace kiln::planner
