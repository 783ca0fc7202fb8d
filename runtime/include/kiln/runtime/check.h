// Checks that fail the way the whole runtime fails: one ERROR line in the
// platform log naming what is at fault, then an Error code returned.
//
//   KILN_CHECK_OR_RETURN(index < num_inputs(), Error::kInvalidArgument,
//                        "method '%s': input %u does not exist (%u inputs)", name, index, n);
//   KILN_RETURN_ERROR(Error::kInternal, "method '%s': tensor %u has no storage", name, t);
//
// Calls into a library (the CUDA runtime, cuBLASLt, NCCL, MPI, Vulkan) go
// through that library's status helper (KILN_CUDA_CHECK, KILN_VK_CHECK, ...,
// beside the code that calls it), each one line over KILN_CHECK_STATUS,
// which adds the call as written and the library's own words for the
// status to the message:
//
//   KILN_CHECK_STATUS(cudaSetDevice(i), cudaSuccess, cudaGetErrorString, Error::kDeviceError,
//                     "cuda: cannot select cuda:%d", i);
//   -> "cuda: cannot select cuda:3: cudaSetDevice(i): invalid device ordinal"
//
// With KILN_ENABLE_LOGGING=0 the message and its arguments are compiled out
// (as with KILN_LOG) and only the test and the return remain.
//
// Including this header also brings result.h's macros to propagate an Error
// or unwrap a Result (KILN_RETURN_IF_ERROR, KILN_ASSIGN_OR_RETURN) and its
// KILN_DEBUG_CHECK. Those do not log a failure they pass on: it was logged
// where it was found.

#ifndef KILN_RUNTIME_CHECK_H_
#define KILN_RUNTIME_CHECK_H_

#include "kiln/runtime/error.h"
#include "kiln/runtime/log.h"
#include "kiln/runtime/result.h"

// When `cond` is false: logs one ERROR line (printf-style format and
// arguments, required) and returns `error` from the enclosing function,
// which returns Error or a Result.
#define KILN_CHECK_OR_RETURN(cond, error, ...) \
  do {                                         \
    if (!(cond)) {                             \
      KILN_LOG(ERROR, __VA_ARGS__);            \
      return (error);                          \
    }                                          \
  } while (0)

// Logs one ERROR line and returns `error`: a failure found without a single
// condition to test (a switch's default, a loop that found nothing).
#define KILN_RETURN_ERROR(error, ...) \
  do {                                \
    KILN_LOG(ERROR, __VA_ARGS__);     \
    return (error);                   \
  } while (0)

// Evaluates `call` once; when the status it returns is not `ok`, logs one
// ERROR line (the printf-style message, then the call's text and
// `describe(status)`) and returns `error`. `format` must be a string literal.
#define KILN_CHECK_STATUS(call, ok, describe, error, format, ...)                       \
  do {                                                                                  \
    const auto kiln_status_ = (call);                                                   \
    if (kiln_status_ != (ok)) {                                                         \
      KILN_LOG(ERROR, format ": %s: %s", ##__VA_ARGS__, #call, describe(kiln_status_)); \
      return (error);                                                                   \
    }                                                                                   \
  } while (0)

#endif  // KILN_RUNTIME_CHECK_H_
