// Element-wise kernels: binary arithmetic with NumPy broadcasting, unary
// math and activations.
//
// Every kernel here reads element i of each input before it writes element i
// of the output, and walks all tensors in the same order, so the planner may
// place the output over an input of the same byte size (in-place reuse).

#include <math.h>
#include <string.h>

#include <limits>
#include <type_traits>

#include "activation.h"
#include "broadcast.h"
#include "cpu_kernels.h"
#include "kernel_util.h"
#include "parallel.h"
#include "vmath.h"

namespace kiln {
namespace kernels {
namespace {

// ---------------------------------------------------------------------------
// Binary

// Integer arithmetic wraps (two's complement) instead of overflowing, which
// C++ leaves undefined; integer division by zero gives 0 (ONNX leaves it
// unspecified).
template <typename T, typename F>
T wrapping(T a, T b, F f) {
  if constexpr (std::is_integral<T>::value) {
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return f(a, b);
  }
}

struct AddOp {
  template <typename T>
  static T apply(T a, T b) {
    return wrapping(a, b, [](auto x, auto y) { return x + y; });
  }
};
struct SubOp {
  template <typename T>
  static T apply(T a, T b) {
    return wrapping(a, b, [](auto x, auto y) { return x - y; });
  }
};
struct MulOp {
  template <typename T>
  static T apply(T a, T b) {
    return wrapping(a, b, [](auto x, auto y) { return x * y; });
  }
};
struct DivOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      if (b == 0 || (b == T(-1) && a == std::numeric_limits<T>::min())) return b == 0 ? T(0) : a;
    }
    return a / b;
  }
};
// clang-format off
struct PowOp { template <typename T> static T apply(T a, T b) { return powf(a, b); } };
struct PReluOp { static float apply(float x, float slope) { return x < 0.f ? x * slope : x; } };
struct MaxOp { template <typename T> static T apply(T a, T b) { return a > b || a != a ? a : b; } };
struct MinOp { template <typename T> static T apply(T a, T b) { return a < b || a != a ? a : b; } };
// clang-format on

Error check_binary(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const DType dtype = args.in(0).dtype();
  KILN_KERNEL_CHECK(args,
                    dtype == DType::FLOAT32 || dtype == DType::INT32 || dtype == DType::INT64 || dtype == DType::UINT8,
                    "unsupported dtype %s", dtype_name(dtype));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, dtype));
  KILN_RETURN_IF_ERROR(check_broadcast_output(args, 0, 2));
  const auto* params = args.params<fb::BinaryParams>();
  if (params != nullptr) {
    KILN_RETURN_IF_ERROR(check_activation(args, params->activation()));
    KILN_KERNEL_CHECK(args,
                      dtype == DType::FLOAT32 || params->activation() == nullptr ||
                          params->activation()->kind() == fb::Activation::NONE,
                      "fused activation on a non-float op");
  }
  return Error::kOk;
}

template <typename Op>
Error run_binary(const KernelArgs& args) {
  const Tensor& out = args.out(0);
  switch (out.dtype()) {
    case DType::UINT8: binary_map<Op, uint8_t, uint8_t>(args.in(0), args.in(1), out); return Error::kOk;
    case DType::INT32: binary_map<Op, int32_t, int32_t>(args.in(0), args.in(1), out); return Error::kOk;
    case DType::INT64: binary_map<Op, int64_t, int64_t>(args.in(0), args.in(1), out); return Error::kOk;
    default: break;
  }
  // Float tensors split by binary_map_unit(), the activation
  // applied to each range as it finishes.
  const auto* params = args.params<fb::BinaryParams>();
  const fb::FusedActivation* activation = params != nullptr ? params->activation() : nullptr;
  if (parallel_threads(args.pool) <= 1) {  // always so in firmware: the rest compiles away
    binary_map<Op, float, float>(args.in(0), args.in(1), out);
    apply_activation(out.data_as<float>(), out.numel(), activation);
    return Error::kOk;
  }
  const int64_t n = out.numel();
  const int64_t unit = binary_map_unit(args.in(0), args.in(1), out);
  const int64_t units = (n + unit - 1) / unit;
  const int64_t tasks = parallel_tasks(args.pool, n, units, kParallelMinElements);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t u0, u1;
    parallel_range(units, tasks, t, 1, &u0, &u1);
    if (u0 == u1) return;
    binary_map<Op, float, float>(args.in(0), args.in(1), out, u0, u1);
    const int64_t end = u1 * unit < n ? u1 * unit : n;
    apply_activation(out.data_as<float>() + u0 * unit, end - u0 * unit, activation);
  });
  return Error::kOk;
}

// Max and Min also take int8, int16, the wider unsigned integers, float64
// and float16 (computed in float32), which the other binary kernels do not.
// A NaN operand wins, as in the float32 kernel.

bool min_max_only_dtype(DType t) {
  return t == DType::INT8 || t == DType::INT16 || t == DType::UINT16 || t == DType::UINT32 || t == DType::UINT64 ||
         t == DType::FLOAT64 || t == DType::FLOAT16;
}

Error check_min_max(const KernelArgs& args) {
  if (args.num_inputs < 1 || args.inputs[0] == nullptr || !min_max_only_dtype(args.in(0).dtype())) {
    return check_binary(args);
  }
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, args.in(0).dtype()));
  const auto* params = args.params<fb::BinaryParams>();
  KILN_KERNEL_CHECK(
      args,
      params == nullptr || params->activation() == nullptr || params->activation()->kind() == fb::Activation::NONE,
      "fused activation on a non-float32 op");
  return check_broadcast_output(args, 0, 2);
}

template <typename Op>
Error run_min_max(const KernelArgs& args) {
  const Tensor& a = args.in(0);
  const Tensor& b = args.in(1);
  const Tensor& out = args.out(0);
  switch (out.dtype()) {
    case DType::INT8: binary_map<Op, int8_t, int8_t>(a, b, out); return Error::kOk;
    case DType::INT16: binary_map<Op, int16_t, int16_t>(a, b, out); return Error::kOk;
    case DType::UINT16: binary_map<Op, uint16_t, uint16_t>(a, b, out); return Error::kOk;
    case DType::UINT32: binary_map<Op, uint32_t, uint32_t>(a, b, out); return Error::kOk;
    case DType::UINT64: binary_map<Op, uint64_t, uint64_t>(a, b, out); return Error::kOk;
    case DType::FLOAT64: binary_map<Op, double, double>(a, b, out); return Error::kOk;
    case DType::FLOAT16: binary_map<Float16Op<Op>, uint16_t, uint16_t>(a, b, out); return Error::kOk;
    default: return run_binary<Op>(args);
  }
}

// Pow(X, Y): X float32, int32 or int64 (the output's dtype), Y float32 or
// any 32/64-bit integer dtype. Integer powers of integers are exact, by
// repeated squaring, and wrap; float powers of integers are computed in
// double, truncated toward zero and saturated (NaN gives 0).

bool pow_exponent_dtype(DType t) {
  return t == DType::FLOAT32 || t == DType::INT32 || t == DType::INT64 || t == DType::UINT32 || t == DType::UINT64;
}

Error check_pow(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const DType base = args.in(0).dtype();
  KILN_KERNEL_CHECK(args, base == DType::FLOAT32 || base == DType::INT32 || base == DType::INT64,
                    "unsupported base dtype %s", dtype_name(base));
  KILN_KERNEL_CHECK(args, args.out(0).dtype() == base, "output dtype differs from the base's");
  KILN_KERNEL_CHECK(args, pow_exponent_dtype(args.in(1).dtype()), "unsupported exponent dtype %s",
                    dtype_name(args.in(1).dtype()));
  return check_broadcast_output(args, 0, 2);
}

// An exponent as a double, or as sign and magnitude when it is an integer.
struct Exponent {
  bool is_integer;
  bool negative;
  uint64_t magnitude;
  double value;
};

Exponent load_exponent(const Tensor& t, int64_t i) {
  Exponent e = {true, false, 0, 0.0};
  int64_t s = 0;
  switch (t.dtype()) {
    case DType::FLOAT32:
      e.is_integer = false;
      e.value = t.data_as<const float>()[i];
      return e;
    case DType::UINT32: e.magnitude = t.data_as<const uint32_t>()[i]; break;
    case DType::UINT64: e.magnitude = t.data_as<const uint64_t>()[i]; break;
    case DType::INT32: s = t.data_as<const int32_t>()[i]; break;
    default: s = t.data_as<const int64_t>()[i]; break;
  }
  if (t.dtype() == DType::INT32 || t.dtype() == DType::INT64) {
    e.negative = s < 0;
    e.magnitude = e.negative ? uint64_t{0} - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
  }
  e.value = e.negative ? -static_cast<double>(e.magnitude) : static_cast<double>(e.magnitude);
  return e;
}

template <typename T>
T integer_pow(T base, const Exponent& e) {
  using U = typename std::make_unsigned<T>::type;
  if (e.negative) {
    // 1 / base^n truncated: only bases 1 and -1 give a non-zero result.
    if (base == 1) return 1;
    if (base == -1) return (e.magnitude & 1) ? T(-1) : T(1);
    return 0;
  }
  U result = 1, b = static_cast<U>(base);
  for (uint64_t n = e.magnitude; n != 0; n >>= 1) {
    if (n & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(result);
}

template <typename T>
T saturate_from_double(double v) {
  if (v != v) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

template <typename T>
void pow_mixed(const Tensor& x, const Tensor& y, const Tensor& out) {
  const T* base = x.data_as<const T>();
  T* dst = out.data_as<T>();
  const Tensor* inputs[2] = {&x, &y};
  for_each_broadcast_row<2>(inputs, out, [&](int64_t o, const int64_t* off, const int64_t* step, int64_t inner) {
    for (int64_t i = 0; i < inner; ++i) {
      const T b = base[off[0] + i * step[0]];
      const Exponent e = load_exponent(y, off[1] + i * step[1]);
      if constexpr (std::is_floating_point<T>::value) {
        dst[o + i] = powf(b, static_cast<float>(e.value));
      } else if (e.is_integer) {
        dst[o + i] = integer_pow(b, e);
      } else {
        dst[o + i] = saturate_from_double<T>(pow(static_cast<double>(b), e.value));
      }
    }
  });
}

Error run_pow(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  const Tensor& y = args.in(1);
  switch (x.dtype()) {
    case DType::INT32: pow_mixed<int32_t>(x, y, args.out(0)); break;
    case DType::INT64: pow_mixed<int64_t>(x, y, args.out(0)); break;
    default:
      if (y.dtype() == DType::FLOAT32) {
        binary_map<PowOp, float, float>(x, y, args.out(0));
      } else {
        pow_mixed<float>(x, y, args.out(0));
      }
      break;
  }
  return Error::kOk;
}

// PRelu(X, slope): the slope broadcasts to X, whose shape the output keeps.
Error check_prelu(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  KILN_RETURN_IF_ERROR(check_broadcast_output(args, 0, 2));
  return check_same_shape(args, args.in(0), args.out(0), "X and the output");
}

Error run_prelu(const KernelArgs& args) {
  binary_map<PReluOp, float, float>(args.in(0), args.in(1), args.out(0));
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Unary

Error check_unary(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  return check_same_shape(args, args.in(0), args.out(0), "input and output");
}

float unary_alpha(const KernelArgs& args, float fallback) {
  const auto* p = args.params<fb::UnaryParams>();
  return p != nullptr ? p->alpha() : fallback;
}
float unary_beta(const KernelArgs& args, float fallback) {
  const auto* p = args.params<fb::UnaryParams>();
  return p != nullptr ? p->beta() : fallback;
}

// Large tensors are cut into ranges of whole 64-element blocks (parallel.h),
// so each range's vector loop meets the same blocks and tail as on one
// thread.
constexpr int64_t kElementBlock = 64;

template <typename F>
Error map_unary(const KernelArgs& args, F f) {
  const float* in = args.in(0).data_as<const float>();
  float* out = args.out(0).data_as<float>();
  const int64_t n = args.out(0).numel();
  if (parallel_threads(args.pool) <= 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
    return Error::kOk;
  }
  parallel_for_ranges(args.pool, n, kElementBlock, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = f(in[i]);
  });
  return Error::kOk;
}

// The same through the vector math (vmath.h) where the ISA path has it.
template <typename F>
Error map_math(const KernelArgs& args, MathOp op, F f, float alpha = 0.f, float beta = 0.f) {
  const float* in = args.in(0).data_as<const float>();
  float* out = args.out(0).data_as<float>();
  const int64_t n = args.out(0).numel();
  if (parallel_threads(args.pool) <= 1) {
    return vector_math(op, in, out, n, alpha, beta) ? Error::kOk : map_unary(args, f);
  }
  // Whether this path has the op does not depend on the range: an empty
  // range asks without computing anything.
  if (!vector_math(op, in, out, 0, alpha, beta)) return map_unary(args, f);
  parallel_for_ranges(args.pool, n, kElementBlock,
                      [&](int64_t b, int64_t e) { vector_math(op, in + b, out + b, e - b, alpha, beta); });
  return Error::kOk;
}

// Neg and Abs also serve the integer dtypes (shape arithmetic); integer
// negation wraps.
Error check_unary_signed(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  const DType dtype = args.in(0).dtype();
  KILN_KERNEL_CHECK(args, dtype == DType::FLOAT32 || dtype == DType::INT32 || dtype == DType::INT64,
                    "unsupported dtype %s", dtype_name(dtype));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, dtype));
  return check_same_shape(args, args.in(0), args.out(0), "input and output");
}

template <typename T, bool kAbs>
void negate_typed(const Tensor& x, const Tensor& y) {
  using U = typename std::make_unsigned<T>::type;
  const T* in = x.data_as<const T>();
  T* out = y.data_as<T>();
  for (int64_t i = 0; i < y.numel(); ++i) {
    const T v = in[i];
    out[i] = kAbs && v >= 0 ? v : static_cast<T>(U(0) - static_cast<U>(v));
  }
}

template <bool kAbs>
Error run_negate(const KernelArgs& a) {
  switch (a.in(0).dtype()) {
    case DType::INT32: negate_typed<int32_t, kAbs>(a.in(0), a.out(0)); return Error::kOk;
    case DType::INT64: negate_typed<int64_t, kAbs>(a.in(0), a.out(0)); return Error::kOk;
    default: break;
  }
  return kAbs ? map_unary(a, [](float x) { return fabsf(x); }) : map_unary(a, [](float x) { return -x; });
}

Error run_relu(const KernelArgs& a) {
  return map_math(a, MathOp::kRelu, [](float x) { return x > 0.f ? x : 0.f; });
}
Error run_sigmoid(const KernelArgs& a) { return map_math(a, MathOp::kSigmoid, sigmoid); }
// clang-format off
Error run_tanh(const KernelArgs& a) { return map_math(a, MathOp::kTanh, [](float x) { return tanhf(x); }); }
Error run_exp(const KernelArgs& a) { return map_math(a, MathOp::kExp, [](float x) { return expf(x); }); }
Error run_log(const KernelArgs& a) { return map_math(a, MathOp::kLog, [](float x) { return logf(x); }); }
Error run_sqrt(const KernelArgs& a) { return map_unary(a, [](float x) { return sqrtf(x); }); }
Error run_erf(const KernelArgs& a) { return map_math(a, MathOp::kErf, [](float x) { return erff(x); }); }
Error run_floor(const KernelArgs& a) { return map_unary(a, [](float x) { return floorf(x); }); }
Error run_ceil(const KernelArgs& a) { return map_unary(a, [](float x) { return ceilf(x); }); }
Error run_reciprocal(const KernelArgs& a) { return map_unary(a, [](float x) { return 1.f / x; }); }
// clang-format on
Error run_softplus(const KernelArgs& a) {
  return map_math(a, MathOp::kSoftplus, [](float x) { return x > 20.f ? x : log1pf(expf(x)); });
}
Error run_leaky_relu(const KernelArgs& a) {
  const float alpha = unary_alpha(a, 0.01f);
  return map_math(
      a, MathOp::kLeakyRelu, [alpha](float x) { return x >= 0.f ? x : alpha * x; }, alpha);
}
Error run_elu(const KernelArgs& a) {
  const float alpha = unary_alpha(a, 1.f);
  return map_math(
      a, MathOp::kElu, [alpha](float x) { return x >= 0.f ? x : alpha * (expf(x) - 1.f); }, alpha);
}
Error run_hard_sigmoid(const KernelArgs& a) {
  const float alpha = unary_alpha(a, 0.2f), beta = unary_beta(a, 0.5f);
  return map_math(
      a, MathOp::kHardSigmoid, [alpha, beta](float x) { return hard_sigmoid(x, alpha, beta); }, alpha, beta);
}
Error run_hard_swish(const KernelArgs& a) {
  return map_math(
      a, MathOp::kHardSwish, [](float x) { return x * hard_sigmoid(x, 1.f / 6.f, 0.5f); }, 1.f / 6.f, 0.5f);
}
Error run_silu(const KernelArgs& a) {
  return map_math(a, MathOp::kSilu, [](float x) { return x * sigmoid(x); });
}
Error run_gelu(const KernelArgs& a) {
  // beta != 0 selects the tanh approximation.
  if (unary_beta(a, 0.f) != 0.f) {
    return map_math(a, MathOp::kGeluTanh, [](float x) {
      const float k = 0.7978845608028654f;  // sqrt(2 / pi)
      return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
    });
  }
  return map_math(a, MathOp::kGelu, [](float x) { return 0.5f * x * (1.f + erff(x * 0.7071067811865476f)); });
}
Error run_pow_scalar(const KernelArgs& a) {
  const float e = unary_alpha(a, 1.f);
  if (e == 2.f) return map_unary(a, [](float x) { return x * x; });
  if (e == 0.5f) return map_unary(a, [](float x) { return sqrtf(x); });
  return map_unary(a, [e](float x) { return powf(x, e); });
}

// Clip: bounds from the optional min/max inputs (opset 11+) or the params.
// Integer dtypes take their bounds from the inputs only (a float parameter
// cannot hold every int64), and default to the dtype's range.
Error check_clip(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 3, 1));
  const DType dtype = args.in(0).dtype();
  KILN_KERNEL_CHECK(args,
                    dtype == DType::FLOAT32 || dtype == DType::INT8 || dtype == DType::UINT8 || dtype == DType::INT32 ||
                        dtype == DType::INT64,
                    "unsupported dtype %s", dtype_name(dtype));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, dtype));
  for (uint32_t i = 1; i < args.num_inputs; ++i) {
    if (args.has_input(i)) {
      KILN_KERNEL_CHECK(args, args.in(i).numel() == 1, "clip bound %u must be a scalar", i);
    }
  }
  return check_same_shape(args, args.in(0), args.out(0), "input and output");
}

template <typename T>
void clip_typed(const KernelArgs& a, T lo, T hi) {
  if (a.has_input(1)) lo = *a.in(1).data_as<const T>();
  if (a.has_input(2)) hi = *a.in(2).data_as<const T>();
  const T* in = a.in(0).data_as<const T>();
  T* out = a.out(0).data_as<T>();
  const int64_t n = a.out(0).numel();
  for (int64_t i = 0; i < n; ++i) {
    const T x = in[i];
    out[i] = x < lo ? lo : (x > hi ? hi : x);
  }
}

template <typename T>
void clip_integer(const KernelArgs& a) {
  clip_typed<T>(a, std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max());
}

Error run_clip(const KernelArgs& a) {
  switch (a.in(0).dtype()) {
    case DType::INT8: clip_integer<int8_t>(a); break;
    case DType::UINT8: clip_integer<uint8_t>(a); break;
    case DType::INT32: clip_integer<int32_t>(a); break;
    case DType::INT64: clip_integer<int64_t>(a); break;
    default: clip_typed<float>(a, unary_alpha(a, -INFINITY), unary_beta(a, INFINITY)); break;
  }
  return Error::kOk;
}

// Identity, Reshape, Flatten, Squeeze, Unsqueeze, Dropout: the bytes do not
// change. When the planner placed the output over the input there is
// nothing to do.
Error check_copy(const KernelArgs& args) {
  KILN_KERNEL_CHECK(args, args.num_inputs >= 1 && args.inputs[0] != nullptr, "expects a data input");
  KILN_KERNEL_CHECK(args, args.num_outputs == 1, "expects one output");
  KILN_KERNEL_CHECK(args, args.in(0).dtype() == args.out(0).dtype(), "dtype changes");
  KILN_KERNEL_CHECK(args, args.in(0).nbytes() == args.out(0).nbytes(), "byte size changes (%llu to %llu)",
                    static_cast<unsigned long long>(args.in(0).nbytes()),
                    static_cast<unsigned long long>(args.out(0).nbytes()));
  return Error::kOk;
}

Error run_copy(const KernelArgs& args) {
  if (args.in(0).data() != args.out(0).data() && args.in(0).nbytes() > 0) {
    memcpy(args.out(0).data(), args.in(0).data(), static_cast<size_t>(args.in(0).nbytes()));
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_ELEMENTWISE_KERNELS(K)                                          \
  K(Add, check_binary, run_binary<AddOp>, kInplaceInput0 | kInplaceInput1)   \
  K(Sub, check_binary, run_binary<SubOp>, kInplaceInput0 | kInplaceInput1)   \
  K(Mul, check_binary, run_binary<MulOp>, kInplaceInput0 | kInplaceInput1)   \
  K(Div, check_binary, run_binary<DivOp>, kInplaceInput0 | kInplaceInput1)   \
  K(Pow, check_pow, run_pow, kInplaceInput0)                                 \
  K(Max, check_min_max, run_min_max<MaxOp>, kInplaceInput0 | kInplaceInput1) \
  K(Min, check_min_max, run_min_max<MinOp>, kInplaceInput0 | kInplaceInput1) \
  K(PRelu, check_prelu, run_prelu, kInplaceInput0)                           \
  K(PowScalar, check_unary, run_pow_scalar, kInplaceInput0)                  \
  K(Relu, check_unary, run_relu, kInplaceInput0)                             \
  K(Sigmoid, check_unary, run_sigmoid, kInplaceInput0)                       \
  K(Tanh, check_unary, run_tanh, kInplaceInput0)                             \
  K(Neg, check_unary_signed, run_negate<false>, kInplaceInput0)              \
  K(Abs, check_unary_signed, run_negate<true>, kInplaceInput0)               \
  K(Exp, check_unary, run_exp, kInplaceInput0)                               \
  K(Log, check_unary, run_log, kInplaceInput0)                               \
  K(Sqrt, check_unary, run_sqrt, kInplaceInput0)                             \
  K(Erf, check_unary, run_erf, kInplaceInput0)                               \
  K(Floor, check_unary, run_floor, kInplaceInput0)                           \
  K(Ceil, check_unary, run_ceil, kInplaceInput0)                             \
  K(Reciprocal, check_unary, run_reciprocal, kInplaceInput0)                 \
  K(Softplus, check_unary, run_softplus, kInplaceInput0)                     \
  K(LeakyRelu, check_unary, run_leaky_relu, kInplaceInput0)                  \
  K(Elu, check_unary, run_elu, kInplaceInput0)                               \
  K(HardSigmoid, check_unary, run_hard_sigmoid, kInplaceInput0)              \
  K(HardSwish, check_unary, run_hard_swish, kInplaceInput0)                  \
  K(Silu, check_unary, run_silu, kInplaceInput0)                             \
  K(Gelu, check_unary, run_gelu, kInplaceInput0)                             \
  K(Clip, check_clip, run_clip, kInplaceInput0)                              \
  K(Copy, check_copy, run_copy, kInplaceInput0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_ELEMENTWISE_KERNELS)
const KernelEntry kElementwiseKernels[] = {KILN_ELEMENTWISE_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumElementwiseKernels = sizeof(kElementwiseKernels) / sizeof(kElementwiseKernels[0]);

}  // namespace kernels
}  // namespace kiln
