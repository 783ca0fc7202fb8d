// vector_math (vmath.h): the path the ISA switch allows, x86/vmath_avx2.cc,
// x86/vmath_avx512.cc or arm/vmath_neon.cc; none elsewhere (the caller
// runs its scalar loop).

#include "vmath.h"

#include "arm/neon.h"
#include "isa_switch.h"
#include "kiln/kernels/isa.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {

#if KILN_X86

bool vector_math_on(int path, MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  const Isa active = active_isa();
  if (path < 1 || path > 2 || (active != Isa::kAvx2 && active != Isa::kAvx512) || static_cast<int>(active) < path) {
    return false;
  }
  if (path == 2) {
    x86::vmath_avx512(op, in, out, n, alpha, beta);
  } else {
    x86::vmath_avx2(op, in, out, n, alpha, beta);
  }
  return true;
}

bool vector_math(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  const Isa active = active_isa();
  if (active == Isa::kAvx512) {
    x86::vmath_avx512(op, in, out, n, alpha, beta);
    return true;
  }
  if (active == Isa::kAvx2) {
    x86::vmath_avx2(op, in, out, n, alpha, beta);
    return true;
  }
  return false;
}

#elif KILN_NEON

// Path 3 is NEON (vmath.h numbers the x86 paths 1 and 2).
bool vector_math_on(int path, MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  if (path != 3 || active_isa() != Isa::kNeon) return false;
  neon::vmath(op, in, out, n, alpha, beta);
  return true;
}

bool vector_math(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta) {
  if (active_isa() != Isa::kNeon) return false;
  neon::vmath(op, in, out, n, alpha, beta);
  return true;
}

#else

bool vector_math_on(int, MathOp, const float*, float*, int64_t, float, float) { return false; }
bool vector_math(MathOp, const float*, float*, int64_t, float, float) { return false; }

#endif

}  // namespace kernels
}  // namespace kiln
