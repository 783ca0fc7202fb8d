// Normalisation ops: Softmax, LogSoftmax, BatchNormalization (inference),
// LayerNormalization (opset 17), InstanceNormalization, LRN (kernels in
// kernels/cpu/src/norm.cc) and MeanVarianceNormalization (a sequence
// of reduction and element-wise kernels).

#include <algorithm>

#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

// Before opset 13 Softmax flattens the input to 2-D at `axis` (default 1)
// and normalises each row; from 13 it normalises along `axis` (default -1).
bool softmax_is_legacy(OpContext& ctx) { return ctx.opset() < 13; }

void infer_softmax(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.axis(ctx.attr_int("axis", softmax_is_legacy(ctx) ? 1 : -1), ctx.rank(0));
  ctx.set_output(0, DType::FLOAT32, ctx.shape(0));
}

void lower_softmax(OpContext& ctx, LoweringContext& l) {
  const int64_t rank = ctx.rank(0);
  const int64_t axis = ctx.axis(ctx.attr_int("axis", softmax_is_legacy(ctx) ? 1 : -1), rank);
  const int in = l.tensor(ctx.input_id(0));
  const int out = l.tensor(ctx.output_id(0));
  fb::AxisParamsT p;
  const auto& shape = ctx.shape(0);
  if (softmax_is_legacy(ctx) && axis != rank - 1) {
    // Normalise over the flattened trailing block: view as [outer, inner].
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= shape[static_cast<size_t>(i)];
    const int in2 = l.temp(ctx.node().name + "/rows", DType::FLOAT32, {outer, inner});
    const int out2 = l.temp(ctx.node().name + "/softmax", DType::FLOAT32, {outer, inner});
    l.view(in, in2);
    p.axis = 1;
    fb::ParamsUnion params;
    params.Set(std::move(p));
    l.kernel(ctx.node().op_type, {in2}, {out2}, std::move(params));
    l.view(out2, out);
    return;
  }
  p.axis = static_cast<int32_t>(axis);
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel(ctx.node().op_type, {in}, {out}, std::move(params));
}

void infer_batch_norm(OpContext& ctx) {
  ctx.expect_inputs(5, 5);
  for (size_t i = 0; i < 5; ++i) ctx.expect_dtype(i, {DType::FLOAT32});
  if (ctx.attr_int("training_mode", 0) != 0) ctx.not_supported("training mode is not supported");
  for (size_t i = 1; i < ctx.num_outputs(); ++i) {
    if (ctx.has_output(i)) ctx.not_supported("the training outputs are not supported");
  }
  const auto& x = ctx.shape(0);
  if (x.size() < 2) ctx.error("expects rank >= 2");
  for (size_t i = 1; i < 5; ++i) {
    if (shape_numel(ctx.shape(i)) != x[1]) ctx.error("input ", i, " must have ", x[1], " elements");
  }
  ctx.set_output(0, DType::FLOAT32, x);
}

void lower_batch_norm(OpContext& ctx, LoweringContext& l) {
  fb::BatchNormParamsT p;
  p.epsilon = ctx.attr_float("epsilon", 1e-5f);
  fb::ParamsUnion params;
  params.Set(std::move(p));
  std::vector<int> inputs;
  for (size_t i = 0; i < 5; ++i) inputs.push_back(l.tensor(ctx.input_id(i)));
  l.kernel("BatchNormalization", inputs, {l.tensor(ctx.output_id(0))}, std::move(params));
}

// LayerNormalization: normalises over the dims from `axis` on. Scale and B
// must hold one value per normalised element (no broadcasting).
int64_t layer_norm_axis(OpContext& ctx) { return ctx.axis(ctx.attr_int("axis", -1), ctx.rank(0)); }

void infer_layer_norm(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) ctx.expect_dtype(i, {DType::FLOAT32});
  }
  if (ctx.attr_int("stash_type", 1) != 1) ctx.not_supported("stash_type other than float");
  const auto& x = ctx.shape(0);
  if (x.empty()) ctx.error("expects rank >= 1");
  const int64_t axis = layer_norm_axis(ctx);
  const std::vector<int64_t> normalized(x.begin() + axis, x.end());
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (shape_numel(ctx.shape(i)) != shape_numel(normalized)) {
      ctx.not_supported(i == 1 ? "Scale" : "B", " of shape ", shape_str(ctx.shape(i)),
                        " (one value per normalised element, ", shape_str(normalized), ", is supported)");
    }
  }
  ctx.set_output(0, DType::FLOAT32, x);
  std::vector<int64_t> stats(x.begin(), x.begin() + axis);
  stats.resize(x.size(), 1);
  ctx.set_output(1, DType::FLOAT32, stats);
  ctx.set_output(2, DType::FLOAT32, stats);
}

void lower_layer_norm(OpContext& ctx, LoweringContext& l) {
  fb::LayerNormParamsT p;
  p.axis = static_cast<int32_t>(layer_norm_axis(ctx));
  p.epsilon = ctx.attr_float("epsilon", 1e-5f);
  fb::ParamsUnion params;
  params.Set(std::move(p));
  std::vector<int> inputs = {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))};
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  std::vector<int> outputs = {l.tensor(ctx.output_id(0))};
  if (ctx.has_output(1) || ctx.has_output(2)) {
    // The kernel writes both statistics; an unused one goes to a temporary.
    const auto& x = ctx.shape(0);
    std::vector<int64_t> stats(x.begin(), x.begin() + p.axis);
    stats.resize(x.size(), 1);
    for (size_t i = 1; i <= 2; ++i) {
      outputs.push_back(ctx.has_output(i) ? l.tensor(ctx.output_id(i))
                                          : l.temp(ctx.node().name + "/unused", DType::FLOAT32, stats));
    }
  }
  l.kernel("LayerNormalization", inputs, outputs, std::move(params));
}

void infer_instance_norm(OpContext& ctx) {
  ctx.expect_inputs(3, 3);
  for (size_t i = 0; i < 3; ++i) ctx.expect_dtype(i, {DType::FLOAT32});
  const auto& x = ctx.shape(0);
  if (x.size() < 3) ctx.error("expects rank >= 3 (N, C, spatial...), has ", x.size());
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.shape(i) != std::vector<int64_t>{x[1]}) ctx.error("input ", i, " must have shape [", x[1], "]");
  }
  ctx.set_output(0, DType::FLOAT32, x);
}

void lower_instance_norm(OpContext& ctx, LoweringContext& l) {
  l.kernel("InstanceNormalization", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1)), l.tensor(ctx.input_id(2))},
           {l.tensor(ctx.output_id(0))}, generic_params({}, {ctx.attr_float("epsilon", 1e-5f)}));
}

int64_t lrn_size(OpContext& ctx) {
  const int64_t size = ctx.attr_int("size", 0);
  if (size < 1 || size > (int64_t{1} << 30)) ctx.error("attribute 'size' must be from 1 to 2^30, is ", size);
  return size;
}

void infer_lrn(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  if (ctx.rank(0) < 2) ctx.error("expects rank >= 2 (N, C, ...)");
  lrn_size(ctx);
  ctx.set_output(0, DType::FLOAT32, ctx.shape(0));
}

void lower_lrn(OpContext& ctx, LoweringContext& l) {
  l.kernel("LRN", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))},
           generic_params({lrn_size(ctx)}, {ctx.attr_float("alpha", 1e-4f), ctx.attr_float("beta", 0.75f),
                                            ctx.attr_float("bias", 1.f)}));
}

// MeanVarianceNormalization, as ONNX defines it:
//   y = (x - mean(x)) / (sqrt(mean(x^2) - mean(x)^2) + 1e-9)
// with the means over `axes` (default [0, 2, 3]).
std::vector<int32_t> mvn_axes(OpContext& ctx) {
  std::vector<int32_t> axes;
  for (int64_t a : ctx.attr_ints("axes", {0, 2, 3})) {
    const int32_t axis = static_cast<int32_t>(ctx.axis(a, ctx.rank(0), "attribute 'axes' entry"));
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) ctx.error("attribute 'axes' repeats ", a);
    axes.push_back(axis);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

void infer_mvn(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  mvn_axes(ctx);
  ctx.set_output(0, DType::FLOAT32, ctx.shape(0));
}

void lower_mvn(OpContext& ctx, LoweringContext& l) {
  const std::string& name = ctx.node().name;
  const auto& shape = ctx.shape(0);
  std::vector<int64_t> stats_shape = shape;
  const std::vector<int32_t> axes = mvn_axes(ctx);
  for (int32_t a : axes) stats_shape[static_cast<size_t>(a)] = 1;
  const int x = l.tensor(ctx.input_id(0));
  auto mean = [&](int in, const char* stem) {
    fb::ReduceParamsT p;
    p.axes = axes;
    p.keepdims = true;
    fb::ParamsUnion params;
    params.Set(std::move(p));
    const int out = l.temp(name + stem, DType::FLOAT32, stats_shape);
    l.kernel("ReduceMean", {in}, {out}, std::move(params));
    return out;
  };
  auto binary = [&](const char* op, int a, int b, const std::vector<int64_t>& out_shape, const char* stem) {
    const int out = l.temp(name + stem, DType::FLOAT32, out_shape);
    l.kernel(op, {a, b}, {out});
    return out;
  };
  const int m = mean(x, "/mean");
  const int sq = binary("Mul", x, x, shape, "/square");
  const int m2 = mean(sq, "/mean_square");
  const int var = binary("Sub", m2, binary("Mul", m, m, stats_shape, "/square_mean"), stats_shape, "/variance");
  const int sd = l.temp(name + "/stddev", DType::FLOAT32, stats_shape);
  l.kernel("Sqrt", {var}, {sd});
  const int denom =
      binary("Add", sd, l.constant(name + "/epsilon", HostTensor::scalar_float(1e-9f)), stats_shape, "/denominator");
  const int centred = binary("Sub", x, m, shape, "/centred");
  l.kernel("Div", {centred, denom}, {l.tensor(ctx.output_id(0))});
}

}  // namespace

void add_norm_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "Softmax", .infer = infer_softmax, .lower = lower_softmax});
  ops.push_back({.op_type = "LogSoftmax", .infer = infer_softmax, .lower = lower_softmax});
  ops.push_back({.op_type = "BatchNormalization", .infer = infer_batch_norm, .lower = lower_batch_norm});
  ops.push_back({.op_type = "LayerNormalization", .infer = infer_layer_norm, .lower = lower_layer_norm});
  ops.push_back({.op_type = "InstanceNormalization", .infer = infer_instance_norm, .lower = lower_instance_norm});
  ops.push_back({.op_type = "LRN", .infer = infer_lrn, .lower = lower_lrn});
  ops.push_back({.op_type = "MeanVarianceNormalization", .infer = infer_mvn, .lower = lower_mvn});
}

}  // namespace kiln::planner
