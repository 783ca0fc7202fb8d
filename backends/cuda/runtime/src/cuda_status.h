// The CUDA backend's status helpers: every call into the CUDA runtime (or,
// under the host execution model, its stand-in) and into cuBLASLt whose
// failure fails the caller goes through one of these, which logs the
// message, the call and the library's own error string, and returns a kiln
// Error:
//
//   KILN_CUDA_CHECK(cudaSetDevice(index), Error::kDeviceError, "cuda: cannot select cuda:%d", index);
//   -> "cuda: cannot select cuda:3: cudaSetDevice(index): invalid device ordinal"

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_STATUS_H_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_STATUS_H_

#include "cuda_compat.h"
#include "kiln/runtime/check.h"

// A CUDA runtime call (cudaError_t).
#define KILN_CUDA_CHECK(call, error, ...) KILN_CHECK_STATUS(call, cudaSuccess, cudaGetErrorString, error, __VA_ARGS__)

#if !KILN_CUDA_HOSTEXEC
#include <cublasLt.h>

// A cuBLASLt call (cublasStatus_t); the GPU build only.
#define KILN_CUBLAS_CHECK(call, error, ...) \
  KILN_CHECK_STATUS(call, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString, error, __VA_ARGS__)
#endif

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_STATUS_H_
