// Which build of the CUDA backend a translation unit belongs to:
// KILN_CUDA_FLAVOR is `gpu` (nvcc kernels, the CUDA runtime, cuBLASLt) or,
// with KILN_CUDA_HOSTSIM=1, `sim` (the same source over the host execution
// model, test infrastructure). Both live in their own namespace so one
// program can link both.

#ifndef KILN_BACKENDS_CUDA_CUDA_FLAVOR_H_
#define KILN_BACKENDS_CUDA_CUDA_FLAVOR_H_

#if KILN_CUDA_HOSTSIM
#define KILN_CUDA_FLAVOR sim
#else
#define KILN_CUDA_FLAVOR gpu
#endif

#endif  // KILN_BACKENDS_CUDA_CUDA_FLAVOR_H_
