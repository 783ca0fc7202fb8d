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
//   Mod          integer or float32/float64, broadcast; ints[0] = fmod. With
//                fmod 0 the result takes the divisor's sign (Python's %),
//                with fmod 1 the dividend's (C's fmod). x mod 0 gives 0 for
//                integers (ONNX leaves it unspecified).
//   BitShift     unsigned integers, broadcast; ints[0] = 1 for right. Shifts
//                of the type's width or more give 0.
//
// Parameters are GenericParams (schema/program.fbs). Every kernel reads
// element i of each input before writing element i of the output and walks
// all tensors in the same order, so the output may take an input's bytes.

#include <math.h>

#include <type_traits>

#include "broadcast.h"
#include "kernel_util.h"
#include "portable_kernels.h"

namespace kiln {
namespace kernels {
namespace {

// ints[0] of MathUnary. The planner writes these numbers; append only.
enum MathFunction : int64_t {
  kSin = 0, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kTanh, kAsinh, kAcosh, kAtanh,
  kRound, kSign, kSelu, kCelu, kSoftsign, kThresholdedRelu, kShrink,
  kNumMathFunctions,
};

int64_t param_int(const KernelArgs& args, uint32_t i) {
  const auto* p = args.params<fb::GenericParams>();
  return p->ints()->Get(i);
}

float param_float(const KernelArgs& args, uint32_t i) {
  const auto* p = args.params<fb::GenericParams>();
  return p->floats()->Get(i);
}

// The parameters carry at least `ints` integers and `floats` floats.
Error check_params(const KernelArgs& args, uint32_t ints, uint32_t floats) {
  const auto* p = args.params<fb::GenericParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "expects GenericParams");
  KILN_KERNEL_CHECK(args, ints == 0 || (p->ints() != nullptr && p->ints()->size() >= ints && aligned8(p->ints())),
                    "expects %u integer parameters", ints);
  KILN_KERNEL_CHECK(args, floats == 0 || (p->floats() != nullptr && p->floats()->size() >= floats),
                    "expects %u float parameters", floats);
  return Error::kOk;
}

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
    case DType::FLOAT32: case DType::FLOAT64: case DType::INT8: case DType::INT16: case DType::INT32:
    case DType::INT64: case DType::UINT8: case DType::UINT16: case DType::UINT32: case DType::UINT64:
      return true;
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

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_MATH_KERNELS(K) \
  K(MathUnary, check_math_unary, run_math_unary, kInplaceInput0) \
  K(FloatClass, check_float_class, run_float_class, 0) \
  K(Mod, check_mod, run_mod, kInplaceInput0 | kInplaceInput1) \
  K(BitShift, check_bit_shift, run_bit_shift, kInplaceInput0 | kInplaceInput1)

KILN_DEFINE_KERNEL_ENTRIES(KILN_MATH_KERNELS)
const KernelEntry kMathKernels[] = {KILN_MATH_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumMathKernels = sizeof(kMathKernels) / sizeof(kMathKernels[0]);

}  // namespace kernels
}  // namespace kiln
