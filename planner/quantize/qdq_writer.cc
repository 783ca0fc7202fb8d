#include "quantize/qdq_writer.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"
#include "onnx/import.h"
#include "quantize/onnx_edit.h"

namespace kiln::planner::quantize {
namespace {

const onnx::AttributeProto* attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t int_attribute(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = attribute(node, name);
  return a != nullptr ? a->i() : fallback;
}

// The op quantizers (see the header), each marking a node's tensors.
class Marker {
 public:
  Marker(onnx::ModelProto& model, const ValueTable& values, const QdqOptions& options)
      : graph_(*model.mutable_graph()), values_(values), options_(options) {
    for (const auto& opset : model.opset_import()) {
      if (opset.domain().empty() || opset.domain() == "ai.onnx") opset_ = static_cast<int>(opset.version());
    }
  }

  QdqPlan run() {
    adjust_ranges();
    std::set<int> removed;
    for (int i = 0; i < graph_.node_size(); ++i) {
      onnx::NodeProto& node = *graph_.mutable_node(i);
      if (node.op_type() == "QuantizeLinear" || node.op_type() == "DequantizeLinear") {
        fail("node '", node_label(node), "' (", node.op_type(), "): the model is quantized already");
      }
      if (!selected(node)) continue;
      plan_.quantized_nodes.push_back(node_label(node));
      if (rule(node)) removed.insert(i);
    }
    onnx::GraphProto kept;
    for (int i = 0; i < graph_.node_size(); ++i) {
      if (removed.count(i) == 0) *kept.add_node() = graph_.node(i);
    }
    graph_.mutable_node()->Swap(kept.mutable_node());
    for (const Mark& m : marks_) {
      if (!m.erased) plan_.tensors.push_back(m.tensor);
    }
    return std::move(plan_);
  }

 private:
  struct Mark {
    QdqPlan::Tensor tensor;
    bool erased = false;
  };

  bool selected(const onnx::NodeProto& node) {
    static const std::set<std::string> kOps = {
        "Conv",      "ConvTranspose",  "Gemm",    "MatMul", "Relu",   "Clip",   "Reshape",           "Transpose",
        "Squeeze",   "Unsqueeze",      "MaxPool", "Slice",  "Resize", "Pad",    "AveragePool",       "Split",
        "Gather",    "GatherElements", "Softmax", "Add",    "Mul",    "Concat", "GlobalAveragePool", "Sigmoid",
        "LeakyRelu", "Where",          "ArgMax"};
    if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
    if (kOps.count(node.op_type()) == 0) return false;
    if (options_.exclude.count(node_label(node)) != 0) {
      plan_.float_nodes.push_back(node_label(node));
      return false;
    }
    return true;
  }

  // ONNX Runtime's adjustment of calibrated ranges: a Relu or Clip's input
  // that it alone reads takes the output's range; Softmax outputs [0, 1].
  void adjust_ranges() {
    for (const onnx::NodeProto& node : graph_.node()) {
      if (!node.domain().empty() || options_.exclude.count(node_label(node)) != 0) continue;
      if ((node.op_type() == "Relu" || node.op_type() == "Clip") && consumer_count(graph_, node.input(0)) == 1) {
        plan_.range_from[node.input(0)] = node.output(0);
      } else if (node.op_type() == "Softmax") {
        plan_.fixed_ranges[node.output(0)] = Range{0.f, 1.f};
      }
    }
  }

  bool is_initializer(const std::string& name) const { return find_initializer(graph_, name) != nullptr; }

  bool quantizable(const std::string& name) const {
    if (name.empty()) return false;
    if (const onnx::TensorProto* init = find_initializer(graph_, name)) {
      return init->data_type() == onnx::TensorProto::FLOAT;
    }
    const auto it = values_.find(name);
    return it != values_.end() && it->second.dtype == DType::FLOAT32;
  }

  Mark* find(const std::string& name) {
    const auto it = index_.find(name);
    return it == index_.end() || marks_[it->second].erased ? nullptr : &marks_[it->second];
  }

  // A later mark of the same tensor replaces an earlier one only when it
  // shares another's parameters or makes it a per-channel weight.
  void mark(const QdqPlan::Tensor& t, bool replace) {
    if (!quantizable(t.name)) return;
    if (Mark* m = find(t.name)) {
      if (replace) m->tensor = t;
      return;
    }
    index_[t.name] = marks_.size();
    marks_.push_back(Mark{t, false});
  }
  void activation(const std::string& name) { mark({name, false, -1, ""}, false); }
  void same_as_input(const std::string& output, const std::string& input) { mark({output, false, -1, input}, true); }
  bool marked(const std::string& name) {
    if (find(name) != nullptr) return true;
    for (const auto& b : plan_.biases) {
      if (b.name == name) return true;
    }
    return false;
  }

  // A constant weight: per channel along `axis` (with --per-channel, when the
  // axis exists), else per tensor; a computed one is an activation.
  void weight(const std::string& name, int axis) {
    const onnx::TensorProto* init = find_initializer(graph_, name);
    if (init == nullptr) return activation(name);
    if (options_.per_channel && axis >= 0 && axis < init->dims_size()) return mark({name, true, axis, ""}, true);
    mark({name, true, -1, ""}, false);
  }

  void bias(const std::string& name, const std::string& input, const std::string& w, float beta) {
    if (name.empty() || !is_initializer(name) || !quantizable(name)) return;
    for (const auto& b : plan_.biases) {
      if (b.name == name) return;
    }
    plan_.biases.push_back({name, input, w, beta});
  }

  // Relu or Clip folded into its producer: the producer writes `output`.
  bool replace_upstream(const std::string& upstream, const std::string& output) {
    if (!quantizable(output) || is_initializer(output) || consumer_count(graph_, upstream) != 1 ||
        is_graph_output(graph_, upstream) || is_graph_input(graph_, upstream)) {
      return false;
    }
    rename_outputs(graph_, upstream, output);
    if (Mark* m = find(upstream)) m->erased = true;
    return true;
  }

  void all_io(const onnx::NodeProto& node) {
    for (const std::string& in : node.input()) activation(in);
    for (const std::string& out : node.output()) activation(out);
  }

  void conv(const onnx::NodeProto& node) {
    activation(node.input(0));
    activation(node.output(0));
    weight(node.input(1), node.op_type() == "Conv" ? 0 : 1);
    if (node.input_size() > 2) bias(node.input(2), node.input(0), node.input(1), 1.f);
  }

  void gemm(const onnx::NodeProto& node) {
    activation(node.input(0));
    activation(node.output(0));
    weight(node.input(1), int_attribute(node, "transB", 0) != 0 ? 0 : 1);
    const onnx::AttributeProto* beta = attribute(node, "beta");
    if (node.input_size() > 2) bias(node.input(2), node.input(0), node.input(1), beta != nullptr ? beta->f() : 1.f);
  }

  void matmul(const onnx::NodeProto& node) {
    for (const std::string& in : node.input()) {
      const onnx::TensorProto* init = find_initializer(graph_, in);
      if (init == nullptr) {
        activation(in);
      } else {
        weight(in, init->dims_size() == 2 ? 1 : -1);
      }
    }
    activation(node.output(0));
  }

  // Returns true when the node is removed.
  bool removable(const onnx::NodeProto& node) {
    if (!marked(node.input(0))) return false;
    const bool removed = !options_.activation_symmetric && replace_upstream(node.input(0), node.output(0));
    if (!removed) activation(node.input(0));
    activation(node.output(0));
    if (removed) plan_.removed_nodes.push_back(node_label(node));
    return removed;
  }

  void data_movement(const onnx::NodeProto& node) {
    if (marked(node.input(0))) same_as_input(node.output(0), node.input(0));
  }

  void gather(const onnx::NodeProto& node) {
    if (is_initializer(node.input(0)) && quantizable(node.input(0))) {
      activation(node.input(0));
      same_as_input(node.output(0), node.input(0));
    } else if (marked(node.input(0))) {
      same_as_input(node.output(0), node.input(0));
    }
  }

  void pad(const onnx::NodeProto& node) {
    const onnx::AttributeProto* mode = attribute(node, "mode");
    bool zero = mode == nullptr || mode->s() == "constant";
    if (!zero) return data_movement(node);  // edge and reflect repeat the input's values
    if (node.input_size() > 2 && !node.input(2).empty()) {
      const onnx::TensorProto* value = find_initializer(graph_, node.input(2));
      zero = value != nullptr && from_tensor_proto(*value, node.input(2)).float_at(0) == 0.0;
    }
    if (zero) return data_movement(node);
    activation(node.input(0));
    activation(node.output(0));
  }

  bool rule(onnx::NodeProto& node) {
    const std::string& op = node.op_type();
    if (op == "Conv" || op == "ConvTranspose") {
      conv(node);
    } else if (op == "Gemm") {
      gemm(node);
    } else if (op == "MatMul") {
      matmul(node);
    } else if (op == "Relu" || op == "Clip") {
      return removable(node);
    } else if (op == "Reshape" || op == "Transpose" || op == "Squeeze" || op == "Unsqueeze" || op == "Slice" ||
               op == "AveragePool" || (op == "MaxPool" && opset_ >= 12) || (op == "Resize" && opset_ >= 11)) {
      data_movement(node);
    } else if (op == "Pad") {
      pad(node);
    } else if (op == "Split") {
      activation(node.input(0));
      for (const std::string& out : node.output()) same_as_input(out, node.input(0));
    } else if (op == "Gather" || op == "GatherElements") {
      gather(node);
    } else if (op != "MaxPool" && op != "Resize") {
      all_io(node);
    }
    return false;
  }

  onnx::GraphProto& graph_;
  const ValueTable& values_;
  const QdqOptions& options_;
  int opset_ = 0;
  QdqPlan plan_;
  std::vector<Mark> marks_;
  std::map<std::string, size_t> index_;
};

// Writes the marks (see the header) into the graph.
class Writer {
 public:
  Writer(onnx::ModelProto& model, const std::map<std::string, QuantParams>& activations, const QdqOptions& options)
      : graph_(*model.mutable_graph()), activations_(activations), options_(options) {}

  std::vector<WrittenTensor> run(const QdqPlan& plan) {
    std::vector<const QdqPlan::Tensor*> shared;
    for (const QdqPlan::Tensor& t : plan.tensors) {
      if (!t.shared_from.empty()) {
        shared.push_back(&t);
      } else if (find_initializer(graph_, t.name) != nullptr) {
        initializer(t);
      } else {
        const auto it = activations_.find(t.name);
        if (it == activations_.end()) fail("internal error: no calibrated range for '", t.name, "'");
        pair(t.name, t.name + "_scale", t.name + "_zero_point", it->second, "");
      }
    }
    // Shared parameters, once their provider is written (a provider may
    // itself share another's).
    for (bool progress = true; progress && !shared.empty();) {
      progress = false;
      for (auto it = shared.begin(); it != shared.end();) {
        const auto provider = done_.find((*it)->shared_from);
        if (provider == done_.end()) {
          ++it;
          continue;
        }
        const Quantized q = provider->second;
        pair((*it)->name, q.scale_name, q.zp_name, q.params, (*it)->shared_from);
        it = shared.erase(it);
        progress = true;
      }
    }
    for (const QdqPlan::Bias& b : plan.biases) bias(b);
    for (onnx::NodeProto& node : new_nodes_) *graph_.add_node() = std::move(node);
    remove_unused_initializers(graph_);
    topological_sort(graph_);
    graph_.clear_value_info();
    return written_;
  }

 private:
  struct Quantized {
    std::string scale_name, zp_name;
    QuantParams params;         // per tensor (the first channel's for per channel)
    std::vector<float> scales;  // per channel
  };

  void add_node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                const std::string& output, int axis) {
    onnx::NodeProto node;
    node.set_op_type(op);
    node.set_name(name);
    for (const std::string& in : inputs) node.add_input(in);
    node.add_output(output);
    if (axis >= 0) {
      onnx::AttributeProto* a = node.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(axis);
    }
    new_nodes_.push_back(std::move(node));
  }

  void scalar_initializers(const std::string& scale_name, const std::string& zp_name, const QuantParams& p) {
    add_initializer(graph_, scale_name, HostTensor::scalar_float(p.scale));
    HostTensor zp(p.dtype, {});
    if (p.dtype == DType::INT8) {
      zp.data<int8_t>()[0] = static_cast<int8_t>(p.zero_point);
    } else {
      zp.data<uint8_t>()[0] = static_cast<uint8_t>(p.zero_point);
    }
    add_initializer(graph_, zp_name, zp);
  }

  // t -> Q -> DQ -> t's readers (a graph output keeps its name on the DQ).
  void pair(const std::string& t, const std::string& scale_name, const std::string& zp_name, const QuantParams& p,
            const std::string& shared_from) {
    if (shared_from.empty()) scalar_initializers(scale_name, zp_name, p);
    std::string q_input = t, dq_output = t + "_DequantizeLinear_Output";
    if (is_graph_output(graph_, t)) {
      q_input = t + "_QuantizeLinear_Input";
      dq_output = t;
      rename_outputs(graph_, t, q_input);
    } else {
      rename_inputs(graph_, t, dq_output);
    }
    const std::string q_output = t + "_QuantizeLinear_Output";
    add_node("QuantizeLinear", t + "_QuantizeLinear", {q_input, scale_name, zp_name}, q_output, -1);
    add_node("DequantizeLinear", t + "_DequantizeLinear", {q_output, scale_name, zp_name}, dq_output, -1);
    done_[t] = Quantized{scale_name, zp_name, p, {}};
    written_.push_back(WrittenTensor{t, p, shared_from});
  }

  // A constant: int8 per channel along t.axis, or per tensor (a weight's
  // type, or the activations' for a constant read as an activation).
  void initializer(const QdqPlan::Tensor& t) {
    const HostTensor w = from_tensor_proto(*find_initializer(graph_, t.name), "initializer '" + t.name + "'");
    const DType dtype = t.weight ? DType::INT8 : options_.activation_type;
    const bool symmetric = t.axis >= 0 || (t.weight ? options_.weight_symmetric : options_.activation_symmetric);
    const int64_t channels = t.axis >= 0 ? w.shape[static_cast<size_t>(t.axis)] : 1;
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(t.axis + 1); t.axis >= 0 && d < w.shape.size(); ++d) inner *= w.shape[d];
    const auto channel_of = [&](int64_t i) { return t.axis >= 0 ? (i / inner) % channels : 0; };
    std::vector<Range> ranges(static_cast<size_t>(channels));
    for (int64_t i = 0; i < w.numel(); ++i) {
      Range& r = ranges[static_cast<size_t>(channel_of(i))];
      r.min = std::min(r.min, w.data<float>()[i]);
      r.max = std::max(r.max, w.data<float>()[i]);
    }
    std::vector<QuantParams> params;
    for (const Range& r : ranges)
      params.push_back(quant_params(r, dtype, symmetric, t.weight && options_.reduce_range));
    HostTensor q(dtype, w.shape);
    for (int64_t i = 0; i < w.numel(); ++i) {
      const int32_t v = quantize_value(w.data<float>()[i], params[static_cast<size_t>(channel_of(i))]);
      if (dtype == DType::INT8) {
        q.data<int8_t>()[i] = static_cast<int8_t>(v);
      } else {
        q.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      }
    }
    Quantized record{t.name + "_scale", t.name + "_zero_point", params[0], {}};
    if (t.axis >= 0) {
      HostTensor scales(DType::FLOAT32, {channels}), zps(dtype, {channels});
      for (int64_t c = 0; c < channels; ++c) {
        scales.data<float>()[c] = params[static_cast<size_t>(c)].scale;
        record.scales.push_back(params[static_cast<size_t>(c)].scale);
      }
      add_initializer(graph_, record.scale_name, scales);
      add_initializer(graph_, record.zp_name, zps);  // symmetric: zero
    } else {
      scalar_initializers(record.scale_name, record.zp_name, params[0]);
    }
    add_initializer(graph_, t.name + "_quantized", q);
    const std::string output = t.name + "_DequantizeLinear_Output";
    rename_inputs(graph_, t.name, output);
    add_node("DequantizeLinear", t.name + "_DequantizeLinear",
             {t.name + "_quantized", record.scale_name, record.zp_name}, output, t.axis);
    done_[t.name] = record;
  }

  // int32, scale = input scale x weight scale (per the weight's channels),
  // zero point 0; the DQ writes the bias's own name.
  void bias(const QdqPlan::Bias& b) {
    const auto input = done_.find(b.input), w = done_.find(b.weight);
    const onnx::TensorProto* init = find_initializer(graph_, b.name);
    if (input == done_.end() || w == done_.end() || init == nullptr) return;
    const HostTensor value = from_tensor_proto(*init, "initializer '" + b.name + "'");
    const bool per_channel = !w->second.scales.empty();
    if (per_channel && value.numel() != static_cast<int64_t>(w->second.scales.size())) return;
    const size_t channels = per_channel ? w->second.scales.size() : 1;
    HostTensor scale(DType::FLOAT32,
                     per_channel ? std::vector<int64_t>{static_cast<int64_t>(channels)} : std::vector<int64_t>{});
    for (size_t c = 0; c < channels; ++c) {
      scale.data<float>()[c] =
          input->second.params.scale * (per_channel ? w->second.scales[c] : w->second.params.scale);
    }
    HostTensor q(DType::INT32, value.shape);
    for (int64_t i = 0; i < value.numel(); ++i) {
      const double s = scale.data<float>()[per_channel ? i : 0];
      const double v = std::nearbyint(static_cast<double>(b.beta) * value.data<float>()[i] / s);
      q.data<int32_t>()[i] = static_cast<int32_t>(std::min(std::max(v, -2147483648.0), 2147483647.0));
    }
    const std::string name = b.name + "_quantized";
    add_initializer(graph_, name, q);
    add_initializer(graph_, name + "_scale", scale);
    add_initializer(graph_, name + "_zero_point", HostTensor(DType::INT32, scale.shape));
    add_node("DequantizeLinear", b.name + "_DequantizeLinear", {name, name + "_scale", name + "_zero_point"}, b.name,
             per_channel ? 0 : -1);
    for (auto& init_proto : *graph_.mutable_initializer()) {
      if (init_proto.name() == b.name) init_proto.set_name(b.name + "_float");  // unused now: removed below
    }
    // Beta went into the quantized bias.
    for (onnx::NodeProto& node : *graph_.mutable_node()) {
      if (node.op_type() != "Gemm" || node.input_size() < 3 || node.input(2) != b.name) continue;
      for (auto& a : *node.mutable_attribute()) {
        if (a.name() == "beta") a.set_f(1.f);
      }
    }
  }

  onnx::GraphProto& graph_;
  const std::map<std::string, QuantParams>& activations_;
  const QdqOptions& options_;
  std::map<std::string, Quantized> done_;
  std::vector<onnx::NodeProto> new_nodes_;
  std::vector<WrittenTensor> written_;
};

}  // namespace

std::string node_label(const onnx::NodeProto& node) {
  if (!node.name().empty()) return node.name();
  return node.output_size() > 0 ? node.output(0) : std::string();
}

std::vector<std::string> QdqPlan::to_calibrate(const onnx::GraphProto& graph) const {
  std::vector<std::string> names;
  std::set<std::string> seen;
  auto add = [&](const std::string& name) {
    if (fixed_ranges.count(name) == 0 && find_initializer(graph, name) == nullptr && seen.insert(name).second) {
      names.push_back(name);
    }
  };
  for (const Tensor& t : tensors) {
    if (t.weight || !t.shared_from.empty()) continue;
    const auto it = range_from.find(t.name);
    add(it != range_from.end() ? it->second : t.name);
  }
  return names;
}

QdqPlan plan_qdq(onnx::ModelProto& model, const ValueTable& values, const QdqOptions& options) {
  return Marker(model, values, options).run();
}

std::vector<WrittenTensor> write_qdq(onnx::ModelProto& model, const QdqPlan& plan,
                                     const std::map<std::string, QuantParams>& activations, const QdqOptions& options) {
  return Writer(model, activations, options).run(plan);
}

}  // namespace kiln::planner::quantize
