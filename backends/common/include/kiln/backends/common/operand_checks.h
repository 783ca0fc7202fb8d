// Checks of one kernel call's operands against its kernel's contract (the
// names and parameters of the CPU kernels), shared by the
// backends' lowerings. This is each backend's trust boundary: a call passes
// its checks once, at delegate init, and the work launched for it then
// indexes only inside the tensors it was given.
//
// Each check logs what is wrong (KILN_VIEW_CHECK: backend, node, op) and
// returns kInvalidProgram; on success it hands back the geometry the
// lowering launches with. What one device needs beyond the contract (its
// size limits, check_not_packed) its lowering checks itself. Float32
// operands are the backend's own rule, checked before these.

#ifndef KILN_BACKENDS_COMMON_OPERAND_CHECKS_H_
#define KILN_BACKENDS_COMMON_OPERAND_CHECKS_H_

#include <stdint.h>

#include "kiln/backends/common/kernel_view.h"
#include "kiln/backends/common/shape.h"

namespace kiln::backends {

// Inputs in [min_in, max_in], the first min_in present; outputs in
// [min_out, max_out].
Error check_operand_counts(const KernelView& k, uint32_t min_in, uint32_t max_in, uint32_t min_out, uint32_t max_out);

// Absent, or an activation the schema knows.
bool activation_known(const fb::FusedActivation* activation);

// Device kernels read row-major operands only: no weights packed for the
// CPU (GemmParams/MatMulParams packed_b, ConvParams packed_weights), no
// packing scratch.
Error check_not_packed(const KernelView& k);

// Relu ... Clip: one input, one output of its shape.
Error check_unary(const KernelView& k);

// Add ... Min: two inputs that broadcast to the output, which is exactly
// their broadcast, and a known fused activation. `out_walk`: the output's
// dims with both inputs' strides, collapsed.
Error check_binary(const KernelView& k, StridedWalk<2>* out_walk);

// One or more matrix products Y[b] = alpha op(A[b]) op(B[b]) + beta C,
// row-major Y of m x n; element (i, j) of op(A) at i * a_row + j * a_col
// (likewise B, and C broadcast to Y), k the inner extent.
struct MatrixProduct {
  int64_t m = 0, n = 0, k = 0;
  int64_t a_row = 0, a_col = 0, b_row = 0, b_col = 0;
  float alpha = 1.f, beta = 0.f;
  const Tensor* c = nullptr;  // Gemm's C where beta is not 0
  int64_t c_row = 0, c_col = 0;
  const fb::FusedActivation* activation = nullptr;
  // MatMul's batch dims, outermost first, with the elements between
  // consecutive matrices of A and of B (0 where broadcast); rank 0: one
  // product. Not collapsed.
  StridedWalk<2> batches;
};

// Gemm (GemmParams): 2-D A, B and Y, C optional.
Error check_gemm(const KernelView& k, MatrixProduct* out_product);
// MatMul (NumPy): a vector operand is promoted (its promoted dim dropped
// from Y), batch dims broadcast; the fused activation of BinaryParams or
// MatMulParams.
Error check_matmul(const KernelView& k, MatrixProduct* out_product);

// A sliding window over 1-D (NCW, as NCHW with height 1) or 2-D (NCHW)
// input; pads top, left, bottom, right.
struct WindowGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t m = 0, oh = 0, ow = 0;       // output channels and size
  int64_t kh = 0, kw = 0, sh = 0, sw = 0, dh = 0, dw = 0;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t group = 1;  // Conv
};

// Stores the geometry's spatial fields in a launch's arguments, whatever
// integer type `out` keeps them in: members h, w, oh, ow, kh, kw, sh, sw,
// dh, dw, pt and pl (the bottom and right pads, which not every kernel
// needs, are the caller's).
template <typename Args>
void store_window(const WindowGeometry& g, Args* out) {
  out->h = static_cast<decltype(out->h)>(g.h);
  out->w = static_cast<decltype(out->w)>(g.w);
  out->oh = static_cast<decltype(out->oh)>(g.oh);
  out->ow = static_cast<decltype(out->ow)>(g.ow);
  out->kh = static_cast<decltype(out->kh)>(g.kh);
  out->kw = static_cast<decltype(out->kw)>(g.kw);
  out->sh = static_cast<decltype(out->sh)>(g.sh);
  out->sw = static_cast<decltype(out->sw)>(g.sw);
  out->dh = static_cast<decltype(out->dh)>(g.dh);
  out->dw = static_cast<decltype(out->dw)>(g.dw);
  out->pt = static_cast<decltype(out->pt)>(g.pt);
  out->pl = static_cast<decltype(out->pl)>(g.pl);
}

// Conv (ConvParams): X, W, optional B; Y of the window geometry.
Error check_conv(const KernelView& k, WindowGeometry* out_window);
// Pool (PoolParams): max or average windows; dilations 1 when absent.
Error check_pool(const KernelView& k, WindowGeometry* out_window);

// ReduceSum ... ReduceSumSquare (ReduceParams: distinct axes, at least one):
// the output keeps every other dim, and the reduced ones as 1 with
// keepdims. `out_reduced` (kMaxRank entries): which axes of input 0 reduce.
Error check_reduce(const KernelView& k, bool* out_reduced);
// GlobalAveragePool, GlobalMaxPool: every dim after N and C reduces to 1.
Error check_global_pool(const KernelView& k, bool* out_reduced);

// The input seen as [outer, n, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

// Softmax, LogSoftmax (AxisParams): output shaped as the input; rows of n
// elements `inner` apart.
Error check_softmax(const KernelView& k, AxisSplit* out_split);
// LayerNormalization (LayerNormParams): X, Scale, optional B; Y shaped as
// X, optional Mean and InvStdDev of one value per row. Rows are
// [outer, n] with n the product of the dims from the axis on (inner 1).
Error check_layer_norm(const KernelView& k, AxisSplit* out_split);
// BatchNormalization (inference; BatchNormParams): X of rank 2 or more,
// scale, B, mean, var of C elements; Y shaped as X. [N, C, inner].
Error check_batch_norm(const KernelView& k, AxisSplit* out_split);

// Copy: a view with bytes of its own; input and output of one byte size.
Error check_copy(const KernelView& k);
// Transpose (TransposeParams): `out_walk` walks the output, outermost
// first, with the input's strides.
Error check_transpose(const KernelView& k, StridedWalk<1>* out_walk);
// Slice (SliceParams: per input dim a start inside it and a non-zero step;
// the output's dims are the counts): every element read lies inside the
// input. `out_walk` walks the output with the input's strides from element
// `*out_base`; an empty output has nothing to read.
Error check_slice(const KernelView& k, StridedWalk<1>* out_walk, int64_t* out_base);
// Concat (concat: inputs are the parts) and Split (outputs are): the parts'
// extents along the axis (AxisParams) add up to the whole's, every other
// dim equal.
Error check_parts(const KernelView& k, bool concat, uint32_t* out_axis);

}  // namespace kiln::backends

#endif  // KILN_BACKENDS_COMMON_OPERAND_CHECKS_H_
