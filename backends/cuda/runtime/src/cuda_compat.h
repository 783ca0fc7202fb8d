// The one place the CUDA backend's sources differ between its two builds:
//
//   - the GPU build (KILN_CUDA_HOSTEXEC unset): kernels compiled by nvcc,
//     the CUDA runtime API from the CUDA Toolkit (cudart, linked
//     statically), Gemm/MatMul through cuBLASLt;
//   - the host execution model (KILN_CUDA_HOSTEXEC=1, test infrastructure,
//     backends/cuda/hostexec/hostexec.h): the same kernel and delegate source
//     compiled by the host compiler, the runtime API implemented over host
//     memory, Gemm/MatMul through the backend's own reference GEMM kernel.
//
// Everything of the backend lives in namespace
// kiln::backends::cuda::KILN_CUDA_FLAVOR (`gpu` or `hostexec`), so both
// builds link into one program (kiln's host tools pick one at run time)
// without clashing. The host execution model declares its CUDA runtime API
// in kiln::backends::cuda::hostexec, so the backend's source finds it there
// unqualified, as it finds the CUDA Toolkit's in the GPU build.
//
// Kernels are launched with KILN_CUDA_LAUNCH(kernel, grid, block, stream, args):
// one argument struct, passed by value.

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_COMPAT_H_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_COMPAT_H_

#include "kiln/backends/cuda/cuda_flavor.h"

#if KILN_CUDA_HOSTEXEC

#include "backends/cuda/hostexec/hostexec.h"

#define KILN_CUDA_LAUNCH(kernel, grid, block, stream, args)                                                        \
  ::kiln::backends::cuda::hostexec::launch(                                                                        \
      (grid), (block), (stream),                                                                                   \
      [](const void* a) { kernel(*static_cast<const typename std::remove_reference<decltype(args)>::type*>(a)); }, \
      &(args), sizeof(args))
#include <type_traits>

#else

#include <cuda_runtime.h>

#define KILN_CUDA_LAUNCH(kernel, grid, block, stream, args) kernel<<<(grid), (block), 0, (stream)>>>(args)

#endif

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_COMPAT_H_
