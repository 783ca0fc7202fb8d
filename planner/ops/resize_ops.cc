// Resize (opsets 10 to 17) and its predecessor Upsample (nearest only);
// GridSample and RoiAlign (at the end).
//
// Scales or sizes must be constants. With scales, each output axis has
// floor(in * scale) elements and the kernel maps coordinates with the given
// scale; with sizes, the scale is sizes / in. Opset 10 (and Upsample) map
// coordinates asymmetrically and, for nearest, round down, which matches
// ONNX Runtime for upsampling; their nearest downsampling rounds up there,
// which no single rounding mode reproduces, so it is refused.
//
// On the CPU, a float32 nearest or linear resize of the last two axes gets
// its taps (input indices and weights per output row and column) computed
// here, once, as a constant second input (kiln/kernels/resize_taps.h).
// tf_crop_and_resize (a constant roi; nearest or linear; only the last two
// axes cropped) always runs so, followed by a Where that writes
// extrapolation_value where a row or column maps outside the input.

#include <cmath>
#include <string>

#include "kiln/kernels/resize_taps.h"
#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

struct ResizeArgs {
  fb::ResizeParamsT params;
  std::vector<int64_t> out;
  // tf_crop_and_resize: the roi input (starts, then ends, one per axis) and
  // the extrapolation value; crop is empty in every other mode.
  std::vector<double> crop;
  float extrapolation = 0.f;
};

std::vector<double> constant_floats(OpContext& ctx, size_t i, const char* what) {
  const HostTensor& t = ctx.constant_input(i, what);
  std::vector<double> v;
  for (int64_t k = 0; k < t.numel(); ++k) v.push_back(t.float_at(k));
  return v;
}

// Output shape and per-axis scales from scales (or sizes, when `sizes` is
// non-empty).
void resolve_sizes(OpContext& ctx, const std::vector<double>& scales, const std::vector<int64_t>& sizes,
                   ResizeArgs& a) {
  const auto& in = ctx.shape(0);
  const size_t rank = in.size();
  a.params.sized = !sizes.empty();
  if (!sizes.empty()) {
    if (sizes.size() != rank) ctx.error("sizes has ", sizes.size(), " entries for rank ", rank);
    for (size_t d = 0; d < rank; ++d) {
      if (sizes[d] < 0) ctx.error("negative size");
      if (in[d] == 0 && sizes[d] != 0) ctx.error("cannot resize an empty axis");
      a.out.push_back(sizes[d]);
      a.params.scales.push_back(in[d] > 0 ? static_cast<float>(static_cast<double>(sizes[d]) / in[d]) : 1.f);
    }
    return;
  }
  if (scales.size() != rank) ctx.error("scales has ", scales.size(), " entries for rank ", rank);
  for (size_t d = 0; d < rank; ++d) {
    // Scales are float32 in the model; the output size uses that value.
    const float s = static_cast<float>(scales[d]);
    if (!(s > 0.f) || !std::isfinite(s)) ctx.error("scale ", scales[d], " must be positive and finite");
    // Also with tf_crop_and_resize: ONNX's shape inference, its reference
    // and ONNX Runtime size the output from the input, not the region.
    const double size = std::floor(static_cast<double>(in[d]) * static_cast<double>(s));
    if (size > static_cast<double>(int64_t{1} << 40)) ctx.error("output axis of ", size, " elements is too large");
    a.out.push_back(static_cast<int64_t>(size));
    a.params.scales.push_back(s);
  }
}

// tf_crop_and_resize's region of interest: a constant of 2 * rank finite
// values. The kernel resizes only the last two axes with a table, so the
// leading axes must keep the whole input (start 0, end 1).
std::vector<double> crop_roi(OpContext& ctx) {
  const size_t rank = ctx.shape(0).size();
  if (!ctx.has_input(1)) ctx.error("tf_crop_and_resize needs the roi input");
  std::vector<double> roi = constant_floats(ctx, 1, "roi");
  if (roi.size() != 2 * rank) ctx.error("roi has ", roi.size(), " entries, expected ", 2 * rank);
  for (double v : roi) {
    if (!std::isfinite(v)) ctx.error("roi value ", v, " is not finite");
  }
  if (rank < 2) ctx.not_supported("tf_crop_and_resize of a rank-", rank, " input (rank >= 2 is supported)");
  for (size_t d = 0; d + 2 < rank; ++d) {
    if (roi[d] != 0.0 || roi[d + rank] != 1.0) {
      ctx.not_supported("tf_crop_and_resize with a region of interest on axis ", d,
                        " (only the last two axes may be cropped)");
    }
  }
  return roi;
}

fb::ResizeMode resize_mode(OpContext& ctx, const std::string& mode) {
  if (mode == "nearest") return fb::ResizeMode::NEAREST;
  if (mode == "linear") return fb::ResizeMode::LINEAR;
  if (mode == "cubic") return fb::ResizeMode::CUBIC;
  ctx.error("unknown mode '", mode, "'");
}

ResizeArgs resize_args(OpContext& ctx) {
  ResizeArgs a;
  fb::ResizeParamsT& p = a.params;
  p.mode = resize_mode(ctx, ctx.attr_string("mode", "nearest"));
  const bool legacy = ctx.node().op_type == "Upsample" || ctx.opset() < 11;
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (ctx.node().op_type == "Upsample") {
    if (ctx.opset() < 9) {
      ctx.expect_inputs(1, 1);
      for (float s : ctx.attr_floats("scales")) scales.push_back(s);
    } else {
      ctx.expect_inputs(2, 2);
      scales = constant_floats(ctx, 1, "scales");
    }
    if (p.mode != fb::ResizeMode::NEAREST) ctx.not_supported("Upsample mode other than nearest");
  } else if (ctx.opset() < 11) {
    ctx.expect_inputs(2, 2);
    scales = constant_floats(ctx, 1, "scales");
  } else {
    ctx.expect_inputs(1, 4);
    if (ctx.has_input(2)) scales = constant_floats(ctx, 2, "scales");
    if (ctx.has_input(3)) sizes = ctx.constant_input(3, "sizes").to_int64s();
    if (!scales.empty() && !sizes.empty()) ctx.error("both scales and sizes are given");
    if (scales.empty() && sizes.empty()) ctx.error("neither scales nor sizes is given");
  }
  if (legacy) {
    p.coordinate = fb::ResizeCoordinate::ASYMMETRIC;
    p.nearest = fb::ResizeNearest::FLOOR;
    if (p.mode == fb::ResizeMode::CUBIC) ctx.not_supported("cubic mode before opset 11");
    for (double s : scales) {
      if (p.mode == fb::ResizeMode::NEAREST && s < 1.0) ctx.not_supported("nearest downsampling before opset 11");
    }
  } else {
    const std::string coordinate = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
    if (coordinate == "half_pixel") {
      p.coordinate = fb::ResizeCoordinate::HALF_PIXEL;
    } else if (coordinate == "pytorch_half_pixel") {
      p.coordinate = fb::ResizeCoordinate::PYTORCH_HALF_PIXEL;
    } else if (coordinate == "align_corners") {
      p.coordinate = fb::ResizeCoordinate::ALIGN_CORNERS;
    } else if (coordinate == "asymmetric") {
      p.coordinate = fb::ResizeCoordinate::ASYMMETRIC;
    } else if (coordinate == "tf_half_pixel_for_nn") {
      p.coordinate = fb::ResizeCoordinate::TF_HALF_PIXEL_FOR_NN;
    } else if (coordinate == "tf_crop_and_resize") {
      // The kernel only sees the taps table (resize_taps.h); its
      // coordinate field is not read.
      p.coordinate = fb::ResizeCoordinate::ALIGN_CORNERS;
      a.crop = crop_roi(ctx);
      a.extrapolation = ctx.attr_float("extrapolation_value", 0.f);
    } else {
      ctx.error("unknown coordinate_transformation_mode '", coordinate, "'");
    }
    const std::string nearest = ctx.attr_string("nearest_mode", "round_prefer_floor");
    if (nearest == "round_prefer_floor") {
      p.nearest = fb::ResizeNearest::ROUND_PREFER_FLOOR;
    } else if (nearest == "round_prefer_ceil") {
      p.nearest = fb::ResizeNearest::ROUND_PREFER_CEIL;
    } else if (nearest == "floor") {
      p.nearest = fb::ResizeNearest::FLOOR;
    } else if (nearest == "ceil") {
      p.nearest = fb::ResizeNearest::CEIL;
    } else {
      ctx.error("unknown nearest_mode '", nearest, "'");
    }
    p.cubic_coeff_a = ctx.attr_float("cubic_coeff_a", -0.75f);
    p.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
  }
  resolve_sizes(ctx, scales, sizes, a);
  return a;
}

void infer_resize(OpContext& ctx) {
  ResizeArgs a = resize_args(ctx);
  if (a.params.mode == fb::ResizeMode::NEAREST) {
    ctx.expect_dtype(0, {DType::FLOAT32, DType::FLOAT64, DType::INT8, DType::UINT8, DType::INT16, DType::UINT16,
                         DType::INT32, DType::UINT32, DType::INT64, DType::UINT64, DType::BOOL});
  } else {
    ctx.expect_dtype(0, {DType::FLOAT32});
  }
  if (!a.crop.empty()) {
    // Cropping runs only as a taps table (resize_taps.h).
    const size_t rank = a.out.size();
    if (a.params.mode == fb::ResizeMode::CUBIC) ctx.not_supported("tf_crop_and_resize in cubic mode");
    if (ctx.dtype(0) != DType::FLOAT32) ctx.not_supported("tf_crop_and_resize of ", dtype_str(ctx.dtype(0)), " data");
    for (size_t d = 0; d < rank; ++d) {
      if (d + 2 < rank && a.out[d] != ctx.shape(0)[d]) {
        ctx.not_supported("tf_crop_and_resize that resizes axis ", d, " (only the last two axes)");
      }
      if (d + 2 >= rank && (a.out[d] <= 0 || a.out[d] >= kernels::kResizeTableMaxIndex ||
                            ctx.shape(0)[d] >= kernels::kResizeTableMaxIndex)) {
        ctx.error("tf_crop_and_resize axis ", d, " must have input and output lengths in [1, 2^24)");
      }
    }
  }
  ctx.set_output(0, ctx.dtype(0), a.out);
}

// tf_crop_and_resize: the taps table of the region of interest, and the
// extrapolation value written with a Where over the output rows and
// columns that fall outside the input.
void lower_crop_and_resize(OpContext& ctx, LoweringContext& l, ResizeArgs& a) {
  const std::vector<int64_t>& shape = ctx.shape(0);
  const size_t rank = shape.size();
  const int64_t ih = shape[rank - 2], iw = shape[rank - 1], oh = a.out[rank - 2], ow = a.out[rank - 1];
  const double crop[4] = {a.crop[rank - 2], a.crop[rank - 1], a.crop[2 * rank - 2], a.crop[2 * rank - 1]};
  kernels::ResizeAxisMode mode;
  mode.mode = a.params.mode;
  mode.nearest = a.params.nearest;
  HostTensor taps(DType::FLOAT32, {4, oh + ow});
  kernels::resize_taps_table(mode, 1.0, 1.0, ih, iw, oh, ow, taps.data<float>(), crop);
  HostTensor outside(DType::BOOL, {oh, ow});
  bool any = false;
  const double crop_rows[2] = {crop[0], crop[2]}, crop_cols[2] = {crop[1], crop[3]};
  for (int64_t y = 0; y < oh; ++y) {
    const bool row = kernels::resize_crop_outside(crop_rows, y, oh, ih);
    for (int64_t x = 0; x < ow; ++x) {
      const bool o = row || kernels::resize_crop_outside(crop_cols, x, ow, iw);
      outside.data<uint8_t>()[y * ow + x] = o ? 1 : 0;
      any = any || o;
    }
  }
  const int in = l.tensor(ctx.input_id(0));
  const int out = l.tensor(ctx.output_id(0));
  const int table = l.constant(ctx.node().name + "/taps", std::move(taps));
  const int resized = any ? l.temp(ctx.node().name + "/cropped", DType::FLOAT32, a.out) : out;
  fb::ParamsUnion params;
  params.Set(std::move(a.params));
  l.kernel("Resize", {in, table}, {resized}, std::move(params));
  if (!any) return;
  HostTensor value(DType::FLOAT32, {});
  value.data<float>()[0] = a.extrapolation;
  l.kernel("Where",
           {l.constant(ctx.node().name + "/outside", std::move(outside)),
            l.constant(ctx.node().name + "/extrapolation", std::move(value)), resized},
           {out});
}

void lower_resize(OpContext& ctx, LoweringContext& l) {
  ResizeArgs a = resize_args(ctx);
  if (!a.crop.empty()) {
    lower_crop_and_resize(ctx, l, a);
    return;
  }
  const int in = l.tensor(ctx.input_id(0));
  const int out = l.tensor(ctx.output_id(0));
  if (a.out == ctx.shape(0)) {
    // Same size: every coordinate mode maps index x to x exactly, except
    // tf_half_pixel_for_nn, which shifts by half a pixel.
    bool identity = true;
    for (float s : a.params.scales) identity = identity && s == 1.f;
    identity = identity && a.params.coordinate != fb::ResizeCoordinate::TF_HALF_PIXEL_FOR_NN;
    if (identity) {
      l.view(in, out);
      return;
    }
  }
  std::vector<int> inputs = {in};
  const std::vector<int64_t>& shape = ctx.shape(0);
  const size_t rank = shape.size();
  bool table = l.options().resize_taps && l.device().type() == fb::DeviceType::CPU && ctx.dtype(0) == DType::FLOAT32 &&
               a.params.mode != fb::ResizeMode::CUBIC && rank >= 2 && shape_numel(a.out) > 0;
  for (size_t d = 0; table && d < rank; ++d) {
    table = d + 2 < rank ? shape[d] == a.out[d] : shape[d] > 0 && shape[d] < kernels::kResizeTableMaxIndex;
  }
  if (table) {
    kernels::ResizeAxisMode mode;
    mode.mode = a.params.mode;
    mode.coordinate = a.params.coordinate;
    mode.nearest = a.params.nearest;
    mode.sized = a.params.sized;
    mode.exclude_outside = a.params.exclude_outside;
    mode.cubic_coeff_a = a.params.cubic_coeff_a;
    const int64_t oh = a.out[rank - 2], ow = a.out[rank - 1];
    HostTensor taps(DType::FLOAT32, {4, oh + ow});
    kernels::resize_taps_table(mode, a.params.scales[rank - 2], a.params.scales[rank - 1], shape[rank - 2],
                               shape[rank - 1], oh, ow, taps.data<float>());
    inputs.push_back(l.constant(ctx.node().name + "/taps", std::move(taps)));
  }
  fb::ParamsUnion params;
  params.Set(std::move(a.params));
  l.kernel("Resize", inputs, {out}, std::move(params));
}

// --- GridSample (opset 16: 4-D input) -----------------------------------
// The kernel (resize.cc, GridSample) reads the grid at run time; its
// GenericParams are [mode, padding_mode, align_corners] as numbers.

std::vector<int64_t> grid_sample_params(OpContext& ctx) {
  const std::string mode = ctx.attr_string("mode", "bilinear");
  const std::string padding = ctx.attr_string("padding_mode", "zeros");
  const int64_t align = ctx.attr_int("align_corners", 0);
  int64_t m = 0, p = 0;
  if (mode == "bilinear" || mode == "linear") {
    m = 0;
  } else if (mode == "nearest") {
    m = 1;
  } else if (mode == "bicubic" || mode == "cubic") {
    m = 2;
  } else {
    ctx.not_supported("mode '", mode, "' (bilinear, nearest and bicubic are supported)");
  }
  if (padding == "zeros") {
    p = 0;
  } else if (padding == "border") {
    p = 1;
  } else if (padding == "reflection") {
    p = 2;
  } else {
    ctx.not_supported("padding_mode '", padding, "' (zeros, border and reflection are supported)");
  }
  if (align != 0 && align != 1) ctx.error("align_corners must be 0 or 1, is ", align);
  return {m, p, align};
}

void infer_grid_sample(OpContext& ctx) {
  ctx.expect_inputs(2, 2);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.expect_dtype(1, {DType::FLOAT32});
  const auto& x = ctx.shape(0);
  const auto& grid = ctx.shape(1);
  if (x.size() != 4) ctx.not_supported(x.size(), "-D input (only 4-D, N C H W, is supported)");
  if (grid.size() != 4 || grid[0] != x[0] || grid[3] != 2) {
    ctx.error("grid ", shape_str(grid), " must be [", x[0], ", H_out, W_out, 2]");
  }
  if (x[2] <= 0 || x[3] <= 0 || x[2] >= (int64_t{1} << 30) || x[3] >= (int64_t{1} << 30)) {
    ctx.error("input height and width must be in [1, 2^30)");
  }
  grid_sample_params(ctx);
  ctx.set_output(0, DType::FLOAT32, {x[0], x[1], grid[1], grid[2]});
}

void lower_grid_sample(OpContext& ctx, LoweringContext& l) {
  l.kernel("GridSample", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1))}, {l.tensor(ctx.output_id(0))},
           generic_params(grid_sample_params(ctx), {}));
}

// --- RoiAlign (opsets 10 and 16) ------------------------------------------
// The kernel (resize.cc, RoiAlign) reads the ROIs and batch indices at run
// time and checks every batch index. Opset 10 has no
// coordinate_transformation_mode: it behaves as output_half_pixel.

fb::ParamsUnion roi_align_params(OpContext& ctx) {
  const std::string mode = ctx.attr_string("mode", "avg");
  const std::string transform =
      ctx.attr_string("coordinate_transformation_mode", ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (mode != "avg" && mode != "max") ctx.not_supported("mode '", mode, "' (avg and max are supported)");
  if (transform != "half_pixel" && transform != "output_half_pixel") {
    ctx.not_supported("coordinate_transformation_mode '", transform,
                      "' (half_pixel and output_half_pixel are supported)");
  }
  const int64_t ratio = ctx.attr_int("sampling_ratio", 0);
  if (ratio < 0 || ratio > (int64_t{1} << 16)) ctx.error("sampling_ratio ", ratio, " must be in [0, 2^16]");
  const float scale = ctx.attr_float("spatial_scale", 1.f);
  if (!std::isfinite(scale)) ctx.error("spatial_scale must be finite");
  return generic_params({ratio, mode == "max" ? 1 : 0, transform == "half_pixel" ? 1 : 0}, {scale});
}

void infer_roi_align(OpContext& ctx) {
  ctx.expect_inputs(3, 3);
  ctx.expect_dtype(0, {DType::FLOAT32});
  ctx.expect_dtype(1, {DType::FLOAT32});
  ctx.expect_dtype(2, {DType::INT64});
  const auto& x = ctx.shape(0);
  const auto& rois = ctx.shape(1);
  if (x.size() != 4) ctx.error("X ", shape_str(x), " must be 4-D (N, C, H, W)");
  if (x[2] <= 0 || x[3] <= 0 || x[2] >= (int64_t{1} << 24) || x[3] >= (int64_t{1} << 24)) {
    ctx.error("X's height and width must be in [1, 2^24)");
  }
  if (rois.size() != 2 || rois[1] != 4) ctx.error("rois ", shape_str(rois), " must be [num_rois, 4]");
  if (ctx.shape(2) != std::vector<int64_t>{rois[0]}) {
    ctx.error("batch_indices ", shape_str(ctx.shape(2)), " must be [", rois[0], "], one per ROI");
  }
  const int64_t oh = ctx.attr_int("output_height", 1), ow = ctx.attr_int("output_width", 1);
  if (oh <= 0 || ow <= 0 || oh > (int64_t{1} << 20) || ow > (int64_t{1} << 20)) {
    ctx.error("output_height and output_width must be in [1, 2^20]");
  }
  roi_align_params(ctx);
  ctx.set_output(0, DType::FLOAT32, {rois[0], x[1], oh, ow});
}

void lower_roi_align(OpContext& ctx, LoweringContext& l) {
  l.kernel("RoiAlign", {l.tensor(ctx.input_id(0)), l.tensor(ctx.input_id(1)), l.tensor(ctx.input_id(2))},
           {l.tensor(ctx.output_id(0))}, roi_align_params(ctx));
}

}  // namespace

void add_resize_ops(std::vector<OpDef>& ops) {
  ops.push_back({.op_type = "Resize", .infer = infer_resize, .lower = lower_resize});
  ops.push_back({.op_type = "Upsample", .infer = infer_resize, .lower = lower_resize});
  ops.push_back({.op_type = "GridSample", .infer = infer_grid_sample, .lower = lower_grid_sample});
  ops.push_back({.op_type = "RoiAlign", .infer = infer_roi_align, .lower = lower_roi_align});
}

}  // namespace kiln::planner
