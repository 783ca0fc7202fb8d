#include "kiln/backends/common/shape.h"

namespace kiln::backends {

bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.rank() != b.rank()) return false;
  for (uint32_t d = 0; d < a.rank(); ++d) {
    if (a.dim(d) != b.dim(d)) return false;
  }
  return true;
}

int64_t dims_product(const Tensor& t, uint32_t begin, uint32_t end) {
  int64_t n = 1;
  for (uint32_t d = begin; d < end && d < t.rank(); ++d) n *= t.dim(d);
  return n;
}

void contiguous_strides(const int64_t* dims, uint32_t rank, int64_t* out_strides) {
  int64_t stride = 1;
  for (int32_t d = static_cast<int32_t>(rank) - 1; d >= 0; --d) {
    out_strides[d] = stride;
    stride *= dims[d];
  }
}

void contiguous_strides(const Tensor& t, int64_t* out_strides) { contiguous_strides(t.dims(), t.rank(), out_strides); }

bool broadcast_strides(const Tensor& t, const int64_t* out_dims, uint32_t rank, int64_t* out_strides) {
  if (t.rank() > rank) return false;
  const uint32_t shift = rank - t.rank();
  int64_t stride = 1;
  for (int32_t d = static_cast<int32_t>(rank) - 1; d >= 0; --d) {
    if (static_cast<uint32_t>(d) < shift) {
      out_strides[d] = 0;
      continue;
    }
    const int64_t dim = t.dim(static_cast<uint32_t>(d) - shift);
    if (dim == out_dims[d]) {
      out_strides[d] = dim == 1 ? 0 : stride;
    } else if (dim == 1) {
      out_strides[d] = 0;
    } else {
      return false;
    }
    stride *= dim;
  }
  return true;
}

// From the innermost axis out, each axis joins the last group of its kind
// when that group is the one just before it and contiguous with it (the
// group's stride times its extent is the axis's stride); the groups are
// then put outermost first.
ReduceGeometry reduce_geometry(const Tensor& x, const bool* reduced) {
  ReduceGeometry g;
  int64_t strides[kMaxRank];
  contiguous_strides(x, strides);
  int64_t dims_rev[2][kMaxRank], strides_rev[2][kMaxRank];
  uint32_t count[2] = {0, 0};
  int last = -1;
  for (int32_t d = static_cast<int32_t>(x.rank()) - 1; d >= 0; --d) {
    const int64_t dim = x.dim(static_cast<uint32_t>(d));
    if (dim == 1) continue;
    const int kind = reduced[d] ? 1 : 0;
    uint32_t& n = count[kind];
    if (kind == last && strides_rev[kind][n - 1] * dims_rev[kind][n - 1] == strides[d]) {
      dims_rev[kind][n - 1] *= dim;
    } else {
      dims_rev[kind][n] = dim;
      strides_rev[kind][n] = strides[d];
      ++n;
    }
    last = kind;
    (kind ? g.reduced_count : g.kept_count) *= dim;
  }
  g.kept_rank = count[0];
  g.reduced_rank = count[1];
  for (uint32_t i = 0; i < count[0]; ++i) {
    g.kept_dims[i] = dims_rev[0][count[0] - 1 - i];
    g.kept_strides[i] = strides_rev[0][count[0] - 1 - i];
  }
  for (uint32_t i = 0; i < count[1]; ++i) {
    g.reduced_dims[i] = dims_rev[1][count[1] - 1 - i];
    g.reduced_strides[i] = strides_rev[1][count[1] - 1 - i];
  }
  return g;
}

}  // namespace kiln::backends
