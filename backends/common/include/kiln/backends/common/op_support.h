// The ONNX ops the backends' planner halves take, and what each needs: the
// kernel the planner lowers it to (a backend takes the op when its kernel
// table holds that kernel), the inputs that must be constants (shape
// arguments the planner folds into the kernel's parameters; the op stays on
// the CPU when they are computed at run time), and any check beyond the
// operand rules every device applies. One table for every backend, so their
// planner halves cannot drift apart; each maps OpCheck to its own limits.

#ifndef KILN_BACKENDS_COMMON_OP_SUPPORT_H_
#define KILN_BACKENDS_COMMON_OP_SUPPORT_H_

#include <stdint.h>

namespace kiln::backends {

enum class OpCheck : uint8_t {
  kNone,
  kWindows1d2d,    // Conv, MaxPool, AveragePool: 1-D or 2-D windows (NCW, NCHW), no Indices output
  kMatMulBatches,  // MatMul: no more batch dims than the backend's GEMM walks
};

struct OnnxOp {
  const char* name;    // the ONNX op type
  const char* kernel;  // the kernel it lowers to
  OpCheck check;
  uint8_t num_constant_inputs;
  int constant_inputs[4];
};

constexpr OnnxOp kOnnxOps[] = {
    // clang-format off
    // Binary element-wise; Sum and Mean lower to Add (Mean: and Mul by 1/n),
    // Pow with a scalar constant exponent to a unary kernel where there is one.
    {"Add", "Add", OpCheck::kNone, 0, {}}, {"Sub", "Sub", OpCheck::kNone, 0, {}},
    {"Mul", "Mul", OpCheck::kNone, 0, {}}, {"Div", "Div", OpCheck::kNone, 0, {}},
    {"Pow", "Pow", OpCheck::kNone, 0, {}}, {"Max", "Max", OpCheck::kNone, 0, {}},
    {"Min", "Min", OpCheck::kNone, 0, {}}, {"Sum", "Add", OpCheck::kNone, 0, {}},
    {"Mean", "Add", OpCheck::kNone, 0, {}},
    // Unary element-wise; Clip's bounds become parameters when they are constants.
    {"Relu", "Relu", OpCheck::kNone, 0, {}}, {"Sigmoid", "Sigmoid", OpCheck::kNone, 0, {}},
    {"Tanh", "Tanh", OpCheck::kNone, 0, {}}, {"Neg", "Neg", OpCheck::kNone, 0, {}},
    {"Abs", "Abs", OpCheck::kNone, 0, {}}, {"Exp", "Exp", OpCheck::kNone, 0, {}},
    {"Log", "Log", OpCheck::kNone, 0, {}}, {"Sqrt", "Sqrt", OpCheck::kNone, 0, {}},
    {"Erf", "Erf", OpCheck::kNone, 0, {}}, {"Floor", "Floor", OpCheck::kNone, 0, {}},
    {"Ceil", "Ceil", OpCheck::kNone, 0, {}}, {"Reciprocal", "Reciprocal", OpCheck::kNone, 0, {}},
    {"Softplus", "Softplus", OpCheck::kNone, 0, {}}, {"LeakyRelu", "LeakyRelu", OpCheck::kNone, 0, {}},
    {"Elu", "Elu", OpCheck::kNone, 0, {}}, {"HardSigmoid", "HardSigmoid", OpCheck::kNone, 0, {}},
    {"HardSwish", "HardSwish", OpCheck::kNone, 0, {}}, {"Clip", "Clip", OpCheck::kNone, 2, {1, 2}},
    // Linear
    {"Gemm", "Gemm", OpCheck::kNone, 0, {}}, {"MatMul", "MatMul", OpCheck::kMatMulBatches, 0, {}},
    {"Conv", "Conv", OpCheck::kWindows1d2d, 0, {}},
    // Pooling and reductions (the axes of a reduction are a constant input)
    {"MaxPool", "Pool", OpCheck::kWindows1d2d, 0, {}}, {"AveragePool", "Pool", OpCheck::kWindows1d2d, 0, {}},
    {"GlobalAveragePool", "GlobalAveragePool", OpCheck::kNone, 0, {}},
    {"GlobalMaxPool", "GlobalMaxPool", OpCheck::kNone, 0, {}},
    {"ReduceSum", "ReduceSum", OpCheck::kNone, 1, {1}}, {"ReduceMean", "ReduceMean", OpCheck::kNone, 1, {1}},
    {"ReduceMax", "ReduceMax", OpCheck::kNone, 1, {1}}, {"ReduceMin", "ReduceMin", OpCheck::kNone, 1, {1}},
    {"ReduceProd", "ReduceProd", OpCheck::kNone, 1, {1}}, {"ReduceL1", "ReduceL1", OpCheck::kNone, 1, {1}},
    {"ReduceL2", "ReduceL2", OpCheck::kNone, 1, {1}}, {"ReduceLogSum", "ReduceLogSum", OpCheck::kNone, 1, {1}},
    {"ReduceLogSumExp", "ReduceLogSumExp", OpCheck::kNone, 1, {1}},
    {"ReduceSumSquare", "ReduceSumSquare", OpCheck::kNone, 1, {1}},
    // Normalisation
    {"Softmax", "Softmax", OpCheck::kNone, 0, {}}, {"LogSoftmax", "LogSoftmax", OpCheck::kNone, 0, {}},
    {"LayerNormalization", "LayerNormalization", OpCheck::kNone, 0, {}},
    {"BatchNormalization", "BatchNormalization", OpCheck::kNone, 0, {}},
    // Data movement
    {"Transpose", "Transpose", OpCheck::kNone, 0, {}}, {"Slice", "Slice", OpCheck::kNone, 4, {1, 2, 3, 4}},
    {"Concat", "Concat", OpCheck::kNone, 0, {}}, {"Split", "Split", OpCheck::kNone, 1, {1}},
    // Views: the planner aliases them (no work) or copies them (Copy).
    {"Reshape", "Copy", OpCheck::kNone, 1, {1}}, {"Squeeze", "Copy", OpCheck::kNone, 1, {1}},
    {"Unsqueeze", "Copy", OpCheck::kNone, 1, {1}}, {"Dropout", "Copy", OpCheck::kNone, 2, {1, 2}},
    {"Flatten", "Copy", OpCheck::kNone, 0, {}}, {"Identity", "Copy", OpCheck::kNone, 0, {}},
    // clang-format on
};

}  // namespace kiln::backends

#endif  // KILN_BACKENDS_COMMON_OP_SUPPORT_H_
