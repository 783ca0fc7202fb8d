// Reduction kernels: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and
// ReduceSumSquare over any set of axes (ReduceParams: sorted, non-negative,
// at least one), keepdims or not; ArgMax and ArgMin over one axis.
//
// The input is seen as two interleaved index spaces: the kept axes, which
// address the output element, and the reduced axes, which the kernel walks
// for each output element. Adjacent axes of the same kind are merged first,
// so a reduction over trailing axes walks contiguous memory.
//
// Floating-point sums accumulate in double. Integer sums and products wrap
// (two's complement) instead of overflowing; integer means truncate. An empty
// reduction gives the operation's identity (0 for sums, 1 for products, the
// lowest/highest value for Max/Min, NaN for a float mean).

#include <math.h>

#include <limits>
#include <type_traits>

#include "cpu_kernels.h"
#include "kernel_util.h"
#include "parallel.h"

namespace kiln {
namespace kernels {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// The input's axes after merging, split into kept and reduced ones.
struct ReduceGeometry {
  uint32_t kept_rank = 0, reduced_rank = 0;
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank];
  int64_t reduced_dims[kMaxRank], reduced_strides[kMaxRank];
  int64_t reduced_count = 1;
};

bool axis_reduced(const fb::ReduceParams* p, uint32_t axis) {
  for (uint32_t i = 0; i < p->axes()->size(); ++i) {
    if (static_cast<uint32_t>(p->axes()->Get(i)) == axis) return true;
  }
  return false;
}

// The output shape of reducing x over p's axes (which are valid).
bool check_reduce_shape(const Tensor& x, const Tensor& y, const fb::ReduceParams* p) {
  const uint32_t out_rank = p->keepdims() ? x.rank() : x.rank() - p->axes()->size();
  if (y.rank() != out_rank) return false;
  uint32_t o = 0;
  for (uint32_t d = 0; d < x.rank(); ++d) {
    if (axis_reduced(p, d)) {
      if (p->keepdims() && y.dim(o++) != 1) return false;
    } else if (y.dim(o++) != x.dim(d)) {
      return false;
    }
  }
  return true;
}

ReduceGeometry reduce_geometry(const Tensor& x, const fb::ReduceParams* p) {
  ReduceGeometry g;
  int64_t strides[kMaxRank];
  contiguous_strides(x.dims(), x.rank(), strides);
  // Walk from the innermost axis out, merging an axis into the previous
  // group of the same kind (both are contiguous: stride * dim == next stride).
  int last_kind = -1;
  int64_t kept_rev_dims[kMaxRank], kept_rev_strides[kMaxRank];
  int64_t red_rev_dims[kMaxRank], red_rev_strides[kMaxRank];
  uint32_t nk = 0, nr = 0;
  for (int32_t d = static_cast<int32_t>(x.rank()) - 1; d >= 0; --d) {
    const uint32_t axis = static_cast<uint32_t>(d);
    const int64_t dim = x.dim(axis);
    if (dim == 1) continue;  // contributes nothing to either walk
    const int kind = axis_reduced(p, axis) ? 1 : 0;
    int64_t* dims = kind ? red_rev_dims : kept_rev_dims;
    int64_t* strs = kind ? red_rev_strides : kept_rev_strides;
    uint32_t& n = kind ? nr : nk;
    if (kind == last_kind && strs[n - 1] * dims[n - 1] == strides[axis]) {
      dims[n - 1] *= dim;
    } else {
      dims[n] = dim;
      strs[n] = strides[axis];
      ++n;
    }
    last_kind = kind;
    if (kind) g.reduced_count *= dim;
  }
  g.kept_rank = nk;
  g.reduced_rank = nr;
  for (uint32_t i = 0; i < nk; ++i) {
    g.kept_dims[i] = kept_rev_dims[nk - 1 - i];
    g.kept_strides[i] = kept_rev_strides[nk - 1 - i];
  }
  for (uint32_t i = 0; i < nr; ++i) {
    g.reduced_dims[i] = red_rev_dims[nr - 1 - i];
    g.reduced_strides[i] = red_rev_strides[nr - 1 - i];
  }
  return g;
}

// Calls f(value) for every input element reduced into one output element
// whose first input element is `base`.
template <typename T, typename F>
void for_each_reduced(const ReduceGeometry& g, const T* base, F f) {
  if (g.reduced_rank == 0) {
    f(base[0]);
    return;
  }
  const uint32_t r = g.reduced_rank;
  const int64_t inner = g.reduced_dims[r - 1];
  const int64_t inner_stride = g.reduced_strides[r - 1];
  int64_t index[kMaxRank] = {};
  int64_t offset = 0;
  for (int64_t done = 0; done < g.reduced_count; done += inner) {
    const T* p = base + offset;
    for (int64_t i = 0; i < inner; ++i) f(p[i * inner_stride]);
    for (int32_t d = static_cast<int32_t>(r) - 2; d >= 0; --d) {
      offset += g.reduced_strides[d];
      if (++index[d] < g.reduced_dims[d]) break;
      offset -= g.reduced_strides[d] * index[d];
      index[d] = 0;
    }
  }
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point<T>::value;

template <ReduceKind K, typename T>
T reduce_one(const ReduceGeometry& g, const T* base) {
  const int64_t count = g.reduced_count;
  if constexpr (K == ReduceKind::kMax || K == ReduceKind::kMin) {
    // NaN wins: once acc is NaN no comparison replaces it.
    T acc = K == ReduceKind::kMax
                ? (kIsFloat<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest())
                : (kIsFloat<T> ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max());
    for_each_reduced(g, base, [&acc](T v) {
      if (K == ReduceKind::kMax ? (v > acc || v != v) : (v < acc || v != v)) {
        if (acc == acc) acc = v;
      }
    });
    return acc;
  } else if constexpr (kIsFloat<T>) {
    if constexpr (K == ReduceKind::kLogSumExp) {
      // log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the maximum.
      double m = -INFINITY;
      for_each_reduced(g, base, [&m](T v) { m = v > m || v != v ? static_cast<double>(v) : m; });
      if (isinf(m) || isnan(m)) return static_cast<T>(m);
      double sum = 0.0;
      for_each_reduced(g, base, [&sum, m](T v) { sum += exp(static_cast<double>(v) - m); });
      return static_cast<T>(m + log(sum));
    } else {
      double acc = K == ReduceKind::kProd ? 1.0 : 0.0;
      for_each_reduced(g, base, [&acc](T value) {
        const double v = static_cast<double>(value);
        switch (K) {
          case ReduceKind::kProd: acc *= v; break;
          case ReduceKind::kL1: acc += fabs(v); break;
          case ReduceKind::kL2:
          case ReduceKind::kSumSquare: acc += v * v; break;
          default: acc += v; break;
        }
      });
      switch (K) {
        case ReduceKind::kMean: return static_cast<T>(acc / static_cast<double>(count));
        case ReduceKind::kL2: return static_cast<T>(sqrt(acc));
        case ReduceKind::kLogSum: return static_cast<T>(log(acc));
        default: return static_cast<T>(acc);
      }
    }
  } else {
    using U = typename std::make_unsigned<T>::type;
    U acc = K == ReduceKind::kProd ? U(1) : U(0);
    for_each_reduced(g, base, [&acc](T value) {
      const U v = static_cast<U>(value);
      switch (K) {
        case ReduceKind::kProd: acc = static_cast<U>(acc * v); break;
        case ReduceKind::kL1: acc = static_cast<U>(acc + (value < 0 ? static_cast<U>(U(0) - v) : v)); break;
        case ReduceKind::kSumSquare: acc = static_cast<U>(acc + static_cast<U>(v * v)); break;
        default: acc = static_cast<U>(acc + v); break;
      }
    });
    if (K == ReduceKind::kMean) {
      return count > 0 ? static_cast<T>(static_cast<T>(acc) / static_cast<T>(count)) : T(0);
    }
    return static_cast<T>(acc);
  }
}

// Output elements [o0, o1).
template <ReduceKind K, typename T>
void reduce_typed(const Tensor& x, const Tensor& y, const ReduceGeometry& g, int64_t o0, int64_t o1) {
  if (o0 >= o1) return;  // nothing to compute (an empty output has a kept axis of 0)
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  const uint32_t k = g.kept_rank;
  // The index over the kept axes and the input offset of element o0.
  int64_t index[kMaxRank] = {};
  int64_t offset = 0;
  int64_t rest = o0;
  for (int32_t d = static_cast<int32_t>(k) - 1; d >= 0; --d) {
    index[d] = rest % g.kept_dims[d];
    rest /= g.kept_dims[d];
    offset += index[d] * g.kept_strides[d];
  }
  for (int64_t o = o0; o < o1; ++o) {
    out[o] = reduce_one<K, T>(g, in + offset);
    for (int32_t d = static_cast<int32_t>(k) - 1; d >= 0; --d) {
      offset += g.kept_strides[d];
      if (++index[d] < g.kept_dims[d]) break;
      offset -= g.kept_strides[d] * index[d];
      index[d] = 0;
    }
  }
}

constexpr bool float_only(ReduceKind k) {
  return k == ReduceKind::kL2 || k == ReduceKind::kLogSum || k == ReduceKind::kLogSumExp;
}

template <ReduceKind K>
Error check_reduce(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const DType dtype = x.dtype();
  const bool is_float = dtype == DType::FLOAT32 || dtype == DType::FLOAT64;
  KILN_KERNEL_CHECK(args, is_float || (!float_only(K) && (dtype == DType::INT32 || dtype == DType::INT64)),
                    "unsupported dtype %s", dtype_name(dtype));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, dtype));
  const auto* p = args.params<fb::ReduceParams>();
  KILN_KERNEL_CHECK(args, p != nullptr && p->axes() != nullptr && p->axes()->size() > 0,
                    "missing ReduceParams or axes");
  KILN_KERNEL_CHECK(args, x.rank() <= kMaxRank, "rank above %u", kMaxRank);
  int32_t previous = -1;
  for (uint32_t i = 0; i < p->axes()->size(); ++i) {
    const int32_t a = p->axes()->Get(i);
    KILN_KERNEL_CHECK(args, a > previous && static_cast<uint32_t>(a) < x.rank(),
                      "axes must be increasing and below the rank");
    previous = a;
  }
  KILN_KERNEL_CHECK(args, check_reduce_shape(x, y, p), "output shape does not match the reduction");
  return Error::kOk;
}

template <ReduceKind K>
Error run_reduce(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const ReduceGeometry g = reduce_geometry(x, args.params<fb::ReduceParams>());
  // Output elements are independent: split them.
  const int64_t n = y.numel();
  const int64_t tasks = parallel_tasks(args.pool, n * g.reduced_count, n, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t o0, o1;
    parallel_range(n, tasks, t, 1, &o0, &o1);
    switch (x.dtype()) {
      case DType::FLOAT64: reduce_typed<K, double>(x, y, g, o0, o1); break;
      case DType::INT32:
        if constexpr (!float_only(K)) reduce_typed<K, int32_t>(x, y, g, o0, o1);
        break;
      case DType::INT64:
        if constexpr (!float_only(K)) reduce_typed<K, int64_t>(x, y, g, o0, o1);
        break;
      default: reduce_typed<K, float>(x, y, g, o0, o1); break;
    }
  });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// ArgMax, ArgMin: the int64 index along one axis of the first (or, with
// select_last_index, the last) extreme value. NaN counts as the extreme
// (the first NaN wins, or the last with select_last_index).

Error check_arg_extreme(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const Tensor& x = args.in(0);
  const DType dtype = x.dtype();
  KILN_KERNEL_CHECK(args, dtype == DType::FLOAT32 || dtype == DType::INT32 || dtype == DType::INT64,
                    "unsupported dtype %s", dtype_name(dtype));
  KILN_KERNEL_CHECK(args, args.out(0).dtype() == DType::INT64, "output must be int64");
  const auto* p = args.params<fb::ReduceParams>();
  KILN_KERNEL_CHECK(args,
                    p != nullptr && p->axes() != nullptr && p->axes()->size() == 1 && p->axes()->Get(0) >= 0 &&
                        static_cast<uint32_t>(p->axes()->Get(0)) < x.rank(),
                    "expects one axis below the rank");
  KILN_KERNEL_CHECK(args, x.dim(static_cast<uint32_t>(p->axes()->Get(0))) > 0, "cannot reduce an empty axis");
  KILN_KERNEL_CHECK(args, check_reduce_shape(x, args.out(0), p), "output shape does not match");
  return Error::kOk;
}

template <bool kMax, typename T>
void arg_extreme_typed(const Tensor& x, const Tensor& y, uint32_t axis, bool last) {
  const int64_t outer = dims_product(x, 0, axis);
  const int64_t n = x.dim(axis);
  const int64_t inner = dims_product(x, axis + 1, x.rank());
  const T* in = x.data_as<const T>();
  int64_t* out = y.data_as<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* v = in + o * n * inner + i;
      int64_t best = 0;
      T best_value = v[0];
      for (int64_t k = 1; k < n; ++k) {
        const T value = v[k * inner];
        const bool best_nan = best_value != best_value;
        const bool nan = value != value;
        bool better;
        if (best_nan) {
          better = last && nan;
        } else if (nan) {
          better = true;
        } else {
          better = kMax ? (value > best_value || (last && value == best_value))
                        : (value < best_value || (last && value == best_value));
        }
        if (better) {
          best = k;
          best_value = value;
        }
      }
      out[o * inner + i] = best;
    }
  }
}

template <bool kMax>
Error run_arg_extreme(const KernelArgs& args) {
  const auto* p = args.params<fb::ReduceParams>();
  const uint32_t axis = static_cast<uint32_t>(p->axes()->Get(0));
  const bool last = p->select_last_index();
  switch (args.in(0).dtype()) {
    case DType::INT32: arg_extreme_typed<kMax, int32_t>(args.in(0), args.out(0), axis, last); break;
    case DType::INT64: arg_extreme_typed<kMax, int64_t>(args.in(0), args.out(0), axis, last); break;
    default: arg_extreme_typed<kMax, float>(args.in(0), args.out(0), axis, last); break;
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_REDUCE_KERNELS(K)                                                                    \
  K(ReduceSum, check_reduce<ReduceKind::kSum>, run_reduce<ReduceKind::kSum>, 0)                   \
  K(ReduceMean, check_reduce<ReduceKind::kMean>, run_reduce<ReduceKind::kMean>, 0)                \
  K(ReduceMax, check_reduce<ReduceKind::kMax>, run_reduce<ReduceKind::kMax>, 0)                   \
  K(ReduceMin, check_reduce<ReduceKind::kMin>, run_reduce<ReduceKind::kMin>, 0)                   \
  K(ReduceProd, check_reduce<ReduceKind::kProd>, run_reduce<ReduceKind::kProd>, 0)                \
  K(ReduceL1, check_reduce<ReduceKind::kL1>, run_reduce<ReduceKind::kL1>, 0)                      \
  K(ReduceL2, check_reduce<ReduceKind::kL2>, run_reduce<ReduceKind::kL2>, 0)                      \
  K(ReduceLogSum, check_reduce<ReduceKind::kLogSum>, run_reduce<ReduceKind::kLogSum>, 0)          \
  K(ReduceLogSumExp, check_reduce<ReduceKind::kLogSumExp>, run_reduce<ReduceKind::kLogSumExp>, 0) \
  K(ReduceSumSquare, check_reduce<ReduceKind::kSumSquare>, run_reduce<ReduceKind::kSumSquare>, 0) \
  K(ArgMax, check_arg_extreme, run_arg_extreme<true>, 0)                                          \
  K(ArgMin, check_arg_extreme, run_arg_extreme<false>, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_REDUCE_KERNELS)
const KernelEntry kReduceKernels[] = {KILN_REDUCE_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumReduceKernels = sizeof(kReduceKernels) / sizeof(kReduceKernels[0]);

}  // namespace kernels
}  // namespace kiln
