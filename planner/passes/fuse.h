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
//
// The fused node takes over the output value of the node it absorbed, so
// names, graph outputs and every later reader stay as they were.

#ifndef KILN_PLANNER_PASSES_FUSE_H_
#define KILN_PLANNER_PASSES_FUSE_H_

#include "ir/device_plan.h"
#include "ir/graph.h"

namespace kiln::planner {

struct FuseStats {
  int batch_norms_folded = 0;
  int biases_fused = 0;
  int activations_fused = 0;
};

// Run after folding, before partitioning. Returns how many were folded.
int fold_batch_norms(Graph& graph);

// Run after partitioning, before fuse_activations: only pairs that
// `devices` puts on the CPU fuse. Dead nodes leave `devices.order` (see
// fuse_activations).
int fuse_matmul_biases(Graph& graph, DevicePlan& devices);

// Run after partitioning: only pairs that `devices` puts on the CPU fuse.
// Dead nodes leave `devices.order`; the graph is compacted only when
// `devices` names no node (node indices stay valid otherwise).
int fuse_activations(Graph& graph, DevicePlan& devices);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_FUSE_H_
