// The nccl communicator's status helpers: a call into NCCL, or into the
// CUDA runtime, whose failure fails the caller goes through one of these,
// which logs the message, the call and the library's own error string, and
// returns a kiln Error:
//
//   KILN_NCCL_CHECK(ncclCommInitRank(...), Error::kDeviceError, "nccl: rank %d: joining %d ranks", rank, size);
//   -> "nccl: rank 1: joining 2 ranks: ncclCommInitRank(...): unhandled system error (run with NCCL_DEBUG=INFO ...)"
//
// (The CUDA backend has its own KILN_CUDA_CHECK, backends/cuda/runtime/src/
// cuda_status.h: communicators and backends do not include each other, so
// each names the CUDA runtime's error string over the shared
// KILN_CHECK_STATUS of kiln/runtime/check.h.)

#ifndef KILN_COMM_NCCL_SRC_NCCL_STATUS_H_
#define KILN_COMM_NCCL_SRC_NCCL_STATUS_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "kiln/runtime/check.h"

#define KILN_NCCL_CHECK(call, error, ...) KILN_CHECK_STATUS(call, ncclSuccess, ncclGetErrorString, error, __VA_ARGS__)

#define KILN_CUDA_CHECK(call, error, ...) KILN_CHECK_STATUS(call, cudaSuccess, cudaGetErrorString, error, __VA_ARGS__)

#endif  // KILN_COMM_NCCL_SRC_NCCL_STATUS_H_
