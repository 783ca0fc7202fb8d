// Element-wise reduction of N host arrays into one, for the communicators'
// host all-reduces (mpi-shm, cuda-ipc's fallback): the inputs are read in rank order 0..N-1, so every rank that
// reduces the same elements gets the same bits. Works block by block through
// a stack accumulator (the output may be one of the inputs: each block is
// read completely before it is written). 16-bit floats accumulate in
// float32 and round once; INT32 SUM and PROD wrap around. No allocation.

#ifndef KILN_COMM_REDUCE_H_
#define KILN_COMM_REDUCE_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/kernels/float16.h"
#include "kiln/runtime/tensor.h"

namespace kiln {
namespace comm {
namespace internal {

struct Float32 {
  using T = float;
  using A = float;
  static A load(T v) { return v; }
  static T store(A a) { return a; }
};
struct Float16 {
  using T = uint16_t;
  using A = float;
  static A load(T v) { return half_to_float(v); }
  static T store(A a) { return float_to_half(a); }
};
struct BFloat16 {
  using T = uint16_t;
  using A = float;
  static A load(T v) { return bfloat16_to_float(v); }
  static T store(A a) { return float_to_bfloat16(a); }
};
struct Int32 {
  using T = int32_t;
  using A = int32_t;
  static A load(T v) { return v; }
  static T store(A a) { return a; }
};

struct Sum {
  static float apply(float a, float b) { return a + b; }
  static int32_t apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
};
struct Prod {
  static float apply(float a, float b) { return a * b; }
  static int32_t apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
  }
};
struct Max {
  template <typename A>
  static A apply(A a, A b) {
    return b > a ? b : a;
  }
};
struct Min {
  template <typename A>
  static A apply(A a, A b) {
    return b < a ? b : a;
  }
};

// Elements [b, b + m) of inputs[0..n) into dst, through `acc`. Inlined
// into reduce_range, where full blocks give it a constant `m` (the
// vectoriser of -O2 wants a known trip count).
template <typename Traits, typename Op>
__attribute__((always_inline)) inline void reduce_block(const void* const* inputs, uint32_t n, typename Traits::T* dst,
                                                        size_t b, size_t m, uint32_t divisor, typename Traits::A* acc) {
  using T = typename Traits::T;
  using A = typename Traits::A;
  const T* src = static_cast<const T*>(inputs[0]) + b;
  for (size_t k = 0; k < m; ++k) acc[k] = Traits::load(src[k]);
  for (uint32_t p = 1; p < n; ++p) {
    src = static_cast<const T*>(inputs[p]) + b;
    for (size_t k = 0; k < m; ++k) acc[k] = Op::apply(acc[k], Traits::load(src[k]));
  }
  if (divisor > 0) {
    const A d = static_cast<A>(divisor);
    for (size_t k = 0; k < m; ++k) acc[k] = acc[k] / d;
  }
  for (size_t k = 0; k < m; ++k) dst[b + k] = Traits::store(acc[k]);
}

// Elements [begin, end) of inputs[0..n) into out (element indices).
// `divisor` > 0 divides the result (AVERAGE).
template <typename Traits, typename Op>
void reduce_range(const void* const* inputs, uint32_t n, void* out, size_t begin, size_t end, uint32_t divisor) {
  constexpr size_t kBlock = 512;
  typename Traits::A acc[kBlock];
  typename Traits::T* dst = static_cast<typename Traits::T*>(out);
  size_t b = begin;
  for (; end - b >= kBlock; b += kBlock) reduce_block<Traits, Op>(inputs, n, dst, b, kBlock, divisor, acc);
  if (b < end) reduce_block<Traits, Op>(inputs, n, dst, b, end - b, divisor, acc);
}

// False for a dtype or op it does not reduce.
template <typename Traits>
bool reduce_op(fb::ReduceOp op, const void* const* inputs, uint32_t n, void* out, size_t begin, size_t end) {
  switch (op) {
    case fb::ReduceOp::SUM: reduce_range<Traits, Sum>(inputs, n, out, begin, end, 0); return true;
    case fb::ReduceOp::PROD: reduce_range<Traits, Prod>(inputs, n, out, begin, end, 0); return true;
    case fb::ReduceOp::MAXIMUM: reduce_range<Traits, Max>(inputs, n, out, begin, end, 0); return true;
    case fb::ReduceOp::MINIMUM: reduce_range<Traits, Min>(inputs, n, out, begin, end, 0); return true;
    case fb::ReduceOp::AVERAGE: reduce_range<Traits, Sum>(inputs, n, out, begin, end, n); return true;
  }
  return false;
}

inline bool reduce(DType dtype, fb::ReduceOp op, const void* const* inputs, uint32_t n, void* out, size_t begin,
                   size_t end) {
  switch (dtype) {
    case DType::FLOAT32: return reduce_op<Float32>(op, inputs, n, out, begin, end);
    case DType::FLOAT16: return reduce_op<Float16>(op, inputs, n, out, begin, end);
    case DType::BFLOAT16: return reduce_op<BFloat16>(op, inputs, n, out, begin, end);
    case DType::INT32: return reduce_op<Int32>(op, inputs, n, out, begin, end);
    default: return false;
  }
}

inline bool reducible(DType dtype, fb::ReduceOp op) {
  const bool dtype_ok =
      dtype == DType::FLOAT32 || dtype == DType::FLOAT16 || dtype == DType::BFLOAT16 || dtype == DType::INT32;
  return dtype_ok && static_cast<uint32_t>(op) <= static_cast<uint32_t>(fb::ReduceOp::AVERAGE);
}

}  // namespace internal
}  // namespace comm
}  // namespace kiln

#endif  // KILN_COMM_REDUCE_H_
