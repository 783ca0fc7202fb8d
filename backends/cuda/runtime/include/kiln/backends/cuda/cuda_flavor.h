// Which build of the CUDA backend a translation unit belongs to:
// KILN_CUDA_FLAVOR is `gpu` (nvcc kernels, the CUDA runtime, cuBLASLt) or,
// with KILN_CUDA_HOSTEXEC=1, `hostexec` (the same source over the host
// execution model, test infrastructure, whose CUDA runtime API lives in that
// namespace too). Each build lives in its own namespace,
// kiln::backends::cuda::gpu or kiln::backends::cuda::hostexec, so one
// program can link both.

#ifndef KILN_BACKENDS_CUDA_CUDA_FLAVOR_H_
#define KILN_BACKENDS_CUDA_CUDA_FLAVOR_H_

#if KILN_CUDA_HOSTEXEC
#define KILN_CUDA_FLAVOR hostexec
#else
#define KILN_CUDA_FLAVOR gpu
#endif

#endif  // KILN_BACKENDS_CUDA_CUDA_FLAVOR_H_
