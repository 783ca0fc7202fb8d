// Vectorised element-wise math (vmath.cc): one pass over n floats
// computing a transcendental or piecewise function with AVX2+FMA or
// AVX-512 (x86/vmath_avx2.cc, x86/vmath_avx512.cc) or NEON
// (arm/vmath_neon.cc), whichever the ISA switch (kiln/kernels/isa.h)
// allows; all three compile the one body of vmath_body.inc. Internal.
//
// Accuracy, measured against double precision by tests/kernels/math_test.cc
// over every path (the scalar reference is the C library's):
// (measured maxima in brackets, same on every path; for the quotients
// below over every third or fifth float):
//   exp          <= 2 ulp [1.24]  log          <= 1 ulp [0.72] (x > 0)
//   tanh         <= 6 ulp [5.44]  erf          <= 7 ulp [5.95]
//   sigmoid      <= 2e-7 absolute [1.86e-7], and <= 4 ulp where x >= 0
//                [3.12]: a rational function, not e^x, so results below
//                about 1e-6 keep an absolute error only (sigmoid(-17) is
//                4.1e-8 to within 3e-8; from -18.5 down it is 0)
//   silu         <= 2e-7 |x| + 1 ulp (x sigmoid(x))
//   gelu (erf)   <= 2e-7 |x| + 1 ulp (x Phi(x), Phi a quotient as sigmoid)
//   gelu (tanh)  <= 3e-7 |x| + 1 ulp (x sigmoid(2 u), u the tanh's argument)
//   softplus     <= 4 ulp [2.75]
//   hard sigmoid <= 1 ulp, hard swish <= 2 ulp, leaky relu <= 1 ulp (one
//   fma and a clamp: the scalar loops round alpha x + beta twice)
//   elu          alpha (e^x - 1) as the scalar loop computes it
//   relu         exact
// Edges: NaN gives NaN; exp(+inf) = inf, exp(-inf) = 0 and results below
// FLT_MIN are denormals rounded once; log(0) = -inf, log(x < 0) = NaN,
// log(+inf) = inf, denormal inputs are exact; sigmoid, tanh, erf and the
// GELUs saturate at +-inf to their limits (tanh is +-1 from |x| >= 9.25,
// erf from 3.92, sigmoid 0 and 1 from |x| >= 18.5, the erf GELU -0 and x
// from 5.75; each stays within its range; tanh(x) = x for |x| <= 1e-30,
// signed zeros and denormals included).
// Denormal inputs are never flushed to zero. The scalar path keeps the C
// library's functions, within every bound above.

#ifndef KILN_KERNELS_CPU_SRC_VMATH_H_
#define KILN_KERNELS_CPU_SRC_VMATH_H_

#include <math.h>
#include <stdint.h>

namespace kiln {
namespace kernels {

// erf's polynomials for erf_portable below (the vector paths use a
// quotient, vmath_body.inc): |x| < 1: x P(x^2) (kErfSmall, degree 6);
// above, 1 - e^(Q(|x| - 1)) (kErfLarge, degree 8, fitted to log erfc on
// [1, 3.92]).
constexpr float kErfSmall[] = {7.9334233305417e-05f,  -0.0008034828351810575f, 0.0051912167109549046f,
                               -0.02685539796948433f, 0.11283625662326813f,    -0.3761262893676758f,
                               1.128379225730896f};
constexpr float kErfLarge[] = {1.6449591839773348e-06f, -3.3021173294400796e-05f, 0.0003203694068361074f,
                               -0.002054204698652029f,  0.010077053681015968f,    -0.041574664413928986f,
                               -0.8431053757667542f,    -2.638967514038086f,      -1.8496055603027344f};

// erf of one float with those polynomials and the C library's expf: what
// firmware's fused GELU uses instead of the C library's erff, which would
// pull about 2 KB (newlib's erff and erfcf) into every image whose
// kernels apply a fused activation. Within 3 ulp (tests/kernels/math_test.cc).
inline float erf_portable(float x) {
  const float ax = fabsf(x);
  if (!(ax < 1.f)) {
    if (ax != ax) return x;
    const float u = (ax < 3.92f ? ax : 3.92f) - 1.f;
    float q = kErfLarge[0];
    for (int i = 1; i <= 8; ++i) q = q * u + kErfLarge[i];
    return copysignf(1.f - expf(q), x);
  }
  const float z = x * x;
  float p = kErfSmall[0];
  for (int i = 1; i <= 6; ++i) p = p * z + kErfSmall[i];
  return x * p;
}

enum class MathOp : uint8_t {
  kExp,
  kLog,
  kSigmoid,
  kSilu,  // x * sigmoid(x)
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
// (the same polynomials over 4 lanes); false when the processor or the
// switch does not allow it.
bool vector_math_on(int path, MathOp op, const float* in, float* out, int64_t n, float alpha = 0.f, float beta = 0.f);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_VMATH_H_
