// Blocking of the packed single-precision matrix multiply behind Conv, Gemm
// and MatMul, shared by the kernels and the planner: the planner sizes each
// linear kernel's packing scratch with these functions, and the kernel's
// check() refuses scratch smaller than they say. Both sides must agree, so
// changing a constant changes the scratch every program was planned with
// (older programs are refused at load, never overrun).
//
// The product C[m][n] = A[m][k] B[k][n] is computed in blocks: kGemmKc rows
// of B by kGemmNc columns are packed into panels kGemmNr columns wide, and
// kGemmMc rows of A by kGemmKc columns into panels kGemmMr rows tall. One
// register tile of C is kGemmMr x kGemmNr. Header-only, no state.

#ifndef KILN_KERNELS_GEMM_BLOCKING_H_
#define KILN_KERNELS_GEMM_BLOCKING_H_

#include <stdint.h>

namespace kiln {
namespace kernels {

constexpr int64_t kGemmMr = 6;
constexpr int64_t kGemmNr = 16;
constexpr int64_t kGemmKc = 256;
constexpr int64_t kGemmMc = 72;   // a multiple of kGemmMr
constexpr int64_t kGemmNc = 512;  // a multiple of kGemmNr
// A last B panel of at most this many columns runs with rows in lanes
// (x86::micro_kernel_avx512_edge) instead of in 16-column tiles.
constexpr int64_t kGemmEdgeColumns = 4;
// A last A panel of at most this many rows runs against several B panels
// a call (x86::micro_kernel_avx512_row_edge) instead of in 6x32 tiles.
constexpr int64_t kGemmRowEdge = 2;

constexpr int64_t gemm_min(int64_t a, int64_t b) { return a < b ? a : b; }
constexpr int64_t gemm_max(int64_t a, int64_t b) { return a > b ? a : b; }
constexpr int64_t gemm_round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Floats of the scratch holding one packed block of A (m x k).
constexpr int64_t gemm_pack_a_floats(int64_t m, int64_t k) {
  return gemm_round_up(gemm_min(m, kGemmMc), kGemmMr) * gemm_min(k, kGemmKc);
}

// Floats of the scratch holding one packed block of B (k x n).
constexpr int64_t gemm_pack_b_floats(int64_t k, int64_t n) {
  return gemm_min(k, kGemmKc) * gemm_round_up(gemm_min(n, kGemmNc), kGemmNr);
}

// A grouped convolution (1 < group, not depthwise) with packed weights gets
// this many blocks of B scratch, or one per group when it has fewer: its
// groups' products are small (ResNeXt and RegNet groups are 8 to 64
// channels), too small to split one by one, so threads take whole groups,
// each packing into a block of its own. A program planned with one block
// runs its groups on one thread.
constexpr int64_t kGemmGroupScratchBlocks = 4;
constexpr int64_t gemm_group_scratch_blocks(int64_t group) {
  return group > 1 ? gemm_min(group, kGemmGroupScratchBlocks) : 1;
}

// Whether the micro-kernel reads B's whole panels where B lies instead of
// packing them (row-major B only). Packing copies all of B once per block
// and pays off over many A panels, so reading in place is for short A (a
// 1x1 convolution with few output channels), and only where B's rows do
// not crowd a few sets of a 32 KiB 8-way L1 cache (a row stride of
// 12,544 floats puts every row of a panel in 4 of its 64 sets). The
// planner asks it too: such a product packs no B, and needs no blocks of
// B's scratch for threads (gemm_region_scratch_blocks).
constexpr bool gemm_reads_b_in_place(int64_t m, int64_t ldb) {
  if (m > 96) return false;
  const int64_t bytes = ldb * static_cast<int64_t>(sizeof(float));
  if (bytes % 64 != 0) return true;  // rows straddle lines: spread over the sets
  int64_t lines = bytes / 64 % 64, sets = 64;
  for (int64_t g = lines == 0 ? 64 : lines; g % 2 == 0 && sets > 1; g /= 2) sets /= 2;  // 64 / gcd(lines, 64)
  return sets >= 16;
}

// A convolution (one group) whose weights the planner packed, and whose
// B is packed at run time, gets this many blocks of B scratch when its
// product is large enough for threads to share: threads then take regions
// of rows by columns, each running every block of k on its own, packing
// its columns of B into a block of its own (gemm_packed). A program
// planned with one block splits the product block of k by block.
constexpr int64_t kGemmRegionScratchBlocks = 4;
constexpr int64_t gemm_region_scratch_blocks(int64_t m, int64_t n, int64_t k) {
  return m * n * k >= (int64_t{1} << 16) ? kGemmRegionScratchBlocks : 1;
}

// A product whose B the planner packed (a MatMul or Gemm by constant
// weights) gets this many blocks of A's packing scratch, or one per block
// of kGemmMc rows when it has fewer: threads then take ranges of rows,
// each packing into a block of its own, instead of waiting for each other
// twice every kGemmMc rows (gemm_packed). A program planned with one
// block splits the product block by block.
constexpr int64_t kGemmRowScratchBlocks = 4;
constexpr int64_t gemm_row_scratch_blocks(int64_t m) {
  return gemm_min((m + kGemmMc - 1) / kGemmMc, kGemmRowScratchBlocks);
}

// A MatMul of many products (a B with batch dimensions: attention's scores
// and context, one product per head and window) gets this many blocks of
// packing scratch (A's and B's), or one per product when it has fewer, when
// one product's two blocks are at most kGemmBatchBlockMaxFloats: threads
// then take whole products, each packing into blocks of its own, instead of
// splitting every small product across them with a wait per phase (Swin-T's
// scores, 192 products of 49 x 49 by 32 a layer, took 0.20 ms on one thread
// and 0.34 on two when split). A program planned with one block runs its
// products one by one, each split.
constexpr int64_t kGemmBatchScratchBlocks = 4;
constexpr int64_t kGemmBatchBlockMaxFloats = int64_t{1} << 16;
constexpr int64_t gemm_batch_scratch_blocks(int64_t batches, int64_t m, int64_t n, int64_t k) {
  return batches > 1 && gemm_pack_a_floats(m, k) + gemm_pack_b_floats(k, n) <= kGemmBatchBlockMaxFloats
             ? gemm_min(batches, kGemmBatchScratchBlocks)
             : 1;
}

// A 2-D ConvTranspose with packing scratch runs as products (linear.cc):
// for each group and block of up to kConvTransposeColumns input positions,
// the columns (out channels x kh x kw rows) = W^T times the block of the
// input, then each column added into the output where it lands. Its
// scratch: the columns, then packing scratch of the product.
constexpr int64_t kConvTransposeColumns = 2048;
constexpr int64_t conv_transpose_block(int64_t positions) { return gemm_min(positions, kConvTransposeColumns); }
constexpr int64_t conv_transpose_columns_floats(int64_t rows, int64_t positions) {
  return rows * conv_transpose_block(positions);
}

// Floats of A (m x k) packed ahead of time: panels of kGemmMr rows over the
// whole inner dimension, the last zero-padded.
constexpr int64_t gemm_prepacked_a_floats(int64_t m, int64_t k) { return gemm_round_up(m, kGemmMr) * k; }

// Packs row-major A (m x k) into `out` (gemm_prepacked_a_floats(m, k)
// floats): panel i holds rows [i * kGemmMr, (i + 1) * kGemmMr), stored
// column by column, so every block of the inner dimension is contiguous.
void gemm_prepack_a(int64_t m, int64_t k, const float* a, float* out);

// Floats of B (k x n) packed ahead of time: panels of kGemmNr columns over
// the whole inner dimension, the last zero-padded.
constexpr int64_t gemm_prepacked_b_floats(int64_t k, int64_t n) { return k * gemm_round_up(n, kGemmNr); }

// Packs B (k x n; given transposed, n x k, when trans_b) into `out`
// (gemm_prepacked_b_floats(k, n) floats): panel j holds columns
// [j * kGemmNr, (j + 1) * kGemmNr), stored row by row.
void gemm_prepack_b(int64_t k, int64_t n, const float* b, bool trans_b, float* out);

// A convolution with output channels in vector lanes (ConvLanes,
// kernels/cpu/src/conv_lanes.cc): a register tile is a few output
// positions by 16 or 32 output channels, the positions read from the image
// through a table of offsets (no im2col matrix). Where the planner takes it:
// - an output plane of up to kConvLanesMaxPositions positions not a
//   multiple of kGemmNr: a 7 x 7 plane's 49 positions fill 7 tiles of 7
//   instead of four 16-lane panels, the last holding one position;
// - a strided kernel of more than one tap whose product (positions x
//   channels) is at most kConvLanesMaxProduct floats, or that reads each
//   input once (patches: stride at least the kernel). The 3x3 stride-2
//   convolutions that open a ResNet stage (128 x 784 by 1152: 1.52 ms
//   against 1.85 by im2col and panels, the packing gone); the 4x4
//   stride-4 stems of Swin and ConvNeXt (0.48 ms against 0.81 and 0.57)
//   and ConvNeXt's 2x2 stride-2 downsampling. Not a 1x1 one (as fast either
//   way) nor a 7x7 stride-2 first layer on 112 x 112 (3 input channels,
//   64 output: 2.04 ms against 1.64), nor a first layer of 16 channels
//   (half an AVX-512 tile: 1.42 ms against 0.34);
// and for both, at least kConvLanesMinChannels output channels.
// With groups (each thread whole groups), a kernel of several taps, more
// than kConvLanesGroupedMinChannels input and at least
// kConvLanesMinChannels output channels a group, on any plane, except a
// 3x3 kernel of stride 1 on more than kConvLanesMaxPositions positions
// with fewer than kConvLanesGroupedWideChannels input channels a group:
// there grouped_conv.h's direct kernel (positions in lanes) is faster.
// One vCPU, a layer alone, ms, direct or im2col -> lanes: ResNeXt-50's
// 3x3s of 32 groups, 1024 channels on 7 x 7 0.39 -> 0.18, stride 2 from
// 14 x 14 0.68 -> 0.20; 512 channels, stride 2 from 28 x 28 0.48 -> 0.26;
// 32 channels a group on 28 x 28 3.69 -> 3.00; 64 a group on 28 x 28 18.6
// -> 11.6 (im2col); 16 a group, 5x5, on 28 x 28 7.18 -> 2.62 (im2col).
// Kept direct: 16 a group on 14 x 14 (ResNeXt-50's layer3: 0.25 against
// 0.24 alone, but 0.29 against 0.29-0.34 in the model), on 28 x 28 0.89
// against 1.01, on 56 x 56 1.91 against 2.17. A grouped 1x1 as with one
// group, where its groups have more than kConvLanesGroupedWideChannels
// channels (8 groups of 16 on 56 x 56: 0.11 ms by panels, 0.23 in lanes).
constexpr int64_t kConvLanesMaxPositions = 64;
constexpr int64_t kConvLanesMaxProduct = int64_t{1} << 17;
constexpr int64_t kConvLanesMinChannels = 16;
constexpr int64_t kConvLanesGroupedMinChannels = 8;
constexpr int64_t kConvLanesGroupedWideChannels = 32;
constexpr bool conv_lanes_fits(int64_t m, int64_t n, int64_t kh = 1, int64_t kw = 1, int64_t sh = 1, int64_t sw = 1) {
  const bool strided = (sh > 1 || sw > 1) && kh * kw > 1;
  const bool patches = sh >= kh && sw >= kw;  // each input read once
  return m >= kConvLanesMinChannels && n >= 2 &&
         ((n <= kConvLanesMaxPositions && n % kGemmNr != 0) ||
          (strided && (patches || n * gemm_round_up(m, kGemmNr) <= kConvLanesMaxProduct)));
}
constexpr bool conv_lanes_fits_groups(int64_t group, int64_t channels_per_group, int64_t m_per_group, int64_t n,
                                      int64_t kh = 1, int64_t kw = 1, int64_t sh = 1, int64_t sw = 1) {
  if (group == 1) return conv_lanes_fits(m_per_group, n, kh, kw, sh, sw);
  if (kh * kw == 1) {
    return channels_per_group > kConvLanesGroupedWideChannels && conv_lanes_fits(m_per_group, n, kh, kw, sh, sw);
  }
  const bool direct = kh == 3 && kw == 3 && sh == 1 && sw == 1 && n > kConvLanesMaxPositions &&
                      channels_per_group < kConvLanesGroupedWideChannels;
  return channels_per_group > kConvLanesGroupedMinChannels && m_per_group >= kConvLanesMinChannels && n >= 2 && !direct;
}
// One group's convolution as ConvLanes sees it (2-D; a 1-D one has height
// 1), and what follows from it for its scratch (a block is one group's,
// reused by the thread's next group): the positions the tiles read, and
// the product transposed (conv_lanes_product_floats: positions x channels
// rounded up to kGemmNr).
struct ConvLanesShape {
  int64_t channels = 0, h = 0, w = 0, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, oh = 0, ow = 0;
  int64_t groups = 1;  // channels is one group's

  constexpr int64_t k() const { return channels * kh * kw; }
  constexpr int64_t positions() const { return oh * ow; }
  // The rows and columns of the (padded) image the kernel reads.
  constexpr int64_t hp() const { return (oh - 1) * sh + (kh - 1) * dh + 1; }
  constexpr int64_t wp() const { return (ow - 1) * sw + (kw - 1) * dw + 1; }
  constexpr bool pointwise() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh == h && ow == w;
  }
  constexpr bool reads_padding() const { return pt > 0 || pl > 0 || hp() > pt + h || wp() > pl + w; }
  // A small plane's positions are packed a block of k at a time, kGemmNr
  // positions a panel (the block stays in L1; the image, read through
  // offsets, lies in L2: ResNet-50's 3x3 stride 2 on a 7 x 7 plane took
  // 2.01 ms so, 1.89 packed, and its 1x1 stride-2 shortcut 1.79 and 1.61).
  // Elsewhere the tiles read the image through a table of offsets: x
  // itself, or its padded copy where the kernel reads padding; a
  // pointwise kernel reads x without the table.
  // Groups never pack: a group's few output channels would not repay it.
  constexpr bool packs_positions() const {
    return groups == 1 && !pointwise() && positions() <= kConvLanesMaxPositions;
  }
  // The scratch for the positions: the packed block, or the padded image
  // (where there is one) followed by the offsets of a block of k (kGemmKc
  // int32 in floats' room; with groups, of all of k, which every group
  // reads the same).
  constexpr int64_t input_floats() const {
    return packs_positions() ? gemm_min(k(), kGemmKc) * gemm_round_up(positions(), kGemmNr)
                             : (reads_padding() ? channels * hp() * wp() : 0) + (groups > 1 ? k() : kGemmKc);
  }
  // Blocks of that scratch the planner gives for threads: on a small plane
  // each thread packs the positions into a block of its own, block of k
  // by block, and runs its channels through all of k in one pool call
  // (conv_lanes). A program planned with one block packs each block of k
  // across the threads and waits for them twice a block.
  static constexpr int64_t kScratchBlocks = 4;
  // With groups, each thread takes whole groups, with a block of each
  // scratch (the padded image and the product) of its own.
  constexpr int64_t scratch_blocks() const {
    return packs_positions() ? kScratchBlocks : (groups > 1 ? gemm_min(groups, kScratchBlocks) : 1);
  }
  constexpr int64_t product_blocks() const { return groups > 1 ? scratch_blocks() : 1; }
  // The offsets are int32: every element read lies within 2^31 of the first.
  constexpr bool offsets_fit() const { return channels * gemm_max(h * w, hp() * wp()) < (int64_t{1} << 31); }
};
// The product is computed and written out a block of positions at a
// time, at most kConvLanesMaxProduct floats (512 KiB, within a 1 MiB L2):
// a 7x7 stride-2 first layer's 112 x 112 x 64 product is 3.2 MB.
constexpr int64_t conv_lanes_block_positions(int64_t m, int64_t n) {
  return gemm_min(n, gemm_max(kGemmNr, kConvLanesMaxProduct / gemm_round_up(m, kGemmNr)));
}
constexpr int64_t conv_lanes_product_floats(int64_t m, int64_t n) {
  return conv_lanes_block_positions(m, n) * gemm_round_up(m, kGemmNr);
}
// One group's weights (m x k, row-major) packed ahead of time into `out`
// (conv_lanes_weight_floats(k, m); groups one after another) in the order
// the product reads them:
// block of kGemmKc of k by block, and within a block (kc deep, starting
// at pc) panel by panel of kGemmNr output channels, each kc x kGemmNr:
//   out[pc * round_up(m, kGemmNr) + q * kGemmNr * kc + p * kGemmNr + j]
//     = w[q * kGemmNr + j][pc + p], 0 past m.
constexpr int64_t conv_lanes_weight_floats(int64_t k, int64_t m) { return k * gemm_round_up(m, kGemmNr); }
void conv_lanes_prepack_weights(int64_t k, int64_t m, const float* w, float* out);

// BF16 weights (kiln plan --precision bf16 on the CPU): A or B packed
// ahead of time as above, but in bfloat16 with the inner dimension in
// pairs, the layout AVX512-BF16's dot product reads (two consecutive k per
// 32-bit lane; k rounded up to even, the odd one out paired with zero):
//   A: panel i (kGemmMr rows), pair q at i * kGemmMr * k2 + q * 2 * kGemmMr:
//      [row 0: k = 2q, 2q + 1][row 1: 2q, 2q + 1] ... [row 5: 2q, 2q + 1]
//   B: panel j (kGemmNr columns), pair q at j * kGemmNr * k2 + q * 2 * kGemmNr:
//      [column 0: k = 2q, 2q + 1][column 1: 2q, 2q + 1] ... [column 15: ...]
// with k2 = gemm_bf16_k(k). Values round to nearest even; padding is zero.
constexpr int64_t gemm_bf16_k(int64_t k) { return gemm_round_up(k, 2); }
constexpr int64_t gemm_prepacked_a_bf16_elements(int64_t m, int64_t k) {
  return gemm_round_up(m, kGemmMr) * gemm_bf16_k(k);
}
constexpr int64_t gemm_prepacked_b_bf16_elements(int64_t k, int64_t n) {
  return gemm_bf16_k(k) * gemm_round_up(n, kGemmNr);
}
// Packs row-major A (m x k) into `out` (gemm_prepacked_a_bf16_elements).
void gemm_prepack_a_bf16(int64_t m, int64_t k, const float* a, uint16_t* out);
// Packs B (k x n; n x k when trans_b) into `out`
// (gemm_prepacked_b_bf16_elements).
void gemm_prepack_b_bf16(int64_t k, int64_t n, const float* b, bool trans_b, uint16_t* out);

// Winograd F(2x2, 3x3) convolution (ConvWinograd): each 2x2 output tile
// comes from a 4x4 input tile through 16 products of transformed weights
// [M][C] by transformed inputs [C][tiles], one per position of the 4x4
// transform. Tiles are taken winograd_tile_block() at a time, so the scratch
// stays bounded: transformed inputs 16 x C x round_up(tiles, kGemmNr),
// each of the 16 kWinogradInputPad floats (a cache line) further from the
// next than its size, and products 16 x M x tiles, kWinogradProductPad
// floats further apart likewise.
constexpr int64_t winograd_tile_block(int64_t c, int64_t tiles) {
  const int64_t by_cache = gemm_max(kGemmNr, 8192 / (c > 0 ? c : 1) / kGemmNr * kGemmNr);
  return gemm_min(gemm_min(by_cache, kGemmNc), gemm_round_up(tiles, kGemmNr));
}
// The pad: with C x round_up(tiles, kGemmNr) a multiple of 1024 floats
// (C = 128, 64 tiles), the 16 transformed inputs of a tile, written side by
// side, would all fall in one set of a 4 KiB-aliased L1 cache. Programs
// planned before it (scratch of winograd_input_unpadded_floats) still run,
// unpadded.
constexpr int64_t kWinogradInputPad = kGemmNr;
constexpr int64_t winograd_input_unpadded_floats(int64_t c, int64_t tiles) {
  return 16 * c * gemm_round_up(winograd_tile_block(c, tiles), kGemmNr);
}
constexpr int64_t winograd_input_floats(int64_t c, int64_t tiles) {
  return winograd_input_unpadded_floats(c, tiles) + 16 * kWinogradInputPad;
}
// The same for the 16 products: with M x tiles a multiple of 1024 floats
// (M = 64 and a block of 16 tiles or more) the output transform's loads,
// one vector from each of the 16, all fell in one L1 set (and with M x
// tiles a multiple of 32,768 floats in one set of a 1 MiB 8-way L2).
// Programs planned before it (winograd_product_unpadded_floats) run
// unpadded.
constexpr int64_t kWinogradProductPad = kGemmNr;
constexpr int64_t winograd_product_unpadded_floats(int64_t m, int64_t c, int64_t tiles) {
  return 16 * m * winograd_tile_block(c, tiles);
}
constexpr int64_t winograd_product_floats(int64_t m, int64_t c, int64_t tiles) {
  return winograd_product_unpadded_floats(m, c, tiles) + 16 * kWinogradProductPad;
}
// A Winograd layer of several blocks of tiles whose transformed inputs and
// products outweigh its weights gets scratch for this many blocks (or one
// per block of tiles when it has fewer): threads then take ranges of
// tiles, each running all three steps on blocks of scratch of their own,
// so a tile's data stays on one core from the input to the output and
// the layer's input and output are split by positions as in the layers
// around it. Each thread reads all the weights; where the weights
// outweigh the data (deep layers on small planes), threads split each
// step instead (winograd.cc). The scratch blocks sit
// winograd_input_floats and winograd_product_floats apart.
constexpr int64_t kWinogradScratchBlocks = 4;
constexpr int64_t winograd_scratch_blocks(int64_t m, int64_t c, int64_t tiles) {
  const int64_t block = winograd_tile_block(c, tiles);
  const int64_t blocks = block > 0 ? (tiles + block - 1) / block : 1;
  return blocks > 1 && 2 * m * c <= (m + c) * tiles ? gemm_min(blocks, kWinogradScratchBlocks) : 1;
}

// Floats of the transformed weights: 16 matrices [M][C], each packed as
// gemm_prepack_a does.
constexpr int64_t winograd_weight_floats(int64_t m, int64_t c) { return 16 * gemm_prepacked_a_floats(m, c); }

// Transforms and packs weights [M][C][3][3] into `out`
// (winograd_weight_floats(m, c) floats).
void winograd_transform_weights(int64_t m, int64_t c, const float* w, float* out);
// The same in BF16 (kiln plan --precision bf16): 16 matrices, each packed
// as gemm_prepack_a_bf16 does, winograd_weight_bf16_elements(m, c) in all.
constexpr int64_t winograd_weight_bf16_elements(int64_t m, int64_t c) {
  return 16 * gemm_prepacked_a_bf16_elements(m, c);
}
void winograd_transform_weights_bf16(int64_t m, int64_t c, const float* w, uint16_t* out);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_GEMM_BLOCKING_H_
