#include "gemm.h"

#include <string.h>

#include "activation.h"
#include "arm/neon.h"
#include "isa_switch.h"
#include "kiln/kernels/float16.h"
#include "parallel.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {

void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, bool trans_a, const float* b, int64_t ldb,
              bool trans_b, float* c, int64_t ldc, bool accumulate) {
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

namespace {

// Up to this many columns of B (a task's share of them), the tiles of a
// block over prepacked A run A panel by A panel (gemm_packed's tiles()).
constexpr int64_t kGemmSmallN = 4 * kGemmNr;
// Weights of this many floats (1 MiB) or more do not stay in a 1 MiB L2
// between runs: they come from L3 or memory each time, so up to
// kGemmLargeASmallN columns (B's panels, 192 KiB at a block of k, stay in
// L2) also run A panel by A panel, the next one prefetched. squeezenet1_1's
// classifier, 1000 x 512 by 169 columns (min of 60 calls, L2 flushed
// between them): 1718 -> 1607 us.
constexpr int64_t kGemmLargeA = int64_t{1} << 18;
constexpr int64_t kGemmLargeASmallN = 12 * kGemmNr;
// Prepacked weights of this many floats (1 MiB, kGemmLargeA) or more are
// fetched a block ahead of the tiles (PackedBlocks::next_a_block).
constexpr int64_t kGemmPrefetchA = kGemmLargeA;

// Computes one register tile: C[mr][nr] = A panel (kc x kGemmMr) times
// B panel (kc rows of kGemmNr floats, ldb apart: kGemmNr when packed, the
// matrix's row stride when read in place), plus C itself (accumulate) or plus row_bias[i]
// and col_bias[j] (each may be nullptr), then clamped to [lo, hi] when
// `clamp` (NaN stays NaN).
using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                             int64_t nr, bool accumulate, const float* row_bias, const float* col_bias, bool clamp,
                             float lo, float hi);

void micro_kernel_portable(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                           int64_t nr, bool accumulate, const float* row_bias, const float* col_bias, bool clamp,
                           float lo, float hi) {
  float acc[kGemmMr][kGemmNr] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * kGemmMr;
    const float* bp = b + p * ldb;
    for (int64_t i = 0; i < kGemmMr; ++i) {
      const float av = ap[i];
      for (int64_t j = 0; j < kGemmNr; ++j) acc[i][j] += av * bp[j];
    }
  }
  for (int64_t i = 0; i < mr; ++i) {
    float* row = c + i * ldc;
    const float bias = row_bias != nullptr ? row_bias[i] : 0.f;
    for (int64_t j = 0; j < nr; ++j) {
      float v = acc[i][j] + (accumulate ? row[j] : bias + (col_bias != nullptr ? col_bias[j] : 0.f));
      if (clamp) v = v < lo ? lo : (v > hi ? hi : v);
      row[j] = v;
    }
  }
}

MicroKernel select_micro_kernel(GemmPath path) {
#if KILN_X86
  if (path == GemmPath::kAuto && x86::has_avx512f()) return x86::micro_kernel_avx512;
  if (path != GemmPath::kPortable && x86::has_avx2_fma()) return x86::micro_kernel_avx2;
#endif
#if KILN_NEON
  if (path != GemmPath::kPortable && neon::enabled()) return neon::micro_kernel;
#endif
  return micro_kernel_portable;
}

// Packs rows [i0, i0 + mc) and columns [p0, p0 + kc) of A into panels of
// kGemmMr rows, each stored column by column (kc x kGemmMr), the rows past
// mc zero:
//
//   panel 0: a[i0][p0] .. a[i0+5][p0], a[i0][p0+1] .. a[i0+5][p0+1], ...
//   panel 1: rows i0+6 .. i0+11, likewise
void pack_a(const GemmMatrix& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t ir = 0; ir < mc; ir += kGemmMr) {
    const int64_t mr = gemm_min(kGemmMr, mc - ir);
    for (int64_t i = 0; i < kGemmMr; ++i) {
      float* d = dst + i;
      if (i >= mr) {
        for (int64_t p = 0; p < kc; ++p) d[p * kGemmMr] = 0.f;
      } else if (a.trans) {
        const float* src = a.data + p0 * a.ld + i0 + ir + i;
        for (int64_t p = 0; p < kc; ++p) d[p * kGemmMr] = src[p * a.ld];
      } else {
        const float* src = a.data + (i0 + ir + i) * a.ld + p0;
        for (int64_t p = 0; p < kc; ++p) d[p * kGemmMr] = src[p];
      }
    }
    dst += kGemmMr * kc;
  }
}

// d[j] = r[j] * s + t for j < nr, then (relu) v > 0 ? v : 0 as Relu
// computes it (NaN gives 0); d[nr .. kGemmNr) = 0. Four floats at a time
// with the compiler's generic vectors (SSE, NEON; scalar code elsewhere).
inline void affine_row(const float* r, int64_t nr, float s, float t, bool relu, float* d) {
  typedef float V4 __attribute__((vector_size(16)));
  if (nr == kGemmNr) {
    const V4 vs = {s, s, s, s}, vt = {t, t, t, t}, zero = {0.f, 0.f, 0.f, 0.f};
    for (int64_t j = 0; j < kGemmNr; j += 4) {
      V4 v;
      memcpy(&v, r + j, sizeof(v));
      v = v * vs + vt;
      if (relu) v = v > zero ? v : zero;
      memcpy(d + j, &v, sizeof(v));
    }
    return;
  }
  for (int64_t j = 0; j < kGemmNr; ++j) {
    const float v = j < nr ? r[j] * s + t : 0.f;
    d[j] = relu && !(v > 0.f) ? 0.f : v;
  }
}

// Packs rows [p0, p0 + kc) and columns [j0, j0 + nc) of B into panels of
// kGemmNr columns, each stored row by row (kc x kGemmNr), the columns past
// nc zero.
void pack_b_matrix(const GemmMatrix& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  for (int64_t jr = 0; jr < nc; jr += kGemmNr) {
    const int64_t nr = gemm_min(kGemmNr, nc - jr);
    if (b.row_scale != nullptr) {
      // The input affine map (GemmMatrix): row by row, as the copy below.
      const float* src = b.data + p0 * b.ld + j0 + jr;
      for (int64_t p = 0; p < kc; ++p) {
        affine_row(src + p * b.ld, nr, b.row_scale[p0 + p], b.row_shift[p0 + p], b.row_relu, dst + p * kGemmNr);
      }
    } else if (!b.trans) {
      const float* src = b.data + p0 * b.ld + j0 + jr;
      if (nr == kGemmNr) {
        // A constant size: the copy compiles to a few vector moves.
        for (int64_t p = 0; p < kc; ++p) memcpy(dst + p * kGemmNr, src + p * b.ld, kGemmNr * sizeof(float));
      } else {
        for (int64_t p = 0; p < kc; ++p) {
          float* d = dst + p * kGemmNr;
          memcpy(d, src + p * b.ld, static_cast<size_t>(nr) * sizeof(float));
          for (int64_t j = nr; j < kGemmNr; ++j) d[j] = 0.f;
        }
      }
    } else {
      for (int64_t j = 0; j < kGemmNr; ++j) {
        float* d = dst + j;
        if (j >= nr) {
          for (int64_t p = 0; p < kc; ++p) d[p * kGemmNr] = 0.f;
          continue;
        }
        const float* src = b.data + (j0 + jr + j) * b.ld + p0;
        for (int64_t p = 0; p < kc; ++p) d[p * kGemmNr] = src[p];
      }
    }
    dst += kGemmNr * kc;
  }
}

// `count` consecutive entries of one im2col row (tap ky, kx of one channel
// image) for output positions (oy, ox .. ox + count - 1) of one output row:
// the in-image part copied, the rest zero.
inline void im2col_segment(const GemmIm2col& g, const float* image, int64_t ky, int64_t kx, int64_t oy, int64_t ox,
                           int64_t count, float* d, bool avx2) {
  static_cast<void>(avx2);  // unused where there is no AVX2 path
  const int64_t iy = oy * g.sh - g.pt + ky * g.dh;
  if (iy < 0 || iy >= g.h) {
    for (int64_t q = 0; q < count; ++q) d[q] = 0.f;
    return;
  }
  const float* row = image + iy * g.w;
  const int64_t ix0 = ox * g.sw - g.pl + kx * g.dw;
  // Lanes [q0, q1) read inside the row: 0 <= ix0 + q * sw < w.
  int64_t q0, q1;
  if (g.sw == 1) {
    q0 = ix0 >= 0 ? 0 : -ix0;
    q1 = ix0 < g.w ? g.w - ix0 : 0;
  } else {
    q0 = ix0 >= 0 ? 0 : (-ix0 + g.sw - 1) / g.sw;
    q1 = ix0 < g.w ? (g.w - 1 - ix0) / g.sw + 1 : 0;
  }
  if (q1 > count) q1 = count;
  if (q0 > q1) q0 = q1;
  if (g.sw == 1 && q0 == 0 && q1 == kGemmNr) {
    memcpy(d, row + ix0, kGemmNr * sizeof(float));  // a whole panel row: the common case
    return;
  }
  for (int64_t q = 0; q < q0; ++q) d[q] = 0.f;
  if (g.sw == 1) {
    memcpy(d + q0, row + ix0 + q0, static_cast<size_t>(q1 - q0) * sizeof(float));
#if KILN_X86
  } else if (g.sw == 2 && avx2 && q1 > q0) {
    x86::copy_stride2_avx2(row + ix0 + 2 * q0, q1 - q0, g.w - (ix0 + 2 * q0), d + q0);
#elif KILN_NEON
  } else if (g.sw == 2 && avx2 && q1 > q0) {  // `avx2`: the vector path, here NEON
    neon::copy_stride2(row + ix0 + 2 * q0, q1 - q0, g.w - (ix0 + 2 * q0), d + q0);
#endif
  } else {
    for (int64_t q = q0; q < q1; ++q) d[q] = row[ix0 + q * g.sw];
  }
  for (int64_t q = q1; q < count; ++q) d[q] = 0.f;
}

// Packs the im2col matrix the same way as pack_b_matrix, reading the image.
// A panel's columns are consecutive output positions, one run per output
// row they cover; each run is copied from its input row where it lies
// inside the image.
void pack_b_im2col(const GemmIm2col& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst, GemmPath path) {
#if KILN_X86
  const bool avx2 = path != GemmPath::kPortable && x86::has_avx2_fma();
#elif KILN_NEON
  const bool avx2 = path != GemmPath::kPortable && neon::enabled();
#else
  const bool avx2 = false;
#endif
  const int64_t taps = g.kh * g.kw;
  const int64_t plane = g.h * g.w;
#if KILN_X86
  // A 1x1 kernel read with strides and no padding (the shortcut
  // convolutions of ResNets and ResNeXts, 1x1 stride 2): a panel's columns
  // read the same offsets of every channel's plane, so each row of the
  // panel is one gather. Row by row, the copy below takes a call per
  // output row a panel covers (two to three of 7 to 28 columns): ResNet-50's
  // layer2 shortcut (512 x 784 by 256) spent 0.8 ms of 2.6 packing so.
  if (avx2 && g.kh == 1 && g.kw == 1 && g.pt == 0 && g.pl == 0 && (g.oh - 1) * g.sh < g.h && (g.ow - 1) * g.sw < g.w &&
      plane < (int64_t{1} << 31)) {
    for (int64_t jr = 0; jr < nc; jr += kGemmNr) {
      const int64_t nr = gemm_min(kGemmNr, nc - jr);
      int32_t offsets[kGemmNr] = {};
      for (int64_t q = 0; q < nr; ++q) {
        const int64_t position = j0 + jr + q;
        offsets[q] = static_cast<int32_t>(position / g.ow * g.sh * g.w + position % g.ow * g.sw);
      }
      if (path == GemmPath::kAuto && x86::has_avx512f()) {
        x86::gather_panel_avx512(g.x + p0 * plane, plane, offsets, nr, kc, dst);
      } else {
        x86::gather_panel_avx2(g.x + p0 * plane, plane, offsets, nr, kc, dst);
      }
      dst += kGemmNr * kc;
    }
    return;
  }
  // A strided kernel of up to kGatherTaps taps (3x3 stride 2: the first
  // convolution of a ResNet stage): each panel row is one masked gather,
  // its offsets and padding mask worked out per tap once a panel, instead
  // of a strided copy per output row the panel covers, with the bounds
  // divided out each time. ResNet-50's layer2.0 conv2 (128 x 784 by 1152,
  // kiln_roofline, one vCPU): see bench/RESULTS.md. Likewise any kernel
  // on output rows narrower than a panel, where the copy below takes a
  // call per 7 or 14 columns: a 3x3 convolution on a 7 x 7 plane (ConvLanes,
  // 512 x 49 by 4608) spent a fifth of its time packing so.
  constexpr int64_t kGatherTaps = 64;
  if (path == GemmPath::kAuto && x86::has_avx512f() && (g.sw > 1 || g.ow < kGemmNr) && taps <= kGatherTaps &&
      plane < (int64_t{1} << 31)) {
    alignas(64) int32_t offsets[kGatherTaps * kGemmNr];
    uint16_t masks[kGatherTaps];
    for (int64_t jr = 0; jr < nc; jr += kGemmNr) {
      const int64_t nr = gemm_min(kGemmNr, nc - jr);
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t ky = t / g.kw, kx = t % g.kw;
        uint32_t mask = 0;
        for (int64_t q = 0; q < kGemmNr; ++q) {
          const int64_t position = j0 + jr + q;
          const int64_t iy = position / g.ow * g.sh - g.pt + ky * g.dh;
          const int64_t ix = position % g.ow * g.sw - g.pl + kx * g.dw;
          const bool inside = q < nr && iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
          offsets[t * kGemmNr + q] = inside ? static_cast<int32_t>(iy * g.w + ix) : 0;
          mask |= static_cast<uint32_t>(inside) << q;
        }
        masks[t] = static_cast<uint16_t>(mask);
      }
      x86::gather_taps_avx512(g.x, plane, offsets, masks, taps, p0, kc, dst);
      dst += kGemmNr * kc;
    }
    return;
  }
#endif
  for (int64_t jr = 0; jr < nc; jr += kGemmNr) {
    const int64_t nr = gemm_min(kGemmNr, nc - jr);
    const int64_t oy0 = (j0 + jr) / g.ow, ox0 = (j0 + jr) % g.ow;
    int64_t c = p0 / taps, ky = (p0 % taps) / g.kw, kx = p0 % g.kw;
    float* d = dst;
    for (int64_t p = 0; p < kc; ++p, d += kGemmNr) {
      const float* image = g.x + c * plane;
      int64_t q = 0, oy = oy0, ox = ox0;
      while (q < nr) {
        const int64_t count = gemm_min(nr - q, g.ow - ox);
        im2col_segment(g, image, ky, kx, oy, ox, count, d + q, avx2);
        q += count;
        ox = 0;
        ++oy;
      }
      for (; q < kGemmNr; ++q) d[q] = 0.f;
      if (++kx == g.kw) {
        kx = 0;
        if (++ky == g.kh) {
          ky = 0;
          ++c;
        }
      }
    }
    dst += kGemmNr * kc;
  }
}

}  // namespace

void gemm_pack_im2col_block(const GemmIm2col& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst,
                            GemmPath path) {
  pack_b_im2col(g, p0, kc, j0, nc, dst, path);
}

void gemm_prepack_a(int64_t m, int64_t k, const float* a, float* out) {
  GemmMatrix matrix;
  matrix.data = a;
  matrix.ld = k;
  // One block as tall as A and as deep as k: the layout gemm_packed reads.
  for (int64_t i0 = 0; i0 < m; i0 += kGemmMc) {
    pack_a(matrix, i0, gemm_min(kGemmMc, m - i0), 0, k, out + i0 * k);
  }
}

void gemm_prepack_b(int64_t k, int64_t n, const float* b, bool trans_b, float* out) {
  GemmMatrix matrix;
  matrix.data = b;
  matrix.ld = trans_b ? k : n;
  matrix.trans = trans_b;
  for (int64_t j0 = 0; j0 < n; j0 += kGemmNc) {
    pack_b_matrix(matrix, 0, k, j0, gemm_min(kGemmNc, n - j0), out + j0 * k);
  }
}

void gemm_prepack_a_bf16(int64_t m, int64_t k, const float* a, uint16_t* out) {
  const int64_t k2 = gemm_bf16_k(k);
  for (int64_t i0 = 0; i0 < m; i0 += kGemmMr) {
    uint16_t* panel = out + i0 * k2;
    for (int64_t p = 0; p < k2; ++p) {
      for (int64_t r = 0; r < kGemmMr; ++r) {
        const int64_t i = i0 + r;
        const float v = i < m && p < k ? a[i * k + p] : 0.f;
        panel[(p / 2) * 2 * kGemmMr + 2 * r + p % 2] = float_to_bfloat16(v);
      }
    }
  }
}

void gemm_prepack_b_bf16(int64_t k, int64_t n, const float* b, bool trans_b, uint16_t* out) {
  const int64_t k2 = gemm_bf16_k(k);
  for (int64_t j0 = 0; j0 < n; j0 += kGemmNr) {
    uint16_t* panel = out + j0 * k2;
    for (int64_t p = 0; p < k2; ++p) {
      for (int64_t c = 0; c < kGemmNr; ++c) {
        const int64_t j = j0 + c;
        const float v = j < n && p < k ? (trans_b ? b[j * k + p] : b[p * n + j]) : 0.f;
        panel[(p / 2) * 2 * kGemmNr + 2 * c + p % 2] = float_to_bfloat16(v);
      }
    }
  }
}

namespace {

// One row of A (m == 1) times B without packing: packing B would cost as
// much as the product, and five of six rows of every register tile would
// be wasted. Writes A B into `out`.
void gemv(int64_t n, int64_t k, const float* a, const GemmMatrix& b, float* out, GemmPath path) {
#if KILN_X86
  if (path != GemmPath::kPortable && x86::has_avx2_fma()) {
    x86::gemv_avx2(n, k, a, b.data, b.ld, b.trans, out);
    return;
  }
#endif
#if KILN_NEON
  if (path != GemmPath::kPortable && neon::enabled()) {
    neon::gemv(n, k, a, b.data, b.ld, b.trans, out);
    return;
  }
#endif
  gemm_f32(1, n, k, a, k, false, b.data, b.ld, b.trans, out, n, false);
}

#if !defined(KILN_BARE_METAL)
// x86::panels_gemv_avx2's contract (gemm.h) in plain loops.
void panels_gemv_portable(const float* a, int64_t stride, int64_t panels, const float* bx, int64_t len, float* out) {
  for (int64_t q = 0; q < panels; ++q) {
    const float* ap = a + q * stride;
    float acc[kGemmMr] = {};
    for (int64_t j = 0; j < len; j += kGemmMr) {
      for (int64_t r = 0; r < kGemmMr; ++r) acc[r] += ap[j + r] * bx[j + r];
    }
    for (int64_t r = 0; r < kGemmMr; ++r) out[q * kGemmMr + r] = acc[r];
  }
}

using PanelsGemv = void (*)(const float* a, int64_t stride, int64_t panels, const float* bx, int64_t len, float* out);

PanelsGemv select_panels_gemv(GemmPath path) {
#if KILN_X86
  if (path != GemmPath::kPortable && x86::has_avx2_fma()) return x86::panels_gemv_avx2;
#endif
  static_cast<void>(path);
  return panels_gemv_portable;
}

// Prepacked A (m x k) times one column of B (n == 1): each six-row panel is
// read where it lies, against the column repeated six times in `scratch`
// (6 * kGemmKc floats at most: within gemm_pack_b_floats(k, 1)), block of
// kGemmKc by block; C holds the running sum between blocks. Threads take
// whole panels; every row is summed the same way on any number of them.
void gemv_prepacked_a(int64_t m, int64_t k, const GemmMatrix& a, const GemmMatrix& b, float* c, int64_t ldc,
                      const GemmEpilogue& epilogue, const Clamp& clamp, float* scratch, GemmPath path,
                      ThreadPool* pool) {
  const PanelsGemv kernel = select_panels_gemv(path);
  const int64_t panels = (m + kGemmMr - 1) / kGemmMr;
  for (int64_t pc = 0; pc < k; pc += kGemmKc) {
    const int64_t kc = gemm_min(kGemmKc, k - pc);
    const bool first = pc == 0, last = pc + kc == k;
    for (int64_t p = 0; p < kc; ++p) {
      const float v = b.trans ? b.data[pc + p] : b.data[(pc + p) * b.ld];
      for (int64_t r = 0; r < kGemmMr; ++r) scratch[p * kGemmMr + r] = v;
    }
    const int64_t tasks = parallel_tasks(pool, m * kc, panels);
    parallel_for(pool, tasks, [&](int64_t t) {
      int64_t q0, q1;
      parallel_range(panels, tasks, t, 1, &q0, &q1);
      constexpr int64_t kBatch = 16;  // panels per call
      float sums[kBatch * kGemmMr];
      for (int64_t q = q0; q < q1; q += kBatch) {
        const int64_t count = gemm_min(kBatch, q1 - q);
        kernel(a.data + q * kGemmMr * k + pc * kGemmMr, kGemmMr * k, count, scratch, kGemmMr * kc, sums);
        const int64_t i1 = gemm_min((q + count) * kGemmMr, m);
        for (int64_t i = q * kGemmMr; i < i1; ++i) {
          float* out = c + i * ldc;
          float v = sums[i - q * kGemmMr];
          if (first && !epilogue.accumulate) {
            v += (epilogue.row_bias != nullptr ? epilogue.row_bias[i] : 0.f) +
                 (epilogue.col_bias != nullptr ? epilogue.col_bias[0] : 0.f);
          } else {
            v += *out;
          }
          if (last && clamp.on) v = v < clamp.lo ? clamp.lo : (v > clamp.hi ? clamp.hi : v);
          *out = v;
        }
      }
    });
  }
  if (clamp.post) {
    if (ldc == 1) {
      apply_activation(c, m, epilogue.activation);
    } else {
      for (int64_t i = 0; i < m; ++i) apply_activation(c + i * ldc, 1, epilogue.activation);
    }
  }
}
#endif

// C = the epilogue alone (k == 0: no product to add).
void gemm_empty_k(int64_t m, int64_t n, float* c, int64_t ldc, const GemmEpilogue& epilogue) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    const float bias = epilogue.row_bias != nullptr ? epilogue.row_bias[i] : 0.f;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = epilogue.accumulate ? row[j] : bias + (epilogue.col_bias != nullptr ? epilogue.col_bias[j] : 0.f);
    }
    apply_activation(row, n, epilogue.activation);
  }
}

// One row of A, plain and unpacked: the product of each block of columns
// goes to `product` (gemm_packed's pack_b), then the epilogue into C.
void gemm_one_row(int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b, float* c,
                  const GemmEpilogue& epilogue, const Clamp& clamp, float* product, GemmPath path) {
  for (int64_t jc = 0; jc < n; jc += kGemmNc) {
    const int64_t nc = gemm_min(kGemmNc, n - jc);
    GemmMatrix bj = b;
    bj.data = b.trans ? b.data + jc * b.ld : b.data + jc;
    gemv(nc, k, a.data, bj, product, path);
    const float bias = epilogue.row_bias != nullptr ? epilogue.row_bias[0] : 0.f;
    for (int64_t j = 0; j < nc; ++j) {
      const float col = epilogue.col_bias != nullptr ? epilogue.col_bias[jc + j] : 0.f;
      float v = product[j] + (epilogue.accumulate ? c[jc + j] : bias + col);
      if (clamp.on) v = v < clamp.lo ? clamp.lo : (v > clamp.hi ? clamp.hi : v);
      c[jc + j] = v;
    }
    if (clamp.post) apply_activation(c + jc, nc, epilogue.activation);
  }
}

#if defined(KILN_BARE_METAL)
// gemm_packed's loops on one thread, as firmware runs them: without the
// splitting of the threaded version (which costs it about 500 bytes of
// .text).
void gemm_blocks_serial(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b,
                        const GemmIm2col* im2col, float* c, int64_t ldc, const GemmEpilogue& epilogue,
                        const Clamp& clamp, float* pack_a_buf, float* pack_b_buf, GemmPath path) {
  const MicroKernel kernel = select_micro_kernel(path);
  const bool direct_b =
      im2col == nullptr && !b.prepacked && !b.trans && b.row_scale == nullptr && gemm_reads_b_in_place(m, b.ld);
  for (int64_t jc = 0; jc < n; jc += kGemmNc) {
    const int64_t nc = gemm_min(kGemmNc, n - jc);
    for (int64_t pc = 0; pc < k; pc += kGemmKc) {
      const int64_t kc = gemm_min(kGemmKc, k - pc);
      const bool first = pc == 0, last = pc + kc == k;
      // Panels of B for this block: prepacked ones span all of k.
      const float* b_block = b.prepacked ? b.data + jc * k + pc * kGemmNr : pack_b_buf;
      const int64_t b_stride = b.prepacked ? kGemmNr * k : kGemmNr * kc;
      // Whole panels of a plain row-major B (a 1x1 convolution's input) are
      // read in place, row by row, by the micro-kernel; only a last,
      // narrower panel is packed (reading 16 columns there could run past
      // the matrix).
      const int64_t whole = direct_b ? nc / kGemmNr * kGemmNr : 0;
      if (im2col != nullptr) {
        pack_b_im2col(*im2col, pc, kc, jc, nc, pack_b_buf, path);
      } else if (direct_b) {
        if (whole < nc) pack_b_matrix(b, pc, kc, jc + whole, nc - whole, pack_b_buf);
      } else if (!b.prepacked) {
        pack_b_matrix(b, pc, kc, jc, nc, pack_b_buf);
      }
      for (int64_t ic = 0; ic < m; ic += kGemmMc) {
        const int64_t mc = gemm_min(kGemmMc, m - ic);
        // Panels of A for this block: prepacked ones span all of k.
        const float* a_block = a.prepacked ? a.data + ic * k + pc * kGemmMr : pack_a_buf;
        const int64_t a_stride = a.prepacked ? kGemmMr * k : kGemmMr * kc;
        if (!a.prepacked) pack_a(a, ic, mc, pc, kc, pack_a_buf);
        for (int64_t jr = 0; jr < nc; jr += kGemmNr) {
          const int64_t nr = gemm_min(kGemmNr, nc - jr);
          const float* bp = b_block + jr / kGemmNr * b_stride;
          int64_t ldb = kGemmNr;
          if (jr < whole) {
            bp = b.data + pc * b.ld + jc + jr;
            ldb = b.ld;
          } else if (direct_b) {
            bp = pack_b_buf;
          }
          for (int64_t ir = 0; ir < mc; ir += kGemmMr) {
            const int64_t mr = gemm_min(kGemmMr, mc - ir);
            float* tile = c + (ic + ir) * ldc + jc + jr;
            const bool bias = first && !epilogue.accumulate;
            const float* row_bias = bias && epilogue.row_bias != nullptr ? epilogue.row_bias + ic + ir : nullptr;
            const float* col_bias = bias && epilogue.col_bias != nullptr ? epilogue.col_bias + jc + jr : nullptr;
            kernel(kc, a_block + ir / kGemmMr * a_stride, bp, ldb, tile, ldc, mr, nr, !first || epilogue.accumulate,
                   row_bias, col_bias, last && clamp.on, clamp.lo, clamp.hi);
            if (last && clamp.post) {
              for (int64_t i = 0; i < mr; ++i) apply_activation(tile + i * ldc, nr, epilogue.activation);
            }
          }
        }
      }
    }
  }
}
#else
// A prepacked operand's panels span all of k: the floats of one row (A)
// or column (B) of its panels, and where the block of k starting at pc
// starts, in floats per row or column. BF16 panels hold k in pairs, two
// values a float (pc is a multiple of kGemmKc, so even).
int64_t prepacked_depth(const GemmMatrix& m, int64_t k) {
  if (!m.bf16) return k;
  return m.bf16_depth > 0 ? m.bf16_depth : gemm_bf16_k(k) / 2;
}
int64_t prepacked_start(const GemmMatrix& m, int64_t pc) { return m.bf16 ? pc / 2 : pc; }

// gemm_packed's loops with a thread pool (their steps: at gemm_packed,
// below): the product's operands and its micro-kernel, then the block
// being computed, columns [jc, jc + nc) by inner dimension [pc, pc + kc).
// For each block gemm_packed calls start_block, pack_b, then run_block,
// which packs A (unless prepacked) and runs the tiles.
struct PackedBlocks {
  // The product.
  int64_t m = 0, n = 0, k = 0;
  GemmMatrix a, b;
  const GemmIm2col* im2col = nullptr;
  float* c = nullptr;
  int64_t ldc = 0;
  GemmEpilogue epilogue;
  Clamp clamp;
  float* pack_a_buf = nullptr;
  float* pack_b_buf = nullptr;
  GemmPath path = GemmPath::kAuto;
  ThreadPool* pool = nullptr;
  MicroKernel kernel = nullptr;
  bool wide = false;      // the AVX-512 micro-kernel: pairs of panels read in place
  bool direct_b = false;  // B's whole panels are read in place (gemm_reads_b_in_place)
  // An operand prepacked in BF16 (GemmMatrix::bf16): the product runs in
  // BF16, the other operand packed in FP32 and then converted in place.
  bool bf16 = false;
  // The block.
  int64_t jc = 0, nc = 0, panels = 0, pc = 0, kc = 0;
  int64_t k_block = kGemmKc;  // the inner dimension's block (all of k: gemm_packed)
  bool first = false, last = false;
  const float* b_block = nullptr;  // B's panels: prepacked ones span all of k
  int64_t b_stride = 0;
  int64_t whole = 0;  // columns of B read in place (whole panels of a plain row-major B)

  void start_block(int64_t block_jc, int64_t block_pc);
  void pack_b() const;
  void pack_b_panels(int64_t p0, int64_t p1) const;
  // What one call of tile_at computes: one A panel by one B panel, by two
  // B panels (AVX-512 and BF16, whole panels only), or two A panels by one
  // B panel (the AVX-512 FP32 kernel only).
  enum class Tile { k6x16, k6x32, k12x16 };
  void tile_at(int64_t ic, int64_t mc, const float* a_block, int64_t a_stride, int64_t ir, int64_t jr,
               Tile shape = Tile::k6x16) const;
  // Rows of A from ir (two panels where there are two and the AVX-512 FP32
  // kernel runs, one otherwise) by the B panel at jr; returns the rows done.
  int64_t row_tiles_at(int64_t ic, int64_t mc, const float* a_block, int64_t a_stride, int64_t ir, int64_t jr) const;
  const float* b_panel(int64_t jr, int64_t* ldb) const;
  // From B's panel at jr to the next: 16 columns where B is read in place.
  int64_t b_panel_stride(int64_t jr) const { return jr < whole ? kGemmNr : b_stride; }
  // The epilogue of the tiles whose first row is `row` and first column
  // `col` of the block: the bias on the first block of k unless C is
  // accumulated into, C read back on every later block.
  bool accumulates() const { return !first || epilogue.accumulate; }
  const float* row_bias_at(int64_t row) const {
    return !accumulates() && epilogue.row_bias != nullptr ? epilogue.row_bias + row : nullptr;
  }
  const float* col_bias_at(int64_t col) const {
    return !accumulates() && epilogue.col_bias != nullptr ? epilogue.col_bias + jc + col : nullptr;
  }
  int64_t edge_start(int64_t j_end) const;
  void edge_at(int64_t ic, int64_t mc, const float* a_block, int64_t a_stride, int64_t jr) const;
  int64_t row_edge_rows(int64_t mc) const;
  void row_edge_at(int64_t ic, int64_t mc, const float* a_block, int64_t a_stride, int64_t ir, int64_t j0,
                   int64_t j1) const;
  void tiles(int64_t i0, int64_t i1, int64_t q0, int64_t q1, int64_t ic_packed) const;
  // The prepacked A block a task reads after rows [ic, ic + mc) of this
  // block (its rows [i0, i1)), as lines to prefetch.
  struct Lines {
    const float* base = nullptr;
    int64_t stride = 0, per_panel = 0, total = 0, next = 0;
    int64_t panel = 0, line = 0;  // where `next` lies: no division a line
    // Prefetches the next `count` lines into L2, panel by panel. (With a
    // division a line, this loop took 10% of a 1x1 convolution of 1,024
    // -> 512 channels on 14 x 14.)
    void advance(int64_t count) {
      for (; count > 0 && next < total; --count, ++next) {
        __builtin_prefetch(base + panel * stride + line * 16, 0, 2);
        if (++line == per_panel) {
          line = 0;
          ++panel;
        }
      }
    }
  };
  Lines next_a_block(int64_t i0, int64_t i1, int64_t ic, int64_t mc) const;
  void run_tiles(int64_t i0, int64_t i1, int64_t ic_packed) const;
  void pack_a_panels(int64_t ic, int64_t mc, int64_t p0, int64_t p1) const;
  void run_block() const;
  void run_rows(int64_t i0, int64_t i1);
  void run_regions(int64_t tasks);
};

void PackedBlocks::start_block(int64_t block_jc, int64_t block_pc) {
  jc = block_jc;
  nc = gemm_min(kGemmNc, n - jc);
  panels = (nc + kGemmNr - 1) / kGemmNr;
  pc = block_pc;
  kc = gemm_min(k_block, k - pc);
  first = pc == 0;
  last = pc + kc == k;
  b_block = b.prepacked ? b.data + jc * prepacked_depth(b, k) + prepacked_start(b, pc) * kGemmNr : pack_b_buf;
  b_stride = b.prepacked ? kGemmNr * prepacked_depth(b, k) : kGemmNr * kc;
  // Only a last, narrower panel is packed (reading 16 columns there could
  // run past the matrix).
  whole = direct_b ? nc / kGemmNr * kGemmNr : 0;
}

// Packs the block's panels of B (or its last, narrower panel where B is
// read in place), whole panels per task: each fills its own part of the
// one buffer.
void PackedBlocks::pack_b() const {
  if (direct_b) {
    if (whole < nc) pack_b_matrix(b, pc, kc, jc + whole, nc - whole, pack_b_buf);
    return;
  }
  if (im2col == nullptr && b.prepacked) return;
  const int64_t tasks = parallel_tasks(pool, kc * nc * (im2col != nullptr ? 8 : 2), panels);
  parallel_for(pool, tasks, [&](int64_t t) {
    int64_t p0, p1;
    parallel_range(panels, tasks, t, 1, &p0, &p1);
    pack_b_panels(p0, p1);
  });
}

// Packs the block's B panels [p0, p1) into their place in pack_b_buf.
void PackedBlocks::pack_b_panels(int64_t p0, int64_t p1) const {
  if (p0 >= p1) return;
  const int64_t j0 = p0 * kGemmNr, j1 = gemm_min(p1 * kGemmNr, nc);
  float* dst = pack_b_buf + p0 * kGemmNr * kc;
  if (im2col != nullptr) {
    pack_b_im2col(*im2col, pc, kc, jc + j0, j1 - j0, dst, path);
  } else {
    pack_b_matrix(b, pc, kc, jc + j0, j1 - j0, dst);
  }
#if KILN_X86
  if (bf16) {
    for (int64_t q = p0; q < p1; ++q) x86::convert_b_panel_bf16(pack_b_buf + q * kGemmNr * kc, kc);
  }
#endif
}

// One tile: rows ir.. of the A block at row ic (mc rows, its panels at
// a_block, a_stride apart) by the B panel at column jr (k6x32: by that
// panel and the next, as one AVX-512 tile of 32 columns; k12x16: rows of
// that A panel and the next by the B panel).
// Inlined into the tile loops (GCC stopped inlining it as they grew:
// Winograd's products with short k, whose tiles are a few hundred cycles,
// ran 3-4% slower through the call).
__attribute__((always_inline)) inline void PackedBlocks::tile_at(int64_t ic, int64_t mc, const float* a_block,
                                                                 int64_t a_stride, int64_t ir, int64_t jr,
                                                                 Tile shape) const {
  const bool pair = shape == Tile::k6x32;
  const int64_t nr = gemm_min(kGemmNr, nc - jr);
  int64_t ldb = kGemmNr;
  const float* bp = b_panel(jr, &ldb);
  const int64_t mr = gemm_min(shape == Tile::k12x16 ? 2 * kGemmMr : kGemmMr, mc - ir);
  float* tile = c + (ic + ir) * ldc + jc + jr;
  const float* row_bias = row_bias_at(ic + ir);
  const float* col_bias = col_bias_at(jr);
#if KILN_X86
  if (bf16) {
    // Panels in BF16 pairs (prepacked, or converted where packed): k in
    // pairs, the odd last one paired with zero.
    const auto* ap = reinterpret_cast<const uint16_t*>(a_block + ir / kGemmMr * a_stride);
    const auto* bp16 = reinterpret_cast<const uint16_t*>(bp);
    const int64_t pairs = (kc + 1) / 2;
    if (pair) {
      x86::micro_kernel_bf16_x2(pairs, ap, bp16, reinterpret_cast<const uint16_t*>(bp + b_stride), tile, ldc, mr,
                                accumulates(), row_bias, col_bias, last && clamp.on, clamp.lo, clamp.hi);
    } else {
      x86::micro_kernel_bf16(pairs, ap, bp16, tile, ldc, mr, nr, accumulates(), row_bias, col_bias, last && clamp.on,
                             clamp.lo, clamp.hi);
    }
    return;
  }
  if (shape == Tile::k12x16) {
    const float* ap = a_block + ir / kGemmMr * a_stride;
    x86::micro_kernel_avx512_rows2(kc, ap, ap + a_stride, bp, ldb, tile, ldc, mr, nr, accumulates(), row_bias, col_bias,
                                   last && clamp.on, clamp.lo, clamp.hi);
    return;
  }
  if (pair) {
    x86::micro_kernel_avx512_x2(kc, a_block + ir / kGemmMr * a_stride, bp, bp + b_panel_stride(jr), ldb, tile, ldc, mr,
                                accumulates(), row_bias, col_bias, last && clamp.on, clamp.lo, clamp.hi);
    return;
  }
#endif
  static_cast<void>(pair);
  static_cast<void>(shape);
  kernel(kc, a_block + ir / kGemmMr * a_stride, bp, ldb, tile, ldc, mr, nr, accumulates(), row_bias, col_bias,
         last && clamp.on, clamp.lo, clamp.hi);
}

// B's panel at column jr of the block: in place (ldb: B's row stride) or
// packed (ldb: kGemmNr).
inline const float* PackedBlocks::b_panel(int64_t jr, int64_t* ldb) const {
  if (jr < whole) {
    *ldb = b.ld;
    return b.data + pc * b.ld + jc + jr;
  }
  *ldb = kGemmNr;
  return direct_b ? pack_b_buf : b_block + jr / kGemmNr * b_stride;
}

// Where the block's last B panel starts if it is an edge of at most
// kGemmEdgeColumns columns that x86::micro_kernel_avx512_edge computes
// (the AVX-512 FP32 kernels only) and lies before j_end; j_end otherwise.
// A 7x7 plane's 49 columns end in one: a 1x1 convolution of 2,048 -> 512
// channels there took 0.92 ms against 0.71 for 48 columns, its last
// column in 12x16 tiles running twelve FMAs a step of k for one column.
int64_t PackedBlocks::edge_start(int64_t j_end) const {
  const int64_t left = nc % kGemmNr;
  if (!wide || bf16 || left == 0 || left > kGemmEdgeColumns || j_end < nc) return j_end;
  return nc - left;
}

// Rows [0, mc) of the A block by the edge panel at jr.
void PackedBlocks::edge_at(int64_t ic, int64_t mc, const float* a_block, int64_t a_stride, int64_t jr) const {
#if KILN_X86
  int64_t ldb = kGemmNr;
  const float* bp = b_panel(jr, &ldb);
  x86::micro_kernel_avx512_edge(kc, a_block, a_stride, mc, bp, ldb, c + ic * ldc + jc + jr, ldc, nc - jr, accumulates(),
                                row_bias_at(ic), col_bias_at(jr), last && clamp.on, clamp.lo, clamp.hi);
#else
  static_cast<void>(ic);
  static_cast<void>(mc);
  static_cast<void>(a_block);
  static_cast<void>(a_stride);
  static_cast<void>(jr);
#endif
}

// The rows of the block's last A panel where it holds at most
// kGemmRowEdge rows that x86::micro_kernel_avx512_row_edge computes (the
// AVX-512 FP32 kernels only); 0 otherwise. A 7 x 7 plane's 49 tokens end
// in one row: ConvNeXt's last-stage MLP products (49 x 768 by 768 x 3072)
// ran it in 6x32 tiles, twelve FMAs a step of k for two useful ones.
int64_t PackedBlocks::row_edge_rows(int64_t mc) const {
  const int64_t left = mc % kGemmMr;
  return wide && !bf16 && left <= kGemmRowEdge ? left : 0;
}

// The A panel at row ir of the block (its last, of row_edge_rows rows) by
// the block's columns [j0, j1): whole B panels several a call, a last
// narrower one as a tile.
void PackedBlocks::row_edge_at(int64_t ic, int64_t mc, const float* a_block, int64_t a_stride, int64_t ir, int64_t j0,
                               int64_t j1) const {
  const int64_t j_whole = j0 + (j1 - j0) / kGemmNr * kGemmNr;
#if KILN_X86
  if (j_whole > j0) {
    int64_t ldb = kGemmNr;
    const float* bp = b_panel(j0, &ldb);
    x86::micro_kernel_avx512_row_edge(kc, a_block + ir / kGemmMr * a_stride, mc - ir, bp, b_panel_stride(j0), ldb,
                                      (j_whole - j0) / kGemmNr, c + (ic + ir) * ldc + jc + j0, ldc, accumulates(),
                                      row_bias_at(ic + ir), col_bias_at(j0), last && clamp.on, clamp.lo, clamp.hi);
  }
#endif
  for (int64_t jr = j_whole; jr < j1; jr += kGemmNr) tile_at(ic, mc, a_block, a_stride, ir, jr);
}

int64_t PackedBlocks::row_tiles_at(int64_t ic, int64_t mc, const float* a_block, int64_t a_stride, int64_t ir,
                                   int64_t jr) const {
#if KILN_X86
  if (wide && !bf16 && ir + kGemmMr < mc) {
    tile_at(ic, mc, a_block, a_stride, ir, jr, Tile::k12x16);
    return 2 * kGemmMr;
  }
#endif
  tile_at(ic, mc, a_block, a_stride, ir, jr);
  return kGemmMr;
}

// The block of prepacked A read next: the task's next rows at this block
// of k, or its first rows at the next block of k (of the next block of
// columns after the last). Weights of a layer do not stay in L2 between
// runs, so each block comes from L3 or memory; the tiles of the current
// block fetch the next one ahead of them, a few lines each, instead of
// the next block's first pass waiting on every line. None for packed A,
// nor for weights under kGemmPrefetchA floats, which a model with few
// weights keeps in L3, where the processor's own prefetching keeps up:
// the small U-Net's 256 x 256 Winograd products (12.8 MB of weights in
// all) ran 11% slower with it, ResNet-50 layer2's 128 x 128 ones 4%.
PackedBlocks::Lines PackedBlocks::next_a_block(int64_t i0, int64_t i1, int64_t ic, int64_t mc) const {
  Lines lines;
  if (!a.prepacked || m * k < kGemmPrefetchA) return lines;
  int64_t next_ic = ic + mc, next_pc = pc;
  if (next_ic >= i1) {
    next_ic = i0;
    next_pc = pc + kc;
    if (next_pc >= k) {
      if (jc + nc >= n) return lines;
      next_pc = 0;
    }
  }
  const int64_t depth = prepacked_depth(a, k), next_kc = gemm_min(k_block, k - next_pc);
  const int64_t next_mc = gemm_min(kGemmMc, i1 - next_ic);
  lines.base = a.data + next_ic * depth + prepacked_start(a, next_pc) * kGemmMr;
  lines.stride = kGemmMr * depth;
  lines.per_panel = (kGemmMr * (a.bf16 ? (next_kc + 1) / 2 : next_kc) + 15) / 16;
  lines.total = lines.per_panel * ((next_mc + kGemmMr - 1) / kGemmMr);
  return lines;
}

// The tiles of rows [i0, i1) (multiples of kGemmMr, or m) and B panels
// [q0, q1), block of A by block of A as on one thread.
void PackedBlocks::tiles(int64_t i0, int64_t i1, int64_t q0, int64_t q1, int64_t ic_packed) const {
  for (int64_t ic = i0; ic < i1; ic += kGemmMc) {
    const int64_t mc = gemm_min(kGemmMc, i1 - ic);
    // Panels of A for this block: prepacked ones span all of k.
    const float* a_block = a.prepacked ? a.data + ic * prepacked_depth(a, k) + prepacked_start(a, pc) * kGemmMr
                                       : pack_a_buf + (ic - ic_packed) * kc;
    const int64_t a_stride = a.prepacked ? kGemmMr * prepacked_depth(a, k) : kGemmMr * kc;
    const int64_t j_end = gemm_min(q1 * kGemmNr, nc);
    const int64_t columns = j_end - q0 * kGemmNr;
    const int64_t edge = edge_start(j_end);
    if (a.prepacked && k > k_block &&
        (columns <= kGemmSmallN || (columns <= kGemmLargeASmallN && m * k >= kGemmLargeA))) {
      // Few B panels (a 7x7 plane's 49 columns are four) against deep
      // weights packed ahead of time, which come from memory the
      // first time a block is read: each A panel passes over every B
      // panel while it is in L1 (B's few panels stay in L2), and the
      // next A panel is prefetched meanwhile, instead of the whole A
      // block streaming from memory past the first B panel at the
      // full rate of the tiles. 1x1 convolutions on 7x7, one thread,
      // weights not in cache: 128 x 512 by 49 columns 116 -> 98 us,
      // 320 x 1152 by 49 579 -> 499 us; with k within one block
      // (1152 x 192) A panel by A panel measured 5% slower.
      // On AVX-512 two A panels pass together (twelve accumulators).
      const int64_t step = wide && !bf16 ? 2 * kGemmMr : kGemmMr;
      for (int64_t ir = 0; ir < mc; ir += step) {
        for (int64_t next = ir + step; next < gemm_min(ir + 2 * step, mc); next += kGemmMr) {
          const float* panel = a_block + next / kGemmMr * a_stride;
          for (int64_t f = 0; f < kGemmMr * kc; f += 16) __builtin_prefetch(panel + f, 0, 2);
        }
        for (int64_t jr = q0 * kGemmNr; jr < edge; jr += kGemmNr) row_tiles_at(ic, mc, a_block, a_stride, ir, jr);
      }
      if (edge < j_end) edge_at(ic, mc, a_block, a_stride, edge);
    } else {
      Lines ahead = next_a_block(i0, i1, ic, mc);
      // A last A panel of one or two rows (49 tokens: eight panels and a
      // row) runs after the tiles, against several B panels a call.
      const int64_t tail = row_edge_rows(mc), body = mc - tail;
      const int64_t block_tiles = (columns + kGemmNr - 1) / kGemmNr * ((mc + kGemmMr - 1) / kGemmMr);
      const int64_t per_tile = (ahead.total + block_tiles - 1) / block_tiles;
      for (int64_t jr = q0 * kGemmNr; jr < j_end; jr += kGemmNr) {
        if (jr == edge) {
          edge_at(ic, mc, a_block, a_stride, edge);
          continue;
        }
#if KILN_X86
        // Two whole panels of B at once on AVX-512 (the same bits as one
        // by one): twelve accumulators instead of six, A loaded once per
        // two panels. Read in place, each row of B is 32 contiguous
        // floats instead of two 16-float pieces each straddling cache
        // lines: products over few rows of A (min of 100 calls, warm):
        // 16 x 128 by 3025 columns 142 -> 127 us, 32 x 256 by 729
        // 127 -> 118, 64 x 16 by 3025 69 -> 64. Packed, six
        // accumulators hold a core that retires two 512-bit FMAs a cycle
        // (4 cycles' latency) to 6 of the 8 in flight it needs; Zen 4,
        // whose 512-bit FMAs take two passes, measured the same either
        // way (kiln_roofline).
        if ((wide || bf16) && (direct_b ? jr + 2 * kGemmNr <= whole : true) && jr + 2 * kGemmNr <= j_end) {
          for (int64_t ir = 0; ir < body; ir += kGemmMr) {
            ahead.advance(2 * per_tile);
            tile_at(ic, mc, a_block, a_stride, ir, jr, Tile::k6x32);
          }
          jr += kGemmNr;
          continue;
        }
#endif
        for (int64_t ir = 0; ir < body;) {
          ahead.advance(2 * per_tile);  // up to two row panels a tile
          ir += row_tiles_at(ic, body, a_block, a_stride, ir, jr);
        }
      }
      if (tail > 0) row_edge_at(ic, mc, a_block, a_stride, body, q0 * kGemmNr, gemm_min(edge, j_end));
    }
    // Activations that are not a clamp run over the block's rows once
    // its tiles are done, not tile by tile (16 floats a call): a 1x1
    // convolution 16 -> 96 over 112 x 112 with a fused Tanh took 45 ms
    // tile by tile, 1.9 ms by rows.
    if (last && clamp.post) {
      const int64_t j0 = q0 * kGemmNr, j1 = gemm_min(q1 * kGemmNr, nc);
      for (int64_t i = 0; i < mc; ++i) apply_activation(c + (ic + i) * ldc + jc + j0, j1 - j0, epilogue.activation);
    }
  }
}

// Tasks over a grid of B panels by row panels. A packed at run time (a
// block of kGemmMc rows): B panels first (each task keeps its B panel in
// L1 while A passes), rows when B is narrow. With fewer B panels than
// tasks (a 7x7 image's 49 columns are four) rows only, where there are
// enough: each task then passes its rows of A over every panel, instead
// of every task streaming all of A past one panel.
// A prepacked (weights: all rows at once), one task a thread, the grid
// the one where the tasks read least: a task reads its rows of A and its
// columns of B whole, so tn x tm tasks read tn times A and tm times B.
// The pool gives each thread the same share of a call's tasks every
// time (ThreadPool::parallel_for), so a thread's rows of weights and its
// columns of C stay in its own caches from block to block. ResNeXt-50's
// layer3 1x1 products (512 x 1024 by 196 columns) were split into 8
// tasks of one or two B panels, each streaming all of A: on two threads
// they ran 1.25x faster than on one; by halves of the rows, 1.55x.
void PackedBlocks::run_tiles(int64_t i0, int64_t i1, int64_t ic_packed) const {
  const int64_t row_panels = (i1 - i0 + kGemmMr - 1) / kGemmMr;
  const int64_t tasks = parallel_tasks(pool, (i1 - i0) * nc * kc, panels * row_panels);
  int64_t tn = panels < tasks && row_panels >= tasks ? 1 : gemm_min(tasks, panels);
  int64_t tm = gemm_min(row_panels, (tasks + tn - 1) / tn);
  if (a.prepacked && tasks > 1) {
    least_read_grid(gemm_min(tasks, parallel_threads(pool)), panels, row_panels, i1 - i0, nc, &tn, &tm);
  }
  parallel_for(pool, tn * tm, [&](int64_t t) {
    int64_t q0, q1, r0, r1;
    parallel_range(panels, tn, t % tn, 1, &q0, &q1);
    parallel_range(row_panels, tm, t / tn, 1, &r0, &r1);
    if (q0 < q1 && r0 < r1) tiles(i0 + r0 * kGemmMr, gemm_min(i0 + r1 * kGemmMr, i1), q0, q1, ic_packed);
  });
}

// Packs panels [p0, p1) of A's block at row ic (mc rows) for this block
// of k into their place in pack_a_buf.
void PackedBlocks::pack_a_panels(int64_t ic, int64_t mc, int64_t p0, int64_t p1) const {
  pack_a(a, ic + p0 * kGemmMr, gemm_min(mc - p0 * kGemmMr, (p1 - p0) * kGemmMr), pc, kc,
         pack_a_buf + p0 * kGemmMr * kc);
#if KILN_X86
  if (bf16) {
    for (int64_t q = p0; q < p1; ++q) x86::convert_a_panel_bf16(pack_a_buf + q * kGemmMr * kc, kc);
  }
#endif
}

// The block's tiles: all rows at once where A is prepacked, otherwise
// block of kGemmMc rows by block, each packed first with whole A panels
// per task, each filling its own part of the one buffer (a packed float,
// stored kGemmMr apart, weighs about four multiply-adds).
void PackedBlocks::run_block() const {
  if (a.prepacked) {
    run_tiles(0, m, 0);
    return;
  }
  for (int64_t ic = 0; ic < m; ic += kGemmMc) {
    const int64_t mc = gemm_min(kGemmMc, m - ic);
    const int64_t a_panels = (mc + kGemmMr - 1) / kGemmMr;
    const int64_t pack_tasks = parallel_tasks(pool, mc * kc * 4, a_panels);
    parallel_for(pool, pack_tasks, [&](int64_t t) {
      int64_t p0, p1;
      parallel_range(a_panels, pack_tasks, t, 1, &p0, &p1);
      if (p0 < p1) pack_a_panels(ic, mc, p0, p1);
    });
    run_tiles(ic, ic + mc, ic);
  }
}

// Rows [i0, i1) of the whole product on one thread, block of kGemmMc rows
// by block: every block of columns and of k for them, A packed into this
// copy's own pack_a_buf. Each tile sums k block by block in the same
// order as gemm_packed's loops, so the bits are the same.
void PackedBlocks::run_rows(int64_t i0, int64_t i1) {
  for (int64_t ic = i0; ic < i1; ic += kGemmMc) {
    const int64_t mc = gemm_min(kGemmMc, i1 - ic);
    for (int64_t block_jc = 0; block_jc < n; block_jc += kGemmNc) {
      for (int64_t block_pc = 0; block_pc < k; block_pc += k_block) {
        start_block(block_jc, block_pc);
        pack_a_panels(ic, mc, 0, (mc + kGemmMr - 1) / kGemmMr);
        tiles(ic, ic + mc, 0, panels, ic);
      }
    }
  }
}

// The whole product in one pool call where A is prepacked (weights) and B
// is packed here into `tasks` blocks of scratch: task t takes a region of
// rows by columns (the grid where the tasks read and pack least) and runs
// every block of k for it, packing its own columns of B into block t.
// Split block by block instead, each block of k cost two waits for the
// other thread, and each task's tiles read B panels the other had packed,
// from the other core's cache.
void PackedBlocks::run_regions(int64_t tasks) {
  const int64_t row_panels = (m + kGemmMr - 1) / kGemmMr, col_panels = (n + kGemmNr - 1) / kGemmNr;
  int64_t tn = 1, tm = tasks;
  least_read_grid(tasks, col_panels, row_panels, m, n, &tn, &tm);
  parallel_for(pool, tn * tm, [&](int64_t t) {
    int64_t q0, q1, r0, r1;
    parallel_range(col_panels, tn, t % tn, 1, &q0, &q1);
    parallel_range(row_panels, tm, t / tn, 1, &r0, &r1);
    if (q0 >= q1 || r0 >= r1) return;
    PackedBlocks mine = *this;
    mine.pool = nullptr;
    mine.pack_b_buf = pack_b_buf + t * gemm_pack_b_floats(k, n);
    for (int64_t block_jc = 0; block_jc < n; block_jc += kGemmNc) {
      const int64_t first_panel = block_jc / kGemmNr;
      const int64_t lo = gemm_max(q0, first_panel) - first_panel;
      const int64_t hi = gemm_min(q1, (gemm_min(block_jc + kGemmNc, n) + kGemmNr - 1) / kGemmNr) - first_panel;
      if (lo >= hi) continue;
      for (int64_t block_pc = 0; block_pc < k; block_pc += k_block) {
        mine.start_block(block_jc, block_pc);
        mine.pack_b_panels(lo, hi);
        mine.tiles(r0 * kGemmMr, gemm_min(r1 * kGemmMr, m), lo, hi, 0);
      }
    }
  });
}
#endif

}  // namespace

// The blocked product, loop by loop (B's block stays in L2, A's block is
// streamed past it, one B panel stays in L1 while the A panels pass):
//   for each block of kGemmNc columns (jc)
//     for each block of kGemmKc of the inner dimension (pc)
//       pack B[pc.., jc..]                          -> pack_b (or read in
//                                                      place: gemm_reads_b_in_place)
//       for each block of kGemmMc rows (ic)
//         pack A[ic.., pc..]                        -> pack_a
//         for each B panel (jr), each A panel (ir)
//           micro-kernel: C tile (+)= A panel x B panel
// The first inner block starts from zero (or C, or the bias); later ones
// accumulate; the last applies the activation while the tile is in cache.
// With a thread pool, packing B is split by panels and the tiles of a
// block by B panels and row panels (parallel.h): every tile still sums its
// whole inner dimension block by block in the same order, so the result
// has the same bits on any number of threads, and the one packing scratch
// is filled before anyone reads it.
void gemm_packed(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b, const GemmIm2col* im2col,
                 float* c, int64_t ldc, const GemmEpilogue& epilogue, float* pack_a_buf, float* pack_b_buf,
                 GemmPath path, ThreadPool* pool, int64_t pack_blocks) {
  if (m <= 0 || n <= 0) return;
  const Clamp clamp = clamp_of(epilogue.activation);
  if (k <= 0) {
    gemm_empty_k(m, n, c, ldc, epilogue);
    return;
  }
  const bool bf16 = a.bf16 || b.bf16;
  if (m == 1 && im2col == nullptr && !a.trans && !a.prepacked && !b.prepacked && b.row_scale == nullptr) {
    gemm_one_row(n, k, a, b, c, epilogue, clamp, pack_b_buf, path);
    return;
  }
#if defined(KILN_BARE_METAL)
  // Firmware has no threads, nor BF16.
  static_cast<void>(pool);
  static_cast<void>(pack_blocks);
  static_cast<void>(bf16);
  gemm_blocks_serial(m, n, k, a, b, im2col, c, ldc, epilogue, clamp, pack_a_buf, pack_b_buf, path);
#else
  // One column against weights the planner packed (a 1x1 convolution on a
  // 1x1 plane): a matrix-vector product over the packed panels, not a
  // 16-column panel with one useful column. Firmware keeps the panel path.
  if (n == 1 && a.prepacked && !bf16 && im2col == nullptr && !b.prepacked && b.row_scale == nullptr &&
      pack_b_buf != nullptr) {
    gemv_prepacked_a(m, k, a, b, c, ldc, epilogue, clamp, pack_b_buf, path, pool);
    return;
  }
  PackedBlocks blocks;
  blocks.m = m;
  blocks.n = n;
  blocks.k = k;
  blocks.a = a;
  blocks.b = b;
  blocks.im2col = im2col;
  blocks.c = c;
  blocks.ldc = ldc;
  blocks.epilogue = epilogue;
  blocks.clamp = clamp;
  blocks.pack_a_buf = pack_a_buf;
  blocks.pack_b_buf = pack_b_buf;
  blocks.path = path;
  blocks.pool = pool;
  blocks.kernel = select_micro_kernel(path);
#if KILN_X86
  blocks.wide = blocks.kernel == x86::micro_kernel_avx512;
#endif
  blocks.bf16 = bf16;
  // BF16 packs B to convert it: never read in place.
  blocks.direct_b = !bf16 && im2col == nullptr && !b.prepacked && !b.trans && b.row_scale == nullptr &&
                    gemm_reads_b_in_place(m, b.ld);
  // Both operands prepacked (Winograd's products on small planes, whose
  // caller decides it the same way for every block of tiles and thread
  // count: GemmMatrix::whole_k): one
  // block of all of k, so the A panels are read whole, one after another
  // in the order they are stored (the next row block fetched ahead:
  // next_a_block), and C is written once. ResNet-50's layer4 3x3 by
  // Winograd (16 products of 512 x 512 by 16 columns, 16.7 MB of weights
  // from memory each run), 8 of them in a chain, one thread, alternating
  // rounds: 15.0-15.4 -> 12.2-12.3 ms.
  if (a.prepacked && b.prepacked && !bf16 && b.whole_k) blocks.k_block = k;
  // B packed ahead of time, A packed here, several packing blocks
  // (gemm_row_scratch_blocks): one task a thread takes a range of rows
  // and runs all of its product, packing into a block of its own. Split
  // block by block instead, every 72 rows cost two waits for the other
  // thread (packing, then tiles), each about as long as the block's work
  // on ConvNeXt's 96 -> 384 and 384 -> 96 token products (3,136 rows):
  // on two threads those took 1.84 and 1.61 ms, on one 1.64-2.12 and
  // 1.44-1.78; by ranges of rows 0.90 and 0.81.
  const int64_t row_panels = (m + kGemmMr - 1) / kGemmMr;
  const int64_t row_tasks =
      b.prepacked && !a.prepacked && im2col == nullptr && pack_blocks > 1 && m > kGemmMc
          ? gemm_min(parallel_tasks(pool, m * n * k, row_panels), gemm_min(parallel_threads(pool), pack_blocks))
          : 1;
  if (row_tasks > 1) {
    parallel_for(pool, row_tasks, [&](int64_t t) {
      int64_t r0, r1;
      parallel_range(row_panels, row_tasks, t, 1, &r0, &r1);
      if (r0 == r1) return;
      PackedBlocks rows = blocks;
      rows.pool = nullptr;
      rows.pack_a_buf = pack_a_buf + t * gemm_pack_a_floats(m, k);
      rows.run_rows(r0 * kGemmMr, gemm_min(r1 * kGemmMr, m));
    });
    return;
  }
  if (a.prepacked && !b.prepacked && !blocks.direct_b && pack_blocks > 1) {
    const int64_t tasks = gemm_min(parallel_tasks(pool, m * n * k, row_panels * ((n + kGemmNr - 1) / kGemmNr)),
                                   gemm_min(parallel_threads(pool), pack_blocks));
    if (tasks > 1) {
      blocks.run_regions(tasks);
      return;
    }
  }
  for (int64_t jc = 0; jc < n; jc += kGemmNc) {
    for (int64_t pc = 0; pc < k; pc += blocks.k_block) {
      blocks.start_block(jc, pc);
      blocks.pack_b();
      blocks.run_block();
    }
  }
#endif
}

namespace {

void depthwise3x3_portable(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t stride,
                           int64_t pt, int64_t pl, float* out, int64_t oh, int64_t ow, bool clamp, float lo, float hi) {
  for (int64_t oy = 0; oy < oh; ++oy) {
    for (int64_t ox = 0; ox < ow; ++ox) {
      float acc = bias;
      for (int64_t ky = 0; ky < 3; ++ky) {
        const int64_t iy = oy * stride - pt + ky;
        if (iy < 0 || iy >= h) continue;
        for (int64_t kx = 0; kx < 3; ++kx) {
          const int64_t ix = ox * stride - pl + kx;
          if (ix >= 0 && ix < w) acc += weights[ky * 3 + kx] * in[iy * w + ix];
        }
      }
      if (clamp) acc = acc < lo ? lo : (acc > hi ? hi : acc);
      out[oy * ow + ox] = acc;
    }
  }
}

}  // namespace

void depthwise3x3(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t stride, int64_t pt,
                  int64_t pl, float* out, int64_t oh, int64_t ow, const fb::FusedActivation* activation,
                  GemmPath path) {
  const Clamp clamp = clamp_of(activation);
  bool done = false;
#if KILN_X86
  if (path == GemmPath::kAuto && x86::has_avx512f()) {
    done = x86::depthwise3x3_avx512(in, h, w, weights, bias, stride, pt, pl, out, oh, ow, clamp.on, clamp.lo, clamp.hi);
  }
  if (!done && path != GemmPath::kPortable && x86::has_avx2_fma()) {
    x86::depthwise3x3_avx2(in, h, w, weights, bias, stride, pt, pl, out, oh, ow, clamp.on, clamp.lo, clamp.hi);
    done = true;
  }
#endif
#if KILN_NEON
  if (path != GemmPath::kPortable && neon::enabled()) {
    done = neon::depthwise3x3(in, h, w, weights, bias, stride, pt, pl, out, oh, ow, clamp.on, clamp.lo, clamp.hi);
  }
#endif
  if (!done) depthwise3x3_portable(in, h, w, weights, bias, stride, pt, pl, out, oh, ow, clamp.on, clamp.lo, clamp.hi);
  if (clamp.post) apply_activation(out, oh * ow, activation);
}

namespace {

// A fused activation the tile could not clamp, over the rows computed.
void conv_s2_post_activation(const DirectConvS2& conv, int64_t oy0, int64_t oy1) {
  const int64_t plane = conv.oh * conv.ow;
  for (int64_t ch = 0; ch < conv.m; ++ch) {
    apply_activation(conv.y + ch * plane + oy0 * conv.ow, (oy1 - oy0) * conv.ow, conv.activation);
  }
}

}  // namespace

bool conv_s2_direct(const DirectConvS2& conv, GemmPath path) {
  const int64_t oy1 = conv.oy1 < 0 || conv.oy1 > conv.oh ? conv.oh : conv.oy1;
  const int64_t oy0 = conv.oy0 < 0 ? 0 : conv.oy0 > oy1 ? oy1 : conv.oy0;
#if KILN_X86
  // AVX-512 where the processor and KILN_ISA allow it, AVX2 otherwise or
  // when asked for (kAvx2: tests of that kernel on AVX-512 machines).
  const Clamp clamp = clamp_of(conv.activation);
  bool done = false;
  if (path == GemmPath::kAuto && x86::has_avx512f()) {
    done = x86::conv_s2_avx512(conv.x, conv.c, conv.h, conv.w, conv.kh, conv.kw, conv.pt, conv.pl, conv.packed_weights,
                               conv.m, conv.bias, conv.y, conv.oh, conv.ow, oy0, oy1, clamp.on, clamp.lo, clamp.hi);
  } else if (path != GemmPath::kPortable && x86::has_avx2_fma()) {
    done = x86::conv_s2_avx2(conv.x, conv.c, conv.h, conv.w, conv.kh, conv.kw, conv.pt, conv.pl, conv.packed_weights,
                             conv.m, conv.bias, conv.y, conv.oh, conv.ow, oy0, oy1, clamp.on, clamp.lo, clamp.hi);
  }
  if (!done) return false;
  if (clamp.post) conv_s2_post_activation(conv, oy0, oy1);
  return true;
#elif KILN_NEON
  const Clamp clamp = clamp_of(conv.activation);
  if (path != GemmPath::kAuto || !neon::enabled() ||
      !neon::conv_s2(conv.x, conv.c, conv.h, conv.w, conv.kh, conv.kw, conv.pt, conv.pl, conv.packed_weights, conv.m,
                     conv.bias, conv.y, conv.oh, conv.ow, oy0, oy1, clamp.on, clamp.lo, clamp.hi)) {
    return false;
  }
  if (clamp.post) conv_s2_post_activation(conv, oy0, oy1);
  return true;
#else
  static_cast<void>(conv);
  static_cast<void>(path);
  static_cast<void>(oy0);
  return false;
#endif
}

}  // namespace kernels
}  // namespace kiln
