// Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, and
// ArgMax, ArgMin (one axis, int64 indices).
//
// Up to opset 17 the axes are an attribute, except for ReduceSum from opset
// 13, where they are an optional input (which must be a constant) and
// noop_with_empty_axes says what empty axes mean.

#include <algorithm>
#include <string>

#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

struct ReduceArgs {
  std::vector<int64_t> axes;  // sorted, non-negative, unique
  bool keepdims = true;
  bool noop = false;  // empty axes with noop_with_empty_axes: the identity
};

bool float_only(const std::string& op) { return op == "ReduceL2" || op == "ReduceLogSum" || op == "ReduceLogSumExp"; }

ReduceArgs reduce_args(OpContext& ctx) {
  ReduceArgs a;
  const int64_t rank = ctx.rank(0);
  std::vector<int64_t> axes;
  if (ctx.node().op_type == "ReduceSum" && ctx.opset() >= 13) {
    ctx.expect_inputs(1, 2);
    if (ctx.has_input(1)) axes = ctx.constant_input(1, "axes").to_int64s();
    a.noop = axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    ctx.expect_inputs(1, 1);
    axes = ctx.attr_ints("axes");
  }
  a.keepdims = ctx.attr_int("keepdims", 1) != 0;
  if (a.noop) return a;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& v : axes) v = ctx.axis(v, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) ctx.error("axes repeat an axis");
  a.axes = std::move(axes);
  return a;
}

void infer_reduce(OpContext& ctx) {
  if (float_only(ctx.node().op_type)) {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64});
  } else {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64, DType::INT32, DType::INT64});
  }
  if (ctx.rank(0) > 8) ctx.not_supported("rank above 8");
  const ReduceArgs a = reduce_args(ctx);
  if (!a.noop && a.axes.empty()) ctx.not_supported("reduction of a scalar");
  std::vector<int64_t> out;
  const auto& in = ctx.shape(0);
  for (size_t d = 0; d < in.size(); ++d) {
    const bool reduced = std::binary_search(a.axes.begin(), a.axes.end(), static_cast<int64_t>(d));
    if (!reduced) {
      out.push_back(in[d]);
    } else if (a.keepdims) {
      out.push_back(1);
    }
  }
  ctx.set_output(0, ctx.dtype(0), a.noop ? in : out);
}

void lower_reduce(OpContext& ctx, LoweringContext& l) {
  const ReduceArgs a = reduce_args(ctx);
  const int in = l.tensor(ctx.input_id(0));
  const int out = l.tensor(ctx.output_id(0));
  if (a.noop) {
    l.view(in, out);
    return;
  }
  fb::ReduceParamsT p;
  for (int64_t v : a.axes) p.axes.push_back(static_cast<int32_t>(v));
  p.keepdims = a.keepdims;
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel(ctx.node().op_type, {in}, {out}, std::move(params));
}

int64_t arg_axis(OpContext& ctx) { return ctx.axis(ctx.attr_int("axis", 0), ctx.rank(0)); }

void infer_arg_extreme(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, {DType::FLOAT32, DType::INT32, DType::INT64});
  if (ctx.rank(0) == 0) ctx.error("expects rank >= 1");
  const int64_t axis = arg_axis(ctx);
  std::vector<int64_t> out = ctx.shape(0);
  if (out[static_cast<size_t>(axis)] == 0) ctx.error("cannot take the ", ctx.node().op_type, " of an empty axis");
  if (ctx.attr_int("keepdims", 1) != 0) {
    out[static_cast<size_t>(axis)] = 1;
  } else {
    out.erase(out.begin() + axis);
  }
  ctx.set_output(0, DType::INT64, out);
}

void lower_arg_extreme(OpContext& ctx, LoweringContext& l) {
  fb::ReduceParamsT p;
  p.axes = {static_cast<int32_t>(arg_axis(ctx))};
  p.keepdims = ctx.attr_int("keepdims", 1) != 0;
  p.select_last_index = ctx.attr_int("select_last_index", 0) != 0;
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel(ctx.node().op_type, {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))}, std::move(params));
}

}  // namespace

void add_reduce_ops(std::vector<OpDef>& ops) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    ops.push_back({.op_type = op, .infer = infer_reduce, .lower = lower_reduce});
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    ops.push_back({.op_type = op, .infer = infer_arg_extreme, .lower = lower_arg_extreme});
  }
}

}  // namespace kiln::planner
