// Pooling ops: MaxPool, AveragePool (1-D, 2-D, 3-D), GlobalAveragePool,
// GlobalMaxPool, MaxUnpool. MaxPool over int8 or uint8 runs the float32 kernel between
// two Casts: every 8-bit value is exact in float32, and the maximum is one
// of them.
//
// 1-D and 2-D windows without MaxPool's Indices output run the Pool kernel
// (the hot path of CNNs, with its vector versions); 3-D windows and MaxPool
// with Indices run PoolNd (kernels/cpu/src/pool.cc, GenericParams
// written by pool_nd_params below).

#include "ops/op_registry.h"
#include "ops/spatial.h"

namespace kiln::planner {
namespace {

Spatial pool_spatial(OpContext& ctx) {
  const auto& x = ctx.shape(0);
  if (!ctx.has_attr("kernel_shape")) ctx.error("kernel_shape is required");
  const bool is_max = ctx.node().op_type == "MaxPool";
  return resolve_spatial(ctx, std::vector<int64_t>(x.begin() + 2, x.end()), ctx.attr_ints("kernel_shape"),
                         /*allow_ceil=*/true, /*allow_dilations=*/is_max, /*max_axes=*/3);
}

bool is_8bit(DType t) { return t == DType::INT8 || t == DType::UINT8; }

void infer_pool(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  if (ctx.node().op_type == "MaxPool") {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::INT8, DType::UINT8});
  } else {
    ctx.expect_dtype(0, {DType::FLOAT32});
  }
  const auto& x = ctx.shape(0);
  if (x.size() < 3 || x.size() > 5)
    ctx.not_supported(static_cast<int64_t>(x.size()) - 2, "-D pooling (1-D to 3-D windows are supported)");
  const bool is_max = ctx.node().op_type == "MaxPool";
  if (ctx.num_outputs() > (is_max ? 2 : 1)) ctx.error("has ", ctx.num_outputs(), " outputs");
  const int64_t storage_order = ctx.attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) ctx.error("storage_order must be 0 or 1, is ", storage_order);
  const Spatial s = pool_spatial(ctx);
  for (size_t i = 0; i < s.kernel.size(); ++i) {
    if (s.pads_begin[i] >= (s.kernel[i] - 1) * s.dilations[i] + 1) ctx.not_supported("pads as large as the window");
  }
  std::vector<int64_t> out = {x[0], x[1]};
  out.insert(out.end(), s.out.begin(), s.out.end());
  ctx.set_output(0, ctx.dtype(0), out);
  if (ctx.has_output(1)) ctx.set_output(1, DType::INT64, out);
}

// PoolNd's GenericParams (pool.cc): [kind (0 max, 1 average),
// count_include_pad, storage_order], then per axis (depth, height, width;
// missing leading axes are 1 wide, unpadded) kernel, stride, dilation,
// pad_begin, pad_end.
fb::ParamsUnion pool_nd_params(OpContext& ctx, const Spatial& s) {
  std::vector<int64_t> ints = {ctx.node().op_type == "MaxPool" ? 0 : 1, ctx.attr_int("count_include_pad", 0) != 0,
                               ctx.attr_int("storage_order", 0)};
  const size_t n = s.kernel.size();
  for (size_t axis = 0; axis < 3; ++axis) {
    if (axis + n < 3) {
      ints.insert(ints.end(), {1, 1, 1, 0, 0});
      continue;
    }
    const size_t i = axis + n - 3;
    ints.insert(ints.end(), {s.kernel[i], s.strides[i], s.dilations[i], s.pads_begin[i], s.pads_end[i]});
  }
  return generic_params(std::move(ints), {});
}

void lower_pool(OpContext& ctx, LoweringContext& l) {
  const Spatial s = pool_spatial(ctx);
  const bool nd = s.kernel.size() == 3 || ctx.has_output(1);
  if (nd) {
    const int in = l.tensor(ctx.input_id(0));
    const int out = l.tensor(ctx.output_id(0));
    std::vector<int> outs = {out};
    if (ctx.has_output(1)) outs.push_back(l.tensor(ctx.output_id(1)));
    if (!is_8bit(ctx.dtype(0))) {
      l.kernel("PoolNd", {in}, outs, pool_nd_params(ctx, s));
      return;
    }
    const int wide_in = l.temp(ctx.node().name + "/float_in", DType::FLOAT32, ctx.shape(0));
    outs[0] = l.temp(ctx.node().name + "/float_out", DType::FLOAT32, ctx.output(0).shape);
    l.kernel("Cast", {in}, {wide_in});
    l.kernel("PoolNd", {wide_in}, outs, pool_nd_params(ctx, s));
    l.kernel("Cast", {outs[0]}, {out});
    return;
  }
  fb::PoolParamsT p;
  p.kind = ctx.node().op_type == "MaxPool" ? fb::PoolKind::MAXIMUM : fb::PoolKind::AVERAGE;
  p.kernel = s.kernel2();
  p.strides = s.strides2();
  p.dilations = s.dilations2();
  p.pads = s.pads4();
  p.count_include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  fb::ParamsUnion params;
  params.Set(std::move(p));
  int in = l.tensor(ctx.input_id(0));
  int out = l.tensor(ctx.output_id(0));
  if (is_8bit(ctx.dtype(0)) && ctx.node().op_type != "MaxPool") {
    // An 8-bit average through float (MaxPool pools the bytes as they are).
    const int wide_in = l.temp(ctx.node().name + "/float_in", DType::FLOAT32, ctx.shape(0));
    const int wide_out = l.temp(ctx.node().name + "/float_out", DType::FLOAT32, ctx.output(0).shape);
    l.kernel("Cast", {in}, {wide_in});
    l.kernel("Pool", {wide_in}, {wide_out}, std::move(params));
    l.kernel("Cast", {wide_out}, {out});
    return;
  }
  l.kernel("Pool", {in}, {out}, std::move(params));
}

void infer_global_pool(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32});
  std::vector<int64_t> out = ctx.shape(0);
  if (out.size() < 2) ctx.error("expects rank >= 2");
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  ctx.set_output(0, DType::FLOAT32, out);
}

void lower_global_pool(OpContext& ctx, LoweringContext& l) {
  l.kernel(ctx.node().op_type, {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))});
}

// MaxUnpool: the unpooled shape is, per spatial axis, (in - 1) * stride +
// kernel - pads; the indices count positions in it. The output is that
// shape or output_shape (a constant, the whole shape), values keeping their
// coordinates. The indices are data; the kernel (pool.cc) checks each.
std::vector<int64_t> max_unpool_shape(OpContext& ctx, bool apply_output_shape) {
  const auto& x = ctx.shape(0);
  const size_t n = x.size() - 2;
  if (!ctx.has_attr("kernel_shape")) ctx.error("kernel_shape is required");
  const auto kernel = ctx.attr_ints("kernel_shape");
  const auto strides = ctx.attr_ints("strides", std::vector<int64_t>(n, 1));
  const auto pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (kernel.size() != n || strides.size() != n || pads.size() != 2 * n) {
    ctx.error("kernel_shape, strides or pads do not have one entry per spatial axis (pads two)");
  }
  constexpr int64_t kLimit = int64_t{1} << 30;
  std::vector<int64_t> out = {x[0], x[1]};
  for (size_t i = 0; i < n; ++i) {
    if (kernel[i] <= 0 || strides[i] <= 0 || kernel[i] > kLimit || strides[i] > kLimit) {
      ctx.error("kernel_shape and strides must be in [1, 2^30]");
    }
    if (pads[i] < 0 || pads[i + n] < 0 || pads[i] > kLimit || pads[i + n] > kLimit) {
      ctx.error("pads must be in [0, 2^30]");
    }
    if (x[i + 2] > kLimit) ctx.error("spatial axis ", i, " has more than 2^30 elements");
    out.push_back((x[i + 2] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n]);
    if (out.back() <= 0) ctx.error("output size ", out.back(), " on spatial axis ", i, " is not positive");
  }
  if (ctx.has_input(2) && apply_output_shape) {
    const HostTensor& t = ctx.constant_input(2, "output_shape");
    if (t.numel() != static_cast<int64_t>(x.size())) {
      ctx.error("output_shape has ", t.numel(), " entries for an input of rank ", x.size());
    }
    for (size_t d = 0; d < x.size(); ++d) {
      const int64_t v = t.int_at(static_cast<int64_t>(d));
      if (d < 2 && v != x[d]) ctx.error("output_shape changes N or C (", v, " for ", x[d], ")");
      if (v <= 0 || v > kLimit) ctx.error("output_shape entry ", v, " must be in [1, 2^30]");
      out[d] = v;
    }
  }
  return out;
}

void infer_max_unpool(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.expect_dtype(1, {DType::INT64});
  if (ctx.has_input(2)) ctx.expect_dtype(2, {DType::INT64});
  if (ctx.rank(0) < 3) ctx.error("expects rank >= 3 (N, C and spatial axes)");
  if (ctx.shape(1) != ctx.shape(0)) {
    ctx.error("indices ", shape_str(ctx.shape(1)), " must have X's shape ", shape_str(ctx.shape(0)));
  }
  ctx.set_output(0, DType::FLOAT32, max_unpool_shape(ctx, /*apply_output_shape=*/true));
}

void lower_max_unpool(OpContext& ctx, LoweringContext& l) {
  l.kernel("MaxUnpool", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           generic_params(max_unpool_shape(ctx, /*apply_output_shape=*/false), {}));
}

}  // namespace

void add_pool_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "MaxPool", .infer = infer_pool, .lower = lower_pool});
  ops.push_back({.op_type = "AveragePool", .infer = infer_pool, .lower = lower_pool});
  ops.push_back({.op_type = "GlobalAveragePool", .infer = infer_global_pool, .lower = lower_global_pool});
  ops.push_back({.op_type = "GlobalMaxPool", .infer = infer_global_pool, .lower = lower_global_pool});
  ops.push_back({.op_type = "MaxUnpool", .infer = infer_max_unpool, .lower = lower_max_unpool});
}

}  // namespace kiln::planner
