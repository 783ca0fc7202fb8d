// Normalisation ops: Softmax, LogSoftmax, BatchNormalization (inference).

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

void lower_softmax(OpContext& ctx, Lowerer& l) {
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

void lower_batch_norm(OpContext& ctx, Lowerer& l) {
  fb::BatchNormParamsT p;
  p.epsilon = ctx.attr_float("epsilon", 1e-5f);
  fb::ParamsUnion params;
  params.Set(std::move(p));
  std::vector<int> inputs;
  for (size_t i = 0; i < 5; ++i) inputs.push_back(l.tensor(ctx.input_id(i)));
  l.kernel("BatchNormalization", inputs, {l.tensor(ctx.output_id(0))}, std::move(params));
}

}  // namespace

void add_norm_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "Softmax", .infer = infer_softmax, .lower = lower_softmax});
  ops.push_back({.op_type = "LogSoftmax", .infer = infer_softmax, .lower = lower_softmax});
  ops.push_back({.op_type = "BatchNormalization", .infer = infer_batch_norm, .lower = lower_batch_norm});
}

}  // namespace kiln::planner
