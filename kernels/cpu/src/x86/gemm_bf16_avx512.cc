// The BF16 path of the packed GEMM (gemm.cc; kiln plan --precision bf16 on
// the CPU): micro-kernels that multiply BF16 panels with AVX512-BF16's
// vdpbf16ps, accumulating in FP32, and the in-place conversions of panels
// packed in FP32 into the BF16 layout they read.
//
// vdpbf16ps takes two consecutive k at once: each 32-bit lane of its
// operands holds a pair of BF16 values, and the lane of the accumulator
// gains a[k] * b[k] + a[k + 1] * b[k + 1] (each product exact in FP32,
// denormal inputs and results flushed to zero). So the BF16 panels store k
// in pairs (gemm_blocking.h):
//   A panel (kGemmMr rows): per pair q, [row 0: k, k + 1][row 1: k, k + 1]...
//   B panel (kGemmNr columns): per pair q, [col 0: k, k + 1][col 1: ...]...
// one 512-bit load of B and one 32-bit broadcast of A per row and pair:
// twice the multiply-adds of an FP32 FMA per instruction, half the bytes.
//
// Each function carries KILN_AVX512_BF16; gemm.cc calls these only after
// bf16_available() said yes.

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "kiln/kernels/gemm_blocking.h"
#include "x86/avx512_helpers.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace x86 {

namespace {

// The pair of BF16 values at p as one 32-bit lane, in every lane.
KILN_AVX512_BF16 inline __m512bh broadcast_pair(const uint16_t* p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(v)));
}

KILN_AVX512_BF16 inline __m512bh load_pairs(const uint16_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}

// The tile (one or two panels of B) over `pairs` pairs of k, then the
// epilogue as the FP32 micro-kernels apply it.
template <int kPanels>
KILN_AVX512_BF16 void tile_bf16(int64_t pairs, const uint16_t* a, const uint16_t* b0, const uint16_t* b1, float* c,
                                int64_t ldc, int64_t mr, int64_t nr, bool accumulate, const float* row_bias,
                                const float* col_bias, bool clamp, float lo, float hi) {
  prefetch_tile(c, ldc, mr, kPanels * kGemmNr);
  __m512 acc[kGemmMr][kPanels];
  for (auto& row : acc) {
    for (auto& v : row) v = _mm512_setzero_ps();
  }
#pragma GCC unroll 2
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh v0 = load_pairs(b0);
    const __m512bh v1 = kPanels == 2 ? load_pairs(b1) : v0;
#pragma GCC unroll 6
    for (int i = 0; i < kGemmMr; ++i) {
      const __m512bh av = broadcast_pair(a + 2 * i);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, v0);
      if (kPanels == 2) acc[i][kPanels - 1] = _mm512_dpbf16_ps(acc[i][kPanels - 1], av, v1);
    }
    a += 2 * kGemmMr;
    b0 += 2 * kGemmNr;
    if (kPanels == 2) b1 += 2 * kGemmNr;
  }
  __m512 out[kGemmMr][kPanels];
#pragma GCC unroll 6
  for (int i = 0; i < kGemmMr; ++i) {
    for (int j = 0; j < kPanels; ++j) out[i][j] = acc[i][j];
  }
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const auto bias = [row_bias](int64_t i) { return row_bias != nullptr ? row_bias[i] : 0.f; };
  for (int j = 0; j < kPanels; ++j) {
    const __mmask16 mask = kPanels == 2 ? static_cast<__mmask16>(0xFFFF) : first_lanes(nr);
    const __m512 col = col_bias != nullptr ? _mm512_maskz_loadu_ps(mask, col_bias + j * kGemmNr) : _mm512_setzero_ps();
    for (int64_t i = 0; i < mr; ++i) {
      store_row16(c + i * ldc + j * kGemmNr, out[i][j], mask, accumulate, bias(i), col, clamp, vlo, vhi);
    }
  }
}

}  // namespace

KILN_AVX512_BF16 void micro_kernel_bf16(int64_t pairs, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc,
                                        int64_t mr, int64_t nr, bool accumulate, const float* row_bias,
                                        const float* col_bias, bool clamp, float lo, float hi) {
  tile_bf16<1>(pairs, a, b, nullptr, c, ldc, mr, nr, accumulate, row_bias, col_bias, clamp, lo, hi);
}

KILN_AVX512_BF16 void micro_kernel_bf16_x2(int64_t pairs, const uint16_t* a, const uint16_t* b0, const uint16_t* b1,
                                           float* c, int64_t ldc, int64_t mr, bool accumulate, const float* row_bias,
                                           const float* col_bias, bool clamp, float lo, float hi) {
  tile_bf16<2>(pairs, a, b0, b1, c, ldc, mr, 2 * kGemmNr, accumulate, row_bias, col_bias, clamp, lo, hi);
}

// A panel packed in FP32 ([kc][kGemmMr]) rewritten in place as BF16 pairs:
// pair q (rows 2q and 2q + 1 of the panel, 12 floats) becomes 12 BF16
// values at byte 24q, read before anything is written over them (the
// write trails the read by 24q bytes). An odd last row pairs with zeros.
KILN_AVX512_BF16 void convert_a_panel_bf16(float* panel, int64_t kc) {
  static_assert(kGemmMr == 6, "a pair of rows of A is 12 floats");
  // Word 2i takes row 2q's value i, word 2i + 1 row 2q + 1's.
  const __m256i order = _mm256_setr_epi16(0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 0, 0, 0, 0);
  uint16_t* out = reinterpret_cast<uint16_t*>(panel);
  for (int64_t q = 0; 2 * q < kc; ++q) {
    const int64_t floats = 2 * q + 1 < kc ? 2 * kGemmMr : kGemmMr;
    const __m512 v = _mm512_maskz_loadu_ps(first_lanes(floats), panel + 2 * q * kGemmMr);
    const __m256i words = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
    _mm256_mask_storeu_epi16(out + 2 * q * kGemmMr, 0x0FFF, _mm256_permutexvar_epi16(order, words));
  }
}

// A panel of B packed in FP32 ([kc][kGemmNr]) rewritten in place as BF16
// pairs: rows 2q and 2q + 1 (128 bytes) become 32 BF16 values at byte 64q,
// the same read-before-write order.
KILN_AVX512_BF16 void convert_b_panel_bf16(float* panel, int64_t kc) {
  static_assert(kGemmNr == 16, "a row of B is one vector");
  // Word 2j takes row 2q's column j (word j of the conversion), word
  // 2j + 1 row 2q + 1's (word 16 + j).
  alignas(64) static const uint16_t kOrder[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                  8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kOrder);
  uint16_t* out = reinterpret_cast<uint16_t*>(panel);
  for (int64_t q = 0; 2 * q < kc; ++q) {
    const __m512 r0 = _mm512_loadu_ps(panel + 2 * q * kGemmNr);
    const __m512 r1 = 2 * q + 1 < kc ? _mm512_loadu_ps(panel + (2 * q + 1) * kGemmNr) : _mm512_setzero_ps();
    const __m512i words = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(r1, r0));
    _mm512_storeu_si512(out + 2 * q * kGemmNr, _mm512_permutexvar_epi16(order, words));
  }
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
