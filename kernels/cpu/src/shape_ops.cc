// Data movement kernels: Transpose, Concat, Split, Slice, Gather, Expand
// and Pad (they move bytes, so they serve every dtype) and Cast.

#include <math.h>
#include <string.h>

#include <limits>

#include "broadcast.h"
#include "cpu_kernels.h"
#include "kernel_util.h"
#include "kiln/kernels/float16.h"
#include "parallel.h"

namespace kiln {
namespace kernels {
namespace {

// ---------------------------------------------------------------------------
// Transpose

Error check_transpose(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const auto* p = args.params<fb::TransposeParams>();
  KILN_KERNEL_CHECK(args, p != nullptr && p->perm() != nullptr, "missing TransposeParams");
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == y.dtype(), "dtype changes");
  KILN_KERNEL_CHECK(args, p->perm()->size() == x.rank() && y.rank() == x.rank(), "perm has %u entries for rank %u",
                    p->perm()->size(), x.rank());
  bool seen[kMaxRank] = {};
  for (uint32_t d = 0; d < x.rank(); ++d) {
    const int32_t src = p->perm()->Get(d);
    KILN_KERNEL_CHECK(args, src >= 0 && static_cast<uint32_t>(src) < x.rank() && !seen[src],
                      "perm is not a permutation");
    seen[src] = true;
    KILN_KERNEL_CHECK(args, y.dim(d) == x.dim(static_cast<uint32_t>(src)), "output dim %u wrong", d);
  }
  return Error::kOk;
}

// Transpose works on the permutation with its axes simplified: axes of
// size 1 dropped, and output axes that stay adjacent and in order in the
// input merged (DepthToSpace's [n, c, b, b, h, w] -> [n, c, h, b, w, b]
// stays rank 5; attention's [b, s, h, d] -> [b, h, s, d] becomes rows of
// d elements). Then, by what the last two output axes read:
// - the last one contiguous in the input: row copies;
// - the one before it contiguous: planes, each a 2-D transpose of the
//   input; DepthToSpace's and the pixel shuffle's 2 to 4 wide last axis
//   interleaves rows, wider ones go in cache-sized tiles;
// - neither: element by element.
struct TransposeAxes {
  uint32_t rank = 0;
  int64_t dims[kMaxRank] = {};     // the output's
  int64_t strides[kMaxRank] = {};  // the input's, in elements
};

TransposeAxes simplify_transpose(const Tensor& x, const Tensor& y, const flatbuffers::Vector<int32_t>* perm) {
  int64_t in_strides[kMaxRank];
  contiguous_strides(x.dims(), x.rank(), in_strides);
  TransposeAxes t;
  for (uint32_t d = 0; d < y.rank(); ++d) {
    const int64_t dim = y.dim(d), stride = in_strides[perm->Get(d)];
    if (dim == 1) continue;
    if (t.rank > 0 && t.strides[t.rank - 1] == stride * dim) {
      t.dims[t.rank - 1] *= dim;
      t.strides[t.rank - 1] = stride;
    } else {
      t.dims[t.rank] = dim;
      t.strides[t.rank] = stride;
      ++t.rank;
    }
  }
  return t;
}

// The input offset of output row `row` (rows of the last `rows_of` axes
// left out: 1 for rows of the last axis, 2 for planes).
int64_t source_offset(const TransposeAxes& t, uint32_t rows_of, int64_t row) {
  int64_t offset = 0;
  for (int64_t d = static_cast<int64_t>(t.rank) - 1 - rows_of; d >= 0; --d) {
    offset += row % t.dims[d] * t.strides[d];
    row /= t.dims[d];
  }
  return offset;
}

// Output rows [r0, r1): each the input's elements `stride` apart.
template <typename T>
void transpose_elements(const T* in, T* out, const TransposeAxes& t, int64_t r0, int64_t r1) {
  const uint32_t rank = t.rank;
  const int64_t inner = t.dims[rank - 1], inner_stride = t.strides[rank - 1];
  int64_t index[kMaxRank] = {};
  for (int64_t d = static_cast<int64_t>(rank) - 2, rest = r0; d >= 0; --d) {
    index[d] = rest % t.dims[d];
    rest /= t.dims[d];
  }
  int64_t offset = source_offset(t, 1, r0);
  for (int64_t o = r0 * inner; o < r1 * inner; o += inner) {
    if (inner_stride == 1) {
      memcpy(out + o, in + offset, static_cast<size_t>(inner) * sizeof(T));
    } else {
      for (int64_t i = 0; i < inner; ++i) out[o + i] = in[offset + i * inner_stride];
    }
    for (int32_t d = static_cast<int32_t>(rank) - 2; d >= 0; --d) {
      offset += t.strides[d];
      if (++index[d] < t.dims[d]) break;
      offset -= t.strides[d] * index[d];
      index[d] = 0;
    }
  }
}

// Rows [a0, a1) of a plane out[a][k] = in[a + k * stride], k < K.
template <typename T, int K>
void interleave_rows(const T* in, int64_t stride, T* out, int64_t a0, int64_t a1) {
  for (int64_t a = a0; a < a1; ++a) {
    for (int k = 0; k < K; ++k) out[a * K + k] = in[a + k * stride];
  }
}

// The same for any width, in square tiles that stay in L1.
template <typename T>
void transpose_tiles(const T* in, int64_t stride, int64_t width, T* out, int64_t a0, int64_t a1) {
  constexpr int64_t kTile = 64 / sizeof(T) < 16 ? 16 : 64 / sizeof(T);
  for (int64_t ab = a0; ab < a1; ab += kTile) {
    const int64_t ae = ab + kTile < a1 ? ab + kTile : a1;
    for (int64_t kb = 0; kb < width; kb += kTile) {
      const int64_t ke = kb + kTile < width ? kb + kTile : width;
      for (int64_t a = ab; a < ae; ++a) {
        for (int64_t k = kb; k < ke; ++k) out[a * width + k] = in[a + k * stride];
      }
    }
  }
}

// Output rows [r0, r1) where the axis before the last is contiguous in
// the input: plane by plane, the rows of each in the range.
template <typename T>
void transpose_planes(const T* in, T* out, const TransposeAxes& t, int64_t r0, int64_t r1) {
  const int64_t height = t.dims[t.rank - 2], width = t.dims[t.rank - 1], stride = t.strides[t.rank - 1];
  for (int64_t row = r0; row < r1;) {
    const int64_t plane = row / height, a0 = row % height;
    const int64_t a1 = a0 + (r1 - row) < height ? a0 + (r1 - row) : height;
    const T* src = in + source_offset(t, 2, plane);
    T* dst = out + plane * height * width;
    switch (width) {
      case 2: interleave_rows<T, 2>(src, stride, dst, a0, a1); break;
      case 3: interleave_rows<T, 3>(src, stride, dst, a0, a1); break;
      case 4: interleave_rows<T, 4>(src, stride, dst, a0, a1); break;
      default: transpose_tiles(src, stride, width, dst, a0, a1); break;
    }
    row += a1 - a0;
  }
}

template <typename T>
void transpose_rows(const T* in, T* out, const TransposeAxes& t, int64_t r0, int64_t r1) {
  if (t.rank >= 2 && t.strides[t.rank - 1] != 1 && t.strides[t.rank - 2] == 1) {
    transpose_planes(in, out, t, r0, r1);
  } else {
    transpose_elements(in, out, t, r0, r1);
  }
}

Error run_transpose(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const int64_t total = y.numel();
  if (total == 0) return Error::kOk;
  TransposeAxes t = simplify_transpose(x, y, args.params<fb::TransposeParams>()->perm());
  if (t.rank == 0) {  // one element, or the order unchanged: a copy
    t.rank = 1;
    t.dims[0] = total;
    t.strides[0] = 1;
  }
  // Output rows (of the last simplified axis) are independent: split them.
  const int64_t rows = total / t.dims[t.rank - 1];
  const int64_t tasks = parallel_tasks(args.pool, total, rows, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t task) {
    int64_t r0, r1;
    parallel_range(rows, tasks, task, 1, &r0, &r1);
    switch (dtype_size(x.dtype())) {
      // clang-format off
      case 1: transpose_rows(x.data_as<const uint8_t>(), y.data_as<uint8_t>(), t, r0, r1); break;
      case 2: transpose_rows(x.data_as<const uint16_t>(), y.data_as<uint16_t>(), t, r0, r1); break;
      case 4: transpose_rows(x.data_as<const uint32_t>(), y.data_as<uint32_t>(), t, r0, r1); break;
      default: transpose_rows(x.data_as<const uint64_t>(), y.data_as<uint64_t>(), t, r0, r1); break;
        // clang-format on
    }
  });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Concat

// Concat and Split move whole rows between a wide tensor (rows of
// `wide_row` bytes) and a piece (rows of `row` bytes at byte `column` of
// each wide row), here only the bytes [b, e) of the wide tensor: from the
// piece `src` into the wide `dst` (Concat, into_wide) or from the wide `src`
// into the piece `dst` (Split). Threads take ranges of whole
// kCopyBlock-byte blocks.
constexpr int64_t kCopyBlock = 64;

void copy_rows_in_range(const uint8_t* src, uint8_t* dst, bool into_wide, int64_t wide_row, int64_t column, int64_t row,
                        int64_t b, int64_t e) {
  if (row == 0) return;
  for (int64_t o = b / wide_row; o <= (e - 1) / wide_row; ++o) {
    const int64_t start = o * wide_row + column;
    const int64_t s0 = b > start ? b : start;
    const int64_t s1 = e < start + row ? e : start + row;
    if (s0 >= s1) continue;
    const int64_t wide_at = s0, piece_at = o * row + (s0 - start);
    memcpy(dst + (into_wide ? wide_at : piece_at), src + (into_wide ? piece_at : wide_at),
           static_cast<size_t>(s1 - s0));
  }
}

// Every piece of a Concat (the inputs, into_wide) or a Split (the outputs)
// against the wide tensor `wide` along `axis`. Large tensors are cut into
// byte ranges of the wide one (parallel.h); each task moves the parts of
// every piece's rows that fall in its range.
void move_pieces(const KernelArgs& args, const Tensor& wide, uint32_t axis, bool into_wide) {
  const size_t element = dtype_size(wide.dtype());
  const int64_t wide_row = dims_product(wide, axis, wide.rank()) * static_cast<int64_t>(element);
  const int64_t total = dims_product(wide, 0, axis) * wide_row;
  const uint32_t pieces = into_wide ? args.num_inputs : args.num_outputs;
  const int64_t tasks = parallel_tasks(args.pool, total / static_cast<int64_t>(element),
                                       (total + kCopyBlock - 1) / kCopyBlock, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t b, e;
    parallel_range(total, tasks, t, kCopyBlock, &b, &e);
    if (b == e) return;
    int64_t column = 0;
    for (uint32_t i = 0; i < pieces; ++i) {
      const Tensor& piece = into_wide ? args.in(i) : args.out(i);
      const int64_t row = dims_product(piece, axis, piece.rank()) * static_cast<int64_t>(element);
      if (into_wide) {
        copy_rows_in_range(piece.data_as<const uint8_t>(), wide.data_as<uint8_t>(), true, wide_row, column, row, b, e);
      } else {
        copy_rows_in_range(wide.data_as<const uint8_t>(), piece.data_as<uint8_t>(), false, wide_row, column, row, b, e);
      }
      column += row;
    }
  });
}

Error check_concat(const KernelArgs& args) {
  KILN_KERNEL_CHECK(args, args.num_inputs >= 1 && args.num_outputs == 1, "bad operand count");
  const auto* p = args.params<fb::AxisParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "missing AxisParams");
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < y.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  int64_t total = 0;
  for (uint32_t i = 0; i < args.num_inputs; ++i) {
    KILN_KERNEL_CHECK(args, args.inputs[i] != nullptr, "input %u is missing", i);
    const Tensor& x = args.in(i);
    KILN_KERNEL_CHECK(args, x.dtype() == y.dtype() && x.rank() == y.rank(), "input %u dtype or rank differs", i);
    for (uint32_t d = 0; d < y.rank(); ++d) {
      if (d != axis) KILN_KERNEL_CHECK(args, x.dim(d) == y.dim(d), "input %u dim %u differs", i, d);
    }
    total += x.dim(axis);
  }
  KILN_KERNEL_CHECK(args, total == y.dim(axis), "concatenated size %lld != output %lld", static_cast<long long>(total),
                    static_cast<long long>(y.dim(axis)));
  return Error::kOk;
}

Error run_concat(const KernelArgs& args) {
  move_pieces(args, args.out(0), static_cast<uint32_t>(args.params<fb::AxisParams>()->axis()), true);
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Split: the inverse of Concat; the outputs' sizes along the axis add up to
// the input's.

Error check_split(const KernelArgs& args) {
  KILN_KERNEL_CHECK(args, args.num_inputs == 1 && args.inputs[0] != nullptr && args.num_outputs >= 1,
                    "bad operand count");
  const auto* p = args.params<fb::AxisParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "missing AxisParams");
  const Tensor& x = args.in(0);
  KILN_KERNEL_CHECK(args, p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  int64_t total = 0;
  for (uint32_t i = 0; i < args.num_outputs; ++i) {
    const Tensor& y = args.out(i);
    KILN_KERNEL_CHECK(args, y.dtype() == x.dtype() && y.rank() == x.rank(), "output %u dtype or rank differs", i);
    for (uint32_t d = 0; d < x.rank(); ++d) {
      if (d != axis) KILN_KERNEL_CHECK(args, y.dim(d) == x.dim(d), "output %u dim %u differs", i, d);
    }
    total += y.dim(axis);
  }
  KILN_KERNEL_CHECK(args, total == x.dim(axis), "split sizes add up to %lld, input has %lld",
                    static_cast<long long>(total), static_cast<long long>(x.dim(axis)));
  return Error::kOk;
}

Error run_split(const KernelArgs& args) {
  move_pieces(args, args.in(0), static_cast<uint32_t>(args.params<fb::AxisParams>()->axis()), false);
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Slice: out[i0, i1, ...] = in[start0 + i0 * step0, start1 + i1 * step1, ...]
// with one start and one non-zero step per input dimension; the output's
// shape gives the counts.

Error check_slice(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const auto* p = args.params<fb::SliceParams>();
  KILN_KERNEL_CHECK(args, p != nullptr && p->starts() != nullptr && p->steps() != nullptr, "missing SliceParams");
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == y.dtype() && x.rank() == y.rank(), "dtype or rank changes");
  KILN_KERNEL_CHECK(args, p->starts()->size() == x.rank() && p->steps()->size() == x.rank(),
                    "starts and steps need one entry per dimension");
  if (y.numel() == 0) return Error::kOk;
  for (uint32_t d = 0; d < x.rank(); ++d) {
    const int64_t start = p->starts()->Get(d), step = p->steps()->Get(d);
    const int64_t count = y.dim(d), dim = x.dim(d);
    KILN_KERNEL_CHECK(args, step != 0 && start >= 0 && start < dim, "dim %u: start outside the input", d);
    if (count > 1) {
      // The last index start + (count - 1) * step must stay inside [0, dim);
      // bound |step| first so the product cannot overflow.
      const int64_t room = step > 0 ? dim - 1 - start : start;
      const int64_t magnitude = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
      KILN_KERNEL_CHECK(args, magnitude <= room / (count - 1), "dim %u: slice runs past the input", d);
    }
  }
  return Error::kOk;
}

// Output rows [r0, r1) (rows of the last output dimension) of a slice.
template <typename T>
void slice_typed(const Tensor& x, const Tensor& y, const fb::SliceParams* p, int64_t r0, int64_t r1) {
  const uint32_t rank = x.rank();
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  if (rank == 0) {
    if (r1 > r0) out[0] = in[0];
    return;
  }
  int64_t strides[kMaxRank], steps[kMaxRank];
  contiguous_strides(x.dims(), rank, strides);
  int64_t offset = 0;
  for (uint32_t d = 0; d < rank; ++d) {
    offset += p->starts()->Get(d) * strides[d];
    // A dimension of one element never steps (its step may be huge).
    steps[d] = y.dim(d) > 1 ? p->steps()->Get(d) * strides[d] : 0;
  }
  const int64_t inner = y.dim(rank - 1);
  const int64_t inner_step = steps[rank - 1];
  // The index and source offset of row r0.
  int64_t index[kMaxRank] = {};
  for (int64_t d = static_cast<int64_t>(rank) - 2, rest = r0; d >= 0; --d) {
    const int64_t dim = y.dim(static_cast<uint32_t>(d));
    index[d] = rest % dim;
    rest /= dim;
    offset += index[d] * steps[d];
  }
  for (int64_t r = r0; r < r1; ++r) {
    T* row = out + r * inner;
    if (inner_step == 1) {
      memcpy(row, in + offset, static_cast<size_t>(inner) * sizeof(T));
    } else {
      for (int64_t i = 0; i < inner; ++i) row[i] = in[offset + i * inner_step];
    }
    for (int32_t d = static_cast<int32_t>(rank) - 2; d >= 0; --d) {
      offset += steps[d];
      if (++index[d] < y.dim(static_cast<uint32_t>(d))) break;
      offset -= steps[d] * index[d];
      index[d] = 0;
    }
  }
}

Error run_slice(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  if (y.numel() == 0) return Error::kOk;
  const auto* p = args.params<fb::SliceParams>();
  // Output rows are independent: split them.
  const int64_t rows = y.rank() > 0 ? y.numel() / y.dim(y.rank() - 1) : 1;
  const int64_t tasks = parallel_tasks(args.pool, y.numel(), rows, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t r0, r1;
    parallel_range(rows, tasks, t, 1, &r0, &r1);
    switch (dtype_size(x.dtype())) {
      case 1: slice_typed<uint8_t>(x, y, p, r0, r1); break;
      case 2: slice_typed<uint16_t>(x, y, p, r0, r1); break;
      case 4: slice_typed<uint32_t>(x, y, p, r0, r1); break;
      default: slice_typed<uint64_t>(x, y, p, r0, r1); break;
    }
  });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Gather: out[outer, j, inner] = data[outer, indices[j], inner]

Error check_gather(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const auto* p = args.params<fb::AxisParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "missing AxisParams");
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const Tensor& out = args.out(0);
  KILN_KERNEL_CHECK(args, indices.dtype() == DType::INT64 || indices.dtype() == DType::INT32,
                    "indices must be int32 or int64");
  KILN_KERNEL_CHECK(args, data.dtype() == out.dtype(), "dtype changes");
  KILN_KERNEL_CHECK(args, p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < data.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  KILN_KERNEL_CHECK(args, out.rank() == data.rank() - 1 + indices.rank(), "output rank wrong");
  uint32_t o = 0;
  for (uint32_t d = 0; d < axis; ++d) KILN_KERNEL_CHECK(args, out.dim(o++) == data.dim(d), "output shape wrong");
  for (uint32_t d = 0; d < indices.rank(); ++d)
    KILN_KERNEL_CHECK(args, out.dim(o++) == indices.dim(d), "output shape wrong");
  for (uint32_t d = axis + 1; d < data.rank(); ++d)
    KILN_KERNEL_CHECK(args, out.dim(o++) == data.dim(d), "output shape wrong");
  return Error::kOk;
}

Error run_gather(const KernelArgs& args) {
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const uint32_t axis = static_cast<uint32_t>(args.params<fb::AxisParams>()->axis());
  const int64_t outer = dims_product(data, 0, axis);
  const int64_t dim = data.dim(axis);
  const size_t row = static_cast<size_t>(dims_product(data, axis + 1, data.rank())) * dtype_size(data.dtype());
  const int64_t count = indices.numel();
  const uint8_t* in = data.data_as<const uint8_t>();
  uint8_t* out = args.out(0).data_as<uint8_t>();
  for (int64_t j = 0; j < count; ++j) {
    int64_t k =
        indices.dtype() == DType::INT64 ? indices.data_as<const int64_t>()[j] : indices.data_as<const int32_t>()[j];
    if (k < 0) k += dim;
    if (k < 0 || k >= dim) {
      KILN_LOG(ERROR, "node '%s': index %lld out of range [0, %lld)", args.node_name, static_cast<long long>(k),
               static_cast<long long>(dim));
      return Error::kInvalidInput;
    }
    for (int64_t o = 0; o < outer; ++o) {
      memcpy(out + (o * count + j) * row, in + (o * dim + k) * row, row);
    }
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Expand: the input broadcast to the output's shape.

Error check_expand(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == y.dtype(), "dtype changes");
  int64_t strides[kMaxRank];
  KILN_KERNEL_CHECK(args, broadcast_strides(x, y.dims(), y.rank(), strides),
                    "input does not broadcast to the output shape");
  return Error::kOk;
}

template <typename T>
void expand_typed(const Tensor& x, const Tensor& y) {
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  const Tensor* inputs[1] = {&x};
  for_each_broadcast_row<1>(inputs, y, [&](int64_t o, const int64_t* off, const int64_t* step, int64_t inner) {
    if (step[0] == 1) {
      memcpy(out + o, in + off[0], static_cast<size_t>(inner) * sizeof(T));
    } else {
      const T v = in[off[0]];
      for (int64_t i = 0; i < inner; ++i) out[o + i] = v;
    }
  });
}

Error run_expand(const KernelArgs& args) {
  switch (dtype_size(args.in(0).dtype())) {
    case 1: expand_typed<uint8_t>(args.in(0), args.out(0)); break;
    case 2: expand_typed<uint16_t>(args.in(0), args.out(0)); break;
    case 4: expand_typed<uint32_t>(args.in(0), args.out(0)); break;
    default: expand_typed<uint64_t>(args.in(0), args.out(0)); break;
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Cast between numeric dtypes and bool. Float to integer truncates toward
// zero and saturates; NaN becomes 0. The 16-bit floats convert through
// float32 (a double goes to float16 in two roundings, which can differ from
// one rounding in the last bit at exact ties).

bool castable(DType t) {
  switch (t) {
    case DType::FLOAT32:
    case DType::FLOAT64:
    case DType::FLOAT16:
    case DType::BFLOAT16:
    case DType::INT8:
    case DType::UINT8:
    case DType::INT16:
    case DType::UINT16:
    case DType::INT32:
    case DType::UINT32:
    case DType::INT64:
    case DType::UINT64:
    case DType::BOOL: return true;
    default: return false;
  }
}

Error check_cast(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_KERNEL_CHECK(args, castable(args.in(0).dtype()) && castable(args.out(0).dtype()),
                    "cast from %s to %s is not supported", dtype_name(args.in(0).dtype()),
                    dtype_name(args.out(0).dtype()));
  return check_same_shape(args, args.in(0), args.out(0), "input and output");
}

double load_element(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::FLOAT32: return static_cast<const float*>(p)[i];
    case DType::FLOAT64: return static_cast<const double*>(p)[i];
    case DType::FLOAT16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::BFLOAT16: return bfloat16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::INT8: return static_cast<const int8_t*>(p)[i];
    case DType::UINT8: return static_cast<const uint8_t*>(p)[i];
    case DType::INT16: return static_cast<const int16_t*>(p)[i];
    case DType::UINT16: return static_cast<const uint16_t*>(p)[i];
    case DType::INT32: return static_cast<const int32_t*>(p)[i];
    case DType::UINT32: return static_cast<const uint32_t*>(p)[i];
    case DType::BOOL: return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
    default: return 0.0;
  }
}

template <typename T>
T saturate(double v) {
  if (v != v) return T(0);
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

void store_element(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::FLOAT32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::FLOAT64: static_cast<double*>(p)[i] = v; break;
    case DType::FLOAT16: static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v)); break;
    case DType::BFLOAT16: static_cast<uint16_t*>(p)[i] = float_to_bfloat16(static_cast<float>(v)); break;
    case DType::INT8: static_cast<int8_t*>(p)[i] = saturate<int8_t>(v); break;
    case DType::UINT8: static_cast<uint8_t*>(p)[i] = saturate<uint8_t>(v); break;
    case DType::INT16: static_cast<int16_t*>(p)[i] = saturate<int16_t>(v); break;
    case DType::UINT16: static_cast<uint16_t*>(p)[i] = saturate<uint16_t>(v); break;
    case DType::INT32: static_cast<int32_t*>(p)[i] = saturate<int32_t>(v); break;
    case DType::UINT32: static_cast<uint32_t*>(p)[i] = saturate<uint32_t>(v); break;
    case DType::INT64: static_cast<int64_t*>(p)[i] = saturate<int64_t>(v); break;
    case DType::UINT64: static_cast<uint64_t*>(p)[i] = saturate<uint64_t>(v); break;
    case DType::BOOL: static_cast<uint8_t*>(p)[i] = v != 0.0 ? 1 : 0; break;
    default: break;
  }
}

Error run_cast(const KernelArgs& args) {
  const Tensor& in = args.in(0);
  const Tensor& out = args.out(0);
  const int64_t n = in.numel();
  // 64-bit integers do not fit a double exactly: convert them directly.
  if (in.dtype() == DType::INT64 || in.dtype() == DType::UINT64) {
    for (int64_t i = 0; i < n; ++i) {
      const bool is_signed = in.dtype() == DType::INT64;
      const int64_t s = is_signed ? in.data_as<const int64_t>()[i] : 0;
      const uint64_t u = is_signed ? 0 : in.data_as<const uint64_t>()[i];
      switch (out.dtype()) {
        case DType::INT64: out.data_as<int64_t>()[i] = is_signed ? s : static_cast<int64_t>(u); break;
        case DType::UINT64: out.data_as<uint64_t>()[i] = is_signed ? static_cast<uint64_t>(s) : u; break;
        case DType::INT32:
          out.data_as<int32_t>()[i] = static_cast<int32_t>(is_signed ? s : static_cast<int64_t>(u));
          break;
        case DType::BOOL: out.data_as<uint8_t>()[i] = (is_signed ? s != 0 : u != 0) ? 1 : 0; break;
        default:
          store_element(out.data(), out.dtype(), i, is_signed ? static_cast<double>(s) : static_cast<double>(u));
          break;
      }
    }
    return Error::kOk;
  }
  for (int64_t i = 0; i < n; ++i) store_element(out.data(), out.dtype(), i, load_element(in.data(), in.dtype(), i));
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Pad (constant, reflect, edge) over any rank.

Error check_pad(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const auto* p = args.params<fb::PadParams>();
  KILN_KERNEL_CHECK(args, p != nullptr && p->pads() != nullptr && aligned8(p->pads()),
                    "missing or misaligned PadParams");
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const uint32_t rank = x.rank();
  KILN_KERNEL_CHECK(args, x.dtype() == y.dtype() && y.rank() == rank, "dtype or rank changes");
  KILN_KERNEL_CHECK(args, p->pads()->size() == 2 * rank, "pads must have 2 * rank entries");
  KILN_KERNEL_CHECK(args, p->mode() <= fb::PadMode::MAX, "unknown pad mode");
  KILN_KERNEL_CHECK(args, x.dtype() == DType::FLOAT32 || p->mode() != fb::PadMode::CONSTANT || p->value() == 0.f,
                    "non-zero constant pads only for float32");
  for (uint32_t d = 0; d < rank; ++d) {
    const int64_t b = p->pads()->Get(d), e = p->pads()->Get(d + rank);
    KILN_KERNEL_CHECK(args, b >= 0 && e >= 0, "negative pads are not supported");
    KILN_KERNEL_CHECK(args, y.dim(d) == x.dim(d) + b + e, "output dim %u wrong", d);
    if (p->mode() == fb::PadMode::REFLECT) {
      KILN_KERNEL_CHECK(args, b < x.dim(d) && e < x.dim(d), "reflect pads must be smaller than the dim");
    }
    if (p->mode() != fb::PadMode::CONSTANT && (b > 0 || e > 0)) {
      KILN_KERNEL_CHECK(args, x.dim(d) > 0, "cannot %s-pad an empty axis",
                        p->mode() == fb::PadMode::EDGE ? "edge" : "reflect");
    }
  }
  return Error::kOk;
}

// Source index of output index `o` along an axis of size `n` padded by `b`
// in front; -1 when it falls in a constant pad.
int64_t pad_source(int64_t o, int64_t n, int64_t b, fb::PadMode mode) {
  int64_t i = o - b;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case fb::PadMode::CONSTANT: return -1;
    case fb::PadMode::EDGE: return i < 0 ? 0 : n - 1;
    case fb::PadMode::REFLECT:
      if (n == 1) return 0;
      while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
      return i;
  }
  return -1;
}

Error run_pad(const KernelArgs& args) {
  const auto* p = args.params<fb::PadParams>();
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const uint32_t rank = x.rank();
  const size_t element = dtype_size(x.dtype());
  const fb::PadMode mode = p->mode();
  const float value = p->value();
  uint8_t fill[8] = {};
  if (x.dtype() == DType::FLOAT32) memcpy(fill, &value, 4);
  if (y.numel() == 0) return Error::kOk;
  if (rank == 0) {
    memcpy(y.data(), x.data(), element);
    return Error::kOk;
  }
  int64_t in_strides[kMaxRank];
  contiguous_strides(x.dims(), rank, in_strides);
  const int64_t inner_out = y.dim(rank - 1);
  const int64_t inner_in = x.dim(rank - 1);
  const int64_t inner_pad = p->pads()->Get(rank - 1);
  const int64_t rows = y.numel() / inner_out;
  const uint8_t* in = x.data_as<const uint8_t>();
  uint8_t* out = y.data_as<uint8_t>();
  int64_t index[kMaxRank] = {};
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out + r * inner_out * static_cast<int64_t>(element);
    int64_t src_row = 0;
    bool in_pad = false;
    for (uint32_t d = 0; d + 1 < rank; ++d) {
      const int64_t s = pad_source(index[d], x.dim(d), p->pads()->Get(d), mode);
      if (s < 0) in_pad = true;
      src_row += s * in_strides[d];
    }
    for (int64_t o = 0; o < inner_out; ++o) {
      const int64_t s = in_pad ? -1 : pad_source(o, inner_in, inner_pad, mode);
      if (s < 0) {
        memcpy(row + o * static_cast<int64_t>(element), fill, element);
      } else {
        memcpy(row + o * static_cast<int64_t>(element), in + (src_row + s) * static_cast<int64_t>(element), element);
      }
    }
    for (int32_t d = static_cast<int32_t>(rank) - 2; d >= 0; --d) {
      if (++index[d] < y.dim(static_cast<uint32_t>(d))) break;
      index[d] = 0;
    }
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_SHAPE_KERNELS(K)                     \
  K(Pad, check_pad, run_pad, 0)                   \
  K(Gather, check_gather, run_gather, 0)          \
  K(Cast, check_cast, run_cast, 0)                \
  K(Transpose, check_transpose, run_transpose, 0) \
  K(Concat, check_concat, run_concat, 0)          \
  K(Expand, check_expand, run_expand, 0)          \
  K(Split, check_split, run_split, 0)             \
  K(Slice, check_slice, run_slice, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_SHAPE_KERNELS)
const KernelEntry kShapeKernels[] = {KILN_SHAPE_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumShapeKernels = sizeof(kShapeKernels) / sizeof(kShapeKernels[0]);

}  // namespace kernels
}  // namespace kiln
