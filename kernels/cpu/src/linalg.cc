// Linear algebra on small matrices. Parameters: none.
//
//   Det    X float32 [..., M, M] -> float32 [...]: the determinant of each
//          matrix of the last two axes; one float64 scratch tensor of at
//          least M * M elements. Each matrix is copied into the scratch as
//          double and reduced by Gaussian elimination with partial pivoting
//          (LU): the determinant is the product of the pivots, negated for
//          every row swap. A matrix with a zero column gives 0; M = 0 gives
//          1 (the empty product).

#include <math.h>

#include "cpu_kernels.h"
#include "kernel_util.h"

namespace kiln {
namespace kernels {
namespace {

Error check_det(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1, 1));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == DType::FLOAT32 && y.dtype() == DType::FLOAT32,
                    "input and output must be float32");
  const uint32_t rank = x.rank();
  KILN_KERNEL_CHECK(args, rank >= 2 && x.dim(rank - 1) == x.dim(rank - 2), "input must be [..., M, M]");
  KILN_KERNEL_CHECK(args, y.rank() == rank - 2, "output must have rank %u", rank - 2);
  for (uint32_t d = 0; d + 2 < rank; ++d) {
    KILN_KERNEL_CHECK(args, y.dim(d) == x.dim(d), "output dim %u differs from the input's", d);
  }
  const int64_t m = x.dim(rank - 1);
  int64_t elements = 0;
  KILN_KERNEL_CHECK(args, checked_mul(m, m, &elements), "matrices too large");
  const Tensor& scratch = *args.scratch[0];
  KILN_KERNEL_CHECK(args, scratch.dtype() == DType::FLOAT64 && scratch.numel() >= elements,
                    "scratch must hold %lld doubles", static_cast<long long>(elements));
  return Error::kOk;
}

// The determinant of the m x m row-major matrix `a` (overwritten).
double determinant(double* a, int64_t m) {
  double det = 1.0;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r) {
      if (fabs(a[r * m + col]) > fabs(a[pivot * m + col])) pivot = r;
    }
    const double p = a[pivot * m + col];
    if (p == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t c = col; c < m; ++c) {
        const double t = a[col * m + c];
        a[col * m + c] = a[pivot * m + c];
        a[pivot * m + c] = t;
      }
      det = -det;
    }
    det *= p;
    for (int64_t r = col + 1; r < m; ++r) {
      const double f = a[r * m + col] / p;
      if (f == 0.0) continue;
      for (int64_t c = col + 1; c < m; ++c) a[r * m + c] -= f * a[col * m + c];
    }
  }
  return det;
}

Error run_det(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const int64_t m = x.dim(x.rank() - 1);
  const int64_t count = args.out(0).numel();
  const float* in = x.data_as<const float>();
  float* out = args.out(0).data_as<float>();
  double* a = args.scratch[0]->data_as<double>();
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = in[b * m * m + i];
    out[b] = static_cast<float>(determinant(a, m));
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_LINALG_KERNELS(K) K(Det, check_det, run_det, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_LINALG_KERNELS)
const KernelEntry kLinalgKernels[] = {KILN_LINALG_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumLinalgKernels = sizeof(kLinalgKernels) / sizeof(kLinalgKernels[0]);

}  // namespace kernels
}  // namespace kiln
