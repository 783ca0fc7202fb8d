// The operand view of one kernel call, as a backend's checks and lowering
// see it: the call's node and op (for messages), its parameters, and its
// operands as the method's tensors. A delegate's kernel calls name their
// operands by tensor index, resolved here through the method (after
// check_operand_indices, delegate_graph.h); a call the runtime resolved
// already (KernelArgs, what the CPU kernels get) is seen through its
// arrays.
//
//   KILN_VIEW_CHECK(k, same_shape(x, y), "input and output shapes differ");
//
// fails a check of the call: one ERROR line naming the backend, node and op
// ("vulkan: node 'conv1' (Conv): ..."), then kInvalidProgram returned.
//
// A backend's lowering turns each checked call into its device's work items,
// called launches (a CUDA kernel launch, a Vulkan compute dispatch), handed
// one by one to a LaunchSink.
//
// A view is valid while the call, the method (or the args) it points to
// are. Nothing here allocates.

#ifndef KILN_BACKENDS_COMMON_KERNEL_VIEW_H_
#define KILN_BACKENDS_COMMON_KERNEL_VIEW_H_

#include <stdint.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/check.h"
#include "kiln/runtime/kernel.h"

// In a check of kernel call `view`: when `cond` is false, logs the message
// (printf-style) after the backend, node and op, and returns kInvalidProgram.
#define KILN_VIEW_CHECK(view, cond, fmt, ...)                                                                         \
  KILN_CHECK_OR_RETURN(cond, ::kiln::Error::kInvalidProgram, "%s: node '%s' (%s): " fmt, (view).backend, (view).node, \
                       (view).op, ##__VA_ARGS__)

namespace kiln::backends {

struct KernelView {
  const char* backend = "";  // "cuda": the prefix of every message
  const char* node = "";
  const char* op = "";
  const fb::KernelCall* call = nullptr;
  // Where the operands resolve: a delegate's method (operand i of the call
  // is a tensor index, -1 for an absent optional input), or, when set, the
  // runtime's resolved arrays.
  const MethodView* method = nullptr;
  const KernelArgs* args = nullptr;

  uint32_t num_inputs() const { return args != nullptr ? args->num_inputs : size_of(call->inputs()); }
  uint32_t num_outputs() const { return args != nullptr ? args->num_outputs : size_of(call->outputs()); }
  uint32_t num_scratch() const { return args != nullptr ? args->num_scratch : size_of(call->scratch()); }
  // nullptr for an absent optional input.
  const Tensor* input(uint32_t i) const {
    if (args != nullptr) return args->inputs[i];
    const int32_t t = call->inputs()->Get(i);
    return t < 0 ? nullptr : &method->tensor(static_cast<uint32_t>(t));
  }
  const Tensor& output(uint32_t i) const {
    if (args != nullptr) return *args->outputs[i];
    return method->tensor(static_cast<uint32_t>(call->outputs()->Get(i)));
  }
  const Tensor& scratch(uint32_t i) const {
    if (args != nullptr) return *args->scratch[i];
    return method->tensor(static_cast<uint32_t>(call->scratch()->Get(i)));
  }
  // The parameters as P, or nullptr when the call carries others.
  template <typename P>
  const P* params() const {
    return call->params_as<P>();
  }

  static uint32_t size_of(const flatbuffers::Vector<int32_t>* v) { return v != nullptr ? v->size() : 0; }
};

// Receives the launches a backend's lowering makes of each kernel call, in
// order.
template <typename Launch>
class LaunchSink {
 public:
  virtual Error emit(const Launch& launch) = 0;

 protected:
  ~LaunchSink() = default;
};

}  // namespace kiln::backends

#endif  // KILN_BACKENDS_COMMON_KERNEL_VIEW_H_
