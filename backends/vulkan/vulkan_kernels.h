// The kernels the Vulkan backend's shaders run, by the kernel names the
// planner lowers ONNX ops to, and which inputs each may write its output
// over. One table, read by both halves: the planner half places outputs in
// place only through these inputs, and the runtime half refuses, at init,
// a kernel it does not list or an output that shares bytes with an input
// not declared here. Which ONNX ops (and attributes) lower onto these
// kernels is the planner half's table (planner/vulkan_planner.cc).
// No Vulkan headers: the planner builds without Vulkan.

#ifndef KILN_BACKENDS_VULKAN_VULKAN_KERNELS_H_
#define KILN_BACKENDS_VULKAN_VULKAN_KERNELS_H_

#include <stdint.h>
#include <string.h>

namespace kiln::backends::vulkan {

struct KernelInfo {
  const char* name;
  // Bit i: the shader may write output 0 over input i (same bytes).
  uint32_t inplace_inputs;
};

constexpr uint32_t kIn0 = 1u << 0;
constexpr uint32_t kIn01 = (1u << 0) | (1u << 1);

constexpr KernelInfo kKernels[] = {
    // unary.comp (PowScalar: Pow with a scalar constant exponent)
    // clang-format off
    {"Relu", kIn0}, {"Sigmoid", kIn0}, {"Tanh", kIn0}, {"Neg", kIn0}, {"Abs", kIn0}, {"Exp", kIn0},
    {"Log", kIn0}, {"Sqrt", kIn0}, {"Erf", kIn0}, {"Floor", kIn0}, {"Ceil", kIn0}, {"Reciprocal", kIn0},
    {"Softplus", kIn0}, {"LeakyRelu", kIn0}, {"Elu", kIn0}, {"HardSigmoid", kIn0}, {"HardSwish", kIn0},
    {"Gelu", kIn0}, {"Clip", kIn0}, {"PowScalar", kIn0},
    // clang-format on
    // binary.comp
    {"Add", kIn01},
    {"Sub", kIn01},
    {"Mul", kIn01},
    {"Div", kIn01},
    {"Pow", kIn01},
    {"Max", kIn01},
    {"Min", kIn01},
    // reduce.comp
    // clang-format off
    {"ReduceSum", 0}, {"ReduceMean", 0}, {"ReduceMax", 0}, {"ReduceMin", 0}, {"ReduceProd", 0},
    {"ReduceL1", 0}, {"ReduceL2", 0}, {"ReduceLogSum", 0}, {"ReduceLogSumExp", 0}, {"ReduceSumSquare", 0},
    {"GlobalAveragePool", 0}, {"GlobalMaxPool", 0},
    // clang-format on
    // matmul.comp, conv.comp, pool.comp, softmax.comp
    {"Gemm", 0},
    {"MatMul", 0},
    {"Conv", 0},
    {"Pool", 0},
    {"Softmax", 0},
    {"LogSoftmax", 0},
    // layer_norm.comp, batch_norm.comp (each element read before it is written)
    {"LayerNormalization", kIn0},
    {"BatchNormalization", kIn0},
    // strided_copy.comp, copy_rows.comp (Copy: views the planner cannot alias)
    {"Copy", kIn0},
    {"Transpose", 0},
    {"Slice", 0},
    {"Concat", 0},
    {"Split", 0},
};

// The entry for kernel `name`, or nullptr when no shader runs it.
inline const KernelInfo* find_kernel(const char* name) {
  for (const KernelInfo& k : kKernels) {
    if (strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}

}  // namespace kiln::backends::vulkan

#endif  // KILN_BACKENDS_VULKAN_VULKAN_KERNELS_H_
