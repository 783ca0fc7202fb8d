// The spectral kernels' contract shared by the planner and the kernels
// (kernels/cpu/src/signal.cc): the twiddle table the planner bakes as a
// constant input, and the size of the scratch it plans. Both sides must
// agree: the kernels' check() refuses a table or scratch of another size.
// Header-only, no state.
//
// Twiddle table of a transform of length n: float32 [n, 2], row k the
// complex number exp(-2 pi i k / n) = (cos(2 pi k / n), -sin(2 pi k / n)),
// computed in double and rounded once. The forward transform uses it as it
// is, the inverse its conjugate.
//
// Scratch, float32 [dft_scratch_floats(n)]:
//
//   +---------------------------+---------------------------+
//   | line: the n complex input | result: the direct        |
//   | values of one transform   | transform's n outputs     |
//   | (re, im interleaved)      | (lengths not a power of 2)|
//   +---------------------------+---------------------------+

#ifndef KILN_KERNELS_SIGNAL_H_
#define KILN_KERNELS_SIGNAL_H_

#include <math.h>
#include <stdint.h>

namespace kiln {
namespace kernels {

constexpr int64_t dft_scratch_floats(int64_t n) { return 4 * n; }

// Fills `out` (2 n floats) with the twiddle table above. For the planner.
inline void fill_dft_twiddles(int64_t n, float* out) {
  const double tau = 6.283185307179586476925286766559;
  for (int64_t k = 0; k < n; ++k) {
    const double angle = tau * static_cast<double>(k) / static_cast<double>(n);
    out[2 * k] = static_cast<float>(cos(angle));
    out[2 * k + 1] = static_cast<float>(-sin(angle));
  }
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_SIGNAL_H_
