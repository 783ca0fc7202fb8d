#include "kiln/runtime/backend.h"
#include "kiln/runtime/check.h"
#include "names.h"

namespace kiln {

Error BackendRegistry::register_backend(Backend* backend) {
  KILN_CHECK_OR_RETURN(backend != nullptr && backend->id() != nullptr, Error::kInvalidArgument,
                       "a backend without an id cannot be registered");
  for (size_t i = 0; i < count_; ++i) {
    if (internal::same_name(backends_[i]->id(), backend->id())) {
      backends_[i] = backend;
      return Error::kOk;
    }
  }
  KILN_CHECK_OR_RETURN(count_ < kCapacity, Error::kRegistryFull, "backend registry full (%u entries) registering '%s'",
                       static_cast<unsigned>(kCapacity), backend->id());
  backends_[count_++] = backend;
  return Error::kOk;
}

Backend* BackendRegistry::find(const char* id) const {
  if (id == nullptr) return nullptr;
  for (size_t i = 0; i < count_; ++i) {
    if (internal::same_name(backends_[i]->id(), id)) return backends_[i];
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
