// 16-bit storage on devices (kiln plan --precision fp16|bf16,
// planner/passes/precision.h), planned for cuda:0,cpu: which tensors become
// 16-bit, where the Casts go, how constants are converted and uploaded, and
// the errors of --keep-fp32. Planner-only: no GPU is needed.

#include <gtest/gtest.h>

#include "core/device.h"
#include "core/error.h"
#include "kiln/kernels/float16.h"
#include "support/graph_builder.h"

namespace kiln::testing {
namespace {

using planner::DType;
using planner::LInstruction;
using planner::LMethod;
using planner::LTensor;
using planner::PlanOptions;
using planner::PlanResult;
using planner::Storage;

PlanOptions at(const std::string& precision, std::set<std::string> keep_fp32 = {}) {
  PlanOptions options;
  options.targets = "cuda:0,cpu";
  options.precision = precision;
  options.keep_fp32 = std::move(keep_fp32);
  return options;
}

bool on_cuda(const fb::Device& d) { return d.type() == fb::DeviceType::CUDA; }

const LTensor& tensor(const LMethod& m, int t) { return m.tensors[static_cast<size_t>(t)]; }

std::vector<const LInstruction*> kernels(const LMethod& m, const std::string& op) {
  std::vector<const LInstruction*> found;
  for (const LInstruction& ins : m.instructions) {
    if (ins.kind == LInstruction::Kind::kKernel && ins.op == op) found.push_back(&ins);
  }
  return found;
}

// The dtypes of the device tensors uploaded at load from constant `name`
// (or its 16-bit conversion).
std::multiset<DType> uploads_of(const LMethod& m, const std::string& name) {
  std::multiset<DType> found;
  for (const LInstruction& ins : m.init_instructions) {
    const LTensor& source = tensor(m, ins.inputs[0]);
    if (source.name.rfind(name, 0) == 0) found.insert(tensor(m, ins.outputs[0]).dtype);
  }
  return found;
}

// y = Relu(x * w + b): every device tensor but the input's and output's
// copies is 16-bit, the constants converted at plan time with the runtime's
// rounding (to nearest even), and the two Casts run on the device between
// the delegate's kernels.
TEST(PrecisionTest, TensorsOnlySixteenBitKernelsTouchAreStoredIn16Bits) {
  for (const char* precision : {"fp16", "bf16"}) {
    SCOPED_TRACE(precision);
    const DType storage = std::string(precision) == "fp16" ? DType::FLOAT16 : DType::BFLOAT16;
    GraphBuilder b;
    const int x = b.input("x", {2, 8});
    b.output(b.node("Relu", {b.node("Add", {b.node("Mul", {x, b.ramp("w", {2, 8}, 0.37f)}), b.ramp("b", {2, 8})})}));
    const PlanResult r = b.plan(at(precision));
    const LMethod& m = r.program.methods[0];
    EXPECT_EQ(r.precision_stats.storage, storage);
    EXPECT_EQ(r.precision_stats.kernels_16bit, 3);
    EXPECT_EQ(r.precision_stats.casts, 2);
    EXPECT_EQ(r.precision_stats.constants_converted, 2);
    int float32 = 0;
    for (const LTensor& t : m.tensors) {
      if (!on_cuda(t.device) || t.storage == Storage::kAlias) continue;
      EXPECT_TRUE(t.dtype == storage || t.dtype == DType::FLOAT32) << t.name;
      float32 += t.dtype == DType::FLOAT32;
    }
    EXPECT_EQ(float32, 2);  // x's device copy, and the output's before it goes to the host
    for (const LInstruction& ins : m.init_instructions) {
      const LTensor& source = tensor(m, ins.inputs[0]);
      ASSERT_EQ(source.dtype, storage) << source.name;
      const planner::HostTensor& bytes = *r.program.constants[static_cast<size_t>(source.constant)];
      const int value = r.graph.find_value(source.name.substr(0, source.name.find('/')));
      ASSERT_GE(value, 0) << source.name;
      const planner::HostTensor& original = *r.graph.values[static_cast<size_t>(value)].constant;
      for (int64_t i = 0; i < bytes.numel(); ++i) {
        const float v = original.data<float>()[i];
        EXPECT_EQ(bytes.data<uint16_t>()[i], storage == DType::FLOAT16 ? float_to_half(v) : float_to_bfloat16(v));
      }
    }
    // One run of device kernels, Casts included: one delegate call.
    int first = -1, last = -1;
    for (size_t k = 0; k < m.instructions.size(); ++k) {
      if (m.instructions[k].kind != LInstruction::Kind::kKernel) continue;
      EXPECT_TRUE(on_cuda(m.instructions[k].device)) << m.instructions[k].op;
      if (first < 0) first = static_cast<int>(k);
      last = static_cast<int>(k);
    }
    for (int k = first; k <= last; ++k) {
      EXPECT_EQ(m.instructions[static_cast<size_t>(k)].kind, LInstruction::Kind::kKernel);
    }
    const auto casts = kernels(m, "Cast");
    ASSERT_EQ(casts.size(), 2u);
    EXPECT_EQ(tensor(m, casts[0]->inputs[0]).dtype, DType::FLOAT32);
    EXPECT_EQ(tensor(m, casts[0]->outputs[0]).dtype, storage);
    EXPECT_EQ(tensor(m, casts[1]->inputs[0]).dtype, storage);
    EXPECT_EQ(tensor(m, casts[1]->outputs[0]).dtype, DType::FLOAT32);
  }
}

// w is read by a 16-bit Mul and by an Add kept FP32 (--keep-fp32): it is
// uploaded twice at load, in float32 and in float16, and no Cast converts
// it at run time; the Add's operands meet 16 bits through Casts.
TEST(PrecisionTest, AConstantSharedWithAKernelKeptFp32IsUploadedInBothTypes) {
  GraphBuilder b;
  const int x = b.input("x", {2, 8});
  const int w = b.ramp("w", {2, 8});
  const int product = b.node("Mul", {x, w});
  b.output(b.node("Relu", {b.node("Add", {product, w})}));
  const PlanResult r = b.plan(at("fp16", {"Add_1"}));  // GraphBuilder names nodes OP_N
  const LMethod& m = r.program.methods[0];
  EXPECT_EQ(uploads_of(m, "w"), (std::multiset<DType>{DType::FLOAT32, DType::FLOAT16}));
  EXPECT_EQ(r.precision_stats.kernels_16bit, 2);
  EXPECT_EQ(r.precision_stats.kernels_fp32, 1);
  for (const LInstruction* c : kernels(m, "Cast")) EXPECT_NE(tensor(m, c->inputs[0]).name, "w@cuda:0");
  const auto adds = kernels(m, "Add");
  ASSERT_EQ(adds.size(), 1u);
  for (int t : adds[0]->inputs) EXPECT_EQ(tensor(m, t).dtype, DType::FLOAT32);
  EXPECT_EQ(kernels(m, "Cast").size(), 4u);  // x in, the product out, the sum in, the output out
}

// Softmax and LayerNormalization stay FP32 without being named.
TEST(PrecisionTest, SoftmaxAndLayerNormalizationStayFp32) {
  GraphBuilder b;
  const int x = b.input("x", {4, 16});
  const int scaled = b.node("Mul", {x, b.ramp("w", {4, 16})});
  const int norm = b.node("LayerNormalization", {b.node("Softmax", {scaled}), b.ramp("g", {16}), b.ramp("c", {16})});
  b.output(b.node("Relu", {norm}));
  const PlanResult r = b.plan(at("bf16"));
  const LMethod& m = r.program.methods[0];
  for (const char* op : {"Softmax", "LayerNormalization"}) {
    const auto found = kernels(m, op);
    ASSERT_EQ(found.size(), 1u) << op;
    for (int t : found[0]->inputs) EXPECT_EQ(tensor(m, t).dtype, DType::FLOAT32) << op;
    EXPECT_EQ(tensor(m, found[0]->outputs[0]).dtype, DType::FLOAT32) << op;
  }
  EXPECT_EQ(tensor(m, kernels(m, "Mul")[0]->outputs[0]).dtype, DType::BFLOAT16);
  EXPECT_EQ(tensor(m, kernels(m, "Relu")[0]->outputs[0]).dtype, DType::BFLOAT16);
  EXPECT_EQ(r.precision_stats.kernels_fp32, 2);
}

// A Transpose of the input moves float32 bytes: it stays FP32 and no Cast
// rounds them (a Transpose after a 16-bit kernel moves 16 bits).
TEST(PrecisionTest, KernelsThatOnlyMoveFp32ElementsStayFp32) {
  GraphBuilder b;
  const int x = b.input("x", {4, 8});
  const int moved = b.node("Transpose", {x});
  b.output(b.node("Transpose", {b.node("Relu", {moved})}));
  const PlanResult r = b.plan(at("fp16"));
  const LMethod& m = r.program.methods[0];
  const auto transposes = kernels(m, "Transpose");
  ASSERT_EQ(transposes.size(), 2u);
  EXPECT_EQ(tensor(m, transposes[0]->outputs[0]).dtype, DType::FLOAT32);
  EXPECT_EQ(tensor(m, transposes[1]->inputs[0]).dtype, DType::FLOAT16);
  EXPECT_EQ(r.precision_stats.kernels_16bit, 2);
  EXPECT_EQ(r.precision_stats.casts, 2);
}

TEST(PrecisionTest, Fp32AndTf32ChangeNoStorageAndKeepFp32NamesMustRunOnADevice) {
  for (const char* precision : {"fp32", "tf32"}) {
    GraphBuilder b;
    b.output(b.node("Relu", {b.input("x", {2, 8})}));
    const PlanResult r = b.plan(at(precision));
    EXPECT_EQ(r.precision_stats.storage, DType::FLOAT32);
    EXPECT_TRUE(kernels(r.program.methods[0], "Cast").empty());
  }
  GraphBuilder b;
  b.output(b.node("Relu", {b.input("x", {2, 8})}));
  EXPECT_THROW(b.plan(at("fp16", {"no_such_node"})), planner::PlanError);
}

}  // namespace
}  // namespace kiln::testing
