// The direct int8 convolution on x86-64 (qgemm.h's QConvDirect): the input
// interleaved once into phase planes, the weights into the tile's step
// order, and the AVX2 or VNNI offsets tile (qgemm_avx2.cc, qgemm_vnni.cc)
// reading the planes in place, requantized in runs of columns. The copies
// use SSE2, the x86-64 baseline (no target attribute); the 3x3 weight
// order is AVX2's (direct_weights_3x3_avx2).

#include "isa_switch.h"

#if KILN_X86

#include <emmintrin.h>
#include <string.h>

#include "parallel.h"
#include "qgemm.h"

namespace kiln {
namespace kernels {

namespace {

constexpr int64_t kDirectSlack = 64;  // the last panel's overreach (in qgemm_conv_direct_bytes)

// The phase planes' geometry: padded row r lands in row r / sh of phase
// r % sh, column x in column x / sw of phase x % sw; each phase plane is
// ph2 x pw2 (the padded extent rounded up to the strides, the rest padding).
struct DirectShape {
  int64_t ph2, pw2, plane4, quad_bytes, quads, taps, steps;
};

DirectShape direct_shape(const QConvDirect& d) {
  DirectShape s;
  s.ph2 = (d.pt + d.h + d.pb + d.sh - 1) / d.sh;
  s.pw2 = (d.pl + d.w + d.pr + d.sw - 1) / d.sw;
  s.plane4 = s.ph2 * s.pw2 * 4;
  s.quad_bytes = d.sh * d.sw * s.plane4;
  s.quads = (d.c + 3) / 4;
  s.taps = d.kh * d.kw;
  s.steps = s.quads * s.taps;
  return s;
}

// Channels 4q..4q+3 of input row iy (the zero point outside the image)
// interleaved into the padded row dst[width][4]; returns the OR of the
// bytes written. A quad past the last channel repeats channel c - 1: its
// weights are 0, so any bytes do, and these leave the OR as it is.
uint8_t direct_row(const QConvDirect& d, int64_t q, int64_t iy, int64_t width, uint8_t* dst) {
  const uint8_t flip = d.flip ? 0x80 : 0;
  const uint8_t* rows[4];
  const bool inside = iy >= 0 && iy < d.h;
  if (inside) {
    for (int64_t j = 0; j < 4; ++j) rows[j] = d.x + ((4 * q + j < d.c ? 4 * q + j : d.c - 1) * d.h + iy) * d.w;
  }
  if (!inside) {
    memset(dst, d.pad, static_cast<size_t>(width * 4));
    return d.pad;
  }
  memset(dst, d.pad, static_cast<size_t>(d.pl * 4));
  memset(dst + (d.pl + d.w) * 4, d.pad, static_cast<size_t>((width - d.pl - d.w) * 4));
  uint8_t* out = dst + d.pl * 4;
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  __m128i any = _mm_setzero_si128();
  int64_t i = 0;
  for (; i + 16 <= d.w; i += 16) {
    __m128i v[4];
    for (int64_t j = 0; j < 4; ++j)
      v[j] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + i)), vflip);
    const __m128i a = _mm_unpacklo_epi8(v[0], v[1]), b = _mm_unpackhi_epi8(v[0], v[1]);
    const __m128i c = _mm_unpacklo_epi8(v[2], v[3]), e = _mm_unpackhi_epi8(v[2], v[3]);
    __m128i* o = reinterpret_cast<__m128i*>(out + i * 4);
    _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(a, c));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(a, c));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(b, e));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(b, e));
    any = _mm_or_si128(any, _mm_or_si128(_mm_or_si128(v[0], v[1]), _mm_or_si128(v[2], v[3])));
  }
  uint8_t bits = _mm_movemask_epi8(any) != 0 ? 0x80 : 0;
  for (; i < d.w; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      const uint8_t v = static_cast<uint8_t>(rows[j][i] ^ flip);
      out[i * 4 + j] = v;
      bits |= v;
    }
  }
  return static_cast<uint8_t>(bits | (width > d.w ? d.pad : 0));
}

// The input interleaved into the phase planes at the scratch's start, four
// channels a quad; `row` holds a padded row on its way to the planes
// (strided only). Returns the OR of every byte written.
uint8_t direct_planes(const QConvDirect& d, const DirectShape& s, uint8_t* scratch, uint8_t* row) {
  uint8_t any = 0;
  const int64_t width = s.pw2 * d.sw;
  for (int64_t q = 0; q < s.quads; ++q) {
    for (int64_t r = 0; r < s.ph2 * d.sh; ++r) {
      uint8_t* dst = scratch + q * s.quad_bytes + (r % d.sh) * d.sw * s.plane4 + (r / d.sh) * s.pw2 * 4;
      if (d.sw == 1) {
        any |= direct_row(d, q, r - d.pt, width, dst);
        continue;
      }
      // Strided: the row's words (one column's four channels) dealt out to
      // the sw phase planes; two phases 8 words at a time (SSE shuffles).
      any |= direct_row(d, q, r - d.pt, width, row);
      int64_t j = 0;
      if (d.sw == 2) {
        for (; j + 8 <= s.pw2; j += 8) {
          const __m128 v0 = _mm_loadu_ps(reinterpret_cast<const float*>(row + j * 8));
          const __m128 v1 = _mm_loadu_ps(reinterpret_cast<const float*>(row + j * 8 + 16));
          const __m128 v2 = _mm_loadu_ps(reinterpret_cast<const float*>(row + j * 8 + 32));
          const __m128 v3 = _mm_loadu_ps(reinterpret_cast<const float*>(row + j * 8 + 48));
          float* even = reinterpret_cast<float*>(dst + j * 4);
          float* odd = reinterpret_cast<float*>(dst + s.plane4 + j * 4);
          _mm_storeu_ps(even, _mm_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)));
          _mm_storeu_ps(even + 4, _mm_shuffle_ps(v2, v3, _MM_SHUFFLE(2, 0, 2, 0)));
          _mm_storeu_ps(odd, _mm_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
          _mm_storeu_ps(odd + 4, _mm_shuffle_ps(v2, v3, _MM_SHUFFLE(3, 1, 3, 1)));
        }
      }
      for (; j < s.pw2; ++j) {
        for (int64_t b = 0; b < d.sw; ++b) memcpy(dst + b * s.plane4 + j * 4, row + (j * d.sw + b) * 4, 4);
      }
    }
  }
  return any;
}

// Tap (ky, kx) of output (oy, ox) reads padded (oy * sh + ky * dh, ox *
// sw + kx * dw): phase (ky * dh % sh, kx * dw % sw), shifted by (ky * dh
// / sh, kx * dw / sw) from (oy, ox) in it. off[q * taps + t]: where step
// (quad q, tap t) reads, from an output's position in the planes.
void direct_offsets(const QConvDirect& d, const DirectShape& s, int32_t* off) {
  for (int64_t q = 0; q < s.quads; ++q) {
    for (int64_t t = 0; t < s.taps; ++t) {
      const int64_t y = (t / d.kw) * d.dh, x = (t % d.kw) * d.dw;
      const int64_t phase = (y % d.sh) * d.sw + x % d.sw;
      off[q * s.taps + t] =
          static_cast<int32_t>(q * s.quad_bytes + phase * s.plane4 + ((y / d.sh) * s.pw2 + x / d.sw) * 4);
    }
  }
}

// The weights of output channels [b0, b1) in step order into wt: step
// q = quad * taps + tap holds channels 4 * quad .. + 3 of that tap (0 past
// c).
void direct_weights(const QConvDirect& d, const DirectShape& s, int64_t b0, int64_t b1, int8_t* wt) {
  const int64_t taps = s.taps, nq = s.steps;
  const int64_t kp = qgemm_kp(d.c * taps);
  int64_t q0 = 0;
  if (taps == 9 && s.quads * 4 == d.c) {
    // 3x3 over whole quads (every layer but a first one's): by shuffles.
    direct_weights_3x3_avx2(d.w8 + b0 * kp, kp, b1 - b0, s.quads, wt);
    q0 = s.quads;
  }
  for (int64_t o = b0; o < b1; ++o) {
    const int8_t* src = d.w8 + o * kp;
    int8_t* dst = wt + (o - b0) * nq * 4;
    for (int64_t q = q0; q < s.quads; ++q) {
      for (int64_t t = 0; t < taps; ++t) {
        for (int64_t j = 0; j < 4; ++j) {
          const int64_t ch = 4 * q + j;
          dst[(q * taps + t) * 4 + j] = ch < d.c ? src[ch * taps + t] : 0;
        }
      }
    }
  }
}

constexpr int64_t kDirectRunMax = 128;
// Planes above this many bytes (a Zen 4 core's L2) may split by columns
// across threads (qgemm_conv_direct).
constexpr int64_t kDirectPlanesByColumns = 1024 * 1024;

// The valid columns of the run of nrun grid columns from r0: segments
// [seg_a, seg_b) (one output row's columns each), in output order; returns
// how many.
int64_t direct_segments(const QConvDirect& d, int64_t pitch, int64_t r0, int64_t nrun, int64_t* seg_a, int64_t* seg_b) {
  int64_t segs = 0;
  for (int64_t oy = r0 / pitch; oy * pitch < r0 + nrun; ++oy) {
    const int64_t a = oy * pitch > r0 ? oy * pitch : r0;
    const int64_t b = oy * pitch + d.ow < r0 + nrun ? oy * pitch + d.ow : r0 + nrun;
    if (a < b) {
      seg_a[segs] = a;
      seg_b[segs] = b;
      ++segs;
    }
  }
  return segs;
}

// Output channels [c0, c0 + mr) over the run of nrun grid columns from r0
// (at most kDirectRunMax): tile(p0, out, ldo) writes the rows of the panel
// at column p0, then each segment's columns (consecutive outputs) are
// requantized where they lie in the rows, straight to their outputs.
template <typename Tile>
void direct_channels(const QConvDirect& d, const DirectShape& s, int64_t c0, int64_t mr, int64_t r0, int64_t nrun,
                     const Tile& tile) {
  int64_t seg_a[kDirectRunMax], seg_b[kDirectRunMax];
  const int64_t segs = direct_segments(d, s.pw2, r0, nrun, seg_a, seg_b);
  if (segs == 0) return;
  int32_t rows[kQGemmMr][kDirectRunMax];
  for (int64_t p0 = r0; p0 < r0 + nrun; p0 += kQGemmNr) tile(p0, rows[0] + (p0 - r0), kDirectRunMax);
  const size_t y_elem = dtype_size(d.y_dtype);
  const int64_t plane_out = d.oh * d.ow;
  int64_t at = (seg_a[0] / s.pw2) * d.ow + seg_a[0] % s.pw2;  // the first segment's output index
  for (int64_t g = 0; g < segs; ++g) {
    const int64_t len = seg_b[g] - seg_a[g];
    qgemm_requantize_rows(rows[0] + (seg_a[g] - r0), kDirectRunMax, mr, len, d.bias + c0, d.multiplier + c0,
                          d.shift + c0, d.y_zp, d.y_min, d.y_max, d.y_dtype,
                          static_cast<uint8_t*>(d.y) + static_cast<size_t>(c0 * plane_out + at) * y_elem, plane_out,
                          d.isa, qgemm_vector_requant_k(d.c * s.taps));
    at += len;
  }
}

// One run of nrun grid columns from r0 (as qgemm's runs: its panels stay
// in L1 while every channel tile of [b0, b1) reads them; weights at w).
void direct_run(const QConvDirect& d, const DirectShape& s, const uint8_t* scratch, const int32_t* off, bool small,
                const int8_t* w, int64_t b0, int64_t b1, int64_t r0, int64_t nrun, QGemmTileOffsetsFn tile) {
  const int64_t nq = s.steps;
  for (int64_t c0 = b0; c0 < b1; c0 += kQGemmMr) {
    const int64_t mr = b1 - c0 < kQGemmMr ? b1 - c0 : kQGemmMr;
    direct_channels(d, s, c0, mr, r0, nrun, [&](int64_t p0, int32_t* out, int64_t ldo) {
      tile(nq, w + (c0 - b0) * nq * 4, mr, scratch + p0 * 4, off, small, out, ldo);
    });
  }
}

// AVX2's exact loop (input bytes above 127) with the weights of each
// kQGemmSplitRows channels split once (qgemm_split_weights_avx2), then
// the columns [col0, col1) swept by them in runs of kDirectRunMax: the
// planes come from L2 once per group, the split weights (8 kp bytes) stay
// in L1.
void direct_split_avx2(const QConvDirect& d, const DirectShape& s, const uint8_t* scratch, const int32_t* off,
                       const int8_t* w, int64_t b0, int64_t b1, int64_t col0, int64_t col1) {
  const int64_t nq = s.steps;
  alignas(32) int32_t ws[kQGemmSplitRows * kQGemmSplitMaxKp / 2];  // 36 KiB
  for (int64_t c0 = b0; c0 < b1; c0 += kQGemmSplitRows) {
    const int64_t mr = b1 - c0 < kQGemmSplitRows ? b1 - c0 : kQGemmSplitRows;
    qgemm_split_weights_avx2(w + (c0 - b0) * nq * 4, nq * 4, mr, nq * 4, ws);
    for (int64_t r0 = col0; r0 < col1; r0 += kDirectRunMax) {
      const int64_t nrun = col1 - r0 < kDirectRunMax ? col1 - r0 : kDirectRunMax;
      direct_channels(d, s, c0, mr, r0, nrun, [&](int64_t p0, int32_t* out, int64_t ldo) {
        qgemm_tile_offsets_split_avx2(nq, ws, mr, scratch + p0 * 4, off, out, ldo);
      });
    }
  }
}

}  // namespace

QGemmTileOffsetsFn qgemm_tile_offsets_for(Isa isa) {
  if (isa == Isa::kAvx512 && processor_has_avx512_vnni()) return qgemm_tile_offsets_vnni;
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2) return qgemm_tile_offsets_avx2;
  return nullptr;
}

int64_t qgemm_conv_direct_bytes(const QConvDirect& d) {
  const DirectShape s = direct_shape(d);
  // The tap offsets are int32: the interleaved input (and the last panel's
  // overreach) inside 2^31 bytes.
  if (s.quads * s.quad_bytes + kDirectSlack > INT32_MAX) return -1;
  return kiln::kernels::qgemm_conv_direct_bytes(d.c, d.h, d.w, d.kh, d.kw, d.sh, d.sw, d.pt, d.pl, d.pb, d.pr);
}

// The input into the phase planes once (and whether any byte is above
// 127), the tap offsets, then per block of output channels (as many, whole
// tiles, as the scratch after the planes holds) their weights in step
// order and every run of columns.
void qgemm_conv_direct(const QConvDirect& d, uint8_t* scratch, int64_t scratch_bytes, QGemmTileOffsetsFn tile,
                       ThreadPool* pool) {
  const DirectShape s = direct_shape(d);
  const int64_t nq = s.steps;
  // The padded row (strided only), then the weight block.
  uint8_t* row = scratch + s.quads * s.quad_bytes + kDirectSlack;
  int8_t* wt = reinterpret_cast<int8_t*>(row + (d.sw > 1 ? s.pw2 * d.sw * 4 : 0));
  int64_t block = (scratch_bytes - (reinterpret_cast<uint8_t*>(wt) - scratch)) / (nq * 4) / kQGemmMr * kQGemmMr;
  block = block < kQGemmMr ? kQGemmMr : block > qgemm_round_up(d.m, kQGemmMr) ? qgemm_round_up(d.m, kQGemmMr) : block;
  if (d.w_in_steps) block = qgemm_round_up(d.m, kQGemmMr);  // the rows are read in place: one block
  const uint8_t any = direct_planes(d, s, scratch, row);
  memset(scratch + s.quads * s.quad_bytes, 0, kDirectSlack);
  const bool small = any <= 127 || d.w_narrow;
  int32_t off[kQGemmDirectMaxSteps];  // 4.5 KiB of stack
  direct_offsets(d, s, off);
  int64_t run = (16384 / (nq * 4)) / kQGemmNr * kQGemmNr;
  run = run < kQGemmNr ? kQGemmNr : run > kDirectRunMax ? kDirectRunMax : run;
  const int64_t columns = (d.oh - 1) * s.pw2 + d.ow;
  // AVX2 on bytes above 127: the exact loop with split weights.
  const bool split = tile == qgemm_tile_offsets_avx2 && !small && nq * 4 <= kQGemmSplitMaxKp;
  for (int64_t b0 = 0; b0 < d.m; b0 += block) {
    const int64_t b1 = d.m - b0 < block ? d.m : b0 + block;
    const int8_t* w = d.w8 + b0 * nq * 4;  // in step order already: kp = nq * 4
    if (!d.w_in_steps) {
      direct_weights(d, s, b0, b1, wt);
      w = wt;
    }
    // The block across the pool (disjoint outputs). Split by channel
    // tiles, dynamically (a few tasks a thread), every task reads all the
    // planes. Where they outgrow a core's L2 (kDirectPlanesByColumns), on
    // the grid of channel-tile ranges by column ranges where the tasks
    // read least (a task reads the weights of its channels and the planes
    // of its columns), one task a thread: a U-Net's 3x3 over 32 channels
    // of 256 x 256 (2 MiB of planes) took 1.98-2.08 ms on two threads by
    // channels, 1.81-1.85 by columns. On planes that fit, by columns
    // measured slower (GoogLeNet's conv3, 215 KiB: 1.04 -> 1.17 ms; the
    // U-Net's 557 KiB: 1.60-1.62 -> 1.63-1.65).
    const int64_t tiles = (b1 - b0 + kQGemmMr - 1) / kQGemmMr, runs = (columns + run - 1) / run;
    const int64_t work = (b1 - b0) * columns * nq * 4;
    int64_t by_columns = 1, by_channels = 1;
    if (s.quads * s.quad_bytes > kDirectPlanesByColumns && parallel_tasks(pool, work, tiles * runs) > 1) {
      least_read_grid(parallel_threads(pool), runs, tiles, (b1 - b0) * nq * 4, s.quads * s.quad_bytes, &by_columns,
                      &by_channels);
    }
    const int64_t tasks = by_columns > 1 ? by_columns * by_channels : parallel_tasks(pool, work, tiles);
    const int64_t channel_parts = by_columns > 1 ? by_channels : tasks;
    parallel_for(pool, tasks, [&](int64_t t) {
      int64_t t0, t1, r0, r1;
      parallel_range(b1 - b0, channel_parts, t % channel_parts, kQGemmMr, &t0, &t1);
      parallel_range(runs, tasks / channel_parts, t / channel_parts, 1, &r0, &r1);
      r0 *= run;
      r1 = r1 * run < columns ? r1 * run : columns;
      if (t0 >= t1 || r0 >= r1) return;
      t0 += b0;
      t1 += b0;
      const int8_t* wt0 = w + (t0 - b0) * nq * 4;
      if (split) {
        direct_split_avx2(d, s, scratch, off, wt0, t0, t1, r0, r1);
        return;
      }
      for (int64_t c = r0; c < r1; c += run) {
        direct_run(d, s, scratch, off, small, wt0, t0, t1, c, r1 - c < run ? r1 - c : run, tile);
      }
    });
  }
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_X86
