// Shape and data-movement ops: Constant, Shape, Size, ConstantOfShape,
// Reshape, Flatten, Squeeze, Unsqueeze (pure views of their input's bytes),
// Transpose, Concat, Split, Slice, Gather, Expand, Cast, Pad.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <type_traits>

#include "onnx/import.h"
#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

void lower_view(OpContext& ctx, LoweringContext& l) { l.view(l.tensor(ctx.input_id(0)), l.tensor(ctx.output_id(0))); }

// ---------------------------------------------------------------------------
// Plan-time: Constant, Shape, Size; ConstantOfShape and Range.

HostTensor constant_value(OpContext& ctx) {
  const auto& attrs = ctx.node().attrs;
  if (attrs.size() != 1) ctx.error("expects exactly one value attribute");
  const auto& [key, attr] = *attrs.begin();
  if (key == "value" && attr.kind == Attribute::Kind::kTensor) return *attr.tensor;
  if (key == "value_float") return HostTensor::from_floats({attr.f}, {});
  if (key == "value_floats") return HostTensor::from_floats(attr.floats, {static_cast<int64_t>(attr.floats.size())});
  if (key == "value_int") return HostTensor::from_int64s({attr.i}, {});
  if (key == "value_ints") return HostTensor::from_int64s(attr.ints, {static_cast<int64_t>(attr.ints.size())});
  ctx.not_supported("attribute '", key, "' is not supported");
}

void infer_constant(OpContext& ctx) {
  ctx.expect_inputs(0, 0);
  const HostTensor value = constant_value(ctx);
  ctx.set_output(0, value.dtype, value.shape);
}
std::vector<HostTensor> evaluate_constant(OpContext& ctx) { return {constant_value(ctx)}; }

// Shape (with opset 15's start/end).
std::pair<int64_t, int64_t> shape_range(OpContext& ctx) {
  const int64_t rank = ctx.rank(0);
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  const int64_t start = clamp(ctx.attr_int("start", 0));
  const int64_t end = clamp(ctx.attr_int("end", rank));
  return {start, std::max(start, end)};
}

void infer_shape(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  const auto [start, end] = shape_range(ctx);
  ctx.set_output(0, DType::INT64, {end - start});
}
std::vector<HostTensor> evaluate_shape(OpContext& ctx) {
  const auto [start, end] = shape_range(ctx);
  std::vector<int64_t> dims(ctx.shape(0).begin() + start, ctx.shape(0).begin() + end);
  return {HostTensor::from_int64s(dims, {end - start})};
}

void infer_size(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.set_output(0, DType::INT64, {});
}
std::vector<HostTensor> evaluate_size(OpContext& ctx) {
  return {HostTensor::from_int64s({shape_numel(ctx.shape(0))}, {})};
}

// ConstantOfShape and Range describe their outputs in a few numbers; their
// inference reads those numbers and never materialises the output, so a
// hostile shape costs nothing until folding (passes/infer.h), which makes the
// constant only within its budget. Beyond it they run at run time: the value
// broadcast by Expand, the sequence by the Range kernel.

struct ConstantOfShapeSpec {
  HostTensor fill;  // one element
  std::vector<int64_t> shape;
};

ConstantOfShapeSpec constant_of_shape_spec(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ConstantOfShapeSpec spec{HostTensor::scalar_float(0.f), ctx.constant_input(0, "the shape").to_int64s()};
  if (ctx.has_attr("value")) {
    const Attribute& value = ctx.node().attrs.at("value");
    if (value.kind != Attribute::Kind::kTensor || value.tensor == nullptr) ctx.error("value must be a tensor");
    spec.fill = *value.tensor;
  }
  if (spec.fill.numel() != 1) ctx.error("value must have one element");
  for (int64_t d : spec.shape) {
    if (d < 0) ctx.error("shape ", shape_str(spec.shape), " has a negative dimension");
  }
  return spec;
}
void infer_constant_of_shape(OpContext& ctx) {
  ConstantOfShapeSpec spec = constant_of_shape_spec(ctx);
  ctx.set_output(0, spec.fill.dtype, std::move(spec.shape));
}
std::vector<HostTensor> evaluate_constant_of_shape(OpContext& ctx) {
  const ConstantOfShapeSpec spec = constant_of_shape_spec(ctx);
  HostTensor out(spec.fill.dtype, spec.shape);
  const size_t element = dtype_bytes(spec.fill.dtype);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::memcpy(out.bytes.data() + i * element, spec.fill.bytes.data(), element);
  }
  return {out};
}
// The value, as a constant with as many unit dims as the output, broadcast
// into the output by Expand.
void lower_constant_of_shape(OpContext& ctx, LoweringContext& l) {
  const ConstantOfShapeSpec spec = constant_of_shape_spec(ctx);
  if (spec.shape.size() > 8) ctx.not_supported("output rank ", spec.shape.size(), " above 8");
  HostTensor value = spec.fill;
  value.shape.assign(spec.shape.size(), 1);
  const int in = l.constant(ctx.output(0).name + "_value", std::move(value));
  const int out = l.tensor(ctx.output_id(0));
  if (shape_numel(spec.shape) == 1) {
    l.view(in, out);
  } else {
    l.kernel("Expand", {in}, {out});
  }
}

// Range(start, limit, delta), its inputs constants: count = max(ceil((limit -
// start) / delta), 0) elements, element i = start + i * delta in the dtype's
// own arithmetic (integers wrap as unsigned).
template <typename T>
int64_t range_count(OpContext& ctx) {
  const HostTensor& start_t = ctx.constant_input(0, "start");
  const HostTensor& limit_t = ctx.constant_input(1, "limit");
  const HostTensor& delta_t = ctx.constant_input(2, "delta");
  for (const HostTensor* t : {&start_t, &limit_t, &delta_t}) {
    if (t->numel() != 1) ctx.error("start, limit and delta must be scalars");
  }
  if constexpr (std::is_floating_point_v<T>) {
    const double start = start_t.float_at(0), limit = limit_t.float_at(0), delta = delta_t.float_at(0);
    if (delta == 0.0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
      ctx.error("start, limit and delta must be finite, delta non-zero");
    }
    const double n = std::ceil((limit - start) / delta);
    if (n > static_cast<double>(int64_t{1} << 40)) ctx.error("range of ", n, " elements is too large");
    return n > 0 ? static_cast<int64_t>(n) : 0;
  } else {
    const int64_t start = start_t.int_at(0), limit = limit_t.int_at(0), delta = delta_t.int_at(0);
    if (delta == 0) ctx.error("delta must be non-zero");
    // The distance as an unsigned number: exact even for extreme values.
    if (delta > 0 && limit > start) {
      const uint64_t distance = static_cast<uint64_t>(limit) - static_cast<uint64_t>(start);
      return static_cast<int64_t>((distance - 1) / static_cast<uint64_t>(delta) + 1);
    }
    if (delta < 0 && limit < start) {
      const uint64_t distance = static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
      const uint64_t step = uint64_t{0} - static_cast<uint64_t>(delta);
      return static_cast<int64_t>((distance - 1) / step + 1);
    }
    return 0;
  }
}

template <typename T>
void range_fill(const HostTensor& start_t, const HostTensor& delta_t, HostTensor& out) {
  const int64_t count = out.numel();
  if constexpr (std::is_floating_point_v<T>) {
    const T start = static_cast<T>(start_t.float_at(0)), delta = static_cast<T>(delta_t.float_at(0));
    for (int64_t i = 0; i < count; ++i) out.data<T>()[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  } else {
    const uint64_t start = static_cast<uint64_t>(start_t.int_at(0)), delta = static_cast<uint64_t>(delta_t.int_at(0));
    // In unsigned arithmetic: wraps where signed arithmetic would overflow.
    for (int64_t i = 0; i < count; ++i) out.data<T>()[i] = static_cast<T>(start + static_cast<uint64_t>(i) * delta);
  }
}

int64_t range_length(OpContext& ctx) {
  ctx.expect_inputs(3, 3);
  const DType dtype = ctx.dtype(0);
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.dtype(i) != dtype) ctx.error("start, limit and delta differ in dtype");
  }
  switch (dtype) {
    case DType::FLOAT32: return range_count<float>(ctx);
    case DType::FLOAT64: return range_count<double>(ctx);
    case DType::INT16: return range_count<int16_t>(ctx);
    case DType::INT32: return range_count<int32_t>(ctx);
    case DType::INT64: return range_count<int64_t>(ctx);
    default: ctx.not_supported("Range of ", dtype_str(dtype));
  }
}

void infer_range(OpContext& ctx) {
  const int64_t count = range_length(ctx);
  ctx.set_output(0, ctx.dtype(0), {count});
}
std::vector<HostTensor> evaluate_range(OpContext& ctx) {
  HostTensor out(ctx.dtype(0), {range_length(ctx)});
  const HostTensor& start = ctx.constant_input(0, "start");
  const HostTensor& delta = ctx.constant_input(2, "delta");
  switch (out.dtype) {
    case DType::FLOAT32: range_fill<float>(start, delta, out); break;
    case DType::FLOAT64: range_fill<double>(start, delta, out); break;
    case DType::INT16: range_fill<int16_t>(start, delta, out); break;
    case DType::INT32: range_fill<int32_t>(start, delta, out); break;
    default: range_fill<int64_t>(start, delta, out); break;
  }
  return {out};
}
// The Range kernel reads start and delta; the count is the output's length.
void lower_range(OpContext& ctx, LoweringContext& l) {
  l.kernel("Range", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(2))}, {l.tensor(ctx.output_id(0))});
}

// ---------------------------------------------------------------------------
// Views: Reshape, Flatten, Squeeze, Unsqueeze.

void infer_reshape(OpContext& ctx) {
  std::vector<int64_t> target;
  if (ctx.opset() < 5) {
    ctx.expect_inputs(1, 1);
    target = ctx.attr_ints("shape");
  } else {
    ctx.expect_inputs(2, 2);
    target = ctx.constant_input(1, "the target shape").to_int64s();
  }
  const auto& in = ctx.shape(0);
  const bool allow_zero = ctx.attr_int("allowzero", 0) != 0;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (i >= in.size()) ctx.error("shape ", shape_str(target), " copies dim ", i, " of a rank-", in.size(), " input");
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (infer_at >= 0) ctx.error("shape ", shape_str(target), " has more than one -1");
      infer_at = static_cast<int>(i);
    } else if (target[i] < 0) {
      ctx.error("shape ", shape_str(target), " has a negative dimension");
    } else if (__builtin_mul_overflow(known, target[i], &known)) {
      ctx.error("shape ", shape_str(target), " has more elements than int64 holds");
    }
  }
  const int64_t total = shape_numel(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) ctx.error("cannot reshape ", shape_str(in), " to ", shape_str(target));
    target[static_cast<size_t>(infer_at)] = total / known;
  }
  if (shape_numel(target) != total) ctx.error("cannot reshape ", shape_str(in), " to ", shape_str(target));
  ctx.set_output(0, ctx.dtype(0), target);
}

void infer_flatten(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  const auto& in = ctx.shape(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -rank || axis > rank) ctx.error("axis ", axis, " out of range for rank ", rank);
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= in[static_cast<size_t>(i)];
  ctx.set_output(0, ctx.dtype(0), {outer, inner});
}

std::vector<int64_t> axes_argument(OpContext& ctx, size_t input, bool* out_present) {
  *out_present = true;
  if (ctx.opset() < 13) {
    if (!ctx.has_attr("axes")) *out_present = false;
    return ctx.attr_ints("axes");
  }
  if (!ctx.has_input(input)) {
    *out_present = false;
    return {};
  }
  return ctx.constant_input(input, "axes").to_int64s();
}

void infer_squeeze(OpContext& ctx) {
  ctx.expect_inputs(1, 2);
  const auto& in = ctx.shape(0);
  bool present = false;
  std::vector<int64_t> axes = axes_argument(ctx, 1, &present);
  std::set<int64_t> drop;
  for (int64_t a : axes) {
    a = ctx.axis(a, static_cast<int64_t>(in.size()));
    if (in[static_cast<size_t>(a)] != 1) ctx.error("cannot squeeze axis ", a, " of size ", in[static_cast<size_t>(a)]);
    drop.insert(a);
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool squeeze = present ? drop.count(static_cast<int64_t>(i)) != 0 : in[i] == 1;
    if (!squeeze) out.push_back(in[i]);
  }
  ctx.set_output(0, ctx.dtype(0), out);
}

void infer_unsqueeze(OpContext& ctx) {
  ctx.expect_inputs(1, 2);
  const auto& in = ctx.shape(0);
  bool present = false;
  std::vector<int64_t> axes = axes_argument(ctx, 1, &present);
  if (!present) ctx.error("axes are required");
  const int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  std::set<int64_t> insert;
  for (int64_t a : axes) {
    if (!insert.insert(ctx.axis(a, rank)).second) ctx.error("axis ", a, " repeated");
  }
  std::vector<int64_t> out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(insert.count(i) ? 1 : in[next++]);
  ctx.set_output(0, ctx.dtype(0), out);
}

// ---------------------------------------------------------------------------
// Transpose, Concat

std::vector<int64_t> transpose_perm(OpContext& ctx) {
  const int64_t rank = ctx.rank(0);
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
  perm = ctx.attr_ints("perm", perm);
  if (static_cast<int64_t>(perm.size()) != rank) ctx.error("perm has ", perm.size(), " entries for rank ", rank);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& p : perm) {
    p = ctx.axis(p, rank, "perm entry");
    if (seen[static_cast<size_t>(p)]) ctx.error("perm is not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

void infer_transpose(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  if (ctx.rank(0) > 8) ctx.not_supported("rank above 8");
  const auto perm = transpose_perm(ctx);
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(ctx.shape(0)[static_cast<size_t>(p)]);
  ctx.set_output(0, ctx.dtype(0), out);
}

void lower_transpose(OpContext& ctx, LoweringContext& l) {
  fb::TransposeParamsT p;
  for (int64_t v : transpose_perm(ctx)) p.perm.push_back(static_cast<int32_t>(v));
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Transpose", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))}, std::move(params));
}

void infer_concat(OpContext& ctx) {
  ctx.expect_inputs(1, 1024);
  std::vector<int64_t> out = ctx.shape(0);
  const int64_t axis = ctx.axis(ctx.attr_int("axis", 0), static_cast<int64_t>(out.size()));
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const auto& s = ctx.shape(i);
    if (ctx.dtype(i) != ctx.dtype(0) || s.size() != out.size()) ctx.error("input ", i, " differs in dtype or rank");
    for (size_t d = 0; d < s.size(); ++d) {
      if (static_cast<int64_t>(d) == axis) {
        out[d] += s[d];
      } else if (s[d] != out[d]) {
        ctx.error("input ", i, " has shape ", shape_str(s), ", incompatible with ", shape_str(ctx.shape(0)));
      }
    }
  }
  ctx.set_output(0, ctx.dtype(0), out);
}

void lower_concat(OpContext& ctx, LoweringContext& l) {
  fb::AxisParamsT p;
  p.axis = static_cast<int32_t>(ctx.axis(ctx.attr_int("axis", 0), ctx.rank(0)));
  std::vector<int> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    // Empty inputs contribute nothing.
    if (shape_numel(ctx.shape(i)) > 0) inputs.push_back(l.tensor(ctx.input_id(i)));
  }
  const int out = l.tensor(ctx.output_id(0));
  if (inputs.empty()) return;  // an empty output: nothing to write
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Concat", inputs, {out}, std::move(params));
}

// ---------------------------------------------------------------------------
// Split: sizes from the `split` input (opset 13) or attribute (before), or
// equal parts.

std::vector<int64_t> split_sizes(OpContext& ctx, int64_t* out_axis) {
  const auto& in = ctx.shape(0);
  if (in.empty()) ctx.error("cannot split a scalar");
  const int64_t axis = ctx.axis(ctx.attr_int("axis", 0), static_cast<int64_t>(in.size()));
  *out_axis = axis;
  const int64_t dim = in[static_cast<size_t>(axis)];
  const int64_t n = static_cast<int64_t>(ctx.num_outputs());
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13) {
    ctx.expect_inputs(1, 2);
    if (ctx.has_input(1)) sizes = ctx.constant_input(1, "split").to_int64s();
  } else {
    ctx.expect_inputs(1, 1);
    sizes = ctx.attr_ints("split");
  }
  if (sizes.empty()) {
    if (n == 0 || dim % n != 0) ctx.error("cannot split ", dim, " elements into ", n, " equal parts");
    sizes.assign(static_cast<size_t>(n), dim / n);
  }
  if (static_cast<int64_t>(sizes.size()) != n) ctx.error("split has ", sizes.size(), " sizes for ", n, " outputs");
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v < 0) ctx.error("split has a negative size");
    total += v;
  }
  if (total != dim) ctx.error("split sizes add up to ", total, ", the axis has ", dim);
  return sizes;
}

void infer_split(OpContext& ctx) {
  int64_t axis = 0;
  const auto sizes = split_sizes(ctx, &axis);
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> shape = ctx.shape(0);
    shape[static_cast<size_t>(axis)] = sizes[i];
    ctx.set_output(i, ctx.dtype(0), shape);
  }
}

void lower_split(OpContext& ctx, LoweringContext& l) {
  int64_t axis = 0;
  const auto sizes = split_sizes(ctx, &axis);
  std::vector<int> outputs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (ctx.has_output(i)) {
      outputs.push_back(l.tensor(ctx.output_id(i)));
    } else {
      // The kernel writes every part; an unused one goes to a temporary.
      std::vector<int64_t> shape = ctx.shape(0);
      shape[static_cast<size_t>(axis)] = sizes[i];
      outputs.push_back(l.temp(ctx.node().name + "/unused", ctx.dtype(0), shape));
    }
  }
  fb::AxisParamsT p;
  p.axis = static_cast<int32_t>(axis);
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Split", {l.tensor(ctx.input_id(0))}, outputs, std::move(params));
}

// ---------------------------------------------------------------------------
// Slice: starts, ends, axes and steps are inputs from opset 10 (they must
// be constants), attributes before. Resolved to one start, step and count
// per dimension, following ONNX's clamping rules.

struct SliceArgs {
  std::vector<int64_t> starts, steps, counts;
};

SliceArgs slice_args(OpContext& ctx) {
  const auto& in = ctx.shape(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() >= 10) {
    ctx.expect_inputs(3, 5);
    starts = ctx.constant_input(1, "starts").to_int64s();
    ends = ctx.constant_input(2, "ends").to_int64s();
    if (ctx.has_input(3)) axes = ctx.constant_input(3, "axes").to_int64s();
    if (ctx.has_input(4)) steps = ctx.constant_input(4, "steps").to_int64s();
  } else {
    ctx.expect_inputs(1, 1);
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    axes = ctx.attr_ints("axes");
  }
  if (ends.size() != starts.size()) ctx.error("starts and ends differ in length");
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    ctx.error("axes or steps differ in length from starts");
  }
  SliceArgs a;
  a.starts.assign(in.size(), 0);
  a.steps.assign(in.size(), 1);
  a.counts = in;
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t axis = ctx.axis(axes[i], rank);
    if (seen[static_cast<size_t>(axis)]) ctx.error("axis ", axes[i], " repeated");
    seen[static_cast<size_t>(axis)] = true;
    const int64_t dim = in[static_cast<size_t>(axis)];
    int64_t start = starts[i], end = ends[i], step = steps[i];
    if (step == 0) ctx.error("step 0 on axis ", axis);
    // Negative indices count from the end (no overflow: dim >= 0).
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t count = 0;
    if (dim > 0 && step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start) count = (end - start - 1) / step + 1;
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      const int64_t stride = step < -dim ? dim : -step;  // |step|, without overflow
      if (start > end) count = (start - end - 1) / stride + 1;
    }
    // A step longer than the axis takes one element; keep it small.
    if (count <= 1) step = step > 0 ? 1 : -1;
    a.starts[static_cast<size_t>(axis)] = count > 0 ? start : 0;
    a.steps[static_cast<size_t>(axis)] = step;
    a.counts[static_cast<size_t>(axis)] = count;
  }
  return a;
}

void infer_slice(OpContext& ctx) {
  if (ctx.rank(0) == 0) ctx.error("cannot slice a scalar");
  ctx.set_output(0, ctx.dtype(0), slice_args(ctx).counts);
}

void lower_slice(OpContext& ctx, LoweringContext& l) {
  const SliceArgs a = slice_args(ctx);
  const int in = l.tensor(ctx.input_id(0));
  const int out = l.tensor(ctx.output_id(0));
  bool identity = a.counts == ctx.shape(0);
  for (size_t d = 0; d < a.steps.size(); ++d) identity = identity && (a.steps[d] == 1 || a.counts[d] <= 1);
  if (identity) {
    l.view(in, out);
    return;
  }
  if (shape_numel(a.counts) == 0) return;  // an empty output: nothing to write
  fb::SliceParamsT p;
  p.starts = a.starts;
  p.steps = a.steps;
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Slice", {in}, {out}, std::move(params));
}

// ---------------------------------------------------------------------------
// Expand: broadcasts the input and the (constant) shape argument together.

void infer_expand(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  const std::vector<int64_t> shape = ctx.constant_input(1, "the shape").to_int64s();
  for (int64_t d : shape) {
    if (d < 0) ctx.error("shape ", shape_str(shape), " has a negative dimension");
  }
  ctx.set_output(0, ctx.dtype(0), broadcast_shapes(ctx, ctx.shape(0), shape));
}

void lower_expand(OpContext& ctx, LoweringContext& l) {
  const int in = l.tensor(ctx.input_id(0));
  const int out = l.tensor(ctx.output_id(0));
  if (ctx.output(0).shape == ctx.shape(0)) {
    l.view(in, out);
  } else {
    l.kernel("Expand", {in}, {out});
  }
}

// ---------------------------------------------------------------------------
// Gather, Cast

void infer_gather(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(1, {DType::INT64, DType::INT32});
  const auto& data = ctx.shape(0);
  if (data.empty()) ctx.error("cannot gather from a scalar");
  const int64_t axis = ctx.axis(ctx.attr_int("axis", 0), static_cast<int64_t>(data.size()));
  std::vector<int64_t> out(data.begin(), data.begin() + axis);
  out.insert(out.end(), ctx.shape(1).begin(), ctx.shape(1).end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  if (out.size() > 8) ctx.not_supported("output rank above 8");
  ctx.set_output(0, ctx.dtype(0), out);
}

void lower_gather(OpContext& ctx, LoweringContext& l) {
  fb::AxisParamsT p;
  p.axis = static_cast<int32_t>(ctx.axis(ctx.attr_int("axis", 0), ctx.rank(0)));
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Gather", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           std::move(params));
}

const std::initializer_list<DType> kCastTypes = {
    DType::FLOAT32, DType::FLOAT64, DType::FLOAT16, DType::BFLOAT16, DType::INT64,  DType::INT32, DType::INT16,
    DType::INT8,    DType::UINT8,   DType::UINT16,  DType::UINT32,   DType::UINT64, DType::BOOL};

DType dtype_from_onnx_attr(OpContext& ctx) {
  const int64_t code = ctx.attr_int("to", 0);
  const auto to = dtype_from_onnx(static_cast<int32_t>(code));
  if (!to || std::find(kCastTypes.begin(), kCastTypes.end(), *to) == kCastTypes.end()) {
    ctx.not_supported("cast to ONNX element type ", code, " is not supported");
  }
  return *to;
}

void infer_cast(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  ctx.expect_dtype(0, kCastTypes);
  const auto to = dtype_from_onnx_attr(ctx);
  ctx.set_output(0, to, ctx.shape(0));
}

// CastLike: Cast to the dtype of its second input.
void infer_cast_like(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, kCastTypes);
  ctx.expect_dtype(1, kCastTypes);
  ctx.set_output(0, ctx.dtype(1), ctx.shape(0));
}

// Cast and CastLike.
void lower_cast(OpContext& ctx, LoweringContext& l) {
  const int in = l.tensor(ctx.input_id(0));
  const int out = l.tensor(ctx.output_id(0));
  if (ctx.dtype(0) == ctx.output(0).dtype) {
    l.view(in, out);
  } else {
    l.kernel("Cast", {in}, {out});
  }
}

// ---------------------------------------------------------------------------
// Pad: pads and the constant value are attributes before opset 11, inputs
// (which must be constants) from 11.

struct PadArgs {
  std::vector<int64_t> pads;
  fb::PadMode mode = fb::PadMode::CONSTANT;
  float value = 0.f;
};

PadArgs pad_args(OpContext& ctx) {
  PadArgs a;
  const int64_t rank = ctx.rank(0);
  const std::string mode = ctx.attr_string("mode", "constant");
  if (mode == "constant") {
    a.mode = fb::PadMode::CONSTANT;
  } else if (mode == "reflect") {
    a.mode = fb::PadMode::REFLECT;
  } else if (mode == "edge") {
    a.mode = fb::PadMode::EDGE;
  } else {
    ctx.not_supported("pad mode '", mode, "'");
  }
  if (ctx.opset() < 11) {
    a.pads = ctx.attr_ints(ctx.has_attr("pads") ? "pads" : "paddings");
    a.value = ctx.attr_float("value", 0.f);
  } else {
    a.pads = ctx.constant_input(1, "the pads").to_int64s();
    if (ctx.has_input(2)) {
      const HostTensor& v = ctx.constant_input(2, "the constant value");
      if (v.numel() != 1) ctx.error("constant_value must be a scalar");
      a.value = static_cast<float>(v.float_at(0));
    }
    if (ctx.has_input(3)) {
      // opset 18 axes: not in opsets up to 17.
      ctx.not_supported("the axes input");
    }
  }
  if (static_cast<int64_t>(a.pads.size()) != 2 * rank)
    ctx.error("pads has ", a.pads.size(), " entries for rank ", rank);
  for (int64_t v : a.pads) {
    if (v < 0) ctx.not_supported("negative pads (cropping)");
  }
  if (ctx.dtype(0) != DType::FLOAT32 && a.mode == fb::PadMode::CONSTANT && a.value != 0.f) {
    ctx.not_supported("non-zero constant pad for ", dtype_str(ctx.dtype(0)));
  }
  return a;
}

void infer_pad(OpContext& ctx) {
  ctx.expect_inputs(1, 4);
  const PadArgs a = pad_args(ctx);
  std::vector<int64_t> out = ctx.shape(0);
  const size_t rank = out.size();
  for (size_t d = 0; d < rank; ++d) {
    out[d] += a.pads[d] + a.pads[d + rank];
    if (a.mode == fb::PadMode::REFLECT && (a.pads[d] >= ctx.shape(0)[d] || a.pads[d + rank] >= ctx.shape(0)[d])) {
      ctx.not_supported("reflect pads as large as the axis");
    }
    if (a.mode != fb::PadMode::CONSTANT && ctx.shape(0)[d] == 0 && (a.pads[d] > 0 || a.pads[d + rank] > 0)) {
      ctx.error("cannot pad an empty axis in ", a.mode == fb::PadMode::EDGE ? "edge" : "reflect", " mode");
    }
  }
  ctx.set_output(0, ctx.dtype(0), out);
}

void lower_pad(OpContext& ctx, LoweringContext& l) {
  const PadArgs a = pad_args(ctx);
  const int in = l.tensor(ctx.input_id(0));
  const int out = l.tensor(ctx.output_id(0));
  bool zero = true;
  for (int64_t v : a.pads) zero = zero && v == 0;
  if (zero) {
    l.view(in, out);
    return;
  }
  fb::PadParamsT p;
  p.pads = a.pads;
  p.mode = a.mode;
  p.value = a.value;
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Pad", {in}, {out}, std::move(params));
}

}  // namespace

void add_shape_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "Pad", .infer = infer_pad, .lower = lower_pad});
  ops.push_back({.op_type = "Constant", .infer = infer_constant, .evaluate = evaluate_constant});
  ops.push_back({.op_type = "Shape", .infer = infer_shape, .evaluate = evaluate_shape, .shape_only = true});
  ops.push_back({.op_type = "Size", .infer = infer_size, .evaluate = evaluate_size, .shape_only = true});
  ops.push_back({.op_type = "ConstantOfShape",
                 .infer = infer_constant_of_shape,
                 .lower = lower_constant_of_shape,
                 .evaluate = evaluate_constant_of_shape});
  ops.push_back({.op_type = "Range", .infer = infer_range, .lower = lower_range, .evaluate = evaluate_range});
  ops.push_back({.op_type = "Reshape", .infer = infer_reshape, .lower = lower_view});
  ops.push_back({.op_type = "Flatten", .infer = infer_flatten, .lower = lower_view});
  ops.push_back({.op_type = "Squeeze", .infer = infer_squeeze, .lower = lower_view});
  ops.push_back({.op_type = "Unsqueeze", .infer = infer_unsqueeze, .lower = lower_view});
  ops.push_back({.op_type = "Transpose", .infer = infer_transpose, .lower = lower_transpose});
  ops.push_back({.op_type = "Concat", .infer = infer_concat, .lower = lower_concat});
  ops.push_back({.op_type = "Gather", .infer = infer_gather, .lower = lower_gather});
  ops.push_back({.op_type = "Expand", .infer = infer_expand, .lower = lower_expand});
  ops.push_back({.op_type = "Split", .infer = infer_split, .lower = lower_split});
  ops.push_back({.op_type = "Slice", .infer = infer_slice, .lower = lower_slice});
  ops.push_back({.op_type = "Cast", .infer = infer_cast, .lower = lower_cast});
  ops.push_back({.op_type = "CastLike", .infer = infer_cast_like, .lower = lower_cast});
}

}  // namespace kiln::planner
