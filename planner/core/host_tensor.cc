#include "core/host_tensor.h"

#include <cstring>
#include <sstream>

#include "core/error.h"
#include "kiln/kernels/float16.h"

namespace kiln::planner {

size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    // clang-format off
    case DType::FLOAT32: case DType::INT32: case DType::UINT32: return 4;
    case DType::FLOAT16: case DType::BFLOAT16: case DType::INT16: case DType::UINT16: return 2;
    case DType::FLOAT64: case DType::INT64: case DType::UINT64: return 8;
    case DType::INT8: case DType::UINT8: case DType::BOOL: return 1;
      // clang-format on
  }
  return 0;
}

std::string dtype_str(DType dtype) {
  const char* name = fb::EnumNameDType(dtype);
  std::string s = name != nullptr && *name != '\0' ? name : "invalid";
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) fail("shape ", shape_str(shape), " has more elements than int64 holds");
  }
  return n;
}

uint64_t checked_nbytes(DType dtype, const std::vector<int64_t>& shape, const std::string& what) {
  // Shapes come from files: refuse what overflows or could never fit.
  uint64_t n = dtype_bytes(dtype);
  for (int64_t d : shape) {
    if (d < 0) fail(what, ": negative dimension in shape ", shape_str(shape));
  }
  // Zero dims aside, so an empty tensor's other dims stay small too (and
  // every count over them fits int64).
  bool empty = false;
  for (int64_t d : shape) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (n > kMaxTensorBytes / static_cast<uint64_t>(d)) {
      fail(what, ": shape ", shape_str(shape), " of ", dtype_str(dtype), " is larger than 64 GiB");
    }
    n *= static_cast<uint64_t>(d);
  }
  return empty ? 0 : n;
}

HostTensor::HostTensor(DType dtype_in, std::vector<int64_t> shape_in) : dtype(dtype_in), shape(std::move(shape_in)) {
  bytes.assign(static_cast<size_t>(checked_nbytes(dtype, shape, "tensor")), 0);
}

int64_t HostTensor::int_at(int64_t i) const {
  switch (dtype) {
    case DType::INT64: return data<int64_t>()[i];
    case DType::INT32: return data<int32_t>()[i];
    case DType::INT16: return data<int16_t>()[i];
    case DType::INT8: return data<int8_t>()[i];
    case DType::UINT64: return static_cast<int64_t>(data<uint64_t>()[i]);
    case DType::UINT32: return data<uint32_t>()[i];
    case DType::UINT16: return data<uint16_t>()[i];
    case DType::UINT8:
    case DType::BOOL: return data<uint8_t>()[i];
    case DType::FLOAT32: return static_cast<int64_t>(data<float>()[i]);
    case DType::FLOAT64: return static_cast<int64_t>(data<double>()[i]);
    default: fail("cannot read ", dtype_str(dtype), " as an integer");
  }
}

double HostTensor::float_at(int64_t i) const {
  switch (dtype) {
    case DType::FLOAT32: return data<float>()[i];
    case DType::FLOAT64: return data<double>()[i];
    case DType::FLOAT16: return half_to_float(data<uint16_t>()[i]);
    case DType::BFLOAT16: return bfloat16_to_float(data<uint16_t>()[i]);
    default: return static_cast<double>(int_at(i));
  }
}

std::vector<int64_t> HostTensor::to_int64s() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = int_at(i);
  return out;
}

HostTensor HostTensor::from_int64s(const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  HostTensor t(DType::INT64, std::move(shape));
  if (static_cast<size_t>(t.numel()) != values.size()) fail("value count does not match shape");
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

HostTensor HostTensor::from_floats(const std::vector<float>& values, std::vector<int64_t> shape) {
  HostTensor t(DType::FLOAT32, std::move(shape));
  if (static_cast<size_t>(t.numel()) != values.size()) fail("value count does not match shape");
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

}  // namespace kiln::planner
