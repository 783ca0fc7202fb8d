// The int8 product (qgemm.h): packing, the portable inner loop, the shared
// epilogue, and which inner loop each ISA path takes (the loops themselves:
// x86/qgemm_avx2.cc, x86/qgemm_vnni.cc, arm/qgemm_neon.cc,
// arm/qgemm_neon_dot.cc, arm/qgemm_cortexm.cc; the direct convolution:
// x86/qgemm_direct_sse2.cc).

#include "qgemm.h"

#include <string.h>

#include "byte_runs.h"
#include "isa_switch.h"
#include "parallel.h"
#include "x86/int8_sse2.h"

namespace kiln {
namespace kernels {

void qgemm_tile_portable(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                         int32_t acc[kQGemmMr][kQGemmNr]) {
  for (int64_t r = 0; r < mr; ++r) {
    int32_t sum[kQGemmNr] = {};
    const int8_t* wr = w + r * ldw;
    for (int64_t q = 0; q < kp / 4; ++q) {
      const uint8_t* row = panel + q * 4 * kQGemmNr;
      const int8_t* wq = wr + q * 4;
      for (int64_t i = 0; i < kQGemmNr; ++i) {
        const uint8_t* x = row + i * 4;
        sum[i] += x[0] * wq[0] + x[1] * wq[1] + x[2] * wq[2] + x[3] * wq[3];
      }
    }
    for (int64_t i = 0; i < kQGemmNr; ++i) acc[r][i] = sum[i];
  }
}

QGemmTileFn qgemm_tile_for(Isa isa) {
#if KILN_X86
  if (isa == Isa::kAvx512 && processor_has_avx512_vnni()) return qgemm_tile_avx512_vnni;
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2) return qgemm_tile_avx2;
#elif KILN_NEON
  if (isa == Isa::kNeon) return processor_has_dotprod() ? qgemm_tile_neon_dot : qgemm_tile_neon;
#elif KILN_CORTEXM_DSP
  (void)isa;
  return qgemm_tile_dsp;  // the core the image is built for has it
#else
  (void)isa;
#endif
  return qgemm_tile_portable;
}

namespace {

inline int32_t saturate_int32(int64_t v) {
  return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : static_cast<int32_t>(v);
}

#if KILN_X86
// Whether channels [c0, c0 + 8) all take requantize_columns_avx2: each
// channel's qgemm_vector_requant_params, weight zero points (if any) within
// 255.
bool columns_fit(const QGemmProblem& p, int64_t c0) {
  for (int64_t c = c0; c < c0 + kQGemmMr; ++c) {
    if (!qgemm_vector_requant_params(p.shift[c], p.bias[c])) return false;
    if (p.w_zp != nullptr && (p.w_zp[c] > 255 || p.w_zp[c] < -255)) return false;
  }
  return true;
}
#endif

// Zero-point correction, requantization, clamping and the store of one tile.
void finish_tile(const QGemmProblem& p, int64_t c0, int64_t mr, int64_t p0, int64_t nr,
                 const int32_t acc[kQGemmMr][kQGemmNr]) {
  const size_t y_elem = dtype_size(p.y_dtype);
#if KILN_X86
  if (mr == kQGemmMr && p.multiplier != nullptr && p.y_channel_stride == 1 && p.isa != Isa::kScalar &&
      (p.w_zp == nullptr ? qgemm_vector_requant_k(p.k) : p.k <= 4096) && y_elem == 1 && columns_fit(p, c0)) {
    // Eight channels side by side in the output (a MatMul's rows).
    requantize_columns_avx2(acc, nr, p.bias + c0, p.multiplier + c0, p.shift + c0,
                            p.w_zp != nullptr ? p.w_zp + c0 : nullptr, p.w_zp != nullptr ? p.x_sums + p0 : nullptr,
                            p.y_zp, p.y_min, p.y_max, p.y_dtype == DType::UINT8,
                            static_cast<uint8_t*>(p.y) + c0 + p0 * p.y_column_stride, p.y_column_stride);
    return;
  }
#endif
  for (int64_t r = 0; r < mr; ++r) {
    const int64_t c = c0 + r;
    if (p.multiplier != nullptr && p.w_zp == nullptr && p.y_column_stride == 1) {
      // One channel's contiguous outputs (a convolution's plane).
      qgemm_requantize_row(acc[r], nr, p.bias[c], p.multiplier[c], p.shift[c], p.y_zp, p.y_min, p.y_max, p.y_dtype,
                           static_cast<uint8_t*>(p.y) + static_cast<size_t>(c * p.y_channel_stride + p0) * y_elem,
                           p.isa, qgemm_vector_requant_k(p.k));
      continue;
    }
    const int64_t bias = p.bias[c];
    const int64_t w_zp = p.w_zp != nullptr ? p.w_zp[c] : 0;
    const int64_t base = c * p.y_channel_stride;
    for (int64_t i = 0; i < nr; ++i) {
      const int64_t col = p0 + i;
      int64_t v = int64_t{acc[r][i]} + bias;
      if (w_zp != 0) v -= w_zp * p.x_sums[col];
      const int32_t sat = saturate_int32(v);
      const int64_t at = base + col * p.y_column_stride;
      if (p.multiplier == nullptr) {
        static_cast<int32_t*>(p.y)[at] = sat;
        continue;
      }
      const int32_t shift = p.shift[c] < 1 ? 1 : p.shift[c] > 62 ? 62 : p.shift[c];
      int64_t q = qgemm_requantize(sat, p.multiplier[c], shift) + p.y_zp;
      q = q < p.y_min ? p.y_min : q > p.y_max ? p.y_max : q;
      if (p.y_dtype == DType::UINT8) {
        static_cast<uint8_t*>(p.y)[at] = static_cast<uint8_t>(q);
      } else {
        static_cast<int8_t*>(p.y)[at] = static_cast<int8_t>(q);
      }
    }
  }
}

#if !defined(KILN_BARE_METAL)
// qgemm's convolution branch: channels [c0, c0 + mr) of the run of nrun
// columns from r0, their sums in rows (kRunMax apart), requantized into
// their planes.
constexpr int64_t kRunMax = 128;
void requantize_plane_run(const QGemmProblem& p, const int32_t* rows, int64_t c0, int64_t mr, int64_t r0,
                          int64_t nrun) {
  qgemm_requantize_rows(
      rows, kRunMax, mr, nrun, p.bias + c0, p.multiplier + c0, p.shift + c0, p.y_zp, p.y_min, p.y_max, p.y_dtype,
      static_cast<uint8_t*>(p.y) + static_cast<size_t>(c0 * p.y_channel_stride + r0) * dtype_size(p.y_dtype),
      p.y_channel_stride, p.isa, qgemm_vector_requant_k(p.k));
}
#endif

#if KILN_X86
// The AVX2 path's planes (qgemm's convolution branch) with the weights of
// each kQGemmSplitRows channels split once (qgemm_split_weights_avx2) for
// every panel: those channels outermost, each group sweeping all the
// columns in runs of up to 128. The panels come from L2 once per group,
// the split weights (8 kp bytes) stay in L1. Panels whose bytes are all <= 127 keep vpmaddubsw
// (qgemm_tile_rows_avx2), and so do all of them with narrow weights
// (p.w_narrow: nothing is split or checked). Columns go in chunks of
// kChunkPanels panels, so that each panel is checked for bytes above 127
// once per chunk.
void planes_split_avx2(const QGemmProblem& p, int64_t kp) {
  constexpr int64_t kChunkPanels = 256;
  alignas(32) int32_t ws[kQGemmSplitRows * kQGemmSplitMaxKp / 2];  // 36 KiB
  int32_t rows[kQGemmMr][kRunMax];
  bool small[kChunkPanels];
  for (int64_t n0 = 0; n0 < p.n; n0 += kChunkPanels * kQGemmNr) {
    const int64_t n1 = p.n - n0 < kChunkPanels * kQGemmNr ? p.n : n0 + kChunkPanels * kQGemmNr;
    bool any_large = false;
    for (int64_t p0 = n0; p0 < n1; p0 += kQGemmNr) {
      small[(p0 - n0) / kQGemmNr] = p.w_narrow || qgemm_panel_is_small_avx2(kp, p.x + (p0 / kQGemmNr) * kp * kQGemmNr);
      any_large = any_large || !small[(p0 - n0) / kQGemmNr];
    }
    for (int64_t c0 = 0; c0 < p.m; c0 += kQGemmSplitRows) {
      const int64_t mr = p.m - c0 < kQGemmSplitRows ? p.m - c0 : kQGemmSplitRows;
      if (any_large) qgemm_split_weights_avx2(p.w + c0 * kp, kp, mr, kp, ws);
      for (int64_t r0 = n0; r0 < n1; r0 += kRunMax) {
        const int64_t nrun = n1 - r0 < kRunMax ? n1 - r0 : kRunMax;
        for (int64_t p0 = r0; p0 < r0 + nrun; p0 += kQGemmNr) {
          const uint8_t* panel = p.x + (p0 / kQGemmNr) * kp * kQGemmNr;
          if (small[(p0 - n0) / kQGemmNr]) {
            qgemm_tile_rows_avx2(kp, p.w + c0 * kp, kp, mr, panel, true, rows[0] + (p0 - r0), kRunMax);
          } else {
            qgemm_tile_rows_split_avx2(kp, ws, mr, panel, rows[0] + (p0 - r0), kRunMax);
          }
        }
        requantize_plane_run(p, rows[0], c0, mr, r0, nrun);
      }
    }
  }
}
#endif

}  // namespace

void qgemm_requantize_row(const int32_t* acc, int64_t n, int32_t bias, int32_t m, int32_t s, int32_t zp, int32_t lo,
                          int32_t hi, DType dtype, void* y, Isa isa, bool small_k) {
  int64_t i = 0;
#if KILN_X86
  if (isa != Isa::kScalar && isa != Isa::kNeon && small_k && qgemm_vector_requant_params(s, bias)) {
    requantize_row_avx2(acc, n, bias, m, s, zp, lo, hi, dtype == DType::UINT8, y);
    if (n > 8 && n % 8 != 0) {
      // The tail as the last eight values again (the overlap rewritten with
      // the same bytes) instead of the scalar loop.
      requantize_row_avx2(acc + n - 8, 8, bias, m, s, zp, lo, hi, dtype == DType::UINT8,
                          static_cast<uint8_t*>(y) + n - 8);
      return;
    }
    i = n - n % 8;
  }
#else
  (void)isa;
  (void)small_k;
#endif
  const int32_t shift = s < 1 ? 1 : s > 62 ? 62 : s;
  for (; i < n; ++i) {
    int64_t q = qgemm_requantize(saturate_int32(int64_t{acc[i]} + bias), m, shift) + zp;
    q = q < lo ? lo : q > hi ? hi : q;
    if (dtype == DType::UINT8) {
      static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(q);
    } else {
      static_cast<int8_t*>(y)[i] = static_cast<int8_t>(q);
    }
  }
}

void qgemm_requantize_rows(const int32_t* acc, int64_t ld, int64_t rows, int64_t n, const int32_t* bias,
                           const int32_t* m, const int32_t* s, int32_t zp, int32_t lo, int32_t hi, DType dtype, void* y,
                           int64_t y_ld, Isa isa, bool small_k) {
  const size_t y_elem = dtype_size(dtype);
#if KILN_X86
  if (isa == Isa::kAvx512 && small_k && y_elem == 1) {
    bool fit = true;
    for (int64_t r = 0; r < rows && fit; ++r) fit = qgemm_vector_requant_params(s[r], bias[r]);
    if (fit) {
      requantize_rows_avx512(acc, ld, rows, n, bias, m, s, zp, lo, hi, dtype == DType::UINT8, static_cast<uint8_t*>(y),
                             y_ld);
      return;
    }
  }
#endif
  for (int64_t r = 0; r < rows; ++r) {
    qgemm_requantize_row(acc + r * ld, n, bias[r], m[r], s[r], zp, lo, hi, dtype,
                         static_cast<uint8_t*>(y) + static_cast<size_t>(r * y_ld) * y_elem, isa, small_k);
  }
}

void qgemm_depthwise_tap(int32_t* acc, const uint8_t* x, int64_t stride, int64_t n, int32_t w, Isa isa) {
  int64_t i = 0;
#if KILN_X86
  if (stride == 1 && isa != Isa::kScalar && isa != Isa::kNeon) {
    depthwise_tap_avx2(acc, x, n, w);
    i = n - n % 8;
  }
#else
  (void)isa;
#endif
  for (; i < n; ++i) acc[i] += w * x[i * stride];
}

void qgemm(const QGemmProblem& p, QGemmTileFn tile) {
  const int64_t kp = qgemm_kp(p.k);
  int32_t acc[kQGemmMr][kQGemmNr];
#if !defined(KILN_BARE_METAL)
  if (p.multiplier != nullptr && p.w_zp == nullptr && p.y_column_stride == 1) {
    // A convolution's planes: the tiles of a run of panels gathered per
    // channel, then one requantization per channel over the whole run
    // (instead of one call per 16 columns). The run's panels (kp x run
    // bytes) stay within about 16 KiB, so they are read from L1 by every
    // channel tile. (Firmware keeps the tile-by-tile epilogue: no 4 KiB of
    // sums on its stack.)
#if KILN_X86
    if (tile == qgemm_tile_avx2 && kp <= kQGemmSplitMaxKp) {
      planes_split_avx2(p, kp);
      return;
    }
#endif
    int32_t rows[kQGemmMr][kRunMax];
    int64_t run = (16384 / kp) / kQGemmNr * kQGemmNr;
    run = run < kQGemmNr ? kQGemmNr : run > kRunMax ? kRunMax : run;
#if KILN_X86
    // x86: the tile writes the run's rows itself, and the AVX2 tile's check
    // of its panel for bytes above 127 is made once per panel and run, not
    // once per channel tile.
    const QGemmTileRowsFn rows_tile = tile == qgemm_tile_avx2          ? qgemm_tile_rows_avx2
                                      : tile == qgemm_tile_avx512_vnni ? qgemm_tile_rows_vnni
                                                                       : nullptr;
    bool small[kRunMax / kQGemmNr] = {};
    // A last panel of at most 8 columns through the 256-bit VNNI tile.
    const bool half_tail = rows_tile == qgemm_tile_rows_vnni && p.n % kQGemmNr != 0 && p.n % kQGemmNr <= 8 &&
                           processor_has_avx512_vnni_vl();
#endif
    for (int64_t r0 = 0; r0 < p.n; r0 += run) {
      const int64_t nrun = p.n - r0 < run ? p.n - r0 : run;
#if KILN_X86
      if (tile == qgemm_tile_avx2) {
        for (int64_t p0 = r0; p0 < r0 + nrun; p0 += kQGemmNr) {
          small[(p0 - r0) / kQGemmNr] =
              p.w_narrow || qgemm_panel_is_small_avx2(kp, p.x + (p0 / kQGemmNr) * kp * kQGemmNr);
        }
      }
#endif
      for (int64_t c0 = 0; c0 < p.m; c0 += kQGemmMr) {
        const int64_t mr = p.m - c0 < kQGemmMr ? p.m - c0 : kQGemmMr;
        for (int64_t p0 = r0; p0 < r0 + nrun; p0 += kQGemmNr) {
          const uint8_t* panel = p.x + (p0 / kQGemmNr) * kp * kQGemmNr;
#if KILN_X86
          if (half_tail && p.n - p0 <= 8) {
            qgemm_tile_rows_vnni_half(kp, p.w + c0 * kp, kp, mr, panel, rows[0] + (p0 - r0), kRunMax);
            continue;
          }
          if (rows_tile != nullptr) {
            rows_tile(kp, p.w + c0 * kp, kp, mr, panel, small[(p0 - r0) / kQGemmNr], rows[0] + (p0 - r0), kRunMax);
            continue;
          }
#endif
          tile(kp, p.w + c0 * kp, kp, mr, panel, acc);
          for (int64_t r = 0; r < mr; ++r) memcpy(rows[r] + (p0 - r0), acc[r], sizeof acc[r]);
        }
        requantize_plane_run(p, rows[0], c0, mr, r0, nrun);
      }
    }
    return;
  }
#endif
  for (int64_t p0 = 0; p0 < p.n; p0 += kQGemmNr) {
    const uint8_t* panel = p.x + (p0 / kQGemmNr) * kp * kQGemmNr;
    const int64_t nr = p.n - p0 < kQGemmNr ? p.n - p0 : kQGemmNr;
    for (int64_t c0 = 0; c0 < p.m; c0 += kQGemmMr) {
      const int64_t mr = p.m - c0 < kQGemmMr ? p.m - c0 : kQGemmMr;
#if KILN_X86
      if (p.w_narrow && tile == qgemm_tile_avx2) {
        qgemm_tile_rows_avx2(kp, p.w + c0 * kp, kp, mr, panel, true, acc[0], kQGemmNr);
        finish_tile(p, c0, mr, p0, nr, acc);
        continue;
      }
#endif
      tile(kp, p.w + c0 * kp, kp, mr, panel, acc);
      finish_tile(p, c0, mr, p0, nr, acc);
    }
  }
}

void qgemm_parallel(const QGemmProblem& p, QGemmTileFn tile, ThreadPool* pool) {
  const int64_t tiles = (p.m + kQGemmMr - 1) / kQGemmMr;
  const int64_t tasks = parallel_tasks(pool, p.m * p.n * p.k, tiles);
  if (tasks <= 1) {
    qgemm(p, tile);
    return;
  }
  const size_t y_elem = dtype_size(p.y_dtype);
  parallel_for(pool, tasks, [&](int64_t t) {
    int64_t c0, c1;
    parallel_range(p.m, tasks, t, kQGemmMr, &c0, &c1);
    if (c0 >= c1) return;
    QGemmProblem q = p;
    q.m = c1 - c0;
    q.w = p.w + c0 * qgemm_kp(p.k);
    q.bias = p.bias + c0;
    if (p.w_zp != nullptr) q.w_zp = p.w_zp + c0;
    if (p.multiplier != nullptr) {
      q.multiplier = p.multiplier + c0;
      q.shift = p.shift + c0;
    }
    q.y = static_cast<uint8_t*>(p.y) + static_cast<size_t>(c0 * p.y_channel_stride) * y_elem;
    qgemm(q, tile);
  });
}

void qgemm_dot_rows(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x, uint8_t flip,
                    int32_t* out, Isa isa, bool w_narrow) {
#if KILN_X86
  if (isa == Isa::kAvx512 && processor_has_avx512_vnni()) {
    dot_rows_avx512_vnni(kp, len, w, rows, x, flip, out);
    return;
  }
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2) {
    dot_rows_avx2(kp, len, w, rows, x, flip, w_narrow, out);
    return;
  }
#else
  (void)isa;
  (void)w_narrow;
#endif
#if KILN_CORTEXM_DSP
  qgemm_dot_rows_dsp(kp, len, w, rows, x, flip, out);
  return;
#endif
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* wr = w + r * kp;
    int32_t sum = 0;
    for (int64_t k = 0; k < len; ++k) sum += static_cast<uint8_t>(x[k] ^ flip) * wr[k];
    out[r] = sum;
  }
}

void qgemm_gemv(const QGemmProblem& p, const uint8_t* x, uint8_t flip, int32_t x_sum) {
  const int64_t kp = qgemm_kp(p.k);
  QGemmProblem one = p;
  one.n = 1;
  one.x_sums = &x_sum;
  int32_t acc[kQGemmMr][kQGemmNr];
  for (int64_t c0 = 0; c0 < p.m; c0 += kQGemmMr) {
    const int64_t mr = p.m - c0 < kQGemmMr ? p.m - c0 : kQGemmMr;
    int32_t dots[kQGemmMr];
    qgemm_dot_rows(kp, p.k, p.w + c0 * kp, mr, x, flip, dots, p.isa, p.w_narrow);
    for (int64_t r = 0; r < mr; ++r) acc[r][0] = dots[r];
    finish_tile(one, c0, mr, 0, 1, acc);
  }
}

void qgemm_pack_rows(const uint8_t* x, int64_t ldx, int64_t n, int64_t k, bool flip, uint8_t* out, int32_t* x_sums) {
  const int64_t kp = qgemm_kp(k);
  const int64_t panels = qgemm_round_up(n, kQGemmNr) / kQGemmNr;
  memset(out, 0, static_cast<size_t>(panels * kp * kQGemmNr));
  const uint8_t bias = flip ? 0x80 : 0;
  const uint32_t bias4 = flip ? 0x80808080u : 0;
  for (int64_t col = 0; col < n; ++col) {
    uint8_t* dst = out + (col / kQGemmNr) * kp * kQGemmNr + (col % kQGemmNr) * 4;
    const uint8_t* src = x + col * ldx;
    // Four bytes of k at a time: one 32-bit word into each panel row.
    int64_t kk = 0;
    for (; kk + 4 <= k; kk += 4) {
      uint32_t word;
      memcpy(&word, src + kk, 4);
      word ^= bias4;
      memcpy(dst + (kk / 4) * 4 * kQGemmNr, &word, 4);
    }
    for (; kk < k; ++kk) dst[(kk / 4) * 4 * kQGemmNr + kk % 4] = static_cast<uint8_t>(src[kk] ^ bias);
    if (x_sums == nullptr) continue;
    // The sum of the stored bytes: each is the value plus 128 where flipped.
    int32_t sum = 0, done = 0;
#if KILN_X86
    sum = x86::sum_bytes_sse2(src, static_cast<int32_t>(k), flip, &done);
#endif
    for (int32_t i = done; i < k; ++i) sum += flip ? static_cast<int8_t>(src[i]) : src[i];
    x_sums[col] = sum + (flip ? 128 * static_cast<int32_t>(k) : 0);
  }
}

void qgemm_pack_columns(const uint8_t* x, int64_t ldx, int64_t n, int64_t k, bool flip, uint8_t* out, int32_t* x_sums) {
  const int64_t kp = qgemm_kp(k);
  const int64_t panel_bytes = kp * kQGemmNr;
  const uint8_t bias = flip ? 0x80 : 0;
  for (int64_t q = 0; q < kp / 4; ++q) {
    // Four channel rows (zeros past k) interleaved into 16 x 4 bytes per panel.
    const uint8_t* rows[4];
    static const uint8_t kZeros[kQGemmNr] = {};
    for (int64_t r = 0; r < 4; ++r) rows[r] = 4 * q + r < k ? x + (4 * q + r) * ldx : nullptr;
    int64_t p0 = 0;
#if KILN_X86
    p0 = x86::pack_column_quads_sse2(rows, n / kQGemmNr * kQGemmNr, bias, out + q * 4 * kQGemmNr, panel_bytes);
#endif
    for (; p0 < n; p0 += kQGemmNr) {
      uint8_t* dst = out + (p0 / kQGemmNr) * panel_bytes + q * 4 * kQGemmNr;
      for (int64_t i = 0; i < kQGemmNr; ++i) {
        for (int64_t r = 0; r < 4; ++r) {
          const uint8_t* row = rows[r] != nullptr ? rows[r] : kZeros;
          dst[i * 4 + r] = p0 + i < n && rows[r] != nullptr ? static_cast<uint8_t>(row[p0 + i] ^ bias) : 0;
        }
      }
    }
  }
  if (x_sums != nullptr) {
    for (int64_t p = 0; p < n; ++p) x_sums[p] = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t p = 0; p < n; ++p) x_sums[p] += static_cast<uint8_t>(x[kk * ldx + p] ^ bias);
    }
  }
}

namespace {

// Row kk = (c, ky, kx) of the im2col matrix, columns [p0, p0 + count), into
// dst, raw (not flipped): the padding as pad ^ flip, so that the flip
// applied when the rows are interleaved gives `pad` back.
void im2col_row(const QIm2col& g, int64_t c, int64_t ky, int64_t kx, int64_t p0, int64_t count, uint8_t raw_pad,
                uint8_t* dst) {
  const uint8_t* plane = g.x + c * g.h * g.w;
  const int64_t first = g.pl - kx * g.dw;  // ix = ox * sw - first
  int64_t ox_lo = first <= 0 ? 0 : (first + g.sw - 1) / g.sw;
  int64_t ox_hi = g.w + first <= 0 ? 0 : (g.w + first - 1) / g.sw + 1;
  if (ox_lo > g.ow) ox_lo = g.ow;
  if (ox_hi > g.ow) ox_hi = g.ow;
  if (ox_hi < ox_lo) ox_hi = ox_lo;
#if !defined(KILN_BARE_METAL)
  if (g.sh == 1 && g.sw == 1 && g.ow == g.w) {
    // Stride 1 with the output as wide as the input (a "same" convolution):
    // over the rows inside the image the im2col row is the flat plane
    // shifted by one offset, so one copy; then the columns past the left
    // and right edges (wrapped from the neighbouring rows, or outside the
    // plane and not copied) become padding. (Firmware keeps the per-row
    // runs: less code, and its int8 example has no such convolution.)
    const int64_t shift = (ky * g.dh - g.pt) * g.w - first;          // source of column p: p + shift
    int64_t oy_a = g.pt - ky * g.dh, oy_b = g.h + g.pt - ky * g.dh;  // rows with iy inside
    if (oy_a < 0) oy_a = 0;
    if (oy_b > g.oh) oy_b = g.oh;
    const int64_t end = p0 + count;
    const int64_t pa = oy_a * g.ow > p0 ? oy_a * g.ow : p0, pb = oy_b * g.ow < end ? oy_b * g.ow : end;
    if (pa >= pb) {
      fill_run(dst, raw_pad, count);
      return;
    }
    fill_run(dst, raw_pad, pa - p0);
    fill_run(dst + (pb - p0), raw_pad, end - pb);
    const int64_t sa = pa > -shift ? pa : -shift, sb = pb < g.h * g.w - shift ? pb : g.h * g.w - shift;
    if (sb > sa) copy_run(dst + (sa - p0), plane + sa + shift, sb - sa);
    if (ox_lo > 0 || ox_hi < g.ow) {
      for (int64_t oy = pa / g.ow; oy * g.ow < pb; ++oy) {
        const int64_t row = oy * g.ow;
        for (int64_t ox = 0; ox < ox_lo; ++ox) {
          if (row + ox >= pa && row + ox < pb) dst[row + ox - p0] = raw_pad;
        }
        for (int64_t ox = ox_hi; ox < g.ow; ++ox) {
          if (row + ox >= pa && row + ox < pb) dst[row + ox - p0] = raw_pad;
        }
      }
    }
    return;
  }
#endif
  int64_t done = 0;
  int64_t oy = p0 / g.ow, ox0 = p0 % g.ow;  // of the run's first column
  while (done < count) {
    const int64_t run = g.ow - ox0 < count - done ? g.ow - ox0 : count - done;  // up to the row's end
    const int64_t iy = oy * g.sh - g.pt + ky * g.dh;
    uint8_t* d = dst + done;
    if (iy < 0 || iy >= g.h) {
      fill_run(d, raw_pad, run);
    } else {
      const int64_t a = ox0, b = ox0 + run;  // output columns of this run
      const int64_t in_a = a > ox_lo ? a : ox_lo, in_b = b < ox_hi ? b : ox_hi;
      if (in_a >= in_b) {
        fill_run(d, raw_pad, run);
      } else {
        if (in_a > a) fill_run(d, raw_pad, in_a - a);
        const uint8_t* src = plane + iy * g.w;
        if (g.sw == 1) {
          copy_run(d + (in_a - a), src + in_a - first, in_b - in_a);
        } else {
          int64_t ox = in_a;
#if KILN_X86
          if (g.sw == 2) ox = x86::even_bytes_sse2(src, first, g.w, ox, in_b, d, a);
#endif
          for (; ox < in_b; ++ox) d[ox - a] = src[ox * g.sw - first];
        }
        if (b > in_b) fill_run(d + (in_b - a), raw_pad, b - in_b);
      }
    }
    done += run;
    ox0 += run;
    if (ox0 == g.ow) {
      ox0 = 0;
      ++oy;
    }
  }
}

}  // namespace

void qgemm_pack_im2col(const QIm2col& g, uint8_t* out, int32_t* x_sums) {
  // Four im2col rows at a time into a small buffer, then interleaved into
  // the panels as qgemm_pack_columns does.
  const int64_t k = g.channels * g.kh * g.kw;
  const int64_t n = g.cols >= 0 ? g.cols : g.oh * g.ow;
  const int64_t kp = qgemm_kp(k);
  const int64_t panel_bytes = kp * kQGemmNr;
  const uint8_t flip = g.flip ? 0x80 : 0;
  const uint8_t raw_pad = static_cast<uint8_t>(g.pad ^ flip);
  constexpr int64_t kChunk = 256;  // columns per pass, a multiple of kQGemmNr
  uint8_t rows[4][kChunk];
  if (x_sums != nullptr) memset(x_sums, 0, static_cast<size_t>(n) * sizeof(int32_t));
  for (int64_t p0 = 0; p0 < n; p0 += kChunk) {
    const int64_t count = n - p0 < kChunk ? n - p0 : kChunk;
    for (int64_t q = 0; q < kp / 4; ++q) {
      int64_t valid = 0;
      for (int64_t r = 0; r < 4; ++r) {
        const int64_t kk = 4 * q + r;
        if (kk >= k) break;
        const int64_t taps = g.kh * g.kw, t = g.quad_taps ? kk / 4 % taps : kk % taps;
        const int64_t c = g.quad_taps ? kk / (4 * taps) * 4 + kk % 4 : kk / taps, ky = t / g.kw, kx = t % g.kw;
        im2col_row(g, c, ky, kx, g.col0 + p0, count, raw_pad, rows[r]);
        if (x_sums != nullptr) {
          for (int64_t i = 0; i < count; ++i) x_sums[p0 + i] += static_cast<uint8_t>(rows[r][i] ^ flip);
        }
        ++valid;
      }
      // Rows past k hold zeros after the flip: their raw value is the flip.
      for (int64_t r = valid; r < 4; ++r) memset(rows[r], flip, static_cast<size_t>(count));
      for (int64_t c0 = 0; c0 < count; c0 += kQGemmNr) {
        uint8_t* dst = out + ((p0 + c0) / kQGemmNr) * panel_bytes + q * 4 * kQGemmNr;
        const int64_t nc = count - c0 < kQGemmNr ? count - c0 : kQGemmNr;
#if KILN_X86
        if (nc == kQGemmNr) {
          x86::interleave_rows_sse2(rows, c0, flip, dst);
          continue;
        }
#endif
        for (int64_t i = 0; i < kQGemmNr; ++i) {
          for (int64_t r = 0; r < 4; ++r) dst[i * 4 + r] = i < nc ? static_cast<uint8_t>(rows[r][c0 + i] ^ flip) : 0;
        }
      }
    }
  }
}

}  // namespace kernels
}  // namespace kiln
