#include "ops/spatial.h"

namespace kiln::planner {
namespace {

// Kernels take windows, strides, dilations and pads as int32; anything this
// large is a malformed model, and bounding it keeps every sum below exact.
constexpr int64_t kMaxSpatial = int64_t{1} << 30;

void check_range(OpContext& ctx, const char* attribute, const std::vector<int64_t>& values) {
  for (int64_t v : values) {
    if (v > kMaxSpatial || v < -kMaxSpatial) ctx.error(attribute, " value ", v, " is out of range (at most 2^30)");
  }
}

std::vector<int32_t> as2(const std::vector<int64_t>& v, int32_t pad_value) {
  if (v.size() == 1) return {pad_value, static_cast<int32_t>(v[0])};
  return {static_cast<int32_t>(v[0]), static_cast<int32_t>(v[1])};
}

}  // namespace

std::vector<int32_t> Spatial::kernel2() const { return as2(kernel, 1); }
std::vector<int32_t> Spatial::strides2() const { return as2(strides, 1); }
std::vector<int32_t> Spatial::dilations2() const { return as2(dilations, 1); }
std::vector<int32_t> Spatial::pads4() const {
  const auto b = as2(pads_begin, 0);
  const auto e = as2(pads_end, 0);
  return {b[0], b[1], e[0], e[1]};
}

Spatial resolve_spatial(OpContext& ctx, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                        bool allow_ceil, bool allow_dilations, size_t max_axes) {
  const size_t n = in.size();
  if (n < 1 || n > max_axes) {
    ctx.not_supported(n, "-D spatial input (1-D up to ", max_axes, "-D is supported)");
  }
  Spatial s;
  s.kernel = kernel;
  if (s.kernel.size() != n) ctx.error("kernel_shape has ", s.kernel.size(), " entries for ", n, " spatial axes");
  s.strides = ctx.attr_ints("strides", std::vector<int64_t>(n, 1));
  s.dilations = ctx.attr_ints("dilations", std::vector<int64_t>(n, 1));
  if (s.strides.size() != n || s.dilations.size() != n) ctx.error("strides or dilations have the wrong length");
  check_range(ctx, "kernel_shape", s.kernel);
  check_range(ctx, "strides", s.strides);
  check_range(ctx, "dilations", s.dilations);
  for (size_t i = 0; i < n; ++i) {
    if (s.kernel[i] <= 0 || s.strides[i] <= 0 || s.dilations[i] <= 0) {
      ctx.error("kernel, strides and dilations must be positive");
    }
    if (!allow_dilations && s.dilations[i] != 1) ctx.not_supported("dilations are not supported");
  }
  const bool ceil_mode = allow_ceil && ctx.attr_int("ceil_mode", 0) != 0;
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  s.pads_begin.assign(n, 0);
  s.pads_end.assign(n, 0);
  s.out.assign(n, 0);
  if (auto_pad == "NOTSET") {
    const auto pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
    if (pads.size() != 2 * n) ctx.error("pads has ", pads.size(), " entries, expected ", 2 * n);
    check_range(ctx, "pads", pads);
    for (size_t i = 0; i < n; ++i) {
      s.pads_begin[i] = pads[i];
      s.pads_end[i] = pads[i + n];
      if (s.pads_begin[i] < 0 || s.pads_end[i] < 0) ctx.not_supported("negative pads");
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      const int64_t out = (in[i] + s.strides[i] - 1) / s.strides[i];
      const int64_t window = (s.kernel[i] - 1) * s.dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s.strides[i] + window - in[i]);
      const int64_t small = total / 2;
      s.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      s.pads_end[i] = total - s.pads_begin[i];
    }
  } else if (auto_pad != "VALID") {
    ctx.error("unknown auto_pad '", auto_pad, "'");
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t window = (s.kernel[i] - 1) * s.dilations[i] + 1;
    const int64_t span = in[i] + s.pads_begin[i] + s.pads_end[i] - window;
    if (span < 0)
      ctx.error("kernel_shape ", s.kernel[i], " with dilations ", s.dilations[i], " and pads ", s.pads_begin[i], "+",
                s.pads_end[i], " give a window larger than the padded input on axis ", i);
    if (window > kMaxSpatial)
      ctx.error("kernel_shape ", s.kernel[i], " with dilations ", s.dilations[i], " spans ", window,
                " elements on axis ", i, " (at most 2^30)");
    int64_t out = ceil_mode ? (span + s.strides[i] - 1) / s.strides[i] + 1 : span / s.strides[i] + 1;
    // A last window that would start in the end padding is dropped.
    if (ceil_mode && (out - 1) * s.strides[i] >= in[i] + s.pads_begin[i]) --out;
    s.out[i] = out;
  }
  return s;
}

}  // namespace kiln::planner
