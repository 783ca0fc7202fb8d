// Ops that move elements by index: TopK, OneHot, ScatterElements (and the
// deprecated Scatter, the same op without reductions), ScatterND, GatherND
// and ReverseSequence. The kernels and the meaning of their GenericParams are in
// kernels/cpu/src/index.cc.
//
// TopK's k and OneHot's depth size the outputs, so they must be known when
// planning (constants, or graph inputs frozen with --freeze). Index values
// are data: the kernels check each one as they read it.

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

// Reduction numbers of the scatter kernels (index.cc, Reduction).
int64_t scatter_reduction(OpContext& ctx) {
  const std::string r = ctx.attr_string("reduction", "none");
  if (r == "none") return 0;
  if (r == "add") return 1;
  if (r == "mul") return 2;
  if (r == "max") return 3;
  if (r == "min") return 4;
  ctx.error("attribute 'reduction' must be none, add, mul, max or min, is '", r, "'");
}

void expect_arith_for_reduction(OpContext& ctx) {
  if (scatter_reduction(ctx) != 0) {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64, DType::INT32, DType::INT64});
  }
}

// An output that the graph does not use still needs a tensor for the kernel.
int output_or_temp(OpContext& ctx, LoweringContext& l, size_t i, const std::string& stem, DType dtype,
                   const std::vector<int64_t>& shape) {
  return ctx.has_output(i) ? l.tensor(ctx.output_id(i)) : l.temp(ctx.node().name + stem, dtype, shape);
}

// --- TopK -----------------------------------------------------------------

struct TopKArgs {
  int64_t axis;
  int64_t k;
  std::vector<int64_t> shape;  // of both outputs
};

TopKArgs topk_args(OpContext& ctx) {
  const int64_t axis = ctx.axis(ctx.attr_int("axis", -1), ctx.rank(0));
  int64_t k = 0;
  if (ctx.opset() < 10) {
    k = ctx.attr_int("k", -1);
  } else {
    const HostTensor& kt = ctx.constant_input(1, "K");
    if (kt.numel() != 1) ctx.error("K must hold one value, has ", kt.numel());
    if (kt.dtype != DType::INT64) ctx.error("K must be int64, is ", dtype_str(kt.dtype));
    k = kt.int_at(0);
  }
  const int64_t n = ctx.shape(0)[static_cast<size_t>(axis)];
  if (k < 0 || k > n) ctx.error("K = ", k, " is outside [0, ", n, "], the size of axis ", axis);
  std::vector<int64_t> shape = ctx.shape(0);
  shape[static_cast<size_t>(axis)] = k;
  return {axis, k, shape};
}

void infer_topk(OpContext& ctx) {
  ctx.expect_inputs(ctx.opset() < 10 ? 1 : 2, ctx.opset() < 10 ? 1 : 2);
  ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64, DType::INT32, DType::INT64});
  if (ctx.rank(0) < 1) ctx.error("input must have rank >= 1");
  const TopKArgs a = topk_args(ctx);
  ctx.set_output(0, ctx.dtype(0), a.shape);
  ctx.set_output(1, DType::INT64, a.shape);
}

void lower_topk(OpContext& ctx, LoweringContext& l) {
  const TopKArgs a = topk_args(ctx);
  // Whether `sorted` is 0 or 1, the kernel sorts: an order ONNX allows.
  const int64_t largest = ctx.attr_int("largest", 1) != 0 ? 1 : 0;
  const int values = output_or_temp(ctx, l, 0, "/values", ctx.dtype(0), a.shape);
  const int indices = output_or_temp(ctx, l, 1, "/indices", DType::INT64, a.shape);
  // The kernel's selection heap: k indices, reused for every slice.
  const int heap = l.temp(ctx.node().name + "/heap", DType::INT64, {std::max<int64_t>(a.k, 1)});
  l.kernel("TopK", {l.tensor(ctx.input_id(0))}, {values, indices}, generic_params({a.axis, a.k, largest}, {}), {heap});
}

// --- OneHot ---------------------------------------------------------------

int64_t one_hot_depth(OpContext& ctx) {
  const HostTensor& d = ctx.constant_input(1, "depth");
  if (d.numel() != 1) ctx.error("depth must hold one value, has ", d.numel());
  if (d.dtype == DType::BOOL) ctx.error("depth must be a number");
  // ONNX casts a float depth to an integer.
  const double v = d.float_at(0);
  if (!(v >= 1 && v <= 1e12)) ctx.error("depth must be from 1 to 10^12, is ", v);
  return static_cast<int64_t>(v);
}

int64_t one_hot_axis(OpContext& ctx) { return ctx.axis(ctx.attr_int("axis", -1), ctx.rank(0) + 1); }

void infer_one_hot(OpContext& ctx) {
  ctx.expect_inputs(3, 3);
  ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64, DType::INT32, DType::INT64});
  if (shape_numel(ctx.shape(2)) != 2) ctx.error("values must hold 2 elements (off, on), has ", shape_str(ctx.shape(2)));
  const int64_t depth = one_hot_depth(ctx);
  std::vector<int64_t> shape = ctx.shape(0);
  shape.insert(shape.begin() + one_hot_axis(ctx), depth);
  ctx.set_output(0, ctx.dtype(2), shape);
}

void lower_one_hot(OpContext& ctx, LoweringContext& l) {
  l.kernel("OneHot", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(2))}, {l.tensor(ctx.output_id(0))},
           generic_params({one_hot_axis(ctx), one_hot_depth(ctx)}, {}));
}

// --- ScatterElements, Scatter ---------------------------------------------

void infer_scatter_elements(OpContext& ctx) {
  ctx.expect_inputs(3, 3);
  ctx.expect_dtype(1, {DType::INT32, DType::INT64});
  expect_arith_for_reduction(ctx);
  if (ctx.rank(0) < 1 || ctx.rank(1) != ctx.rank(0)) ctx.error("data and indices must have the same rank (>= 1)");
  if (ctx.shape(2) != ctx.shape(1)) {
    ctx.error("updates ", shape_str(ctx.shape(2)), " must have the indices' shape ", shape_str(ctx.shape(1)));
  }
  if (ctx.dtype(2) != ctx.dtype(0)) ctx.error("updates must have the data's dtype");
  const int64_t axis = ctx.axis(ctx.attr_int("axis", 0), ctx.rank(0));
  for (int64_t d = 0; d < ctx.rank(0); ++d) {
    if (d != axis && ctx.shape(1)[static_cast<size_t>(d)] > ctx.shape(0)[static_cast<size_t>(d)]) {
      ctx.error("indices are larger than data on axis ", d);
    }
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void lower_scatter_elements(OpContext& ctx, LoweringContext& l) {
  l.kernel("ScatterElements", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1)), l.tensor(ctx.input_id(2))},
           {l.tensor(ctx.output_id(0))},
           generic_params({ctx.axis(ctx.attr_int("axis", 0), ctx.rank(0)), scatter_reduction(ctx)}, {}));
}

// --- ScatterND, GatherND --------------------------------------------------

// The length q of the index tuples (indices [..., q]) into data from dim
// `first` on.
int64_t tuple_length(OpContext& ctx, int64_t first) {
  if (ctx.rank(1) < 1) ctx.error("indices must have rank >= 1");
  const int64_t q = ctx.shape(1).back();
  if (q < 1 || first + q > ctx.rank(0)) {
    ctx.error("index tuples of ", q, " elements do not fit data of rank ", ctx.rank(0),
              first > 0 ? str(" after ", first, " batch dims") : std::string());
  }
  return q;
}

void infer_scatter_nd(OpContext& ctx) {
  ctx.expect_inputs(3, 3);
  ctx.expect_dtype(1, {DType::INT32, DType::INT64});
  expect_arith_for_reduction(ctx);
  if (ctx.dtype(2) != ctx.dtype(0)) ctx.error("updates must have the data's dtype");
  const int64_t q = tuple_length(ctx, 0);
  std::vector<int64_t> want(ctx.shape(1).begin(), ctx.shape(1).end() - 1);
  want.insert(want.end(), ctx.shape(0).begin() + q, ctx.shape(0).end());
  if (ctx.shape(2) != want) ctx.error("updates are ", shape_str(ctx.shape(2)), ", expected ", shape_str(want));
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void lower_scatter_nd(OpContext& ctx, LoweringContext& l) {
  l.kernel("ScatterND", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1)), l.tensor(ctx.input_id(2))},
           {l.tensor(ctx.output_id(0))}, generic_params({scatter_reduction(ctx)}, {}));
}

int64_t gather_nd_batch_dims(OpContext& ctx) {
  const int64_t b = ctx.attr_int("batch_dims", 0);
  if (b < 0 || b >= ctx.rank(1) || b >= ctx.rank(0)) {
    ctx.error("attribute 'batch_dims' = ", b, " must be below the ranks of data (", ctx.rank(0), ") and indices (",
              ctx.rank(1), ")");
  }
  return b;
}

void infer_gather_nd(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(1, {DType::INT32, DType::INT64});
  const int64_t b = gather_nd_batch_dims(ctx);
  const int64_t q = tuple_length(ctx, b);
  for (int64_t d = 0; d < b; ++d) {
    if (ctx.shape(0)[static_cast<size_t>(d)] != ctx.shape(1)[static_cast<size_t>(d)]) {
      ctx.error("batch dim ", d, " differs between data and indices");
    }
  }
  std::vector<int64_t> shape(ctx.shape(1).begin(), ctx.shape(1).end() - 1);
  shape.insert(shape.end(), ctx.shape(0).begin() + b + q, ctx.shape(0).end());
  ctx.set_output(0, ctx.dtype(0), shape);
}

void lower_gather_nd(OpContext& ctx, LoweringContext& l) {
  l.kernel("GatherND", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           generic_params({gather_nd_batch_dims(ctx)}, {}));
}

// --- ReverseSequence ------------------------------------------------------

std::vector<int64_t> reverse_sequence_axes(OpContext& ctx) {
  const int64_t batch_axis = ctx.attr_int("batch_axis", 1), time_axis = ctx.attr_int("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    ctx.error("attributes 'batch_axis' (", batch_axis, ") and 'time_axis' (", time_axis, ") must be 0 and 1");
  }
  return {batch_axis, time_axis};
}

void infer_reverse_sequence(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(1, {DType::INT32, DType::INT64});
  if (ctx.rank(0) < 2) ctx.error("input must have rank >= 2");
  const auto axes = reverse_sequence_axes(ctx);
  const int64_t batches = ctx.shape(0)[static_cast<size_t>(axes[0])];
  if (ctx.shape(1) != std::vector<int64_t>{batches}) {
    ctx.error("sequence_lens ", shape_str(ctx.shape(1)), " must be [", batches, "], one length per batch");
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void lower_reverse_sequence(OpContext& ctx, LoweringContext& l) {
  l.kernel("ReverseSequence", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           generic_params(reverse_sequence_axes(ctx), {}));
}

}  // namespace

void add_index_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "TopK", .infer = infer_topk, .lower = lower_topk});
  ops.push_back({.op_type = "OneHot", .infer = infer_one_hot, .lower = lower_one_hot});
  ops.push_back({.op_type = "ScatterElements", .infer = infer_scatter_elements, .lower = lower_scatter_elements});
  ops.push_back({.op_type = "Scatter", .infer = infer_scatter_elements, .lower = lower_scatter_elements});
  ops.push_back({.op_type = "ScatterND", .infer = infer_scatter_nd, .lower = lower_scatter_nd});
  ops.push_back({.op_type = "GatherND", .infer = infer_gather_nd, .lower = lower_gather_nd});
  ops.push_back({.op_type = "ReverseSequence", .infer = infer_reverse_sequence, .lower = lower_reverse_sequence});
}

}  // namespace kiln::planner
