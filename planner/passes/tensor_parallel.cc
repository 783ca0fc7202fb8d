#include "passes/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"

namespace kiln::planner {
namespace {

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) p *= dims[i];
  return p;
}

// `count` slices of `axis` starting at `begin`: the bytes rank r keeps.
HostTensor slice_axis(const HostTensor& t, size_t axis, int64_t begin, int64_t count) {
  std::vector<int64_t> shape = t.shape;
  const int64_t outer = product(t.shape, 0, axis);
  const int64_t inner = product(t.shape, axis + 1, t.shape.size()) * static_cast<int64_t>(dtype_bytes(t.dtype));
  const int64_t extent = t.shape[axis];
  shape[axis] = count;
  HostTensor out(t.dtype, shape);
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(out.bytes.data() + o * count * inner, t.bytes.data() + (o * extent + begin) * inner,
                static_cast<size_t>(count * inner));
  }
  return out;
}

bool is_elementwise(const std::string& op) {
  static const std::set<std::string> ops = {
      "Add",      "Sub",  "Mul",     "Div",        "Pow",     "Max",       "Min",         "Where",
      "Relu",     "Gelu", "Sigmoid", "Tanh",       "Erf",     "Sqrt",      "Exp",         "Log",
      "Neg",      "Abs",  "Cast",    "Identity",   "Dropout", "LeakyRelu", "HardSigmoid", "HardSwish",
      "Softplus", "Clip", "Elu",     "Reciprocal", "Selu",    "Mish",      "PRelu"};
  return ops.count(op) != 0;
}

bool is_linear(const Node& node) { return node.domain.empty() && (node.op_type == "MatMul" || node.op_type == "Gemm"); }

int64_t attr_int(const Node& node, const char* key, int64_t fallback) {
  auto it = node.attrs.find(key);
  return it != node.attrs.end() && it->second.kind == Attribute::Kind::kInt ? it->second.i : fallback;
}
float attr_float(const Node& node, const char* key, float fallback) {
  auto it = node.attrs.find(key);
  return it != node.attrs.end() && it->second.kind == Attribute::Kind::kFloat ? it->second.f : fallback;
}

// The constant 2-D weight of a MatMul/Gemm (input 1), or nullptr.
const Value* weight_of(const Graph& graph, const Node& node) {
  if (!is_linear(node) || node.inputs.size() < 2 || node.inputs[1] < 0) return nullptr;
  const Value& w = graph.values[static_cast<size_t>(node.inputs[1])];
  return w.is_constant() && w.shape.size() == 2 ? &w : nullptr;
}

// What rank r changes, decided once for all ranks.
struct ConstantShard {
  int node = -1;
  size_t input = 0;
  size_t axis = 0;
};

struct Plan {
  std::set<int> column;  // start nodes
  std::set<int> row;     // closing nodes
  std::vector<ConstantShard> shards;
  std::map<int, int> reshape_axis;  // Reshape node -> output axis whose size is divided
};

class Propagation {
 public:
  Propagation(const Graph& graph, uint32_t ranks, const std::set<int>& starts)
      : graph_(graph), ranks_(ranks), starts_(starts), axis_(graph.values.size(), -1), from_(graph.values.size()) {}

  // Empty on success; otherwise the starts that must be dropped.
  std::set<int> run(const std::vector<int>& order) {
    for (int n : order) {
      std::set<int> drop = visit(n);
      if (!drop.empty()) return drop;
    }
    for (int v : graph_.outputs) {
      if (axis_[static_cast<size_t>(v)] >= 0) return from_[static_cast<size_t>(v)];
    }
    return {};
  }

  Plan plan;

 private:
  const Value& value(int v) const { return graph_.values[static_cast<size_t>(v)]; }
  bool split(int v) const { return v >= 0 && axis_[static_cast<size_t>(v)] >= 0; }

  void set(int v, int axis, const std::set<int>& from) {
    axis_[static_cast<size_t>(v)] = axis;
    from_[static_cast<size_t>(v)] = from;
  }

  std::set<int> from_inputs(const Node& node) const {
    std::set<int> all;
    for (int v : node.inputs) {
      if (split(v)) all.insert(from_[static_cast<size_t>(v)].begin(), from_[static_cast<size_t>(v)].end());
    }
    return all;
  }

  std::set<int> visit(int n) {
    const Node& node = graph_.nodes[static_cast<size_t>(n)];
    bool any_split = false;
    for (int v : node.inputs) any_split = any_split || split(v);
    if (!any_split) {
      if (starts_.count(n) != 0) {
        plan.column.insert(n);
        const int out = node.outputs[0];
        set(out, static_cast<int>(value(out).shape.size()) - 1, {n});
      }
      return {};
    }
    const std::set<int> from = from_inputs(node);
    const int out = node.outputs.empty() ? -1 : node.outputs[0];
    if (!node.domain.empty() || out < 0) return from;
    const std::vector<int64_t>& out_shape = value(out).shape;
    const std::string& op = node.op_type;

    if (is_linear(node)) {
      const Value* w = weight_of(graph_, node);
      const int a = node.inputs[0];
      const bool gemm = op == "Gemm";
      if (w != nullptr && split(a) && !split(node.inputs[1]) &&
          axis_[static_cast<size_t>(a)] == static_cast<int>(value(a).shape.size()) - 1 &&
          (!gemm || attr_int(node, "transA", 0) == 0)) {
        // Closes the region: rows of the weight, AllReduce, then the bias.
        if (gemm && node.inputs.size() > 2 && node.inputs[2] >= 0 && attr_float(node, "beta", 1.f) != 1.f) return from;
        plan.row.insert(n);
        return {};
      }
      if (op == "MatMul" && out_shape.size() >= 3) {
        const size_t rank = out_shape.size();
        int axis = -1;
        for (size_t i = 0; i < 2; ++i) {
          const int v = node.inputs[i];
          const size_t r = value(v).shape.size();
          if (split(v)) {
            const int o = axis_[static_cast<size_t>(v)] + static_cast<int>(rank - r);
            if (o >= static_cast<int>(rank) - 2 || (axis >= 0 && axis != o)) return from;
            axis = o;
          }
        }
        for (size_t i = 0; i < 2; ++i) {
          const int v = node.inputs[i];
          const int local = axis - static_cast<int>(out_shape.size() - value(v).shape.size());
          if (!split(v) && local >= 0 && value(v).shape[static_cast<size_t>(local)] != 1) return from;
        }
        set(out, axis, from);
        return {};
      }
      return from;
    }

    if (is_elementwise(op)) {
      const size_t rank = out_shape.size();
      int axis = -1;
      for (int v : node.inputs) {
        if (!split(v)) continue;
        const int o = axis_[static_cast<size_t>(v)] + static_cast<int>(rank - value(v).shape.size());
        if (axis >= 0 && axis != o) return from;
        axis = o;
      }
      std::vector<ConstantShard> shards;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const int v = node.inputs[i];
        if (v < 0 || split(v)) continue;
        const int local = axis - static_cast<int>(rank - value(v).shape.size());
        if (local < 0 || value(v).shape[static_cast<size_t>(local)] == 1) continue;
        if (!value(v).is_constant()) return from;  // a full-width activation: a residual
        shards.push_back({n, i, static_cast<size_t>(local)});
      }
      plan.shards.insert(plan.shards.end(), shards.begin(), shards.end());
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] >= 0 && i == 0) set(node.outputs[i], axis, from);
      }
      return {};
    }

    const int in = node.inputs[0];
    if (!split(in) || (node.inputs.size() > 1 && split(node.inputs[1]))) return from;
    const int a = axis_[static_cast<size_t>(in)];
    const std::vector<int64_t>& in_shape = value(in).shape;
    if (op == "Transpose") {
      auto it = node.attrs.find("perm");
      std::vector<int64_t> perm;
      if (it != node.attrs.end()) perm = it->second.ints;
      if (perm.empty()) {
        for (size_t i = in_shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
      }
      for (size_t j = 0; j < perm.size(); ++j) {
        if (perm[j] == a) set(out, static_cast<int>(j), from);
      }
      return {};
    }
    if (op == "Softmax" || op == "LogSoftmax") {
      int64_t axis = attr_int(node, "axis", node.opset >= 13 ? -1 : 1);
      if (axis < 0) axis += static_cast<int64_t>(in_shape.size());
      const bool keeps = node.opset >= 13 ? axis != a : a < axis;
      if (!keeps) return from;
      set(out, a, from);
      return {};
    }
    if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      // The N contiguous chunks of the split axis stay N contiguous chunks
      // of an output axis that starts at the same flat position.
      const int64_t before = product(in_shape, 0, static_cast<size_t>(a));
      for (size_t b = 0; b < out_shape.size(); ++b) {
        if (product(out_shape, 0, b) != before || out_shape[b] == 1) continue;
        if (out_shape[b] % ranks_ != 0) return from;
        if (op == "Reshape") plan.reshape_axis[n] = static_cast<int>(b);
        set(out, static_cast<int>(b), from);
        return {};
      }
      return from;
    }
    return from;
  }

  const Graph& graph_;
  uint32_t ranks_;
  const std::set<int>& starts_;
  std::vector<int> axis_;
  std::vector<std::set<int>> from_;
};

bool can_start(const Graph& graph, const Node& node, uint32_t ranks) {
  const Value* w = weight_of(graph, node);
  if (w == nullptr) return false;
  if (node.op_type == "Gemm") {
    if (attr_int(node, "transA", 0) != 0) return false;
    const int64_t cols = attr_int(node, "transB", 0) != 0 ? w->shape[0] : w->shape[1];
    return cols % ranks == 0;
  }
  return w->shape[1] % ranks == 0;
}

// Replaces input `i` of node `n` with a fresh constant (constants may be
// shared between nodes; a shard belongs to one).
void replace_constant(Graph& graph, int n, size_t i, HostTensor data, const char* stem) {
  const int id = graph.add_constant(
      graph.values[static_cast<size_t>(graph.nodes[static_cast<size_t>(n)].inputs[i])].name + stem, std::move(data));
  graph.nodes[static_cast<size_t>(n)].inputs[i] = id;
}

HostTensor shard(const HostTensor& t, size_t axis, uint32_t rank, uint32_t ranks) {
  const int64_t count = t.shape[axis] / ranks;
  return slice_axis(t, axis, count * rank, count);
}

Graph rank_graph(const Graph& graph, const Plan& plan, uint32_t rank, uint32_t ranks) {
  Graph g = graph;
  g.ranks = ranks;
  auto constant = [&](int n, size_t i) -> const HostTensor& {
    return *g.values[static_cast<size_t>(g.nodes[static_cast<size_t>(n)].inputs[i])].constant;
  };
  for (int n : plan.column) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    const bool transposed = node.op_type == "Gemm" && attr_int(node, "transB", 0) != 0;
    replace_constant(g, n, 1, shard(constant(n, 1), transposed ? 0 : 1, rank, ranks), ".tp_cols");
    if (node.op_type == "Gemm" && node.inputs.size() > 2 && node.inputs[2] >= 0) {
      const HostTensor& bias = constant(n, 2);
      if (!bias.shape.empty() && bias.shape.back() != 1) {
        replace_constant(g, n, 2, shard(bias, bias.shape.size() - 1, rank, ranks), ".tp_cols");
      }
    }
  }
  for (const ConstantShard& s : plan.shards) {
    replace_constant(g, s.node, s.input, shard(constant(s.node, s.input), s.axis, rank, ranks), ".tp_shard");
  }
  for (const auto& [n, axis] : plan.reshape_axis) {
    std::vector<int64_t> shape = g.values[static_cast<size_t>(g.nodes[static_cast<size_t>(n)].outputs[0])].shape;
    shape[static_cast<size_t>(axis)] /= ranks;
    replace_constant(g, n, 1, HostTensor::from_int64s(shape, {static_cast<int64_t>(shape.size())}), ".tp_shape");
  }
  for (int n : plan.row) {
    const bool transposed = g.nodes[static_cast<size_t>(n)].op_type == "Gemm" &&
                            attr_int(g.nodes[static_cast<size_t>(n)], "transB", 0) != 0;
    replace_constant(g, n, 1, shard(constant(n, 1), transposed ? 1 : 0, rank, ranks), ".tp_rows");
    // node -> partial -> AllReduce -> [Add bias ->] the node's old output
    const int out = g.nodes[static_cast<size_t>(n)].outputs[0];
    int bias = -1;
    if (g.nodes[static_cast<size_t>(n)].op_type == "Gemm" && g.nodes[static_cast<size_t>(n)].inputs.size() > 2) {
      bias = g.nodes[static_cast<size_t>(n)].inputs[2];
      g.nodes[static_cast<size_t>(n)].inputs.resize(2);
    }
    auto fresh = [&](const std::string& stem) {
      Value v;
      v.name = g.unique_name(g.values[static_cast<size_t>(out)].name + stem);
      v.dtype = g.values[static_cast<size_t>(out)].dtype;
      v.has_type = true;
      return g.add_value(std::move(v));
    };
    const int partial = fresh(".tp_partial");
    g.nodes[static_cast<size_t>(n)].outputs[0] = partial;
    g.values[static_cast<size_t>(partial)].producer = n;
    Node reduce;
    reduce.name = g.nodes[static_cast<size_t>(n)].name + ".all_reduce";
    reduce.op_type = "AllReduce";
    reduce.domain = "com.microsoft";
    reduce.opset = 1;
    reduce.inputs = {partial};
    const int reduced = bias >= 0 ? fresh(".tp_reduced") : out;
    reduce.outputs = {reduced};
    g.nodes.push_back(reduce);
    g.values[static_cast<size_t>(reduced)].producer = static_cast<int>(g.nodes.size()) - 1;
    if (bias >= 0) {
      Node add;
      add.name = g.nodes[static_cast<size_t>(n)].name + ".bias";
      add.op_type = "Add";
      add.opset = graph.opset;
      add.inputs = {reduced, bias};
      add.outputs = {out};
      g.nodes.push_back(add);
      g.values[static_cast<size_t>(out)].producer = static_cast<int>(g.nodes.size()) - 1;
    }
  }
  // Shapes change: the planner infers them again; ONNX's no longer apply.
  return g;
}

uint64_t constant_bytes(const Graph& graph) {
  const auto readers = graph.consumers();
  uint64_t total = 0;
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (graph.values[v].is_constant() && !readers[v].empty()) total += graph.values[v].constant->nbytes();
  }
  return total;
}

}  // namespace

std::vector<Graph> shard_tensor_parallel(const Graph& graph, uint32_t ranks, TensorParallelStats* out_stats) {
  if (ranks < 2) fail("--tensor-parallel needs at least 2 ranks, got ", ranks);
  const std::vector<int> order = graph.topological_order();
  std::set<int> starts;
  for (int n : order) {
    if (can_start(graph, graph.nodes[static_cast<size_t>(n)], ranks)) starts.insert(n);
  }
  Plan plan;
  for (;;) {
    Propagation propagation(graph, ranks, starts);
    const std::set<int> drop = propagation.run(order);
    if (drop.empty()) {
      plan = std::move(propagation.plan);
      break;
    }
    for (int n : drop) starts.erase(n);
  }
  if (plan.row.empty()) {
    fail("--tensor-parallel ", ranks,
         ": found no MatMul/Gemm pair to split (a constant-weight MatMul whose output "
         "width ",
         ranks,
         " divides, leading through element-wise ops or attention to a second constant-weight "
         "MatMul)");
  }
  std::vector<Graph> graphs;
  for (uint32_t r = 0; r < ranks; ++r) graphs.push_back(rank_graph(graph, plan, r, ranks));
  if (out_stats != nullptr) {
    out_stats->column_splits = static_cast<int>(plan.column.size());
    out_stats->row_splits = static_cast<int>(plan.row.size());
    out_stats->reshapes = static_cast<int>(plan.reshape_axis.size());
    out_stats->weight_bytes_total = constant_bytes(graph);
    out_stats->weight_bytes_per_rank = constant_bytes(graphs[0]);
  }
  return graphs;
}

}  // namespace kiln::planner
