#include "kiln/backends/common/operand_checks.h"

namespace kiln::backends {
namespace {

bool read_pair(const flatbuffers::Vector<int32_t>* v, int64_t* a, int64_t* b) {
  if (v == nullptr || v->size() != 2) return false;
  *a = v->Get(0);
  *b = v->Get(1);
  return true;
}

// Output extent of a window of `k` taps `d` apart, `s` apart, over `in`
// padded by p0 and p1.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

// Kernel, strides, dilations (1 when absent and `dilations_optional`) and
// four pads from the parameters, the spatial extents of x and y (a 1-D
// window is 2-D of height 1), and the rank rule both window ops share.
Error read_window(const KernelView& k, const flatbuffers::Vector<int32_t>* kernel,
                  const flatbuffers::Vector<int32_t>* strides, const flatbuffers::Vector<int32_t>* dilations,
                  const flatbuffers::Vector<int32_t>* pads, bool dilations_optional, WindowGeometry* g) {
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(k, (x.rank() == 3 || x.rank() == 4) && y.rank() == x.rank() && y.dim(0) == x.dim(0),
                  "only 1-D and 2-D (NCW, NCHW) windows, with input and output of one rank and batch");
  const bool no_dilations = dilations == nullptr && dilations_optional;
  if (no_dilations) g->dh = g->dw = 1;
  KILN_VIEW_CHECK(k,
                  read_pair(kernel, &g->kh, &g->kw) && read_pair(strides, &g->sh, &g->sw) &&
                      (no_dilations || read_pair(dilations, &g->dh, &g->dw)) && pads != nullptr && pads->size() == 4,
                  "kernel, strides and dilations must be pairs, pads 4 values");
  g->pt = pads->Get(0);
  g->pl = pads->Get(1);
  g->pb = pads->Get(2);
  g->pr = pads->Get(3);
  KILN_VIEW_CHECK(k,
                  g->kh > 0 && g->kw > 0 && g->sh > 0 && g->sw > 0 && g->dh > 0 && g->dw > 0 && g->pt >= 0 &&
                      g->pl >= 0 && g->pb >= 0 && g->pr >= 0,
                  "bad kernel, strides, dilations or pads");
  const bool one_d = x.rank() == 3;
  g->n = x.dim(0);
  g->c = x.dim(1);
  g->h = one_d ? 1 : x.dim(2);
  g->w = x.dim(x.rank() - 1);
  g->m = y.dim(1);
  g->oh = one_d ? 1 : y.dim(2);
  g->ow = y.dim(y.rank() - 1);
  return Error::kOk;
}

}  // namespace

Error check_operand_counts(const KernelView& k, uint32_t min_in, uint32_t max_in, uint32_t min_out, uint32_t max_out) {
  KILN_VIEW_CHECK(
      k,
      k.num_inputs() >= min_in && k.num_inputs() <= max_in && k.num_outputs() >= min_out && k.num_outputs() <= max_out,
      "%u inputs and %u outputs", k.num_inputs(), k.num_outputs());
  for (uint32_t i = 0; i < min_in; ++i) KILN_VIEW_CHECK(k, k.input(i) != nullptr, "input %u is missing", i);
  return Error::kOk;
}

bool activation_known(const fb::FusedActivation* activation) {
  return activation == nullptr || activation->kind() <= fb::Activation::MAX;
}

Error check_not_packed(const KernelView& k) {
  // A device backend's own scratch (BackendPlanner::plan_kernel: a
  // library workspace) is bytes; the CPU's packing scratch is float32. (A
  // CUDA convolution's column buffer is float, checked by its lowering.)
  for (uint32_t i = 0; i < k.num_scratch(); ++i) {
    KILN_VIEW_CHECK(k, k.scratch(i).dtype() != DType::FLOAT32, "has packing scratch (a CPU lowering)");
  }
  const auto* gemm = k.params<fb::GemmParams>();
  const auto* matmul = k.params<fb::MatMulParams>();
  KILN_VIEW_CHECK(k, (gemm == nullptr || !gemm->packed_b()) && (matmul == nullptr || !matmul->packed_b()),
                  "B packed for the CPU");
  const auto* conv = k.params<fb::ConvParams>();
  KILN_VIEW_CHECK(k, conv == nullptr || !conv->packed_weights(), "weights packed for the CPU");
  return Error::kOk;
}

Error check_unary(const KernelView& k) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 1, 1, 1, 1));
  KILN_VIEW_CHECK(k, same_shape(*k.input(0), k.output(0)), "input and output shapes differ");
  return Error::kOk;
}

Error check_binary(const KernelView& k, StridedWalk<2>* out_walk) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 2, 2, 1, 1));
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  const uint32_t rank = y.rank();
  KILN_VIEW_CHECK(k, rank <= kMaxRank, "rank %u (at most %u)", rank, kMaxRank);
  StridedWalk<2>& walk = *out_walk;
  walk = StridedWalk<2>();
  walk.rank = rank;
  for (uint32_t d = 0; d < rank; ++d) walk.dims[d] = y.dim(d);
  KILN_VIEW_CHECK(
      k, broadcast_strides(a, y.dims(), rank, walk.strides[0]) && broadcast_strides(b, y.dims(), rank, walk.strides[1]),
      "inputs do not broadcast to the output shape");
  // The output must be exactly the broadcast of the inputs.
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t expected = 1;
    for (const Tensor* t : {&a, &b}) {
      const int32_t i = static_cast<int32_t>(d) - static_cast<int32_t>(rank - t->rank());
      if (i >= 0 && t->dim(static_cast<uint32_t>(i)) != 1) expected = t->dim(static_cast<uint32_t>(i));
    }
    KILN_VIEW_CHECK(k, y.dim(d) == expected, "output dim %u is %lld, broadcasting gives %lld", d,
                    static_cast<long long>(y.dim(d)), static_cast<long long>(expected));
  }
  const auto* p = k.params<fb::BinaryParams>();
  KILN_VIEW_CHECK(k, p == nullptr || activation_known(p->activation()), "unknown fused activation");
  collapse(&walk);
  return Error::kOk;
}

Error check_gemm(const KernelView& k, MatrixProduct* out_product) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 2, 3, 1, 1));
  const auto* p = k.params<fb::GemmParams>();
  KILN_VIEW_CHECK(k, p != nullptr && activation_known(p->activation()), "missing GemmParams");
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(k, a.rank() == 2 && b.rank() == 2 && y.rank() == 2, "expects 2-D operands");
  MatrixProduct& g = *out_product;
  g = MatrixProduct();
  g.m = p->trans_a() ? a.dim(1) : a.dim(0);
  g.k = p->trans_a() ? a.dim(0) : a.dim(1);
  const int64_t kb = p->trans_b() ? b.dim(1) : b.dim(0);
  g.n = p->trans_b() ? b.dim(0) : b.dim(1);
  KILN_VIEW_CHECK(k, g.k == kb && y.dim(0) == g.m && y.dim(1) == g.n, "shapes do not multiply to the output");
  g.a_row = p->trans_a() ? 1 : a.dim(1);
  g.a_col = p->trans_a() ? a.dim(1) : 1;
  g.b_row = p->trans_b() ? 1 : b.dim(1);
  g.b_col = p->trans_b() ? b.dim(1) : 1;
  g.alpha = p->alpha();
  g.beta = p->beta();
  g.activation = p->activation();
  const Tensor* c = k.num_inputs() > 2 ? k.input(2) : nullptr;
  if (c != nullptr && p->beta() != 0.f) {
    int64_t strides[2];
    KILN_VIEW_CHECK(k, broadcast_strides(*c, y.dims(), 2, strides), "C does not broadcast to the output");
    g.c = c;
    g.c_row = strides[0];
    g.c_col = strides[1];
  }
  return Error::kOk;
}

Error check_matmul(const KernelView& k, MatrixProduct* out_product) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 2, 2, 1, 1));
  const fb::FusedActivation* activation = nullptr;
  if (const auto* mp = k.params<fb::MatMulParams>()) activation = mp->activation();
  if (const auto* bp = k.params<fb::BinaryParams>()) activation = bp->activation();
  KILN_VIEW_CHECK(k, activation_known(activation), "unknown fused activation");
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(k, a.rank() >= 1 && b.rank() >= 1, "MatMul of a scalar");
  const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
  MatrixProduct& g = *out_product;
  g = MatrixProduct();
  g.m = a_vec ? 1 : a.dim(a.rank() - 2);
  g.k = a.dim(a.rank() - 1);
  g.n = b_vec ? 1 : b.dim(b.rank() - 1);
  KILN_VIEW_CHECK(k, g.k == (b_vec ? b.dim(0) : b.dim(b.rank() - 2)), "inner dimensions differ");
  const uint32_t a_batch = a_vec ? 0 : a.rank() - 2;
  const uint32_t b_batch = b_vec ? 0 : b.rank() - 2;
  const uint32_t batch_rank = a_batch > b_batch ? a_batch : b_batch;
  KILN_VIEW_CHECK(k, y.rank() == batch_rank + (a_vec ? 0 : 1) + (b_vec ? 0 : 1) && batch_rank < kMaxRank,
                  "output rank %u does not match", y.rank());
  // Batch dims from the innermost out: extents and A's and B's strides.
  StridedWalk<2>& batches = g.batches;
  batches.rank = batch_rank;
  int64_t a_matrices = 1, b_matrices = 1;
  for (int32_t d = static_cast<int32_t>(batch_rank) - 1; d >= 0; --d) {
    const int32_t da = d - static_cast<int32_t>(batch_rank - a_batch);
    const int32_t db = d - static_cast<int32_t>(batch_rank - b_batch);
    const int64_t ea = da >= 0 ? a.dim(static_cast<uint32_t>(da)) : 1;
    const int64_t eb = db >= 0 ? b.dim(static_cast<uint32_t>(db)) : 1;
    KILN_VIEW_CHECK(k, ea == eb || ea == 1 || eb == 1, "batch dims do not broadcast");
    const int64_t e = ea == 1 ? eb : ea;
    KILN_VIEW_CHECK(k, y.dim(static_cast<uint32_t>(d)) == e, "output batch dim %d does not match", d);
    batches.dims[d] = e;
    batches.strides[0][d] = ea == 1 ? 0 : a_matrices * g.m * g.k;
    batches.strides[1][d] = eb == 1 ? 0 : b_matrices * g.k * g.n;
    a_matrices *= ea;
    b_matrices *= eb;
  }
  KILN_VIEW_CHECK(k, (a_vec || y.dim(batch_rank) == g.m) && (b_vec || y.dim(y.rank() - 1) == g.n),
                  "output shape does not match");
  g.a_row = g.k;
  g.a_col = 1;
  g.b_row = g.n;
  g.b_col = 1;
  g.activation = activation;
  return Error::kOk;
}

Error check_conv(const KernelView& k, WindowGeometry* out_window) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 2, 3, 1, 1));
  const auto* p = k.params<fb::ConvParams>();
  KILN_VIEW_CHECK(k, p != nullptr && activation_known(p->activation()), "missing ConvParams");
  const Tensor& w = *k.input(1);
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  WindowGeometry& g = *out_window;
  g = WindowGeometry();
  KILN_RETURN_IF_ERROR(read_window(k, p->kernel(), p->strides(), p->dilations(), p->pads(), false, &g));
  KILN_VIEW_CHECK(k, w.rank() == k.input(0)->rank(), "weight of another rank");
  g.group = p->group();
  KILN_VIEW_CHECK(k, g.group > 0 && g.c % g.group == 0 && g.m % g.group == 0, "group %lld does not divide the channels",
                  static_cast<long long>(g.group));
  const int64_t wh = w.rank() == 3 ? 1 : w.dim(2);
  KILN_VIEW_CHECK(k, w.dim(0) == g.m && w.dim(1) == g.c / g.group && wh == g.kh && w.dim(w.rank() - 1) == g.kw,
                  "weight shape does not match");
  KILN_VIEW_CHECK(k,
                  g.oh == window_out(g.h, g.kh, g.sh, g.dh, g.pt, g.pb) &&
                      g.ow == window_out(g.w, g.kw, g.sw, g.dw, g.pl, g.pr) && g.oh > 0 && g.ow > 0,
                  "output shape does not match the geometry");
  KILN_VIEW_CHECK(k, bias == nullptr || bias->numel() == g.m, "bias must have %lld elements",
                  static_cast<long long>(g.m));
  return Error::kOk;
}

Error check_pool(const KernelView& k, WindowGeometry* out_window) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::PoolParams>();
  KILN_VIEW_CHECK(k, p != nullptr && p->kind() <= fb::PoolKind::MAX, "missing PoolParams");
  WindowGeometry& g = *out_window;
  g = WindowGeometry();
  KILN_RETURN_IF_ERROR(read_window(k, p->kernel(), p->strides(), p->dilations(), p->pads(), true, &g));
  KILN_VIEW_CHECK(k, g.m == g.c && g.pt < g.kh * g.dh && g.pl < g.kw * g.dw,
                  "channels change, or a pad is a whole window");
  KILN_VIEW_CHECK(
      k, g.oh > 0 && g.ow > 0 && (g.oh - 1) * g.sh < g.h + g.pt + g.pb && (g.ow - 1) * g.sw < g.w + g.pl + g.pr,
      "output size does not match the geometry");
  return Error::kOk;
}

Error check_reduce(const KernelView& k, bool* out_reduced) {
  KILN_VIEW_CHECK(k, k.num_inputs() >= 1 && k.input(0) != nullptr && k.num_outputs() == 1,
                  "expects one data input and one output");
  const auto* p = k.params<fb::ReduceParams>();
  KILN_VIEW_CHECK(k, p != nullptr && p->axes() != nullptr && p->axes()->size() > 0, "missing ReduceParams");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(k, x.rank() <= kMaxRank, "rank %u", x.rank());
  for (uint32_t d = 0; d < kMaxRank; ++d) out_reduced[d] = false;
  for (uint32_t i = 0; i < p->axes()->size(); ++i) {
    const int32_t axis = p->axes()->Get(i);
    KILN_VIEW_CHECK(k, axis >= 0 && static_cast<uint32_t>(axis) < x.rank() && !out_reduced[axis], "bad axis %d", axis);
    out_reduced[axis] = true;
  }
  uint32_t r = 0;
  for (uint32_t d = 0; d < x.rank(); ++d) {
    if (out_reduced[d] && !p->keepdims()) continue;
    const int64_t expected = out_reduced[d] ? 1 : x.dim(d);
    KILN_VIEW_CHECK(k, r < y.rank() && y.dim(r) == expected, "output shape does not match");
    ++r;
  }
  KILN_VIEW_CHECK(k, r == y.rank(), "output rank does not match");
  return Error::kOk;
}

Error check_global_pool(const KernelView& k, bool* out_reduced) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 1, 1, 1, 1));
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(
      k, x.rank() >= 2 && x.rank() <= kMaxRank && y.rank() == x.rank() && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1),
      "expects N and C kept");
  for (uint32_t d = 2; d < y.rank(); ++d) KILN_VIEW_CHECK(k, y.dim(d) == 1, "spatial dims must be 1");
  for (uint32_t d = 0; d < kMaxRank; ++d) out_reduced[d] = d >= 2 && d < x.rank();
  return Error::kOk;
}

Error check_softmax(const KernelView& k, AxisSplit* out_split) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::AxisParams>();
  const Tensor& x = *k.input(0);
  KILN_VIEW_CHECK(k, same_shape(x, k.output(0)), "input and output shapes differ");
  KILN_VIEW_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  out_split->outer = dims_product(x, 0, axis);
  out_split->n = x.dim(axis);
  out_split->inner = dims_product(x, axis + 1, x.rank());
  return Error::kOk;
}

Error check_layer_norm(const KernelView& k, AxisSplit* out_split) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 2, 3, 1, 3));
  KILN_VIEW_CHECK(k, k.num_outputs() != 2, "expects 1 or 3 outputs");
  const auto* p = k.params<fb::LayerNormParams>();
  const Tensor& x = *k.input(0);
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  KILN_VIEW_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(),
                  "missing LayerNormParams or bad axis");
  KILN_VIEW_CHECK(k, same_shape(x, k.output(0)), "X and Y shapes differ");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  const int64_t outer = dims_product(x, 0, axis), inner = dims_product(x, axis, x.rank());
  KILN_VIEW_CHECK(k, k.input(1)->numel() == inner, "Scale must have %lld elements", static_cast<long long>(inner));
  KILN_VIEW_CHECK(k, bias == nullptr || bias->numel() == inner, "B must have %lld elements",
                  static_cast<long long>(inner));
  for (uint32_t i = 1; i < k.num_outputs(); ++i) {
    KILN_VIEW_CHECK(k, k.output(i).numel() == outer, "output %u must have %lld elements", i,
                    static_cast<long long>(outer));
  }
  out_split->outer = outer;
  out_split->n = inner;
  out_split->inner = 1;
  return Error::kOk;
}

Error check_batch_norm(const KernelView& k, AxisSplit* out_split) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 5, 5, 1, 1));
  KILN_VIEW_CHECK(k, k.params<fb::BatchNormParams>() != nullptr, "missing BatchNormParams");
  const Tensor& x = *k.input(0);
  KILN_VIEW_CHECK(k, x.rank() >= 2 && same_shape(x, k.output(0)), "expects N, C, ... with Y shaped as X");
  for (uint32_t i = 1; i < 5; ++i) {
    KILN_VIEW_CHECK(k, k.input(i)->numel() == x.dim(1), "input %u must have C elements", i);
  }
  out_split->outer = x.dim(0);
  out_split->n = x.dim(1);
  out_split->inner = dims_product(x, 2, x.rank());
  return Error::kOk;
}

Error check_copy(const KernelView& k) {
  KILN_VIEW_CHECK(k, k.num_inputs() >= 1 && k.input(0) != nullptr && k.num_outputs() == 1,
                  "expects a data input and one output");
  KILN_VIEW_CHECK(k, k.input(0)->nbytes() == k.output(0).nbytes(), "byte size changes");
  return Error::kOk;
}

Error check_transpose(const KernelView& k, StridedWalk<1>* out_walk) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::TransposeParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(k,
                  p != nullptr && p->perm() != nullptr && p->perm()->size() == x.rank() && y.rank() == x.rank() &&
                      x.rank() <= kMaxRank,
                  "missing TransposeParams or rank mismatch");
  int64_t x_strides[kMaxRank];
  contiguous_strides(x, x_strides);
  bool seen[kMaxRank] = {};
  StridedWalk<1>& walk = *out_walk;
  walk = StridedWalk<1>();
  walk.rank = y.rank();
  for (uint32_t d = 0; d < y.rank(); ++d) {
    const int32_t from = p->perm()->Get(d);
    KILN_VIEW_CHECK(k, from >= 0 && static_cast<uint32_t>(from) < x.rank() && !seen[from], "perm is not a permutation");
    seen[from] = true;
    KILN_VIEW_CHECK(k, y.dim(d) == x.dim(static_cast<uint32_t>(from)), "output dim %u does not match", d);
    walk.dims[d] = y.dim(d);
    walk.strides[0][d] = x_strides[from];
  }
  return Error::kOk;
}

Error check_slice(const KernelView& k, StridedWalk<1>* out_walk, int64_t* out_base) {
  KILN_RETURN_IF_ERROR(check_operand_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::SliceParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(k,
                  p != nullptr && p->starts() != nullptr && p->steps() != nullptr && y.rank() == x.rank() &&
                      p->starts()->size() == x.rank() && p->steps()->size() == x.rank() && x.rank() <= kMaxRank,
                  "missing SliceParams or rank mismatch");
  int64_t x_strides[kMaxRank];
  contiguous_strides(x, x_strides);
  StridedWalk<1>& walk = *out_walk;
  walk = StridedWalk<1>();
  walk.rank = y.rank();
  *out_base = 0;
  for (uint32_t d = 0; d < y.rank(); ++d) walk.dims[d] = y.dim(d);
  if (y.numel() == 0) return Error::kOk;
  for (uint32_t d = 0; d < x.rank(); ++d) {
    const int64_t start = p->starts()->Get(d), step = p->steps()->Get(d), count = y.dim(d), dim = x.dim(d);
    KILN_VIEW_CHECK(k, step != 0 && start >= 0 && start < dim, "dim %u: start outside the input", d);
    if (count > 1) {
      const int64_t room = step > 0 ? dim - 1 - start : start;
      const int64_t magnitude = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
      KILN_VIEW_CHECK(k, magnitude <= room / (count - 1), "dim %u: slice runs past the input", d);
    }
    *out_base += start * x_strides[d];
    walk.strides[0][d] = count > 1 ? step * x_strides[d] : 0;
  }
  return Error::kOk;
}

Error check_parts(const KernelView& k, bool concat, uint32_t* out_axis) {
  const uint32_t parts = concat ? k.num_inputs() : k.num_outputs();
  KILN_VIEW_CHECK(k, parts >= 1 && (concat ? k.num_outputs() == 1 : k.num_inputs() == 1 && k.input(0) != nullptr),
                  "bad operand count");
  const auto* p = k.params<fb::AxisParams>();
  const Tensor& whole = concat ? k.output(0) : *k.input(0);
  KILN_VIEW_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < whole.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  int64_t total = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    const Tensor* t = concat ? k.input(i) : &k.output(i);
    KILN_VIEW_CHECK(k, t != nullptr && t->rank() == whole.rank(), "part %u is missing or of another rank", i);
    for (uint32_t d = 0; d < whole.rank(); ++d) {
      if (d != axis) KILN_VIEW_CHECK(k, t->dim(d) == whole.dim(d), "part %u dim %u differs", i, d);
    }
    total += t->dim(axis);
  }
  KILN_VIEW_CHECK(k, total == whole.dim(axis), "the parts add up to %lld along the axis, the whole has %lld",
                  static_cast<long long>(total), static_cast<long long>(whole.dim(axis)));
  *out_axis = axis;
  return Error::kOk;
}

}  // namespace kiln::backends
