// The int8 depthwise convolution on AVX-512 VNNI (qgemm.h,
// depthwise_rows_vnni): one channel's plane at a time, 16 output columns a
// vector, a band of kBand output rows a pass. Each input row the band
// reads is loaded once (64 bytes), and its bytes are gathered into every
// output column's windows of four taps: vpermt2d gives each 128-bit lane
// the 16 bytes its four outputs read, vpshufb picks them, so that lane j's
// dword holds x[j * sw + kx * dw] for kx = 4g .. 4g + 3 (window g; a
// kernel row of up to 8 taps takes two). vpdpbusd then adds each window's
// four products with the kernel row's four weights into the sums of every
// output row of the band that reads this input row. A 3x3 at stride 1:
// six input rows and twelve vpdpbusd for 4 x 16 outputs, where the
// per-channel loops multiply one tap at a time in 16-bit lanes.
//
// Nothing is copied: bytes outside the plane (padding) read the zero point,
// as the folded bias expects (masked loads where a row ends inside the 64
// bytes; the zero point's dwords where the first strip's windows start
// left of the row).
// Each vector of sums is requantized in registers and stored as 16 bytes.
// Each function carries KILN_AVX512_VNNI (isa_switch.h).

#include "isa_switch.h"

#if KILN_X86

#include <immintrin.h>
#include <string.h>

#include "qgemm.h"
#include "x86/qgemm_tile.h"

// GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_*
// placeholder of _mm512_permutexvar_epi32); nothing here reads it.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace kiln {
namespace kernels {

namespace {

constexpr int64_t kBand = 8;    // output rows a pass, their sums in registers
constexpr int64_t kMaxKh = 16;  // kernel rows

// The byte gathers of one geometry: vpermt2d's dword indices (lane L
// gets dwords sw * L - e .. sw * L - e + 3 of the row's 64 bytes, and the
// zero point's for those left of the row) and each window's vpshufb
// control, its bytes a = 4 e - first further on. Strips inside the row
// load from their first byte (e = 0, a = 0); the first strip, whose
// window starts `first` bytes left of the row (the left padding), loads
// from the row's first byte instead, shifted back here (a masked load
// there would start before the row, and a copy into a buffer stalled every
// row on its load: the stores do not forward to it).
struct Gather {
  __m512i perm;
  __m512i shuffle[2];
};

KILN_AVX512_VNNI Gather make_gather(const QDepthwiseLanes& d, int64_t first) {
  const int64_t e = (first + 3) / 4, a = 4 * e - first;
  Gather g;
  alignas(64) int32_t idx[16];
  for (int lane = 0; lane < 4; ++lane) {
    for (int q = 0; q < 4; ++q) {
      const int64_t dword = d.sw * lane + q - e;
      idx[4 * lane + q] = static_cast<int32_t>(dword < 0 ? 15 : 16 + dword);  // 15: a dword of the zero point
    }
  }
  g.perm = _mm512_load_si512(idx);
  for (int64_t w = 0; w < 2; ++w) {
    alignas(64) int8_t control[64];
    for (int lane = 0; lane < 4; ++lane) {
      for (int jj = 0; jj < 4; ++jj) {
        for (int b = 0; b < 4; ++b) {
          const int64_t kx = 4 * w + b;
          control[16 * lane + 4 * jj + b] =
              static_cast<int8_t>(kx < d.kw ? a + jj * d.sw + kx * d.dw : 0x80);  // 0x80: a zero byte
        }
      }
    }
    g.shuffle[w] = _mm512_load_si512(control);
  }
  return g;
}

// The last byte a lane's windows read, past the lane's first: within the
// 16 bytes vpshufb picks from.
int64_t lane_reach(const QDepthwiseLanes& d) { return 3 * d.sw + (d.kw - 1) * d.dw; }

// The 64 bytes of one input row from column `start` >= 0 (the zero point
// from w on: a masked load where the row ends inside them), in the
// product's uint8 domain.
KILN_AVX512_VNNI inline __m512i row_bytes(const uint8_t* row, int64_t w, int64_t start, uint8_t raw_pad, uint8_t flip) {
  const __m512i vflip = _mm512_set1_epi8(static_cast<char>(flip));
  if (start >= w) return _mm512_set1_epi8(static_cast<char>(raw_pad ^ flip));
  const int64_t avail = w - start;
  if (avail >= 64) return _mm512_xor_si512(_mm512_loadu_si512(row + start), vflip);
  const __mmask64 mask = (__mmask64{1} << avail) - 1;
  return _mm512_xor_si512(_mm512_mask_loadu_epi8(_mm512_set1_epi8(static_cast<char>(raw_pad)), mask, row + start),
                          vflip);
}

// What a strip of 16 output columns reads: the channel's plane, the
// gather for the strip (the first strip's where it starts left of the
// row), kernel row ky's weights as one dword a window (zeros past kw), the
// windows of a row of padding.
struct Strip {
  const QDepthwiseLanes* d;
  const uint8_t* x;
  const Gather* gather;
  const __m512i (*weights)[2];
  const __m512i* pad_windows;
  __m512i pad_bytes;
  int64_t start, windows;
  uint8_t raw_pad;
};

// The windows of input row iy for the strip (the padding's outside the
// plane).
KILN_AVX512_VNNI inline __attribute__((always_inline)) void row_windows(const Strip& s, int64_t iy, __m512i win[2]) {
  const QDepthwiseLanes& d = *s.d;
  if (iy < 0 || iy >= d.h) {
    win[0] = s.pad_windows[0];
    win[1] = s.pad_windows[1];
    return;
  }
  const __m512i row = row_bytes(s.x + iy * d.w, d.w, s.start < 0 ? 0 : s.start, s.raw_pad, d.flip);
  const __m512i bytes = _mm512_permutex2var_epi32(s.pad_bytes, s.gather->perm, row);
  win[0] = _mm512_shuffle_epi8(bytes, s.gather->shuffle[0]);
  win[1] = s.windows > 1 ? _mm512_shuffle_epi8(bytes, s.gather->shuffle[1]) : win[0];
}

// The sums of the band's kBand output rows (from input row iy0) for a
// square KH x KH window at stride SH down the plane, undilated: every loop
// unrolled, so the rows each input row feeds are known when compiling and
// the sums stay in registers. Rows past the plane's last are computed too
// (from padding) and not stored.
template <int KH, int SH>
KILN_AVX512_VNNI inline __attribute__((always_inline)) void band_fixed(const Strip& s, int64_t iy0,
                                                                       __m512i acc[kBand]) {
  constexpr int kInputRows = (kBand - 1) * SH + KH;
  constexpr int kWindows = (KH + 3) / 4;
#pragma GCC unroll 32
  for (int i = 0; i < kInputRows; ++i) {
    __m512i win[2];
    row_windows(s, iy0 + i, win);
#pragma GCC unroll 8
    for (int r = 0; r < kBand; ++r) {
      const int ky = i - r * SH;
      if (ky < 0 || ky >= KH) continue;
      acc[r] = _mm512_dpbusd_epi32(acc[r], win[0], s.weights[ky][0]);
      if (kWindows > 1) acc[r] = _mm512_dpbusd_epi32(acc[r], win[1], s.weights[ky][1]);
    }
  }
}

// Any other geometry: each input row the band's `rows` output rows read,
// and the rows it feeds worked out as it goes.
KILN_AVX512_VNNI inline __attribute__((always_inline)) void band_any(const Strip& s, int64_t oy0, int64_t rows,
                                                                     __m512i acc[kBand]) {
  const QDepthwiseLanes& d = *s.d;
  const int64_t iy0 = oy0 * d.sh - d.pt, iy1 = (oy0 + rows - 1) * d.sh - d.pt + (d.kh - 1) * d.dh;
  for (int64_t iy = iy0; iy <= iy1; ++iy) {
    __m512i win[2];
    row_windows(s, iy, win);
#pragma GCC unroll 8
    for (int64_t r = 0; r < kBand; ++r) {
      int64_t ky = iy + d.pt - (oy0 + r) * d.sh;  // ky * dh for the output row that reads iy
      if (r >= rows || ky < 0 || ky % d.dh != 0) continue;
      ky /= d.dh;
      if (ky >= d.kh) continue;
      acc[r] = _mm512_dpbusd_epi32(acc[r], win[0], s.weights[ky][0]);
      if (s.windows > 1) acc[r] = _mm512_dpbusd_epi32(acc[r], win[1], s.weights[ky][1]);
    }
  }
}

// One channel: its plane x (h x w, raw bytes), weights w8 (kh x kw, kp
// bytes), outputs y (oh x ow); the rest of d as for every channel. Its
// shift is in [32, 62] and |bias| <= 2^30 (the dispatch checks).
KILN_AVX512_VNNI void one_channel(const QDepthwiseLanes& d, const Gather& inside, const Gather& left, const uint8_t* x,
                                  const int8_t* w8, int32_t bias, int32_t multiplier, int32_t shift, uint8_t* y) {
  Strip s;
  s.d = &d;
  s.x = x;
  s.windows = (d.kw + 3) / 4;
  __m512i weights[kMaxKh][2];
  for (int64_t ky = 0; ky < d.kh; ++ky) {
    for (int64_t win = 0; win < s.windows; ++win) {
      uint8_t b[4] = {0, 0, 0, 0};
      for (int64_t i = 0; i < 4 && 4 * win + i < d.kw; ++i) b[i] = static_cast<uint8_t>(w8[ky * d.kw + 4 * win + i]);
      int32_t word;
      memcpy(&word, b, 4);
      weights[ky][win] = _mm512_set1_epi32(word);
    }
  }
  s.weights = weights;
  const x86::Requant16 q = x86::requant16(bias, multiplier, shift, d.y_zp, d.y_min, d.y_max);
  s.raw_pad = static_cast<uint8_t>(d.pad ^ d.flip);
  s.pad_bytes = _mm512_set1_epi8(static_cast<char>(d.pad));
  __m512i pad_windows[2];
  for (int64_t win = 0; win < 2; ++win) {
    pad_windows[win] =
        _mm512_shuffle_epi8(_mm512_permutex2var_epi32(s.pad_bytes, inside.perm, s.pad_bytes), inside.shuffle[win]);
  }
  s.pad_windows = pad_windows;
  const int64_t shape = d.dh == 1 && d.kw == d.kh ? d.kh * 10 + d.sh : 0;
  for (int64_t oy0 = 0; oy0 < d.oh; oy0 += kBand) {
    const int64_t rows = d.oh - oy0 < kBand ? d.oh - oy0 : kBand, iy0 = oy0 * d.sh - d.pt;
    for (int64_t j0 = 0; j0 < d.ow; j0 += 16) {
      __m512i acc[kBand];
#pragma GCC unroll 8
      for (int64_t r = 0; r < kBand; ++r) acc[r] = _mm512_setzero_si512();
      s.start = j0 * d.sw - d.pl;
      s.gather = s.start < 0 ? &left : &inside;
      switch (shape) {
        case 31: band_fixed<3, 1>(s, iy0, acc); break;
        case 32: band_fixed<3, 2>(s, iy0, acc); break;
        case 51: band_fixed<5, 1>(s, iy0, acc); break;
        case 52: band_fixed<5, 2>(s, iy0, acc); break;
        case 71: band_fixed<7, 1>(s, iy0, acc); break;
        case 72: band_fixed<7, 2>(s, iy0, acc); break;
        default: band_any(s, oy0, rows, acc); break;
      }
      const __mmask16 columns =
          d.ow - j0 >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (d.ow - j0)) - 1);
#pragma GCC unroll 8
      for (int64_t r = 0; r < kBand; ++r) {
        // Clamped to the output's range already: truncation keeps the bits.
        if (r < rows)
          _mm512_mask_cvtepi32_storeu_epi8(y + (oy0 + r) * d.ow + j0, columns, x86::requantize16(acc[r], q));
      }
    }
  }
}

}  // namespace

bool depthwise_rows_vnni_fit(const QDepthwiseLanes& d) {
  if (!(d.kw >= 1 && d.kw <= 8 && d.kh >= 1 && d.kh <= kMaxKh && d.sw >= 1 && d.sw <= 4 && d.dw >= 1 && d.sh >= 1 &&
        d.dh >= 1 && d.ow >= 1 && d.pl >= 0 && d.pl <= 16)) {
    return false;
  }
  // The first strip's windows start 4 e - pl bytes further into its lanes.
  const int64_t a = 4 * ((d.pl + 3) / 4) - d.pl;
  return lane_reach(d) + a <= 15;
}

KILN_AVX512_VNNI void depthwise_rows_vnni(const QDepthwiseLanes& d) {
  const Gather inside = make_gather(d, 0), left = make_gather(d, d.pl);
  for (int64_t c = 0; c < d.channels; ++c) {
    one_channel(d, inside, left, d.x + c * d.h * d.w, d.w8 + c * d.kp, d.bias[c], d.multiplier[c], d.shift[c],
                d.y + c * d.oh * d.ow);
  }
}

}  // namespace kernels
}  // namespace kiln

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // KILN_X86
