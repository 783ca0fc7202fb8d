#include "targets/runtime_backends.h"

#include <cstdlib>
#include <memory>
#include <vector>

#include "core/error.h"

#if KILN_WITH_VULKAN
#include "kiln/backends/vulkan/vulkan_backend.h"
#endif

namespace kiln::planner {
namespace {

#if KILN_WITH_VULKAN
struct VulkanInstance {
  std::vector<uint8_t> pool;
  std::unique_ptr<vulkan::VulkanBackend> backend;
};

VulkanInstance& vulkan_instance() {
  static VulkanInstance instance = [] {
    VulkanInstance v;
    vulkan::VulkanOptions options;
    const char* validation = std::getenv("KILN_VULKAN_VALIDATION");
    options.validation = validation != nullptr && std::string(validation) == "1";
    const char* kernels = std::getenv("KILN_VULKAN_KERNELS");
    if (kernels != nullptr && std::string(kernels) == "tiles") {
      options.kernels = vulkan::VulkanOptions::Kernels::kSharedMemoryTiles;
    } else if (kernels != nullptr && std::string(kernels) == "registers") {
      options.kernels = vulkan::VulkanOptions::Kernels::kRegisterBlocks;
    }
    const char* pool_mb = std::getenv("KILN_VULKAN_HOST_POOL_MB");
    const long mb = pool_mb != nullptr ? std::strtol(pool_mb, nullptr, 10) : 64;
    if (mb > 0) {
      v.pool.resize(static_cast<size_t>(mb) << 20);
      options.host_memory = Span<uint8_t>(v.pool.data(), v.pool.size());
    }
    v.backend = std::make_unique<vulkan::VulkanBackend>(options);
    return v;
  }();
  return instance;
}
#endif

}  // namespace

BackendRegistry& builtin_runtime_backends() {
  static BackendRegistry* registry = [] {
    auto* r = new BackendRegistry();
#if KILN_WITH_VULKAN
    if (vulkan::register_vulkan_backend(*r, vulkan_instance().backend.get()) != Error::kOk) {
      fail("internal error: registering the Vulkan backend failed");
    }
#endif
    return r;
  }();
  return *registry;
}

uint64_t shutdown_builtin_runtime_backends() {
  uint64_t messages = 0;
#if KILN_WITH_VULKAN
  vulkan::VulkanBackend& backend = *vulkan_instance().backend;
  backend.shutdown();
  messages += backend.validation_messages();
#endif
  return messages;
}

std::string builtin_runtime_backend_names() {
#if KILN_WITH_VULKAN
  return "vulkan";
#else
  return "";
#endif
}

}  // namespace kiln::planner
