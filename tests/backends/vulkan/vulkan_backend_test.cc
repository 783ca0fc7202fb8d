// The Vulkan backend on a real device (Mesa's lavapipe in CI) with the
// Khronos validation layer on, synchronization validation included: every
// test fails on any validation message.
//
//   - programs all on vulkan:0, and split between vulkan:0 and the CPU,
//     match the CPU-only program;
//   - a missing device is an error at load naming it;
//   - kernels the planner does not lower yet (LayerNormalization, the
//     reductions, Gelu) match references computed here;
//   - barriers are recorded only where bytes conflict;
//   - in-place outputs, corrupt blobs, unknown kernels, staging copies,
//     pipeline reuse and the driver's host memory pool.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <mutex>

#include "backends/vulkan/vulkan_abi.h"
#include "exec/run.h"
#include "host_pool.h"
#include "kiln/platform/platform.h"
#include "kiln/schema/delegate_generated.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"
#include "vulkan_test_support.h"

namespace {

std::mutex g_log_mutex;
std::string g_log;

std::string take_log() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::string out;
  out.swap(g_log);
  return out;
}

}  // namespace

// Keeps what the runtime logs, for tests of error messages.
extern "C" void kiln_pal_log(kiln_log_level level, const char* file, int line, const char* message, size_t length) {
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log.append(message, length);
    g_log += '\n';
  }
  std::fprintf(stderr, "[kiln] %.*s\n", static_cast<int>(length), message);
}

namespace kiln::testing {
namespace {

using planner::PlanOptions;
using planner::PlanResult;

HostTensor float_constant(std::vector<float> values, std::vector<int64_t> shape) {
  return HostTensor::from_floats(values, std::move(shape));
}

// A small CNN with every kind of layer the torchvision CNNs use: conv (plain,
// depthwise, grouped, pointwise), batch norm, activations, both poolings, a
// residual add, a global pooling, a classifier and softmax.
GraphBuilder cnn(bool with_pad = false) {
  GraphBuilder b;
  const int x = b.input("x", {2, 3, 12, 12});
  int h = b.node("Conv", {x, b.ramp("w1", {16, 3, 3, 3}), b.ramp("b1", {16})}, {{"pads", ints_attr({1, 1, 1, 1})}});
  h = b.node("Relu", {h});
  h = b.node("MaxPool", {h}, {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
  if (with_pad) {
    // Pad has no Vulkan shader: it runs on the CPU between two delegates.
    h = b.node("Pad", {h, b.constant("pads", HostTensor::from_int64s({0, 0, 1, 1, 0, 0, 1, 1}, {8}))});
    h = b.node("Conv", {h, b.ramp("w_valid", {16, 16, 3, 3}, 0.02f)});
  }
  h = b.node("Conv", {h, b.ramp("w_dw", {16, 1, 3, 3})}, {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(16)}});
  HostTensor var = float_constant(std::vector<float>(16, 0.8f), {16});
  h = b.node("BatchNormalization",
             {h, b.ramp("scale", {16}), b.ramp("bias", {16}), b.ramp("mean", {16}), b.constant("var", var)});
  h = b.node("HardSwish", {h});
  h = b.node("Conv", {h, b.ramp("w_g", {32, 4, 3, 3}, 0.05f)},
             {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(4)}});
  const int skip = b.node("Sigmoid", {h});
  int a = b.node("AveragePool", {skip}, {{"kernel_shape", ints_attr({3, 3})}, {"pads", ints_attr({1, 1, 1, 1})}});
  a = b.node("Add", {a, skip});
  a = b.node("Conv", {a, b.ramp("w_pw", {24, 32, 1, 1}, 0.05f), b.ramp("b_pw", {24})});
  a = b.node("GlobalAveragePool", {a});
  a = b.node("Flatten", {a});
  a = b.node("Gemm", {a, b.ramp("wf", {10, 24}), b.ramp("bf", {10})}, {{"transB", int_attr(1)}});
  a = b.node("Softmax", {a});
  b.output(a);
  return b;
}

// Attention-like mixing: MatMul, Transpose, Softmax, Concat and element-wise
// arithmetic with broadcasting.
GraphBuilder mixer() {
  GraphBuilder b;
  const int x = b.input("x", {2, 7, 16});
  const int q = b.node("MatMul", {x, b.ramp("wq", {16, 16}, 0.05f)});
  const int k = b.node("MatMul", {x, b.ramp("wk", {16, 16}, 0.05f)});
  const int v = b.node("MatMul", {x, b.ramp("wv", {16, 16}, 0.05f)});
  const int kt = b.node("Transpose", {k}, {{"perm", ints_attr({0, 2, 1})}});
  int s = b.node("MatMul", {q, kt});
  s = b.node("Div", {s, b.constant("scale", HostTensor::scalar_float(4.f))});
  s = b.node("Softmax", {s}, {{"axis", int_attr(-1)}});
  const int att = b.node("MatMul", {s, v});
  int y = b.node("Concat", {att, x}, {{"axis", int_attr(2)}});
  y = b.node("MatMul", {y, b.ramp("wo", {32, 16}, 0.05f)});
  y = b.node("Add", {y, x});
  y = b.node("Mul", {y, b.ramp("gamma", {16})});
  y = b.node("Tanh", {y});
  b.output(y);
  return b;
}

PlanResult plan(GraphBuilder& b, const std::string& targets, bool inplace = true) {
  PlanOptions options;
  options.targets = targets;
  options.inplace.enabled = inplace;
  return b.plan(options);
}

struct DeviceCounts {
  int delegates = 0, cpu_kernels = 0, device_kernels = 0, copies = 0;
};

DeviceCounts count_instructions(const PlanResult& plan) {
  DeviceCounts c;
  const fb::Program* program = fb::GetSizePrefixedProgram(plan.bytes.data());
  const fb::Method* m = program->methods()->Get(0);
  for (const fb::Instruction* ins : *m->instructions()) {
    switch (ins->kind_type()) {
      case fb::InstructionKind::DelegateCall: ++c.delegates; break;
      case fb::InstructionKind::KernelCall: ++c.cpu_kernels; break;
      case fb::InstructionKind::CopyCall: ++c.copies; break;
      default: break;
    }
  }
  for (const planner::LInstruction& ins : plan.program.methods[0].instructions) {
    if (ins.kind == planner::LInstruction::Kind::kKernel && ins.device.type() != fb::DeviceType::CPU)
      ++c.device_kernels;
  }
  return c;
}

std::vector<HostTensor> run_cpu(const std::string& program, const std::vector<HostTensor>& inputs) {
  return planner::run_program(program, inputs, planner::RunOptions{}).outputs;
}

std::vector<HostTensor> run_vulkan(const std::string& program, const std::vector<HostTensor>& inputs,
                                   TestBackend& backend = shared_backend()) {
  LoadedMethod method(program, backend.registry);
  EXPECT_EQ(method.error(), Error::kOk) << take_log();
  std::vector<HostTensor> outputs;
  if (method.error() != Error::kOk) return outputs;
  EXPECT_EQ(method.run(inputs, &outputs), Error::kOk) << take_log();
  return outputs;
}

void expect_close(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(relative_error(got[i], want[i]), tolerance) << "output " << i;
  }
}

TEST(VulkanBackendTest, AllVulkanCnnMatchesCpu) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = cnn();
  const PlanResult vk = plan(b, "vulkan:0");
  const DeviceCounts counts = count_instructions(vk);
  EXPECT_EQ(counts.delegates, 1);
  EXPECT_EQ(counts.cpu_kernels, 0);
  // Every kernel of the CNN (its BatchNormalization folded into the conv
  // before partitioning).
  EXPECT_GE(counts.device_kernels, 13);
  const std::vector<HostTensor> inputs = {random_tensor({2, 3, 12, 12}, 1)};
  expect_close(run_vulkan(vk.bytes, inputs), run_cpu(plan(b, "cpu").bytes, inputs), 1e-5);
}

TEST(VulkanBackendTest, AllVulkanMixerMatchesCpu) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = mixer();
  const PlanResult vk = plan(b, "vulkan:0");
  EXPECT_EQ(count_instructions(vk).cpu_kernels, 0);
  const std::vector<HostTensor> inputs = {random_tensor({2, 7, 16}, 2)};
  expect_close(run_vulkan(vk.bytes, inputs), run_cpu(plan(b, "cpu").bytes, inputs), 1e-5);
}

// The shared-memory tiles GPUs get give the CPU's results too (lavapipe
// gets register blocks by default).
TEST(VulkanBackendTest, SharedMemoryTilesMatchCpu) {
  SKIP_WITHOUT_VULKAN();
  backends::vulkan::VulkanOptions options = TestBackend::default_options();
  options.kernels = backends::vulkan::VulkanOptions::Kernels::kSharedMemoryTiles;
  TestBackend tiles(options);
  GraphBuilder c = cnn(), m = mixer();
  const std::vector<HostTensor> image = {random_tensor({2, 3, 12, 12}, 21)};
  const std::vector<HostTensor> tokens = {random_tensor({2, 7, 16}, 22)};
  expect_close(run_vulkan(plan(c, "vulkan:0").bytes, image, tiles), run_cpu(plan(c, "cpu").bytes, image), 1e-5);
  expect_close(run_vulkan(plan(m, "vulkan:0").bytes, tokens, tiles), run_cpu(plan(m, "cpu").bytes, tokens), 1e-5);
  tiles.backend->shutdown();
  EXPECT_EQ(tiles.backend->validation_messages(), 0u);
}

// The devices issue: a model split across vulkan:0 and the CPU (a node the
// backend cannot run, and nodes placed on the CPU on purpose) matches the
// CPU-only program.
TEST(VulkanBackendTest, ModelSplitAcrossVulkanAndCpuMatchesCpuOnly) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = cnn(/*with_pad=*/true);
  PlanOptions options;
  options.targets = "vulkan:0,cpu";
  options.placements = {{"HardSwish_7", "cpu"}};
  const PlanResult mixed = b.plan(options);
  const DeviceCounts counts = count_instructions(mixed);
  EXPECT_GE(counts.delegates, 3);
  EXPECT_GE(counts.cpu_kernels, 2);
  EXPECT_GE(counts.copies, 4);
  const std::vector<HostTensor> inputs = {random_tensor({2, 3, 12, 12}, 3)};
  expect_close(run_vulkan(mixed.bytes, inputs), run_cpu(plan(b, "cpu").bytes, inputs), 1e-5);
}

TEST(VulkanBackendTest, WithoutInplaceReuseOutputsAreTheSame) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = cnn();
  const std::vector<HostTensor> inputs = {random_tensor({2, 3, 12, 12}, 4)};
  const std::vector<HostTensor> with = run_vulkan(plan(b, "vulkan:0,cpu").bytes, inputs);
  const std::vector<HostTensor> without = run_vulkan(plan(b, "vulkan:0,cpu", false).bytes, inputs);
  ASSERT_EQ(with.size(), 1u);
  ASSERT_EQ(without.size(), 1u);
  EXPECT_EQ(with[0].bytes, without[0].bytes);
}

TEST(VulkanBackendTest, MissingDeviceIsAnErrorAtLoadNamingIt) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = mixer();
  const PlanResult vk = plan(b, "vulkan:7,cpu");
  const uint32_t devices = shared_backend().backend->device_count().get();
  ASSERT_LT(devices, 8u);
  take_log();
  LoadedMethod method(vk.bytes, shared_backend().registry);
  EXPECT_EQ(method.error(), Error::kDeviceAllocationFailed);
  const std::string log = take_log();
  EXPECT_NE(log.find("vulkan:7 was requested"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(devices) + " Vulkan device"), std::string::npos) << log;
}

// A device arena the device cannot hold fails at load, with the arena named,
// before anything runs.
TEST(VulkanBackendTest, DeviceArenaThatCannotBeAllocatedIsAnErrorAtLoad) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = mixer();
  const std::string huge = mutate_program(plan(b, "vulkan:0,cpu").bytes, [](fb::ProgramT& p) {
    for (auto& arena : p.methods[0]->arenas) {
      if (arena->device && arena->device->type() == fb::DeviceType::VULKAN) arena->size = uint64_t{1} << 46;
    }
  });
  take_log();
  LoadedMethod method(huge, shared_backend().registry);
  EXPECT_EQ(method.error(), Error::kDeviceAllocationFailed);
  const std::string log = take_log();
  EXPECT_NE(log.find("failed to allocate device arena"), std::string::npos) << log;
}

// Two reads of one input need no barrier between them; the add that reads
// both results waits for them once.
TEST(VulkanBackendTest, BarriersOnlyWhereBytesConflict) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b;
  const int x = b.input("x", {4, 64});
  const int r = b.node("Relu", {x});
  const int s = b.node("Sigmoid", {x});
  const int t = b.node("Tanh", {x});
  b.output(b.node("Add", {b.node("Add", {r, s}), t}));
  const PlanResult vk = plan(b, "vulkan:0", /*inplace=*/false);
  backends::vulkan::VulkanBackend& backend = *shared_backend().backend;
  const uint64_t before = backend.stats().barriers_recorded;
  const uint64_t dispatches = backend.stats().dispatches_recorded;
  const std::vector<HostTensor> inputs = {random_tensor({4, 64}, 5)};
  expect_close(run_vulkan(vk.bytes, inputs), run_cpu(plan(b, "cpu").bytes, inputs), 1e-6);
  EXPECT_EQ(backend.stats().dispatches_recorded - dispatches, 5u);
  // Relu, Sigmoid, Tanh | Add(r, s) | Add(., t)
  EXPECT_EQ(backend.stats().barriers_recorded - before, 2u);
}

// ---------------------------------------------------------------------------
// Single kernels, against references computed here.

std::vector<HostTensor> run_kernel(const std::string& op, fb::ParamsUnion params, const std::vector<HostTensor>& inputs,
                                   const std::vector<std::vector<int64_t>>& outputs, int alias = -1) {
  std::vector<std::vector<int64_t>> shapes;
  for (const HostTensor& t : inputs) shapes.push_back(t.shape);
  return run_vulkan(single_kernel_program(op, std::move(params), shapes, outputs, alias), inputs);
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

// Reference reduction over `axes` of x (double accumulation).
HostTensor reduce_reference(const std::string& op, const HostTensor& x, const std::vector<int>& axes, bool keepdims) {
  std::vector<bool> reduced(x.shape.size(), false);
  for (int a : axes) reduced[static_cast<size_t>(a)] = true;
  std::vector<int64_t> kept_shape, out_shape;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (!reduced[d]) kept_shape.push_back(x.shape[d]);
    if (!reduced[d] || keepdims) out_shape.push_back(reduced[d] ? 1 : x.shape[d]);
  }
  HostTensor out(planner::DType::FLOAT32, out_shape);
  const std::vector<int64_t> xs = strides_of(x.shape);
  const int64_t outputs = planner::shape_numel(kept_shape);
  for (int64_t o = 0; o < outputs; ++o) {
    // Walk every element; keep those whose kept coordinates spell o.
    std::vector<double> values;
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t rest = i, kept = 0;
      for (size_t d = 0; d < x.shape.size(); ++d) {
        const int64_t c = rest / xs[d];
        rest %= xs[d];
        if (!reduced[d]) kept = kept * x.shape[d] + c;
      }
      if (kept == o) values.push_back(x.data<float>()[i]);
    }
    double acc = 0;
    if (op == "ReduceMax") {
      acc = -INFINITY;
      for (double v : values) acc = std::max(acc, v);
    } else if (op == "ReduceMin") {
      acc = INFINITY;
      for (double v : values) acc = std::min(acc, v);
    } else if (op == "ReduceProd") {
      acc = 1;
      for (double v : values) acc *= v;
    } else if (op == "ReduceLogSumExp") {
      double m = -INFINITY;
      for (double v : values) m = std::max(m, v);
      for (double v : values) acc += std::exp(v - m);
      acc = m + std::log(acc);
    } else {
      for (double v : values) {
        acc += op == "ReduceL1" ? std::fabs(v) : (op == "ReduceL2" || op == "ReduceSumSquare") ? v * v : v;
      }
      if (op == "ReduceMean") acc /= static_cast<double>(values.size());
      if (op == "ReduceL2") acc = std::sqrt(acc);
      if (op == "ReduceLogSum") acc = std::log(acc);
    }
    out.data<float>()[o] = static_cast<float>(acc);
  }
  return out;
}

TEST(VulkanKernelTest, ReductionsOverAnyAxes) {
  SKIP_WITHOUT_VULKAN();
  const HostTensor x = random_tensor({3, 4, 5, 6}, 6);
  HostTensor positive = x;
  for (int64_t i = 0; i < positive.numel(); ++i)
    positive.data<float>()[i] = std::fabs(positive.data<float>()[i]) + 0.1f;
  const std::vector<std::vector<int>> axes_cases = {{3}, {0}, {1, 2}, {0, 2}, {1, 3}, {0, 1, 2, 3}};
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    const bool needs_positive = std::string(op) == "ReduceLogSum" || std::string(op) == "ReduceProd";
    const HostTensor& input = needs_positive ? positive : x;
    for (const auto& axes : axes_cases) {
      for (bool keepdims : {true, false}) {
        const HostTensor want = reduce_reference(op, input, axes, keepdims);
        fb::ReduceParamsT p;
        p.axes.assign(axes.begin(), axes.end());
        p.keepdims = keepdims;
        fb::ParamsUnion params;
        params.Set(std::move(p));
        const std::vector<HostTensor> got = run_kernel(op, std::move(params), {input}, {want.shape});
        ASSERT_EQ(got.size(), 1u);
        EXPECT_LE(relative_error(got[0], want), 2e-5) << op << " axes " << axes.size() << " keepdims " << keepdims;
      }
    }
  }
}

TEST(VulkanKernelTest, GlobalMaxPool) {
  SKIP_WITHOUT_VULKAN();
  const HostTensor x = random_tensor({2, 3, 5, 7}, 7);
  const HostTensor want = reduce_reference("ReduceMax", x, {2, 3}, true);
  const std::vector<HostTensor> got = run_kernel("GlobalMaxPool", fb::ParamsUnion(), {x}, {want.shape});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(relative_error(got[0], want), 0.0);
}

TEST(VulkanKernelTest, LayerNormalization) {
  SKIP_WITHOUT_VULKAN();
  const HostTensor x = random_tensor({2, 3, 40}, 8, 3.f);
  const HostTensor scale = random_tensor({40}, 9);
  const HostTensor bias = random_tensor({40}, 10);
  for (int axis : {2, 1}) {
    const int64_t outer = axis == 2 ? 6 : 2, inner = x.numel() / outer;
    HostTensor scale_n = axis == 2 ? scale : random_tensor({3, 40}, 11);
    HostTensor bias_n = axis == 2 ? bias : random_tensor({3, 40}, 12);
    for (bool with_bias : {true, false}) {
      for (bool stats : {false, true}) {
        HostTensor want(planner::DType::FLOAT32, x.shape);
        std::vector<int64_t> stat_shape = axis == 2 ? std::vector<int64_t>{2, 3, 1} : std::vector<int64_t>{2, 1, 1};
        HostTensor mean(planner::DType::FLOAT32, stat_shape), inv(planner::DType::FLOAT32, stat_shape);
        for (int64_t o = 0; o < outer; ++o) {
          double s = 0, q = 0;
          for (int64_t i = 0; i < inner; ++i) s += x.data<float>()[o * inner + i];
          const double m = s / inner;
          for (int64_t i = 0; i < inner; ++i) q += std::pow(x.data<float>()[o * inner + i] - m, 2);
          const double r = 1.0 / std::sqrt(q / inner + 1e-5);
          for (int64_t i = 0; i < inner; ++i) {
            want.data<float>()[o * inner + i] =
                static_cast<float>((x.data<float>()[o * inner + i] - m) * r * scale_n.data<float>()[i] +
                                   (with_bias ? bias_n.data<float>()[i] : 0));
          }
          mean.data<float>()[o] = static_cast<float>(m);
          inv.data<float>()[o] = static_cast<float>(r);
        }
        fb::LayerNormParamsT p;
        p.axis = axis;
        p.epsilon = 1e-5f;
        fb::ParamsUnion params;
        params.Set(std::move(p));
        std::vector<HostTensor> inputs = {x, scale_n};
        if (with_bias) inputs.push_back(bias_n);
        std::vector<std::vector<int64_t>> outputs = {x.shape};
        if (stats) outputs.insert(outputs.end(), {stat_shape, stat_shape});
        const std::vector<HostTensor> got = run_kernel("LayerNormalization", std::move(params), inputs, outputs);
        ASSERT_EQ(got.size(), outputs.size());
        EXPECT_LE(relative_error(got[0], want), 1e-5) << "axis " << axis;
        if (stats) {
          EXPECT_LE(relative_error(got[1], mean), 1e-5);
          EXPECT_LE(relative_error(got[2], inv), 1e-5);
        }
      }
    }
  }
}

TEST(VulkanKernelTest, GeluBothForms) {
  SKIP_WITHOUT_VULKAN();
  const HostTensor x = random_tensor({5, 33}, 13, 4.f);
  for (float beta : {0.f, 1.f}) {
    HostTensor want = x;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = x.data<float>()[i];
      want.data<float>()[i] =
          static_cast<float>(beta != 0 ? 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                                       : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    }
    fb::UnaryParamsT p;
    p.beta = beta;
    fb::ParamsUnion params;
    params.Set(std::move(p));
    const std::vector<HostTensor> got = run_kernel("Gelu", std::move(params), {x}, {x.shape});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_LE(relative_error(got[0], want), 1e-6) << "beta " << beta;
  }
}

TEST(VulkanKernelTest, SliceWithNegativeSteps) {
  SKIP_WITHOUT_VULKAN();
  const HostTensor x = random_tensor({4, 6, 9}, 18);
  // [1:4, 5:0:-2, ::-1] -> [3, 3, 9]; and [:, 2:3, 1:8:3] -> [4, 1, 3]
  struct Case {
    std::vector<int64_t> starts, steps, counts;
  } const cases[] = {{{1, 5, 8}, {1, -2, -1}, {3, 3, 9}}, {{0, 2, 1}, {1, 1, 3}, {4, 1, 3}}};
  for (const Case& c : cases) {
    HostTensor want(planner::DType::FLOAT32, c.counts);
    int64_t i = 0;
    for (int64_t a = 0; a < c.counts[0]; ++a) {
      for (int64_t b = 0; b < c.counts[1]; ++b) {
        for (int64_t e = 0; e < c.counts[2]; ++e) {
          const int64_t ia = c.starts[0] + a * c.steps[0], ib = c.starts[1] + b * c.steps[1],
                        ie = c.starts[2] + e * c.steps[2];
          want.data<float>()[i++] = x.data<float>()[(ia * 6 + ib) * 9 + ie];
        }
      }
    }
    fb::SliceParamsT p;
    p.starts = c.starts;
    p.steps = c.steps;
    fb::ParamsUnion params;
    params.Set(std::move(p));
    const std::vector<HostTensor> got = run_kernel("Slice", std::move(params), {x}, {c.counts});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(relative_error(got[0], want), 0.0);
  }
}

TEST(VulkanKernelTest, SplitIsConcatReversed) {
  SKIP_WITHOUT_VULKAN();
  const HostTensor x = random_tensor({2, 7, 5}, 19);
  fb::AxisParamsT p;
  p.axis = 1;
  fb::ParamsUnion params;
  params.Set(p);
  const std::vector<HostTensor> parts = run_kernel("Split", std::move(params), {x}, {{2, 3, 5}, {2, 1, 5}, {2, 3, 5}});
  ASSERT_EQ(parts.size(), 3u);
  fb::ParamsUnion concat_params;
  concat_params.Set(p);
  const std::vector<HostTensor> whole = run_kernel("Concat", std::move(concat_params), parts, {x.shape});
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].bytes, x.bytes);
  EXPECT_EQ(parts[1].data<float>()[0], x.data<float>()[3 * 5]);
}

TEST(VulkanKernelTest, InPlaceAddWritesOverItsInput) {
  SKIP_WITHOUT_VULKAN();
  const HostTensor a = random_tensor({3, 70}, 14), b = random_tensor({70}, 15);
  HostTensor want = a;
  for (int64_t i = 0; i < a.numel(); ++i) want.data<float>()[i] += b.data<float>()[i % 70];
  fb::ParamsUnion params;
  params.Set(fb::BinaryParamsT());
  const std::vector<HostTensor> got = run_kernel("Add", std::move(params), {a, b}, {a.shape}, /*alias=*/0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(relative_error(got[0], want), 0.0);
}

// ---------------------------------------------------------------------------
// Refusals: each is an error at load with a message, never a crash.

TEST(VulkanBackendTest, UndeclaredInPlaceIsRefused) {
  SKIP_WITHOUT_VULKAN();
  fb::AxisParamsT p;
  p.axis = 1;
  fb::ParamsUnion params;
  params.Set(std::move(p));
  take_log();
  LoadedMethod method(single_kernel_program("Softmax", std::move(params), {{2, 8}}, {{2, 8}}, 0),
                      shared_backend().registry);
  EXPECT_EQ(method.error(), Error::kDelegateInitFailed);
  EXPECT_NE(take_log().find("shares bytes with input 0"), std::string::npos);
}

TEST(VulkanBackendTest, KernelWithoutShaderIsRefused) {
  SKIP_WITHOUT_VULKAN();
  take_log();
  LoadedMethod method(single_kernel_program("Resize", fb::ParamsUnion(), {{2, 8}}, {{2, 8}}),
                      shared_backend().registry);
  EXPECT_EQ(method.error(), Error::kDelegateInitFailed);
  EXPECT_NE(take_log().find("kernel 'Resize' has no Vulkan shader"), std::string::npos);
}

TEST(VulkanBackendTest, KernelWithWrongShapesIsRefused) {
  SKIP_WITHOUT_VULKAN();
  fb::ParamsUnion params;
  params.Set(fb::BinaryParamsT());
  take_log();
  LoadedMethod method(single_kernel_program("Add", std::move(params), {{2, 8}, {3, 8}}, {{2, 8}}),
                      shared_backend().registry);
  EXPECT_EQ(method.error(), Error::kDelegateInitFailed);
  EXPECT_NE(take_log().find("do not broadcast"), std::string::npos);
}

// Rewrites the blob of delegate 0.
std::string with_blob(const std::string& program, const std::function<void(std::vector<uint8_t>&)>& change) {
  return mutate_program(program, [&](fb::ProgramT& p) { change(p.methods[0]->delegates[0]->inline_blob); });
}

TEST(VulkanBackendTest, CorruptBlobsAreRefused) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = mixer();
  const std::string good = plan(b, "vulkan:0").bytes;
  const std::string truncated = with_blob(good, [](std::vector<uint8_t>& blob) { blob.resize(blob.size() / 2); });
  const std::string wrong_id = with_blob(good, [](std::vector<uint8_t>& blob) { blob[4] ^= 0x55; });
  const std::string bad_operand = with_blob(good, [](std::vector<uint8_t>& blob) {
    std::unique_ptr<fb::DelegateGraphT> graph(fb::GetDelegateGraph(blob.data())->UnPack());
    graph->kernels[1]->inputs[0] = 100000;
    flatbuffers::FlatBufferBuilder builder;
    builder.Finish(fb::DelegateGraph::Pack(builder, graph.get()), fb::DelegateGraphIdentifier());
    blob.assign(builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize());
  });
  const std::string host_operand = with_blob(good, [](std::vector<uint8_t>& blob) {
    std::unique_ptr<fb::DelegateGraphT> graph(fb::GetDelegateGraph(blob.data())->UnPack());
    graph->kernels[0]->inputs[0] = 0;  // the method input, on the host
    flatbuffers::FlatBufferBuilder builder;
    builder.Finish(fb::DelegateGraph::Pack(builder, graph.get()), fb::DelegateGraphIdentifier());
    blob.assign(builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize());
  });
  for (const std::string* program : {&truncated, &wrong_id, &bad_operand, &host_operand}) {
    LoadedMethod method(*program, shared_backend().registry);
    EXPECT_EQ(method.error(), Error::kDelegateInitFailed);
  }
  EXPECT_EQ(LoadedMethod(good, shared_backend().registry).error(), Error::kOk);
}

// ---------------------------------------------------------------------------
// Memory and objects.

TEST(VulkanBackendTest, StagingCopiesGiveTheSameOutputs) {
  SKIP_WITHOUT_VULKAN();
  backends::vulkan::VulkanOptions options = TestBackend::default_options();
  options.force_staging = true;
  TestBackend staging(options);
  GraphBuilder b = cnn(/*with_pad=*/true);
  const std::string program = plan(b, "vulkan:0,cpu").bytes;
  const std::vector<HostTensor> inputs = {random_tensor({2, 3, 12, 12}, 16)};
  const uint64_t submits = staging.backend->stats().submits;
  const std::vector<HostTensor> got = run_vulkan(program, inputs, staging);
  const std::vector<HostTensor> want = run_vulkan(program, inputs);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(got[0].bytes, want[0].bytes);
  // Delegate calls plus the staged uploads (constants too) and downloads.
  EXPECT_GT(staging.backend->stats().submits - submits,
            static_cast<uint64_t>(count_instructions(plan(b, "vulkan:0,cpu")).delegates));
  staging.backend->shutdown();
  EXPECT_EQ(staging.backend->validation_messages(), 0u);
}

TEST(VulkanBackendTest, PipelinesAreMadeOncePerDevice) {
  SKIP_WITHOUT_VULKAN();
  TestBackend fresh;
  GraphBuilder b = mixer();
  const std::string program = plan(b, "vulkan:0").bytes;
  {
    LoadedMethod first(program, fresh.registry);
    ASSERT_EQ(first.error(), Error::kOk);
  }
  const uint64_t made = fresh.backend->stats().pipelines_created;
  EXPECT_GT(made, 3u);
  {
    LoadedMethod second(program, fresh.registry);
    ASSERT_EQ(second.error(), Error::kOk);
  }
  EXPECT_EQ(fresh.backend->stats().pipelines_created, made);
  EXPECT_GT(fresh.backend->pipeline_cache_data(0, nullptr, 0), 0u);
  fresh.backend->shutdown();
  EXPECT_EQ(fresh.backend->validation_messages(), 0u);
}

TEST(VulkanBackendTest, DriverHostAllocationsComeFromThePool) {
  SKIP_WITHOUT_VULKAN();
  TestBackend pooled;
  GraphBuilder b = mixer();
  const std::vector<HostTensor> inputs = {random_tensor({2, 7, 16}, 17)};
  run_vulkan(plan(b, "vulkan:0").bytes, inputs, pooled);
  const backends::vulkan::VulkanStats stats = pooled.backend->stats();
  EXPECT_GT(stats.host_allocations, 0u);
  EXPECT_GT(stats.host_bytes_peak, 0u);
  EXPECT_LE(stats.host_bytes_peak, pooled.pool.size());
  pooled.backend->shutdown();
  EXPECT_EQ(pooled.backend->stats().host_bytes_in_use, 0u);
}

TEST(VulkanBackendTest, ExhaustedHostPoolIsAnError) {
  SKIP_WITHOUT_VULKAN();
  TestBackend tiny(TestBackend::default_options(), 4096);
  GraphBuilder b = mixer();
  take_log();
  LoadedMethod method(plan(b, "vulkan:0").bytes, tiny.registry);
  EXPECT_NE(method.error(), Error::kOk);
  EXPECT_NE(take_log().find("host memory pool"), std::string::npos);
}

TEST(HostPoolTest, AllocatesAlignsReallocatesAndMerges) {
  std::vector<uint8_t> memory(1 << 16);
  backends::vulkan::internal::HostPool pool;
  pool.reset(memory.data(), memory.size());
  std::vector<void*> blocks;
  for (size_t alignment : {8, 16, 64, 256, 4096}) {
    void* p = pool.allocate(100, alignment);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u);
    std::memset(p, 0xab, 100);
    blocks.push_back(p);
  }
  void* grown = pool.reallocate(blocks[0], 5000, 8);
  ASSERT_NE(grown, nullptr);
  EXPECT_EQ(static_cast<uint8_t*>(grown)[99], 0xab);
  blocks[0] = grown;
  EXPECT_EQ(pool.allocate(1 << 20, 8), nullptr);
  for (void* p : blocks) pool.free(p);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  // Everything merged back: one block nearly the whole span fits again.
  void* whole = pool.allocate(memory.size() - 256, 16);
  EXPECT_NE(whole, nullptr);
  pool.free(whole);
}

// The shared backend reported nothing over the whole suite, its shutdown
// included.
class ValidationEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!vulkan_unavailable().empty()) return;
    shared_backend().backend->shutdown();
    EXPECT_EQ(shared_backend().backend->validation_messages(), 0u) << "validation messages over the suite";
  }
};

const auto* const g_environment = ::testing::AddGlobalTestEnvironment(new ValidationEnvironment);

}  // namespace
}  // namespace kiln::testing
