// The CUDA backend's host half, per flavour (cuda_host_backend.cc): makes
// a HostBackend over that build of CudaBackend.

#ifndef KILN_BACKENDS_CUDA_HOST_CUDA_HOST_H_
#define KILN_BACKENDS_CUDA_HOST_CUDA_HOST_H_

#include <memory>

#include "kiln/backends/cuda/cuda_backend.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::planner::cuda_host {
namespace gpu {
std::unique_ptr<HostBackend> make(const cuda_backend::CudaOptions& options, bool report);
}  // namespace gpu
namespace sim {
std::unique_ptr<HostBackend> make(const cuda_backend::CudaOptions& options, bool report);
}  // namespace sim
}  // namespace kiln::planner::cuda_host

#endif  // KILN_BACKENDS_CUDA_HOST_CUDA_HOST_H_
