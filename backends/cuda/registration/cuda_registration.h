// The CUDA backend's registration with kiln's tools, per build of its
// runtime half (cuda_flavor_registration.cc, compiled once per flavour):
// makes the planner's HostBackend over that build of CudaBackend.
// cuda_registration.cc picks one by KILN_CUDA_EXECUTION.

#ifndef KILN_BACKENDS_CUDA_REGISTRATION_CUDA_REGISTRATION_H_
#define KILN_BACKENDS_CUDA_REGISTRATION_CUDA_REGISTRATION_H_

#include <memory>

#include "kiln/backends/cuda/cuda_backend.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::backends::cuda {
namespace gpu {
std::unique_ptr<planner::HostBackend> make_host_backend(const CudaOptions& options, bool report);
}  // namespace gpu
namespace hostexec {
std::unique_ptr<planner::HostBackend> make_host_backend(const CudaOptions& options, bool report);
}  // namespace hostexec
}  // namespace kiln::backends::cuda

#endif  // KILN_BACKENDS_CUDA_REGISTRATION_CUDA_REGISTRATION_H_
