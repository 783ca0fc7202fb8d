#include <string.h>

#include "kiln/runtime/kernel.h"
#include "kiln/runtime/log.h"

namespace kiln {

Error KernelRegistry::register_kernel(const KernelEntry& entry) {
  if (entry.name == nullptr || entry.run == nullptr) return Error::kInvalidArgument;
  for (size_t i = 0; i < count_; ++i) {
    if (strcmp(entries_[i].name, entry.name) == 0) {
      entries_[i] = entry;
      return Error::kOk;
    }
  }
  if (count_ == kCapacity) {
    KILN_LOG(ERROR, "kernel registry full (%u entries) registering '%s'",
             static_cast<unsigned>(kCapacity), entry.name);
    return Error::kRegistryFull;
  }
  entries_[count_++] = entry;
  return Error::kOk;
}

Error KernelRegistry::register_kernels(const KernelEntry* entries, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    KILN_RETURN_IF_ERROR(register_kernel(entries[i]));
  }
  return Error::kOk;
}

const KernelEntry* KernelRegistry::find(const char* name) const {
  if (name == nullptr) return nullptr;
  for (size_t i = 0; i < count_; ++i) {
    if (strcmp(entries_[i].name, name) == 0) return &entries_[i];
  }
  return nullptr;
}

namespace {
// Constant-initialised: KernelRegistry has a constexpr constructor.
KernelRegistry g_registry;
}  // namespace

KernelRegistry& global_kernel_registry() { return g_registry; }

}  // namespace kiln
