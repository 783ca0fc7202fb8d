// Element-wise math beyond elementwise.cc, added for ONNX coverage:
//
//   MathUnary    float32 -> float32, one function chosen by ints[0]
//                (MathFunction below), its attributes in floats[0..1]:
//                trigonometric and hyperbolic functions and their inverses,
//                Round (half to even), Sign, Selu (alpha, gamma), Celu
//                (alpha), Softsign, ThresholdedRelu (alpha), Shrink (bias,
//                lambd).
//   FloatClass   float32 -> bool: IsNaN (ints [0]) or IsInf (ints [1,
//                detect_positive, detect_negative]).
//   Mod          integer or float16/float32/float64, broadcast; ints[0] = fmod. With
//                fmod 0 the result takes the divisor's sign (Python's %),
//                with fmod 1 the dividend's (C's fmod). x mod 0 gives 0 for
//                integers (ONNX leaves it unspecified).
//   BitShift     unsigned integers, broadcast; ints[0] = 1 for right. Shifts
//                of the type's width or more give 0.
//   Trilu        any dtype, rank >= 2; ints [upper, k]: keeps the elements on
//                and above (upper) or on and below the k-th diagonal of every
//                matrix of the last two axes, zeroes the rest.
//   CumSum       float32/float64/int32/int64; ints [axis, exclusive,
//                reverse]: running sums along one axis.
//   Hardmax      float32; ints [axis]: 1 at the first maximum along the
//                axis, 0 elsewhere.
//   EyeLike      any dtype, 2-D; ints [k]: ones on the k-th diagonal.
//   Tile         any dtype; the output's shape is the input's times the
//                repeats: out[i] = in[i mod input dims].
//   Range        float32/float64/int16/int32/int64, inputs start and delta
//                (one element each), 1-D output: element i = start + i *
//                delta in the dtype's arithmetic (integers wrap as unsigned;
//                the planner's folding computes it the same way).
//   Random       ints [kind, key], floats [a, b]; element i from Philox-4x32-10
//                (Salmon et al., SC'11) of counter (i, 0, 0, 0) under the
//                64-bit key: no state, the same values on every run, thread
//                and platform. kind 0, uniform: a + u * (b - a) in [a, b)
//                (float16/32/64); kind 1, normal: mean a, deviation b, by
//                Box-Muller (float16/32/64); kind 2, Bernoulli: 1 where u < p
//                for p from input 0 (float32/float64), else 0, in any numeric
//                dtype or bool. u takes 24 bits for float32 and 53 otherwise.
//   TfIdf        TfIdfVectorizer over int32/int64 tokens: counts of the pool's
//                n-grams (with skips) per row, as TF, IDF or TFIDF (below).
//   GatherElements  any data dtype, int32/int64 indices of the output's
//                shape; ints [axis]: out[..i..] = data[..indices[..i..]..]
//                along the axis (negative indices count from the end; one
//                out of range fails the call with kInvalidInput).
//
// Parameters are GenericParams (schema/program.fbs). Every kernel reads
// element i of each input before writing element i of the output and walks
// all tensors in the same order, so the output may take an input's bytes.

#include <math.h>
#include <string.h>

#include <type_traits>

#include "kiln/kernels/float16.h"

#include "broadcast.h"
#include "cpu_kernels.h"
#include "kernel_util.h"

namespace kiln {
namespace kernels {
namespace {

// ints[0] of MathUnary. The planner writes these numbers; append only.
enum MathFunction : int64_t {
  // clang-format off
  kSin = 0, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kTanh, kAsinh, kAcosh, kAtanh,
  kRound, kSign, kSelu, kCelu, kSoftsign, kThresholdedRelu, kShrink,
  // clang-format on
  kNumMathFunctions,
};

Error check_math_unary(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 2));
  const int64_t f = param_int(args, 0);
  KILN_KERNEL_CHECK(args, f >= 0 && f < kNumMathFunctions, "unknown function %lld", static_cast<long long>(f));
  return check_same_shape(args, args.in(0), args.out(0), "input and output");
}

template <typename F>
void map_floats(const KernelArgs& args, F f) {
  const float* in = args.in(0).data_as<const float>();
  float* out = args.out(0).data_as<float>();
  const int64_t n = args.out(0).numel();
  for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

Error run_math_unary(const KernelArgs& args) {
  const float a = param_float(args, 0);
  const float b = param_float(args, 1);
  switch (static_cast<MathFunction>(param_int(args, 0))) {
    case kSin: map_floats(args, [](float x) { return sinf(x); }); break;
    case kCos: map_floats(args, [](float x) { return cosf(x); }); break;
    case kTan: map_floats(args, [](float x) { return tanf(x); }); break;
    case kAsin: map_floats(args, [](float x) { return asinf(x); }); break;
    case kAcos: map_floats(args, [](float x) { return acosf(x); }); break;
    case kAtan: map_floats(args, [](float x) { return atanf(x); }); break;
    case kSinh: map_floats(args, [](float x) { return sinhf(x); }); break;
    case kCosh: map_floats(args, [](float x) { return coshf(x); }); break;
    case kTanh: map_floats(args, [](float x) { return tanhf(x); }); break;
    case kAsinh: map_floats(args, [](float x) { return asinhf(x); }); break;
    case kAcosh: map_floats(args, [](float x) { return acoshf(x); }); break;
    case kAtanh: map_floats(args, [](float x) { return atanhf(x); }); break;
    // nearbyintf rounds half to even in the default rounding mode.
    case kRound: map_floats(args, [](float x) { return nearbyintf(x); }); break;
    case kSign: map_floats(args, [](float x) { return x > 0.f ? 1.f : (x < 0.f ? -1.f : x); }); break;
    case kSelu:  // alpha, gamma
      map_floats(args, [a, b](float x) { return x > 0.f ? b * x : b * (a * expf(x) - a); });
      break;
    case kCelu:  // alpha
      map_floats(args, [a](float x) { return fmaxf(0.f, x) + fminf(0.f, a * (expf(x / a) - 1.f)); });
      break;
    case kSoftsign: map_floats(args, [](float x) { return x / (1.f + fabsf(x)); }); break;
    case kThresholdedRelu: map_floats(args, [a](float x) { return x > a ? x : 0.f; }); break;
    case kShrink:  // bias, lambd
      map_floats(args, [a, b](float x) { return x < -b ? x + a : (x > b ? x - a : 0.f); });
      break;
    default: break;
  }
  return Error::kOk;
}

Error check_float_class(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_KERNEL_CHECK(args, args.in(0).dtype() == DType::FLOAT32, "input must be float32");
  KILN_KERNEL_CHECK(args, args.out(0).dtype() == DType::BOOL, "output must be bool");
  KILN_RETURN_IF_ERROR(check_params(args, 3, 0));
  return check_same_shape(args, args.in(0), args.out(0), "input and output");
}

Error run_float_class(const KernelArgs& args) {
  const float* in = args.in(0).data_as<const float>();
  uint8_t* out = args.out(0).data_as<uint8_t>();
  const int64_t n = args.out(0).numel();
  const bool is_inf = param_int(args, 0) != 0;
  const bool positive = param_int(args, 1) != 0, negative = param_int(args, 2) != 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    out[i] = is_inf ? static_cast<uint8_t>(isinf(x) && ((x > 0.f && positive) || (x < 0.f && negative)))
                    : static_cast<uint8_t>(x != x);
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Mod and BitShift

template <bool kFmod>
struct ModOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point<T>::value) {
      const T r = static_cast<T>(fmod(a, b));
      if (kFmod) return r;
      return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed<T>::value) {
        if (b == T(-1)) return 0;  // also INT_MIN % -1, which C++ leaves undefined
        const T r = static_cast<T>(a % b);
        if (kFmod) return r;
        return r != 0 && ((r < 0) != (b < 0)) ? static_cast<T>(r + b) : r;
      } else {
        return static_cast<T>(a % b);
      }
    }
  }
};

template <bool kRight>
struct ShiftOp {
  template <typename T>
  static T apply(T a, T b) {
    if (b >= sizeof(T) * 8) return 0;
    return kRight ? static_cast<T>(a >> b) : static_cast<T>(a << b);
  }
};

bool mod_dtype(DType t) {
  switch (t) {
    // clang-format off
    case DType::FLOAT16: case DType::FLOAT32: case DType::FLOAT64: case DType::INT8: case DType::INT16:
    case DType::INT32: case DType::INT64: case DType::UINT8: case DType::UINT16: case DType::UINT32: case DType::UINT64:
      return true;
    // clang-format on
    default: return false;
  }
}

bool unsigned_dtype(DType t) {
  return t == DType::UINT8 || t == DType::UINT16 || t == DType::UINT32 || t == DType::UINT64;
}

Error check_mod(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const DType dtype = args.in(0).dtype();
  KILN_KERNEL_CHECK(args, mod_dtype(dtype), "unsupported dtype %s", dtype_name(dtype));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, dtype));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 0));
  return check_broadcast_output(args, 0, 2);
}

Error check_bit_shift(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const DType dtype = args.in(0).dtype();
  KILN_KERNEL_CHECK(args, unsigned_dtype(dtype), "unsupported dtype %s", dtype_name(dtype));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, dtype));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 0));
  return check_broadcast_output(args, 0, 2);
}

template <typename Op>
void integer_map(const KernelArgs& args) {
  const Tensor& a = args.in(0);
  const Tensor& b = args.in(1);
  const Tensor& o = args.out(0);
  switch (a.dtype()) {
    case DType::INT8: binary_map<Op, int8_t, int8_t>(a, b, o); break;
    case DType::INT16: binary_map<Op, int16_t, int16_t>(a, b, o); break;
    case DType::INT32: binary_map<Op, int32_t, int32_t>(a, b, o); break;
    case DType::INT64: binary_map<Op, int64_t, int64_t>(a, b, o); break;
    case DType::UINT8: binary_map<Op, uint8_t, uint8_t>(a, b, o); break;
    case DType::UINT16: binary_map<Op, uint16_t, uint16_t>(a, b, o); break;
    case DType::UINT32: binary_map<Op, uint32_t, uint32_t>(a, b, o); break;
    case DType::UINT64: binary_map<Op, uint64_t, uint64_t>(a, b, o); break;
    default: break;
  }
}

template <bool kFmod>
void mod_map(const KernelArgs& args) {
  const Tensor& a = args.in(0);
  switch (a.dtype()) {
    case DType::FLOAT32: binary_map<ModOp<kFmod>, float, float>(a, args.in(1), args.out(0)); break;
    case DType::FLOAT64: binary_map<ModOp<kFmod>, double, double>(a, args.in(1), args.out(0)); break;
    case DType::FLOAT16: binary_map<Float16Op<ModOp<kFmod>>, uint16_t, uint16_t>(a, args.in(1), args.out(0)); break;
    default: integer_map<ModOp<kFmod>>(args); break;
  }
}

Error run_mod(const KernelArgs& args) {
  if (param_int(args, 0) != 0) {
    mod_map<true>(args);
  } else {
    mod_map<false>(args);
  }
  return Error::kOk;
}

Error run_bit_shift(const KernelArgs& args) {
  if (param_int(args, 0) != 0) {
    integer_map<ShiftOp<true>>(args);
  } else {
    integer_map<ShiftOp<false>>(args);
  }
  return Error::kOk;
}

Error check_trilu(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 2, 0));
  const Tensor& x = args.in(0);
  KILN_KERNEL_CHECK(args, x.rank() >= 2, "needs rank 2 or more, has %u", static_cast<unsigned>(x.rank()));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, x.dtype()));
  return check_same_shape(args, x, args.out(0), "output");
}

// Per row of each matrix, the kept columns are one contiguous range: moved
// with memmove (the output may be the input), the rest zeroed.
Error run_trilu(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const bool upper = param_int(args, 0) != 0;
  const int64_t k = param_int(args, 1);
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  const size_t elem = dtype_size(x.dtype());
  const int64_t matrices = rows * cols > 0 ? x.numel() / (rows * cols) : 0;
  const uint8_t* in = static_cast<const uint8_t*>(x.data());
  uint8_t* out = static_cast<uint8_t*>(y.data());
  auto clamp = [cols](int64_t v) { return v < 0 ? 0 : v > cols ? cols : v; };
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      const size_t row = static_cast<size_t>((m * rows + i) * cols) * elem;
      // Kept columns [begin, end).
      const int64_t begin = upper ? clamp(i + k) : 0;
      const int64_t end = upper ? cols : clamp(i + k + 1);
      memset(out + row, 0, static_cast<size_t>(begin) * elem);
      if (end > begin) {
        memmove(out + row + static_cast<size_t>(begin) * elem, in + row + static_cast<size_t>(begin) * elem,
                static_cast<size_t>(end - begin) * elem);
      }
      memset(out + row + static_cast<size_t>(end) * elem, 0, static_cast<size_t>(cols - end) * elem);
    }
  }
  return Error::kOk;
}

Error check_cumsum(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 3, 0));
  const Tensor& x = args.in(0);
  const DType dtype = x.dtype();
  KILN_KERNEL_CHECK(
      args, dtype == DType::FLOAT32 || dtype == DType::FLOAT64 || dtype == DType::INT32 || dtype == DType::INT64,
      "unsupported dtype %s", dtype_name(dtype));
  const int64_t axis = param_int(args, 0);
  KILN_KERNEL_CHECK(args, axis >= 0 && axis < static_cast<int64_t>(x.rank()), "axis %lld out of range",
                    static_cast<long long>(axis));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, dtype));
  return check_same_shape(args, x, args.out(0), "output");
}

// Reads element i before writing it, so the output may be the input.
template <typename T>
void cumsum(const Tensor& x, const Tensor& y, int64_t axis, bool exclusive, bool reverse) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<uint32_t>(d));
  for (uint32_t d = static_cast<uint32_t>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t n = x.dim(static_cast<uint32_t>(axis));
  const T* in = static_cast<const T*>(x.data());
  T* out = static_cast<T*>(y.data());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      T sum = 0;
      for (int64_t s = 0; s < n; ++s) {
        const int64_t a = reverse ? n - 1 - s : s;
        const int64_t at = (o * n + a) * inner + j;
        const T v = in[at];
        out[at] = exclusive ? sum : static_cast<T>(sum + v);
        sum = static_cast<T>(sum + v);
      }
    }
  }
}

Error run_cumsum(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const int64_t axis = param_int(args, 0);
  const bool exclusive = param_int(args, 1) != 0, reverse = param_int(args, 2) != 0;
  switch (x.dtype()) {
    case DType::FLOAT32: cumsum<float>(x, args.out(0), axis, exclusive, reverse); break;
    case DType::FLOAT64: cumsum<double>(x, args.out(0), axis, exclusive, reverse); break;
    case DType::INT32: cumsum<int32_t>(x, args.out(0), axis, exclusive, reverse); break;
    default: cumsum<int64_t>(x, args.out(0), axis, exclusive, reverse); break;
  }
  return Error::kOk;
}

Error check_hardmax(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 0));
  const Tensor& x = args.in(0);
  KILN_KERNEL_CHECK(args, x.dtype() == DType::FLOAT32, "unsupported dtype %s", dtype_name(x.dtype()));
  const int64_t axis = param_int(args, 0);
  KILN_KERNEL_CHECK(args, axis >= 0 && axis < static_cast<int64_t>(x.rank()), "axis out of range");
  KILN_RETURN_IF_ERROR(check_all_dtype(args, x.dtype()));
  return check_same_shape(args, x, args.out(0), "output");
}

Error run_hardmax(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const uint32_t axis = static_cast<uint32_t>(param_int(args, 0));
  int64_t outer = 1, inner = 1;
  for (uint32_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (uint32_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t n = x.dim(axis);
  const float* in = static_cast<const float*>(x.data());
  float* out = static_cast<float*>(args.out(0).data());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      int64_t best = 0;
      for (int64_t s = 1; s < n; ++s) {
        if (in[(o * n + s) * inner + j] > in[(o * n + best) * inner + j]) best = s;
      }
      for (int64_t s = 0; s < n; ++s) out[(o * n + s) * inner + j] = s == best ? 1.f : 0.f;
    }
  }
  return Error::kOk;
}

Error check_eye_like(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 0, 0, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 0));
  KILN_KERNEL_CHECK(args, args.out(0).rank() == 2, "output must be 2-D");
  return Error::kOk;
}

// One in the output's own dtype, by dtype: the bytes of 1.
void write_one(DType dtype, uint8_t* at) {
  switch (dtype) {
    // clang-format off
    case DType::FLOAT32: { const float v = 1.f; memcpy(at, &v, sizeof v); break; }
    case DType::FLOAT64: { const double v = 1.0; memcpy(at, &v, sizeof v); break; }
    case DType::FLOAT16: { const uint16_t v = 0x3C00; memcpy(at, &v, sizeof v); break; }
    case DType::BFLOAT16: { const uint16_t v = 0x3F80; memcpy(at, &v, sizeof v); break; }
    // clang-format on
    default: {  // integers and bool: the lowest byte is 1 (little-endian)
      memset(at, 0, dtype_size(dtype));
      at[0] = 1;
      break;
    }
  }
}

Error run_eye_like(const KernelArgs& args) {
  const Tensor& y = args.out(0);
  const int64_t k = param_int(args, 0);
  const int64_t rows = y.dim(0), cols = y.dim(1);
  const size_t elem = dtype_size(y.dtype());
  uint8_t* out = static_cast<uint8_t*>(y.data());
  memset(out, 0, static_cast<size_t>(y.nbytes()));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < cols) write_one(y.dtype(), out + static_cast<size_t>(i * cols + j) * elem);
  }
  return Error::kOk;
}

Error check_range(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const DType t = args.out(0).dtype();
  KILN_KERNEL_CHECK(
      args, t == DType::FLOAT32 || t == DType::FLOAT64 || t == DType::INT16 || t == DType::INT32 || t == DType::INT64,
      "unsupported dtype");
  KILN_RETURN_IF_ERROR(check_all_dtype(args, t));
  KILN_KERNEL_CHECK(args, args.in(0).numel() == 1 && args.in(1).numel() == 1, "start and delta must be scalars");
  KILN_KERNEL_CHECK(args, args.out(0).rank() == 1, "output must be 1-D");
  return Error::kOk;
}

template <typename T>
void range_typed(const Tensor& start_t, const Tensor& delta_t, const Tensor& y) {
  T* out = y.data_as<T>();
  const int64_t n = y.numel();
  const T start = *start_t.data_as<const T>(), delta = *delta_t.data_as<const T>();
  if constexpr (std::is_floating_point<T>::value) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  } else {
    const uint64_t s = static_cast<uint64_t>(static_cast<int64_t>(start));
    const uint64_t d = static_cast<uint64_t>(static_cast<int64_t>(delta));
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(s + static_cast<uint64_t>(i) * d);
  }
}

Error run_range(const KernelArgs& args) {
  const Tensor& y = args.out(0);
  switch (y.dtype()) {
    case DType::FLOAT32: range_typed<float>(args.in(0), args.in(1), y); break;
    case DType::FLOAT64: range_typed<double>(args.in(0), args.in(1), y); break;
    case DType::INT16: range_typed<int16_t>(args.in(0), args.in(1), y); break;
    case DType::INT32: range_typed<int32_t>(args.in(0), args.in(1), y); break;
    default: range_typed<int64_t>(args.in(0), args.in(1), y); break;
  }
  return Error::kOk;
}

// Random: Philox-4x32-10, the four words of block `counter` under `key`.
void philox(uint64_t counter, uint64_t key, uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

// [0, 1) from two words (53 bits) or one (24 bits).
inline double unit53(uint32_t a, uint32_t b) {
  return (static_cast<double>(a >> 5) * 67108864.0 + static_cast<double>(b >> 6)) * (1.0 / 9007199254740992.0);
}
inline float unit24(uint32_t a) { return static_cast<float>(a >> 8) * (1.f / 16777216.f); }

enum RandomKind : int64_t { kRandomUniform = 0, kRandomNormal = 1, kRandomBernoulli = 2 };

bool random_float_dtype(DType t) { return t == DType::FLOAT32 || t == DType::FLOAT64 || t == DType::FLOAT16; }

Error check_random(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_params(args, 2, 2));
  const int64_t kind = param_int(args, 0);
  const DType t = args.out(0).dtype();
  if (kind == kRandomBernoulli) {
    KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
    const DType p = args.in(0).dtype();
    KILN_KERNEL_CHECK(args, p == DType::FLOAT32 || p == DType::FLOAT64, "probabilities must be float32 or float64");
    KILN_KERNEL_CHECK(args, same_shape(args.in(0), args.out(0)), "output shape differs from the input's");
    KILN_KERNEL_CHECK(args, t != DType::BFLOAT16 && dtype_size(t) > 0 && dtype_size(t) <= 8, "unsupported dtype");
  } else {
    KILN_RETURN_IF_ERROR(check_arity(args, 0, 0, 1));
    KILN_KERNEL_CHECK(args, kind == kRandomUniform || kind == kRandomNormal, "unknown kind %lld",
                      static_cast<long long>(kind));
    KILN_KERNEL_CHECK(args, random_float_dtype(t), "output must be float16, float32 or float64");
  }
  return Error::kOk;
}

void store_float(DType t, double v, uint8_t* at) {
  if (t == DType::FLOAT64) {
    memcpy(at, &v, sizeof v);
  } else if (t == DType::FLOAT32) {
    const float f = static_cast<float>(v);
    memcpy(at, &f, sizeof f);
  } else {
    const uint16_t h = float_to_half(static_cast<float>(v));
    memcpy(at, &h, sizeof h);
  }
}

Error run_random(const KernelArgs& args) {
  const int64_t kind = param_int(args, 0);
  const uint64_t key = static_cast<uint64_t>(param_int(args, 1));
  const float a = param_float(args, 0), b = param_float(args, 1);
  const Tensor& y = args.out(0);
  const DType t = y.dtype();
  const size_t elem = dtype_size(t);
  uint8_t* out = static_cast<uint8_t*>(y.data());
  const int64_t n = y.numel();
  uint32_t w[4];
  if (kind == kRandomBernoulli) {
    const Tensor& p = args.in(0);
    memset(out, 0, static_cast<size_t>(y.nbytes()));
    for (int64_t i = 0; i < n; ++i) {
      philox(static_cast<uint64_t>(i), key, w);
      const bool one = p.dtype() == DType::FLOAT32 ? unit24(w[0]) < p.data_as<const float>()[i]
                                                   : unit53(w[0], w[1]) < p.data_as<const double>()[i];
      if (one) write_one(t, out + static_cast<size_t>(i) * elem);
    }
    return Error::kOk;
  }
  for (int64_t i = 0; i < n; ++i) {
    philox(static_cast<uint64_t>(i), key, w);
    double v;
    if (kind == kRandomUniform) {
      if (t == DType::FLOAT32) {
        float f = a + unit24(w[0]) * (b - a);
        if (!(f < b)) f = a;  // rounding reached b (or b <= a)
        v = f;
      } else {
        v = static_cast<double>(a) + unit53(w[0], w[1]) * (static_cast<double>(b) - static_cast<double>(a));
        if (!(v < b)) v = a;
        // float16: round first, then keep below b.
        if (t == DType::FLOAT16 && !(half_to_float(float_to_half(static_cast<float>(v))) < b)) v = a;
      }
    } else {
      const double u1 = 1.0 - unit53(w[0], w[1]);  // (0, 1]
      const double u2 = unit53(w[2], w[3]);
      v = static_cast<double>(a) + static_cast<double>(b) * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    }
    store_float(t, v, out + static_cast<size_t>(i) * elem);
  }
  return Error::kOk;
}

// TfIdfVectorizer over integer tokens. Inputs: X (int32/int64, [C] or
// [N, C]), the pool (int64 [P]), the n-grams (int64 [G, 3]: length n, offset
// in the pool, output index) and their weights (float32 [G]); output float32
// [O] or [N, O]. ints [mode, min_gram, max_gram, max_skip]. Every index the
// kernel follows comes from the n-gram table, checked here at load.
Error check_tfidf(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 4, 4, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 4, 0));
  const Tensor& x = args.in(0);
  const Tensor& pool = args.in(1);
  const Tensor& grams = args.in(2);
  const Tensor& weights = args.in(3);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == DType::INT32 || x.dtype() == DType::INT64, "X must be int32 or int64");
  KILN_KERNEL_CHECK(args,
                    pool.dtype() == DType::INT64 && grams.dtype() == DType::INT64 &&
                        weights.dtype() == DType::FLOAT32 && y.dtype() == DType::FLOAT32,
                    "pool and n-grams must be int64, weights and output float32");
  KILN_KERNEL_CHECK(args, (x.rank() == 1 || x.rank() == 2) && y.rank() == x.rank(), "X must be 1-D or 2-D");
  KILN_KERNEL_CHECK(args, x.rank() == 1 || y.dim(0) == x.dim(0), "output rows differ from X's");
  KILN_KERNEL_CHECK(args,
                    pool.rank() == 1 && grams.rank() == 2 && grams.dim(1) == 3 && weights.rank() == 1 &&
                        weights.dim(0) == grams.dim(0),
                    "malformed n-gram table");
  const int64_t mode = param_int(args, 0), min_gram = param_int(args, 1), max_gram = param_int(args, 2);
  const int64_t max_skip = param_int(args, 3);
  KILN_KERNEL_CHECK(args, mode >= 0 && mode <= 2 && min_gram >= 1 && max_gram >= min_gram && max_skip >= 0,
                    "bad parameters");
  const int64_t* g = grams.data_as<const int64_t>();
  const int64_t outputs = y.dim(y.rank() - 1);
  for (int64_t i = 0; i < grams.dim(0); ++i) {
    const int64_t n = g[3 * i], offset = g[3 * i + 1], index = g[3 * i + 2];
    KILN_KERNEL_CHECK(
        args,
        n >= min_gram && n <= max_gram && offset >= 0 && offset <= pool.dim(0) - n && index >= 0 && index < outputs,
        "n-gram %lld out of range", static_cast<long long>(i));
  }
  return Error::kOk;
}

template <typename T>
int64_t count_ngram(const T* x, int64_t c, const int64_t* gram, int64_t n, int64_t max_skip) {
  int64_t count = 0;
  // A 1-gram is the same for every skip: counted once per position.
  const int64_t skips = n == 1 ? 0 : max_skip;
  for (int64_t start = 0; start < c; ++start) {
    if (static_cast<int64_t>(x[start]) != gram[0]) continue;
    for (int64_t s = 0; s <= skips; ++s) {
      const int64_t step = s + 1;
      if (start + (n - 1) * step >= c) break;
      int64_t k = 1;
      while (k < n && static_cast<int64_t>(x[start + k * step]) == gram[k]) ++k;
      count += k == n;
    }
  }
  return count;
}

template <typename T>
void tfidf_typed(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const int64_t* pool = args.in(1).data_as<const int64_t>();
  const int64_t* g = args.in(2).data_as<const int64_t>();
  const float* w = args.in(3).data_as<const float>();
  const int64_t grams = args.in(2).dim(0);
  const int64_t mode = param_int(args, 0), max_skip = param_int(args, 3);
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, c = x.dim(x.rank() - 1), outputs = y.dim(y.rank() - 1);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x.data_as<const T>() + r * c;
    float* out = y.data_as<float>() + r * outputs;
    for (int64_t o = 0; o < outputs; ++o) out[o] = 0.f;
    for (int64_t i = 0; i < grams; ++i) {
      const int64_t count = count_ngram(row, c, pool + g[3 * i + 1], g[3 * i], max_skip);
      const float tf = static_cast<float>(count);
      out[g[3 * i + 2]] += mode == 0 ? tf : mode == 1 ? (count > 0 ? w[i] : 0.f) : tf * w[i];
    }
  }
}

Error run_tfidf(const KernelArgs& args) {
  if (args.in(0).dtype() == DType::INT32) {
    tfidf_typed<int32_t>(args);
  } else {
    tfidf_typed<int64_t>(args);
  }
  return Error::kOk;
}

Error check_tile(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.dtype() == y.dtype() && x.rank() == y.rank(), "output differs in dtype or rank");
  for (uint32_t d = 0; d < x.rank(); ++d) {
    KILN_KERNEL_CHECK(args, x.dim(d) > 0 ? y.dim(d) % x.dim(d) == 0 : y.dim(d) == 0,
                      "output dim %u is not a multiple of the input's", d);
  }
  return Error::kOk;
}

Error run_tile(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  const uint32_t rank = x.rank();
  const size_t elem = dtype_size(x.dtype());
  int64_t stride[kMaxRank];
  int64_t s = 1;
  for (uint32_t d = rank; d-- > 0;) {
    stride[d] = s;
    s *= x.dim(d);
  }
  int64_t index[kMaxRank] = {};
  const uint8_t* in = static_cast<const uint8_t*>(x.data());
  uint8_t* out = static_cast<uint8_t*>(y.data());
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t offset = 0;
    for (uint32_t d = 0; d < rank; ++d) offset += (index[d] % x.dim(d)) * stride[d];
    memcpy(out + static_cast<size_t>(i) * elem, in + static_cast<size_t>(offset) * elem, elem);
    for (uint32_t d = rank; d-- > 0;) {
      if (++index[d] < y.dim(d)) break;
      index[d] = 0;
    }
  }
  return Error::kOk;
}

Error check_gather_elements(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_RETURN_IF_ERROR(check_params(args, 1, 0));
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const Tensor& out = args.out(0);
  KILN_KERNEL_CHECK(args, indices.dtype() == DType::INT32 || indices.dtype() == DType::INT64, "indices are %s",
                    dtype_name(indices.dtype()));
  KILN_KERNEL_CHECK(args, out.dtype() == data.dtype() && indices.rank() == data.rank() && out.rank() == data.rank(),
                    "operands differ in dtype or rank");
  const int64_t axis = param_int(args, 0);
  KILN_KERNEL_CHECK(args, axis >= 0 && axis < static_cast<int64_t>(data.rank()), "axis out of range");
  return check_same_shape(args, indices, out, "output");
}

Error run_gather_elements(const KernelArgs& args) {
  const Tensor& data = args.in(0);
  const Tensor& indices = args.in(1);
  const Tensor& out = args.out(0);
  const uint32_t axis = static_cast<uint32_t>(param_int(args, 0));
  const uint32_t rank = data.rank();
  const size_t elem = dtype_size(data.dtype());
  // Strides of data, in elements.
  int64_t stride[kMaxRank];
  int64_t s = 1;
  for (uint32_t d = rank; d-- > 0;) {
    stride[d] = s;
    s *= data.dim(d);
  }
  const int64_t extent = data.dim(axis);
  int64_t index[kMaxRank] = {};
  const uint8_t* src = static_cast<const uint8_t*>(data.data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t at = indices.dtype() == DType::INT64 ? static_cast<const int64_t*>(indices.data())[i]
                                                 : static_cast<const int32_t*>(indices.data())[i];
    if (at < 0) at += extent;
    if (at < 0 || at >= extent) {
      KILN_LOG(ERROR, "kernel GatherElements (node '%s'): index %lld out of range for an axis of %lld", args.node_name,
               static_cast<long long>(at), static_cast<long long>(extent));
      return Error::kInvalidInput;
    }
    int64_t offset = 0;
    for (uint32_t d = 0; d < rank; ++d) offset += (d == axis ? at : index[d]) * stride[d];
    memcpy(dst + static_cast<size_t>(i) * elem, src + static_cast<size_t>(offset) * elem, elem);
    for (uint32_t d = rank; d-- > 0;) {  // next output index
      if (++index[d] < indices.dim(d)) break;
      index[d] = 0;
    }
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_MATH_KERNELS(K)                                                   \
  K(MathUnary, check_math_unary, run_math_unary, kInplaceInput0)               \
  K(FloatClass, check_float_class, run_float_class, 0)                         \
  K(Mod, check_mod, run_mod, kInplaceInput0 | kInplaceInput1)                  \
  K(BitShift, check_bit_shift, run_bit_shift, kInplaceInput0 | kInplaceInput1) \
  K(Trilu, check_trilu, run_trilu, kInplaceInput0)                             \
  K(CumSum, check_cumsum, run_cumsum, kInplaceInput0)                          \
  K(Hardmax, check_hardmax, run_hardmax, 0)                                    \
  K(GatherElements, check_gather_elements, run_gather_elements, 0)             \
  K(EyeLike, check_eye_like, run_eye_like, 0)                                  \
  K(Tile, check_tile, run_tile, 0)                                             \
  K(Range, check_range, run_range, 0)                                          \
  K(Random, check_random, run_random, 0)                                       \
  K(TfIdf, check_tfidf, run_tfidf, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_MATH_KERNELS)
const KernelEntry kMathKernels[] = {KILN_MATH_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumMathKernels = sizeof(kMathKernels) / sizeof(kMathKernels[0]);

}  // namespace kernels
}  // namespace kiln
