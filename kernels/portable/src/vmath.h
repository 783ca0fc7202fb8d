// Vectorised element-wise math for the x86-64 paths (vmath_x86.cc): one
// pass over n floats computing a transcendental or piecewise function with
// AVX2+FMA or AVX-512, whichever the ISA switch (kiln/kernels/isa.h)
// allows. Internal.
//
// Accuracy, measured against double precision by tests/kernels/math_test.cc
// over every path (the scalar reference is the C library's):
// (measured maxima in brackets, same on both paths):
//   exp          <= 2 ulp [1.24]  log          <= 1 ulp [0.72] (x > 0)
//   sigmoid      <= 3 ulp [2.44]  silu         <= 4 ulp, denormal results 1e-40 absolute
//   tanh         <= 3 ulp [1.27]  erf          <= 3 ulp [2.32]
//   gelu (erf)   <= 1e-7 absolute + 2 ulp [0.79]
//   gelu (tanh)  <= 1e-7 absolute + 3 ulp [0.77]
//   softplus     <= 4 ulp [2.75]
//   hard sigmoid <= 1 ulp, hard swish <= 2 ulp, leaky relu <= 1 ulp (one
//   fma and a clamp: the scalar loops round alpha x + beta twice)
//   elu          alpha (e^x - 1) as the scalar loop computes it
//   relu         exact
// Edges: NaN gives NaN; exp(+inf) = inf, exp(-inf) = 0 and results below
// FLT_MIN are denormals rounded once; log(0) = -inf, log(x < 0) = NaN,
// log(+inf) = inf, denormal inputs are exact; sigmoid, tanh, erf and the
// GELUs saturate at +-inf to their limits. Denormal inputs are never
// flushed to zero.

#ifndef KILN_KERNELS_PORTABLE_SRC_VMATH_H_
#define KILN_KERNELS_PORTABLE_SRC_VMATH_H_

#include <stdint.h>

namespace kiln {
namespace kernels {

enum class MathOp : uint8_t {
  kExp,
  kLog,
  kSigmoid,
  kSilu,         // x * sigmoid(x)
  kTanh,
  kErf,
  kGelu,         // 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,     // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  kHardSigmoid,  // clamp(alpha x + beta, 0, 1)
  kHardSwish,    // x * clamp(alpha x + beta, 0, 1)
  kLeakyRelu,    // x >= 0 ? x : alpha x
  kSoftplus,     // x > 20 ? x : log(1 + exp(x))
  kElu,          // x >= 0 ? x : alpha (exp(x) - 1)
  kRelu,         // x > 0 ? x : 0 (NaN gives 0, as the scalar loop)
};

// out[i] = op(in[i]) for i < n (in == out allowed) on the best vector path
// the ISA switch allows; false, having done nothing, where there is none
// (scalar path, or not x86-64): the caller runs its scalar loop.
bool vector_math(MathOp op, const float* in, float* out, int64_t n, float alpha = 0.f, float beta = 0.f);

// The same on one chosen path (for tests): 2 = AVX-512, 1 = AVX2, 3 = NEON
// (vmath_neon.cc, the same polynomials over 4 lanes); false
// when the processor or the switch does not allow it.
bool vector_math_on(int path, MathOp op, const float* in, float* out, int64_t n, float alpha = 0.f,
                    float beta = 0.f);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_PORTABLE_SRC_VMATH_H_
