#include "ops/op_registry.h"

#include <algorithm>
#include <mutex>

namespace kiln::planner {

Value& OpContext::input(size_t i) {
  if (!has_input(i)) error("input ", i, " is missing");
  return graph_.values[static_cast<size_t>(node_.inputs[i])];
}

Value& OpContext::output(size_t i) {
  if (!has_output(i)) error("output ", i, " is missing");
  return graph_.values[static_cast<size_t>(node_.outputs[i])];
}

const HostTensor& OpContext::constant_input(size_t i, const char* what) {
  Value& v = input(i);
  if (v.constant != nullptr) return *v.constant;
  // Find the graph input this value depends on, to name what to freeze.
  std::string source;
  std::vector<int> stack = {node_.inputs[i]};
  std::vector<bool> seen(graph_.values.size(), false);
  while (!stack.empty() && source.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(id)]) continue;
    seen[static_cast<size_t>(id)] = true;
    const Value& value = graph_.values[static_cast<size_t>(id)];
    if (value.is_graph_input) {
      source = value.name;
      break;
    }
    if (value.producer >= 0) {
      for (int in : graph_.nodes[static_cast<size_t>(value.producer)].inputs) {
        if (in >= 0 && !graph_.values[static_cast<size_t>(in)].is_constant()) stack.push_back(in);
      }
    }
  }
  throw NotConstantError(str(where(), ": ", what, " (input '", v.name, "') must be known at plan time",
                             source.empty() ? std::string()
                                            : str("; it depends on graph input '", source,
                                                  "': freeze it with --freeze ", source, "=FILE")),
                         source);
}

int64_t OpContext::attr_int(const std::string& key, int64_t fallback) const {
  auto it = node_.attrs.find(key);
  if (it == node_.attrs.end()) return fallback;
  if (it->second.kind != Attribute::Kind::kInt) error("attribute '", key, "' must be an int");
  return it->second.i;
}

float OpContext::attr_float(const std::string& key, float fallback) const {
  auto it = node_.attrs.find(key);
  if (it == node_.attrs.end()) return fallback;
  if (it->second.kind == Attribute::Kind::kInt) return static_cast<float>(it->second.i);
  if (it->second.kind != Attribute::Kind::kFloat) error("attribute '", key, "' must be a float");
  return it->second.f;
}

std::string OpContext::attr_string(const std::string& key, const std::string& fallback) const {
  auto it = node_.attrs.find(key);
  if (it == node_.attrs.end()) return fallback;
  if (it->second.kind != Attribute::Kind::kString) error("attribute '", key, "' must be a string");
  return it->second.s;
}

std::vector<int64_t> OpContext::attr_ints(const std::string& key, std::vector<int64_t> fallback) const {
  auto it = node_.attrs.find(key);
  if (it == node_.attrs.end()) return fallback;
  if (it->second.kind != Attribute::Kind::kInts) error("attribute '", key, "' must be a list of ints");
  return it->second.ints;
}

std::vector<float> OpContext::attr_floats(const std::string& key, std::vector<float> fallback) const {
  auto it = node_.attrs.find(key);
  if (it == node_.attrs.end()) return fallback;
  if (it->second.kind != Attribute::Kind::kFloats) error("attribute '", key, "' must be a list of floats");
  return it->second.floats;
}

void OpContext::set_output(size_t i, DType dtype, std::vector<int64_t> shape) {
  if (!has_output(i)) return;  // an unused optional output
  for (int64_t d : shape) {
    if (d < 0) error("output ", i, " would have shape ", shape_str(shape));
  }
  Value& v = output(i);
  checked_nbytes(dtype, shape, str(where(), ": output '", v.name, "'"));
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.has_type = v.has_shape = true;
}

int64_t OpContext::axis(int64_t value, int64_t rank, const char* what) {
  if (value < -rank || value >= rank) error(what, " ", value, " is out of range for rank ", rank);
  return value < 0 ? value + rank : value;
}

void OpContext::expect_inputs(size_t min, size_t max) {
  if (num_inputs() < min || num_inputs() > max) {
    error("expects ", min, min == max ? "" : str(" to ", max), " inputs, has ", num_inputs());
  }
  for (size_t i = 0; i < min; ++i) {
    if (!has_input(i)) error("input ", i, " is required");
  }
}

void OpContext::expect_dtype(size_t i, std::initializer_list<DType> allowed) {
  const DType dtype = input(i).dtype;
  if (std::find(allowed.begin(), allowed.end(), dtype) != allowed.end()) return;
  std::string list;
  for (DType d : allowed) list += (list.empty() ? "" : ", ") + dtype_str(d);
  not_supported("input ", i, " ('", input(i).name, "') is ", dtype_str(dtype), "; supported: ", list);
}

std::vector<int64_t> broadcast_shapes(const OpContext& ctx, const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      ctx.error("shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

const std::vector<OpDef>& registry() {
  static const std::vector<OpDef> ops = [] {
    std::vector<OpDef> all;
    add_elementwise_ops(all);
    add_linear_ops(all);
    add_pool_ops(all);
    add_shape_ops(all);
    add_norm_ops(all);
    add_reduce_ops(all);
    add_resize_ops(all);
    add_collective_ops(all);
    add_math_ops(all);
    add_index_ops(all);
    add_einsum_ops(all);
    add_quant_ops(all);
    add_rnn_ops(all);
    add_signal_ops(all);
    add_linalg_ops(all);
    add_refused_ops(all);
    return all;
  }();
  return ops;
}

}  // namespace

const OpDef* find_op(const std::string& domain, const std::string& op_type) {
  for (const OpDef& op : registry()) {
    if (op.op_type == op_type && domain == op.domain) return &op;
  }
  return nullptr;
}

std::vector<const OpDef*> all_ops() {
  std::vector<const OpDef*> out;
  for (const OpDef& op : registry()) out.push_back(&op);
  return out;
}

std::unique_ptr<fb::FusedActivationT> fused_activation(const Node& node) {
  const NodeActivation& a = node.activation;
  if (a.op.empty()) return nullptr;
  static const std::map<std::string, fb::Activation> kinds = {
      {"Relu", fb::Activation::RELU},
      {"Clip", fb::Activation::CLIP},
      {"Sigmoid", fb::Activation::SIGMOID},
      {"Tanh", fb::Activation::TANH},
      {"LeakyRelu", fb::Activation::LEAKY_RELU},
      {"HardSigmoid", fb::Activation::HARD_SIGMOID},
      {"HardSwish", fb::Activation::HARD_SWISH},
      {"Silu", fb::Activation::SILU},
      {"Gelu", fb::Activation::GELU},
  };
  const auto it = kinds.find(a.op);
  if (it == kinds.end()) fail("internal error: ", node.name, " carries activation ", a.op, ", which no kernel fuses");
  auto out = std::make_unique<fb::FusedActivationT>();
  out->kind = it->second;
  out->alpha = a.alpha;
  out->beta = a.beta;
  return out;
}

fb::ParamsUnion generic_params(std::vector<int64_t> ints, std::vector<float> floats) {
  fb::GenericParamsT p;
  p.ints = std::move(ints);
  p.floats = std::move(floats);
  fb::ParamsUnion params;
  params.Set(std::move(p));
  return params;
}

}  // namespace kiln::planner
