#include "lower.h"

#include <string.h>

#include "kiln/backends/common/kernel_table.h"
#include "kiln/backends/common/operand_checks.h"
#include "kiln/runtime/check.h"

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {
namespace {

static_assert(kernel_index(kUnaryKernels, "Gelu") == kGelu && kernel_index(kUnaryKernels, "Clip") == kClip,
              "UnaryOp follows kUnaryKernels");
static_assert(kernel_index(kBinaryKernels, "Min") == kMin, "BinaryOp follows kBinaryKernels");
static_assert(kernel_index(kReduceKernels, "ReduceSumSquare") == kReduceSumSquare, "ReduceKind follows kReduceKernels");

constexpr uint32_t kBlock = 256;
constexpr uint64_t kMaxBlocks = 4096;

bool is(const char* op, const char* name) { return strcmp(op, name) == 0; }

uint32_t blocks_for(uint64_t work, uint64_t per_block) {
  uint64_t blocks = (work + per_block - 1) / per_block;
  if (blocks == 0) blocks = 1;
  return static_cast<uint32_t>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// How the tensors of a kernel store their elements (cuda_backend.cc checks
// that the float operands of a kernel share one storage type).
Storage storage_of(DType dtype) {
  return dtype == DType::FLOAT16 ? kFloat16 : dtype == DType::BFLOAT16 ? kBFloat16 : kFloat32;
}

uint32_t storage_bytes(Storage s) { return s == kFloat32 ? 4 : 2; }

Launch launch_of(const KernelView& k, LaunchKind kind, uint64_t work, uint32_t block = kBlock) {
  Launch l;
  l.kind = kind;
  l.storage = storage_of(k.output(0).dtype());
  l.node = k.node;
  l.block = block;
  l.grid[0] = blocks_for(work, block);
  return l;
}

// The device address of `t` (in an arena of the delegate's device).
float* address(const KernelView& k, const Tensor& t) {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(k.method->arena(static_cast<uint32_t>(t.arena())).handle) +
                                  t.offset());
}

Activation activation_of(const fb::FusedActivation* a) {
  Activation out;
  if (a != nullptr) {
    out.kind = static_cast<uint32_t>(a->kind());
    out.alpha = a->alpha();
    out.beta = a->beta();
  }
  return out;
}

// ---------------------------------------------------------------------------
// Element-wise

Error lower_unary(const KernelView& k, int op, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_unary(k));
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  const auto* p = k.params<fb::UnaryParams>();
  Launch l = launch_of(k, LaunchKind::kUnary, static_cast<uint64_t>(y.numel()) / 4 + 1);
  l.unary.x = address(k, x);
  l.unary.y = address(k, y);
  l.unary.n = static_cast<uint64_t>(y.numel());
  l.unary.op = static_cast<uint32_t>(op);
  l.unary.alpha = p != nullptr ? p->alpha() : kUnaryKernels[op].alpha;
  l.unary.beta = p != nullptr ? p->beta() : kUnaryKernels[op].beta;
  if (op == kGelu && l.unary.beta != 0.f) l.unary.op = kGeluTanh;  // beta != 0: the tanh approximation
  return sink.emit(l);
}

Error lower_binary(const KernelView& k, int op, LaunchSink& sink) {
  StridedWalk<2> walk;
  KILN_RETURN_IF_ERROR(check_binary(k, &walk));
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(k, y.numel() < (int64_t{1} << 32), "more than 2^32 elements");
  const auto* p = k.params<fb::BinaryParams>();
  Launch l = launch_of(k, LaunchKind::kBinary, static_cast<uint64_t>(y.numel()) / 4 + 1);
  BinaryArgs& args = l.binary;
  args = BinaryArgs();
  args.a = address(k, *k.input(0));
  args.b = address(k, *k.input(1));
  args.y = address(k, y);
  args.n = static_cast<uint64_t>(y.numel());
  args.op = static_cast<uint32_t>(op);
  args.act = activation_of(p != nullptr ? p->activation() : nullptr);
  if (walk.rank == 0) {  // a single element
    walk.rank = 1;
    walk.dims[0] = walk.strides[0][0] = walk.strides[1][0] = 1;
  }
  args.rank = walk.rank;
  for (uint32_t d = 0; d < walk.rank; ++d) {
    args.dims[d] = static_cast<uint32_t>(walk.dims[d]);
    args.a_strides[d] = static_cast<uint32_t>(walk.strides[0][d]);
    args.b_strides[d] = static_cast<uint32_t>(walk.strides[1][d]);
  }
  return sink.emit(l);
}

// y = act(y + b) in place, y contiguous over `dims` (outermost first) and b
// read with `b_strides` (0 along the axes it is broadcast over): the binary
// kernel's Add, float32 storage unless the caller says otherwise.
Launch add_in_place(float* y, const float* b, const uint32_t* dims, const uint32_t* b_strides, uint32_t rank,
                    Activation act) {
  Launch l;
  l.kind = LaunchKind::kBinary;
  BinaryArgs& args = l.binary;
  args = BinaryArgs();
  args.a = y;
  args.b = b;
  args.y = y;
  args.n = 1;
  args.op = kAdd;
  args.act = act;
  args.rank = rank;
  for (uint32_t d = rank; d-- > 0;) {
    args.dims[d] = dims[d];
    args.a_strides[d] = static_cast<uint32_t>(args.n);
    args.b_strides[d] = b_strides[d];
    args.n *= dims[d];
  }
  l.block = kBlock;
  l.grid[0] = blocks_for(args.n / 4 + 1, kBlock);
  return l;
}

// ---------------------------------------------------------------------------
// Linear

// The GEMM's planned workspace: the call's uint8 scratch, if any.
void set_workspace(const KernelView& k, MatMulArgs* args) {
  for (uint32_t i = 0; i < k.num_scratch(); ++i) {
    const Tensor& w = k.scratch(i);
    if (w.dtype() != DType::UINT8) continue;
    args->workspace = address(k, w);
    args->workspace_bytes = w.nbytes();
  }
}

// The reference GEMM's launch of `args` (its batch in batch_dims), for
// cuBLASLt to take over on the GPU (cuda_backend.cc).
Error emit_gemm(const KernelView& k, const MatMulArgs& args, LaunchSink& sink) {
  const uint64_t batch =
      uint64_t{args.batch_dims[0]} * args.batch_dims[1] * args.batch_dims[2] * uint64_t{args.batch_dims[3]};
  Launch l;
  l.kind = LaunchKind::kMatMul;
  l.storage = storage_of(k.output(0).dtype());
  l.node = k.node;
  l.block = kTileThreads;
  const uint64_t gx = (args.n + kTile - 1) / kTile, gy = (args.m + kTile - 1) / kTile;
  l.grid[0] = static_cast<uint32_t>(gx < 1024 ? (gx > 0 ? gx : 1) : 1024);
  l.grid[1] = static_cast<uint32_t>(gy < 1024 ? (gy > 0 ? gy : 1) : 1024);
  l.grid[2] = static_cast<uint32_t>(batch < 65535 ? (batch > 0 ? batch : 1) : 65535);
  l.matmul = args;
  return sink.emit(l);
}

// The GEMM over `g` (batch dims right-aligned into 4 slots).
Error emit_matmul(const KernelView& k, const MatrixProduct& g, LaunchSink& sink) {
  KILN_VIEW_CHECK(k, g.batches.rank <= 4, "more than 4 batch dims");
  MatMulArgs args = {};
  args.a = address(k, *k.input(0));
  args.b = address(k, *k.input(1));
  args.c = g.c != nullptr ? address(k, *g.c) : nullptr;
  args.y = address(k, k.output(0));
  args.m = static_cast<uint32_t>(g.m);
  args.n = static_cast<uint32_t>(g.n);
  args.k = static_cast<uint32_t>(g.k);
  args.a_row = g.a_row;
  args.a_col = g.a_col;
  args.b_row = g.b_row;
  args.b_col = g.b_col;
  args.c_row = g.c_row;
  args.c_col = g.c_col;
  args.alpha = g.alpha;
  args.beta = g.beta;
  args.act = activation_of(g.activation);
  set_workspace(k, &args);
  for (uint32_t i = 0; i < 4; ++i) args.batch_dims[i] = 1;
  for (uint32_t d = 0; d < g.batches.rank; ++d) {
    const uint32_t slot = 4 - g.batches.rank + d;
    args.batch_dims[slot] = static_cast<uint32_t>(g.batches.dims[d]);
    args.a_batch[slot] = g.batches.strides[0][d];
    args.b_batch[slot] = g.batches.strides[1][d];
  }
  return emit_gemm(k, args, sink);
}

Error lower_gemm(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_not_packed(k));
  MatrixProduct g;
  KILN_RETURN_IF_ERROR(check_gemm(k, &g));
  return emit_matmul(k, g, sink);
}

Error lower_matmul(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_not_packed(k));
  MatrixProduct g;
  KILN_RETURN_IF_ERROR(check_matmul(k, &g));
  return emit_matmul(k, g, sink);
}

// The column buffer of a convolution through a GEMM (launch.h Im2ColArgs).
Error emit_im2col(const KernelView& k, const WindowGeometry& g, const Tensor& columns, LaunchSink& sink) {
  Im2ColArgs args = {};
  args.x = address(k, *k.input(0));
  args.columns = address(k, columns);
  args.total = static_cast<uint64_t>(g.n * g.c * g.kh * g.kw * g.oh * g.ow);
  args.c = static_cast<uint32_t>(g.c);
  store_window(g, &args);
  Launch l = launch_of(k, LaunchKind::kIm2Col, args.total);
  l.im2col = args;
  return sink.emit(l);
}

// A Conv through a GEMM (ConvParams.algorithm IM2COL_GEMM; cuda_abi.h):
// the column buffer (scratch 0; none where the input is the operand), then
// the GEMM batched over the images, Y[image] = W x columns[image] (the
// weights shared: batch stride 0). With a bias, the bias and activation
// are one launch after the GEMM (cuBLASLt's bias epilogue adds along the
// other dimension); without, the activation is the GEMM's (cuBLASLt's ReLU
// epilogue, or its activation launch).
Error lower_conv_gemm(const KernelView& k, const WindowGeometry& g, LaunchSink& sink) {
  KILN_VIEW_CHECK(k, g.group == 1, "a GEMM convolution of %lld groups", static_cast<long long>(g.group));
  const Tensor& y = k.output(0);
  const int64_t depth = g.c * g.kh * g.kw, positions = g.oh * g.ow;
  const bool as_columns = conv_reads_input_as_columns(g.kh, g.kw, g.sh, g.sw, g.pt + g.pl + g.pb + g.pr);
  const Tensor* columns = nullptr;
  if (!as_columns) {
    const int64_t need = g.n * depth * positions;
    KILN_VIEW_CHECK(k, k.num_scratch() > 0 && k.scratch(0).dtype() == y.dtype() && k.scratch(0).numel() >= need,
                    "no column buffer of %lld elements (scratch 0, of the output's dtype)",
                    static_cast<long long>(need));
    KILN_VIEW_CHECK(k, need < (int64_t{1} << 32), "a column buffer of 2^32 elements or more");
    columns = &k.scratch(0);
    KILN_RETURN_IF_ERROR(emit_im2col(k, g, *columns, sink));
  }
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  const Activation act = activation_of(k.params<fb::ConvParams>()->activation());
  MatMulArgs args = {};
  args.a = address(k, *k.input(1));
  args.b = columns != nullptr ? address(k, *columns) : address(k, *k.input(0));
  args.y = address(k, y);
  args.m = static_cast<uint32_t>(g.m);
  args.n = static_cast<uint32_t>(positions);
  args.k = static_cast<uint32_t>(depth);
  args.a_row = depth;
  args.a_col = 1;
  args.b_row = positions;
  args.b_col = 1;
  args.alpha = 1.f;
  if (bias == nullptr) args.act = act;
  for (uint32_t i = 0; i < 4; ++i) args.batch_dims[i] = 1;
  args.batch_dims[3] = static_cast<uint32_t>(g.n);
  args.b_batch[3] = depth * positions;  // also the input's image stride when it is the operand
  set_workspace(k, &args);
  KILN_RETURN_IF_ERROR(emit_gemm(k, args, sink));
  if (bias == nullptr) return Error::kOk;
  const uint32_t dims[3] = {static_cast<uint32_t>(g.n), static_cast<uint32_t>(g.m), static_cast<uint32_t>(positions)};
  const uint32_t bias_strides[3] = {0, 1, 0};
  Launch l = add_in_place(address(k, y), address(k, *bias), dims, bias_strides, 3, act);
  l.storage = storage_of(y.dtype());
  l.node = k.node;
  return sink.emit(l);
}

Error lower_conv(const KernelView& k, LaunchSink& sink) {
  const auto* p = k.params<fb::ConvParams>();
  WindowGeometry g;
  if (p != nullptr && p->algorithm() == fb::ConvAlgorithm::IM2COL_GEMM) {
    KILN_VIEW_CHECK(k, !p->packed_weights(), "weights packed for the CPU");
    KILN_RETURN_IF_ERROR(check_conv(k, &g));
    return lower_conv_gemm(k, g, sink);
  }
  KILN_RETURN_IF_ERROR(check_not_packed(k));
  KILN_RETURN_IF_ERROR(check_conv(k, &g));
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  const Tensor& y = k.output(0);
  ConvArgs args = {};
  args.x = address(k, *k.input(0));
  args.weight = address(k, *k.input(1));
  args.bias = bias != nullptr ? address(k, *bias) : nullptr;
  args.y = address(k, y);
  args.total = static_cast<uint64_t>(y.numel());
  args.c = static_cast<uint32_t>(g.c);
  args.m = static_cast<uint32_t>(g.m);
  store_window(g, &args);
  args.groups = static_cast<uint32_t>(g.group);
  args.act = activation_of(k.params<fb::ConvParams>()->activation());
  Launch l = launch_of(k, LaunchKind::kConv, args.total);
  l.conv = args;
  return sink.emit(l);
}

// ---------------------------------------------------------------------------
// Pooling and reductions

Error lower_pool(const KernelView& k, LaunchSink& sink) {
  WindowGeometry g;
  KILN_RETURN_IF_ERROR(check_pool(k, &g));
  const auto* p = k.params<fb::PoolParams>();
  const Tensor& y = k.output(0);
  PoolArgs args = {};
  args.x = address(k, *k.input(0));
  args.y = address(k, y);
  args.total = static_cast<uint64_t>(y.numel());
  store_window(g, &args);
  args.pb = static_cast<uint32_t>(g.pb);
  args.pr = static_cast<uint32_t>(g.pr);
  args.is_max = p->kind() == fb::PoolKind::MAXIMUM;
  args.include_pad = p->count_include_pad();
  Launch l = launch_of(k, LaunchKind::kPool, args.total);
  l.pool = args;
  return sink.emit(l);
}

constexpr uint32_t kReduceBlock = 128;  // 4 warps, one output each

// One warp per output element, over the kept and reduced walks of x.
Error emit_reduce(const KernelView& k, const bool* reduced, ReduceKind op, LaunchSink& sink) {
  const Tensor& x = *k.input(0);
  KILN_VIEW_CHECK(k, x.numel() < (int64_t{1} << 32), "2^32 elements or more");
  const ReduceGeometry g = reduce_geometry(x, reduced);
  KILN_VIEW_CHECK(k, g.reduced_count > 0 || op == kReduceSum, "reduces an empty set");
  ReduceArgs args = {};
  args.x = address(k, x);
  args.y = address(k, k.output(0));
  args.op = op;
  store_reduce(g, &args);
  Launch l = launch_of(k, LaunchKind::kReduce, args.outputs, kReduceBlock / 32);
  l.block = kReduceBlock;
  l.reduce = args;
  return sink.emit(l);
}

Error lower_global_pool(const KernelView& k, bool is_max, LaunchSink& sink) {
  bool reduced[kMaxRank];
  KILN_RETURN_IF_ERROR(check_global_pool(k, reduced));
  return emit_reduce(k, reduced, is_max ? kReduceMax : kReduceMean, sink);
}

Error lower_reduce(const KernelView& k, int op, LaunchSink& sink) {
  bool reduced[kMaxRank];
  KILN_RETURN_IF_ERROR(check_reduce(k, reduced));
  return emit_reduce(k, reduced, static_cast<ReduceKind>(op), sink);
}

// ---------------------------------------------------------------------------
// Normalisation: a block per row

constexpr uint32_t kRowBlock = 128;

Error lower_softmax(const KernelView& k, bool log, LaunchSink& sink) {
  AxisSplit s;
  KILN_RETURN_IF_ERROR(check_softmax(k, &s));
  const uint64_t rows = static_cast<uint64_t>(s.outer * s.inner);
  Launch l = launch_of(k, LaunchKind::kSoftmax, rows, 1);
  l.block = kRowBlock;
  l.softmax.x = address(k, *k.input(0));
  l.softmax.y = address(k, k.output(0));
  l.softmax.rows = static_cast<uint32_t>(rows);
  l.softmax.n = static_cast<uint32_t>(s.n);
  l.softmax.inner = static_cast<uint32_t>(s.inner);
  l.softmax.log = log;
  return sink.emit(l);
}

Error lower_layer_norm(const KernelView& k, LaunchSink& sink) {
  AxisSplit s;
  KILN_RETURN_IF_ERROR(check_layer_norm(k, &s));
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  Launch l = launch_of(k, LaunchKind::kLayerNorm, static_cast<uint64_t>(s.outer), 1);
  l.block = kRowBlock;
  LayerNormArgs& args = l.layer_norm;
  args = LayerNormArgs();
  args.x = address(k, *k.input(0));
  args.scale = address(k, *k.input(1));
  args.bias = bias != nullptr ? address(k, *bias) : nullptr;
  args.y = address(k, k.output(0));
  if (k.num_outputs() == 3) {
    args.mean = address(k, k.output(1));
    args.inv_std = address(k, k.output(2));
  }
  args.rows = static_cast<uint32_t>(s.outer);
  args.n = static_cast<uint32_t>(s.n);
  args.epsilon = k.params<fb::LayerNormParams>()->epsilon();
  return sink.emit(l);
}

// BatchNormalization (inference): X, scale, B, mean, var.
Error lower_batch_norm(const KernelView& k, LaunchSink& sink) {
  AxisSplit s;
  KILN_RETURN_IF_ERROR(check_batch_norm(k, &s));
  const Tensor& y = k.output(0);
  Launch l = launch_of(k, LaunchKind::kBatchNorm, static_cast<uint64_t>(y.numel()));
  BatchNormArgs& args = l.batch_norm;
  args.x = address(k, *k.input(0));
  args.scale = address(k, *k.input(1));
  args.bias = address(k, *k.input(2));
  args.mean = address(k, *k.input(3));
  args.var = address(k, *k.input(4));
  args.y = address(k, y);
  args.total = static_cast<uint64_t>(y.numel());
  args.channels = static_cast<uint32_t>(s.n);
  args.inner = static_cast<uint32_t>(s.inner);
  args.epsilon = k.params<fb::BatchNormParams>()->epsilon();
  return sink.emit(l);
}

// ---------------------------------------------------------------------------
// Data movement: every op here is one strided copy per part.

Error emit_strided(const KernelView& k, const Tensor& x, const Tensor& y, const StridedArgs& args, LaunchSink& sink) {
  Launch l = launch_of(k, LaunchKind::kStrided, args.n);
  l.strided = args;
  l.strided.x = address(k, x);
  l.strided.y = address(k, y);
  return args.n == 0 ? Error::kOk : sink.emit(l);
}

// The copy of `walk` (over the output, with the input's strides from
// element `base`) into the contiguous output.
Error emit_walk(const KernelView& k, const StridedWalk<1>& walk, int64_t base, LaunchSink& sink) {
  const Tensor& y = k.output(0);
  StridedArgs args = {};
  args.rank = walk.rank;
  args.n = static_cast<uint64_t>(y.numel());
  args.x_base = base;
  contiguous_strides(y, args.y_strides);
  for (uint32_t d = 0; d < walk.rank; ++d) {
    args.dims[d] = static_cast<uint32_t>(walk.dims[d]);
    args.x_strides[d] = walk.strides[0][d];
  }
  return emit_strided(k, *k.input(0), y, args, sink);
}

// A view that got its own bytes (aliased views need no work).
Error lower_copy(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_copy(k));
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  if (x.arena() == y.arena() && x.offset() == y.offset()) return Error::kOk;
  StridedArgs args = {};
  args.n = x.nbytes() / storage_bytes(storage_of(x.dtype()));
  args.rank = 1;
  args.dims[0] = static_cast<uint32_t>(args.n);
  args.x_strides[0] = args.y_strides[0] = 1;
  return emit_strided(k, x, y, args, sink);
}

Error lower_transpose(const KernelView& k, LaunchSink& sink) {
  StridedWalk<1> walk;
  KILN_RETURN_IF_ERROR(check_transpose(k, &walk));
  return emit_walk(k, walk, 0, sink);
}

Error lower_slice(const KernelView& k, LaunchSink& sink) {
  StridedWalk<1> walk;
  int64_t base = 0;
  KILN_RETURN_IF_ERROR(check_slice(k, &walk, &base));
  return emit_walk(k, walk, base, sink);
}

// Concat and Split: one [outer, row] copy per part.
Error lower_parts(const KernelView& k, bool concat, LaunchSink& sink) {
  uint32_t axis = 0;
  KILN_RETURN_IF_ERROR(check_parts(k, concat, &axis));
  const uint32_t parts = concat ? k.num_inputs() : k.num_outputs();
  const Tensor& whole = concat ? k.output(0) : *k.input(0);
  const int64_t outer = dims_product(whole, 0, axis);
  const int64_t whole_row = dims_product(whole, axis, whole.rank());
  int64_t column = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    const Tensor& part = concat ? *k.input(i) : k.output(i);
    const int64_t row = dims_product(part, axis, part.rank());
    StridedArgs args = {};
    args.rank = 2;
    args.dims[0] = static_cast<uint32_t>(outer);
    args.dims[1] = static_cast<uint32_t>(row);
    args.n = static_cast<uint64_t>(outer * row);
    args.x_strides[0] = concat ? row : whole_row;
    args.y_strides[0] = concat ? whole_row : row;
    args.x_strides[1] = args.y_strides[1] = 1;
    (concat ? args.y_base : args.x_base) = column;
    KILN_RETURN_IF_ERROR(concat ? emit_strided(k, part, whole, args, sink) : emit_strided(k, whole, part, args, sink));
    column += row;
  }
  return Error::kOk;
}

// A conversion between storage types: a cast the planner placed at an edge
// of 16-bit storage (kiln plan --precision fp16/bf16).
Error lower_cast(const KernelView& k, LaunchSink& sink) {
  KILN_VIEW_CHECK(k, k.num_inputs() == 1 && k.num_outputs() == 1 && k.input(0) != nullptr, "takes one input");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VIEW_CHECK(k, x.numel() == y.numel(), "input and output differ in size");
  Launch l = launch_of(k, LaunchKind::kCast, static_cast<uint64_t>(y.numel()));
  l.cast.x = address(k, x);
  l.cast.y = address(k, y);
  l.cast.n = static_cast<uint64_t>(y.numel());
  l.cast.from = storage_of(x.dtype());
  l.cast.to = storage_of(y.dtype());
  return l.cast.n == 0 ? Error::kOk : sink.emit(l);
}

}  // namespace

Launch accumulate_launch(float* y, const float* b, uint64_t count, uint64_t period) {
  const uint32_t dims[2] = {static_cast<uint32_t>(count / period), static_cast<uint32_t>(period)};
  const uint32_t b_strides[2] = {0, 1};
  Launch l = add_in_place(y, b, dims, b_strides, 2, Activation{});
  l.node = "accumulate";
  return l;
}

Error lower_kernel(const KernelView& k, LaunchSink& sink) {
  const char* op = k.op;
  // The shared unary and binary kernels up to kClip and kMin run here.
  if (const int u = kernel_index(kUnaryKernels, op); u >= 0 && u <= static_cast<int>(kClip))
    return lower_unary(k, u, sink);
  if (const int b = kernel_index(kBinaryKernels, op); b >= 0 && b <= static_cast<int>(kMin))
    return lower_binary(k, b, sink);
  if (const int r = kernel_index(kReduceKernels, op); r >= 0) return lower_reduce(k, r, sink);
  if (is(op, "Gemm")) return lower_gemm(k, sink);
  if (is(op, "MatMul")) return lower_matmul(k, sink);
  if (is(op, "Conv")) return lower_conv(k, sink);
  if (is(op, "Pool")) return lower_pool(k, sink);
  if (is(op, "GlobalAveragePool")) return lower_global_pool(k, false, sink);
  if (is(op, "GlobalMaxPool")) return lower_global_pool(k, true, sink);
  if (is(op, "Softmax")) return lower_softmax(k, false, sink);
  if (is(op, "LogSoftmax")) return lower_softmax(k, true, sink);
  if (is(op, "LayerNormalization")) return lower_layer_norm(k, sink);
  if (is(op, "BatchNormalization")) return lower_batch_norm(k, sink);
  if (is(op, "Copy")) return lower_copy(k, sink);
  if (is(op, "Cast")) return lower_cast(k, sink);
  if (is(op, "Transpose")) return lower_transpose(k, sink);
  if (is(op, "Slice")) return lower_slice(k, sink);
  if (is(op, "Concat")) return lower_parts(k, true, sink);
  if (is(op, "Split")) return lower_parts(k, false, sink);
  KILN_RETURN_ERROR(Error::kKernelNotFound, "cuda: node '%s': no CUDA kernel runs '%s'", k.node, op);
}

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR
