// HostTensor: a tensor value held by the planner (constants, folded values,
// inputs and outputs of `kiln run`). Owns its bytes.

#ifndef KILN_PLANNER_CORE_HOST_TENSOR_H_
#define KILN_PLANNER_CORE_HOST_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/schema/program_generated.h"

namespace kiln::planner {

using DType = fb::DType;

// Bytes per element of `dtype`.
size_t dtype_bytes(DType dtype);
// "float32", "int64", ...
std::string dtype_str(DType dtype);
// "[1, 3, 224, 224]"
std::string shape_str(const std::vector<int64_t>& shape);
// Product of the dims (1 for a scalar). Throws PlanError when it overflows
// int64 (a hostile shape such as [2^31, 2^31, 2^31]).
int64_t shape_numel(const std::vector<int64_t>& shape);

// The largest tensor the planner accepts, constant or planned: 64 GiB. Every
// value of a graph is checked against it (import, each node's inference), so
// byte sizes, offsets and arena sums computed later cannot overflow uint64.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 36;
// Bytes of a tensor of `shape` and `dtype`; throws PlanError naming `what`
// when a dim is negative or the size exceeds kMaxTensorBytes.
uint64_t checked_nbytes(DType dtype, const std::vector<int64_t>& shape, const std::string& what);

struct HostTensor {
  DType dtype = DType::FLOAT32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType dtype_in, std::vector<int64_t> shape_in);  // zero-filled

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return bytes.size(); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }

  // Element i converted to int64 / double (integer, bool and float dtypes).
  int64_t int_at(int64_t i) const;
  double float_at(int64_t i) const;
  // Every element converted to int64 (for shape arguments).
  std::vector<int64_t> to_int64s() const;

  static HostTensor from_int64s(const std::vector<int64_t>& values, std::vector<int64_t> shape);
  static HostTensor from_floats(const std::vector<float>& values, std::vector<int64_t> shape);
  static HostTensor scalar_float(float value) { return from_floats({value}, {}); }
};

}  // namespace kiln::planner

#endif  // KILN_PLANNER_CORE_HOST_TENSOR_H_
