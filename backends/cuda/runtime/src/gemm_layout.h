// The column-major layouts cuBLASLt reads a Gemm/MatMul's operands in.
// Row-major Y = op(A) op(B) runs as the column-major Y^T = op(B)^T op(A)^T:
// the first operand is B's storage, the second A's. Kept apart from
// cuBLASLt (plain arithmetic, built in both flavours) so the host
// execution model's tests check the layouts that only the GPU build uses.

#ifndef KILN_BACKENDS_CUDA_RUNTIME_SRC_GEMM_LAYOUT_H_
#define KILN_BACKENDS_CUDA_RUNTIME_SRC_GEMM_LAYOUT_H_

#include <stdint.h>

#include "launch.h"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {

// One operand as stored: `rows` x `cols`, column-major with leading
// dimension `ld` (>= rows, as cuBLASLt requires), read transposed or not.
struct GemmOperand {
  bool transposed = false;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

// op(X), op_rows x op_cols with element (i, j) at i * row + j * col. With
// col 1, op(X)^T is the storage itself, column-major op_cols x op_rows
// (ld = row); otherwise the storage is column-major op_rows x op_cols
// (ld = col), read transposed.
inline GemmOperand gemm_operand(int64_t row, int64_t col, uint64_t op_rows, uint64_t op_cols) {
  GemmOperand g;
  g.transposed = col != 1;
  g.rows = g.transposed ? op_rows : op_cols;
  g.cols = g.transposed ? op_cols : op_rows;
  g.ld = g.transposed ? col : row;
  // A stored matrix of one column never steps to a next column, so its
  // stride there is whatever the shape made it (1 for a transposed k x 1
  // operand); cuBLASLt still wants ld >= rows.
  if (g.cols == 1 && g.ld < static_cast<int64_t>(g.rows)) g.ld = static_cast<int64_t>(g.rows);
  return g;
}

// op(B)^T: n x k.
inline GemmOperand gemm_first(const MatMulArgs& m) { return gemm_operand(m.b_row, m.b_col, m.k, m.n); }
// op(A)^T: k x m.
inline GemmOperand gemm_second(const MatMulArgs& m) { return gemm_operand(m.a_row, m.a_col, m.m, m.k); }

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR

#endif  // KILN_BACKENDS_CUDA_RUNTIME_SRC_GEMM_LAYOUT_H_
