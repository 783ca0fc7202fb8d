// The single-precision matrix multiplies every linear kernel (MatMul, Gemm,
// Conv) goes through, and the direct depthwise convolution. Internal.
//
// Two ways to multiply:
//   - gemm_f32: plain loops, no scratch. What a program planned without
//     packing scratch runs (firmware, where every byte of RAM counts).
//   - gemm_packed: cache-blocked and register-tiled (gemm_blocking.h), with
//     the panels of A and B packed into scratch the planner provides. B is a
//     matrix or, for a convolution, the im2col view of its input, packed
//     straight from the image so the im2col matrix never exists whole.
// The register tile is computed by a micro-kernel chosen when the call
// starts: AVX-512 or AVX2+FMA on x86-64 processors that have them (checked
// at run time, so the library runs on any x86-64; x86/gemm_*.cc), NEON on
// arm64 (arm/gemm_neon.cc), portable C++ elsewhere. All read the same
// packed layout.

#ifndef KILN_KERNELS_CPU_SRC_GEMM_H_
#define KILN_KERNELS_CPU_SRC_GEMM_H_

#include <stdint.h>

#include "kiln/kernels/gemm_blocking.h"
#include "kiln/runtime/thread_pool.h"
#include "kiln/schema/program_generated.h"

namespace kiln {
namespace kernels {

// C[m][n] (+)= sum_k A[m][k] * B[k][n], all row-major with leading
// dimensions lda, ldb, ldc. With accumulate false C is overwritten.
// A may be given transposed (A[k][m] at a[k * lda + m]) with trans_a, and B
// (B[n][k] at b[n * ldb + k]) with trans_b.
void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, bool trans_a, const float* b, int64_t ldb,
              bool trans_b, float* c, int64_t ldc, bool accumulate);

// A row-major matrix operand, possibly transposed (see gemm_f32), or
// packed ahead of time by gemm_prepack_a (as A) or gemm_prepack_b (as B).
struct GemmMatrix {
  const float* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
  bool prepacked = false;
  // Prepacked in BF16 (with `prepacked`): `data` points at the elements of
  // gemm_prepack_a_bf16 (as A) or gemm_prepack_b_bf16 (as B). gemm_packed
  // then multiplies in BF16 with FP32 accumulation, the other operand
  // rounded to BF16 as it is packed; only where bf16_available() (isa.h).
  bool bf16 = false;
  // BF16 panels converted in place from FP32 ones (Winograd's transformed
  // inputs): their k pairs keep the FP32 panels' spacing, `bf16_depth`
  // floats per row (A) or column (B) of panels instead of half of k
  // rounded up to even. 0: gemm_prepack_*_bf16's layout.
  int64_t bf16_depth = 0;
  // B of gemm_packed only, row-major and packed (neither prepacked nor
  // transposed): row k is read as x * row_scale[k] + row_shift[k], then,
  // with row_relu, x > 0 ? x : 0 (as Relu: NaN gives 0). A BatchNormalization
  // and Relu fused ahead of a 1x1 convolution. nullptr: read as it is.
  const float* row_scale = nullptr;
  const float* row_shift = nullptr;
  bool row_relu = false;
  // B prepacked against a prepacked A (Winograd's products on small
  // planes): each output summed over all of k in one block instead of
  // blocks of kGemmKc, the A panels read whole in the order they are
  // stored. Its last bits can differ from the same product blocked.
  bool whole_k = false;
};

// The im2col matrix of one image (one group's channels) as operand B:
// row (c, ky, kx), column (oy, ox) holds
//   x[c][oy * sh - pt + ky * dh][ox * sw - pl + kx * dw], 0 outside.
struct GemmIm2col {
  const float* x = nullptr;  // the group's first channel
  int64_t channels = 0, h = 0, w = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  int64_t oh = 0, ow = 0;
};

// Which micro-kernel runs; kAuto picks the fastest the processor has,
// kAvx2 at most AVX2 (for tests of that kernel on AVX-512 machines).
enum class GemmPath { kAuto, kAvx2, kPortable };

// What gemm_packed does besides the product.
struct GemmEpilogue {
  // C starts from its own values instead of zero.
  bool accumulate = false;
  // Added to every element of row i (per output channel), or nullptr.
  const float* row_bias = nullptr;
  // Added to every element of column j (a Linear layer's bias), or nullptr.
  const float* col_bias = nullptr;
  // Applied to the finished outputs, or nullptr.
  const fb::FusedActivation* activation = nullptr;
};

// C[m][n] = epilogue(A B) with B either `b` or, when `im2col` is not
// nullptr, the im2col matrix it describes (k = channels * kh * kw,
// n = oh * ow). pack_a and pack_b hold gemm_pack_a_floats(m, k) and
// gemm_pack_b_floats(k, n) floats; each is unused (may be nullptr) when
// its operand is prepacked. `pool` (may be nullptr) splits large products
// across threads with the same result bits. The inner dimension is summed
// in blocks of kGemmKc, each block's sum added to C, except where both
// operands are prepacked and B says whole_k (Winograd's products on small
// planes): there each output is one chain over all of k, so its last bits
// can differ from the same product with an operand packed at run time.
// The operand packed here may have `pack_blocks` blocks of scratch: with
// B prepacked, pack_a holds that many blocks of gemm_pack_a_floats(m, k)
// (gemm_row_scratch_blocks), and threads take ranges of rows; with A
// prepacked, pack_b holds that many of gemm_pack_b_floats(k, n)
// (gemm_region_scratch_blocks), and threads take regions of rows by
// columns. Either way each packs into a block of its own and runs all of
// k in one pool call.
void gemm_packed(int64_t m, int64_t n, int64_t k, const GemmMatrix& a, const GemmMatrix& b, const GemmIm2col* im2col,
                 float* c, int64_t ldc, const GemmEpilogue& epilogue, float* pack_a, float* pack_b,
                 GemmPath path = GemmPath::kAuto, ThreadPool* pool = nullptr, int64_t pack_blocks = 1);

// Rows [p0, p0 + kc) and columns [j0, j0 + nc) of the im2col matrix `g`
// describes, packed into `dst` as gemm_packed packs B: panels of kGemmNr
// columns, each kc x kGemmNr, the columns past nc zero.
void gemm_pack_im2col_block(const GemmIm2col& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst,
                            GemmPath path);

// A convolution of one image and one group with output channels in vector
// lanes (ConvLanes; gemm_blocking.h says where the planner takes it):
// y[m][oh * ow] = W x im2col(x), W packed by conv_lanes_prepack_weights.
// Register tiles are up to 8 output positions (6 on AVX2) by 32 output
// channels (16 on AVX2 and where one panel is left), summed over blocks of
// kGemmKc into `product` (positions x channels), which is then written out
// transposed with the bias and activation. The positions the tiles read
// are in `input` (ConvLanesShape, gemm_blocking.h): on a small plane a
// block of packed im2col rows; elsewhere the image read through a table
// of offsets, x itself or its copy in `input` with the padding written
// out (then the offsets are int32: ConvLanesShape::offsets_fit). A 1x1
// stride-1 unpadded kernel reads x. `pool` splits each block's channel
// tiles; every output is summed the same way on any number of threads.
// With groups, geometry, m, the weights, bias and y are group 0's, the
// others' following in turn (the image's channels, conv_lanes_weight_floats
// each, m channels of bias and of y each).
struct ConvLanes {
  GemmIm2col geometry;  // x: the image's first channel; channels: one group's
  int64_t m = 0;
  int64_t groups = 1;
  const float* packed_weights = nullptr;  // conv_lanes_weight_floats(k, m) a group
  const float* bias = nullptr;            // per output channel, or nullptr
  float* y = nullptr;
  const fb::FusedActivation* activation = nullptr;
  float* input = nullptr;      // ConvLanesShape::input_floats() (gemm_blocking.h),
  int64_t input_blocks = 1;    // that many times (ConvLanesShape::scratch_blocks)
  float* product = nullptr;    // conv_lanes_product_floats(m, oh * ow),
  int64_t product_blocks = 1;  // that many times (ConvLanesShape::product_blocks)
};
void conv_lanes(const ConvLanes& conv, GemmPath path = GemmPath::kAuto, ThreadPool* pool = nullptr);
// The convolution `g` describes (of `groups` groups, g.channels each) as
// ConvLanes sizes its scratch (gemm_blocking.h).
ConvLanesShape conv_lanes_shape(const GemmIm2col& g, int64_t groups = 1);

// A Winograd F(2x2, 3x3) convolution (winograd.cc): NCHW input x
// [n][c][h][w], weights from winograd_transform_weights, output y
// [n][m][oh][ow] with oh = h + pads - 2 (likewise ow), scratch of
// winograd_input_floats and winograd_product_floats (gemm_blocking.h).
struct WinogradConv {
  int64_t n = 0, c = 0, h = 0, w = 0, m = 0, oh = 0, ow = 0, pt = 0, pl = 0;
  const float* x = nullptr;
  const float* weights = nullptr;
  const float* bias = nullptr;  // per output channel, or nullptr
  float* y = nullptr;
  const fb::FusedActivation* activation = nullptr;
  // `weights` are winograd_transform_weights_bf16's: the 16 products run in
  // BF16 (the transformed inputs rounded to BF16 in place), FP32
  // accumulation; only where bf16_available() (isa.h).
  bool bf16 = false;
  float* transformed_input = nullptr;
  // Floats at transformed_input: the transformed inputs are spaced by
  // kWinogradInputPad where it is winograd_input_floats or more (it must be
  // winograd_input_unpadded_floats at least).
  int64_t transformed_input_floats = 0;
  float* products = nullptr;
  // Floats at products: the 16 products are spaced by kWinogradProductPad
  // where it is winograd_product_floats or more (it must be
  // winograd_product_unpadded_floats at least).
  int64_t products_floats = 0;
};
void winograd_conv(const WinogradConv& conv, GemmPath path = GemmPath::kAuto, ThreadPool* pool = nullptr);

// Depthwise 3x3 convolution of one channel (stride 1 or 2, no dilation):
// out[oy][ox] = bias + sum w[ky][kx] * in[oy * s - pt + ky][ox * s - pl + kx],
// then the activation; positions outside the input read 0.
void depthwise3x3(const float* in, int64_t h, int64_t w, const float* weights, float bias, int64_t stride, int64_t pt,
                  int64_t pl, float* out, int64_t oh, int64_t ow, const fb::FusedActivation* activation,
                  GemmPath path = GemmPath::kAuto);

// A convolution with stride 2 on both axes, no dilation, one group, of
// one image x [c][h][w] into y [m][oh][ow], weights packed by
// gemm_prepack_a (m x c * kh * kw), computed straight from the image
// without an im2col panel: for a network's first layers (few input
// channels, large images). False, having done nothing, where there is no
// such kernel for the processor or the geometry does not fit its buffers.
struct DirectConvS2 {
  int64_t c = 0, h = 0, w = 0, kh = 0, kw = 0, pt = 0, pl = 0, m = 0, oh = 0, ow = 0;
  const float* x = nullptr;
  const float* packed_weights = nullptr;
  const float* bias = nullptr;  // per output channel, or nullptr
  float* y = nullptr;
  const fb::FusedActivation* activation = nullptr;
  // The output rows computed, [oy0, oy1) of every channel's oh x ow plane
  // (oy1 < 0: to the last): threads split a first layer by rows, each
  // row computed as on one thread.
  int64_t oy0 = 0, oy1 = -1;
};
bool conv_s2_direct(const DirectConvS2& conv, GemmPath path = GemmPath::kAuto);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_GEMM_H_
