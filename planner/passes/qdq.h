// QDQ folding: models quantized the way ONNX Runtime recommends carry
// float ops between DequantizeLinear (DQ) and QuantizeLinear (Q) nodes.
// This pass runs after constant folding, which leaves DequantizeLinear
// nodes in place (the op is not foldable: DQ(constant weights) would become
// float weights). It rewrites the patterns kiln has int8 kernels for into
// the ONNX quantized ops, which lower onto ConvInt8 / GemmInt8
// (ops/quant_ops.h):
//
//   DQ(x), DQ(w const), [DQ(bias int32 const) or a float bias]
//     -> Conv -> [Relu | Clip(const, const)] -> Q         => QLinearConv
//   DQ(a), DQ(b const 2-D), [bias] -> Gemm (transA 0, alpha = beta = 1)
//     -> [Relu | Clip] -> Q                               => QLinearMatMul
//   DQ(a), DQ(b const 2-D) -> MatMul -> [Relu | Clip] -> Q => QLinearMatMul
//   DQ(a), DQ(b) -> MatMul -> [Relu | Clip] -> Q, both activations (per
//     tensor, 8-bit, one rank, the same leading dims, k <= 4096)
//                                                        => QLinearMatMul
//   (lowered onto MatMulInt8, which packs B at run time)
//
//   DQ(x) -> Reshape | Flatten | Squeeze | Unsqueeze | Transpose -> Q,
//   DQ(a), DQ(b), ... -> Concat -> Q (one quantization throughout)
//                                                          => the op on int8
//   DQ(x) -> Relu | Clip -> Q (the same quantization)       => Clip on int8
//   DQ(x) -> AveragePool | GlobalAveragePool -> Q (x's dtype)
//                           => QLinearAveragePool | QLinearGlobalAveragePool
//   DQ(a), DQ(b) -> Add | Mul -> [Relu | Clip] -> Q => QLinearAdd | QLinearMul
//   DQ(x) -> Softmax (the last axis) -> Q            => QLinearSoftmax
//   (ONNX Runtime's com.microsoft contrib ops; the average, sum and product
//   requantized with one rounding, the average's half to even, the others'
//   half up: ops/quant_ops.cc)
//   DQ(x), DQ(x), ... -> element-wise float ops (with scalar constants)
//     -> Q                                                => Lookup(x, table)
//   (domain kiln: the chain evaluated at plan time on all 256 bytes of x,
//   through the kernels, and quantized as Q does; a DQ of an earlier
//   Lookup's output counts as x through its table, so SiLU's Sigmoid -> Q
//   -> DQ -> Mul(x, .) -> Q becomes one table. Only with a
//   ConstantEvaluator; tried first, producers first.)
//
// The activation becomes output clamping: Q is monotonic and Q(0) is the
// zero point, so Q(Relu(v)) = max(Q(v), y_zp) and Q(Clip(v, a, b)) =
// clamp(Q(v), Q(a), Q(b)) exactly. The rewritten node carries the bounds
// as attributes kiln_y_min / kiln_y_max (kiln's own; ONNX has none), and a
// Gemm's bias as a ninth input of QLinearMatMul (int32, one per column;
// also kiln's own). The bias is used as given when its DQ scale is x_scale
// * w_scale (what exporters write) with zero point 0; otherwise it is
// requantized to that scale (round half to even).
//
// Conditions: weights, scales and zero points constant; per-channel weight
// scales along the output channel (Conv axis 0, B's columns); activations
// per tensor; the float op's output read only by the activation or the Q
// (and no graph output). Anything else stays as it was and runs in float
// between its explicit Q and DQ nodes; a DQ of constants left unused by
// the patterns becomes a float constant here, as folding would have made it.

#ifndef KILN_PLANNER_PASSES_QDQ_H_
#define KILN_PLANNER_PASSES_QDQ_H_

#include <cstdint>
#include <map>
#include <string>

#include "ir/graph.h"
#include "passes/evaluator.h"

namespace kiln::planner {

struct QdqStats {
  // Patterns folded, by the float op they replaced (Conv, Gemm, MatMul,
  // and the ops that now run on quantized data).
  std::map<std::string, int> folded;
  int total() const {
    int n = 0;
    for (const auto& [op, count] : folded) n += count;
    return n;
  }
};

QdqStats fold_qdq(Graph& graph, const ConstantEvaluator* evaluator = nullptr);

// Quantized method inputs and outputs (kiln plan --quantized-io), as
// TensorFlow Lite Micro's int8 models take them: the application passes
// the data its sensor front-end already quantized, and the model's first
// QuantizeLinear and last DequantizeLinear disappear.
//   - A float32 graph input read only by one QuantizeLinear with a
//     constant per-tensor scale and zero point (and not itself a graph
//     output) takes that Q's dtype (uint8 or int8), scale and zero point;
//     the Q's readers read the input instead, and the Q is removed.
//   - A graph output written by a DequantizeLinear (per tensor, constant
//     scale and zero point) of an int8/uint8 value that some node produces
//     (not a graph input, not another graph output), and read by no node,
//     takes the DQ's input's dtype, scale and zero point: the producer
//     writes the output (under the output's name) and the DQ is removed.
// Anything else stays float. Run after fold_qdq (which leaves exactly
// these Q and DQ nodes at the model's edges).
struct QuantizedIoStats {
  int inputs = 0, outputs = 0;              // made quantized
  int float_inputs = 0, float_outputs = 0;  // left float32
};

QuantizedIoStats quantize_io(Graph& graph);

// How much of a planned graph's linear work (Conv, ConvTranspose, Gemm,
// MatMul and the int8 linear ops) runs int8: ops and multiply-accumulates.
struct Int8Share {
  int int8_ops = 0, linear_ops = 0;
  int64_t int8_macs = 0, linear_macs = 0;
};

// Over the graph after inference (shapes known).
Int8Share int8_share(const Graph& graph);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_QDQ_H_
