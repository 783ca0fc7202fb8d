#include "gemm.h"

namespace kiln {
namespace kernels {

void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, bool trans_a,
              const float* b, int64_t ldb, bool trans_b, float* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (!accumulate) {
      for (int64_t j = 0; j < n; ++j) row[j] = 0.f;
    }
    if (trans_b) {
      for (int64_t j = 0; j < n; ++j) {
        const float* bj = b + j * ldb;
        float sum = 0.f;
        for (int64_t p = 0; p < k; ++p) sum += (trans_a ? a[p * lda + i] : a[i * lda + p]) * bj[p];
        row[j] += sum;
      }
    } else {
      for (int64_t p = 0; p < k; ++p) {
        const float av = trans_a ? a[p * lda + i] : a[i * lda + p];
        const float* bp = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) row[j] += av * bp[j];
      }
    }
  }
}

}  // namespace kernels
}  // namespace kiln
