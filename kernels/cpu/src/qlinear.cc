// Quantized kernels:
//
//   QuantizeLinear    float32 -> uint8/int8; inputs x, scale (float32, one
//                     value or one per channel of the axis), zero point
//                     (optional, the output's dtype, as many as scale);
//                     ints [axis]. y = saturate(round_half_even(x / scale)
//                     + zero_point), as ONNX specifies; NaN gives the zero
//                     point.
//   DequantizeLinear  uint8/int8/int32 -> float32; inputs x, scale, zero
//                     point (optional, x's dtype); ints [axis].
//                     y = (x - zero_point) * scale.
//   DynamicQuantizeLinear  float32 -> uint8, its scale and zero point from
//                     the data's range (widened to include 0), as ONNX
//                     specifies; three outputs.
//   ConvInt8          the int8 convolution of kiln/kernels/qgemm.h (groups
//                     and depthwise included; NCHW, 1-D as height 1).
//                     inputs: 0 x (uint8/int8), 1 packed weights (int8,
//                     1-D: [group][M/group][kp]), 2 folded bias (int32
//                     [M]), 3 multiplier and 4 shift (int32 [M]; both
//                     absent for an int32 output), 5 weight zero points
//                     (int32 [M], optional). scratch: packed activations
//                     (uint8, qgemm_packed_x_bytes(K, oH * oW)), and with
//                     input 5 the column sums (int32 [oH * oW]).
//                     ints [group, kH, kW, sH, sW, dH, dW, pad top, left,
//                     bottom, right, x zero point (uint8 domain: int8 + 128),
//                     y zero point, y min, y max, weight order, weight
//                     range]. Weight order (optional, 0 when absent): 0,
//                     each row's k as ONNX lays it, [C][kH][kW]; 1, in
//                     channel quads by tap, [C/4][kH * kW][4] (C / group a
//                     multiple of 4 only): the direct convolution's step
//                     order, which the im2col packer then follows. Weight
//                     range (optional after the weight order, 0 when
//                     absent): 1 states that every weight is in [-64, 64]
//                     (qgemm_weights_narrow; checked at load), which lets
//                     AVX2 multiply with vpmaddubsw whatever the input.
//   GemmInt8          the int8 matrix product y[..., r, c] = sum_k a[..., r,
//                     k] w[c][k] (requantized). inputs: 0 a (uint8/int8,
//                     [..., R, K]), 1 packed weights (int8, 1-D:
//                     [batches][N][kp]), 2 folded bias (int32 [batches *
//                     N]), 3 multiplier, 4 shift (int32 [N]), 5 weight zero
//                     points (int32 [N], optional). With batches 1 every row
//                     of a meets the same weights; otherwise a's rows split
//                     into `batches` equal parts, one per weight matrix.
//                     scratch as ConvInt8 with the rows as columns. ints
//                     [batches, x zero point, y zero point, y min, y max,
//                     weight range] (the last optional, as ConvInt8's).
//   AvgPoolInt8       average pooling of uint8/int8 data (AveragePool and
//                     GlobalAveragePool as one window over the plane; NCHW,
//                     1-D as height 1), requantized: a window of d taps
//                     (counted as AveragePool counts them) gives
//                     y = clamp(requantize(sum(x) - taps_inside * x_zp,
//                     multiplier[d-1], shift[d-1]) + y_zp, y_min, y_max),
//                     the multipliers x_scale / (y_scale * d) in
//                     qgemm.h's fixed point, rounded once, half to even
//                     (qgemm_requantize_even: QuantizeLinear's rounding
//                     of the float average).
//                     inputs: 0 x, 1 multiplier, 2 shift (int32, kh * kw
//                     values, or one when every window has kh * kw taps).
//                     ints [kh, kw, sH, sW, pad top, left, bottom, right,
//                     count_include_pad, x zero point, y zero point, y min,
//                     y max] (zero points in the data's own domain).
//   AddInt8           y = clamp(y_zp + round(((a - a_zp) * ma + (b - b_zp) *
//                     mb) / 2^s), y_min, y_max), a, b and y uint8/int8 (a
//                     and b broadcast to y); ma, mb: a_scale / y_scale and
//                     b_scale / y_scale on one fixed-point shift s (the
//                     larger in [2^30, 2^31)), so the sum is exact in 64
//                     bits and rounded once (half up). ints [a_zp, b_zp,
//                     y_zp, y_min, y_max, ma, mb, s].
//   MulInt8           y = clamp(requantize((a - a_zp) * (b - b_zp), m, s) +
//                     y_zp, y_min, y_max), m * 2^-s = a_scale * b_scale /
//                     y_scale (qgemm.h). ints [a_zp, b_zp, y_zp, y_min,
//                     y_max, m, s].
//   MatMulInt8        y = clamp(requantize(sum_k (a - a_zp) (b - b_zp), m,
//                     s) + y_zp, y_min, y_max): a [..., M, K] and b [...,
//                     K, N] both activations (attention's scores and
//                     context), uint8 or int8, the same leading dims; y
//                     [..., M, N]. ints [a_zp, b_zp, y_zp, y_min, y_max, m,
//                     s]. One scratch (qgemm_matmul_scratch_bytes): per
//                     batch, B transposed into int8 rows of kp, A packed
//                     into panels, and the per-column terms; then the
//                     weights path's product with b's zero point as the
//                     weights' (qgemm).
//   ChannelAffineInt8 y = clamp(round_half_even(fma(x - x_zp, a[c], b[c])) +
//                     y_zp, y_min, y_max): a batch normalization (and its
//                     Relu or Clip) between a DequantizeLinear and a
//                     QuantizeLinear (passes/qdq.h), channel c on axis 1
//                     of x (uint8/int8, rank 2 or more). inputs: 0 x, 1 a,
//                     2 b (float32 [C]). ints [x zero point (uint8
//                     domain), y zero point, y min, y max]; y uint8 or int8.
//   SoftmaxInt8       y = clamp(round_half_even(p / y_scale) + y_zp, y_min,
//                     y_max) for p the softmax over the last axis of the
//                     dequantized x: DequantizeLinear -> Softmax ->
//                     QuantizeLinear (passes/qdq.h). Within a row, p[i] =
//                     e[i] / sum(e) with e[i] = table[top - x[i]], top the
//                     row's largest byte: exp(x_scale * (x[i] - top)) from
//                     a table the planner computes; p / y_scale as e[i]
//                     times 1 / sum / y_scale. inputs: 0 x, 1 the
//                     table (float32 [257]: exp(-x_scale d) for d = 0..255,
//                     then y_scale). ints [y zero point, y min, y max].
//   LookupInt8        y[i] = table[x[i]] (the byte's value as an index,
//                     0-255), x uint8 or int8, the table 256 values of y's
//                     dtype: an element-wise chain between a
//                     DequantizeLinear and a QuantizeLinear, evaluated by
//                     the planner on all 256 inputs (passes/qdq.h).
//
// The int8 kernels check everything at load (operand sizes against the
// geometry, the scratch against qgemm_packed_x_bytes); run() trusts it.

#include <math.h>
#include <string.h>

#include "broadcast.h"
#include "cpu_kernels.h"
#include "isa_switch.h"
#include "kernel_util.h"
#include "parallel.h"
#include "qgemm.h"
#include "x86/int8_sse2.h"

namespace kiln {
namespace kernels {
namespace {

// GenericParams' integers (see the top of this file).
bool has_ints(const KernelArgs& args, uint32_t count) {
  const auto* p = args.params<fb::GenericParams>();
  return p != nullptr && p->ints() != nullptr && p->ints()->size() == count && aligned8(p->ints());
}
int64_t int_param(const KernelArgs& args, uint32_t i) { return args.params<fb::GenericParams>()->ints()->Get(i); }
// How many integers the GenericParams hold (0 without any, or misaligned).
uint32_t int_count(const KernelArgs& args) {
  const auto* p = args.params<fb::GenericParams>();
  return p != nullptr && p->ints() != nullptr && aligned8(p->ints()) ? p->ints()->size() : 0;
}
// Integer i, or 0 where the params end before it (an optional last one).
int64_t optional_int(const KernelArgs& args, uint32_t i) { return int_count(args) > i ? int_param(args, i) : 0; }

// ---------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear

// Outer, channel and inner extents of `t` around the axis the scale runs
// along (one channel when the scale is a single value).
struct Channels {
  int64_t outer = 1, channels = 1, inner = 1;
};

// f(ch, base, count) over every element of the [outer][channels][inner]
// layout in pieces of one row of `inner` (channel ch, from element base),
// the elements cut into ranges across the pool: one call a thread for a
// per-tensor scale (a single row), whole and partial rows otherwise.
template <typename F>
void for_each_channel_piece(ThreadPool* pool, const Channels& c, const F& f) {
  parallel_for_ranges(pool, c.outer * c.channels * c.inner, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1;) {
      const int64_t row = i / c.inner, end = (row + 1) * c.inner < i1 ? (row + 1) * c.inner : i1;
      f(row % c.channels, i, end - i);
      i = end;
    }
  });
}

Error check_scale_layout(const KernelArgs& args, const Tensor& x, Channels* out) {
  KILN_KERNEL_CHECK(args, has_ints(args, 1), "expects GenericParams with one integer (axis)");
  const Tensor& scale = args.in(1);
  KILN_KERNEL_CHECK(args, scale.dtype() == DType::FLOAT32, "scale must be float32");
  if (args.has_input(2)) {
    KILN_KERNEL_CHECK(args, args.in(2).numel() == scale.numel(), "zero point and scale differ in size");
  }
  Channels c;
  if (scale.numel() != 1) {
    const int64_t axis = int_param(args, 0);
    KILN_KERNEL_CHECK(
        args, scale.rank() == 1 && axis >= 0 && axis < x.rank() && x.dim(static_cast<uint32_t>(axis)) == scale.numel(),
        "scale of %lld values does not match the input's axis", static_cast<long long>(scale.numel()));
    c.outer = dims_product(x, 0, static_cast<uint32_t>(axis));
    c.channels = scale.numel();
    c.inner = dims_product(x, static_cast<uint32_t>(axis) + 1, x.rank());
  } else {
    c.inner = x.numel();
  }
  *out = c;
  return Error::kOk;
}

Error check_quantize(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == DType::FLOAT32, "input must be float32");
  KILN_KERNEL_CHECK(args, y.dtype() == DType::UINT8 || y.dtype() == DType::INT8, "output must be uint8 or int8");
  KILN_KERNEL_CHECK(args, !args.has_input(2) || args.in(2).dtype() == y.dtype(),
                    "zero point differs from the output's dtype");
  KILN_RETURN_IF_ERROR(check_same_shape(args, x, y, "input and output"));
  Channels c;
  return check_scale_layout(args, x, &c);
}

template <typename Q>
void quantize(const KernelArgs& args, const Channels& c) {
  const float* x = args.in(0).data_as<const float>();
  const float* scale = args.in(1).data_as<const float>();
  const Q* zp = args.has_input(2) ? args.in(2).data_as<const Q>() : nullptr;
  Q* y = args.out(0).data_as<Q>();
  constexpr float lo = sizeof(Q) == 1 && static_cast<Q>(-1) < 0 ? -128.f : 0.f;
  constexpr float hi = lo + 255.f;
#if KILN_X86
  const bool vector = active_isa() == Isa::kAvx2 || active_isa() == Isa::kAvx512;
#endif
  for_each_channel_piece(args.pool, c, [&](int64_t ch, int64_t base, int64_t count) {
    const float s = scale[ch];
    const float z = zp != nullptr ? static_cast<float>(zp[ch]) : 0.f;
    int64_t i = 0;
#if KILN_X86
    if (vector) {
      quantize_row_avx2(x + base, count, s, z, lo, hi, lo == 0.f, y + base);
      i = count - count % 8;
    }
#endif
    for (; i < count; ++i) {
      const float v = nearbyintf(x[base + i] / s) + z;
      // NaN fails both comparisons and takes the zero point.
      y[base + i] = v >= hi   ? static_cast<Q>(hi)
                    : v <= lo ? static_cast<Q>(lo)
                    : v == v  ? static_cast<Q>(v)
                              : static_cast<Q>(z);
    }
  });
}

Error run_quantize(const KernelArgs& args) {
  Channels c;
  KILN_RETURN_IF_ERROR(check_scale_layout(args, args.in(0), &c));
  if (args.out(0).dtype() == DType::UINT8) {
    quantize<uint8_t>(args, c);
  } else {
    quantize<int8_t>(args, c);
  }
  return Error::kOk;
}

Error check_dequantize(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == DType::UINT8 || x.dtype() == DType::INT8 || x.dtype() == DType::INT32,
                    "input must be uint8, int8 or int32");
  KILN_KERNEL_CHECK(args, y.dtype() == DType::FLOAT32, "output must be float32");
  KILN_KERNEL_CHECK(args, !args.has_input(2) || args.in(2).dtype() == x.dtype(),
                    "zero point differs from the input's dtype");
  KILN_RETURN_IF_ERROR(check_same_shape(args, x, y, "input and output"));
  Channels c;
  return check_scale_layout(args, x, &c);
}

template <typename Q>
void dequantize(const KernelArgs& args, const Channels& c) {
  const Q* x = args.in(0).data_as<const Q>();
  const float* scale = args.in(1).data_as<const float>();
  const Q* zp = args.has_input(2) ? args.in(2).data_as<const Q>() : nullptr;
  float* y = args.out(0).data_as<float>();
  for_each_channel_piece(args.pool, c, [&](int64_t ch, int64_t base, int64_t count) {
    const float s = scale[ch];
    const int64_t z = zp != nullptr ? zp[ch] : 0;
    for (int64_t i = 0; i < count; ++i) y[base + i] = static_cast<float>(x[base + i] - z) * s;
  });
}

Error run_dequantize(const KernelArgs& args) {
  Channels c;
  KILN_RETURN_IF_ERROR(check_scale_layout(args, args.in(0), &c));
  switch (args.in(0).dtype()) {
    case DType::UINT8: dequantize<uint8_t>(args, c); break;
    case DType::INT8: dequantize<int8_t>(args, c); break;
    default: dequantize<int32_t>(args, c); break;
  }
  return Error::kOk;
}

// DynamicQuantizeLinear: float32 x -> uint8 y, float32 scale, uint8 zero
// point, from the data's range widened to include 0, as ONNX specifies.
Error check_dynamic_quantize(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 3));
  KILN_KERNEL_CHECK(args,
                    args.in(0).dtype() == DType::FLOAT32 && args.out(0).dtype() == DType::UINT8 &&
                        args.out(1).dtype() == DType::FLOAT32 && args.out(2).dtype() == DType::UINT8 &&
                        args.out(1).numel() == 1 && args.out(2).numel() == 1,
                    "expects float32 -> uint8, float32 scale, uint8 zero point");
  return check_same_shape(args, args.in(0), args.out(0), "input and output");
}

Error run_dynamic_quantize(const KernelArgs& args) {
  const float* x = args.in(0).data_as<const float>();
  const int64_t n = args.in(0).numel();
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  const float scale = (hi - lo) / 255.f;
  float zp = 0.f;
  if (scale > 0.f) {
    zp = nearbyintf(0.f - lo / scale);
    zp = zp < 0.f ? 0.f : zp > 255.f ? 255.f : zp;
  }
  *args.out(1).data_as<float>() = scale;
  *args.out(2).data_as<uint8_t>() = static_cast<uint8_t>(zp);
  uint8_t* y = args.out(0).data_as<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    const float v = scale > 0.f ? nearbyintf(x[i] / scale) + zp : zp;
    y[i] = v >= 255.f ? 255 : v <= 0.f ? 0 : v == v ? static_cast<uint8_t>(v) : static_cast<uint8_t>(zp);
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// ConvInt8, GemmInt8

// What both check of inputs 1..5, the output and the scratch, given the
// product's shape: `m` channels, `k` reduction, `columns` per call,
// `weight_sets` weight matrices (bias sets). With `vector_only` (a GemmInt8
// of one row per weight matrix, which runs as a matrix-vector product) the
// packing scratch need hold only the one row.
Error check_int8_operands(const KernelArgs& args, int64_t m, int64_t k, int64_t columns, int64_t weight_sets,
                          bool vector_only = false) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == DType::UINT8 || x.dtype() == DType::INT8, "input must be uint8 or int8");
  KILN_KERNEL_CHECK(args, k > 0 && k <= kQGemmMaxK, "reduction length %lld outside [1, %lld]",
                    static_cast<long long>(k), static_cast<long long>(kQGemmMaxK));
  const Tensor& w = args.in(1);
  KILN_KERNEL_CHECK(args, w.dtype() == DType::INT8 && w.numel() == weight_sets * m * qgemm_kp(k),
                    "packed weights must be int8 with %lld values",
                    static_cast<long long>(weight_sets * m * qgemm_kp(k)));
  KILN_KERNEL_CHECK(args,
                    args.has_input(2) && args.in(2).dtype() == DType::INT32 && args.in(2).numel() == weight_sets * m,
                    "bias must be int32 with %lld values", static_cast<long long>(weight_sets * m));
  const bool requantized = args.has_input(3);
  KILN_KERNEL_CHECK(args, requantized == args.has_input(4), "multiplier and shift come together");
  if (requantized) {
    for (uint32_t i = 3; i <= 4; ++i) {
      KILN_KERNEL_CHECK(args, args.in(i).dtype() == DType::INT32 && args.in(i).numel() == m,
                        "multiplier and shift must be int32 with %lld values", static_cast<long long>(m));
    }
    KILN_KERNEL_CHECK(args, y.dtype() == DType::UINT8 || y.dtype() == DType::INT8,
                      "a requantized output is uint8 or int8");
  } else {
    KILN_KERNEL_CHECK(args, y.dtype() == DType::INT32, "without requantization the output is int32");
  }
  const bool w_zp = args.has_input(5);
  if (w_zp) {
    KILN_KERNEL_CHECK(args, args.in(5).dtype() == DType::INT32 && args.in(5).numel() == m,
                      "weight zero points must be int32 with %lld values", static_cast<long long>(m));
  }
  // A matrix-vector product reads its row in place: no scratch (programs
  // planned before gave it a packing scratch, which it accepts unused).
  if (vector_only && args.num_scratch == 0) return Error::kOk;
  KILN_KERNEL_CHECK(args, args.num_scratch == (w_zp ? 2 : 1), "expects %d scratch tensors", w_zp ? 2 : 1);
  // At least one panel: the kernels pack and multiply as many columns at a
  // time as the scratch holds (the planner's --no-packing gives a small one).
  const int64_t least = vector_only ? qgemm_kp(k) : qgemm_packed_x_bytes(k, columns < kQGemmNr ? columns : kQGemmNr);
  KILN_KERNEL_CHECK(args, args.scratch[0]->dtype() == DType::UINT8 && args.scratch[0]->numel() >= least,
                    "packing scratch smaller than %lld bytes", static_cast<long long>(least));
  if (w_zp) {
    KILN_KERNEL_CHECK(args, args.scratch[1]->dtype() == DType::INT32 && args.scratch[1]->numel() >= columns,
                      "column-sum scratch smaller than %lld values", static_cast<long long>(columns));
  }
  return Error::kOk;
}

// Columns packed and multiplied per block: as many whole panels as the
// packing scratch holds (at least one; the check asked for that much).
int64_t qgemm_block_columns(const Tensor& scratch, int64_t k, int64_t columns) {
  const int64_t panels = scratch.numel() / (qgemm_kp(k) * kQGemmNr);
  const int64_t block = (panels < 1 ? 1 : panels) * kQGemmNr;
  return block < columns ? block : columns;
}

// The product's fixed operands (everything but x, y and the columns).
QGemmProblem int8_problem(const KernelArgs& args, int64_t y_zp_index) {
  QGemmProblem p;
  p.multiplier = args.has_input(3) ? args.in(3).data_as<const int32_t>() : nullptr;
  p.shift = args.has_input(4) ? args.in(4).data_as<const int32_t>() : nullptr;
  p.w_zp = args.has_input(5) ? args.in(5).data_as<const int32_t>() : nullptr;
  p.x_sums = args.has_input(5) && args.num_scratch > 1 ? args.scratch[1]->data_as<int32_t>() : nullptr;
  p.x = args.num_scratch > 0 ? args.scratch[0]->data_as<const uint8_t>() : nullptr;
  p.y_dtype = args.out(0).dtype();
  p.isa = active_isa();
  if (p.multiplier != nullptr) {
    p.y_zp = static_cast<int32_t>(int_param(args, static_cast<uint32_t>(y_zp_index)));
    p.y_min = static_cast<int32_t>(int_param(args, static_cast<uint32_t>(y_zp_index + 1)));
    p.y_max = static_cast<int32_t>(int_param(args, static_cast<uint32_t>(y_zp_index + 2)));
  }
  return p;
}

// The weight range at ints[i]: 0 (any int8 weight) or 1 (every weight in
// [-64, 64], which the AVX2 product relies on for exact sums): the
// weights are read once here, so a program cannot claim it falsely.
Error check_weight_range(const KernelArgs& args, uint32_t i) {
  const int64_t range = int_param(args, i);
  KILN_KERNEL_CHECK(args, range == 0 || range == 1, "weight range %lld (0 or 1)", static_cast<long long>(range));
  KILN_KERNEL_CHECK(args, range == 0 || qgemm_weights_narrow(args.in(1).data_as<const int8_t>(), args.in(1).numel()),
                    "weight range 1, but a weight lies outside [-64, 64]");
  return Error::kOk;
}

Error check_int8_clamp(const KernelArgs& args, uint32_t first) {
  const DType y = args.out(0).dtype();
  if (y == DType::INT32) return Error::kOk;
  const int64_t lo = y == DType::UINT8 ? 0 : -128, hi = lo + 255;
  const int64_t zp = int_param(args, first), y_min = int_param(args, first + 1), y_max = int_param(args, first + 2);
  KILN_KERNEL_CHECK(args, zp >= lo && zp <= hi && y_min >= lo && y_max <= hi && y_min <= y_max,
                    "output zero point or bounds outside the output's range");
  return Error::kOk;
}

struct Int8Conv {
  int64_t n, c, h, w, m, oh, ow;
  int64_t group, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int64_t x_zp;
  bool quad_taps;  // weight order 1
  bool w_narrow;   // weight range 1: every weight in [-64, 64]
};

Int8Conv int8_conv(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const bool one_d = x.rank() == 3;
  Int8Conv g;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.h = one_d ? 1 : x.dim(2);
  g.w = x.dim(x.rank() - 1);
  g.m = y.dim(1);
  g.oh = one_d ? 1 : y.dim(2);
  g.ow = y.dim(y.rank() - 1);
  g.group = int_param(args, 0);
  g.kh = int_param(args, 1);
  g.kw = int_param(args, 2);
  g.sh = int_param(args, 3);
  g.sw = int_param(args, 4);
  g.dh = int_param(args, 5);
  g.dw = int_param(args, 6);
  g.pt = int_param(args, 7);
  g.pl = int_param(args, 8);
  g.pb = int_param(args, 9);
  g.pr = int_param(args, 10);
  g.x_zp = int_param(args, 11);
  g.quad_taps = optional_int(args, 15) == 1;
  g.w_narrow = optional_int(args, 16) == 1;
  return g;
}

Error check_conv_int8(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 6, 1, args.num_scratch));
  const uint32_t ints = int_count(args);
  KILN_KERNEL_CHECK(args, ints >= 15 && ints <= 17, "expects GenericParams with 15 to 17 integers");
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, (x.rank() == 3 || x.rank() == 4) && y.rank() == x.rank(), "expects NCHW (or NCW) tensors");
  for (uint32_t i = 1; i <= 10; ++i) {
    const int64_t v = int_param(args, i);
    KILN_KERNEL_CHECK(args, v >= (i <= 6 ? 1 : 0) && v <= (int64_t{1} << 20), "geometry parameter %u is %lld", i,
                      static_cast<long long>(v));
  }
  const Int8Conv g = int8_conv(args);
  KILN_KERNEL_CHECK(args, x.rank() == 4 || (g.kh == 1 && g.sh == 1 && g.dh == 1 && g.pt == 0 && g.pb == 0),
                    "a 1-D convolution has height 1");
  KILN_KERNEL_CHECK(args, g.group >= 1 && g.c % g.group == 0 && g.m % g.group == 0 && y.dim(0) == g.n,
                    "group %lld does not divide the channels", static_cast<long long>(g.group));
  KILN_KERNEL_CHECK(args, g.x_zp >= 0 && g.x_zp <= 255, "input zero point outside the uint8 domain");
  if (ints >= 16) {
    const int64_t order = int_param(args, 15);
    KILN_KERNEL_CHECK(args, order == 0 || order == 1, "weight order %lld (0 or 1)", static_cast<long long>(order));
    KILN_KERNEL_CHECK(args, order == 0 || (g.c / g.group) % 4 == 0,
                      "weight order 1 needs channels in whole quads a group");
  }
  const int64_t eh = (g.h + g.pt + g.pb - g.dh * (g.kh - 1) - 1), ew = (g.w + g.pl + g.pr - g.dw * (g.kw - 1) - 1);
  KILN_KERNEL_CHECK(args, eh >= 0 && ew >= 0 && eh / g.sh + 1 == g.oh && ew / g.sw + 1 == g.ow,
                    "output size does not follow from the geometry");
  const int64_t k = (g.c / g.group) * g.kh * g.kw;
  KILN_RETURN_IF_ERROR(check_int8_operands(args, g.m, k, g.oh * g.ow, 1));
  KILN_KERNEL_CHECK(args, args.in(1).numel() == g.group * (g.m / g.group) * qgemm_kp(k),
                    "packed weights have the wrong size");
  if (ints == 17) KILN_RETURN_IF_ERROR(check_weight_range(args, 16));
  return check_int8_clamp(args, 12);
}

#if KILN_X86
// Below this many channels the per-channel kernel's long rows beat the
// lanes' half-empty vectors (depthwise_lanes_avx2); 8 channels fill them
// with two output positions where the stride along rows is 1.
constexpr int64_t kDepthwiseLanesMinChannels = 16;
// The narrowest output row the VNNI kernel takes first (before the lanes).
constexpr int64_t kDepthwiseRowsMinWidth = 16;
constexpr int64_t kDepthwiseLanesMinChannelsStride1 = 8;

// The depthwise convolution with the channels across the vector lanes, 16
// at a time (depthwise_lanes_avx2): no per-channel passes, whatever the
// plane's size. False (nothing done) where the ISA, the channel count, the
// channels' requantization or the band buffer rule it out.
// The operands of the x86 depthwise kernels but the channels' own.
QDepthwiseLanes depthwise_operands(const KernelArgs& args, const Int8Conv& g, const QGemmProblem& p) {
  QDepthwiseLanes d;
  // clang-format off
  d.h = g.h; d.w = g.w; d.kh = g.kh; d.kw = g.kw; d.sh = g.sh; d.sw = g.sw; d.dh = g.dh; d.dw = g.dw;
  d.pt = g.pt; d.pl = g.pl; d.oh = g.oh; d.ow = g.ow;
  // clang-format on
  d.flip = args.in(0).dtype() == DType::INT8 ? 0x80 : 0;
  d.pad = static_cast<uint8_t>(g.x_zp);
  d.kp = qgemm_kp(g.kh * g.kw);
  d.y_zp = p.y_zp;
  d.y_min = p.y_min;
  d.y_max = p.y_max;
  d.y_unsigned = p.y_dtype == DType::UINT8;
  return d;
}

// kernel(e) for every block of `block` channels of each image (the last
// of an image fewer), the blocks across the pool.
template <typename Kernel>
void depthwise_blocks(const KernelArgs& args, const Int8Conv& g, const QGemmProblem& p, const QDepthwiseLanes& d,
                      int64_t block, const Kernel& kernel) {
  const int64_t blocks = (g.c + block - 1) / block, total = g.n * blocks;
  const int64_t tasks = parallel_tasks(args.pool, g.n * g.c * g.oh * g.ow * g.kh * g.kw, total);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t i0, i1;
    parallel_range(total, tasks, t, 1, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / blocks, c0 = (i % blocks) * block;
      QDepthwiseLanes e = d;
      e.channels = g.c - c0 < block ? g.c - c0 : block;
      e.x = args.in(0).data_as<const uint8_t>() + (b * g.c + c0) * g.h * g.w;
      e.w8 = args.in(1).data_as<const int8_t>() + c0 * e.kp;
      e.bias = args.in(2).data_as<const int32_t>() + c0;
      e.multiplier = p.multiplier + c0;
      e.shift = p.shift + c0;
      e.y = args.out(0).data_as<uint8_t>() + (b * g.m + c0) * g.oh * g.ow;
      kernel(e);
    }
  });
}

bool run_depthwise_int8_lanes(const KernelArgs& args, const Int8Conv& g, const QGemmProblem& p) {
  if (!((g.c >= kDepthwiseLanesMinChannels || (g.c >= kDepthwiseLanesMinChannelsStride1 && g.sw == 1)) &&
        (p.isa == Isa::kAvx2 || p.isa == Isa::kAvx512) &&
        depthwise_lanes_params_ok(args.in(2).data_as<const int32_t>(), p.shift, g.c))) {
    return false;
  }
  QDepthwiseLanes d = depthwise_operands(args, g, p);
  d.channels = 16;
  if (!depthwise_lanes_fit(d)) return false;
  // Blocks of 16 channels (each call's band buffer is on its own stack).
  depthwise_blocks(args, g, p, d, 16, [](const QDepthwiseLanes& e) { depthwise_lanes_avx2(e); });
  return true;
}

// The depthwise convolution channel by channel with vpdpbusd
// (depthwise_rows_vnni), on the avx512 path of a processor with VNNI.
bool run_depthwise_int8_vnni(const KernelArgs& args, const Int8Conv& g, const QGemmProblem& p) {
  if (p.isa != Isa::kAvx512 || !processor_has_avx512_vnni() ||
      !depthwise_lanes_params_ok(args.in(2).data_as<const int32_t>(), p.shift, g.c)) {
    return false;
  }
  QDepthwiseLanes d = depthwise_operands(args, g, p);
  if (!depthwise_rows_vnni_fit(d)) return false;
  depthwise_blocks(args, g, p, d, 4, [](const QDepthwiseLanes& e) { depthwise_rows_vnni(e); });
  return true;
}
#endif

// Sums a row chunk of the per-channel path holds (2 KiB of stack).
constexpr int64_t kDepthwiseChunk = 512;

// One channel of the per-channel path: its plane padded with the zero
// point (ph x pw, in the scratch, followed by room for the stride-2
// halves), its weights, requantization and outputs.
struct DepthwiseInt8Channel {
  uint8_t* padded = nullptr;
  int64_t ph = 0, pw = 0;
  const int8_t* w = nullptr;
  int32_t bias = 0, multiplier = 0, shift = 0;
  uint8_t* out = nullptr;  // the channel's oh x ow outputs
  size_t y_elem = 1;
};

// Output rows oy0 .. oy0 + nrows of one channel, their sums in acc (the
// rows `pitch` apart), moved together (left only) and requantized at once.
void depthwise_int8_finish(const Int8Conv& g, const QGemmProblem& p, const DepthwiseInt8Channel& ch, int32_t* acc,
                           int64_t oy0, int64_t nrows, int64_t pitch) {
  for (int64_t r = 1; r < nrows; ++r) {
    memmove(acc + r * g.ow, acc + r * pitch, static_cast<size_t>(g.ow) * sizeof(int32_t));
  }
  qgemm_requantize_row(acc, nrows * g.ow, ch.bias, ch.multiplier, ch.shift, p.y_zp, p.y_min, p.y_max, p.y_dtype,
                       ch.out + static_cast<size_t>(oy0 * g.ow) * ch.y_elem, p.isa,
                       qgemm_vector_requant_k(g.kh * g.kw));
}

// Stride 1 along rows (pw <= kDepthwiseChunk): several output rows at once
// over the padded width (the columns past ow are computed and dropped), so
// each tap is one long multiply-add.
void depthwise_int8_stride1(const Int8Conv& g, const QGemmProblem& p, const DepthwiseInt8Channel& ch, int32_t* acc) {
  const int64_t pw = ch.pw;
  const int64_t rows = kDepthwiseChunk / pw;
  for (int64_t oy0 = 0; oy0 < g.oh; oy0 += rows) {
    const int64_t nrows = g.oh - oy0 < rows ? g.oh - oy0 : rows;
    const int64_t count = (nrows - 1) * pw + g.ow;
    memset(acc, 0, static_cast<size_t>(count) * sizeof(int32_t));
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const uint8_t* in = ch.padded + (oy0 * g.sh + ky * g.dh) * pw;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        if (g.sh == 1) {
          qgemm_depthwise_tap(acc, in + kx * g.dw, 1, count, ch.w[ky * g.kw + kx], p.isa);
        } else {
          for (int64_t r = 0; r < nrows; ++r) {
            qgemm_depthwise_tap(acc + r * pw, in + r * g.sh * pw + kx * g.dw, 1, g.ow, ch.w[ky * g.kw + kx], p.isa);
          }
        }
      }
    }
    depthwise_int8_finish(g, p, ch, acc, oy0, nrows, pw);
  }
}

// Stride 2 along rows, undilated (ow <= kDepthwiseChunk, the halves fit
// the scratch): the padded plane's even and odd columns apart (after it in
// the scratch), so every tap reads contiguously.
void depthwise_int8_stride2(const Int8Conv& g, const QGemmProblem& p, const DepthwiseInt8Channel& ch, int32_t* acc) {
  const int64_t ph = ch.ph, pw = ch.pw, half = (pw + 1) / 2;
  uint8_t* even = ch.padded + ph * pw;
  uint8_t* odd = even + ph * half;
  for (int64_t r = 0; r < ph; ++r) {
    const uint8_t* row = ch.padded + r * pw;
    for (int64_t j = 0; j < half; ++j) {
      even[r * half + j] = row[2 * j];
      odd[r * half + j] = 2 * j + 1 < pw ? row[2 * j + 1] : row[2 * j];
    }
  }
  // Output row oy reads rows oy * sH + ky * dH of the half planes:
  // consecutive output rows are `pitch` bytes apart, so several rows
  // go through each tap at once (the columns between them computed
  // and dropped), as in the stride-1 case.
  const int64_t pitch = g.sh * half;
  const int64_t rows = pitch <= kDepthwiseChunk ? kDepthwiseChunk / pitch : 1;
  for (int64_t oy0 = 0; oy0 < g.oh; oy0 += rows) {
    const int64_t nrows = g.oh - oy0 < rows ? g.oh - oy0 : rows;
    const int64_t count = (nrows - 1) * pitch + g.ow;
    memset(acc, 0, static_cast<size_t>(count) * sizeof(int32_t));
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t r = oy0 * g.sh + ky * g.dh;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const uint8_t* half_plane = (kx % 2 == 0 ? even : odd) + r * half + kx / 2;
        qgemm_depthwise_tap(acc, half_plane, 1, count, ch.w[ky * g.kw + kx], p.isa);
      }
    }
    depthwise_int8_finish(g, p, ch, acc, oy0, nrows, pitch);
  }
}

// Any other geometry: output row by output row, kDepthwiseChunk columns at
// a time, each tap a strided multiply-add.
void depthwise_int8_rows(const Int8Conv& g, const QGemmProblem& p, const DepthwiseInt8Channel& ch, int32_t* acc) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    for (int64_t ox0 = 0; ox0 < g.ow; ox0 += kDepthwiseChunk) {
      const int64_t count = g.ow - ox0 < kDepthwiseChunk ? g.ow - ox0 : kDepthwiseChunk;
      memset(acc, 0, static_cast<size_t>(count) * sizeof(int32_t));
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        const uint8_t* in_row = ch.padded + (oy * g.sh + ky * g.dh) * ch.pw + ox0 * g.sw;
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          qgemm_depthwise_tap(acc, in_row + kx * g.dw, g.sw, count, ch.w[ky * g.kw + kx], p.isa);
        }
      }
      qgemm_requantize_row(acc, count, ch.bias, ch.multiplier, ch.shift, p.y_zp, p.y_min, p.y_max, p.y_dtype,
                           ch.out + static_cast<size_t>(oy * g.ow + ox0) * ch.y_elem, p.isa,
                           qgemm_vector_requant_k(g.kh * g.kw));
    }
  }
}

// A depthwise convolution (one input channel per output channel, weight
// zero points 0, requantized) computed directly: across the vector lanes
// where the processor has them (x86), otherwise channel by channel: the
// image's channel copied into scratch with its padding (the zero point),
// then per output row and tap one multiply-add over the row. The same sums
// as the im2col product (zero-padded taps there add nothing: their weights
// are 0). False (nothing done) when it does not apply or the padded plane
// exceeds the scratch.
bool run_depthwise_int8(const KernelArgs& args, const Int8Conv& g, const QGemmProblem& p) {
  if (g.group != g.c || g.m != g.c || p.w_zp != nullptr || p.multiplier == nullptr) return false;
#if KILN_X86
  // With VNNI, row by row where a row fills a vector of 16 outputs; on
  // narrower planes (7 x 7, 14 x 14) the lanes' 16 channels a vector waste
  // nothing (MobileNetV2's 7 x 7s: 0.031 ms a layer in lanes, 0.065 by
  // rows; 14 x 14 the same either way; 28 x 28 and up faster by rows).
  if (g.ow >= kDepthwiseRowsMinWidth && run_depthwise_int8_vnni(args, g, p)) return true;
  if (run_depthwise_int8_lanes(args, g, p)) return true;
  if (run_depthwise_int8_vnni(args, g, p)) return true;
#endif
  const int64_t ph = g.h + g.pt + g.pb, pw = g.w + g.pl + g.pr;
  const Tensor& scratch = *args.scratch[0];
  if (ph * pw > scratch.numel()) return false;
  const int64_t kp = qgemm_kp(g.kh * g.kw), plane = g.oh * g.ow;
  const uint8_t flip = args.in(0).dtype() == DType::INT8 ? 0x80 : 0;
  const uint8_t* x = args.in(0).data_as<const uint8_t>();
  const int32_t* bias = args.in(2).data_as<const int32_t>();
  DepthwiseInt8Channel ch;
  ch.padded = scratch.data_as<uint8_t>();
  ch.ph = ph;
  ch.pw = pw;
  ch.y_elem = dtype_size(p.y_dtype);
  int32_t acc[kDepthwiseChunk];
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t c = 0; c < g.c; ++c) {
      const uint8_t* src = x + (b * g.c + c) * g.h * g.w;
      memset(ch.padded, static_cast<int>(g.x_zp), static_cast<size_t>(ph * pw));
      for (int64_t r = 0; r < g.h; ++r) {
        uint8_t* row = ch.padded + (r + g.pt) * pw + g.pl;
        for (int64_t i = 0; i < g.w; ++i) row[i] = static_cast<uint8_t>(src[r * g.w + i] ^ flip);
      }
      ch.w = args.in(1).data_as<const int8_t>() + c * kp;
      ch.bias = bias[c];
      ch.multiplier = p.multiplier[c];
      ch.shift = p.shift[c];
      ch.out = args.out(0).data_as<uint8_t>() + static_cast<size_t>((b * g.m + c) * plane) * ch.y_elem;
      if (g.sw == 1 && pw <= kDepthwiseChunk) {
        depthwise_int8_stride1(g, p, ch, acc);
      } else if (g.sw == 2 && g.dw == 1 && g.ow <= kDepthwiseChunk &&
                 ph * pw + 2 * ph * ((pw + 1) / 2) <= scratch.numel()) {
        depthwise_int8_stride2(g, p, ch, acc);
      } else {
        depthwise_int8_rows(g, p, ch, acc);
      }
    }
  }
  return true;
}

// A convolution of group 1 without im2col (qgemm_conv_direct: the input
// interleaved into phase planes once, the tile reading it in place), where
// the ISA has the tile and the scratch holds the copy. False (nothing done)
// otherwise, and where it would multiply much more than im2col
// (qgemm_conv_direct_pays). A 1x1 window keeps the packers (the columns as
// they are, or one strided gather: cheaper than the phase planes).
bool run_direct_int8(const KernelArgs& args, const Int8Conv& g, const QGemmProblem& p) {
#if KILN_X86
  if (p.w_zp != nullptr || p.multiplier == nullptr) return false;
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  if (g.kh * g.kw == 1 ||
      !qgemm_conv_direct_pays(cg, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl, g.pb, g.pr)) {
    return false;
  }
  const QGemmTileOffsetsFn tile = qgemm_tile_offsets_for(p.isa);
  if (tile == nullptr) return false;
  QConvDirect d;
  // clang-format off
  d.c = cg; d.h = g.h; d.w = g.w; d.kh = g.kh; d.kw = g.kw; d.sh = g.sh; d.sw = g.sw; d.dh = g.dh; d.dw = g.dw;
  d.pt = g.pt; d.pl = g.pl; d.pb = g.pb; d.pr = g.pr;
  d.oh = g.oh; d.ow = g.ow;
  // clang-format on
  d.flip = args.in(0).dtype() == DType::INT8;
  d.pad = static_cast<uint8_t>(g.x_zp);
  d.m = mg;
  d.y_zp = p.y_zp;
  d.y_min = p.y_min;
  d.y_max = p.y_max;
  d.y_dtype = p.y_dtype;
  d.isa = p.isa;
  d.w_in_steps = g.quad_taps;
  d.w_narrow = g.w_narrow;
  const int64_t bytes = qgemm_conv_direct_bytes(d);
  const Tensor& scratch = *args.scratch[0];
  if (bytes < 0 || bytes > scratch.numel()) return false;
  const size_t y_elem = dtype_size(p.y_dtype);
  const int64_t kp = qgemm_kp(cg * g.kh * g.kw);
  // One group of one image: its input, weights, requantization and output.
  const auto run_group = [&](QConvDirect one, int64_t b, int64_t grp, uint8_t* space, int64_t space_bytes,
                             ThreadPool* pool) {
    const int64_t c0 = grp * mg;
    one.x = args.in(0).data_as<const uint8_t>() + (b * g.c + grp * cg) * g.h * g.w;
    one.y = args.out(0).data_as<uint8_t>() + static_cast<size_t>((b * g.m + c0) * g.oh * g.ow) * y_elem;
    one.w8 = args.in(1).data_as<const int8_t>() + c0 * kp;
    one.bias = args.in(2).data_as<const int32_t>() + c0;
    one.multiplier = p.multiplier + c0;
    one.shift = p.shift + c0;
    qgemm_conv_direct(one, space, space_bytes, tile, pool);
  };
  // Where the planner gave a block of scratch a thread (grouped), each
  // thread takes whole groups, one pool call an image: a group's channel
  // tiles (one to four for ResNeXt's and RegNet's) split no further, and
  // split group by group, each group's copy of its input ran on one thread
  // while the other waited.
  const int64_t blocks = g.group > 1 ? scratch.numel() / bytes : 1;
  const int64_t work_tasks = parallel_tasks(args.pool, g.m * g.oh * g.ow * kp, g.group);
  const int64_t tasks = blocks < work_tasks ? blocks : work_tasks;
  for (int64_t b = 0; b < g.n; ++b) {
    if (tasks > 1) {
      parallel_for(args.pool, tasks, [&](int64_t t) {
        int64_t g0, g1;
        parallel_range(g.group, tasks, t, 1, &g0, &g1);
        for (int64_t grp = g0; grp < g1; ++grp) {
          run_group(d, b, grp, scratch.data_as<uint8_t>() + t * bytes, bytes, nullptr);
        }
      });
      continue;
    }
    for (int64_t grp = 0; grp < g.group; ++grp) {
      run_group(d, b, grp, scratch.data_as<uint8_t>(), scratch.numel(), args.pool);
    }
  }
  return true;
#else
  (void)args;
  (void)g;
  (void)p;
  return false;
#endif
}

Error run_conv_int8(const KernelArgs& args) {
  const Int8Conv g = int8_conv(args);
  QGemmProblem p = int8_problem(args, 12);
  p.w_narrow = g.w_narrow;
  if (run_depthwise_int8(args, g, p)) return Error::kOk;
  if (run_direct_int8(args, g, p)) return Error::kOk;
  const QGemmTileFn tile = qgemm_tile_for(active_isa());
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  const int64_t k = cg * g.kh * g.kw, kp = qgemm_kp(k);
  const int64_t plane = g.oh * g.ow;
  const size_t y_elem = dtype_size(p.y_dtype);
  const bool flip = args.in(0).dtype() == DType::INT8;
  const uint8_t* x = args.in(0).data_as<const uint8_t>();
  const int8_t* w = args.in(1).data_as<const int8_t>();
  const int32_t* bias = args.in(2).data_as<const int32_t>();
  uint8_t* y = args.out(0).data_as<uint8_t>();
  const int32_t* multiplier = p.multiplier;
  const int32_t* shift = p.shift;
  const int32_t* w_zp = p.w_zp;
  p.m = mg;
  p.k = k;
  p.y_channel_stride = plane;
  p.y_column_stride = 1;
  int32_t* sums = const_cast<int32_t*>(p.x_sums);
  const int64_t block = qgemm_block_columns(*args.scratch[0], k, plane);
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      for (int64_t b0 = 0; b0 < plane; b0 += block) {
        const int64_t nb = plane - b0 < block ? plane - b0 : block;
        p.n = nb;
        p.x_sums = sums != nullptr ? sums + b0 : nullptr;
        QIm2col im;
        im.x = x + (b * g.c + grp * cg) * g.h * g.w;
        im.channels = cg;
        // clang-format off
        im.h = g.h; im.w = g.w;
        im.kh = g.kh; im.kw = g.kw; im.sh = g.sh; im.sw = g.sw; im.dh = g.dh; im.dw = g.dw;
        im.pt = g.pt; im.pl = g.pl;
        im.oh = g.oh; im.ow = g.ow;
        // clang-format on
        im.flip = flip;
        im.quad_taps = g.quad_taps;
        im.pad = static_cast<uint8_t>(g.x_zp);
        im.col0 = b0;
        im.cols = nb;
        if (g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0) {
          qgemm_pack_columns(im.x + b0, g.h * g.w, nb, cg, flip, args.scratch[0]->data_as<uint8_t>(),
                             const_cast<int32_t*>(p.x_sums));
        } else {
          qgemm_pack_im2col(im, args.scratch[0]->data_as<uint8_t>(), const_cast<int32_t*>(p.x_sums));
        }
        const int64_t c0 = grp * mg;
        p.w = w + c0 * kp;
        p.bias = bias + c0;
        p.multiplier = multiplier != nullptr ? multiplier + c0 : nullptr;
        p.shift = shift != nullptr ? shift + c0 : nullptr;
        p.w_zp = w_zp != nullptr ? w_zp + c0 : nullptr;
        p.y = y + static_cast<size_t>((b * g.m + c0) * plane + b0) * y_elem;
        qgemm_parallel(p, tile, args.pool);
      }
    }
  }
  return Error::kOk;
}

Error check_gemm_int8(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 6, 1, args.num_scratch));
  const uint32_t ints = int_count(args);
  KILN_KERNEL_CHECK(args, ints == 5 || ints == 6, "expects GenericParams with 5 or 6 integers");
  const Tensor& a = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, a.rank() >= 1 && y.rank() == a.rank(), "input and output differ in rank");
  const int64_t batches = int_param(args, 0);
  const int64_t k = a.dim(a.rank() - 1);
  const int64_t n = y.dim(y.rank() - 1);
  KILN_KERNEL_CHECK(args, k > 0 && n > 0 && batches >= 1, "empty product");
  const int64_t rows = a.numel() / k;
  KILN_KERNEL_CHECK(args, rows % batches == 0 && y.numel() == rows * n, "output does not match the rows of the input");
  for (uint32_t d = 0; d + 1 < a.rank(); ++d)
    KILN_KERNEL_CHECK(args, a.dim(d) == y.dim(d), "input and output differ in dim %u", d);
  const int64_t x_zp = int_param(args, 1);
  KILN_KERNEL_CHECK(args, x_zp >= 0 && x_zp <= 255, "input zero point outside the uint8 domain");
  KILN_RETURN_IF_ERROR(check_int8_operands(args, n, k, rows / batches, batches, rows == batches));
  if (ints == 6) KILN_RETURN_IF_ERROR(check_weight_range(args, 5));
  return check_int8_clamp(args, 2);
}

Error run_gemm_int8(const KernelArgs& args) {
  const Tensor& a = args.in(0);
  const Tensor& yt = args.out(0);
  QGemmProblem p = int8_problem(args, 2);
  p.w_narrow = optional_int(args, 5) == 1;
  const QGemmTileFn tile = qgemm_tile_for(active_isa());
  const int64_t batches = int_param(args, 0);
  const int64_t k = a.dim(a.rank() - 1), kp = qgemm_kp(k);
  const int64_t n = yt.dim(yt.rank() - 1);
  const int64_t rows = a.numel() / k / batches;
  const size_t y_elem = dtype_size(p.y_dtype);
  const int8_t* w = args.in(1).data_as<const int8_t>();
  const int32_t* bias = args.in(2).data_as<const int32_t>();
  p.m = n;
  p.k = k;
  p.y_channel_stride = 1;
  p.y_column_stride = n;
  int32_t* sums = const_cast<int32_t*>(p.x_sums);
  if (rows == 1) {
    // One row per weight matrix: a matrix-vector product over the weight
    // rows and the input row in place (a 16-column panel would be 15/16
    // padding); a packing scratch, in programs planned before, goes unused.
    const uint8_t flip = a.dtype() == DType::INT8 ? 0x80 : 0;
    for (int64_t b = 0; b < batches; ++b) {
      const uint8_t* x = a.data_as<const uint8_t>() + b * k;
      int32_t sum = 0;
      if (p.w_zp != nullptr) {
        for (int64_t kk = 0; kk < k; ++kk) sum += static_cast<uint8_t>(x[kk] ^ flip);
      }
      p.n = 1;
      p.w = w + b * n * kp;
      p.bias = bias + b * n;
      p.y = yt.data_as<uint8_t>() + static_cast<size_t>(b * n) * y_elem;
      qgemm_gemv(p, x, flip, sum);
    }
    return Error::kOk;
  }
  const int64_t block = qgemm_block_columns(*args.scratch[0], k, rows);
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t nb = rows - r0 < block ? rows - r0 : block;
      p.n = nb;
      p.x_sums = sums != nullptr ? sums + r0 : nullptr;
      qgemm_pack_rows(a.data_as<const uint8_t>() + (b * rows + r0) * k, k, nb, k, a.dtype() == DType::INT8,
                      args.scratch[0]->data_as<uint8_t>(), const_cast<int32_t*>(p.x_sums));
      p.w = w + b * n * kp;
      p.bias = bias + b * n;
      p.y = yt.data_as<uint8_t>() + static_cast<size_t>((b * rows + r0) * n) * y_elem;
      qgemm_parallel(p, tile, args.pool);
    }
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// AvgPoolInt8, AddInt8, MulInt8

bool is_8bit(DType t) { return t == DType::UINT8 || t == DType::INT8; }

// Reads element i of uint8 or int8 data as its integer value.
inline int32_t load_q(const void* data, bool is_signed, int64_t i) {
  return is_signed ? static_cast<const int8_t*>(data)[i] : static_cast<const uint8_t*>(data)[i];
}

inline void store_q(void* data, bool is_signed, int64_t i, int64_t v, int64_t lo, int64_t hi) {
  v = v < lo ? lo : v > hi ? hi : v;
  if (is_signed) {
    static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v);
  } else {
    static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v);
  }
}

// The zero point at ints[i] and the bounds at ints[first..first+2] inside
// the dtype's range.
Error check_q_range(const KernelArgs& args, DType dtype, uint32_t zp, uint32_t first) {
  const int64_t lo = dtype == DType::UINT8 ? 0 : -128, hi = lo + 255;
  const int64_t z = int_param(args, zp), y_zp = int_param(args, first), y_min = int_param(args, first + 1),
                y_max = int_param(args, first + 2);
  KILN_KERNEL_CHECK(args,
                    z >= lo && z <= hi && y_zp >= lo && y_zp <= hi && y_min >= lo && y_max <= hi && y_min <= y_max,
                    "zero point or bounds outside the data's range");
  return Error::kOk;
}

// Checked at load: every extent below 2^24 (the sums and offsets inside
// one plane fit int32, which keeps the Cortex-M code small).
// The widest output row avg_pool_int8_2x2 takes (its sums on the stack).
constexpr int32_t kAvgPool2x2MaxWidth = 1024;

struct AvgPoolInt8Geometry {
  int64_t planes;
  int32_t h, w, oh, ow, kh, kw, sh, sw, pt, pl, pb, pr;
  bool include_pad;
};

AvgPoolInt8Geometry avg_pool_int8_geometry(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const bool one_d = x.rank() == 3;
  AvgPoolInt8Geometry g;
  g.planes = x.dim(0) * x.dim(1);
  g.h = static_cast<int32_t>(one_d ? 1 : x.dim(2));
  g.w = static_cast<int32_t>(x.dim(x.rank() - 1));
  g.oh = static_cast<int32_t>(one_d ? 1 : y.dim(2));
  g.ow = static_cast<int32_t>(y.dim(y.rank() - 1));
  int32_t* fields[] = {&g.kh, &g.kw, &g.sh, &g.sw, &g.pt, &g.pl, &g.pb, &g.pr};
  for (uint32_t i = 0; i < 8; ++i) *fields[i] = static_cast<int32_t>(int_param(args, i));
  g.include_pad = int_param(args, 8) != 0;
  return g;
}

// The sum of n uint8 or int8 values (n < 2^23: inside int32). On x86-64,
// SSE2's psadbw adds 16 bytes at a time (x86/int8_sse2.h).
int32_t sum_bytes(const uint8_t* x, int32_t n, bool is_signed) {
  int32_t i = 0, sum = 0;
#if KILN_X86
  sum = x86::sum_bytes_sse2(x, n, is_signed, &i);
#endif
  for (; i < n; ++i) sum += is_signed ? static_cast<int8_t>(x[i]) : x[i];
  return sum;
}

// Taps of a window starting at `first` (kernel k) inside [lo, hi).
inline int32_t taps_in(int32_t first, int32_t k, int32_t lo, int32_t hi) {
  const int32_t a = first > lo ? first : lo, b = first + k < hi ? first + k : hi;
  return b > a ? b - a : 0;
}

Error check_avg_pool_int8(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3, 1));
  KILN_KERNEL_CHECK(args, has_ints(args, 13), "expects GenericParams with 13 integers");
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, is_8bit(x.dtype()) && y.dtype() == x.dtype(), "input and output must be uint8 or int8 alike");
  KILN_KERNEL_CHECK(
      args, (x.rank() == 3 || x.rank() == 4) && y.rank() == x.rank() && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1),
      "expects NCHW (or NCW) tensors of the same N and C");
  for (uint32_t i = 0; i < 8; ++i) {
    const int64_t v = int_param(args, i);
    KILN_KERNEL_CHECK(args, v >= (i < 4 ? 1 : 0) && v <= (int64_t{1} << 20), "geometry parameter %u is %lld", i,
                      static_cast<long long>(v));
  }
  for (uint32_t d = 2; d < x.rank(); ++d) {
    KILN_KERNEL_CHECK(args, x.dim(d) < (int64_t{1} << 24) && y.dim(d) < (int64_t{1} << 24),
                      "plane extent of 2^24 or more");
  }
  const AvgPoolInt8Geometry g = avg_pool_int8_geometry(args);
  KILN_KERNEL_CHECK(args, x.rank() == 4 || (g.kh == 1 && g.sh == 1 && g.pt == 0 && g.pb == 0),
                    "a 1-D pool has height 1");
  KILN_KERNEL_CHECK(args, int64_t{g.kh} * g.kw <= (int64_t{1} << 23), "window of %lld taps (at most 2^23)",
                    static_cast<long long>(int64_t{g.kh} * g.kw));
  KILN_KERNEL_CHECK(args, g.pt < g.kh && g.pb < g.kh && g.pl < g.kw && g.pr < g.kw, "pads as large as the window");
  // Every window starts inside the padded plane and meets the image.
  KILN_KERNEL_CHECK(args,
                    g.oh >= 1 && g.ow >= 1 && int64_t{g.oh - 1} * g.sh < g.h + g.pt &&
                        int64_t{g.ow - 1} * g.sw < g.w + g.pl && int64_t{g.h} * g.w <= INT32_MAX &&
                        int64_t{g.oh} * g.ow <= INT32_MAX,
                    "output size does not follow from the geometry");
  const int64_t taps = args.in(1).numel();
  for (uint32_t i = 1; i <= 2; ++i) {
    KILN_KERNEL_CHECK(args, args.in(i).dtype() == DType::INT32 && args.in(i).numel() == taps,
                      "multiplier and shift must be int32 of one size");
  }
  KILN_KERNEL_CHECK(args, taps == int64_t{g.kh} * g.kw || taps == 1, "expects %lld multipliers or one",
                    static_cast<long long>(int64_t{g.kh} * g.kw));
  if (taps == 1 && int64_t{g.kh} * g.kw != 1) {
    // One multiplier: every window must have all kh * kw taps counted.
    const int64_t lo_h = g.include_pad ? -g.pt : 0, hi_h = g.include_pad ? g.h + g.pb : g.h;
    const int64_t lo_w = g.include_pad ? -g.pl : 0, hi_w = g.include_pad ? g.w + g.pr : g.w;
    KILN_KERNEL_CHECK(args,
                      -g.pt >= lo_h && int64_t{g.oh - 1} * g.sh - g.pt + g.kh <= hi_h && -g.pl >= lo_w &&
                          int64_t{g.ow - 1} * g.sw - g.pl + g.kw <= hi_w,
                      "one multiplier, but some windows have fewer than %lld taps",
                      static_cast<long long>(int64_t{g.kh} * g.kw));
  }
  const int32_t* shift = args.in(2).data_as<const int32_t>();
  for (int64_t i = 0; i < taps; ++i) {
    KILN_KERNEL_CHECK(args, shift[i] >= 1 && shift[i] <= 62, "shift %d outside [1, 62]", static_cast<int>(shift[i]));
  }
  return check_q_range(args, x.dtype(), 9, 10);
}

// qgemm_requantize_even's multiplier m * 2^-s, and whether it is a power of
// two 2^-shift (one scale in and out over 2^k taps), which 32 bits take.
struct EvenRequant {
  int32_t m, s, shift;
  bool pow2;
};

EvenRequant even_requant(int32_t m, int32_t s) {
  EvenRequant r{m, s, s, false};
  int32_t odd = m;
  while (odd != 0 && odd % 2 == 0 && r.shift > 1) {
    odd /= 2;
    --r.shift;
  }
  r.pow2 = odd == 1 && r.shift <= 30;
  return r;
}

// y[i] = clamp(qgemm_requantize_even(acc[i] + bias, m, s) + zp, lo, hi) as
// bytes (uint8 where `is_unsigned`), for |acc + bias| < 2^24 (a pool's
// sums). A power of two in 32 bits, eight at a time on x86's vector paths
// (a tail as the last eight again); otherwise one value at a time.
void requantize_row_even(const int32_t* acc, int64_t n, int32_t bias, const EvenRequant& r, int32_t zp, int32_t lo,
                         int32_t hi, bool is_unsigned, uint8_t* y) {
  if (!r.pow2) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t q = qgemm_requantize_even(int64_t{acc[i]} + bias, r.m, r.s) + zp;
      y[i] = static_cast<uint8_t>(q < lo ? lo : q > hi ? hi : q);
    }
    return;
  }
#if KILN_X86
  if (n >= 8 && (active_isa() == Isa::kAvx2 || active_isa() == Isa::kAvx512)) {
    requantize_row_pow2_even_avx2(acc, n, bias, r.shift, zp, lo, hi, is_unsigned, y);
    if (n % 8 != 0) requantize_row_pow2_even_avx2(acc + n - 8, 8, bias, r.shift, zp, lo, hi, is_unsigned, y + n - 8);
    return;
  }
#else
  static_cast<void>(is_unsigned);
#endif
  const int32_t half = (1 << (r.shift - 1)) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = acc[i] + bias;
    const int32_t q = ((v + half + ((v >> r.shift) & 1)) >> r.shift) + zp;
    y[i] = static_cast<uint8_t>(q < lo ? lo : q > hi ? hi : q);
  }
}

// 2x2 windows at stride 2 wholly inside the plane (DenseNet's
// transitions): the four-tap sums of as many output rows as the stack's
// buffer holds, requantized at once (requantize_row_even, the window's
// zero points as its bias), planes across the pool.
void avg_pool_int8_2x2(const KernelArgs& args, const AvgPoolInt8Geometry& g, int32_t x_zp, int32_t y_zp, int32_t lo,
                       int32_t hi) {
  const bool is_signed = args.in(0).dtype() == DType::INT8;
  // A window of 4 taps: the only multiplier, or the fourth of one per count.
  const int64_t i = args.in(1).numel() == 1 ? 0 : 3;
  const EvenRequant r = even_requant(args.in(1).data_as<const int32_t>()[i], args.in(2).data_as<const int32_t>()[i]);
  const uint8_t flip = is_signed ? 0x80 : 0;
  const int32_t zp4 = 4 * (x_zp + (is_signed ? 128 : 0));  // in the flipped (uint8) domain
  const bool y_unsigned = args.out(0).dtype() == DType::UINT8;
  const int32_t rows = kAvgPool2x2MaxWidth / g.ow;  // at least 1: ow <= kAvgPool2x2MaxWidth
  parallel_for_ranges(args.pool, g.planes, 1, [&](int64_t p0, int64_t p1) {
    int32_t sums[kAvgPool2x2MaxWidth];
    for (int64_t plane = p0; plane < p1; ++plane) {
      const uint8_t* x = args.in(0).data_as<const uint8_t>() + plane * g.h * g.w;
      uint8_t* y = args.out(0).data_as<uint8_t>() + plane * g.oh * g.ow;
      for (int32_t oy0 = 0; oy0 < g.oh; oy0 += rows) {
        const int32_t oy1 = oy0 + rows < g.oh ? oy0 + rows : g.oh;
        for (int32_t oy = oy0; oy < oy1; ++oy) {
          const uint8_t* r0 = x + 2 * oy * g.w;
          const uint8_t* r1 = r0 + g.w;
          int32_t* row = sums + (oy - oy0) * g.ow;
          for (int32_t ox = 0; ox < g.ow; ++ox) {
            row[ox] = (r0[2 * ox] ^ flip) + (r0[2 * ox + 1] ^ flip) + (r1[2 * ox] ^ flip) + (r1[2 * ox + 1] ^ flip);
          }
        }
        requantize_row_even(sums, int64_t{oy1 - oy0} * g.ow, -zp4, r, y_zp, lo, hi, y_unsigned, y + oy0 * g.ow);
      }
    }
  });
}

Error run_avg_pool_int8(const KernelArgs& args) {
  const AvgPoolInt8Geometry g = avg_pool_int8_geometry(args);
  const bool is_signed = args.in(0).dtype() == DType::INT8;
  const int32_t* multiplier = args.in(1).data_as<const int32_t>();
  const int32_t* shift = args.in(2).data_as<const int32_t>();
  const bool one = args.in(1).numel() == 1;
  const int32_t x_zp = static_cast<int32_t>(int_param(args, 9)), y_zp = static_cast<int32_t>(int_param(args, 10));
  const int32_t lo = static_cast<int32_t>(int_param(args, 11)), hi = static_cast<int32_t>(int_param(args, 12));
  if (g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.pt == 0 && g.pl == 0 && 2 * g.oh <= g.h &&
      2 * g.ow <= g.w && g.ow <= kAvgPool2x2MaxWidth) {
    avg_pool_int8_2x2(args, g, x_zp, y_zp, lo, hi);
    return Error::kOk;
  }
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    const uint8_t* x = args.in(0).data_as<const uint8_t>() + plane * g.h * g.w;
    void* y = args.out(0).data_as<uint8_t>() + plane * g.oh * g.ow;
    int32_t at = 0;
    for (int32_t oy = 0; oy < g.oh; ++oy) {
      const int32_t y0 = oy * g.sh - g.pt;
      const int32_t rows = taps_in(y0, g.kh, 0, g.h);
      const int32_t ry0 = y0 > 0 ? y0 : 0;
      const int32_t padded_rows = taps_in(y0, g.kh, -g.pt, g.h + g.pb);
      for (int32_t ox = 0; ox < g.ow; ++ox, ++at) {
        const int32_t x0 = ox * g.sw - g.pl;
        const int32_t cols = taps_in(x0, g.kw, 0, g.w);
        const uint8_t* window = x + ry0 * g.w + (x0 > 0 ? x0 : 0);
        // At most 2^23 taps of |v| <= 255: inside int32.
        int32_t sum = 0;
        if (cols == g.w) {
          sum = sum_bytes(window, rows * cols, is_signed);  // whole rows: one run
        } else {
          for (int32_t r = 0; r < rows; ++r, window += g.w) sum += sum_bytes(window, cols, is_signed);
        }
        const int32_t d = g.include_pad ? padded_rows * taps_in(x0, g.kw, -g.pl, g.w + g.pr) : rows * cols;
        const int32_t i = one ? 0 : d - 1;
        const int64_t v =
            qgemm_requantize_even(int64_t{sum} - int64_t{rows} * cols * x_zp, multiplier[i], shift[i]) + y_zp;
        store_q(y, is_signed, at, v, lo, hi);
      }
    }
  }
  return Error::kOk;
}

// AddInt8 and MulInt8: a, b broadcast to y, all uint8 or int8.
Error check_binary_int8(const KernelArgs& args, uint32_t ints) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_KERNEL_CHECK(args, has_ints(args, ints), "expects GenericParams with %u integers", ints);
  const DType ya = args.in(0).dtype(), yb = args.in(1).dtype(), y = args.out(0).dtype();
  KILN_KERNEL_CHECK(args, is_8bit(ya) && is_8bit(yb) && is_8bit(y), "operands must be uint8 or int8");
  KILN_RETURN_IF_ERROR(check_broadcast_output(args, 0, 2));
  const int64_t a_lo = ya == DType::UINT8 ? 0 : -128, b_lo = yb == DType::UINT8 ? 0 : -128;
  KILN_KERNEL_CHECK(args,
                    int_param(args, 0) >= a_lo && int_param(args, 0) <= a_lo + 255 && int_param(args, 1) >= b_lo &&
                        int_param(args, 1) <= b_lo + 255,
                    "input zero points outside their dtypes");
  // Multipliers in [0, 2^31), the shift in [1, 62].
  for (uint32_t i = 5; i + 1 < ints; ++i) {
    KILN_KERNEL_CHECK(args, int_param(args, i) >= 0 && int_param(args, i) <= INT32_MAX, "multiplier outside int32");
  }
  KILN_KERNEL_CHECK(args, int_param(args, ints - 1) >= 1 && int_param(args, ints - 1) <= 62, "shift outside [1, 62]");
  return check_q_range(args, y, 2, 2);
}

Error check_add_int8(const KernelArgs& args) { return check_binary_int8(args, 8); }
Error check_mul_int8(const KernelArgs& args) { return check_binary_int8(args, 7); }

// AddInt8 by tables: every byte value of a and of b scaled once (256 int64
// each, 4 KiB of stack), so each element is two loads, an add and a shift;
// on x86's vector paths contiguous rows eight at a time instead
// (add_int8_row_avx2; the same bits for shifts of 10 or more), same-shaped
// inputs as one row.
Error run_add_int8(const KernelArgs& args) {
  const Tensor* inputs[2] = {&args.in(0), &args.in(1)};
  const bool y_signed = args.out(0).dtype() == DType::INT8;
  int64_t table[2][256];
  for (int t = 0; t < 2; ++t) {
    const bool is_signed = args.in(static_cast<uint32_t>(t)).dtype() == DType::INT8;
    const int64_t zp = int_param(args, static_cast<uint32_t>(t)), m = int_param(args, static_cast<uint32_t>(5 + t));
    for (int u = 0; u < 256; ++u) table[t][u] = ((is_signed ? static_cast<int8_t>(u) : u) - zp) * m;
  }
  const uint8_t* a = args.in(0).data_as<const uint8_t>();
  const uint8_t* b = args.in(1).data_as<const uint8_t>();
  const int64_t y_zp = int_param(args, 2), lo = int_param(args, 3), hi = int_param(args, 4);
  const int32_t s = static_cast<int32_t>(int_param(args, 7));
  const int64_t half = int64_t{1} << (s - 1);
  void* y = args.out(0).data();
#if KILN_X86
  const bool a_signed = args.in(0).dtype() == DType::INT8, b_signed = args.in(1).dtype() == DType::INT8;
  const int32_t za = static_cast<int32_t>(int_param(args, 0)), zb = static_cast<int32_t>(int_param(args, 1));
  const int32_t ma = static_cast<int32_t>(int_param(args, 5)), mb = static_cast<int32_t>(int_param(args, 6));
  const bool vector = (active_isa() == Isa::kAvx2 || active_isa() == Isa::kAvx512) && s >= 10;
#endif
  const auto row = [&](int64_t out, const int64_t* offsets, const int64_t* steps, int64_t n) {
    const uint8_t* ra = a + offsets[0];
    const uint8_t* rb = b + offsets[1];
#if KILN_X86
    if (steps[0] == 1 && steps[1] == 1 && vector) {
      // Eight at a time in 64-bit lanes (add_int8_row_avx2), the tail below.
      const int64_t done = n - n % 8;
      add_int8_row_avx2(ra, rb, done, a_signed, b_signed, za, zb, ma, mb, s, static_cast<int32_t>(y_zp),
                        static_cast<int32_t>(lo), static_cast<int32_t>(hi), y_signed, static_cast<uint8_t*>(y) + out);
      for (int64_t i = done; i < n; ++i) {
        const int64_t v = (table[0][ra[i]] + table[1][rb[i]] + half) >> s;
        store_q(y, y_signed, out + i, v + y_zp, lo, hi);
      }
      return;
    }
#endif
    if (steps[0] == 1 && steps[1] == 1 && !y_signed) {
      uint8_t* ry = static_cast<uint8_t*>(y) + out;
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = ((table[0][ra[i]] + table[1][rb[i]] + half) >> s) + y_zp;
        v = v < lo ? lo : v > hi ? hi : v;
        ry[i] = static_cast<uint8_t>(v);
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = (table[0][ra[i * steps[0]]] + table[1][rb[i * steps[1]]] + half) >> s;
      store_q(y, y_signed, out + i, v + y_zp, lo, hi);
    }
  };
  const Tensor& yt = args.out(0);
  // Both as large as the output they broadcast to: the same elements in
  // the same order (binary_map's test).
  if (args.in(0).numel() == yt.numel() && args.in(1).numel() == yt.numel()) {
    // No broadcasting (ResNet's residual Adds): one row of every element,
    // not one call per row of the last dim (8 to 32 values there), cut
    // into ranges of whole 64-element runs across the pool.
    const int64_t one[2] = {1, 1};
    parallel_for_ranges(args.pool, yt.numel(), 64, [&](int64_t i0, int64_t i1) {
      const int64_t at[2] = {i0, i0};
      row(i0, at, one, i1 - i0);
    });
    return Error::kOk;
  }
  for_each_broadcast_row<2>(inputs, yt, row);
  return Error::kOk;
}

// (a[i sa] - za) * (b[i sb] - zb) for i < n into p: contiguous a with
// contiguous or one broadcast b as plain loops the compiler vectorises.
template <typename A, typename B>
void int8_products(const void* va, int64_t sa, const void* vb, int64_t sb, int64_t n, int32_t za, int32_t zb,
                   int32_t* p) {
  const A* a = static_cast<const A*>(va);
  const B* b = static_cast<const B*>(vb);
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) p[i] = (int32_t{a[i]} - za) * (int32_t{b[i]} - zb);
  } else if (sa == 1 && sb == 0) {
    const int32_t db = int32_t{b[0]} - zb;
    for (int64_t i = 0; i < n; ++i) p[i] = (int32_t{a[i]} - za) * db;
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = (int32_t{a[i * sa]} - za) * (int32_t{b[i * sb]} - zb);
  }
}

// The product of `part` broadcast over trailing dimensions (y's shape
// but for trailing dimensions of 1, as a squeeze-excitation scale per
// channel) with `full` (y's size): how many elements each value of `part`
// covers; 0 where the operands are not so.
int64_t trailing_broadcast(const Tensor& full, const Tensor& part, const Tensor& y) {
  if (full.numel() != y.numel() || part.rank() != y.rank()) return 0;
  int64_t inner = 1;
  uint32_t d = y.rank();
  while (d > 0 && part.dim(d - 1) == 1) inner *= y.dim(--d);
  for (uint32_t k = 0; k < d; ++k) {
    if (part.dim(k) != y.dim(k)) return 0;
  }
  return inner > 1 ? inner : 0;
}

using Int8Products = void (*)(const void*, int64_t, const void*, int64_t, int64_t, int32_t, int32_t, int32_t*);
Int8Products int8_products_for(bool a_signed, bool b_signed) {
  return a_signed ? (b_signed ? int8_products<int8_t, int8_t> : int8_products<int8_t, uint8_t>)
                  : (b_signed ? int8_products<uint8_t, int8_t> : int8_products<uint8_t, uint8_t>);
}

// MulInt8 by rows in chunks: the products in int32 (|.| <= 65025), then
// qgemm_requantize_row's vector loop (the scalar loop's bits). Operands of
// one size as one row; one broadcast over trailing dimensions as a row per
// value of it (the product commutes, so either may be the broadcast one);
// anything else by rows of the last dimension.
Error run_mul_int8(const KernelArgs& args) {
  const Tensor* inputs[2] = {&args.in(0), &args.in(1)};
  const Tensor& yt = args.out(0);
  bool is_signed[2] = {args.in(0).dtype() == DType::INT8, args.in(1).dtype() == DType::INT8};
  const uint8_t* data[2] = {args.in(0).data_as<const uint8_t>(), args.in(1).data_as<const uint8_t>()};
  int32_t zp[2] = {static_cast<int32_t>(int_param(args, 0)), static_cast<int32_t>(int_param(args, 1))};
  uint8_t* y = yt.data_as<uint8_t>();
  const DType y_dtype = yt.dtype();
  const int32_t y_zp = static_cast<int32_t>(int_param(args, 2));
  const int32_t lo = static_cast<int32_t>(int_param(args, 3)), hi = static_cast<int32_t>(int_param(args, 4));
  const int32_t m = static_cast<int32_t>(int_param(args, 5)), s = static_cast<int32_t>(int_param(args, 6));
  const Isa isa = active_isa();
  // Operand `first` and the other, in that order.
  const auto rows_of = [&](int first) {
    const int second = 1 - first;
    const Int8Products products = int8_products_for(is_signed[first], is_signed[second]);
    return [&, first, second, products](int64_t out, const int64_t* offsets, const int64_t* steps, int64_t n) {
      constexpr int64_t kChunk = 512;
      int32_t p[kChunk];
      for (int64_t i = 0; i < n; i += kChunk) {
        const int64_t c = n - i < kChunk ? n - i : kChunk;
        products(data[first] + offsets[first] + i * steps[first], steps[first],
                 data[second] + offsets[second] + i * steps[second], steps[second], c, zp[first], zp[second], p);
        qgemm_requantize_row(p, c, 0, m, s, y_zp, lo, hi, y_dtype, y + out + i, isa, true);
      }
    };
  };
  if (args.in(0).numel() == yt.numel() && args.in(1).numel() == yt.numel()) {
    // Ranges of whole 64-element runs across the pool.
    const int64_t one[2] = {1, 1};
    const auto row = rows_of(0);
    parallel_for_ranges(args.pool, yt.numel(), 64, [&](int64_t i0, int64_t i1) {
      const int64_t at[2] = {i0, i0};
      row(i0, at, one, i1 - i0);
    });
    return Error::kOk;
  }
  for (int part = 1; part >= 0; --part) {
    const int full = 1 - part;
    const int64_t inner =
        trailing_broadcast(args.in(static_cast<uint32_t>(full)), args.in(static_cast<uint32_t>(part)), yt);
    if (inner == 0) continue;
    // One value of `part` per row of `inner` (a squeeze-and-excitation
    // scale per channel): rows across the pool.
    const auto row = rows_of(full);
    const int64_t rows = args.in(static_cast<uint32_t>(part)).numel();
    const int64_t tasks = parallel_tasks(args.pool, rows * inner, rows, kParallelMinElements);
    parallel_for(args.pool, tasks, [&](int64_t t) {
      int64_t r0, r1, steps[2], offsets[2];
      parallel_range(rows, tasks, t, 1, &r0, &r1);
      steps[full] = 1;
      steps[part] = 0;
      for (int64_t r = r0; r < r1; ++r) {
        offsets[full] = r * inner;
        offsets[part] = r;
        row(r * inner, offsets, steps, inner);
      }
    });
    return Error::kOk;
  }
  for_each_broadcast_row<2>(inputs, yt, rows_of(0));
  return Error::kOk;
}

Error check_matmul_int8(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1, 1));
  KILN_KERNEL_CHECK(args, has_ints(args, 7), "expects GenericParams with 7 integers");
  const Tensor &a = args.in(0), &b = args.in(1), &y = args.out(0);
  KILN_KERNEL_CHECK(args, is_8bit(a.dtype()) && is_8bit(b.dtype()) && is_8bit(y.dtype()),
                    "operands must be uint8 or int8");
  const uint32_t r = a.rank();
  KILN_KERNEL_CHECK(args, r >= 2 && b.rank() == r && y.rank() == r, "a, b and y need one rank of at least 2");
  for (uint32_t d = 0; d + 2 < r; ++d) {
    KILN_KERNEL_CHECK(args, a.dim(d) == b.dim(d) && a.dim(d) == y.dim(d), "leading dim %u differs", d);
  }
  const int64_t m = a.dim(r - 2), k = a.dim(r - 1), n = b.dim(r - 1);
  KILN_KERNEL_CHECK(args, b.dim(r - 2) == k && y.dim(r - 2) == m && y.dim(r - 1) == n, "shapes do not multiply");
  KILN_KERNEL_CHECK(args, m > 0 && n > 0 && k > 0 && k <= kQGemmMatMulMaxK, "empty product or k above %lld",
                    static_cast<long long>(kQGemmMatMulMaxK));
  const int64_t a_lo = a.dtype() == DType::UINT8 ? 0 : -128, b_lo = b.dtype() == DType::UINT8 ? 0 : -128;
  KILN_KERNEL_CHECK(args,
                    int_param(args, 0) >= a_lo && int_param(args, 0) <= a_lo + 255 && int_param(args, 1) >= b_lo &&
                        int_param(args, 1) <= b_lo + 255,
                    "input zero points outside their dtypes");
  KILN_KERNEL_CHECK(args, int_param(args, 5) >= 0 && int_param(args, 5) <= INT32_MAX, "multiplier outside int32");
  KILN_KERNEL_CHECK(args, int_param(args, 6) >= 1 && int_param(args, 6) <= 62, "shift outside [1, 62]");
  KILN_KERNEL_CHECK(args,
                    args.scratch[0]->numel() * static_cast<int64_t>(dtype_size(args.scratch[0]->dtype())) >=
                        qgemm_matmul_scratch_bytes(m, n, k),
                    "scratch smaller than the product needs");
  return check_q_range(args, y.dtype(), 2, 2);
}

// One batch: B [k][n] into int8 rows W [n][kp] (uint8 values less 128,
// whose zero point then is b_zp - 128) and their sums.
void matmul_int8_rows(const uint8_t* b, bool b_signed, int64_t k, int64_t n, int8_t* w, int32_t* w_sums) {
  const int64_t kp = qgemm_kp(k);
  const uint8_t flip = b_signed ? 0 : 0x80;
  memset(w, 0, static_cast<size_t>(n * kp));
  for (int64_t c = 0; c < n; ++c) w_sums[c] = 0;
  for (int64_t kk = 0; kk < k; ++kk) {
    const uint8_t* row = b + kk * n;
    for (int64_t c = 0; c < n; ++c) {
      const int8_t v = static_cast<int8_t>(row[c] ^ flip);
      w[c * kp + kk] = v;
      w_sums[c] += v;
    }
  }
}

Error run_matmul_int8(const KernelArgs& args) {
  const Tensor &a = args.in(0), &b = args.in(1), &yt = args.out(0);
  const uint32_t r = a.rank();
  const int64_t m = a.dim(r - 2), k = a.dim(r - 1), n = b.dim(r - 1);
  const int64_t batches = a.numel() / (m * k);
  const bool a_signed = a.dtype() == DType::INT8, b_signed = b.dtype() == DType::INT8;
  // A in the uint8 domain of the packed panels, B's zero point in W's int8 one.
  const int32_t a_zp = static_cast<int32_t>(int_param(args, 0)) + (a_signed ? 128 : 0);
  const int32_t b_zp = static_cast<int32_t>(int_param(args, 1)) - (b_signed ? 0 : 128);
  uint8_t* scratch = args.scratch[0]->data_as<uint8_t>();
  int8_t* w = reinterpret_cast<int8_t*>(scratch + qgemm_matmul_rows_offset(m, k));
  int32_t* ints = reinterpret_cast<int32_t*>(scratch + qgemm_matmul_ints_offset(m, n, k));
  int32_t *bias = ints, *multiplier = ints + n, *shift = ints + 2 * n, *w_zp = ints + 3 * n, *sums = ints + 4 * n;
  for (int64_t c = 0; c < n; ++c) {
    multiplier[c] = static_cast<int32_t>(int_param(args, 5));
    shift[c] = static_cast<int32_t>(int_param(args, 6));
    w_zp[c] = b_zp;
  }
  QGemmProblem p;
  p.m = n;
  p.n = m;
  p.k = k;
  p.w = w;
  p.x = scratch;
  p.bias = bias;
  p.multiplier = multiplier;
  p.shift = shift;
  p.w_zp = w_zp;
  p.x_sums = sums;
  p.y_zp = static_cast<int32_t>(int_param(args, 2));
  p.y_min = static_cast<int32_t>(int_param(args, 3));
  p.y_max = static_cast<int32_t>(int_param(args, 4));
  p.y_dtype = yt.dtype();
  p.y_channel_stride = 1;
  p.y_column_stride = n;
  p.isa = active_isa();
  const QGemmTileFn tile = qgemm_tile_for(p.isa);
  for (int64_t i = 0; i < batches; ++i) {
    // bias = sum_k (x - a_zp)(w - b_zp) - sum_k x w + b_zp sum_k x: the
    // terms without x, per column of W.
    matmul_int8_rows(b.data_as<const uint8_t>() + i * k * n, b_signed, k, n, w, bias);
    for (int64_t c = 0; c < n; ++c) bias[c] = -a_zp * bias[c] + static_cast<int32_t>(k) * a_zp * b_zp;
    qgemm_pack_rows(a.data_as<const uint8_t>() + i * m * k, k, m, k, a_signed, scratch, sums);
    p.y = yt.data_as<uint8_t>() + i * m * n;
    qgemm_parallel(p, tile, args.pool);
  }
  return Error::kOk;
}

Error check_lookup_int8(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const Tensor &x = args.in(0), &table = args.in(1), &y = args.out(0);
  KILN_KERNEL_CHECK(args, is_8bit(x.dtype()) && is_8bit(y.dtype()) && table.dtype() == y.dtype(),
                    "x, the table and y must be uint8 or int8, the table of y's dtype");
  KILN_KERNEL_CHECK(args, table.numel() == 256, "the table has %lld values, not 256",
                    static_cast<long long>(table.numel()));
  KILN_KERNEL_CHECK(args, x.numel() == y.numel(), "x and y differ in size");
  return Error::kOk;
}

// Elements [0, n) of LookupInt8 from x to y: 64 look-ups per two vpermi2b
// where the avx512 path has AVX512-VBMI; 32 per sixteen vpshufb on the
// other vector paths; elsewhere (and the AVX2 tail) one load from a
// 256-byte table per element (it stays in L1), eight at a time so the
// loads overlap.
void lookup_int8_range(const uint8_t* x, int64_t n, const uint8_t* table_in, uint8_t* y) {
  int64_t i = 0;
#if KILN_X86
  if (avx512_vbmi_active()) {
    lookup_bytes_avx512_vbmi(x, n, table_in, y);
    return;
  }
  if (active_isa() >= Isa::kAvx2) i = lookup_bytes_avx2(x, n, table_in, y);
#endif
  uint8_t table[256];
  memcpy(table, table_in, sizeof(table));
  for (; i + 8 <= n; i += 8) {
    uint64_t in;
    memcpy(&in, x + i, 8);
    uint64_t out = 0;
    for (int b = 0; b < 8; ++b) out |= uint64_t{table[(in >> (8 * b)) & 0xFF]} << (8 * b);
    memcpy(y + i, &out, 8);
  }
  for (; i < n; ++i) y[i] = table[x[i]];
}

// Runs of a channel at least this long go through a table of its 256
// outputs (ChannelAffineInt8).
constexpr int64_t kChannelAffineTableRun = 512;

Error check_channel_affine_int8(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3, 1));
  KILN_KERNEL_CHECK(args, has_ints(args, 4), "expects GenericParams with 4 integers");
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, is_8bit(x.dtype()) && is_8bit(y.dtype()), "x and y must be uint8 or int8");
  KILN_KERNEL_CHECK(args, x.rank() >= 2, "x needs a channel axis");
  KILN_RETURN_IF_ERROR(check_same_shape(args, x, y, "input and output"));
  for (uint32_t i = 1; i <= 2; ++i) {
    KILN_KERNEL_CHECK(args, args.in(i).dtype() == DType::FLOAT32 && args.in(i).numel() == x.dim(1),
                      "a and b must be float32 with one value per channel");
  }
  const int64_t x_zp = int_param(args, 0);
  KILN_KERNEL_CHECK(args, x_zp >= 0 && x_zp <= 255, "input zero point outside the uint8 domain");
  return check_q_range(args, y.dtype(), 1, 1);
}

Error run_channel_affine_int8(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  Channels c;
  c.outer = x.dim(0);
  c.channels = x.dim(1);
  c.inner = x.numel() / (c.outer * c.channels);
  const uint8_t* xs = x.data_as<const uint8_t>();
  const float* a = args.in(1).data_as<const float>();
  const float* b = args.in(2).data_as<const float>();
  uint8_t* y = args.out(0).data_as<uint8_t>();
  const uint8_t flip = x.dtype() == DType::INT8 ? 0x80 : 0;
  const int32_t x_zp = static_cast<int32_t>(int_param(args, 0)), y_zp = static_cast<int32_t>(int_param(args, 1));
  const int32_t lo = static_cast<int32_t>(int_param(args, 2)), hi = static_cast<int32_t>(int_param(args, 3));
  const bool y_unsigned = args.out(0).dtype() == DType::UINT8;
#if KILN_X86
  const bool vector = active_isa() == Isa::kAvx2 || active_isa() == Isa::kAvx512;
#endif
  // n bytes of channel ch from in to out.
  const auto affine = [&](int64_t ch, const uint8_t* in, int64_t n, uint8_t* out) {
    int64_t i = 0;
#if KILN_X86
    if (vector) {
      channel_affine_row_avx2(in, n, flip, x_zp, a[ch], b[ch], y_zp, lo, hi, y_unsigned, out);
      i = n - n % 8;
    }
#endif
    for (; i < n; ++i) {
      const float v = static_cast<float>(static_cast<int32_t>(in[i] ^ flip) - x_zp);
      float f = fmaf(v, a[ch], b[ch]);
      f = f < -kChannelAffineLimit ? -kChannelAffineLimit : f > kChannelAffineLimit ? kChannelAffineLimit : f;
      int32_t q = static_cast<int32_t>(nearbyintf(f)) + y_zp;
      q = q < lo ? lo : q > hi ? hi : q;
      out[i] = static_cast<uint8_t>(q);  // uint8 or int8: the low byte either way
    }
  };
  for_each_channel_piece(args.pool, c, [&](int64_t ch, int64_t base, int64_t count) {
    if (count < kChannelAffineTableRun) {
      affine(ch, xs + base, count, y + base);
      return;
    }
    // A long run: the channel's output for each of the 256 bytes first
    // (the same arithmetic), then one table lookup a byte (LookupInt8's).
    uint8_t bytes[256], table[256];
    for (int v = 0; v < 256; ++v) bytes[v] = static_cast<uint8_t>(v);
    affine(ch, bytes, 256, table);
    lookup_int8_range(xs + base, count, table, y + base);
  });
  return Error::kOk;
}

Error run_lookup_int8(const KernelArgs& args) {
  const uint8_t* x = args.in(0).data_as<const uint8_t>();
  const uint8_t* table = args.in(1).data_as<const uint8_t>();
  uint8_t* y = args.out(0).data_as<uint8_t>();
  // Ranges of whole 64-byte runs across the pool.
  parallel_for_ranges(args.pool, args.out(0).numel(), 64,
                      [&](int64_t i0, int64_t i1) { lookup_int8_range(x + i0, i1 - i0, table, y + i0); });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// SoftmaxInt8

Error check_softmax_int8(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_KERNEL_CHECK(args, has_ints(args, 3), "expects GenericParams with 3 integers");
  const Tensor &x = args.in(0), &table = args.in(1), &y = args.out(0);
  KILN_KERNEL_CHECK(args, is_8bit(x.dtype()) && is_8bit(y.dtype()), "x and y must be uint8 or int8");
  KILN_KERNEL_CHECK(args, table.dtype() == DType::FLOAT32 && table.numel() == 257,
                    "the table must be 257 float32 values (256 exponentials, then y_scale)");
  KILN_KERNEL_CHECK(args, x.rank() >= 1 && x.numel() == y.numel() && x.dim(x.rank() - 1) == y.dim(y.rank() - 1),
                    "x and y differ in shape");
  const float y_scale = table.data_as<const float>()[256];
  KILN_KERNEL_CHECK(args, y_scale > 0.f && y_scale < INFINITY, "y_scale must be positive and finite");
  return check_q_range(args, y.dtype(), 0, 0);
}

// The exponentials of a chunk of a row (table[top - x[i]]) into e.
inline void softmax_exps(const uint8_t* x, int64_t n, uint8_t flip, int top, const float* table, float* e,
                         bool vector) {
  int64_t i = 0;
#if KILN_X86
  if (vector) i = softmax_exps_avx2(x, n, flip, top, table, e);
#else
  static_cast<void>(vector);
#endif
  for (; i < n; ++i) e[i] = table[top - (x[i] ^ flip)];
}

// Rows [r0, r1) of `inner` bytes each, a chunk of kSoftmaxChunk at a time
// (a row that fits is looked up once): the exponentials from the table
// into a buffer, summed in 8 running sums (a fixed order, which the
// compiler vectorizes), then multiplied by 1 / sum / y_scale (within float
// rounding of QuantizeLinear's p / y_scale: the two can differ by a step
// near a tie), rounded half to even (adding and subtracting 1.5 x 2^23
// rounds a float below 2^22 to an integer in the processor's default mode)
// and clamped; the look-ups and the last step eight at a time on x86's
// vector paths (softmax_exps_avx2, softmax_quantize_avx2: the same bits).
constexpr int64_t kSoftmaxChunk = 512;

void softmax_int8_rows(const KernelArgs& args, int64_t inner, int64_t r0, int64_t r1) {
  const uint8_t flip = args.in(0).dtype() == DType::INT8 ? 0x80 : 0;  // bytes in value order
  const float* table = args.in(1).data_as<const float>();
  const float y_scale = table[256];
  const int32_t y_zp = static_cast<int32_t>(int_param(args, 0)), lo = static_cast<int32_t>(int_param(args, 1)),
                hi = static_cast<int32_t>(int_param(args, 2));
  constexpr float kRound = 12582912.f;  // 1.5 x 2^23
  const bool vector = active_isa() == Isa::kAvx2 || active_isa() == Isa::kAvx512;
  const bool y_unsigned = args.out(0).dtype() == DType::UINT8;
  float e[kSoftmaxChunk];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* x = args.in(0).data_as<const uint8_t>() + r * inner;
    uint8_t* y = args.out(0).data_as<uint8_t>() + r * inner;
    int top = 0;
    for (int64_t i = 0; i < inner; ++i) top = std::max(top, x[i] ^ flip);
    float sums[8] = {};
    for (int64_t c = 0; c < inner; c += kSoftmaxChunk) {
      const int64_t n = std::min(kSoftmaxChunk, inner - c);
      softmax_exps(x + c, n, flip, top, table, e, vector);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) sums[k] += e[i + k];
      }
      for (; i < n; ++i) sums[i % 8] += e[i];
    }
    const float sum = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]));
    const float scale = 1.f / sum / y_scale;  // e / sum / y_scale as one product
    for (int64_t c = 0; c < inner; c += kSoftmaxChunk) {
      const int64_t n = std::min(kSoftmaxChunk, inner - c);
      if (inner > kSoftmaxChunk) softmax_exps(x + c, n, flip, top, table, e, vector);
      int64_t i = 0;
#if KILN_X86
      if (vector) i = softmax_quantize_avx2(e, n, scale, y_zp, lo, hi, y_unsigned, y + c);
#else
      static_cast<void>(y_unsigned);
#endif
      for (; i < n; ++i) {
        const float v = std::min(e[i] * scale, 4194304.f);  // p / y_scale, below 2^22
        const int32_t q = static_cast<int32_t>((v + kRound) - kRound) + y_zp;
        y[c + i] = static_cast<uint8_t>(q < lo ? lo : q > hi ? hi : q);
      }
    }
  }
}

// Rows across the pool; a row's sum in order, so any thread count gives the
// same bits.
Error run_softmax_int8(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const int64_t inner = x.dim(x.rank() - 1);
  const int64_t rows = inner > 0 ? x.numel() / inner : 0;
  const int64_t tasks = parallel_tasks(args.pool, x.numel(), rows, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t r0, r1;
    parallel_range(rows, tasks, t, 1, &r0, &r1);
    softmax_int8_rows(args, inner, r0, r1);
  });
  return Error::kOk;
}

}  // namespace

#define KILN_QUANTIZED_KERNELS(K)                                             \
  K(QuantizeLinear, check_quantize, run_quantize, 0)                          \
  K(DequantizeLinear, check_dequantize, run_dequantize, 0)                    \
  K(DynamicQuantizeLinear, check_dynamic_quantize, run_dynamic_quantize, 0)   \
  K(ConvInt8, check_conv_int8, run_conv_int8, 0)                              \
  K(GemmInt8, check_gemm_int8, run_gemm_int8, 0)                              \
  K(AvgPoolInt8, check_avg_pool_int8, run_avg_pool_int8, 0)                   \
  K(AddInt8, check_add_int8, run_add_int8, 0)                                 \
  K(MulInt8, check_mul_int8, run_mul_int8, 0)                                 \
  K(LookupInt8, check_lookup_int8, run_lookup_int8, 0)                        \
  K(SoftmaxInt8, check_softmax_int8, run_softmax_int8, 0)                     \
  K(ChannelAffineInt8, check_channel_affine_int8, run_channel_affine_int8, 0) \
  K(MatMulInt8, check_matmul_int8, run_matmul_int8, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_QUANTIZED_KERNELS)
const KernelEntry kQuantizedKernels[] = {KILN_QUANTIZED_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumQuantizedKernels = sizeof(kQuantizedKernels) / sizeof(kQuantizedKernels[0]);

}  // namespace kernels
}  // namespace kiln
