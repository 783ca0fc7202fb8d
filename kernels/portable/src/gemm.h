// The single-precision matrix multiply every linear kernel (MatMul, Gemm,
// Conv) goes through. Internal.

#ifndef KILN_KERNELS_PORTABLE_SRC_GEMM_H_
#define KILN_KERNELS_PORTABLE_SRC_GEMM_H_

#include <stdint.h>

namespace kiln {
namespace kernels {

// C[m][n] (+)= sum_k A[m][k] * B[k][n], all row-major with leading
// dimensions lda, ldb, ldc. With accumulate false C is overwritten.
// A may be given transposed (A[k][m] at a[k * lda + m]) with trans_a, and B
// (B[n][k] at b[n * ldb + k]) with trans_b.
void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, bool trans_a,
              const float* b, int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_PORTABLE_SRC_GEMM_H_
