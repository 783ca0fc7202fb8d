// kiln-runner's CUDA backend, compiled once per flavour like the host
// tools' (backends/cuda/registration/cuda_flavor_registration.cc): `gpu` (kiln_cuda: nvcc
// kernels, cuBLASLt) and, with KILN_CUDA_HOSTEXEC=1, `hostexec` (the host
// execution model, test infrastructure). kiln_runner.cc picks one with
// KILN_CUDA_EXECUTION=host, as `kiln run` does.

#include "kiln/backends/cuda/cuda_backend.h"

namespace kiln_runner::KILN_CUDA_FLAVOR {

namespace cb = kiln::backends::cuda;

cb::KILN_CUDA_FLAVOR::CudaBackend* g_backend = nullptr;

kiln::Backend* cuda_backend(const cb::CudaOptions& options) {
  if (g_backend == nullptr) g_backend = new cb::KILN_CUDA_FLAVOR::CudaBackend(options);
  return g_backend;
}

const cb::CudaStats& cuda_stats() { return g_backend->stats(); }

// Releases streams, workspaces and handles; the number of arenas still live (leaks).
uint32_t cuda_shutdown() {
  const uint32_t live = g_backend->live_arenas();
  g_backend->shutdown();
  return live;
}

}  // namespace kiln_runner::KILN_CUDA_FLAVOR
