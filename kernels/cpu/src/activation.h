// Activation functions shared by element-wise kernels and by the kernels an
// activation is fused into (Conv, Gemm, MatMul, binary ops). Internal.

#ifndef KILN_KERNELS_CPU_SRC_ACTIVATION_H_
#define KILN_KERNELS_CPU_SRC_ACTIVATION_H_

#include <math.h>
#include <stdint.h>

#include "kiln/runtime/kernel.h"

namespace kiln {
namespace kernels {

inline float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

inline float hard_sigmoid(float x, float alpha, float beta) {
  const float v = alpha * x + beta;
  return v < 0.f ? 0.f : (v > 1.f ? 1.f : v);
}

// kInvalidProgram for an activation kind outside the enum.
Error check_activation(const KernelArgs& args, const fb::FusedActivation* activation);

// Applies `activation` (may be null: nothing to do) to n floats in place.
void apply_activation(float* data, int64_t n, const fb::FusedActivation* activation);

// The activations the product kernels (gemm.cc, conv_lanes.cc) apply as a
// clamp while a tile is in registers; the others run over each finished
// tile (`post`).
struct Clamp {
  bool on = false;
  float lo = 0.f, hi = 0.f;
  bool post = false;  // apply_activation after the tile
};

inline Clamp clamp_of(const fb::FusedActivation* activation) {
  Clamp c;
  if (activation == nullptr) return c;
  switch (activation->kind()) {
    case fb::Activation::NONE: break;
    case fb::Activation::RELU:
      c.on = true;
      c.lo = 0.f;
      c.hi = __builtin_inff();
      break;
    case fb::Activation::CLIP:
      c.on = true;
      c.lo = activation->alpha();
      c.hi = activation->beta();
      break;
    default: c.post = true; break;
  }
  return c;
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_ACTIVATION_H_
