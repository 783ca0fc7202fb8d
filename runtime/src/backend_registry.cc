#include <string.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/log.h"

namespace kiln {

Error BackendRegistry::register_backend(Backend* backend) {
  if (backend == nullptr || backend->id() == nullptr) return Error::kInvalidArgument;
  for (size_t i = 0; i < count_; ++i) {
    if (strcmp(backends_[i]->id(), backend->id()) == 0) {
      backends_[i] = backend;
      return Error::kOk;
    }
  }
  if (count_ == kCapacity) {
    KILN_LOG(ERROR, "backend registry full registering '%s'", backend->id());
    return Error::kRegistryFull;
  }
  backends_[count_++] = backend;
  return Error::kOk;
}

Backend* BackendRegistry::find(const char* id) const {
  if (id == nullptr) return nullptr;
  for (size_t i = 0; i < count_; ++i) {
    if (strcmp(backends_[i]->id(), id) == 0) return backends_[i];
  }
  return nullptr;
}

Backend* BackendRegistry::for_device(DeviceType type) const {
  for (size_t i = 0; i < count_; ++i) {
    if (backends_[i]->device_type() == type) return backends_[i];
  }
  return nullptr;
}

namespace {
BackendRegistry g_backends;
}  // namespace

BackendRegistry& global_backend_registry() { return g_backends; }

}  // namespace kiln
