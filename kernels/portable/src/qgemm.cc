// The int8 product (qgemm.h): packing, the portable inner loop, the shared
// epilogue, and which inner loop each ISA path takes.

#include "qgemm.h"

#include <string.h>

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
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == Isa::kAvx512 && processor_has_avx512_vnni()) return qgemm_tile_avx512_vnni;
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2) return qgemm_tile_avx2;
#elif KILN_QGEMM_NEON
  if (isa == Isa::kNeon) return processor_has_dotprod() ? qgemm_tile_neon_dot : qgemm_tile_neon;
#elif KILN_QGEMM_DSP
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

// Zero-point correction, requantization, clamping and the store of one tile.
void finish_tile(const QGemmProblem& p, int64_t c0, int64_t mr, int64_t p0, int64_t nr,
                 const int32_t acc[kQGemmMr][kQGemmNr]) {
  for (int64_t r = 0; r < mr; ++r) {
    const int64_t c = c0 + r;
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
      int64_t q = qgemm_requantize(sat, p.multiplier[c], p.shift[c]) + p.y_zp;
      q = q < p.y_min ? p.y_min : q > p.y_max ? p.y_max : q;
      if (p.y_dtype == DType::UINT8) {
        static_cast<uint8_t*>(p.y)[at] = static_cast<uint8_t>(q);
      } else {
        static_cast<int8_t*>(p.y)[at] = static_cast<int8_t>(q);
      }
    }
  }
}

}  // namespace

void qgemm(const QGemmProblem& p, QGemmTileFn tile) {
  const int64_t kp = qgemm_kp(p.k);
  int32_t acc[kQGemmMr][kQGemmNr];
  for (int64_t p0 = 0; p0 < p.n; p0 += kQGemmNr) {
    const uint8_t* panel = p.x + (p0 / kQGemmNr) * kp * kQGemmNr;
    const int64_t nr = p.n - p0 < kQGemmNr ? p.n - p0 : kQGemmNr;
    for (int64_t c0 = 0; c0 < p.m; c0 += kQGemmMr) {
      const int64_t mr = p.m - c0 < kQGemmMr ? p.m - c0 : kQGemmMr;
      tile(kp, p.w + c0 * kp, kp, mr, panel, acc);
      finish_tile(p, c0, mr, p0, nr, acc);
    }
  }
}

void qgemm_pack_rows(const uint8_t* x, int64_t ldx, int64_t n, int64_t k, bool flip, uint8_t* out,
                     int32_t* x_sums) {
  const int64_t kp = qgemm_kp(k);
  const int64_t panels = qgemm_round_up(n, kQGemmNr) / kQGemmNr;
  memset(out, 0, static_cast<size_t>(panels * kp * kQGemmNr));
  const uint8_t bias = flip ? 0x80 : 0;
  for (int64_t col = 0; col < n; ++col) {
    uint8_t* dst = out + (col / kQGemmNr) * kp * kQGemmNr + (col % kQGemmNr) * 4;
    const uint8_t* src = x + col * ldx;
    int32_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const uint8_t v = static_cast<uint8_t>(src[kk] ^ bias);
      dst[(kk / 4) * 4 * kQGemmNr + kk % 4] = v;
      sum += v;
    }
    if (x_sums != nullptr) x_sums[col] = sum;
  }
}

void qgemm_pack_im2col(const QIm2col& g, uint8_t* out, int32_t* x_sums) {
  const int64_t k = g.channels * g.kh * g.kw;
  const int64_t n = g.oh * g.ow;
  const int64_t kp = qgemm_kp(k);
  const int64_t panels = qgemm_round_up(n, kQGemmNr) / kQGemmNr;
  memset(out, 0, static_cast<size_t>(panels * kp * kQGemmNr));
  const uint8_t bias = g.flip ? 0x80 : 0;
  if (x_sums != nullptr) memset(x_sums, 0, static_cast<size_t>(n) * sizeof(int32_t));
  int64_t kk = 0;
  for (int64_t c = 0; c < g.channels; ++c) {
    const uint8_t* plane = g.x + c * g.h * g.w;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      for (int64_t kx = 0; kx < g.kw; ++kx, ++kk) {
        uint8_t* row = out + (kk / 4) * 4 * kQGemmNr + kk % 4;
        int64_t col = 0;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t iy = oy * g.sh - g.pt + ky * g.dh;
          const bool row_in = iy >= 0 && iy < g.h;
          for (int64_t ox = 0; ox < g.ow; ++ox, ++col) {
            const int64_t ix = ox * g.sw - g.pl + kx * g.dw;
            const uint8_t v = row_in && ix >= 0 && ix < g.w ? static_cast<uint8_t>(plane[iy * g.w + ix] ^ bias) : g.pad;
            row[(col / kQGemmNr) * kp * kQGemmNr + (col % kQGemmNr) * 4] = v;
            if (x_sums != nullptr) x_sums[col] += v;
          }
        }
      }
    }
  }
}

}  // namespace kernels
}  // namespace kiln
