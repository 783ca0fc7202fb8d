// The int8 product of kiln/kernels/qgemm.h as the kernels call it: packing
// of activations into panels, the register-tile inner loops per ISA, and
// the shared epilogue. Internal.
//
// One call multiplies one weight matrix (m channels x kp) by packed
// activations (n columns) and writes y[c * y_channel_stride + p *
// y_column_stride]: a convolution's NCHW plane (channel stride oh*ow,
// column stride 1) or a matrix product's rows (channel stride 1, column
// stride n).
//
// Adding an inner loop: write a QGemmTileFn for the ISA (it must give the
// exact int32 sums; nothing else changes) and return it from
// qgemm_tile_for() when the ISA switch allows it.

#ifndef KILN_KERNELS_CPU_SRC_QGEMM_H_
#define KILN_KERNELS_CPU_SRC_QGEMM_H_

#include <stdint.h>

#include "isa_switch.h"
#include "kiln/kernels/isa.h"
#include "kiln/kernels/qgemm.h"
#include "kiln/runtime/tensor.h"
#include "kiln/runtime/thread_pool.h"

namespace kiln {
namespace kernels {

// acc[r][i] = sum_{k<kp} panel(k, i) * w[r * ldw + k] for r < mr (<=
// kQGemmMr) and all kQGemmNr columns i of one packed panel. Rows >= mr of
// acc are left alone.
using QGemmTileFn = void (*)(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                             int32_t acc[kQGemmMr][kQGemmNr]);

// The inner loop for `isa` (the portable one where there is none for it).
QGemmTileFn qgemm_tile_for(Isa isa);
void qgemm_tile_portable(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                         int32_t acc[kQGemmMr][kQGemmNr]);
#if KILN_X86
void qgemm_tile_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                     int32_t acc[kQGemmMr][kQGemmNr]);
void qgemm_tile_avx512_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                            int32_t acc[kQGemmMr][kQGemmNr]);
#endif

// Arm: Cortex-M with the DSP extension (SMLAD), chosen when the image is
// compiled for such a core (arm/qgemm_cortexm.cc); AArch64's Advanced SIMD
// (arm/qgemm_neon.cc), with sdot where the processor has the dot-product
// extension (arm/qgemm_neon_dot.cc).
#if KILN_CORTEXM_DSP
void qgemm_tile_dsp(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                    int32_t acc[kQGemmMr][kQGemmNr]);
// qgemm_dot_rows with SMLAD (the one-row product's weight rows, kp bytes
// each, against x's kp bytes).
void qgemm_dot_rows_dsp(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x, uint8_t flip,
                        int32_t* out);
#endif
#if KILN_NEON
void qgemm_tile_neon(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                     int32_t acc[kQGemmMr][kQGemmNr]);
void qgemm_tile_neon_dot(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel,
                         int32_t acc[kQGemmMr][kQGemmNr]);
#endif

struct QGemmProblem {
  int64_t m = 0, n = 0, k = 0;
  const int8_t* w = nullptr;            // [m][qgemm_kp(k)]
  const uint8_t* x = nullptr;           // packed panels of n columns
  const int32_t* x_sums = nullptr;      // [n] (needed with w_zp)
  const int32_t* bias = nullptr;        // [m], folded
  const int32_t* w_zp = nullptr;        // [m] or nullptr (all zero)
  const int32_t* multiplier = nullptr;  // [m]; nullptr: int32 output
  const int32_t* shift = nullptr;       // [m]
  int32_t y_zp = 0, y_min = 0, y_max = 0;
  DType y_dtype = DType::UINT8;  // UINT8, INT8 or INT32
  void* y = nullptr;
  int64_t y_channel_stride = 0, y_column_stride = 0;
  // The ISA path of the epilogue (requantize_row's vector loop).
  Isa isa = Isa::kScalar;
  // Every weight in [-64, 64] (qgemm_weights_narrow): AVX2 takes
  // vpmaddubsw for every panel, whatever its bytes.
  bool w_narrow = false;
};

// The longest reduction whose sums the vector epilogues requantize as they
// are: |acc| <= k * 255 * 128 < 2^30 for k <= 32768, so with |bias| <=
// 2^30 the int32 sum acc + bias cannot wrap, and a 64-bit product with the
// multiplier (< 2^31) plus the rounding term fits int64. Longer reductions
// saturate acc + bias in 64 bits first (the scalar loop).
constexpr int64_t kQGemmVectorRequantMaxK = 32768;
inline bool qgemm_vector_requant_k(int64_t k) { return k <= kQGemmVectorRequantMaxK; }
// The largest shift the vector requantizations take: the zero point rides
// in their 64-bit rounding term, zp * 2^s + 2^(s-1) + (acc + bias) * m,
// which stays within int64 for |zp| <= 255, |acc + bias| < 2^31, m < 2^31
// and s <= 53 (a larger shift, a multiplier below 2^-22, runs the scalar
// loop).
constexpr int32_t kQGemmRequant16MaxShift = 53;
// A channel's requantization the vector loops take as it is: a shift in
// [32, kQGemmRequant16MaxShift] (the high word of the 64-bit product,
// shifted by s - 32) and |bias| <= 2^30.
inline bool qgemm_vector_requant_params(int32_t s, int32_t bias) {
  return s >= 32 && s <= kQGemmRequant16MaxShift && bias <= (1 << 30) && bias >= -(1 << 30);
}

// y[i] = clamp(requantize(acc[i] + bias, m, s) + zp, lo, hi) for i < n,
// uint8 or int8 y, as the epilogue computes it (acc + bias saturated to
// int32 first). `small_k`: the caller's reduction is at most
// kQGemmVectorRequantMaxK long (qgemm_vector_requant_k), so the vector
// loops (64-bit products, shifts of 32 or more) give the same bits;
// without it, or outside qgemm_vector_requant_params, the scalar loop runs.
void qgemm_requantize_row(const int32_t* acc, int64_t n, int32_t bias, int32_t m, int32_t s, int32_t zp, int32_t lo,
                          int32_t hi, DType dtype, void* y, Isa isa, bool small_k);
// qgemm_requantize_row for `rows` channels at once: row r's n sums at acc
// + r * ld with channel r's bias[r], m[r] and s[r], its outputs at y + r *
// y_ld elements. One call per channel tile: the avx512 path requantizes 16
// sums a vector, the row's tail under a mask (requantize_rows_avx512).
void qgemm_requantize_rows(const int32_t* acc, int64_t ld, int64_t rows, int64_t n, const int32_t* bias,
                           const int32_t* m, const int32_t* s, int32_t zp, int32_t lo, int32_t hi, DType dtype, void* y,
                           int64_t y_ld, Isa isa, bool small_k);
// acc[i] += w * x[i * stride] for i < n: one tap of a depthwise
// convolution's output row (x already in the uint8 domain).
void qgemm_depthwise_tap(int32_t* acc, const uint8_t* x, int64_t stride, int64_t n, int32_t w, Isa isa);
// ChannelAffineInt8 bounds fma(x - x_zp, a, b) to +-this before rounding
// (beyond it every output clamps anyway; float's conversions stay defined).
constexpr float kChannelAffineLimit = 1024.f;

#if KILN_X86
// The first n - n % 8 taps of qgemm_depthwise_tap with stride 1.
void depthwise_tap_avx2(int32_t* acc, const uint8_t* x, int64_t n, int32_t w);
// QuantizeLinear of the first n - n % 8 values: y = clamp(round_half_even(x
// / scale) + zp, lo, hi), NaN giving zp; the scalar loop's bits.
void quantize_row_avx2(const float* x, int64_t n, float scale, float zp, float lo, float hi, bool is_unsigned, void* y);
// The first n - n % 8 values of qgemm_requantize_row (qgemm_vector_requant_params).
// AddInt8 over contiguous rows, the first n - n % 8 elements: y =
// clamp(((a - za) * ma + (b - zb) * mb + 2^(s-1)) >> s + y_zp, lo, hi), the
// scalar loop's bits, for s in [10, 62] and ma, mb in [0, 2^31): the 64-bit
// sums offset by 2^62 so that a logical shift serves (the true quotient
// fits int32 there, so its low word is exact).
void add_int8_row_avx2(const uint8_t* a, const uint8_t* b, int64_t n, bool a_signed, bool b_signed, int32_t za,
                       int32_t zb, int32_t ma, int32_t mb, int32_t s, int32_t y_zp, int32_t lo, int32_t hi,
                       bool y_signed, uint8_t* y);
// ChannelAffineInt8 over one channel's run, the first n - n % 8 elements:
// y = clamp(nearbyint(clamp(fma(float((x ^ flip) - x_zp), a, b), +-limit))
// + y_zp, lo, hi) (kChannelAffineLimit), the scalar loop's bits.
// SoftmaxInt8's exponentials of n bytes, e[i] = table[top - (x[i] ^ flip)],
// eight at a time (a gather); returns how many it wrote (n - n % 8).
int64_t softmax_exps_avx2(const uint8_t* x, int64_t n, uint8_t flip, int32_t top, const float* table, float* e);
// SoftmaxInt8's quantization of a chunk's exponentials e: y[i] =
// clamp(round_half_even(min(e[i] * scale, 2^22)) + zp, lo, hi), eight at a
// time; returns how many it wrote (n - n % 8).
int64_t softmax_quantize_avx2(const float* e, int64_t n, float scale, int32_t zp, int32_t lo, int32_t hi,
                              bool is_unsigned, uint8_t* y);
void channel_affine_row_avx2(const uint8_t* x, int64_t n, uint8_t flip, int32_t x_zp, float a, float b, int32_t y_zp,
                             int32_t lo, int32_t hi, bool y_unsigned, uint8_t* y);
// LookupInt8: y[i] = table[x[i]] for i < n, 64 at a time (AVX512-VBMI);
// the AVX2 one does the first n - n % 32 and returns how many.
void lookup_bytes_avx512_vbmi(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y);
int64_t lookup_bytes_avx2(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y);
// A full tile of 8 channels (kQGemmMr) whose outputs lie channel after
// channel (a MatMul's [rows, channels]): column i of acc (nr of them), less
// w_zp[c] * x_sums[i] where w_zp is given, requantized with each channel's
// bias, multiplier and shift (each qgemm_vector_requant_params,
// k within qgemm_vector_requant_k; with w_zp, |w_zp| <= 255 and k <= 4096,
// so that |acc| < 2^27 and w_zp * x_sums < 2^28) and stored as
// 8 bytes at y + i * column_stride; the scalar epilogue's bits.
void requantize_columns_avx2(const int32_t acc[kQGemmMr][kQGemmNr], int64_t nr, const int32_t* bias, const int32_t* m,
                             const int32_t* s, const int32_t* w_zp, const int32_t* x_sums, int32_t zp, int32_t lo,
                             int32_t hi, bool is_unsigned, uint8_t* y, int64_t column_stride);
void requantize_row_avx2(const int32_t* acc, int64_t n, int32_t bias, int32_t m, int32_t s, int32_t zp, int32_t lo,
                         int32_t hi, bool is_unsigned, void* y);
// y[i] = clamp(((v + 2^(shift-1) - 1 + ((v >> shift) & 1)) >> shift) + zp,
// lo, hi) for v = acc[i] + bias, i < n - n % 8: round half to even of v /
// 2^shift (qgemm_requantize_even where m * 2^-s is a power of two), for
// shift in [1, 30] and |v| < 2^29.
void requantize_row_pow2_even_avx2(const int32_t* acc, int64_t n, int32_t bias, int32_t shift, int32_t zp, int32_t lo,
                                   int32_t hi, bool is_unsigned, void* y);
// Every value of qgemm_requantize_rows (AVX-512F): each row's
// qgemm_vector_requant_params, 8-bit outputs
// (`is_unsigned`: uint8, else int8).
void requantize_rows_avx512(const int32_t* acc, int64_t ld, int64_t rows, int64_t n, const int32_t* bias,
                            const int32_t* m, const int32_t* s, int32_t zp, int32_t lo, int32_t hi, bool is_unsigned,
                            uint8_t* y, int64_t y_ld);

// A depthwise convolution of up to 16 channels at once, one channel per
// 16-bit lane (AVX2): bands of output rows; the band's input rows of every
// channel transposed into a padded [row][column][16] block on the stack
// (16 x 16 byte transposes), each output position's taps read as 16 bytes,
// two taps per vpmaddwd, requantized per lane with each channel's bias,
// multiplier and shift, and transposed back into the channels' planes. The
// same sums and the same requantization as the per-channel kernel, for
// geometries whose band buffer fits (depthwise_lanes_fit) and channels
// whose requantization the vector loops take (depthwise_lanes_params_ok:
// qgemm_vector_requant_params).
// Eight channels or fewer at stride 1 along rows take two output positions
// a vector (lanes 8..15: the next column), so their lanes are full too.
struct QDepthwiseLanes {
  const uint8_t* x = nullptr;  // channel 0's input plane (h x w, raw)
  int64_t channels = 0;        // in this block, 1..16
  int64_t h = 0, w = 0, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, oh = 0, ow = 0;
  uint8_t flip = 0;            // 0x80 for int8 input
  uint8_t pad = 0;             // the input zero point, uint8 domain
  const int8_t* w8 = nullptr;  // [channels][kp], taps first
  int64_t kp = 0;
  const int32_t* bias = nullptr;
  const int32_t* multiplier = nullptr;
  const int32_t* shift = nullptr;
  int32_t y_zp = 0, y_min = 0, y_max = 0;
  bool y_unsigned = true;
  uint8_t* y = nullptr;  // channel 0's output plane (oh x ow)
};
bool depthwise_lanes_fit(const QDepthwiseLanes& d);
// The same operands channel by channel on AVX-512 VNNI (qdepthwise_vnni.cc):
// 16 output columns a vector, each input row loaded once a band of output
// rows and gathered into windows of four taps for vpdpbusd, each vector of
// sums requantized in registers. Where the geometry fits
// (depthwise_rows_vnni_fit: up to 8 taps a row, stride up to 4 along
// rows) and the channels' requantization as depthwise_lanes_params_ok.
bool depthwise_rows_vnni_fit(const QDepthwiseLanes& d);
void depthwise_rows_vnni(const QDepthwiseLanes& d);
bool depthwise_lanes_params_ok(const int32_t* bias, const int32_t* shift, int64_t channels);
void depthwise_lanes_avx2(const QDepthwiseLanes& d);

// The tile of a direct convolution: out[r * ldo + i] = sum_{q<nq}
// sum_{j<4} base[off[q] + 4 * i + j] * w[r * 4 * nq + 4 * q + j] for r < mr
// and the kQGemmNr columns i: step q's 64 bytes (four k of 16 columns, as a
// packed panel's row) read at base + off[q] instead of panel + 64 * q.
// `small`: no byte read is above 127 (AVX2 then takes vpmaddubsw; VNNI
// ignores it).
using QGemmTileOffsetsFn = void (*)(int64_t nq, const int8_t* w, int64_t mr, const uint8_t* base, const int32_t* off,
                                    bool small, int32_t* out, int64_t ldo);
void qgemm_tile_offsets_avx2(int64_t nq, const int8_t* w, int64_t mr, const uint8_t* base, const int32_t* off,
                             bool small, int32_t* out, int64_t ldo);
void qgemm_tile_offsets_vnni(int64_t nq, const int8_t* w, int64_t mr, const uint8_t* base, const int32_t* off,
                             bool small, int32_t* out, int64_t ldo);
// The packed-panel tiles of AVX2 and VNNI writing rows r < mr to out + r *
// ldo (qgemm's runs of columns, without the tile's stack copy), `small`
// checked by the caller once per panel (qgemm_panel_is_small_avx2: no
// byte of the panel above 127; VNNI ignores it). The tile for `tile` (one
// of qgemm_tile_avx2, qgemm_tile_avx512_vnni), or nullptr.
using QGemmTileRowsFn = void (*)(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel, bool small,
                                 int32_t* out, int64_t ldo);
void qgemm_tile_rows_avx2(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel, bool small,
                          int32_t* out, int64_t ldo);
void qgemm_tile_rows_vnni(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel, bool small,
                          int32_t* out, int64_t ldo);
bool qgemm_panel_is_small_avx2(int64_t kp, const uint8_t* panel);
// The AVX2 exact loop with its weights split ahead of time, once per
// channel tile for every panel it meets (instead of once per panel):
// qgemm_split_weights_avx2 writes `rows` rows of w (ldw apart, kp a
// multiple of 4) as kp / 2 words each, the (k0, k2) pairs of every step
// then the (k1, k3) pairs, int16 sign-extended; the tiles read them for
// rows r < mr as qgemm_tile_rows_avx2 and qgemm_tile_offsets_avx2 do
// (any panel bytes). The callers split kQGemmSplitRows channels at a time,
// for reductions up to kQGemmSplitMaxKp (their stack holds those rows:
// 36 KiB; ResNet-50's deepest 3x3 layers have 4608).
constexpr int64_t kQGemmSplitRows = 4;
constexpr int64_t kQGemmSplitMaxKp = 4608;
void qgemm_split_weights_avx2(const int8_t* w, int64_t ldw, int64_t rows, int64_t kp, int32_t* out);
void qgemm_tile_rows_split_avx2(int64_t kp, const int32_t* ws, int64_t mr, const uint8_t* panel, int32_t* out,
                                int64_t ldo);
void qgemm_tile_offsets_split_avx2(int64_t nq, const int32_t* ws, int64_t mr, const uint8_t* base, const int32_t* off,
                                   int32_t* out, int64_t ldo);
// qgemm_tile_rows_vnni over the panel's first 8 columns only (256-bit
// vpdpbusd; AVX-512VL), 8 values a row: a last panel of at most 8 columns.
// Only where processor_has_avx512_vnni_vl().
void qgemm_tile_rows_vnni_half(int64_t kp, const int8_t* w, int64_t ldw, int64_t mr, const uint8_t* panel, int32_t* out,
                               int64_t ldo);

// A convolution of one image and group 1 with a requantized output and no
// weight zero points, without im2col (x86, AVX2 and AVX-512): the input
// copied once into the scratch with its padding (the zero point), four
// channels interleaved and split by the strides into sh x sw phase planes
// (padded row r, column x at row r / sh, column x / sw of phase (r % sh,
// x % sw)): [ceil(c / 4)][sh][sw][ph2][pw2][4] (channels past c repeat the
// last one; their weights are 0). Every tap of every output then lies at
// one offset from the output's position in one phase plane, so 16
// consecutive outputs of a row read 64 contiguous bytes per tap and channel
// quad. The weights reordered to match after it ([m][nq][4], step q = quad
// * taps + tap). The columns run over the phase planes' width: output (oy,
// ox) is column oy * pw2 + ox, and the columns past ow of each row are
// computed and dropped. The same sums as im2col and the product,
// requantized in runs of columns per channel as qgemm does.
struct QConvDirect {
  const uint8_t* x = nullptr;  // [c][h][w], raw
  int64_t c = 0, h = 0, w = 0, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t oh = 0, ow = 0;
  bool flip = false;  // int8 input: x ^ 0x80
  uint8_t pad = 0;    // the input zero point, uint8 domain
  int64_t m = 0;
  const int8_t* w8 = nullptr;  // [m][qgemm_kp(c * kh * kw)], the packed weights
  const int32_t* bias = nullptr;
  const int32_t* multiplier = nullptr;
  const int32_t* shift = nullptr;
  int32_t y_zp = 0, y_min = 0, y_max = 0;
  DType y_dtype = DType::UINT8;
  void* y = nullptr;  // [m][oh][ow]
  Isa isa = Isa::kAvx2;
  // w8's rows already in step order (ConvInt8's weight order 1, c a
  // multiple of 4): read as they are, not reordered per block.
  bool w_in_steps = false;
  // Every weight in [-64, 64]: AVX2's vpmaddubsw whatever the input's bytes.
  bool w_narrow = false;
};
// Rows of 3x3 weights (kp apart) into the direct convolution's step order
// for their first `quads` full channel quads: out[(r * quads + q) * 36 + 4
// t + j] = w[r * kp + (4 q + j) * 9 + t].
void direct_weights_3x3_avx2(const int8_t* w, int64_t kp, int64_t rows, int64_t quads, int8_t* out);
// The tile for `isa` (nullptr where there is none: the caller packs im2col).
QGemmTileOffsetsFn qgemm_tile_offsets_for(Isa isa);
// The least scratch qgemm_conv_direct needs (kiln/kernels/qgemm.h), or -1
// where it does not apply.
int64_t qgemm_conv_direct_bytes(const QConvDirect& d);
// `scratch_bytes` (at least qgemm_conv_direct_bytes) sets how many output
// channels' weights are reordered at once: the input is read once per such
// block.
// Channel tiles go across `pool` (nullptr: one thread) once the planes
// and a block's weights are in the scratch.
void qgemm_conv_direct(const QConvDirect& d, uint8_t* scratch, int64_t scratch_bytes, QGemmTileOffsetsFn tile,
                       ThreadPool* pool = nullptr);
#endif

void qgemm(const QGemmProblem& p, QGemmTileFn tile);
// qgemm with its channels split across `pool` (whole tiles of kQGemmMr per
// task, each task a qgemm of its own channels: disjoint outputs, every
// value computed as on one thread). One thread below kParallelMinWork
// multiply-adds (parallel.h).
void qgemm_parallel(const QGemmProblem& p, QGemmTileFn tile, ThreadPool* pool);

// One column (a matrix-vector product: a Gemm's single row): the product
// of p's weights with x and the same epilogue as qgemm, for p.n == 1. x is
// read in place, `len` (p.k) bytes, each XORed with `flip` (0x80: int8 data
// into the product's uint8 domain); nothing past them is read (the packed
// weights past k are zeros, so the sum is the one over kp). x_sum: the sum
// of the flipped x (used only with weight zero points). Reads the weight
// rows in place.
void qgemm_gemv(const QGemmProblem& p, const uint8_t* x, uint8_t flip, int32_t x_sum);
// out[r] = sum_{k<len} (x[k] ^ flip) * w[r * kp + k] for r < rows (weight
// rows kp apart, kp a multiple of 4, len <= kp; x read for len bytes
// only), exact, on the ISA's vector path where it has one. `w_narrow`:
// every weight in [-64, 64] (AVX2 then takes vpmaddubsw whatever x holds).
void qgemm_dot_rows(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x, uint8_t flip,
                    int32_t* out, Isa isa, bool w_narrow = false);
#if KILN_X86
void dot_rows_avx2(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x, uint8_t flip,
                   bool w_narrow, int32_t* out);
void dot_rows_avx512_vnni(int64_t kp, int64_t len, const int8_t* w, int64_t rows, const uint8_t* x, uint8_t flip,
                          int32_t* out);
#endif

// Packs columns of a matrix stored row by row (column p's k values at
// x + p * ldx) into panels; `flip` adds 128 (int8 input); sums into x_sums
// when not null.
void qgemm_pack_rows(const uint8_t* x, int64_t ldx, int64_t n, int64_t k, bool flip, uint8_t* out, int32_t* x_sums);

// Packs columns stored channel by channel (column p's k-th value at x[k *
// ldx + p]: a 1x1, stride-1, unpadded convolution's input) into panels.
void qgemm_pack_columns(const uint8_t* x, int64_t ldx, int64_t n, int64_t k, bool flip, uint8_t* out, int32_t* x_sums);

// The im2col columns of one image and group (channels c, h x w) packed into
// panels: column (oy, ox), row (c, ky, kx) reads
// x[c][oy*sh - pt + ky*dh][ox*sw - pl + kx*dw], `pad` outside (the zero
// point, already flipped). Only columns [col0, col0 + cols) when cols >= 0
// (a block of them: the panels and x_sums start at column col0). The rows
// run c-major, or with quad_taps (channels a multiple of 4) in channel
// quads by tap: row (q * taps + t) * 4 + j is channel 4 q + j's tap t, as
// the weights of ConvInt8's weight order 1.
struct QIm2col {
  const uint8_t* x = nullptr;
  int64_t channels = 0, h = 0, w = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  int64_t oh = 0, ow = 0;
  bool flip = false;
  bool quad_taps = false;
  uint8_t pad = 0;
  int64_t col0 = 0, cols = -1;
};
void qgemm_pack_im2col(const QIm2col& g, uint8_t* out, int32_t* x_sums);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_QGEMM_H_
