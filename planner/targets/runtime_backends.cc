#include "targets/runtime_backends.h"

#include <exception>
#include <memory>
#include <set>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "emit/program_file.h"
#include "targets/target.h"

namespace kiln::planner {
namespace {

struct Made {
  std::vector<std::pair<std::string, std::unique_ptr<HostBackend>>> backends;
  BackendRegistry registry;
};

Made& made() {
  static Made m;
  return m;
}

// Makes and registers `info`'s backend unless it was made already.
void make_once(const HostBackendInfo& info) {
  Made& m = made();
  for (const auto& [name, backend] : m.backends) {
    if (name == info.name) return;
  }
  std::unique_ptr<HostBackend> backend;
  try {
    backend = info.make();
  } catch (const std::exception& e) {  // std::bad_alloc for a memory pool, say
    fail("the ", info.name, " backend could not be created: ", e.what());
  }
  if (backend == nullptr) fail("the ", info.name, " backend could not be created");
  if (m.registry.register_backend(&backend->backend()) != Error::kOk) {
    fail("internal error: registering the ", info.name, " backend failed (", BackendRegistry::kCapacity,
         " backends at most)");
  }
  m.backends.emplace_back(info.name, std::move(backend));
}

// The backend serving `device` (nothing for the CPU) into `names`.
void add_device(const fb::Device* device, std::set<std::string>& names) {
  if (device == nullptr || device->type() == fb::DeviceType::CPU) return;
  const BackendPlanner* planner = backend_planner_for(device->type());
  if (planner == nullptr) {
    fail("the program runs on ", device_str(*device),
         ", and no backend built in serves it (built in: ", builtin_runtime_backend_names(), ")");
  }
  names.insert(planner->name());
}

}  // namespace

std::vector<std::string> backends_named_by(const std::string& program_bytes) {
  const ProgramFile file(program_bytes, "program");
  std::set<std::string> names;
  for (const fb::Method* method : *file.program().methods()) {
    if (method->arenas() != nullptr) {
      for (const fb::Arena* arena : *method->arenas()) add_device(arena->device(), names);
    }
    if (method->tensors() != nullptr) {
      for (const fb::Tensor* tensor : *method->tensors()) add_device(tensor->device(), names);
    }
    if (method->delegates() != nullptr) {
      for (const fb::Delegate* delegate : *method->delegates()) names.insert(delegate->backend()->str());
    }
  }
  return {names.begin(), names.end()};
}

BackendRegistry& builtin_runtime_backends(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const HostBackendInfo* info = nullptr;
    for (const HostBackendInfo& candidate : host_backends()) {
      if (candidate.name == name) info = &candidate;
    }
    if (info == nullptr) {
      fail("the program needs the ", name,
           " backend, which is not built in (built in: ", builtin_runtime_backend_names(), ")");
    }
    make_once(*info);
  }
  return made().registry;
}

BackendRegistry& runtime_backends_for(const std::string& program_bytes) {
  return builtin_runtime_backends(backends_named_by(program_bytes));
}

BackendRegistry& builtin_runtime_backends() {
  for (const HostBackendInfo& info : host_backends()) make_once(info);
  return made().registry;
}

uint64_t shutdown_builtin_runtime_backends() {
  uint64_t messages = 0;
  for (auto& [name, backend] : made().backends) messages += backend->shutdown();
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
