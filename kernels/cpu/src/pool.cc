// Pooling kernels: MaxPool and AveragePool (1-D as height 1, and 2-D),
// GlobalAveragePool and GlobalMaxPool. The planner resolved auto_pad and
// ceil_mode into pads and the output shape.
//
//   Pool     PoolParams; 1-D and 2-D windows, one output (the hot path).
//   PoolNd   X of rank 3 to 5 (1-D to 3-D windows); outputs Y and, for max
//            pooling only, optionally Indices (int64, Y's shape). GenericParams
//            ints [kind (0 max, 1 average), count_include_pad, storage_order],
//            then for each of the axes depth, height, width: kernel, stride,
//            dilation, pad_begin, pad_end (an axis the input lacks is 1, 1, 1,
//            0, 0). Indices are positions in X flattened, counted over N and C
//            too; storage_order 1 counts the spatial axes column-major (the
//            first spatial axis fastest), as ONNX's MaxPool says. The first
//            maximum of a window wins; a NaN beats every number.
//   MaxUnpool  see below.

#include <math.h>

#include "arm/neon.h"
#include "cpu_kernels.h"
#include "isa_switch.h"
#include "kernel_util.h"
#include "parallel.h"
#include "pool_8bit.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {
namespace {

int64_t at(const flatbuffers::Vector<int32_t>* v, uint32_t i) { return v->Get(i); }

PoolGeometry pool_geometry(const KernelArgs& args) {
  const auto* p = args.params<fb::PoolParams>();
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const bool one_d = x.rank() == 3;
  PoolGeometry g;
  g.planes = x.dim(0) * x.dim(1);
  g.h = one_d ? 1 : x.dim(2);
  g.w = x.dim(x.rank() - 1);
  g.oh = one_d ? 1 : y.dim(2);
  g.ow = y.dim(y.rank() - 1);
  g.kh = at(p->kernel(), 0);
  g.kw = at(p->kernel(), 1);
  g.sh = at(p->strides(), 0);
  g.sw = at(p->strides(), 1);
  g.dh = at(p->dilations(), 0);
  g.dw = at(p->dilations(), 1);
  g.pt = at(p->pads(), 0);
  g.pl = at(p->pads(), 1);
  g.pb = at(p->pads(), 2);
  g.pr = at(p->pads(), 3);
  return g;
}

bool has_n(const flatbuffers::Vector<int32_t>* v, uint32_t n) { return v != nullptr && v->size() == n; }

bool is_8bit(DType t) { return t == DType::INT8 || t == DType::UINT8; }

Error check_pool(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const auto* p = args.params<fb::PoolParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "missing PoolParams");
  // 8-bit data (a QDQ model's MaxPool between a DequantizeLinear and a
  // QuantizeLinear of one quantization) is max-pooled as it is.
  if (!(p->kind() == fb::PoolKind::MAXIMUM && is_8bit(args.in(0).dtype()) &&
        args.out(0).dtype() == args.in(0).dtype())) {
    KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  }
  KILN_KERNEL_CHECK(args, p->kind() <= fb::PoolKind::MAX, "unknown pool kind");
  KILN_KERNEL_CHECK(args,
                    has_n(p->kernel(), 2) && has_n(p->strides(), 2) && has_n(p->dilations(), 2) && has_n(p->pads(), 4),
                    "malformed pooling parameters");
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, (x.rank() == 3 || x.rank() == 4) && y.rank() == x.rank(),
                    "expects 3-D or 4-D input and output");
  KILN_KERNEL_CHECK(args, y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1), "N or C changes");
  const PoolGeometry g = pool_geometry(args);
  KILN_KERNEL_CHECK(args, g.kh > 0 && g.kw > 0 && g.sh > 0 && g.sw > 0 && g.dh > 0 && g.dw > 0,
                    "kernel, strides and dilations must be positive");
  KILN_KERNEL_CHECK(args, g.pt >= 0 && g.pl >= 0 && g.pb >= 0 && g.pr >= 0, "negative pad");
  // Every window must start inside the padded input (ceil_mode may add one
  // output that starts in the end padding, never past it).
  KILN_KERNEL_CHECK(
      args, g.oh > 0 && g.ow > 0 && (g.oh - 1) * g.sh < g.h + g.pt + g.pb && (g.ow - 1) * g.sw < g.w + g.pl + g.pr,
      "output size does not match the geometry");
  KILN_KERNEL_CHECK(args, g.pt < g.kh * g.dh && g.pl < g.kw * g.dw, "pad larger than the window");
  return Error::kOk;
}

// Window taps k in [0, kernel) with first + k * dilation inside [lo, hi):
// returns the count and the first such k.
int64_t taps_inside(int64_t first, int64_t kernel, int64_t dilation, int64_t lo, int64_t hi, int64_t* out_begin) {
  int64_t begin = first >= lo ? 0 : (lo - first + dilation - 1) / dilation;
  int64_t end = first >= hi ? 0 : (hi - first + dilation - 1) / dilation;
  if (end > kernel) end = kernel;
  if (begin > end) begin = end;
  *out_begin = begin;
  return end - begin;
}

// The lowest value of an 8-bit type: what padding holds (it never wins).
template <typename T>
constexpr T lowest_8bit() {
  return static_cast<T>(static_cast<T>(-1) > 0 ? 0 : -128);
}

#if KILN_X86 || KILN_NEON
// One plane's output row of 8-bit max pooling, separably: the maximum down
// the window's rows into `line` (the padded row: `pl` lowest values, the
// image's w columns, then lowest values to the last tap), then across each
// window's columns. Both loops are plain byte maxima the compiler
// vectorises; `line` holds g.pl + g.w + the taps past the right edge.
template <typename T>
void max_pool_row_8bit(const PoolGeometry& g, const T* in, int64_t oy, T* line, T* out) {
  const T low = lowest_8bit<T>();
  const int64_t span = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  int64_t ky0;
  const int64_t rows = taps_inside(oy * g.sh - g.pt, g.kh, g.dh, 0, g.h, &ky0);
  for (int64_t j = 0; j < span; ++j) line[j] = low;
  T* image = line + g.pl;
  const int64_t width = g.w < span - g.pl ? g.w : span - g.pl;
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = in + (oy * g.sh - g.pt + (ky0 + r) * g.dh) * g.w;
    for (int64_t j = 0; j < width; ++j) image[j] = row[j] > image[j] ? row[j] : image[j];
  }
  if (g.sw == 1 && g.dw == 1) {
    for (int64_t ox = 0; ox < g.ow; ++ox) out[ox] = line[ox];
    for (int64_t c = 1; c < g.kw; ++c) {
      const T* tap = line + c;
      for (int64_t ox = 0; ox < g.ow; ++ox) out[ox] = tap[ox] > out[ox] ? tap[ox] : out[ox];
    }
    return;
  }
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const T* window = line + ox * g.sw;
    T acc = window[0];
    for (int64_t c = 1; c < g.kw; ++c) acc = window[c * g.dw] > acc ? window[c * g.dw] : acc;
    out[ox] = acc;
  }
}
#endif

// Max pooling of 8-bit data, planes split across threads.
template <typename T>
void max_pool_8bit(const PoolGeometry& g, const T* x, T* y, ThreadPool* pool) {
  const int64_t tasks = parallel_tasks(pool, g.planes * g.oh * g.ow * g.kh * g.kw, g.planes, kParallelMinElements);
  parallel_for(pool, tasks, [&](int64_t t) {
    int64_t p0, p1;
    parallel_range(g.planes, tasks, t, 1, &p0, &p1);
    for (int64_t plane = p0; plane < p1; ++plane)
      max_pool_8bit_plane(g, x + plane * g.h * g.w, y + plane * g.oh * g.ow);
  });
}

Error run_pool(const KernelArgs& args) {
  const auto* p = args.params<fb::PoolParams>();
  const PoolGeometry g = pool_geometry(args);
  if (args.in(0).dtype() == DType::UINT8) {
    max_pool_8bit(g, args.in(0).data_as<const uint8_t>(), args.out(0).data_as<uint8_t>(), args.pool);
    return Error::kOk;
  }
  if (args.in(0).dtype() == DType::INT8) {
    max_pool_8bit(g, args.in(0).data_as<const int8_t>(), args.out(0).data_as<int8_t>(), args.pool);
    return Error::kOk;
  }
  const float* x = args.in(0).data_as<const float>();
  float* y = args.out(0).data_as<float>();
  const bool is_max = p->kind() == fb::PoolKind::MAXIMUM;
  const bool include_pad = p->count_include_pad();
  // Max pooling without dilation and with one stride of 1 or 2 has an AVX2
  // version on x86-64 processors that have it, and a NEON one on arm64.
  bool vector = false;
#if KILN_X86
  vector = is_max && g.dh == 1 && g.dw == 1 && g.sh == g.sw && x86::has_avx2_fma();
#elif KILN_NEON
  vector = is_max && g.dh == 1 && g.dw == 1 && g.sh == g.sw && neon::enabled();
#endif
  // Planes are independent: split them.
  const int64_t tasks = parallel_tasks(args.pool, g.planes * g.oh * g.ow * g.kh * g.kw, g.planes, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t p0, p1;
    parallel_range(g.planes, tasks, t, 1, &p0, &p1);
    for (int64_t plane = p0; plane < p1; ++plane) {
      const float* in = x + plane * g.h * g.w;
      float* out = y + plane * g.oh * g.ow;
#if KILN_X86
      if (vector && x86::max_pool_avx2(in, g.h, g.w, g.kh, g.kw, g.sh, g.pt, g.pl, out, g.oh, g.ow)) continue;
#elif KILN_NEON
      if (vector && neon::max_pool(in, g.h, g.w, g.kh, g.kw, g.sh, g.pt, g.pl, out, g.oh, g.ow)) continue;
#endif
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        const int64_t y0 = oy * g.sh - g.pt;
        int64_t ky0, ignored;
        // Only taps on real rows are visited; the padded ones only count.
        const int64_t rows = taps_inside(y0, g.kh, g.dh, 0, g.h, &ky0);
        const int64_t padded_rows = taps_inside(y0, g.kh, g.dh, -g.pt, g.h + g.pb, &ignored);
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t x0 = ox * g.sw - g.pl;
          if (x0 >= 0 && x0 + (g.kw - 1) * g.dw < g.w && rows == g.kh) {
            // Every tap inside the image (most windows): no bounds to find.
            // The maximum is a select (no data-dependent branch); a NaN, rare,
            // is remembered aside and wins.
            const float* base = in + y0 * g.w + x0;
            float acc = is_max ? -INFINITY : 0.f;
            bool nan = false;
            float nan_value = 0.f;
            for (int64_t r = 0; r < g.kh; ++r) {
              const float* row = base + r * g.dh * g.w;
              for (int64_t c = 0; c < g.kw; ++c) {
                const float v = row[c * g.dw];
                if (is_max) {
                  acc = v > acc ? v : acc;
                  if (v != v) {
                    nan = true;
                    nan_value = v;
                  }
                } else {
                  acc += v;
                }
              }
            }
            out[oy * g.ow + ox] = is_max ? (nan ? nan_value : acc) : acc / static_cast<float>(g.kh * g.kw);
            continue;
          }
          int64_t kx0;
          const int64_t cols = taps_inside(x0, g.kw, g.dw, 0, g.w, &kx0);
          const int64_t padded_cols = taps_inside(x0, g.kw, g.dw, -g.pl, g.w + g.pr, &ignored);
          float acc = is_max ? -INFINITY : 0.f;
          for (int64_t r = 0; r < rows; ++r) {
            const float* row = in + ((y0 + (ky0 + r) * g.dh) * g.w + x0 + kx0 * g.dw);
            for (int64_t c = 0; c < cols; ++c) {
              const float v = row[c * g.dw];
              if (is_max) {
                if (v > acc || isnan(v)) acc = v;
              } else {
                acc += v;
              }
            }
          }
          if (!is_max) {
            const int64_t divisor = include_pad ? padded_rows * padded_cols : rows * cols;
            acc = divisor > 0 ? acc / static_cast<float>(divisor) : 0.f;
          }
          out[oy * g.ow + ox] = acc;
        }
      }
    }
  });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// PoolNd

struct PoolNdAxis {
  int64_t in, out, kernel, stride, dilation, pad_begin, pad_end;
};

// Axes depth, height, width of the PoolNd call (missing ones 1 wide).
void pool_nd_axes(const KernelArgs& args, PoolNdAxis* out_axes) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const uint32_t spatial = x.rank() - 2;
  for (uint32_t a = 0; a < 3; ++a) {
    PoolNdAxis& ax = out_axes[a];
    const bool present = a + spatial >= 3;
    ax.in = present ? x.dim(a + spatial - 1) : 1;
    ax.out = present ? y.dim(a + spatial - 1) : 1;
    ax.kernel = param_int(args, 3 + 5 * a);
    ax.stride = param_int(args, 4 + 5 * a);
    ax.dilation = param_int(args, 5 + 5 * a);
    ax.pad_begin = param_int(args, 6 + 5 * a);
    ax.pad_end = param_int(args, 7 + 5 * a);
  }
}

Error check_pool_nd(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, args.num_outputs == 2 ? 2 : 1));
  KILN_RETURN_IF_ERROR(check_params(args, 18, 0));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const int64_t kind = param_int(args, 0), storage_order = param_int(args, 2);
  KILN_KERNEL_CHECK(args, kind == 0 || kind == 1, "unknown pool kind %lld", static_cast<long long>(kind));
  KILN_KERNEL_CHECK(args, storage_order == 0 || storage_order == 1, "storage_order must be 0 or 1");
  KILN_KERNEL_CHECK(args, x.dtype() == DType::FLOAT32 && y.dtype() == DType::FLOAT32, "expects float32 X and Y");
  KILN_KERNEL_CHECK(args, x.rank() >= 3 && x.rank() <= 5 && y.rank() == x.rank(), "expects X and Y of rank 3 to 5");
  KILN_KERNEL_CHECK(args, y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1), "N or C changes");
  if (args.num_outputs == 2) {
    const Tensor& indices = args.out(1);
    KILN_KERNEL_CHECK(args, kind == 0, "only max pooling has Indices");
    KILN_KERNEL_CHECK(args, indices.dtype() == DType::INT64, "Indices must be int64");
    KILN_RETURN_IF_ERROR(check_same_shape(args, y, indices, "Y and Indices"));
  }
  PoolNdAxis axes[3];
  pool_nd_axes(args, axes);
  // Bounds as the planner writes them (spatial.cc: at most 2^30 each), so
  // the sums below cannot overflow.
  constexpr int64_t kLimit = int64_t{1} << 30;
  for (const PoolNdAxis& a : axes) {
    KILN_KERNEL_CHECK(args,
                      a.kernel > 0 && a.stride > 0 && a.dilation > 0 && a.kernel <= kLimit && a.stride <= kLimit &&
                          a.dilation <= kLimit,
                      "kernel, strides and dilations must be in [1, 2^30]");
    KILN_KERNEL_CHECK(args, a.pad_begin >= 0 && a.pad_end >= 0 && a.pad_begin <= kLimit && a.pad_end <= kLimit,
                      "pads must be in [0, 2^30]");
    // Every window starts inside the padded input.
    KILN_KERNEL_CHECK(args, a.out > 0 && (a.out - 1) * a.stride < a.in + a.pad_begin + a.pad_end,
                      "output size does not match the geometry");
  }
  return Error::kOk;
}

Error run_pool_nd(const KernelArgs& args) {
  PoolNdAxis ax[3];
  pool_nd_axes(args, ax);
  const bool is_max = param_int(args, 0) == 0;
  const bool include_pad = param_int(args, 1) != 0;
  const bool column_major = param_int(args, 2) == 1;
  const Tensor& x = args.in(0);
  const float* in = x.data_as<const float>();
  float* out = args.out(0).data_as<float>();
  int64_t* indices = args.num_outputs == 2 ? args.out(1).data_as<int64_t>() : nullptr;
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t plane_in = ax[0].in * ax[1].in * ax[2].in;
  int64_t at = 0;
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* src = in + plane * plane_in;
    for (int64_t o0 = 0; o0 < ax[0].out; ++o0) {
      for (int64_t o1 = 0; o1 < ax[1].out; ++o1) {
        for (int64_t o2 = 0; o2 < ax[2].out; ++o2, ++at) {
          // Per axis: the first tap, the taps on real elements and those
          // inside the padded extent (average pooling with padding counts them).
          const int64_t pos[3] = {o0, o1, o2};
          int64_t first[3], begin[3], real[3], padded = 1, count = 1;
          for (int a = 0; a < 3; ++a) {
            int64_t ignored;
            first[a] = pos[a] * ax[a].stride - ax[a].pad_begin;
            real[a] = taps_inside(first[a], ax[a].kernel, ax[a].dilation, 0, ax[a].in, &begin[a]);
            padded *= taps_inside(first[a], ax[a].kernel, ax[a].dilation, -ax[a].pad_begin, ax[a].in + ax[a].pad_end,
                                  &ignored);
            count *= real[a];
          }
          float acc = is_max ? -INFINITY : 0.f;
          int64_t best = -1;
          for (int64_t k0 = begin[0]; k0 < begin[0] + real[0]; ++k0) {
            const int64_t i0 = first[0] + k0 * ax[0].dilation;
            for (int64_t k1 = begin[1]; k1 < begin[1] + real[1]; ++k1) {
              const int64_t i1 = first[1] + k1 * ax[1].dilation;
              const float* row = src + (i0 * ax[1].in + i1) * ax[2].in;
              for (int64_t k2 = begin[2]; k2 < begin[2] + real[2]; ++k2) {
                const int64_t i2 = first[2] + k2 * ax[2].dilation;
                const float v = row[i2];
                if (!is_max) {
                  acc += v;
                } else if (v > acc || (isnan(v) && !isnan(acc)) || best < 0) {
                  acc = v;
                  best = column_major ? i0 + ax[0].in * (i1 + ax[1].in * i2) : (i0 * ax[1].in + i1) * ax[2].in + i2;
                }
              }
            }
          }
          if (!is_max) {
            const int64_t divisor = include_pad ? padded : count;
            acc = divisor > 0 ? acc / static_cast<float>(divisor) : 0.f;
          }
          out[at] = acc;
          // A window over padding only (no real tap) has no position: -1.
          if (indices != nullptr) indices[at] = best < 0 ? -1 : plane * plane_in + best;
        }
      }
    }
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// MaxUnpool: X and Indices (int64, X's shape) into Y, all zeros but for
// X's values. GenericParams ints: the unpooled shape U the indices count in
// ((in - 1) * stride + kernel - pads per spatial axis, N and C as Y's): an
// index is a position in U flattened, as MaxPool's Indices count them, and
// X[i] lands at the same coordinates in Y (Y is U, or output_shape, which
// may be larger: ONNX's reference places values so). A later duplicate
// overwrites an earlier one. Indices are data: every one is checked before
// anything is written, and one outside [0, numel(U)), or whose coordinates
// fall outside a smaller Y, fails the call with kInvalidInput.

Error check_max_unpool(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args,
                    x.dtype() == DType::FLOAT32 && y.dtype() == DType::FLOAT32 && args.in(1).dtype() == DType::INT64,
                    "expects float32 X and Y and int64 indices");
  KILN_RETURN_IF_ERROR(check_same_shape(args, x, args.in(1), "X and indices"));
  KILN_KERNEL_CHECK(args, x.rank() >= 3 && y.rank() == x.rank() && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1),
                    "expects X and Y of one rank >= 3 with the same N and C");
  KILN_RETURN_IF_ERROR(check_params(args, y.rank(), 0));
  int64_t size = 1;
  for (uint32_t d = 0; d < y.rank(); ++d) {
    const int64_t u = param_int(args, d);
    KILN_KERNEL_CHECK(args, u > 0 && checked_mul(size, u, &size) && (d >= 2 || u == y.dim(d)), "bad unpooled shape");
  }
  return Error::kOk;
}

Error run_max_unpool(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const uint32_t rank = y.rank();
  const int64_t* indices = args.in(1).data_as<const int64_t>();
  const int64_t n = x.numel(), out_size = y.numel();
  int64_t unpooled[kMaxRank], strides[kMaxRank];
  int64_t size = 1;
  bool same = true;
  for (uint32_t d = 0; d < rank; ++d) {
    unpooled[d] = param_int(args, d);
    size *= unpooled[d];
    same = same && unpooled[d] == y.dim(d);
  }
  contiguous_strides(y.dims(), rank, strides);
  // Position in Y of index `at` of U; -1 when it lies outside Y.
  auto place = [&](int64_t at) -> int64_t {
    if (same) return at;
    int64_t offset = 0;
    for (int32_t d = static_cast<int32_t>(rank) - 1; d >= 0; --d) {
      const int64_t coordinate = at % unpooled[d];
      at /= unpooled[d];
      if (coordinate >= y.dim(static_cast<uint32_t>(d))) return -1;
      offset += coordinate * strides[d];
    }
    return offset;
  };
  for (int64_t i = 0; i < n; ++i) {
    if (indices[i] < 0 || indices[i] >= size || place(indices[i]) < 0) {
      KILN_LOG(ERROR, "kernel MaxUnpool (node '%s'): index %lld out of range for an unpooled output of %lld elements",
               args.node_name, static_cast<long long>(indices[i]), static_cast<long long>(size));
      return Error::kInvalidInput;
    }
  }
  const float* in = x.data_as<const float>();
  float* out = y.data_as<float>();
  for (int64_t i = 0; i < out_size; ++i) out[i] = 0.f;
  for (int64_t i = 0; i < n; ++i) out[place(indices[i])] = in[i];
  return Error::kOk;
}

Error check_global_pool(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.rank() >= 2 && y.rank() == x.rank(), "rank mismatch");
  KILN_KERNEL_CHECK(args, y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1), "N or C changes");
  for (uint32_t d = 2; d < y.rank(); ++d) KILN_KERNEL_CHECK(args, y.dim(d) == 1, "spatial dims must be 1");
  return Error::kOk;
}

template <bool kMax>
Error run_global_pool(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t size = dims_product(x, 2, x.rank());
  const float* in = x.data_as<const float>();
  float* out = args.out(0).data_as<float>();
  // Planes are independent: split them.
  const int64_t tasks = parallel_tasks(args.pool, planes * size, planes, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t p0, p1;
    parallel_range(planes, tasks, t, 1, &p0, &p1);
    for (int64_t p = p0; p < p1; ++p) {
      const float* v = in + p * size;
      if (kMax) {
        float acc = -INFINITY;
        for (int64_t i = 0; i < size; ++i) {
          if (v[i] > acc || isnan(v[i])) acc = v[i];
        }
        out[p] = acc;
        continue;
      }
      // Sixteen running sums, lane j taking elements j, j + 16, ...: the
      // compiler keeps them in vector registers (no reassociation needed),
      // one add per 16 floats instead of a chain of scalar adds; the same
      // order, so the same bits, on every path.
      float part[16] = {};
      int64_t i = 0;
      for (; i + 16 <= size; i += 16) {
        for (int j = 0; j < 16; ++j) part[j] += v[i + j];
      }
      for (int64_t j = 0; i < size; ++i, ++j) part[j] += v[i];
      float acc = 0.f;
      for (int j = 0; j < 16; ++j) acc += part[j];
      out[p] = acc / static_cast<float>(size);
    }
  });
  return Error::kOk;
}

}  // namespace

// One plane of 8-bit max pooling (pool_8bit.h): the largest tap inside the
// image, padding never winning. One stride of 1 or 2 without dilation has
// an AVX2 version; elsewhere, on x86-64 and arm64, rows go separably
// through a line on the stack where one fits; else window by window.
template <typename T>
void max_pool_8bit_plane(const PoolGeometry& g, const T* in, T* out) {
#if KILN_X86
  if (g.dh == 1 && g.dw == 1 && g.sh == g.sw && x86::has_avx2_fma() &&
      x86::max_pool_8bit_avx2(in, g.h, g.w, g.kh, g.kw, g.sh, g.pt, g.pl, out, g.oh, g.ow)) {
    return;
  }
#endif
#if KILN_X86 || KILN_NEON
  // Not on microcontrollers: their stacks have no room for the line, nor
  // their images for a second loop.
  constexpr int64_t kLine = 4096;
  const int64_t span = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  if (span <= kLine && g.pl + g.w <= kLine) {
    T line[kLine];
    for (int64_t oy = 0; oy < g.oh; ++oy) max_pool_row_8bit(g, in, oy, line, out + oy * g.ow);
    return;
  }
#endif
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    int64_t ky0, kx0;
    const int64_t rows = taps_inside(oy * g.sh - g.pt, g.kh, g.dh, 0, g.h, &ky0);
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t cols = taps_inside(ox * g.sw - g.pl, g.kw, g.dw, 0, g.w, &kx0);
      T acc = lowest_8bit<T>();
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = in + (oy * g.sh - g.pt + (ky0 + r) * g.dh) * g.w + ox * g.sw - g.pl + kx0 * g.dw;
        for (int64_t c = 0; c < cols; ++c) acc = row[c * g.dw] > acc ? row[c * g.dw] : acc;
      }
      out[oy * g.ow + ox] = acc;
    }
  }
}

template void max_pool_8bit_plane<uint8_t>(const PoolGeometry&, const uint8_t*, uint8_t*);
template void max_pool_8bit_plane<int8_t>(const PoolGeometry&, const int8_t*, int8_t*);

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_POOL_KERNELS(K)                                         \
  K(Pool, check_pool, run_pool, 0)                                   \
  K(PoolNd, check_pool_nd, run_pool_nd, 0)                           \
  K(MaxUnpool, check_max_unpool, run_max_unpool, 0)                  \
  K(GlobalAveragePool, check_global_pool, run_global_pool<false>, 0) \
  K(GlobalMaxPool, check_global_pool, run_global_pool<true>, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_POOL_KERNELS)
const KernelEntry kPoolKernels[] = {KILN_POOL_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumPoolKernels = sizeof(kPoolKernels) / sizeof(kPoolKernels[0]);

}  // namespace kernels
}  // namespace kiln
