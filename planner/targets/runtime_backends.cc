#include "targets/runtime_backends.h"

#include <memory>
#include <vector>

#include "core/error.h"
#include "targets/target.h"

namespace kiln::planner {
namespace {

struct Made {
  std::vector<std::unique_ptr<HostBackend>> backends;
  BackendRegistry registry;
};

Made& made() {
  static Made m;
  return m;
}

}  // namespace

BackendRegistry& builtin_runtime_backends() {
  Made& m = made();
  if (m.backends.empty()) {
    for (const HostBackendInfo& info : host_backends()) {
      std::unique_ptr<HostBackend> backend = info.make();
      if (backend == nullptr) fail("the ", info.name, " backend could not be created");
      if (m.registry.register_backend(&backend->backend()) != Error::kOk) {
        fail("internal error: registering the ", info.name, " backend failed (", BackendRegistry::kCapacity,
             " backends at most)");
      }
      m.backends.push_back(std::move(backend));
    }
  }
  return m.registry;
}

uint64_t shutdown_builtin_runtime_backends() {
  uint64_t messages = 0;
  for (auto& backend : made().backends) messages += backend->shutdown();
  return messages;
}

std::string builtin_runtime_backend_names() {
  std::string names;
  for (const HostBackendInfo& info : host_backends()) names += (names.empty() ? "" : ", ") + info.name;
  return names;
}

std::string builtin_runtime_backend_options() {
  std::string lines;
  for (const HostBackendInfo& info : host_backends()) lines += info.options_help;
  return lines;
}

}  // namespace kiln::planner
