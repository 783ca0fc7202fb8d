// ConvLanes (gemm.h): a convolution on a small output plane with output
// channels in vector lanes. Weights x im2col with the weights as the
// vector operand leaves a 7 x 7 plane's 49 positions as four 16-lane
// panels, the last holding one position for the cost of sixteen; here the
// positions are the broadcast operand instead, in tiles of up to 8 (a
// 7 x 7 plane: 7 tiles of 7, nothing wasted), and the channels, a multiple
// of 16 in the networks that have such planes, fill the lanes.
//
// Loop by loop:
//   for each block of kGemmKc of the inner dimension (pc)
//     pack the block's im2col rows, kGemmNr positions a panel (not for a
//     1x1, stride 1, unpadded kernel: the tiles read the image)
//     for each channel tile (32 channels, 16 on AVX2; split across threads)
//       for each position tile
//         product[positions][channels] (+)= positions x weights
//   y[channel][position] = activation(product[position][channel] + bias)
// The weights' block of a channel tile (kGemmKc x 32 floats) stays in L1
// while the position tiles pass; each weight is read from memory once, and
// in the order they are stored (conv_lanes_prepack_weights): one stream
// from memory instead of a 16 KB piece per panel a page or more apart,
// which held a 3x3 convolution on a 7 x 7 plane (512 x 49 by 4608, 9.4 MB
// of weights) to 5 GB/s.

#include "activation.h"
#include "gemm.h"
#include "isa_switch.h"
#include "parallel.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace {

// The tile on the plain path: `rows` (up to kPortableRows) positions by the
// 16 channels of panel w0 (w1 is never given), as the x86 tiles.
constexpr int64_t kPortableRows = 4;
void lanes_tile_portable(int64_t kc, const float* const* pos, int64_t ps, int64_t rows, const float* w0,
                         const float* w1, float* ct, int64_t ldct, bool accumulate) {
  static_cast<void>(w1);
  float acc[kPortableRows][kGemmNr] = {};
  for (int64_t s = 0; s < kc; ++s) {
    const float* w = w0 + s * kGemmNr;
    for (int64_t r = 0; r < kPortableRows; ++r) {
      const float a = r < rows ? pos[r][s * ps] : 0.f;
      for (int64_t j = 0; j < kGemmNr; ++j) acc[r][j] += a * w[j];
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = ct + r * ldct;
    for (int64_t j = 0; j < kGemmNr; ++j) row[j] = accumulate ? row[j] + acc[r][j] : acc[r][j];
  }
}

using LanesTile = void (*)(int64_t kc, const float* const* pos, int64_t ps, int64_t rows, const float* w0,
                           const float* w1, float* ct, int64_t ldct, bool accumulate);

struct LanesPath {
  LanesTile tile = lanes_tile_portable;
  int64_t max_rows = kPortableRows;
  int64_t panels = 1;  // weight panels (16 channels each) a tile
};

LanesPath select_lanes(GemmPath path) {
  LanesPath p;
#if KILN_X86
  if (path == GemmPath::kAuto && x86::has_avx512f()) {
    p.tile = x86::conv_lanes_tile_avx512;
    p.max_rows = 8;
    p.panels = 2;
  } else if (path != GemmPath::kPortable && x86::has_avx2_fma()) {
    p.tile = x86::conv_lanes_tile_avx2;
    p.max_rows = 6;
  }
#else
  static_cast<void>(path);
#endif
  return p;
}

}  // namespace

void conv_lanes_prepack_weights(int64_t k, int64_t m, const float* w, float* out) {
  const int64_t ldp = gemm_round_up(m, kGemmNr);
  for (int64_t pc = 0; pc < k; pc += kGemmKc) {
    const int64_t kc = gemm_min(kGemmKc, k - pc);
    for (int64_t q = 0; q < ldp / kGemmNr; ++q) {
      float* panel = out + pc * ldp + q * kGemmNr * kc;
      for (int64_t j = 0; j < kGemmNr; ++j) {
        const int64_t channel = q * kGemmNr + j;
        for (int64_t p = 0; p < kc; ++p) panel[p * kGemmNr + j] = channel < m ? w[channel * k + pc + p] : 0.f;
      }
    }
  }
}

void conv_lanes(const ConvLanes& conv, GemmPath path, ThreadPool* pool) {
  const GemmIm2col& g = conv.geometry;
  const int64_t k = g.channels * g.kh * g.kw, n = g.oh * g.ow, m = conv.m;
  if (m <= 0 || n <= 0) return;
  const int64_t ldp = gemm_round_up(m, kGemmNr);  // the product's row: the channels of one position
  const int64_t channel_panels = ldp / kGemmNr;
  const bool pointwise =
      g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.oh == g.h && g.ow == g.w;
  const LanesPath lanes = select_lanes(path);
  // Position tiles as even as the widest tile allows: 49 positions on
  // AVX-512 are 7 tiles of 7.
  const int64_t position_tiles = (n + lanes.max_rows - 1) / lanes.max_rows;
  const int64_t channel_tiles = (channel_panels + lanes.panels - 1) / lanes.panels;
  const int64_t position_panels = (n + kGemmNr - 1) / kGemmNr;
  for (int64_t pc = 0; pc < k; pc += kGemmKc) {
    const int64_t kc = gemm_min(kGemmKc, k - pc);
    if (!pointwise) {
      const int64_t tasks = parallel_tasks(pool, kc * n * 8, position_panels);
      parallel_for(pool, tasks, [&](int64_t t) {
        int64_t q0, q1;
        parallel_range(position_panels, tasks, t, 1, &q0, &q1);
        if (q0 == q1) return;
        gemm_pack_im2col_block(g, pc, kc, q0 * kGemmNr, gemm_min(q1 * kGemmNr, n) - q0 * kGemmNr,
                               conv.positions + q0 * kGemmNr * kc, path);
      });
    }
    const int64_t tasks = parallel_tasks(pool, m * n * kc, channel_tiles);
    parallel_for(pool, tasks, [&](int64_t t) {
      int64_t c0, c1;
      parallel_range(channel_tiles, tasks, t, 1, &c0, &c1);
      const float* pos[8];
      for (int64_t ct = c0; ct < c1; ++ct) {
        const int64_t panel = ct * lanes.panels;
        const float* w0 = conv.packed_weights + pc * ldp + panel * kGemmNr * kc;
        const float* w1 = panel + 1 < channel_panels && lanes.panels == 2 ? w0 + kGemmNr * kc : nullptr;
        // The weights stored next (the next channel tile's, or the next
        // block's first) are fetched while these tiles run, a share of
        // their lines before each position tile.
        const int64_t ahead = kGemmNr * kc * lanes.panels;
        const float* next = w0 + ahead < conv.packed_weights + k * ldp ? w0 + ahead : nullptr;
        for (int64_t tile = 0; tile < position_tiles; ++tile) {
          const int64_t p0 = tile * n / position_tiles, p1 = (tile + 1) * n / position_tiles;
          if (next != nullptr) {
            const int64_t f0 = ahead / kGemmNr * tile / position_tiles;
            const int64_t f1 = ahead / kGemmNr * (tile + 1) / position_tiles;
            for (int64_t f = f0; f < f1; ++f) __builtin_prefetch(next + f * kGemmNr, 0, 3);
          }
          for (int64_t p = p0; p < p1; ++p) {
            pos[p - p0] = pointwise ? g.x + pc * n + p : conv.positions + p / kGemmNr * kGemmNr * kc + p % kGemmNr;
          }
          lanes.tile(kc, pos, pointwise ? n : kGemmNr, p1 - p0, w0, w1, conv.product + p0 * ldp + panel * kGemmNr, ldp,
                     pc > 0);
        }
      }
    });
  }
  // Transposed into y, then the bias and activation row by row, 16
  // channels at a time: the product is read by whole rows and y is written
  // as 16 rows side by side (a column of the product, ldp floats apart,
  // touches a page per position: a quarter of a 1x1 convolution's time).
  const Clamp clamp = clamp_of(conv.activation);
  const int64_t tasks = parallel_tasks(pool, m * n * 4, channel_panels);
  parallel_for(pool, tasks, [&](int64_t t) {
    int64_t j0, j1;
    parallel_range(m, tasks, t, kGemmNr, &j0, &j1);
    for (int64_t jb = j0; jb < j1; jb += kGemmNr) {
      const int64_t channels = gemm_min(kGemmNr, j1 - jb);
      float* rows = conv.y + jb * n;
      for (int64_t p = 0; p < n; ++p) {
        const float* src = conv.product + p * ldp + jb;
        for (int64_t j = 0; j < channels; ++j) rows[j * n + p] = src[j];
      }
      for (int64_t j = 0; j < channels; ++j) {
        const float bias = conv.bias != nullptr ? conv.bias[jb + j] : 0.f;
        float* row = rows + j * n;
        for (int64_t p = 0; p < n; ++p) {
          float v = row[p] + bias;
          if (clamp.on) v = v < clamp.lo ? clamp.lo : (v > clamp.hi ? clamp.hi : v);
          row[p] = v;
        }
        if (clamp.post) apply_activation(row, n, conv.activation);
      }
    }
  });
}

}  // namespace kernels
}  // namespace kiln
