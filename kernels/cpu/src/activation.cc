#include "activation.h"

#include "arm/neon.h"
#include "isa_switch.h"
#include "kernel_util.h"
#include "vmath.h"
#include "x86/x86.h"

namespace kiln {
namespace kernels {

Error check_activation(const KernelArgs& args, const fb::FusedActivation* activation) {
  if (activation == nullptr) return Error::kOk;
  KILN_KERNEL_CHECK(args, activation->kind() <= fb::Activation::MAX, "unknown fused activation %u",
                    static_cast<unsigned>(activation->kind()));
  return Error::kOk;
}

void apply_activation(float* data, int64_t n, const fb::FusedActivation* activation) {
  if (activation == nullptr) return;
  const float alpha = activation->alpha();
  const float beta = activation->beta();
  switch (activation->kind()) {
    case fb::Activation::NONE: return;
    case fb::Activation::RELU:
#if KILN_X86
      if (x86::has_avx2_fma()) {
        x86::clamp_avx2(data, n, 0.f, __builtin_inff(), true);
        return;
      }
#endif
#if KILN_NEON
      if (neon::enabled()) {
        neon::clamp(data, n, 0.f, __builtin_inff(), true);
        return;
      }
#endif
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] > 0.f ? data[i] : 0.f;
      return;
    case fb::Activation::CLIP:
#if KILN_X86
      if (x86::has_avx2_fma()) {
        x86::clamp_avx2(data, n, alpha, beta, false);
        return;
      }
#endif
#if KILN_NEON
      if (neon::enabled()) {
        neon::clamp(data, n, alpha, beta, false);
        return;
      }
#endif
      for (int64_t i = 0; i < n; ++i) {
        const float x = data[i];
        data[i] = x < alpha ? alpha : (x > beta ? beta : x);
      }
      return;
    case fb::Activation::SIGMOID:
      if (vector_math(MathOp::kSigmoid, data, data, n)) return;
      for (int64_t i = 0; i < n; ++i) data[i] = sigmoid(data[i]);
      return;
    case fb::Activation::TANH:
      if (vector_math(MathOp::kTanh, data, data, n)) return;
      for (int64_t i = 0; i < n; ++i) data[i] = tanhf(data[i]);
      return;
    case fb::Activation::LEAKY_RELU:
      if (vector_math(MathOp::kLeakyRelu, data, data, n, alpha)) return;
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] >= 0.f ? data[i] : alpha * data[i];
      return;
    case fb::Activation::HARD_SIGMOID:
      if (vector_math(MathOp::kHardSigmoid, data, data, n, alpha, beta)) return;
      for (int64_t i = 0; i < n; ++i) data[i] = hard_sigmoid(data[i], alpha, beta);
      return;
    case fb::Activation::HARD_SWISH:
      if (vector_math(MathOp::kHardSwish, data, data, n, alpha, beta)) return;
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] * hard_sigmoid(data[i], alpha, beta);
      return;
    case fb::Activation::SILU:
      if (vector_math(MathOp::kSilu, data, data, n)) return;
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] * sigmoid(data[i]);
      return;
    case fb::Activation::GELU:
      if (vector_math(MathOp::kGelu, data, data, n)) return;
#if defined(KILN_BARE_METAL)
      for (int64_t i = 0; i < n; ++i) data[i] = 0.5f * data[i] * (1.f + erf_portable(data[i] * 0.7071067811865476f));
#else
      for (int64_t i = 0; i < n; ++i) data[i] = 0.5f * data[i] * (1.f + erff(data[i] * 0.7071067811865476f));
#endif
      return;
  }
}

}  // namespace kernels
}  // namespace kiln
