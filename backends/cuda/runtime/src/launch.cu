// The kernels and their launches, compiled by nvcc for the GPU build (and,
// through launch_hostexec.cc, by the host compiler under the execution model).

#include "kernels.cuh"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {

void enqueue_kernel(const Launch& launch, cudaStream_t stream) { enqueue_kernel_impl(launch, stream); }

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR
