// Helpers shared by the CPU kernels: load-time checks that log what is
// wrong and return kInvalidProgram, and shape arithmetic. Internal.

#ifndef KILN_KERNELS_CPU_SRC_KERNEL_UTIL_H_
#define KILN_KERNELS_CPU_SRC_KERNEL_UTIL_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/backends/common/shape.h"
#include "kiln/kernels/float16.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/log.h"

// In a check function: fails the check with a message naming the node.
#define KILN_KERNEL_CHECK(args, cond, fmt, ...)                            \
  do {                                                                     \
    if (!(cond)) {                                                         \
      KILN_LOG(ERROR, "node '%s': " fmt, (args).node_name, ##__VA_ARGS__); \
      return ::kiln::Error::kInvalidProgram;                               \
    }                                                                      \
  } while (0)

namespace kiln {
namespace kernels {

// Shapes and strides: the backends' shared helpers (backends/common), so the
// CPU kernels and the device lowerings agree on broadcasting.
using backends::broadcast_strides;
using backends::contiguous_strides;
using backends::dims_product;
using backends::same_shape;

// Checks the operand counts: inputs in [min_in, max_in], outputs == n_out.
Error check_arity(const KernelArgs& args, uint32_t min_in, uint32_t max_in, uint32_t n_out, uint32_t n_scratch = 0);
// Checks that every present input and every output has `dtype`.
Error check_all_dtype(const KernelArgs& args, DType dtype);
// Weights the planner packed in BF16 (kiln plan --precision bf16): input 1
// is BFLOAT16, in gemm_blocking.h's BF16 layouts.
bool bf16_weights(const KernelArgs& args);
// The dtypes of a linear kernel (Conv, ConvWinograd, Gemm, MatMul):
// float32 throughout, except packed weights (`packed`: input 1 packed by
// the planner), which may be BF16 where this processor multiplies BF16;
// otherwise such a program is refused (kNotSupported), at load, in one line.
Error check_linear_dtypes(const KernelArgs& args, bool packed);
Error check_same_shape(const KernelArgs& args, const Tensor& a, const Tensor& b, const char* what);

// True when a vector of 8-byte values from the program is 8-byte aligned
// (the flatbuffers verifier does not check element alignment).
template <typename T>
bool aligned8(const flatbuffers::Vector<T>* v) {
  return v == nullptr || reinterpret_cast<uintptr_t>(v->data()) % 8 == 0;
}

// a * b and a + b into *out; false (and *out untouched) when they overflow.
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

// Checks that inputs [first, first + count) broadcast to output 0 and that
// its shape is exactly their broadcast (no larger).
Error check_broadcast_output(const KernelArgs& args, uint32_t first, uint32_t count);

// GenericParams (schema/program.fbs): check_params checks that the
// instruction carries at least `ints` integers and `floats` floats; after
// it, param_int and param_float read them.
Error check_params(const KernelArgs& args, uint32_t ints, uint32_t floats);
int64_t param_int(const KernelArgs& args, uint32_t i);
float param_float(const KernelArgs& args, uint32_t i);

// A binary element-wise Op (broadcast.h's binary_map) applied to float16
// bits: both operands widened to float32, the result rounded back.
template <typename Op>
struct Float16Op {
  static uint16_t apply(uint16_t a, uint16_t b) { return float_to_half(Op::apply(half_to_float(a), half_to_float(b))); }
};

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_KERNEL_UTIL_H_
