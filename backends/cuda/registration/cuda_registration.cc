// The CUDA backend as kiln's tools use it (`kiln run`, the
// conformance runner, benchmarks), with options from the environment:
//
//   KILN_CUDA_EXECUTION=host      run the CUDA kernels under the host
//                                 execution model (backends/cuda/hostexec,
//                                 test infrastructure; Gemm/MatMul on the
//                                 reference GEMM kernel, not cuBLASLt)
//   KILN_CUDA_WORKSPACE_MB=N      cuBLASLt workspace per device (default 32)
//   KILN_CUDA_GRAPHS=0            launch every delegate call directly
//                                 instead of replaying a CUDA graph
//
// Under mpirun (or scripts/kiln-ranks) with several ranks, cuda:0 is the
// rank's local GPU (its rank on the node modulo the GPUs,
// CudaOptions::node_rank): the device the nccl and cuda-ipc communicators
// reduce on.
//
// Without KILN_CUDA_EXECUTION=host the GPU build runs where the tools link
// it (KILN_CUDA_IN_TOOLS); on a machine without a GPU, or in tools without
// the GPU build, a program that needs cuda:N fails to load, naming the device.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "backends/cuda/registration/cuda_registration.h"

namespace kiln::backends::cuda {
namespace {

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// Under a launcher with more than one rank (kiln's own, scripts/kiln-ranks,
// or OpenMPI's mpirun, which the communicators read too), this rank's rank
// on its node; otherwise -1.
int launcher_node_rank() {
  const bool kiln = std::getenv("KILN_WORLD_SIZE") != nullptr;
  const char* size = std::getenv(kiln ? "KILN_WORLD_SIZE" : "OMPI_COMM_WORLD_SIZE");
  const char* local = std::getenv(kiln ? "KILN_LOCAL_RANK" : "OMPI_COMM_WORLD_LOCAL_RANK");
  if (size == nullptr || local == nullptr || std::strtol(size, nullptr, 10) < 2) return -1;
  return static_cast<int>(std::strtol(local, nullptr, 10));
}

std::unique_ptr<planner::HostBackend> make_from_environment() {
  CudaOptions options;
  if (const char* mb = std::getenv("KILN_CUDA_WORKSPACE_MB")) {
    const long n = std::strtol(mb, nullptr, 10);
    options.gemm_workspace_bytes = static_cast<uint64_t>(n > 0 ? n : 0) << 20;
  }
  options.graphs = !env_is("KILN_CUDA_GRAPHS", "0");
  options.node_rank = launcher_node_rank();
  if (env_is("KILN_CUDA_EXECUTION", "host")) {
    std::fprintf(stderr,
                 "cuda: KILN_CUDA_EXECUTION=host: CUDA kernels run under the host execution model (test "
                 "infrastructure); Gemm/MatMul run the reference GEMM kernel, not cuBLASLt\n");
    return hostexec::make_host_backend(options, true);
  }
#if KILN_CUDA_WITH_GPU
  return gpu::make_host_backend(options, false);
#else
  options.unavailable =
      "this kiln does not link the GPU build (KILN_WITH_CUDA and KILN_CUDA_IN_TOOLS); KILN_CUDA_EXECUTION=host runs "
      "the host execution model";
  return hostexec::make_host_backend(options, false);
#endif
}

}  // namespace
}  // namespace kiln::backends::cuda

namespace kiln::planner {

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_cuda_host_backend() {
  register_host_backend(
      {"cuda", backends::cuda::make_from_environment,
       "  KILN_CUDA_EXECUTION=host      cuda: run the kernels under the host execution model (test infrastructure)\n"
       "  KILN_CUDA_WORKSPACE_MB=N      cuda: cuBLASLt workspace per device (default 32)\n"
       "  KILN_CUDA_GRAPHS=0            cuda: launch delegates directly, no CUDA graphs\n"});
}

}  // namespace kiln::planner
