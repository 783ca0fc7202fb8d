#include "passes/qdq.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "core/error.h"
#include "kiln/kernels/qgemm.h"
#include "passes/infer.h"

namespace kiln::planner {
namespace {

// The value's constant (folding has resolved Constant nodes already; a
// Constant node is still followed, for graphs not folded).
const HostTensor* constant_of(const Graph& graph, int v) {
  if (v < 0) return nullptr;
  const Value& value = graph.values[static_cast<size_t>(v)];
  if (value.constant) return value.constant.get();
  if (value.producer < 0) return nullptr;
  const Node& node = graph.nodes[static_cast<size_t>(value.producer)];
  if (node.dead || node.op_type != "Constant" || !node.domain.empty()) return nullptr;
  const auto it = node.attrs.find("value");
  if (it == node.attrs.end() || it->second.kind != Attribute::Kind::kTensor) return nullptr;
  return it->second.tensor.get();
}

// A live node of the default domain producing value v, or nullptr.
Node* producer_of(Graph& graph, int v, const char* op_type) {
  if (v < 0) return nullptr;
  const int p = graph.values[static_cast<size_t>(v)].producer;
  if (p < 0) return nullptr;
  Node& node = graph.nodes[static_cast<size_t>(p)];
  if (node.dead || node.op_type != op_type || !node.domain.empty()) return nullptr;
  return &node;
}

// A DequantizeLinear or QuantizeLinear: its quantized side, constant scale
// and zero point (nullptr: 0 of the quantized dtype), axis.
struct QuantNode {
  Node* node = nullptr;
  int quantized = -1;
  const HostTensor* scale = nullptr;
  const HostTensor* zp = nullptr;
  int zp_value = -1;
  int64_t axis = 1;
};

bool read_quant(Graph& graph, Node* node, int quantized, QuantNode* out) {
  if (node == nullptr || node->inputs.size() < 2) return false;
  out->node = node;
  out->quantized = quantized;
  out->scale = constant_of(graph, node->inputs[1]);
  if (out->scale == nullptr || out->scale->dtype != DType::FLOAT32) return false;
  if (node->inputs.size() > 2 && node->inputs[2] >= 0) {
    out->zp = constant_of(graph, node->inputs[2]);
    if (out->zp == nullptr) return false;
    out->zp_value = node->inputs[2];
  }
  const auto it = node->attrs.find("axis");
  out->axis = it != node->attrs.end() ? it->second.i : 1;
  return true;
}

bool per_tensor(const QuantNode& q) { return q.scale->numel() == 1 && (q.zp == nullptr || q.zp->numel() == 1); }

// A per-tensor quantization's zero point (0 where absent).
int64_t zero_point(const QuantNode& q) { return q.zp != nullptr ? q.zp->int_at(0) : 0; }

// v as QuantizeLinear to `dtype` (uint8 or int8) makes it: round half to
// even, saturate; NaN gives the zero point.
int64_t quantize_value(float v, const QuantNode& q, DType dtype) {
  const int64_t low = dtype == DType::UINT8 ? 0 : -128;
  if (std::isnan(v)) return zero_point(q);
  const double r =
      std::nearbyint(static_cast<double>(v / q.scale->data<float>()[0])) + static_cast<double>(zero_point(q));
  return static_cast<int64_t>(std::min<double>(low + 255, std::max<double>(low, r)));
}

// The quantized value `value` as DequantizeLinear makes it.
float dequantize_value(int64_t value, const QuantNode& q) {
  return static_cast<float>(value - zero_point(q)) * q.scale->data<float>()[0];
}

// DQ producing value v, its input (the quantized tensor) any dtype kiln's
// kernels take.
// Through Identity nodes: PyTorch's exporter shares one initializer among
// the ops that use the same values (MobileNetV2's biases after batch norm
// folding) by an Identity per further reader, and a quantizer then puts the
// DequantizeLinear before the Identity.
bool match_dq(Graph& graph, int v, QuantNode* out) {
  for (int hops = 0; hops < 8; ++hops) {
    const Node* identity = producer_of(graph, v, "Identity");
    if (identity == nullptr || identity->inputs.empty()) break;
    v = identity->inputs[0];
  }
  Node* node = producer_of(graph, v, "DequantizeLinear");
  return node != nullptr && read_quant(graph, node, node->inputs[0], out);
}

// The zero point's value id, a new constant 0 of `dtype` when absent.
int zp_value(Graph& graph, const QuantNode& q, DType dtype) {
  if (q.zp_value >= 0) return q.zp_value;
  return graph.add_constant("zero_point", HostTensor(dtype, {}));
}

Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}

// The activation between the float op and Q, as bounds in Q's domain;
// false when it is not one the kernels clamp to.
bool clamp_bounds(Graph& graph, const Node& act, const QuantNode& q, DType y, int64_t* lo, int64_t* hi) {
  const int64_t zp = zero_point(q);
  const int64_t low = y == DType::UINT8 ? 0 : -128, high = low + 255;
  auto quantize = [&](float v) { return quantize_value(v, q, y); };
  if (act.op_type == "Relu") {
    *lo = std::max(low, zp);
    *hi = high;
    return true;
  }
  if (act.op_type != "Clip") return false;
  float a = -INFINITY, b = INFINITY;
  if (act.has_attr("min")) a = act.attrs.at("min").f;
  if (act.has_attr("max")) b = act.attrs.at("max").f;
  for (size_t i = 1; i < act.inputs.size() && i < 3; ++i) {
    if (act.inputs[i] < 0) continue;
    const HostTensor* t = constant_of(graph, act.inputs[i]);
    if (t == nullptr || t->numel() != 1 || t->dtype != DType::FLOAT32) return false;
    (i == 1 ? a : b) = t->data<float>()[0];
  }
  *lo = std::isinf(a) ? low : quantize(a);
  *hi = std::isinf(b) ? high : quantize(b);
  return *lo <= *hi;
}

// The only reader of value v, or -1 (also when v is a graph output).
int only_reader(const Graph& graph, const std::vector<std::vector<int>>& readers, int v) {
  if (v < 0 || graph.values[static_cast<size_t>(v)].is_graph_output) return -1;
  const auto& r = readers[static_cast<size_t>(v)];
  return r.size() == 1 ? r[0] : -1;
}

// The int32 bias for channels scaled x_scale * w_scale[c]: DQ(int32) at that
// scale as it is, anything else (float, other scale) requantized.
int bias_value(Graph& graph, int bias, const QuantNode& x, const QuantNode& w, int64_t channels,
               const std::string& stem) {
  const float xs = x.scale->data<float>()[0];
  auto w_scale = [&](int64_t c) { return w.scale->data<float>()[w.scale->numel() == 1 ? 0 : c]; };
  QuantNode b;
  std::vector<double> real(static_cast<size_t>(channels));
  if (match_dq(graph, bias, &b)) {
    const HostTensor* q = constant_of(graph, b.quantized);
    if (q == nullptr || q->numel() != channels || (b.scale->numel() != 1 && b.scale->numel() != channels)) return -2;
    bool same = q->dtype == DType::INT32 && (b.zp == nullptr || (b.zp->numel() == 1 && b.zp->int_at(0) == 0));
    for (int64_t c = 0; c < channels; ++c) {
      const double bs = b.scale->data<float>()[b.scale->numel() == 1 ? 0 : c];
      const double want = static_cast<double>(xs * w_scale(c));
      if (std::fabs(bs - want) > 1e-6 * want) same = false;
      const int64_t zp = b.zp != nullptr ? b.zp->int_at(b.zp->numel() == 1 ? 0 : c) : 0;
      real[static_cast<size_t>(c)] = static_cast<double>(q->int_at(c) - zp) * bs;
    }
    if (same) return b.quantized;
  } else {
    const HostTensor* f = constant_of(graph, bias);
    if (f == nullptr || f->dtype != DType::FLOAT32 || f->numel() != channels) return -2;
    for (int64_t c = 0; c < channels; ++c) real[static_cast<size_t>(c)] = f->data<float>()[c];
  }
  HostTensor out(DType::INT32, {channels});
  for (int64_t c = 0; c < channels; ++c) {
    const double v = std::nearbyint(real[static_cast<size_t>(c)] / static_cast<double>(xs * w_scale(c)));
    if (!(std::fabs(v) < 2147483647.0)) return -2;
    out.data<int32_t>()[c] = static_cast<int32_t>(v);
  }
  return graph.add_constant(stem + "_bias_int32", std::move(out));
}

// Whether MatMul `op`'s B, quantized as `b` (not a constant), can be the
// second activation of MatMulInt8: uint8 or int8, A and B of one rank (2 or
// more) with the same leading dims, k at most kQGemmMatMulMaxK.
bool activations_multiply(const Graph& graph, const Node& op, const QuantNode& b) {
  const Value& bv = graph.values[static_cast<size_t>(b.quantized)];
  const Value& av = graph.values[static_cast<size_t>(op.inputs[0])];
  if (bv.dtype != DType::UINT8 && bv.dtype != DType::INT8) return false;
  const std::vector<int64_t>&a_shape = av.shape, &b_shape = bv.shape;
  if (!av.has_shape || !bv.has_shape || a_shape.size() < 2 || a_shape.size() != b_shape.size()) return false;
  for (size_t d = 0; d + 2 < a_shape.size(); ++d) {
    if (a_shape[d] != b_shape[d]) return false;
  }
  return a_shape.back() == b_shape[b_shape.size() - 2] && a_shape.back() <= kernels::kQGemmMatMulMaxK;
}

// A new value of a known type and shape (a fresh name from `stem`) that
// node `producer` writes; returns its id.
int add_produced_value(Graph& graph, const std::string& stem, DType dtype, std::vector<int64_t> shape, int producer) {
  Value value;
  value.name = graph.unique_name(stem);
  value.dtype = dtype;
  value.has_type = true;
  value.shape = std::move(shape);
  value.has_shape = true;
  value.producer = producer;
  return graph.add_value(std::move(value));
}

// Node n's output becomes the input of a DepthToSpace (CRD, `block`) that
// writes it (pixel_shuffle_block). Adds a node: no reference into
// graph.nodes is kept across.
void add_depth_to_space(Graph& graph, int n, int64_t block) {
  const int out = graph.nodes[static_cast<size_t>(n)].outputs[0];
  const std::vector<int64_t> x = graph.values[static_cast<size_t>(graph.nodes[static_cast<size_t>(n)].inputs[0])].shape;
  const DType dtype = graph.values[static_cast<size_t>(out)].dtype;
  const int64_t channels = graph.values[static_cast<size_t>(out)].shape[1];  // copied: adding a value moves them
  const int taps = add_produced_value(graph, graph.nodes[static_cast<size_t>(n)].name + "_taps", dtype,
                                      {x[0], channels * block * block, x[2], x[3]}, n);
  Node shuffle;
  shuffle.name = graph.nodes[static_cast<size_t>(n)].name + "_depth_to_space";
  shuffle.op_type = "DepthToSpace";
  shuffle.opset = 13;
  shuffle.attrs["blocksize"] = int_attr(block);
  Attribute mode;
  mode.kind = Attribute::Kind::kString;
  mode.s = "CRD";
  shuffle.attrs["mode"] = mode;
  shuffle.inputs = {taps};
  shuffle.outputs = {out};
  graph.nodes[static_cast<size_t>(n)].outputs = {taps};
  graph.values[static_cast<size_t>(out)].producer = static_cast<int>(graph.nodes.size());
  graph.nodes.push_back(std::move(shuffle));
}

// A ConvTranspose whose kernel is its stride (U-Net's 2x2 up-sampling at
// stride 2): 2-D, square, one group, no pads, dilations, output padding or
// output shape. Each output pixel then takes one input pixel through one
// kernel tap, so the op is a 1x1 convolution to cout * k * k channels,
// channel (m, ky, kx) = m * k * k + ky * k + kx, followed by DepthToSpace
// (CRD) with blocksize k. Returns k, or 0 when the op is not one.
int64_t pixel_shuffle_block(const Node& op, const HostTensor& w) {
  if (w.shape.size() != 4 || w.shape[2] != w.shape[3] || w.shape[2] < 1) return 0;
  const int64_t k = w.shape[2];
  auto ints_are = [&](const char* key, std::vector<int64_t> fallback) {
    const auto it = op.attrs.find(key);
    if (it == op.attrs.end()) return true;
    return it->second.kind == Attribute::Kind::kInts && it->second.ints == fallback;
  };
  const auto group = op.attrs.find("group");
  const auto auto_pad = op.attrs.find("auto_pad");
  const bool one_group = group == op.attrs.end() || group->second.i == 1;
  const bool no_auto_pad = auto_pad == op.attrs.end() || auto_pad->second.s == "NOTSET";
  const bool geometry = ints_are("kernel_shape", {k, k}) && op.has_attr("strides") && ints_are("strides", {k, k}) &&
                        ints_are("pads", {0, 0, 0, 0}) && ints_are("dilations", {1, 1}) &&
                        ints_are("output_padding", {0, 0});
  return one_group && no_auto_pad && geometry && !op.has_attr("output_shape") ? k : 0;
}

// pixel_shuffle_block where the quantized input x and output y are 4-D.
int64_t foldable_pixel_shuffle(const Graph& graph, const Node& op, const HostTensor& w, int x, int y) {
  const bool four_d =
      graph.values[static_cast<size_t>(x)].shape.size() == 4 && graph.values[static_cast<size_t>(y)].shape.size() == 4;
  return four_d ? pixel_shuffle_block(op, w) : 0;
}

// ConvTranspose weights [cin, cout, k, k] as the 1x1 convolution's
// [cout * k * k, cin, 1, 1] (pixel_shuffle_block).
HostTensor pixel_shuffle_weights(const HostTensor& w) {
  const int64_t cin = w.shape[0], taps = w.shape[1] * w.shape[2] * w.shape[3];
  HostTensor out(w.dtype, {taps, cin, 1, 1});
  for (int64_t c = 0; c < cin; ++c) {
    for (int64_t t = 0; t < taps; ++t)
      out.bytes[static_cast<size_t>(t * cin + c)] = w.bytes[static_cast<size_t>(c * taps + t)];
  }
  return out;
}

// A per-channel constant (scale, zero point, bias) with each element
// repeated `times` in a row; a single element stays as it is.
int repeat_channels(Graph& graph, int v, int64_t times, const std::string& stem) {
  const HostTensor* t = constant_of(graph, v);
  if (t == nullptr || t->numel() == 1) return v;
  const size_t size = dtype_bytes(t->dtype);
  HostTensor out(t->dtype, {t->numel() * times});
  for (int64_t c = 0; c < out.numel(); ++c)
    memcpy(&out.bytes[static_cast<size_t>(c) * size], &t->bytes[static_cast<size_t>(c / times) * size], size);
  return graph.add_constant(stem, std::move(out));
}

// A pixel-shuffle ConvTranspose's weights, their scales and zero points
// and its int32 bias (-1: none) as the 1x1 convolution's, per tap.
void as_pixel_shuffle(Graph& graph, const std::string& stem, const HostTensor& w, int64_t block, int* weight,
                      int* w_scale, int* w_zp, int* bias) {
  const int64_t taps = block * block;
  *weight = graph.add_constant(stem + "_weight_1x1", pixel_shuffle_weights(w));
  *w_scale = repeat_channels(graph, *w_scale, taps, stem + "_weight_scale_1x1");
  *w_zp = repeat_channels(graph, *w_zp, taps, stem + "_weight_zero_point_1x1");
  if (*bias >= 0) *bias = repeat_channels(graph, *bias, taps, stem + "_bias_1x1");
}

// One Conv / ConvTranspose / Gemm / MatMul at index n, if the pattern around
// it matches.
bool fold_one(Graph& graph, const std::vector<std::vector<int>>& readers, int n, QdqStats* stats) {
  Node& op = graph.nodes[static_cast<size_t>(n)];
  const std::string kind = op.op_type;
  if (op.outputs.empty() || op.inputs.size() < 2) return false;
  QuantNode x, w, y;
  if (!match_dq(graph, op.inputs[0], &x) || !per_tensor(x)) return false;
  if (!match_dq(graph, op.inputs[1], &w)) return false;
  const HostTensor* wq = constant_of(graph, w.quantized);
  // A MatMul of two activations (attention): per tensor, 8-bit, one rank and
  // the same leading dims (MatMulInt8).
  const bool activation_b = wq == nullptr && kind == "MatMul" && per_tensor(w) && activations_multiply(graph, op, w);
  if (!activation_b && (wq == nullptr || (wq->dtype != DType::UINT8 && wq->dtype != DType::INT8))) return false;
  // The float op's output, through an optional activation, into one Q.
  int reader = only_reader(graph, readers, op.outputs[0]);
  if (reader < 0) return false;
  Node* act = nullptr;
  if (graph.nodes[static_cast<size_t>(reader)].op_type == "Relu" ||
      graph.nodes[static_cast<size_t>(reader)].op_type == "Clip") {
    act = &graph.nodes[static_cast<size_t>(reader)];
    if (act->inputs[0] != op.outputs[0]) return false;
    reader = only_reader(graph, readers, act->outputs[0]);
    if (reader < 0) return false;
  }
  Node& q = graph.nodes[static_cast<size_t>(reader)];
  if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.outputs.empty()) return false;
  if (!read_quant(graph, &q, q.outputs[0], &y) || !per_tensor(y)) return false;
  const DType y_dtype = y.zp != nullptr ? y.zp->dtype : DType::UINT8;
  const DType x_dtype = x.zp != nullptr ? x.zp->dtype : graph.values[static_cast<size_t>(x.quantized)].dtype;
  if ((y_dtype != DType::UINT8 && y_dtype != DType::INT8) || (x_dtype != DType::UINT8 && x_dtype != DType::INT8))
    return false;
  int64_t lo = 0, hi = 0;
  if (act != nullptr && !clamp_bounds(graph, *act, y, y_dtype, &lo, &hi)) return false;

  // Per-channel weights must run along the output channel.
  const int64_t wrank = wq != nullptr ? static_cast<int64_t>(wq->shape.size()) : 0;
  const bool w_per_tensor = per_tensor(w);
  const int64_t w_axis = w.axis < 0 ? w.axis + wrank : w.axis;
  int weight = w.quantized, bias = -1;
  int64_t channels = 0;
  std::string target;
  std::map<std::string, Attribute> attrs;
  int64_t block = 0;  // a ConvTranspose's pixel_shuffle_block
  if (kind == "Conv") {
    if (!w_per_tensor && w_axis != 0) return false;
    channels = wq->shape[0];
    target = "QLinearConv";
    attrs = op.attrs;
    if (op.inputs.size() > 2) bias = op.inputs[2];
  } else if (kind == "ConvTranspose") {
    const bool per_output_channel = w_per_tensor || w_axis == 1;
    block = per_output_channel ? foldable_pixel_shuffle(graph, op, *wq, x.quantized, y.quantized) : 0;
    if (block == 0) return false;
    channels = wq->shape[1];
    target = "QLinearConv";
    if (op.inputs.size() > 2) bias = op.inputs[2];
  } else if (activation_b) {
    channels = 1;
    target = "QLinearMatMul";
  } else if (kind == "Gemm" || kind == "MatMul") {
    if (wrank != 2) return false;
    bool trans_b = false;
    if (kind == "Gemm") {
      auto attr = [&](const char* key, float fallback) {
        const auto it = op.attrs.find(key);
        if (it == op.attrs.end()) return fallback;
        return it->second.kind == Attribute::Kind::kInt ? static_cast<float>(it->second.i) : it->second.f;
      };
      if (attr("transA", 0) != 0 || attr("alpha", 1) != 1 || attr("beta", 1) != 1) return false;
      trans_b = attr("transB", 0) != 0;
      if (op.inputs.size() > 2) bias = op.inputs[2];
    }
    if (!w_per_tensor && w_axis != (trans_b ? 0 : 1)) return false;
    channels = trans_b ? wq->shape[0] : wq->shape[1];
    if (trans_b) {
      const int64_t rows = wq->shape[0], cols = wq->shape[1];
      HostTensor t(wq->dtype, {cols, rows});
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c)
          t.bytes[static_cast<size_t>(c * rows + r)] = wq->bytes[static_cast<size_t>(r * cols + c)];
      }
      weight = graph.add_constant(op.name + "_weight_t", std::move(t));
    }
    target = "QLinearMatMul";
  } else {
    return false;
  }
  if ((w.scale->numel() != 1 && w.scale->numel() != channels) ||
      (w.zp != nullptr && w.zp->numel() != 1 && w.zp->numel() != channels)) {
    return false;
  }
  const DType w_dtype = wq != nullptr ? wq->dtype : graph.values[static_cast<size_t>(w.quantized)].dtype;
  int bias_int32 = -1;
  if (bias >= 0) {
    bias_int32 = bias_value(graph, bias, x, w, channels, op.name);
    if (bias_int32 == -2) return false;
  }
  if (act != nullptr) {
    attrs["kiln_y_min"] = int_attr(lo);
    attrs["kiln_y_max"] = int_attr(hi);
  }
  int w_scale = w.node->inputs[1], w_zp = zp_value(graph, w, w_dtype);
  if (block > 0) as_pixel_shuffle(graph, op.name, *wq, block, &weight, &w_scale, &w_zp, &bias_int32);
  std::vector<int> inputs = {x.quantized, x.node->inputs[1], zp_value(graph, x, x_dtype), weight, w_scale,
                             w_zp,        q.inputs[1],       zp_value(graph, y, y_dtype)};
  if (bias_int32 >= 0) inputs.push_back(bias_int32);
  // The float op's node becomes the quantized one and takes over Q's output.
  Node& rewritten = graph.nodes[static_cast<size_t>(n)];
  graph.values[static_cast<size_t>(rewritten.outputs[0])].producer = -1;
  rewritten.op_type = target;
  rewritten.inputs = std::move(inputs);
  rewritten.attrs = std::move(attrs);
  rewritten.outputs = {y.quantized};
  graph.values[static_cast<size_t>(y.quantized)].producer = n;
  if (act != nullptr) act->dead = true;
  graph.nodes[static_cast<size_t>(reader)].dead = true;
  ++stats->folded[kind];
  if (block > 0) add_depth_to_space(graph, n, block);
  return true;
}

// A DequantizeLinear of constants becomes its float value.
bool fold_constant_dq(Graph& graph, Node& node) {
  QuantNode d;
  if (!read_quant(graph, &node, node.inputs[0], &d) || node.outputs.empty() || node.outputs[0] < 0) return false;
  const HostTensor* x = constant_of(graph, d.quantized);
  if (x == nullptr) return false;
  const int64_t channels = d.scale->numel();
  int64_t inner = x->numel(), count = 1;
  if (channels != 1) {
    const int64_t rank = static_cast<int64_t>(x->shape.size());
    const int64_t axis = d.axis < 0 ? d.axis + rank : d.axis;
    if (axis < 0 || axis >= rank || x->shape[static_cast<size_t>(axis)] != channels) return false;
    inner = 1;
    for (int64_t i = axis + 1; i < rank; ++i) inner *= x->shape[static_cast<size_t>(i)];
    count = channels;
  }
  if (d.zp != nullptr && d.zp->numel() != channels) return false;
  HostTensor out(DType::FLOAT32, x->shape);
  for (int64_t i = 0; i < x->numel(); ++i) {
    const int64_t c = count == 1 ? 0 : (i / inner) % count;
    const int64_t zp = d.zp != nullptr ? d.zp->int_at(c) : 0;
    out.data<float>()[i] = static_cast<float>(x->int_at(i) - zp) * d.scale->data<float>()[c];
  }
  Value& value = graph.values[static_cast<size_t>(node.outputs[0])];
  value.constant = std::make_shared<HostTensor>(std::move(out));
  value.producer = -1;
  node.dead = true;
  return true;
}

// Whether two per-tensor quantizations are the same (scale bits, zero
// point and its dtype).
bool same_quantization(const Graph& graph, const QuantNode& a, const QuantNode& b) {
  if (a.scale->data<float>()[0] != b.scale->data<float>()[0]) return false;
  const int64_t za = zero_point(a), zb = zero_point(b);
  const DType da = a.zp != nullptr ? a.zp->dtype : graph.values[static_cast<size_t>(a.quantized)].dtype;
  const DType db = b.zp != nullptr ? b.zp->dtype : DType::UINT8;
  return za == zb && da == db;
}

// A string attribute of a node, or `otherwise` where it has none.
std::string string_attr(const Node& op, const char* name, const char* otherwise) {
  const auto it = op.attrs.find(name);
  return it != op.attrs.end() && it->second.kind == Attribute::Kind::kString ? it->second.s : otherwise;
}

// Whether a Pad's pads are all 0 (PyTorch exports AvgPool2d with
// count_include_pad as a Pad of none before it: DenseNet's transitions).
bool pads_nothing(const Graph& graph, const Node& op) {
  if (op.inputs.size() > 1 && op.inputs[1] >= 0) {
    const HostTensor* pads = constant_of(graph, op.inputs[1]);
    if (pads == nullptr) return false;
    for (int64_t i = 0; i < pads->numel(); ++i) {
      if (pads->int_at(i) != 0) return false;
    }
    return true;
  }
  const auto it = op.attrs.find("pads");
  if (it == op.attrs.end()) return false;
  for (int64_t v : it->second.ints) {
    if (v != 0) return false;
  }
  return true;
}

// Whether a Pad or a Resize only moves bytes of quantized data: Resize in
// nearest mode; Pad by reflection or edge, or with the constant 0 where
// the zero point is 0 (then the padding byte 0 is the quantized 0: the
// kernels pad 8-bit data with zero bytes only), or by nothing at all. Its
// constant value input, a float, is dropped.
bool moves_bytes(const Graph& graph, Node& op, const QuantNode& in) {
  if (op.op_type == "Resize") return string_attr(op, "mode", "nearest") == "nearest";
  if (op.op_type != "Pad") return true;
  if (string_attr(op, "mode", "constant") != "constant") return true;
  if (pads_nothing(graph, op)) {
    if (op.inputs.size() > 2) op.inputs[2] = -1;
    return true;
  }
  if (in.zp != nullptr && in.zp->int_at(0) != 0) return false;
  if (op.inputs.size() > 2 && op.inputs[2] >= 0) {
    const HostTensor* value = constant_of(graph, op.inputs[2]);
    if (value == nullptr || value->dtype != DType::FLOAT32 || value->data<float>()[0] != 0.f) return false;
    op.inputs[2] = -1;
  }
  return true;
}

// DQ -> op -> Q with one quantization on both sides, where the op commutes
// with it: the op on the quantized data. Reshape, Flatten, Squeeze,
// Unsqueeze, Transpose, Concat, Slice, a nearest Resize and a Pad that
// moves_bytes() move bytes, MaxPool (without Indices) takes the largest
// (Q is monotonic); Relu and Clip become a Clip of the quantized values to
// Q(bounds) (exact: Q is monotonic and Q(DQ(x)) = x).
bool fold_passthrough(Graph& graph, const std::vector<std::vector<int>>& readers, int n, QdqStats* stats) {
  Node& op = graph.nodes[static_cast<size_t>(n)];
  const std::string kind = op.op_type;
  const bool clamp = kind == "Relu" || kind == "Clip";
  if (op.outputs.size() != 1 || op.inputs.empty()) return false;
  const size_t data_inputs = kind == "Concat" ? op.inputs.size() : 1;
  std::vector<QuantNode> in(data_inputs);
  for (size_t i = 0; i < data_inputs; ++i) {
    if (!match_dq(graph, op.inputs[i], &in[i]) || !per_tensor(in[i])) return false;
    if (i > 0 && !same_quantization(graph, in[0], in[i])) return false;
  }
  for (size_t i = data_inputs; i < op.inputs.size(); ++i) {
    if (op.inputs[i] >= 0 && constant_of(graph, op.inputs[i]) == nullptr) return false;
  }
  const int reader = only_reader(graph, readers, op.outputs[0]);
  if (reader < 0) return false;
  Node& q = graph.nodes[static_cast<size_t>(reader)];
  QuantNode y;
  if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.outputs.empty()) return false;
  if (!read_quant(graph, &q, q.outputs[0], &y) || !per_tensor(y) || !same_quantization(graph, in[0], y)) return false;
  const DType dtype = y.zp != nullptr ? y.zp->dtype : DType::UINT8;
  if (dtype != DType::UINT8 && dtype != DType::INT8) return false;
  if (!moves_bytes(graph, op, in[0])) return false;
  std::vector<int> inputs = op.inputs;
  for (size_t i = 0; i < data_inputs; ++i) inputs[i] = in[i].quantized;
  if (clamp) {
    int64_t lo = 0, hi = 0;
    if (!clamp_bounds(graph, op, y, dtype, &lo, &hi)) return false;
    HostTensor lo_t(dtype, {}), hi_t(dtype, {});
    if (dtype == DType::UINT8) {
      lo_t.data<uint8_t>()[0] = static_cast<uint8_t>(lo);
      hi_t.data<uint8_t>()[0] = static_cast<uint8_t>(hi);
    } else {
      lo_t.data<int8_t>()[0] = static_cast<int8_t>(lo);
      hi_t.data<int8_t>()[0] = static_cast<int8_t>(hi);
    }
    inputs = {in[0].quantized, graph.add_constant(op.name + "_min", std::move(lo_t)),
              graph.add_constant(op.name + "_max", std::move(hi_t))};
    op.op_type = "Clip";
    op.attrs.clear();
  }
  graph.values[static_cast<size_t>(op.outputs[0])].producer = -1;
  op.inputs = std::move(inputs);
  op.outputs = {y.quantized};
  graph.values[static_cast<size_t>(y.quantized)].producer = n;
  q.dead = true;
  ++stats->folded[kind];
  return true;
}

// Whether a Softmax runs over its input's last axis (its default from
// opset 13; before, the axis from which the input is flattened).
bool softmax_over_last_axis(const Graph& graph, const Node& op) {
  const int64_t rank = static_cast<int64_t>(graph.values[static_cast<size_t>(op.inputs[0])].shape.size());
  const auto it = op.attrs.find("axis");
  const int64_t axis = it != op.attrs.end() ? it->second.i : op.opset >= 13 ? -1 : 1;
  return rank >= 1 && (axis < 0 ? axis + rank : axis) == rank - 1;
}

// DQ -> AveragePool | GlobalAveragePool -> Q (one dtype), DQ, DQ -> Add |
// Mul -> [Relu | Clip] -> Q, DQ -> Softmax (over the last axis) -> Q, all
// per tensor: ONNX Runtime's contrib ops QLinearAveragePool,
// QLinearGlobalAveragePool, QLinearAdd, QLinearMul, QLinearSoftmax (domain
// com.microsoft; ops/quant_ops.cc), the activation as output clamping.
bool fold_qlinear_op(Graph& graph, const std::vector<std::vector<int>>& readers, int n, QdqStats* stats) {
  Node& op = graph.nodes[static_cast<size_t>(n)];
  const std::string kind = op.op_type;
  const bool binary = kind == "Add" || kind == "Mul";
  const bool softmax = kind == "Softmax";
  if (op.outputs.empty() || op.inputs.size() != (binary ? 2u : 1u)) return false;
  if (softmax && !softmax_over_last_axis(graph, op)) return false;
  if (!binary) {
    const auto it = op.attrs.find("dilations");
    if (it != op.attrs.end()) {
      for (int64_t d : it->second.ints) {
        if (d != 1) return false;
      }
    }
  }
  QuantNode in[2];
  DType in_dtype[2] = {DType::UINT8, DType::UINT8};
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!match_dq(graph, op.inputs[i], &in[i]) || !per_tensor(in[i])) return false;
    in_dtype[i] = in[i].zp != nullptr ? in[i].zp->dtype : graph.values[static_cast<size_t>(in[i].quantized)].dtype;
    if (in_dtype[i] != DType::UINT8 && in_dtype[i] != DType::INT8) return false;
  }
  int reader = only_reader(graph, readers, op.outputs[0]);
  if (reader < 0) return false;
  Node* act = nullptr;
  const std::string& next = graph.nodes[static_cast<size_t>(reader)].op_type;
  if (binary && (next == "Relu" || next == "Clip")) {
    act = &graph.nodes[static_cast<size_t>(reader)];
    if (act->inputs[0] != op.outputs[0]) return false;
    reader = only_reader(graph, readers, act->outputs[0]);
    if (reader < 0) return false;
  }
  Node& q = graph.nodes[static_cast<size_t>(reader)];
  QuantNode y;
  if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.outputs.empty()) return false;
  if (!read_quant(graph, &q, q.outputs[0], &y) || !per_tensor(y)) return false;
  const DType y_dtype = y.zp != nullptr ? y.zp->dtype : DType::UINT8;
  if (y_dtype != DType::UINT8 && y_dtype != DType::INT8) return false;
  if (!binary && !softmax && y_dtype != in_dtype[0]) return false;
  int64_t lo = 0, hi = 0;
  if (act != nullptr && !clamp_bounds(graph, *act, y, y_dtype, &lo, &hi)) return false;
  std::vector<int> inputs;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    inputs.insert(inputs.end(), {in[i].quantized, in[i].node->inputs[1], zp_value(graph, in[i], in_dtype[i])});
  }
  inputs.insert(inputs.end(), {q.inputs[1], zp_value(graph, y, y_dtype)});
  if (act != nullptr) {
    op.attrs["kiln_y_min"] = int_attr(lo);
    op.attrs["kiln_y_max"] = int_attr(hi);
    act->dead = true;
  }
  if (softmax) op.attrs = {{"axis", int_attr(-1)}, {"opset", int_attr(13)}};
  graph.values[static_cast<size_t>(op.outputs[0])].producer = -1;
  op.op_type = "QLinear" + kind;
  op.domain = "com.microsoft";
  op.inputs = std::move(inputs);
  op.outputs = {y.quantized};
  graph.values[static_cast<size_t>(y.quantized)].producer = n;
  q.dead = true;
  ++stats->folded[kind];
  return true;
}

// ---------------------------------------------------------------------------
// Lookup tables: an element-wise float chain between DequantizeLinears of
// one tensor and a QuantizeLinear is a function of one byte, so the whole
// chain, with its Q and DQs, becomes one 256-entry table.

// Float ops whose every output element depends only on the same element of
// their inputs (with scalar constants beside): what a table can take in.
bool elementwise_op(const Node& node) {
  if (node.dead || node.outputs.size() != 1) return false;
  if (node.domain == "kiln") return node.op_type == "Silu";
  if (node.domain == "com.microsoft") return node.op_type == "Gelu";
  if (!node.domain.empty()) return false;
  static const char* const kOps[] = {
      "Sigmoid",  "Tanh",     "Relu",  "LeakyRelu", "Elu",   "Selu",       "Celu", "HardSigmoid", "HardSwish",
      "Softplus", "Softsign", "Exp",   "Log",       "Sqrt",  "Reciprocal", "Neg",  "Abs",         "Erf",
      "Sin",      "Cos",      "Floor", "Ceil",      "Round", "Sign",       "Clip", "Add",         "Sub",
      "Mul",      "Div",      "Pow",   "Max",       "Min",   "Mish",       "Gelu", "Identity",    "ThresholdedRelu",
      "Shrink"};
  for (const char* op : kOps) {
    if (node.op_type == op) return true;
  }
  return false;
}

// The region feeding one Q: its nodes (producers first), and for each DQ
// leaf the 256 values it gives over the root's bytes.
struct LookupRegion {
  std::vector<int> nodes;
  std::map<int, std::vector<float>> leaves;  // DQ output value -> values
  std::map<int, float> scalars;              // DQ of a constant scalar -> its value
  int root = -1;                             // the quantized tensor
  bool failed = false;
};

// The root's byte b (0-255) as its dtype's value.
int64_t byte_value(DType dtype, int b) { return dtype == DType::INT8 ? static_cast<int8_t>(b) : b; }

// A DQ leaf at value v: its root (through one Lookup this pass wrote: the
// table's input) and its 256 values, as DequantizeLinear computes them.
void add_leaf(Graph& graph, int v, const QuantNode& dq, LookupRegion* r) {
  int root = dq.quantized;
  const HostTensor* table = nullptr;
  const int p = graph.values[static_cast<size_t>(dq.quantized)].producer;
  if (p >= 0) {
    const Node& lookup = graph.nodes[static_cast<size_t>(p)];
    if (!lookup.dead && lookup.domain == "kiln" && lookup.op_type == "Lookup") {
      root = lookup.inputs[0];
      table = constant_of(graph, lookup.inputs[1]);
    }
  }
  if (r->root >= 0 && r->root != root) r->failed = true;
  r->root = root;
  const DType root_dtype = graph.values[static_cast<size_t>(root)].dtype;
  std::vector<float> values(256);
  for (int b = 0; b < 256; ++b) {
    values[static_cast<size_t>(b)] =
        dequantize_value(table != nullptr ? table->int_at(b) : byte_value(root_dtype, b), dq);
  }
  r->leaves[v] = std::move(values);
}

// Walks back from value v: DQ leaves, scalar constants and element-wise
// nodes; anything else fails the region.
void collect_region(Graph& graph, int v, std::set<int>* seen, LookupRegion* r) {
  if (r->failed || v < 0 || !seen->insert(v).second) return;
  if (r->nodes.size() > 32) {
    r->failed = true;
    return;
  }
  QuantNode dq;
  const HostTensor* c = constant_of(graph, v);
  if (c != nullptr) {
    r->failed = c->numel() != 1;
    return;
  }
  if (match_dq(graph, v, &dq)) {
    const HostTensor* quantized = constant_of(graph, dq.quantized);
    if (quantized != nullptr) {
      // A quantized constant (quantize_static quantizes GELU's 0.5 too).
      if (quantized->numel() != 1 || !per_tensor(dq)) {
        r->failed = true;
        return;
      }
      r->scalars[v] = dequantize_value(quantized->int_at(0), dq);
      return;
    }
    const DType q = graph.values[static_cast<size_t>(dq.quantized)].dtype;
    if (!per_tensor(dq) || (q != DType::UINT8 && q != DType::INT8)) {
      r->failed = true;
      return;
    }
    add_leaf(graph, v, dq, r);
    return;
  }
  const int p = graph.values[static_cast<size_t>(v)].producer;
  if (p < 0 || !elementwise_op(graph.nodes[static_cast<size_t>(p)])) {
    r->failed = true;
    return;
  }
  for (int in : graph.nodes[static_cast<size_t>(p)].inputs) collect_region(graph, in, seen, r);
  r->nodes.push_back(p);
}

// Every value a region's nodes write is read only inside it, except `out`,
// read only by the Q; none is a graph output.
bool region_closed(const Graph& graph, const std::vector<std::vector<int>>& readers, const LookupRegion& r, int out,
                   int q) {
  const std::set<int> inside(r.nodes.begin(), r.nodes.end());
  for (int n : r.nodes) {
    const int v = graph.nodes[static_cast<size_t>(n)].outputs[0];
    if (graph.values[static_cast<size_t>(v)].is_graph_output) return false;
    for (int reader : readers[static_cast<size_t>(v)]) {
      if (graph.nodes[static_cast<size_t>(reader)].dead) continue;
      if (v == out ? reader != q : inside.count(reader) == 0) return false;
    }
  }
  return true;
}

// The region's output over the 256 bytes, computed by folding a copy of
// its nodes with the leaves as constants (the kernels' own float
// arithmetic); nothing when the copy does not fold to 256 floats.
std::optional<std::vector<float>> evaluate_region(const Graph& graph, const LookupRegion& r, int out,
                                                  const ConstantEvaluator& evaluator) {
  Graph g;
  g.opset = graph.opset;
  std::map<int, int> id;
  const auto map_value = [&](int v) {
    if (v < 0) return -1;
    const auto it = id.find(v);
    if (it != id.end()) return it->second;
    const auto leaf = r.leaves.find(v);
    if (leaf != r.leaves.end()) {
      return id[v] = g.add_constant("leaf", HostTensor::from_floats(leaf->second, {256}));
    }
    const auto scalar = r.scalars.find(v);
    if (scalar != r.scalars.end())
      return id[v] = g.add_constant("scalar", HostTensor::from_floats({scalar->second}, {}));
    return id[v] = g.add_constant("scalar", HostTensor(*constant_of(graph, v)));
  };
  for (int n : r.nodes) {
    const Node& node = graph.nodes[static_cast<size_t>(n)];
    Node copy;
    copy.name = node.name;
    copy.op_type = node.op_type;
    copy.domain = node.domain;
    copy.opset = node.opset;
    copy.attrs = node.attrs;
    for (int in : node.inputs) copy.inputs.push_back(map_value(in));
    Value value;
    value.name = g.unique_name("v");
    value.producer = static_cast<int>(g.nodes.size());
    id[node.outputs[0]] = g.add_value(std::move(value));
    copy.outputs.push_back(id[node.outputs[0]]);
    g.nodes.push_back(std::move(copy));
  }
  const int result = id.at(out);
  g.values[static_cast<size_t>(result)].is_graph_output = true;
  g.outputs = {result};
  InferOptions options;
  options.evaluator = &evaluator;
  try {
    infer_and_fold(g, options);
  } catch (const PlanError&) {
    return std::nullopt;
  }
  const auto& folded = g.values[static_cast<size_t>(result)].constant;
  if (folded == nullptr || folded->dtype != DType::FLOAT32 || folded->numel() != 256) return std::nullopt;
  return std::vector<float>(folded->data<float>(), folded->data<float>() + 256);
}

// A per-tensor Q to uint8 or int8 with an input: its quantization and
// dtype.
bool read_byte_q(Graph& graph, Node& q, QuantNode* y, DType* y_dtype) {
  if (q.inputs.empty() || q.outputs.empty() || !read_quant(graph, &q, q.outputs[0], y) || !per_tensor(*y)) {
    return false;
  }
  *y_dtype = y->zp != nullptr ? y->zp->dtype : DType::UINT8;
  return *y_dtype == DType::UINT8 || *y_dtype == DType::INT8;
}

// The Q at node index n, if an element-wise region of one root feeds it:
// the Q becomes Lookup(root, table), the region's nodes die.
bool fold_lookup(Graph& graph, const std::vector<std::vector<int>>& readers, int n, const ConstantEvaluator& evaluator,
                 QdqStats* stats) {
  Node& q = graph.nodes[static_cast<size_t>(n)];
  QuantNode y;
  DType y_dtype = DType::UINT8;
  if (!read_byte_q(graph, q, &y, &y_dtype)) return false;
  const int out = q.inputs[0];
  LookupRegion r;
  std::set<int> seen;
  collect_region(graph, out, &seen, &r);
  if (r.failed || r.nodes.empty() || r.root < 0) return false;
  // A lone Relu or Clip is fold_passthrough's (a Clip of the bytes).
  if (r.nodes.size() == 1) {
    const std::string& op = graph.nodes[static_cast<size_t>(r.nodes[0])].op_type;
    if (op == "Relu" || op == "Clip" || op == "Identity") return false;
  }
  if (!region_closed(graph, readers, r, out, n)) return false;
  const std::optional<std::vector<float>> values = evaluate_region(graph, r, out, evaluator);
  if (!values) return false;
  HostTensor table(y_dtype, {256});
  for (int b = 0; b < 256; ++b) {
    // uint8 or int8: the value's low byte either way.
    table.bytes[static_cast<size_t>(b)] =
        static_cast<uint8_t>(quantize_value((*values)[static_cast<size_t>(b)], y, y_dtype));
  }
  for (int node : r.nodes) {
    Node& dead = graph.nodes[static_cast<size_t>(node)];
    ++stats->folded[dead.op_type];
    dead.dead = true;
    graph.values[static_cast<size_t>(dead.outputs[0])].producer = -1;
  }
  q.op_type = "Lookup";
  q.domain = "kiln";
  q.attrs.clear();
  q.inputs = {r.root, graph.add_constant(q.name + "_table", std::move(table))};
  return true;
}

// ---------------------------------------------------------------------------
// A batch normalization between a DQ and a Q (DenseNet's and pre-activation
// ResNets' norm after a Concat or an Add, which no convolution before it
// can absorb): DQ -> BatchNormalization -> [Relu / Clip] -> Q is an affine
// map of each channel's bytes, y = round(fma(x - x_zp, a[c], b[c])) + y_zp,
// clamped, with a[c] = x_scale * gamma / sqrt(var + eps) / y_scale and b[c]
// = (beta - mean * gamma / sqrt(var + eps)) / y_scale: the Q becomes the
// domain kiln op ChannelAffine (run by ChannelAffineInt8). The float chain
// rounds after each op, this once, so the two can differ by one step where
// a value lies within float rounding of a half.

// BatchNormalization's four [C] constants and epsilon, or false.
bool batch_norm_constants(const Graph& graph, const Node& bn, int64_t channels, const HostTensor* c[4], double* eps) {
  if (bn.inputs.size() != 5 || bn.outputs.size() != 1) return false;
  if (bn.has_attr("training_mode") && bn.attrs.at("training_mode").i != 0) return false;
  for (size_t i = 0; i < 4; ++i) {
    c[i] = constant_of(graph, bn.inputs[i + 1]);
    if (c[i] == nullptr || c[i]->dtype != DType::FLOAT32 || c[i]->numel() != channels) return false;
  }
  *eps = bn.has_attr("epsilon") ? static_cast<double>(bn.attrs.at("epsilon").f) : 1e-5;
  return true;
}

bool fold_channel_affine(Graph& graph, const std::vector<std::vector<int>>& readers, int n, QdqStats* stats) {
  Node& q = graph.nodes[static_cast<size_t>(n)];
  QuantNode y;
  DType y_dtype = DType::UINT8;
  if (!read_byte_q(graph, q, &y, &y_dtype)) return false;
  Node* act = producer_of(graph, q.inputs[0], "Relu");
  if (act == nullptr) act = producer_of(graph, q.inputs[0], "Clip");
  if (act != nullptr && (act->inputs.empty() || only_reader(graph, readers, q.inputs[0]) != n)) return false;
  const int bn_out = act != nullptr ? act->inputs[0] : q.inputs[0];
  Node* bn = producer_of(graph, bn_out, "BatchNormalization");
  const int bn_reader = act != nullptr ? graph.values[static_cast<size_t>(q.inputs[0])].producer : n;
  if (bn == nullptr || only_reader(graph, readers, bn_out) != bn_reader) return false;
  QuantNode x;
  if (bn->inputs.empty() || !match_dq(graph, bn->inputs[0], &x) || !per_tensor(x)) return false;
  const Value& root = graph.values[static_cast<size_t>(x.quantized)];
  if ((root.dtype != DType::UINT8 && root.dtype != DType::INT8) || root.shape.size() < 2) return false;
  const int64_t channels = root.shape[1];
  const HostTensor* c[4];
  double eps = 0;
  if (!batch_norm_constants(graph, *bn, channels, c, &eps)) return false;
  int64_t lo = y_dtype == DType::UINT8 ? 0 : -128, hi = lo + 255;
  if (act != nullptr && !clamp_bounds(graph, *act, y, y_dtype, &lo, &hi)) return false;
  const double xs = x.scale->data<float>()[0], ys = y.scale->data<float>()[0];
  HostTensor a(DType::FLOAT32, {channels}), b(DType::FLOAT32, {channels});
  for (int64_t ch = 0; ch < channels; ++ch) {
    const double gamma = c[0]->data<float>()[ch], beta = c[1]->data<float>()[ch], mean = c[2]->data<float>()[ch],
                 var = c[3]->data<float>()[ch];
    const double inv = gamma / std::sqrt(var + eps);
    a.data<float>()[ch] = static_cast<float>(xs * inv / ys);
    b.data<float>()[ch] = static_cast<float>((beta - mean * inv) / ys);
    if (!std::isfinite(a.data<float>()[ch]) || !std::isfinite(b.data<float>()[ch])) return false;
  }
  const int x_zp = zp_value(graph, x, root.dtype), y_zp = zp_value(graph, y, y_dtype);
  for (Node* dead : {bn, act}) {
    if (dead == nullptr) continue;
    ++stats->folded[dead->op_type];
    dead->dead = true;
    graph.values[static_cast<size_t>(dead->outputs[0])].producer = -1;
  }
  q.op_type = "ChannelAffine";
  q.domain = "kiln";
  q.attrs.clear();
  q.attrs["kiln_y_min"] = int_attr(lo);
  q.attrs["kiln_y_max"] = int_attr(hi);
  q.inputs = {x.quantized, graph.add_constant(q.name + "_a", std::move(a)),
              graph.add_constant(q.name + "_b", std::move(b)), x_zp, y_zp};
  return true;
}

// DQ, DQ, ... -> Concat -> Q where the inputs' quantizations differ from
// the output's (DenseNet's and Inception's concatenations of layers each
// quantized on its own): each such input requantized to the output's by a
// ChannelAffine (a = its scale / the output's, b = 0), and the Concat then
// on bytes, as fold_passthrough makes it (ONNX Runtime's QLinearConcat).
// Within one step of the float round trip, as ChannelAffine.
bool fold_requantizing_concat(Graph& graph, const std::vector<std::vector<int>>& readers, int n, QdqStats* stats) {
  Node& op = graph.nodes[static_cast<size_t>(n)];
  if (op.outputs.size() != 1 || op.inputs.empty()) return false;
  std::vector<QuantNode> in(op.inputs.size());
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!match_dq(graph, op.inputs[i], &in[i]) || !per_tensor(in[i])) return false;
    const Value& x = graph.values[static_cast<size_t>(in[i].quantized)];
    if ((x.dtype != DType::UINT8 && x.dtype != DType::INT8) || x.shape.size() < 2) return false;
  }
  const int reader = only_reader(graph, readers, op.outputs[0]);
  if (reader < 0) return false;
  Node& q = graph.nodes[static_cast<size_t>(reader)];
  QuantNode y;
  DType y_dtype = DType::UINT8;
  if (q.op_type != "QuantizeLinear" || !q.domain.empty() || !read_byte_q(graph, q, &y, &y_dtype)) return false;
  bool differs = false;
  for (const QuantNode& x : in) differs = differs || !same_quantization(graph, x, y);
  if (!differs) return false;  // fold_passthrough's
  const int y_zp = zp_value(graph, y, y_dtype);
  const int64_t low = y_dtype == DType::UINT8 ? 0 : -128;
  // Nodes are added below: no reference into graph.nodes is kept across.
  const std::string stem = op.name;
  std::vector<int> inputs(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (same_quantization(graph, in[i], y)) {
      inputs[i] = in[i].quantized;
      continue;
    }
    const std::vector<int64_t> shape = graph.values[static_cast<size_t>(in[i].quantized)].shape;
    const DType x_dtype = graph.values[static_cast<size_t>(in[i].quantized)].dtype;
    HostTensor a(DType::FLOAT32, {shape[1]}), b(DType::FLOAT32, {shape[1]});
    const float ratio = static_cast<float>(static_cast<double>(in[i].scale->data<float>()[0]) /
                                           static_cast<double>(y.scale->data<float>()[0]));
    if (!std::isfinite(ratio)) return false;
    for (int64_t c = 0; c < shape[1]; ++c) {
      a.data<float>()[c] = ratio;
      b.data<float>()[c] = 0.f;
    }
    Node requantize;
    requantize.name = stem + "_requantize_" + std::to_string(i);
    requantize.op_type = "ChannelAffine";
    requantize.domain = "kiln";
    requantize.opset = 1;
    requantize.attrs["kiln_y_min"] = int_attr(low);
    requantize.attrs["kiln_y_max"] = int_attr(low + 255);
    requantize.inputs = {in[i].quantized, graph.add_constant(requantize.name + "_a", std::move(a)),
                         graph.add_constant(requantize.name + "_b", std::move(b)), zp_value(graph, in[i], x_dtype),
                         y_zp};
    inputs[i] = add_produced_value(graph, requantize.name, y_dtype, shape, static_cast<int>(graph.nodes.size()));
    requantize.outputs = {inputs[i]};
    graph.nodes.push_back(std::move(requantize));
  }
  Node& concat = graph.nodes[static_cast<size_t>(n)];  // push_back may have moved it
  graph.values[static_cast<size_t>(concat.outputs[0])].producer = -1;
  concat.inputs = std::move(inputs);
  concat.outputs = {y.quantized};
  graph.values[static_cast<size_t>(y.quantized)].producer = n;
  graph.nodes[static_cast<size_t>(reader)].dead = true;
  ++stats->folded["Concat"];
  return true;
}

int64_t numel_of(const Graph& graph, int v) {
  return v < 0 ? 0 : shape_numel(graph.values[static_cast<size_t>(v)].shape);
}

}  // namespace

QdqStats fold_qdq(Graph& graph, const ConstantEvaluator* evaluator) {
  QdqStats stats;
  {
    const auto affine_readers = graph.consumers();
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      const Node& node = graph.nodes[n];
      if (!node.dead && node.domain.empty() && node.op_type == "QuantizeLinear") {
        fold_channel_affine(graph, affine_readers, static_cast<int>(n), &stats);
      }
    }
  }
  if (evaluator != nullptr) {
    // Producers first, so that a table can take in an earlier one.
    const auto lookup_readers = graph.consumers();
    for (int n : graph.topological_order()) {
      const Node& node = graph.nodes[static_cast<size_t>(n)];
      if (!node.dead && node.domain.empty() && node.op_type == "QuantizeLinear") {
        fold_lookup(graph, lookup_readers, n, *evaluator, &stats);
      }
    }
  }
  const auto readers = graph.consumers();
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.dead || !node.domain.empty()) continue;
    // Each rewrite touches only its own op, activation and Q (readers of
    // other values stay right).
    if (node.op_type == "Conv" || node.op_type == "ConvTranspose" || node.op_type == "Gemm" ||
        node.op_type == "MatMul") {
      fold_one(graph, readers, static_cast<int>(n), &stats);
    } else if (node.op_type == "AveragePool" || node.op_type == "GlobalAveragePool" || node.op_type == "Add" ||
               node.op_type == "Mul" || node.op_type == "Softmax") {
      fold_qlinear_op(graph, readers, static_cast<int>(n), &stats);
    }
  }
  {
    const auto concat_readers = graph.consumers();
    const size_t count = graph.nodes.size();  // not the requantizations it adds
    for (size_t n = 0; n < count; ++n) {
      const Node& node = graph.nodes[n];
      if (!node.dead && node.domain.empty() && node.op_type == "Concat") {
        fold_requantizing_concat(graph, concat_readers, static_cast<int>(n), &stats);
      }
    }
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.dead || !node.domain.empty()) continue;
    static const char* const kPassThrough[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat",
                                               "Slice",   "Resize",  "Pad",     "MaxPool",   "Relu",      "Clip"};
    for (const char* op : kPassThrough) {
      if (node.op_type == op) {
        fold_passthrough(graph, readers, static_cast<int>(n), &stats);
        break;
      }
    }
  }
  bool changed = stats.total() > 0;
  const auto after = graph.consumers();
  for (Node& node : graph.nodes) {
    if (node.dead || !node.domain.empty() || node.op_type != "DequantizeLinear" || node.outputs.empty()) continue;
    const int out = node.outputs[0];
    if (out >= 0 && after[static_cast<size_t>(out)].empty() &&
        !graph.values[static_cast<size_t>(out)].is_graph_output) {
      node.dead = true;  // its readers took the quantized tensor
      changed = true;
      continue;
    }
    changed |= fold_constant_dq(graph, node);
  }
  if (changed) graph.compact();
  return stats;
}

QuantizedIoStats quantize_io(Graph& graph) {
  QuantizedIoStats stats;
  auto replace_reads = [&](int from, int to) {
    for (Node& node : graph.nodes) {
      if (node.dead) continue;
      for (int& v : node.inputs) {
        if (v == from) v = to;
      }
    }
  };
  bool changed = false;
  // PyTorch exports a Cast to the same dtype between each Q and DQ; read
  // through them, so the model's first Q and last DQ are found.
  for (Node& node : graph.nodes) {
    if (node.dead || !node.domain.empty() || node.op_type != "Cast" || node.inputs.size() != 1 ||
        node.outputs.size() != 1 || node.inputs[0] < 0 || node.outputs[0] < 0) {
      continue;
    }
    const Value& in = graph.values[static_cast<size_t>(node.inputs[0])];
    const Value& out = graph.values[static_cast<size_t>(node.outputs[0])];
    if (in.dtype != out.dtype || !in.has_type || !out.has_type || out.is_graph_output || in.is_constant()) continue;
    node.dead = true;
    replace_reads(node.outputs[0], node.inputs[0]);
    changed = true;
  }
  auto readers = graph.consumers();
  auto set_quantization = [&](Value& value, const QuantNode& q, DType dtype) {
    value.dtype = dtype;
    value.io_quantized = true;
    value.io_scale = q.scale->data<float>()[0];
    value.io_zero_point = q.zp != nullptr ? static_cast<int32_t>(q.zp->int_at(0)) : 0;
  };
  for (int x : graph.inputs) {
    Value& input = graph.values[static_cast<size_t>(x)];
    const auto& r = readers[static_cast<size_t>(x)];
    QuantNode q;
    bool ok = input.dtype == DType::FLOAT32 && !input.is_graph_output && r.size() == 1;
    Node* node = ok ? &graph.nodes[static_cast<size_t>(r[0])] : nullptr;
    ok = ok && !node->dead && node->domain.empty() && node->op_type == "QuantizeLinear" && node->inputs.size() >= 2 &&
         node->inputs[0] == x && node->inputs[1] != x && (node->inputs.size() < 3 || node->inputs[2] != x) &&
         node->outputs.size() == 1 && node->outputs[0] >= 0 && read_quant(graph, node, x, &q) && per_tensor(q) &&
         (q.zp == nullptr || q.zp->dtype == DType::UINT8 || q.zp->dtype == DType::INT8);
    const int y = ok ? node->outputs[0] : -1;
    ok = ok && !graph.values[static_cast<size_t>(y)].is_graph_output;
    if (!ok) {
      ++stats.float_inputs;
      continue;
    }
    set_quantization(input, q, q.zp != nullptr ? q.zp->dtype : DType::UINT8);
    node->dead = true;
    replace_reads(y, x);
    ++stats.inputs;
    changed = true;
  }
  if (changed) readers = graph.consumers();
  for (size_t k = 0; k < graph.outputs.size(); ++k) {
    const int z = graph.outputs[k];
    const Value& output = graph.values[static_cast<size_t>(z)];
    QuantNode q;
    bool ok = std::count(graph.outputs.begin(), graph.outputs.end(), z) == 1 && !output.is_graph_input &&
              readers[static_cast<size_t>(z)].empty() && match_dq(graph, z, &q) && per_tensor(q);
    const int w = ok ? q.quantized : -1;
    const Value* quantized = w >= 0 ? &graph.values[static_cast<size_t>(w)] : nullptr;
    ok = ok && quantized != nullptr && (quantized->dtype == DType::UINT8 || quantized->dtype == DType::INT8) &&
         quantized->producer >= 0 && !quantized->is_constant() && !quantized->is_graph_input &&
         !quantized->is_graph_output && !graph.nodes[static_cast<size_t>(quantized->producer)].dead;
    if (!ok) {
      ++stats.float_outputs;
      continue;
    }
    const DType dtype = quantized->dtype;
    const int p = quantized->producer;
    q.node->dead = true;
    for (int& v : graph.nodes[static_cast<size_t>(p)].outputs) {
      if (v == w) v = z;
    }
    replace_reads(w, z);
    Value& out = graph.values[static_cast<size_t>(z)];
    set_quantization(out, q, dtype);
    out.producer = p;
    graph.values[static_cast<size_t>(w)].producer = -1;
    ++stats.outputs;
    changed = true;
  }
  if (changed) graph.compact();
  return stats;
}

Int8Share int8_share(const Graph& graph) {
  Int8Share share;
  for (const Node& node : graph.nodes) {
    if (node.dead || !node.domain.empty() || node.outputs.empty() || node.inputs.size() < 2) continue;
    const std::string& op = node.op_type;
    const bool conv = op == "Conv" || op == "ConvTranspose" || op == "QLinearConv" || op == "ConvInteger";
    const bool matmul = op == "Gemm" || op == "MatMul" || op == "QLinearMatMul" || op == "MatMulInteger";
    if (!conv && !matmul) continue;
    const bool int8 = op == "QLinearConv" || op == "ConvInteger" || op == "QLinearMatMul" || op == "MatMulInteger";
    const size_t w_input = op == "QLinearConv" || op == "QLinearMatMul" ? 3 : 1;
    if (w_input >= node.inputs.size() || node.inputs[w_input] < 0) continue;
    const Value& w = graph.values[static_cast<size_t>(node.inputs[w_input])];
    int64_t per_output = 0;
    if (conv) {
      // Every output element sums C/group * kernel taps (ConvTranspose: each
      // input element meets M/group * taps weights; the same count of MACs).
      per_output = w.shape.size() >= 2 ? shape_numel(w.shape) / w.shape[0] : 0;
      if (op == "ConvTranspose") per_output = 0;
    } else {
      const Value& a = graph.values[static_cast<size_t>(node.inputs[0])];
      const bool trans_a = node.has_attr("transA") && node.attrs.at("transA").i != 0;
      per_output = a.shape.empty() ? 0 : trans_a && a.shape.size() == 2 ? a.shape[0] : a.shape.back();
    }
    int64_t macs = numel_of(graph, node.outputs[0]) * per_output;
    if (op == "ConvTranspose")
      macs = numel_of(graph, node.inputs[0]) * (w.shape.size() >= 2 ? shape_numel(w.shape) / w.shape[0] : 0);
    ++share.linear_ops;
    share.linear_macs += macs;
    if (int8) {
      ++share.int8_ops;
      share.int8_macs += macs;
    }
  }
  return share;
}

}  // namespace kiln::planner
