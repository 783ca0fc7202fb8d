// Linear kernels: Conv and ConvTranspose (1-D as height 1, and 2-D; groups,
// pads, strides, dilations), ConvTransposeNd (3-D), Gemm, MatMul (batched,
// NumPy broadcasting of batch dimensions).
//
// Conv, Gemm and MatMul planned with two scratch tensors (packed A, packed
// B; sizes from gemm_blocking.h) run the blocked product of gemm.h:
// Conv as weights x im2col (a 1x1 convolution reads its input as the
// matrix). Planned without scratch they run plain loops. A depthwise
// convolution up to 7x7 (stride 1 or 2) runs its own direct kernel
// (depthwise3x3 in gemm.h, the others depthwise.h) unless the planner
// packed its weights.
// Small groups (2 to 32 channels) of a 3x3 convolution padded by 1, stride
// 1 or 2, with packed weights run a direct kernel on x86-64
// (grouped_conv.h), in bands of rows whose padded copy fits a B scratch
// block.

#include <string.h>

#include <atomic>

#include "activation.h"
#include "cpu_kernels.h"
#include "depthwise.h"
#include "gemm.h"
#include "grouped_conv.h"
#include "kernel_util.h"
#include "parallel.h"

namespace kiln {
namespace kernels {
namespace {

// ---------------------------------------------------------------------------
// Conv

struct ConvGeometry {
  int64_t n, c, h, w;  // input
  int64_t m, oh, ow;   // output channels and size
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pt, pl, pb, pr;
  int64_t group;
};

bool read_pair(const flatbuffers::Vector<int32_t>* v, int64_t* a, int64_t* b) {
  if (v == nullptr || v->size() != 2) return false;
  *a = v->Get(0);
  *b = v->Get(1);
  return true;
}

ConvGeometry conv_geometry(const KernelArgs& args) {
  const auto* p = args.params<fb::ConvParams>();
  const Tensor& x = args.in(0);
  const Tensor& y = args.out(0);
  ConvGeometry g;
  // A 1-D convolution (rank 3) is a 2-D one of height 1.
  const bool one_d = x.rank() == 3;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.h = one_d ? 1 : x.dim(2);
  g.w = x.dim(x.rank() - 1);
  g.m = y.dim(1);
  g.oh = one_d ? 1 : y.dim(2);
  g.ow = y.dim(y.rank() - 1);
  read_pair(p->kernel(), &g.kh, &g.kw);
  read_pair(p->strides(), &g.sh, &g.sw);
  read_pair(p->dilations(), &g.dh, &g.dw);
  g.pt = p->pads()->Get(0);
  g.pl = p->pads()->Get(1);
  g.pb = p->pads()->Get(2);
  g.pr = p->pads()->Get(3);
  g.group = p->group();
  return g;
}

// One group of one image as the im2col matrix sees it (x: the group's
// first channel).
GemmIm2col im2col_of(const ConvGeometry& g, const float* x) {
  GemmIm2col im;
  // clang-format off
  im.x = x; im.channels = g.c / g.group; im.h = g.h; im.w = g.w; im.kh = g.kh; im.kw = g.kw;
  im.sh = g.sh; im.sw = g.sw; im.dh = g.dh; im.dw = g.dw; im.pt = g.pt; im.pl = g.pl; im.oh = g.oh; im.ow = g.ow;
  // clang-format on
  return im;
}

int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

// Elements of one group's weights (m x k) as the planner packed them: FP32
// panels, or BF16 ones.
int64_t packed_a_elements(const KernelArgs& args, int64_t m, int64_t k) {
  return bf16_weights(args) ? gemm_prepacked_a_bf16_elements(m, k) : gemm_prepacked_a_floats(m, k);
}

// Input 1, packed by the planner, as the product's operand: FP32 panels,
// or BF16 ones (GemmMatrix::bf16) `offset` elements in.
GemmMatrix packed_operand(const KernelArgs& args, int64_t offset) {
  GemmMatrix m;
  m.prepacked = true;
  m.bf16 = bf16_weights(args);
  m.data = m.bf16 ? reinterpret_cast<const float*>(args.in(1).data_as<const uint16_t>() + offset)
                  : args.in(1).data_as<const float>() + offset;
  return m;
}

// What Conv and ConvTranspose check alike: operand counts (up to
// `max_inputs`) and dtypes, the parameters, the ranks.
Error check_conv_common(const KernelArgs& args, uint32_t max_inputs = 3) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, max_inputs, 1));
  const auto* p = args.params<fb::ConvParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "missing ConvParams");
  KILN_RETURN_IF_ERROR(check_linear_dtypes(args, p->packed_weights()));
  int64_t a, b;
  KILN_KERNEL_CHECK(args, read_pair(p->kernel(), &a, &b) && a > 0 && b > 0, "bad kernel shape");
  KILN_KERNEL_CHECK(args, read_pair(p->strides(), &a, &b) && a > 0 && b > 0, "bad strides");
  KILN_KERNEL_CHECK(args, read_pair(p->dilations(), &a, &b) && a > 0 && b > 0, "bad dilations");
  KILN_KERNEL_CHECK(args, p->pads() != nullptr && p->pads()->size() == 4, "bad pads");
  for (uint32_t i = 0; i < 4; ++i) KILN_KERNEL_CHECK(args, p->pads()->Get(i) >= 0, "negative pad");
  const Tensor& x = args.in(0);
  const Tensor& w = args.in(1);
  const Tensor& y = args.out(0);
  const bool packed_weights = p->packed_weights();
  KILN_KERNEL_CHECK(
      args, (x.rank() == 4 || x.rank() == 3) && (w.rank() == x.rank() || packed_weights) && y.rank() == x.rank(),
      "expects 3-D or 4-D input, weight and output");
  return check_activation(args, p->activation());
}

// Scratch of a packed product (m x k times k x n): none (plain loops), or
// the packed A and B blocks, large enough.
Error check_gemm_scratch(const KernelArgs& args, int64_t m, int64_t n, int64_t k) {
  if (args.num_scratch == 0) return Error::kOk;
  KILN_KERNEL_CHECK(args, args.num_scratch == 2, "expects 0 or 2 scratch tensors, has %u", args.num_scratch);
  const Tensor& a = *args.scratch[0];
  const Tensor& b = *args.scratch[1];
  KILN_KERNEL_CHECK(args, a.dtype() == DType::FLOAT32 && b.dtype() == DType::FLOAT32, "scratch must be float32");
  KILN_KERNEL_CHECK(args, a.numel() >= gemm_pack_a_floats(m, k) && b.numel() >= gemm_pack_b_floats(k, n),
                    "packing scratch too small (%lld and %lld floats, needs %lld and %lld)",
                    static_cast<long long>(a.numel()), static_cast<long long>(b.numel()),
                    static_cast<long long>(gemm_pack_a_floats(m, k)), static_cast<long long>(gemm_pack_b_floats(k, n)));
  return Error::kOk;
}

// B packed by the planner (1-D, panels over all of k) and one scratch
// tensor, packed A.
Error check_packed_b(const KernelArgs& args, int64_t m, int64_t n, int64_t k) {
  const Tensor& b = args.in(1);
  const int64_t elements = bf16_weights(args) ? gemm_prepacked_b_bf16_elements(k, n) : gemm_prepacked_b_floats(k, n);
  KILN_KERNEL_CHECK(args, b.rank() == 1 && b.numel() == elements, "packed B must have %lld elements",
                    static_cast<long long>(elements));
  KILN_KERNEL_CHECK(args,
                    args.num_scratch == 1 && args.scratch[0]->dtype() == DType::FLOAT32 &&
                        args.scratch[0]->numel() >= gemm_pack_a_floats(m, k),
                    "packed B needs one float32 scratch tensor of %lld elements",
                    static_cast<long long>(gemm_pack_a_floats(m, k)));
  return Error::kOk;
}

// The blocks of A's packing scratch a product with B packed by the planner
// was given (gemm_row_scratch_blocks; check_packed_b checked one).
int64_t pack_a_blocks(const KernelArgs& args, int64_t m, int64_t k) {
  const int64_t block = gemm_pack_a_floats(m, k);
  return block > 0 ? args.scratch[0]->numel() / block : 1;
}

// Packed product: runtime packing of both operands (two scratch tensors),
// or B packed by the planner (one).
// A 1x1 convolution with stride 1 and no padding: B is the input itself.
bool is_pointwise(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0;
}

bool packed(const KernelArgs& args) { return args.num_scratch == 2 || args.num_scratch == 1; }
float* scratch_a(const KernelArgs& args) { return args.scratch[0]->data_as<float>(); }
float* scratch_b(const KernelArgs& args) { return args.scratch[1]->data_as<float>(); }

// Depthwise 3x3, stride 1 or 2 on both axes, no dilation: the direct kernel.
bool is_depthwise3x3(const ConvGeometry& g) {
  return g.group == g.c && g.m == g.c && g.kh == 3 && g.kw == 3 && g.dh == 1 && g.dw == 1 && g.sh == g.sw &&
         (g.sh == 1 || g.sh == 2);
}

// Any other depthwise kernel up to 7x7 with those strides, dilated or not
// (depthwise.h): what the planner leaves unpacked
// (planner/ops/linear_ops.cc).
bool is_depthwise_direct(const ConvGeometry& g) {
  return g.group == g.c && g.m == g.c && g.kh <= kDepthwiseMaxKernel && g.kw <= kDepthwiseMaxKernel && g.sh == g.sw &&
         (g.sh == 1 || g.sh == 2);
}

// The output's batch and size against the geometry, and the bias.
Error check_conv_output(const KernelArgs& args, const ConvGeometry& g) {
  KILN_KERNEL_CHECK(args, args.out(0).dim(0) == g.n, "batch size changes");
  KILN_KERNEL_CHECK(args,
                    g.oh == conv_out_size(g.h, g.kh, g.sh, g.dh, g.pt, g.pb) &&
                        g.ow == conv_out_size(g.w, g.kw, g.sw, g.dw, g.pl, g.pr) && g.oh > 0 && g.ow > 0,
                    "output size does not match the geometry");
  if (args.has_input(2)) {
    KILN_KERNEL_CHECK(args, args.in(2).numel() == g.m, "bias must have %lld elements", static_cast<long long>(g.m));
  }
  return Error::kOk;
}

Error check_conv(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_conv_common(args, 4));
  const Tensor& w = args.in(1);
  const ConvGeometry g = conv_geometry(args);
  KILN_KERNEL_CHECK(args, g.group > 0 && g.c % g.group == 0 && g.m % g.group == 0,
                    "group %lld does not divide channels", static_cast<long long>(g.group));
  const int64_t mg = g.m / g.group, k = g.c / g.group * g.kh * g.kw, n = g.oh * g.ow;
  if (args.params<fb::ConvParams>()->packed_weights()) {
    // Weights packed by the planner; one scratch tensor, packed B.
    const int64_t per_group = packed_a_elements(args, mg, k);
    KILN_KERNEL_CHECK(args, w.rank() == 1 && w.numel() == g.group * per_group, "packed weights must have %lld elements",
                      static_cast<long long>(g.group * per_group));
    KILN_KERNEL_CHECK(args,
                      args.num_scratch == 1 && args.scratch[0]->dtype() == DType::FLOAT32 &&
                          args.scratch[0]->numel() >= gemm_pack_b_floats(k, n),
                      "packed weights need one float32 scratch tensor of %lld elements",
                      static_cast<long long>(gemm_pack_b_floats(k, n)));
  } else {
    const int64_t wh = w.rank() == 4 ? w.dim(2) : 1;
    KILN_KERNEL_CHECK(args, w.dim(0) == g.m && w.dim(1) == g.c / g.group && wh == g.kh && w.dim(w.rank() - 1) == g.kw,
                      "weight shape does not match");
    KILN_RETURN_IF_ERROR(check_gemm_scratch(args, mg, n, k));
  }
  KILN_RETURN_IF_ERROR(check_conv_output(args, g));
  if (args.has_input(3)) {
    // The input affine map (ConvParams.input_affine_relu): applied as B is
    // packed, so only where B is the input itself and is packed.
    KILN_KERNEL_CHECK(args, packed(args) && g.group == 1 && is_pointwise(g),
                      "an input affine map needs a 1x1 convolution with stride 1, no padding, one group "
                      "and packing scratch");
    KILN_KERNEL_CHECK(args, args.in(3).rank() == 2 && args.in(3).dim(0) == 2 && args.in(3).dim(1) == g.c,
                      "the input affine map must be [2, %lld]", static_cast<long long>(g.c));
  }
  return Error::kOk;
}

// The indices i in [lo, hi), within [0, count), whose position
// i * s - p + off on the other side lies in [0, limit): for Conv the output
// columns reading a valid input column, for ConvTranspose the input columns
// writing a valid output column.
void valid_range(int64_t count, int64_t limit, int64_t s, int64_t p, int64_t off, int64_t* lo, int64_t* hi) {
  const int64_t first = p - off;  // need i * s >= first
  *lo = first <= 0 ? 0 : (first + s - 1) / s;
  const int64_t last = limit - 1 + p - off;  // need i * s <= last
  *hi = last < 0 ? 0 : last / s + 1;
  if (*hi > count) *hi = count;
  if (*lo > *hi) *lo = *hi;
}

// One image's group of a packed convolution (run_conv_packed), packing B
// into `pack_b`, its product split across `pool` when it is given.
void run_conv_group(const KernelArgs& args, const ConvGeometry& g, int64_t n, int64_t grp, bool pointwise,
                    float* pack_b, ThreadPool* pool, int64_t pack_b_blocks = 1) {
  const bool prepacked = args.params<fb::ConvParams>()->packed_weights();
  const float* x = args.in(0).data_as<const float>();
  const float* w = args.in(1).data_as<const float>();
  const float* bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* y = args.out(0).data_as<float>();
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  const int64_t plane = g.oh * g.ow, k = cg * g.kh * g.kw;
  const float* xg = x + (n * g.c + grp * cg) * g.h * g.w;
  GemmMatrix a;
  if (prepacked) {
    a = packed_operand(args, grp * packed_a_elements(args, mg, k));
  } else {
    a.data = w + grp * mg * k;
  }
  a.ld = k;
  GemmMatrix b;
  GemmIm2col im2col;
  if (pointwise) {
    b.data = xg;
    b.ld = plane;
    if (args.has_input(3)) {  // checked: one group
      b.row_scale = args.in(3).data_as<const float>();
      b.row_shift = b.row_scale + g.c;
      b.row_relu = args.params<fb::ConvParams>()->input_affine_relu();
    }
  } else {
    im2col = im2col_of(g, xg);
  }
  GemmEpilogue epilogue;
  epilogue.row_bias = bias != nullptr ? bias + grp * mg : nullptr;
  epilogue.activation = args.params<fb::ConvParams>()->activation();
  gemm_packed(mg, plane, k, a, b, pointwise ? nullptr : &im2col, y + (n * g.m + grp * mg) * plane, plane, epilogue,
              prepacked ? nullptr : scratch_a(args), pack_b, GemmPath::kAuto, pool, pack_b_blocks);
}

// Per image and group: Y[mg][oh * ow] = W[mg][cg * kh * kw] x im2col(X),
// the bias and activation applied as each tile finishes. A 1x1 convolution
// with stride 1 and no padding multiplies by X itself. Weights packed by
// the planner skip packing A; otherwise it is packed into scratch 0.
void run_conv_packed(const KernelArgs& args, const ConvGeometry& g) {
  const bool prepacked = args.params<fb::ConvParams>()->packed_weights();
  const float* x = args.in(0).data_as<const float>();
  const float* w = args.in(1).data_as<const float>();
  const float* bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* y = args.out(0).data_as<float>();
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  const int64_t plane = g.oh * g.ow, k = cg * g.kh * g.kw;
  const bool pointwise = is_pointwise(g);
  // A first layer (few channels, stride 2): straight from the image where
  // the processor has a kernel for it (conv_s2_direct declines otherwise).
  // Both read FP32 weights: BF16 ones (bf16_weights) take the product.
  const bool fp32_weights = prepacked && !bf16_weights(args);
  const bool direct_s2 = fp32_weights && g.group == 1 && g.c <= 4 && g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1;
  // Groups of 2 to kGroupedConvMaxChannels channels, 3x3, stride 1 or 2,
  // pads 1: grouped_conv.h's direct kernel where this processor runs it.
  const bool grouped_direct = fp32_weights && g.group > 1 && cg > 1 && cg <= kGroupedConvMaxChannels && g.kh == 3 &&
                              g.kw == 3 && g.sh == g.sw && (g.sh == 1 || g.sh == 2) && g.dh == 1 && g.dw == 1 &&
                              g.pt == 1 && g.pl == 1 && g.pb == 1 && g.pr == 1 && grouped_conv3x3_available();
  for (int64_t n = 0; n < g.n; ++n) {
    if (direct_s2) {
      DirectConvS2 conv;
      // clang-format off
      conv.c = g.c; conv.h = g.h; conv.w = g.w;
      conv.kh = g.kh; conv.kw = g.kw; conv.pt = g.pt; conv.pl = g.pl;
      conv.m = g.m; conv.oh = g.oh; conv.ow = g.ow;
      // clang-format on
      conv.x = x + n * g.c * g.h * g.w;
      conv.activation = args.params<fb::ConvParams>()->activation();
#if defined(KILN_BARE_METAL)
      conv.packed_weights = w;  // firmware: one thread, no split to pay for
      conv.bias = bias;
      conv.y = y + n * g.m * plane;
      if (conv_s2_direct(conv)) continue;
#else
      // Split by output rows (each task reads the whole of the small
      // weights; a split by channels gave the first task one panel more
      // of 11 on 64 channels). Whether the kernel declines depends on the
      // geometry alone: all tasks agree.
      conv.packed_weights = w;
      conv.bias = bias;
      conv.y = y + n * g.m * plane;
      const int64_t tasks = parallel_tasks(args.pool, g.m * plane * g.c * g.kh * g.kw, g.oh);
      std::atomic<bool> declined{false};
      parallel_for(args.pool, tasks, [&](int64_t t) {
        DirectConvS2 part = conv;
        parallel_range(g.oh, tasks, t, 1, &part.oy0, &part.oy1);
        if (part.oy0 >= part.oy1) return;
        if (!conv_s2_direct(part)) declined.store(true, std::memory_order_relaxed);
      });
      if (!declined.load(std::memory_order_relaxed)) continue;
#endif
    }
    // Groups too small to split one by one run side by side, each task
    // packing into a block of B scratch of its own (as many blocks as the
    // planner gave: gemm_group_scratch_blocks); every output element is
    // computed as on one thread. With one group, the blocks are for the
    // threads' regions of its product (gemm_region_scratch_blocks).
    const int64_t b_block = gemm_pack_b_floats(k, plane);
    const int64_t blocks = prepacked ? args.scratch[0]->numel() / b_block : 1;
    if (grouped_direct && grouped_conv3x3_band_rows(cg, mg, g.w, g.sh, b_block) >= 1) {
      // Small groups of a 3x3 convolution padded by 1: the direct kernel,
      // in one B block per task (by bands of rows where the padded plane
      // is larger), whole groups per task.
      const int64_t tasks = gemm_min(blocks, parallel_tasks(args.pool, g.group * mg * plane * k, g.group));
      float* blocks_base = args.scratch[0]->data_as<float>();
      parallel_for(args.pool, tasks, [&](int64_t t) {
        int64_t g0, g1;
        parallel_range(g.group, tasks, t, 1, &g0, &g1);
        for (int64_t grp = g0; grp < g1; ++grp) {
          GroupedConv3x3 conv;
          conv.cg = cg;
          conv.mg = mg;
          conv.h = g.h;
          conv.w = g.w;
          conv.stride = g.sh;
          conv.x = x + (n * g.c + grp * cg) * g.h * g.w;
          conv.packed_weights = w + grp * gemm_prepacked_a_floats(mg, k);
          conv.bias = bias != nullptr ? bias + grp * mg : nullptr;
          conv.y = y + (n * g.m + grp * mg) * plane;
          conv.scratch = blocks_base + t * b_block;
          conv.scratch_floats = b_block;
          static_cast<void>(grouped_conv3x3(conv, args.params<fb::ConvParams>()->activation()));
        }
      });
      continue;
    }
    int64_t group_tasks = 1;
    if (blocks > 1 && parallel_tasks(args.pool, mg * plane * k, 2) == 1) {
      group_tasks = gemm_min(blocks, parallel_tasks(args.pool, g.group * mg * plane * k, g.group));
    }
    if (group_tasks > 1) {
      float* pack_b = args.scratch[0]->data_as<float>();
      parallel_for(args.pool, group_tasks, [&](int64_t t) {
        int64_t g0, g1;
        parallel_range(g.group, group_tasks, t, 1, &g0, &g1);
        for (int64_t grp = g0; grp < g1; ++grp) {
          run_conv_group(args, g, n, grp, pointwise, pack_b + t * b_block, nullptr);
        }
      });
      continue;
    }
    for (int64_t grp = 0; grp < g.group; ++grp) {
      run_conv_group(args, g, n, grp, pointwise, args.scratch[prepacked ? 0 : 1]->data_as<float>(), args.pool,
                     g.group == 1 ? blocks : 1);
    }
  }
}

void run_depthwise(const KernelArgs& args, const ConvGeometry& g) {
  const float* x = args.in(0).data_as<const float>();
  const float* w = args.in(1).data_as<const float>();
  const float* bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* y = args.out(0).data_as<float>();
  const fb::FusedActivation* activation = args.params<fb::ConvParams>()->activation();
  // Channels are independent: split them (each kernel's row ring is on its
  // own stack).
  const int64_t channels = g.n * g.c;
  const int64_t tasks = parallel_tasks(args.pool, channels * g.oh * g.ow * g.kh * g.kw, channels);
  parallel_for(args.pool, tasks, [&](int64_t t) {
    int64_t i0, i1;
    parallel_range(channels, tasks, t, 1, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / g.c, c = i % g.c;
      if (g.kh == 3 && g.kw == 3 && g.dh == 1 && g.dw == 1) {
        depthwise3x3(x + (n * g.c + c) * g.h * g.w, g.h, g.w, w + c * 9, bias != nullptr ? bias[c] : 0.f, g.sh, g.pt,
                     g.pl, y + (n * g.m + c) * g.oh * g.ow, g.oh, g.ow, activation);
        continue;
      }
      DepthwiseConv conv;
      conv.in = x + (n * g.c + c) * g.h * g.w;
      conv.h = g.h;
      conv.w = g.w;
      conv.weights = w + c * g.kh * g.kw;
      conv.kh = g.kh;
      conv.kw = g.kw;
      conv.stride = g.sh;
      conv.pt = g.pt;
      conv.pl = g.pl;
      conv.dh = g.dh;
      conv.dw = g.dw;
      conv.bias = bias != nullptr ? bias[c] : 0.f;
      conv.out = y + (n * g.m + c) * g.oh * g.ow;
      conv.oh = g.oh;
      conv.ow = g.ow;
      depthwise_conv(conv, activation);
    }
  });
}

Error run_conv(const KernelArgs& args) {
  const ConvGeometry g = conv_geometry(args);
  if (args.params<fb::ConvParams>()->packed_weights()) {
    run_conv_packed(args, g);
    return Error::kOk;
  }
  // A one-channel 1x1 convolution is also depthwise; with an input affine
  // map it must take the packed product, which applies the map.
  if (!args.has_input(3) && (is_depthwise3x3(g) || is_depthwise_direct(g))) {
    run_depthwise(args, g);
    return Error::kOk;
  }
  if (packed(args)) {
    run_conv_packed(args, g);
    return Error::kOk;
  }
  const float* x = args.in(0).data_as<const float>();
  const float* w = args.in(1).data_as<const float>();
  const float* bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* y = args.out(0).data_as<float>();
  const int64_t cg = g.c / g.group;
  const int64_t mg = g.m / g.group;
  const int64_t plane = g.oh * g.ow;
  // Output channels are independent: split them.
  const int64_t channels = g.n * g.m;
  const int64_t tasks = parallel_tasks(args.pool, channels * plane * cg * g.kh * g.kw, channels);
  parallel_for(args.pool, tasks, [&](int64_t task) {
    int64_t i0, i1;
    parallel_range(channels, tasks, task, 1, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / g.m, m = i % g.m;
      float* out = y + (n * g.m + m) * plane;
      const float b = bias != nullptr ? bias[m] : 0.f;
      for (int64_t j = 0; j < plane; ++j) out[j] = b;
      const int64_t grp = m / mg;
      for (int64_t c = 0; c < cg; ++c) {
        const float* in = x + (n * g.c + grp * cg + c) * g.h * g.w;
        const float* wk = w + (m * cg + c) * g.kh * g.kw;
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          int64_t oy0, oy1;
          valid_range(g.oh, g.h, g.sh, g.pt, ky * g.dh, &oy0, &oy1);
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const float wv = wk[ky * g.kw + kx];
            int64_t ox0, ox1;
            valid_range(g.ow, g.w, g.sw, g.pl, kx * g.dw, &ox0, &ox1);
            for (int64_t oy = oy0; oy < oy1; ++oy) {
              const float* row = in + (oy * g.sh - g.pt + ky * g.dh) * g.w;
              const int64_t shift = kx * g.dw - g.pl;
              float* orow = out + oy * g.ow;
              for (int64_t ox = ox0; ox < ox1; ++ox) orow[ox] += wv * row[ox * g.sw + shift];
            }
          }
        }
      }
      apply_activation(out, plane, args.params<fb::ConvParams>()->activation());
    }
  });
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// ConvLanes: output channels in vector lanes (gemm.h), group by group,
// weights packed by the planner (conv_lanes_prepack_weights, groups one
// after another), two scratch tensors: the image as the tiles read it with
// the offsets of a block, and the product transposed (gemm_blocking.h),
// each one group's.

Error check_conv_lanes(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_conv_common(args, 3));
  KILN_KERNEL_CHECK(args, args.params<fb::ConvParams>()->packed_weights() && !bf16_weights(args),
                    "ConvLanes reads float32 weights packed by the planner");
  const ConvGeometry g = conv_geometry(args);
  KILN_KERNEL_CHECK(args, g.group > 0 && g.c % g.group == 0 && g.m % g.group == 0,
                    "group %lld does not divide channels", static_cast<long long>(g.group));
  const int64_t mg = g.m / g.group, k = g.c / g.group * g.kh * g.kw, n = g.oh * g.ow;
  const int64_t weights = g.group * conv_lanes_weight_floats(k, mg);
  const Tensor& w = args.in(1);
  KILN_KERNEL_CHECK(args, w.rank() == 1 && w.numel() == weights, "packed weights must have %lld elements",
                    static_cast<long long>(weights));
  const ConvLanesShape shape = conv_lanes_shape(im2col_of(g, nullptr), g.group);
  const int64_t input = shape.input_floats();
  KILN_KERNEL_CHECK(args, shape.offsets_fit(), "ConvLanes reads images of fewer than 2^31 elements a group");
  KILN_KERNEL_CHECK(args,
                    args.num_scratch == 2 && args.scratch[0]->dtype() == DType::FLOAT32 &&
                        args.scratch[1]->dtype() == DType::FLOAT32 && args.scratch[0]->numel() >= input &&
                        args.scratch[1]->numel() >= conv_lanes_product_floats(mg, n),
                    "ConvLanes needs two float32 scratch tensors of %lld and %lld elements",
                    static_cast<long long>(input), static_cast<long long>(conv_lanes_product_floats(mg, n)));
  return check_conv_output(args, g);
}

Error run_conv_lanes(const KernelArgs& args) {
  const ConvGeometry g = conv_geometry(args);
  const int64_t mg = g.m / g.group, plane = g.oh * g.ow;
  ConvLanes conv;
  GemmIm2col& im = conv.geometry;
  im = im2col_of(g, nullptr);
  conv.m = mg;
  conv.groups = g.group;
  conv.packed_weights = args.in(1).data_as<const float>();
  conv.bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  conv.activation = args.params<fb::ConvParams>()->activation();
  conv.input = scratch_a(args);
  conv.input_blocks = args.scratch[0]->numel() / conv_lanes_shape(im, g.group).input_floats();
  conv.product = scratch_b(args);
  conv.product_blocks = args.scratch[1]->numel() / conv_lanes_product_floats(mg, plane);
  for (int64_t n = 0; n < g.n; ++n) {
    im.x = args.in(0).data_as<const float>() + n * g.c * g.h * g.w;
    conv.y = args.out(0).data_as<float>() + n * g.m * plane;
    conv_lanes(conv, GemmPath::kAuto, args.pool);
  }
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// ConvTranspose: every input element scatters a weighted copy of its
// channel's kernels into the output,
//   y[n, grp*mg + m, iy*sh - pt + ky*dh, ix*sw - pl + kx*dw]
//       += x[n, grp*cg + c, iy, ix] * w[grp*cg + c, m, ky, kx],
// dropping positions outside the output, on top of the bias. Per axis the
// output has (in - 1) * s + d * (k - 1) + 1 - pad_begin - pad_end +
// output_padding elements.

// False when the size overflows or is not positive.
bool transposed_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, int64_t extra, int64_t* out) {
  int64_t span, reach, v;
  if (in <= 0 || !checked_mul(in - 1, s, &span) || !checked_mul(k - 1, d, &reach) || !checked_add(span, reach, &v) ||
      !checked_add(v, 1 + extra - p0 - p1, &v)) {
    return false;
  }
  *out = v;
  return v > 0;
}

Error check_conv_transpose(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_conv_common(args));
  const auto* p = args.params<fb::ConvParams>();
  KILN_KERNEL_CHECK(args, !p->packed_weights(), "ConvTranspose takes no packed weights");
  int64_t oph = 0, opw = 0;
  if (p->output_padding() != nullptr) {
    KILN_KERNEL_CHECK(args, read_pair(p->output_padding(), &oph, &opw) && oph >= 0 && opw >= 0, "bad output_padding");
  }
  const Tensor& w = args.in(1);
  const Tensor& y = args.out(0);
  const ConvGeometry g = conv_geometry(args);
  const int64_t wh = w.rank() == 4 ? w.dim(2) : 1;
  KILN_KERNEL_CHECK(args, g.group > 0 && g.c % g.group == 0, "group %lld does not divide channels",
                    static_cast<long long>(g.group));
  KILN_KERNEL_CHECK(args, w.dim(0) == g.c && w.dim(1) * g.group == g.m && wh == g.kh && w.dim(w.rank() - 1) == g.kw,
                    "weight shape does not match");
  KILN_KERNEL_CHECK(args, y.dim(0) == g.n, "batch size changes");
  int64_t oh = 0, ow = 0;
  KILN_KERNEL_CHECK(args,
                    transposed_size(g.h, g.kh, g.sh, g.dh, g.pt, g.pb, oph, &oh) &&
                        transposed_size(g.w, g.kw, g.sw, g.dw, g.pl, g.pr, opw, &ow) && oh == g.oh && ow == g.ow,
                    "output size does not match the geometry");
  if (args.has_input(2)) {
    KILN_KERNEL_CHECK(args, args.in(2).numel() == g.m, "bias must have %lld elements", static_cast<long long>(g.m));
  }
  if (args.num_scratch != 0) {
    // The products' scratch (gemm_blocking.h): columns, packed A, packed B.
    const int64_t rows = g.m / g.group * g.kh * g.kw, depth = g.c / g.group, positions = g.h * g.w;
    const int64_t block = conv_transpose_block(positions);
    KILN_KERNEL_CHECK(args, args.num_scratch == 3, "expects 0 or 3 scratch tensors, has %u", args.num_scratch);
    for (uint32_t i = 0; i < 3; ++i) {
      KILN_KERNEL_CHECK(args, args.scratch[i]->dtype() == DType::FLOAT32, "scratch must be float32");
    }
    KILN_KERNEL_CHECK(args,
                      args.scratch[0]->numel() >= conv_transpose_columns_floats(rows, positions) &&
                          args.scratch[1]->numel() >= gemm_pack_a_floats(rows, depth) &&
                          args.scratch[2]->numel() >= gemm_pack_b_floats(depth, block),
                      "scratch too small for the columns and packing (%lld, %lld and %lld floats)",
                      static_cast<long long>(conv_transpose_columns_floats(rows, positions)),
                      static_cast<long long>(gemm_pack_a_floats(rows, depth)),
                      static_cast<long long>(gemm_pack_b_floats(depth, block)));
  }
  return Error::kOk;
}

// One image's output planes set to their channel's bias (0 without one),
// what ConvTranspose adds onto.
void fill_bias(const ConvGeometry& g, const float* bias, float* y) {
  const int64_t plane = g.oh * g.ow;
  for (int64_t m = 0; m < g.m; ++m) {
    const float b = bias != nullptr ? bias[m] : 0.f;
    for (int64_t i = 0; i < plane; ++i) y[m * plane + i] = b;
  }
}

// Adds one block's columns (rows m x kh x kw of one group, `count` input
// positions from `first`, `ld` floats a row) into the output channels of
// the group, `out` at the group's first: each column lands where the
// scatter of run_conv_transpose puts it.
void add_columns(const ConvGeometry& g, const float* columns, int64_t ld, int64_t first, int64_t count, float* out) {
  const int64_t mg = g.m / g.group, plane = g.oh * g.ow;
  for (int64_t m = 0; m < mg; ++m) {
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const float* row = columns + ((m * g.kh + ky) * g.kw + kx) * ld - first;
        float* dst = out + m * plane;
        int64_t ix0, ix1;
        valid_range(g.w, g.ow, g.sw, g.pl, kx * g.dw, &ix0, &ix1);
        const int64_t shift = kx * g.dw - g.pl;
        for (int64_t iy = first / g.w; iy * g.w < first + count; ++iy) {
          const int64_t oy = iy * g.sh - g.pt + ky * g.dh;
          if (oy < 0 || oy >= g.oh) continue;
          // This row's positions within the block and the valid columns.
          const int64_t lo = gemm_max(ix0, first - iy * g.w), hi = gemm_min(ix1, first + count - iy * g.w);
          float* orow = dst + oy * g.ow + shift;
          const float* irow = row + iy * g.w;
          if (g.sw == 1) {
            for (int64_t ix = lo; ix < hi; ++ix) orow[ix] += irow[ix];
          } else {
            for (int64_t ix = lo; ix < hi; ++ix) orow[ix * g.sw] += irow[ix];
          }
        }
      }
    }
  }
}

// Whether every output element takes exactly one input element through one
// tap: kernel = stride, no dilation, pads or output padding (U-Net's 2x2
// up-sampling at stride 2). The columns are then stored, not added.
bool taps_tile_output(const ConvGeometry& g) {
  return g.kh == g.sh && g.kw == g.sw && g.dh == 1 && g.dw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0 &&
         g.oh == g.h * g.kh && g.ow == g.w * g.kw;
}

// out[i * KW + kx] = taps[kx][i] + bias: one output row's segment from
// the KW taps of its input positions.
template <int KW>
void interleave_taps(const float* taps, int64_t ld, int64_t count, float bias, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    for (int kx = 0; kx < KW; ++kx) out[i * KW + kx] = taps[kx * ld + i] + bias;
  }
}

// One block's columns (as add_columns takes them) stored where they land
// (taps_tile_output), each plus its channel's bias, the fused activation
// applied row by row: the group's output channels [m0, m1).
void store_columns(const ConvGeometry& g, const float* columns, int64_t ld, int64_t first, int64_t count,
                   const float* bias, const fb::FusedActivation* activation, float* out, int64_t m0, int64_t m1) {
  const int64_t plane = g.oh * g.ow;
  for (int64_t m = m0; m < m1; ++m) {
    const float b = bias != nullptr ? bias[m] : 0.f;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const float* taps = columns + (m * g.kh + ky) * g.kw * ld - first;
      for (int64_t iy = first / g.w; iy * g.w < first + count; ++iy) {
        const int64_t lo = gemm_max(int64_t{0}, first - iy * g.w), hi = gemm_min(g.w, first + count - iy * g.w);
        float* orow = out + m * plane + (iy * g.kh + ky) * g.ow + lo * g.kw;
        const float* in = taps + iy * g.w + lo;
        if (g.kw == 2) {
          interleave_taps<2>(in, ld, hi - lo, b, orow);
        } else {
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            for (int64_t i = 0; i < hi - lo; ++i) orow[i * g.kw + kx] = in[kx * ld + i] + b;
          }
        }
        apply_activation(orow, (hi - lo) * g.kw, activation);
      }
    }
  }
}

// The products' way (the planner gave scratch): per image and group, per
// block of input positions, columns = W^T x the block (W read transposed
// in place), then added into the output over the bias (stored with it
// where taps_tile_output).
Error run_conv_transpose_products(const KernelArgs& args, const ConvGeometry& g) {
  const float* x = args.in(0).data_as<const float>();
  const float* w = args.in(1).data_as<const float>();
  const float* bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* y = args.out(0).data_as<float>();
  const int64_t cg = g.c / g.group, mg = g.m / g.group, rows = mg * g.kh * g.kw;
  const int64_t positions = g.h * g.w, plane = g.oh * g.ow, block = conv_transpose_block(positions);
  float* columns = args.scratch[0]->data_as<float>();
  float* pack_a = args.scratch[1]->data_as<float>();
  float* pack_b = args.scratch[2]->data_as<float>();
  const fb::FusedActivation* activation = args.params<fb::ConvParams>()->activation();
  const bool store = taps_tile_output(g);
  for (int64_t n = 0; n < g.n; ++n) {
    if (!store) fill_bias(g, bias, y + n * g.m * plane);
    for (int64_t grp = 0; grp < g.group; ++grp) {
      GemmMatrix a;
      a.data = w + grp * cg * rows;
      a.ld = rows;
      a.trans = true;
      for (int64_t first = 0; first < positions; first += block) {
        const int64_t count = gemm_min(block, positions - first);
        GemmMatrix b;
        b.data = x + (n * g.c + grp * cg) * positions + first;
        b.ld = positions;
        gemm_packed(rows, count, cg, a, b, nullptr, columns, count, GemmEpilogue{}, pack_a, pack_b, GemmPath::kAuto,
                    args.pool);
        float* out = y + (n * g.m + grp * mg) * plane;
        if (!store) {
          add_columns(g, columns, count, first, count, out);
          continue;
        }
        const float* group_bias = bias != nullptr ? bias + grp * mg : nullptr;
        const int64_t tasks = parallel_tasks(args.pool, rows * count, mg, kParallelMinElements);
        parallel_for(args.pool, tasks, [&](int64_t t) {
          int64_t m0, m1;
          parallel_range(mg, tasks, t, 1, &m0, &m1);
          store_columns(g, columns, count, first, count, group_bias, activation, out, m0, m1);
        });
      }
    }
  }
  if (!store) apply_activation(y, args.out(0).numel(), activation);
  return Error::kOk;
}

Error run_conv_transpose(const KernelArgs& args) {
  const ConvGeometry g = conv_geometry(args);
  if (args.num_scratch == 3) return run_conv_transpose_products(args, g);
  const float* x = args.in(0).data_as<const float>();
  const float* w = args.in(1).data_as<const float>();
  const float* bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* y = args.out(0).data_as<float>();
  const int64_t cg = g.c / g.group;
  const int64_t mg = g.m / g.group;
  const int64_t plane = g.oh * g.ow;
  for (int64_t n = 0; n < g.n; ++n) {
    fill_bias(g, bias, y + n * g.m * plane);
    for (int64_t c = 0; c < g.c; ++c) {
      const int64_t grp = c / cg;
      const float* in = x + (n * g.c + c) * g.h * g.w;
      for (int64_t m = 0; m < mg; ++m) {
        float* out = y + (n * g.m + grp * mg + m) * plane;
        const float* wk = w + (c * mg + m) * g.kh * g.kw;
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          // Input rows whose output row iy * sh - pt + ky * dh lies in [0, oh).
          int64_t iy0, iy1;
          valid_range(g.h, g.oh, g.sh, g.pt, ky * g.dh, &iy0, &iy1);
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const float wv = wk[ky * g.kw + kx];
            int64_t ix0, ix1;
            valid_range(g.w, g.ow, g.sw, g.pl, kx * g.dw, &ix0, &ix1);
            const int64_t shift = kx * g.dw - g.pl;
            for (int64_t iy = iy0; iy < iy1; ++iy) {
              float* orow = out + (iy * g.sh - g.pt + ky * g.dh) * g.ow;
              const float* irow = in + iy * g.w;
              for (int64_t ix = ix0; ix < ix1; ++ix) orow[ix * g.sw + shift] += wv * irow[ix];
            }
          }
        }
      }
    }
  }
  apply_activation(y, args.out(0).numel(), args.params<fb::ConvParams>()->activation());
  return Error::kOk;
}

// ConvTransposeNd: the same scatter over three spatial axes (depth,
// height, width), for 5-D input, weight and output. ConvParams hold three
// entries per list (kernel, strides, dilations, output_padding) and six
// pads (the three begins, then the three ends). The 2-D kernel above stays
// the one 1-D and 2-D models run.

struct TransposeAxes {
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad[3];
};

bool read_three(const flatbuffers::Vector<int32_t>* v, int64_t* out) {
  if (v == nullptr || v->size() != 3) return false;
  for (uint32_t i = 0; i < 3; ++i) out[i] = v->Get(i);
  return true;
}

Error check_conv_transpose_nd(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1));
  KILN_RETURN_IF_ERROR(check_all_dtype(args, DType::FLOAT32));
  const auto* p = args.params<fb::ConvParams>();
  KILN_KERNEL_CHECK(args, p != nullptr && !p->packed_weights(), "missing ConvParams");
  const Tensor& x = args.in(0);
  const Tensor& w = args.in(1);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, x.rank() == 5 && w.rank() == 5 && y.rank() == 5, "expects 5-D input, weight and output");
  int64_t kernel[3], stride[3], dilation[3], extra[3];
  KILN_KERNEL_CHECK(args,
                    read_three(p->kernel(), kernel) && read_three(p->strides(), stride) &&
                        read_three(p->dilations(), dilation) && read_three(p->output_padding(), extra) &&
                        p->pads() != nullptr && p->pads()->size() == 6,
                    "expects three kernel, stride, dilation and output_padding entries and six pads");
  const int64_t group = p->group();
  const int64_t c = x.dim(1), m = y.dim(1);
  KILN_KERNEL_CHECK(args, group > 0 && c % group == 0 && m % group == 0, "group %lld does not divide channels",
                    static_cast<long long>(group));
  KILN_KERNEL_CHECK(args, w.dim(0) == c && w.dim(1) * group == m && y.dim(0) == x.dim(0),
                    "weight or output shape does not match");
  for (uint32_t a = 0; a < 3; ++a) {
    const int64_t p0 = p->pads()->Get(a), p1 = p->pads()->Get(a + 3);
    KILN_KERNEL_CHECK(args, kernel[a] > 0 && stride[a] > 0 && dilation[a] > 0 && extra[a] >= 0 && p0 >= 0 && p1 >= 0,
                      "kernel, strides, dilations, pads or output_padding out of range");
    int64_t out = 0;
    KILN_KERNEL_CHECK(args,
                      w.dim(a + 2) == kernel[a] &&
                          transposed_size(x.dim(a + 2), kernel[a], stride[a], dilation[a], p0, p1, extra[a], &out) &&
                          out == y.dim(a + 2),
                      "output size does not match the geometry");
  }
  if (args.has_input(2)) {
    KILN_KERNEL_CHECK(args, args.in(2).numel() == m, "bias must have %lld elements", static_cast<long long>(m));
  }
  return check_activation(args, p->activation());
}

Error run_conv_transpose_nd(const KernelArgs& args) {
  const auto* p = args.params<fb::ConvParams>();
  const Tensor& xt = args.in(0);
  const Tensor& yt = args.out(0);
  TransposeAxes g;
  for (uint32_t a = 0; a < 3; ++a) {
    g.in[a] = xt.dim(a + 2);
    g.out[a] = yt.dim(a + 2);
    g.kernel[a] = p->kernel()->Get(a);
    g.stride[a] = p->strides()->Get(a);
    g.dilation[a] = p->dilations()->Get(a);
    g.pad[a] = p->pads()->Get(a);
  }
  const int64_t n_images = xt.dim(0), c_in = xt.dim(1), m_out = yt.dim(1), group = p->group();
  const int64_t cg = c_in / group, mg = m_out / group;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2], out_plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const float* x = xt.data_as<const float>();
  const float* w = args.in(1).data_as<const float>();
  const float* bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
  float* y = yt.data_as<float>();
  for (int64_t n = 0; n < n_images; ++n) {
    for (int64_t m = 0; m < m_out; ++m) {
      float* out = y + (n * m_out + m) * out_plane;
      const float b = bias != nullptr ? bias[m] : 0.f;
      for (int64_t i = 0; i < out_plane; ++i) out[i] = b;
    }
    for (int64_t c = 0; c < c_in; ++c) {
      const int64_t grp = c / cg;
      const float* in = x + (n * c_in + c) * in_plane;
      for (int64_t m = 0; m < mg; ++m) {
        float* out = y + (n * m_out + grp * mg + m) * out_plane;
        const float* wk = w + (c * mg + m) * taps;
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          // Input indices whose output index i * s - pad + k * d lies inside the output, per axis.
          int64_t d0, d1;
          valid_range(g.in[0], g.out[0], g.stride[0], g.pad[0], kd * g.dilation[0], &d0, &d1);
          for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
            int64_t h0, h1;
            valid_range(g.in[1], g.out[1], g.stride[1], g.pad[1], kh * g.dilation[1], &h0, &h1);
            for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
              int64_t w0, w1;
              valid_range(g.in[2], g.out[2], g.stride[2], g.pad[2], kw * g.dilation[2], &w0, &w1);
              const float wv = wk[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
              const int64_t shift = kw * g.dilation[2] - g.pad[2];
              for (int64_t id = d0; id < d1; ++id) {
                const int64_t od = id * g.stride[0] - g.pad[0] + kd * g.dilation[0];
                for (int64_t ih = h0; ih < h1; ++ih) {
                  const int64_t oh = ih * g.stride[1] - g.pad[1] + kh * g.dilation[1];
                  float* orow = out + (od * g.out[1] + oh) * g.out[2];
                  const float* irow = in + (id * g.in[1] + ih) * g.in[2];
                  for (int64_t iw = w0; iw < w1; ++iw) orow[iw * g.stride[2] + shift] += wv * irow[iw];
                }
              }
            }
          }
        }
      }
    }
  }
  apply_activation(y, yt.numel(), p->activation());
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// Gemm: Y = alpha * op(A) * op(B) + beta * C

Error check_gemm(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1));
  const auto* p = args.params<fb::GemmParams>();
  KILN_KERNEL_CHECK(args, p != nullptr, "missing GemmParams");
  KILN_RETURN_IF_ERROR(check_linear_dtypes(args, p->packed_b()));
  const Tensor& a = args.in(0);
  const Tensor& b = args.in(1);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, a.rank() == 2 && (b.rank() == 2 || p->packed_b()) && y.rank() == 2, "expects 2-D operands");
  const int64_t m = p->trans_a() ? a.dim(1) : a.dim(0);
  const int64_t k = p->trans_a() ? a.dim(0) : a.dim(1);
  KILN_KERNEL_CHECK(args, y.dim(0) == m, "output shape does not match");
  const int64_t n = y.dim(1);
  if (p->packed_b()) {
    KILN_RETURN_IF_ERROR(check_packed_b(args, m, n, k));
  } else {
    const int64_t kb = p->trans_b() ? b.dim(1) : b.dim(0);
    KILN_KERNEL_CHECK(args, k == kb, "inner dimensions differ (%lld, %lld)", static_cast<long long>(k),
                      static_cast<long long>(kb));
    KILN_KERNEL_CHECK(args, (p->trans_b() ? b.dim(0) : b.dim(1)) == n, "output shape does not match");
    KILN_RETURN_IF_ERROR(check_gemm_scratch(args, m, n, k));
  }
  if (args.has_input(2)) {
    int64_t strides[2];
    KILN_KERNEL_CHECK(args, broadcast_strides(args.in(2), y.dims(), 2, strides), "C does not broadcast to the output");
  }
  return check_activation(args, p->activation());
}

Error run_gemm(const KernelArgs& args) {
  const auto* p = args.params<fb::GemmParams>();
  const Tensor& a = args.in(0);
  const Tensor& b = args.in(1);
  const Tensor& y = args.out(0);
  const int64_t m = y.dim(0), n = y.dim(1);
  const int64_t k = p->trans_a() ? a.dim(0) : a.dim(1);
  float* out = y.data_as<float>();
  const float alpha = p->alpha(), beta = p->beta();
  const bool has_c = args.has_input(2) && beta != 0.f;
  const float* c = has_c ? args.in(2).data_as<const float>() : nullptr;
  int64_t cs[2] = {0, 0};
  if (has_c) broadcast_strides(args.in(2), y.dims(), 2, cs);
  // With alpha == 1 the product accumulates onto beta * C; otherwise
  // Y = alpha * (A B) is formed first and beta * C added after.
  const bool fold_c = has_c && alpha == 1.f;
  if (fold_c) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) out[i * n + j] = beta * c[i * cs[0] + j * cs[1]];
    }
  }
  // The activation can only run inside the product when nothing is added
  // after it.
  const bool fused = packed(args) && (fold_c || (!has_c && alpha == 1.f));
  if (packed(args)) {
    GemmEpilogue epilogue;
    epilogue.accumulate = fold_c;
    epilogue.activation = fused ? p->activation() : nullptr;
    const GemmMatrix bm =
        p->packed_b() ? packed_operand(args, 0) : GemmMatrix{b.data_as<const float>(), b.dim(1), p->trans_b()};
    gemm_packed(m, n, k, {a.data_as<const float>(), a.dim(1), p->trans_a()}, bm, nullptr, out, n, epilogue,
                scratch_a(args), p->packed_b() ? nullptr : scratch_b(args), GemmPath::kAuto, args.pool,
                p->packed_b() ? pack_a_blocks(args, m, k) : 1);
  } else {
    gemm_f32(m, n, k, a.data_as<const float>(), a.dim(1), p->trans_a(), b.data_as<const float>(), b.dim(1),
             p->trans_b(), out, n, fold_c);
  }
  if (!fold_c) {
    if (alpha != 1.f) {
      for (int64_t i = 0; i < m * n; ++i) out[i] *= alpha;
    }
    if (has_c) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) out[i * n + j] += beta * c[i * cs[0] + j * cs[1]];
      }
    }
  }
  if (!fused) apply_activation(out, m * n, p->activation());
  return Error::kOk;
}

// ---------------------------------------------------------------------------
// MatMul (NumPy matmul semantics)

struct MatMulShape {
  int64_t m, k, n;
  uint32_t batch_rank;  // rank of the output's batch dimensions
  int64_t batch[kMaxRank];
  int64_t a_stride[kMaxRank];  // per batch dim, in matrices
  int64_t b_stride[kMaxRank];
  int64_t batches;
};

bool matmul_shape(const Tensor& a, const Tensor& b, const Tensor& y, MatMulShape* s) {
  if (a.rank() == 0 || b.rank() == 0) return false;
  const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
  s->m = a_vec ? 1 : a.dim(a.rank() - 2);
  s->k = a.dim(a.rank() - 1);
  const int64_t kb = b_vec ? b.dim(0) : b.dim(b.rank() - 2);
  s->n = b_vec ? 1 : b.dim(b.rank() - 1);
  if (s->k != kb) return false;
  const uint32_t a_batch = a_vec ? 0 : a.rank() - 2;
  const uint32_t b_batch = b_vec ? 0 : b.rank() - 2;
  s->batch_rank = a_batch > b_batch ? a_batch : b_batch;
  const uint32_t expected_rank = s->batch_rank + (a_vec ? 0 : 1) + (b_vec ? 0 : 1);
  if (y.rank() != expected_rank) return false;
  int64_t a_mat = 1, b_mat = 1;
  s->batches = 1;
  for (int32_t d = static_cast<int32_t>(s->batch_rank) - 1; d >= 0; --d) {
    const int32_t da = d - static_cast<int32_t>(s->batch_rank - a_batch);
    const int32_t db = d - static_cast<int32_t>(s->batch_rank - b_batch);
    const int64_t ea = da >= 0 ? a.dim(static_cast<uint32_t>(da)) : 1;
    const int64_t eb = db >= 0 ? b.dim(static_cast<uint32_t>(db)) : 1;
    if (ea != eb && ea != 1 && eb != 1) return false;
    const int64_t e = ea == 1 ? eb : ea;
    if (y.dim(static_cast<uint32_t>(d)) != e) return false;
    s->batch[d] = e;
    s->a_stride[d] = ea == 1 ? 0 : a_mat;
    s->b_stride[d] = eb == 1 ? 0 : b_mat;
    a_mat *= ea;
    b_mat *= eb;
    s->batches *= e;
  }
  if (!a_vec && y.dim(s->batch_rank) != s->m) return false;
  if (!b_vec && y.dim(y.rank() - 1) != s->n) return false;
  return true;
}

// The fused activation of a MatMul: in BinaryParams, or in MatMulParams.
const fb::FusedActivation* matmul_activation(const KernelArgs& args) {
  if (const auto* p = args.params<fb::BinaryParams>()) return p->activation();
  if (const auto* p = args.params<fb::MatMulParams>()) return p->activation();
  return nullptr;
}

bool matmul_packed_b(const KernelArgs& args) {
  const auto* p = args.params<fb::MatMulParams>();
  return p != nullptr && p->packed_b();
}

// With B packed by the planner, A is [..., M, K] and Y [..., M, N]: one
// product of all A's rows.
Error check_matmul_packed_b(const KernelArgs& args) {
  const Tensor& a = args.in(0);
  const Tensor& y = args.out(0);
  KILN_KERNEL_CHECK(args, a.rank() >= 1 && y.rank() == a.rank(), "packed B needs A and Y of one rank");
  for (uint32_t d = 0; d + 1 < a.rank(); ++d)
    KILN_KERNEL_CHECK(args, y.dim(d) == a.dim(d), "output shape does not match");
  KILN_RETURN_IF_ERROR(
      check_packed_b(args, dims_product(a, 0, a.rank() - 1), y.dim(y.rank() - 1), a.dim(a.rank() - 1)));
  if (args.has_input(2)) {
    KILN_KERNEL_CHECK(args, args.in(2).numel() == y.dim(y.rank() - 1), "bias must have one value per column");
  }
  return check_activation(args, matmul_activation(args));
}

Error check_matmul(const KernelArgs& args) {
  KILN_RETURN_IF_ERROR(check_arity(args, 2, 3, 1));
  KILN_RETURN_IF_ERROR(check_linear_dtypes(args, matmul_packed_b(args)));
  if (matmul_packed_b(args)) return check_matmul_packed_b(args);
  KILN_KERNEL_CHECK(args, args.num_inputs == 2, "a bias input needs packed B");
  MatMulShape s;
  KILN_KERNEL_CHECK(args, matmul_shape(args.in(0), args.in(1), args.out(0), &s),
                    "shapes do not multiply to the output shape");
  // B without batch dimensions: A's batches stack into one product.
  const int64_t m = args.in(1).rank() <= 2 ? s.batches * s.m : s.m;
  KILN_RETURN_IF_ERROR(check_gemm_scratch(args, m, s.n, s.k));
  return check_activation(args, matmul_activation(args));
}

Error run_matmul(const KernelArgs& args) {
  const fb::FusedActivation* activation = matmul_activation(args);
  if (matmul_packed_b(args)) {
    const Tensor& in = args.in(0);
    const int64_t k = in.dim(in.rank() - 1), n = args.out(0).dim(in.rank() - 1);
    GemmEpilogue epilogue;
    epilogue.activation = activation;
    epilogue.col_bias = args.has_input(2) ? args.in(2).data_as<const float>() : nullptr;
    const GemmMatrix b = packed_operand(args, 0);
    const int64_t m = dims_product(in, 0, in.rank() - 1);
    gemm_packed(m, n, k, {in.data_as<const float>(), k, false}, b, nullptr, args.out(0).data_as<float>(), n, epilogue,
                args.scratch[0]->data_as<float>(), nullptr, GemmPath::kAuto, args.pool, pack_a_blocks(args, m, k));
    return Error::kOk;
  }
  MatMulShape s;
  matmul_shape(args.in(0), args.in(1), args.out(0), &s);
  const float* a = args.in(0).data_as<const float>();
  const float* b = args.in(1).data_as<const float>();
  float* y = args.out(0).data_as<float>();
  if (packed(args) && args.in(1).rank() <= 2) {
    // One matrix B for every batch of A: the batches are consecutive rows
    // of one taller A, and of the output.
    GemmEpilogue epilogue;
    epilogue.activation = activation;
    gemm_packed(s.batches * s.m, s.n, s.k, {a, s.k, false}, {b, s.n, false}, nullptr, y, s.n, epilogue, scratch_a(args),
                scratch_b(args), GemmPath::kAuto, args.pool);
    return Error::kOk;
  }
  // Where the planner gave several blocks of packing scratch
  // (gemm_batch_scratch_blocks), tasks take whole products side by side,
  // each on blocks of its own; with one task, the products run one by one,
  // each split across the pool.
  const bool pack = packed(args);
  const int64_t pa = gemm_pack_a_floats(s.m, s.k), pb = gemm_pack_b_floats(s.k, s.n);
  const int64_t blocks =
      pack && pa > 0 && pb > 0 ? gemm_min(args.scratch[0]->numel() / pa, args.scratch[1]->numel() / pb) : 1;
  const int64_t tasks =
      blocks > 1 ? gemm_min(blocks, parallel_tasks(args.pool, s.batches * s.m * s.n * s.k, s.batches)) : 1;
  ThreadPool* const per_product = tasks > 1 ? nullptr : args.pool;
  GemmEpilogue epilogue;
  epilogue.activation = activation;
  parallel_for(args.pool, tasks, [&](int64_t task) {
    int64_t t0, t1;
    parallel_range(s.batches, tasks, task, 1, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t ia = 0, ib = 0;  // the product's matrices of A and B: t's index, batch axis by axis
      for (int64_t d = static_cast<int64_t>(s.batch_rank) - 1, rest = t; d >= 0; --d) {
        ia += rest % s.batch[d] * s.a_stride[d];
        ib += rest % s.batch[d] * s.b_stride[d];
        rest /= s.batch[d];
      }
      const float* at = a + ia * s.m * s.k;
      const float* bt = b + ib * s.k * s.n;
      float* yt = y + t * s.m * s.n;
      if (pack) {
        gemm_packed(s.m, s.n, s.k, {at, s.k, false}, {bt, s.n, false}, nullptr, yt, s.n, epilogue,
                    scratch_a(args) + task * pa, scratch_b(args) + task * pb, GemmPath::kAuto, per_product);
      } else {
        gemm_f32(s.m, s.n, s.k, at, s.k, false, bt, s.n, false, yt, s.n, false);
      }
    }
  });
  if (!packed(args)) apply_activation(y, args.out(0).numel(), activation);
  return Error::kOk;
}

}  // namespace

// Name, check, run and in-place inputs of each kernel of this file.
#define KILN_LINEAR_KERNELS(K)                                          \
  K(Conv, check_conv, run_conv, 0)                                      \
  K(ConvLanes, check_conv_lanes, run_conv_lanes, 0)                     \
  K(ConvTranspose, check_conv_transpose, run_conv_transpose, 0)         \
  K(ConvTransposeNd, check_conv_transpose_nd, run_conv_transpose_nd, 0) \
  K(Gemm, check_gemm, run_gemm, 0)                                      \
  K(MatMul, check_matmul, run_matmul, 0)

KILN_DEFINE_KERNEL_ENTRIES(KILN_LINEAR_KERNELS)
const KernelEntry kLinearKernels[] = {KILN_LINEAR_KERNELS(KILN_KERNEL_TABLE_ROW)};
const size_t kNumLinearKernels = sizeof(kLinearKernels) / sizeof(kLinearKernels[0]);

}  // namespace kernels
}  // namespace kiln
