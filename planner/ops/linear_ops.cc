// Linear ops: Conv and ConvTranspose (1-D, 2-D; groups, depthwise; also
// 3-D ConvTranspose), Gemm, MatMul.

#include <algorithm>

#include "kiln/kernels/gemm_blocking.h"
#include "ops/op_registry.h"
#include "ops/spatial.h"

namespace kiln::planner {
namespace {

// Whether the kernels get packing scratch and packed weights: the portable
// CPU kernels, unless the options turn packing off.
bool packs(const LoweringContext& l) { return l.options().packing_scratch && l.device().type() == fb::DeviceType::CPU; }

// The packing scratch of a linear kernel computing m x k times k x n
// products (empty when the lowering options turn packing off): packed A,
// packed B, each used only while the instruction runs.
// `blocks` of each (gemm_batch_scratch_blocks: products that threads run side by side).
std::vector<int> packing_scratch(OpContext& ctx, LoweringContext& l, int64_t m, int64_t n, int64_t k,
                                 int64_t blocks = 1) {
  if (!packs(l)) return {};
  using namespace kiln::kernels;
  return {l.temp(ctx.node().name + "/packed_a", DType::FLOAT32, {blocks * gemm_pack_a_floats(m, k)}),
          l.temp(ctx.node().name + "/packed_b", DType::FLOAT32, {blocks * gemm_pack_b_floats(k, n)})};
}

std::vector<int64_t> spatial_dims(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

Spatial conv_spatial(OpContext& ctx) {
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape", spatial_dims(w));
  return resolve_spatial(ctx, spatial_dims(x), kernel, /*allow_ceil=*/false, /*allow_dilations=*/true);
}

// Input 1 (a constant B, k x n, or n x k when trans_b) packed for the
// blocked product, as a new constant tensor: in BF16 with
// LowerOptions::bf16_weights.
int packed_b(OpContext& ctx, LoweringContext& l, int64_t k, int64_t n, bool trans_b) {
  using namespace kiln::kernels;
  if (l.options().bf16_weights) {
    HostTensor packed(DType::BFLOAT16, {gemm_prepacked_b_bf16_elements(k, n)});
    gemm_prepack_b_bf16(k, n, ctx.input(1).constant->data<float>(), trans_b, packed.data<uint16_t>());
    return l.constant(ctx.node().name + "/packed_b", std::move(packed));
  }
  HostTensor packed(DType::FLOAT32, {gemm_prepacked_b_floats(k, n)});
  gemm_prepack_b(k, n, ctx.input(1).constant->data<float>(), trans_b, packed.data<float>());
  return l.constant(ctx.node().name + "/packed_b", std::move(packed));
}

void infer_conv(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) ctx.expect_dtype(i, {DType::FLOAT32});
  }
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  if (x.size() != 3 && x.size() != 4) ctx.not_supported(x.size() - 2, "-D convolution");
  if (w.size() != x.size()) ctx.error("weight rank ", w.size(), " differs from input rank ", x.size());
  const int64_t group = ctx.attr_int("group", 1);
  if (group <= 0 || x[1] % group != 0 || w[0] % group != 0) {
    ctx.error("group ", group, " does not divide the channels");
  }
  if (w[1] * group != x[1]) {
    ctx.error("weight ", shape_str(w), " expects ", w[1] * group, " input channels, input has ", x[1]);
  }
  if (ctx.has_input(2) && shape_numel(ctx.shape(2)) != w[0]) ctx.error("bias must have ", w[0], " elements");
  const Spatial s = conv_spatial(ctx);
  if (spatial_dims(w) != s.kernel) ctx.error("kernel_shape does not match the weight");
  std::vector<int64_t> out = {x[0], w[0]};
  out.insert(out.end(), s.out.begin(), s.out.end());
  ctx.set_output(0, DType::FLOAT32, out);
}

// A small output plane (a 7 x 7 one: 49 positions), constant FP32
// weights, no input affine map, one group or large ones: output channels
// in vector lanes, the weights packed in the order its tiles read them
// (ConvLanes, kernels/cpu/src/conv_lanes.cc). False, having emitted
// nothing, where it does not apply. k: the inner dimension of one group.
bool lower_conv_lanes(OpContext& ctx, LoweringContext& l, const Spatial& s, fb::ConvParamsT& p, int64_t group,
                      int64_t k, int64_t n) {
  using namespace kiln::kernels;
  const int64_t mg = ctx.shape(1)[0] / group;
  // The convolution in the 2-D form the kernel takes (a 1-D one has height 1).
  const auto& x = ctx.shape(0);
  ConvLanesShape shape;
  // clang-format off
  shape.channels = x[1] / group; shape.h = x.size() == 4 ? x[2] : 1; shape.w = x.back();
  shape.kh = p.kernel[0]; shape.kw = p.kernel[1]; shape.sh = p.strides[0]; shape.sw = p.strides[1];
  shape.dh = p.dilations[0]; shape.dw = p.dilations[1]; shape.pt = p.pads[0]; shape.pl = p.pads[1];
  shape.ow = s.out.back(); shape.oh = n / shape.ow; shape.groups = group;
  // clang-format on
  if (l.options().bf16_weights || ctx.node().input_affine.value >= 0 || !shape.offsets_fit() ||
      !conv_lanes_fits_groups(group, shape.channels, mg, n, shape.kh, shape.kw, shape.sh, shape.sw)) {
    return false;
  }
  const int64_t per_group = conv_lanes_weight_floats(k, mg);
  HostTensor packed(DType::FLOAT32, {group * per_group});
  for (int64_t g = 0; g < group; ++g) {
    conv_lanes_prepack_weights(k, mg, ctx.input(1).constant->data<float>() + g * mg * k,
                               packed.data<float>() + g * per_group);
  }
  p.packed_weights = true;
  std::vector<int> inputs = {l.tensor(ctx.input_id(0)),
                             l.constant(ctx.node().name + "/lanes_weight", std::move(packed))};
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  const int64_t blocks = std::min(shape.scratch_blocks(), l.options().thread_blocks);
  std::vector<int> scratch = {l.temp(ctx.node().name + "/positions", DType::FLOAT32, {blocks * shape.input_floats()}),
                              l.temp(ctx.node().name + "/product", DType::FLOAT32,
                                     {std::min(shape.product_blocks(), blocks) * conv_lanes_product_floats(mg, n)})};
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("ConvLanes", inputs, {l.tensor(ctx.output_id(0))}, std::move(params), std::move(scratch));
  return true;
}

void lower_conv(OpContext& ctx, LoweringContext& l) {
  const Spatial s = conv_spatial(ctx);
  fb::ConvParamsT p;
  p.group = static_cast<int32_t>(ctx.attr_int("group", 1));
  p.kernel = s.kernel2();
  p.strides = s.strides2();
  p.dilations = s.dilations2();
  p.pads = s.pads4();
  p.activation = fused_activation(ctx.node());
  // The depthwise kernels (up to 7x7, stride 1 or 2, dilation up to 6, where
  // the vector kernels' row ring always finds a slot per row;
  // kernels/cpu/src/depthwise.h) need no scratch;
  // every other convolution multiplies weights [M/group, C/group * kH * kW]
  // by the im2col matrix of [C/group * kH * kW, oH * oW], group by group.
  // Constant weights are packed here, once, into the layout the product
  // reads (then only B needs scratch).
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  const int64_t group = ctx.attr_int("group", 1);
  const int64_t mg = w[0] / group;
  int64_t k = w[1], n = 1;
  for (int64_t v : s.kernel) k *= v;
  for (int64_t v : s.out) n *= v;
  const bool depthwise = group == x[1] && w[0] == x[1] && s.kernel.size() == 2 && s.kernel[0] <= 7 &&
                         s.kernel[1] <= 7 && s.dilations[0] <= 6 && s.dilations[1] <= 6 &&
                         s.strides[0] == s.strides[1] && (s.strides[0] == 1 || s.strides[0] == 2);
  const bool pack = packs(l) && !depthwise;
  // 3x3, stride 1, one group, constant weights, channels enough to pay for
  // the transforms: Winograd F(2x2, 3x3) (kernels/cpu/src/winograd.cc).
  const bool winograd = pack && ctx.input(1).is_constant() && x.size() == 4 && group == 1 &&
                        s.kernel == std::vector<int64_t>{3, 3} && s.strides == std::vector<int64_t>{1, 1} &&
                        s.dilations == std::vector<int64_t>{1, 1} && w[0] >= 16 && w[1] >= 16;
  // Not where Winograd can run, which does 2.25x fewer multiplies: in the
  // model, one vCPU, DenseNet-121's 3x3 128 -> 32 on 7 x 7 took 0.056 ms by
  // Winograd and 0.070 in lanes; ResNet-50's 512 -> 512 about 2.0 ms either
  // way on AVX-512, and on AVX2 2.0 by Winograd, 2.9 in lanes.
  if (pack && ctx.input(1).is_constant() && !winograd && lower_conv_lanes(ctx, l, s, p, group, k, n)) return;
  if (winograd) {
    using namespace kiln::kernels;
    const int64_t tiles = ((s.out[0] + 1) / 2) * ((s.out[1] + 1) / 2);
    // With LowerOptions::bf16_weights the 16 products run in BF16.
    HostTensor transformed = l.options().bf16_weights
                                 ? HostTensor(DType::BFLOAT16, {winograd_weight_bf16_elements(w[0], w[1])})
                                 : HostTensor(DType::FLOAT32, {winograd_weight_floats(w[0], w[1])});
    if (l.options().bf16_weights) {
      winograd_transform_weights_bf16(w[0], w[1], ctx.input(1).constant->data<float>(), transformed.data<uint16_t>());
    } else {
      winograd_transform_weights(w[0], w[1], ctx.input(1).constant->data<float>(), transformed.data<float>());
    }
    const int weight = l.constant(ctx.node().name + "/winograd_weight", std::move(transformed));
    std::vector<int> inputs = {l.tensor(ctx.input_id(0)), weight};
    if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
    // Blocks for threads to take ranges of tiles (winograd_scratch_blocks).
    const int64_t blocks = std::min(winograd_scratch_blocks(w[0], w[1], tiles), l.options().thread_blocks);
    std::vector<int> scratch = {
        l.temp(ctx.node().name + "/winograd_input", DType::FLOAT32, {blocks * winograd_input_floats(w[1], tiles)}),
        l.temp(ctx.node().name + "/winograd_product", DType::FLOAT32,
               {blocks * winograd_product_floats(w[0], w[1], tiles)})};
    fb::ParamsUnion params;
    params.Set(std::move(p));
    l.kernel("ConvWinograd", inputs, {l.tensor(ctx.output_id(0))}, std::move(params), std::move(scratch));
    return;
  }
  int weight = -1;
  std::vector<int> scratch;
  if (pack && ctx.input(1).is_constant()) {
    using namespace kiln::kernels;
    const float* src = ctx.input(1).constant->data<float>();
    // A first layer (at most 4 channels, stride 2, no dilation) keeps FP32
    // weights for its direct kernel (kernels/cpu/src/linear.cc), which
    // beats the BF16 product over an im2col of few rows: resnet50's
    // 7x7 stride-2 conv1 (3 -> 64 channels, 224 x 224) took 3.1 ms in BF16.
    const bool first_layer =
        x[1] <= 4 && s.strides == std::vector<int64_t>{2, 2} && s.dilations == std::vector<int64_t>{1, 1};
    if (l.options().bf16_weights && group == 1 && !first_layer) {
      // BF16 (LowerOptions::bf16_weights): one group, whose product runs
      // in BF16; grouped ones keep their FP32 direct kernel.
      HostTensor packed(DType::BFLOAT16, {gemm_prepacked_a_bf16_elements(mg, k)});
      gemm_prepack_a_bf16(mg, k, src, packed.data<uint16_t>());
      weight = l.constant(ctx.node().name + "/packed_weight", std::move(packed));
    } else {
      const int64_t per_group = gemm_prepacked_a_floats(mg, k);
      HostTensor packed(DType::FLOAT32, {group * per_group});
      for (int64_t g = 0; g < group; ++g) {
        gemm_prepack_a(mg, k, src + g * mg * k, packed.data<float>() + g * per_group);
      }
      weight = l.constant(ctx.node().name + "/packed_weight", std::move(packed));
    }
    p.packed_weights = true;
    // Grouped: a block per group that runs at once (gemm_blocking.h).
    // One group: blocks for threads' regions (gemm_region_scratch_blocks),
    // except where B is not packed (a 1x1 convolution with few output
    // channels reads it in place) or the first layer's direct kernel runs.
    const bool b_in_place = k == w[1] && gemm_reads_b_in_place(mg, n) &&
                            std::all_of(s.strides.begin(), s.strides.end(), [](int64_t v) { return v == 1; }) &&
                            std::all_of(p.pads.begin(), p.pads.end(), [](int64_t v) { return v == 0; });
    const int64_t region_blocks = b_in_place || first_layer ? 1 : gemm_region_scratch_blocks(mg, n, k);
    const int64_t blocks =
        depthwise ? 1
                  : std::min(group > 1 ? gemm_group_scratch_blocks(group) : region_blocks, l.options().thread_blocks);
    scratch = {l.temp(ctx.node().name + "/packed_b", DType::FLOAT32, {blocks * gemm_pack_b_floats(k, n)})};
  } else {
    weight = l.tensor(ctx.input_id(1));
    if (pack) scratch = packing_scratch(ctx, l, mg, n, k);
  }
  std::vector<int> inputs = {l.tensor(ctx.input_id(0)), weight};
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  // A BatchNormalization [+ Relu] fused ahead (passes/fuse.h): the fourth
  // input, applied as B is packed (the fusion asks for packing).
  const NodeInputAffine& affine = ctx.node().input_affine;
  if (affine.value >= 0) {
    if (!pack || group != 1) ctx.error("internal error: an input affine map without the packed product");
    if (!ctx.has_input(2)) inputs.push_back(-1);
    inputs.push_back(l.tensor(affine.value));
    p.input_affine_relu = affine.relu;
  }
  fb::ParamsUnion params;
  params.Set(std::move(p));
  l.kernel("Conv", inputs, {l.tensor(ctx.output_id(0))}, std::move(params), std::move(scratch));
}

// ConvTranspose geometry. Per spatial axis the full output is
//   natural = (in - 1) * stride + (kernel - 1) * dilation + 1 + output_padding
// less pads_begin + pads_end. Pads come from the attribute, or with
// output_shape or auto_pad SAME_* (target in * stride) from the total
// padding natural - target, split as the ONNX spec says (SAME_UPPER puts
// the odd element at the end, the others at the beginning). A target larger
// than natural is reached by padding the output's end (output_padding).
struct TransposeSpatial {
  Spatial s;
  std::vector<int64_t> output_padding;
};

TransposeSpatial conv_transpose_spatial(OpContext& ctx) {
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  const size_t n = x.size() - 2;
  if (n < 1 || n > 3) ctx.not_supported(n, "-D transposed convolution (1-D to 3-D are supported)");
  TransposeSpatial t;
  Spatial& s = t.s;
  s.kernel = ctx.attr_ints("kernel_shape", spatial_dims(w));
  s.strides = ctx.attr_ints("strides", std::vector<int64_t>(n, 1));
  s.dilations = ctx.attr_ints("dilations", std::vector<int64_t>(n, 1));
  t.output_padding = ctx.attr_ints("output_padding", std::vector<int64_t>(n, 0));
  if (s.kernel.size() != n || s.strides.size() != n || s.dilations.size() != n || t.output_padding.size() != n) {
    ctx.error("kernel_shape, strides, dilations or output_padding have the wrong length");
  }
  if (s.kernel != spatial_dims(w)) ctx.error("kernel_shape does not match the weight");
  std::vector<int64_t> target = ctx.attr_ints("output_shape");
  if (target.size() == n + 2) target.erase(target.begin(), target.begin() + 2);
  if (!target.empty() && target.size() != n) ctx.error("output_shape has ", target.size(), " entries");
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    ctx.error("unknown auto_pad '", auto_pad, "'");
  }
  const auto pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (pads.size() != 2 * n) ctx.error("pads has ", pads.size(), " entries, expected ", 2 * n);
  s.pads_begin.assign(n, 0);
  s.pads_end.assign(n, 0);
  s.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = x[i + 2];
    // Bounded attributes keep the arithmetic below far from overflow.
    constexpr int64_t kLimit = int64_t{1} << 30;
    if (s.kernel[i] <= 0 || s.strides[i] <= 0 || s.dilations[i] <= 0) {
      ctx.error("kernel, strides and dilations must be positive");
    }
    if (s.kernel[i] > kLimit || s.strides[i] > kLimit || s.dilations[i] > kLimit || t.output_padding[i] > kLimit ||
        pads[i] > kLimit || pads[i + n] > kLimit || (!target.empty() && target[i] > kLimit * kLimit)) {
      ctx.not_supported("kernel, strides, dilations, pads or output shape above 2^30");
    }
    if (t.output_padding[i] < 0) ctx.error("negative output_padding");
    if (in <= 0) ctx.error("empty spatial input");
    const int64_t base = (in - 1) * s.strides[i] + (s.kernel[i] - 1) * s.dilations[i] + 1;
    const int64_t natural = base + t.output_padding[i];
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!target.empty() || same) {
      const int64_t goal = !target.empty() ? target[i] : in * s.strides[i];
      if (goal <= 0) ctx.error("output_shape must be positive");
      const int64_t total = natural - goal;
      if (total < 0) {
        t.output_padding[i] -= total;
      } else if (auto_pad == "SAME_UPPER") {
        s.pads_begin[i] = total / 2;
        s.pads_end[i] = total - total / 2;
      } else {
        s.pads_begin[i] = total - total / 2;
        s.pads_end[i] = total / 2;
      }
    } else if (auto_pad == "NOTSET") {
      s.pads_begin[i] = pads[i];
      s.pads_end[i] = pads[i + n];
      if (s.pads_begin[i] < 0 || s.pads_end[i] < 0) ctx.not_supported("negative pads");
    }
    if (t.output_padding[i] > kLimit) ctx.not_supported("output padding above 2^30 (from output_shape)");
    s.out[i] = base + t.output_padding[i] - s.pads_begin[i] - s.pads_end[i];
    if (s.out[i] <= 0) ctx.error("output size ", s.out[i], " on axis ", i, " is not positive");
  }
  return t;
}

void infer_conv_transpose(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) ctx.expect_dtype(i, {DType::FLOAT32});
  }
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  if (x.size() < 3) ctx.error("expects rank >= 3");
  if (w.size() != x.size()) ctx.error("weight rank ", w.size(), " differs from input rank ", x.size());
  const int64_t group = ctx.attr_int("group", 1);
  if (group <= 0 || x[1] % group != 0) ctx.error("group ", group, " does not divide the channels");
  if (w[0] != x[1]) ctx.error("weight ", shape_str(w), " expects ", w[0], " input channels, input has ", x[1]);
  const int64_t m = w[1] * group;
  if (ctx.has_input(2) && shape_numel(ctx.shape(2)) != m) ctx.error("bias must have ", m, " elements");
  const TransposeSpatial t = conv_transpose_spatial(ctx);
  std::vector<int64_t> out = {x[0], m};
  out.insert(out.end(), t.s.out.begin(), t.s.out.end());
  ctx.set_output(0, DType::FLOAT32, out);
}

void lower_conv_transpose(OpContext& ctx, LoweringContext& l) {
  const TransposeSpatial t = conv_transpose_spatial(ctx);
  fb::ConvParamsT p;
  p.group = static_cast<int32_t>(ctx.attr_int("group", 1));
  if (t.s.kernel.size() == 3) {
    // ConvTransposeNd (linear.cc): three entries per list, six pads.
    auto narrow = [](const std::vector<int64_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); };
    p.kernel = narrow(t.s.kernel);
    p.strides = narrow(t.s.strides);
    p.dilations = narrow(t.s.dilations);
    p.pads = narrow(t.s.pads_begin);
    p.pads.insert(p.pads.end(), t.s.pads_end.begin(), t.s.pads_end.end());
    p.output_padding = narrow(t.output_padding);
    p.activation = fused_activation(ctx.node());
    fb::ParamsUnion params;
    params.Set(std::move(p));
    std::vector<int> inputs = {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))};
    if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
    l.kernel("ConvTransposeNd", inputs, {l.tensor(ctx.output_id(0))}, std::move(params));
    return;
  }
  p.kernel = t.s.kernel2();
  p.strides = t.s.strides2();
  p.dilations = t.s.dilations2();
  p.pads = t.s.pads4();
  const auto& op = t.output_padding;
  p.output_padding = {op.size() == 1 ? 0 : static_cast<int32_t>(op[0]), static_cast<int32_t>(op.back())};
  p.activation = fused_activation(ctx.node());
  fb::ParamsUnion params;
  params.Set(std::move(p));
  std::vector<int> inputs = {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))};
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  // With packing, products (gemm_blocking.h's conv_transpose_*): the
  // columns of a block of input positions, and their product's packing.
  std::vector<int> scratch;
  if (packs(l)) {
    using namespace kiln::kernels;
    const auto& x = ctx.shape(0);
    const auto& w = ctx.shape(1);
    const int64_t positions = x.size() == 4 ? x[2] * x[3] : x[2];
    const int64_t group = ctx.attr_int("group", 1);
    const int64_t rows = w[1] * shape_numel(spatial_dims(w)), depth = x[1] / group;
    const int64_t block = conv_transpose_block(positions);
    scratch = {l.temp(ctx.node().name + "/columns", DType::FLOAT32, {conv_transpose_columns_floats(rows, positions)}),
               l.temp(ctx.node().name + "/packed_a", DType::FLOAT32, {gemm_pack_a_floats(rows, depth)}),
               l.temp(ctx.node().name + "/packed_b", DType::FLOAT32, {gemm_pack_b_floats(depth, block)})};
  }
  l.kernel("ConvTranspose", inputs, {l.tensor(ctx.output_id(0))}, std::move(params), std::move(scratch));
}

void infer_gemm(OpContext& ctx) {
  ctx.expect_inputs(2, 3);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) ctx.expect_dtype(i, {DType::FLOAT32});
  }
  const auto& a = ctx.shape(0);
  const auto& b = ctx.shape(1);
  if (a.size() != 2 || b.size() != 2) ctx.error("A and B must be 2-D, are ", shape_str(a), " and ", shape_str(b));
  const bool ta = ctx.attr_int("transA", 0) != 0;
  const bool tb = ctx.attr_int("transB", 0) != 0;
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb) ctx.error("inner dimensions differ: ", shape_str(a), " x ", shape_str(b));
  if (ctx.has_input(2)) {
    const auto out = broadcast_shapes(ctx, ctx.shape(2), {m, n});
    if (out != std::vector<int64_t>{m, n})
      ctx.error("C ", shape_str(ctx.shape(2)), " does not broadcast to [", m, ", ", n, "]");
  }
  ctx.set_output(0, DType::FLOAT32, {m, n});
}

void lower_gemm(OpContext& ctx, LoweringContext& l) {
  fb::GemmParamsT p;
  p.alpha = ctx.attr_float("alpha", 1.f);
  p.beta = ctx.attr_float("beta", 1.f);
  p.trans_a = ctx.attr_int("transA", 0) != 0;
  p.trans_b = ctx.attr_int("transB", 0) != 0;
  p.activation = fused_activation(ctx.node());
  const auto& a = ctx.shape(0);
  const auto& y = ctx.output(0).shape;
  const int64_t k = p.trans_a ? a[0] : a[1];
  std::vector<int> inputs = {l.tensor(ctx.input_id(0))};
  std::vector<int> scratch;
  if (packs(l) && ctx.input(1).is_constant() && (y[0] > 1 || l.options().bounded) && y[1] > 0 && k > 0) {
    // A constant B is packed here, once (then only A needs scratch).
    inputs.push_back(packed_b(ctx, l, k, y[1], p.trans_b));
    p.packed_b = true;
    scratch = {l.temp(ctx.node().name + "/packed_a", DType::FLOAT32,
                      {std::min(kiln::kernels::gemm_row_scratch_blocks(y[0]), l.options().thread_blocks) *
                       kiln::kernels::gemm_pack_a_floats(y[0], k)})};
  } else {
    inputs.push_back(l.tensor(ctx.input_id(1)));
    scratch = packing_scratch(ctx, l, y[0], y[1], k);
  }
  fb::ParamsUnion params;
  params.Set(std::move(p));
  if (ctx.has_input(2)) inputs.push_back(l.tensor(ctx.input_id(2)));
  l.kernel("Gemm", inputs, {l.tensor(ctx.output_id(0))}, std::move(params), std::move(scratch));
}

void infer_matmul(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.expect_dtype(1, {DType::FLOAT32});
  auto a = ctx.shape(0);
  auto b = ctx.shape(1);
  if (a.empty() || b.empty()) ctx.error("MatMul of a scalar");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  if (a.back() != b[b.size() - 2])
    ctx.error("inner dimensions differ: ", shape_str(ctx.shape(0)), " x ", shape_str(ctx.shape(1)));
  std::vector<int64_t> out =
      broadcast_shapes(ctx, std::vector<int64_t>(a.begin(), a.end() - 2), std::vector<int64_t>(b.begin(), b.end() - 2));
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  ctx.set_output(0, DType::FLOAT32, out);
}

void lower_matmul(OpContext& ctx, LoweringContext& l) {
  const auto& a = ctx.shape(0);
  const auto& b = ctx.shape(1);
  // With a B of rank 1 or 2 the kernel stacks A's batches into one product.
  const int64_t m = a.size() == 1   ? 1
                    : b.size() <= 2 ? shape_numel(std::vector<int64_t>(a.begin(), a.end() - 1))
                                    : a[a.size() - 2];
  const int64_t n = b.size() == 1 ? 1 : b.back();
  // A bias fused by passes/fuse (input 2) is added by the packed kernel.
  const bool has_bias = ctx.has_input(2);
  fb::ParamsUnion params;
  if (packs(l) && ctx.input(1).is_constant() && b.size() == 2 && a.size() >= 2 && (m > 1 || l.options().bounded) &&
      n > 0 && a.back() > 0) {
    // A constant matrix B is packed here, once; A's rows make one product.
    fb::MatMulParamsT p;
    p.activation = fused_activation(ctx.node());
    p.packed_b = true;
    params.Set(std::move(p));
    std::vector<int> inputs = {l.tensor(ctx.input_id(0)), packed_b(ctx, l, a.back(), n, false)};
    if (has_bias) inputs.push_back(l.tensor(ctx.input_id(2)));
    // Threads take ranges of rows, each packing into a block of its own.
    const int scratch = l.temp(ctx.node().name + "/packed_a", DType::FLOAT32,
                               {std::min(kiln::kernels::gemm_row_scratch_blocks(m), l.options().thread_blocks) *
                                kiln::kernels::gemm_pack_a_floats(m, a.back())});
    l.kernel("MatMul", inputs, {l.tensor(ctx.output_id(0))}, std::move(params), {scratch});
    return;
  }
  // A B with batch dimensions: one product per batch, run side by side on
  // blocks of their own where they are small.
  int64_t blocks = 1;
  if (b.size() > 2 && m > 0 && n > 0) {
    const int64_t batches = shape_numel(ctx.output(0).shape) / (m * n);
    blocks = std::min(kiln::kernels::gemm_batch_scratch_blocks(batches, m, n, a.back()), l.options().thread_blocks);
  }
  std::vector<int> scratch = packing_scratch(ctx, l, m, n, a.back(), blocks);
  // Without packing, the bias and the activation go to an Add after it.
  fb::BinaryParamsT p;
  p.activation = fused_activation(ctx.node());
  const int out = l.tensor(ctx.output_id(0));
  const int product = has_bias ? l.temp(ctx.node().name + "/product", DType::FLOAT32, ctx.output(0).shape) : out;
  if (!has_bias && p.activation != nullptr) params.Set(std::move(p));
  l.kernel("MatMul", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {product}, std::move(params),
           std::move(scratch));
  if (has_bias) {
    fb::ParamsUnion add_params;
    add_params.Set(std::move(p));
    l.kernel("Add", {product, l.tensor(ctx.input_id(2))}, {out}, std::move(add_params));
  }
}

}  // namespace

void add_linear_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "Conv", .infer = infer_conv, .lower = lower_conv});
  ops.push_back({.op_type = "ConvTranspose", .infer = infer_conv_transpose, .lower = lower_conv_transpose});
  ops.push_back({.op_type = "Gemm", .infer = infer_gemm, .lower = lower_gemm});
  ops.push_back({.op_type = "MatMul", .infer = infer_matmul, .lower = lower_matmul});
}

}  // namespace kiln::planner
