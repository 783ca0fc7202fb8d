// The kernels on a thread pool give the same bits as on one thread: small
// graphs of the kernels that split their work (Conv as im2col, 1x1, Winograd
// (by steps, or ranges of tiles on scratch blocks of their own) and first-layer paths, grouped (split within a group,
// or groups side by side on scratch blocks of their own, the direct 3x3 kernel at strides 1 and 2, whole planes and
// bands of rows, and in lanes whole groups a thread) and without packing; depthwise 3x3 and 5x5; Gemm and MatMul with
// packed and unpacked operands, batched (products side by side on scratch blocks of their own, B broadcast), by packed
// weights (ranges of rows side by side on packing blocks of their own); binary element-wise ops with and without
// broadcasting, a fused activation; unary vector math; Softmax, LogSoftmax, LayerNormalization and BatchNormalization
// by rows or planes; MaxPool and AveragePool by planes; Transpose and Slice by output rows; Concat and Split by byte
// ranges; Resize by planes; reductions by output elements; int8 convolutions (direct, grouped, im2col, 1x1), products
// by weights and of two activations, by channel tiles; int8 depthwise by 16 channels, AddInt8, MulInt8 and LookupInt8
// by ranges or rows) are planned once, run with no pool and then on 2, 3 and 4 threads, on every CPU path this
// processor has, with the kernels' thresholds as shipped and with every split forced (set_parallel_min_work (0)), and
// the outputs compared byte for byte.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "exec/run.h"
#include "kiln/kernels/gemm_blocking.h"
#include "kiln/kernels/isa.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "parallel.h"
#include "support/graph_builder.h"

namespace kiln::testing {
namespace {

using planner::HostTensor;
using planner::PlanOptions;
using planner::RunOptions;

HostTensor noise(std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001) / 1000.f - 1.f;
  }
  return HostTensor::from_floats(v, shape);
}

// QDQ as ONNX Runtime's quantize_static writes it: a Q/DQ pair on an
// activation (uint8, zero point 128), DQ on int8 weights (per tensor).
int qdq(GraphBuilder& b, int x, float scale, const std::string& name) {
  HostTensor zp(DType::UINT8, {});
  zp.data<uint8_t>()[0] = 128;
  const int s = b.constant(name + "_s", HostTensor::from_floats({scale}, {}));
  const int z = b.constant(name + "_z", zp);
  return b.node("DequantizeLinear", {b.node("QuantizeLinear", {x, s, z}), s, z});
}

int int8_weights(GraphBuilder& b, const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
  HostTensor w(DType::INT8, shape);
  uint32_t s = seed;
  for (int64_t i = 0; i < w.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    w.data<int8_t>()[i] = static_cast<int8_t>(s >> 24);
  }
  return b.node("DequantizeLinear",
                {b.constant(name, w), b.constant(name + "_s", HostTensor::from_floats({0.01f}, {}))});
}

struct Case {
  std::string name;
  std::string bytes;
  std::vector<HostTensor> inputs;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](const std::string& name, GraphBuilder& b, std::vector<HostTensor> inputs,
                 const PlanOptions& options = {}) {
    out.push_back({name, b.plan(options).bytes, std::move(inputs)});
  };
  {
    GraphBuilder b;  // 3x3, stride 1: Winograd where the planner picks it
    const int x = b.input("x", {1, 16, 20, 20});
    b.output(b.node("Conv", {x, b.ramp("w", {24, 16, 3, 3}, 0.05f), b.ramp("b", {24})},
                    {{"pads", ints_attr({1, 1, 1, 1})}}));
    add("conv3x3", b, {noise({1, 16, 20, 20}, 1)});
  }
  {
    GraphBuilder b;  // 3x3 by Winograd over 4 blocks of tiles: threads take ranges of tiles on scratch of their own
    const int x = b.input("x", {2, 64, 40, 40});
    b.output(b.node("Relu", {b.node("Conv", {x, b.ramp("w", {32, 64, 3, 3}, 0.01f), b.ramp("b", {32})},
                                    {{"pads", ints_attr({1, 1, 1, 1})}})}));
    add("conv3x3_winograd_tiles", b, {noise({2, 64, 40, 40}, 21)});
  }
  {
    GraphBuilder b;  // 3x3, stride 2, ReLU fused: im2col
    const int x = b.input("x", {2, 8, 33, 31});
    b.output(b.node("Relu", {b.node("Conv", {x, b.ramp("w", {40, 8, 3, 3}, 0.05f)},
                                    {{"pads", ints_attr({1, 1, 1, 1})}, {"strides", ints_attr({2, 2})}})}));
    add("conv3x3_s2_relu", b, {noise({2, 8, 33, 31}, 2)});
  }
  {
    GraphBuilder b;  // 5x5 as im2col, 3 blocks of k, 100 channels: regions of rows by columns, B packed per region
    const int x = b.input("x", {1, 24, 18, 17});
    b.output(b.node("Conv", {x, b.ramp("w", {100, 24, 5, 5}, 0.01f), b.ramp("b", {100})},
                    {{"pads", ints_attr({2, 2, 2, 2})}}));
    add("conv5x5_regions", b, {noise({1, 24, 18, 17}, 41)});
  }
  {
    GraphBuilder b;  // 1x1 with B packed (120 channels), 3 blocks of k: regions
    const int x = b.input("x", {1, 600, 11, 12});
    b.output(b.node("Relu", {b.node("Conv", {x, b.ramp("w", {120, 600, 1, 1}, 0.002f)})}));
    add("conv1x1_regions", b, {noise({1, 600, 11, 12}, 42)});
  }
  {
    GraphBuilder b;  // 3x3 stride 2 onto 7 x 7 (ConvLanes, positions packed): blocks of positions a thread
    const int x = b.input("x", {1, 64, 14, 14});
    b.output(b.node("Conv", {x, b.ramp("w", {80, 64, 3, 3}, 0.004f), b.ramp("b", {80})},
                    {{"pads", ints_attr({1, 1, 1, 1})}, {"strides", ints_attr({2, 2})}}));
    add("conv3x3_s2_7x7_lanes", b, {noise({1, 64, 14, 14}, 43)});
  }
  {
    GraphBuilder b;  // 1x1: B read in place
    const int x = b.input("x", {1, 64, 13, 13});
    b.output(b.node("Conv", {x, b.ramp("w", {100, 64, 1, 1}, 0.02f), b.ramp("b", {100})}));
    add("conv1x1", b, {noise({1, 64, 13, 13}, 3)});
  }
  {
    GraphBuilder b;  // 1x1 on a 7x7 plane, deeper than one block of k: A panel by A panel
    const int x = b.input("x", {1, 300, 7, 7});
    b.output(b.node("Relu", {b.node("Conv", {x, b.ramp("w", {50, 300, 1, 1}, 0.002f), b.ramp("b", {50})})}));
    add("conv1x1_7x7_deep", b, {noise({1, 300, 7, 7}, 25)});
  }
  {
    GraphBuilder b;  // 1x1 on a 7x7 plane: four B panels, many rows: tasks split the rows only
    const int x = b.input("x", {1, 96, 7, 7});
    b.output(b.node("Conv", {x, b.ramp("w", {200, 96, 1, 1}, 0.02f), b.ramp("b", {200})}));
    add("conv1x1_7x7", b, {noise({1, 96, 7, 7}, 16)});
  }
  {
    GraphBuilder b;  // 1x1 on a 1x1 plane (squeeze-and-excitation): a matrix-vector product, two inner blocks
    const int x = b.input("x", {1, 300, 1, 1});
    b.output(b.node("Relu", {b.node("Conv", {x, b.ramp("w", {100, 300, 1, 1}, 0.02f), b.ramp("b", {100})})}));
    add("conv1x1_one_column", b, {noise({1, 300, 1, 1}, 15)});
  }
  {
    GraphBuilder b;  // a first layer: 3 channels, 7x7 stride 2 (direct on AVX-512)
    const int x = b.input("x", {1, 3, 64, 64});
    b.output(b.node("Conv", {x, b.ramp("w", {32, 3, 7, 7}, 0.02f), b.ramp("b", {32})},
                    {{"pads", ints_attr({3, 3, 3, 3})}, {"strides", ints_attr({2, 2})}}));
    add("conv_first_layer", b, {noise({1, 3, 64, 64}, 4)});
  }
  {
    GraphBuilder b;  // grouped, and the same without packing scratch (plain loops)
    const int x = b.input("x", {1, 32, 16, 16});
    b.output(b.node("Conv", {x, b.ramp("w", {32, 8, 3, 3}, 0.05f)},
                    {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(4)}}));
    add("conv_grouped", b, {noise({1, 32, 16, 16}, 5)});
    PlanOptions plain;
    plain.lower.packing_scratch = false;
    add("conv_grouped_plain_loops", b, {noise({1, 32, 16, 16}, 5)}, plain);
  }
  {
    GraphBuilder b;  // 8 groups of products too small to split: groups side by side, 4 scratch blocks
    const int x = b.input("x", {2, 64, 14, 14});
    b.output(b.node("Relu", {b.node("Conv", {x, b.ramp("w", {64, 8, 3, 3}, 0.05f), b.ramp("b", {64})},
                                    {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(8)}})}));
    add("conv_grouped_side_by_side", b, {noise({2, 64, 14, 14}, 14)});
  }
  {
    GraphBuilder b;  // 6 groups of 8 -> 12 channels on a 7x9 plane, clipped: the direct grouped kernel
    const int x = b.input("x", {3, 48, 7, 9});
    b.output(b.node("Clip", {b.node("Conv", {x, b.ramp("w", {72, 8, 3, 3}, 0.05f), b.ramp("b", {72})},
                                    {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(6)}}),
                             b.ramp("lo", {}, -0.5f), b.constant("hi", HostTensor::scalar_float(0.5f))}));
    add("conv_grouped_direct", b, {noise({3, 48, 7, 9}, 15)});
  }
  {
    GraphBuilder b;  // the same kernel at stride 2: 4 groups of 8 -> 12 from 15x13 to 8x7
    const int x = b.input("x", {2, 32, 15, 13});
    b.output(b.node("Conv", {x, b.ramp("w", {48, 8, 3, 3}, 0.05f), b.ramp("b", {48})},
                    {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(4)}, {"strides", ints_attr({2, 2})}}));
    add("conv_grouped_direct_s2", b, {noise({2, 32, 15, 13}, 16)});
  }
  for (int64_t stride : {1, 2}) {
    GraphBuilder b;  // 6 groups of 32 channels in lanes (ConvLanes): whole groups a thread, two images
    const int x = b.input("x", {2, 192, 13, 14});
    b.output(b.node("Relu", {b.node("Conv", {x, b.ramp("w", {192, 32, 3, 3}, 0.004f), b.ramp("b", {192})},
                                    {{"pads", ints_attr({1, 1, 1, 1})},
                                     {"group", int_attr(6)},
                                     {"strides", ints_attr({stride, stride})}})}));
    add("conv_grouped_lanes_s" + std::to_string(stride), b, {noise({2, 192, 13, 14}, 44)});
  }
  for (int64_t stride : {1, 2}) {
    GraphBuilder b;  // planes whose padded copy outgrows a B scratch block: the kernel by bands of rows
    const int x = b.input("x", {1, 16, 90, 83});
    b.output(
        b.node("Conv", {x, b.ramp("w", {16, 8, 3, 3}, 0.05f), b.ramp("b", {16})},
               {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(2)}, {"strides", ints_attr({stride, stride})}}));
    add("conv_grouped_direct_bands_s" + std::to_string(stride), b, {noise({1, 16, 90, 83}, 17)});
  }
  for (int64_t k : {3, 5}) {
    GraphBuilder b;  // depthwise
    const int x = b.input("x", {1, 48, 29, 29});
    b.output(b.node("Clip", {b.node("Conv", {x, b.ramp("w", {48, 1, k, k}, 0.1f), b.ramp("b", {48})},
                                    {{"pads", ints_attr({k / 2, k / 2, k / 2, k / 2})},
                                     {"group", int_attr(48)},
                                     {"strides", ints_attr({k == 3 ? 1 : 2, k == 3 ? 1 : 2})}}),
                             b.ramp("lo", {}, 0.f), b.constant("hi", HostTensor::scalar_float(0.5f))}));
    add("depthwise" + std::to_string(k), b, {noise({1, 48, 29, 29}, 6)});
  }
  {
    GraphBuilder b;  // Gemm with constant (packed) B, and a bias
    const int x = b.input("x", {7, 300});
    b.output(b.node("Gemm", {x, b.ramp("w", {300, 530}, 0.01f), b.ramp("c", {530})}));
    add("gemm_packed_b", b, {noise({7, 300}, 7)});
  }
  {
    GraphBuilder b;  // Gemm with packed B and many rows: threads take ranges of rows, packing blocks of their own
    const int x = b.input("x", {200, 300});
    b.output(b.node("Gemm", {x, b.ramp("w", {300, 530}, 0.01f), b.ramp("c", {530})}));
    add("gemm_packed_b_rows", b, {noise({200, 300}, 18)});
  }
  {
    GraphBuilder b;  // MatMul by constant weights, batches stacked into 300 rows, ReLU fused: the same
    const int x = b.input("x", {2, 150, 260});
    b.output(b.node("Relu", {b.node("MatMul", {x, b.ramp("w", {260, 90}, 0.01f)})}));
    add("matmul_packed_b_rows", b, {noise({2, 150, 260}, 19)});
  }
  {
    GraphBuilder b;  // MatMul of two inputs: both packed at run time, batched
    const int a = b.input("a", {3, 90, 270});
    const int c = b.input("c", {3, 270, 100});
    b.output(b.node("MatMul", {a, c}));
    add("matmul_batched", b, {noise({3, 90, 270}, 8), noise({3, 270, 100}, 9)});
  }
  {
    GraphBuilder b;  // attention's scores: small products per head, B broadcast over the first axis
    const int a = b.input("a", {2, 3, 49, 32});
    const int c = b.input("c", {1, 3, 32, 49});
    b.output(b.node("MatMul", {a, c}));
    add("matmul_heads", b, {noise({2, 3, 49, 32}, 14), noise({1, 3, 32, 49}, 15)});
  }
  {
    GraphBuilder b;  // MatMul, one matrix for every batch, a long inner dimension
    const int a = b.input("a", {2, 150, 600});
    b.output(b.node("MatMul", {a, b.ramp("w", {600, 80}, 0.01f)}));
    add("matmul_shared_b", b, {noise({2, 150, 600}, 10)});
  }
  {
    GraphBuilder b;  // element-wise: same shapes, a broadcast row, a scalar; unary math
    const int x = b.input("x", {2, 24, 40, 40});
    const int y = b.input("y", {2, 24, 40, 40});
    const int s = b.node("Sigmoid", {b.node("Add", {x, y})});
    const int m = b.node("Mul", {s, b.ramp("scale", {24, 1, 1}, 0.2f)});
    const int r = b.node("Relu", {b.node("Sub", {m, b.ramp("shift", {40}, 0.05f)})});
    b.output(b.node("Tanh", {b.node("Div", {r, b.constant("two", HostTensor::scalar_float(2.f))})}));
    add("elementwise", b, {noise({2, 24, 40, 40}, 11), noise({2, 24, 40, 40}, 12)});
  }
  {
    GraphBuilder b;  // Softmax along contiguous rows (the vector rows)
    const int x = b.input("x", {3, 7, 50});
    b.output(b.node("Softmax", {x}, {{"axis", int_attr(-1)}}));
    add("softmax_rows", b, {noise({3, 7, 50}, 18)});
  }
  {
    GraphBuilder b;  // LogSoftmax along a middle axis (strided rows)
    const int x = b.input("x", {5, 30, 20});
    b.output(b.node("LogSoftmax", {x}, {{"axis", int_attr(1)}}));
    add("log_softmax_middle_axis", b, {noise({5, 30, 20}, 19)});
  }
  {
    GraphBuilder b;  // LayerNormalization of a sequence's rows, with a bias
    const int x = b.input("x", {3, 21, 96});
    b.output(b.node("LayerNormalization", {x, b.ramp("scale", {96}, 0.2f), b.ramp("bias", {96}, 0.05f)},
                    {{"axis", int_attr(-1)}}));
    add("layer_norm", b, {noise({3, 21, 96}, 20)});
  }
  {
    GraphBuilder b;  // BatchNormalization on its own (nothing to fold it into)
    const int x = b.input("x", {2, 12, 15, 17});
    b.output(
        b.node("BatchNormalization", {x, b.ramp("s", {12}, 0.3f), b.ramp("t", {12}), b.ramp("m", {12}),
                                      b.constant("v", HostTensor::from_floats(std::vector<float>(12, 1.5f), {12}))}));
    add("batch_norm", b, {noise({2, 12, 15, 17}, 21)});
  }
  {
    GraphBuilder b;  // MaxPool 3x3 stride 2 (the vector kernel where there is one)
    const int x = b.input("x", {2, 16, 33, 31});
    b.output(b.node(
        "MaxPool", {x},
        {{"kernel_shape", ints_attr({3, 3})}, {"strides", ints_attr({2, 2})}, {"pads", ints_attr({1, 1, 1, 1})}}));
    add("max_pool", b, {noise({2, 16, 33, 31}, 22)});
  }
  {
    GraphBuilder b;  // AveragePool without the padding in the count (the plain loops)
    const int x = b.input("x", {2, 16, 33, 31});
    b.output(b.node("AveragePool", {x}, {{"kernel_shape", ints_attr({3, 3})}, {"pads", ints_attr({1, 1, 1, 1})}}));
    add("average_pool", b, {noise({2, 16, 33, 31}, 23)});
  }
  for (const std::vector<int64_t>& perm : {std::vector<int64_t>{0, 2, 3, 1}, std::vector<int64_t>{3, 1, 0, 2}}) {
    GraphBuilder b;  // Transpose: rows start anywhere in the output
    const int x = b.input("x", {2, 3, 40, 50});
    b.output(b.node("Transpose", {x}, {{"perm", ints_attr(perm)}}));
    add("transpose_" + std::to_string(perm[0]) + std::to_string(perm[1]) + std::to_string(perm[2]) +
            std::to_string(perm[3]),
        b, {noise({2, 3, 40, 50}, 24)});
  }
  {
    GraphBuilder b;  // Concat of three inputs along channels, two images: ranges cut rows of inputs
    const int x = b.input("x", {2, 5, 9, 7});
    const int y = b.input("y", {2, 3, 9, 7});
    const int z = b.input("z", {2, 1, 9, 7});
    b.output(b.node("Concat", {x, y, z}, {{"axis", int_attr(1)}}));
    add("concat", b, {noise({2, 5, 9, 7}, 25), noise({2, 3, 9, 7}, 26), noise({2, 1, 9, 7}, 27)});
  }
  {
    GraphBuilder b;  // Split along rows of a plane: ranges cut the outputs' rows
    const int x = b.input("x", {2, 6, 40, 10});
    const int first = b.node("Split", {x, b.constant("split", HostTensor::from_int64s({13, 20, 7}, {3}))},
                             {{"axis", int_attr(2)}}, 3);
    for (int i = 0; i < 3; ++i) b.output(first + i);
    add("split", b, {noise({2, 6, 40, 10}, 28)});
  }
  {
    GraphBuilder b;  // Slice with steps of 1 and 2 inside the rows: rows start anywhere in the output
    const int x = b.input("x", {3, 20, 40});
    const auto i64 = [&](const char* name, std::vector<int64_t> v) {
      return b.constant(name, HostTensor::from_int64s(v, {static_cast<int64_t>(v.size())}));
    };
    b.output(b.node("Slice", {x, i64("starts", {1, 2}), i64("ends", {19, 40}), i64("axes", {1, 2})}));
    b.output(b.node("Slice",
                    {x, i64("starts2", {0, 1}), i64("ends2", {17, 40}), i64("axes2", {1, 2}), i64("steps2", {1, 2})}));
    add("slice", b, {noise({3, 20, 40}, 30)});
  }
  {
    GraphBuilder b;  // ReduceMean over a plane (squeeze-and-excitation), ReduceSum over a strided axis
    const int x = b.input("x", {2, 24, 11, 13});
    b.output(b.node("ReduceMean", {x}, {{"axes", ints_attr({2, 3})}}));
    b.output(
        b.node("ReduceSum", {x, b.constant("axes1", HostTensor::from_int64s({1}, {1}))}, {{"keepdims", int_attr(0)}}));
    add("reduce", b, {noise({2, 24, 11, 13}, 31)});
  }
  for (const char* mode : {"linear", "nearest"}) {
    GraphBuilder b;  // Resize x2 of the last two axes
    const int x = b.input("x", {1, 6, 17, 19});
    const int roi = b.constant("roi", HostTensor::from_floats({}, {0}));
    b.output(b.node("Resize", {x, roi, b.constant("scales", HostTensor::from_floats({1, 1, 2, 2}, {4}))},
                    {{"mode", string_attr(mode)}}));
    add(std::string("resize_") + mode, b, {noise({1, 6, 17, 19}, 29)});
  }
  // int8 (the QDQ pass folds these into ConvInt8, GemmInt8 and MatMulInt8):
  // channel tiles across the threads.
  for (const auto& [name, c, h, kernel, stride] :
       {std::tuple<const char*, int64_t, int64_t, int64_t, int64_t>{"int8_conv3x3_direct", 16, 14, 3, 1},
        {"int8_conv3x3_s2", 8, 33, 3, 2},
        {"int8_conv1x1", 32, 9, 1, 1}}) {
    GraphBuilder b;
    const int x = b.input("x", {1, c, h, h});
    const int pad = kernel / 2;
    const int y = b.node("Conv", {qdq(b, x, 0.02f, "x"), int8_weights(b, "w", {40, c, kernel, kernel}, 7)},
                         {{"pads", ints_attr({pad, pad, pad, pad})}, {"strides", ints_attr({stride, stride})}});
    b.output(qdq(b, y, 0.05f, "y"));
    add(name, b, {noise({1, c, h, h}, 31)});
  }
  {
    GraphBuilder b;  // direct, planes above 1 MiB (4 x 258 x 258 x 4 bytes): columns across the threads
    const int x = b.input("x", {1, 16, 256, 256});
    const int y = b.node("Conv", {qdq(b, x, 0.02f, "x"), int8_weights(b, "w", {8, 16, 3, 3}, 10)},
                         {{"pads", ints_attr({1, 1, 1, 1})}});
    b.output(qdq(b, y, 0.05f, "y"));
    add("int8_conv3x3_direct_by_columns", b, {noise({1, 16, 256, 256}, 42)});
  }
  {
    GraphBuilder b;  // grouped (4 groups of 8 -> 16 channels): direct, group by group, channel tiles across the threads
    const int x = b.input("x", {1, 32, 14, 14});
    const int y = b.node("Conv", {qdq(b, x, 0.02f, "x"), int8_weights(b, "w", {64, 8, 3, 3}, 9)},
                         {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(4)}});
    b.output(qdq(b, y, 0.05f, "y"));
    add("int8_conv3x3_grouped", b, {noise({1, 32, 14, 14}, 32)});
  }
  {
    GraphBuilder b;  // depthwise: blocks of 16 channels (ConvInt8's lanes on x86)
    const int x = b.input("x", {2, 40, 12, 12});
    const int y = b.node("Conv", {qdq(b, x, 0.02f, "x"), int8_weights(b, "w", {40, 1, 3, 3}, 8)},
                         {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(40)}});
    b.output(qdq(b, y, 0.03f, "y"));
    add("int8_depthwise", b, {noise({2, 40, 12, 12}, 35)});
  }
  {
    GraphBuilder b;  // QuantizeLinear and DequantizeLinear by ranges: one scale, and one per channel (rows cut)
    const int x = b.input("x", {2, 7, 37, 41});
    HostTensor scales(DType::FLOAT32, {7}), zps(DType::INT8, {7});
    for (int64_t c = 0; c < 7; ++c) {
      scales.data<float>()[c] = 0.01f + 0.004f * static_cast<float>(c);
      zps.data<int8_t>()[c] = static_cast<int8_t>(3 * c - 9);
    }
    const int s = b.constant("s", scales), z = b.constant("z", zps);
    const int per_channel =
        b.node("DequantizeLinear", {b.node("QuantizeLinear", {x, s, z}, {{"axis", int_attr(1)}}), s, z},
               {{"axis", int_attr(1)}});
    b.output(qdq(b, per_channel, 0.02f, "y"));
    add("quantize_dequantize", b, {noise({2, 7, 37, 41}, 43)});
  }
  {
    GraphBuilder b;  // depthwise on rows of 16 or more: channel by channel with VNNI, blocks of 4 across the threads
    const int x = b.input("x", {1, 24, 20, 20});
    const int y = b.node("Conv", {qdq(b, x, 0.02f, "x"), int8_weights(b, "w", {24, 1, 3, 3}, 11)},
                         {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(24)}});
    b.output(qdq(b, y, 0.03f, "y"));
    add("int8_depthwise_rows", b, {noise({1, 24, 20, 20}, 44)});
  }
  {
    GraphBuilder b;  // a residual Add of two quantized tensors: AddInt8 by ranges
    const int x = b.input("x", {1, 24, 30, 30});
    const int r = b.input("r", {1, 24, 30, 30});
    b.output(qdq(b, b.node("Add", {qdq(b, x, 0.02f, "x"), qdq(b, r, 0.03f, "r")}), 0.04f, "y"));
    add("int8_add", b, {noise({1, 24, 30, 30}, 36), noise({1, 24, 30, 30}, 37)});
  }
  {
    GraphBuilder b;  // MulInt8: a scale per channel (squeeze-and-excitation) by rows, and same shapes by ranges
    const int x = b.input("x", {1, 24, 30, 30});
    const int e = b.input("e", {1, 24, 1, 1});
    const int xq = qdq(b, x, 0.02f, "x");
    const int scaled = qdq(b, b.node("Mul", {xq, qdq(b, e, 0.01f, "e")}), 0.02f, "s");
    b.output(qdq(b, b.node("Mul", {scaled, xq}), 0.03f, "y"));
    add("int8_mul", b, {noise({1, 24, 30, 30}, 38), noise({1, 24, 1, 1}, 39)});
  }
  {
    GraphBuilder b;  // a Sigmoid between a DQ and a Q: one 256-byte table (LookupInt8) by ranges
    const int x = b.input("x", {1, 24, 30, 30});
    b.output(qdq(b, b.node("Sigmoid", {qdq(b, x, 0.02f, "x")}), 1.f / 256, "y"));
    add("int8_table", b, {noise({1, 24, 30, 30}, 40)});
  }
  {
    GraphBuilder b;  // a MatMul of activations by int8 weights: GemmInt8
    const int x = b.input("x", {2, 20, 48});
    b.output(qdq(b, b.node("MatMul", {qdq(b, x, 0.02f, "x"), int8_weights(b, "w", {48, 40}, 9)}), 0.05f, "y"));
    add("int8_matmul_weights", b, {noise({2, 20, 48}, 32)});
  }
  {
    GraphBuilder b;  // attention's scores, two activations: MatMulInt8
    const int q = b.input("q", {2, 12, 32});
    const int k = b.input("k", {2, 32, 24});
    b.output(qdq(b, b.node("MatMul", {qdq(b, q, 0.02f, "q"), qdq(b, k, 0.02f, "k")}), 0.05f, "y"));
    add("int8_matmul_activations", b, {noise({2, 12, 32}, 33), noise({2, 32, 24}, 34)});
  }
  return out;
}

std::string bytes_of(const std::vector<HostTensor>& outputs) {
  std::string s;
  for (const HostTensor& t : outputs) s.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return s;
}

// The inputs scaled by -0.5 (float ones; others as they are).
std::vector<HostTensor> decoys(const std::vector<HostTensor>& inputs) {
  std::vector<HostTensor> out = inputs;
  for (HostTensor& t : out) {
    if (t.dtype != DType::FLOAT32) continue;
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= -0.5f;
  }
  return out;
}

void check_every_thread_count(const std::vector<Case>& all) {
  PosixThreadPool pools[3];
  for (int i = 0; i < 3; ++i) ASSERT_EQ(pools[i].start(i + 2), Error::kOk);
  for (const Case& c : all) {
    const std::string want = bytes_of(planner::run_program(c.bytes, c.inputs, {}).outputs);
    ASSERT_FALSE(want.empty());
    for (PosixThreadPool& pool : pools) {
      // A run on other inputs first: arenas that land where its arenas were
      // hold its values, not this case's, so a task that writes nothing
      // shows.
      planner::run_program(c.bytes, decoys(c.inputs), {});
      RunOptions options;
      options.thread_pool = &pool;
      options.runs = 2;
      const std::string got = bytes_of(planner::run_program(c.bytes, c.inputs, options).outputs);
      EXPECT_TRUE(got == want) << c.name << " on " << pool.concurrency() << " threads differs from one thread";
    }
  }
}

// Two threads' worth of concurrency on the calling thread: counts the calls
// the kernels make and runs each call's tasks backwards (order must not matter).
struct CountingPool final : ThreadPool {
  int calls = 0;
  int concurrency() const override { return 2; }
  void parallel_for(int64_t count, Task task, void* context) override {
    ++calls;
    for (int64_t i = count - 1; i >= 0; --i) task(context, i);
  }
};

// Runs `bytes` on a CountingPool and returns the calls it saw; the outputs
// must be the bytes of a run without a pool.
int pool_calls(const std::string& bytes, const std::vector<HostTensor>& in) {
  CountingPool pool;
  RunOptions options;
  options.thread_pool = &pool;
  const std::string want = bytes_of(planner::run_program(bytes, in, {}).outputs);
  EXPECT_EQ(bytes_of(planner::run_program(bytes, in, options).outputs), want);
  return pool.calls;
}

class ThreadsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    kernels::set_parallel_min_work(-1);
    ASSERT_EQ(kernels::set_isa(saved_), Error::kOk);
  }
  const kernels::Isa saved_ = kernels::active_isa();
};

TEST_F(ThreadsTest, SameBitsAsOneThreadOnEveryPath) {
  const std::vector<Case> all = cases();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512, kernels::Isa::kNeon}) {
    if (!kernels::processor_has(isa)) continue;
    SCOPED_TRACE(kernels::isa_name(isa));
    ASSERT_EQ(kernels::set_isa(isa), Error::kOk);
    kernels::set_parallel_min_work(-1);
    check_every_thread_count(all);
    kernels::set_parallel_min_work(0);  // every kernel splits, however small
    check_every_thread_count(all);
  }
}

TEST_F(ThreadsTest, ForcedSplitsDoSplit) {
  // With every split forced, a pool that counts its calls sees the kernels
  // hand it work; with the shipped thresholds the tiny Add stays inline.
  GraphBuilder b;
  const int x = b.input("x", {4, 64});
  b.output(b.node("Add", {x, b.ramp("y", {4, 64})}));
  const std::string bytes = b.plan().bytes;
  const std::vector<HostTensor> in = {noise({4, 64}, 13)};
  CountingPool pool;
  RunOptions options;
  options.thread_pool = &pool;
  const std::string want = bytes_of(planner::run_program(bytes, in, {}).outputs);
  EXPECT_EQ(bytes_of(planner::run_program(bytes, in, options).outputs), want);
  EXPECT_EQ(pool.calls, 0) << "256 elements are below the element-wise threshold";
  kernels::set_parallel_min_work(0);
  EXPECT_EQ(bytes_of(planner::run_program(bytes, in, options).outputs), want);
  EXPECT_GT(pool.calls, 0);

  // Every kernel of the cases, run backwards by this pool, too.
  for (const Case& c : cases()) {
    const std::string one = bytes_of(planner::run_program(c.bytes, c.inputs, {}).outputs);
    pool.calls = 0;
    EXPECT_TRUE(bytes_of(planner::run_program(c.bytes, c.inputs, options).outputs) == one) << c.name;
    EXPECT_GT(pool.calls, 0) << c.name << " never split its work";
  }
}

TEST_F(ThreadsTest, SmallBatchedProductsRunSideBySide) {
  // Attention's scores, 12 products of 49 x 49 by 32 (Swin-T's shape): the
  // planner gives the MatMul 4 blocks of packing scratch and the kernel
  // hands the pool one call, whole products per task, instead of splitting
  // each product with a call per phase.
  GraphBuilder b;
  const int q = b.input("q", {4, 3, 49, 32});
  const int k = b.input("k", {4, 3, 32, 49});
  b.output(b.node("MatMul", {q, k}));
  const auto plan = b.plan();
  const std::vector<HostTensor> in = {noise({4, 3, 49, 32}, 16), noise({4, 3, 32, 49}, 17)};
  EXPECT_EQ(pool_calls(plan.bytes, in), 1) << "12 small products: one call, products side by side";
  EXPECT_EQ(kernels::gemm_batch_scratch_blocks(12, 49, 49, 32), 4);
  EXPECT_EQ(kernels::gemm_batch_scratch_blocks(1, 49, 49, 32), 1);
  EXPECT_EQ(kernels::gemm_batch_scratch_blocks(12, 1024, 1024, 1024), 1) << "large products keep one block";
}

TEST_F(ThreadsTest, RowsOfAProductByWeightsRunSideBySide) {
  // 3,136 tokens by 96 -> 384 weights (ConvNeXt-T's first MLP): the planner
  // gives the MatMul 4 blocks of A's packing scratch, and the kernel hands
  // the pool one call, a range of rows per thread, instead of two calls
  // every 72 rows (packing, then tiles).
  GraphBuilder b;
  const int x = b.input("x", {1, 3136, 96});
  b.output(b.node("MatMul", {x, b.ramp("w", {96, 384}, 0.01f)}));
  const auto plan = b.plan();
  const std::vector<HostTensor> in = {noise({1, 3136, 96}, 20)};
  EXPECT_EQ(pool_calls(plan.bytes, in), 1) << "one call, rows side by side";
  EXPECT_EQ(kernels::gemm_row_scratch_blocks(3136), 4);
  EXPECT_EQ(kernels::gemm_row_scratch_blocks(100), 2);
  EXPECT_EQ(kernels::gemm_row_scratch_blocks(72), 1) << "one block of rows: nothing to run side by side";
}

TEST_F(ThreadsTest, WinogradGivesThreadsTilesWhereTheDataOutweighsTheWeights) {
  // 64 -> 32 channels on 40 x 40 (400 tiles, blocks of 128): scratch for 4
  // blocks, and one pool call, a range of tiles per thread, instead of three
  // calls a block. Deep layers on small planes keep one block: threads
  // would each read all the weights.
  EXPECT_EQ(kernels::winograd_scratch_blocks(32, 64, 400), 4);
  EXPECT_EQ(kernels::winograd_scratch_blocks(512, 512, 16), 1) << "one block of tiles";
  EXPECT_EQ(kernels::winograd_scratch_blocks(256, 256, 49), 1) << "the weights outweigh the data";
  GraphBuilder b;
  const int x = b.input("x", {1, 64, 40, 40});
  b.output(b.node("Conv", {x, b.ramp("w", {32, 64, 3, 3}, 0.01f)}, {{"pads", ints_attr({1, 1, 1, 1})}}));
  const auto plan = b.plan();
  const std::vector<HostTensor> in = {noise({1, 64, 40, 40}, 22)};
  EXPECT_EQ(pool_calls(plan.bytes, in), 1) << "one call, tiles side by side";
  // Planned for one thread (kiln plan --threads 1): one block, and the
  // steps split one by one on a pool, with the same bits.
  PlanOptions one_thread;
  one_thread.lower.thread_blocks = 1;
  const std::string small = b.plan(one_thread).bytes;
  EXPECT_GT(pool_calls(small, in), 1);
  EXPECT_EQ(bytes_of(planner::run_program(small, in, {}).outputs),
            bytes_of(planner::run_program(plan.bytes, in, {}).outputs));
}

TEST_F(ThreadsTest, ConvolutionsRunAllOfKInOnePoolCall) {
  // Products by packed weights over several blocks of k, each in one pool
  // call: a region of rows by columns per thread (B packed into blocks of
  // its own), or in lanes a range of channels or positions per thread,
  // instead of a call or two every block of k. Planned for one thread,
  // they split block by block, with the same bits.
  struct Shape {
    const char* what;
    std::vector<int64_t> x, w;
    int64_t stride, pad;
  };
  for (const Shape& c : {Shape{"1x1, B packed", {1, 600, 11, 12}, {120, 600, 1, 1}, 1, 0},
                         Shape{"5x5 as im2col", {1, 24, 18, 17}, {100, 24, 5, 5}, 1, 2},
                         Shape{"lanes, positions packed", {1, 64, 14, 14}, {80, 64, 3, 3}, 2, 1},
                         Shape{"lanes, read through offsets", {1, 48, 48, 48}, {64, 48, 3, 3}, 2, 1}}) {
    SCOPED_TRACE(c.what);
    GraphBuilder b;
    const int x = b.input("x", c.x);
    b.output(b.node("Conv", {x, b.ramp("w", c.w, 0.003f)},
                    {{"pads", ints_attr({c.pad, c.pad, c.pad, c.pad})}, {"strides", ints_attr({c.stride, c.stride})}}));
    const std::vector<HostTensor> in = {noise(c.x, 44)};
    const std::string bytes = b.plan().bytes;
    // The lanes kernel reading through offsets pads the image first.
    EXPECT_EQ(pool_calls(bytes, in), c.x[2] > 14 && c.stride == 2 ? 2 : 1);
    PlanOptions one_thread;
    one_thread.lower.thread_blocks = 1;
    const std::string small = b.plan(one_thread).bytes;
    if (c.stride == 1 || c.x[2] == 14) {
      EXPECT_GT(pool_calls(small, in), 2);
    }
    EXPECT_EQ(bytes_of(planner::run_program(small, in, {}).outputs),
              bytes_of(planner::run_program(bytes, in, {}).outputs));
  }
  EXPECT_EQ(kernels::gemm_region_scratch_blocks(120, 132, 600), 4);
  EXPECT_EQ(kernels::gemm_region_scratch_blocks(8, 8, 8), 1) << "too small to split";
}

TEST_F(ThreadsTest, GroupsInLanesRunSideBySide) {
  // ResNeXt-50's layer4 3x3 (32 groups of 32 channels onto 7 x 7, stride 1
  // and 2) in lanes: whole groups a thread, each with a block of scratch of
  // its own, in one pool call for the 32 groups (a group at a time, it took
  // a call or more each). Planned for one thread, one block: no pool call.
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(stride);
    GraphBuilder b;
    const std::vector<int64_t> shape = {1, 1024, 7 * stride, 7 * stride};
    const int x = b.input("x", shape);
    b.output(
        b.node("Conv", {x, b.ramp("w", {1024, 32, 3, 3}, 0.002f)},
               {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(32)}, {"strides", ints_attr({stride, stride})}}));
    const std::vector<HostTensor> in = {noise(shape, 45)};
    const std::string bytes = b.plan().bytes;
    EXPECT_EQ(pool_calls(bytes, in), 1);
    PlanOptions one_thread;
    one_thread.lower.thread_blocks = 1;
    const std::string small = b.plan(one_thread).bytes;
    EXPECT_EQ(pool_calls(small, in), 0);
    EXPECT_EQ(bytes_of(planner::run_program(small, in, {}).outputs),
              bytes_of(planner::run_program(bytes, in, {}).outputs));
  }
}

TEST_F(ThreadsTest, EmptyReductionComputesNothing) {
  // An empty output (a kept axis of 0): no output element, so no start index
  // to find (dividing by the axis of 0 would trap), on one thread or more.
  GraphBuilder b;
  const int x = b.input("x", {0, 5});
  b.output(
      b.node("ReduceSum", {x, b.constant("axes", HostTensor::from_int64s({1}, {1}))}, {{"keepdims", int_attr(0)}}));
  const std::string bytes = b.plan().bytes;
  const std::vector<HostTensor> in = {HostTensor(DType::FLOAT32, {0, 5})};
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(2), Error::kOk);
  RunOptions options;
  options.thread_pool = &pool;
  kernels::set_parallel_min_work(0);
  for (const RunOptions& o : {RunOptions{}, options}) {
    const std::vector<HostTensor> out = planner::run_program(bytes, in, o).outputs;
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].numel(), 0);
  }
}

}  // namespace
}  // namespace kiln::testing
