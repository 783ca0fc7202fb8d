// Resize: nearest (any dtype), linear and cubic (float32) interpolation over
// any number of axes, with ONNX's coordinate transformations; and the
// samplers at coordinates from data, GridSample and RoiAlign (below).
//
// Each output element is a weighted sum over a small grid of input
// elements, separable by axis. For one axis, output index x maps to the
// input coordinate c (ResizeParams.coordinate, with scale = out / in):
//   half_pixel          (x + 0.5) / scale - 0.5
//   pytorch_half_pixel  like half_pixel, or 0 when L <= 1
//   align_corners       x * (in - 1) / (L - 1), or 0 when L == 1
//   asymmetric          x / scale
//   tf_half_pixel_for_nn (x + 0.5) / scale
// where L is the output length, or in * scale unrounded when the model gave
// scales (ResizeParams.sized false), as ONNX's reference does. c maps to
// taps (input index, weight), indices clamped to [0, in):
//   nearest  one tap, c rounded by ResizeParams.nearest
//   linear   floor(c) and floor(c) + 1, weights 1 - r and r (r = c - floor(c))
//   cubic    floor(c) - 1 .. floor(c) + 2, Keys' cubic convolution weights
//            with coefficient a; with exclude_outside, taps outside the input
//            get weight 0 and the others are renormalised.
// A coordinate that is an integer needs one tap in every mode. The element is
// the sum over the grid (the product of the axes' taps) of weight products
// times input values.

#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "kernel_util.h"
#include "kiln/kernels/resize_taps.h"
#include "parallel.h"

namespace kiln {
namespace kernels {
namespace {

ResizeAxisMode axis_mode(const fb::ResizeParams* p) {
  ResizeAxisMode m;
  m.mode = p->mode();
  m.coordinate = p->coordinate();
  m.nearest = p->nearest();
  m.sized = p->sized();
  m.exclude_outside = p->exclude_outside();
  m.cubic_coeff_a = p->cubic_coeff_a();
  return m;
}

struct Image2d {
  int64_t planes, ih, iw, oh, ow;
};

bool image_2d(const fb::ResizeParams* p, const Tensor& x, const Tensor& y, Image2d* g) {
  const uint32_t rank = x.rank();
  if (rank < 2 || x.dtype() != DType::FLOAT32 || p->mode() == fb::ResizeMode::CUBIC) return false;
  g->planes = 1;
  for (uint32_t d = 0; d + 2 < rank; ++d) {
    if (x.dim(d) != y.dim(d)) return false;
    g->planes *= x.dim(d);
  }
  g->ih = x.dim(rank - 2);
  g->iw = x.dim(rank - 1);
  g->oh = y.dim(rank - 2);
  g->ow = y.dim(rank - 1);
  return true;
}

// The planner's tap table (resize_taps.h): its shape. The run clamps every
// index it reads from the table into its axis, so a table of any contents
// (a program may make it a tensor computed at run time) stays in bounds.
Error check_table(const KernelArgs& args, const fb::ResizeParams* p, const Tensor& x, const Tensor& y) {
  Image2d g;
  KILN_KERNEL_CHECK(args, image_2d(p, x, y, &g),
                    "a tap table needs a float32 nearest or linear resize of the last two axes");
  const Tensor& table = args.in(1);
  const int64_t n = g.oh + g.ow;
  KILN_KERNEL_CHECK(args, table.dtype() == DType::FLOAT32 && table.numel() == 4 * n,
                    "tap table must be float32 [4, %lld]", static_cast<long long>(n));
  KILN_KERNEL_CHECK(args, g.ih < kResizeTableMaxIndex && g.iw < kResizeTableMaxIndex, "axis too long for a tap table");
  return Error::kOk;
}

Error check_resize(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 2, 1));
  const auto* p = args.params<fb::ResizeParams>();
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, p != nullptr && p->scales() != nullptr, "missing ResizeParams");
  KILN_KERNEL_CHECK(args,
                    p->mode() <= fb::ResizeMode::MAX && p->coordinate() <= fb::ResizeCoordinate::MAX &&
                        p->nearest() <= fb::ResizeNearest::MAX,
                    "unknown resize mode");
  KILN_KERNEL_CHECK(args, x.dtype() == y.dtype() && x.rank() == y.rank(), "dtype or rank changes");
  KILN_KERNEL_CHECK(args, p->mode() == fb::ResizeMode::NEAREST || x.dtype() == DType::FLOAT32,
                    "linear and cubic modes need float32");
  KILN_KERNEL_CHECK(args, dtype_size(x.dtype()) != 0, "bad dtype");
  KILN_KERNEL_CHECK(args, p->scales()->size() == x.rank(), "scales need one entry per axis");
  for (uint32_t d = 0; d < x.rank(); ++d) {
    const float s = p->scales()->Get(d);
    KILN_KERNEL_CHECK(args, s > 0.f && isfinite(s), "scale %u must be positive and finite", d);
    KILN_KERNEL_CHECK(args, y.numel() == 0 || x.dim(d) > 0, "cannot resize an empty axis to a non-empty one");
  }
  if (args.has_input(1)) return check_table(args, p, x, y);
  return Error::kOk;
}

// Calls visit(offset, weight) for every input element contributing to the
// output element at multi-index `index`.
template <typename F>
void for_each_tap(const fb::ResizeParams* p, const Tensor& x, const Tensor& y, const int64_t* index,
                  const int64_t* strides, F visit) {
  const uint32_t rank = x.rank();
  const ResizeAxisMode mode = axis_mode(p);
  ResizeTaps taps[kMaxRank];
  for (uint32_t d = 0; d < rank; ++d) {
    resize_axis_taps(mode, static_cast<double>(p->scales()->Get(d)), index[d], y.dim(d), x.dim(d), &taps[d]);
  }
  // An odometer over the taps of every axis.
  uint32_t pick[kMaxRank] = {};
  for (;;) {
    int64_t offset = 0;
    double weight = 1.0;
    for (uint32_t d = 0; d < rank; ++d) {
      offset += taps[d].index[pick[d]] * strides[d];
      weight *= taps[d].weight[pick[d]];
    }
    visit(offset, weight);
    int32_t d = static_cast<int32_t>(rank) - 1;
    for (; d >= 0; --d) {
      if (++pick[d] < taps[d].count) break;
      pick[d] = 0;
    }
    if (d < 0) return;
  }
}

template <typename T>
void resize_nearest(const fb::ResizeParams* p, const Tensor& x, const Tensor& y, const int64_t* strides) {
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  int64_t index[kMaxRank] = {};
  const int64_t n = y.numel();
  for (int64_t o = 0; o < n; ++o) {
    for_each_tap(p, x, y, index, strides, [&](int64_t offset, double) { out[o] = in[offset]; });
    for (int32_t d = static_cast<int32_t>(y.rank()) - 1; d >= 0; --d) {
      if (++index[d] < y.dim(static_cast<uint32_t>(d))) break;
      index[d] = 0;
    }
  }
}

// The common case, float32 images resized over their last two axes only
// (leading axes keep their size), nearest or linear. The taps come from the
// table the planner computed (resize_taps.h; the second input), or, for a
// program without one, are computed here once per axis, the columns a
// block at a time into stack arrays (no heap, bounded stack).
//
// Linear is separable: each input row a block of output columns needs is
// interpolated horizontally once into a row buffer (a gather), and every
// output row is then the blend of two such buffers, a contiguous loop the
// compiler vectorises. While consecutive output rows read the same input
// rows (upsampling), the buffers are reused, so the gathers cost
// (input rows) x (output columns) instead of (output rows) x (output
// columns). Sums in float, the general path below in double (results
// differ by a few ulp). A single tap is two halves of the same element,
// exact for finite values and infinities alike.
constexpr int64_t kColumnBlock = 256;

// out[j] = w0 a[i0[j]] + w1 a[i1[j]] for j < nb.
void horizontal(const float* a, const int32_t* i0, const int32_t* i1, const float* w0, const float* w1, int64_t nb,
                float* out) {
  for (int64_t j = 0; j < nb; ++j) out[j] = w0[j] * a[i0[j]] + w1[j] * a[i1[j]];
}

// Output columns [j0, j0 + nb) of the planes [p0, p1), given their taps;
// row_taps(oy, &r0, &r1, &w0, &w1) gives each output row's.
template <typename RowTaps>
void resize_column_block(const Image2d& g, bool nearest, const float* in, float* out, int64_t p0, int64_t p1,
                         int64_t j0, int64_t nb, const int32_t* xi0, const int32_t* xi1, const float* xw0,
                         const float* xw1, RowTaps row_taps) {
  float buffers[2][kColumnBlock];
  for (int64_t plane = p0; plane < p1; ++plane) {
    const float* src = in + plane * g.ih * g.iw;
    float* h0 = buffers[0];
    float* h1 = buffers[1];
    int64_t row0 = -1, row1 = -1;  // the input rows h0 and h1 hold
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      int64_t r0, r1;
      float wy0, wy1;
      row_taps(oy, &r0, &r1, &wy0, &wy1);
      float* o = out + (plane * g.oh + oy) * g.ow + j0;
      if (nearest) {
        const float* a = src + r0 * g.iw;
        for (int64_t j = 0; j < nb; ++j) o[j] = a[xi0[j]];
        continue;
      }
      if (r0 != row0 && r0 == row1) {
        float* t = h0;
        h0 = h1;
        h1 = t;
        row1 = row0;
        row0 = r0;
      }
      if (r0 != row0) {
        horizontal(src + r0 * g.iw, xi0, xi1, xw0, xw1, nb, h0);
        row0 = r0;
      }
      if (r1 != row1) {
        if (r1 == row0) {
          memcpy(h1, h0, static_cast<size_t>(nb) * sizeof(float));
        } else {
          horizontal(src + r1 * g.iw, xi0, xi1, xw0, xw1, nb, h1);
        }
        row1 = r1;
      }
      for (int64_t j = 0; j < nb; ++j) o[j] = wy0 * h0[j] + wy1 * h1[j];
    }
  }
}

// An index read from a table, clamped into [0, len) (NaN gives 0).
int64_t table_index(float v, int64_t len) {
  if (!(v >= 0.f)) return 0;
  const int64_t i = v < static_cast<float>(len) ? static_cast<int64_t>(v) : len - 1;
  return i < len ? i : len - 1;
}

// With the planner's table (check_resize validated its shape); planes [p0,
// p1).
void resize_2d_with_table(const fb::ResizeParams* p, const Image2d& g, const float* table, const float* in, float* out,
                          int64_t p0, int64_t p1) {
  const int64_t n = g.oh + g.ow;
  const float* i0 = table;
  const float* i1 = table + n;
  const float* w0 = table + 2 * n;
  const float* w1 = table + 3 * n;
  const auto row_taps = [&](int64_t oy, int64_t* r0, int64_t* r1, float* wy0, float* wy1) {
    *r0 = table_index(i0[oy], g.ih);
    *r1 = table_index(i1[oy], g.ih);
    *wy0 = w0[oy];
    *wy1 = w1[oy];
  };
  int32_t xi0[kColumnBlock], xi1[kColumnBlock];
  for (int64_t j0 = 0; j0 < g.ow; j0 += kColumnBlock) {
    const int64_t nb = g.ow - j0 < kColumnBlock ? g.ow - j0 : kColumnBlock;
    for (int64_t j = 0; j < nb; ++j) {
      xi0[j] = static_cast<int32_t>(table_index(i0[g.oh + j0 + j], g.iw));
      xi1[j] = static_cast<int32_t>(table_index(i1[g.oh + j0 + j], g.iw));
    }
    resize_column_block(g, p->mode() == fb::ResizeMode::NEAREST, in, out, p0, p1, j0, nb, xi0, xi1, w0 + g.oh + j0,
                        w1 + g.oh + j0, row_taps);
  }
}

// Without a table: the same, taps computed here.
void resize_2d(const fb::ResizeParams* p, const Image2d& g, const float* in, float* out, int64_t p0, int64_t p1) {
  const uint32_t rank = p->scales()->size();
  const double sh = p->scales()->Get(rank - 2), sw = p->scales()->Get(rank - 1);
  const ResizeAxisMode mode = axis_mode(p);
  const auto row_taps = [&](int64_t oy, int64_t* r0, int64_t* r1, float* wy0, float* wy1) {
    float f0, f1;
    resize_axis_pair(mode, sh, oy, g.oh, g.ih, &f0, &f1, wy0, wy1);
    *r0 = static_cast<int64_t>(f0);
    *r1 = static_cast<int64_t>(f1);
  };
  int32_t xi0[kColumnBlock], xi1[kColumnBlock];
  float xw0[kColumnBlock], xw1[kColumnBlock];
  for (int64_t j0 = 0; j0 < g.ow; j0 += kColumnBlock) {
    const int64_t nb = g.ow - j0 < kColumnBlock ? g.ow - j0 : kColumnBlock;
    for (int64_t j = 0; j < nb; ++j) {
      ResizeTaps t;
      resize_axis_taps(mode, sw, j0 + j, g.ow, g.iw, &t);
      const bool two = t.count == 2;
      xi0[j] = static_cast<int32_t>(t.index[0]);
      xi1[j] = static_cast<int32_t>(two ? t.index[1] : t.index[0]);
      xw0[j] = two ? static_cast<float>(t.weight[0]) : 0.5f;
      xw1[j] = two ? static_cast<float>(t.weight[1]) : 0.5f;
    }
    resize_column_block(g, p->mode() == fb::ResizeMode::NEAREST, in, out, p0, p1, j0, nb, xi0, xi1, xw0, xw1, row_taps);
  }
}

Error run_resize(const KernelArgs& args) {
  const auto* p = args.params<fb::ResizeParams>();
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  if (y.numel() == 0) return Error::kOk;
  Image2d g;
  const bool table = args.has_input(1);
  if (table) image_2d(p, x, y, &g);  // check_resize made sure it applies
  if (table || (x.dim(x.rank() - 1) < (int64_t{1} << 31) && image_2d(p, x, y, &g))) {
    // Planes are independent: split them.
    const int64_t tasks = parallel_tasks(args.pool, y.numel(), g.planes, kParallelMinElements);
    parallel_for(args.pool, tasks, [&](int64_t t) {
      int64_t p0, p1;
      parallel_range(g.planes, tasks, t, 1, &p0, &p1);
      if (table) {
        resize_2d_with_table(p, g, args.in(1).data_as<const float>(), x.data_as<const float>(), y.data_as<float>(), p0,
                             p1);
      } else {
        resize_2d(p, g, x.data_as<const float>(), y.data_as<float>(), p0, p1);
      }
    });
    return Error::kOk;
  }
  int64_t strides[kMaxRank];
  contiguous_strides(x.dims(), x.rank(), strides);
  if (p->mode() == fb::ResizeMode::NEAREST) {
    switch (dtype_size(x.dtype())) {
      case 1: resize_nearest<uint8_t>(p, x, y, strides); break;
      case 2: resize_nearest<uint16_t>(p, x, y, strides); break;
      case 4: resize_nearest<uint32_t>(p, x, y, strides); break;
      default: resize_nearest<uint64_t>(p, x, y, strides); break;
    }
    return Error::kOk;
  }
  const float* in = x.data_as<const float>();
  float* out = y.data_as<float>();
  int64_t index[kMaxRank] = {};
  const int64_t n = y.numel();
  for (int64_t o = 0; o < n; ++o) {
    double acc = 0.0;
    for_each_tap(p, x, y, index, strides, [&](int64_t offset, double w) { acc += w * in[offset]; });
    out[o] = static_cast<float>(acc);
    for (int32_t d = static_cast<int32_t>(y.rank()) - 1; d >= 0; --d) {
      if (++index[d] < y.dim(static_cast<uint32_t>(d))) break;
      index[d] = 0;
    }
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// GridSample: X [N, C, H, W] float32 sampled at the points of grid
// [N, Ho, Wo, 2] (x then y, normalised to [-1, 1]) into Y [N, C, Ho, Wo].
// GenericParams ints [mode (0 bilinear, 1 nearest, 2 bicubic),
// padding (0 zeros, 1 border, 2 reflection), align_corners].
//
// A grid value is data: it is unnormalised to the pixel coordinate
//   align_corners  (g + 1) / 2 * (size - 1),  else  ((g + 1) * size - 1) / 2,
// clamped to [-2^30, 2^30] (far outside any image, and exact as an
// integer), then for bilinear and nearest mapped by the padding mode
// (border clamps it to [0, size - 1], reflection folds it back over the
// image's edges, the pixel centres with align_corners and the outer edges
// without, then clamps it); nearest rounds half to even. Bicubic maps each
// of its 4 x 4 taps instead. A tap outside the image reads 0. A NaN
// coordinate (a NaN in the grid) gives the sample 0, in every padding mode,
// as if it lay outside the image; an infinite one is clamped like any other.
// Every index read is inside the image, whatever the grid holds.

enum GridMode : int64_t { kGridBilinear = 0, kGridNearest, kGridBicubic };
enum GridPadding : int64_t { kGridZeros = 0, kGridBorder, kGridReflection };

// Folds c into [lo, hi] by reflection at both ends (period 2 * (hi - lo)).
float reflect(float c, float lo, float hi) {
  const float span = hi - lo;
  if (!(span > 0.f)) return 0.f;
  const float d = fabsf(c - lo);
  const float extra = fmodf(d, span);
  const float flips = floorf(d / span);
  return fmodf(flips, 2.f) == 0.f ? lo + extra : hi - extra;
}

// A coordinate mapped by the padding mode; NaN stays NaN.
float pad_coordinate(float c, int64_t size, int64_t padding, bool align_corners) {
  const float last = static_cast<float>(size - 1);
  if (padding == kGridBorder) return c < 0.f ? 0.f : (c > last ? last : c);
  if (padding == kGridReflection) {
    c = align_corners ? reflect(c, 0.f, last) : reflect(c, -0.5f, static_cast<float>(size) - 0.5f);
    return c < 0.f ? 0.f : (c > last ? last : c);
  }
  return c;
}

// The value at integer coordinates (ix, iy), or 0 outside the image.
float grid_tap(const float* plane, int64_t h, int64_t w, int64_t ix, int64_t iy) {
  return ix >= 0 && ix < w && iy >= 0 && iy < h ? plane[iy * w + ix] : 0.f;
}

// Keys' cubic convolution weights (a = -0.75, as PyTorch) of the taps
// floor(c) - 1 .. floor(c) + 2 at fraction t.
void cubic_weights(float t, float* out_w) {
  const float a = -0.75f;
  auto near = [a](float x) { return ((a + 2.f) * x - (a + 3.f)) * x * x + 1.f; };
  auto far = [a](float x) { return ((a * x - 5.f * a) * x + 8.f * a) * x - 4.f * a; };
  out_w[0] = far(t + 1.f);
  out_w[1] = near(t);
  out_w[2] = near(1.f - t);
  out_w[3] = far(2.f - t);
}

Error check_grid_sample(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  KILN_RETURN_IF_ERROR(check_params(args, 3, 0));
  const Tensor& x = args.in(0);
  const Tensor& grid = args.in(1);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, param_int(args, 0) >= kGridBilinear && param_int(args, 0) <= kGridBicubic,
                    "unknown mode %lld", static_cast<long long>(param_int(args, 0)));
  KILN_KERNEL_CHECK(args, param_int(args, 1) >= kGridZeros && param_int(args, 1) <= kGridReflection,
                    "unknown padding mode %lld", static_cast<long long>(param_int(args, 1)));
  KILN_KERNEL_CHECK(args, x.rank() == 4 && grid.rank() == 4 && y.rank() == 4, "expects 4-D X, grid and Y");
  KILN_KERNEL_CHECK(args, grid.dim(0) == x.dim(0) && grid.dim(3) == 2, "grid must be [N, Ho, Wo, 2]");
  KILN_KERNEL_CHECK(args,
                    y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1) && y.dim(2) == grid.dim(1) && y.dim(3) == grid.dim(2),
                    "Y must be [N, C, Ho, Wo]");
  KILN_KERNEL_CHECK(args,
                    x.dim(2) > 0 && x.dim(3) > 0 && x.dim(2) < (int64_t{1} << 30) && x.dim(3) < (int64_t{1} << 30),
                    "image height and width must be in [1, 2^30)");
  return Error::kOk;
}

Error run_grid_sample(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const int64_t mode = param_int(args, 0), padding = param_int(args, 1);
  const bool align = param_int(args, 2) != 0;
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t points = args.in(1).dim(1) * args.in(1).dim(2);
  const float* in = x.data_as<const float>();
  const float* grid = args.in(1).data_as<const float>();
  float* out = args.out(0).data_as<float>();
  constexpr float kFar = static_cast<float>(int64_t{1} << 30);
  auto unnormalise = [align](float g, int64_t size) {
    const float v =
        align ? (g + 1.f) * 0.5f * static_cast<float>(size - 1) : ((g + 1.f) * static_cast<float>(size) - 1.f) * 0.5f;
    return v < -kFar ? -kFar : (v > kFar ? kFar : v);  // NaN passes through
  };
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t p = 0; p < points; ++p) {
      float cx = unnormalise(grid[(b * points + p) * 2], w);
      float cy = unnormalise(grid[(b * points + p) * 2 + 1], h);
      float* dst = out + b * c * points + p;
      if (mode != kGridBicubic) {
        cx = pad_coordinate(cx, w, padding, align);
        cy = pad_coordinate(cy, h, padding, align);
      }
      if (isnan(cx) || isnan(cy)) {
        for (int64_t ch = 0; ch < c; ++ch) dst[ch * points] = 0.f;
        continue;
      }
      const float* plane = in + b * c * h * w;
      if (mode == kGridNearest) {
        const int64_t ix = static_cast<int64_t>(nearbyintf(cx)), iy = static_cast<int64_t>(nearbyintf(cy));
        for (int64_t ch = 0; ch < c; ++ch) dst[ch * points] = grid_tap(plane + ch * h * w, h, w, ix, iy);
        continue;
      }
      const float fx = floorf(cx), fy = floorf(cy);
      const float tx = cx - fx, ty = cy - fy;
      if (mode == kGridBilinear) {
        const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* src = plane + ch * h * w;
          dst[ch * points] =
              (1.f - ty) * ((1.f - tx) * grid_tap(src, h, w, x0, y0) + tx * grid_tap(src, h, w, x0 + 1, y0)) +
              ty * ((1.f - tx) * grid_tap(src, h, w, x0, y0 + 1) + tx * grid_tap(src, h, w, x0 + 1, y0 + 1));
        }
        continue;
      }
      // Bicubic: each tap's coordinate goes through the padding mode.
      float wx[4], wy[4];
      int64_t tap_x[4], tap_y[4];
      cubic_weights(tx, wx);
      cubic_weights(ty, wy);
      for (int k = 0; k < 4; ++k) {
        // Finite and within 2^30 + 2 of the image: exact as int64.
        tap_x[k] = static_cast<int64_t>(pad_coordinate(fx - 1.f + static_cast<float>(k), w, padding, align));
        tap_y[k] = static_cast<int64_t>(pad_coordinate(fy - 1.f + static_cast<float>(k), h, padding, align));
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* src = plane + ch * h * w;
        float acc = 0.f;
        for (int j = 0; j < 4; ++j) {
          float row = 0.f;
          for (int k = 0; k < 4; ++k) row += wx[k] * grid_tap(src, h, w, tap_x[k], tap_y[j]);
          acc += wy[j] * row;
        }
        dst[ch * points] = acc;
      }
    }
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// RoiAlign: X [N, C, H, W] float32, rois [R, 4] (x1, y1, x2, y2, float32)
// and batch_indices [R] (int64) into Y [R, C, Ho, Wo]. GenericParams ints
// [sampling_ratio, mode (0 avg, 1 max), half_pixel (1: half_pixel, 0:
// output_half_pixel)], floats [spatial_scale].
//
// Each ROI, scaled (and shifted by half a pixel with half_pixel; without it
// at least 1 x 1), is cut into Ho x Wo bins; each bin takes gh x gw
// samples at regular points, bilinear between the four neighbouring
// pixels; avg averages them, max keeps the largest weighted corner value
// (as ONNX Runtime and ONNX's reference do). A sample farther than one
// pixel outside the image, or at a NaN coordinate, counts as 0.
//
// ROIs and batch indices are data. Every batch index is checked against N
// before anything is written (kInvalidInput naming the node). With
// sampling_ratio 0 the samples per bin are adaptive, ceil(roi / bins) per
// axis, which the data decides: it is bounded here by the input's extent
// on that axis (H or W; a ROI inside the image never needs more), so one
// output element costs at most H * W samples whatever the ROIs hold.

struct RoiSample {
  int64_t at[4];  // offsets of the four neighbours in the plane
  float w[4];
};

// The bilinear taps of (y, x); all weights 0 when it is outside the image.
RoiSample roi_sample(float y, float x, int64_t h, int64_t w) {
  RoiSample s = {{0, 0, 0, 0}, {0.f, 0.f, 0.f, 0.f}};
  const float fh = static_cast<float>(h), fw = static_cast<float>(w);
  if (!(y >= -1.f && y <= fh && x >= -1.f && x <= fw)) return s;  // NaN too
  if (y < 0.f) y = 0.f;
  if (x < 0.f) x = 0.f;
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = static_cast<float>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = static_cast<float>(x0);
  } else {
    x1 = x0 + 1;
  }
  const float ly = y - static_cast<float>(y0), lx = x - static_cast<float>(x0);
  const float hy = 1.f - ly, hx = 1.f - lx;
  s.at[0] = y0 * w + x0;
  s.at[1] = y0 * w + x1;
  s.at[2] = y1 * w + x0;
  s.at[3] = y1 * w + x1;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

// Samples per bin on one axis: sampling_ratio, or adaptive within [1, extent].
int64_t roi_grid(int64_t sampling_ratio, float roi, int64_t bins, int64_t extent) {
  if (sampling_ratio > 0) return sampling_ratio;
  const float per_bin = ceilf(roi / static_cast<float>(bins));
  if (!(per_bin >= 1.f)) return 1;  // NaN too
  return per_bin >= static_cast<float>(extent) ? extent : static_cast<int64_t>(per_bin);
}

Error check_roi_align(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 3, 1));
  const Tensor& x = args.in(0);
  const Tensor& rois = args.in(1);
  const Tensor& batch = args.in(2);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args,
                    x.dtype() == DType::FLOAT32 && rois.dtype() == DType::FLOAT32 && batch.dtype() == DType::INT64 &&
                        y.dtype() == DType::FLOAT32,
                    "expects float32 X, rois and Y, int64 batch_indices");
  KILN_KERNEL_CHECK(
      args, x.rank() == 4 && rois.rank() == 2 && rois.dim(1) == 4 && batch.rank() == 1 && batch.dim(0) == rois.dim(0),
      "expects X [N, C, H, W], rois [R, 4], batch_indices [R]");
  KILN_KERNEL_CHECK(args,
                    y.rank() == 4 && y.dim(0) == rois.dim(0) && y.dim(1) == x.dim(1) && y.dim(2) > 0 && y.dim(3) > 0,
                    "Y must be [R, C, Ho, Wo]");
  KILN_KERNEL_CHECK(args,
                    x.dim(2) > 0 && x.dim(3) > 0 && x.dim(2) < (int64_t{1} << 24) && x.dim(3) < (int64_t{1} << 24),
                    "H and W must be in [1, 2^24)");
  const int64_t ratio = param_int(args, 0);
  KILN_KERNEL_CHECK(args, ratio >= 0 && ratio <= (int64_t{1} << 16), "sampling_ratio must be in [0, 2^16]");
  KILN_KERNEL_CHECK(args, param_int(args, 1) == 0 || param_int(args, 1) == 1, "mode must be 0 (avg) or 1 (max)");
  return Error::kOk;
}

Error run_roi_align(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t r = y.dim(0), oh = y.dim(2), ow = y.dim(3);
  const int64_t* batch = args.in(2).data_as<const int64_t>();
  for (int64_t i = 0; i < r; ++i) {
    if (batch[i] < 0 || batch[i] >= n) {
      KILN_LOG(ERROR, "kernel RoiAlign (node '%s'): batch index %lld of ROI %lld out of range for a batch of %lld",
               args.node_name, static_cast<long long>(batch[i]), static_cast<long long>(i), static_cast<long long>(n));
      return Error::kInvalidInput;
    }
  }
  const int64_t ratio = param_int(args, 0);
  const bool is_max = param_int(args, 1) == 1;
  const bool half_pixel = param_int(args, 2) == 1;
  const float scale = param_float(args, 0);
  const float offset = half_pixel ? 0.5f : 0.f;
  const float* in = x.data_as<const float>();
  const float* roi = args.in(1).data_as<const float>();
  float* out = y.data_as<float>();
  for (int64_t i = 0; i < r; ++i) {
    const float* box = roi + i * 4;
    const float x0 = box[0] * scale - offset, y0 = box[1] * scale - offset;
    float roi_w = box[2] * scale - offset - x0, roi_h = box[3] * scale - offset - y0;
    if (!half_pixel) {
      roi_w = roi_w > 1.f ? roi_w : 1.f;
      roi_h = roi_h > 1.f ? roi_h : 1.f;
    }
    const float bin_h = roi_h / static_cast<float>(oh), bin_w = roi_w / static_cast<float>(ow);
    const int64_t gh = roi_grid(ratio, roi_h, oh, h), gw = roi_grid(ratio, roi_w, ow, w);
    const float count = static_cast<float>(gh * gw);
    const float* image = in + batch[i] * c * h * w;
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = image + ch * h * w;
      float* dst = out + (i * c + ch) * oh * ow;
      for (int64_t py = 0; py < oh; ++py) {
        for (int64_t px = 0; px < ow; ++px) {
          float acc = 0.f;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            const float sy =
                y0 + static_cast<float>(py) * bin_h + (static_cast<float>(iy) + 0.5f) * bin_h / static_cast<float>(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              const float sx = x0 + static_cast<float>(px) * bin_w +
                               (static_cast<float>(ix) + 0.5f) * bin_w / static_cast<float>(gw);
              const RoiSample s = roi_sample(sy, sx, h, w);
              if (!is_max) {
                acc += s.w[0] * plane[s.at[0]] + s.w[1] * plane[s.at[1]] + s.w[2] * plane[s.at[2]] +
                       s.w[3] * plane[s.at[3]];
                continue;
              }
              for (int k = 0; k < 4; ++k) {
                const float v = s.w[k] * plane[s.at[k]];
                if (first || v > acc) acc = v;
                first = false;
              }
            }
          }
          dst[py * ow + px] = is_max ? acc : acc / count;
        }
      }
    }
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_RESIZE_KERNELS(K)                         \
  K(Resize, check_resize, run_resize, 0)               \
  K(GridSample, check_grid_sample, run_grid_sample, 0) \
  K(RoiAlign, check_roi_align, run_roi_align, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_RESIZE_KERNELS)
const KernelEntry kResizeKernels[] = {KILN_RESIZE_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumResizeKernels = sizeof(kResizeKernels) / sizeof(kResizeKernels[0]);

}  // namespace kernels
}  // namespace kiln
