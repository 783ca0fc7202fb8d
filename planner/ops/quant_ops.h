// Lowering of int8 linear products onto ConvInt8 and GemmInt8
// (kernels/cpu/src/qlinear.cc; the arithmetic in
// kernels/cpu/include/kiln/kernels/qgemm.h): the ONNX ops QLinearConv,
// QLinearMatMul, ConvInteger and MatMulInteger lower through it, and so do
// the int8 kernels the QDQ pass folds (passes/qdq).
//
// What the planner precomputes, once, from constant weights and
// quantization parameters: weights converted to int8 (uint8 ones less 128,
// zero points with them) and packed [sets][M][kp]; the int32 bias with the
// zero-point terms folded in; the fixed-point multiplier and shift per
// output channel. The activations' zero point is stated in the uint8 domain
// the kernels multiply in (an int8 zero point plus 128).

#ifndef KILN_PLANNER_OPS_QUANT_OPS_H_
#define KILN_PLANNER_OPS_QUANT_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace kiln::planner {

// One int8 product's constants, as the model gives them.
struct Int8Linear {
  int64_t sets = 1;  // weight matrices (batched QLinearMatMul), each m x k
  int64_t m = 0, k = 0;
  // sets * m * k weights, channel c's k values contiguous, in their own
  // domain (uint8 or int8 values).
  std::vector<int32_t> w;
  bool w_unsigned = false;
  std::vector<int32_t> w_zp;  // m values (own domain)
  bool x_signed = false;
  int32_t x_zp = 0;           // own domain
  std::vector<int64_t> bias;  // sets * m, or empty
  // Output requantization: m real multipliers x_scale * w_scale / y_scale;
  // empty for an int32 output.
  std::vector<double> real_multiplier;
  int32_t y_zp = 0, y_min = 0, y_max = 0;
};

// The kernel operands Int8Linear turns into (constants added to the
// method): inputs 1.. of ConvInt8/GemmInt8, and the activations' zero point
// in the uint8 domain.
struct Int8Operands {
  std::vector<int> inputs;  // weights, bias, [multiplier, shift], [w zero points]
  bool has_w_zp = false;
  int64_t x_zp_u8 = 0;
  // Every int8 weight in [-64, 64] (kernels::qgemm_weights_narrow), as
  // reduce_range quantizers write them: the kernels' weight range 1.
  bool w_narrow = false;
};

Int8Operands int8_operands(OpContext& ctx, LoweringContext& l, const Int8Linear& q);

// Scratch of one int8 kernel call: packed activations (k x columns; with
// the lowering options' packing off, a block of at most 2 KiB of them, the
// kernel working through the columns a block at a time) of at least
// min_bytes, and, with weight zero points, the column sums. `vector_only`:
// a GemmInt8 of one row per weight matrix, which the kernel runs as a
// matrix-vector product needing only that row (k bytes, rounded up as the
// packed weights are), not a 16-column panel.
std::vector<int> int8_scratch(OpContext& ctx, LoweringContext& l, const Int8Operands& ops, int64_t k, int64_t columns,
                              int64_t min_bytes = 0, bool vector_only = false);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_OPS_QUANT_OPS_H_
