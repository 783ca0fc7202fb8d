// Recurrent ops: RNN, GRU and LSTM (every direction, layout, gate
// activation, clip, GRU's linear_before_reset, LSTM's input_forget and
// peepholes). Each lowers to one kernel of its name; the kernels, the
// meaning of their GenericParams and the working memory planned here are in
// kernels/cpu/src/rnn.cc and kiln/kernels/rnn.h.
//
// sequence_lens must be known when planning: a constant whose lengths are
// all seq_length is dropped (the kernel runs every step), other constants
// go to the kernel, which stops each batch row at its length. A
// sequence_lens computed at run time is refused naming the node (its graph
// input can be frozen with --freeze).
//
// activation_alpha and activation_beta are consumed in the order of the
// activations, each value by the next function that takes that parameter
// (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu take
// alpha; Affine, ScaledTanh, HardSigmoid take beta), ONNX's defaults where
// the list runs out.

#include <cctype>

#include "kiln/kernels/rnn.h"
#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

using namespace kiln::kernels;

struct ActivationDef {
  const char* name;
  RnnActivation fn;
  bool has_alpha;
  float alpha;
  bool has_beta;
  float beta;
};
constexpr ActivationDef kActivations[] = {
    {"Sigmoid", kRnnSigmoid, false, 0.f, false, 0.f},
    {"Tanh", kRnnTanh, false, 0.f, false, 0.f},
    {"Relu", kRnnRelu, false, 0.f, false, 0.f},
    {"Affine", kRnnAffine, true, 1.f, true, 0.f},
    {"LeakyRelu", kRnnLeakyRelu, true, 0.01f, false, 0.f},
    {"ThresholdedRelu", kRnnThresholdedRelu, true, 1.f, false, 0.f},
    {"ScaledTanh", kRnnScaledTanh, true, 1.f, true, 1.f},
    {"HardSigmoid", kRnnHardSigmoid, true, 0.2f, true, 0.5f},
    {"Elu", kRnnElu, true, 1.f, false, 0.f},
    {"Softsign", kRnnSoftsign, false, 0.f, false, 0.f},
    {"Softplus", kRnnSoftplus, false, 0.f, false, 0.f},
};

bool same_name(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i] != '\0'; ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return i == a.size() && b[i] == '\0';
}

// Everything a node's attributes and input shapes decide.
struct Recurrent {
  int64_t kind = kRnnSimple;
  int64_t gates = 1, dirs = 1, direction = 0, layout = 0;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int64_t linear_before_reset = 0, input_forget = 0;
  float clip = 0.f;
  bool lengths_vary = false;  // sequence_lens given and not all seq
  std::vector<int64_t> activations;
  std::vector<float> alpha_beta;

  std::vector<int64_t> state_shape() const {
    return layout == 0 ? std::vector<int64_t>{dirs, batch, hidden} : std::vector<int64_t>{batch, dirs, hidden};
  }
  std::vector<int64_t> y_shape() const {
    return layout == 0 ? std::vector<int64_t>{seq, dirs, batch, hidden}
                       : std::vector<int64_t>{batch, seq, dirs, hidden};
  }
};

int64_t kind_of(const OpContext& ctx, Node& node) {
  if (node.op_type == "LSTM") return kRnnLstm;
  if (node.op_type == "GRU") return kRnnGru;
  if (node.op_type == "RNN") return kRnnSimple;
  ctx.error("internal error: not a recurrent op");
}

void expect_shape(OpContext& ctx, size_t input, const char* name, const std::vector<int64_t>& want) {
  if (ctx.shape(input) != want) {
    ctx.error(name, " ('", ctx.input(input).name, "') has shape ", shape_str(ctx.shape(input)), ", expected ",
              shape_str(want), " (from X, direction and hidden_size)");
  }
}

void read_activations(OpContext& ctx, Recurrent& r) {
  const int64_t per = rnn_activations_per_direction(r.kind);
  std::vector<std::string> names;
  const auto it = ctx.node().attrs.find("activations");
  if (it != ctx.node().attrs.end()) {
    if (it->second.kind != Attribute::Kind::kStrings) ctx.error("attribute 'activations' must be a list of strings");
    names = it->second.strings;
    // One direction's list serves both directions.
    if (r.dirs == 2 && static_cast<int64_t>(names.size()) == per) names.insert(names.end(), names.begin(), names.end());
    if (static_cast<int64_t>(names.size()) != r.dirs * per) {
      ctx.error("attribute 'activations' has ", names.size(), " entries; ", ctx.node().op_type, " with ", r.dirs,
                " direction(s) needs ", r.dirs * per);
    }
  } else {
    static const char* const kDefaults[] = {"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < r.dirs; ++d) {
      for (int64_t i = 0; i < per; ++i) names.push_back(r.kind == kRnnSimple ? "Tanh" : kDefaults[i]);
    }
  }
  const std::vector<float> alphas = ctx.attr_floats("activation_alpha");
  const std::vector<float> betas = ctx.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const ActivationDef* def = nullptr;
    for (const ActivationDef& a : kActivations) {
      if (same_name(name, a.name)) def = &a;
    }
    if (def == nullptr) {
      ctx.error("attribute 'activations' names '", name, "', which is none of Sigmoid, Tanh, Relu, Affine, ",
                "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus");
    }
    float alpha = def->alpha, beta = def->beta;
    if (def->has_alpha && next_alpha < alphas.size()) alpha = alphas[next_alpha++];
    if (def->has_beta && next_beta < betas.size()) beta = betas[next_beta++];
    r.activations.push_back(def->fn);
    r.alpha_beta.push_back(alpha);
    r.alpha_beta.push_back(beta);
  }
}

// Validates the node (one line naming it and the attribute or input at
// fault) and returns its geometry.
Recurrent recurrent(OpContext& ctx) {
  Recurrent r;
  r.kind = kind_of(ctx, ctx.node());
  r.gates = rnn_gates(r.kind);
  const bool lstm = r.kind == kRnnLstm;
  ctx.expect_inputs(3, lstm ? 8 : 6);
  if (ctx.num_outputs() > (lstm ? 3u : 2u)) {
    ctx.error("has ", ctx.num_outputs(), " outputs, ", ctx.node().op_type, " has at most ", lstm ? 3 : 2);
  }
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (i == 4) {
      ctx.expect_dtype(i, {DType::INT32, DType::INT64});
    } else {
      ctx.expect_dtype(i, {DType::FLOAT32});
    }
  }
  r.layout = ctx.attr_int("layout", 0);
  if (r.layout != 0 && r.layout != 1) ctx.error("attribute 'layout' must be 0 or 1, is ", r.layout);
  const std::string direction = ctx.attr_string("direction", "forward");
  if (direction == "forward") {
    r.direction = 0;
  } else if (direction == "reverse") {
    r.direction = 1;
  } else if (direction == "bidirectional") {
    r.direction = 2;
    r.dirs = 2;
  } else {
    ctx.error("attribute 'direction' must be forward, reverse or bidirectional, is '", direction, "'");
  }
  if (r.kind == kRnnGru) {
    r.linear_before_reset = ctx.attr_int("linear_before_reset", 0);
    if (r.linear_before_reset != 0 && r.linear_before_reset != 1) {
      ctx.error("attribute 'linear_before_reset' must be 0 or 1, is ", r.linear_before_reset);
    }
  }
  if (lstm) {
    r.input_forget = ctx.attr_int("input_forget", 0);
    if (r.input_forget != 0 && r.input_forget != 1) {
      ctx.error("attribute 'input_forget' must be 0 or 1, is ", r.input_forget);
    }
  }
  if (ctx.has_attr("clip")) {
    r.clip = ctx.attr_float("clip", 0.f);
    if (!(r.clip > 0.f)) ctx.error("attribute 'clip' must be positive, is ", r.clip);
  }

  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  const auto& rw = ctx.shape(2);
  if (x.size() != 3) ctx.error("X must be 3-D, has shape ", shape_str(x));
  if (w.size() != 3) ctx.error("W must be 3-D, has shape ", shape_str(w));
  if (rw.size() != 3) ctx.error("R must be 3-D, has shape ", shape_str(rw));
  r.seq = r.layout == 0 ? x[0] : x[1];
  r.batch = r.layout == 0 ? x[1] : x[0];
  r.input = x[2];
  r.hidden = ctx.attr_int("hidden_size", rw[2]);
  if (r.hidden < 1 || r.hidden > (int64_t{1} << 31)) {
    ctx.error("attribute 'hidden_size' must be from 1 to 2^31, is ", r.hidden);
  }
  if (w[0] != r.dirs) {
    ctx.error("W has ", w[0], " directions; attribute 'direction' ", direction, " needs ", r.dirs);
  }
  expect_shape(ctx, 1, "W", {r.dirs, r.gates * r.hidden, r.input});
  expect_shape(ctx, 2, "R", {r.dirs, r.gates * r.hidden, r.hidden});
  if (ctx.has_input(3)) expect_shape(ctx, 3, "B", {r.dirs, 2 * r.gates * r.hidden});
  if (ctx.has_input(5)) expect_shape(ctx, 5, "initial_h", r.state_shape());
  if (ctx.has_input(6)) expect_shape(ctx, 6, "initial_c", r.state_shape());
  if (ctx.has_input(7)) expect_shape(ctx, 7, "P", {r.dirs, 3 * r.hidden});
  if (ctx.has_input(4)) {
    const HostTensor& lengths = ctx.constant_input(4, "sequence_lens");
    if (lengths.shape != std::vector<int64_t>{r.batch}) {
      ctx.error("sequence_lens has shape ", shape_str(lengths.shape), ", expected [", r.batch, "]");
    }
    for (int64_t i = 0; i < r.batch; ++i) {
      const int64_t n = lengths.int_at(i);
      if (n < 0 || n > r.seq) ctx.error("sequence_lens[", i, "] is ", n, ", outside 0..", r.seq);
      if (n != r.seq) r.lengths_vary = true;
    }
  }
  read_activations(ctx, r);
  // The working memory must fit (the outputs are checked by set_output).
  int64_t rows = 0, floats = 0;
  if (__builtin_add_overflow(r.seq, 1, &rows) || __builtin_mul_overflow(rows, r.batch, &rows) ||
      __builtin_mul_overflow(rows, r.gates * r.hidden, &floats) ||
      static_cast<uint64_t>(floats) > kMaxTensorBytes / sizeof(float)) {
    ctx.error("working memory of (seq_length + 1) x batch x ", r.gates, " x hidden_size ", r.hidden,
              " floats is larger than 64 GiB");
  }
  return r;
}

void infer_recurrent(OpContext& ctx) {
  const Recurrent r = recurrent(ctx);
  ctx.set_output(0, DType::FLOAT32, r.y_shape());
  ctx.set_output(1, DType::FLOAT32, r.state_shape());
  if (r.kind == kRnnLstm) ctx.set_output(2, DType::FLOAT32, r.state_shape());
}

fb::ParamsUnion recurrent_params(const Recurrent& r) {
  fb::GenericParamsT p;
  p.ints = {r.hidden, r.direction, r.layout, r.linear_before_reset, r.input_forget};
  p.ints.insert(p.ints.end(), r.activations.begin(), r.activations.end());
  p.floats = {r.clip};
  p.floats.insert(p.floats.end(), r.alpha_beta.begin(), r.alpha_beta.end());
  fb::ParamsUnion params;
  params.Set(std::move(p));
  return params;
}

void lower_recurrent(OpContext& ctx, LoweringContext& l) {
  const Recurrent r = recurrent(ctx);
  const std::string& name = ctx.node().name;
  std::vector<int> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const bool used = ctx.has_input(i) && (i != 4 || r.lengths_vary);
    inputs.push_back(used ? l.tensor(ctx.input_id(i)) : -1);
  }
  while (!inputs.empty() && inputs.back() < 0) inputs.pop_back();
  // The kernel writes the final states whether or not the graph reads them.
  std::vector<int> outputs;
  outputs.push_back(ctx.has_output(1) ? l.tensor(ctx.output_id(1))
                                      : l.temp(name + "/Y_h", DType::FLOAT32, r.state_shape()));
  if (r.kind == kRnnLstm) {
    outputs.push_back(ctx.has_output(2) ? l.tensor(ctx.output_id(2))
                                        : l.temp(name + "/Y_c", DType::FLOAT32, r.state_shape()));
  }
  if (ctx.has_output(0)) outputs.push_back(l.tensor(ctx.output_id(0)));
  std::vector<int> scratch = {l.temp(name + "/work", DType::FLOAT32,
                                     {std::max<int64_t>(1, rnn_work_floats(r.kind, r.seq, r.batch, r.hidden))})};
  if (l.options().packing_scratch && l.device().type() == fb::DeviceType::CPU) {
    scratch.push_back(l.temp(name + "/packed_a", DType::FLOAT32,
                             {std::max<int64_t>(1, rnn_pack_a_floats(r.seq, r.batch, r.input, r.hidden))}));
    scratch.push_back(l.temp(name + "/packed_b", DType::FLOAT32,
                             {std::max<int64_t>(1, rnn_pack_b_floats(r.kind, r.input, r.hidden))}));
  }
  l.kernel(ctx.node().op_type, std::move(inputs), std::move(outputs), recurrent_params(r), std::move(scratch));
}

}  // namespace

void add_rnn_ops(std::vector<OpDef>& ops) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    ops.push_back({.op_type = op, .infer = infer_recurrent, .lower = lower_recurrent});
  }
}

}  // namespace kiln::planner
