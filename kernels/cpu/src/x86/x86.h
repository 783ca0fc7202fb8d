// The x86-64 float kernels of this folder, by op family and instruction
// set, as the dispatch in src/ calls them. Each computes what the plain
// loop beside its call computes, on the same layouts (the packed GEMM
// panels of gemm_blocking.h); a few decline a geometry (return false,
// having written nothing) and the caller runs the plain loop. Callers ask
// has_avx2_fma() / has_avx512f() (isa_switch.h) first. Internal;
// heap-free.
//
// Declared beside the structs they take instead: the int8 kernels
// (qgemm.h), depthwise_conv_avx2/_avx512 (depthwise.h) and
// grouped_conv3x3_avx2/_avx512 (grouped_conv.h).

#ifndef KILN_KERNELS_CPU_SRC_X86_X86_H_
#define KILN_KERNELS_CPU_SRC_X86_X86_H_

#include <stdint.h>

#include "isa_switch.h"
#include "vmath.h"

namespace kiln {
namespace kernels {

// Cache lines a ConvLanes tile asks for while it runs (conv_lanes.cc: the
// weights its channel tile reads next): `count` lines from `lines`, 16
// floats apart. Spread over the tile's steps instead of asked for all at
// once before it, where the requests outnumber the misses a core keeps in
// flight and the tile waits behind them.
struct LanesPrefetch {
  const float* lines = nullptr;
  int64_t count = 0;
};

}  // namespace kernels
}  // namespace kiln

#if KILN_X86
namespace kiln {
namespace kernels {
namespace x86 {

// The C tile's rows (mr rows of nr floats, ldc apart) asked into L1 before
// the micro-kernel's inner loop, which takes far longer than the fetch:
// C is read (accumulate) and written after it, one cache line or two a
// row, each a row of a matrix larger than L2 on large products.
inline void prefetch_tile(float* c, int64_t ldc, int64_t mr, int64_t nr) {
  for (int64_t i = 0; i < mr; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + nr - 1, 1, 3);
  }
}

// The packed GEMM (gemm.cc): gemm_avx2.cc, gemm_avx512.cc.
void micro_kernel_avx512(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                         int64_t nr, bool accumulate, const float* row_bias, const float* col_bias, bool clamp,
                         float lo, float hi);
// Two whole 16-column tiles at once (B panels at b0 and b1, one ldb), the
// same bits as micro_kernel_avx512 on each.
void micro_kernel_avx512_x2(int64_t kc, const float* a, const float* b0, const float* b1, int64_t ldb, float* c,
                            int64_t ldc, int64_t mr, bool accumulate, const float* row_bias, const float* col_bias,
                            bool clamp, float lo, float hi);
// Two A panels (a0: rows 0-5, a1: rows 6-11; mr rows in all, 7 to 12) by
// one B panel, the same bits as micro_kernel_avx512 on each.
void micro_kernel_avx512_rows2(int64_t kc, const float* a0, const float* a1, const float* b, int64_t ldb, float* c,
                               int64_t ldc, int64_t mr, int64_t nr, bool accumulate, const float* row_bias,
                               const float* col_bias, bool clamp, float lo, float hi);
// The last B panel where it has at most kGemmEdgeColumns columns (nr), by
// `rows` rows of A (its panels a_stride apart from a), rows in lanes; the
// same bits as micro_kernel_avx512 on each.
void micro_kernel_avx512_edge(int64_t kc, const float* a, int64_t a_stride, int64_t rows, const float* b, int64_t ldb,
                              float* c, int64_t ldc, int64_t nr, bool accumulate, const float* row_bias,
                              const float* col_bias, bool clamp, float lo, float hi);
// The last A panel (a) where it holds kGemmRowEdge rows or fewer (`rows`)
// by `panels` whole B panels (panel_stride apart from b), several panels
// a call; the same bits as micro_kernel_avx512 on each.
void micro_kernel_avx512_row_edge(int64_t kc, const float* a, int64_t rows, const float* b, int64_t panel_stride,
                                  int64_t ldb, int64_t panels, float* c, int64_t ldc, bool accumulate,
                                  const float* row_bias, const float* col_bias, bool clamp, float lo, float hi);
// The BF16 path (gemm_bf16_avx512.cc): one (x2: two whole) 16-column tiles
// over `pairs` pairs of k, A and B panels in the BF16 pair layout of
// gemm_blocking.h, the epilogue as the FP32 kernels'.
void micro_kernel_bf16(int64_t pairs, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, int64_t mr,
                       int64_t nr, bool accumulate, const float* row_bias, const float* col_bias, bool clamp, float lo,
                       float hi);
void micro_kernel_bf16_x2(int64_t pairs, const uint16_t* a, const uint16_t* b0, const uint16_t* b1, float* c,
                          int64_t ldc, int64_t mr, bool accumulate, const float* row_bias, const float* col_bias,
                          bool clamp, float lo, float hi);
// Panels packed in FP32 (A: [kc][kGemmMr], B: [kc][kGemmNr]) rewritten in
// place in the BF16 pair layout, an odd last k paired with zero.
void convert_a_panel_bf16(float* panel, int64_t kc);
void convert_b_panel_bf16(float* panel, int64_t kc);
// A register tile of ConvLanes (conv_lanes.cc): `rows` output positions
// (step p of row r at pos[r][koff[p]], or at pos[r][p * ps] where koff is
// nullptr) by the 16 output channels of panel w0
// ([kc][kGemmNr]) and, where w1 is not nullptr, the 16 of panel w1:
// ct[r * ldct + j] = (accumulate ? ct[r * ldct + j] : 0) + the sum over p.
// conv_lanes_avx512.cc: rows <= 8; conv_lanes_avx2.cc: rows <= 6, w1
// nullptr. Meanwhile the tile prefetches pf.count cache lines from
// pf.lines (16 floats apart), spread evenly over its steps of k.
void conv_lanes_tile_avx512(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, int64_t rows,
                            const float* w0, const float* w1, float* ct, int64_t ldct, bool accumulate,
                            const LanesPrefetch& pf);
void conv_lanes_tile_avx2(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, int64_t rows,
                          const float* w0, const float* w1, float* ct, int64_t ldct, bool accumulate,
                          const LanesPrefetch& pf);
// ConvLanes' write-out of one block of 16 channels: y[j * n + p] =
// clamp(product[p * ldp + j] + bias[j]) for j < 16, p < positions (bias may
// be nullptr; the clamp to [lo, hi] only where `clamp`), through register
// transposes of 16 x 16 (8 x 8 on AVX2) instead of a store per value.
void conv_lanes_write_avx512(const float* product, int64_t ldp, int64_t positions, float* y, int64_t n,
                             const float* bias, bool clamp, float lo, float hi);
void conv_lanes_write_avx2(const float* product, int64_t ldp, int64_t positions, float* y, int64_t n, const float* bias,
                           bool clamp, float lo, float hi);
void micro_kernel_avx2(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                       int64_t nr, bool accumulate, const float* row_bias, const float* col_bias, bool clamp, float lo,
                       float hi);
// A panel of B gathered from `kc` planes `plane` floats apart (channels
// from x): row p, lane q = x[p * plane + offsets[q]] for q < nr, 0 past nr
// (rows kGemmNr floats apart): gemm_avx512.cc, gemm_avx2.cc.
void gather_panel_avx512(const float* x, int64_t plane, const int32_t* offsets, int64_t nr, int64_t kc, float* dst);
void gather_panel_avx2(const float* x, int64_t plane, const int32_t* offsets, int64_t nr, int64_t kc, float* dst);
// A panel of an im2col matrix with `taps` kernel taps per channel, rows
// p0 .. p0 + kc: row p (channel p / taps, tap t = p % taps), lane q =
// x[channel * plane + offsets[t * 16 + q]] where bit q of masks[t] is set,
// 0 elsewhere (padding, lanes past the panel's columns): gemm_avx512.cc.
void gather_taps_avx512(const float* x, int64_t plane, const int32_t* offsets, const uint16_t* masks, int64_t taps,
                        int64_t p0, int64_t kc, float* dst);
// dst[q] = src[2 * q] for q < count, reading src[0 .. avail) only
// (avail >= 2 * count - 1): the stride-2 rows of an im2col panel.
void copy_stride2_avx2(const float* src, int64_t count, int64_t avail, float* dst);
void gemv_avx2(int64_t n, int64_t k, const float* a, const float* b, int64_t ldb, bool trans_b, float* out);
// Panels of A packed by gemm_prepack_a (`panels` of them, `stride` floats
// apart: kGemmMr * k) times one column: out[kGemmMr * q + r] = the sum over
// j < len with j % kGemmMr == r of panel q's float j times bx[j], where bx
// is the column with each entry repeated kGemmMr times (len = kGemmMr *
// the columns of A taken). The matrix-vector product of a 1x1 convolution
// on a 1x1 plane (squeeze-and-excitation), without a 16-column panel.
// The AVX-512 path runs it too: 16-lane accumulators measured slower
// (their fold waits on stores that cannot forward to the loads).
void panels_gemv_avx2(const float* a, int64_t stride, int64_t panels, const float* bx, int64_t len, float* out);

// The depthwise 3x3 of one channel (gemm.h's depthwise3x3):
// depthwise_avx2.cc, depthwise_avx512.cc.
void depthwise3x3_avx2(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t stride,
                       int64_t pt, int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp, float lo, float hi);
// The same with 16 outputs per 512-bit vector and no copies; false, having
// done nothing, unless the stride is 1 or 2 and the left pad 0 or 1.
bool depthwise3x3_avx512(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t stride,
                         int64_t pt, int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp, float lo, float hi);

// The stride-2 convolution of first layers (gemm.h's DirectConvS2):
// conv_s2_avx2.cc, conv_s2_avx512.cc.
bool conv_s2_avx512(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt, int64_t pl,
                    const float* packed_weights, int64_t m, const float* bias, float* y, int64_t oh, int64_t ow,
                    int64_t oy0, int64_t oy1, bool clamp, float lo, float hi);
// conv_s2_avx512 on eight lanes (a 6x16 tile); false in the same cases.
bool conv_s2_avx2(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt, int64_t pl,
                  const float* packed_weights, int64_t m, const float* bias, float* y, int64_t oh, int64_t ow,
                  int64_t oy0, int64_t oy1, bool clamp, float lo, float hi);
// The taps of output row oy that both kernels read (conv_s2_avx2.cc): every
// input row it reads (channel ci, kernel row ky) split by parity into
// `buffer` (2 * half floats each), and tap[(ci * kh + ky) * kw + kx]
// pointing at the column of the split row where output column 0 of that
// tap lies.
void conv_s2_taps(const float* x, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt, int64_t pl,
                  int64_t oy, int64_t half, float* buffer, const float** tap);

// data[i] = clamp(data[i], lo, hi) as apply_activation's RELU (NaN gives
// lo: `relu`) or CLIP (NaN stays NaN) computes it (activation_avx2.cc).
void clamp_avx2(float* data, int64_t n, float lo, float hi, bool relu);

// Max pooling of one plane (pool.cc); false when the geometry does not fit
// (pool_avx2.cc).
bool max_pool_avx2(const float* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride, int64_t pt,
                   int64_t pl, float* out, int64_t oh, int64_t ow);
// The same for 8-bit data (uint8_t or int8_t: a QDQ model's MaxPool),
// padding never winning; false when the geometry does not fit.
bool max_pool_8bit_avx2(const uint8_t* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride, int64_t pt,
                        int64_t pl, uint8_t* out, int64_t oh, int64_t ow);
bool max_pool_8bit_avx2(const int8_t* in, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t stride, int64_t pt,
                        int64_t pl, int8_t* out, int64_t oh, int64_t ow);

// Softmax of one contiguous row, and LayerNormalization of one row (the
// statistics in double), as norm.cc's scalar loops compute them
// (norm_avx2.cc).
void softmax_row_avx2(const float* in, int64_t n, float* out);
void layer_norm_row_avx2(const float* in, int64_t n, const float* scale, const float* bias, double epsilon, float* out,
                         float* out_mean, float* out_inv);

// Winograd F(2x2, 3x3) transforms of up to eight tiles at a time
// (winograd.cc; winograd_avx2.cc).
void winograd_input_avx2(const float* image, int64_t h, int64_t w, int64_t pt, int64_t pl, int64_t tw, int64_t t_first,
                         int64_t count, float* out, int64_t stride_xi, int64_t room);
void winograd_output_avx2(const float* prod, int64_t stride_xi, int64_t t_first, int64_t count, int64_t tw, float bias,
                          float* plane, int64_t oh, int64_t ow, bool clamp, float lo, float hi);

// vector_math (vmath.h) on one path: vmath_avx2.cc, vmath_avx512.cc.
void vmath_avx2(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta);
void vmath_avx512(MathOp op, const float* in, float* out, int64_t n, float alpha, float beta);

}  // namespace x86
}  // namespace kernels
}  // namespace kiln
#endif  // KILN_X86

#endif  // KILN_KERNELS_CPU_SRC_X86_X86_H_
