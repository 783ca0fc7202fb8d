// Resize: nearest (any dtype), linear and cubic (float32) interpolation over
// any number of axes, with ONNX's coordinate transformations.
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

#include "kernel_util.h"
#include "portable_kernels.h"

namespace kiln {
namespace kernels {
namespace {

struct Taps {
  int64_t index[4];
  double weight[4];
  uint32_t count;
};

double original_coordinate(const fb::ResizeParams* p, int64_t x, double scale, int64_t out_len,
                           int64_t in_len) {
  const double xf = static_cast<double>(x);
  const double length = p->sized() ? static_cast<double>(out_len) : static_cast<double>(in_len) * scale;
  switch (p->coordinate()) {
    case fb::ResizeCoordinate::HALF_PIXEL: return (xf + 0.5) / scale - 0.5;
    case fb::ResizeCoordinate::PYTORCH_HALF_PIXEL: return length > 1.0 ? (xf + 0.5) / scale - 0.5 : 0.0;
    case fb::ResizeCoordinate::ALIGN_CORNERS:
      return length != 1.0 ? xf * static_cast<double>(in_len - 1) / (length - 1.0) : 0.0;
    case fb::ResizeCoordinate::ASYMMETRIC: return xf / scale;
    case fb::ResizeCoordinate::TF_HALF_PIXEL_FOR_NN: return (xf + 0.5) / scale;
  }
  return 0.0;
}

int64_t clamp_index(int64_t i, int64_t len) { return i < 0 ? 0 : (i >= len ? len - 1 : i); }

void cubic_weights(double r, double a, double* w) {
  const double t0 = r + 1.0, t1 = r, t2 = 1.0 - r, t3 = 2.0 - r;
  w[0] = ((a * t0 - 5.0 * a) * t0 + 8.0 * a) * t0 - 4.0 * a;
  w[1] = ((a + 2.0) * t1 - (a + 3.0)) * t1 * t1 + 1.0;
  w[2] = ((a + 2.0) * t2 - (a + 3.0)) * t2 * t2 + 1.0;
  w[3] = ((a * t3 - 5.0 * a) * t3 + 8.0 * a) * t3 - 4.0 * a;
}

void axis_taps(const fb::ResizeParams* p, double scale, int64_t x, int64_t out_len, int64_t in_len, Taps* t) {
  double c = original_coordinate(p, x, scale, out_len, in_len);
  // Keep c (even NaN or infinite, from extreme scales) in a range where the
  // conversions below are defined; clamping of indices does the rest.
  if (!(c > -4.0)) c = -4.0;
  if (c > static_cast<double>(in_len) + 4.0) c = static_cast<double>(in_len) + 4.0;
  const double f = floor(c);
  const double r = c - f;
  const int64_t base = static_cast<int64_t>(f);
  if (p->mode() == fb::ResizeMode::NEAREST) {
    bool up = false;
    switch (p->nearest()) {
      case fb::ResizeNearest::ROUND_PREFER_FLOOR: up = r > 0.5; break;
      case fb::ResizeNearest::ROUND_PREFER_CEIL: up = r >= 0.5; break;
      case fb::ResizeNearest::FLOOR: up = false; break;
      case fb::ResizeNearest::CEIL: up = r > 0.0; break;
    }
    t->count = 1;
    t->index[0] = clamp_index(base + (up ? 1 : 0), in_len);
    t->weight[0] = 1.0;
    return;
  }
  if (r == 0.0) {
    t->count = 1;
    t->index[0] = clamp_index(base, in_len);
    t->weight[0] = 1.0;
    return;
  }
  int64_t first;
  if (p->mode() == fb::ResizeMode::LINEAR) {
    t->count = 2;
    first = base;
    t->weight[0] = 1.0 - r;
    t->weight[1] = r;
  } else {
    t->count = 4;
    first = base - 1;
    cubic_weights(r, static_cast<double>(p->cubic_coeff_a()), t->weight);
  }
  double sum = 0.0;
  for (uint32_t i = 0; i < t->count; ++i) {
    const int64_t index = first + static_cast<int64_t>(i);
    if (p->exclude_outside() && (index < 0 || index >= in_len)) t->weight[i] = 0.0;
    sum += t->weight[i];
    t->index[i] = clamp_index(index, in_len);
  }
  if (p->exclude_outside() && sum != 0.0) {
    for (uint32_t i = 0; i < t->count; ++i) t->weight[i] /= sum;
  }
}

Error check_resize(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const auto* p = args.params<fb::ResizeParams>();
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, p != nullptr && p->scales() != nullptr, "missing ResizeParams");
  KILN_KERNEL_CHECK(args, p->mode() <= fb::ResizeMode::MAX && p->coordinate() <= fb::ResizeCoordinate::MAX &&
                              p->nearest() <= fb::ResizeNearest::MAX, "unknown resize mode");
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
  return Error::kOk;
}

// Calls visit(offset, weight) for every input element contributing to the
// output element at multi-index `index`.
template <typename F>
void for_each_tap(const fb::ResizeParams* p, const Tensor& x, const Tensor& y, const int64_t* index,
                  const int64_t* strides, F visit) {
  const uint32_t rank = x.rank();
  Taps taps[kMaxRank];
  for (uint32_t d = 0; d < rank; ++d) {
    axis_taps(p, static_cast<double>(p->scales()->Get(d)), index[d], y.dim(d), x.dim(d), &taps[d]);
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
// (leading axes keep their size), nearest or linear: each axis's taps are
// computed once instead of once per element. The last axis's taps go to
// stack arrays a block of columns at a time (no heap, bounded stack); each
// output row's taps once per row. Linear sums in float, the general path
// below in double (results differ by a few ulp). A single tap (integer
// coordinate) is taken as two halves of the same element, exact for finite
// values and infinities alike.
constexpr int64_t kColumnBlock = 256;

bool resize_last_two_axes(const fb::ResizeParams* p, const Tensor& x, const Tensor& y) {
  const uint32_t rank = x.rank();
  if (rank < 2 || x.dtype() != DType::FLOAT32 || p->mode() == fb::ResizeMode::CUBIC) return false;
  int64_t planes = 1;
  for (uint32_t d = 0; d + 2 < rank; ++d) {
    if (x.dim(d) != y.dim(d)) return false;
    planes *= x.dim(d);
  }
  const int64_t ih = x.dim(rank - 2), iw = x.dim(rank - 1), oh = y.dim(rank - 2), ow = y.dim(rank - 1);
  const double sh = p->scales()->Get(rank - 2), sw = p->scales()->Get(rank - 1);
  const bool nearest = p->mode() == fb::ResizeMode::NEAREST;
  const float* in = x.data_as<const float>();
  float* out = y.data_as<float>();
  int64_t xi0[kColumnBlock], xi1[kColumnBlock];
  float xw0[kColumnBlock], xw1[kColumnBlock];
  for (int64_t j0 = 0; j0 < ow; j0 += kColumnBlock) {
    const int64_t nb = ow - j0 < kColumnBlock ? ow - j0 : kColumnBlock;
    for (int64_t j = 0; j < nb; ++j) {
      Taps t;
      axis_taps(p, sw, j0 + j, ow, iw, &t);
      const bool two = t.count == 2;
      xi0[j] = t.index[0];
      xi1[j] = two ? t.index[1] : t.index[0];
      xw0[j] = two ? static_cast<float>(t.weight[0]) : 0.5f;
      xw1[j] = two ? static_cast<float>(t.weight[1]) : 0.5f;
    }
    for (int64_t oy = 0; oy < oh; ++oy) {
      Taps t;
      axis_taps(p, sh, oy, oh, ih, &t);
      const bool two = t.count == 2;
      const int64_t r0 = t.index[0], r1 = two ? t.index[1] : t.index[0];
      const float wy0 = two ? static_cast<float>(t.weight[0]) : 0.5f;
      const float wy1 = two ? static_cast<float>(t.weight[1]) : 0.5f;
      for (int64_t plane = 0; plane < planes; ++plane) {
        const float* a = in + (plane * ih + r0) * iw;
        const float* b = in + (plane * ih + r1) * iw;
        float* o = out + (plane * oh + oy) * ow + j0;
        if (nearest) {
          for (int64_t j = 0; j < nb; ++j) o[j] = a[xi0[j]];
        } else {
          for (int64_t j = 0; j < nb; ++j) {
            o[j] = wy0 * (xw0[j] * a[xi0[j]] + xw1[j] * a[xi1[j]]) + wy1 * (xw0[j] * b[xi0[j]] + xw1[j] * b[xi1[j]]);
          }
        }
      }
    }
  }
  return true;
}

Error run_resize(const KernelArgs& args) {
  const auto* p = args.params<fb::ResizeParams>();
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  if (y.numel() == 0) return Error::kOk;
  if (resize_last_two_axes(p, x, y)) return Error::kOk;
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

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_RESIZE_KERNELS(K) \
  K(Resize, check_resize, run_resize, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_RESIZE_KERNELS)
const KernelEntry kResizeKernels[] = {KILN_RESIZE_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumResizeKernels = sizeof(kResizeKernels) / sizeof(kResizeKernels[0]);

}  // namespace kernels
}  // namespace kiln
