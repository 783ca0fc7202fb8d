#include "lower.h"

#include <math.h>
#include <string.h>

#include "kiln/runtime/check.h"

// In a lowering function: fails the kernel with a message naming its node.
#define KILN_CUDA_KERNEL_CHECK(kernel, cond, fmt, ...)                                                                 \
  KILN_CHECK_OR_RETURN(cond, ::kiln::Error::kInvalidProgram, "cuda: node '%s' (%s): " fmt, (kernel).node, (kernel).op, \
                       ##__VA_ARGS__)

namespace kiln::backends::cuda::KILN_CUDA_FLAVOR {
namespace {

constexpr uint32_t kBlock = 256;
constexpr uint64_t kMaxBlocks = 4096;

template <typename Entry, size_t N>
const Entry* find_named(const Entry (&table)[N], const char* op) {
  for (const Entry& e : table) {
    if (strcmp(e.name, op) == 0) return &e;
  }
  return nullptr;
}

bool is(const char* op, const char* name) { return strcmp(op, name) == 0; }

uint32_t blocks_for(uint64_t work, uint64_t per_block) {
  uint64_t blocks = (work + per_block - 1) / per_block;
  if (blocks == 0) blocks = 1;
  return static_cast<uint32_t>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

Launch launch_of(const KernelView& k, LaunchKind kind, uint64_t work, uint32_t block = kBlock) {
  Launch l;
  l.kind = kind;
  l.node = k.node;
  l.block = block;
  l.grid[0] = blocks_for(work, block);
  return l;
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

void contiguous_strides(const Tensor& t, int64_t* strides) {
  int64_t s = 1;
  for (int d = static_cast<int>(t.rank()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= t.dim(static_cast<uint32_t>(d));
  }
}

// Strides of `t` read as the right-aligned broadcast to `out` (0 where broadcast).
bool broadcast_strides(const Tensor& t, const int64_t* out, uint32_t rank, uint64_t* strides) {
  if (t.rank() > rank) return false;
  uint64_t s = 1;
  for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
    const int i = d - static_cast<int>(rank - t.rank());
    const int64_t dim = i >= 0 ? t.dim(static_cast<uint32_t>(i)) : 1;
    if (dim == out[d]) {
      strides[d] = dim == 1 ? 0 : s;
      s *= static_cast<uint64_t>(dim);
    } else if (dim == 1) {
      strides[d] = 0;
    } else {
      return false;
    }
  }
  return true;
}

Error check_counts(const KernelView& k, uint32_t min_in, uint32_t max_in, uint32_t min_out, uint32_t max_out) {
  KILN_CUDA_KERNEL_CHECK(
      k,
      k.num_inputs() >= min_in && k.num_inputs() <= max_in && k.num_outputs() >= min_out && k.num_outputs() <= max_out,
      "%u inputs and %u outputs", k.num_inputs(), k.num_outputs());
  for (uint32_t i = 0; i < min_in; ++i) KILN_CUDA_KERNEL_CHECK(k, k.input(i) != nullptr, "input %u is missing", i);
  return Error::kOk;
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

bool activation_known(const fb::FusedActivation* a) { return a == nullptr || a->kind() <= fb::Activation::MAX; }

// ---------------------------------------------------------------------------
// Element-wise

struct UnaryEntry {
  const char* name;
  UnaryOp op;
  float alpha, beta;  // defaults when the call has no UnaryParams
};

const UnaryEntry kUnary[] = {
    {"Relu", kRelu, 0.f, 0.f},
    {"Sigmoid", kSigmoid, 0.f, 0.f},
    {"Tanh", kTanh, 0.f, 0.f},
    {"Neg", kNeg, 0.f, 0.f},
    {"Abs", kAbs, 0.f, 0.f},
    {"Exp", kExp, 0.f, 0.f},
    {"Log", kLog, 0.f, 0.f},
    {"Sqrt", kSqrt, 0.f, 0.f},
    {"Erf", kErf, 0.f, 0.f},
    {"Floor", kFloor, 0.f, 0.f},
    {"Ceil", kCeil, 0.f, 0.f},
    {"Reciprocal", kReciprocal, 0.f, 0.f},
    {"Softplus", kSoftplus, 0.f, 0.f},
    {"LeakyRelu", kLeakyRelu, 0.01f, 0.f},
    {"Elu", kElu, 1.f, 0.f},
    {"HardSigmoid", kHardSigmoid, 0.2f, 0.5f},
    {"HardSwish", kHardSwish, 0.f, 0.f},
    {"Gelu", kGelu, 0.f, 0.f},
    {"Clip", kClip, -INFINITY, INFINITY},
};

Error lower_unary(const KernelView& k, const UnaryEntry& e, LaunchSink& sink) {
  // Clip's bounds come in the parameters (the planner half places a Clip
  // here only when they are constants).
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, same_shape(x, y), "input and output shapes differ");
  const auto* p = k.params<fb::UnaryParams>();
  Launch l = launch_of(k, LaunchKind::kUnary, static_cast<uint64_t>(y.numel()) / 4 + 1);
  l.unary.x = k.address(x);
  l.unary.y = k.address(y);
  l.unary.n = static_cast<uint64_t>(y.numel());
  l.unary.op = e.op;
  l.unary.alpha = p != nullptr ? p->alpha() : e.alpha;
  l.unary.beta = p != nullptr ? p->beta() : e.beta;
  if (e.op == kGelu && l.unary.beta != 0.f) l.unary.op = kGeluTanh;  // beta != 0: the tanh approximation
  return sink.emit(l);
}

struct BinaryEntry {
  const char* name;
  BinaryOp op;
};
const BinaryEntry kBinary[] = {{"Add", kAdd}, {"Sub", kSub}, {"Mul", kMul},
                               {"Div", kDiv}, {"Max", kMax}, {"Min", kMin}};

Error lower_binary(const KernelView& k, const BinaryEntry& e, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 2, 1, 1));
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  const uint32_t rank = y.rank();
  KILN_CUDA_KERNEL_CHECK(k, rank <= kMaxRank, "rank %u (at most %u)", rank, kMaxRank);
  uint64_t sa[kMaxRank], sb[kMaxRank];
  KILN_CUDA_KERNEL_CHECK(k, broadcast_strides(a, y.dims(), rank, sa) && broadcast_strides(b, y.dims(), rank, sb),
                         "inputs do not broadcast to the output shape");
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t expected = 1;
    for (const Tensor* t : {&a, &b}) {
      const int32_t i = static_cast<int32_t>(d) - static_cast<int32_t>(rank - t->rank());
      if (i >= 0 && t->dim(static_cast<uint32_t>(i)) != 1) expected = t->dim(static_cast<uint32_t>(i));
    }
    KILN_CUDA_KERNEL_CHECK(k, y.dim(d) == expected, "output dim %u is %lld, broadcasting gives %lld", d,
                           static_cast<long long>(y.dim(d)), static_cast<long long>(expected));
  }
  const auto* p = k.params<fb::BinaryParams>();
  KILN_CUDA_KERNEL_CHECK(k, p == nullptr || activation_known(p->activation()), "unknown fused activation");
  Launch l = launch_of(k, LaunchKind::kBinary, static_cast<uint64_t>(y.numel()) / 4 + 1);
  BinaryArgs& args = l.binary;
  args = BinaryArgs();
  args.a = k.address(a);
  args.b = k.address(b);
  args.y = k.address(y);
  args.n = static_cast<uint64_t>(y.numel());
  args.op = e.op;
  args.act = activation_of(p != nullptr ? p->activation() : nullptr);
  // Collapse: drop dims of 1, merge a dim into the next outer one when both
  // inputs walk the pair contiguously (or both broadcast it).
  uint32_t r = 0;
  for (uint32_t d = 0; d < rank; ++d) {
    const uint64_t dim = static_cast<uint64_t>(y.dim(d));
    if (dim == 1) continue;
    if (r > 0 && args.a_strides[r - 1] == sa[d] * dim && args.b_strides[r - 1] == sb[d] * dim) {
      args.dims[r - 1] *= static_cast<uint32_t>(dim);
      args.a_strides[r - 1] = static_cast<uint32_t>(sa[d]);
      args.b_strides[r - 1] = static_cast<uint32_t>(sb[d]);
      continue;
    }
    args.dims[r] = static_cast<uint32_t>(dim);
    args.a_strides[r] = static_cast<uint32_t>(sa[d]);
    args.b_strides[r] = static_cast<uint32_t>(sb[d]);
    ++r;
  }
  if (r == 0) {  // a single element
    args.dims[0] = 1;
    args.a_strides[0] = args.b_strides[0] = 1;
    r = 1;
  }
  args.rank = r;
  KILN_CUDA_KERNEL_CHECK(k, y.numel() < (int64_t{1} << 32), "more than 2^32 elements");
  return sink.emit(l);
}

// ---------------------------------------------------------------------------
// Linear

Launch matmul_launch(const KernelView& k, const MatMulArgs& args, uint64_t batch) {
  Launch l;
  l.kind = LaunchKind::kMatMul;
  l.node = k.node;
  l.block = kTileThreads;
  const uint64_t gx = (args.n + 15) / 16, gy = (args.m + 15) / 16;
  l.grid[0] = static_cast<uint32_t>(gx < 1024 ? (gx > 0 ? gx : 1) : 1024);
  l.grid[1] = static_cast<uint32_t>(gy < 1024 ? (gy > 0 ? gy : 1) : 1024);
  l.grid[2] = static_cast<uint32_t>(batch < 65535 ? (batch > 0 ? batch : 1) : 65535);
  l.matmul = args;
  return l;
}

Error lower_gemm(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 3, 1, 1));
  const auto* p = k.params<fb::GemmParams>();
  KILN_CUDA_KERNEL_CHECK(k, p != nullptr && activation_known(p->activation()) && !p->packed_b(),
                         "missing GemmParams, or B packed for the CPU");
  KILN_CUDA_KERNEL_CHECK(k, k.call->scratch() == nullptr || k.call->scratch()->size() == 0,
                         "has packing scratch (a CPU lowering)");
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, a.rank() == 2 && b.rank() == 2 && y.rank() == 2, "expects 2-D operands");
  const int64_t m = p->trans_a() ? a.dim(1) : a.dim(0);
  const int64_t kk = p->trans_a() ? a.dim(0) : a.dim(1);
  const int64_t kb = p->trans_b() ? b.dim(1) : b.dim(0);
  const int64_t n = p->trans_b() ? b.dim(0) : b.dim(1);
  KILN_CUDA_KERNEL_CHECK(k, kk == kb && y.dim(0) == m && y.dim(1) == n, "shapes do not multiply to the output");
  MatMulArgs args = {};
  args.a = k.address(a);
  args.b = k.address(b);
  args.y = k.address(y);
  args.m = static_cast<uint32_t>(m);
  args.n = static_cast<uint32_t>(n);
  args.k = static_cast<uint32_t>(kk);
  args.a_row = p->trans_a() ? 1 : a.dim(1);
  args.a_col = p->trans_a() ? a.dim(1) : 1;
  args.b_row = p->trans_b() ? 1 : b.dim(1);
  args.b_col = p->trans_b() ? b.dim(1) : 1;
  args.alpha = p->alpha();
  args.beta = p->beta();
  const Tensor* c = k.num_inputs() > 2 ? k.input(2) : nullptr;
  if (c != nullptr && p->beta() != 0.f) {
    uint64_t cs[2];
    KILN_CUDA_KERNEL_CHECK(k, broadcast_strides(*c, y.dims(), 2, cs), "C does not broadcast to the output");
    args.c = k.address(*c);
    args.c_row = static_cast<int64_t>(cs[0]);
    args.c_col = static_cast<int64_t>(cs[1]);
  }
  args.act = activation_of(p->activation());
  for (uint32_t i = 0; i < 4; ++i) args.batch_dims[i] = 1;
  return sink.emit(matmul_launch(k, args, 1));
}

// NumPy matmul: vectors promoted (and the promoted dim dropped from the
// output), batch dims broadcast.
Error lower_matmul(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 2, 1, 1));
  KILN_CUDA_KERNEL_CHECK(k, k.call->scratch() == nullptr || k.call->scratch()->size() == 0,
                         "has packing scratch (a CPU lowering)");
  const auto* mp = k.params<fb::MatMulParams>();
  KILN_CUDA_KERNEL_CHECK(k, mp == nullptr || !mp->packed_b(), "B packed for the CPU");
  const fb::FusedActivation* act = nullptr;
  if (mp != nullptr) act = mp->activation();
  if (const auto* bp = k.params<fb::BinaryParams>()) act = bp->activation();
  KILN_CUDA_KERNEL_CHECK(k, activation_known(act), "unknown fused activation");
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, a.rank() >= 1 && b.rank() >= 1, "MatMul of a scalar");
  const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
  const int64_t m = a_vec ? 1 : a.dim(a.rank() - 2);
  const int64_t kk = a.dim(a.rank() - 1);
  const int64_t kb = b_vec ? b.dim(0) : b.dim(b.rank() - 2);
  const int64_t n = b_vec ? 1 : b.dim(b.rank() - 1);
  KILN_CUDA_KERNEL_CHECK(k, kk == kb, "inner dimensions differ");
  const uint32_t a_batch = a_vec ? 0 : a.rank() - 2;
  const uint32_t b_batch = b_vec ? 0 : b.rank() - 2;
  const uint32_t batch_rank = a_batch > b_batch ? a_batch : b_batch;
  KILN_CUDA_KERNEL_CHECK(k, batch_rank <= 4, "more than 4 batch dims");
  KILN_CUDA_KERNEL_CHECK(k, y.rank() == batch_rank + (a_vec ? 0 : 1) + (b_vec ? 0 : 1), "output rank does not match");
  MatMulArgs args = {};
  args.a = k.address(a);
  args.b = k.address(b);
  args.y = k.address(y);
  args.m = static_cast<uint32_t>(m);
  args.n = static_cast<uint32_t>(n);
  args.k = static_cast<uint32_t>(kk);
  args.a_row = kk;
  args.a_col = 1;
  args.b_row = n;
  args.b_col = 1;
  args.alpha = 1.f;
  args.act = activation_of(act);
  // Batch dims right-aligned into 4 slots.
  uint64_t batch = 1;
  int64_t a_stride = m * kk, b_stride = kk * n;
  for (uint32_t i = 0; i < 4; ++i) args.batch_dims[i] = 1;
  for (uint32_t i = 0; i < batch_rank; ++i) {
    const uint32_t slot = 3 - i;
    const int ai = static_cast<int>(a_batch) - 1 - static_cast<int>(i);
    const int bi = static_cast<int>(b_batch) - 1 - static_cast<int>(i);
    const int64_t ad = ai >= 0 ? a.dim(static_cast<uint32_t>(ai)) : 1;
    const int64_t bd = bi >= 0 ? b.dim(static_cast<uint32_t>(bi)) : 1;
    KILN_CUDA_KERNEL_CHECK(k, ad == bd || ad == 1 || bd == 1, "batch dims do not broadcast");
    const int64_t d = ad > bd ? ad : bd;
    KILN_CUDA_KERNEL_CHECK(k, y.dim(batch_rank - 1 - i) == d, "output batch dim does not match");
    args.batch_dims[slot] = static_cast<uint32_t>(d);
    args.a_batch[slot] = ad == 1 ? 0 : a_stride;
    args.b_batch[slot] = bd == 1 ? 0 : b_stride;
    a_stride *= ad;
    b_stride *= bd;
    batch *= static_cast<uint64_t>(d);
  }
  return sink.emit(matmul_launch(k, args, batch));
}

bool read_pair(const flatbuffers::Vector<int32_t>* v, uint32_t* a, uint32_t* b) {
  if (v == nullptr || v->size() != 2 || v->Get(0) < 0 || v->Get(1) < 0) return false;
  *a = static_cast<uint32_t>(v->Get(0));
  *b = static_cast<uint32_t>(v->Get(1));
  return true;
}

// 1-D (NCW) windows run as 2-D ones of height 1.
void spatial_hw(const Tensor& t, uint32_t* h, uint32_t* w) {
  *h = t.rank() == 4 ? static_cast<uint32_t>(t.dim(2)) : 1;
  *w = static_cast<uint32_t>(t.dim(t.rank() - 1));
}

Error lower_conv(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 3, 1, 1));
  const auto* p = k.params<fb::ConvParams>();
  KILN_CUDA_KERNEL_CHECK(k, p != nullptr && !p->packed_weights() && activation_known(p->activation()),
                         "missing ConvParams, or weights packed for the CPU");
  const Tensor& x = *k.input(0);
  const Tensor& w = *k.input(1);
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, (x.rank() == 3 || x.rank() == 4) && w.rank() == x.rank() && y.rank() == x.rank(),
                         "only 1-D and 2-D (NCW, NCHW) convolutions");
  ConvArgs args = {};
  KILN_CUDA_KERNEL_CHECK(k,
                         read_pair(p->kernel(), &args.kh, &args.kw) && read_pair(p->strides(), &args.sh, &args.sw) &&
                             read_pair(p->dilations(), &args.dh, &args.dw),
                         "kernel, strides and dilations must be pairs");
  KILN_CUDA_KERNEL_CHECK(
      k, p->pads() != nullptr && p->pads()->size() == 4 && p->pads()->Get(0) >= 0 && p->pads()->Get(1) >= 0,
      "pads must be 4 non-negative values");
  args.pt = static_cast<uint32_t>(p->pads()->Get(0));
  args.pl = static_cast<uint32_t>(p->pads()->Get(1));
  KILN_CUDA_KERNEL_CHECK(k, p->group() > 0, "group must be positive");
  args.groups = static_cast<uint32_t>(p->group());
  args.c = static_cast<uint32_t>(x.dim(1));
  args.m = static_cast<uint32_t>(w.dim(0));
  spatial_hw(x, &args.h, &args.w_);
  spatial_hw(y, &args.oh, &args.ow);
  uint32_t wkh, wkw;
  spatial_hw(w, &wkh, &wkw);
  KILN_CUDA_KERNEL_CHECK(k,
                         args.c % args.groups == 0 && args.m % args.groups == 0 &&
                             static_cast<uint32_t>(w.dim(1)) * args.groups == args.c && wkh == args.kh &&
                             wkw == args.kw && y.dim(0) == x.dim(0) && y.dim(1) == w.dim(0),
                         "weight, groups and shapes disagree");
  KILN_CUDA_KERNEL_CHECK(k, bias == nullptr || bias->numel() == w.dim(0), "bias must have M elements");
  args.x = k.address(x);
  args.w = k.address(w);
  args.bias = bias != nullptr ? k.address(*bias) : nullptr;
  args.y = k.address(y);
  args.total = static_cast<uint64_t>(y.numel());
  args.act = activation_of(p->activation());
  Launch l = launch_of(k, LaunchKind::kConv, args.total);
  l.conv = args;
  return sink.emit(l);
}

// ---------------------------------------------------------------------------
// Pooling and reductions

Error lower_pool(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::PoolParams>();
  KILN_CUDA_KERNEL_CHECK(k, p != nullptr, "missing PoolParams");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(
      k, (x.rank() == 3 || x.rank() == 4) && y.rank() == x.rank() && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1),
      "only 1-D and 2-D (NCW, NCHW) windows");
  PoolArgs args = {};
  KILN_CUDA_KERNEL_CHECK(k, read_pair(p->kernel(), &args.kh, &args.kw) && read_pair(p->strides(), &args.sh, &args.sw),
                         "kernel and strides must be pairs");
  if (!read_pair(p->dilations(), &args.dh, &args.dw)) args.dh = args.dw = 1;
  KILN_CUDA_KERNEL_CHECK(k, p->pads() != nullptr && p->pads()->size() == 4, "pads must be 4 values");
  for (uint32_t i = 0; i < 4; ++i) KILN_CUDA_KERNEL_CHECK(k, p->pads()->Get(i) >= 0, "negative pad");
  args.pt = static_cast<uint32_t>(p->pads()->Get(0));
  args.pl = static_cast<uint32_t>(p->pads()->Get(1));
  args.pb = static_cast<uint32_t>(p->pads()->Get(2));
  args.pr = static_cast<uint32_t>(p->pads()->Get(3));
  KILN_CUDA_KERNEL_CHECK(k, args.kh > 0 && args.kw > 0 && args.sh > 0 && args.sw > 0 && args.dh > 0 && args.dw > 0,
                         "kernel, strides and dilations must be positive");
  spatial_hw(x, &args.h, &args.w);
  spatial_hw(y, &args.oh, &args.ow);
  args.is_max = p->kind() == fb::PoolKind::MAXIMUM;
  args.include_pad = p->count_include_pad();
  args.x = k.address(x);
  args.y = k.address(y);
  args.total = static_cast<uint64_t>(y.numel());
  Launch l = launch_of(k, LaunchKind::kPool, args.total);
  l.pool = args;
  return sink.emit(l);
}

constexpr uint32_t kReduceBlock = 128;  // 4 warps, one output each

Error emit_reduce(const KernelView& k, const Tensor& x, const Tensor& y, const bool* reduced, ReduceKind op,
                  LaunchSink& sink) {
  KILN_CUDA_KERNEL_CHECK(k, x.rank() <= kMaxRank && x.numel() < (int64_t{1} << 32), "rank or size too large");
  int64_t strides[kMaxRank];
  contiguous_strides(x, strides);
  ReduceArgs args = {};
  args.x = k.address(x);
  args.y = k.address(y);
  args.op = op;
  args.outputs = 1;
  args.count = 1;
  for (uint32_t d = 0; d < x.rank(); ++d) {
    const uint32_t dim = static_cast<uint32_t>(x.dim(d));
    if (reduced[d]) {
      args.reduced_dims[args.reduced_rank] = dim;
      args.reduced_strides[args.reduced_rank++] = static_cast<uint32_t>(strides[d]);
      args.count *= dim;
    } else {
      args.kept_dims[args.kept_rank] = dim;
      args.kept_strides[args.kept_rank++] = static_cast<uint32_t>(strides[d]);
      args.outputs *= dim;
    }
  }
  KILN_CUDA_KERNEL_CHECK(k, args.count > 0 || op == kReduceSum, "reduces an empty set");
  Launch l = launch_of(k, LaunchKind::kReduce, args.outputs, kReduceBlock / 32);
  l.block = kReduceBlock;
  l.reduce = args;
  return sink.emit(l);
}

Error lower_global_pool(const KernelView& k, bool is_max, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, x.rank() >= 2 && y.rank() == x.rank() && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1),
                         "expects N and C kept");
  bool reduced[kMaxRank] = {};
  for (uint32_t d = 2; d < x.rank() && d < kMaxRank; ++d) reduced[d] = true;
  return emit_reduce(k, x, y, reduced, is_max ? kReduceMax : kReduceMean, sink);
}

struct ReduceEntry {
  const char* name;
  ReduceKind op;
};
const ReduceEntry kReduce[] = {
    // clang-format off
    {"ReduceSum", kReduceSum},       {"ReduceMean", kReduceMean},     {"ReduceMax", kReduceMax},
    {"ReduceMin", kReduceMin},       {"ReduceProd", kReduceProd},     {"ReduceL1", kReduceL1},
    {"ReduceL2", kReduceL2},         {"ReduceLogSum", kReduceLogSum}, {"ReduceLogSumExp", kReduceLogSumExp},
    // clang-format on
    {"ReduceSumSquare", kReduceSumSquare},
};

// ReduceParams: sorted, non-negative axes (at least one); the output keeps
// every other dim, and the reduced ones as 1 with keepdims.
Error lower_reduce(const KernelView& k, const ReduceEntry& e, LaunchSink& sink) {
  KILN_CUDA_KERNEL_CHECK(k, k.num_inputs() >= 1 && k.input(0) != nullptr && k.num_outputs() == 1,
                         "expects one data input and one output");
  const auto* p = k.params<fb::ReduceParams>();
  KILN_CUDA_KERNEL_CHECK(k, p != nullptr && p->axes() != nullptr && p->axes()->size() > 0, "missing ReduceParams");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, x.rank() <= kMaxRank, "rank %u", x.rank());
  bool reduced[kMaxRank] = {};
  for (uint32_t i = 0; i < p->axes()->size(); ++i) {
    const int32_t axis = p->axes()->Get(i);
    KILN_CUDA_KERNEL_CHECK(k, axis >= 0 && static_cast<uint32_t>(axis) < x.rank() && !reduced[axis], "bad axis %d",
                           axis);
    reduced[axis] = true;
  }
  uint32_t r = 0;
  for (uint32_t d = 0; d < x.rank(); ++d) {
    if (reduced[d] && !p->keepdims()) continue;
    const int64_t expected = reduced[d] ? 1 : x.dim(d);
    KILN_CUDA_KERNEL_CHECK(k, r < y.rank() && y.dim(r) == expected, "output shape does not match");
    ++r;
  }
  KILN_CUDA_KERNEL_CHECK(k, r == y.rank(), "output rank does not match");
  return emit_reduce(k, x, y, reduced, e.op, sink);
}

// ---------------------------------------------------------------------------
// Normalisation

constexpr uint32_t kRowBlock = 128;

Error lower_softmax(const KernelView& k, bool log, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::AxisParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, same_shape(x, y), "input and output shapes differ");
  KILN_CUDA_KERNEL_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(), "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  const uint64_t outer = dims_product(x, 0, axis), inner = dims_product(x, axis + 1, x.rank());
  Launch l = launch_of(k, LaunchKind::kSoftmax, outer * inner, 1);
  l.block = kRowBlock;
  l.softmax.x = k.address(x);
  l.softmax.y = k.address(y);
  l.softmax.rows = static_cast<uint32_t>(outer * inner);
  l.softmax.n = static_cast<uint32_t>(x.dim(axis));
  l.softmax.inner = static_cast<uint32_t>(inner);
  l.softmax.log = log;
  return sink.emit(l);
}

Error lower_layer_norm(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 2, 3, 1, 3));
  KILN_CUDA_KERNEL_CHECK(k, k.num_outputs() != 2, "expects 1 or 3 outputs");
  const auto* p = k.params<fb::LayerNormParams>();
  const Tensor& x = *k.input(0);
  const Tensor& scale = *k.input(1);
  const Tensor* bias = k.num_inputs() > 2 ? k.input(2) : nullptr;
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < x.rank(),
                         "missing LayerNormParams or bad axis");
  KILN_CUDA_KERNEL_CHECK(k, same_shape(x, y), "X and Y shapes differ");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  const uint64_t outer = dims_product(x, 0, axis), inner = dims_product(x, axis, x.rank());
  KILN_CUDA_KERNEL_CHECK(k, static_cast<uint64_t>(scale.numel()) == inner, "Scale must have %llu elements",
                         static_cast<unsigned long long>(inner));
  KILN_CUDA_KERNEL_CHECK(k, bias == nullptr || static_cast<uint64_t>(bias->numel()) == inner,
                         "B must have %llu elements", static_cast<unsigned long long>(inner));
  for (uint32_t i = 1; i < k.num_outputs(); ++i) {
    KILN_CUDA_KERNEL_CHECK(k, static_cast<uint64_t>(k.output(i).numel()) == outer, "output %u must have %llu elements",
                           i, static_cast<unsigned long long>(outer));
  }
  Launch l = launch_of(k, LaunchKind::kLayerNorm, outer, 1);
  l.block = kRowBlock;
  LayerNormArgs& args = l.layer_norm;
  args = LayerNormArgs();
  args.x = k.address(x);
  args.scale = k.address(scale);
  args.bias = bias != nullptr ? k.address(*bias) : nullptr;
  args.y = k.address(y);
  if (k.num_outputs() == 3) {
    args.mean = k.address(k.output(1));
    args.inv_std = k.address(k.output(2));
  }
  args.rows = static_cast<uint32_t>(outer);
  args.n = static_cast<uint32_t>(inner);
  args.epsilon = p->epsilon();
  return sink.emit(l);
}

// BatchNormalization (inference): X, scale, B, mean, var.
Error lower_batch_norm(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 5, 5, 1, 1));
  const auto* p = k.params<fb::BatchNormParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, x.rank() >= 2 && same_shape(x, y), "expects N, C, ... with Y shaped as X");
  const int64_t channels = x.dim(1);
  for (uint32_t i = 1; i < 5; ++i) {
    KILN_CUDA_KERNEL_CHECK(k, k.input(i)->numel() == channels, "input %u must have C elements", i);
  }
  Launch l = launch_of(k, LaunchKind::kBatchNorm, static_cast<uint64_t>(y.numel()));
  BatchNormArgs& args = l.batch_norm;
  args.x = k.address(x);
  args.scale = k.address(*k.input(1));
  args.bias = k.address(*k.input(2));
  args.mean = k.address(*k.input(3));
  args.var = k.address(*k.input(4));
  args.y = k.address(y);
  args.total = static_cast<uint64_t>(y.numel());
  args.channels = static_cast<uint32_t>(channels);
  args.inner = static_cast<uint32_t>(dims_product(x, 2, x.rank()));
  args.epsilon = p != nullptr ? p->epsilon() : 1e-5f;
  return sink.emit(l);
}

// ---------------------------------------------------------------------------
// Data movement: every op here is one strided copy per part.

Error emit_strided(const KernelView& k, const Tensor& x, const Tensor& y, const StridedArgs& args, LaunchSink& sink) {
  Launch l = launch_of(k, LaunchKind::kStrided, args.n);
  l.strided = args;
  l.strided.x = k.address(x);
  l.strided.y = k.address(y);
  return args.n == 0 ? Error::kOk : sink.emit(l);
}

// A view that got its own bytes (aliased views need no work).
Error lower_copy(const KernelView& k, LaunchSink& sink) {
  KILN_CUDA_KERNEL_CHECK(k, k.num_inputs() >= 1 && k.input(0) != nullptr && k.num_outputs() == 1,
                         "expects a data input and one output");
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k, x.nbytes() == y.nbytes() && x.nbytes() % 4 == 0, "byte size changes");
  if (x.arena() == y.arena() && x.offset() == y.offset()) return Error::kOk;
  StridedArgs args = {};
  args.n = x.nbytes() / 4;
  args.rank = 1;
  args.dims[0] = static_cast<uint32_t>(args.n);
  args.x_strides[0] = args.y_strides[0] = 1;
  return emit_strided(k, x, y, args, sink);
}

Error lower_transpose(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::TransposeParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k,
                         p != nullptr && p->perm() != nullptr && p->perm()->size() == x.rank() &&
                             y.rank() == x.rank() && x.rank() <= kMaxRank,
                         "missing TransposeParams or rank mismatch");
  int64_t xs[kMaxRank];
  contiguous_strides(x, xs);
  StridedArgs args = {};
  args.rank = y.rank();
  args.n = static_cast<uint64_t>(y.numel());
  contiguous_strides(y, args.y_strides);
  bool seen[kMaxRank] = {};
  for (uint32_t d = 0; d < y.rank(); ++d) {
    const int32_t from = p->perm()->Get(d);
    KILN_CUDA_KERNEL_CHECK(k,
                           from >= 0 && static_cast<uint32_t>(from) < x.rank() && !seen[from] &&
                               x.dim(static_cast<uint32_t>(from)) == y.dim(d),
                           "bad permutation");
    seen[from] = true;
    args.dims[d] = static_cast<uint32_t>(y.dim(d));
    args.x_strides[d] = xs[from];
  }
  return emit_strided(k, x, y, args, sink);
}

Error lower_slice(const KernelView& k, LaunchSink& sink) {
  KILN_RETURN_IF_ERROR(check_counts(k, 1, 1, 1, 1));
  const auto* p = k.params<fb::SliceParams>();
  const Tensor& x = *k.input(0);
  const Tensor& y = k.output(0);
  KILN_CUDA_KERNEL_CHECK(k,
                         p != nullptr && p->starts() != nullptr && p->steps() != nullptr && y.rank() == x.rank() &&
                             p->starts()->size() == x.rank() && p->steps()->size() == x.rank() && x.rank() <= kMaxRank,
                         "missing SliceParams or rank mismatch");
  int64_t xs[kMaxRank];
  contiguous_strides(x, xs);
  StridedArgs args = {};
  args.rank = y.rank();
  args.n = static_cast<uint64_t>(y.numel());
  contiguous_strides(y, args.y_strides);
  for (uint32_t d = 0; d < x.rank(); ++d) {
    const int64_t start = p->starts()->Get(d), step = p->steps()->Get(d), count = y.dim(d), dim = x.dim(d);
    if (count == 0) return Error::kOk;
    KILN_CUDA_KERNEL_CHECK(k, step != 0 && start >= 0 && start < dim, "dim %u: start outside the input", d);
    if (count > 1) {
      const int64_t room = step > 0 ? dim - 1 - start : start;
      const int64_t magnitude = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
      KILN_CUDA_KERNEL_CHECK(k, magnitude <= room / (count - 1), "dim %u: slice runs past the input", d);
    }
    args.x_base += start * xs[d];
    args.dims[d] = static_cast<uint32_t>(count);
    args.x_strides[d] = count > 1 ? step * xs[d] : 0;
  }
  return emit_strided(k, x, y, args, sink);
}

// Concat and Split: the parts' extents along `axis` add up to the whole's,
// every other dim equal; one [outer, row] copy per part.
Error lower_parts(const KernelView& k, bool concat, LaunchSink& sink) {
  const uint32_t parts = concat ? k.num_inputs() : k.num_outputs();
  KILN_CUDA_KERNEL_CHECK(k, parts >= 1 && (concat ? k.num_outputs() == 1 : k.num_inputs() == 1 && k.input(0)),
                         "bad operand count");
  const auto* p = k.params<fb::AxisParams>();
  const Tensor& whole = concat ? k.output(0) : *k.input(0);
  KILN_CUDA_KERNEL_CHECK(k, p != nullptr && p->axis() >= 0 && static_cast<uint32_t>(p->axis()) < whole.rank(),
                         "bad axis");
  const uint32_t axis = static_cast<uint32_t>(p->axis());
  int64_t total = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    const Tensor* t = concat ? k.input(i) : &k.output(i);
    KILN_CUDA_KERNEL_CHECK(k, t != nullptr && t->rank() == whole.rank(), "part %u is missing or of another rank", i);
    for (uint32_t d = 0; d < whole.rank(); ++d) {
      if (d != axis) KILN_CUDA_KERNEL_CHECK(k, t->dim(d) == whole.dim(d), "part %u dim %u differs", i, d);
    }
    total += t->dim(axis);
  }
  KILN_CUDA_KERNEL_CHECK(k, total == whole.dim(axis), "the parts add up to %lld along the axis, the whole has %lld",
                         static_cast<long long>(total), static_cast<long long>(whole.dim(axis)));
  const uint64_t outer = dims_product(whole, 0, axis);
  const int64_t whole_row = static_cast<int64_t>(dims_product(whole, axis, whole.rank()));
  int64_t column = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    const Tensor& part = concat ? *k.input(i) : k.output(i);
    const int64_t row = static_cast<int64_t>(dims_product(part, axis, part.rank()));
    StridedArgs args = {};
    args.rank = 2;
    args.dims[0] = static_cast<uint32_t>(outer);
    args.dims[1] = static_cast<uint32_t>(row);
    args.n = outer * static_cast<uint64_t>(row);
    if (concat) {
      args.x_strides[0] = row;
      args.x_strides[1] = 1;
      args.y_strides[0] = whole_row;
      args.y_strides[1] = 1;
      args.y_base = column;
      KILN_RETURN_IF_ERROR(emit_strided(k, part, whole, args, sink));
    } else {
      args.x_strides[0] = whole_row;
      args.x_strides[1] = 1;
      args.x_base = column;
      args.y_strides[0] = row;
      args.y_strides[1] = 1;
      KILN_RETURN_IF_ERROR(emit_strided(k, whole, part, args, sink));
    }
    column += row;
  }
  return Error::kOk;
}

}  // namespace

Error lower_kernel(const KernelView& k, LaunchSink& sink) {
  const char* op = k.op;
  if (const UnaryEntry* e = find_named(kUnary, op)) return lower_unary(k, *e, sink);
  if (const BinaryEntry* e = find_named(kBinary, op)) return lower_binary(k, *e, sink);
  if (const ReduceEntry* e = find_named(kReduce, op)) return lower_reduce(k, *e, sink);
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
  if (is(op, "Transpose")) return lower_transpose(k, sink);
  if (is(op, "Slice")) return lower_slice(k, sink);
  if (is(op, "Concat")) return lower_parts(k, true, sink);
  if (is(op, "Split")) return lower_parts(k, false, sink);
  KILN_RETURN_ERROR(Error::kKernelNotFound, "cuda: node '%s': no CUDA kernel runs '%s'", k.node, op);
}

}  // namespace kiln::backends::cuda::KILN_CUDA_FLAVOR
