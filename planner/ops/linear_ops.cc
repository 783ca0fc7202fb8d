// Linear ops: Conv (1-D, 2-D; groups, depthwise), Gemm, MatMul.

#include "ops/op_registry.h"
#include "ops/spatial.h"

namespace kiln::planner {
namespace {

std::vector<int64_t> spatial_dims(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

Spatial conv_spatial(OpContext& ctx) {
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape", spatial_dims(w));
  return resolve_spatial(ctx, spatial_dims(x), kernel, /*allow_ceil=*/false, /*allow_dilations=*/true);
}

void infer_conv(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) ctx.expect_dtype(i, {DType::FLOAT32});
  }
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  if (x.size() != 3 && x.size() != 4) ctx.not_supported(x.size() - 2, "-D convolution");
  if (w.size() != x.size()) ctx.error("weight rank ", w.size(), " differs from input rank ", x.size());
  const int64_t group = ctx.attr_int("group", 1);
  if (group <= 0 || x[1] % group != 0 || w[0] % group != 0) {
    ctx.error("group ", group, " does not divide the channels");
  }
  if (w[1] * group != x[1]) {
    ctx.error("weight ", shape_str(w), " expects ", w[1] * group, " input channels, input has ", x[1]);
  }
  if (ctx.has_input(2) && shape_numel(ctx.shape(2)) != w[0]) ctx.error("bias must have ", w[0], " elements");
  const Spatial s = conv_spatial(ctx);
  if (spatial_dims(w) != s.kernel) ctx.error("kernel_shape does not match the weight");
  std::vector<int64_t> out = {x[0], w[0]};
  out.insert(out.end(), s.out.begin(), s.out.end());
  ctx.set_output(0, DType::FLOAT32, out);
}

void lower_conv(OpContext& ctx, Lowerer& l) {
  const Spatial s = conv_spatial(ctx);
  fb::ConvParamsT p;
  p.group = static_cast<int32_t>(ctx.attr_int("group", 1));
  p.kernel = s.kernel2();
  p.strides = s.strides2();
  p.dilations = s.dilations2();
  p.pads = s.pads4();
  fb::ParamsUnion params;
  params.Set(std::move(p));
  std::vector<int> inputs = {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))};
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  l.kernel("Conv", inputs, {l.tensor(ctx.output_id(0))}, std::move(params));
}

void infer_gemm(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) ctx.expect_dtype(i, {DType::FLOAT32});
  }
  const auto& a = ctx.shape(0);
  const auto& b = ctx.shape(1);
  if (a.size() != 2 || b.size() != 2) ctx.error("A and B must be 2-D, are ", shape_str(a), " and ", shape_str(b));
  const bool ta = ctx.attr_int("transA", 0) != 0;
  const bool tb = ctx.attr_int("transB", 0) != 0;
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb) ctx.error("inner dimensions differ: ", shape_str(a), " x ", shape_str(b));
  if (ctx.has_input(2)) {
    const auto out = broadcast_shapes(ctx, ctx.shape(2), {m, n});
    if (out != std::vector<int64_t>{m, n}) ctx.error("C ", shape_str(ctx.shape(2)), " does not broadcast to [", m, ", ", n, "]");
  }
  ctx.set_output(0, DType::FLOAT32, {m, n});
}

void lower_gemm(OpContext& ctx, Lowerer& l) {
  fb::GemmParamsT p;
  p.alpha = ctx.attr_float("alpha", 1.f);
  p.beta = ctx.attr_float("beta", 1.f);
  p.trans_a = ctx.attr_int("transA", 0) != 0;
  p.trans_b = ctx.attr_int("transB", 0) != 0;
  fb::ParamsUnion params;
  params.Set(std::move(p));
  std::vector<int> inputs = {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))};
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  l.kernel("Gemm", inputs, {l.tensor(ctx.output_id(0))}, std::move(params));
}

void infer_matmul(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.expect_dtype(1, {DType::FLOAT32});
  auto a = ctx.shape(0);
  auto b = ctx.shape(1);
  if (a.empty() || b.empty()) ctx.error("MatMul of a scalar");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  if (a.back() != b[b.size() - 2]) ctx.error("inner dimensions differ: ", shape_str(ctx.shape(0)), " x ", shape_str(ctx.shape(1)));
  std::vector<int64_t> out = broadcast_shapes(ctx, std::vector<int64_t>(a.begin(), a.end() - 2),
                                              std::vector<int64_t>(b.begin(), b.end() - 2));
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  ctx.set_output(0, DType::FLOAT32, out);
}

void lower_matmul(OpContext& ctx, Lowerer& l) {
  l.kernel("MatMul", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))});
}

}  // namespace

void add_linear_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "Conv", .infer = infer_conv, .lower = lower_conv});
  ops.push_back({.op_type = "Gemm", .infer = infer_gemm, .lower = lower_gemm});
  ops.push_back({.op_type = "MatMul", .infer = infer_matmul, .lower = lower_matmul});
}

}  // namespace kiln::planner
