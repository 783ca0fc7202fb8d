// Convolutions the CUDA delegate runs through a GEMM (ConvParams.algorithm
// IM2COL_GEMM: the input unfolded into a planned column buffer, then one
// GEMM batched over the images; backends/cuda/cuda_abi.h states the rule),
// under the host execution model, where the reference GEMM kernel stands
// in for cuBLASLt:
//   - the planner's choice per layer, and why: im2col+GEMM; GEMM without a
//     column buffer for a 1x1 convolution with stride 1 and no padding;
//     direct for depthwise, grouped and small convolutions;
//   - the scratch it plans: the column buffer of exactly N * K * oH * oW
//     elements of the kernel's storage (16 bits with --precision
//     fp16/bf16), then cuBLASLt's workspace; none but the workspace without
//     im2col;
//   - the delegate's output against a reference convolution computed here
//     in double, within the roundings of the storage: 3x3 with padding,
//     strides, 1x1, dilation with asymmetric padding, a non-square kernel,
//     1-D, batch 2, with and without bias, with a fused activation (set in
//     the program: the planner fuses none into device kernels), in fp32,
//     fp16 and bf16.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_abi.h"
#include "kiln/backends/cuda/cuda_backend.h"
#include "kiln/schema/delegate_generated.h"
#include "ops/host_kernels.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace kiln::testing {
namespace {

namespace cuda = backends::cuda;

struct ConvCase {
  const char* name;
  std::vector<int64_t> x;  // N, C, H, W (or N, C, W)
  int64_t m;               // output channels
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t group;
  bool bias;
  const char* choice;  // what the planner picks
};

const std::vector<ConvCase>& cases() {
  static const std::vector<ConvCase> all = {
      {"3x3 pad 1, batch 2", {2, 16, 10, 10}, 24, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, "im2col+GEMM"},
      {"3x3 stride 2, no bias", {1, 16, 11, 9}, 32, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, false, "im2col+GEMM"},
      {"1x1, batch 2", {2, 32, 6, 6}, 16, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true, "GEMM"},
      {"1x1, batch 2, no bias", {2, 16, 5, 4}, 24, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, false, "GEMM"},
      {"1x1 stride 2", {2, 16, 9, 9}, 16, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, true, "im2col+GEMM"},
      {"dilation 2, asymmetric pads",
       {1, 16, 12, 10},
       20,
       {3, 3},
       {1, 1},
       {2, 1, 1, 2},
       {2, 2},
       1,
       true,
       "im2col+GEMM"},
      {"3x5 stride 1x2, batch 2", {2, 8, 9, 12}, 16, {3, 5}, {1, 2}, {1, 2, 1, 2}, {1, 1}, 1, true, "im2col+GEMM"},
      {"1-D, batch 2", {2, 16, 40}, 16, {5}, {1}, {2, 2}, {1}, 1, true, "im2col+GEMM"},
      {"depthwise", {1, 16, 8, 8}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16, true, "direct"},
      {"4 groups", {1, 16, 8, 8}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4, true, "direct"},
      {"8 output channels", {1, 3, 8, 8}, 8, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, "direct"},
  };
  return all;
}

// Values in [-1, 1) from a fixed sequence (no period a layout bug could hide in).
std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.f;
  }
  return v;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The case's geometry as 2-D (a 1-D case has H = kH = 1).
struct Geometry {
  int64_t n, c, h, w, m, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow, group;
};

Geometry geometry(const ConvCase& t) {
  const bool one_d = t.x.size() == 3;
  Geometry g = {};
  g.n = t.x[0];
  g.c = t.x[1];
  g.h = one_d ? 1 : t.x[2];
  g.w = t.x.back();
  g.m = t.m;
  g.kh = one_d ? 1 : t.kernel[0];
  g.kw = t.kernel.back();
  g.sh = one_d ? 1 : t.strides[0];
  g.sw = t.strides.back();
  g.dh = one_d ? 1 : t.dilations[0];
  g.dw = t.dilations.back();
  g.pt = one_d ? 0 : t.pads[0];
  g.pl = one_d ? t.pads[0] : t.pads[1];
  g.pb = one_d ? 0 : t.pads[2];
  g.pr = one_d ? t.pads[1] : t.pads[3];
  g.oh = (g.h + g.pt + g.pb - (g.kh - 1) * g.dh - 1) / g.sh + 1;
  g.ow = (g.w + g.pl + g.pr - (g.kw - 1) * g.dw - 1) / g.sw + 1;
  g.group = t.group;
  return g;
}

std::vector<int64_t> weight_shape(const ConvCase& t) {
  std::vector<int64_t> w = {t.m, t.x[1] / t.group};
  w.insert(w.end(), t.kernel.begin(), t.kernel.end());
  return w;
}

std::vector<int64_t> output_shape(const ConvCase& t) {
  const Geometry g = geometry(t);
  if (t.x.size() == 3) return {g.n, g.m, g.ow};
  return {g.n, g.m, g.oh, g.ow};
}

// The case's convolution in double: y, and the sum of |terms| of each
// element (|x| |w| over the window, + |b|), the scale of its rounding errors.
void reference(const ConvCase& t, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
               std::vector<double>* out_y, std::vector<double>* out_terms) {
  const Geometry g = geometry(t);
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  out_y->assign(static_cast<size_t>(g.n * g.m * g.oh * g.ow), 0.0);
  out_terms->assign(out_y->size(), 0.0);
  size_t i = 0;
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t m = 0; m < g.m; ++m) {
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        for (int64_t ox = 0; ox < g.ow; ++ox, ++i) {
          double acc = t.bias ? b[static_cast<size_t>(m)] : 0.0;
          double terms = std::fabs(acc);
          for (int64_t c = 0; c < cg; ++c) {
            for (int64_t ky = 0; ky < g.kh; ++ky) {
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t iy = oy * g.sh - g.pt + ky * g.dh, ix = ox * g.sw - g.pl + kx * g.dw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const double xv = x[static_cast<size_t>(((n * g.c + (m / mg) * cg + c) * g.h + iy) * g.w + ix)];
                const double wv = w[static_cast<size_t>(((m * cg + c) * g.kh + ky) * g.kw + kx)];
                acc += xv * wv;
                terms += std::fabs(xv * wv);
              }
            }
          }
          (*out_y)[i] = acc;
          (*out_terms)[i] = terms;
        }
      }
    }
  }
}

planner::PlanResult plan(const ConvCase& t, const std::string& precision) {
  GraphBuilder b;
  const int x = b.input("x", t.x);
  HostTensor w(DType::FLOAT32, weight_shape(t));
  const std::vector<float> wv = values(static_cast<size_t>(w.numel()), 2);
  std::copy(wv.begin(), wv.end(), w.data<float>());
  std::vector<int> inputs = {x, b.constant("w", std::move(w))};
  if (t.bias) {
    HostTensor bias(DType::FLOAT32, {t.m});
    const std::vector<float> bv = values(static_cast<size_t>(t.m), 3);
    std::copy(bv.begin(), bv.end(), bias.data<float>());
    inputs.push_back(b.constant("b", std::move(bias)));
  }
  b.output(b.node("Conv", inputs,
                  {{"kernel_shape", ints_attr(t.kernel)},
                   {"strides", ints_attr(t.strides)},
                   {"pads", ints_attr(t.pads)},
                   {"dilations", ints_attr(t.dilations)},
                   {"group", int_attr(t.group)}}));
  planner::PlanOptions options;
  options.targets = "cuda:0,cpu";
  options.precision = precision;
  return b.plan(options);
}

// The Conv kernel call of a lowered method.
const planner::LInstruction* conv_of(const planner::LMethod& m) {
  for (const planner::LInstruction& ins : m.instructions) {
    if (ins.kind == planner::LInstruction::Kind::kKernel && ins.op == "Conv") return &ins;
  }
  return nullptr;
}

// `bytes` with every Conv of its delegates given the fused activation
// `kind` (alpha `alpha`), as a planner that fuses into device kernels
// would write it.
std::string with_activation(const std::string& bytes, fb::Activation kind, float alpha) {
  return mutate_program(bytes, [&](fb::ProgramT& program) {
    for (auto& d : program.methods[0]->delegates) {
      auto graph = fb::UnPackDelegateGraph(d->inline_blob.data());
      for (auto& call : graph->kernels) {
        if (auto* conv = call->params.AsConvParams()) {
          conv->activation = std::make_unique<fb::FusedActivationT>();
          conv->activation->kind = kind;
          conv->activation->alpha = alpha;
        }
      }
      flatbuffers::FlatBufferBuilder fbb;
      fb::FinishDelegateGraphBuffer(fbb, fb::DelegateGraph::Pack(fbb, graph.get()));
      d->inline_blob.assign(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
    }
  });
}

// Runs the forward method of `bytes` once on `x` with the CUDA backend
// under the host execution model; the output in `out_y`.
Error run(const std::string& bytes, cuda::hostexec::CudaBackend& backend, const std::vector<float>& x,
          std::vector<float>* out_y) {
  LoadedProgram program(bytes);
  if (!program.program.ok()) return program.program.error();
  BackendRegistry registry;
  KILN_RETURN_IF_ERROR(registry.register_backend(&backend));
  const MethodMeta meta = program.program->method_meta("forward").get();
  std::vector<std::unique_ptr<AlignedBytes>> arenas;
  std::vector<Span<uint8_t>> spans;
  for (size_t i = 0; i < meta.num_arenas(); ++i) {
    const ArenaInfo info = meta.arena(i).get();
    if (info.device.type() != DeviceType::CPU) {
      spans.emplace_back();  // the backend allocates it
      continue;
    }
    arenas.push_back(std::make_unique<AlignedBytes>(std::string(info.size, '\0')));
    spans.emplace_back(arenas.back()->data(), arenas.back()->size());
  }
  AlignedBytes bookkeeping_bytes(std::string(meta.bookkeeping_bytes(), '\0'));
  BumpAllocator bookkeeping(bookkeeping_bytes.data(), bookkeeping_bytes.size());
  MemoryManager memory;
  memory.bookkeeping = &bookkeeping;
  memory.arenas = Span<const Span<uint8_t>>(spans.data(), spans.size());
  Result<Method> method = program.program->load_method("forward", memory, planner::host_kernel_registry(), registry);
  if (!method.ok()) return method.error();
  const TensorInfo out = meta.output(0).get();
  out_y->assign(static_cast<size_t>(out.nbytes / sizeof(float)), -7.f);
  std::vector<float> in = x;
  KILN_RETURN_IF_ERROR(method->set_input(0, in.data(), in.size() * sizeof(float)));
  KILN_RETURN_IF_ERROR(method->set_output(0, out_y->data(), out_y->size() * sizeof(float)));
  return method->execute();
}

double apply(fb::Activation kind, float alpha, double v) {
  if (kind == fb::Activation::RELU) return v > 0 ? v : 0;
  if (kind == fb::Activation::LEAKY_RELU) return v >= 0 ? v : alpha * v;
  return v;
}

// The delegate's output for case `t` against the reference, element by
// element. 16-bit storage (unit roundoff u) rounds x and w (2u |terms| of
// the products), b (u |b|), the GEMM's output (u |y - b|) and, with a
// bias, the sum after it (u |y|): with |b| <= |terms|, within
// 4u |terms| + 2u |y|. The FP32 products and sums add (K + 2) 2^-24 |terms|.
// The activations here are 1-Lipschitz. Returns how many elements were
// inexact.
int check_output(const ConvCase& t, const std::string& bytes, const std::string& precision, fb::Activation kind,
                 float alpha) {
  cuda::hostexec::CudaBackend backend{cuda::CudaOptions{}};
  const std::vector<float> x = values(static_cast<size_t>(numel(t.x)), 1);
  std::vector<float> y;
  EXPECT_EQ(run(bytes, backend, x, &y), Error::kOk);
  // The GEMM path records one reference GEMM launch (cuBLASLt's on a GPU).
  EXPECT_EQ(backend.stats().gemm_reference, std::string(t.choice) == "direct" ? 0u : 1u);
  backend.shutdown();
  std::vector<double> want, terms;
  const std::vector<float> w = values(static_cast<size_t>(numel(weight_shape(t))), 2);
  const std::vector<float> b = values(static_cast<size_t>(t.m), 3);
  reference(t, x, w, b, &want, &terms);
  EXPECT_EQ(y.size(), want.size());
  const Geometry g = geometry(t);
  const double depth = static_cast<double>(g.c / g.group * g.kh * g.kw);
  const double u = precision == "fp16" ? std::ldexp(1.0, -11) : precision == "bf16" ? std::ldexp(1.0, -8) : 0.0;
  const double accumulate = (depth + 2) * std::ldexp(1.0, -24);
  int inexact = 0, bad = 0;
  for (size_t i = 0; i < y.size() && i < want.size(); ++i) {
    const double expected = apply(kind, alpha, want[i]);
    const double bound = ((4 * u + accumulate) * terms[i] + 2 * u * std::fabs(want[i])) * 1.01 + 1e-30;
    const double error = std::fabs(static_cast<double>(y[i]) - expected);
    inexact += error > 0;
    if (error > bound && ++bad <= 3) {
      ADD_FAILURE() << "element " << i << ": " << y[i] << ", expected " << expected << " (error " << error
                    << " > bound " << bound << ")";
    }
  }
  EXPECT_EQ(bad, 0);
  return inexact;
}

TEST(CudaConvGemmTest, ThePlannerChoosesPerLayerAndPlansTheColumnBufferExactly) {
  for (const ConvCase& t : cases()) {
    for (const char* precision : {"fp32", "fp16"}) {
      SCOPED_TRACE(std::string(t.name) + ", " + precision);
      const planner::PlanResult result = plan(t, precision);
      const planner::LMethod& m = result.program.methods[0];
      const planner::LInstruction* conv = conv_of(m);
      ASSERT_NE(conv, nullptr);
      EXPECT_EQ(conv->choice, t.choice);
      const auto* params = conv->params.AsConvParams();
      ASSERT_NE(params, nullptr);
      const bool gemm = std::string(t.choice) != "direct";
      EXPECT_EQ(params->algorithm, gemm ? fb::ConvAlgorithm::IM2COL_GEMM : fb::ConvAlgorithm::DIRECT);
      const Geometry g = geometry(t);
      const int64_t depth = g.c / g.group * g.kh * g.kw, positions = g.oh * g.ow;
      if (!gemm) {
        EXPECT_TRUE(conv->scratch.empty());
        const std::string why = t.group == g.c ? "depthwise" : t.group > 1 ? "4 groups" : "below 16";
        EXPECT_NE(conv->choice_why.find(why), std::string::npos) << conv->choice_why;
        continue;
      }
      EXPECT_NE(conv->choice_why.find("M " + std::to_string(g.m) + ", N " + std::to_string(positions) + ", K " +
                                      std::to_string(depth)),
                std::string::npos)
          << conv->choice_why;
      std::vector<const planner::LTensor*> scratch;
      for (int s : conv->scratch) scratch.push_back(&m.tensors[static_cast<size_t>(s)]);
      const bool im2col = std::string(t.choice) == "im2col+GEMM";
      ASSERT_EQ(scratch.size(), im2col ? 2u : 1u);
      if (im2col) {
        const DType storage = std::string(precision) == "fp16" ? DType::FLOAT16 : DType::FLOAT32;
        EXPECT_EQ(scratch[0]->dtype, storage);
        EXPECT_EQ(scratch[0]->shape, std::vector<int64_t>{g.n * depth * positions});
        EXPECT_EQ(scratch[0]->nbytes(),
                  static_cast<uint64_t>(g.n * depth * positions) * (storage == DType::FLOAT16 ? 2 : 4));
      }
      EXPECT_EQ(scratch.back()->dtype, DType::UINT8);
      EXPECT_EQ(scratch.back()->nbytes(), cuda::gemm_workspace_bytes(g.n * g.m * positions));
    }
  }
}

TEST(CudaConvGemmTest, ConvolutionsMatchTheReferenceInFp32) {
  for (const ConvCase& t : cases()) {
    SCOPED_TRACE(t.name);
    check_output(t, plan(t, "fp32").bytes, "fp32", fb::Activation::NONE, 0.f);
  }
}

// The planner fuses no activation into device kernels; a program may still
// carry one (ConvParams.activation): with a bias it runs in the launch that
// adds the bias after the GEMM, without one in the GEMM itself.
TEST(CudaConvGemmTest, AFusedActivationRunsWithAndWithoutBias) {
  for (const ConvCase& t : cases()) {
    if (std::string(t.choice) == "direct" || t.x.size() == 3) continue;
    for (auto [kind, alpha] : {std::pair{fb::Activation::RELU, 0.f}, std::pair{fb::Activation::LEAKY_RELU, 0.125f}}) {
      SCOPED_TRACE(std::string(t.name) + ", " + fb::EnumNameActivation(kind));
      check_output(t, with_activation(plan(t, "fp32").bytes, kind, alpha), "fp32", kind, alpha);
    }
  }
}

TEST(CudaConvGemmTest, Fp16AndBf16RunThroughTheGemmWithinTheirRounding) {
  for (const char* precision : {"fp16", "bf16"}) {
    int inexact = 0;
    for (const ConvCase& t : cases()) {
      SCOPED_TRACE(std::string(t.name) + ", " + precision);
      inexact += check_output(t, plan(t, precision).bytes, precision, fb::Activation::NONE, 0.f);
    }
    EXPECT_GT(inexact, 0) << precision;  // the 16-bit storage shows
  }
}

}  // namespace
}  // namespace kiln::testing
