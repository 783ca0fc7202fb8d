// The Vulkan backend as kiln's tools use it (`kiln run`, constant
// folding, the conformance runner, benchmarks): one VulkanBackend made on
// first use, with options from the environment:
//
//   KILN_VULKAN_VALIDATION=1        the Khronos validation layer; every
//                                   message it reports fails the run
//   KILN_VULKAN_HOST_POOL_MB=N      driver host allocations from a pool of
//                                   N MiB (default 64; 0: the driver's own)
//   KILN_VULKAN_KERNELS=tiles|registers   how Gemm, MatMul and Conv run
//                                   (default: by device type, see
//                                   VulkanOptions::Kernels)

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kiln/backends/vulkan/vulkan_backend.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::backends::vulkan {
namespace {

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == value;
}

class VulkanHost final : public planner::HostBackend {
 public:
  VulkanHost() {
    VulkanOptions options;
    options.validation = env_is("KILN_VULKAN_VALIDATION", "1");
    if (env_is("KILN_VULKAN_KERNELS", "tiles")) options.kernels = VulkanOptions::Kernels::kSharedMemoryTiles;
    if (env_is("KILN_VULKAN_KERNELS", "registers")) options.kernels = VulkanOptions::Kernels::kRegisterBlocks;
    const char* pool_mb = std::getenv("KILN_VULKAN_HOST_POOL_MB");
    const long mb = pool_mb != nullptr ? std::strtol(pool_mb, nullptr, 10) : 64;
    if (mb > 0) {
      pool_.resize(static_cast<size_t>(mb) << 20);
      options.host_memory = Span<uint8_t>(pool_.data(), pool_.size());
    }
    backend_ = std::make_unique<VulkanBackend>(options);
  }

  Backend& backend() override { return *backend_; }

  uint64_t shutdown() override {
    backend_->shutdown();
    return backend_->validation_messages();
  }

 private:
  std::vector<uint8_t> pool_;  // before backend_: destroyed after it
  std::unique_ptr<VulkanBackend> backend_;
};

std::unique_ptr<planner::HostBackend> make_host_backend() { return std::make_unique<VulkanHost>(); }

}  // namespace
}  // namespace kiln::backends::vulkan

namespace kiln::planner {

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_vulkan_host_backend() {
  register_host_backend(
      {"vulkan", backends::vulkan::make_host_backend,
       "  KILN_VULKAN_VALIDATION=1      Vulkan: the Khronos validation layer (any message fails the run)\n"
       "  KILN_VULKAN_HOST_POOL_MB=N    Vulkan: driver host allocations from an N MiB pool (default 64)\n"
       "  KILN_VULKAN_KERNELS=tiles|registers   Vulkan: how Gemm, MatMul and Conv run\n"});
}

}  // namespace kiln::planner
