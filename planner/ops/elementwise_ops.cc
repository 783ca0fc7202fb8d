// Element-wise ops: binary arithmetic with broadcasting, unary math and
// activations, comparisons and logic, Where, Identity and Dropout.

#include <algorithm>
#include <limits>

#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

const std::initializer_list<DType> kArithmeticTypes = {DType::FLOAT32, DType::INT32, DType::INT64, DType::UINT8};

void infer_binary(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, kArithmeticTypes);
  if (ctx.dtype(1) != ctx.dtype(0)) {
    ctx.error("inputs are ", dtype_str(ctx.dtype(0)), " and ", dtype_str(ctx.dtype(1)));
  }
  ctx.set_output(0, ctx.dtype(0), broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)));
}

void lower_binary(OpContext& ctx, LoweringContext& l) {
  fb::BinaryParamsT p;
  p.activation = fused_activation(ctx.node());
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel(ctx.node().op_type, {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           std::move(params));
}

// Pow: the base is float32, int32 or int64 (the output's dtype), the
// exponent float32 or a 32/64-bit integer. A constant scalar exponent of a
// float32 base becomes a unary kernel.
bool pow_is_scalar(OpContext& ctx) {
  return ctx.input(1).is_constant() && ctx.input(1).constant->numel() == 1 && ctx.dtype(0) == DType::FLOAT32;
}

void infer_pow(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::FLOAT32, DType::INT32, DType::INT64});
  ctx.expect_dtype(1, {DType::FLOAT32, DType::INT32, DType::INT64, DType::UINT32, DType::UINT64});
  ctx.set_output(0, ctx.dtype(0), broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)));
}

void lower_pow(OpContext& ctx, LoweringContext& l) {
  if (pow_is_scalar(ctx) && ctx.output(0).shape == ctx.shape(0)) {
    fb::UnaryParamsT p;
    p.alpha = static_cast<float>(ctx.input(1).constant->float_at(0));
    fb::ParamsUnion params;
    params.Set(std::move(p));
    l.kernel("PowScalar", {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))}, std::move(params));
    return;
  }
  l.kernel("Pow", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))});
}

// PRelu: the slope broadcasts to X (one way).
void infer_prelu(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.expect_dtype(1, {DType::FLOAT32});
  if (broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)) != ctx.shape(0)) {
    ctx.error("slope ", shape_str(ctx.shape(1)), " does not broadcast to X ", shape_str(ctx.shape(0)));
  }
  ctx.set_output(0, DType::FLOAT32, ctx.shape(0));
}

// Max, Min, Sum, Mean: one or more inputs, broadcast together.
void infer_variadic(OpContext& ctx) {
  ctx.expect_inputs(1, 64);
  const std::string& op = ctx.node().op_type;
  if (op == "Mean") {
    ctx.expect_dtype(0, {DType::FLOAT32});
  } else if (op == "Sum") {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::INT32, DType::INT64});
  } else {  // Max, Min
    ctx.expect_dtype(0, {DType::FLOAT16, DType::FLOAT32, DType::FLOAT64, DType::INT8, DType::INT16, DType::INT32,
                         DType::INT64, DType::UINT8, DType::UINT16, DType::UINT32, DType::UINT64});
  }
  std::vector<int64_t> shape = ctx.shape(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.dtype(i) != ctx.dtype(0)) ctx.error("inputs differ in dtype");
    shape = broadcast_shapes(ctx, shape, ctx.shape(i));
  }
  ctx.set_output(0, ctx.dtype(0), shape);
}

void lower_variadic(OpContext& ctx, LoweringContext& l) {
  const std::string& op = ctx.node().op_type;
  const std::string kernel = op == "Sum" || op == "Mean" ? "Add" : op;
  const int out = l.tensor(ctx.output_id(0));
  const DType dtype = ctx.dtype(0);
  if (ctx.num_inputs() == 1 && op != "Mean") {
    l.view(l.tensor(ctx.input_id(0)), out);
    return;
  }
  int acc = l.tensor(ctx.input_id(0));
  std::vector<int64_t> shape = ctx.shape(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    shape = broadcast_shapes(ctx, shape, ctx.shape(i));
    const bool last = i + 1 == ctx.num_inputs() && op != "Mean";
    const int dst = last ? out : l.temp(ctx.node().name + "/" + op, dtype, shape);
    fb::ParamsUnion params;
    params.Set(fb::BinaryParamsT());
    l.kernel(kernel, {acc, l.tensor(ctx.input_id(i))}, {dst}, std::move(params));
    acc = dst;
  }
  if (op == "Mean") {
    const int scale =
        l.constant(ctx.node().name + "/count", HostTensor::scalar_float(1.f / static_cast<float>(ctx.num_inputs())));
    fb::ParamsUnion params;
    params.Set(fb::BinaryParamsT());
    if (ctx.num_inputs() == 1 && ctx.output(0).shape != shape) ctx.error("shape mismatch");
    l.kernel("Mul", {acc, scale}, {out}, std::move(params));
  }
}

void infer_unary(OpContext& ctx) {
  ctx.expect_inputs(1, 1);
  const std::string& op = ctx.node().op_type;
  if (op == "Neg" || op == "Abs") {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::INT32, DType::INT64});
  } else {
    ctx.expect_dtype(0, {DType::FLOAT32});
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

// Attribute defaults of the activations that carry alpha/beta.
struct UnaryAttrs {
  const char* op;
  float alpha;
  float beta;
};
constexpr UnaryAttrs kUnaryAttrs[] = {
    {"LeakyRelu", 0.01f, 0.f},
    {"Elu", 1.f, 0.f},
    {"HardSigmoid", 0.2f, 0.5f},
};

void lower_unary(OpContext& ctx, LoweringContext& l) {
  const std::string& op = ctx.node().op_type;
  fb::ParamsUnion params;
  for (const UnaryAttrs& attrs : kUnaryAttrs) {
    if (op == attrs.op) {
      fb::UnaryParamsT p;
      p.alpha = ctx.attr_float("alpha", attrs.alpha);
      p.beta = ctx.attr_float("beta", attrs.beta);
      params.Set(std::move(p));
    }
  }
  l.kernel(op, {l.tensor(ctx.input_id(0))}, {l.tensor(ctx.output_id(0))}, std::move(params));
}

// Clip: bounds are attributes before opset 11, optional scalar inputs after.
// Constant float bounds go into the parameters; integer bounds stay inputs.
void infer_clip(OpContext& ctx) {
  ctx.expect_inputs(1, 3);
  ctx.expect_dtype(0, {DType::FLOAT32, DType::INT8, DType::UINT8, DType::INT32, DType::INT64});
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.dtype(i) != ctx.dtype(0)) {
      ctx.error("bound ", i, " is ", dtype_str(ctx.dtype(i)), ", the input ", dtype_str(ctx.dtype(0)));
    }
    if (shape_numel(ctx.shape(i)) != 1) ctx.error("bound ", i, " must be a scalar");
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
}

void lower_clip(OpContext& ctx, LoweringContext& l) {
  const bool is_float = ctx.dtype(0) == DType::FLOAT32;
  fb::UnaryParamsT p;
  p.alpha = ctx.attr_float("min", -std::numeric_limits<float>::infinity());
  p.beta = ctx.attr_float("max", std::numeric_limits<float>::infinity());
  std::vector<int> inputs = {l.tensor(ctx.input_id(0))};
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (is_float && ctx.input(i).is_constant()) {
      (i == 1 ? p.alpha : p.beta) = static_cast<float>(ctx.input(i).constant->float_at(0));
    } else {
      inputs.resize(i + 1, -1);
      inputs[i] = l.tensor(ctx.input_id(i));
    }
  }
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Clip", inputs, {l.tensor(ctx.output_id(0))}, std::move(params));
}

// Comparisons (bool output), logic on bools, Where.
void infer_compare(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  if (ctx.node().op_type == "Equal") {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64, DType::INT32, DType::INT64, DType::BOOL});
  } else {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64, DType::INT32, DType::INT64});
  }
  if (ctx.dtype(1) != ctx.dtype(0)) ctx.error("inputs are ", dtype_str(ctx.dtype(0)), " and ", dtype_str(ctx.dtype(1)));
  ctx.set_output(0, DType::BOOL, broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)));
}

void infer_logical(OpContext& ctx) {
  const bool is_not = ctx.node().op_type == "Not";
  ctx.expect_inputs(is_not ? 1 : 2, is_not ? 1 : 2);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) ctx.expect_dtype(i, {DType::BOOL});
  ctx.set_output(0, DType::BOOL, is_not ? ctx.shape(0) : broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)));
}

void lower_plain(OpContext& ctx, LoweringContext& l) {
  std::vector<int> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(l.tensor(ctx.input_id(i)));
  l.kernel(ctx.node().op_type, inputs, {l.tensor(ctx.output_id(0))});
}

void infer_where(OpContext& ctx) {
  ctx.expect_inputs(3, 3);
  ctx.expect_dtype(0, {DType::BOOL});
  if (ctx.dtype(1) != ctx.dtype(2)) {
    ctx.error("X and Y are ", dtype_str(ctx.dtype(1)), " and ", dtype_str(ctx.dtype(2)));
  }
  const auto shape = broadcast_shapes(ctx, broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1)), ctx.shape(2));
  if (shape.size() > 8) ctx.not_supported("rank above 8");
  ctx.set_output(0, ctx.dtype(1), shape);
}

// Identity and Dropout pass their input through. Dropout drops nothing
// outside training mode, or in training mode with ratio 0 (both must be
// known at plan time); its optional mask output is then all true.
DType dropout_mask_dtype(OpContext& ctx) { return ctx.opset() >= 10 ? DType::BOOL : ctx.dtype(0); }

void check_dropout(OpContext& ctx) {
  if (ctx.opset() < 7 && ctx.attr_int("is_test", 0) == 0) ctx.not_supported("training mode (is_test = 0)");
  if (!ctx.has_input(2) || ctx.constant_input(2, "training_mode").int_at(0) == 0) return;
  const double ratio = ctx.has_input(1) ? ctx.constant_input(1, "ratio").float_at(0) : 0.5;
  if (ratio != 0.0) ctx.not_supported("training mode with a non-zero ratio (random)");
}

void infer_identity(OpContext& ctx) {
  const bool dropout = ctx.node().op_type == "Dropout";
  ctx.expect_inputs(1, dropout ? 3 : 1);
  if (dropout) check_dropout(ctx);
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  if (dropout) ctx.set_output(1, dropout_mask_dtype(ctx), ctx.shape(0));
}

void lower_identity(OpContext& ctx, LoweringContext& l) {
  l.view(l.tensor(ctx.input_id(0)), l.tensor(ctx.output_id(0)));
  if (ctx.node().op_type == "Dropout" && ctx.has_output(1)) {
    HostTensor ones(dropout_mask_dtype(ctx), ctx.shape(0));
    if (ones.dtype == DType::BOOL) {
      std::fill(ones.bytes.begin(), ones.bytes.end(), uint8_t{1});
    } else {
      if (ones.dtype != DType::FLOAT32) ctx.not_supported("a mask of ", dtype_str(ones.dtype));
      std::fill(ones.data<float>(), ones.data<float>() + ones.numel(), 1.f);
    }
    l.view(l.constant(ctx.node().name + "/mask", std::move(ones)), l.tensor(ctx.output_id(1)));
  }
}

}  // namespace

void add_elementwise_ops(std::vector<OpDef>& ops) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    ops.push_back({.op_type = op, .infer = infer_binary, .lower = lower_binary});
  }
  ops.push_back({.op_type = "Pow", .infer = infer_pow, .lower = lower_pow});
  ops.push_back({.op_type = "PRelu", .infer = infer_prelu, .lower = lower_plain});
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    ops.push_back({.op_type = op, .infer = infer_variadic, .lower = lower_variadic});
  }
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp", "Log", "Sqrt", "Erf", "Floor", "Ceil",
                         "Reciprocal", "Softplus", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish"}) {
    ops.push_back({.op_type = op, .infer = infer_unary, .lower = lower_unary});
  }
  // ONNX Runtime's contrib Gelu (the exact, erf-based one), which its graph
  // optimizer writes in place of the Div/Erf/Add/Mul/Mul chain exporters emit.
  ops.push_back({.op_type = "Gelu", .domain = "com.microsoft", .infer = infer_unary, .lower = lower_unary});
  // x * sigmoid(x) in one pass: no ONNX op before opset 24's Swish; the
  // planner writes it where it fuses Mul(x, Sigmoid(x)) (passes/fuse.h).
  ops.push_back({.op_type = "Silu", .domain = "kiln", .infer = infer_unary, .lower = lower_unary});
  ops.push_back({.op_type = "Clip", .infer = infer_clip, .lower = lower_clip});
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    ops.push_back({.op_type = op, .infer = infer_compare, .lower = lower_plain});
  }
  for (const char* op : {"And", "Or", "Xor", "Not"}) {
    ops.push_back({.op_type = op, .infer = infer_logical, .lower = lower_plain});
  }
  ops.push_back({.op_type = "Where", .infer = infer_where, .lower = lower_plain});
  ops.push_back({.op_type = "Identity", .infer = infer_identity, .lower = lower_identity});
  ops.push_back({.op_type = "Dropout", .infer = infer_identity, .lower = lower_identity});
}

}  // namespace kiln::planner
