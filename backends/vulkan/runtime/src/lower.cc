#include "lower.h"

#include <string.h>

#include "kiln/backends/common/kernel_table.h"
#include "kiln/backends/common/operand_checks.h"
#include "kiln/runtime/check.h"

namespace kiln::backends::vulkan::internal {
namespace {

static_assert(kernel_index(kUnaryKernels, "PowScalar") == KILN_UNARY_POW_SCALAR &&
                  kernel_index(kUnaryKernels, "Clip") == KILN_UNARY_CLIP &&
                  sizeof(kUnaryKernels) / sizeof(kUnaryKernels[0]) == KILN_UNARY_COUNT,
              "shader_ops.h's unary codes follow kUnaryKernels");
static_assert(kernel_index(kBinaryKernels, "Pow") == KILN_BINARY_POW &&
                  kernel_index(kBinaryKernels, "Max") == KILN_BINARY_MAX &&
                  sizeof(kBinaryKernels) / sizeof(kBinaryKernels[0]) == KILN_BINARY_COUNT,
              "shader_ops.h's binary codes follow kBinaryKernels");
static_assert(kernel_index(kReduceKernels, "ReduceSumSquare") == KILN_REDUCE_SUM_SQUARE &&
                  sizeof(kReduceKernels) / sizeof(kReduceKernels[0]) == KILN_REDUCE_COUNT,
              "shader_ops.h's reduce codes follow kReduceKernels");

// Push-constant blocks, member for member the `Push` blocks of the shaders.
struct UnaryPush {
  uint32_t n;
  float alpha, beta;
};
struct BinaryPush {
  uint32_t n, rank, act;
  float act_alpha, act_beta;
  uint32_t dims[8], a_strides[8], b_strides[8];
};
struct MatMulPush {
  uint32_t m, n, k, a_row, a_col, b_row, b_col, c_row, c_col, has_c;
  float alpha, beta;
  uint32_t act;
  float act_alpha, act_beta;
  uint32_t batch_dims[3], a_batch[3], b_batch[3];
};
struct ConvPush {
  uint32_t c, h, w, m, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, groups, has_bias, act;
  float act_alpha, act_beta;
  uint32_t total;
  uint32_t pixel_shift;
};
struct PoolPush {
  uint32_t total, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, include_pad;
};
struct ReducePush {
  uint32_t outputs, count, kept_rank, reduced_rank;
  uint32_t kept_dims[4], kept_strides[4], reduced_dims[4], reduced_strides[4];
};
struct SoftmaxPush {
  uint32_t rows, n, inner;
};
struct LayerNormPush {
  uint32_t rows, n;
  float epsilon;
  uint32_t has_bias, has_stats;
};
struct BatchNormPush {
  uint32_t total, channels, inner;
  float epsilon;
};
struct StridedPush {
  uint32_t n, rank, base, dims[8];
  int32_t strides[8];
};
struct CopyRowsPush {
  uint32_t outer, row, x_row, x_col, y_row, y_col;
};

template <typename T>
void set_push(Launch& d, const T& push) {
  static_assert(sizeof(T) <= kPushConstantBytes, "push constants exceed 128 bytes");
  memcpy(d.push, &push, sizeof(T));
}

Binding bind(const Tensor& t, bool write) {
  Binding b;
  b.arena = static_cast<uint32_t>(t.arena());
  b.offset = t.offset();
  b.bytes = t.nbytes();
  b.write = write;
  return b;
}

void add(Launch& d, const Tensor& t, bool write) { d.bindings[d.num_bindings++] = bind(t, write); }

// Workgroups for `n` elements handled by grid-stride loops of 64.
uint32_t groups_for(uint64_t n, const Limits& limits) {
  uint64_t groups = (n + KILN_WORKGROUP - 1) / KILN_WORKGROUP;
  if (groups == 0) groups = 1;
  const uint64_t cap = limits.max_group_count[0] < 65535u ? limits.max_group_count[0] : 65535u;
  return static_cast<uint32_t>(groups < cap ? groups : cap);
}

// 2-D shaders (KILN_ROW): one workgroup row per output row, in y and, past
// the y limit, z; invocations in x over the columns with a grid stride.
void set_rows(Launch& d, uint64_t rows, uint64_t columns, const Limits& limits) {
  d.groups[0] = groups_for(columns, limits);
  const uint64_t cap = limits.max_group_count[1] < 65535u ? limits.max_group_count[1] : 65535u;
  const uint64_t y = rows == 0 ? 1 : (rows < cap ? rows : cap);
  d.groups[1] = static_cast<uint32_t>(y);
  d.groups[2] = static_cast<uint32_t>((rows + y - 1) / y);
}

// One workgroup per row, `rows` rows walked with a grid stride.
uint32_t groups_for_rows(uint64_t rows, const Limits& limits) {
  const uint64_t cap = limits.max_group_count[0] < 65535u ? limits.max_group_count[0] : 65535u;
  if (rows == 0) return 1;
  return static_cast<uint32_t>(rows < cap ? rows : cap);
}

void set_activation(const fb::FusedActivation* a, uint32_t* kind, float* alpha, float* beta) {
  *kind = a != nullptr ? static_cast<uint32_t>(a->kind()) : 0;
  *alpha = a != nullptr ? a->alpha() : 0.f;
  *beta = a != nullptr ? a->beta() : 0.f;
}

// ---------------------------------------------------------------------------
// Element-wise

Error lower_unary(const KernelView& k, uint32_t op, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_unary(k));
  const Tensor& y = k.output(0);
  const auto* p = k.params<fb::UnaryParams>();
  UnaryPush push;
  push.n = static_cast<uint32_t>(y.numel());
  push.alpha = p != nullptr ? p->alpha() : kUnaryKernels[op].alpha;
  push.beta = p != nullptr ? p->beta() : kUnaryKernels[op].beta;
  Launch d;
  d.shader = kShaderUnary;
  d.variant = op;
  add(d, *k.input(0), false);
  add(d, y, true);
  set_push(d, push);
  d.groups[0] = groups_for(push.n, limits);
  return sink.emit(d);
}

Error lower_binary(const KernelView& k, uint32_t op, const Limits& limits, LaunchSink& sink) {
  StridedWalk<2> walk;
  KILN_RETURN_IF_ERROR(check_binary(k, &walk));
  const Tensor& y = k.output(0);
  const auto* p = k.params<fb::BinaryParams>();
  BinaryPush push = {};
  push.n = static_cast<uint32_t>(y.numel());
  set_activation(p != nullptr ? p->activation() : nullptr, &push.act, &push.act_alpha, &push.act_beta);
  push.rank = walk.rank;
  for (uint32_t d = 0; d < walk.rank; ++d) {
    push.dims[d] = static_cast<uint32_t>(walk.dims[d]);
    push.a_strides[d] = static_cast<uint32_t>(walk.strides[0][d]);
    push.b_strides[d] = static_cast<uint32_t>(walk.strides[1][d]);
  }
  Launch d;
  d.shader = kShaderBinary;
  d.variant = op;
  add(d, *k.input(0), false);
  add(d, *k.input(1), false);
  add(d, y, true);
  set_push(d, push);
  const uint32_t columns = walk.rank > 0 ? push.dims[walk.rank - 1] : 1;
  set_rows(d, push.n / columns, columns, limits);
  return sink.emit(d);
}

// One copy_rows.comp launch.
Error emit_rows(const Tensor& x, const Tensor& y, const CopyRowsPush& push, bool disjoint, const Limits& limits,
                LaunchSink& sink) {
  Launch d;
  d.shader = kShaderCopyRows;
  d.disjoint_writes = disjoint;
  add(d, x, false);
  add(d, y, true);
  set_push(d, push);
  set_rows(d, push.outer, push.row, limits);
  return sink.emit(d);
}

// A view that got its own bytes (aliased views need no work).
Error lower_copy(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_copy(k));
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  if (x.arena() == y.arena() && x.offset() == y.offset()) return Error::kOk;
  const uint32_t words = static_cast<uint32_t>(x.nbytes() / 4);
  return emit_rows(x, y, {1, words, words, 0, words, 0}, false, limits, sink);
}

// ---------------------------------------------------------------------------
// Linear

Error check_groups(const KernelView& k, const Limits& limits, uint64_t x, uint64_t y, uint64_t z) {
  KILN_VIEW_CHECK(k, x <= limits.max_group_count[0] && y <= limits.max_group_count[1] && z <= limits.max_group_count[2],
                  "needs %llu x %llu x %llu workgroups, the device allows %u x %u x %u",
                  static_cast<unsigned long long>(x), static_cast<unsigned long long>(y),
                  static_cast<unsigned long long>(z), limits.max_group_count[0], limits.max_group_count[1],
                  limits.max_group_count[2]);
  return Error::kOk;
}

uint64_t tiles(uint64_t n, uint64_t tile) { return n == 0 ? 1 : (n + tile - 1) / tile; }

// Both matmul shaders compute 32 x 32 tiles of Y per workgroup; the
// register-blocked one reads B as vec4 when each of B's rows is whole vec4s
// (the binding itself starts 256-byte aligned).
ShaderId matmul_shader(const MatMulPush& push, const Limits& limits) {
  if (!limits.register_blocks) return kShaderMatMul;
  bool vec4 = push.b_col == 1 && push.n % 4 == 0 && push.b_row % 4 == 0;
  for (uint32_t i = 0; i < 3; ++i) vec4 = vec4 && push.b_batch[i] % 4 == 0;
  return vec4 ? kShaderMatMulBlockedVec4 : kShaderMatMulBlocked;
}

// The matmul shaders' push constants for `g`, without its batches.
MatMulPush matmul_push(const MatrixProduct& g) {
  MatMulPush push = {};
  push.m = static_cast<uint32_t>(g.m);
  push.n = static_cast<uint32_t>(g.n);
  push.k = static_cast<uint32_t>(g.k);
  push.a_row = static_cast<uint32_t>(g.a_row);
  push.a_col = static_cast<uint32_t>(g.a_col);
  push.b_row = static_cast<uint32_t>(g.b_row);
  push.b_col = static_cast<uint32_t>(g.b_col);
  push.alpha = g.alpha;
  push.beta = g.beta;
  push.has_c = g.c != nullptr ? 1 : 0;
  push.c_row = static_cast<uint32_t>(g.c_row);
  push.c_col = static_cast<uint32_t>(g.c_col);
  set_activation(g.activation, &push.act, &push.act_alpha, &push.act_beta);
  for (uint32_t i = 0; i < 3; ++i) push.batch_dims[i] = 1;
  return push;
}

// One launch of a matmul shader: A, B, C (A stands in when absent) and Y.
Error emit_matmul(const KernelView& k, const MatMulPush& push, const Tensor& a, const Tensor& b, const Tensor* c,
                  uint64_t batches, const Limits& limits, LaunchSink& sink) {
  Launch d;
  d.shader = matmul_shader(push, limits);
  add(d, a, false);
  add(d, b, false);
  add(d, c != nullptr ? *c : a, false);
  add(d, k.output(0), true);
  set_push(d, push);
  d.groups[0] = static_cast<uint32_t>(tiles(push.n, 32));
  d.groups[1] = static_cast<uint32_t>(tiles(push.m, 32));
  d.groups[2] = static_cast<uint32_t>(batches);
  KILN_RETURN_IF_ERROR(check_groups(k, limits, d.groups[0], d.groups[1], batches));
  return sink.emit(d);
}

Error lower_gemm(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_not_packed(k));
  MatrixProduct g;
  KILN_RETURN_IF_ERROR(check_gemm(k, &g));
  return emit_matmul(k, matmul_push(g), *k.input(0), *k.input(1), g.c, 1, limits, sink);
}

// NumPy matmul: batch dims merged where both operands walk them
// contiguously (dims of 1 dropped); the shaders take three.
Error lower_matmul(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_not_packed(k));
  MatrixProduct g;
  KILN_RETURN_IF_ERROR(check_matmul(k, &g));
  uint64_t batches = 1;
  for (uint32_t d = 0; d < g.batches.rank; ++d) batches *= static_cast<uint64_t>(g.batches.dims[d]);
  StridedWalk<2>& walk = g.batches;
  collapse(&walk);
  KILN_VIEW_CHECK(k, walk.rank <= 3, "%u batch dims that do not merge (3 are supported)", walk.rank);
  MatMulPush push = matmul_push(g);
  for (uint32_t d = 0; d < walk.rank; ++d) {
    const uint32_t slot = 3 - walk.rank + d;
    push.batch_dims[slot] = static_cast<uint32_t>(walk.dims[d]);
    push.a_batch[slot] = static_cast<uint32_t>(walk.strides[0][d]);
    push.b_batch[slot] = static_cast<uint32_t>(walk.strides[1][d]);
  }
  return emit_matmul(k, push, *k.input(0), *k.input(1), nullptr, batches, limits, sink);
}

// A 1 x 1 convolution with stride 1 and no padding is a matrix product per
// image and group: Y[b, g] (m x pixels) = W[g] (m x c) X[b, g] (c x pixels),
// batch dims (images, groups) in the matmul shaders' terms, the bias (one
// group only) a C broadcast along the rows.
Error lower_pointwise_conv(const KernelView& k, const ConvPush& conv, uint32_t images, const Tensor* bias,
                           const Limits& limits, LaunchSink& sink) {
  const uint32_t pixels = conv.oh * conv.ow;
  MatrixProduct g;
  g.m = conv.m;
  g.n = pixels;
  g.k = conv.c;
  g.a_row = conv.c;
  g.a_col = 1;
  g.b_row = pixels;
  g.b_col = 1;
  g.beta = 1.f;
  g.c = bias;
  g.c_row = 1;
  MatMulPush push = matmul_push(g);
  push.act = conv.act;
  push.act_alpha = conv.act_alpha;
  push.act_beta = conv.act_beta;
  push.batch_dims[1] = images;
  push.batch_dims[2] = conv.groups;
  push.a_batch[2] = conv.m * conv.c;
  push.b_batch[1] = conv.groups * conv.c * pixels;
  push.b_batch[2] = conv.c * pixels;
  return emit_matmul(k, push, *k.input(1), *k.input(0), bias != nullptr ? bias : k.input(1), images * conv.groups,
                     limits, sink);
}

// The conv shaders' push constants for `g`, per group.
ConvPush conv_push(const KernelView& k, const WindowGeometry& g) {
  ConvPush push = {};
  push.c = static_cast<uint32_t>(g.c / g.group);
  push.m = static_cast<uint32_t>(g.m / g.group);
  store_window(g, &push);
  push.groups = static_cast<uint32_t>(g.group);
  push.has_bias = k.num_inputs() > 2 && k.input(2) != nullptr ? 1 : 0;
  push.total = static_cast<uint32_t>(k.output(0).numel());
  set_activation(k.params<fb::ConvParams>()->activation(), &push.act, &push.act_alpha, &push.act_beta);
  return push;
}

// 2-D convolution; a 1-D one (rank 3) is 2-D with height 1.
Error lower_conv(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_not_packed(k));
  WindowGeometry g;
  KILN_RETURN_IF_ERROR(check_conv(k, &g));
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  ConvPush push = conv_push(k, g);
  if (g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0 &&
      (g.group == 1 || bias == nullptr)) {
    return lower_pointwise_conv(k, push, static_cast<uint32_t>(g.n), bias, limits, sink);
  }
  const Tensor& w = *k.input(1);
  Launch d;
  add(d, *k.input(0), false);
  add(d, w, false);
  add(d, bias != nullptr ? *bias : w, false);
  add(d, k.output(0), true);
  // Few output channels per group (depthwise) or, with tiles, a short
  // reduction: one output per invocation. Otherwise blocks of 4 channels x
  // 4 pixels in registers, or the tiled implicit GEMM.
  const uint64_t pixels = static_cast<uint64_t>(g.oh * g.ow);
  const uint64_t reduction = static_cast<uint64_t>(push.c) * push.kh * push.kw;
  if (limits.register_blocks ? push.m < 4 : (push.m < 8 || reduction < 8)) {
    d.shader = kShaderConvDirect;
    set_rows(d, static_cast<uint64_t>(g.n * g.m), pixels, limits);
  } else if (limits.register_blocks) {
    // As many 4-pixel blocks per workgroup as the image has (a power of
    // two, up to all 64 invocations); the rest of the workgroup takes more
    // 4-channel blocks.
    const uint64_t pixel_blocks = tiles(pixels, 4);
    push.pixel_shift = 0;
    while (push.pixel_shift < 6 && (uint64_t{1} << push.pixel_shift) < pixel_blocks) ++push.pixel_shift;
    d.shader = kShaderConvBlocked;
    d.groups[0] = static_cast<uint32_t>(tiles(pixels, 4u << push.pixel_shift));
    d.groups[1] = static_cast<uint32_t>(tiles(push.m, 4u * (KILN_WORKGROUP >> push.pixel_shift)));
    d.groups[2] = static_cast<uint32_t>(g.n * g.group);
    KILN_RETURN_IF_ERROR(check_groups(k, limits, d.groups[0], d.groups[1], d.groups[2]));
  } else {
    d.shader = kShaderConv;
    d.groups[0] = static_cast<uint32_t>(tiles(pixels, 32));
    d.groups[1] = static_cast<uint32_t>(tiles(push.m, 32));
    d.groups[2] = static_cast<uint32_t>(g.n * g.group);
    KILN_RETURN_IF_ERROR(check_groups(k, limits, d.groups[0], d.groups[1], d.groups[2]));
  }
  set_push(d, push);
  return sink.emit(d);
}

// ---------------------------------------------------------------------------
// Pooling and reductions

Error lower_pool(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  WindowGeometry g;
  KILN_RETURN_IF_ERROR(check_pool(k, &g));
  const auto* p = k.params<fb::PoolParams>();
  PoolPush push = {};
  push.total = static_cast<uint32_t>(k.output(0).numel());
  store_window(g, &push);
  push.pb = static_cast<uint32_t>(g.pb);
  push.pr = static_cast<uint32_t>(g.pr);
  push.include_pad = p->count_include_pad() ? 1 : 0;
  Launch d;
  d.shader = kShaderPool;
  d.variant = p->kind() == fb::PoolKind::MAXIMUM ? KILN_POOL_MAX : KILN_POOL_AVERAGE;
  add(d, *k.input(0), false);
  add(d, k.output(0), true);
  set_push(d, push);
  set_rows(d, push.total / (push.oh * push.ow), push.oh * push.ow, limits);
  return sink.emit(d);
}

// reduce.comp over the kept and reduced groups of x's axes (at most 4 each).
Error emit_reduce(const KernelView& k, const bool* reduced, uint32_t variant, const Limits& limits, LaunchSink& sink) {
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  const ReduceGeometry g = reduce_geometry(x, reduced);
  KILN_VIEW_CHECK(k, g.kept_rank <= 4 && g.reduced_rank <= 4, "axes split into more than 4 groups");
  KILN_VIEW_CHECK(k, y.numel() == g.kept_count, "output has %lld elements, expected %lld",
                  static_cast<long long>(y.numel()), static_cast<long long>(g.kept_count));
  KILN_VIEW_CHECK(k, g.reduced_count > 0, "empty reduction");
  ReducePush push = {};
  store_reduce(g, &push);
  Launch d;
  d.shader = kShaderReduce;
  d.variant = variant;
  add(d, x, false);
  add(d, y, true);
  set_push(d, push);
  d.groups[0] = groups_for_rows(push.outputs, limits);
  return sink.emit(d);
}

Error lower_global_pool(const KernelView& k, bool is_max, const Limits& limits, LaunchSink& sink) {
  bool reduced[kMaxRank];
  KILN_RETURN_IF_ERROR(check_global_pool(k, reduced));
  return emit_reduce(k, reduced, is_max ? KILN_REDUCE_MAX : KILN_REDUCE_MEAN, limits, sink);
}

Error lower_reduce(const KernelView& k, uint32_t op, const Limits& limits, LaunchSink& sink) {
  bool reduced[kMaxRank];
  KILN_RETURN_IF_ERROR(check_reduce(k, reduced));
  return emit_reduce(k, reduced, op, limits, sink);
}

// ---------------------------------------------------------------------------
// Normalisation

Error lower_softmax(const KernelView& k, bool log, const Limits& limits, LaunchSink& sink) {
  AxisSplit s;
  KILN_RETURN_IF_ERROR(check_softmax(k, &s));
  SoftmaxPush push;
  push.rows = static_cast<uint32_t>(s.outer * s.inner);
  push.n = static_cast<uint32_t>(s.n);
  push.inner = static_cast<uint32_t>(s.inner);
  Launch d;
  d.shader = kShaderSoftmax;
  d.variant = log ? KILN_LOG_SOFTMAX : KILN_SOFTMAX;
  add(d, *k.input(0), false);
  add(d, k.output(0), true);
  set_push(d, push);
  d.groups[0] = groups_for_rows(push.rows, limits);
  return sink.emit(d);
}

// LayerNormalization: inputs X, Scale, optional B; outputs Y and optionally
// Mean and InvStdDev (one value per row).
Error lower_layer_norm(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  AxisSplit s;
  KILN_RETURN_IF_ERROR(check_layer_norm(k, &s));
  const Tensor& scale = *k.input(1);
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  const bool stats = k.num_outputs() == 3;
  LayerNormPush push;
  push.rows = static_cast<uint32_t>(s.outer);
  push.n = static_cast<uint32_t>(s.n);
  push.epsilon = k.params<fb::LayerNormParams>()->epsilon();
  push.has_bias = bias != nullptr ? 1 : 0;
  push.has_stats = stats ? 1 : 0;
  Launch d;
  d.shader = kShaderLayerNorm;
  add(d, *k.input(0), false);
  add(d, scale, false);
  add(d, bias != nullptr ? *bias : scale, false);
  add(d, k.output(0), true);
  // Without statistics outputs the shader writes nothing there; Scale
  // stands in for the bindings (read-only use keeps the hazards exact).
  if (stats) {
    add(d, k.output(1), true);
    add(d, k.output(2), true);
  } else {
    add(d, scale, false);
    add(d, scale, false);
  }
  set_push(d, push);
  d.groups[0] = groups_for_rows(push.rows, limits);
  return sink.emit(d);
}

Error lower_batch_norm(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  AxisSplit s;
  KILN_RETURN_IF_ERROR(check_batch_norm(k, &s));
  BatchNormPush push;
  push.total = static_cast<uint32_t>(k.input(0)->numel());
  push.channels = static_cast<uint32_t>(s.n);
  push.inner = static_cast<uint32_t>(s.inner);
  push.epsilon = k.params<fb::BatchNormParams>()->epsilon();
  Launch d;
  d.shader = kShaderBatchNorm;
  for (uint32_t i = 0; i < 5; ++i) add(d, *k.input(i), false);
  add(d, k.output(0), true);
  set_push(d, push);
  set_rows(d, push.total / push.inner, push.inner, limits);
  return sink.emit(d);
}

// ---------------------------------------------------------------------------
// Data movement

// One strided_copy.comp launch: y[i] = x[base + sum index_d * strides[d]]
// over the walk of the output, collapsed.
Error emit_strided(const KernelView& k, StridedWalk<1> walk, int64_t base, const Limits& limits, LaunchSink& sink) {
  const Tensor& y = k.output(0);
  collapse(&walk);
  StridedPush push = {};
  push.n = static_cast<uint32_t>(y.numel());
  push.base = static_cast<uint32_t>(base);
  push.rank = walk.rank;
  for (uint32_t d = 0; d < walk.rank; ++d) {
    push.dims[d] = static_cast<uint32_t>(walk.dims[d]);
    push.strides[d] = static_cast<int32_t>(walk.strides[0][d]);
  }
  Launch d;
  d.shader = kShaderStridedCopy;
  add(d, *k.input(0), false);
  add(d, y, true);
  set_push(d, push);
  const uint32_t columns = walk.rank > 0 ? push.dims[walk.rank - 1] : 1;
  set_rows(d, push.n / columns, columns, limits);
  return sink.emit(d);
}

Error lower_transpose(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  StridedWalk<1> walk;
  KILN_RETURN_IF_ERROR(check_transpose(k, &walk));
  return emit_strided(k, walk, 0, limits, sink);
}

Error lower_slice(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  StridedWalk<1> walk;
  int64_t base = 0;
  KILN_RETURN_IF_ERROR(check_slice(k, &walk, &base));
  return emit_strided(k, walk, base, limits, sink);
}

// Concat and Split: one row copy per part, each into (Concat) or from
// (Split) its columns of the whole's rows. A Concat's copies write
// disjoint columns and need no barrier between them.
Error lower_parts(const KernelView& k, bool concat, const Limits& limits, LaunchSink& sink) {
  uint32_t axis = 0;
  KILN_RETURN_IF_ERROR(check_parts(k, concat, &axis));
  const uint32_t parts = concat ? k.num_inputs() : k.num_outputs();
  const Tensor& whole = concat ? k.output(0) : *k.input(0);
  const uint32_t outer = static_cast<uint32_t>(dims_product(whole, 0, axis));
  const uint32_t whole_row = static_cast<uint32_t>(dims_product(whole, axis, whole.rank()));
  uint32_t column = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    const Tensor& part = concat ? *k.input(i) : k.output(i);
    const uint32_t row = static_cast<uint32_t>(dims_product(part, axis, part.rank()));
    const Error error = concat ? emit_rows(part, whole, {outer, row, row, 0, whole_row, column}, true, limits, sink)
                               : emit_rows(whole, part, {outer, row, whole_row, column, row, 0}, false, limits, sink);
    KILN_RETURN_IF_ERROR(error);
    column += row;
  }
  return Error::kOk;
}

bool is(const char* op, const char* name) { return strcmp(op, name) == 0; }

}  // namespace

Error lower_kernel(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  const char* op = k.op;
  if (const int u = kernel_index(kUnaryKernels, op); u >= 0) return lower_unary(k, u, limits, sink);
  if (const int b = kernel_index(kBinaryKernels, op); b >= 0) return lower_binary(k, b, limits, sink);
  if (const int r = kernel_index(kReduceKernels, op); r >= 0) return lower_reduce(k, r, limits, sink);
  if (is(op, "Copy")) return lower_copy(k, limits, sink);
  if (is(op, "Gemm")) return lower_gemm(k, limits, sink);
  if (is(op, "MatMul")) return lower_matmul(k, limits, sink);
  if (is(op, "Conv")) return lower_conv(k, limits, sink);
  if (is(op, "Pool")) return lower_pool(k, limits, sink);
  if (is(op, "GlobalAveragePool")) return lower_global_pool(k, false, limits, sink);
  if (is(op, "GlobalMaxPool")) return lower_global_pool(k, true, limits, sink);
  if (is(op, "Softmax")) return lower_softmax(k, false, limits, sink);
  if (is(op, "LogSoftmax")) return lower_softmax(k, true, limits, sink);
  if (is(op, "LayerNormalization")) return lower_layer_norm(k, limits, sink);
  if (is(op, "BatchNormalization")) return lower_batch_norm(k, limits, sink);
  if (is(op, "Transpose")) return lower_transpose(k, limits, sink);
  if (is(op, "Slice")) return lower_slice(k, limits, sink);
  if (is(op, "Concat")) return lower_parts(k, true, limits, sink);
  if (is(op, "Split")) return lower_parts(k, false, limits, sink);
  KILN_RETURN_ERROR(Error::kNotSupported, "vulkan: node '%s': kernel '%s' has no Vulkan shader", k.node, op);
}

}  // namespace kiln::backends::vulkan::internal
