#include "kiln/runtime/check.h"
#include "kiln/runtime/kernel.h"
#include "names.h"

namespace kiln {

Error KernelRegistry::register_kernel(const KernelEntry& entry) {
  KILN_CHECK_OR_RETURN(entry.name != nullptr && entry.run != nullptr, Error::kInvalidArgument,
                       "kernel '%s' cannot be registered without a name and a run function",
                       entry.name != nullptr ? entry.name : "?");
  for (size_t i = 0; i < count_; ++i) {
    if (internal::same_name(entries_[i].name, entry.name)) {
      entries_[i] = entry;
      return Error::kOk;
    }
  }
  KILN_CHECK_OR_RETURN(count_ < kCapacity, Error::kRegistryFull, "kernel registry full (%u entries) registering '%s'",
                       static_cast<unsigned>(kCapacity), entry.name);
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
    if (internal::same_name(entries_[i].name, name)) return &entries_[i];
  }
  return nullptr;
}

namespace {
// Constant-initialised: KernelRegistry has a constexpr constructor.
KernelRegistry g_registry;
}  // namespace

KernelRegistry& global_kernel_registry() { return g_registry; }

}  // namespace kiln
