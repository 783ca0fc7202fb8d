// The one place the CUDA backend's sources differ between its two builds:
//
//   - the GPU build (KILN_CUDA_HOSTSIM unset): kernels compiled by nvcc,
//     the CUDA runtime API from the CUDA Toolkit (cudart, linked
//     statically), Gemm/MatMul through cuBLASLt;
//   - the host execution model (KILN_CUDA_HOSTSIM=1, test infrastructure,
//     backends/cuda/hostsim/hostsim.h): the same kernel and delegate source
//     compiled by the host compiler, the runtime API implemented over host
//     memory, Gemm/MatMul through the backend's own reference GEMM kernel.
//
// Everything of the backend lives in namespace kiln::cuda_backend::KILN_CUDA_FLAVOR
// (`gpu` or `sim`), so both builds link into one program (kiln's host tools
// pick one at run time) without clashing.
//
// Kernels are launched with KILN_CUDA_LAUNCH(kernel, grid, block, stream, args):
// one argument struct, passed by value.

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_COMPAT_H_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_COMPAT_H_

#include "kiln/backends/cuda/cuda_flavor.h"

#if KILN_CUDA_HOSTSIM

#include "backends/cuda/hostsim/hostsim.h"

#define KILN_CUDA_LAUNCH(kernel, grid, block, stream, args)                                                        \
  ::kiln::hostsim::launch(                                                                                         \
      (grid), (block), (stream),                                                                                   \
      [](const void* a) { kernel(*static_cast<const typename std::remove_reference<decltype(args)>::type*>(a)); }, \
      &(args), sizeof(args))
#include <type_traits>
namespace kiln::cuda_backend::sim {
using namespace ::kiln::hostsim;
}  // namespace kiln::cuda_backend::sim

#else

#include <cuda_runtime.h>

#define KILN_CUDA_LAUNCH(kernel, grid, block, stream, args) kernel<<<(grid), (block), 0, (stream)>>>(args)

#endif

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_CUDA_COMPAT_H_
