// From a delegate's kernel calls to launches, each one compute dispatch:
// for each kernel (the names and parameters of the portable CPU kernels),
// the checks its shader relies on and the launch(es) that run it: which
// pipeline, which tensors bound as storage buffers (read or written byte
// ranges of an arena), the push constants and the workgroup counts.
//
// This is the Vulkan backend's trust boundary: a kernel passes its checks
// once, at delegate init, and its shader then indexes only inside the
// buffers it is given. Every message names the model node.

#ifndef KILN_BACKENDS_VULKAN_RUNTIME_SRC_LOWER_H_
#define KILN_BACKENDS_VULKAN_RUNTIME_SRC_LOWER_H_

#include <stdint.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/tensor.h"
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

// Receives the launches of each kernel in order.
class LaunchSink {
 public:
  virtual Error emit(const Launch& launch) = 0;

 protected:
  ~LaunchSink() = default;
};

// One kernel call of a delegate, its operands resolved to the method's
// tensors (already checked to be float32 tensors in arenas of the
// delegate's device).
struct KernelView {
  const char* node = "";
  const char* op = "";
  const fb::KernelCall* call = nullptr;
  const MethodView* method = nullptr;

  uint32_t num_inputs() const { return call->inputs() != nullptr ? call->inputs()->size() : 0; }
  uint32_t num_outputs() const { return call->outputs() != nullptr ? call->outputs()->size() : 0; }
  // nullptr for an absent optional input.
  const Tensor* input(uint32_t i) const {
    const int32_t t = call->inputs()->Get(i);
    return t < 0 ? nullptr : &method->tensor(static_cast<uint32_t>(t));
  }
  const Tensor& output(uint32_t i) const { return method->tensor(static_cast<uint32_t>(call->outputs()->Get(i))); }
  template <typename P>
  const P* params() const {
    return call->params_as<P>();
  }
};

// True when the backend runs kernels named `op`.
bool kernel_supported(const char* op);
// True when `op` may write its output 0 over input `input` (same bytes).
bool kernel_allows_inplace(const char* op, uint32_t input);

// Checks `kernel` and emits its launches to `sink`.
Error lower_kernel(const KernelView& kernel, const Limits& limits, LaunchSink& sink);

}  // namespace kiln::backends::vulkan::internal

#endif  // KILN_BACKENDS_VULKAN_RUNTIME_SRC_LOWER_H_
