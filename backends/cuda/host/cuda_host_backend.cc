// One build of the CUDA backend's runtime half as kiln's host tools make it
// (compiled once per flavour: `gpu`, and `sim` with KILN_CUDA_HOSTSIM=1;
// cuda_host.cc picks one by KILN_CUDA_EXECUTION).

#include <cstdio>
#include <memory>

#include "backends/cuda/host/cuda_host.h"
#include "kiln/backends/cuda/cuda_backend.h"

namespace kiln::planner::cuda_host::KILN_CUDA_FLAVOR {
namespace {

class CudaHost final : public HostBackend {
 public:
  CudaHost(const cuda_backend::CudaOptions& options, bool report) : backend_(options), report_(report) {}
  Backend& backend() override { return backend_; }

  // Every arena must be released by now; one that is not is a leak the run
  // reports. The execution model also says what ran.
  uint64_t shutdown() override {
    const cuda_backend::CudaStats& s = backend_.stats();
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
  cuda_backend::KILN_CUDA_FLAVOR::CudaBackend backend_;
  bool report_;
};

}  // namespace

std::unique_ptr<HostBackend> make(const cuda_backend::CudaOptions& options, bool report) {
  return std::make_unique<CudaHost>(options, report);
}

}  // namespace kiln::planner::cuda_host::KILN_CUDA_FLAVOR
