// ConvWinograd: 3x3 convolution, stride 1, no dilation, one group, by
// Winograd's F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016). Per 2x2 output tile y of one
// output channel, with d the 4x4 input tile (rows 2ty - pt .., columns
// 2tx - pl .., zero outside the image) of each input channel and g its
// 3x3 weights:
//
//   y = A^T [ sum_c (G g G^T) . (B^T d B) ] A        (. : element-wise)
//
//   B^T = | 1  0 -1  0 |    G = | 1    0    0   |    A^T = | 1  1  1  0 |
//         | 0  1  1  0 |        | 1/2  1/2  1/2 |          | 0  1 -1 -1 |
//         | 0 -1  1  0 |        | 1/2 -1/2  1/2 |
//         | 0  1  0 -1 |        | 0    0    1   |
//
// The sum over channels at each of the 16 positions xi of the 4x4
// transform is a matrix product: M_xi[M][tiles] = U_xi[M][C] x V_xi[C][tiles].
// The planner transforms the weights (U = G g G^T) and packs each U_xi as
// the GEMM's A; the kernel, a block of tiles at a time:
//   1. transforms the input tiles into scratch 0, V_xi laid out as packed B
//      panels (kGemmNr tiles wide, all C deep);
//   2. runs the 16 products into scratch 1 (M_xi, [M][block]);
//   3. transforms each output tile back, adds the bias, applies the
//      activation, and writes the pixels inside the output.
// 2.25 times fewer multiplications than the direct product, and no im2col.

#include <string.h>

#include "activation.h"
#include "arm/neon.h"
#include "cpu_kernels.h"
#include "gemm.h"
#include "isa_switch.h"
#include "kernel_util.h"
#include "kiln/kernels/float16.h"
#include "kiln/kernels/isa.h"
#include "parallel.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {

namespace {

// U_xi[row][k] = (G g G^T)[i][j] of row's weights for channel k, xi = 4i + j,
// with G's rows: (G g G^T)[i][j] = sum_ab G[i][a] g[a][b] G[j][b]; zero
// past the m rows or c channels (the packed layouts' padding).
float winograd_weight(const float* w, int64_t m, int64_t c, int64_t xi, int64_t row, int64_t k) {
  static const double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  if (row >= m || k >= c) return 0.f;
  const int64_t i = xi / 4, j = xi % 4;
  const float* g = w + (row * c + k) * 9;
  double v = 0.0;
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t b = 0; b < 3; ++b) v += kG[i][a] * g[a * 3 + b] * kG[j][b];
  }
  return static_cast<float>(v);
}

}  // namespace

void winograd_transform_weights(int64_t m, int64_t c, const float* w, float* out) {
  for (int64_t xi = 0; xi < 16; ++xi) {
    float* packed = out + xi * gemm_prepacked_a_floats(m, c);
    // U_xi [M][C] straight into gemm_prepack_a's layout: panels of kGemmMr
    // rows, column by column, the rows past m zero.
    for (int64_t r0 = 0; r0 < m; r0 += kGemmMr) {
      float* panel = packed + r0 * c;
      for (int64_t k = 0; k < c; ++k) {
        for (int64_t r = 0; r < kGemmMr; ++r) panel[k * kGemmMr + r] = winograd_weight(w, m, c, xi, r0 + r, k);
      }
    }
  }
}

void winograd_transform_weights_bf16(int64_t m, int64_t c, const float* w, uint16_t* out) {
  const int64_t k2 = gemm_bf16_k(c);
  for (int64_t xi = 0; xi < 16; ++xi) {
    uint16_t* packed = out + xi * gemm_prepacked_a_bf16_elements(m, c);
    // gemm_prepack_a_bf16's layout: per panel of kGemmMr rows, per pair of
    // channels, each row's two values.
    for (int64_t r0 = 0; r0 < m; r0 += kGemmMr) {
      uint16_t* panel = packed + r0 * k2;
      for (int64_t k = 0; k < k2; ++k) {
        for (int64_t r = 0; r < kGemmMr; ++r) {
          panel[(k / 2) * 2 * kGemmMr + 2 * r + k % 2] = float_to_bfloat16(winograd_weight(w, m, c, xi, r0 + r, k));
        }
      }
    }
  }
}

namespace {

using WinogradGeometry = WinogradConv;

WinogradGeometry winograd_geometry(const KernelArgs& args) {
  const auto* p = args.params<fb::ConvParams>();
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  WinogradGeometry g;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.h = x.dim(2);
  g.w = x.dim(3);
  g.m = y.dim(1);
  g.oh = y.dim(2);
  g.ow = y.dim(3);
  g.pt = p->pads()->Get(0);
  g.pl = p->pads()->Get(1);
  g.x = x.data_as<const float>();
  g.weights = args.in(1).data_as<const float>();
  g.bf16 = args.in(1).dtype() == DType::BFLOAT16;
  g.bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  g.y = y.data_as<float>();
  g.activation = p->activation();
  g.transformed_input = args.scratch[0]->data_as<float>();
  g.transformed_input_floats = args.scratch[0]->numel();
  g.products = args.scratch[1]->data_as<float>();
  g.products_floats = args.scratch[1]->numel();
  return g;
}

int64_t tile_columns(const WinogradConv& g) { return (g.ow + 1) / 2; }
int64_t tile_count(const WinogradConv& g) { return (g.oh + 1) / 2 * tile_columns(g); }

bool pair_is(const flatbuffers::Vector<int32_t>* v, int32_t a, int32_t b) {
  return v != nullptr && v->size() == 2 && v->Get(0) == a && v->Get(1) == b;
}

Error check_winograd(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1, 2));
  KILN_RETURN_IF_ERROR(check_linear_dtypes(args, /*packed=*/true));
  const auto* p = args.params<fb::ConvParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "missing ConvParams");
  KILN_KERNEL_CHECK(
      args,
      p->group() == 1 && pair_is(p->kernel(), 3, 3) && pair_is(p->strides(), 1, 1) && pair_is(p->dilations(), 1, 1),
      "Winograd takes 3x3 kernels, stride 1, no dilation, one group");
  KILN_KERNEL_CHECK(args, p->pads() != nullptr && p->pads()->size() == 4, "bad pads");
  for (uint32_t i = 0; i < 4; ++i) KILN_KERNEL_CHECK(args, p->pads()->Get(i) >= 0, "negative pad");
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.rank() == 4 && y.rank() == 4 && y.dim(0) == x.dim(0), "expects 4-D input and output");
  const WinogradGeometry g = winograd_geometry(args);
  KILN_KERNEL_CHECK(
      args,
      g.oh == g.h + g.pt + p->pads()->Get(2) - 2 && g.ow == g.w + g.pl + p->pads()->Get(3) - 2 && g.oh > 0 && g.ow > 0,
      "output size does not match the geometry");
  const int64_t weights = g.bf16 ? winograd_weight_bf16_elements(g.m, g.c) : winograd_weight_floats(g.m, g.c);
  KILN_KERNEL_CHECK(args, args.in(1).rank() == 1 && args.in(1).numel() == weights,
                    "transformed weights must have %lld elements", static_cast<long long>(weights));
  if (args.has_input(2)) KILN_KERNEL_CHECK(args, args.in(2).numel() == g.m, "bias must have one value per channel");
  for (uint32_t i = 0; i < 2; ++i) {
    KILN_KERNEL_CHECK(args, args.scratch[i]->dtype() == DType::FLOAT32, "scratch must be float32");
  }
  KILN_KERNEL_CHECK(args,
                    args.scratch[0]->numel() >= winograd_input_unpadded_floats(g.c, tile_count(g)) &&
                        args.scratch[1]->numel() >= winograd_product_unpadded_floats(g.m, g.c, tile_count(g)),
                    "Winograd scratch too small");
  return check_activation(args, p->activation());
}

// The activation over the pixels of tiles [t0, t0 + tb) of channels [m0, m1).
void apply_block_activation(const WinogradGeometry& g, int64_t t0, int64_t tb, const fb::FusedActivation* activation,
                            float* y, int64_t m0, int64_t m1) {
  for (int64_t m = m0; m < m1; ++m) {
    float* plane = y + m * g.oh * g.ow;
    for (int64_t t = 0; t < tb; ++t) {
      const int64_t ty = (t0 + t) / tile_columns(g), tx = (t0 + t) % tile_columns(g);
      for (int64_t i = 0; i < 2; ++i) {
        const int64_t oy = 2 * ty + i;
        if (oy >= g.oh) continue;
        const int64_t ox = 2 * tx;
        apply_activation(plane + oy * g.ow + ox, ox + 1 < g.ow ? 2 : 1, activation);
      }
    }
  }
}

// Step 1 for tiles [t0, t0 + tb) and channels [c0, c1) of one image: V_xi in packed-B panels
// (panel q, channel c, lane l at (q * C + c) * kGemmNr + l, each V_xi
// C * round_up(tb, kGemmNr) floats, stride_xi apart); lanes past tb are zero.
void transform_input(const WinogradGeometry& g, const float* x, int64_t t0, int64_t tb, float* v, int64_t stride_xi,
                     GemmPath path, int64_t c0, int64_t c1) {
#if KILN_X86
  if (path != GemmPath::kPortable && x86::has_avx2_fma()) {
    // Up to eight tiles per step, never across the end of a tile row (they
    // would be gathered) or of a panel; each step may write all eight lanes
    // up to the panel's end (the next step rewrites those past its tiles),
    // and the lanes past tb are set to zero last. A 128 -> 32 channel layer
    // on 14x14, one thread: 201 -> 162 us.
    const int64_t tw = tile_columns(g), tail = gemm_round_up(tb, kGemmNr) - tb;
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t t = 0; t < tb;) {
        const int64_t count = gemm_min(gemm_min(8, tb - t), gemm_min(tw - (t0 + t) % tw, kGemmNr - t % kGemmNr));
        x86::winograd_input_avx2(x + c * g.h * g.w, g.h, g.w, g.pt, g.pl, tw, t0 + t, count,
                                 v + (t / kGemmNr * g.c + c) * kGemmNr + t % kGemmNr, stride_xi, kGemmNr - t % kGemmNr);
        t += count;
      }
      if (tail > 0) {
        float* lanes = v + (tb / kGemmNr * g.c + c) * kGemmNr + tb % kGemmNr;
        for (int64_t xi = 0; xi < 16; ++xi) {
          memset(lanes + xi * stride_xi, 0, static_cast<size_t>(tail) * sizeof(float));
        }
      }
    }
    return;
  }
#endif
#if KILN_NEON
  if (path != GemmPath::kPortable && neon::enabled()) {
    // Four tiles per step: a quarter of a panel's lanes.
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t t = 0; t < gemm_round_up(tb, kGemmNr); t += 4) {
        const int64_t count = gemm_max(0, gemm_min(4, tb - t));
        neon::winograd_input(x + c * g.h * g.w, g.h, g.w, g.pt, g.pl, tile_columns(g), t0 + t, count,
                             v + (t / kGemmNr * g.c + c) * kGemmNr + t % kGemmNr, stride_xi);
      }
    }
    return;
  }
#endif
  for (int64_t c = c0; c < c1; ++c) {
    const float* image = x + c * g.h * g.w;
    for (int64_t t = 0; t < gemm_round_up(tb, kGemmNr); ++t) {
      float d[4][4];
      if (t < tb) {
        const int64_t ty = (t0 + t) / tile_columns(g), tx = (t0 + t) % tile_columns(g);
        const int64_t y0 = 2 * ty - g.pt, x0 = 2 * tx - g.pl;
        for (int64_t i = 0; i < 4; ++i) {
          const int64_t iy = y0 + i;
          for (int64_t j = 0; j < 4; ++j) {
            const int64_t ix = x0 + j;
            d[i][j] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? image[iy * g.w + ix] : 0.f;
          }
        }
      } else {
        memset(d, 0, sizeof(d));
      }
      // B^T d, then (B^T d) B.
      float r[4][4];
      for (int64_t j = 0; j < 4; ++j) {
        r[0][j] = d[0][j] - d[2][j];
        r[1][j] = d[1][j] + d[2][j];
        r[2][j] = d[2][j] - d[1][j];
        r[3][j] = d[1][j] - d[3][j];
      }
      float* out = v + (t / kGemmNr * g.c + c) * kGemmNr + t % kGemmNr;
      for (int64_t i = 0; i < 4; ++i) {
        out[(i * 4 + 0) * stride_xi] = r[i][0] - r[i][2];
        out[(i * 4 + 1) * stride_xi] = r[i][1] + r[i][2];
        out[(i * 4 + 2) * stride_xi] = r[i][2] - r[i][1];
        out[(i * 4 + 3) * stride_xi] = r[i][1] - r[i][3];
      }
    }
  }
}

// Step 3: products M_xi [M][tb] (M_xi at xi * stride_xi) back to pixels,
// for output channels [m_begin, m_end).
void transform_output(const WinogradGeometry& g, const float* prod, int64_t stride_xi, int64_t t0, int64_t tb,
                      const float* bias, const fb::FusedActivation* activation, float* y, GemmPath path,
                      int64_t m_begin, int64_t m_end) {
#if KILN_X86
  if (path != GemmPath::kPortable && x86::has_avx2_fma()) {
    // ReLU and Clip are applied in registers; other activations after.
    const fb::Activation kind = activation != nullptr ? activation->kind() : fb::Activation::NONE;
    const bool clamp = kind == fb::Activation::RELU || kind == fb::Activation::CLIP;
    const float lo = kind == fb::Activation::CLIP ? activation->alpha() : 0.f;
    const float hi = kind == fb::Activation::CLIP ? activation->beta() : __builtin_inff();
    for (int64_t m = m_begin; m < m_end; ++m) {
      for (int64_t t = 0; t < tb; t += 8) {
        x86::winograd_output_avx2(prod + m * tb + t, stride_xi, t0 + t, gemm_min(8, tb - t), tile_columns(g),
                                  bias != nullptr ? bias[m] : 0.f, y + m * g.oh * g.ow, g.oh, g.ow, clamp, lo, hi);
      }
    }
    if (clamp || kind == fb::Activation::NONE) return;
    apply_block_activation(g, t0, tb, activation, y, m_begin, m_end);
    return;
  }
#endif
#if KILN_NEON
  if (path != GemmPath::kPortable && neon::enabled()) {
    // ReLU and Clip are applied in registers; other activations after.
    const fb::Activation kind = activation != nullptr ? activation->kind() : fb::Activation::NONE;
    const bool clamp = kind == fb::Activation::RELU || kind == fb::Activation::CLIP;
    const float lo = kind == fb::Activation::CLIP ? activation->alpha() : 0.f;
    const float hi = kind == fb::Activation::CLIP ? activation->beta() : __builtin_inff();
    for (int64_t m = m_begin; m < m_end; ++m) {
      for (int64_t t = 0; t < tb; t += 4) {
        neon::winograd_output(prod + m * tb + t, stride_xi, t0 + t, gemm_min(4, tb - t), tile_columns(g),
                              bias != nullptr ? bias[m] : 0.f, y + m * g.oh * g.ow, g.oh, g.ow, clamp, lo, hi);
      }
    }
    if (clamp || kind == fb::Activation::NONE) return;
    apply_block_activation(g, t0, tb, activation, y, m_begin, m_end);
    return;
  }
#endif
  for (int64_t m = m_begin; m < m_end; ++m) {
    float* plane = y + m * g.oh * g.ow;
    const float b = bias != nullptr ? bias[m] : 0.f;
    for (int64_t t = 0; t < tb; ++t) {
      const float* src = prod + m * tb + t;
      float s[2][4];
      for (int64_t j = 0; j < 4; ++j) {
        const float m0 = src[(0 * 4 + j) * stride_xi], m1 = src[(1 * 4 + j) * stride_xi];
        const float m2 = src[(2 * 4 + j) * stride_xi], m3 = src[(3 * 4 + j) * stride_xi];
        s[0][j] = m0 + m1 + m2;
        s[1][j] = m1 - m2 - m3;
      }
      float out[2][2];
      for (int64_t i = 0; i < 2; ++i) {
        out[i][0] = s[i][0] + s[i][1] + s[i][2] + b;
        out[i][1] = s[i][1] - s[i][2] - s[i][3] + b;
      }
      const int64_t ty = (t0 + t) / tile_columns(g), tx = (t0 + t) % tile_columns(g);
      for (int64_t i = 0; i < 2; ++i) {
        const int64_t oy = 2 * ty + i;
        if (oy >= g.oh) continue;
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t ox = 2 * tx + j;
          if (ox < g.ow) plane[oy * g.ow + ox] = out[i][j];
        }
      }
    }
  }
  if (activation != nullptr && activation->kind() != fb::Activation::NONE) {
    apply_block_activation(g, t0, tb, activation, y, m_begin, m_end);
  }
}

// Where one block of tiles of one image goes: its scratch and the layout
// of both (winograd_conv).
struct WinogradBlock {
  const float* x = nullptr;  // the image
  float* y = nullptr;
  float* v = nullptr;     // transformed inputs
  float* prod = nullptr;  // products
  bool padded = false, products_padded = false, whole_k = false;
};

// The three steps for tiles [t0, t0 + tb), each split across `pool` where
// its outputs do not overlap: input channels, then the 16 products, then
// output channels.
void winograd_block(const WinogradConv& g, const WinogradBlock& w, int64_t t0, int64_t tb, GemmPath path,
                    ThreadPool* pool) {
  const int64_t v_stride = g.c * gemm_round_up(tb, kGemmNr) + (w.padded ? kWinogradInputPad : 0);
  const int64_t p_stride = g.m * tb + (w.products_padded ? kWinogradProductPad : 0);
  const int64_t in_tasks = parallel_tasks(pool, g.c * tb * 64, g.c);
  parallel_for(pool, in_tasks, [&](int64_t task) {
    int64_t c0, c1;
    parallel_range(g.c, in_tasks, task, 1, &c0, &c1);
    transform_input(g, w.x, t0, tb, w.v, v_stride, path, c0, c1);
  });
  const int64_t product_tasks = parallel_tasks(pool, 16 * g.m * tb * g.c, 16);
  parallel_for(pool, product_tasks, [&](int64_t task) {
    int64_t x0, x1;
    parallel_range(16, product_tasks, task, 1, &x0, &x1);
    for (int64_t xi = x0; xi < x1; ++xi) {
      GemmMatrix a{g.weights + xi * gemm_prepacked_a_floats(g.m, g.c), g.c, false, true};
      GemmMatrix b{w.v + xi * v_stride, 0, false, true};
      b.whole_k = w.whole_k;
#if KILN_X86
      if (g.bf16) {
        // BF16 weights: V_xi's panels rounded to BF16 pairs in place
        // (each keeps its FP32 panel's place, C floats a column).
        a.data = reinterpret_cast<const float*>(reinterpret_cast<const uint16_t*>(g.weights) +
                                                xi * gemm_prepacked_a_bf16_elements(g.m, g.c));
        a.bf16 = true;
        for (int64_t q = 0; q < gemm_round_up(tb, kGemmNr) / kGemmNr; ++q) {
          x86::convert_b_panel_bf16(w.v + xi * v_stride + q * g.c * kGemmNr, g.c);
        }
        b.bf16 = true;
        b.bf16_depth = g.c;
      }
#endif
      gemm_packed(g.m, tb, g.c, a, b, nullptr, w.prod + xi * p_stride, tb, GemmEpilogue{}, nullptr, nullptr, path);
    }
  });
  const int64_t out_tasks = parallel_tasks(pool, g.m * tb * 64, g.m);
  parallel_for(pool, out_tasks, [&](int64_t task) {
    int64_t m0, m1;
    parallel_range(g.m, out_tasks, task, 1, &m0, &m1);
    transform_output(g, w.prod, p_stride, t0, tb, g.bias, g.activation, w.y, path, m0, m1);
  });
}

Error run_winograd(const KernelArgs& args) {
  winograd_conv(winograd_geometry(args), GemmPath::kAuto, args.pool);
  return Error::kOk;
}

}  // namespace

void winograd_conv(const WinogradConv& g, GemmPath path, ThreadPool* pool) {
  const int64_t tiles = tile_count(g);
  const int64_t block = winograd_tile_block(g.c, tiles);
  WinogradBlock w;
  // The transformed inputs a cache line apart where the scratch has room
  // (gemm_blocking.h): a 128 -> 32 channel layer, one thread, 14x14
  // 162 -> 130 us, 28x28 546 -> 446 us.
  w.padded = g.transformed_input_floats >= winograd_input_floats(g.c, tiles);
  // The products likewise (gemm_blocking.h), one thread, min of 200 calls:
  // 16 -> 64 channels on 55x55 567 -> 450 us, 128 -> 32 on 28x28 450 -> 436,
  // on 56x56 1500 -> 1440.
  w.products_padded = g.products_floats >= winograd_product_floats(g.m, g.c, tiles);
  // Blocks of at most 64 tiles (deep layers on small planes) sum all of
  // k in one block (GemmMatrix::whole_k), whatever a thread's share.
  w.whole_k = block <= 4 * kGemmNr;
  // Scratch for several blocks (winograd_scratch_blocks): one task a
  // thread takes a range of tiles and runs the three steps on blocks of its
  // own, block by block. The same tiles give the same bits in any block.
  const int64_t input_block = w.padded ? winograd_input_floats(g.c, tiles) : g.transformed_input_floats;
  const int64_t product_block = w.products_padded ? winograd_product_floats(g.m, g.c, tiles) : g.products_floats;
  const int64_t scratch_blocks = w.padded && w.products_padded ? gemm_min(g.transformed_input_floats / input_block,
                                                                          g.products_floats / product_block)
                                                               : 1;
  const int64_t panels = (tiles + kGemmNr - 1) / kGemmNr;
  const int64_t tile_tasks = scratch_blocks > 1 ? gemm_min(parallel_tasks(pool, 16 * g.m * tiles * g.c, panels),
                                                           gemm_min(parallel_threads(pool), scratch_blocks))
                                                : 1;
  for (int64_t n = 0; n < g.n; ++n) {
    w.x = g.x + n * g.c * g.h * g.w;
    w.y = g.y + n * g.m * g.oh * g.ow;
    if (tile_tasks > 1) {
      parallel_for(pool, tile_tasks, [&](int64_t task) {
        int64_t b0, b1;
        parallel_range(tiles, tile_tasks, task, kGemmNr, &b0, &b1);
        WinogradBlock mine = w;
        mine.v = g.transformed_input + task * input_block;
        mine.prod = g.products + task * product_block;
        for (int64_t t0 = b0; t0 < b1; t0 += block)
          winograd_block(g, mine, t0, gemm_min(block, b1 - t0), path, nullptr);
      });
      continue;
    }
    w.v = g.transformed_input;
    w.prod = g.products;
    for (int64_t t0 = 0; t0 < tiles; t0 += block) winograd_block(g, w, t0, gemm_min(block, tiles - t0), path, pool);
  }
}

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_WINOGRAD_KERNELS(K) K(ConvWinograd, check_winograd, run_winograd, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_WINOGRAD_KERNELS)
const KernelEntry kWinogradKernels[] = {KILN_WINOGRAD_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumWinogradKernels = sizeof(kWinogradKernels) / sizeof(kWinogradKernels[0]);

}  // namespace kernels
}  // namespace kiln
