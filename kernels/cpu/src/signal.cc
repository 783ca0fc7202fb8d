// Spectral kernels. Parameters are GenericParams (schema/program.fbs); the
// twiddle table and the scratch are described in kiln/kernels/signal.h.
//
//   DFT    X float32 [d0, ..., d(r-2), c], c = 1 (real) or 2 (complex);
//          twiddles of length n; one scratch tensor; ints [axis, n, inverse,
//          onesided] with axis in [0, r - 2]. Each line of X along the axis
//          is cut or zero-padded to n values and transformed:
//          Y[k] = sum_j x[j] w^(jk), w = exp(-2 pi i / n) (inverse: the
//          conjugate, and the sum divided by n). The output has X's dims
//          with the axis n (onesided: n / 2 + 1, the bins a real signal does
//          not repeat) and the last dim 2 (re, im).
//   STFT   signal float32 [batch, length, c], c = 1 or 2; twiddles of
//          length n; window float32 [n] (optional: all ones); one scratch
//          tensor; ints [frame_step, n, onesided]. Frame f is the n samples
//          from f * frame_step, times the window, transformed as DFT does;
//          the output is [batch, frames, n (onesided: n / 2 + 1), 2] with
//          frames = (length - n) / frame_step + 1.
//
// A length that is a power of two runs the iterative radix-2 FFT in float32
// (in place in the scratch line: bit-reversed order, then log2 n rounds of
// butterflies, round s using every (n / 2^s)-th twiddle); any other length
// runs the direct sum, accumulated in double, twiddle (j k mod n) read from
// the table, into the scratch's second half. Only the output bins are
// computed by the direct sum. No index comes from the data: every read is
// inside the sizes checked at load.

#include <string.h>

#include "cpu_kernels.h"
#include "kernel_util.h"
#include "kiln/kernels/signal.h"

namespace kiln {
namespace kernels {
namespace {

bool power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

Error check_twiddles_scratch(const KernelArgs& args, const Tensor& twiddles, int64_t n) {
  KILN_KERNEL_CHECK(args, n >= 1, "transform length %lld must be positive", static_cast<long long>(n));
  KILN_KERNEL_CHECK(
      args, twiddles.dtype() == DType::FLOAT32 && twiddles.rank() == 2 && twiddles.dim(0) == n && twiddles.dim(1) == 2,
      "twiddles must be float32 [%lld, 2]", static_cast<long long>(n));
  const Tensor& scratch = *args.scratch[0];
  KILN_KERNEL_CHECK(args, scratch.dtype() == DType::FLOAT32 && scratch.numel() >= dft_scratch_floats(n),
                    "scratch must hold %lld floats", static_cast<long long>(dft_scratch_floats(n)));
  return Error::kOk;
}

void fft_radix2(float* line, int64_t n, const float* twiddles, bool inverse) {
  for (int64_t i = 1, j = 0; i < n; ++i) {
    int64_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      const float re = line[2 * i], im = line[2 * i + 1];
      line[2 * i] = line[2 * j];
      line[2 * i + 1] = line[2 * j + 1];
      line[2 * j] = re;
      line[2 * j + 1] = im;
    }
  }
  const float sign = inverse ? -1.f : 1.f;
  for (int64_t len = 2; len <= n; len <<= 1) {
    const int64_t half = len / 2, stride = n / len;
    for (int64_t start = 0; start < n; start += len) {
      for (int64_t k = 0; k < half; ++k) {
        const float wr = twiddles[2 * k * stride], wi = sign * twiddles[2 * k * stride + 1];
        float* a = line + 2 * (start + k);
        float* b = line + 2 * (start + k + half);
        const float tr = b[0] * wr - b[1] * wi, ti = b[0] * wi + b[1] * wr;
        b[0] = a[0] - tr;
        b[1] = a[1] - ti;
        a[0] += tr;
        a[1] += ti;
      }
    }
  }
}

// Bins [0, bins) of the transform of `line` into `result`.
void dft_direct(const float* line, float* result, int64_t n, int64_t bins, const float* twiddles, bool inverse) {
  const double sign = inverse ? -1.0 : 1.0;
  for (int64_t k = 0; k < bins; ++k) {
    double re = 0.0, im = 0.0;
    int64_t at = 0;  // j k mod n
    for (int64_t j = 0; j < n; ++j) {
      const double wr = twiddles[2 * at], wi = sign * twiddles[2 * at + 1];
      const double xr = line[2 * j], xi = line[2 * j + 1];
      re += xr * wr - xi * wi;
      im += xr * wi + xi * wr;
      at += k;
      if (at >= n) at -= n;
    }
    result[2 * k] = static_cast<float>(re);
    result[2 * k + 1] = static_cast<float>(im);
  }
}

// Transforms the n values in scratch's line; returns where the first `bins`
// results are (unscaled).
const float* transform(float* scratch, int64_t n, int64_t bins, const float* twiddles, bool inverse) {
  if (power_of_two(n)) {
    fft_radix2(scratch, n, twiddles, inverse);
    return scratch;
  }
  dft_direct(scratch, scratch + 2 * n, n, bins, twiddles, inverse);
  return scratch + 2 * n;
}

// ---------------------------------------------------------------------------
// DFT

Error check_dft(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 4, 0));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == DType::FLOAT32 && y.dtype() == DType::FLOAT32,
                    "input and output must be float32");
  const int64_t axis = param_int(args, 0), n = param_int(args, 1);
  const bool onesided = param_int(args, 3) != 0;
  const uint32_t rank = x.rank();
  KILN_KERNEL_CHECK(args, rank >= 2, "input must have rank >= 2");
  KILN_KERNEL_CHECK(args, axis >= 0 && axis < static_cast<int64_t>(rank) - 1, "axis out of range");
  const int64_t c = x.dim(rank - 1);
  KILN_KERNEL_CHECK(args, c == 1 || c == 2, "last dim must be 1 (real) or 2 (complex), is %lld",
                    static_cast<long long>(c));
  KILN_RETURN_IF_ERROR(check_twiddles_scratch(args, args.in(1), n));
  KILN_KERNEL_CHECK(args, y.rank() == rank, "output rank differs");
  for (uint32_t d = 0; d < rank; ++d) {
    const int64_t want = d == rank - 1 ? 2 : (d == axis ? (onesided ? n / 2 + 1 : n) : x.dim(d));
    KILN_KERNEL_CHECK(args, y.dim(d) == want, "output dim %u is %lld, expected %lld", d,
                      static_cast<long long>(y.dim(d)), static_cast<long long>(want));
  }
  return Error::kOk;
}

Error run_dft(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const uint32_t rank = x.rank();
  const uint32_t axis = static_cast<uint32_t>(param_int(args, 0));
  const int64_t n = param_int(args, 1);
  const bool inverse = param_int(args, 2) != 0;
  const int64_t c = x.dim(rank - 1);
  const int64_t outer = dims_product(x, 0, axis);
  const int64_t inner = dims_product(x, axis + 1, rank - 1);
  const int64_t n_in = x.dim(axis);
  const int64_t used = n_in < n ? n_in : n;
  const int64_t bins = args.out(0).dim(axis);
  const float* in = x.data_as<const float>();
  const float* twiddles = args.in(1).data_as<const float>();
  float* out = args.out(0).data_as<float>();
  float* scratch = args.scratch[0]->data_as<float>();
  const float scale = inverse ? 1.f / static_cast<float>(n) : 1.f;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < used; ++j) {
        const float* v = in + ((o * n_in + j) * inner + i) * c;
        scratch[2 * j] = v[0];
        scratch[2 * j + 1] = c == 2 ? v[1] : 0.f;
      }
      if (used < n) memset(scratch + 2 * used, 0, static_cast<size_t>(2 * (n - used)) * sizeof(float));
      const float* result = transform(scratch, n, bins, twiddles, inverse);
      for (int64_t k = 0; k < bins; ++k) {
        float* dst = out + ((o * bins + k) * inner + i) * 2;
        dst[0] = result[2 * k] * scale;
        dst[1] = result[2 * k + 1] * scale;
      }
    }
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// STFT

Error check_stft(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 3, 0));
  const Tensor& signal = args.in(0);
  const Tensor& y = args.out(0);
  const int64_t step = param_int(args, 0), n = param_int(args, 1);
  const bool onesided = param_int(args, 2) != 0;
  KILN_KERNEL_CHECK(args, signal.dtype() == DType::FLOAT32 && y.dtype() == DType::FLOAT32,
                    "signal and output must be float32");
  KILN_KERNEL_CHECK(args, signal.rank() == 3 && (signal.dim(2) == 1 || signal.dim(2) == 2),
                    "signal must be [batch, length, 1 or 2]");
  KILN_KERNEL_CHECK(args, step >= 1, "frame_step must be positive");
  KILN_RETURN_IF_ERROR(check_twiddles_scratch(args, args.in(1), n));
  KILN_KERNEL_CHECK(args, signal.dim(1) >= n, "signal shorter than one frame");
  if (args.has_input(2)) {
    const Tensor& window = args.in(2);
    KILN_KERNEL_CHECK(args, window.dtype() == DType::FLOAT32 && window.rank() == 1 && window.dim(0) == n,
                      "window must be float32 [%lld]", static_cast<long long>(n));
  }
  const int64_t frames = (signal.dim(1) - n) / step + 1;
  KILN_KERNEL_CHECK(args,
                    y.rank() == 4 && y.dim(0) == signal.dim(0) && y.dim(1) == frames &&
                        y.dim(2) == (onesided ? n / 2 + 1 : n) && y.dim(3) == 2,
                    "output must be [%lld, %lld, %lld, 2]", static_cast<long long>(signal.dim(0)),
                    static_cast<long long>(frames), static_cast<long long>(onesided ? n / 2 + 1 : n));
  return Error::kOk;
}

Error run_stft(const KernelArgs& args) {
  const Tensor& signal = args.in(0);
  const int64_t step = param_int(args, 0), n = param_int(args, 1);
  const int64_t batch = signal.dim(0), length = signal.dim(1), c = signal.dim(2);
  const Tensor& y = args.out(0);
  const int64_t frames = y.dim(1), bins = y.dim(2);
  const float* in = signal.data_as<const float>();
  const float* twiddles = args.in(1).data_as<const float>();
  const float* window = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* out = y.data_as<float>();
  float* scratch = args.scratch[0]->data_as<float>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      const float* frame = in + (b * length + f * step) * c;
      for (int64_t j = 0; j < n; ++j) {
        const float w = window != nullptr ? window[j] : 1.f;
        scratch[2 * j] = frame[j * c] * w;
        scratch[2 * j + 1] = c == 2 ? frame[j * c + 1] * w : 0.f;
      }
      const float* result = transform(scratch, n, bins, twiddles, false);
      memcpy(out + (b * frames + f) * bins * 2, result, static_cast<size_t>(2 * bins) * sizeof(float));
    }
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_SIGNAL_KERNELS(K)  \
  K(DFT, check_dft, run_dft, 0) \
  K(STFT, check_stft, run_stft, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_SIGNAL_KERNELS)
const KernelEntry kSignalKernels[] = {KILN_SIGNAL_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumSignalKernels = sizeof(kSignalKernels) / sizeof(kSignalKernels[0]);

}  // namespace kernels
}  // namespace kiln
