// The kernels the CUDA backend runs, by the kernel names the planner lowers
// ONNX ops to, and which inputs each may write its output over. One table,
// read by both halves: the planner half places outputs in place only
// through these inputs (planner/cuda_planner.cc, which also says which ONNX
// ops lower onto them), and the runtime half refuses, at init, a kernel it
// does not list or an output sharing bytes with an input not declared here.
// No CUDA headers: the planner builds without the CUDA Toolkit.

#ifndef KILN_BACKENDS_CUDA_CUDA_KERNELS_H_
#define KILN_BACKENDS_CUDA_CUDA_KERNELS_H_

#include <stdint.h>
#include <string.h>

namespace kiln::backends::cuda {

struct KernelInfo {
  const char* name;
  // Bit i: the kernel may write output 0 over input i (same bytes).
  uint32_t inplace_inputs;
};

constexpr uint32_t kIn0 = 1u << 0;
constexpr uint32_t kIn01 = (1u << 0) | (1u << 1);

constexpr KernelInfo kKernels[] = {
    // elementwise: unary (each element read, then written, by one thread)
    // clang-format off
    {"Relu", kIn0}, {"Sigmoid", kIn0}, {"Tanh", kIn0}, {"Neg", kIn0}, {"Abs", kIn0}, {"Exp", kIn0},
    {"Log", kIn0}, {"Sqrt", kIn0}, {"Erf", kIn0}, {"Floor", kIn0}, {"Ceil", kIn0}, {"Reciprocal", kIn0},
    {"Softplus", kIn0}, {"LeakyRelu", kIn0}, {"Elu", kIn0}, {"HardSigmoid", kIn0}, {"HardSwish", kIn0},
    {"Gelu", kIn0}, {"Clip", kIn0},
    // clang-format on
    // elementwise: binary with broadcasting and a fused activation
    {"Add", kIn01},
    {"Sub", kIn01},
    {"Mul", kIn01},
    {"Div", kIn01},
    {"Max", kIn01},
    {"Min", kIn01},
    // linear: cuBLASLt on the GPU, the reference GEMM kernel under the host execution model; direct convolution
    {"Gemm", 0},
    {"MatMul", 0},
    {"Conv", 0},
    // pooling and reductions (one warp per output, shuffles)
    // clang-format off
    {"Pool", 0}, {"GlobalAveragePool", 0}, {"GlobalMaxPool", 0},
    {"ReduceSum", 0}, {"ReduceMean", 0}, {"ReduceMax", 0}, {"ReduceMin", 0}, {"ReduceProd", 0},
    {"ReduceL1", 0}, {"ReduceL2", 0}, {"ReduceLogSum", 0}, {"ReduceLogSumExp", 0}, {"ReduceSumSquare", 0},
    // clang-format on
    // normalisation (a block per row; LayerNormalization reads a row before writing it)
    {"Softmax", 0},
    {"LogSoftmax", 0},
    {"LayerNormalization", kIn0},
    {"BatchNormalization", kIn0},
    // data movement: one strided-copy kernel (Copy: views the planner cannot alias)
    {"Copy", kIn0},
    {"Transpose", 0},
    {"Slice", 0},
    {"Concat", 0},
    {"Split", 0},
};

// The entry for kernel `name`, or nullptr when the backend does not run it.
inline const KernelInfo* find_kernel(const char* name) {
  for (const KernelInfo& k : kKernels) {
    if (strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}

}  // namespace kiln::backends::cuda

#endif  // KILN_BACKENDS_CUDA_CUDA_KERNELS_H_
