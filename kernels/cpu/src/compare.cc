// Comparison and logic kernels (Equal, Less, Greater, LessOrEqual,
// GreaterOrEqual, And, Or, Xor, Not), all producing bool, and Where, which
// selects between two tensors of any dtype by a bool condition. Operands
// broadcast (NumPy rules).
//
// bool is one byte holding 0 or 1; inputs read any non-zero byte as true.

#include <string.h>

#include "broadcast.h"
#include "cpu_kernels.h"
#include "kernel_util.h"

namespace kiln {
namespace kernels {
namespace {

// clang-format off
struct EqualOp { template <typename T> static uint8_t apply(T a, T b) { return a == b; } };
struct LessOp { template <typename T> static uint8_t apply(T a, T b) { return a < b; } };
struct GreaterOp { template <typename T> static uint8_t apply(T a, T b) { return a > b; } };
struct LessOrEqualOp { template <typename T> static uint8_t apply(T a, T b) { return a <= b; } };
struct GreaterOrEqualOp { template <typename T> static uint8_t apply(T a, T b) { return a >= b; } };
struct AndOp { static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) & (b != 0); } };
struct OrOp { static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) | (b != 0); } };
struct XorOp { static uint8_t apply(uint8_t a, uint8_t b) { return (a != 0) ^ (b != 0); } };
// clang-format on

bool comparable(DType t) {
  return t == DType::FLOAT32 || t == DType::FLOAT64 || t == DType::INT32 || t == DType::INT64 || t == DType::BOOL;
}

Error check_compare(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  const DType dtype = args.in(0).dtype();
  KILN_KERNEL_CHECK(args, comparable(dtype), "unsupported dtype %s", dtype_name(dtype));
  KILN_KERNEL_CHECK(args, args.in(1).dtype() == dtype, "inputs differ in dtype");
  KILN_KERNEL_CHECK(args, args.out(0).dtype() == DType::BOOL, "output must be bool");
  return check_broadcast_output(args, 0, 2);
}

template <typename Op>
Error run_compare(const KernelArgs& args) {
  const Tensor& a = args.in(0);
  const Tensor& b = args.in(1);
  const Tensor& out = args.out(0);
  switch (a.dtype()) {
    case DType::FLOAT64: binary_map<Op, double, uint8_t>(a, b, out); break;
    case DType::INT32: binary_map<Op, int32_t, uint8_t>(a, b, out); break;
    case DType::INT64: binary_map<Op, int64_t, uint8_t>(a, b, out); break;
    case DType::BOOL: binary_map<Op, uint8_t, uint8_t>(a, b, out); break;
    default: binary_map<Op, float, uint8_t>(a, b, out); break;
  }
  return Error::kOk;
}

Error check_logical(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 2, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::BOOL));
  return check_broadcast_output(args, 0, 2);
}

template <typename Op>
Error run_logical(const KernelArgs& args) {
  binary_map<Op, uint8_t, uint8_t>(args.in(0), args.in(1), args.out(0));
  return Error::kOk;
}

Error check_not(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 1, 1, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::BOOL));
  return check_same_shape(args, args.in(0), args.out(0), "input and output");
}

Error run_not(const KernelArgs& args) {
  const uint8_t* in = args.in(0).data_as<const uint8_t>();
  uint8_t* out = args.out(0).data_as<uint8_t>();
  const int64_t n = args.out(0).numel();
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] == 0;
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Where(condition, X, Y): X where the condition holds, else Y. Moves
// elements, so it serves every dtype.

Error check_where(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 3, 3, 1));
  KILN_KERNEL_CHECK(args, args.in(0).dtype() == DType::BOOL, "condition must be bool");
  const DType dtype = args.out(0).dtype();
  KILN_KERNEL_CHECK(args, dtype_size(dtype) != 0 && args.in(1).dtype() == dtype && args.in(2).dtype() == dtype,
                    "X, Y and the output must share a dtype");
  return check_broadcast_output(args, 0, 3);
}

template <typename T>
void where_typed(const KernelArgs& args) {
  const uint8_t* c = args.in(0).data_as<const uint8_t>();
  const T* x = args.in(1).data_as<const T>();
  const T* y = args.in(2).data_as<const T>();
  T* out = args.out(0).data_as<T>();
  const Tensor* inputs[3] = {args.inputs[0], args.inputs[1], args.inputs[2]};
  for_each_broadcast_row<3>(
      inputs, args.out(0), [&](int64_t o, const int64_t* off, const int64_t* step, int64_t inner) {
        for (int64_t i = 0; i < inner; ++i) {
          out[o + i] = c[off[0] + i * step[0]] != 0 ? x[off[1] + i * step[1]] : y[off[2] + i * step[2]];
        }
      });
}

Error run_where(const KernelArgs& args) {
  switch (dtype_size(args.out(0).dtype())) {
    case 1: where_typed<uint8_t>(args); break;
    case 2: where_typed<uint16_t>(args); break;
    case 4: where_typed<uint32_t>(args); break;
    default: where_typed<uint64_t>(args); break;
  }
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_COMPARE_KERNELS(K)                                              \
  K(Equal, check_compare, run_compare<EqualOp>, 0)                           \
  K(Less, check_compare, run_compare<LessOp>, 0)                             \
  K(Greater, check_compare, run_compare<GreaterOp>, 0)                       \
  K(LessOrEqual, check_compare, run_compare<LessOrEqualOp>, 0)               \
  K(GreaterOrEqual, check_compare, run_compare<GreaterOrEqualOp>, 0)         \
  K(And, check_logical, run_logical<AndOp>, kInplaceInput0 | kInplaceInput1) \
  K(Or, check_logical, run_logical<OrOp>, kInplaceInput0 | kInplaceInput1)   \
  K(Xor, check_logical, run_logical<XorOp>, kInplaceInput0 | kInplaceInput1) \
  K(Not, check_not, run_not, kInplaceInput0)                                 \
  K(Where, check_where, run_where, kInplaceInput1 | kInplaceInput2)

KILN_DEFINE_KERNEL_ENTRIES(KILN_COMPARE_KERNELS)
const KernelEntry kCompareKernels[] = {KILN_COMPARE_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumCompareKernels = sizeof(kCompareKernels) / sizeof(kCompareKernels[0]);

}  // namespace kernels
}  // namespace kiln
