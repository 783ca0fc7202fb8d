// Resize over the last two axes (nearest and linear, the coordinate modes
// PyTorch and TensorFlow export): the planner's tap table
// (kiln/kernels/resize_taps.h) and the kernel's own taps give the same
// outputs, both matching a reference written from the ONNX formulas here,
// upsampling, downsampling and by sizes. (No backend runs Resize off the
// CPU, so the table is always the CPU kernel's.)

#include <gtest/gtest.h>

#include <cmath>

#include "exec/run.h"
#include "support/graph_builder.h"

namespace kiln::testing {
namespace {

using planner::LInstruction;
using planner::PlanOptions;
using planner::PlanResult;

struct Case {
  std::string name;
  std::string mode;        // "linear" or "nearest"
  std::string coordinate;  // coordinate_transformation_mode
  std::string nearest;     // nearest_mode
  std::vector<int64_t> in;
  std::vector<float> scales;   // empty: by sizes
  std::vector<int64_t> sizes;  // empty: by scales
};

// The input coordinate of output index x (ONNX Resize, opset 13+).
double coordinate(const Case& c, int64_t x, double scale, int64_t out_len, int64_t in_len) {
  const double length = c.sizes.empty() ? in_len * scale : static_cast<double>(out_len);
  const double xf = static_cast<double>(x);
  if (c.coordinate == "half_pixel") return (xf + 0.5) / scale - 0.5;
  if (c.coordinate == "pytorch_half_pixel") return length > 1 ? (xf + 0.5) / scale - 0.5 : 0.0;
  if (c.coordinate == "align_corners") return length > 1 ? xf * (in_len - 1) / (length - 1) : 0.0;
  if (c.coordinate == "asymmetric") return xf / scale;
  return (xf + 0.5) / scale;  // tf_half_pixel_for_nn
}

int64_t clamp(int64_t i, int64_t n) { return std::min(std::max<int64_t>(i, 0), n - 1); }

// (index, weight) pairs along one axis.
std::vector<std::pair<int64_t, double>> taps(const Case& c, int64_t x, double scale, int64_t out_len, int64_t in_len) {
  const double v = coordinate(c, x, scale, out_len, in_len);
  if (c.mode == "nearest") {
    const double f = std::floor(v), r = v - f;
    bool up = false;
    if (c.nearest == "round_prefer_floor") up = r > 0.5;
    if (c.nearest == "round_prefer_ceil") up = r >= 0.5;
    if (c.nearest == "ceil") up = r > 0;
    return {{clamp(static_cast<int64_t>(f) + (up ? 1 : 0), in_len), 1.0}};
  }
  const double f = std::floor(v), r = v - f;
  const int64_t i = static_cast<int64_t>(f);
  return {{clamp(i, in_len), 1 - r}, {clamp(i + 1, in_len), r}};
}

HostTensor reference(const Case& c, const HostTensor& x, const std::vector<int64_t>& out_shape) {
  HostTensor y(DType::FLOAT32, out_shape);
  const int64_t ih = x.shape[2], iw = x.shape[3], oh = out_shape[2], ow = out_shape[3];
  const double sh = c.sizes.empty() ? c.scales[2] : static_cast<double>(oh) / ih;
  const double sw = c.sizes.empty() ? c.scales[3] : static_cast<double>(ow) / iw;
  for (int64_t p = 0; p < x.shape[0] * x.shape[1]; ++p) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        double acc = 0;
        for (auto [ry, wy] : taps(c, oy, sh, oh, ih)) {
          for (auto [rx, wx] : taps(c, ox, sw, ow, iw)) acc += wy * wx * x.data<float>()[(p * ih + ry) * iw + rx];
        }
        y.data<float>()[(p * oh + oy) * ow + ox] = static_cast<float>(acc);
      }
    }
  }
  return y;
}

const LInstruction* resize_instruction(const PlanResult& r) {
  for (const LInstruction& ins : r.program.methods[0].instructions) {
    if (ins.kind == LInstruction::Kind::kKernel && ins.op == "Resize") return &ins;
  }
  return nullptr;
}

TEST(ResizeTest, TapTableAndKernelTapsMatchTheReference) {
  const std::vector<Case> cases = {
      {"linear half_pixel x2", "linear", "half_pixel", "", {1, 3, 5, 6}, {1, 1, 2, 2}, {}},
      {"linear half_pixel down", "linear", "half_pixel", "", {1, 2, 8, 9}, {1, 1, 0.5f, 0.5f}, {}},
      {"linear half_pixel 1.7 x 2.5", "linear", "half_pixel", "", {2, 2, 10, 9}, {1, 1, 1.7f, 2.5f}, {}},
      {"linear pytorch_half_pixel x8 (LR-ASPP)", "linear", "pytorch_half_pixel", "", {1, 3, 5, 5}, {1, 1, 8, 8}, {}},
      {"linear pytorch_half_pixel to one row", "linear", "pytorch_half_pixel", "", {1, 1, 4, 6}, {}, {1, 1, 1, 9}},
      {"linear align_corners by sizes", "linear", "align_corners", "", {1, 3, 7, 4}, {}, {1, 3, 13, 300}},
      {"linear asymmetric x3", "linear", "asymmetric", "", {1, 2, 4, 5}, {1, 1, 3, 3}, {}},
      {"nearest asymmetric floor (PyTorch)", "nearest", "asymmetric", "floor", {1, 3, 5, 7}, {1, 1, 2, 3}, {}},
      // clang-format off
      {"nearest half_pixel round_prefer_floor", "nearest", "half_pixel", "round_prefer_floor", {1, 2, 6, 6},
       {1, 1, 1.5f, 0.75f}, {}},
      {"nearest tf_half_pixel_for_nn round_prefer_ceil (TF)", "nearest", "tf_half_pixel_for_nn",
       "round_prefer_ceil", {1, 2, 5, 4}, {1, 1, 2, 2.5f}, {}},
      // clang-format on
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GraphBuilder b;
    const int x = b.input("x", c.in);
    std::map<std::string, Attribute> attrs = {{"mode", string_attr(c.mode)},
                                              {"coordinate_transformation_mode", string_attr(c.coordinate)}};
    if (!c.nearest.empty()) attrs["nearest_mode"] = string_attr(c.nearest);
    const int roi = b.constant("roi", HostTensor::from_floats({}, {0}));
    int y;
    if (c.sizes.empty()) {
      y = b.node("Resize", {x, roi, b.constant("scales", HostTensor::from_floats(c.scales, {4}))}, attrs);
    } else {
      y = b.node("Resize", {x, roi, -1, b.constant("sizes", HostTensor::from_int64s(c.sizes, {4}))}, attrs);
    }
    b.output(y);
    HostTensor in(DType::FLOAT32, c.in);
    for (int64_t i = 0; i < in.numel(); ++i) in.data<float>()[i] = std::sin(0.7f * static_cast<float>(i)) * 3.f;
    for (bool table : {true, false}) {
      SCOPED_TRACE(table ? "taps from the planner's table" : "taps computed by the kernel");
      PlanOptions options;
      options.lower.resize_taps = table;
      const PlanResult r = b.plan(options);
      const LInstruction* ins = resize_instruction(r);
      ASSERT_NE(ins, nullptr);
      EXPECT_EQ(ins->inputs.size(), table ? 2u : 1u);
      const auto outputs = planner::run_program(r.bytes, {in}, {}).outputs;
      ASSERT_EQ(outputs.size(), 1u);
      const HostTensor want = reference(c, in, outputs[0].shape);
      ASSERT_EQ(outputs[0].numel(), want.numel());
      for (int64_t i = 0; i < want.numel(); ++i) {
        ASSERT_NEAR(outputs[0].float_at(i), want.float_at(i), 1e-5 * 3) << "at " << i;
      }
    }
  }
}

// Cubic mode, and resizes of other axes than the last two, keep the
// general path: no table.
TEST(ResizeTest, NoTapTableWhereTheTwoAxisPathDoesNotApply) {
  for (bool cubic : {true, false}) {
    SCOPED_TRACE(cubic ? "cubic" : "channels resized");
    GraphBuilder b;
    const int x = b.input("x", {1, 2, 4, 4});
    const int roi = b.constant("roi", HostTensor::from_floats({}, {0}));
    const std::vector<float> scales = cubic ? std::vector<float>{1, 1, 2, 2} : std::vector<float>{1, 2, 2, 2};
    b.output(b.node("Resize", {x, roi, b.constant("scales", HostTensor::from_floats(scales, {4}))},
                    {{"mode", string_attr(cubic ? "cubic" : "nearest")}}));
    const PlanResult r = b.plan();
    const LInstruction* ins = resize_instruction(r);
    ASSERT_NE(ins, nullptr);
    EXPECT_EQ(ins->inputs.size(), 1u);
  }
}

}  // namespace
}  // namespace kiln::testing
