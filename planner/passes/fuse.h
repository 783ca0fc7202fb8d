// Graph rewrites that merge nodes before lowering, so fewer kernels run and
// fewer intermediates are planned.
//
//   - fold_batch_norms: a BatchNormalization (inference) that is the only
//     reader of a Conv's output, with constant conv weights and bias and
//     constant statistics, becomes part of the Conv. Per output channel m:
//         s[m]  = scale[m] / sqrt(var[m] + epsilon)
//         W'[m] = W[m] * s[m]
//         b'[m] = (b[m] - mean[m]) * s[m] + B[m]      (b = 0 without bias)
//   - fuse_matmul_biases: an Add of a constant bias (one value per output
//     column, broadcast over the rows) that is the only reader of a MatMul
//     by a constant 2-D B becomes the MatMul's third input; the kernel adds
//     it while each tile is in registers (CPU only).
//   - fuse_activations: an activation (Relu, Clip with constant bounds,
//     Sigmoid, Tanh, LeakyRelu, HardSigmoid, HardSwish) that is the only
//     reader of a float32 output of a node whose kernel applies fused
//     activations (Conv, ConvTranspose, Gemm, MatMul, Add, Sub, Mul, Div)
//     moves into that node (Node::activation; the lowering puts it in the
//     kernel's parameters). Never when the producer's output is a graph
//     output, when the producer already carries an activation, or when
//     either node runs on a device other than the CPU.
//   - fuse_gated_activations: x times a sigmoid-like gate of itself, in the
//     forms exporters write (Mul(x, Sigmoid(x)); Mul(x, HardSigmoid(x));
//     Mul(x, Clip(x + 3, 0, 6) / 6) and Mul(x, Clip(x + 3, 0, 6)) / 6,
//     any shift k and bound h with the division by h), becomes SiLU or
//     HardSwish(1 / h, k / h), and GELU as PyTorch writes it
//     (Mul(Mul(x, 1 + Erf(x / sqrt 2)), 0.5), or the 0.5 applied to x first)
//     becomes GELU; each fused into the producer of x under the same
//     conditions as fuse_activations, when nothing else reads x. Where the
//     producer cannot take it, the pattern becomes one element-wise node
//     (kiln's Silu, ONNX HardSwish, com.microsoft Gelu) reading x once: one pass over memory
//     instead of two or four. HardSwish with other constants stays as it is
//     when no producer takes it.
//
//   - fuse_input_affines: a BatchNormalization (inference, constant
//     statistics), optionally followed by a Relu, whose result only a 1x1
//     Conv (stride 1, no padding, one group) reads, moves into that Conv
//     as a per-input-channel affine map (Node::input_affine):
//         s[c] = scale[c] / sqrt(var[c] + epsilon),  t[c] = B[c] - mean[c] s[c]
//     applied, with the Relu, as the product packs its input: the
//     pre-activation blocks of DenseNet and ResNet v2 (BN -> Relu -> Conv
//     over a concatenation other layers also read) stop writing a
//     normalised copy of their input and reading it back. Only where the
//     Conv runs the packed product (LowerOptions::packing_scratch) and all
//     nodes are on the CPU.
//
// The fused node takes over the output value of the node it absorbed, so
// names, graph outputs and every later reader stay as they were.

#ifndef KILN_PLANNER_PASSES_FUSE_H_
#define KILN_PLANNER_PASSES_FUSE_H_

#include <map>
#include <string>

#include "ir/device_plan.h"
#include "ir/graph.h"

namespace kiln::planner {

struct FuseStats {
  int batch_norms_folded = 0;
  int biases_fused = 0;
  // Activations fused into their producer, gated ones included, and the
  // same by kind (the ONNX op name, "Silu" for x * sigmoid(x)).
  int activations_fused = 0;
  std::map<std::string, int> activations_by_kind;
  // Gated patterns and GELU (fuse_gated_activations) fused into their producer, and
  // those that became one element-wise node instead.
  int gated_into_producer = 0;
  int gated_standalone = 0;
  // BatchNormalization (and Relu) pairs fused ahead of a 1x1 Conv.
  int input_affines_fused = 0;
  // Bias and residual Adds fused into a device all-reduce's write
  // (passes/all_reduce.h, fuse_all_reduce_addends).
  int all_reduce_addends = 0;

  int total() const {
    return batch_norms_folded + biases_fused + activations_fused + gated_standalone + input_affines_fused +
           all_reduce_addends;
  }
};

// Run after folding, before partitioning. Returns how many were folded.
int fold_batch_norms(Graph& graph);

// Run after partitioning, before fuse_activations: only pairs that
// `devices` puts on the CPU fuse. Dead nodes leave `devices.order` (see
// fuse_activations).
int fuse_matmul_biases(Graph& graph, DevicePlan& devices);

// Run after partitioning: only pairs that `devices` puts on the CPU fuse.
// Dead nodes leave `devices.order`; the graph is compacted only when
// `devices` names no node (node indices stay valid otherwise). Adds to
// `stats` what it fused; returns how many patterns it rewrote.
int fuse_activations(Graph& graph, DevicePlan& devices, FuseStats* stats);

// Run after partitioning, before fuse_activations (which would otherwise
// leave the producer no room); only patterns whose every node `devices`
// puts on the CPU fuse. Same bookkeeping as fuse_activations.
int fuse_gated_activations(Graph& graph, DevicePlan& devices, FuseStats* stats);

// Run after partitioning, before fuse_activations (the Relu it takes would
// otherwise be fused elsewhere); only nodes `devices` puts on the CPU
// fuse. Same bookkeeping as fuse_activations.
int fuse_input_affines(Graph& graph, DevicePlan& devices, FuseStats* stats);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_FUSE_H_
