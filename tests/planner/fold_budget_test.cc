// The folding budget (passes/infer.h): constant folding makes no constant
// beyond it, so a model asking for a huge constant plans in bounded memory
// and the node runs at run time instead.
//
// - A ConstantOfShape of 4 GiB (what the planner fuzzer found: a mutated
//   LayerNormalization expansion made `kiln plan` allocate 4 GiB) feeding a
//   reduction, and one that is a graph output, plan in a child process under
//   a hard address-space limit of 1 GiB above what the test already maps
//   (not under the sanitizers, whose shadow memory needs the address space).
// - ConstantOfShape and Range beyond the budget run as kernels (Expand of the
//   value, Range) and give the values folding gives.
// - The total budget: folds stop once the bytes folded reach it.
// - What cannot run at run time is refused in one line naming the node.
// - Folding reports its progress node by node.

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "exec/run.h"
#include "onnx/import.h"
#include "pipeline.h"
#include "support/graph_builder.h"

#if defined(__SANITIZE_ADDRESS__)
#define KILN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_TEST_SANITIZED 1
#endif
#endif

namespace kiln::testing {
namespace {

namespace kp = kiln::planner;

// ConstantOfShape([1024, 1024, 1024]) of float 0.5: 4 GiB. With `reduce`,
// ReduceMax turns it into one float, the graph output; without, it is the
// graph output itself.
onnx::ModelProto huge_fill_model(bool reduce) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto* g = model.mutable_graph();
  g->set_name("g");
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(3);
  for (int i = 0; i < 3; ++i) shape->add_int64_data(1024);
  auto* fill = g->add_node();
  fill->set_op_type("ConstantOfShape");
  fill->set_name("fill");
  fill->add_input("shape");
  fill->add_output("big");
  auto* value = fill->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(0.5f);
  auto* y = g->add_output();
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  if (reduce) {
    auto* max = g->add_node();
    max->set_op_type("ReduceMax");
    max->set_name("reduce");
    max->add_input("big");
    max->add_output("y");
    auto* keepdims = max->add_attribute();
    keepdims->set_name("keepdims");
    keepdims->set_type(onnx::AttributeProto::INT);
    keepdims->set_i(0);
    y->set_name("y");
    y->mutable_type()->mutable_tensor_type()->mutable_shape();
  } else {
    y->set_name("big");
    for (int i = 0; i < 3; ++i)
      y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1024);
  }
  return model;
}

// What a plan in the child process ended in.
enum ChildOutcome : int { kPlanned = 0, kRefusedOneLine = 1, kOtherError = 2, kOutOfMemory = 3, kWrongPlan = 4 };

// The plan's instructions and constant bytes, checked in the child: the
// fill must be an Expand kernel, not a 4 GiB constant.
bool filled_at_run_time(const kp::PlanResult& result) {
  const kp::LMethod& method = result.program.methods.back();
  uint64_t constant_bytes = 0;
  for (const auto& c : result.program.constants) constant_bytes += c->nbytes();
  bool expand = false;
  for (const kp::LInstruction& ins : method.instructions) expand = expand || (ins.op == "Expand" && ins.name == "fill");
  return expand && constant_bytes < 4096;
}

int plan_in_child(onnx::ModelProto model, bool limit_address_space) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (limit_address_space) {
      // What the process maps now, plus 1 GiB.
      long pages = 0;
      if (FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
        std::fclose(f);
      }
      const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{1} << 30);
      const struct rlimit rl = {limit, limit};
      if (pages == 0 || setrlimit(RLIMIT_AS, &rl) != 0) _exit(kOtherError);
    }
    int outcome = kOtherError;
    try {
      kp::PlanOptions options;
      options.memory.solve.algorithm = kp::memory::Algorithm::kGreedyFirstFit;
      kp::Graph graph = kp::import_onnx_model(model, "huge_fill.onnx", options.import);
      const kp::PlanResult result = kp::plan_graph(std::move(graph), options);
      outcome = filled_at_run_time(result) ? kPlanned : kWrongPlan;
    } catch (const kp::PlanError& e) {
      const std::string message = e.what();
      outcome = message.find('\n') == std::string::npos && message.find("'fill'") != std::string::npos ? kRefusedOneLine
                                                                                                       : kOtherError;
    } catch (const std::bad_alloc&) {
      outcome = kOutOfMemory;
    }
    _exit(outcome);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  if (!WIFEXITED(status)) return 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return WEXITSTATUS(status);
}

#ifdef KILN_TEST_SANITIZED
constexpr bool kLimitAddressSpace = false;
#else
constexpr bool kLimitAddressSpace = true;
#endif

TEST(FoldBudget, HugeConstantOfShapeIntoReductionPlansInBoundedMemory) {
  EXPECT_EQ(plan_in_child(huge_fill_model(true), kLimitAddressSpace), kPlanned);
}

TEST(FoldBudget, HugeConstantOfShapeAsGraphOutputPlansInBoundedMemory) {
  EXPECT_EQ(plan_in_child(huge_fill_model(false), kLimitAddressSpace), kPlanned);
}

Attribute tensor_attr(HostTensor value) {
  Attribute a;
  a.kind = Attribute::Kind::kTensor;
  a.tensor = std::make_shared<HostTensor>(std::move(value));
  return a;
}

HostTensor int64_scalar(int64_t v) { return HostTensor::from_int64s({v}, {}); }

template <typename T>
HostTensor scalar_of(DType dtype, T v) {
  HostTensor t(dtype, {});
  std::memcpy(t.bytes.data(), &v, sizeof v);
  return t;
}

// Fills and ranges as graph outputs, planned with `budget` bytes per tensor;
// returns the outputs of one run and the kernels the plan calls.
struct Ran {
  std::vector<HostTensor> outputs;
  std::vector<std::string> kernels;
};

Ran build_and_run(uint64_t budget) {
  GraphBuilder b;
  const int shape = b.constant("shape", HostTensor::from_int64s({3, 5}, {2}));
  b.output(b.node("ConstantOfShape", {shape}, {{"value", tensor_attr(HostTensor::from_int64s({7}, {1}))}}));
  b.output(b.node("ConstantOfShape", {shape}, {{"value", tensor_attr(scalar_of<uint16_t>(DType::FLOAT16, 0x3E00))}}));
  b.output(b.node("Range", {b.constant("s0", scalar_of<int32_t>(DType::INT32, 2)),
                            b.constant("l0", scalar_of<int32_t>(DType::INT32, 40)),
                            b.constant("d0", scalar_of<int32_t>(DType::INT32, 3))}));
  b.output(b.node("Range", {b.constant("s1", scalar_of<float>(DType::FLOAT32, 1.5f)),
                            b.constant("l1", scalar_of<float>(DType::FLOAT32, -2.f)),
                            b.constant("d1", scalar_of<float>(DType::FLOAT32, -0.3f))}));
  b.output(b.node("Range", {b.constant("s2", int64_scalar(INT64_MAX - 10)), b.constant("l2", int64_scalar(INT64_MIN)),
                            b.constant("d2", int64_scalar(-(int64_t{1} << 62)))}));
  b.output(b.node("Range", {b.constant("s3", scalar_of<double>(DType::FLOAT64, 0.1)),
                            b.constant("l3", scalar_of<double>(DType::FLOAT64, 1.0)),
                            b.constant("d3", scalar_of<double>(DType::FLOAT64, 0.1))}));
  kp::PlanOptions options;
  options.fold_budget.tensor_bytes = budget;
  const kp::PlanResult plan = b.plan(options);
  Ran ran;
  for (const kp::LInstruction& ins : plan.program.methods.back().instructions) ran.kernels.push_back(ins.what());
  ran.outputs = kp::run_program(plan.bytes, {}, kp::RunOptions{}).outputs;
  return ran;
}

TEST(FoldBudget, ConstantOfShapeAndRangeBeyondTheBudgetRunAsKernelsWithFoldingsValues) {
  const Ran folded = build_and_run(uint64_t{64} << 20);
  const Ran at_run_time = build_and_run(8);
  // Folded, every output is a constant: the program only copies them out.
  for (const std::string& k : folded.kernels) EXPECT_EQ(k, "copy");
  int expands = 0, ranges = 0;
  for (const std::string& k : at_run_time.kernels) {
    expands += k == "Expand";
    ranges += k == "Range";
  }
  EXPECT_EQ(expands, 2);
  EXPECT_EQ(ranges, 4);
  ASSERT_EQ(folded.outputs.size(), 6u);
  ASSERT_EQ(at_run_time.outputs.size(), 6u);
  for (size_t i = 0; i < folded.outputs.size(); ++i) {
    EXPECT_EQ(folded.outputs[i].dtype, at_run_time.outputs[i].dtype) << i;
    EXPECT_EQ(folded.outputs[i].shape, at_run_time.outputs[i].shape) << i;
    EXPECT_EQ(folded.outputs[i].bytes, at_run_time.outputs[i].bytes) << "output " << i;
  }
  // The values themselves, for a few.
  const HostTensor& fill = at_run_time.outputs[0];
  ASSERT_EQ(fill.shape, (std::vector<int64_t>{3, 5}));
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(fill.data<int64_t>()[i], 7);
  const HostTensor& ints = at_run_time.outputs[2];
  ASSERT_EQ(ints.shape, (std::vector<int64_t>{13}));
  for (int64_t i = 0; i < 13; ++i) EXPECT_EQ(ints.data<int32_t>()[i], 2 + 3 * i);
  const HostTensor& floats = at_run_time.outputs[3];
  ASSERT_EQ(floats.shape, (std::vector<int64_t>{12}));
  EXPECT_FLOAT_EQ(floats.data<float>()[11], 1.5f + 11.f * -0.3f);
  const HostTensor& wide = at_run_time.outputs[4];  // INT64_MAX - 10 down to INT64_MIN in steps of 2^62
  ASSERT_EQ(wide.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(wide.data<int64_t>()[3], -(int64_t{1} << 62) - 11);
}

TEST(FoldBudget, FoldingStopsAtTheTotalBudget) {
  // Three fills of 40 bytes each under a total of 100: two fold, the third
  // runs at run time.
  GraphBuilder b;
  const int shape = b.constant("shape", HostTensor::from_int64s({10}, {1}));
  for (int i = 0; i < 3; ++i) b.output(b.node("ConstantOfShape", {shape}));
  kp::PlanOptions options;
  options.fold_budget.tensor_bytes = 64;
  options.fold_budget.total_bytes = 100;
  const kp::PlanResult plan = b.plan(options);
  int expands = 0;
  for (const kp::LInstruction& ins : plan.program.methods.back().instructions) expands += ins.op == "Expand";
  EXPECT_EQ(expands, 1);
  const std::vector<HostTensor> outputs = kp::run_program(plan.bytes, {}, kp::RunOptions{}).outputs;
  ASSERT_EQ(outputs.size(), 3u);
  for (const HostTensor& out : outputs) {
    ASSERT_EQ(out.shape, (std::vector<int64_t>{10}));
    for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(out.data<float>()[i], 0.f);
  }
}

TEST(FoldBudget, ProgressCountsEveryNodeOfEachPass) {
  // PlanOptions::fold_progress (kiln plan's line on a terminal): each pass
  // over the graph reports 0 .. n - 1 before each node, then n of n.
  GraphBuilder b;
  const int x = b.input("x", {4});
  b.output(b.node("Relu", {b.node("Add", {x, b.ramp("c", {4})})}));
  kp::PlanOptions options;
  std::vector<std::pair<size_t, size_t>> calls;
  options.fold_progress = [&](size_t done, size_t total) { calls.emplace_back(done, total); };
  b.plan(options);
  ASSERT_GE(calls.size(), 3u);
  const std::vector<std::pair<size_t, size_t>> first_pass(calls.begin(), calls.begin() + 3);
  EXPECT_EQ(first_pass, (std::vector<std::pair<size_t, size_t>>{{0, 2}, {1, 2}, {2, 2}}));
  EXPECT_EQ(calls.back().first, calls.back().second);
}

TEST(FoldBudget, AFillTheRuntimeCannotHoldIsRefusedInOneLine) {
  // Rank 9 folds (the constant is the planner's), but beyond the budget the
  // run-time fill would need a rank the runtime does not have.
  GraphBuilder b;
  const int shape = b.constant("shape", HostTensor::from_int64s(std::vector<int64_t>(9, 2), {9}));
  b.output(b.node("ConstantOfShape", {shape}));
  b.graph().nodes.back().name = "fill";
  kp::PlanOptions options;
  options.fold_budget.tensor_bytes = 1024;
  try {
    (void)b.plan(options);
    FAIL() << "planned";
  } catch (const kp::PlanError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find("'fill'"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 9"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace kiln::testing
