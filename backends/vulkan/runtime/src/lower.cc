#include "lower.h"

#include <math.h>
#include <string.h>

#include "backends/vulkan/vulkan_kernels.h"
#include "kiln/runtime/log.h"

// In a lowering function: fails the kernel with a message naming its node.
#define KILN_VK_KERNEL_CHECK(kernel, cond, fmt, ...)                                              \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      KILN_LOG(ERROR, "vulkan: node '%s' (%s): " fmt, (kernel).node, (kernel).op, ##__VA_ARGS__); \
      return ::kiln::Error::kInvalidProgram;                                                      \
    }                                                                                             \
  } while (0)

namespace kiln::backends::vulkan::internal {
namespace {

// The entry of a table of ops (each with a `name`) named `op`, or null.
template <typename Entry, size_t N>
const Entry* find_named(const Entry (&table)[N], const char* op) {
  for (const Entry& e : table) {
    if (strcmp(e.name, op) == 0) return &e;
  }
  return nullptr;
}

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

bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.rank() != b.rank()) return false;
  for (uint32_t d = 0; d < a.rank(); ++d) {
    if (a.dim(d) != b.dim(d)) return false;
  }
  return true;
}

uint64_t dims_product(const Tensor& t, uint32_t begin, uint32_t end) {
  uint64_t n = 1;
  for (uint32_t d = begin; d < end; ++d) n *= static_cast<uint64_t>(t.dim(d));
  return n;
}

void contiguous_strides(const Tensor& t, uint64_t* strides) {
  uint64_t s = 1;
  for (int32_t d = static_cast<int32_t>(t.rank()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= static_cast<uint64_t>(t.dim(static_cast<uint32_t>(d)));
  }
}

// NumPy broadcasting of `t` to the `rank` dims `out`: element strides, 0
// where t is broadcast. False when t does not broadcast.
bool broadcast_strides(const Tensor& t, const int64_t* out, uint32_t rank, uint64_t* strides) {
  if (t.rank() > rank) return false;
  uint64_t own[kMaxRank];
  contiguous_strides(t, own);
  const uint32_t shift = rank - t.rank();
  for (uint32_t d = 0; d < rank; ++d) {
    if (d < shift) {
      strides[d] = 0;
      continue;
    }
    const int64_t dim = t.dim(d - shift);
    if (dim == out[d]) {
      strides[d] = dim == 1 ? 0 : own[d - shift];
    } else if (dim == 1) {
      strides[d] = 0;
    } else {
      return false;
    }
  }
  return true;
}

void set_activation(const fb::FusedActivation* a, uint32_t* kind, float* alpha, float* beta) {
  *kind = a != nullptr ? static_cast<uint32_t>(a->kind()) : 0;
  *alpha = a != nullptr ? a->alpha() : 0.f;
  *beta = a != nullptr ? a->beta() : 0.f;
}

bool activation_known(const fb::FusedActivation* a) { return a == nullptr || a->kind() <= fb::Activation::MAX; }

Error check_counts(const KernelView& k, uint32_t min_in, uint32_t max_in, uint32_t min_out, uint32_t max_out) {
  KILN_VK_KERNEL_CHECK(
      k,
      k.num_inputs() >= min_in && k.num_inputs() <= max_in && k.num_outputs() >= min_out && k.num_outputs() <= max_out,
      "%u inputs and %u outputs", k.num_inputs(), k.num_outputs());
  for (uint32_t i = 0; i < min_in; ++i) KILN_VK_KERNEL_CHECK(k, k.input(i) != nullptr, "input %u is missing", i);
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Element-wise

struct UnaryOp {
  const char* name;
  uint32_t variant;
  float alpha, beta;  // defaults when the call has no UnaryParams
};

const UnaryOp kUnaryOps[] = {
    {"Relu", KILN_UNARY_RELU, 0.f, 0.f},
    {"Sigmoid", KILN_UNARY_SIGMOID, 0.f, 0.f},
    {"Tanh", KILN_UNARY_TANH, 0.f, 0.f},
    {"Neg", KILN_UNARY_NEG, 0.f, 0.f},
    {"Abs", KILN_UNARY_ABS, 0.f, 0.f},
    {"Exp", KILN_UNARY_EXP, 0.f, 0.f},
    {"Log", KILN_UNARY_LOG, 0.f, 0.f},
    {"Sqrt", KILN_UNARY_SQRT, 0.f, 0.f},
    {"Erf", KILN_UNARY_ERF, 0.f, 0.f},
    {"Floor", KILN_UNARY_FLOOR, 0.f, 0.f},
    {"Ceil", KILN_UNARY_CEIL, 0.f, 0.f},
    {"Reciprocal", KILN_UNARY_RECIPROCAL, 0.f, 0.f},
    {"Softplus", KILN_UNARY_SOFTPLUS, 0.f, 0.f},
    {"LeakyRelu", KILN_UNARY_LEAKY_RELU, 0.01f, 0.f},
    {"Elu", KILN_UNARY_ELU, 1.f, 0.f},
    {"HardSigmoid", KILN_UNARY_HARD_SIGMOID, 0.2f, 0.5f},
    {"HardSwish", KILN_UNARY_HARD_SWISH, 0.f, 0.f},
    {"Gelu", KILN_UNARY_GELU, 0.f, 0.f},
    {"Clip", KILN_UNARY_CLIP, -INFINITY, INFINITY},
    {"PowScalar", KILN_UNARY_POW_SCALAR, 1.f, 0.f},
};

const UnaryOp* find_unary(const char* op) { return find_named(kUnaryOps, op); }

Error lower_unary(const KernelView& k, const UnaryOp& op, const Limits& limits, LaunchSink& sink) {
  // Clip's bounds come in the parameters; bounds computed at run time stay
  // on the CPU (the planner half does not place such a Clip here).
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, same_shape(x, y), "input and output shapes differ");
  const auto* p = k.params<fb::UnaryParams>();
  UnaryPush push;
  push.n = static_cast<uint32_t>(y.numel());
  push.alpha = p != nullptr ? p->alpha() : op.alpha;
  push.beta = p != nullptr ? p->beta() : op.beta;
  Launch d;
  d.shader = kShaderUnary;
  d.variant = op.variant;
  add(d, x, false);
  add(d, y, true);
  set_push(d, push);
  d.groups[0] = groups_for(push.n, limits);
  return sink.emit(d);
}

struct BinaryOp {
  const char* name;
  uint32_t variant;
};

const BinaryOp kBinaryOps[] = {
    {"Add", KILN_BINARY_ADD}, {"Sub", KILN_BINARY_SUB}, {"Mul", KILN_BINARY_MUL}, {"Div", KILN_BINARY_DIV},
    {"Pow", KILN_BINARY_POW}, {"Max", KILN_BINARY_MAX}, {"Min", KILN_BINARY_MIN},
};

const BinaryOp* find_binary(const char* op) { return find_named(kBinaryOps, op); }

Error lower_binary(const KernelView& k, const BinaryOp& op, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 2, 1, 1));
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  const uint32_t rank = y.rank();
  uint64_t sa[kMaxRank], sb[kMaxRank];
  KILN_VK_KERNEL_CHECK(k, rank <= kMaxRank, "rank %u", rank);
  KILN_VK_KERNEL_CHECK(k, broadcast_strides(a, y.dims(), rank, sa) && broadcast_strides(b, y.dims(), rank, sb),
                       "inputs do not broadcast to the output shape");
  // The output must be exactly the broadcast of the inputs.
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t expected = 1;
    for (const Tensor* t : {&a, &b}) {
      const int32_t i = static_cast<int32_t>(d) - static_cast<int32_t>(rank - t->rank());
      if (i >= 0 && t->dim(static_cast<uint32_t>(i)) != 1) expected = t->dim(static_cast<uint32_t>(i));
    }
    KILN_VK_KERNEL_CHECK(k, y.dim(d) == expected, "output dim %u is %lld, broadcasting gives %lld", d,
                         static_cast<long long>(y.dim(d)), static_cast<long long>(expected));
  }
  const auto* p = k.params<fb::BinaryParams>();
  KILN_VK_KERNEL_CHECK(k, p == nullptr || activation_known(p->activation()), "unknown fused activation");
  BinaryPush push = {};
  push.n = static_cast<uint32_t>(y.numel());
  set_activation(p != nullptr ? p->activation() : nullptr, &push.act, &push.act_alpha, &push.act_beta);
  // Collapse: drop dims of 1, merge a dim into the next outer one when
  // both inputs walk the pair contiguously (or both broadcast it).
  uint32_t r = 0;
  for (uint32_t d = 0; d < rank; ++d) {
    const uint64_t dim = static_cast<uint64_t>(y.dim(d));
    if (dim == 1) continue;
    if (r > 0 && push.a_strides[r - 1] == sa[d] * dim && push.b_strides[r - 1] == sb[d] * dim) {
      push.dims[r - 1] *= static_cast<uint32_t>(dim);
      push.a_strides[r - 1] = static_cast<uint32_t>(sa[d]);
      push.b_strides[r - 1] = static_cast<uint32_t>(sb[d]);
      continue;
    }
    push.dims[r] = static_cast<uint32_t>(dim);
    push.a_strides[r] = static_cast<uint32_t>(sa[d]);
    push.b_strides[r] = static_cast<uint32_t>(sb[d]);
    ++r;
  }
  push.rank = r;
  Launch d;
  d.shader = kShaderBinary;
  d.variant = op.variant;
  add(d, a, false);
  add(d, b, false);
  add(d, y, true);
  set_push(d, push);
  const uint32_t columns = r > 0 ? push.dims[r - 1] : 1;
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
  KILN_VK_KERNEL_CHECK(k, k.num_inputs() >= 1 && k.input(0) != nullptr && k.num_outputs() == 1,
                       "expects a data input and one output");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, x.nbytes() == y.nbytes(), "byte size changes");
  if (x.arena() == y.arena() && x.offset() == y.offset()) return Error::kOk;
  const uint32_t words = static_cast<uint32_t>(x.nbytes() / 4);
  return emit_rows(x, y, {1, words, words, 0, words, 0}, false, limits, sink);
}

// ---------------------------------------------------------------------------
// Linear

Error check_groups(const KernelView& k, const Limits& limits, uint64_t x, uint64_t y, uint64_t z) {
  KILN_VK_KERNEL_CHECK(
      k, x <= limits.max_group_count[0] && y <= limits.max_group_count[1] && z <= limits.max_group_count[2],
      "needs %llu x %llu x %llu workgroups, the device allows %u x %u x %u", static_cast<unsigned long long>(x),
      static_cast<unsigned long long>(y), static_cast<unsigned long long>(z), limits.max_group_count[0],
      limits.max_group_count[1], limits.max_group_count[2]);
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

Error lower_gemm(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 3, 1, 1));
  const auto* p = k.params<fb::GemmParams>();
  KILN_VK_KERNEL_CHECK(k, p != nullptr && activation_known(p->activation()), "missing GemmParams");
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, a.rank() == 2 && b.rank() == 2 && y.rank() == 2, "expects 2-D operands");
  const int64_t m = p->trans_a() ? a.dim(1) : a.dim(0);
  const int64_t kk = p->trans_a() ? a.dim(0) : a.dim(1);
  const int64_t kb = p->trans_b() ? b.dim(1) : b.dim(0);
  const int64_t n = p->trans_b() ? b.dim(0) : b.dim(1);
  KILN_VK_KERNEL_CHECK(k, kk == kb && y.dim(0) == m && y.dim(1) == n, "shapes do not multiply to the output");
  MatMulPush push = {};
  push.m = static_cast<uint32_t>(m);
  push.n = static_cast<uint32_t>(n);
  push.k = static_cast<uint32_t>(kk);
  push.a_row = p->trans_a() ? 1u : static_cast<uint32_t>(a.dim(1));
  push.a_col = p->trans_a() ? static_cast<uint32_t>(a.dim(1)) : 1u;
  push.b_row = p->trans_b() ? 1u : static_cast<uint32_t>(b.dim(1));
  push.b_col = p->trans_b() ? static_cast<uint32_t>(b.dim(1)) : 1u;
  push.alpha = p->alpha();
  push.beta = p->beta();
  const Tensor* c = k.num_inputs() > 2 ? k.input(2) : nullptr;
  if (c != nullptr && p->beta() != 0.f) {
    uint64_t cs[2];
    KILN_VK_KERNEL_CHECK(k, broadcast_strides(*c, y.dims(), 2, cs), "C does not broadcast to the output");
    push.has_c = 1;
    push.c_row = static_cast<uint32_t>(cs[0]);
    push.c_col = static_cast<uint32_t>(cs[1]);
  }
  set_activation(p->activation(), &push.act, &push.act_alpha, &push.act_beta);
  for (uint32_t i = 0; i < 3; ++i) push.batch_dims[i] = 1;
  Launch d;
  d.shader = matmul_shader(push, limits);
  add(d, a, false);
  add(d, b, false);
  add(d, push.has_c ? *c : a, false);
  add(d, y, true);
  set_push(d, push);
  d.groups[0] = static_cast<uint32_t>(tiles(static_cast<uint64_t>(n), 32));
  d.groups[1] = static_cast<uint32_t>(tiles(static_cast<uint64_t>(m), 32));
  KILN_RETURN_IF_ERROR(check_groups(k, limits, d.groups[0], d.groups[1], 1));
  return sink.emit(d);
}

// NumPy matmul: vectors are promoted (and the promoted dim dropped from
// the output), batch dims broadcast.
Error lower_matmul(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 2, 1, 1));
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, a.rank() >= 1 && b.rank() >= 1, "MatMul of a scalar");
  const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
  const uint64_t m = a_vec ? 1 : static_cast<uint64_t>(a.dim(a.rank() - 2));
  const uint64_t kk = static_cast<uint64_t>(a.dim(a.rank() - 1));
  const uint64_t kb = b_vec ? static_cast<uint64_t>(b.dim(0)) : static_cast<uint64_t>(b.dim(b.rank() - 2));
  const uint64_t n = b_vec ? 1 : static_cast<uint64_t>(b.dim(b.rank() - 1));
  KILN_VK_KERNEL_CHECK(k, kk == kb, "inner dimensions differ");
  const uint32_t a_batch = a_vec ? 0 : a.rank() - 2;
  const uint32_t b_batch = b_vec ? 0 : b.rank() - 2;
  const uint32_t batch_rank = a_batch > b_batch ? a_batch : b_batch;
  KILN_VK_KERNEL_CHECK(k, y.rank() == batch_rank + (a_vec ? 0 : 1) + (b_vec ? 0 : 1) && batch_rank < kMaxRank,
                       "output rank %u does not match", y.rank());
  // Batch dims outermost first: extent and element strides into A and B.
  uint64_t dims[kMaxRank], as[kMaxRank], bs[kMaxRank];
  uint64_t a_mats = 1, b_mats = 1, batches = 1;
  for (int32_t d = static_cast<int32_t>(batch_rank) - 1; d >= 0; --d) {
    const int32_t da = d - static_cast<int32_t>(batch_rank - a_batch);
    const int32_t db = d - static_cast<int32_t>(batch_rank - b_batch);
    const uint64_t ea = da >= 0 ? static_cast<uint64_t>(a.dim(static_cast<uint32_t>(da))) : 1;
    const uint64_t eb = db >= 0 ? static_cast<uint64_t>(b.dim(static_cast<uint32_t>(db))) : 1;
    KILN_VK_KERNEL_CHECK(k, ea == eb || ea == 1 || eb == 1, "batch dims do not broadcast");
    const uint64_t e = ea == 1 ? eb : ea;
    KILN_VK_KERNEL_CHECK(k, static_cast<uint64_t>(y.dim(static_cast<uint32_t>(d))) == e, "output batch dim %d", d);
    dims[d] = e;
    as[d] = ea == 1 ? 0 : a_mats * m * kk;
    bs[d] = eb == 1 ? 0 : b_mats * kk * n;
    a_mats *= ea;
    b_mats *= eb;
    batches *= e;
  }
  KILN_VK_KERNEL_CHECK(k,
                       (a_vec || static_cast<uint64_t>(y.dim(batch_rank)) == m) &&
                           (b_vec || static_cast<uint64_t>(y.dim(y.rank() - 1)) == n),
                       "output shape does not match");
  MatMulPush push = {};
  push.m = static_cast<uint32_t>(m);
  push.n = static_cast<uint32_t>(n);
  push.k = static_cast<uint32_t>(kk);
  push.a_row = static_cast<uint32_t>(kk);
  push.a_col = 1;
  push.b_row = static_cast<uint32_t>(n);
  push.b_col = 1;
  push.alpha = 1.f;
  const auto* p = k.params<fb::BinaryParams>();
  KILN_VK_KERNEL_CHECK(k, p == nullptr || activation_known(p->activation()), "unknown fused activation");
  set_activation(p != nullptr ? p->activation() : nullptr, &push.act, &push.act_alpha, &push.act_beta);
  // Merge batch dims (dropping 1s) where both operands walk them
  // contiguously; the shader takes three.
  uint32_t r = 0;
  uint64_t md[kMaxRank], ma[kMaxRank], mb[kMaxRank];
  for (uint32_t d = 0; d < batch_rank; ++d) {
    if (dims[d] == 1) continue;
    if (r > 0 && ma[r - 1] == as[d] * dims[d] && mb[r - 1] == bs[d] * dims[d]) {
      md[r - 1] *= dims[d];
      ma[r - 1] = as[d];
      mb[r - 1] = bs[d];
      continue;
    }
    md[r] = dims[d];
    ma[r] = as[d];
    mb[r] = bs[d];
    ++r;
  }
  KILN_VK_KERNEL_CHECK(k, r <= 3, "%u batch dims that do not merge (3 are supported)", r);
  for (uint32_t i = 0; i < 3; ++i) {
    const bool used = i >= 3 - r;
    push.batch_dims[i] = used ? static_cast<uint32_t>(md[i - (3 - r)]) : 1;
    push.a_batch[i] = used ? static_cast<uint32_t>(ma[i - (3 - r)]) : 0;
    push.b_batch[i] = used ? static_cast<uint32_t>(mb[i - (3 - r)]) : 0;
  }
  Launch d;
  d.shader = matmul_shader(push, limits);
  add(d, a, false);
  add(d, b, false);
  add(d, a, false);  // C: unused
  add(d, y, true);
  set_push(d, push);
  d.groups[0] = static_cast<uint32_t>(tiles(n, 32));
  d.groups[1] = static_cast<uint32_t>(tiles(m, 32));
  d.groups[2] = static_cast<uint32_t>(batches);
  KILN_RETURN_IF_ERROR(check_groups(k, limits, d.groups[0], d.groups[1], batches));
  return sink.emit(d);
}

bool read_pair(const flatbuffers::Vector<int32_t>* v, int64_t* a, int64_t* b) {
  if (v == nullptr || v->size() != 2) return false;
  *a = v->Get(0);
  *b = v->Get(1);
  return true;
}

int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

// A 1 x 1 convolution with stride 1 and no padding is a matrix product per
// image and group: Y[b, g] (m x pixels) = W[g] (m x c) X[b, g] (c x pixels),
// batch dims (images, groups) in the matmul shaders' terms, the bias (one
// group only) a C broadcast along the rows.
Error lower_pointwise_conv(const KernelView& k, const ConvPush& conv, uint32_t images, const Tensor* bias,
                           const Limits& limits, LaunchSink& sink) {
  const uint32_t pixels = conv.oh * conv.ow;
  MatMulPush push = {};
  push.m = conv.m;
  push.n = pixels;
  push.k = conv.c;
  push.a_row = conv.c;
  push.a_col = 1;
  push.b_row = pixels;
  push.b_col = 1;
  push.alpha = 1.f;
  push.beta = 1.f;
  push.has_c = bias != nullptr ? 1 : 0;
  push.c_row = 1;
  push.c_col = 0;
  push.act = conv.act;
  push.act_alpha = conv.act_alpha;
  push.act_beta = conv.act_beta;
  push.batch_dims[0] = 1;
  push.batch_dims[1] = images;
  push.batch_dims[2] = conv.groups;
  push.a_batch[2] = conv.m * conv.c;
  push.b_batch[1] = conv.groups * conv.c * pixels;
  push.b_batch[2] = conv.c * pixels;
  Launch d;
  d.shader = matmul_shader(push, limits);
  add(d, *k.input(1), false);
  add(d, *k.input(0), false);
  add(d, bias != nullptr ? *bias : *k.input(1), false);
  add(d, k.output(0), true);
  set_push(d, push);
  d.groups[0] = static_cast<uint32_t>(tiles(pixels, 32));
  d.groups[1] = static_cast<uint32_t>(tiles(conv.m, 32));
  d.groups[2] = images * conv.groups;
  KILN_RETURN_IF_ERROR(check_groups(k, limits, d.groups[0], d.groups[1], d.groups[2]));
  return sink.emit(d);
}

// 2-D convolution; a 1-D one (rank 3) is 2-D with height 1.
Error lower_conv(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 3, 1, 1));
  const auto* p = k.params<fb::ConvParams>();
  KILN_VK_KERNEL_CHECK(k, p != nullptr && activation_known(p->activation()), "missing ConvParams");
  const Tensor& x = *k.input(0);
  const Tensor& w = *k.input(1);
  const Tensor& y = k.output(0);
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  KILN_VK_KERNEL_CHECK(k, (x.rank() == 4 || x.rank() == 3) && w.rank() == x.rank() && y.rank() == x.rank(),
                       "expects 3-D or 4-D input, weight and output");
  int64_t kh, kw, sh, sw, dh, dw;
  KILN_VK_KERNEL_CHECK(k,
                       read_pair(p->kernel(), &kh, &kw) && read_pair(p->strides(), &sh, &sw) &&
                           read_pair(p->dilations(), &dh, &dw) && p->pads() != nullptr && p->pads()->size() == 4,
                       "malformed ConvParams");
  const int64_t pt = p->pads()->Get(0), pl = p->pads()->Get(1), pb = p->pads()->Get(2), pr = p->pads()->Get(3);
  KILN_VK_KERNEL_CHECK(
      k, kh > 0 && kw > 0 && sh > 0 && sw > 0 && dh > 0 && dw > 0 && pt >= 0 && pl >= 0 && pb >= 0 && pr >= 0,
      "bad kernel, strides, dilations or pads");
  const bool one_d = x.rank() == 3;
  const int64_t n = x.dim(0), c = x.dim(1), h = one_d ? 1 : x.dim(2), wd = x.dim(x.rank() - 1);
  const int64_t m = y.dim(1), oh = one_d ? 1 : y.dim(2), ow = y.dim(y.rank() - 1);
  const int64_t group = p->group();
  KILN_VK_KERNEL_CHECK(k, group > 0 && c % group == 0 && m % group == 0, "group %lld does not divide the channels",
                       static_cast<long long>(group));
  const int64_t wh = one_d ? 1 : w.dim(2);
  KILN_VK_KERNEL_CHECK(k, w.dim(0) == m && w.dim(1) == c / group && wh == kh && w.dim(w.rank() - 1) == kw,
                       "weight shape does not match");
  KILN_VK_KERNEL_CHECK(k,
                       y.dim(0) == n && oh == window_out(h, kh, sh, dh, pt, pb) &&
                           ow == window_out(wd, kw, sw, dw, pl, pr) && oh > 0 && ow > 0,
                       "output shape does not match the geometry");
  if (bias != nullptr)
    KILN_VK_KERNEL_CHECK(k, bias->numel() == m, "bias must have %lld elements", static_cast<long long>(m));
  ConvPush push = {};
  push.c = static_cast<uint32_t>(c / group);
  push.h = static_cast<uint32_t>(h);
  push.w = static_cast<uint32_t>(wd);
  push.m = static_cast<uint32_t>(m / group);
  push.oh = static_cast<uint32_t>(oh);
  push.ow = static_cast<uint32_t>(ow);
  push.kh = static_cast<uint32_t>(kh);
  push.kw = static_cast<uint32_t>(kw);
  push.sh = static_cast<uint32_t>(sh);
  push.sw = static_cast<uint32_t>(sw);
  push.dh = static_cast<uint32_t>(dh);
  push.dw = static_cast<uint32_t>(dw);
  push.pt = static_cast<uint32_t>(pt);
  push.pl = static_cast<uint32_t>(pl);
  push.groups = static_cast<uint32_t>(group);
  push.has_bias = bias != nullptr ? 1 : 0;
  push.total = static_cast<uint32_t>(y.numel());
  set_activation(p->activation(), &push.act, &push.act_alpha, &push.act_beta);
  if (kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && pb == 0 && pr == 0 &&
      (group == 1 || bias == nullptr)) {
    return lower_pointwise_conv(k, push, static_cast<uint32_t>(n), bias, limits, sink);
  }
  Launch d;
  add(d, x, false);
  add(d, w, false);
  add(d, bias != nullptr ? *bias : w, false);
  add(d, y, true);
  // Few output channels per group (depthwise) or, with tiles, a short
  // reduction: one output per invocation. Otherwise blocks of 4 channels x
  // 4 pixels in registers, or the tiled implicit GEMM.
  const uint64_t reduction = static_cast<uint64_t>(push.c) * push.kh * push.kw;
  if (limits.register_blocks ? push.m < 4 : (push.m < 8 || reduction < 8)) {
    d.shader = kShaderConvDirect;
    set_rows(d, static_cast<uint64_t>(n) * m, static_cast<uint64_t>(oh * ow), limits);
  } else if (limits.register_blocks) {
    // As many 4-pixel blocks per workgroup as the image has (a power of
    // two, up to all 64 invocations); the rest of the workgroup takes more
    // 4-channel blocks.
    const uint64_t pixel_blocks = tiles(static_cast<uint64_t>(oh * ow), 4);
    push.pixel_shift = 0;
    while (push.pixel_shift < 6 && (uint64_t{1} << push.pixel_shift) < pixel_blocks) ++push.pixel_shift;
    d.shader = kShaderConvBlocked;
    d.groups[0] = static_cast<uint32_t>(tiles(static_cast<uint64_t>(oh * ow), 4u << push.pixel_shift));
    d.groups[1] = static_cast<uint32_t>(tiles(push.m, 4u * (KILN_WORKGROUP >> push.pixel_shift)));
    d.groups[2] = static_cast<uint32_t>(n * group);
    KILN_RETURN_IF_ERROR(check_groups(k, limits, d.groups[0], d.groups[1], d.groups[2]));
  } else {
    d.shader = kShaderConv;
    d.groups[0] = static_cast<uint32_t>(tiles(static_cast<uint64_t>(oh * ow), 32));
    d.groups[1] = static_cast<uint32_t>(tiles(push.m, 32));
    d.groups[2] = static_cast<uint32_t>(n * group);
    KILN_RETURN_IF_ERROR(check_groups(k, limits, d.groups[0], d.groups[1], d.groups[2]));
  }
  set_push(d, push);
  return sink.emit(d);
}

// ---------------------------------------------------------------------------
// Pooling and reductions

Error lower_pool(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::PoolParams>();
  KILN_VK_KERNEL_CHECK(k, p != nullptr && p->kind() <= fb::PoolKind::MAX, "missing PoolParams");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(
      k, (x.rank() == 3 || x.rank() == 4) && y.rank() == x.rank() && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1),
      "expects 3-D or 4-D input and output with the same N and C");
  int64_t kh, kw, sh, sw, dh, dw;
  KILN_VK_KERNEL_CHECK(k,
                       read_pair(p->kernel(), &kh, &kw) && read_pair(p->strides(), &sh, &sw) &&
                           read_pair(p->dilations(), &dh, &dw) && p->pads() != nullptr && p->pads()->size() == 4,
                       "malformed PoolParams");
  const int64_t pt = p->pads()->Get(0), pl = p->pads()->Get(1), pb = p->pads()->Get(2), pr = p->pads()->Get(3);
  const bool one_d = x.rank() == 3;
  const int64_t h = one_d ? 1 : x.dim(2), w = x.dim(x.rank() - 1);
  const int64_t oh = one_d ? 1 : y.dim(2), ow = y.dim(y.rank() - 1);
  KILN_VK_KERNEL_CHECK(k,
                       kh > 0 && kw > 0 && sh > 0 && sw > 0 && dh > 0 && dw > 0 && pt >= 0 && pl >= 0 && pb >= 0 &&
                           pr >= 0 && pt < kh * dh && pl < kw * dw,
                       "bad kernel, strides, dilations or pads");
  KILN_VK_KERNEL_CHECK(k, oh > 0 && ow > 0 && (oh - 1) * sh < h + pt + pb && (ow - 1) * sw < w + pl + pr,
                       "output size does not match the geometry");
  PoolPush push = {};
  push.total = static_cast<uint32_t>(y.numel());
  push.h = static_cast<uint32_t>(h);
  push.w = static_cast<uint32_t>(w);
  push.oh = static_cast<uint32_t>(oh);
  push.ow = static_cast<uint32_t>(ow);
  push.kh = static_cast<uint32_t>(kh);
  push.kw = static_cast<uint32_t>(kw);
  push.sh = static_cast<uint32_t>(sh);
  push.sw = static_cast<uint32_t>(sw);
  push.dh = static_cast<uint32_t>(dh);
  push.dw = static_cast<uint32_t>(dw);
  push.pt = static_cast<uint32_t>(pt);
  push.pl = static_cast<uint32_t>(pl);
  push.pb = static_cast<uint32_t>(pb);
  push.pr = static_cast<uint32_t>(pr);
  push.include_pad = p->count_include_pad() ? 1 : 0;
  Launch d;
  d.shader = kShaderPool;
  d.variant = p->kind() == fb::PoolKind::MAXIMUM ? KILN_POOL_MAX : KILN_POOL_AVERAGE;
  add(d, x, false);
  add(d, y, true);
  set_push(d, push);
  set_rows(d, push.total / (push.oh * push.ow), push.oh * push.ow, limits);
  return sink.emit(d);
}

// The input's axes split into kept and reduced groups (see reduce.comp),
// merged from the innermost axis out, dims of 1 dropped.
struct ReduceGeometry {
  uint32_t kept_rank = 0, reduced_rank = 0;
  uint64_t kept_dims[kMaxRank], kept_strides[kMaxRank];
  uint64_t reduced_dims[kMaxRank], reduced_strides[kMaxRank];
  uint64_t kept_count = 1, reduced_count = 1;
};

ReduceGeometry reduce_geometry(const Tensor& x, const bool* reduced) {
  ReduceGeometry g;
  uint64_t strides[kMaxRank];
  contiguous_strides(x, strides);
  uint64_t kd[kMaxRank], ks[kMaxRank], rd[kMaxRank], rs[kMaxRank];
  uint32_t nk = 0, nr = 0;
  int last = -1;
  for (int32_t a = static_cast<int32_t>(x.rank()) - 1; a >= 0; --a) {
    const uint64_t dim = static_cast<uint64_t>(x.dim(static_cast<uint32_t>(a)));
    if (dim == 1) continue;
    const int kind = reduced[a] ? 1 : 0;
    uint64_t* dims = kind ? rd : kd;
    uint64_t* strs = kind ? rs : ks;
    uint32_t& count = kind ? nr : nk;
    if (kind == last && strs[count - 1] * dims[count - 1] == strides[a]) {
      dims[count - 1] *= dim;
    } else {
      dims[count] = dim;
      strs[count] = strides[a];
      ++count;
    }
    last = kind;
    (kind ? g.reduced_count : g.kept_count) *= dim;
  }
  g.kept_rank = nk;
  g.reduced_rank = nr;
  for (uint32_t i = 0; i < nk; ++i) {
    g.kept_dims[i] = kd[nk - 1 - i];
    g.kept_strides[i] = ks[nk - 1 - i];
  }
  for (uint32_t i = 0; i < nr; ++i) {
    g.reduced_dims[i] = rd[nr - 1 - i];
    g.reduced_strides[i] = rs[nr - 1 - i];
  }
  return g;
}

Error emit_reduce(const KernelView& k, const Tensor& x, const Tensor& y, const bool* reduced, uint32_t variant,
                  const Limits& limits, LaunchSink& sink) {
  const ReduceGeometry g = reduce_geometry(x, reduced);
  KILN_VK_KERNEL_CHECK(k, g.kept_rank <= 4 && g.reduced_rank <= 4, "axes split into more than 4 groups");
  KILN_VK_KERNEL_CHECK(k, static_cast<uint64_t>(y.numel()) == g.kept_count, "output has %lld elements, expected %llu",
                       static_cast<long long>(y.numel()), static_cast<unsigned long long>(g.kept_count));
  KILN_VK_KERNEL_CHECK(k, g.reduced_count > 0, "empty reduction");
  ReducePush push = {};
  push.outputs = static_cast<uint32_t>(g.kept_count);
  push.count = static_cast<uint32_t>(g.reduced_count);
  push.kept_rank = g.kept_rank;
  push.reduced_rank = g.reduced_rank;
  for (uint32_t i = 0; i < g.kept_rank; ++i) {
    push.kept_dims[i] = static_cast<uint32_t>(g.kept_dims[i]);
    push.kept_strides[i] = static_cast<uint32_t>(g.kept_strides[i]);
  }
  for (uint32_t i = 0; i < g.reduced_rank; ++i) {
    push.reduced_dims[i] = static_cast<uint32_t>(g.reduced_dims[i]);
    push.reduced_strides[i] = static_cast<uint32_t>(g.reduced_strides[i]);
  }
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
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, x.rank() >= 2 && y.rank() == x.rank() && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1),
                       "expects N and C kept");
  for (uint32_t d = 2; d < y.rank(); ++d) KILN_VK_KERNEL_CHECK(k, y.dim(d) == 1, "spatial dims must be 1");
  bool reduced[kMaxRank] = {};
  for (uint32_t d = 2; d < x.rank(); ++d) reduced[d] = true;
  return emit_reduce(k, x, y, reduced, is_max ? KILN_REDUCE_MAX : KILN_REDUCE_MEAN, limits, sink);
}

struct ReduceOp {
  const char* name;
  uint32_t variant;
};

const ReduceOp kReduceOps[] = {
    {"ReduceSum", KILN_REDUCE_SUM},
    {"ReduceMean", KILN_REDUCE_MEAN},
    {"ReduceMax", KILN_REDUCE_MAX},
    {"ReduceMin", KILN_REDUCE_MIN},
    {"ReduceProd", KILN_REDUCE_PROD},
    {"ReduceL1", KILN_REDUCE_L1},
    {"ReduceL2", KILN_REDUCE_L2},
    {"ReduceLogSum", KILN_REDUCE_LOG_SUM},
    {"ReduceLogSumExp", KILN_REDUCE_LOG_SUM_EXP},
    {"ReduceSumSquare", KILN_REDUCE_SUM_SQUARE},
};

const ReduceOp* find_reduce(const char* op) { return find_named(kReduceOps, op); }

// ReduceParams: sorted, non-negative axes (at least one); the output keeps
// every other dim, and the reduced ones as 1 with keepdims.
Error lower_reduce(const KernelView& k, const ReduceOp& op, const Limits& limits, LaunchSink& sink) {
  KILN_VK_KERNEL_CHECK(k, k.num_inputs() >= 1 && k.input(0) != nullptr && k.num_outputs() == 1,
                       "expects one data input and one output");
  const auto* p = k.params<fb::ReduceParams>();
  KILN_VK_KERNEL_CHECK(k, p != nullptr && p->axes() != nullptr && p->axes()->size() > 0, "missing ReduceParams");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  bool reduced[kMaxRank] = {};
  KILN_VK_KERNEL_CHECK(k, x.rank() <= kMaxRank, "rank %u", x.rank());
  for (uint32_t i = 0; i < p->axes()->size(); ++i) {
    const int32_t axis = p->axes()->Get(i);
    KILN_VK_KERNEL_CHECK(k, axis >= 0 && static_cast<uint32_t>(axis) < x.rank() && !reduced[axis], "bad axis %d", axis);
    reduced[axis] = true;
  }
  uint32_t r = 0;
  for (uint32_t d = 0; d < x.rank(); ++d) {
    if (reduced[d] && !p->keepdims()) continue;
    const int64_t expected = reduced[d] ? 1 : x.dim(d);
    KILN_VK_KERNEL_CHECK(k, r < y.rank() && y.dim(r) == expected, "output shape does not match");
    ++r;
  }
  KILN_VK_KERNEL_CHECK(k, r == y.rank(), "output rank does not match");
  return emit_reduce(k, x, y, reduced, op.variant, limits, sink);
}

// ---------------------------------------------------------------------------
// Normalisation

Error lower_softmax(const KernelView& k, bool log, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::AxisParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, same_shape(x, y), "input and output shapes differ");
  KILN_VK_KERNEL_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  SoftmaxPush push;
  const uint64_t outer = dims_product(x, 0, axis), inner = dims_product(x, axis + 1, x.rank());
  push.rows = static_cast<uint32_t>(outer * inner);
  push.n = static_cast<uint32_t>(x.dim(axis));
  push.inner = static_cast<uint32_t>(inner);
  Launch d;
  d.shader = kShaderSoftmax;
  d.variant = log ? KILN_LOG_SOFTMAX : KILN_SOFTMAX;
  add(d, x, false);
  add(d, y, true);
  set_push(d, push);
  d.groups[0] = groups_for_rows(push.rows, limits);
  return sink.emit(d);
}

// LayerNormalization: inputs X, Scale, optional B; outputs Y and optionally
// Mean and InvStdDev (one value per row).
Error lower_layer_norm(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 3, 1, 3));
  KILN_VK_KERNEL_CHECK(k, k.num_outputs() != 2, "expects 1 or 3 outputs");
  const auto* p = k.params<fb::LayerNormParams>();
  const Tensor& x = *k.input(0);
  const Tensor& scale = *k.input(1);
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(),
                       "missing LayerNormParams or bad axis");
  KILN_VK_KERNEL_CHECK(k, same_shape(x, y), "X and Y shapes differ");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  const uint64_t outer = dims_product(x, 0, axis), inner = dims_product(x, axis, x.rank());
  KILN_VK_KERNEL_CHECK(k, static_cast<uint64_t>(scale.numel()) == inner, "Scale must have %llu elements",
                       static_cast<unsigned long long>(inner));
  if (bias != nullptr) {
    KILN_VK_KERNEL_CHECK(k, static_cast<uint64_t>(bias->numel()) == inner, "B must have %llu elements",
                         static_cast<unsigned long long>(inner));
  }
  const bool stats = k.num_outputs() == 3;
  for (uint32_t i = 1; stats && i < 3; ++i) {
    KILN_VK_KERNEL_CHECK(k, static_cast<uint64_t>(k.output(i).numel()) == outer, "output %u must have %llu elements", i,
                         static_cast<unsigned long long>(outer));
  }
  LayerNormPush push;
  push.rows = static_cast<uint32_t>(outer);
  push.n = static_cast<uint32_t>(inner);
  push.epsilon = p->epsilon();
  push.has_bias = bias != nullptr ? 1 : 0;
  push.has_stats = stats ? 1 : 0;
  Launch d;
  d.shader = kShaderLayerNorm;
  add(d, x, false);
  add(d, scale, false);
  add(d, bias != nullptr ? *bias : scale, false);
  add(d, y, true);
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
  KILN_RETURN_IF_ERROR(check_counts(k, 5, 5, 1, 1));
  const auto* p = k.params<fb::BatchNormParams>();
  KILN_VK_KERNEL_CHECK(k, p != nullptr, "missing BatchNormParams");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, same_shape(x, y) && x.rank() >= 2, "expects X and Y of one shape, rank >= 2");
  for (uint32_t i = 1; i < 5; ++i) {
    KILN_VK_KERNEL_CHECK(k, k.input(i)->numel() == x.dim(1), "input %u must have C elements", i);
  }
  BatchNormPush push;
  push.total = static_cast<uint32_t>(x.numel());
  push.channels = static_cast<uint32_t>(x.dim(1));
  push.inner = static_cast<uint32_t>(dims_product(x, 2, x.rank()));
  push.epsilon = p->epsilon();
  Launch d;
  d.shader = kShaderBatchNorm;
  for (uint32_t i = 0; i < 5; ++i) add(d, *k.input(i), false);
  add(d, y, true);
  set_push(d, push);
  set_rows(d, push.total / push.inner, push.inner, limits);
  return sink.emit(d);
}

// ---------------------------------------------------------------------------
// Data movement

// One strided_copy.comp launch: y[i] = x[base + sum index_d * strides[d]]
// over `rank` output dims, dims of 1 dropped and neighbours merged where
// the outer one's stride spans the inner one.
Error emit_strided(const Tensor& x, const Tensor& y, uint32_t rank, const int64_t* dims, const int64_t* strides,
                   int64_t base, const Limits& limits, LaunchSink& sink) {
  StridedPush push = {};
  push.n = static_cast<uint32_t>(y.numel());
  push.base = static_cast<uint32_t>(base);
  uint32_t r = 0;
  for (uint32_t d = 0; d < rank; ++d) {
    if (dims[d] == 1) continue;
    if (r > 0 && push.strides[r - 1] == strides[d] * dims[d]) {
      push.dims[r - 1] *= static_cast<uint32_t>(dims[d]);
      push.strides[r - 1] = static_cast<int32_t>(strides[d]);
      continue;
    }
    push.dims[r] = static_cast<uint32_t>(dims[d]);
    push.strides[r] = static_cast<int32_t>(strides[d]);
    ++r;
  }
  push.rank = r;
  Launch d;
  d.shader = kShaderStridedCopy;
  add(d, x, false);
  add(d, y, true);
  set_push(d, push);
  const uint32_t columns = r > 0 ? push.dims[r - 1] : 1;
  set_rows(d, push.n / columns, columns, limits);
  return sink.emit(d);
}

Error lower_transpose(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::TransposeParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k,
                       p != nullptr && p->perm() != nullptr && p->perm()->size() == x.rank() && y.rank() == x.rank() &&
                           x.rank() <= kMaxRank,
                       "missing TransposeParams or rank mismatch");
  uint64_t in_strides[kMaxRank];
  contiguous_strides(x, in_strides);
  bool seen[kMaxRank] = {};
  int64_t dims[kMaxRank], strides[kMaxRank];
  for (uint32_t d = 0; d < y.rank(); ++d) {
    const int32_t src = p->perm()->Get(d);
    KILN_VK_KERNEL_CHECK(k, src >= 0 && static_cast<uint32_t>(src) < x.rank() && !seen[src],
                         "perm is not a permutation");
    seen[src] = true;
    KILN_VK_KERNEL_CHECK(k, y.dim(d) == x.dim(static_cast<uint32_t>(src)), "output dim %u does not match", d);
    dims[d] = y.dim(d);
    strides[d] = static_cast<int64_t>(in_strides[src]);
  }
  return emit_strided(x, y, y.rank(), dims, strides, 0, limits, sink);
}

// SliceParams: per input dim a start inside it and a non-zero step; the
// output's dims are the counts. Every index read stays inside the input.
Error lower_slice(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::SliceParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k,
                       p != nullptr && p->starts() != nullptr && p->steps() != nullptr && y.rank() == x.rank() &&
                           p->starts()->size() == x.rank() && p->steps()->size() == x.rank() && x.rank() <= kMaxRank,
                       "missing SliceParams or rank mismatch");
  uint64_t in_strides[kMaxRank];
  contiguous_strides(x, in_strides);
  int64_t dims[kMaxRank], strides[kMaxRank], base = 0;
  for (uint32_t d = 0; d < x.rank(); ++d) {
    const int64_t start = p->starts()->Get(d), step = p->steps()->Get(d), count = y.dim(d), dim = x.dim(d);
    KILN_VK_KERNEL_CHECK(k, step != 0 && start >= 0 && start < dim && count >= 1, "dim %u: start outside the input", d);
    if (count > 1) {
      const int64_t room = step > 0 ? dim - 1 - start : start;
      const int64_t magnitude = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
      KILN_VK_KERNEL_CHECK(k, magnitude <= room / (count - 1), "dim %u: slice runs past the input", d);
    }
    base += start * static_cast<int64_t>(in_strides[d]);
    dims[d] = count;
    strides[d] = count > 1 ? step * static_cast<int64_t>(in_strides[d]) : 0;
  }
  return emit_strided(x, y, y.rank(), dims, strides, base, limits, sink);
}

// Concat and Split: the parts' extents along `axis` add up to the whole's,
// every other dim equal. `whole` is Concat's output or Split's input.
Error check_parts(const KernelView& k, const Tensor& whole, uint32_t axis, uint32_t parts,
                  const Tensor* (*part)(const KernelView&, uint32_t)) {
  int64_t total = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    const Tensor* t = part(k, i);
    KILN_VK_KERNEL_CHECK(k, t != nullptr && t->rank() == whole.rank(), "part %u is missing or of another rank", i);
    for (uint32_t d = 0; d < whole.rank(); ++d) {
      if (d != axis) KILN_VK_KERNEL_CHECK(k, t->dim(d) == whole.dim(d), "part %u dim %u differs", i, d);
    }
    total += t->dim(axis);
  }
  KILN_VK_KERNEL_CHECK(k, total == whole.dim(axis), "the parts add up to %lld along the axis, the whole has %lld",
                       static_cast<long long>(total), static_cast<long long>(whole.dim(axis)));
  return Error::kOk;
}

// One row copy per input, each into its columns of the output rows.
Error lower_concat(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_VK_KERNEL_CHECK(k, k.num_inputs() >= 1 && k.num_outputs() == 1, "bad operand count");
  const auto* p = k.params<fb::AxisParams>();
  const Tensor& y = k.output(0);
  KILN_VK_KERNEL_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < y.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  KILN_RETURN_IF_ERROR(
      check_parts(k, y, axis, k.num_inputs(), [](const KernelView& kv, uint32_t i) { return kv.input(i); }));
  const uint32_t outer = static_cast<uint32_t>(dims_product(y, 0, axis));
  const uint32_t y_row = static_cast<uint32_t>(dims_product(y, axis, y.rank()));
  uint32_t column = 0;
  for (uint32_t i = 0; i < k.num_inputs(); ++i) {
    const Tensor& x = *k.input(i);
    const uint32_t row = static_cast<uint32_t>(dims_product(x, axis, x.rank()));
    KILN_RETURN_IF_ERROR(emit_rows(x, y, {outer, row, row, 0, y_row, column}, true, limits, sink));
    column += row;
  }
  return Error::kOk;
}

// One row copy per output, each from its columns of the input rows.
Error lower_split(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  KILN_VK_KERNEL_CHECK(k, k.num_inputs() == 1 && k.input(0) != nullptr && k.num_outputs() >= 1, "bad operand count");
  const auto* p = k.params<fb::AxisParams>();
  const Tensor& x = *k.input(0);
  KILN_VK_KERNEL_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  KILN_RETURN_IF_ERROR(
      check_parts(k, x, axis, k.num_outputs(), [](const KernelView& kv, uint32_t i) { return &kv.output(i); }));
  const uint32_t outer = static_cast<uint32_t>(dims_product(x, 0, axis));
  const uint32_t x_row = static_cast<uint32_t>(dims_product(x, axis, x.rank()));
  uint32_t column = 0;
  for (uint32_t i = 0; i < k.num_outputs(); ++i) {
    const Tensor& y = k.output(i);
    const uint32_t row = static_cast<uint32_t>(dims_product(y, axis, y.rank()));
    KILN_RETURN_IF_ERROR(emit_rows(x, y, {outer, row, x_row, column, row, 0}, false, limits, sink));
    column += row;
  }
  return Error::kOk;
}

bool is(const char* op, const char* name) { return strcmp(op, name) == 0; }

}  // namespace

bool kernel_supported(const char* op) { return find_kernel(op) != nullptr; }

bool kernel_allows_inplace(const char* op, uint32_t input) {
  const KernelInfo* k = find_kernel(op);
  return k != nullptr && input < 32 && (k->inplace_inputs >> input & 1u) != 0;
}

Error lower_kernel(const KernelView& k, const Limits& limits, LaunchSink& sink) {
  const char* op = k.op;
  if (const UnaryOp* u = find_unary(op)) return lower_unary(k, *u, limits, sink);
  if (const BinaryOp* b = find_binary(op)) return lower_binary(k, *b, limits, sink);
  if (const ReduceOp* r = find_reduce(op)) return lower_reduce(k, *r, limits, sink);
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
  if (is(op, "Concat")) return lower_concat(k, limits, sink);
  if (is(op, "Split")) return lower_split(k, limits, sink);
  KILN_LOG(ERROR, "vulkan: node '%s': kernel '%s' has no Vulkan shader", k.node, op);
  return Error::kNotSupported;
}

}  // namespace kiln::backends::vulkan::internal
