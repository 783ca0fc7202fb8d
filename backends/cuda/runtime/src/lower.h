// From a delegate's kernel calls to launches (launch.h): for each kernel
// (the names and parameters of the portable CPU kernels), the checks its
// CUDA kernel relies on and the launch(es) that run it, with every device
// address resolved. The CUDA backend's trust boundary: a kernel passes its
// checks once, at delegate init, and its launches then index only inside
// the tensors they were given. Every message names the model node.
// No CUDA calls here, so the GPU build and the host execution model share
// it unchanged.

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_LOWER_H_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_LOWER_H_

#include "kiln/runtime/backend.h"
#include "launch.h"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {

// Receives each kernel's launches in order.
class LaunchSink {
 public:
  virtual Error emit(const Launch& launch) = 0;

 protected:
  ~LaunchSink() = default;
};

// One kernel call, its operands the method's tensors (already checked to
// be in arenas of the delegate's device).
struct KernelView {
  const char* node = "";
  const char* op = "";
  const fb::KernelCall* call = nullptr;
  const MethodView* method = nullptr;

  uint32_t num_inputs() const { return call->inputs() != nullptr ? call->inputs()->size() : 0; }
  uint32_t num_outputs() const { return call->outputs() != nullptr ? call->outputs()->size() : 0; }
  const Tensor* input(uint32_t i) const {
    const int32_t t = call->inputs()->Get(i);
    return t < 0 ? nullptr : &method->tensor(static_cast<uint32_t>(t));
  }
  const Tensor& output(uint32_t i) const { return method->tensor(static_cast<uint32_t>(call->outputs()->Get(i))); }
  template <typename P>
  const P* params() const {
    return call->params_as<P>();
  }
  // The device address of `t` (in an arena of the delegate's device).
  float* address(const Tensor& t) const {
    return reinterpret_cast<float*>(static_cast<uint8_t*>(method->arena(static_cast<uint32_t>(t.arena())).handle) +
                                    t.offset());
  }
};

// Checks `kernel` and emits its launches to `sink`.
Error lower_kernel(const KernelView& kernel, LaunchSink& sink);

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_LOWER_H_
