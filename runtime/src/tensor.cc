#include "kiln/runtime/tensor.h"

namespace kiln {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::FLOAT32: return "float32";
    case DType::FLOAT16: return "float16";
    case DType::BFLOAT16: return "bfloat16";
    case DType::FLOAT64: return "float64";
    case DType::INT8: return "int8";
    case DType::UINT8: return "uint8";
    case DType::INT16: return "int16";
    case DType::UINT16: return "uint16";
    case DType::INT32: return "int32";
    case DType::UINT32: return "uint32";
    case DType::INT64: return "int64";
    case DType::UINT64: return "uint64";
    case DType::BOOL: return "bool";
  }
  return "invalid";
}

}  // namespace kiln
