// NumPy broadcasting walk shared by the kernels whose operands broadcast
// to the output: binary arithmetic, comparisons and logic, Where, Expand.
// Internal.

#ifndef KILN_KERNELS_CPU_SRC_BROADCAST_H_
#define KILN_KERNELS_CPU_SRC_BROADCAST_H_

#include <stdint.h>

#include "kernel_util.h"

namespace kiln {
namespace kernels {

// Calls row(out_offset, offsets, inner_strides, inner) for every row of
// `out` (its last dimension, `inner` elements starting at element
// out_offset), where offsets[i] is the element offset of the row's first
// element in inputs[i] and inner_strides[i] (0 or 1) its step along the
// row. Every input must broadcast to `out` (checked at load).
// Rows [row_begin, row_end) only, when given (row_end < 0: to the last).
template <uint32_t N, typename F>
void for_each_broadcast_row(const Tensor* const* inputs, const Tensor& out, F&& row, int64_t row_begin = 0,
                            int64_t row_end = -1) {
  const uint32_t rank = out.rank();
  int64_t strides[N][kMaxRank];
  int64_t inner_strides[N];
  for (uint32_t i = 0; i < N; ++i) {
    broadcast_strides(*inputs[i], out.dims(), rank, strides[i]);
    inner_strides[i] = rank > 0 ? strides[i][rank - 1] : 0;
  }
  const int64_t inner = rank > 0 ? out.dim(rank - 1) : 1;
  if (inner == 0) return;
  const int64_t rows = row_end < 0 ? out.numel() / inner : row_end;
  int64_t index[kMaxRank] = {};
  int64_t offsets[N] = {};
  // The multi-index of the first row over the outer dimensions.
  for (int64_t d = static_cast<int64_t>(rank) - 2, r = row_begin; d >= 0 && r > 0; --d) {
    const int64_t extent = out.dim(static_cast<uint32_t>(d));
    index[d] = r % extent;
    r /= extent;
    for (uint32_t i = 0; i < N; ++i) offsets[i] += strides[i][d] * index[d];
  }
  for (int64_t r = row_begin; r < rows; ++r) {
    row(r * inner, static_cast<const int64_t*>(offsets), static_cast<const int64_t*>(inner_strides), inner);
    // Advance the multi-index over the outer dimensions.
    for (int32_t d = static_cast<int32_t>(rank) - 2; d >= 0; --d) {
      for (uint32_t i = 0; i < N; ++i) offsets[i] += strides[i][d];
      if (++index[d] < out.dim(static_cast<uint32_t>(d))) break;
      for (uint32_t i = 0; i < N; ++i) offsets[i] -= strides[i][d] * index[d];
      index[d] = 0;
    }
  }
}

// The unit binary_map splits its work in (for a thread pool): its output
// rows (the last dimension) where an operand broadcasts along the outer
// ones, blocks of 64 elements where none does (same sizes, or a scalar).
inline int64_t binary_map_unit(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  const bool flat = (a.numel() == n || a.numel() == 1) && (b.numel() == n || b.numel() == 1);
  if (flat || out.rank() == 0) return 64;
  const int64_t inner = out.dim(out.rank() - 1);
  return inner > 0 ? inner : 1;
}

// out[i] = Op::apply(a[i], b[i]) with broadcasting, for inputs of type TIn
// and an output of type TOut; units [unit_begin, unit_end) of
// binary_map_unit() only, when given.
template <typename Op, typename TIn, typename TOut>
void binary_map(const Tensor& a, const Tensor& b, const Tensor& out, int64_t unit_begin = 0, int64_t unit_end = -1) {
  const TIn* pa = a.data_as<const TIn>();
  const TIn* pb = b.data_as<const TIn>();
  TOut* po = out.data_as<TOut>();
  const int64_t n = out.numel();
  const int64_t unit = binary_map_unit(a, b, out);
  const int64_t begin = unit_begin * unit;
  const int64_t end = unit_end < 0 || unit_end * unit > n ? n : unit_end * unit;
  if (a.numel() == n && b.numel() == n) {
    for (int64_t i = begin; i < end; ++i) po[i] = Op::apply(pa[i], pb[i]);
    return;
  }
  if (a.numel() == n && b.numel() == 1) {
    const TIn vb = pb[0];
    for (int64_t i = begin; i < end; ++i) po[i] = Op::apply(pa[i], vb);
    return;
  }
  if (b.numel() == n && a.numel() == 1) {
    const TIn va = pa[0];
    for (int64_t i = begin; i < end; ++i) po[i] = Op::apply(va, pb[i]);
    return;
  }
  const Tensor* inputs[2] = {&a, &b};
  for_each_broadcast_row<2>(
      inputs, out,
      [&](int64_t o, const int64_t* off, const int64_t* step, int64_t inner) {
        TOut* row = po + o;
        const TIn* ra = pa + off[0];
        const TIn* rb = pb + off[1];
        if (step[0] == 1 && step[1] == 1) {
          for (int64_t i = 0; i < inner; ++i) row[i] = Op::apply(ra[i], rb[i]);
        } else if (step[0] == 1) {
          const TIn vb = rb[0];
          for (int64_t i = 0; i < inner; ++i) row[i] = Op::apply(ra[i], vb);
        } else if (step[1] == 1) {
          const TIn va = ra[0];
          for (int64_t i = 0; i < inner; ++i) row[i] = Op::apply(va, rb[i]);
        } else {
          const TOut v = Op::apply(ra[0], rb[0]);
          for (int64_t i = 0; i < inner; ++i) row[i] = v;
        }
      },
      unit_begin, unit_end);
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_BROADCAST_H_
