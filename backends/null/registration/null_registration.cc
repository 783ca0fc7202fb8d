// The null backend as kiln's tools use it: device memory from a pool of
// KILN_NULL_MEMORY_MB megabytes (default 256), kernels from the portable
// kernel table.

#include <cstdlib>
#include <memory>
#include <vector>

#include "kiln/backends/null/null_backend.h"
#include "kiln/kernels/cpu.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::backends::null {
namespace {

class NullHost final : public planner::HostBackend {
 public:
  NullHost() {
    const char* mb = std::getenv("KILN_NULL_MEMORY_MB");
    const long megabytes = mb != nullptr ? std::strtol(mb, nullptr, 10) : 256;
    pool_.resize(static_cast<size_t>(megabytes > 0 ? megabytes : 0) << 20);
    ok_ = register_cpu_kernels(kernels_) == Error::kOk;
    NullOptions options;
    options.memory = Span<uint8_t>(pool_.data(), pool_.size());
    options.kernels = &kernels_;
    backend_ = std::make_unique<NullBackend>(options);
  }

  bool ok() const { return ok_; }
  Backend& backend() override { return *backend_; }
  // Every arena must be released by now; one that is not is a leak the
  // run reports.
  uint64_t shutdown() override { return backend_->live_arenas(); }

 private:
  std::vector<uint8_t> pool_;
  KernelRegistry kernels_;
  bool ok_ = false;
  std::unique_ptr<NullBackend> backend_;
};

std::unique_ptr<planner::HostBackend> make_host_backend() {
  auto host = std::make_unique<NullHost>();
  if (!host->ok()) return nullptr;
  return host;
}

}  // namespace
}  // namespace kiln::backends::null

namespace kiln::planner {

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_null_host_backend() {
  register_host_backend({"null", backends::null::make_host_backend,
                         "  KILN_NULL_MEMORY_MB=N         null: device memory pool of N MiB (default 256)\n"});
}

}  // namespace kiln::planner
