// Tensor: what kernels, delegates and applications see of one tensor of a
// method: a data pointer, a dtype, a static shape and a device.
//
// Shapes are fixed by the planner; `dims` points into the program (zero copy)
// and the data pointer into an arena, a constant in the program's segment, or
// memory the application bound. A Tensor never owns any of them.

#ifndef KILN_RUNTIME_TENSOR_H_
#define KILN_RUNTIME_TENSOR_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/schema/device.h"
#include "kiln/schema/program_generated.h"

namespace kiln {

using DType = fb::DType;
using DeviceType = fb::DeviceType;
using Device = fb::Device;

constexpr uint32_t kMaxRank = 8;

// Bytes per element; 0 for a value outside the enum.
constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::FLOAT32: return 4;
    case DType::FLOAT16: return 2;
    case DType::BFLOAT16: return 2;
    case DType::FLOAT64: return 8;
    case DType::INT8: return 1;
    case DType::UINT8: return 1;
    case DType::INT16: return 2;
    case DType::UINT16: return 2;
    case DType::INT32: return 4;
    case DType::UINT32: return 4;
    case DType::INT64: return 8;
    case DType::UINT64: return 8;
    case DType::BOOL: return 1;
  }
  return 0;
}

// "float32", "int64", ...; "invalid" outside the enum.
const char* dtype_name(DType dtype);

class Tensor {
 public:
  Tensor() = default;
  // A view over caller-owned data; `dims` (rank entries) must outlive it.
  Tensor(void* data, DType dtype, const int64_t* dims, uint32_t rank, Device device = Device(DeviceType::CPU, 0))
      : data_(data), dims_(dims), rank_(static_cast<uint8_t>(rank)), dtype_(dtype), device_(device) {
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; ++i) n *= dims[i];
    numel_ = n;
    nbytes_ = static_cast<uint64_t>(n) * dtype_size(dtype);
  }

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  uint32_t rank() const { return rank_; }
  const int64_t* dims() const { return dims_; }
  int64_t dim(uint32_t i) const { return dims_[i]; }
  int64_t numel() const { return numel_; }
  uint64_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // The arena holding the bytes (-1: a constant or user memory) and the
  // offset in it; how device tensors, which have no host address, are found.
  int32_t arena() const { return arena_ == kNoArena ? -1 : static_cast<int32_t>(arena_); }
  uint64_t offset() const { return offset_; }

 private:
  friend class Method;
  friend class MethodLoader;

  void* data_ = nullptr;
  const int64_t* dims_ = nullptr;
  int64_t numel_ = 0;
  uint64_t nbytes_ = 0;
  uint8_t rank_ = 0;
  DType dtype_ = DType::FLOAT32;
  Device device_;
  uint8_t flags_ = 0;
  // The arena holding the bytes (kNoArena for constants and user memory)
  // and the offset in it: how device tensors, which have no host address,
  // are located.
  uint16_t arena_ = kNoArena;
  // For an alias: the tensor whose bytes it uses (its root, never an alias).
  uint32_t alias_root_ = 0;
  uint64_t offset_ = 0;

  static constexpr uint16_t kNoArena = 0xFFFF;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_TENSOR_H_
