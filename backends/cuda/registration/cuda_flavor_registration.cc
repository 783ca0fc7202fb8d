// One build of the CUDA backend's runtime half as kiln's tools make it
// (compiled once per flavour: `gpu`, and `hostexec` with
// KILN_CUDA_HOSTEXEC=1; cuda_registration.cc picks one by
// KILN_CUDA_EXECUTION).

#include <cstdio>
#include <memory>

#include "backends/cuda/registration/cuda_registration.h"
#include "kiln/backends/cuda/cuda_backend.h"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {
namespace {

class CudaHost final : public planner::HostBackend {
 public:
  CudaHost(const CudaOptions& options, bool report) : backend_(options), report_(report) {}
  Backend& backend() override { return backend_; }

  // Every arena must be released by now; one that is not is a leak the run
  // reports. The execution model also says what ran.
  uint64_t shutdown() override {
    const CudaStats& s = backend_.stats();
    if (report_ && (s.direct_calls > 0 || s.graph_replays > 0)) {
      std::fprintf(stderr,
                   "cuda (host execution model): %llu delegate calls launched directly, %llu replayed from %llu "
                   "captured graphs; %llu Gemm/MatMul kernels on the reference GEMM (cuBLASLt is not modelled)\n",
                   static_cast<unsigned long long>(s.direct_calls), static_cast<unsigned long long>(s.graph_replays),
                   static_cast<unsigned long long>(s.captures), static_cast<unsigned long long>(s.gemm_reference));
    }
    const uint64_t leaks = backend_.live_arenas();
    backend_.shutdown();
    return leaks;
  }

 private:
  CudaBackend backend_;
  bool report_;
};

}  // namespace

std::unique_ptr<planner::HostBackend> make_host_backend(const CudaOptions& options, bool report) {
  return std::make_unique<CudaHost>(options, report);
}

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR
