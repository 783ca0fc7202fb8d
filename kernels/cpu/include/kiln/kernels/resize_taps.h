// The interpolation taps of Resize along one axis, shared by the kernel
// (kernels/cpu/src/resize.cc) and the planner, which computes the
// taps of a 2-D nearest or linear Resize once and hands them to the kernel
// as a constant input instead of the kernel computing them on every call.
// One definition of the coordinate arithmetic, so both sides agree.
//
// The table (float32, shape [4, oh + ow]) of a Resize over the last two
// axes of an image (leading axes keep their size):
//
//            columns 0 .. oh-1 (rows of the output)   oh .. oh+ow-1 (columns)
//   row 0    first input index                        first input index
//   row 1    second input index                       second input index
//   row 2    weight of the first                      weight of the first
//   row 3    weight of the second                     weight of the second
//
// Output element (y, x) of a plane is
//   w2[y] (w2[x] in[i0[y]][i0[x]] + w3[x] in[i0[y]][i1[x]]) +
//   w3[y] (w2[x] in[i1[y]][i0[x]] + w3[x] in[i1[y]][i1[x]])
// with w2/w3 the weight rows and i0/i1 the index rows (indices are exact
// in float32 up to 2^24, which the planner checks). Nearest mode and
// integer coordinates have one tap, stored as two halves of the same index.
//
// tf_crop_and_resize exists only as such a table (the schema's
// ResizeCoordinate has no member for it): the planner passes the region of
// interest of each axis (start, end, as fractions of in - 1) and maps
//   x -> start * (in - 1) + x * (end - start) * (in - 1) / (out - 1),
// or (start + end) / 2 * (in - 1) when out is 1. Rows and columns whose
// coordinate falls outside [0, in - 1] take the extrapolation value: the
// planner writes it over them after the Resize (resize_crop_outside).
// Header-only, no state.

#ifndef KILN_KERNELS_RESIZE_TAPS_H_
#define KILN_KERNELS_RESIZE_TAPS_H_

#include <math.h>
#include <stdint.h>

#include "kiln/schema/program_generated.h"

namespace kiln {
namespace kernels {

// What decides the taps along an axis (ResizeParams without the scales).
struct ResizeAxisMode {
  fb::ResizeMode mode = fb::ResizeMode::NEAREST;
  fb::ResizeCoordinate coordinate = fb::ResizeCoordinate::HALF_PIXEL;
  fb::ResizeNearest nearest = fb::ResizeNearest::ROUND_PREFER_FLOOR;
  bool sized = false;
  bool exclude_outside = false;
  float cubic_coeff_a = -0.75f;
};

// Up to four (input index, weight) pairs.
struct ResizeTaps {
  int64_t index[4];
  double weight[4];
  uint32_t count;
};

// The largest index the table stores exactly.
constexpr int64_t kResizeTableMaxIndex = int64_t{1} << 24;

namespace resize_detail {

// The coordinate of tf_crop_and_resize; crop holds (start, end).
inline double crop_coordinate(const double* crop, int64_t x, int64_t out_len, int64_t in_len) {
  const double last = static_cast<double>(in_len - 1);
  if (out_len <= 1) return 0.5 * (crop[0] + crop[1]) * last;
  return crop[0] * last + static_cast<double>(x) * (crop[1] - crop[0]) * last / static_cast<double>(out_len - 1);
}

inline double original_coordinate(const ResizeAxisMode& m, int64_t x, double scale, int64_t out_len, int64_t in_len) {
  const double xf = static_cast<double>(x);
  const double length = m.sized ? static_cast<double>(out_len) : static_cast<double>(in_len) * scale;
  switch (m.coordinate) {
    case fb::ResizeCoordinate::HALF_PIXEL: return (xf + 0.5) / scale - 0.5;
    case fb::ResizeCoordinate::PYTORCH_HALF_PIXEL: return length > 1.0 ? (xf + 0.5) / scale - 0.5 : 0.0;
    case fb::ResizeCoordinate::ALIGN_CORNERS:
      return length != 1.0 ? xf * static_cast<double>(in_len - 1) / (length - 1.0) : 0.0;
    case fb::ResizeCoordinate::ASYMMETRIC: return xf / scale;
    case fb::ResizeCoordinate::TF_HALF_PIXEL_FOR_NN: return (xf + 0.5) / scale;
  }
  return 0.0;
}

inline int64_t clamp_index(int64_t i, int64_t len) { return i < 0 ? 0 : (i >= len ? len - 1 : i); }

inline void cubic_weights(double r, double a, double* w) {
  const double t0 = r + 1.0, t1 = r, t2 = 1.0 - r, t3 = 2.0 - r;
  w[0] = ((a * t0 - 5.0 * a) * t0 + 8.0 * a) * t0 - 4.0 * a;
  w[1] = ((a + 2.0) * t1 - (a + 3.0)) * t1 * t1 + 1.0;
  w[2] = ((a + 2.0) * t2 - (a + 3.0)) * t2 * t2 + 1.0;
  w[3] = ((a * t3 - 5.0 * a) * t3 + 8.0 * a) * t3 - 4.0 * a;
}

}  // namespace resize_detail

// The taps of output index x along an axis of in_len inputs and out_len
// outputs, scale = out / in as the model gave it. Input indices are
// clamped to [0, in_len). With `crop` (start, end), the coordinate is
// tf_crop_and_resize's and m.coordinate is not read.
inline void resize_axis_taps(const ResizeAxisMode& m, double scale, int64_t x, int64_t out_len, int64_t in_len,
                             ResizeTaps* t, const double* crop = nullptr) {
  using namespace resize_detail;
  double c =
      crop != nullptr ? crop_coordinate(crop, x, out_len, in_len) : original_coordinate(m, x, scale, out_len, in_len);
  // Keep c (even NaN or infinite, from extreme scales) in a range where the
  // conversions below are defined; clamping of indices does the rest.
  if (!(c > -4.0)) c = -4.0;
  if (c > static_cast<double>(in_len) + 4.0) c = static_cast<double>(in_len) + 4.0;
  const double f = floor(c);
  const double r = c - f;
  const int64_t base = static_cast<int64_t>(f);
  if (m.mode == fb::ResizeMode::NEAREST) {
    bool up = false;
    switch (m.nearest) {
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
  if (m.mode == fb::ResizeMode::LINEAR) {
    t->count = 2;
    first = base;
    t->weight[0] = 1.0 - r;
    t->weight[1] = r;
  } else {
    t->count = 4;
    first = base - 1;
    cubic_weights(r, static_cast<double>(m.cubic_coeff_a), t->weight);
  }
  double sum = 0.0;
  for (uint32_t i = 0; i < t->count; ++i) {
    const int64_t index = first + static_cast<int64_t>(i);
    if (m.exclude_outside && (index < 0 || index >= in_len)) t->weight[i] = 0.0;
    sum += t->weight[i];
    t->index[i] = clamp_index(index, in_len);
  }
  if (m.exclude_outside && sum != 0.0) {
    for (uint32_t i = 0; i < t->count; ++i) t->weight[i] /= sum;
  }
}

// Taps of nearest or linear mode as the table's two (index, weight) pairs:
// one tap becomes two halves of the same index.
inline void resize_axis_pair(const ResizeAxisMode& m, double scale, int64_t x, int64_t out_len, int64_t in_len,
                             float* i0, float* i1, float* w0, float* w1, const double* crop = nullptr) {
  ResizeTaps t;
  resize_axis_taps(m, scale, x, out_len, in_len, &t, crop);
  const bool two = t.count == 2;
  *i0 = static_cast<float>(t.index[0]);
  *i1 = static_cast<float>(two ? t.index[1] : t.index[0]);
  *w0 = two ? static_cast<float>(t.weight[0]) : 0.5f;
  *w1 = two ? static_cast<float>(t.weight[1]) : 0.5f;
}

// Fills the table (4 * (oh + ow) floats, layout above) for a nearest or
// linear Resize from (ih, iw) to (oh, ow) with scales (sh, sw). `crop`, for
// tf_crop_and_resize, holds the regions of interest (row start, column
// start, row end, column end); nullptr otherwise.
inline void resize_taps_table(const ResizeAxisMode& m, double sh, double sw, int64_t ih, int64_t iw, int64_t oh,
                              int64_t ow, float* table, const double* crop = nullptr) {
  const int64_t n = oh + ow;
  const double crop_rows[2] = {crop != nullptr ? crop[0] : 0.0, crop != nullptr ? crop[2] : 1.0};
  const double crop_cols[2] = {crop != nullptr ? crop[1] : 0.0, crop != nullptr ? crop[3] : 1.0};
  for (int64_t k = 0; k < n; ++k) {
    const bool row = k < oh;
    resize_axis_pair(m, row ? sh : sw, row ? k : k - oh, row ? oh : ow, row ? ih : iw, &table[k], &table[n + k],
                     &table[2 * n + k], &table[3 * n + k], crop == nullptr ? nullptr : (row ? crop_rows : crop_cols));
  }
}

// tf_crop_and_resize: true when output index x along an axis maps outside
// the input (or to NaN), so the element takes the extrapolation value.
inline bool resize_crop_outside(const double* crop, int64_t x, int64_t out_len, int64_t in_len) {
  const double c = resize_detail::crop_coordinate(crop, x, out_len, in_len);
  return !(c >= 0.0 && c <= static_cast<double>(in_len - 1));
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_RESIZE_TAPS_H_
