// The AArch64 Advanced SIMD (NEON) float kernels of this folder, by op
// family, as the dispatch in src/ calls them, built into every arm64
// build. Advanced SIMD is part of the base AArch64 architecture, so
// nothing is detected at run time: callers ask neon::enabled()
// (isa_switch.h), which only reads the ISA switch (KILN_ISA=scalar forces
// the portable loops, so both paths are tested on one machine). Each
// function computes what the portable loop beside its call computes, on
// the same layouts (the packed GEMM panels of gemm_blocking.h); a few
// decline a geometry (return false, having written nothing) and the caller
// runs the portable loop. The int8 tiles are declared in qgemm.h.
// Internal; heap-free.

#ifndef KILN_KERNELS_CPU_SRC_ARM_NEON_H_
#define KILN_KERNELS_CPU_SRC_ARM_NEON_H_

#include <stdint.h>

#include "isa_switch.h"
#include "vmath.h"

#if KILN_NEON
namespace kiln {
namespace kernels {
namespace neon {

// The 6x16 register tile of the packed GEMM (gemm.cc's MicroKernel;
// gemm_neon.cc).
void micro_kernel(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                  int64_t nr, bool accumulate, const float* row_bias, const float* col_bias, bool clamp, float lo,
                  float hi);
// out[j] = sum_p a[p] * B(p, j) for one row of A (B transposed or not).
void gemv(int64_t n, int64_t k, const float* a, const float* b, int64_t ldb, bool trans_b, float* out);
// dst[q] = src[2 * q] for q < count, reading src[0 .. avail) only.
void copy_stride2(const float* src, int64_t count, int64_t avail, float* dst);
// data[i] = clamp(data[i], lo, hi): RELU (`relu`, NaN gives lo) or CLIP (NaN
// stays NaN) (activation_neon.cc).
void clamp(float* data, int64_t n, float lo, float hi, bool relu);
// Depthwise 3x3 of one channel, stride 1 or 2 (gemm.h's depthwise3x3);
// false for rows too wide for its stack buffers (depthwise_neon.cc).
bool depthwise3x3(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t stride, int64_t pt,
                  int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp, float lo, float hi);
// Max pooling of one plane (pool.cc); false when the geometry does not fit
// (pool_neon.cc).
bool max_pool(const float* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride, int64_t pt, int64_t pl,
              float* out, int64_t oh, int64_t ow);
// Winograd F(2x2, 3x3) transforms of four tiles at a time (winograd.cc;
// winograd_neon.cc).
void winograd_input(const float* image, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t tw, int64_t t_first,
                    int64_t count, float* out, int64_t stride_xi);
void winograd_output(const float* prod, int64_t stride_xi, int64_t t_first, int64_t count, int64_t tw, float bias,
                     float* plane, int64_t oh, int64_t ow, bool clamp, float lo, float hi);
// Softmax of one contiguous row, LayerNormalization of one row (norm.cc;
// norm_neon.cc).
void softmax_row(const float* in, int64_t n, float* out);
void layer_norm_row(const float* in, int64_t n, const float* scale, const float* bias, double epsilon, float* out,
                    float* out_mean, float* out_inv);
// A stride-2 convolution straight from the image (gemm.h's DirectConvS2,
// weights packed by gemm_prepack_a); false where its buffers do not fit
// (conv_s2_neon.cc).
bool conv_s2(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt, int64_t pl,
             const float* packed_weights, int64_t m, const float* bias, float* y, int64_t oh, int64_t ow, int64_t oy0,
             int64_t oy1, bool clamp, float lo, float hi);
// vector_math (vmath.h) on this path (vmath_neon.cc).
void vmath(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta);

}  // namespace neon
}  // namespace kernels
}  // namespace kiln
#endif  // KILN_NEON

#endif  // KILN_KERNELS_CPU_SRC_ARM_NEON_H_
