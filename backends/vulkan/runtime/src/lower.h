// From a delegate's kernel calls to launches, each one compute dispatch:
// for each kernel (the names and parameters of the CPU kernels),
// the checks its shader relies on and the launch(es) that run it: which
// pipeline, which tensors bound as storage buffers (read or written byte
// ranges of an arena), the push constants and the workgroup counts.
//
// This is the Vulkan backend's trust boundary (the shared operand checks,
// kiln/backends/common/operand_checks.h, and the device's own limits): a
// kernel passes its checks once, at delegate init, and its shader then
// indexes only inside the buffers it is given. Every message names the
// model node.

#ifndef KILN_BACKENDS_VULKAN_RUNTIME_SRC_LOWER_H_
#define KILN_BACKENDS_VULKAN_RUNTIME_SRC_LOWER_H_

#include <stdint.h>

#include "kiln/backends/common/kernel_view.h"
#include "state.h"

namespace kiln::backends::vulkan::internal {

// A byte range of an arena a launch binds.
struct Binding {
  uint32_t arena = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool write = false;
};

struct Launch {
  ShaderId shader = kShaderUnary;
  uint32_t variant = 0;
  uint32_t num_bindings = 0;
  Binding bindings[kMaxBindings];
  uint32_t push[kPushConstantBytes / 4] = {};
  uint32_t groups[3] = {1, 1, 1};
  // The launches of this kernel write disjoint parts of their output
  // (Concat), so they need no barrier between each other.
  bool disjoint_writes = false;
};

using LaunchSink = backends::LaunchSink<Launch>;

// Checks `kernel` and emits its launches to `sink`.
Error lower_kernel(const KernelView& kernel, const Limits& limits, LaunchSink& sink);

}  // namespace kiln::backends::vulkan::internal

#endif  // KILN_BACKENDS_VULKAN_RUNTIME_SRC_LOWER_H_
