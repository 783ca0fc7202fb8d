// The QDQ pass's pooling and element-wise folds (passes/qdq.h) and the
// int8 kernels they lower onto (AvgPoolInt8, AddInt8, MulInt8 in
// kernels/cpu/src/qlinear.cc), against int64 references of the
// documented arithmetic: one rounding, half up, of the exact value. Scales
// that are powers of two make the fixed-point multipliers exact, so every
// tie (a value exactly halfway) must round up and every saturation must
// clamp; other scales are checked against the real-valued result within
// one step at near-ties. And the int8 convolution and matrix product
// planned with --no-packing (a 2 KiB block of packed columns at a time)
// give the same bytes as with the whole image packed.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "core/error.h"
#include "exec/run.h"
#include "kiln/kernels/isa.h"
#include "kiln/kernels/qgemm.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace kiln::testing {
namespace {

using planner::LInstruction;
using planner::PlanOptions;
using planner::PlanResult;

HostTensor scalar(float v) { return HostTensor::from_floats({v}, {}); }

HostTensor zero_point(DType dtype, int v) {
  HostTensor t(dtype, {});
  if (dtype == DType::UINT8) {
    t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  } else {
    t.data<int8_t>()[0] = static_cast<int8_t>(v);
  }
  return t;
}

// Deterministic 8-bit data covering the whole range (both ends included).
HostTensor data8(DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  HostTensor t(dtype, shape);
  uint32_t s = seed;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    const int v = i % 17 == 0 ? 0 : i % 17 == 1 ? 255 : static_cast<int>(s >> 24);
    if (dtype == DType::UINT8) {
      t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    } else {
      t.data<int8_t>()[i] = static_cast<int8_t>(v - 128);
    }
  }
  return t;
}

int dq(GraphBuilder& b, int x, float scale, DType dtype, int zp, const std::string& name) {
  return b.node("DequantizeLinear",
                {x, b.constant(name + "_s", scalar(scale)), b.constant(name + "_z", zero_point(dtype, zp))});
}

int q(GraphBuilder& b, int x, float scale, DType dtype, int zp, const std::string& name = "y") {
  return b.node("QuantizeLinear",
                {x, b.constant(name + "_s", scalar(scale)), b.constant(name + "_z", zero_point(dtype, zp))});
}

std::vector<std::string> kernels(const PlanResult& r) {
  std::vector<std::string> ops;
  for (const LInstruction& ins : r.program.methods[0].instructions) {
    if (ins.kind == LInstruction::Kind::kKernel && ins.op != "Copy") ops.push_back(ins.op);
  }
  return ops;
}

int64_t lo_of(DType d) { return d == DType::UINT8 ? 0 : -128; }

// floor(num / den + 1/2) for den > 0: round half up of an exact fraction.
int64_t round_half_up(int64_t num, int64_t den) {
  const int64_t n2 = 2 * num + den, d2 = 2 * den;
  return n2 >= 0 ? n2 / d2 : -((-n2 + d2 - 1) / d2);
}

// The nearest integer to num / den for den > 0, a tie to the even one.
int64_t round_half_even(int64_t num, int64_t den) {
  const int64_t q = num >= 0 ? num / den : -((-num + den - 1) / den);  // floor
  const int64_t twice = 2 * (num - q * den);                           // in [0, 2 den)
  return twice > den || (twice == den && q % 2 != 0) ? q + 1 : q;
}

int64_t clamp8(int64_t v, DType d) { return std::min(lo_of(d) + 255, std::max(lo_of(d), v)); }

// The program's first output on every path this processor has, the
// scalar path first; the active path restored after.
std::vector<std::pair<kernels::Isa, HostTensor>> outputs_on_every_path(const std::string& bytes,
                                                                       const std::vector<HostTensor>& inputs) {
  std::vector<std::pair<kernels::Isa, HostTensor>> outputs;
  const kernels::Isa before = kernels::active_isa();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512, kernels::Isa::kNeon}) {
    if (!kernels::processor_has(isa)) continue;
    EXPECT_EQ(kernels::set_isa(isa), Error::kOk);
    outputs.emplace_back(isa, planner::run_program(bytes, inputs, {}).outputs.at(0));
  }
  EXPECT_EQ(kernels::set_isa(before), Error::kOk);
  return outputs;
}

// Runs the program on x: what the method's load logged where it refused
// it ("" where it ran). The kernels' checks run when the method loads.
std::string load_refusal(const std::string& bytes, const HostTensor& x) {
  ::testing::internal::CaptureStderr();
  bool refused = false;
  try {
    planner::run_program(bytes, {x}, {});
  } catch (const planner::PlanError&) {
    refused = true;
  }
  const std::string logged = ::testing::internal::GetCapturedStderr();
  return refused ? logged : std::string();
}

// Runs the program on the scalar path, then on every vector path this
// processor has, and expects the same output bytes on each; `saturates`:
// the scalar output must also hold both ends of the 8-bit range (the
// cases reach the clamps). `label` names the case in failures.
void expect_every_path_as_scalar(const PlanResult& r, const HostTensor& in, DType dtype, bool saturates,
                                 const std::string& label) {
  const kernels::Isa before = kernels::active_isa();
  ASSERT_EQ(kernels::set_isa(kernels::Isa::kScalar), Error::kOk);
  const HostTensor want = planner::run_program(r.bytes, {in}, {}).outputs.at(0);
  int64_t low = 0, high = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    low += want.int_at(i) == lo_of(dtype);
    high += want.int_at(i) == lo_of(dtype) + 255;
  }
  if (saturates) {
    EXPECT_GT(low, 0) << label;
    EXPECT_GT(high, 0) << label;
  }
  for (kernels::Isa isa : {kernels::Isa::kAvx2, kernels::Isa::kAvx512, kernels::Isa::kNeon}) {
    if (!kernels::processor_has(isa)) continue;
    ASSERT_EQ(kernels::set_isa(isa), Error::kOk);
    const HostTensor got = planner::run_program(r.bytes, {in}, {}).outputs.at(0);
    EXPECT_EQ(want.bytes, got.bytes) << "isa " << static_cast<int>(isa) << " " << label;
  }
  ASSERT_EQ(kernels::set_isa(before), Error::kOk);
}

// AveragePool 2x2 stride 2 with padding 1 (windows of 1, 2 and 4 taps),
// without padding on a 37 x 37 plane (every window 4 taps, the last row
// and column unread: the kernel's rows of 2x2 windows, 18 outputs a row:
// two vectors and a tail) and GlobalAveragePool over 4 x 4 (16 taps),
// x_scale = y_scale, on every path: the averages of every window against
// the exact average rounded half to even, as QuantizeLinear rounds the
// float average (ties, sums = d/2 mod d, on both paths of the 2x2
// windows), and the zero points moved so that some outputs saturate.
TEST(QdqTest, AveragePoolsFoldToInt8AndRoundHalfToEven) {
  for (DType dtype : {DType::UINT8, DType::INT8}) {
    for (bool global : {false, true}) {
      for (int include_pad : {0, 1, 2}) {  // 2: no padding, a 5 x 5 plane
        if (global && include_pad) continue;
        const int64_t pad = include_pad == 2 ? 0 : 1, size = include_pad == 2 ? 37 : 4;
        const int x_zp = static_cast<int>(lo_of(dtype)) + 100, y_zp = static_cast<int>(lo_of(dtype)) + 200;
        GraphBuilder b;
        const int x = b.input("x", {1, 3, size, size}, dtype);
        const int f = dq(b, x, 0.5f, dtype, x_zp, "x");
        const int pool = global ? b.node("GlobalAveragePool", {f})
                                : b.node("AveragePool", {f},
                                         {{"kernel_shape", ints_attr({2, 2})},
                                          {"strides", ints_attr({2, 2})},
                                          {"pads", ints_attr({pad, pad, pad, pad})},
                                          {"count_include_pad", int_attr(include_pad == 1)}});
        b.output(q(b, pool, 0.5f, dtype, y_zp));
        const PlanResult r = b.plan();
        EXPECT_EQ(kernels(r), std::vector<std::string>{"AvgPoolInt8"});
        const HostTensor in = data8(dtype, {1, 3, size, size}, 11);
        const int64_t oh = global ? 1 : pad ? 3 : 18;
        int ties = 0, saturated = 0;
        std::vector<int64_t> want(static_cast<size_t>(3 * oh * oh));
        for (int64_t c = 0; c < 3; ++c) {
          for (int64_t oy = 0; oy < oh; ++oy) {
            for (int64_t ox = 0; ox < oh; ++ox) {
              int64_t sum = 0, taps = 0;
              const int64_t y0 = global ? 0 : oy * 2 - pad, x0 = global ? 0 : ox * 2 - pad, k = global ? 4 : 2;
              for (int64_t iy = y0; iy < y0 + k; ++iy) {
                for (int64_t ix = x0; ix < x0 + k; ++ix) {
                  if (iy < 0 || iy >= size || ix < 0 || ix >= size) continue;
                  sum += in.int_at((c * size + iy) * size + ix) - x_zp;
                  ++taps;
                }
              }
              const int64_t d = include_pad == 1 ? k * k : taps;
              ties += (2 * sum) % (2 * d) == d || (2 * sum) % (2 * d) == -d;
              const int64_t want_raw = round_half_even(sum, d) + y_zp;
              saturated += want_raw != clamp8(want_raw, dtype);
              want[static_cast<size_t>((c * oh + oy) * oh + ox)] = clamp8(want_raw, dtype);
            }
          }
        }
        for (const auto& [isa, out] : outputs_on_every_path(r.bytes, {in})) {
          ASSERT_EQ(out.dtype, dtype);
          ASSERT_EQ(out.numel(), 3 * oh * oh);
          for (int64_t i = 0; i < out.numel(); ++i) {
            EXPECT_EQ(out.int_at(i), want[static_cast<size_t>(i)])
                << "path " << static_cast<int>(isa) << " output " << i << (global ? " global" : "");
          }
        }
        if (!global) {
          EXPECT_GT(ties, 0) << "the data has no tie to round";
        }
        if (!global && pad) {
          EXPECT_GT(saturated, 0) << "nothing saturated";
        }
      }
    }
  }
}

// A scale ratio that is not a power of two (the multiplier rounded to 31
// bits): each average within one step of the real value's rounding, equal
// away from ties.
TEST(QdqTest, GlobalAveragePoolOtherScalesMatchTheRealValue) {
  GraphBuilder b;
  const int x = b.input("x", {1, 4, 5, 6}, DType::UINT8);
  b.output(q(b, b.node("GlobalAveragePool", {dq(b, x, 0.0371f, DType::UINT8, 131, "x")}), 0.0123f, DType::UINT8, 7));
  const PlanResult r = b.plan();
  EXPECT_EQ(kernels(r), std::vector<std::string>{"AvgPoolInt8"});
  const HostTensor in = data8(DType::UINT8, {1, 4, 5, 6}, 5);
  const HostTensor out = planner::run_program(r.bytes, {in}, {}).outputs.at(0);
  for (int64_t c = 0; c < 4; ++c) {
    int64_t sum = 0;
    for (int64_t i = 0; i < 30; ++i) sum += in.int_at(c * 30 + i) - 131;
    const double real = static_cast<double>(sum) * (static_cast<double>(0.0371f) / (static_cast<double>(0.0123f) * 30));
    const double want = std::min(255.0, std::max(0.0, std::floor(real + 0.5) + 7));
    const bool near_tie = std::fabs(real - std::floor(real) - 0.5) < 1e-6;
    EXPECT_LE(std::fabs(static_cast<double>(out.int_at(c)) - want), near_tie ? 1.0 : 0.0) << "channel " << c;
  }
}

// DQ(a), DQ(b) -> Add -> Relu -> Q and -> Mul -> Q, b broadcast along
// channels; scales powers of two, so the results are exact fractions:
// Add: y = zp + floor((da * a_s + db * b_s) / y_s + 1/2), Mul: y = zp +
// floor(da * db * a_s * b_s / y_s + 1/2), clamped (Relu: at y_zp).
TEST(QdqTest, AddAndMulFoldToInt8WithTiesAndSaturation) {
  for (DType dtype : {DType::UINT8, DType::INT8}) {
    for (bool mul : {false, true}) {
      const int a_zp = static_cast<int>(lo_of(dtype)) + 120, b_zp = static_cast<int>(lo_of(dtype)) + 9;
      const int y_zp = static_cast<int>(lo_of(dtype)) + (mul ? 60 : 200);
      // Add: a_s / y_s = 1/2, b_s / y_s = 1/4; Mul: a_s * b_s / y_s = 1/64.
      const float a_s = 0.5f, b_s = 0.25f, y_s = mul ? 8.f : 1.f;
      GraphBuilder b;
      const int a = b.input("a", {1, 3, 4, 5}, dtype);
      const int bb = b.input("b", {1, 3, 1, 1}, dtype);
      const int fa = dq(b, a, a_s, dtype, a_zp, "a"), fb = dq(b, bb, b_s, dtype, b_zp, "b");
      int v = b.node(mul ? "Mul" : "Add", {fa, fb});
      if (!mul) v = b.node("Relu", {v});
      b.output(q(b, v, y_s, dtype, y_zp));
      const PlanResult r = b.plan();
      EXPECT_EQ(kernels(r), std::vector<std::string>{mul ? "MulInt8" : "AddInt8"});
      const HostTensor ta = data8(dtype, {1, 3, 4, 5}, 3);
      HostTensor tb(dtype, {1, 3, 1, 1});
      const int bv[3] = {0, 255, 130};  // both ends and a middle value
      for (int c = 0; c < 3; ++c) {
        if (dtype == DType::UINT8) {
          tb.data<uint8_t>()[c] = static_cast<uint8_t>(bv[c]);
        } else {
          tb.data<int8_t>()[c] = static_cast<int8_t>(bv[c] - 128);
        }
      }
      const HostTensor out = planner::run_program(r.bytes, {ta, tb}, {}).outputs.at(0);
      int ties = 0, saturated = 0;
      for (int64_t i = 0; i < ta.numel(); ++i) {
        const int64_t da = ta.int_at(i) - a_zp, db = tb.int_at(i / 20) - b_zp;
        const int64_t num = mul ? da * db : 2 * da + db, den = mul ? 64 : 4;
        ties += (2 * num) % (2 * den) == den || (2 * num) % (2 * den) == -den;
        int64_t want = round_half_up(num, den) + y_zp;
        if (!mul) want = std::max<int64_t>(want, y_zp);
        saturated += want != clamp8(want, dtype);
        EXPECT_EQ(out.int_at(i), clamp8(want, dtype))
            << (mul ? "Mul" : "Add") << " at " << i << ": " << num << " / " << den;
      }
      EXPECT_GT(ties, 0) << "the data has no tie to round";
      EXPECT_GT(saturated, 0) << "nothing saturated";
    }
  }
}

// AddInt8 of two inputs of the output's shape (ResNet's residual Adds) runs
// as one row of every element (16 at a time on x86, then 8, then the
// table): the exact formula on every path, for plane sizes that leave each
// of those parts, int8 and uint8, ties and saturation at both ends.
TEST(QdqTest, AddOfSameShapesIsOneRowOnEveryPath) {
  for (DType dtype : {DType::UINT8, DType::INT8}) {
    for (int64_t width : {5, 7, 16}) {
      const int a_zp = static_cast<int>(lo_of(dtype)) + 120, b_zp = static_cast<int>(lo_of(dtype)) + 9;
      const int y_zp = static_cast<int>(lo_of(dtype)) + 100;
      GraphBuilder b;
      const int a = b.input("a", {1, 3, width, 7}, dtype);
      const int bb = b.input("b", {1, 3, width, 7}, dtype);
      b.output(q(b, b.node("Add", {dq(b, a, 0.5f, dtype, a_zp, "a"), dq(b, bb, 0.25f, dtype, b_zp, "b")}), 0.5f, dtype,
                 y_zp));
      const PlanResult r = b.plan();
      ASSERT_EQ(kernels(r), std::vector<std::string>{"AddInt8"});
      const HostTensor ta = data8(dtype, {1, 3, width, 7}, 3), tb = data8(dtype, {1, 3, width, 7}, 8);
      for (const auto& [isa, out] : outputs_on_every_path(r.bytes, {ta, tb})) {
        int ties = 0, low = 0, high = 0;
        for (int64_t i = 0; i < ta.numel(); ++i) {
          // (a - a_zp) + (b - b_zp) / 2, rounded half up.
          const int64_t num = 2 * (ta.int_at(i) - a_zp) + (tb.int_at(i) - b_zp);
          ties += num % 2 != 0;
          const int64_t want = clamp8(round_half_up(num, 2) + y_zp, dtype);
          low += want == lo_of(dtype);
          high += want == lo_of(dtype) + 255;
          ASSERT_EQ(out.int_at(i), want) << "isa " << static_cast<int>(isa) << " width " << width << " at " << i;
        }
        EXPECT_GT(ties, 0);
        EXPECT_GT(low, 0);
        EXPECT_GT(high, 0);
      }
    }
  }
}

// MulInt8 by rows of int32 products, 512 at a time, requantized by
// qgemm_requantize_row: inputs of one shape (one row, several chunks and a
// tail), b broadcast along rows of the last dimension, and a scale per
// channel on either side (a row per channel), int8 and uint8, on every
// path: the exact formula, ties rounding up and both ends saturating.
TEST(QdqTest, MulOfSameAndBroadcastShapesOnEveryPath) {
  const std::vector<int64_t> shape = {1, 3, 41, 13};
  // a's shape, b's shape.
  const std::pair<std::vector<int64_t>, std::vector<int64_t>> cases[] = {
      {shape, shape}, {shape, {1, 3, 1, 13}}, {shape, {1, 3, 1, 1}}, {{1, 3, 1, 1}, shape}};
  for (DType dtype : {DType::UINT8, DType::INT8}) {
    for (const auto& [a_shape, b_shape] : cases) {
      const int a_zp = static_cast<int>(lo_of(dtype)) + 120, b_zp = static_cast<int>(lo_of(dtype)) + 9;
      const int y_zp = static_cast<int>(lo_of(dtype)) + 60;
      GraphBuilder b;
      const int a = b.input("a", a_shape, dtype);
      const int bb = b.input("b", b_shape, dtype);
      // a_s * b_s / y_s = 1/64.
      b.output(q(b, b.node("Mul", {dq(b, a, 0.5f, dtype, a_zp, "a"), dq(b, bb, 0.25f, dtype, b_zp, "b")}), 8.f, dtype,
                 y_zp));
      const PlanResult r = b.plan();
      ASSERT_EQ(kernels(r), std::vector<std::string>{"MulInt8"});
      const HostTensor ta = data8(dtype, a_shape, 3), tb = data8(dtype, b_shape, 8);
      // The element of an operand of `s` that y's element (c, h, w) reads.
      const auto at = [](const std::vector<int64_t>& s, int64_t c, int64_t h, int64_t w) {
        return (c * s[2] + (s[2] == 1 ? 0 : h)) * s[3] + (s[3] == 1 ? 0 : w);
      };
      for (const auto& [isa, out] : outputs_on_every_path(r.bytes, {ta, tb})) {
        ASSERT_EQ(out.numel(), 3 * 41 * 13);
        int ties = 0, low = 0, high = 0;
        for (int64_t i = 0; i < out.numel(); ++i) {
          const int64_t c = i / (41 * 13), h = i / 13 % 41, w = i % 13;
          const int64_t num = (ta.int_at(at(a_shape, c, h, w)) - a_zp) * (tb.int_at(at(b_shape, c, h, w)) - b_zp);
          ties += num % 64 == 32 || num % 64 == -32;
          const int64_t want = clamp8(round_half_up(num, 64) + y_zp, dtype);
          low += want == lo_of(dtype);
          high += want == lo_of(dtype) + 255;
          ASSERT_EQ(out.int_at(i), want) << "isa " << static_cast<int>(isa) << " a " << a_shape[3] << " b "
                                         << b_shape[3] << " at " << i;
        }
        EXPECT_GT(ties, 0);
        EXPECT_GT(low, 0);
        EXPECT_GT(high, 0);
      }
    }
  }
}

// Q(v) as QuantizeLinear computes it (round half to even, saturate), and
// whether v / scale lies within 1e-3 of a tie (where float arithmetic
// before it may round either way).
int64_t quantize_ref(double v, double scale, int64_t zp, DType d, bool* near_tie) {
  const double t = v / scale;
  *near_tie = std::fabs(t - std::floor(t) - 0.5) < 1e-3;
  return clamp8(static_cast<int64_t>(std::nearbyint(t)) + zp, d);
}

// Every byte of `dtype`, in order, then the first 44 again (a tail of the
// 64-byte vector loop).
HostTensor all_bytes(DType dtype) {
  HostTensor t(dtype, {1, 300});
  for (int i = 0; i < 300; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(i % 256);
  return t;
}

// A Pad of nothing (PyTorch writes one before AvgPool2d with
// count_include_pad, DenseNet's transitions) between a DQ and a Q of one
// quantization moves no byte: it folds, whatever its constant and the zero
// point, and the MaxPool after it pools the int8 bytes. The same Pad with
// padding keeps its float round trip (a constant other than the zero point
// is not a byte the kernels pad with).
TEST(QdqTest, APadOfNothingFoldsWhateverTheZeroPoint) {
  for (int64_t pad : {0, 1}) {
    GraphBuilder b;
    const int x = b.input("x", {1, 3, 6, 6}, DType::UINT8);
    const int pads = b.constant("pads", HostTensor::from_int64s({0, 0, pad, pad, 0, 0, pad, pad}, {8}));
    const int padded = b.node("Pad", {dq(b, x, 0.1f, DType::UINT8, 128, "x"), pads, b.constant("value", scalar(0.5f))});
    const int q1 = q(b, padded, 0.1f, DType::UINT8, 128, "p");
    b.output(q(b, b.node("MaxPool", {dq(b, q1, 0.1f, DType::UINT8, 128, "p2")}, {{"kernel_shape", ints_attr({2, 2})}}),
               0.1f, DType::UINT8, 128));
    const std::vector<std::string> ops = kernels(b.plan());
    if (pad == 0) {
      EXPECT_EQ(ops, std::vector<std::string>{"Pool"});
    } else {
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Pad"), 1);
    }
  }
}

// A Concat of tensors quantized each on its own (DenseNet's, Inception's)
// between their DQs and one Q: each input whose quantization differs from
// the output's is requantized to it (ChannelAffineInt8, a = its scale /
// the output's), the one that matches is taken as it is, and the Concat
// moves bytes; no float round trip is left. Against the float round trip:
// the matching input's bytes exactly, the others within one step (equal on
// nearly every element); the same bytes on every path.
TEST(QdqTest, ConcatOfOtherScalesRequantizesEachInput) {
  GraphBuilder b;
  const int x1 = b.input("x1", {1, 3, 5, 7}, DType::UINT8);
  const int x2 = b.input("x2", {1, 2, 5, 7}, DType::UINT8);
  const int x3 = b.input("x3", {1, 4, 5, 7}, DType::INT8);
  const int cat = b.node("Concat",
                         {dq(b, x1, 0.04f, DType::UINT8, 120, "x1"), dq(b, x2, 0.013f, DType::UINT8, 100, "x2"),
                          dq(b, x3, 0.09f, DType::INT8, -3, "x3")},
                         {{"axis", int_attr(1)}});
  b.output(q(b, cat, 0.04f, DType::UINT8, 120));
  const PlanResult r = b.plan();
  const std::vector<std::string> ops = kernels(r);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ChannelAffineInt8"), 2);
  for (const char* op : {"QuantizeLinear", "DequantizeLinear"}) EXPECT_EQ(std::count(ops.begin(), ops.end(), op), 0);
  const std::vector<HostTensor> in = {data8(DType::UINT8, {1, 3, 5, 7}, 1), data8(DType::UINT8, {1, 2, 5, 7}, 2),
                                      data8(DType::INT8, {1, 4, 5, 7}, 3)};
  const HostTensor got = planner::run_program(r.bytes, in, {}).outputs.at(0);
  ASSERT_EQ(got.numel(), 9 * 35);
  const float scales[] = {0.04f, 0.013f, 0.09f};
  const int zps[] = {120, 100, -3};
  int64_t same = 0, at = 0;
  for (int i = 0; i < 3; ++i) {
    for (int64_t e = 0; e < in[i].numel(); ++e, ++at) {
      const float real = static_cast<float>(in[i].int_at(e) - zps[i]) * scales[i];
      const int64_t want = clamp8(static_cast<int64_t>(std::nearbyint(real / 0.04f)) + 120, DType::UINT8);
      if (i == 0) {
        EXPECT_EQ(got.int_at(at), in[0].int_at(e)) << e;
      } else {
        EXPECT_LE(std::abs(got.int_at(at) - want), 1) << "input " << i << " element " << e;
      }
      same += got.int_at(at) == want;
    }
  }
  EXPECT_GE(same, got.numel() * 98 / 100);
  const kernels::Isa before = kernels::active_isa();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512, kernels::Isa::kNeon}) {
    if (!kernels::processor_has(isa)) continue;
    ASSERT_EQ(kernels::set_isa(isa), Error::kOk);
    EXPECT_EQ(planner::run_program(r.bytes, in, {}).outputs.at(0).bytes, got.bytes) << static_cast<int>(isa);
  }
  ASSERT_EQ(kernels::set_isa(before), Error::kOk);
}

// A ConvTranspose whose kernel is its stride (U-Net's 2x2 up-sampling),
// weights per channel along axis 1 as quantize_static writes them, an
// int32 bias and a Relu: a 1x1 ConvInt8 to cout * 4 channels and a
// DepthToSpace on bytes, no float op left. Within one step of the exact
// integer result everywhere and equal to it nearly everywhere; the same
// bytes on every ISA path. With pads, or a kernel other than its stride,
// the op stays float.
TEST(QdqTest, ConvTransposeWithKernelAsStrideRunsAsInt8) {
  const int64_t cin = 5, cout = 3, h = 6, w = 7;
  const float xs = 0.05f, ys = 0.1f;
  const float ws[cout] = {0.01f, 0.02f, 0.015f};
  const int32_t bias[cout] = {-700, 40, 1500};
  auto model = [&](int64_t k, int64_t stride, int64_t pad) {
    GraphBuilder b;
    const int x = b.input("x", {1, cin, h, w}, DType::UINT8);
    HostTensor scales = HostTensor::from_floats(std::vector<float>(ws, ws + cout), {cout});
    HostTensor zps(DType::INT8, {cout});
    HostTensor bias_scales(DType::FLOAT32, {cout});
    HostTensor bias_q(DType::INT32, {cout});
    for (int64_t c = 0; c < cout; ++c) {
      bias_scales.data<float>()[c] = xs * ws[c];
      bias_q.data<int32_t>()[c] = bias[c];
    }
    const int wq = b.node(
        "DequantizeLinear",
        {b.constant("w", data8(DType::INT8, {cin, cout, k, k}, 5)), b.constant("w_s", scales), b.constant("w_z", zps)},
        {{"axis", int_attr(1)}});
    const int bq =
        b.node("DequantizeLinear", {b.constant("b", bias_q), b.constant("b_s", bias_scales)}, {{"axis", int_attr(0)}});
    const int up = b.node("ConvTranspose", {dq(b, x, xs, DType::UINT8, 128, "x"), wq, bq},
                          {{"kernel_shape", ints_attr({k, k})},
                           {"strides", ints_attr({stride, stride})},
                           {"pads", ints_attr({pad, pad, pad, pad})}});
    b.output(q(b, b.node("Relu", {up}), ys, DType::UINT8, 10));
    return b.plan();
  };
  const PlanResult r = model(2, 2, 0);
  const std::vector<std::string> ops = kernels(r);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConvInt8"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Transpose"), 1);
  for (const char* op : {"ConvTranspose", "QuantizeLinear", "DequantizeLinear"})
    EXPECT_EQ(std::count(ops.begin(), ops.end(), op), 0) << op;
  const HostTensor x = data8(DType::UINT8, {1, cin, h, w}, 4);
  const HostTensor wt = data8(DType::INT8, {cin, cout, 2, 2}, 5);
  const HostTensor got = planner::run_program(r.bytes, {x}, {}).outputs.at(0);
  ASSERT_EQ(got.shape, (std::vector<int64_t>{1, cout, 2 * h, 2 * w}));
  int64_t same = 0, clamped = 0;
  for (int64_t m = 0; m < cout; ++m) {
    for (int64_t oy = 0; oy < 2 * h; ++oy) {
      for (int64_t ox = 0; ox < 2 * w; ++ox) {
        int64_t acc = bias[m];
        for (int64_t c = 0; c < cin; ++c) {
          acc +=
              (x.int_at((c * h + oy / 2) * w + ox / 2) - 128) * wt.int_at(((c * cout + m) * 2 + oy % 2) * 2 + ox % 2);
        }
        const double real = static_cast<double>(acc) * static_cast<double>(xs) * static_cast<double>(ws[m]);
        const int64_t want =
            clamp8(std::max<int64_t>(std::llround(real / static_cast<double>(ys)) + 10, 10), DType::UINT8);
        const int64_t at = (m * 2 * h + oy) * 2 * w + ox;
        EXPECT_LE(std::abs(got.int_at(at) - want), 1) << m << " " << oy << " " << ox;
        same += got.int_at(at) == want;
        clamped += want == 10 || want == 255;
      }
    }
  }
  EXPECT_GE(same, got.numel() * 98 / 100);
  EXPECT_GT(clamped, 0);
  EXPECT_LT(clamped, got.numel() / 2);
  const kernels::Isa before = kernels::active_isa();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512, kernels::Isa::kNeon}) {
    if (!kernels::processor_has(isa)) continue;
    ASSERT_EQ(kernels::set_isa(isa), Error::kOk);
    EXPECT_EQ(planner::run_program(r.bytes, {x}, {}).outputs.at(0).bytes, got.bytes) << static_cast<int>(isa);
  }
  ASSERT_EQ(kernels::set_isa(before), Error::kOk);
  for (const auto& [k, pad] : {std::pair<int64_t, int64_t>{3, 0}, std::pair<int64_t, int64_t>{2, 1}}) {
    const std::vector<std::string> other = kernels(model(k, 2, pad));
    EXPECT_EQ(std::count(other.begin(), other.end(), "ConvTranspose"), 1) << k << " " << pad;
  }
}

// DQ -> Softmax over the last axis -> Q (attention's scores between their
// quantized MatMuls): one SoftmaxInt8, no float op and no Q or DQ left, for
// uint8 and int8 scores, rows shorter and longer than the kernel's chunk
// (37 and 600 values, odd lengths for the vector tails); the QDQ model's
// float semantics computed here in float as ONNX's ops define them: within
// one step everywhere, equal nearly everywhere, the same bytes on every
// path. A Softmax over another axis stays float.
TEST(QdqTest, SoftmaxBetweenDqAndQBecomesSoftmaxInt8) {
  for (DType dtype : {DType::UINT8, DType::INT8}) {
    for (int64_t inner : {int64_t{37}, int64_t{600}}) {
      const float xs = 0.0625f, ys = 1.f / 255.f;
      const int x_zp = static_cast<int>(lo_of(dtype)) + 120;
      GraphBuilder b;
      const int x = b.input("x", {2, 3, inner}, dtype);
      b.output(
          q(b, b.node("Softmax", {dq(b, x, xs, dtype, x_zp, "x")}, {{"axis", int_attr(-1)}}), ys, DType::UINT8, 0));
      const PlanResult r = b.plan();
      EXPECT_EQ(kernels(r), std::vector<std::string>{"SoftmaxInt8"});
      const HostTensor in = data8(dtype, {2, 3, inner}, 13);
      const auto outputs = outputs_on_every_path(r.bytes, {in});
      const HostTensor& got = outputs.front().second;
      int64_t same = 0;
      for (int64_t row = 0; row < 6; ++row) {
        float top = -INFINITY, sum = 0.f;
        std::vector<float> e(static_cast<size_t>(inner));
        for (int64_t i = 0; i < inner; ++i)
          top = std::max(top, static_cast<float>(in.int_at(row * inner + i) - x_zp) * xs);
        for (int64_t i = 0; i < inner; ++i) {
          e[static_cast<size_t>(i)] = std::exp(static_cast<float>(in.int_at(row * inner + i) - x_zp) * xs - top);
          sum += e[static_cast<size_t>(i)];
        }
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t want =
              clamp8(static_cast<int64_t>(std::nearbyint(e[static_cast<size_t>(i)] / sum / ys)), DType::UINT8);
          EXPECT_LE(std::abs(got.int_at(row * inner + i) - want), 1) << "row " << row << " value " << i;
          same += got.int_at(row * inner + i) == want;
        }
      }
      EXPECT_GE(same, got.numel() * 98 / 100) << inner;
      for (const auto& [isa, out] : outputs) EXPECT_EQ(out.bytes, got.bytes) << "path " << static_cast<int>(isa);
    }
  }
  GraphBuilder b;
  const int x = b.input("x", {2, 3, 5}, DType::UINT8);
  b.output(q(b, b.node("Softmax", {dq(b, x, 0.1f, DType::UINT8, 128, "x")}, {{"axis", int_attr(1)}}), 1.f / 255.f,
             DType::UINT8, 0));
  const std::vector<std::string> ops = kernels(b.plan());
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "SoftmaxInt8"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Softmax"), 1);
}

// A batch normalization between a DQ and a Q (DenseNet's norm after a
// Concat): DQ -> BatchNormalization -> [Relu / Clip] -> Q becomes one
// ChannelAffineInt8, for uint8 and int8 data, without and with Relu and
// Clip(0, 6), on planes of 99 and of 576 values (a run that long goes
// through the channel's table of 256 outputs): within one step of the
// float chain run op by op (the chain rounds after each op, the kernel
// once), the same as it on nearly every element, the same bytes on every
// ISA path, and saturating at both ends somewhere. A normalization whose
// output is read elsewhere stays float.
TEST(QdqTest, BatchNormBetweenDqAndQBecomesChannelAffine) {
  const int64_t c = 6;
  std::vector<float> gamma(c), beta(c), mean(c), var(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    gamma[ch] = 0.6f + 0.3f * static_cast<float>(ch) * (ch % 2 ? -1.f : 1.f);
    beta[ch] = -0.4f + 0.25f * static_cast<float>(ch);
    mean[ch] = 0.1f * static_cast<float>(ch) - 0.2f;
    var[ch] = 0.5f + 0.7f * static_cast<float>(ch);
  }
  for (const auto& [batch, h, w] : {std::tuple<int64_t, int64_t, int64_t>{2, 9, 11}, {1, 24, 24}}) {
    for (DType dtype : {DType::UINT8, DType::INT8}) {
      for (const std::string act : {"none", "Relu", "Clip"}) {
        const int zx = static_cast<int>(lo_of(dtype)) + 120, zy = static_cast<int>(lo_of(dtype)) + 30;
        const float sx = 0.031f, sy = 0.017f;
        GraphBuilder b;
        const int x = b.input("x", {batch, c, h, w}, dtype);
        int v = b.node("BatchNormalization",
                       {dq(b, x, sx, dtype, zx, "x"), b.constant("gamma", HostTensor::from_floats(gamma, {c})),
                        b.constant("beta", HostTensor::from_floats(beta, {c})),
                        b.constant("mean", HostTensor::from_floats(mean, {c})),
                        b.constant("var", HostTensor::from_floats(var, {c}))},
                       {{"epsilon", float_attr(1e-3f)}});
        if (act == "Relu") v = b.node("Relu", {v});
        if (act == "Clip") v = b.node("Clip", {v, b.constant("lo", scalar(0.f)), b.constant("hi", scalar(6.f))});
        b.output(q(b, v, sy, dtype, zy));
        const PlanResult r = b.plan();
        ASSERT_EQ(kernels(r), std::vector<std::string>{"ChannelAffineInt8"}) << act;
        const HostTensor in = data8(dtype, {batch, c, h, w}, 17);
        const HostTensor got = planner::run_program(r.bytes, {in}, {}).outputs.at(0);
        int64_t same = 0;
        for (int64_t i = 0; i < in.numel(); ++i) {
          const int64_t ch = i / (h * w) % c;
          float f = static_cast<float>(in.int_at(i) - zx) * sx;
          f = (f - mean[ch]) / std::sqrt(var[ch] + 1e-3f) * gamma[ch] + beta[ch];
          if (act != "none") f = std::max(f, 0.f);
          if (act == "Clip") f = std::min(f, 6.f);
          const int64_t want = clamp8(static_cast<int64_t>(std::nearbyint(f / sy)) + zy, dtype);
          EXPECT_LE(std::abs(got.int_at(i) - want), 1) << act << " element " << i;
          same += got.int_at(i) == want;
          // Exactly the kernel's definition, with a and b as the pass computes them.
          const double inv = static_cast<double>(gamma[ch]) / std::sqrt(static_cast<double>(var[ch]) + double{1e-3f});
          const float a = static_cast<float>(double{sx} * inv / double{sy});
          const float bias = static_cast<float>((double{beta[ch]} - double{mean[ch]} * inv) / double{sy});
          const float g = std::min(std::max(std::fma(static_cast<float>(in.int_at(i) - zx), a, bias), -1024.f), 1024.f);
          int64_t exact = clamp8(static_cast<int64_t>(std::nearbyint(g)) + zy, dtype);
          if (act != "none") exact = std::max<int64_t>(exact, zy);
          if (act == "Clip") exact = std::min<int64_t>(exact, zy + static_cast<int64_t>(std::nearbyint(6.f / sy)));
          EXPECT_EQ(got.int_at(i), exact) << act << " element " << i;
        }
        EXPECT_GE(same, in.numel() * 99 / 100) << act;
        expect_every_path_as_scalar(r, in, dtype, act == "none",
                                    act + " " + planner::dtype_str(dtype) + " plane " + std::to_string(h * w));
      }
    }
  }
  // The normalization's output also a graph output: nothing folds.
  GraphBuilder b;
  const int x = b.input("x", {1, c, 4, 4}, DType::UINT8);
  const int v = b.node(
      "BatchNormalization",
      {dq(b, x, 0.03f, DType::UINT8, 128, "x"), b.constant("gamma", HostTensor::from_floats(gamma, {c})),
       b.constant("beta", HostTensor::from_floats(beta, {c})), b.constant("mean", HostTensor::from_floats(mean, {c})),
       b.constant("var", HostTensor::from_floats(var, {c}))});
  b.output(q(b, v, 0.02f, DType::UINT8, 10));
  b.output(v);
  const std::vector<std::string> ops = kernels(b.plan());
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ChannelAffineInt8"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "BatchNormalization"), 1);
}

// An element-wise chain between the DequantizeLinears of one tensor and a
// QuantizeLinear becomes one LookupInt8 whose table the planner computed
// over all 256 bytes: a Sigmoid; a SiLU written as ORT's quantize_static
// writes it (Sigmoid -> Q -> DQ, then Mul with x -> Q: the second table
// takes in the first); GELU by Erf (x * 0.5 * (1 + erf(x / sqrt 2))); a
// Tanh -> Q -> DQ plus a quantized constant (DQ of a constant byte).
// Against double references of the QDQ model's float semantics: equal,
// or within one step at near-ties; on every path.
TEST(QdqTest, ElementWiseChainsBecomeOneTable) {
  for (DType dtype : {DType::UINT8, DType::INT8}) {
    const int zx = static_cast<int>(lo_of(dtype)) + 131, zs = static_cast<int>(lo_of(dtype)),
              zy = static_cast<int>(lo_of(dtype)) + 40;
    const float sx = 0.0473f, ss = 1.f / 255.f, sy = 0.0291f, sc = 0.0078f;
    const int zc = static_cast<int>(lo_of(dtype)) + 200;  // the constant (zc - lo) * sc = 1.56
    for (const std::string chain : {"sigmoid", "silu", "gelu", "tanh_plus_constant"}) {
      GraphBuilder b;
      const int x = b.input("x", {1, 300}, dtype);
      const int fx = dq(b, x, sx, dtype, zx, "x");
      int out = -1;
      if (chain == "sigmoid") {
        out = q(b, b.node("Sigmoid", {fx}), ss, dtype, zs, "s");
      } else if (chain == "silu") {
        const int sig = q(b, b.node("Sigmoid", {fx}), ss, dtype, zs, "s");
        out = q(b, b.node("Mul", {fx, dq(b, sig, ss, dtype, zs, "s2")}), sy, dtype, zy);
      } else if (chain == "tanh_plus_constant") {
        // The constant quantized too, as quantize_static writes GELU's 1 and 0.5.
        const int t = q(b, b.node("Tanh", {fx}), ss, dtype, zs, "t");
        const int c = dq(b, b.constant("c", zero_point(dtype, zc)), sc, dtype, static_cast<int>(lo_of(dtype)), "c");
        out = q(b, b.node("Add", {c, dq(b, t, ss, dtype, zs, "t2")}), sy, dtype, zy);
      } else {
        const int erf = b.node("Erf", {b.node("Div", {fx, b.constant("root2", scalar(1.4142135f))})});
        const int half = b.node("Mul", {b.node("Mul", {fx, b.node("Add", {erf, b.constant("one", scalar(1.f))})}),
                                        b.constant("half", scalar(0.5f))});
        out = q(b, half, sy, dtype, zy);
      }
      b.output(out);
      const PlanResult r = b.plan();
      ASSERT_EQ(kernels(r), std::vector<std::string>{"LookupInt8"}) << chain;
      const HostTensor in = all_bytes(dtype);
      int ties = 0;
      for (const auto& [isa, got] : outputs_on_every_path(r.bytes, {in})) {
        ASSERT_EQ(got.numel(), 300);
        for (int64_t i = 0; i < 300; ++i) {
          const double xv = static_cast<double>(static_cast<float>(in.int_at(i) - zx) * sx);
          bool tie = false, tie2 = false;
          int64_t want = 0;
          if (chain == "gelu") {
            want = quantize_ref(xv * 0.5 * (1.0 + std::erf(xv / std::sqrt(2.0))), sy, zy, dtype, &tie);
          } else if (chain == "tanh_plus_constant") {
            const int64_t t = quantize_ref(std::tanh(xv), ss, zs, dtype, &tie);
            const double c = static_cast<double>(static_cast<float>(zc - lo_of(dtype)) * sc);
            want = quantize_ref(c + static_cast<double>(static_cast<float>(t - zs) * ss), sy, zy, dtype, &tie2);
          } else {
            const int64_t sig = quantize_ref(1.0 / (1.0 + std::exp(-xv)), ss, zs, dtype, &tie);
            want = sig;
            if (chain == "silu") {
              want = quantize_ref(xv * static_cast<double>(static_cast<float>(sig - zs) * ss), sy, zy, dtype, &tie2);
            }
          }
          ties += tie || tie2;
          EXPECT_LE(std::abs(got.int_at(i) - want), tie || tie2 ? 1 : 0)
              << chain << " isa " << static_cast<int>(isa) << " byte " << in.int_at(i);
        }
      }
      EXPECT_LT(ties, 4 * 8) << chain << ": too many near-ties to tell";
    }
  }
}

// A chain whose inner value is also read elsewhere (here a graph output),
// or whose leaves dequantize two different tensors, stays as it was.
TEST(QdqTest, ChainsWithOutsideReadersOrTwoTensorsStay) {
  GraphBuilder b;
  const int x = b.input("x", {1, 8}, DType::UINT8);
  const int u = b.input("u", {1, 8}, DType::UINT8);
  const int fx = dq(b, x, 0.05f, DType::UINT8, 128, "x");
  const int sig = b.node("Sigmoid", {fx});
  b.output(q(b, sig, 1.f / 255.f, DType::UINT8, 0, "s"));
  b.output(sig);
  b.output(q(b, b.node("Mul", {fx, dq(b, u, 0.05f, DType::UINT8, 128, "u")}), 0.1f, DType::UINT8, 128, "m"));
  const std::vector<std::string> ops = kernels(b.plan());
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "LookupInt8"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MulInt8"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Sigmoid"), 1);
}

// A MatMul of two activations (attention's scores and context) folds to
// MatMulInt8: per batch B transposed into int8 rows, A packed, the weights
// path's product with B's zero point. Scales whose ratio is 1/64 make the
// result an exact fraction: every element against round half up of the
// int64 sum, uint8 and int8 on either side, on every path; shapes with
// full and partial tiles of 8 channels and 16 columns.
TEST(QdqTest, MatMulOfTwoActivationsRunsInt8OnEveryPath) {
  for (const auto& [a_dtype, b_dtype] : {std::pair<DType, DType>{DType::UINT8, DType::UINT8},
                                         {DType::INT8, DType::UINT8},
                                         {DType::UINT8, DType::INT8}}) {
    const int64_t batches = 2, m = 20, k = 33, n = 19;
    const int a_zp = static_cast<int>(lo_of(a_dtype)) + 131, b_zp = static_cast<int>(lo_of(b_dtype)) + 97;
    const int y_zp = static_cast<int>(lo_of(DType::UINT8)) + 128;
    GraphBuilder b;
    const int a = b.input("a", {1, batches, m, k}, a_dtype);
    const int bb = b.input("b", {1, batches, k, n}, b_dtype);
    b.output(q(b, b.node("MatMul", {dq(b, a, 0.25f, a_dtype, a_zp, "a"), dq(b, bb, 0.5f, b_dtype, b_zp, "b")}), 8.f,
               DType::UINT8, y_zp));
    const PlanResult r = b.plan();
    ASSERT_EQ(kernels(r), std::vector<std::string>{"MatMulInt8"});
    const HostTensor ta = data8(a_dtype, {1, batches, m, k}, 5), tb = data8(b_dtype, {1, batches, k, n}, 6);
    for (const auto& [isa, out] : outputs_on_every_path(r.bytes, {ta, tb})) {
      ASSERT_EQ(out.numel(), batches * m * n);
      int ties = 0, low = 0, high = 0;
      for (int64_t i = 0; i < batches; ++i) {
        for (int64_t row = 0; row < m; ++row) {
          for (int64_t col = 0; col < n; ++col) {
            int64_t num = 0;
            for (int64_t kk = 0; kk < k; ++kk) {
              num += (ta.int_at((i * m + row) * k + kk) - a_zp) * (tb.int_at((i * k + kk) * n + col) - b_zp);
            }
            ties += num % 64 == 32 || num % 64 == -32;
            const int64_t want = clamp8(round_half_up(num, 64) + y_zp, DType::UINT8);
            low += want == 0;
            high += want == 255;
            ASSERT_EQ(out.int_at((i * m + row) * n + col), want)
                << "isa " << static_cast<int>(isa) << " batch " << i << " at " << row << ", " << col;
          }
        }
      }
      EXPECT_GT(ties + low + high, 0);
    }
  }
}

// An Add whose scales differ by a ratio that is not a power of two: within
// one step of the real sum's rounding, equal away from ties.
TEST(QdqTest, AddOtherScalesMatchTheRealValue) {
  GraphBuilder b;
  const int a = b.input("a", {2, 50}, DType::UINT8);
  const int c = b.input("c", {2, 50}, DType::INT8);
  const float a_s = 0.0173f, c_s = 0.0411f, y_s = 0.0297f;
  b.output(q(b, b.node("Add", {dq(b, a, a_s, DType::UINT8, 128, "a"), dq(b, c, c_s, DType::INT8, -5, "c")}), y_s,
             DType::INT8, 3));
  const PlanResult r = b.plan();
  EXPECT_EQ(kernels(r), std::vector<std::string>{"AddInt8"});
  const HostTensor ta = data8(DType::UINT8, {2, 50}, 1), tc = data8(DType::INT8, {2, 50}, 2);
  const HostTensor out = planner::run_program(r.bytes, {ta, tc}, {}).outputs.at(0);
  for (int64_t i = 0; i < ta.numel(); ++i) {
    const double real = static_cast<double>(ta.int_at(i) - 128) * (static_cast<double>(a_s) / y_s) +
                        static_cast<double>(tc.int_at(i) + 5) * (static_cast<double>(c_s) / y_s);
    const double want = std::min(127.0, std::max(-128.0, std::floor(real + 0.5) + 3));
    const bool near_tie = std::fabs(real - std::floor(real) - 0.5) < 1e-6;
    EXPECT_LE(std::fabs(static_cast<double>(out.int_at(i)) - want), near_tie ? 1.0 : 0.0) << "at " << i;
  }
}

// What the pass leaves alone: different input and output dtypes around a
// pool, a per-axis quantization, an Add whose sum is also a graph output.
TEST(QdqTest, PatternsThatDoNotFoldStayFloat) {
  {
    GraphBuilder b;
    const int x = b.input("x", {1, 2, 4, 4}, DType::UINT8);
    b.output(q(b, b.node("GlobalAveragePool", {dq(b, x, 0.5f, DType::UINT8, 3, "x")}), 0.5f, DType::INT8, 0));
    const auto ops = kernels(b.plan());
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "AvgPoolInt8"), 0);
  }
  {
    GraphBuilder b;
    const int a = b.input("a", {1, 4}, DType::UINT8);
    const int c = b.input("c", {1, 4}, DType::UINT8);
    const int sum = b.node("Add", {dq(b, a, 0.5f, DType::UINT8, 3, "a"), dq(b, c, 0.5f, DType::UINT8, 3, "c")});
    b.output(q(b, sum, 0.5f, DType::UINT8, 0));
    b.output(sum);
    const auto ops = kernels(b.plan());
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "AddInt8"), 0);
  }
}

// QDQ Conv (3x3 over 12 channels, 1x1) and Gemm (40 rows): --no-packing
// packs 2 KiB of columns at a time; the outputs are the same bytes.
TEST(QdqTest, Int8ProductsInColumnBlocksMatchTheWholeImage) {
  GraphBuilder b;
  const int x = b.input("x", {1, 12, 20, 20}, DType::UINT8);
  HostTensor w3(DType::INT8, {16, 12, 3, 3}), w1(DType::INT8, {8, 16, 1, 1}), wg(DType::INT8, {20, 6});
  for (HostTensor* w : {&w3, &w1, &wg}) {
    for (int64_t i = 0; i < w->numel(); ++i) w->data<int8_t>()[i] = static_cast<int8_t>((i * 37) % 255 - 127);
  }
  auto dq_const = [&](HostTensor w, const std::string& name) {
    return b.node("DequantizeLinear", {b.constant(name, std::move(w)), b.constant(name + "_s", scalar(0.01f))});
  };
  int v = dq(b, x, 0.02f, DType::UINT8, 128, "x");
  v = b.node("Conv", {v, dq_const(w3, "w3")}, {{"pads", ints_attr({1, 1, 1, 1})}});
  v = dq(b, q(b, v, 0.05f, DType::UINT8, 120, "q1"), 0.05f, DType::UINT8, 120, "c1");
  v = b.node("Conv", {v, dq_const(w1, "w1")});
  v = b.node("Reshape",
             {q(b, v, 0.05f, DType::UINT8, 120, "q2"), b.constant("shape", HostTensor::from_int64s({160, 20}, {2}))});
  v = b.node("MatMul", {dq(b, v, 0.05f, DType::UINT8, 120, "c2"), dq_const(wg, "wg")});
  b.output(q(b, v, 0.1f, DType::UINT8, 128));
  PlanOptions small;
  small.lower.packing_scratch = false;
  const PlanResult whole = b.plan(), blocks = b.plan(small);
  const auto ops = kernels(blocks);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConvInt8"), 2);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "GemmInt8"), 1);
  const HostTensor in = data8(DType::UINT8, {1, 12, 20, 20}, 9);
  const HostTensor want = planner::run_program(whole.bytes, {in}, {}).outputs.at(0);
  const HostTensor got = planner::run_program(blocks.bytes, {in}, {}).outputs.at(0);
  ASSERT_EQ(want.numel(), 160 * 6);
  EXPECT_EQ(want.bytes, got.bytes);
  EXPECT_LT(blocks.program.methods[0].arenas.at(0).size, whole.program.methods[0].arenas.at(0).size);
}

// The direct depthwise kernel (padded plane, several output rows per tap,
// the stride-2 rows through the even and odd half planes) against the same
// convolution as a dense one (group 1, every weight off the diagonal 0),
// which runs through im2col and the product: the same bytes, over plane
// widths around the vector width, strides 1 and 2, padding and dilation.
TEST(QdqTest, DepthwiseDirectMatchesTheDenseProduct) {
  const int64_t c = 5;
  for (int64_t width : {3, 6, 12, 17, 40}) {
    for (int64_t stride : {1, 2}) {
      for (int64_t dilation : {1, 2}) {
        if (dilation == 2 && stride == 2) continue;
        HostTensor dw(DType::INT8, {c, 1, 3, 3}), dense(DType::INT8, {c, c, 3, 3});
        for (int64_t i = 0; i < dense.numel(); ++i) dense.data<int8_t>()[i] = 0;
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t t = 0; t < 9; ++t) {
            const int8_t v = static_cast<int8_t>(((ch * 9 + t) * 53) % 255 - 127);
            dw.data<int8_t>()[ch * 9 + t] = v;
            dense.data<int8_t>()[(ch * c + ch) * 9 + t] = v;
          }
        }
        std::vector<HostTensor> outs;
        const HostTensor in = data8(DType::UINT8, {1, c, width + 3, width}, static_cast<uint32_t>(width));
        for (bool depthwise : {true, false}) {
          GraphBuilder b;
          const int x = b.input("x", {1, c, width + 3, width}, DType::UINT8);
          const int w =
              b.node("DequantizeLinear", {b.constant("w", depthwise ? dw : dense), b.constant("w_s", scalar(0.01f))});
          const int v = b.node("Conv", {dq(b, x, 0.02f, DType::UINT8, 128, "x"), w},
                               {{"group", int_attr(depthwise ? c : 1)},
                                {"pads", ints_attr({1, 2, 1, 1})},
                                {"strides", ints_attr({stride, stride})},
                                {"dilations", ints_attr({dilation, dilation})}});
          b.output(q(b, v, 0.03f, DType::UINT8, 100));
          const PlanResult r = b.plan();
          EXPECT_EQ(kernels(r), std::vector<std::string>{"ConvInt8"});
          outs.push_back(planner::run_program(r.bytes, {in}, {}).outputs.at(0));
        }
        EXPECT_EQ(outs[0].shape, outs[1].shape);
        EXPECT_EQ(outs[0].bytes, outs[1].bytes)
            << "width " << width << " stride " << stride << " dilation " << dilation;
      }
    }
  }
}

// The x86 depthwise kernels against the per-channel kernel the scalar path
// runs: the same bytes on every ISA path. AVX2's, with the channels across
// the vector lanes (16 channels at a time; 37 channels leave a block of
// 5), and AVX-512 VNNI's, channel by channel with windows of four taps
// (two for 5 to 8 taps a row; a band of 4 output rows): int8 and uint8
// data, 3x3, 5x5 and 7x7 windows, strides 1 to 3, dilation, asymmetric
// padding, plane widths below, at and past 16 (and a band's last rows),
// and scales that saturate part of the output at both ends. A plane too
// wide for both (700 columns) takes the per-channel kernel on every path.
// With 8 channels (and the block of 5) at stride 1, two output positions
// share an AVX2 vector: odd widths leave the last vector half past the
// row.
TEST(QdqTest, DepthwiseLanesMatchThePerChannelKernel) {
  for (const int64_t c : {37, 8}) {
    struct Case {
      int64_t k, width, height, stride, dilation;
      DType dtype;
    };
    const Case cases[] = {
        {3, 1, 1, 1, 1, DType::UINT8},   {3, 6, 6, 1, 1, DType::INT8},    {3, 5, 25, 1, 1, DType::UINT8},
        {3, 16, 9, 2, 1, DType::INT8},   {3, 17, 12, 2, 1, DType::UINT8}, {3, 40, 7, 1, 2, DType::INT8},
        {5, 20, 11, 1, 1, DType::UINT8}, {5, 9, 9, 2, 1, DType::INT8},    {3, 3, 3, 1, 1, DType::INT8},
        {3, 700, 3, 1, 1, DType::UINT8}, {7, 23, 10, 1, 1, DType::INT8},  {7, 30, 9, 2, 1, DType::UINT8},
        {5, 300, 6, 1, 1, DType::INT8},  {3, 33, 8, 3, 1, DType::UINT8},  {7, 20, 9, 1, 2, DType::UINT8},
    };
    for (const Case& cs : cases) {
      HostTensor dw(DType::INT8, {c, 1, cs.k, cs.k});
      for (int64_t i = 0; i < dw.numel(); ++i) dw.data<int8_t>()[i] = static_cast<int8_t>((i * 53 + 11) % 256 - 128);
      GraphBuilder b;
      const int x = b.input("x", {1, c, cs.height, cs.width}, cs.dtype);
      const int w = b.node("DequantizeLinear", {b.constant("w", dw), b.constant("w_s", scalar(0.01f))});
      const int64_t pad = cs.k / 2 * cs.dilation;
      const int v = b.node("Conv", {dq(b, x, 0.02f, cs.dtype, cs.dtype == DType::UINT8 ? 128 : -3, "x"), w},
                           {{"group", int_attr(c)},
                            {"pads", ints_attr({pad, pad + 1, pad + 1, pad})},
                            {"strides", ints_attr({cs.stride, cs.stride})},
                            {"dilations", ints_attr({cs.dilation, cs.dilation})}});
      b.output(q(b, v, 0.05f, cs.dtype, cs.dtype == DType::UINT8 ? 100 : 7));
      const PlanResult r = b.plan();
      ASSERT_EQ(kernels(r), std::vector<std::string>{"ConvInt8"});
      const HostTensor in = data8(cs.dtype, {1, c, cs.height, cs.width}, static_cast<uint32_t>(cs.width * 7 + cs.k));
      expect_every_path_as_scalar(r, in, cs.dtype, cs.width * cs.height >= 36,
                                  "channels " + std::to_string(c) + " k " + std::to_string(cs.k) + " width " +
                                      std::to_string(cs.width) + " stride " + std::to_string(cs.stride) + " dilation " +
                                      std::to_string(cs.dilation));
    }
  }
}

// Convolutions run without im2col on x86 (the input interleaved four
// channels a byte into the strides' phase planes in the scratch, the tile
// reading it in place; grouped ones group by group): the same bytes as the
// scalar path's im2col product, for two images, int8 and uint8 inputs,
// 7-bit and full-range data, channel counts off the quad, 3x3 with
// asymmetric padding, dilated 3x3, 1x5 and 10x4 windows, strides 1 and 2,
// groups of 4, 8, 10 and 16 channels (ResNeXt's), with 1x1 windows (the
// packers) beside them.
TEST(QdqTest, DirectConvolutionMatchesTheScalarPath) {
  struct Case {
    int64_t c, m, h, w, kh, kw, dilation, stride;
    std::vector<int64_t> pads;
    DType dtype;
    bool seven_bit;
    int64_t group = 1;
  };
  const Case cases[] = {
      {3, 16, 12, 12, 3, 3, 1, 1, {1, 1, 1, 1}, DType::UINT8, true},
      {16, 16, 8, 8, 3, 3, 1, 1, {1, 1, 1, 1}, DType::UINT8, false},
      {5, 9, 7, 19, 3, 3, 1, 1, {0, 2, 1, 1}, DType::INT8, false},
      {6, 13, 9, 9, 3, 3, 2, 1, {2, 2, 2, 2}, DType::UINT8, true},
      {8, 8, 4, 30, 1, 5, 1, 1, {0, 2, 0, 2}, DType::INT8, true},
      {7, 5, 5, 5, 1, 1, 1, 1, {1, 0, 0, 1}, DType::UINT8, false},
      {7, 5, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, DType::UINT8, false},
      {4, 8, 10, 10, 3, 3, 1, 2, {1, 1, 1, 1}, DType::UINT8, true},
      {3, 8, 17, 15, 3, 3, 1, 2, {1, 1, 0, 1}, DType::INT8, false},
      {1, 16, 25, 10, 10, 4, 1, 2, {4, 1, 5, 2}, DType::UINT8, true},
      {32, 32, 9, 9, 3, 3, 1, 1, {1, 1, 1, 1}, DType::UINT8, false, 8},
      {64, 64, 14, 14, 3, 3, 1, 2, {1, 1, 1, 1}, DType::UINT8, true, 4},
      {24, 48, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, DType::INT8, false, 3},
      {20, 10, 6, 9, 3, 3, 2, 1, {2, 2, 2, 2}, DType::UINT8, false, 2},
  };
  for (const Case& cs : cases) {
    HostTensor wt(DType::INT8, {cs.m, cs.c / cs.group, cs.kh, cs.kw});
    for (int64_t i = 0; i < wt.numel(); ++i) wt.data<int8_t>()[i] = static_cast<int8_t>((i * 53 + 7) % 256 - 128);
    GraphBuilder b;
    const int x = b.input("x", {2, cs.c, cs.h, cs.w}, cs.dtype);
    const int w = b.node("DequantizeLinear", {b.constant("w", wt), b.constant("w_s", scalar(0.01f))});
    const int zp = cs.dtype == DType::UINT8 ? (cs.seven_bit ? 60 : 128) : -3;
    const int v = b.node("Conv", {dq(b, x, 0.02f, cs.dtype, zp, "x"), w},
                         {{"pads", ints_attr(cs.pads)},
                          {"strides", ints_attr({cs.stride, cs.stride})},
                          {"dilations", ints_attr({cs.dilation, cs.dilation})},
                          {"group", int_attr(cs.group)}});
    // An output scale that saturates some outputs at both ends.
    const float y_scale =
        (cs.seven_bit ? 0.005f : 0.012f) * std::sqrt(static_cast<float>(cs.c / cs.group * cs.kh * cs.kw));
    b.output(q(b, v, y_scale, cs.dtype, cs.dtype == DType::UINT8 ? 100 : 7));
    const PlanResult r = b.plan();
    ASSERT_EQ(kernels(r), std::vector<std::string>{"ConvInt8"});
    HostTensor in = data8(cs.dtype, {2, cs.c, cs.h, cs.w}, static_cast<uint32_t>(cs.c * 13 + cs.w));
    if (cs.seven_bit) {
      for (int64_t i = 0; i < in.numel(); ++i) in.data<uint8_t>()[i] &= 0x7F;
    }
    expect_every_path_as_scalar(r, in, cs.dtype, true,
                                "c " + std::to_string(cs.c) + " w " + std::to_string(cs.w) + " window " +
                                    std::to_string(cs.kh) + "x" + std::to_string(cs.kw) + " stride " +
                                    std::to_string(cs.stride) + " groups " + std::to_string(cs.group));
  }
}

// ConvInt8's weight order 1 (channel quads by tap, planned for whole quads
// of channels a group) against order 0: the same convolution with
// a ninth input channel (the zero point throughout, weights 0) plans in
// ONNX's order and must give the same bytes, on every path, through the
// direct convolution (small planes, x86), im2col (a large plane) and a
// 1 x 5 window, dilated and strided.
TEST(QdqTest, QuadTapWeightOrderMatchesTheOnnxOrder) {
  struct Case {
    int64_t h, w, kh, kw, stride, dilation;
  };
  const Case cases[] = {{7, 7, 3, 3, 1, 1}, {14, 14, 3, 3, 2, 1}, {40, 44, 3, 3, 1, 1}, {6, 30, 1, 5, 1, 2}};
  for (const Case& cs : cases) {
    std::vector<std::vector<uint8_t>> outputs[2];
    for (int64_t c : {8, 9}) {
      HostTensor wt(DType::INT8, {24, c, cs.kh, cs.kw});
      for (int64_t o = 0; o < 24; ++o) {
        for (int64_t i = 0; i < c * cs.kh * cs.kw; ++i) {
          const int64_t ch = i / (cs.kh * cs.kw);
          wt.data<int8_t>()[o * c * cs.kh * cs.kw + i] =
              ch == 8 ? 0 : static_cast<int8_t>(((o * 8 * cs.kh * cs.kw + i) * 53 + 7) % 256 - 128);
        }
      }
      HostTensor in = data8(DType::UINT8, {1, c, cs.h, cs.w}, 5);
      for (int64_t i = 8 * cs.h * cs.w; i < in.numel(); ++i) in.data<uint8_t>()[i] = 128;
      if (c == 9) {  // the first 8 channels as c == 8 has them
        const HostTensor eight = data8(DType::UINT8, {1, 8, cs.h, cs.w}, 5);
        for (int64_t i = 0; i < eight.numel(); ++i) in.data<uint8_t>()[i] = eight.data<uint8_t>()[i];
      }
      GraphBuilder b;
      const int x = b.input("x", {1, c, cs.h, cs.w}, DType::UINT8);
      const int w = b.node("DequantizeLinear", {b.constant("w", wt), b.constant("w_s", scalar(0.01f))});
      const int v = b.node("Conv", {dq(b, x, 0.02f, DType::UINT8, 128, "x"), w},
                           {{"pads", ints_attr({1, 2, 1, 2})},
                            {"strides", ints_attr({cs.stride, cs.stride})},
                            {"dilations", ints_attr({cs.dilation, cs.dilation})}});
      b.output(q(b, v, 0.05f * std::sqrt(static_cast<float>(8 * cs.kh * cs.kw)), DType::UINT8, 100));
      const PlanResult r = b.plan();
      ASSERT_EQ(kernels(r), std::vector<std::string>{"ConvInt8"});
      for (const LInstruction& ins : r.program.methods[0].instructions) {
        if (ins.op != "ConvInt8") continue;
        const auto& ints = ins.params.AsGenericParams()->ints;
        ASSERT_EQ(ints.size(), 17u);
        EXPECT_EQ(ints[15], c == 8 ? 1 : 0) << "the weight order planned for " << c << " channels";
        EXPECT_EQ(ints[16], 0) << "full-range weights";
      }
      for (const auto& [isa, out] : outputs_on_every_path(r.bytes, {in})) {
        outputs[c - 8].push_back(out.bytes);
        (void)isa;
      }
    }
    ASSERT_EQ(outputs[0].size(), outputs[1].size());
    for (size_t i = 0; i < outputs[0].size(); ++i) {
      EXPECT_EQ(outputs[0][i], outputs[1][i]) << "path " << i << " plane " << cs.h << "x" << cs.w << " window " << cs.kh
                                              << "x" << cs.kw << " stride " << cs.stride;
    }
    EXPECT_EQ(outputs[0].front(), outputs[0].back()) << "the scalar path and the widest";
  }
}

// ConvInt8's 16th integer: a program written before it (15 integers, or
// 16 before the weight range) loads and runs as weight order 0, with the
// same bytes; order 1 on channels that are not whole quads, or an order
// other than 0 and 1, is refused at load.
TEST(QdqTest, ConvInt8WeightOrderIsOptionalAndChecked) {
  const auto plan = [](int64_t c) {
    HostTensor wt(DType::INT8, {16, c, 3, 3});
    for (int64_t i = 0; i < wt.numel(); ++i) wt.data<int8_t>()[i] = static_cast<int8_t>((i * 37 + 11) % 256 - 128);
    GraphBuilder b;
    const int x = b.input("x", {1, c, 9, 9}, DType::UINT8);
    const int w = b.node("DequantizeLinear", {b.constant("w", wt), b.constant("w_s", scalar(0.01f))});
    const int v = b.node("Conv", {dq(b, x, 0.02f, DType::UINT8, 128, "x"), w}, {{"pads", ints_attr({1, 1, 1, 1})}});
    b.output(q(b, v, 0.3f, DType::UINT8, 100));
    return b.plan().bytes;
  };
  const auto set_order = [](const std::string& bytes, int64_t order) {
    return mutate_program(bytes, [order](fb::ProgramT& p) {
      for (auto& ins : p.methods[0]->instructions) {
        const fb::KernelCallT* call = ins->kind.AsKernelCall();
        if (call == nullptr || call->params.AsGenericParams() == nullptr) continue;
        auto& ints = const_cast<fb::KernelCallT*>(call)->params.AsGenericParams()->ints;
        ASSERT_EQ(ints.size(), 17u);
        if (order < 0) {
          ints.resize(static_cast<size_t>(-order));
        } else {
          ints[15] = order;
        }
      }
    });
  };
  const std::string nine = plan(9), eight = plan(8);
  const HostTensor in = data8(DType::UINT8, {1, 9, 9, 9}, 3);
  const auto now = outputs_on_every_path(nine, {in});
  for (int64_t count : {15, 16}) {
    const std::string old_nine = set_order(nine, -count);
    ASSERT_EQ(load_error(old_nine), Error::kOk);
    const auto before = outputs_on_every_path(old_nine, {in});
    ASSERT_EQ(now.size(), before.size());
    for (size_t i = 0; i < now.size(); ++i) {
      EXPECT_EQ(now[i].second.bytes, before[i].second.bytes) << "path " << i << ", " << count << " integers";
    }
  }
  // The kernel's checks run when the method loads.
  const auto refusal = load_refusal;
  const HostTensor in8 = data8(DType::UINT8, {1, 8, 9, 9}, 3);
  EXPECT_NE(refusal(set_order(nine, 1), in).find("weight order 1 needs channels in whole quads a group"),
            std::string::npos);
  EXPECT_NE(refusal(set_order(eight, 2), in8).find("weight order 2 (0 or 1)"), std::string::npos);
  EXPECT_EQ(refusal(set_order(eight, 1), in8), "");
  EXPECT_EQ(refusal(set_order(eight, 0), in8), "");  // runs, and reads its quad-ordered weights as ONNX's
}

// Weights in [-64, 64] (quantized with a reduced range, as ONNX Runtime's
// quantize_static writes them with reduce_range) plan as ConvInt8's and
// GemmInt8's weight range 1, and AVX2 then sums with vpmaddubsw whatever
// the input holds: the same bytes as the scalar path on full-range inputs,
// with blocks of 255 against blocks of 64 (and of -64), where a pair sum
// reaches 255 * 64 * 2 = 32640. Each of the product's routes: a 1x1
// convolution's planes, the direct 3x3 (grouped too), im2col on a large
// plane, a MatMul's panels with and without weight zero points, and its
// one-row product. One weight of 65 plans range 0; a program that claims
// range 1 over wider weights, or a range other than 0 and 1, is refused at
// load.
TEST(QdqTest, NarrowWeightsAreExactOnFullRangeInputs) {
  // Weight i of a row of k: blocks of four at 64 or -64, the rest spread
  // over [-64, 64]; `wide` puts one 65 in.
  const auto weight = [](int64_t row, int64_t i, bool wide) -> int {
    if (wide && row == 1 && i == 2) return 65;
    const int64_t block = (i / 4 + row) % 3;
    return block == 0 ? 64 : block == 1 ? -64 : static_cast<int>((row * 31 + i * 37 + 5) % 129 - 64);
  };
  // Inputs: 255 in half of the blocks of four channels (rows of a
  // MatMul's k), data8's full range elsewhere.
  const auto input = [](std::vector<int64_t> shape, int64_t inner) {
    HostTensor x = data8(DType::UINT8, shape, 9);
    for (int64_t i = 0; i < x.numel(); ++i) {
      if ((i / inner / 4 + i / (inner * 8)) % 2 == 0) x.data<uint8_t>()[i] = 255;
    }
    return x;
  };
  const auto ints_of_kernel = [](const PlanResult& r, const std::string& op) {
    for (const LInstruction& ins : r.program.methods[0].instructions) {
      if (ins.op == op) return ins.params.AsGenericParams()->ints;
    }
    return std::vector<int64_t>{};
  };
  struct ConvCase {
    int64_t c, m, h, w, k, group;
  };
  const ConvCase convs[] = {{64, 32, 14, 14, 1, 1}, {16, 16, 8, 8, 3, 1}, {32, 32, 9, 9, 3, 8}, {8, 24, 40, 44, 3, 1}};
  for (const ConvCase& cs : convs) {
    for (bool wide : {false, true}) {
      HostTensor wt(DType::INT8, {cs.m, cs.c / cs.group, cs.k, cs.k});
      const int64_t row = wt.numel() / cs.m;
      for (int64_t i = 0; i < wt.numel(); ++i)
        wt.data<int8_t>()[i] = static_cast<int8_t>(weight(i / row, i % row, wide));
      GraphBuilder b;
      const int x = b.input("x", {1, cs.c, cs.h, cs.w}, DType::UINT8);
      const int w = b.node("DequantizeLinear", {b.constant("w", wt), b.constant("w_s", scalar(0.01f))});
      const int64_t pad = cs.k / 2;
      const int v = b.node("Conv", {dq(b, x, 0.02f, DType::UINT8, 128, "x"), w},
                           {{"pads", ints_attr({pad, pad, pad, pad})}, {"group", int_attr(cs.group)}});
      b.output(q(b, v, 0.01f * std::sqrt(static_cast<float>(row)), DType::UINT8, 128));
      const PlanResult r = b.plan();
      ASSERT_EQ(kernels(r), std::vector<std::string>{"ConvInt8"});
      const std::string label = "c " + std::to_string(cs.c) + " window " + std::to_string(cs.k) + " plane " +
                                std::to_string(cs.h) + "x" + std::to_string(cs.w) + " group " +
                                std::to_string(cs.group) + (wide ? " (one weight of 65)" : "");
      const std::vector<int64_t> ints = ints_of_kernel(r, "ConvInt8");
      ASSERT_EQ(ints.size(), 17u) << label;
      EXPECT_EQ(ints[16], wide ? 0 : 1) << label;
      expect_every_path_as_scalar(r, input({1, cs.c, cs.h, cs.w}, cs.h * cs.w), DType::UINT8, true, label);
    }
  }
  for (int64_t rows : {37, 1}) {
    for (bool weight_zp : {false, true}) {
      const int64_t k = 200, n = 24;
      HostTensor w(weight_zp ? DType::UINT8 : DType::INT8, {k, n});
      for (int64_t i = 0; i < w.numel(); ++i) {
        const int v = weight(i % n, i / n, false);  // channel i % n, its k-th weight
        if (weight_zp) {
          w.data<uint8_t>()[i] = static_cast<uint8_t>(v + 128);
        } else {
          w.data<int8_t>()[i] = static_cast<int8_t>(v);
        }
      }
      GraphBuilder b;
      const int x = b.input("x", {rows, k}, DType::UINT8);
      std::vector<int> w_inputs = {b.constant("w", w), b.constant("w_s", scalar(0.004f))};
      if (weight_zp) w_inputs.push_back(b.constant("w_z", zero_point(DType::UINT8, 131)));
      const int v = b.node("MatMul", {dq(b, x, 0.05f, DType::UINT8, 128, "x"), b.node("DequantizeLinear", w_inputs)});
      b.output(q(b, v, 0.14f, DType::UINT8, 128));
      const PlanResult r = b.plan();
      ASSERT_EQ(kernels(r), std::vector<std::string>{"GemmInt8"});
      const std::string label =
          "MatMul of " + std::to_string(rows) + " rows" + (weight_zp ? ", weight zero points" : "");
      const std::vector<int64_t> ints = ints_of_kernel(r, "GemmInt8");
      ASSERT_EQ(ints.size(), 6u) << label;
      EXPECT_EQ(ints[5], 1) << label;
      expect_every_path_as_scalar(r, input({rows, k}, 1), DType::UINT8, rows > 1, label);
    }
  }
  // Claims the program's loader must refuse: range 1 over full-range
  // weights, and a range that is neither 0 nor 1.
  HostTensor wt(DType::INT8, {16, 8, 3, 3});
  for (int64_t i = 0; i < wt.numel(); ++i) wt.data<int8_t>()[i] = static_cast<int8_t>((i * 37 + 11) % 256 - 128);
  GraphBuilder b;
  const int x = b.input("x", {1, 8, 9, 9}, DType::UINT8);
  const int w = b.node("DequantizeLinear", {b.constant("w", wt), b.constant("w_s", scalar(0.01f))});
  b.output(q(b, b.node("Conv", {dq(b, x, 0.02f, DType::UINT8, 128, "x"), w}), 0.3f, DType::UINT8, 100));
  const std::string bytes = b.plan().bytes;
  const auto set_range = [&](int64_t range) {
    return mutate_program(bytes, [range](fb::ProgramT& p) {
      for (auto& ins : p.methods[0]->instructions) {
        const fb::KernelCallT* call = ins->kind.AsKernelCall();
        if (call == nullptr || call->params.AsGenericParams() == nullptr) continue;
        auto& ints = const_cast<fb::KernelCallT*>(call)->params.AsGenericParams()->ints;
        ASSERT_EQ(ints.size(), 17u);
        EXPECT_EQ(ints[16], 0);
        ints[16] = range;
      }
    });
  };
  const HostTensor in = data8(DType::UINT8, {1, 8, 9, 9}, 3);
  EXPECT_EQ(load_refusal(set_range(0), in), "");
  EXPECT_NE(load_refusal(set_range(1), in).find("weight range 1, but a weight lies outside [-64, 64]"),
            std::string::npos);
  EXPECT_NE(load_refusal(set_range(2), in).find("weight range 2 (0 or 1)"), std::string::npos);
}

// A product of one row (GemmInt8's matrix-vector path, the weight rows read
// in place) against the same row inside a product of two (the panel path):
// the same bytes, for reductions around the vector widths, uint8 weights
// with a zero point (the column-sum correction) and int8 activations. The
// one-row product's packing scratch is the row alone (k rounded up to the
// packed weights' step), with and without --no-packing, which the kernel
// accepts on every path, firmware's included.
TEST(QdqTest, OneRowProductMatchesThePanelPath) {
  for (int64_t k : {3, 16, 64, 67, 200}) {
    for (bool weight_zp : {false, true}) {
      HostTensor w(weight_zp ? DType::UINT8 : DType::INT8, {k, 24});
      for (int64_t i = 0; i < w.numel(); ++i) {
        const int v = static_cast<int>((i * 41 + 7) % 256);
        if (weight_zp) {
          w.data<uint8_t>()[i] = static_cast<uint8_t>(v);
        } else {
          w.data<int8_t>()[i] = static_cast<int8_t>(v - 128);
        }
      }
      const HostTensor one = data8(DType::INT8, {1, k}, static_cast<uint32_t>(k));
      HostTensor two(DType::INT8, {2, k});
      for (int64_t i = 0; i < 2 * k; ++i) two.data<int8_t>()[i] = one.data<int8_t>()[i % k];
      std::vector<HostTensor> outs;
      for (const HostTensor* in : {&one, static_cast<const HostTensor*>(&two)}) {
        GraphBuilder b;
        const int x = b.input("x", in->shape, DType::INT8);
        std::vector<int> w_inputs = {b.constant("w", w), b.constant("w_s", scalar(0.004f))};
        if (weight_zp) w_inputs.push_back(b.constant("w_z", zero_point(DType::UINT8, 131)));
        const int v = b.node("MatMul", {dq(b, x, 0.05f, DType::INT8, -3, "x"), b.node("DequantizeLinear", w_inputs)});
        b.output(q(b, v, 0.07f, DType::UINT8, 128));
        const PlanResult r = b.plan();
        EXPECT_EQ(kernels(r), std::vector<std::string>{"GemmInt8"});
        outs.push_back(planner::run_program(r.bytes, {*in}, {}).outputs.at(0));
        PlanOptions small;
        small.lower.packing_scratch = false;
        const PlanResult blocks = b.plan(small);
        EXPECT_EQ(planner::run_program(blocks.bytes, {*in}, {}).outputs.at(0).bytes, outs.back().bytes) << "k " << k;
        for (const PlanResult* plan : {&r, &blocks}) {
          for (const LInstruction& ins : plan->program.methods[0].instructions) {
            if (ins.op != "GemmInt8") continue;
            if (in == &one) {
              EXPECT_TRUE(ins.scratch.empty()) << "k " << k;  // the row is read in place
              continue;
            }
            const int64_t packed =
                plan->program.methods[0].tensors.at(static_cast<size_t>(ins.scratch.at(0))).shape.at(0);
            EXPECT_EQ(packed, kernels::qgemm_packed_x_bytes(k, 2)) << "k " << k;
          }
        }
        if (in == &one) {
          // A program planned before, with the row's packing scratch: the
          // kernel accepts it (unused) and gives the same bytes.
          const std::string old = mutate_program(r.bytes, [&](fb::ProgramT& p) {
            fb::MethodT& m = *p.methods[0];
            for (auto& ins : m.instructions) {
              auto* call = ins->kind.AsKernelCall();
              if (call == nullptr || m.operators[call->op]->name != "GemmInt8") continue;
              m.bookkeeping_bytes += 1024;  // room for the two tensors' records
              if (m.arenas.empty()) {       // the plan has nothing else in an arena
                m.arenas.push_back(std::make_unique<fb::ArenaT>());
                m.arenas[0]->device = std::make_unique<fb::Device>(fb::DeviceType::CPU, 0);
              }
              auto scratch = std::make_unique<fb::TensorT>();
              scratch->dtype = fb::DType::UINT8;
              const int64_t kp = kernels::qgemm_kp(k);
              scratch->shape = {kp};
              scratch->nbytes = static_cast<uint64_t>(kp);
              scratch->device = std::make_unique<fb::Device>(fb::DeviceType::CPU, 0);
              fb::PlannedStorageT planned;
              planned.arena = 0;
              planned.offset = m.arenas[0]->size;
              scratch->storage.Set(std::move(planned));
              m.arenas[0]->size += static_cast<uint64_t>((kp + 63) / 64 * 64);
              call->scratch.push_back(static_cast<int32_t>(m.tensors.size()));
              if (weight_zp) {
                auto sums = std::make_unique<fb::TensorT>(*scratch);
                sums->dtype = fb::DType::INT32;
                sums->shape = {1};
                sums->nbytes = 4;
                fb::PlannedStorageT at;
                at.arena = 0;
                at.offset = m.arenas[0]->size;
                sums->storage.Set(std::move(at));
                m.arenas[0]->size += 64;
                call->scratch.push_back(static_cast<int32_t>(m.tensors.size() + 1));
                m.tensors.push_back(std::move(scratch));
                m.tensors.push_back(std::move(sums));
              } else {
                m.tensors.push_back(std::move(scratch));
              }
            }
          });
          EXPECT_EQ(planner::run_program(old, {*in}, {}).outputs.at(0).bytes, outs.back().bytes) << "k " << k;
        }
      }
      ASSERT_EQ(outs[0].numel(), 24);
      ASSERT_EQ(outs[1].numel(), 48);
      for (int64_t c = 0; c < 24; ++c) {
        EXPECT_EQ(outs[0].int_at(c), outs[1].int_at(c)) << "k " << k << " column " << c;
        EXPECT_EQ(outs[1].int_at(c), outs[1].int_at(24 + c));
      }
    }
  }
}

// x (float) -> Q -> Cast -> DQ -> MatMul(w) -> Q -> Cast -> DQ -> y
// (float): the model PyTorch's QDQ export of one linear layer gives (a Cast
// to the same dtype between each Q and DQ).
GraphBuilder linear_qdq_model(int64_t k, int64_t n, DType x_dtype, DType y_dtype) {
  GraphBuilder b;
  const int x = b.input("x", {1, k});
  HostTensor w(DType::INT8, {k, n});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>((i * 37 + 11) % 256 - 128);
  auto cast = [&](int v, DType d) { return b.node("Cast", {v}, {{"to", int_attr(d == DType::UINT8 ? 2 : 3)}}); };
  const int xq = cast(q(b, x, 0.03f, x_dtype, x_dtype == DType::UINT8 ? 128 : -5, "xq"), x_dtype);
  const int v = b.node("MatMul", {dq(b, xq, 0.03f, x_dtype, x_dtype == DType::UINT8 ? 128 : -5, "xd"),
                                  dq(b, b.constant("w", w), 0.004f, DType::INT8, 0, "w")});
  const int yq = cast(q(b, v, 0.01f, y_dtype, y_dtype == DType::UINT8 ? 120 : 3, "yq"), y_dtype);
  b.output(dq(b, yq, 0.01f, y_dtype, y_dtype == DType::UINT8 ? 120 : 3, "yd"));
  return b;
}

HostTensor float_ramp(std::vector<int64_t> shape) {
  HostTensor t(DType::FLOAT32, shape);
  // Beyond both ends of the input's range (saturation), and exact ties.
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = -5.f + 0.015f * static_cast<float>(i * 7 % 700);
  return t;
}

// kiln plan --quantized-io: the input and output become the quantized
// tensors (dtype, scale and zero point in the program, as MethodMeta and
// the plan report give them), the model's first Q and last DQ are gone,
// and the program's int8 outputs are the float-I/O program's values
// exactly, for uint8 and int8 on either side, with the input quantized at
// the boundary as QuantizeLinear does.
TEST(QdqTest, QuantizedIoMatchesTheFloatProgram) {
  for (DType x_dtype : {DType::UINT8, DType::INT8}) {
    for (DType y_dtype : {DType::UINT8, DType::INT8}) {
      GraphBuilder b = linear_qdq_model(67, 24, x_dtype, y_dtype);
      const PlanResult plain = b.plan();
      PlanOptions options;
      options.quantized_io = true;
      const PlanResult quantized = b.plan(options);
      EXPECT_EQ(quantized.quantized_io.inputs, 1);
      EXPECT_EQ(quantized.quantized_io.outputs, 1);
      // No Copy either: the product reads the input and writes the output.
      std::vector<std::string> all;
      for (const LInstruction& ins : quantized.program.methods[0].instructions) all.push_back(ins.op);
      EXPECT_EQ(all, std::vector<std::string>{"GemmInt8"});
      EXPECT_EQ(kernels(plain), (std::vector<std::string>{"QuantizeLinear", "GemmInt8", "DequantizeLinear"}));
      const auto ins = planner::io_quantization(quantized.bytes, "forward").inputs;
      const auto outs = planner::io_quantization(quantized.bytes, "forward").outputs;
      ASSERT_EQ(ins.size(), 1u);
      ASSERT_EQ(outs.size(), 1u);
      EXPECT_TRUE(ins[0].quantized);
      EXPECT_EQ(ins[0].dtype, x_dtype);
      EXPECT_EQ(ins[0].scale, 0.03f);
      EXPECT_EQ(ins[0].zero_point, x_dtype == DType::UINT8 ? 128 : -5);
      EXPECT_TRUE(outs[0].quantized);
      EXPECT_EQ(outs[0].dtype, y_dtype);
      EXPECT_EQ(outs[0].scale, 0.01f);
      EXPECT_EQ(outs[0].zero_point, y_dtype == DType::UINT8 ? 120 : 3);
      EXPECT_FALSE(planner::io_quantization(plain.bytes, "forward").inputs[0].quantized);
      // The names stay the model's, so applications bind as before.
      const auto& m = quantized.program.methods[0];
      const auto& pm = plain.program.methods[0];
      EXPECT_EQ(m.tensors[static_cast<size_t>(m.inputs[0])].name, "x");
      EXPECT_EQ(m.tensors[static_cast<size_t>(m.outputs[0])].name, pm.tensors[static_cast<size_t>(pm.outputs[0])].name);

      const HostTensor x = float_ramp({1, 67});
      const HostTensor want = planner::run_program(plain.bytes, {x}, {}).outputs.at(0);
      const HostTensor xq = planner::quantize_for(x, ins[0]);
      const HostTensor got = planner::run_program(quantized.bytes, {xq}, {}).outputs.at(0);
      ASSERT_EQ(got.dtype, y_dtype);
      // The float program's output is DQ of these very values: the same
      // float32 bytes once dequantized, and the same 8-bit values.
      EXPECT_EQ(planner::dequantize_from(got, outs[0]).bytes, want.bytes);
      int64_t low = 0, high = 0;
      for (int64_t i = 0; i < got.numel(); ++i) {
        const int64_t v = got.int_at(i);
        EXPECT_EQ(std::lround(want.data<float>()[i] / 0.01f) + outs[0].zero_point, v) << i;
        low += v == lo_of(y_dtype);
        high += v == lo_of(y_dtype) + 255;
      }
      EXPECT_GT(low + high, 0);  // the case reaches the clamps
      // The boundary quantization is the kernel's: the same bytes as the
      // plain program's QuantizeLinear (checked through a Q-only model).
      GraphBuilder qb;
      qb.output(q(qb, qb.input("x", {1, 67}), 0.03f, x_dtype, x_dtype == DType::UINT8 ? 128 : -5, "xq"));
      EXPECT_EQ(planner::run_program(qb.plan().bytes, {x}, {}).outputs.at(0).bytes, xq.bytes);
    }
  }
}

// What --quantized-io leaves float: an input also read by another node
// (here a Relu that is a second output), an input quantized per channel,
// and an output whose DQ input is a graph input; a quantized program's
// quantization is checked at load (only on int8/uint8 method inputs and
// outputs, a finite positive scale, a zero point its dtype holds).
TEST(QdqTest, QuantizedIoLeavesOtherInputsFloatAndIsChecked) {
  {
    GraphBuilder b;
    const int x = b.input("x", {1, 16});
    HostTensor w(DType::INT8, {16, 8});
    const int v = b.node("MatMul", {dq(b, q(b, x, 0.1f, DType::UINT8, 128, "xq"), 0.1f, DType::UINT8, 128, "xd"),
                                    dq(b, b.constant("w", w), 0.01f, DType::INT8, 0, "w")});
    b.output(dq(b, q(b, v, 0.2f, DType::INT8, 0, "yq"), 0.2f, DType::INT8, 0, "yd"));
    b.output(b.node("Relu", {x}));
    PlanOptions options;
    options.quantized_io = true;
    const PlanResult r = b.plan(options);
    EXPECT_EQ(r.quantized_io.inputs, 0);
    EXPECT_EQ(r.quantized_io.float_inputs, 1);
    EXPECT_EQ(r.quantized_io.outputs, 1);
    EXPECT_EQ(r.quantized_io.float_outputs, 1);
    const auto ins = planner::io_quantization(r.bytes, "forward").inputs;
    EXPECT_FALSE(ins.at(0).quantized);
    EXPECT_EQ(ins.at(0).dtype, DType::FLOAT32);
    const std::vector<std::string> ops = kernels(r);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "QuantizeLinear"), 1);
  }
  {
    // Per-channel input quantization, and input -> DQ -> output.
    GraphBuilder b;
    const int x = b.input("x", {1, 2});
    const int xq = b.node("QuantizeLinear",
                          {x, b.constant("s", HostTensor::from_floats({0.1f, 0.2f}, {2})),
                           b.constant("z", HostTensor(DType::UINT8, {2}))},
                          {{"axis", int_attr(1)}});
    b.output(b.node("DequantizeLinear",
                    {xq, b.constant("s2", HostTensor::from_floats({0.1f, 0.2f}, {2})),
                     b.constant("z2", HostTensor(DType::UINT8, {2}))},
                    {{"axis", int_attr(1)}}));
    const int i8 = b.input("i8", {1, 4}, DType::INT8);
    b.output(dq(b, i8, 0.5f, DType::INT8, 1, "id"));
    PlanOptions options;
    options.quantized_io = true;
    const PlanResult r = b.plan(options);
    EXPECT_EQ(r.quantized_io.inputs, 0);
    EXPECT_EQ(r.quantized_io.outputs, 0);
    for (const auto& io : planner::io_quantization(r.bytes, "forward").outputs) EXPECT_FALSE(io.quantized);
  }
  const PlanResult r = [] {
    GraphBuilder b = linear_qdq_model(16, 8, DType::UINT8, DType::INT8);
    PlanOptions options;
    options.quantized_io = true;
    return b.plan(options);
  }();
  ASSERT_EQ(load_error(r.bytes), Error::kOk);
  auto with = [&](const std::function<void(fb::TensorT&, fb::MethodT&)>& change) {
    return load_error(mutate_program(r.bytes, [&](fb::ProgramT& p) {
      fb::MethodT& m = *p.methods[0];
      change(*m.tensors[m.inputs[0]], m);
    }));
  };
  EXPECT_EQ(with([](fb::TensorT& t, fb::MethodT&) { t.quantization->scale = 0.f; }), Error::kInvalidProgram);
  EXPECT_EQ(with([](fb::TensorT& t, fb::MethodT&) { t.quantization->scale = NAN; }), Error::kInvalidProgram);
  EXPECT_EQ(with([](fb::TensorT& t, fb::MethodT&) { t.quantization->scale = INFINITY; }), Error::kInvalidProgram);
  EXPECT_EQ(with([](fb::TensorT& t, fb::MethodT&) { t.quantization->zero_point = 256; }), Error::kInvalidProgram);
  EXPECT_EQ(with([](fb::TensorT& t, fb::MethodT&) { t.quantization->zero_point = -1; }), Error::kInvalidProgram);
  EXPECT_EQ(with([](fb::TensorT& t, fb::MethodT&) { t.quantization->zero_point = 255; }), Error::kOk);
  // On an int32 tensor, and on a tensor that is no method input or output.
  EXPECT_EQ(with([](fb::TensorT& t, fb::MethodT&) {
              t.dtype = fb::DType::INT32;
              t.nbytes *= 4;
            }),
            Error::kInvalidProgram);
  EXPECT_EQ(with([](fb::TensorT& t, fb::MethodT& m) {
              for (auto& c : m.tensors) {
                if (c->storage.type == fb::Storage::ConstantStorage && c->dtype == fb::DType::INT8) {
                  c->quantization = std::make_unique<fb::QuantizationT>(*t.quantization);
                  break;
                }
              }
            }),
            Error::kInvalidProgram);
}

}  // namespace
}  // namespace kiln::testing
