// The AVX-512 micro-kernels of the packed GEMM (gemm.cc): the 6x16 tile in
// six 512-bit registers, and two whole tiles side by side (6x32) where B's
// panels are read in place. Each function carries KILN_AVX512
// (isa_switch.h); gemm.cc calls these only after has_avx512f() said yes.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>

#include "kiln/kernels/gemm_blocking.h"
#include "x86/avx512_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// v in the low half, zeros above (the masked insert: GCC 12 warns about
// _mm512_zextps256_ps512's undefined source).
KILN_AVX512 inline __m512 widen(__m256 v) {
  const __m512d zero = _mm512_setzero_pd();
  return _mm512_castpd_ps(_mm512_mask_insertf64x4(zero, 0xFF, zero, _mm256_castps_pd(v), 0));
}

}  // namespace

// The same 6x16 tile in six 512-bit registers: per step of k one load of
// B and six FMAs that broadcast A from memory, a third of the AVX2
// kernel's instructions for the same work.
KILN_AVX512 void micro_kernel_avx512(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                                     int64_t mr, int64_t nr, bool accumulate, const float* row_bias,
                                     const float* col_bias, bool clamp, float lo, float hi) {
  prefetch_tile(c, ldc, mr, nr);
  __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
  __m512 c3 = _mm512_setzero_ps(), c4 = _mm512_setzero_ps(), c5 = _mm512_setzero_ps();
  if (nr <= 8) {
    // A tile at most half as wide (the last panel of a 7x7 image's 49
    // columns has one): 256-bit FMAs over the panel's first eight columns,
    // half the work where 512-bit operations take two passes.
    __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps(), d2 = _mm256_setzero_ps();
    __m256 d3 = _mm256_setzero_ps(), d4 = _mm256_setzero_ps(), d5 = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
      const __m256 bv = _mm256_loadu_ps(b);
      d0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a), bv, d0);
      d1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), bv, d1);
      d2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), bv, d2);
      d3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), bv, d3);
      d4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), bv, d4);
      d5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), bv, d5);
      a += kGemmMr;
      b += ldb;
    }
    c0 = widen(d0);
    c1 = widen(d1);
    c2 = widen(d2);
    c3 = widen(d3);
    c4 = widen(d4);
    c5 = widen(d5);
    kc = 0;
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 bv = _mm512_loadu_ps(b);
    c0 = _mm512_fmadd_ps(_mm512_set1_ps(a[0]), bv, c0);
    c1 = _mm512_fmadd_ps(_mm512_set1_ps(a[1]), bv, c1);
    c2 = _mm512_fmadd_ps(_mm512_set1_ps(a[2]), bv, c2);
    c3 = _mm512_fmadd_ps(_mm512_set1_ps(a[3]), bv, c3);
    c4 = _mm512_fmadd_ps(_mm512_set1_ps(a[4]), bv, c4);
    c5 = _mm512_fmadd_ps(_mm512_set1_ps(a[5]), bv, c5);
    a += kGemmMr;
    b += ldb;
  }
  const __mmask16 mask = static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const auto bias = [row_bias](int64_t i) { return row_bias != nullptr ? row_bias[i] : 0.f; };
  const __m512 col = col_bias != nullptr ? _mm512_maskz_loadu_ps(mask, col_bias) : _mm512_setzero_ps();
  store_row16(c, c0, mask, accumulate, bias(0), col, clamp, vlo, vhi);
  if (mr > 1) store_row16(c + ldc, c1, mask, accumulate, bias(1), col, clamp, vlo, vhi);
  if (mr > 2) store_row16(c + 2 * ldc, c2, mask, accumulate, bias(2), col, clamp, vlo, vhi);
  if (mr > 3) store_row16(c + 3 * ldc, c3, mask, accumulate, bias(3), col, clamp, vlo, vhi);
  if (mr > 4) store_row16(c + 4 * ldc, c4, mask, accumulate, bias(4), col, clamp, vlo, vhi);
  if (mr > 5) store_row16(c + 5 * ldc, c5, mask, accumulate, bias(5), col, clamp, vlo, vhi);
}

// The 12x16 tile's product in 256-bit lanes (the panel's first eight
// columns) or 512-bit ones.
template <int kBits>
struct RowsLanes;
template <>
struct RowsLanes<256> {
  using V = __m256;
  KILN_AVX512 static __m256 zero() { return _mm256_setzero_ps(); }
  KILN_AVX512 static __m256 load(const float* b) { return _mm256_loadu_ps(b); }
  KILN_AVX512 static __m256 fma(const float* a, __m256 b, __m256 c) {
    return _mm256_fmadd_ps(_mm256_broadcast_ss(a), b, c);
  }
  KILN_AVX512 static __m512 out(__m256 v) { return widen(v); }
};
template <>
struct RowsLanes<512> {
  using V = __m512;
  KILN_AVX512 static __m512 zero() { return _mm512_setzero_ps(); }
  KILN_AVX512 static __m512 load(const float* b) { return _mm512_loadu_ps(b); }
  KILN_AVX512 static __m512 fma(const float* a, __m512 b, __m512 c) {
    return _mm512_fmadd_ps(_mm512_set1_ps(*a), b, c);
  }
  KILN_AVX512 static __m512 out(__m512 v) { return v; }
};

template <int kBits>
KILN_AVX512 inline void rows2_product(int64_t kc, const float* a0, const float* a1, const float* b, int64_t ldb,
                                      __m512 (&out)[2 * kGemmMr]) {
  using L = RowsLanes<kBits>;
  typename L::V acc[2 * kGemmMr];
#pragma GCC unroll 12
  for (int i = 0; i < 2 * kGemmMr; ++i) acc[i] = L::zero();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const typename L::V bv = L::load(b);
#pragma GCC unroll 6
    for (int i = 0; i < kGemmMr; ++i) {
      acc[i] = L::fma(a0 + i, bv, acc[i]);
      acc[kGemmMr + i] = L::fma(a1 + i, bv, acc[kGemmMr + i]);
    }
    a0 += kGemmMr;
    a1 += kGemmMr;
    b += ldb;
  }
#pragma GCC unroll 12
  for (int i = 0; i < 2 * kGemmMr; ++i) out[i] = L::out(acc[i]);
}

// Two A panels (rows 0-5 at a0, 6-11 at a1) by one B panel: twelve
// accumulators, per step of k one load of B and twelve broadcasts of A for
// twelve FMAs, where the 6x16 tile keeps six FMAs in flight and a core that
// retires two 512-bit FMAs a cycle at 4 cycles' latency needs eight. Each
// output is the same chain of FMAs as in the 6x16 tile, so the same bits.
// mr counts both panels' rows (7 to 12); at most 8 columns run in 256-bit
// lanes, as in the 6x16 tile.
KILN_AVX512 void micro_kernel_avx512_rows2(int64_t kc, const float* a0, const float* a1, const float* b, int64_t ldb,
                                           float* c, int64_t ldc, int64_t mr, int64_t nr, bool accumulate,
                                           const float* row_bias, const float* col_bias, bool clamp, float lo,
                                           float hi) {
  prefetch_tile(c, ldc, mr, nr);
  __m512 out[2 * kGemmMr];
  if (nr <= 8) {
    rows2_product<256>(kc, a0, a1, b, ldb, out);
  } else {
    rows2_product<512>(kc, a0, a1, b, ldb, out);
  }
  const __mmask16 mask = first_lanes(nr);
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512 col = col_bias != nullptr ? _mm512_maskz_loadu_ps(mask, col_bias) : _mm512_setzero_ps();
  for (int64_t i = 0; i < mr; ++i) {
    store_row16(c + i * ldc, out[i], mask, accumulate, row_bias != nullptr ? row_bias[i] : 0.f, col, clamp, vlo, vhi);
  }
}

// The edge panel's few columns (kCols, at most kGemmEdgeColumns) by
// kPanels A panels at once, rows in lanes: per step of k one 8-float load
// of each panel's six rows (the last step masked: the two floats past
// them may lie past the buffer) and one broadcast of B a column, every
// lane but two doing work, where the 12x16 tile ran twelve FMAs for one
// to four columns. Each output is the same chain of FMAs over k as in the
// tiles (a x b + c, rounded once), so the same bits.
template <int kCols, int kPanels, bool kMasked>
KILN_AVX512 __attribute__((always_inline)) inline void edge_step(const float* const (&ap)[kPanels], const float* b,
                                                                 __m256 (&acc)[kPanels][kCols]) {
  const __m256i six = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
  __m256 bv[kCols];
#pragma GCC unroll 4
  for (int j = 0; j < kCols; ++j) bv[j] = _mm256_broadcast_ss(b + j);
#pragma GCC unroll 8
  for (int i = 0; i < kPanels; ++i) {
    const __m256 av = kMasked ? _mm256_maskload_ps(ap[i], six) : _mm256_loadu_ps(ap[i]);
#pragma GCC unroll 4
    for (int j = 0; j < kCols; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
  }
}

template <int kCols, int kPanels>
KILN_AVX512 inline void edge_product(int64_t kc, const float* const (&ap)[kPanels], const float* b, int64_t ldb,
                                     __m256 (&acc)[kPanels][kCols]) {
#pragma GCC unroll 8
  for (int i = 0; i < kPanels; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < kCols; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  const float* at[kPanels];
#pragma GCC unroll 8
  for (int i = 0; i < kPanels; ++i) at[i] = ap[i];
  for (int64_t p = 0; p + 1 < kc; ++p) {
    edge_step<kCols, kPanels, false>(at, b, acc);
#pragma GCC unroll 8
    for (int i = 0; i < kPanels; ++i) at[i] += kGemmMr;
    b += ldb;
  }
  if (kc > 0) edge_step<kCols, kPanels, true>(at, b, acc);
}

template <int kCols>
KILN_AVX512 void edge_columns(int64_t kc, const float* a, int64_t a_stride, int64_t rows, const float* b, int64_t ldb,
                              float* c, int64_t ldc, bool accumulate, const float* row_bias, const float* col_bias,
                              bool clamp, float lo, float hi) {
  // Enough panels for eight chains of FMAs at least (two FMAs a cycle at
  // 4 cycles' latency), with the accumulators, the broadcasts and the load
  // in the sixteen ymm registers AVX-512F leaves to 256-bit code (the
  // other sixteen need AVX512VL): four panels of four columns kept five
  // accumulators on the stack and ran at 31% of Zen 4's peak; two run at
  // 45%, and a 196-column product (a last panel of four) gains 1.5%.
  constexpr int kPanels = kCols <= 2 ? 6 : kCols == 3 ? 4 : 2;
  const int64_t panels = (rows + kGemmMr - 1) / kGemmMr;
  const __mmask16 mask = first_lanes(kCols);
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512 col = col_bias != nullptr ? _mm512_maskz_loadu_ps(mask, col_bias) : _mm512_setzero_ps();
  for (int64_t q = 0; q < panels; q += kPanels) {
    // Past the last panel, the group repeats it and drops what it gives.
    const float* ap[kPanels];
    for (int i = 0; i < kPanels; ++i) ap[i] = a + (q + i < panels ? q + i : panels - 1) * a_stride;
    __m256 acc[kPanels][kCols];
    edge_product<kCols, kPanels>(kc, ap, b, ldb, acc);
    alignas(32) float sums[kPanels][kCols][8];
    for (int i = 0; i < kPanels; ++i) {
      for (int j = 0; j < kCols; ++j) _mm256_store_ps(sums[i][j], acc[i][j]);
    }
    // Row by row, the tiles' epilogue (store_row16) on the row's kCols.
    for (int64_t r = q * kGemmMr; r < rows && r < (q + kPanels) * kGemmMr; ++r) {
      alignas(64) float line[16] = {};
      const int64_t i = r / kGemmMr - q, lane = r % kGemmMr;
      for (int j = 0; j < kCols; ++j) line[j] = sums[i][j][lane];
      store_row16(c + r * ldc, _mm512_load_ps(line), mask, accumulate, row_bias != nullptr ? row_bias[r] : 0.f, col,
                  clamp, vlo, vhi);
    }
  }
}

KILN_AVX512 void micro_kernel_avx512_edge(int64_t kc, const float* a, int64_t a_stride, int64_t rows, const float* b,
                                          int64_t ldb, float* c, int64_t ldc, int64_t nr, bool accumulate,
                                          const float* row_bias, const float* col_bias, bool clamp, float lo,
                                          float hi) {
  switch (nr) {
    case 1:
      edge_columns<1>(kc, a, a_stride, rows, b, ldb, c, ldc, accumulate, row_bias, col_bias, clamp, lo, hi);
      break;
    case 2:
      edge_columns<2>(kc, a, a_stride, rows, b, ldb, c, ldc, accumulate, row_bias, col_bias, clamp, lo, hi);
      break;
    case 3:
      edge_columns<3>(kc, a, a_stride, rows, b, ldb, c, ldc, accumulate, row_bias, col_bias, clamp, lo, hi);
      break;
    default:
      edge_columns<4>(kc, a, a_stride, rows, b, ldb, c, ldc, accumulate, row_bias, col_bias, clamp, lo, hi);
      break;
  }
}

// The last A panel's one or two rows (kRows) by kPanels whole B panels at
// once: per step of k one load of each B panel and kRows broadcasts of A,
// eight chains of FMAs, where the 6x32 tile ran twelve FMAs a step for two
// or four useful ones. Each output is the same chain of FMAs over k as in
// the tiles, so the same bits.
template <int kRows, int kPanels>
KILN_AVX512 inline void row_edge_product(int64_t kc, const float* a, const float* const (&bp)[kPanels], int64_t ldb,
                                         __m512 (&acc)[kRows][kPanels]) {
#pragma GCC unroll 2
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int i = 0; i < kPanels; ++i) acc[r][i] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 av[kRows];
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r) av[r] = _mm512_set1_ps(a[p * kGemmMr + r]);
#pragma GCC unroll 8
    for (int i = 0; i < kPanels; ++i) {
      const __m512 bv = _mm512_loadu_ps(bp[i] + p * ldb);
#pragma GCC unroll 2
      for (int r = 0; r < kRows; ++r) acc[r][i] = _mm512_fmadd_ps(av[r], bv, acc[r][i]);
    }
  }
}

template <int kRows>
KILN_AVX512 void row_edge(int64_t kc, const float* a, const float* b, int64_t panel_stride, int64_t ldb, int64_t panels,
                          float* c, int64_t ldc, bool accumulate, const float* row_bias, const float* col_bias,
                          bool clamp, float lo, float hi) {
  constexpr int kPanels = 8 / kRows;
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int64_t q = 0; q < panels; q += kPanels) {
    // Past the last panel, the group repeats it and drops what it gives.
    const float* bp[kPanels];
    for (int i = 0; i < kPanels; ++i) bp[i] = b + (q + i < panels ? q + i : panels - 1) * panel_stride;
    __m512 acc[kRows][kPanels];
    row_edge_product<kRows, kPanels>(kc, a, bp, ldb, acc);
    for (int i = 0; i < kPanels && q + i < panels; ++i) {
      const int64_t j = (q + i) * kGemmNr;
      const __m512 col = col_bias != nullptr ? _mm512_loadu_ps(col_bias + j) : _mm512_setzero_ps();
      for (int r = 0; r < kRows; ++r) {
        store_row16(c + r * ldc + j, acc[r][i], 0xFFFF, accumulate, row_bias != nullptr ? row_bias[r] : 0.f, col, clamp,
                    vlo, vhi);
      }
    }
  }
}

KILN_AVX512 void micro_kernel_avx512_row_edge(int64_t kc, const float* a, int64_t rows, const float* b,
                                              int64_t panel_stride, int64_t ldb, int64_t panels, float* c, int64_t ldc,
                                              bool accumulate, const float* row_bias, const float* col_bias, bool clamp,
                                              float lo, float hi) {
  if (rows == 1) {
    row_edge<1>(kc, a, b, panel_stride, ldb, panels, c, ldc, accumulate, row_bias, col_bias, clamp, lo, hi);
  } else {
    row_edge<2>(kc, a, b, panel_stride, ldb, panels, c, ldc, accumulate, row_bias, col_bias, clamp, lo, hi);
  }
}

KILN_AVX512 void gather_panel_avx512(const float* x, int64_t plane, const int32_t* offsets, int64_t nr, int64_t kc,
                                     float* dst) {
  const __mmask16 mask = first_lanes(nr);
  const __m512i off = _mm512_maskz_loadu_epi32(mask, offsets);
  for (int64_t p = 0; p < kc; ++p) {
    _mm512_storeu_ps(dst + p * kGemmNr, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, off, x + p * plane, 4));
  }
}

KILN_AVX512 void gather_taps_avx512(const float* x, int64_t plane, const int32_t* offsets, const uint16_t* masks,
                                    int64_t taps, int64_t p0, int64_t kc, float* dst) {
  int64_t c = p0 / taps, t = p0 % taps;
  for (int64_t p = 0; p < kc; ++p) {
    const __m512i off = _mm512_loadu_si512(offsets + t * kGemmNr);
    _mm512_storeu_ps(dst + p * kGemmNr, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), masks[t], off, x + c * plane, 4));
    if (++t == taps) {
      t = 0;
      ++c;
    }
  }
}

// Two whole 6x16 tiles side by side, B's panels at b0 and b1: twelve
// 512-bit accumulators, per step of k two loads of B and six broadcasts of
// A for twelve FMAs (the 6x16 kernel: one and six for six). Each output is
// the same chain of FMAs as there, so the same bits.
KILN_AVX512 void micro_kernel_avx512_x2(int64_t kc, const float* a, const float* b0, const float* b1, int64_t ldb,
                                        float* c, int64_t ldc, int64_t mr, bool accumulate, const float* row_bias,
                                        const float* col_bias, bool clamp, float lo, float hi) {
  prefetch_tile(c, ldc, mr, 2 * kGemmNr);
  __m512 acc[kGemmMr][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    fma_step_6x32(a, _mm512_loadu_ps(b0), _mm512_loadu_ps(b1), acc);
    a += kGemmMr;
    b0 += ldb;
    b1 += ldb;
  }
  const __mmask16 mask = 0xFFFF;
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const auto bias = [row_bias](int64_t i) { return row_bias != nullptr ? row_bias[i] : 0.f; };
  const __m512 col0 = col_bias != nullptr ? _mm512_loadu_ps(col_bias) : _mm512_setzero_ps();
  const __m512 col1 = col_bias != nullptr ? _mm512_loadu_ps(col_bias + kGemmNr) : _mm512_setzero_ps();
  const Tile6x32 out = tile_out_6x32(acc);
  for (int64_t i = 0; i < mr; ++i) {
    store_row16(c + i * ldc, out.v[i][0], mask, accumulate, bias(i), col0, clamp, vlo, vhi);
    store_row16(c + i * ldc + kGemmNr, out.v[i][1], mask, accumulate, bias(i), col1, clamp, vlo, vhi);
  }
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
