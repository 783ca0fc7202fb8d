// Tensor parallelism (kiln plan --tensor-parallel N): splits the linear
// layers of a graph across N ranks the way Megatron-LM does, so each rank
// holds 1/N of their weights and computes 1/N of their work, and inserts an
// AllReduce (com.microsoft) where the partial results meet.
//
//   X ──MatMul(W1[:, cols r])──> H_r ──(element-wise, heads)──> MatMul(W2[rows r, :]) ──> AllReduce ──> Y
//        column-parallel               stays split                row-parallel          sum of ranks
//
// Steps, repeated until nothing changes:
//   1. every MatMul/Gemm with a constant 2-D weight, a replicated input and
//      an output width divisible by N is a candidate start (column split);
//   2. the split is followed forward in topological order through ops that
//      keep it (element-wise ops and their constant operands, which are
//      split alongside; Reshape and Transpose, which move the split axis,
//      e.g. from the hidden width to the heads of attention; Softmax over
//      another axis; MatMul of two tensors split on the same batch axis,
//      which is attention's Q.K^T and P.V);
//   3. a MatMul/Gemm with a constant weight whose input is split on its
//      contraction axis closes the region (row split, then AllReduce, then
//      its bias);
//   4. a split value reaching anything else (a graph output, LayerNorm over
//      the split axis, a residual Add with an unsplit activation, a head
//      count N does not divide) drops the starts it came from, and the
//      propagation runs again.
// What remains is sharded: rank r gets its columns, rows, bias slices and
// head counts; everything else (LayerNorm, residuals, embeddings) is
// replicated. Each rank's graph has the same nodes and shapes, so one plan
// serves all ranks and only the sharded constants differ (LProgram's
// rank_constants).

#ifndef KILN_PLANNER_PASSES_TENSOR_PARALLEL_H_
#define KILN_PLANNER_PASSES_TENSOR_PARALLEL_H_

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace kiln::planner {

struct TensorParallelStats {
  int column_splits = 0;               // MatMul/Gemm split by output columns
  int row_splits = 0;                  // MatMul/Gemm split by input rows, each followed by an AllReduce
  int reshapes = 0;                    // Reshapes whose head count was divided
  uint64_t weight_bytes_total = 0;     // constant bytes of the unsplit graph
  uint64_t weight_bytes_per_rank = 0;  // constant bytes one rank holds
};

// One graph per rank (Graph::ranks = ranks), with the same structure.
// `graph` must have static shapes (after infer_and_fold). Throws PlanError
// when ranks < 2 or nothing could be split.
std::vector<Graph> shard_tensor_parallel(const Graph& graph, uint32_t ranks, TensorParallelStats* out_stats);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_TENSOR_PARALLEL_H_
