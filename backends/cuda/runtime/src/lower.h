// From a delegate's kernel calls to launches (launch.h): for each kernel
// (the names and parameters of the CPU kernels), the checks its
// CUDA kernel relies on (the shared operand checks,
// kiln/backends/common/operand_checks.h, and CUDA's own limits) and the
// launch(es) that run it, with every device address resolved. The CUDA
// backend's trust boundary: a kernel passes its checks once, at delegate
// init, and its launches then index only inside the tensors they were
// given. Every message names the model node.
// No CUDA calls here, so the GPU build and the host execution model share
// it unchanged.

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_LOWER_H_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_LOWER_H_

#include "kiln/backends/common/kernel_view.h"
#include "launch.h"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {

using LaunchSink = backends::LaunchSink<Launch>;

// Checks `kernel` (its operands: float32, float16 or bfloat16 tensors, one
// type per kernel but a Cast's, in arenas of the delegate's device, checked
// by the caller) and emits its launches to `sink`, each with the storage
// type of the kernel's output.
Error lower_kernel(const KernelView& kernel, LaunchSink& sink);

// y[i] += b[i mod period] for i < count (float32; count a multiple of
// period, below 2^32): the binary kernel's Add over y in place with b
// broadcast along y's leading axis (Backend::accumulate).
Launch accumulate_launch(float* y, const float* b, uint64_t count, uint64_t period);

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_LOWER_H_
