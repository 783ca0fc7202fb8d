#include "quantize/onnx_edit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/error.h"
#include "onnx/import.h"

namespace kiln::planner::quantize {
namespace {

int32_t onnx_elem_type(DType dtype) {
  switch (dtype) {
    case DType::FLOAT32: return onnx::TensorProto::FLOAT;
    case DType::FLOAT16: return onnx::TensorProto::FLOAT16;
    case DType::BFLOAT16: return onnx::TensorProto::BFLOAT16;
    case DType::FLOAT64: return onnx::TensorProto::DOUBLE;
    case DType::INT8: return onnx::TensorProto::INT8;
    case DType::UINT8: return onnx::TensorProto::UINT8;
    case DType::INT16: return onnx::TensorProto::INT16;
    case DType::UINT16: return onnx::TensorProto::UINT16;
    case DType::INT32: return onnx::TensorProto::INT32;
    case DType::UINT32: return onnx::TensorProto::UINT32;
    case DType::INT64: return onnx::TensorProto::INT64;
    case DType::UINT64: return onnx::TensorProto::UINT64;
    case DType::BOOL: return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

// A Constant node's value, or nullopt for one it does not describe by a
// dense tensor or plain numbers.
std::optional<HostTensor> constant_value(const onnx::NodeProto& node) {
  if (node.attribute_size() != 1) return std::nullopt;
  const onnx::AttributeProto& a = node.attribute(0);
  const std::string what = "Constant '" + node.name() + "'";
  if (a.name() == "value" && a.has_t()) return from_tensor_proto(a.t(), what);
  if (a.name() == "value_float") return HostTensor::scalar_float(a.f());
  if (a.name() == "value_floats") {
    return HostTensor::from_floats(std::vector<float>(a.floats().begin(), a.floats().end()), {a.floats_size()});
  }
  if (a.name() == "value_int") return HostTensor::from_int64s({a.i()}, {});
  if (a.name() == "value_ints") {
    return HostTensor::from_int64s(std::vector<int64_t>(a.ints().begin(), a.ints().end()), {a.ints_size()});
  }
  return std::nullopt;
}

int constants_to_initializers(onnx::GraphProto& graph) {
  int moved = 0;
  onnx::GraphProto kept;
  for (const onnx::NodeProto& node : graph.node()) {
    std::optional<HostTensor> value;
    if (node.op_type() == "Constant" && node.domain().empty() && node.output_size() == 1) value = constant_value(node);
    if (!value) {
      *kept.add_node() = node;
      continue;
    }
    add_initializer(graph, node.output(0), *value);
    ++moved;
  }
  graph.mutable_node()->Swap(kept.mutable_node());
  return moved;
}

std::string unique_initializer_name(const onnx::GraphProto& graph, const std::string& base) {
  std::string name = base;
  for (int k = 1; find_initializer(graph, name) != nullptr || is_graph_input(graph, name); ++k) {
    name = base + "_" + std::to_string(k);
  }
  return name;
}

// Sets initializer `name` to `value` when only `reader` reads it; otherwise
// adds a new initializer for `reader`. Returns the name `reader` reads.
std::string replace_initializer(onnx::GraphProto& graph, const std::string& name, const HostTensor& value,
                                const std::string& base) {
  if (!name.empty() && consumer_count(graph, name) == 1) {
    for (auto& init : *graph.mutable_initializer()) {
      if (init.name() == name) {
        init.Clear();
        init.set_name(name);
        init.set_data_type(onnx_elem_type(value.dtype));
        for (int64_t d : value.shape) init.add_dims(d);
        init.set_raw_data(value.bytes.data(), value.bytes.size());
      }
    }
    return name;
  }
  const std::string fresh = unique_initializer_name(graph, base);
  add_initializer(graph, fresh, value);
  return fresh;
}

HostTensor float_initializer(const onnx::GraphProto& graph, const std::string& name) {
  const onnx::TensorProto* init = find_initializer(graph, name);
  if (init == nullptr || init->data_type() != onnx::TensorProto::FLOAT) return HostTensor();
  return from_tensor_proto(*init, "initializer '" + name + "'");
}

// Folds `bn` into `conv` when the BatchNormalization alone reads the Conv's
// output and every parameter is a float initializer of the right size.
bool fold_batch_norm(onnx::GraphProto& graph, onnx::NodeProto& conv, const onnx::NodeProto& bn) {
  if (bn.input_size() != 5 || conv.input_size() < 2 || conv.output_size() != 1) return false;
  const HostTensor w = float_initializer(graph, conv.input(1));
  if (w.shape.size() < 2) return false;
  const int64_t channels = w.shape[0];
  HostTensor p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = float_initializer(graph, bn.input(i + 1));
    if (p[i].shape != std::vector<int64_t>{channels}) return false;
  }
  HostTensor b = conv.input_size() > 2 && !conv.input(2).empty() ? float_initializer(graph, conv.input(2))
                                                                 : HostTensor(DType::FLOAT32, {channels});
  if (b.shape != std::vector<int64_t>{channels}) return false;
  const onnx::AttributeProto* eps_attr = find_attribute(bn, "epsilon");
  const double eps = eps_attr != nullptr ? eps_attr->f() : 1e-5;
  HostTensor w2 = w;
  const int64_t per_channel = w.numel() / channels;
  for (int64_t c = 0; c < channels; ++c) {
    const double s = p[0].data<float>()[c] / std::sqrt(static_cast<double>(p[3].data<float>()[c]) + eps);
    for (int64_t k = 0; k < per_channel; ++k) {
      w2.data<float>()[c * per_channel + k] = static_cast<float>(w.data<float>()[c * per_channel + k] * s);
    }
    b.data<float>()[c] = static_cast<float>((b.data<float>()[c] - p[2].data<float>()[c]) * s + p[1].data<float>()[c]);
  }
  const std::string w_name = replace_initializer(graph, conv.input(1), w2, conv.input(1) + "_bn");
  const std::string b_name = replace_initializer(graph, conv.input_size() > 2 ? conv.input(2) : "", b,
                                                 (conv.name().empty() ? bn.output(0) : conv.name()) + "_bias_bn");
  conv.set_input(1, w_name);
  if (conv.input_size() > 2) {
    conv.set_input(2, b_name);
  } else {
    conv.add_input(b_name);
  }
  conv.set_output(0, bn.output(0));
  return true;
}

int fold_batch_norms(onnx::GraphProto& graph) {
  std::map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string& out : graph.node(i).output()) producer[out] = i;
  }
  std::set<int> removed;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& bn = graph.node(i);
    if (bn.op_type() != "BatchNormalization" || !bn.domain().empty() || bn.output_size() != 1) continue;
    const auto it = producer.find(bn.input(0));
    if (it == producer.end()) continue;
    onnx::NodeProto& conv = *graph.mutable_node(it->second);
    if (conv.op_type() != "Conv" || !conv.domain().empty() || consumer_count(graph, bn.input(0)) != 1 ||
        is_graph_output(graph, bn.input(0))) {
      continue;
    }
    if (fold_batch_norm(graph, conv, bn)) removed.insert(i);
  }
  onnx::GraphProto kept;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (removed.count(i) == 0) *kept.add_node() = graph.node(i);
  }
  graph.mutable_node()->Swap(kept.mutable_node());
  remove_unused_initializers(graph);
  return static_cast<int>(removed.size());
}

}  // namespace

const onnx::TensorProto* find_initializer(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto& init : graph.initializer()) {
    if (init.name() == name) return &init;
  }
  return nullptr;
}

void add_initializer(onnx::GraphProto& graph, const std::string& name, const HostTensor& value) {
  onnx::TensorProto* init = graph.add_initializer();
  init->set_name(name);
  init->set_data_type(onnx_elem_type(value.dtype));
  for (int64_t d : value.shape) init->add_dims(d);
  init->set_raw_data(value.bytes.data(), value.bytes.size());
}

bool is_graph_input(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto& v : graph.input()) {
    if (v.name() == name) return true;
  }
  return false;
}

bool is_graph_output(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto& v : graph.output()) {
    if (v.name() == name) return true;
  }
  return false;
}

int consumer_count(const onnx::GraphProto& graph, const std::string& name) {
  int count = 0;
  for (const auto& node : graph.node()) {
    for (const std::string& in : node.input()) {
      if (in == name) {
        ++count;
        break;
      }
    }
  }
  return count;
}

void rename_inputs(onnx::GraphProto& graph, const std::string& from, const std::string& to) {
  for (auto& node : *graph.mutable_node()) {
    for (auto& in : *node.mutable_input()) {
      if (in == from) in = to;
    }
  }
}

void rename_outputs(onnx::GraphProto& graph, const std::string& from, const std::string& to) {
  for (auto& node : *graph.mutable_node()) {
    for (auto& out : *node.mutable_output()) {
      if (out == from) out = to;
    }
  }
}

void remove_unused_initializers(onnx::GraphProto& graph) {
  std::set<std::string> used;
  for (const auto& node : graph.node()) used.insert(node.input().begin(), node.input().end());
  for (const auto& out : graph.output()) used.insert(out.name());
  onnx::GraphProto kept;
  for (const auto& init : graph.initializer()) {
    if (used.count(init.name()) != 0) *kept.add_initializer() = init;
  }
  graph.mutable_initializer()->Swap(kept.mutable_initializer());
}

void topological_sort(onnx::GraphProto& graph) {
  const int n = graph.node_size();
  std::map<std::string, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const std::string& out : graph.node(i).output()) producer[out] = i;
  }
  // A node's place: its index, or just after its last producer when that
  // comes later in the list (nodes appended after the ones they read).
  std::vector<double> key(static_cast<size_t>(n));
  std::vector<int> waiting(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> readers(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    double k = i;
    std::set<int> producers;
    for (const std::string& in : graph.node(i).input()) {
      const auto it = producer.find(in);
      if (it != producer.end() && it->second != i) producers.insert(it->second);
    }
    for (int p : producers) {
      if (p > i) k = std::max(k, key[static_cast<size_t>(p)] + 0.5);
      readers[static_cast<size_t>(p)].push_back(i);
    }
    key[static_cast<size_t>(i)] = k;
    waiting[static_cast<size_t>(i)] = static_cast<int>(producers.size());
  }
  std::set<std::pair<double, int>> ready;
  for (int i = 0; i < n; ++i) {
    if (waiting[static_cast<size_t>(i)] == 0) ready.insert({key[static_cast<size_t>(i)], i});
  }
  onnx::GraphProto sorted;
  while (!ready.empty()) {
    const int i = ready.begin()->second;
    ready.erase(ready.begin());
    *sorted.add_node() = graph.node(i);
    for (int r : readers[static_cast<size_t>(i)]) {
      if (--waiting[static_cast<size_t>(r)] == 0) ready.insert({key[static_cast<size_t>(r)], r});
    }
  }
  if (sorted.node_size() != n) fail("internal error: the quantized graph has a cycle");
  graph.mutable_node()->Swap(sorted.mutable_node());
}

int prepare_float_model(onnx::ModelProto& model) {
  onnx::GraphProto& graph = *model.mutable_graph();
  constants_to_initializers(graph);
  return fold_batch_norms(graph);
}

}  // namespace kiln::planner::quantize
