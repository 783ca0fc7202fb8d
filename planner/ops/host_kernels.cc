#include "ops/host_kernels.h"

#include "core/error.h"
#include "kiln/kernels/cpu.h"

namespace kiln::planner {

const KernelRegistry& host_kernel_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    if (register_cpu_kernels(*r) != Error::kOk) fail("internal error: kernel registration failed");
    return r;
  }();
  return *registry;
}

}  // namespace kiln::planner
