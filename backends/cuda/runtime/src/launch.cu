// The kernels and their launches, compiled by nvcc for the GPU build (and,
// through launch_sim.cc, by the host compiler under the execution model).

#include "kernels.cuh"

namespace kiln::cuda_backend::KILN_CUDA_FLAVOR {

void enqueue_kernel(const Launch& launch, cudaStream_t stream) { enqueue_kernel_impl(launch, stream); }

}  // namespace kiln::cuda_backend::KILN_CUDA_FLAVOR
