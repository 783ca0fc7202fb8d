// Shape and stride arithmetic over tensors, shared by the backends'
// lowerings (and written so the CPU kernels can use it too): equal shapes,
// products of dims, row-major and broadcast strides, the walk of an output
// over strided operands with its dims merged, and the split of a reduction
// into kept and reduced axes. Element strides throughout (not bytes).
// Plain C++17 without allocation; the templates compile under nvcc too.

#ifndef KILN_BACKENDS_COMMON_SHAPE_H_
#define KILN_BACKENDS_COMMON_SHAPE_H_

#include <stdint.h>

#include <type_traits>

#include "kiln/runtime/tensor.h"

namespace kiln::backends {

bool same_shape(const Tensor& a, const Tensor& b);

// Product of dims [begin, end) of `t` (those below its rank); 1 when empty.
int64_t dims_product(const Tensor& t, uint32_t begin, uint32_t end);

// Row-major strides of `rank` dims, or of `t`.
void contiguous_strides(const int64_t* dims, uint32_t rank, int64_t* out_strides);
void contiguous_strides(const Tensor& t, int64_t* out_strides);

// Strides of `t` seen as a tensor of rank `rank` broadcast to `out_dims`
// (NumPy rules: right-aligned, a dim of 1 stretches): 0 where t is
// broadcast. False when the shapes do not broadcast.
bool broadcast_strides(const Tensor& t, const int64_t* out_dims, uint32_t rank, int64_t* out_strides);

// A walk over `rank` dims, outermost first, and each of N operands' strides
// along them (0 where the operand is broadcast).
template <uint32_t N>
struct StridedWalk {
  uint32_t rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
};

// Drops dims of 1 and merges a dim into the one outside it where every
// operand steps over the pair as over one dim (its outer stride is its inner
// stride times the inner extent). The walk visits the same elements in the
// same order; rank 0 afterwards is a single element.
template <uint32_t N>
void collapse(StridedWalk<N>* walk) {
  uint32_t r = 0;
  for (uint32_t d = 0; d < walk->rank; ++d) {
    const int64_t dim = walk->dims[d];
    if (dim == 1) continue;
    bool merge = r > 0;
    for (uint32_t o = 0; o < N && merge; ++o) merge = walk->strides[o][r - 1] == walk->strides[o][d] * dim;
    const uint32_t at = merge ? r - 1 : r;
    walk->dims[at] = merge ? walk->dims[at] * dim : dim;
    for (uint32_t o = 0; o < N; ++o) walk->strides[o][at] = walk->strides[o][d];
    if (!merge) ++r;
  }
  walk->rank = r;
}

// The axes of a reduction's input split into two walks, kept (one output
// element each) and reduced (folded into it), each outermost first with
// its dims of 1 dropped and neighbours of the same kind merged where they
// are contiguous. Visiting the kept walk, and for each of its elements the
// reduced walk, reads the input in its own order.
struct ReduceGeometry {
  uint32_t kept_rank = 0;
  uint32_t reduced_rank = 0;
  int64_t kept_dims[kMaxRank] = {};
  int64_t kept_strides[kMaxRank] = {};
  int64_t reduced_dims[kMaxRank] = {};
  int64_t reduced_strides[kMaxRank] = {};
  int64_t kept_count = 1;     // output elements
  int64_t reduced_count = 1;  // input elements per output element
};

// `reduced[d]`: whether axis d of x is reduced (x.rank() entries).
ReduceGeometry reduce_geometry(const Tensor& x, const bool* reduced);

// Stores the geometry in a launch's arguments, whatever integer types `out`
// keeps it in: members outputs, count, kept_rank, reduced_rank and the
// arrays kept_dims, kept_strides, reduced_dims, reduced_strides (room for
// the ranks).
template <typename Args>
void store_reduce(const ReduceGeometry& g, Args* out) {
  using Extent = std::remove_reference_t<decltype(out->kept_dims[0])>;
  out->outputs = static_cast<decltype(out->outputs)>(g.kept_count);
  out->count = static_cast<decltype(out->count)>(g.reduced_count);
  out->kept_rank = g.kept_rank;
  out->reduced_rank = g.reduced_rank;
  for (uint32_t d = 0; d < g.kept_rank; ++d) {
    out->kept_dims[d] = static_cast<Extent>(g.kept_dims[d]);
    out->kept_strides[d] = static_cast<Extent>(g.kept_strides[d]);
  }
  for (uint32_t d = 0; d < g.reduced_rank; ++d) {
    out->reduced_dims[d] = static_cast<Extent>(g.reduced_dims[d]);
    out->reduced_strides[d] = static_cast<Extent>(g.reduced_strides[d]);
  }
}

}  // namespace kiln::backends

#endif  // KILN_BACKENDS_COMMON_SHAPE_H_
