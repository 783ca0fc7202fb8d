// Kernels that move elements by index: selection, one-hot encoding,
// scatters and gathers, sequence reversal. Parameters are GenericParams (schema/program.fbs):
//
//   TopK         float32/float64/int32/int64 X; outputs Values (X's dtype)
//                and Indices (int64), both X's shape with k on the axis;
//                one int64 scratch tensor of at least k elements; ints
//                [axis, k, largest]. The k largest (largest 1) or smallest
//                (0) along the axis, always sorted; equal values keep the
//                lower index first, NaN counts as larger than any number.
//   OneHot       indices (int32/int64/float32/float64), values (2 elements:
//                off, on, any dtype); ints [axis, depth]. The output is the
//                indices' shape with depth inserted at the axis; an index
//                outside [-depth, depth) gives a row of off values.
//   ScatterElements  data, indices (int32/int64, updates' shape), updates;
//                ints [axis, reduction]: out = data, then out[..indices
//                [..i..]..] op= updates[..i..] along the axis.
//   ScatterND    data, indices (int32/int64, [..., q]), updates
//                (indices.shape[:-1] + data.shape[q:]); ints [reduction]:
//                out = data, then each index tuple's slice op= its updates.
//   GatherND     data, indices (int32/int64, [..., q]); ints [batch_dims]:
//                out[b, j] = data[b][indices[b, j]], the output
//                indices.shape[:-1] + data.shape[batch_dims + q:].
//   ReverseSequence  X (rank >= 2, any dtype), sequence_lens (int32/int64,
//                one per batch); ints [batch_axis, time_axis], 0 and 1 in
//                either order: the first sequence_lens[b] steps of batch b
//                reversed along the time axis, the rest copied. A length
//                outside [0, steps] fails the call before anything is
//                written.
//
// Reduction (ScatterElements, ScatterND): 0 none (assign, any dtype), 1 add,
// 2 mul, 3 max, 4 min (float32/float64/int32/int64); later updates of the
// same element apply after earlier ones, in the updates' order. Indices may
// be negative (counting from the end of their axis); an index out of range
// fails the call with kInvalidInput before anything outside the output is
// touched: the checks at load time cannot see index values, so every index
// is checked as it is read.

#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "kernel_util.h"

namespace kiln {
namespace kernels {
namespace {

// ints of ScatterElements/ScatterND. The planner writes these numbers.
enum Reduction : int64_t { kNone = 0, kAdd, kMul, kMax, kMin, kNumReductions };

bool is_index_dtype(DType d) { return d == DType::INT32 || d == DType::INT64; }
bool is_arith_dtype(DType d) {
  return d == DType::FLOAT32 || d == DType::FLOAT64 || d == DType::INT32 || d == DType::INT64;
}

int64_t index_at(const Tensor& indices, int64_t i) {
  return indices.dtype() == DType::INT64 ? indices.data_as<const int64_t>()[i] : indices.data_as<const int32_t>()[i];
}

// `at` normalised against an axis of `extent`; false (with a message naming
// the kernel and node) when it lies outside [-extent, extent).
bool normalise_index(const KernelArgs& args, const char* kernel, int64_t* at, int64_t extent) {
  if (*at < 0) *at += extent;
  if (*at >= 0 && *at < extent) return true;
  KILN_LOG(ERROR, "kernel %s (node '%s'): index %lld out of range for an axis of %lld", kernel, args.node_name,
           static_cast<long long>(*at < 0 ? *at - extent : *at), static_cast<long long>(extent));
  return false;
}

// ---------------------------------------------------------------------------
// TopK

// NaN is larger than every number, so the order is total.
template <typename T>
bool greater(T a, T b) {
  if (isnan(static_cast<double>(a))) return !isnan(static_cast<double>(b));
  return a > b;
}

// Element a (at index ia) comes before element b in the output.
template <typename T>
bool comes_first(T a, int64_t ia, T b, int64_t ib, bool largest) {
  const bool ab = largest ? greater(a, b) : greater(b, a);
  const bool ba = largest ? greater(b, a) : greater(a, b);
  return ab || (!ba && ia < ib);
}

Error check_topk(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 2, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 3, 0));
  const Tensor& x = args.in(0);
  const Tensor& values = args.out(0);
  const Tensor& indices = args.out(1);
  KILN_KERNEL_CHECK(args, is_arith_dtype(x.dtype()), "unsupported dtype %s", dtype_name(x.dtype()));
  KILN_KERNEL_CHECK(args, values.dtype() == x.dtype() && indices.dtype() == DType::INT64,
                    "outputs must be %s and int64", dtype_name(x.dtype()));
  const int64_t axis = param_int(args, 0);
  const int64_t k = param_int(args, 1);
  KILN_KERNEL_CHECK(args, axis >= 0 && axis < static_cast<int64_t>(x.rank()), "axis out of range");
  KILN_KERNEL_CHECK(args, k >= 0 && k <= x.dim(static_cast<uint32_t>(axis)), "k out of range");
  KILN_KERNEL_CHECK(args, values.rank() == x.rank(), "output rank differs");
  for (uint32_t d = 0; d < x.rank(); ++d) {
    KILN_KERNEL_CHECK(args, values.dim(d) == (d == axis ? k : x.dim(d)), "output dim %u differs", d);
  }
  KILN_RETURN_IF_ERROR(check_same_shape(args, values, indices, "outputs"));
  const Tensor& scratch = *args.scratch[0];
  KILN_KERNEL_CHECK(args, scratch.dtype() == DType::INT64 && scratch.numel() >= k, "scratch must hold %lld int64",
                    static_cast<long long>(k));
  return Error::kOk;
}

// One slice: heap[0..k) becomes the indices of the k first elements, in
// order. While scanning, heap is a binary heap whose root is the kept
// element that comes last, so a new element replaces it when it comes
// before it; at the end the heap is sorted by moving the root to the back.
template <typename T>
void topk_slice(const T* x, int64_t n, int64_t stride, int64_t k, bool largest, int64_t* heap) {
  // Element i lies below element j in the heap when j comes later.
  auto later = [&](int64_t i, int64_t j) { return comes_first(x[j * stride], j, x[i * stride], i, largest); };
  auto sift_down = [&](int64_t at, int64_t size) {
    for (;;) {
      int64_t top = at;
      const int64_t l = 2 * at + 1, r = l + 1;
      if (l < size && later(heap[l], heap[top])) top = l;
      if (r < size && later(heap[r], heap[top])) top = r;
      if (top == at) return;
      const int64_t t = heap[at];
      heap[at] = heap[top];
      heap[top] = t;
      at = top;
    }
  };
  if (k == 0) return;
  for (int64_t i = 0; i < k; ++i) heap[i] = i;
  for (int64_t i = k / 2; i-- > 0;) sift_down(i, k);
  for (int64_t i = k; i < n; ++i) {
    if (later(heap[0], i)) {
      heap[0] = i;
      sift_down(0, k);
    }
  }
  for (int64_t size = k; size > 1; --size) {
    const int64_t t = heap[0];
    heap[0] = heap[size - 1];
    heap[size - 1] = t;
    sift_down(0, size - 1);
  }
}

template <typename T>
void run_topk_typed(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const uint32_t axis = static_cast<uint32_t>(param_int(args, 0));
  const int64_t k = param_int(args, 1);
  const bool largest = param_int(args, 2) != 0;
  const int64_t outer = dims_product(x, 0, axis);
  const int64_t inner = dims_product(x, axis + 1, x.rank());
  const int64_t n = x.dim(axis);
  const T* in = x.data_as<const T>();
  T* values = args.out(0).data_as<T>();
  int64_t* indices = args.out(1).data_as<int64_t>();
  int64_t* heap = args.scratch[0]->data_as<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const T* slice = in + o * n * inner + j;
      topk_slice(slice, n, inner, k, largest, heap);
      for (int64_t s = 0; s < k; ++s) {
        const int64_t at = (o * k + s) * inner + j;
        values[at] = slice[heap[s] * inner];
        indices[at] = heap[s];
      }
    }
  }
}

Error run_topk(const KernelArgs& args) {
  switch (args.in(0).dtype()) {
    case DType::FLOAT32: run_topk_typed<float>(args); break;
    case DType::FLOAT64: run_topk_typed<double>(args); break;
    case DType::INT32: run_topk_typed<int32_t>(args); break;
    default: run_topk_typed<int64_t>(args); break;
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// OneHot

Error check_one_hot(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 2, 0));
  const Tensor& indices = args.in(0);
  const Tensor& values = args.in(1);
  const Tensor& out = args.out(0);
  const DType d = indices.dtype();
  KILN_KERNEL_CHECK(args, is_arith_dtype(d), "indices are %s", dtype_name(d));
  KILN_KERNEL_CHECK(args, values.numel() == 2 && values.dtype() == out.dtype(),
                    "values must be 2 elements of the output's dtype");
  const int64_t axis = param_int(args, 0);
  const int64_t depth = param_int(args, 1);
  KILN_KERNEL_CHECK(args, out.rank() == indices.rank() + 1 && axis >= 0 && axis < static_cast<int64_t>(out.rank()),
                    "axis out of range");
  for (uint32_t d2 = 0, i = 0; d2 < out.rank(); ++d2) {
    const int64_t want = d2 == axis ? depth : indices.dim(i++);
    KILN_KERNEL_CHECK(args, out.dim(d2) == want, "output dim %u is %lld, expected %lld", d2,
                      static_cast<long long>(out.dim(d2)), static_cast<long long>(want));
  }
  return Error::kOk;
}

// Index i of `indices` as an integer in [0, depth), or -1 when it is
// outside [-depth, depth) (floats are truncated toward zero, as a cast).
int64_t one_hot_index(const Tensor& indices, int64_t i, int64_t depth) {
  double v;
  switch (indices.dtype()) {
    case DType::INT64: {
      int64_t at = indices.data_as<const int64_t>()[i];
      if (at < 0) at += depth;
      return at >= 0 && at < depth ? at : -1;
    }
    case DType::INT32: v = indices.data_as<const int32_t>()[i]; break;
    case DType::FLOAT32: v = indices.data_as<const float>()[i]; break;
    default: v = indices.data_as<const double>()[i]; break;
  }
  v = trunc(v);
  if (!(v >= -static_cast<double>(depth) && v < static_cast<double>(depth))) return -1;  // NaN too
  int64_t at = static_cast<int64_t>(v);
  if (at < 0) at += depth;
  return at;
}

Error run_one_hot(const KernelArgs& args) {
  const Tensor& indices = args.in(0);
  const Tensor& out = args.out(0);
  const uint32_t axis = static_cast<uint32_t>(param_int(args, 0));
  const int64_t depth = param_int(args, 1);
  const int64_t outer = dims_product(indices, 0, axis);
  const int64_t inner = dims_product(indices, axis, indices.rank());
  const size_t elem = dtype_size(out.dtype());
  const uint8_t* off = static_cast<const uint8_t*>(args.in(1).data());
  const uint8_t* on = off + elem;
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t hot = one_hot_index(indices, o * inner + i, depth);
      for (int64_t d = 0; d < depth; ++d) {
        memcpy(dst + static_cast<size_t>((o * depth + d) * inner + i) * elem, d == hot ? on : off, elem);
      }
    }
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Scatters

template <typename T>
void combine(T* dst, const T* src, int64_t n, int64_t reduction) {
  for (int64_t i = 0; i < n; ++i) {
    switch (reduction) {
      case kAdd: dst[i] = static_cast<T>(dst[i] + src[i]); break;
      case kMul: dst[i] = static_cast<T>(dst[i] * src[i]); break;
      case kMax: dst[i] = src[i] > dst[i] ? src[i] : dst[i]; break;
      default: dst[i] = src[i] < dst[i] ? src[i] : dst[i]; break;
    }
  }
}

// `n` elements of `src` into `dst` by the reduction.
void apply_update(void* dst, const void* src, int64_t n, DType dtype, int64_t reduction) {
  switch (reduction == kNone ? DType::BOOL : dtype) {
    case DType::FLOAT32: combine(static_cast<float*>(dst), static_cast<const float*>(src), n, reduction); break;
    case DType::FLOAT64: combine(static_cast<double*>(dst), static_cast<const double*>(src), n, reduction); break;
    case DType::INT32: combine(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n, reduction); break;
    case DType::INT64: combine(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), n, reduction); break;
    default: memcpy(dst, src, static_cast<size_t>(n) * dtype_size(dtype)); break;
  }
}

// The output starts as a copy of data (nothing to copy when the planner
// placed it over data).
void copy_data(const KernelArgs& args) {
  if (args.out(0).data() != args.in(0).data()) {
    memmove(args.out(0).data(), args.in(0).data(),
            static_cast<size_t>(args.in(0).numel()) * dtype_size(args.in(0).dtype()));
  }
}

Error check_reduction(const KernelArgs& args, int64_t reduction, DType dtype) {
  KILN_KERNEL_CHECK(args, reduction >= kNone && reduction < kNumReductions, "unknown reduction %lld",
                    static_cast<long long>(reduction));
  KILN_KERNEL_CHECK(args, reduction == kNone || is_arith_dtype(dtype), "reduction over %s", dtype_name(dtype));
  return Error::kOk;
}

Error check_scatter_elements(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 2, 0));
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const Tensor& updates = args.in(2);
  KILN_KERNEL_CHECK(args, is_index_dtype(indices.dtype()), "indices are %s", dtype_name(indices.dtype()));
  KILN_KERNEL_CHECK(args, updates.dtype() == data.dtype() && args.out(0).dtype() == data.dtype(),
                    "data, updates and output differ in dtype");
  KILN_RETURN_IF_ERROR(check_same_shape(args, data, args.out(0), "data and output"));
  KILN_RETURN_IF_ERROR(check_same_shape(args, indices, updates, "indices and updates"));
  const int64_t axis = param_int(args, 0);
  KILN_KERNEL_CHECK(args, axis >= 0 && axis < static_cast<int64_t>(data.rank()), "axis out of range");
  for (uint32_t d = 0; d < data.rank(); ++d) {
    KILN_KERNEL_CHECK(args, d == axis || indices.dim(d) <= data.dim(d), "indices are larger than data on axis %u", d);
  }
  return check_reduction(args, param_int(args, 1), data.dtype());
}

Error run_scatter_elements(const KernelArgs& args) {
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const uint32_t axis = static_cast<uint32_t>(param_int(args, 0));
  const int64_t reduction = param_int(args, 1);
  const uint32_t rank = data.rank();
  const size_t elem = dtype_size(data.dtype());
  copy_data(args);
  int64_t stride[kMaxRank];
  contiguous_strides(data.dims(), rank, stride);
  const int64_t extent = data.dim(axis);
  int64_t index[kMaxRank] = {};
  const uint8_t* src = static_cast<const uint8_t*>(args.in(2).data());
  uint8_t* dst = static_cast<uint8_t*>(args.out(0).data());
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t at = index_at(indices, i);
    if (!normalise_index(args, "ScatterElements", &at, extent)) return Error::kInvalidInput;
    int64_t offset = 0;
    for (uint32_t d = 0; d < rank; ++d) offset += (d == axis ? at : index[d]) * stride[d];
    apply_update(dst + static_cast<size_t>(offset) * elem, src + static_cast<size_t>(i) * elem, 1, data.dtype(),
                 reduction);
    for (uint32_t d = rank; d-- > 0;) {  // next index of updates
      if (++index[d] < indices.dim(d)) break;
      index[d] = 0;
    }
  }
  return Error::kOk;
}

// The index tuples of ScatterND and GatherND: indices [..., q], each tuple
// naming a slice of q leading dims of `data` from dim `first`.
Error check_index_tuples(const KernelArgs& args, const Tensor& data, const Tensor& indices, uint32_t first) {
  KILN_KERNEL_CHECK(args, is_index_dtype(indices.dtype()), "indices are %s", dtype_name(indices.dtype()));
  KILN_KERNEL_CHECK(args, indices.rank() >= 1 && indices.rank() > first, "indices have rank %u", indices.rank());
  const int64_t q = indices.dim(indices.rank() - 1);
  KILN_KERNEL_CHECK(args, q >= 1 && first + q <= data.rank(), "index tuples of %lld for data of rank %u",
                    static_cast<long long>(q), data.rank());
  return Error::kOk;
}

// Offset (in elements) in `data` from dim `first` of the tuple at `tuple`;
// false when an index is out of range.
bool tuple_offset(const KernelArgs& args, const char* kernel, const Tensor& data, const Tensor& indices, uint32_t first,
                  int64_t tuple, int64_t* out_offset) {
  const int64_t q = indices.dim(indices.rank() - 1);
  int64_t offset = 0;
  for (int64_t t = 0; t < q; ++t) {
    const uint32_t d = first + static_cast<uint32_t>(t);
    int64_t at = index_at(indices, tuple * q + t);
    if (!normalise_index(args, kernel, &at, data.dim(d))) return false;
    offset = offset * data.dim(d) + at;
  }
  *out_offset = offset * dims_product(data, first + static_cast<uint32_t>(q), data.rank());
  return true;
}

Error check_scatter_nd(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 0));
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const Tensor& updates = args.in(2);
  KILN_KERNEL_CHECK(args, updates.dtype() == data.dtype() && args.out(0).dtype() == data.dtype(),
                    "data, updates and output differ in dtype");
  KILN_RETURN_IF_ERROR(check_same_shape(args, data, args.out(0), "data and output"));
  KILN_RETURN_IF_ERROR(check_index_tuples(args, data, indices, 0));
  const uint32_t q = static_cast<uint32_t>(indices.dim(indices.rank() - 1));
  // updates: indices.shape[:-1] + data.shape[q:]
  KILN_KERNEL_CHECK(args, updates.rank() == indices.rank() - 1 + data.rank() - q, "updates have rank %u",
                    updates.rank());
  for (uint32_t d = 0; d < updates.rank(); ++d) {
    const int64_t want = d + 1 < indices.rank() ? indices.dim(d) : data.dim(d - (indices.rank() - 1) + q);
    KILN_KERNEL_CHECK(args, updates.dim(d) == want, "updates dim %u differs", d);
  }
  return check_reduction(args, param_int(args, 0), data.dtype());
}

Error run_scatter_nd(const KernelArgs& args) {
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const int64_t reduction = param_int(args, 0);
  const size_t elem = dtype_size(data.dtype());
  copy_data(args);
  const int64_t q = indices.dim(indices.rank() - 1);
  const int64_t tuples = dims_product(indices, 0, indices.rank() - 1);
  const int64_t slice = dims_product(data, static_cast<uint32_t>(q), data.rank());
  const uint8_t* src = static_cast<const uint8_t*>(args.in(2).data());
  uint8_t* dst = static_cast<uint8_t*>(args.out(0).data());
  for (int64_t j = 0; j < tuples; ++j) {
    int64_t offset = 0;
    if (!tuple_offset(args, "ScatterND", data, indices, 0, j, &offset)) return Error::kInvalidInput;
    apply_update(dst + static_cast<size_t>(offset) * elem, src + static_cast<size_t>(j * slice) * elem, slice,
                 data.dtype(), reduction);
  }
  return Error::kOk;
}

Error check_gather_nd(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 0));
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const Tensor& out = args.out(0);
  const int64_t b = param_int(args, 0);
  KILN_KERNEL_CHECK(args, b >= 0 && b < static_cast<int64_t>(indices.rank()) && b < static_cast<int64_t>(data.rank()),
                    "batch_dims out of range");
  const uint32_t batch = static_cast<uint32_t>(b);
  KILN_RETURN_IF_ERROR(check_index_tuples(args, data, indices, batch));
  for (uint32_t d = 0; d < batch; ++d) {
    KILN_KERNEL_CHECK(args, data.dim(d) == indices.dim(d), "batch dim %u differs", d);
  }
  KILN_KERNEL_CHECK(args, out.dtype() == data.dtype(), "output dtype differs");
  const uint32_t q = static_cast<uint32_t>(indices.dim(indices.rank() - 1));
  KILN_KERNEL_CHECK(args, out.rank() == indices.rank() - 1 + data.rank() - batch - q, "output has rank %u", out.rank());
  for (uint32_t d = 0; d < out.rank(); ++d) {
    const int64_t want = d + 1 < indices.rank() ? indices.dim(d) : data.dim(d - (indices.rank() - 1) + batch + q);
    KILN_KERNEL_CHECK(args, out.dim(d) == want, "output dim %u differs", d);
  }
  return Error::kOk;
}

Error run_gather_nd(const KernelArgs& args) {
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const uint32_t batch = static_cast<uint32_t>(param_int(args, 0));
  const size_t elem = dtype_size(data.dtype());
  const int64_t q = indices.dim(indices.rank() - 1);
  const int64_t batches = dims_product(data, 0, batch);
  const int64_t batch_size = dims_product(data, batch, data.rank());
  const int64_t tuples = dims_product(indices, batch, indices.rank() - 1);
  const int64_t slice = dims_product(data, batch + static_cast<uint32_t>(q), data.rank());
  const uint8_t* src = static_cast<const uint8_t*>(data.data());
  uint8_t* dst = static_cast<uint8_t*>(args.out(0).data());
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t j = 0; j < tuples; ++j) {
      int64_t offset = 0;
      if (!tuple_offset(args, "GatherND", data, indices, batch, bi * tuples + j, &offset)) {
        return Error::kInvalidInput;
      }
      memcpy(dst + static_cast<size_t>((bi * tuples + j) * slice) * elem,
             src + static_cast<size_t>(bi * batch_size + offset) * elem, static_cast<size_t>(slice) * elem);
    }
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// ReverseSequence

Error check_reverse_sequence(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 2, 0));
  const Tensor& x = args.in(0);
  const Tensor& lens = args.in(1);
  KILN_KERNEL_CHECK(args, x.rank() >= 2 && args.out(0).dtype() == x.dtype(), "expects rank >= 2, one dtype");
  KILN_RETURN_IF_ERROR(check_same_shape(args, x, args.out(0), "input and output"));
  const int64_t batch_axis = param_int(args, 0), time_axis = param_int(args, 1);
  KILN_KERNEL_CHECK(args, (batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0),
                    "batch_axis and time_axis must be 0 and 1");
  KILN_KERNEL_CHECK(args, is_index_dtype(lens.dtype()) && lens.numel() == x.dim(static_cast<uint32_t>(batch_axis)),
                    "sequence_lens must be one int32/int64 per batch");
  return Error::kOk;
}

Error run_reverse_sequence(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& lens = args.in(1);
  const bool time_first = param_int(args, 1) == 0;
  const int64_t steps = x.dim(time_first ? 0 : 1), batches = x.dim(time_first ? 1 : 0);
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t len = index_at(lens, b);
    if (len < 0 || len > steps) {
      KILN_LOG(ERROR, "kernel ReverseSequence (node '%s'): sequence length %lld out of range [0, %lld]", args.node_name,
               static_cast<long long>(len), static_cast<long long>(steps));
      return Error::kInvalidInput;
    }
  }
  const size_t row = static_cast<size_t>(dims_product(x, 2, x.rank())) * dtype_size(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.data());
  uint8_t* dst = static_cast<uint8_t*>(args.out(0).data());
  auto at = [&](int64_t t, int64_t b) {
    return static_cast<size_t>(time_first ? t * batches + b : b * steps + t) * row;
  };
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t len = index_at(lens, b);
    for (int64_t t = 0; t < steps; ++t) memcpy(dst + at(t, b), src + at(t < len ? len - 1 - t : t, b), row);
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_INDEX_KERNELS(K)                                                      \
  K(TopK, check_topk, run_topk, 0)                                                 \
  K(OneHot, check_one_hot, run_one_hot, 0)                                         \
  K(ScatterElements, check_scatter_elements, run_scatter_elements, kInplaceInput0) \
  K(ScatterND, check_scatter_nd, run_scatter_nd, kInplaceInput0)                   \
  K(GatherND, check_gather_nd, run_gather_nd, 0)                                   \
  K(ReverseSequence, check_reverse_sequence, run_reverse_sequence, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_INDEX_KERNELS)
const KernelEntry kIndexKernels[] = {KILN_INDEX_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumIndexKernels = sizeof(kIndexKernels) / sizeof(kIndexKernels[0]);

}  // namespace kernels
}  // namespace kiln
