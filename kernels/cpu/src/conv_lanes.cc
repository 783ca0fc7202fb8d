// ConvLanes (gemm.h): a convolution with output channels in vector lanes.
// Weights x im2col with the weights as the vector operand leaves a 7 x 7
// plane's 49 positions as four 16-lane panels, the last holding one
// position for the cost of sixteen; here the positions are the broadcast
// operand instead, in tiles of up to 8 (a 7 x 7 plane: 7 tiles of 7,
// nothing wasted), and the channels, a multiple of 16 in the networks
// that have such planes, fill the lanes. On larger planes (the strided
// kernels the planner sends here, gemm_blocking.h) the tiles read the image
// through a table of offsets, so the im2col matrix that weights x im2col
// packs and reads once per 128 output channels is never written.
//
// Loop by loop, for each block of positions whose product stays in L2:
//   (larger planes, a kernel that reads padding: copy the image with its
//   padding written out, split by rows)
//   each thread's share: a range of channel tiles, or on larger planes
//   a range of positions where the image outweighs the weights
//     for each block of kGemmKc of the inner dimension (pc)
//       small planes: pack the block's im2col rows, kGemmNr positions a
//       panel, into the thread's own block of scratch; larger planes:
//       the block's table of offsets (not for 1x1), on the stack
//       for each channel tile (32 channels, 16 on AVX2)
//         for each position tile
//           product[positions][channels] (+)= positions x weights
//     y[channel][position] = activation(product[position][channel] + bias)
// A small plane planned with one block of scratch (kiln plan --threads 1)
// packs each block of k across the threads, then splits its channel tiles.
// The weights' block of a channel tile (kGemmKc x 32 floats) stays in L1
// while the position tiles pass; each weight is read from memory once, and
// in the order they are stored (conv_lanes_prepack_weights): one stream
// from memory instead of a 16 KB piece per panel a page or more apart,
// which held a 3x3 convolution on a 7 x 7 plane (512 x 49 by 4608, 9.4 MB
// of weights) to 5 GB/s.

#include <algorithm>
#include <cstring>

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
void lanes_tile_portable(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, int64_t rows,
                         const float* w0, const float* w1, float* ct, int64_t ldct, bool accumulate,
                         const LanesPrefetch& pf) {
  static_cast<void>(w1);
  static_cast<void>(pf);
  float acc[kPortableRows][kGemmNr] = {};
  for (int64_t s = 0; s < kc; ++s) {
    const float* w = w0 + s * kGemmNr;
    for (int64_t r = 0; r < kPortableRows; ++r) {
      const float a = r < rows ? pos[r][koff != nullptr ? koff[s] : s * ps] : 0.f;
      for (int64_t j = 0; j < kGemmNr; ++j) acc[r][j] += a * w[j];
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = ct + r * ldct;
    for (int64_t j = 0; j < kGemmNr; ++j) row[j] = accumulate ? row[j] + acc[r][j] : acc[r][j];
  }
}

using LanesTile = void (*)(int64_t kc, const float* const* pos, const int32_t* koff, int64_t ps, int64_t rows,
                           const float* w0, const float* w1, float* ct, int64_t ldct, bool accumulate,
                           const LanesPrefetch& pf);

using LanesWrite = void (*)(const float* product, int64_t ldp, int64_t positions, float* y, int64_t n,
                            const float* bias, bool clamp, float lo, float hi);

struct LanesPath {
  LanesTile tile = lanes_tile_portable;
  int64_t max_rows = kPortableRows;
  int64_t panels = 1;          // weight panels (16 channels each) a tile
  LanesWrite write = nullptr;  // a whole block of 16 channels written out (x86.h); plain loops where nullptr
};

LanesPath select_lanes(GemmPath path) {
  LanesPath p;
#if KILN_X86
  if (path == GemmPath::kAuto && x86::has_avx512f()) {
    p.tile = x86::conv_lanes_tile_avx512;
    p.max_rows = 8;
    p.panels = 2;
    p.write = x86::conv_lanes_write_avx512;
  } else if (path != GemmPath::kPortable && x86::has_avx2_fma()) {
    p.tile = x86::conv_lanes_tile_avx2;
    p.max_rows = 6;
    p.write = x86::conv_lanes_write_avx2;
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

ConvLanesShape conv_lanes_shape(const GemmIm2col& g, int64_t groups) {
  ConvLanesShape s;
  // clang-format off
  s.channels = g.channels; s.h = g.h; s.w = g.w; s.kh = g.kh; s.kw = g.kw; s.sh = g.sh; s.sw = g.sw;
  s.dh = g.dh; s.dw = g.dw; s.pt = g.pt; s.pl = g.pl; s.oh = g.oh; s.ow = g.ow; s.groups = groups;
  // clang-format on
  return s;
}

namespace {

// The image the tiles read and its geometry: x itself, or (where the
// kernel reads padding) its copy with the padding written out as zeros,
// hp x wp a channel, the rows and columns the kernel reads.
struct LanesImage {
  const float* data;
  int64_t hp, wp;
};

LanesImage lanes_image(const GemmIm2col& g, const ConvLanesShape& shape, float* scratch, ThreadPool* pool) {
  if (!shape.reads_padding()) return {g.x, g.h, g.w};
  const int64_t hp = shape.hp(), wp = shape.wp();
  // Columns [c0, c1) of a padded row come from the input row.
  const int64_t c0 = gemm_min(g.pl, wp), c1 = gemm_max(c0, gemm_min(g.pl + g.w, wp));
  // By rows, all channels: the tasks that split the product by positions
  // read mostly the rows their own thread wrote.
  const int64_t tasks = parallel_tasks(pool, g.channels * hp * wp, hp);
  parallel_for(pool, tasks, [&](int64_t t) {
    int64_t r0, r1;
    parallel_range(hp, tasks, t, 1, &r0, &r1);
    for (int64_t c = 0; c < g.channels; ++c) {
      for (int64_t r = r0; r < r1; ++r) {
        float* row = scratch + (c * hp + r) * wp;
        const int64_t iy = r - g.pt;
        if (iy < 0 || iy >= g.h) {
          std::fill(row, row + wp, 0.f);
          continue;
        }
        const float* in = g.x + (c * g.h + iy) * g.w + (c0 - g.pl);
        std::fill(row, row + c0, 0.f);
        std::copy(in, in + (c1 - c0), row + c0);
        std::fill(row + c1, row + wp, 0.f);
      }
    }
  });
  return {scratch, hp, wp};
}

// Where the tiles of one block of k (kc deep from pc) read (the tile's
// contract, x86.h): from `first`, each position's first value, then step s
// at koff[s] from it (a kernel of several taps read through the table), or
// at s * ps (a 1x1 kernel, one plane a step: the table's load cost a
// pointwise layer 3-6%; or the packed block, kGemmNr apart).
struct LanesBlock {
  const float* first;
  const int32_t* koff;
  int64_t ps;
};

// One convolution's setting, shared by its blocks of positions.
struct LanesRun {
  const GemmIm2col* g;
  const ConvLanes* conv;
  LanesPath lanes;
  LanesImage image;
  bool packs;
  int64_t taps, k, ldp, channel_panels;
  GemmPath path;
  ThreadPool* pool;

  // Tiles of channels (one or two 16-channel panels each).
  int64_t channel_tiles() const { return (channel_panels + lanes.panels - 1) / lanes.panels; }
};

// The setting of `conv` (its geometry, weights and channels as given: a
// group's, with groups), its positions read from `image` or packed.
LanesRun lanes_run(const ConvLanes& conv, const ConvLanesShape& shape, GemmPath path, ThreadPool* pool, bool packs,
                   LanesImage image) {
  LanesRun r;
  r.g = &conv.geometry;
  r.conv = &conv;
  r.lanes = select_lanes(path);
  r.packs = packs;
  r.image = image;
  r.taps = shape.kh * shape.kw;
  r.k = shape.k();
  r.ldp = gemm_round_up(conv.m, kGemmNr);  // the product's row: the channels of one position
  r.channel_panels = r.ldp / kGemmNr;
  r.path = path;
  r.pool = pool;
  return r;
}

// Step s's offset from a position's first tap in the image, for the block
// of k of kc steps from pc: the im2col matrix is never written out.
void lanes_offsets(const LanesRun& r, int64_t pc, int64_t kc, int32_t* koff) {
  const GemmIm2col& g = *r.g;
  for (int64_t s = 0; r.taps > 1 && s < kc; ++s) {
    const int64_t c = (pc + s) / r.taps, tap = (pc + s) % r.taps;
    koff[s] = static_cast<int32_t>((c * r.image.hp + tap / g.kw * g.dh) * r.image.wp + tap % g.kw * g.dw);
  }
}

// Channel tiles [c0, c1) of the block of k of kc from pc, for positions
// [b0, b0 + nb) of the plane read as `block` says, into `product` (the
// row of position b0). `after` is where the weights read after these
// tiles start (this range's first tile at the next block), or nullptr.
void lanes_channel_tiles(const LanesRun& r, const LanesBlock& block, int64_t pc, int64_t kc, int64_t b0, int64_t nb,
                         int64_t c0, int64_t c1, const float* after, float* product) {
  const GemmIm2col& g = *r.g;
  const ConvLanes& conv = *r.conv;
  const int64_t ldp = r.ldp;
  // Position tiles as even as the widest tile allows: 49 positions on
  // AVX-512 are 7 tiles of 7.
  const int64_t position_tiles = (nb + r.lanes.max_rows - 1) / r.lanes.max_rows;
  const float* pos[8];
  for (int64_t ct = c0; ct < c1; ++ct) {
    const int64_t panel = ct * r.lanes.panels;
    const float* w0 = conv.packed_weights + pc * ldp + panel * kGemmNr * kc;
    const float* w1 = panel + 1 < r.channel_panels && r.lanes.panels == 2 ? w0 + kGemmNr * kc : nullptr;
    // The weights read next (this range's next channel tile, or its first
    // at the next block) are fetched while these tiles run, a share of
    // their lines by each position tile, spread over its steps.
    const int64_t ahead = kGemmNr * kc * r.lanes.panels;
    const float* next = ct + 1 < c1 ? w0 + ahead : after;
    for (int64_t tile = 0; tile < position_tiles; ++tile) {
      const int64_t p0 = tile * nb / position_tiles, p1 = (tile + 1) * nb / position_tiles;
      LanesPrefetch pf;
      if (next != nullptr) {
        const int64_t f0 = ahead / kGemmNr * tile / position_tiles;
        const int64_t f1 = ahead / kGemmNr * (tile + 1) / position_tiles;
        pf = LanesPrefetch{next + f0 * kGemmNr, f1 - f0};
      }
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t q = b0 + p;  // the position in the plane
        pos[p - p0] = r.packs ? block.first + p / kGemmNr * kGemmNr * kc + p % kGemmNr
                              : block.first + q / g.ow * g.sh * r.image.wp + q % g.ow * g.sw;
      }
      r.lanes.tile(kc, pos, block.koff, block.ps, p1 - p0, w0, w1, product + p0 * ldp + panel * kGemmNr, ldp, pc > 0,
                   pf);
    }
  }
}

// Where block pc's channel tile `ct` starts in the packed weights (nullptr
// past the last block).
const float* lanes_weights_at(const LanesRun& r, int64_t pc, int64_t ct) {
  if (pc >= r.k) return nullptr;
  const int64_t kc = gemm_min(kGemmKc, r.k - pc);
  return r.conv->packed_weights + pc * r.ldp + ct * r.lanes.panels * kGemmNr * kc;
}

// The positions of the block of k of kc from pc packed into `dst`,
// position panels [q0, q1).
void lanes_pack(const LanesRun& r, int64_t pc, int64_t kc, int64_t nb, int64_t q0, int64_t q1, float* dst) {
  if (q0 == q1) return;
  gemm_pack_im2col_block(*r.g, pc, kc, q0 * kGemmNr, gemm_min(q1 * kGemmNr, nb) - q0 * kGemmNr, dst + q0 * kGemmNr * kc,
                         r.path);
}

// product[p - b0][channel] = the sum for position p in [b0, b1), block of
// k by block, on a small plane whose im2col rows are packed block by block
// (b0 = 0): each block packed across the pool (split by positions), then
// its channel tiles (split by channels).
void lanes_product_packed(const LanesRun& r, int64_t b0, int64_t b1) {
  const ConvLanes& conv = *r.conv;
  const int64_t nb = b1 - b0, k = r.k;
  const int64_t channel_tiles = r.channel_tiles();
  const int64_t position_panels = (nb + kGemmNr - 1) / kGemmNr;
  for (int64_t pc = 0; pc < k; pc += kGemmKc) {
    const int64_t kc = gemm_min(kGemmKc, k - pc);
    const int64_t pack_tasks = parallel_tasks(r.pool, kc * nb * 8, position_panels);
    parallel_for(r.pool, pack_tasks, [&](int64_t t) {
      int64_t q0, q1;
      parallel_range(position_panels, pack_tasks, t, 1, &q0, &q1);
      lanes_pack(r, pc, kc, nb, q0, q1, conv.input);
    });
    const LanesBlock block{conv.input, nullptr, kGemmNr};
    const int64_t tasks = parallel_tasks(r.pool, r.ldp * nb * kc, channel_tiles);
    parallel_for(r.pool, tasks, [&](int64_t t) {
      int64_t c0, c1;
      parallel_range(channel_tiles, tasks, t, 1, &c0, &c1);
      lanes_channel_tiles(r, block, pc, kc, b0, nb, c0, c1, lanes_weights_at(r, pc + kc, c0), conv.product);
    });
  }
}

// Positions [b0, b1) of the product (`product`: position b0's row)
// transposed into y for channels [j0, j1) (j0 a multiple of 16), then the
// bias and activation row by row, 16 channels at a time: the product is
// read by whole rows and y is written as 16 rows side by side (a column of
// the product, ldp floats apart, touches a page per position: a quarter of
// a 1x1 convolution's time).
void lanes_write_channels(const ConvLanes& conv, const LanesPath& lanes, const float* product, int64_t n, int64_t b0,
                          int64_t b1, int64_t ldp, int64_t j0, int64_t j1) {
  const Clamp clamp = clamp_of(conv.activation);
  const int64_t nb = b1 - b0;
  for (int64_t jb = j0; jb < j1; jb += kGemmNr) {
    const int64_t channels = gemm_min(kGemmNr, j1 - jb);
    float* rows = conv.y + jb * n + b0;
    if (lanes.write != nullptr && channels == kGemmNr) {
      // 16 x 16 register transposes (8 of ResNet-50's layer4 1x1
      // convolutions in a chain: 1.5% of the run, from 6% a value at a
      // time).
      lanes.write(product + jb, ldp, nb, rows, n, conv.bias != nullptr ? conv.bias + jb : nullptr, clamp.on, clamp.lo,
                  clamp.hi);
      for (int64_t j = 0; clamp.post && j < channels; ++j) apply_activation(rows + j * n, nb, conv.activation);
      continue;
    }
    for (int64_t p = 0; p < nb; ++p) {
      const float* src = product + p * ldp + jb;
      for (int64_t j = 0; j < channels; ++j) rows[j * n + p] = src[j];
    }
    for (int64_t j = 0; j < channels; ++j) {
      const float bias = conv.bias != nullptr ? conv.bias[jb + j] : 0.f;
      float* row = rows + j * n;
      for (int64_t p = 0; p < nb; ++p) {
        float v = row[p] + bias;
        if (clamp.on) v = v < clamp.lo ? clamp.lo : (v > clamp.hi ? clamp.hi : v);
        row[p] = v;
      }
      if (clamp.post) apply_activation(row, nb, conv.activation);
    }
  }
}

// The same for all channels, split across the pool.
void lanes_write_out(const ConvLanes& conv, const LanesPath& lanes, int64_t n, int64_t b0, int64_t b1, int64_t ldp,
                     ThreadPool* pool) {
  const int64_t tasks = parallel_tasks(pool, conv.m * (b1 - b0) * 4, ldp / kGemmNr);
  parallel_for(pool, tasks, [&](int64_t t) {
    int64_t j0, j1;
    parallel_range(conv.m, tasks, t, kGemmNr, &j0, &j1);
    lanes_write_channels(conv, lanes, conv.product, n, b0, b1, ldp, j0, j1);
  });
}

// How many pieces a thread's share of channels is cut into (lanes_blocks).
constexpr int64_t kLanesShares = 4;

// A small plane (one block of positions, b0 = 0) where the planner gave
// blocks of scratch for threads: one pool call, each task taking a range
// of channel tiles, packing all the positions block of k by block into a
// block of its own, then writing its channels out. Split block by block
// instead, the 3 x 3 stride-2 convolution of ResNet-50's layer4 (512
// channels, 14 x 14 -> 7 x 7, 18 blocks of k) waited for the other thread
// 36 times, and read half of each packed block from the other core.
void lanes_product_own_blocks(const LanesRun& r, int64_t n, int64_t tasks) {
  const ConvLanes& conv = *r.conv;
  const int64_t channel_tiles = r.channel_tiles();
  const int64_t position_panels = (n + kGemmNr - 1) / kGemmNr;
  const int64_t block_floats = gemm_min(r.k, kGemmKc) * position_panels * kGemmNr;
  const int64_t width = r.lanes.panels * kGemmNr;
  parallel_for(r.pool, tasks, [&](int64_t t) {
    int64_t c0, c1;
    parallel_range(channel_tiles, tasks, t, 1, &c0, &c1);
    if (c0 == c1) return;
    float* mine = conv.input + t * block_floats;
    for (int64_t pc = 0; pc < r.k; pc += kGemmKc) {
      const int64_t kc = gemm_min(kGemmKc, r.k - pc);
      lanes_pack(r, pc, kc, n, 0, position_panels, mine);
      lanes_channel_tiles(r, LanesBlock{mine, nullptr, kGemmNr}, pc, kc, 0, n, c0, c1, lanes_weights_at(r, pc + kc, c0),
                          conv.product);
    }
    lanes_write_channels(conv, r.lanes, conv.product, n, 0, n, r.ldp, c0 * width, gemm_min(c1 * width, conv.m));
  });
}

// Positions [b0, b1) on a larger plane, read through a table of offsets:
// one pool call, one task a thread, on the grid of position ranges by
// channel-tile ranges where the tasks read least (a task reads all the
// weights of its channels and the image rows of its positions). Each task
// runs every block of k for its region, then writes it out, so its
// product stays on its core and no task waits for another between blocks.
// ResNet-50's layer2 3x3 stride-2 convolution (128 channels, 56 x 56 ->
// 28 x 28) was split by channels block by block, a wait each, every
// thread reading the whole image.
void lanes_blocks(const LanesRun& r, int64_t n, int64_t b0, int64_t b1) {
  const int64_t nb = b1 - b0;
  const int64_t channel_tiles = r.channel_tiles();
  const int64_t want = gemm_min(parallel_tasks(r.pool, r.ldp * nb * r.k, channel_tiles * nb),
                                static_cast<int64_t>(parallel_threads(r.pool)));
  const int64_t plane = r.image.hp * r.image.wp, weights = r.k * r.ldp, image = r.g->channels * plane;
  int64_t tp = 1, tc = want;
  least_read_grid(want, nb, channel_tiles, weights, image, &tp, &tc);
  // Each thread's channels in up to kLanesShares pieces, its share of the
  // call's tasks (ThreadPool::parallel_for): a thread that finishes first
  // takes the last pieces of another's share.
  const int64_t pieces =
      tp > 1 || want == 1 ? tc : tc * gemm_max(int64_t{1}, gemm_min(kLanesShares, channel_tiles / tc));
  const int64_t width = r.lanes.panels * kGemmNr;
  parallel_for(r.pool, tp * pieces, [&](int64_t t) {
    int64_t s0, s1, c0, c1;
    parallel_range(nb, tp, t / pieces, 1, &s0, &s1);
    parallel_range(channel_tiles, pieces, t % pieces, 1, &c0, &c1);
    if (s0 == s1 || c0 == c1) return;
    float* product = r.conv->product + s0 * r.ldp;
    int32_t koff[kGemmKc];
    for (int64_t pc = 0; pc < r.k; pc += kGemmKc) {
      const int64_t kc = gemm_min(kGemmKc, r.k - pc);
      lanes_offsets(r, pc, kc, koff);
      const LanesBlock block{r.taps > 1 ? r.image.data : r.image.data + pc * plane, r.taps > 1 ? koff : nullptr, plane};
      lanes_channel_tiles(r, block, pc, kc, b0 + s0, s1 - s0, c0, c1, lanes_weights_at(r, pc + kc, c0), product);
    }
    lanes_write_channels(*r.conv, r.lanes, product, n, b0 + s0, b0 + s1, r.ldp, c0 * width,
                         gemm_min(c1 * width, r.conv->m));
  });
}

// n floats from `from` to `to`, a few at a time: the rows of a group's
// image are a handful of floats, too short for a call to memmove each.
void copy_short(const float* from, int64_t n, float* to) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) std::memcpy(to + j, from + j, 8 * sizeof(float));
  if (n - j >= 4) {
    std::memcpy(to + j, from + j, 4 * sizeof(float));
    j += 4;
  }
  for (; j < n; ++j) to[j] = from[j];
}

// One group's image into its padded copy `pad` (the layout lanes_image
// writes), whose border is zero already: its rows only.
void lanes_group_image(const GemmIm2col& g, const ConvLanesShape& shape, float* pad) {
  const int64_t hp = shape.hp(), wp = shape.wp();
  const int64_t c0 = gemm_min(g.pl, wp), c1 = gemm_max(c0, gemm_min(g.pl + g.w, wp));
  const int64_t r0 = gemm_min(g.pt, hp), r1 = gemm_max(r0, gemm_min(g.pt + g.h, hp));
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t r = r0; r < r1; ++r) {
      copy_short(g.x + (c * g.h + r - g.pt) * g.w + (c0 - g.pl), c1 - c0, pad + (c * hp + r) * wp + c0);
    }
  }
}

// Groups (ResNeXt's 32 groups of 32 channels on a 7 x 7 plane): one pool
// call, each task a range of whole groups with a block of each scratch of
// its own. The padded image's border is zeroed once a task and the
// offsets computed once a task (every group reads the same); then group
// by group, its rows copied in, every block of k for all its channels,
// and its product written out. Run as one convolution a group, each
// group zeroed its padded copy and computed its offsets again, and split
// its one or two channel tiles across the threads: ResNeXt-50's
// 1024-channel 3x3 on 7 x 7 took 0.62 ms so (0.39 by the grouped direct
// kernel), 0.18 this way.
void lanes_groups(const ConvLanes& conv, const ConvLanesShape& shape, GemmPath path, ThreadPool* pool) {
  const GemmIm2col& g = conv.geometry;
  const int64_t n = shape.positions(), k = shape.k(), ldp = gemm_round_up(conv.m, kGemmNr);
  const int64_t input_floats = shape.input_floats(), product_floats = conv_lanes_product_floats(conv.m, n);
  const int64_t group_weights = conv_lanes_weight_floats(k, conv.m), image_floats = g.channels * g.h * g.w;
  const bool padded = shape.reads_padding();
  const int64_t plane = padded ? shape.hp() * shape.wp() : g.h * g.w;
  const int64_t block = conv_lanes_block_positions(conv.m, n);
  const int64_t tasks = gemm_min(gemm_min(conv.input_blocks, conv.product_blocks),
                                 parallel_tasks(pool, ldp * n * k * conv.groups, conv.groups));
  parallel_for(pool, tasks, [&](int64_t t) {
    int64_t g0, g1;
    parallel_range(conv.groups, tasks, t, 1, &g0, &g1);
    if (g0 == g1) return;
    float* pad = conv.input + t * input_floats;
    float* product = conv.product + t * product_floats;
    int32_t* koff = reinterpret_cast<int32_t*>(pad + (padded ? g.channels * plane : 0));
    if (padded) std::fill(pad, pad + g.channels * plane, 0.f);
    ConvLanes one = conv;  // the group's
    GemmIm2col& geometry = one.geometry;
    LanesRun r = lanes_run(one, shape, path, nullptr, false,
                           LanesImage{padded ? pad : nullptr, padded ? shape.hp() : g.h, padded ? shape.wp() : g.w});
    lanes_offsets(r, 0, k, koff);
    const int64_t channel_tiles = r.channel_tiles();
    for (int64_t grp = g0; grp < g1; ++grp) {
      geometry.x = g.x + grp * image_floats;
      one.packed_weights = conv.packed_weights + grp * group_weights;
      one.bias = conv.bias != nullptr ? conv.bias + grp * conv.m : nullptr;
      one.y = conv.y + grp * conv.m * n;
      if (padded) {
        lanes_group_image(geometry, shape, pad);
      } else {
        r.image.data = geometry.x;
      }
      for (int64_t b0 = 0; b0 < n; b0 += block) {
        const int64_t b1 = gemm_min(n, b0 + block);
        for (int64_t pc = 0; pc < k; pc += kGemmKc) {
          const int64_t kc = gemm_min(kGemmKc, k - pc);
          // The weights read next: this group's next block of k, its first
          // again for the next block of positions, or the next group's
          // (they lie in that order).
          const float* after = nullptr;
          if (pc + kc < k) {
            after = one.packed_weights + (pc + kc) * ldp;
          } else if (b1 < n) {
            after = one.packed_weights;
          } else if (grp + 1 < g1) {
            after = one.packed_weights + group_weights;
          }
          const LanesBlock lb{r.taps > 1 ? r.image.data : r.image.data + pc * plane, r.taps > 1 ? koff + pc : nullptr,
                              plane};
          lanes_channel_tiles(r, lb, pc, kc, b0, b1 - b0, 0, channel_tiles, after, product);
        }
        lanes_write_channels(one, r.lanes, product, n, b0, b1, ldp, 0, conv.m);
      }
    }
  });
}

}  // namespace

void conv_lanes(const ConvLanes& conv, GemmPath path, ThreadPool* pool) {
  const GemmIm2col& g = conv.geometry;
  const ConvLanesShape shape = conv_lanes_shape(g, conv.groups);
  const int64_t n = shape.positions();
  if (conv.m <= 0 || n <= 0 || conv.groups <= 0) return;
  if (conv.groups > 1) {
    lanes_groups(conv, shape, path, pool);
    return;
  }
  const bool packs = shape.packs_positions();
  const LanesRun r = lanes_run(conv, shape, path, pool, packs,
                               packs ? LanesImage{g.x, g.h, g.w} : lanes_image(g, shape, conv.input, pool));
  // Blocks of positions whose product stays in L2 (gemm_blocking.h); a
  // small plane is one.
  const int64_t block = conv_lanes_block_positions(conv.m, n);
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = gemm_min(n, b0 + block);
    if (!r.packs) {
      lanes_blocks(r, n, b0, b1);
      continue;
    }
    const int64_t tasks = gemm_min(gemm_min(conv.input_blocks, static_cast<int64_t>(parallel_threads(pool))),
                                   parallel_tasks(pool, r.ldp * n * r.k, r.channel_panels));
    if (tasks > 1) {  // one block of positions
      lanes_product_own_blocks(r, n, tasks);
      continue;
    }
    lanes_product_packed(r, b0, b1);
    lanes_write_out(conv, r.lanes, n, b0, b1, r.ldp, pool);
  }
}

}  // namespace kernels
}  // namespace kiln
