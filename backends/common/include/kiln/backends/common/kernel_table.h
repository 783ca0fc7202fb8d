// Which kernels a backend runs, by the kernel names the planner lowers ONNX
// ops to, and which inputs each may write its output over. A backend's
// table is read by both its halves: the planner half places outputs in
// place only through the inputs it declares, and the runtime half refuses,
// at init, a kernel it does not list or an output sharing bytes with an
// input not declared (check_inplace, delegate_graph.h).
//
// The in-place markers are the runtime's (kInplaceInput0, ...: bit i, the
// kernel may write output 0 over input i because it reads each element of
// that input before writing the output element in the same place).
//
// kDeviceKernels is the set every device backend (CUDA, Vulkan) runs, the
// names and parameters of the CPU kernels; a backend's table is
// that set and its own kernels beside it.
//
// The unary, binary and reduction kernels a device serves with one kernel
// (or shader) each are listed again in a fixed order below: a backend's op
// code for one of them is its index there, which the backend checks at
// compile time (kernel_index). No device headers: the planner builds
// without them.

#ifndef KILN_BACKENDS_COMMON_KERNEL_TABLE_H_
#define KILN_BACKENDS_COMMON_KERNEL_TABLE_H_

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kiln/runtime/kernel.h"

namespace kiln::backends {

struct KernelInfo {
  const char* name;
  uint32_t inplace_inputs;  // kInplaceInput0 | ...
};

constexpr uint32_t kInplaceInputs01 = kInplaceInput0 | kInplaceInput1;

constexpr KernelInfo kDeviceKernels[] = {
    // element-wise, unary (each element read, then written, by one thread)
    // clang-format off
    {"Relu", kInplaceInput0}, {"Sigmoid", kInplaceInput0}, {"Tanh", kInplaceInput0}, {"Neg", kInplaceInput0},
    {"Abs", kInplaceInput0}, {"Exp", kInplaceInput0}, {"Log", kInplaceInput0}, {"Sqrt", kInplaceInput0},
    {"Erf", kInplaceInput0}, {"Floor", kInplaceInput0}, {"Ceil", kInplaceInput0}, {"Reciprocal", kInplaceInput0},
    {"Softplus", kInplaceInput0}, {"LeakyRelu", kInplaceInput0}, {"Elu", kInplaceInput0},
    {"HardSigmoid", kInplaceInput0}, {"HardSwish", kInplaceInput0}, {"Gelu", kInplaceInput0},
    {"Clip", kInplaceInput0},
    // element-wise, binary with broadcasting and a fused activation
    {"Add", kInplaceInputs01}, {"Sub", kInplaceInputs01}, {"Mul", kInplaceInputs01}, {"Div", kInplaceInputs01},
    {"Max", kInplaceInputs01}, {"Min", kInplaceInputs01},
    // linear
    {"Gemm", 0}, {"MatMul", 0}, {"Conv", 0},
    // pooling and reductions
    {"Pool", 0}, {"GlobalAveragePool", 0}, {"GlobalMaxPool", 0},
    {"ReduceSum", 0}, {"ReduceMean", 0}, {"ReduceMax", 0}, {"ReduceMin", 0}, {"ReduceProd", 0},
    {"ReduceL1", 0}, {"ReduceL2", 0}, {"ReduceLogSum", 0}, {"ReduceLogSumExp", 0}, {"ReduceSumSquare", 0},
    // normalisation (LayerNormalization and BatchNormalization read each
    // element before writing it)
    {"Softmax", 0}, {"LogSoftmax", 0}, {"LayerNormalization", kInplaceInput0},
    {"BatchNormalization", kInplaceInput0},
    // data movement (Copy: views the planner cannot alias)
    {"Copy", kInplaceInput0}, {"Transpose", 0}, {"Slice", 0}, {"Concat", 0}, {"Split", 0},
    // clang-format on
};

// A backend's kernels: the device kernels when `device_kernels`, and
// `count` of its own at `own`.
struct KernelTable {
  bool device_kernels = true;
  const KernelInfo* own = nullptr;
  size_t count = 0;

  // The entry for kernel `name`, or nullptr when the backend does not run it.
  const KernelInfo* find(const char* name) const {
    if (device_kernels) {
      for (const KernelInfo& k : kDeviceKernels) {
        if (strcmp(k.name, name) == 0) return &k;
      }
    }
    for (size_t i = 0; i < count; ++i) {
      if (strcmp(own[i].name, name) == 0) return &own[i];
    }
    return nullptr;
  }

  // Calls f(const KernelInfo&) for every kernel.
  template <typename F>
  void for_each(F f) const {
    if (device_kernels) {
      for (const KernelInfo& k : kDeviceKernels) f(k);
    }
    for (size_t i = 0; i < count; ++i) f(own[i]);
  }
};

// Unary element-wise kernels; alpha and beta are the ONNX attributes'
// defaults, for a call without UnaryParams.
struct UnaryKernel {
  const char* name;
  float alpha, beta;
};

constexpr UnaryKernel kUnaryKernels[] = {
    // clang-format off
    {"Relu", 0.f, 0.f}, {"Sigmoid", 0.f, 0.f}, {"Tanh", 0.f, 0.f}, {"Neg", 0.f, 0.f}, {"Abs", 0.f, 0.f},
    {"Exp", 0.f, 0.f}, {"Log", 0.f, 0.f}, {"Sqrt", 0.f, 0.f}, {"Erf", 0.f, 0.f}, {"Floor", 0.f, 0.f},
    {"Ceil", 0.f, 0.f}, {"Reciprocal", 0.f, 0.f}, {"Softplus", 0.f, 0.f}, {"LeakyRelu", 0.01f, 0.f},
    {"Elu", 1.f, 0.f}, {"HardSigmoid", 0.2f, 0.5f}, {"HardSwish", 0.f, 0.f}, {"Gelu", 0.f, 0.f},
    {"Clip", -INFINITY, INFINITY},  // bounds from the parameters (constants, or the op stays on the CPU)
    {"PowScalar", 1.f, 0.f},        // Pow with a scalar constant exponent (alpha)
    // clang-format on
};

constexpr const char* kBinaryKernels[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};

constexpr const char* kReduceKernels[] = {"ReduceSum",       "ReduceMean",     "ReduceMax", "ReduceMin",
                                          "ReduceProd",      "ReduceL1",       "ReduceL2",  "ReduceLogSum",
                                          "ReduceLogSumExp", "ReduceSumSquare"};

constexpr bool same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The index of kernel `name` in one of the tables above, or -1; constexpr,
// for the backends' static_asserts on their op codes.
constexpr int kernel_index(const UnaryKernel* table, size_t count, const char* name) {
  for (size_t i = 0; i < count; ++i) {
    if (same_name(table[i].name, name)) return static_cast<int>(i);
  }
  return -1;
}
constexpr int kernel_index(const char* const* table, size_t count, const char* name) {
  for (size_t i = 0; i < count; ++i) {
    if (same_name(table[i], name)) return static_cast<int>(i);
  }
  return -1;
}
template <typename T, size_t N>
constexpr int kernel_index(const T (&table)[N], const char* name) {
  return kernel_index(table, N, name);
}

}  // namespace kiln::backends

#endif  // KILN_BACKENDS_COMMON_KERNEL_TABLE_H_
