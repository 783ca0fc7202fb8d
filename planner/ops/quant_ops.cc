// Quantization ops: QuantizeLinear and DequantizeLinear (per tensor and per
// axis; uint8 and int8, DequantizeLinear also int32), DynamicQuantizeLinear,
// and the int8 linear
// ops QLinearConv, QLinearMatMul, ConvInteger and MatMulInteger, which lower
// onto ConvInt8 / GemmInt8 (quant_ops.h). The linear ops need their weights,
// scales and zero points known when planning (the planner folds them into
// the kernel's constants); a model whose weights are computed at run time is
// refused.

#include "ops/quant_ops.h"

#include <algorithm>
#include <cmath>

#include "kiln/kernels/gemm_blocking.h"
#include "kiln/kernels/qgemm.h"
#include "ops/spatial.h"

namespace kiln::planner {

namespace {

// Packing scratch of one int8 product without --packing (bytes; see
// int8_scratch).
constexpr int64_t kInt8BlockBytes = 2048;
// And with it: the kernel packs and multiplies this many bytes of panels
// at a time, which stay in L2 between the packer and the tiles (a plane
// packed whole went out to memory and back, and took the arena: 37.7 MB
// for a U-Net's 3x3 over 64 channels of 256 x 256).
constexpr int64_t kInt8PackBytes = 512 * 1024;

fb::ParamsUnion int_params(std::vector<int64_t> ints) {
  fb::GenericParamsT p;
  p.ints = std::move(ints);
  fb::ParamsUnion params;
  params.Set(std::move(p));
  return params;
}

int32_t low_of(DType d) { return d == DType::UINT8 ? 0 : -128; }

// A scale or zero point's values, broadcast to `count` (one value or count).
std::vector<double> floats_of(OpContext& ctx, const HostTensor& t, int64_t count, const char* what) {
  if (t.numel() != 1 && t.numel() != count) ctx.not_supported(what, " with ", t.numel(), " values (1 or ", count, ")");
  std::vector<double> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = t.float_at(t.numel() == 1 ? 0 : i);
  return out;
}

std::vector<int32_t> ints_of(OpContext& ctx, const HostTensor& t, int64_t count, const char* what) {
  if (t.numel() != 1 && t.numel() != count) ctx.not_supported(what, " with ", t.numel(), " values (1 or ", count, ")");
  std::vector<int32_t> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    out[static_cast<size_t>(i)] = static_cast<int32_t>(t.int_at(t.numel() == 1 ? 0 : i));
  return out;
}

// A scalar quantization parameter (one value).
const HostTensor& scalar_input(OpContext& ctx, size_t i, const char* what) {
  const HostTensor& t = ctx.constant_input(i, what);
  if (t.numel() != 1) ctx.not_supported(what, " with ", t.numel(), " values (per-tensor only)");
  return t;
}

// ---------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear

// Checks the scale (input 1) and zero point (input 2) against x's axis;
// the axis the kernel takes (0 for a single scale).
int64_t quant_axis(OpContext& ctx) {
  const int64_t n = shape_numel(ctx.shape(1));
  if (ctx.shape(1).size() > 1) ctx.error("scale must be a scalar or 1-D");
  if (ctx.has_input(2) && shape_numel(ctx.shape(2)) != n) ctx.error("zero point and scale differ in size");
  if (n == 1 && ctx.shape(1).size() <= 1) return 0;
  const int64_t axis = ctx.axis(ctx.attr_int("axis", 1), ctx.rank(0));
  if (ctx.shape(0)[static_cast<size_t>(axis)] != n) {
    ctx.error("scale has ", n, " values, the input's axis ", axis, " has ", ctx.shape(0)[static_cast<size_t>(axis)]);
  }
  return axis;
}

void infer_quantize(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.expect_dtype(1, {DType::FLOAT32});
  if (ctx.attr_int("saturate", 1) != 1) ctx.not_supported("saturate = 0");
  DType out = DType::UINT8;
  if (ctx.has_input(2)) {
    ctx.expect_dtype(2, {DType::UINT8, DType::INT8});
    out = ctx.dtype(2);
  }
  quant_axis(ctx);
  ctx.set_output(0, out, ctx.shape(0));
}

void infer_dequantize(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8, DType::INT32});
  ctx.expect_dtype(1, {DType::FLOAT32});
  if (ctx.has_input(2) && ctx.dtype(2) != ctx.dtype(0)) ctx.error("zero point differs from the input's dtype");
  quant_axis(ctx);
  ctx.set_output(0, DType::FLOAT32, ctx.shape(0));
}

void lower_quantize(OpContext& ctx, LoweringContext& l) {
  std::vector<int> inputs = {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))};
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  l.kernel(ctx.node().op_type, inputs, {l.tensor(ctx.output_id(0))}, int_params({quant_axis(ctx)}));
}

// DynamicQuantizeLinear: x (float32) -> y (uint8), y_scale, y_zero_point.
void infer_dynamic_quantize(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.set_output(0, DType::UINT8, ctx.shape(0));
  if (ctx.has_output(1)) ctx.set_output(1, DType::FLOAT32, {});
  if (ctx.has_output(2)) ctx.set_output(2, DType::UINT8, {});
}

void lower_dynamic_quantize(OpContext& ctx, LoweringContext& l) {
  std::vector<int> outputs = {l.tensor(ctx.output_id(0))};
  outputs.push_back(ctx.has_output(1) ? l.tensor(ctx.output_id(1))
                                      : l.temp(ctx.node().name + "/scale", DType::FLOAT32, {}));
  outputs.push_back(ctx.has_output(2) ? l.tensor(ctx.output_id(2))
                                      : l.temp(ctx.node().name + "/zero_point", DType::UINT8, {}));
  l.kernel("DynamicQuantizeLinear", {l.tensor(ctx.input_id(0))}, outputs);
}

// ---------------------------------------------------------------------------
// Shared by the int8 linear ops

// The output clamp the QDQ pass (passes/qdq.h) moved from a Relu or Clip
// into the node: attributes kiln_y_min / kiln_y_max, in the output's domain.
void apply_clamp(OpContext& ctx, int32_t* y_min, int32_t* y_max) {
  if (ctx.has_attr("kiln_y_min"))
    *y_min = static_cast<int32_t>(std::max<int64_t>(*y_min, ctx.attr_int("kiln_y_min", 0)));
  if (ctx.has_attr("kiln_y_max"))
    *y_max = static_cast<int32_t>(std::min<int64_t>(*y_max, ctx.attr_int("kiln_y_max", 0)));
  if (*y_min > *y_max) ctx.error("kiln_y_min is above kiln_y_max");
}
void apply_clamp(OpContext& ctx, Int8Linear* q) { apply_clamp(ctx, &q->y_min, &q->y_max); }

std::vector<int64_t> spatial_dims(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

// Conv geometry of inputs x (ix) and w (iw): the output shape [N, M, ...].
std::vector<int64_t> conv_output(OpContext& ctx, size_t ix, size_t iw, Spatial* out_spatial) {
  const auto& x = ctx.shape(ix);
  const auto& w = ctx.shape(iw);
  if (x.size() != 3 && x.size() != 4) ctx.not_supported(x.size() - 2, "-D convolution");
  if (w.size() != x.size()) ctx.error("weight rank ", w.size(), " differs from input rank ", x.size());
  const int64_t group = ctx.attr_int("group", 1);
  if (group <= 0 || x[1] % group != 0 || w[0] % group != 0) ctx.error("group ", group, " does not divide the channels");
  if (w[1] * group != x[1])
    ctx.error("weight ", shape_str(w), " expects ", w[1] * group, " input channels, input has ", x[1]);
  const Spatial s = resolve_spatial(ctx, spatial_dims(x), ctx.attr_ints("kernel_shape", spatial_dims(w)),
                                    /*allow_ceil=*/false, /*allow_dilations=*/true);
  if (spatial_dims(w) != s.kernel) ctx.error("kernel_shape does not match the weight");
  if (out_spatial != nullptr) *out_spatial = s;
  std::vector<int64_t> out = {x[0], w[0]};
  out.insert(out.end(), s.out.begin(), s.out.end());
  return out;
}

// Whether a convolution's weights go to ConvInt8 in channel quads by tap
// (its weight order 1: row [C/4][kH * kW][4] instead of ONNX's [C][kH][kW]):
// a window of more than one tap and whole quads of input channels a group.
// That is the direct convolution's step order (x86's qgemm_conv_direct
// reads it as it is, group by group, instead of reordering every run);
// the im2col packer enumerates its rows the same way on every path.
bool quad_tap_weights(const std::vector<int64_t>& w_shape) {
  int64_t taps = 1;
  for (size_t d = 2; d < w_shape.size(); ++d) taps *= w_shape[d];
  return taps > 1 && w_shape[1] % 4 == 0;
}

// Emits ConvInt8 for x (input ix; the weights' shape from input iw) and
// the quantized constants in q.
void lower_conv_int8(OpContext& ctx, LoweringContext& l, size_t ix, size_t iw, const Int8Linear& q) {
  Spatial s;
  conv_output(ctx, ix, iw, &s);
  const Int8Operands ops = int8_operands(ctx, l, q);
  std::vector<int> inputs = {l.tensor(ctx.input_id(ix))};
  inputs.insert(inputs.end(), ops.inputs.begin(), ops.inputs.end());
  const auto k2 = s.kernel2(), s2 = s.strides2(), d2 = s.dilations2(), p4 = s.pads4();
  const int64_t columns = shape_numel(spatial_dims(ctx.output(0).shape));
  // A depthwise convolution runs directly over its padded plane (and, with
  // stride 2 along rows, the plane's even and odd columns) in the scratch.
  int64_t direct = 0;
  const auto& xs = ctx.shape(ix);
  const int64_t group = ctx.attr_int("group", 1);
  if (group == xs[1] && q.m == group) {
    const int64_t ph = (xs.size() == 4 ? xs[2] : 1) + p4[0] + p4[2], pw = xs.back() + p4[1] + p4[3];
    direct = ph * pw + (s2[1] == 2 ? 2 * ph * ((pw + 1) / 2) : 0);
  } else if (l.options().packing_scratch && k2[0] * k2[1] > 1 &&
             kernels::qgemm_conv_direct_pays(xs[1] / group, xs.size() == 4 ? xs[2] : 1, xs.back(), k2[0], k2[1], s2[0],
                                             s2[1], d2[0], d2[1], p4[0], p4[1], p4[2], p4[3])) {
    // x86 runs the convolution group by group without im2col
    // (kernels::qgemm_conv_direct): a group's interleaved input and a
    // tile's weights, where that outgrows im2col's panels (deep layers on
    // small planes); grouped, that once a thread (whole groups each).
    direct =
        std::max<int64_t>(0, kernels::qgemm_conv_direct_bytes(xs[1] / group, xs.size() == 4 ? xs[2] : 1, xs.back(),
                                                              k2[0], k2[1], s2[0], s2[1], p4[0], p4[1], p4[2], p4[3])) *
        std::min(kernels::gemm_group_scratch_blocks(group), l.options().thread_blocks);
  }
  l.kernel("ConvInt8", inputs, {l.tensor(ctx.output_id(0))},
           int_params({ctx.attr_int("group", 1), k2[0], k2[1], s2[0], s2[1], d2[0], d2[1], p4[0], p4[1], p4[2], p4[3],
                       ops.x_zp_u8, q.y_zp, q.y_min, q.y_max, quad_tap_weights(ctx.shape(iw)) ? 1 : 0,
                       ops.w_narrow ? 1 : 0}),
           int8_scratch(ctx, l, ops, q.k, columns, direct));
}

// Conv weights [M, C/group, kH, kW] as m x k rows, each in channel quads
// by tap where quad_tap_weights says so: k index (q * taps + t) * 4 + j
// holds channel 4 q + j's tap t.
void conv_weights(OpContext& ctx, const HostTensor& w, Int8Linear* q) {
  q->m = w.shape[0];
  q->k = w.numel() / q->m;
  q->w_unsigned = w.dtype == DType::UINT8;
  q->w.resize(static_cast<size_t>(w.numel()));
  const bool quads = quad_tap_weights(w.shape);
  const int64_t taps = q->k / w.shape[1];
  for (int64_t i = 0; i < w.numel(); ++i) {
    int64_t at = i;
    if (quads) {
      const int64_t row = i / q->k, c = i % q->k / taps, t = i % taps;
      at = row * q->k + ((c / 4 * taps + t) * 4 + c % 4);
    }
    q->w[static_cast<size_t>(at)] = static_cast<int32_t>(w.int_at(i));
  }
}

// ---------------------------------------------------------------------------
// QLinearConv: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
// y_zero_point, B (int32, optional).

void infer_qlinear_conv(OpContext& ctx) {
  ctx.expect_inputs(8, 9);
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8});
  ctx.expect_dtype(3, {DType::UINT8, DType::INT8});
  for (size_t i : {1, 4, 6}) ctx.expect_dtype(i, {DType::FLOAT32});
  ctx.expect_dtype(7, {DType::UINT8, DType::INT8});
  if (ctx.dtype(2) != ctx.dtype(0) || ctx.dtype(5) != ctx.dtype(3))
    ctx.error("zero points differ from their tensors' dtypes");
  if (ctx.has_input(8)) ctx.expect_dtype(8, {DType::INT32});
  ctx.set_output(0, ctx.dtype(7), conv_output(ctx, 0, 3, nullptr));
}

void lower_qlinear_conv(OpContext& ctx, LoweringContext& l) {
  Int8Linear q;
  conv_weights(ctx, ctx.constant_input(3, "w"), &q);
  q.w_zp = ints_of(ctx, ctx.constant_input(5, "w_zero_point"), q.m, "w_zero_point");
  q.x_signed = ctx.dtype(0) == DType::INT8;
  q.x_zp = static_cast<int32_t>(scalar_input(ctx, 2, "x_zero_point").int_at(0));
  if (ctx.has_input(8)) {
    const HostTensor& b = ctx.constant_input(8, "B");
    if (b.numel() != q.m) ctx.error("B has ", b.numel(), " values for ", q.m, " channels");
    q.bias = b.to_int64s();
  }
  const float xs = static_cast<float>(scalar_input(ctx, 1, "x_scale").float_at(0));
  const float ys = static_cast<float>(scalar_input(ctx, 6, "y_scale").float_at(0));
  for (double ws : floats_of(ctx, ctx.constant_input(4, "w_scale"), q.m, "w_scale")) {
    q.real_multiplier.push_back(static_cast<double>(xs * static_cast<float>(ws) / ys));
  }
  const DType y = ctx.output(0).dtype;
  q.y_zp = static_cast<int32_t>(scalar_input(ctx, 7, "y_zero_point").int_at(0));
  q.y_min = low_of(y);
  q.y_max = low_of(y) + 255;
  apply_clamp(ctx, &q);
  lower_conv_int8(ctx, l, 0, 3, q);
}

// ConvInteger: x, w, x_zero_point, w_zero_point (optional) -> int32.
void infer_conv_integer(OpContext& ctx) {
  ctx.expect_inputs(2, 4);
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8});
  ctx.expect_dtype(1, {DType::UINT8, DType::INT8});
  if (ctx.has_input(2) && ctx.dtype(2) != ctx.dtype(0)) ctx.error("x_zero_point differs from x's dtype");
  if (ctx.has_input(3) && ctx.dtype(3) != ctx.dtype(1)) ctx.error("w_zero_point differs from w's dtype");
  ctx.set_output(0, DType::INT32, conv_output(ctx, 0, 1, nullptr));
}

void lower_conv_integer(OpContext& ctx, LoweringContext& l) {
  Int8Linear q;
  conv_weights(ctx, ctx.constant_input(1, "w"), &q);
  q.w_zp = ctx.has_input(3) ? ints_of(ctx, ctx.constant_input(3, "w_zero_point"), q.m, "w_zero_point")
                            : std::vector<int32_t>(static_cast<size_t>(q.m), 0);
  q.x_signed = ctx.dtype(0) == DType::INT8;
  q.x_zp = ctx.has_input(2) ? static_cast<int32_t>(scalar_input(ctx, 2, "x_zero_point").int_at(0)) : 0;
  lower_conv_int8(ctx, l, 0, 1, q);
}

// ---------------------------------------------------------------------------
// QLinearMatMul: a, a_scale, a_zero_point, b, b_scale, b_zero_point,
// y_scale, y_zero_point (and kiln's bias, passes/qdq.h). MatMulInteger: a, b, a_zero_point, b_zero_point.
// B is a constant [K, N] (every row of A meets it) or [..., K, N] with A's
// batch dims (one matrix per batch).

std::vector<int64_t> matmul_output(OpContext& ctx, size_t ia, size_t ib) {
  const auto& a = ctx.shape(ia);
  const auto& b = ctx.shape(ib);
  if (a.empty() || b.size() < 2)
    ctx.not_supported("A of rank ", a.size(), " and B of rank ", b.size(), " (B must be a matrix or a batch of them)");
  if (a.back() != b[b.size() - 2]) ctx.error("inner dimensions differ: ", shape_str(a), " x ", shape_str(b));
  if (b.size() > 2 && (a.size() != b.size() || !std::equal(a.begin(), a.end() - 2, b.begin()))) {
    ctx.not_supported("batched B ", shape_str(b), " with A ", shape_str(a), " (batch dims must be equal)");
  }
  std::vector<int64_t> out = a;
  out.back() = b.back();
  return out;
}

// B's matrices transposed into rows of weights: channel c of set s is
// column c of matrix s.
void matmul_weights(const HostTensor& b, Int8Linear* q) {
  const int64_t k = b.shape[b.shape.size() - 2], n = b.shape.back();
  q->sets = b.numel() / (k * n);
  q->m = n;
  q->k = k;
  q->w_unsigned = b.dtype == DType::UINT8;
  q->w.resize(static_cast<size_t>(b.numel()));
  for (int64_t s = 0; s < q->sets; ++s) {
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t c = 0; c < n; ++c) {
        q->w[static_cast<size_t>((s * n + c) * k + kk)] = static_cast<int32_t>(b.int_at((s * k + kk) * n + c));
      }
    }
  }
}

void lower_gemm_int8(OpContext& ctx, LoweringContext& l, size_t ia, const Int8Linear& q) {
  const Int8Operands ops = int8_operands(ctx, l, q);
  std::vector<int> inputs = {l.tensor(ctx.input_id(ia))};
  inputs.insert(inputs.end(), ops.inputs.begin(), ops.inputs.end());
  const int64_t rows = shape_numel(ctx.shape(ia)) / q.k / q.sets;
  l.kernel("GemmInt8", inputs, {l.tensor(ctx.output_id(0))},
           int_params({q.sets, ops.x_zp_u8, q.y_zp, q.y_min, q.y_max, ops.w_narrow ? 1 : 0}),
           int8_scratch(ctx, l, ops, q.k, rows, 0, rows == 1));
}

void infer_qlinear_matmul(OpContext& ctx) {
  ctx.expect_inputs(8, 9);
  if (ctx.has_input(8)) ctx.expect_dtype(8, {DType::INT32});
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8});
  ctx.expect_dtype(3, {DType::UINT8, DType::INT8});
  for (size_t i : {1, 4, 6}) ctx.expect_dtype(i, {DType::FLOAT32});
  ctx.expect_dtype(7, {DType::UINT8, DType::INT8});
  if (ctx.dtype(2) != ctx.dtype(0) || ctx.dtype(5) != ctx.dtype(3))
    ctx.error("zero points differ from their tensors' dtypes");
  ctx.set_output(0, ctx.dtype(7), matmul_output(ctx, 0, 3));
}

// QLinearMatMul of two activations (B not a constant; the QDQ pass writes
// it for attention's MatMuls): MatMulInt8, per-tensor scales and zero
// points, the same leading dims (kernels/cpu/src/qlinear.cc).
void lower_matmul_int8_activations(OpContext& ctx, LoweringContext& l) {
  using namespace kiln::kernels;
  const std::vector<int64_t>&a = ctx.shape(0), &b = ctx.shape(3);
  if (a.size() < 2 || a.size() != b.size() || !std::equal(a.begin(), a.end() - 2, b.begin())) {
    ctx.not_supported("int8 MatMul of two activations with broadcast leading dims");
  }
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (k > kQGemmMatMulMaxK) {
    ctx.not_supported("int8 MatMul of two activations over ", k, " values (at most ", kQGemmMatMulMaxK, ")");
  }
  const double real = static_cast<double>(scalar_input(ctx, 1, "a_scale").float_at(0)) *
                      static_cast<double>(scalar_input(ctx, 4, "b_scale").float_at(0)) /
                      static_cast<double>(scalar_input(ctx, 6, "y_scale").float_at(0));
  int32_t multiplier = 0, shift = 1;
  if (!qgemm_quantize_multiplier(real, &multiplier, &shift)) {
    ctx.not_supported("requantization scale ", real, " (must be in (0, 2^30))");
  }
  Int8Linear q;
  const DType y = ctx.output(0).dtype;
  q.y_min = low_of(y);
  q.y_max = low_of(y) + 255;
  apply_clamp(ctx, &q);
  const auto zp = [&](size_t i) { return ctx.has_input(i) ? scalar_input(ctx, i, "zero point").int_at(0) : 0; };
  l.kernel("MatMulInt8", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(3))}, {l.tensor(ctx.output_id(0))},
           int_params({zp(2), zp(5), zp(7), q.y_min, q.y_max, multiplier, shift}),
           {l.temp(ctx.node().name + "/int8_matmul", DType::UINT8, {qgemm_matmul_scratch_bytes(m, n, k)})});
}

void lower_qlinear_matmul(OpContext& ctx, LoweringContext& l) {
  if (!ctx.input(3).is_constant()) {
    lower_matmul_int8_activations(ctx, l);
    return;
  }
  Int8Linear q;
  matmul_weights(ctx.constant_input(3, "b"), &q);
  q.w_zp = ints_of(ctx, ctx.constant_input(5, "b_zero_point"), q.m, "b_zero_point");
  q.x_signed = ctx.dtype(0) == DType::INT8;
  q.x_zp = static_cast<int32_t>(scalar_input(ctx, 2, "a_zero_point").int_at(0));
  const float as = static_cast<float>(scalar_input(ctx, 1, "a_scale").float_at(0));
  const float ys = static_cast<float>(scalar_input(ctx, 6, "y_scale").float_at(0));
  for (double bs : floats_of(ctx, ctx.constant_input(4, "b_scale"), q.m, "b_scale")) {
    q.real_multiplier.push_back(static_cast<double>(as * static_cast<float>(bs) / ys));
  }
  const DType y = ctx.output(0).dtype;
  q.y_zp = static_cast<int32_t>(scalar_input(ctx, 7, "y_zero_point").int_at(0));
  q.y_min = low_of(y);
  q.y_max = low_of(y) + 255;
  apply_clamp(ctx, &q);
  if (ctx.has_input(8)) {
    // kiln's own bias input (a Gemm folded by passes/qdq): int32, one per
    // column, at scale a_scale * b_scale.
    const HostTensor& b = ctx.constant_input(8, "bias");
    if (b.numel() != q.m) ctx.error("bias has ", b.numel(), " values for ", q.m, " columns");
    for (int64_t s = 0; s < q.sets; ++s) {
      for (int64_t c = 0; c < q.m; ++c) q.bias.push_back(b.int_at(c));
    }
  }
  lower_gemm_int8(ctx, l, 0, q);
}

void infer_matmul_integer(OpContext& ctx) {
  ctx.expect_inputs(2, 4);
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8});
  ctx.expect_dtype(1, {DType::UINT8, DType::INT8});
  if (ctx.has_input(2) && ctx.dtype(2) != ctx.dtype(0)) ctx.error("a_zero_point differs from A's dtype");
  if (ctx.has_input(3) && ctx.dtype(3) != ctx.dtype(1)) ctx.error("b_zero_point differs from B's dtype");
  ctx.set_output(0, DType::INT32, matmul_output(ctx, 0, 1));
}

void lower_matmul_integer(OpContext& ctx, LoweringContext& l) {
  Int8Linear q;
  matmul_weights(ctx.constant_input(1, "B"), &q);
  q.w_zp = ctx.has_input(3) ? ints_of(ctx, ctx.constant_input(3, "b_zero_point"), q.m, "b_zero_point")
                            : std::vector<int32_t>(static_cast<size_t>(q.m), 0);
  q.x_signed = ctx.dtype(0) == DType::INT8;
  q.x_zp = ctx.has_input(2) ? static_cast<int32_t>(scalar_input(ctx, 2, "a_zero_point").int_at(0)) : 0;
  lower_gemm_int8(ctx, l, 0, q);
}

// ---------------------------------------------------------------------------
// QLinearAveragePool, QLinearGlobalAveragePool, QLinearAdd, QLinearMul
// (domain com.microsoft, as ONNX Runtime's contrib ops; the QDQ pass
// writes them for DQ -> AveragePool | GlobalAveragePool | Add | Mul -> Q):
// lowered onto AvgPoolInt8, AddInt8 and MulInt8 (kernels/cpu/src/
// qlinear.cc), their fixed-point multipliers computed here.
// Pools: X, x_scale, x_zero_point, y_scale, y_zero_point (NCHW only).
// Add, Mul: A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
// C_zero_point.

int64_t zero_point_of(OpContext& ctx, size_t i) {
  return ctx.has_input(i) ? scalar_input(ctx, i, "zero point").int_at(0) : 0;
}

void expect_q_pool(OpContext& ctx) {
  ctx.expect_inputs(4, 5);
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8});
  for (size_t i : {1, 3}) ctx.expect_dtype(i, {DType::FLOAT32});
  if (ctx.has_input(2) && ctx.dtype(2) != ctx.dtype(0)) ctx.error("x_zero_point differs from X's dtype");
  if (ctx.has_input(4) && ctx.dtype(4) != ctx.dtype(0)) ctx.error("y_zero_point differs from X's dtype");
  if (ctx.attr_int("channels_last", 0) != 0) ctx.not_supported("channels_last");
  const auto& x = ctx.shape(0);
  if (x.size() != 3 && x.size() != 4) ctx.not_supported(static_cast<int64_t>(x.size()) - 2, "-D pooling");
}

Spatial q_pool_spatial(OpContext& ctx) {
  const auto& x = ctx.shape(0);
  const std::vector<int64_t> in(x.begin() + 2, x.end());
  if (ctx.node().op_type == "QLinearGlobalAveragePool") {
    Spatial s;
    s.kernel = in;
    s.strides = std::vector<int64_t>(in.size(), 1);
    s.dilations = s.strides;
    s.pads_begin = s.pads_end = std::vector<int64_t>(in.size(), 0);
    s.out = s.strides;
    return s;
  }
  if (!ctx.has_attr("kernel_shape")) ctx.error("kernel_shape is required");
  const Spatial s =
      resolve_spatial(ctx, in, ctx.attr_ints("kernel_shape"), /*allow_ceil=*/true, /*allow_dilations=*/false);
  for (size_t i = 0; i < s.kernel.size(); ++i) {
    if (s.pads_begin[i] >= s.kernel[i] || s.pads_end[i] >= s.kernel[i])
      ctx.not_supported("pads as large as the window");
  }
  return s;
}

void infer_q_pool(OpContext& ctx) {
  expect_q_pool(ctx);
  const Spatial s = q_pool_spatial(ctx);
  std::vector<int64_t> out = {ctx.shape(0)[0], ctx.shape(0)[1]};
  out.insert(out.end(), s.out.begin(), s.out.end());
  ctx.set_output(0, ctx.dtype(0), out);
}

void lower_q_pool(OpContext& ctx, LoweringContext& l) {
  using namespace kiln::kernels;
  const Spatial s = q_pool_spatial(ctx);
  const auto k2 = s.kernel2(), s2 = s.strides2(), p4 = s.pads4();
  const auto& x = ctx.shape(0);
  const int64_t h = x.size() == 4 ? x[2] : 1, w = x.back();
  const auto& y = ctx.output(0).shape;
  const int64_t oh = y.size() == 4 ? y[2] : 1, ow = y.back();
  const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  // One multiplier when every window counts kh * kw taps, else one per
  // count d = 1 .. kh * kw.
  const int64_t lo_h = include_pad ? -p4[0] : 0, hi_h = include_pad ? h + p4[2] : h;
  const int64_t lo_w = include_pad ? -p4[1] : 0, hi_w = include_pad ? w + p4[3] : w;
  const bool full = -p4[0] >= lo_h && (oh - 1) * s2[0] - p4[0] + k2[0] <= hi_h && -p4[1] >= lo_w &&
                    (ow - 1) * s2[1] - p4[1] + k2[1] <= hi_w;
  const int64_t taps = int64_t{k2[0]} * k2[1];
  if (taps > (int64_t{1} << 23)) ctx.not_supported("a window of ", taps, " taps");
  const int64_t count = full ? 1 : taps;
  const double xs = static_cast<double>(scalar_input(ctx, 1, "x_scale").float_at(0));
  const double ys = static_cast<double>(scalar_input(ctx, 3, "y_scale").float_at(0));
  HostTensor multiplier(DType::INT32, {count}), shift(DType::INT32, {count});
  for (int64_t i = 0; i < count; ++i) {
    const double d = full ? static_cast<double>(taps) : static_cast<double>(i + 1);
    const double real = xs / (ys * d);
    if (!qgemm_quantize_multiplier(real, &multiplier.data<int32_t>()[i], &shift.data<int32_t>()[i])) {
      ctx.not_supported("requantization scale ", real, " (must be in (0, 2^30))");
    }
  }
  const DType dtype = ctx.dtype(0);
  const std::string& stem = ctx.node().name;
  l.kernel("AvgPoolInt8",
           {l.tensor(ctx.input_id(0)), l.constant(stem + "/int8_multiplier", std::move(multiplier)),
            l.constant(stem + "/int8_shift", std::move(shift))},
           {l.tensor(ctx.output_id(0))},
           int_params({k2[0], k2[1], s2[0], s2[1], p4[0], p4[1], p4[2], p4[3], include_pad ? 1 : 0,
                       zero_point_of(ctx, 2), zero_point_of(ctx, 4), low_of(dtype), low_of(dtype) + 255}));
}

void infer_q_binary(OpContext& ctx) {
  ctx.expect_inputs(7, 8);
  for (size_t i : {0, 3}) ctx.expect_dtype(i, {DType::UINT8, DType::INT8});
  for (size_t i : {1, 4, 6}) ctx.expect_dtype(i, {DType::FLOAT32});
  if ((ctx.has_input(2) && ctx.dtype(2) != ctx.dtype(0)) || (ctx.has_input(5) && ctx.dtype(5) != ctx.dtype(3))) {
    ctx.error("zero points differ from their tensors' dtypes");
  }
  if (ctx.has_input(7)) ctx.expect_dtype(7, {DType::UINT8, DType::INT8});
  // ONNX Runtime's C has A's type.
  const DType y = ctx.has_input(7) ? ctx.dtype(7) : ctx.dtype(0);
  ctx.set_output(0, y, broadcast_shapes(ctx, ctx.shape(0), ctx.shape(3)));
}

void lower_q_binary(OpContext& ctx, LoweringContext& l) {
  using namespace kiln::kernels;
  const double as = static_cast<double>(scalar_input(ctx, 1, "A_scale").float_at(0));
  const double bs = static_cast<double>(scalar_input(ctx, 4, "B_scale").float_at(0));
  const double ys = static_cast<double>(scalar_input(ctx, 6, "C_scale").float_at(0));
  const DType y = ctx.output(0).dtype;
  std::vector<int64_t> ints = {zero_point_of(ctx, 2), zero_point_of(ctx, 5), zero_point_of(ctx, 7), low_of(y),
                               low_of(y) + 255};
  int64_t lo = low_of(y), hi = low_of(y) + 255;
  if (ctx.has_attr("kiln_y_min")) lo = std::max(lo, ctx.attr_int("kiln_y_min", 0));
  if (ctx.has_attr("kiln_y_max")) hi = std::min(hi, ctx.attr_int("kiln_y_max", 0));
  if (lo > hi) ctx.error("kiln_y_min is above kiln_y_max");
  ints[3] = lo;
  ints[4] = hi;
  const bool mul = ctx.node().op_type == "QLinearMul";
  int32_t m = 0, s = 1;
  if (mul) {
    const double real = as * bs / ys;
    if (!qgemm_quantize_multiplier(real, &m, &s))
      ctx.not_supported("requantization scale ", real, " (must be in (0, 2^30))");
    ints.push_back(m);
    ints.push_back(s);
  } else {
    // Both ratios on the shift of the larger (its multiplier in [2^30, 2^31)).
    const double ra = as / ys, rb = bs / ys;
    if (!qgemm_quantize_multiplier(std::max(ra, rb), &m, &s)) {
      ctx.not_supported("requantization scale ", std::max(ra, rb), " (must be in (0, 2^30))");
    }
    const double unit = std::ldexp(1.0, s);
    ints.push_back(m == 0 ? 0 : std::llround(ra * unit));
    ints.push_back(m == 0 ? 0 : std::llround(rb * unit));
    ints.push_back(s);
    if (ints[5] > INT32_MAX || ints[6] > INT32_MAX) ints[5] = ints[6] = 0;  // unreachable: the larger is m
  }
  l.kernel(mul ? "MulInt8" : "AddInt8", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(3))},
           {l.tensor(ctx.output_id(0))}, int_params(std::move(ints)));
}

// ---------------------------------------------------------------------------
// Lookup (domain kiln; the QDQ pass writes it for an element-wise chain
// between DequantizeLinears of one tensor and a QuantizeLinear): X (uint8
// or int8), Table (256 constant values of Y's dtype); Y = Table[X], X's
// byte as the index. Lowered onto LookupInt8.

void infer_lookup(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8});
  ctx.expect_dtype(1, {DType::UINT8, DType::INT8});
  if (shape_numel(ctx.shape(1)) != 256) ctx.error("the table has ", shape_numel(ctx.shape(1)), " values, not 256");
  ctx.set_output(0, ctx.dtype(1), ctx.shape(0));
}

void lower_lookup(OpContext& ctx, LoweringContext& l) {
  ctx.constant_input(1, "Table");
  l.kernel("LookupInt8", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))});
}

// ---------------------------------------------------------------------------
// ChannelAffine (domain kiln; the QDQ pass writes it for DQ ->
// BatchNormalization -> [Relu / Clip] -> Q): X (uint8 or int8, channels on
// axis 1), A and B (float32 [C]), X's and Y's zero points (scalars, their
// dtypes); attributes kiln_y_min / kiln_y_max (Y's domain). Y =
// clamp(round_half_even(fma(X - x_zp, A[c], B[c])) + y_zp, y_min, y_max).
// Lowered onto ChannelAffineInt8.

void infer_channel_affine(OpContext& ctx) {
  ctx.expect_inputs(5, 5);
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8});
  ctx.expect_dtype(1, {DType::FLOAT32});
  ctx.expect_dtype(2, {DType::FLOAT32});
  ctx.expect_dtype(4, {DType::UINT8, DType::INT8});
  if (ctx.dtype(3) != ctx.dtype(0)) ctx.error("x_zero_point differs from X's dtype");
  if (ctx.rank(0) < 2) ctx.error("X needs a channel axis (rank 2 or more)");
  const int64_t channels = ctx.shape(0)[1];
  if (shape_numel(ctx.shape(1)) != channels || shape_numel(ctx.shape(2)) != channels) {
    ctx.error("A and B need one value per channel (", channels, ")");
  }
  ctx.set_output(0, ctx.dtype(4), ctx.shape(0));
}

void lower_channel_affine(OpContext& ctx, LoweringContext& l) {
  ctx.constant_input(1, "A");
  ctx.constant_input(2, "B");
  const DType x = ctx.dtype(0), y = ctx.output(0).dtype;
  const int64_t x_zp = scalar_input(ctx, 3, "x_zero_point").int_at(0) + (x == DType::INT8 ? 128 : 0);
  const int64_t y_zp = scalar_input(ctx, 4, "y_zero_point").int_at(0);
  int32_t y_min = low_of(y), y_max = low_of(y) + 255;
  apply_clamp(ctx, &y_min, &y_max);
  l.kernel("ChannelAffineInt8", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1)), l.tensor(ctx.input_id(2))},
           {l.tensor(ctx.output_id(0))}, int_params({x_zp, y_zp, y_min, y_max}));
}

// ---------------------------------------------------------------------------
// QLinearSoftmax (domain com.microsoft, as ONNX Runtime names it; the QDQ
// pass writes it for DQ -> Softmax -> Q over the last axis): X, X_scale,
// x_zero_point, Y_scale, y_zero_point (scalars), attribute axis (the last
// only). Lowered onto SoftmaxInt8 with a table of exp(-x_scale d) for the
// 256 distances d of a byte below its row's largest (the softmax does not
// depend on x_zero_point).

void infer_q_softmax(OpContext& ctx) {
  ctx.expect_inputs(5, 5);
  ctx.expect_dtype(0, {DType::UINT8, DType::INT8});
  ctx.expect_dtype(1, {DType::FLOAT32});
  ctx.expect_dtype(3, {DType::FLOAT32});
  ctx.expect_dtype(4, {DType::UINT8, DType::INT8});
  if (ctx.dtype(2) != ctx.dtype(0)) ctx.error("x_zero_point differs from X's dtype");
  const int64_t rank = ctx.rank(0);
  if (rank < 1) ctx.error("X must have at least one axis");
  const int64_t axis = ctx.attr_int("axis", -1);
  if ((axis < 0 ? axis + rank : axis) != rank - 1)
    ctx.not_supported("QLinearSoftmax over axis ", axis, " (only the last)");
  ctx.set_output(0, ctx.dtype(4), ctx.shape(0));
}

void lower_q_softmax(OpContext& ctx, LoweringContext& l) {
  const double xs = scalar_input(ctx, 1, "x_scale").float_at(0), ys = scalar_input(ctx, 3, "y_scale").float_at(0);
  scalar_input(ctx, 2, "x_zero_point");
  if (!(xs > 0 && std::isfinite(xs) && ys > 0 && std::isfinite(ys))) ctx.error("scales must be positive and finite");
  HostTensor table(DType::FLOAT32, {257});
  for (int d = 0; d < 256; ++d) table.data<float>()[d] = static_cast<float>(std::exp(-xs * d));
  table.data<float>()[256] = static_cast<float>(ys);
  const int exps = l.constant(ctx.node().name + "/exp_table", std::move(table));
  const DType y = ctx.output(0).dtype;
  const int64_t y_zp = scalar_input(ctx, 4, "y_zero_point").int_at(0);
  l.kernel("SoftmaxInt8", {l.tensor(ctx.input_id(0)), exps}, {l.tensor(ctx.output_id(0))},
           int_params({y_zp, low_of(y), low_of(y) + 255}));
}

}  // namespace

Int8Operands int8_operands(OpContext& ctx, LoweringContext& l, const Int8Linear& q) {
  using namespace kiln::kernels;
  if (q.k > kQGemmMaxK) ctx.not_supported("int8 product over ", q.k, " values (at most ", kQGemmMaxK, ")");
  const int64_t kp = qgemm_kp(q.k);
  const std::string& stem = ctx.node().name;
  Int8Operands out;
  // The uint8 domain of the activations and the int8 domain of the weights.
  const int64_t x_zp = q.x_signed ? int64_t{q.x_zp} + 128 : q.x_zp;
  if (x_zp < 0 || x_zp > 255) ctx.error("activation zero point ", q.x_zp, " outside its dtype");
  out.x_zp_u8 = x_zp;
  const int32_t w_shift = q.w_unsigned ? 128 : 0;
  HostTensor weights(DType::INT8, {q.sets * q.m * kp});
  HostTensor bias(DType::INT32, {q.sets * q.m});
  HostTensor w_zp(DType::INT32, {q.m});
  for (int64_t c = 0; c < q.m; ++c) {
    w_zp.data<int32_t>()[c] = q.w_zp[static_cast<size_t>(c)] - w_shift;
    if (w_zp.data<int32_t>()[c] != 0) out.has_w_zp = true;
  }
  for (int64_t s = 0; s < q.sets; ++s) {
    for (int64_t c = 0; c < q.m; ++c) {
      const int64_t row = s * q.m + c;
      int64_t sum = 0;
      for (int64_t kk = 0; kk < q.k; ++kk) {
        const int32_t v = q.w[static_cast<size_t>(row * q.k + kk)] - w_shift;
        if (v < -128 || v > 127) ctx.error("weight ", v + w_shift, " outside its dtype");
        weights.data<int8_t>()[row * kp + kk] = static_cast<int8_t>(v);
        sum += v;
      }
      const int64_t folded = (q.bias.empty() ? 0 : q.bias[static_cast<size_t>(row)]) - x_zp * sum +
                             q.k * x_zp * int64_t{w_zp.data<int32_t>()[c]};
      if (folded < INT32_MIN || folded > INT32_MAX) ctx.not_supported("folded bias ", folded, " outside int32");
      bias.data<int32_t>()[row] = static_cast<int32_t>(folded);
    }
  }
  out.w_narrow = qgemm_weights_narrow(weights.data<int8_t>(), weights.numel());
  out.inputs.push_back(l.constant(stem + "/int8_weights", std::move(weights)));
  out.inputs.push_back(l.constant(stem + "/int8_bias", std::move(bias)));
  if (!q.real_multiplier.empty()) {
    HostTensor multiplier(DType::INT32, {q.m});
    HostTensor shift(DType::INT32, {q.m});
    for (int64_t c = 0; c < q.m; ++c) {
      if (!qgemm_quantize_multiplier(q.real_multiplier[static_cast<size_t>(c)], &multiplier.data<int32_t>()[c],
                                     &shift.data<int32_t>()[c])) {
        ctx.not_supported("requantization scale ", q.real_multiplier[static_cast<size_t>(c)], " of channel ", c,
                          " (must be in (0, 2^30))");
      }
    }
    out.inputs.push_back(l.constant(stem + "/int8_multiplier", std::move(multiplier)));
    out.inputs.push_back(l.constant(stem + "/int8_shift", std::move(shift)));
  } else if (out.has_w_zp) {
    out.inputs.push_back(-1);
    out.inputs.push_back(-1);
  }
  if (out.has_w_zp) out.inputs.push_back(l.constant(stem + "/int8_w_zero_point", std::move(w_zp)));
  return out;
}

std::vector<int> int8_scratch(OpContext& ctx, LoweringContext& l, const Int8Operands& ops, int64_t k, int64_t columns,
                              int64_t min_bytes, bool vector_only) {
  using namespace kiln::kernels;
  // A matrix-vector product (one row per weight matrix) reads its row and
  // the weight rows in place: no scratch at all.
  if (vector_only) return {};
  // The kernel packs and multiplies a block of columns at a time, as many
  // whole panels as the scratch holds (at least one): kInt8PackBytes of
  // them, or kInt8BlockBytes on microcontrollers (without --packing).
  const int64_t panel = qgemm_packed_x_bytes(k, kQGemmNr);
  const int64_t block = l.options().packing_scratch ? kInt8PackBytes : kInt8BlockBytes;
  int64_t bytes = std::min(qgemm_packed_x_bytes(k, columns), std::max(panel, block / panel * panel));
  bytes = std::max(bytes, min_bytes);
  std::vector<int> scratch = {l.temp(ctx.node().name + "/int8_packed", DType::UINT8, {bytes})};
  if (ops.has_w_zp) scratch.push_back(l.temp(ctx.node().name + "/int8_column_sums", DType::INT32, {columns}));
  return scratch;
}

void add_quant_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "QuantizeLinear", .infer = infer_quantize, .lower = lower_quantize});
  // Not folded with the constants: passes/qdq needs DQ(weights) as a node;
  // it folds the constant ones it leaves itself.
  ops.push_back({.op_type = "DequantizeLinear", .infer = infer_dequantize, .lower = lower_quantize, .foldable = false});
  ops.push_back({.op_type = "DynamicQuantizeLinear", .infer = infer_dynamic_quantize, .lower = lower_dynamic_quantize});
  ops.push_back({.op_type = "QLinearConv", .infer = infer_qlinear_conv, .lower = lower_qlinear_conv});
  ops.push_back({.op_type = "ConvInteger", .infer = infer_conv_integer, .lower = lower_conv_integer});
  ops.push_back({.op_type = "QLinearMatMul", .infer = infer_qlinear_matmul, .lower = lower_qlinear_matmul});
  ops.push_back({.op_type = "MatMulInteger", .infer = infer_matmul_integer, .lower = lower_matmul_integer});
  for (const char* op : {"QLinearAveragePool", "QLinearGlobalAveragePool"}) {
    ops.push_back({.op_type = op, .domain = "com.microsoft", .infer = infer_q_pool, .lower = lower_q_pool});
  }
  for (const char* op : {"QLinearAdd", "QLinearMul"}) {
    ops.push_back({.op_type = op, .domain = "com.microsoft", .infer = infer_q_binary, .lower = lower_q_binary});
  }
  ops.push_back(
      {.op_type = "QLinearSoftmax", .domain = "com.microsoft", .infer = infer_q_softmax, .lower = lower_q_softmax});
  ops.push_back({.op_type = "Lookup", .domain = "kiln", .infer = infer_lookup, .lower = lower_lookup});
  ops.push_back(
      {.op_type = "ChannelAffine", .domain = "kiln", .infer = infer_channel_affine, .lower = lower_channel_affine});
}

}  // namespace kiln::planner
