// Conformance runner: plans and runs the ONNX backend node tests (Debian's
// libonnx-testdata: model.onnx + test_data_set_*/input_*.pb, output_*.pb)
// and compares kiln's outputs with the reference.
//
// A test whose model uses an op, dtype or attribute kiln does not support is
// skipped, and the reason is counted. A test whose shape arguments are graph
// inputs (Reshape's shape, Unsqueeze's axes...) is planned with those inputs
// frozen to the test's values, as `kiln plan --freeze` does. Every other test
// must pass: a failure fails the suite.
//
// Each test is attributed to the op it tests: the op of its model's nodes
// (Constant nodes aside), or for a function's "_expanded" test, the op of
// the test it expands. The summary lists passes, skips and failures per op
// for the ops kiln targets (CNNs and transformer blocks), or every op with
// --all-ops.
//
// Tests of the random ops (Bernoulli, RandomUniform(Like), RandomNormal(Like),
// and the tests that expand them) cannot match the reference's values: kiln
// draws its own. Their outputs are checked by property instead: dtype and
// shape exact, and the values in the set the op can give (0 or 1 where the
// reference holds only 0 and 1, [low, high) for a uniform output, finite
// for a normal one). They count as "passed by property", apart from the
// tests that match value for value.
//
// With --target (vulkan:0,cpu) every test is planned for those devices, as
// `kiln plan --target` does, and run on the built-in runtime backends
// (targets/runtime_backends.h): the same op tests then check a device
// backend against the same references. The summary counts the passing tests
// whose program calls a delegate that holds at least one kernel ("ran on
// the device"), and those whose program holds no CPU kernel call at all
// ("wholly on the device"), read from the emitted program itself; any
// mismatch fails, as does any validation message when
// KILN_VULKAN_VALIDATION=1.
//
// With --floors FILE (tests/conformance/expected_counts.txt) the run also
// fails when a count drops below the floor FILE records for the --target
// list: the tests passed by value, passed by property, ran on the device and
// ran wholly on the device. A refusal at plan time is a skip and a node a
// device refuses falls back to the CPU, so without floors an op that starts
// being refused, or a backend that stops taking work, would still pass. A
// count above its floor prints a note (raise the floor). The counts come
// from the plan alone, which does not depend on the processor (no ISA
// probe in the planner), so they are the same on every host.
//
// With --export DIR, each passing test's program, inputs and expected
// outputs are also written to DIR/<test>/ (program.kiln, input_<i>.bin,
// expected_<i>.bin: raw little-endian bytes), for a runtime on a machine
// without the planner to run the same cases: the arm64 build runs them under
// qemu-aarch64 (tests/arm64, kiln-runner check), and with --target
// cuda:0,cpu a GPU machine runs them from a bundle (bench/cuda_bundle.sh).
//
// With --threads N each passing test runs again on a pool of N threads
// (kiln/runtime/posix_thread_pool.h) and must give the same output bytes as
// on one thread; ctest runs it with KILN_PARALLEL_MIN_WORK=0, so that every
// kernel that can split its work does, however small the test.
//
// With --precision fp16 or bf16 every test is planned so (kiln plan
// --precision: a device's tensors stored in 16 bits) and its float32
// outputs are compared within the 16-bit storage's rounding instead of
// ONNX's tolerance: |got - want| <= 4u (|want| + max|want|), u = 2^-11
// (float16) or 2^-8 (bfloat16), the unit roundoff of rounding to nearest.
// The kernels accumulate in FP32, so a single op's error is its inputs'
// rounding (u each, carried through the op's gain) and its output's (u):
// 4u of the element covers an op of gain up to about two; the norm-wise
// 4u max|want| covers elements much smaller than the terms that made them
// (sums that cancel).
//
// usage: kiln_onnx_node_tests [--data DIR] [--filter SUBSTRING] [--target LIST] [--verbose] [--all-ops]
//                             [--export DIR] [--threads N] [--floors FILE] [--precision fp16|bf16]

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/file_util.h"
#include "emit/program_file.h"
#include "exec/run.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "kiln/schema/delegate_generated.h"
#include "kiln/schema/program_generated.h"
#include "onnx/import.h"
#include "pipeline.h"
#include "targets/runtime_backends.h"
#include "targets/target.h"

namespace kp = kiln::planner;

namespace {

constexpr const char* kDefaultData = "/usr/share/libonnx-testdata/data/node";

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Tolerances of ONNX's own backend test runner for float outputs.
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-5;

// --precision: the unit roundoff of the 16-bit storage, 0 for FP32.
double g_unit_roundoff = 0;

std::string compare(const kp::HostTensor& got, const kp::HostTensor& want) {
  if (got.dtype != want.dtype) return "dtype " + kp::dtype_str(got.dtype) + " != " + kp::dtype_str(want.dtype);
  if (got.shape != want.shape) return "shape " + kp::shape_str(got.shape) + " != " + kp::shape_str(want.shape);
  const bool is_float = got.dtype == kp::DType::FLOAT32 || got.dtype == kp::DType::FLOAT64 ||
                        got.dtype == kp::DType::FLOAT16 || got.dtype == kp::DType::BFLOAT16;
  double rtol = kRtol, atol = kAtol;
  if (g_unit_roundoff > 0 && got.dtype == kp::DType::FLOAT32) {
    double largest = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      if (std::isfinite(want.float_at(i))) largest = std::max(largest, std::fabs(want.float_at(i)));
    }
    rtol = std::max(kRtol, 4 * g_unit_roundoff);
    atol = std::max(kAtol, 4 * g_unit_roundoff * largest);
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (is_float) {
      const double a = got.float_at(i), b = want.float_at(i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (std::isinf(a) && std::isinf(b) && (a > 0) == (b > 0)) continue;
      if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
        return kp::str("element ", i, ": ", a, " != ", b);
      }
    } else if (got.int_at(i) != want.int_at(i)) {
      return kp::str("element ", i, ": ", got.int_at(i), " != ", want.int_at(i));
    }
  }
  return "";
}

// Graph inputs in order (initializers excluded).
std::vector<std::string> graph_inputs(const onnx::ModelProto& model) {
  std::set<std::string> initializers;
  for (const auto& i : model.graph().initializer()) initializers.insert(i.name());
  std::vector<std::string> out;
  for (const auto& i : model.graph().input()) {
    if (!initializers.count(i.name())) out.push_back(i.name());
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The op a model tests: the op of its nodes other than Constant when they
// all share one, "Constant" when that is all there is, "" otherwise.
std::string model_op(const onnx::ModelProto& model) {
  std::set<std::string> ops;
  for (const auto& node : model.graph().node()) {
    const std::string& domain = node.domain();
    const std::string op = domain.empty() || domain == "ai.onnx" ? node.op_type() : domain + "." + node.op_type();
    if (op != "Constant") ops.insert(op);
  }
  if (ops.empty() && model.graph().node_size() > 0) return "Constant";
  return ops.size() == 1 ? *ops.begin() : "";
}

// The op test `name` is attributed to; an "_expanded" test (an op's
// function body) counts for the op of the test it expands.
std::string tested_op(const std::string& root, const std::string& name, bool* out_expanded) {
  const std::string suffix = "_expanded";
  *out_expanded = ends_with(name, suffix);
  const std::string base = *out_expanded ? name.substr(0, name.size() - suffix.size()) : name;
  onnx::ModelProto model;
  if (!exists(root + "/" + base + "/model.onnx") ||
      !model.ParseFromString(kp::read_file(root + "/" + base + "/model.onnx"))) {
    return "";
  }
  return model_op(model);
}

// The ops kiln targets: what torchvision classification models and
// transformer blocks export at opsets 13 to 17.
const char* const kTargetOps[] = {
    // clang-format off
    "Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization", "Add", "Sub", "Mul", "Div", "Pow",
    "Sqrt", "Exp", "Log", "Neg", "Abs", "Reciprocal", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip",
    "HardSigmoid", "HardSwish", "Erf", "com.microsoft.Gelu", "MaxPool", "AveragePool", "GlobalAveragePool",
    "ReduceMean", "ReduceSum", "ReduceMax", "Softmax", "LogSoftmax", "LayerNormalization", "Concat", "Split",
    "Slice", "Gather", "Shape", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Where",
    "Cast", "Pad", "Identity", "Constant", "Dropout", "Resize", "Equal", "Less", "Greater", "Not", "Range",
    // clang-format on
};

struct OpStats {
  int pass = 0, by_property = 0, fail = 0, skip = 0;
  int expanded_pass = 0, expanded_total = 0;
  std::map<std::string, int> skip_reasons;
};

void print_op_stats(const std::string& op, const OpStats& s) {
  const int total = s.pass + s.by_property + s.fail + s.skip;
  std::printf("  %-22s %3d/%-3d passed", op.c_str(), s.pass, total);
  if (s.by_property > 0) std::printf(", %d by property", s.by_property);
  if (total == 0) std::printf(" (no node tests)");
  if (s.fail > 0) std::printf(", %d FAILED", s.fail);
  if (s.expanded_total > 0) std::printf(", expanded %d/%d passed", s.expanded_pass, s.expanded_total);
  std::printf("\n");
  for (const auto& [reason, count] : s.skip_reasons) {
    std::printf("  %22s   skipped %d: %s\n", "", count, reason.c_str());
  }
}

// ONNX's generator stores bfloat16 test tensors as uint16 (their bits):
// read those as the bfloat16 the model declares.
void fix_bfloat16(kp::HostTensor& t, const onnx::ValueInfoProto& info) {
  if (t.dtype == kp::DType::UINT16 && info.type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16) {
    t.dtype = kp::DType::BFLOAT16;
  }
}

onnx::ValueInfoProto* find_input(onnx::ModelProto& model, const std::string& name) {
  for (auto& input : *model.mutable_graph()->mutable_input()) {
    if (input.name() == name) return &input;
  }
  return nullptr;
}

// "unsupported element type STRING" from the importer's message.
std::string element_type_reason(const std::string& what, const kp::UnsupportedError& e) {
  const std::string message = e.what();
  const size_t at = message.find("unsupported element type");
  return what + " dtype: " + (at == std::string::npos ? message : message.substr(at));
}

// Tests whose reference output this release of ONNX computed by truncating
// float32 to bfloat16, where kiln rounds to nearest even (as PyTorch and
// later ONNX releases do): their bfloat16 outputs are compared within one
// bfloat16 ulp of the reference instead of the usual tolerance.
const std::set<std::string> kTruncatedBfloat16 = {
    "test_cast_FLOAT_to_BFLOAT16",
    "test_castlike_FLOAT_to_BFLOAT16",
    "test_castlike_FLOAT_to_BFLOAT16_expanded",
};

// Tests whose values 16-bit storage cannot hold (with --precision fp16 or
// bf16 they are skipped, with this reason): the decomposed Softmax and
// LogSoftmax of inputs about 10000 apart by 1 (Sub(x, ReduceMax(x)) reads x
// as stored, whose ulp there is 8 in float16 and 64 in bfloat16), and
// DynamicQuantizeLinear decomposed, whose integer outputs round x / scale
// stored in 16 bits (a quotient near a half rounds the other way).
const std::set<std::string> kBeyond16BitStorage = {
    "test_softmax_large_number_expanded",
    "test_logsoftmax_large_number_expanded",
    "test_dynamicquantizelinear_expanded",
    "test_dynamicquantizelinear_max_adjusted_expanded",
    "test_dynamicquantizelinear_min_adjusted_expanded",
};

// Within one bfloat16 ulp of `want` (a bfloat16 value), element by element.
std::string compare_bfloat16_ulp(const kp::HostTensor& got, const kp::HostTensor& want) {
  if (got.dtype != kp::DType::BFLOAT16 || want.dtype != kp::DType::BFLOAT16) return "not bfloat16";
  if (got.shape != want.shape) return "shape " + kp::shape_str(got.shape) + " != " + kp::shape_str(want.shape);
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double a = got.float_at(i), b = want.float_at(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;
    // bfloat16 keeps 8 significant bits: one ulp of b is 2^(exponent(b) - 7).
    int exponent = 0;
    std::frexp(b, &exponent);
    if (!std::isfinite(a) || !std::isfinite(b) || std::fabs(a - b) > std::ldexp(1.0, exponent - 8)) {
      return kp::str("element ", i, ": ", a, " != ", b, " (more than one bfloat16 ulp)");
    }
  }
  return "";
}

// The static shape `info` declares, or false when it declares none or has
// symbolic dims.
bool declared_shape(const onnx::ValueInfoProto& info, std::vector<int64_t>* out) {
  if (!info.type().tensor_type().has_shape()) return false;
  out->clear();
  for (const auto& dim : info.type().tensor_type().shape().dim()) {
    if (!dim.has_dim_value()) return false;
    out->push_back(dim.dim_value());
  }
  return true;
}

enum class Outcome { kPass, kPassByProperty, kFail, kSkip };

bool is_random_op(const std::string& op) {
  return op == "Bernoulli" || op == "RandomUniform" || op == "RandomUniformLike" || op == "RandomNormal" ||
         op == "RandomNormalLike";
}

bool has_random_op(const onnx::ModelProto& model) {
  for (const auto& node : model.graph().node()) {
    if (node.domain().empty() && is_random_op(node.op_type())) return true;
  }
  return false;
}

float node_float_attr(const onnx::NodeProto& node, const std::string& name, float fallback) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return a.f();
  }
  return fallback;
}

// The property check of output `index` of a random model (see the top of
// the file): "" when it holds.
std::string check_random_property(const onnx::ModelProto& model, size_t index, const kp::HostTensor& got,
                                  const kp::HostTensor& want) {
  if (got.dtype != want.dtype) return "dtype " + kp::dtype_str(got.dtype) + " != " + kp::dtype_str(want.dtype);
  if (got.shape != want.shape) return "shape " + kp::shape_str(got.shape) + " != " + kp::shape_str(want.shape);
  bool zero_one = true;
  for (int64_t i = 0; i < want.numel() && zero_one; ++i) {
    const double v = want.float_at(i);
    zero_one = v == 0.0 || v == 1.0;
  }
  if (zero_one) {
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double v = got.float_at(i);
      if (v != 0.0 && v != 1.0) return kp::str("element ", i, ": ", v, " is neither 0 nor 1");
    }
    return "";
  }
  const std::string& name = model.graph().output(static_cast<int>(index)).name();
  for (const auto& node : model.graph().node()) {
    if (node.output_size() == 0 || node.output(0) != name) continue;
    if (node.op_type() == "RandomUniform" || node.op_type() == "RandomUniformLike") {
      const double low = node_float_attr(node, "low", 0.f), high = node_float_attr(node, "high", 1.f);
      for (int64_t i = 0; i < got.numel(); ++i) {
        const double v = got.float_at(i);
        if (!(v >= low && v < high)) return kp::str("element ", i, ": ", v, " outside [", low, ", ", high, ")");
      }
      return "";
    }
    if (node.op_type() == "RandomNormal" || node.op_type() == "RandomNormalLike") {
      for (int64_t i = 0; i < got.numel(); ++i) {
        if (!std::isfinite(got.float_at(i))) return kp::str("element ", i, " is not finite");
      }
      return "";
    }
  }
  return "no property known for this random output";
}

// Where a program's kernels run, read from the emitted program: the kernels
// in the graphs of the delegates it calls on a device other than the CPU,
// and its CPU kernel calls.
struct Placement {
  int device_kernels = 0;
  int cpu_kernels = 0;
  bool on_device() const { return device_kernels > 0; }
  bool only_device() const { return device_kernels > 0 && cpu_kernels == 0; }
};

struct TestResult {
  Outcome outcome;
  std::string detail;            // failure message or skip reason
  Placement placement = {};      // of the passing program
  std::string host_reason = "";  // with --target: why no kernel ran on the device
};

// Devices the tests are planned for ("cpu" unless --target says otherwise).
std::string g_targets = "cpu";
std::string g_precision = "fp32";  // --precision (kiln plan --precision)
// --export's folder, or "".
std::string g_export;
// --threads: the pool each passing test runs on again, or nullptr.
kiln::PosixThreadPool* g_pool = nullptr;

void export_case(const std::string& name, const std::string& program, const std::vector<kp::HostTensor>& inputs,
                 const std::vector<kp::HostTensor>& expected) {
  const std::string dir = g_export + "/" + name;
  mkdir(dir.c_str(), 0755);
  const auto bytes = [](const kp::HostTensor& t) {
    return std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  };
  kp::write_file_atomic(dir + "/program.kiln", program);
  for (size_t i = 0; i < inputs.size(); ++i)
    kp::write_file_atomic(kp::str(dir, "/input_", i, ".bin"), bytes(inputs[i]));
  for (size_t i = 0; i < expected.size(); ++i) {
    kp::write_file_atomic(kp::str(dir, "/expected_", i, ".bin"), bytes(expected[i]));
  }
}

// Why a test planned for a device ran no kernel there: the first node the
// device's backend refuses, grouped by op like the skip reasons.
std::string host_reason(const kp::PlanResult& plan) {
  for (const kp::TargetDevice& target : kp::parse_targets(g_targets)) {
    if (target.planner == nullptr) continue;
    for (const kp::Node& node : plan.graph.nodes) {
      const std::string why = target.planner->unsupported_reason(kp::NodeView(plan.graph, node));
      if (!why.empty()) return node.op_type + ": " + why;
    }
  }
  return "only views, aliased to their input (no kernel)";
}

// The planner writes delegate blobs inline (kiln pack moves them to
// segments later); a blob that is not an inline DelegateGraph counts no
// kernels, so a change there shows as a drop rather than passing unseen.
Placement placement_of(const std::string& program_bytes) {
  namespace fb = kiln::fb;
  const kp::ProgramFile file(program_bytes, "the planned program");
  Placement out;
  if (file.program().methods() == nullptr) return out;
  for (const fb::Method* method : *file.program().methods()) {
    if (method->instructions() == nullptr) continue;
    for (const fb::Instruction* ins : *method->instructions()) {
      if (ins->kind_as_KernelCall() != nullptr) ++out.cpu_kernels;
      const fb::DelegateCall* call = ins->kind_as_DelegateCall();
      if (call == nullptr || method->delegates() == nullptr || call->delegate() >= method->delegates()->size()) {
        continue;
      }
      const fb::Delegate* delegate = method->delegates()->Get(call->delegate());
      if (delegate->device() == nullptr || delegate->device()->type() == fb::DeviceType::CPU) continue;
      const auto* blob = delegate->inline_blob();
      if (blob == nullptr || blob->size() < 8 || !fb::DelegateGraphBufferHasIdentifier(blob->data())) continue;
      flatbuffers::Verifier verifier(blob->data(), blob->size());
      if (!fb::VerifyDelegateGraphBuffer(verifier)) continue;
      const fb::DelegateGraph* graph = fb::GetDelegateGraph(blob->data());
      if (graph->kernels() != nullptr) out.device_kernels += static_cast<int>(graph->kernels()->size());
    }
  }
  return out;
}

TestResult run_test(const std::string& dir, const std::string& name) {
  if (g_precision != "fp32" && kBeyond16BitStorage.count(name) > 0) {
    return {Outcome::kSkip, "values 16-bit storage cannot hold (--precision " + g_precision + ")"};
  }
  onnx::ModelProto model;
  const std::string bytes = kp::read_file(dir + "/model.onnx");
  if (!model.ParseFromString(bytes)) return {Outcome::kFail, "cannot parse model.onnx"};
  for (const auto* list : {&model.graph().input(), &model.graph().output()}) {
    for (const auto& value : *list) {
      if (!value.type().has_tensor_type()) return {Outcome::kSkip, "sequence, map or optional values"};
    }
  }
  const std::vector<std::string> names = graph_inputs(model);
  const std::string data = dir + "/test_data_set_0";
  std::vector<kp::HostTensor> inputs;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string file = data + "/input_" + std::to_string(i) + ".pb";
    if (!exists(file)) return {Outcome::kSkip, "test data without input " + std::to_string(i)};
    try {
      inputs.push_back(kp::read_tensor_proto_file(file));
    } catch (const kp::UnsupportedError& e) {
      return {Outcome::kSkip, element_type_reason("input", e)};
    }
    if (auto* info = find_input(model, names[i])) {
      fix_bfloat16(inputs.back(), *info);
      std::vector<int64_t> shape;
      if (declared_shape(*info, &shape) && shape != inputs.back().shape) {
        // ONNX's own runner feeds the test data whatever the model declares
        // (three CastLike tests of this release store `like` as [1] where
        // the model says [3, 4]): plan with the data's shape.
        auto* dims = info->mutable_type()->mutable_tensor_type()->mutable_shape();
        dims->clear_dim();
        for (const int64_t d : inputs.back().shape) dims->add_dim()->set_dim_value(d);
      }
    }
  }
  std::vector<kp::HostTensor> expected;
  for (size_t i = 0;; ++i) {
    const std::string file = data + "/output_" + std::to_string(i) + ".pb";
    if (!exists(file)) break;
    try {
      expected.push_back(kp::read_tensor_proto_file(file));
    } catch (const kp::UnsupportedError& e) {
      return {Outcome::kSkip, element_type_reason("output", e)};
    }
    if (static_cast<int>(i) < model.graph().output_size()) {
      fix_bfloat16(expected.back(), model.graph().output(static_cast<int>(i)));
    }
  }
  kp::PlanOptions options;
  options.targets = g_targets;
  options.precision = g_precision;
  std::set<std::string> frozen;
  kp::PlanResult plan;
  for (;;) {
    try {
      onnx::ModelProto copy = model;
      plan = kp::plan_graph(kp::import_onnx_model(copy, dir, options.import), options);
      break;
    } catch (const kp::NotConstantError& e) {
      auto it = std::find(names.begin(), names.end(), e.input());
      if (e.input().empty() || it == names.end() || frozen.count(e.input())) {
        return {Outcome::kSkip, "shape argument computed at run time"};
      }
      frozen.insert(e.input());
      options.import.frozen_inputs[e.input()] = inputs[static_cast<size_t>(it - names.begin())];
    } catch (const kp::UnsupportedError& e) {
      std::string reason = e.what();
      // Group reasons by what is unsupported, not by node name.
      const size_t colon = reason.find("): ");
      if (colon != std::string::npos) {
        const size_t open = reason.rfind(" (", colon);
        reason = reason.substr(open + 2, colon - open - 2) + ": " + reason.substr(colon + 3);
      }
      return {Outcome::kSkip, reason};
    } catch (const kp::PlanError& e) {
      return {Outcome::kFail, std::string("plan: ") + e.what()};
    }
  }
  std::vector<kp::HostTensor> run_inputs;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!frozen.count(names[i])) run_inputs.push_back(inputs[i]);
  }
  const Placement placement = placement_of(plan.bytes);
  kp::RunResult result;
  try {
    kp::RunOptions run_options;
    run_options.backends = &kp::builtin_runtime_backends();
    result = kp::run_program(plan.bytes, run_inputs, run_options);
  } catch (const kp::PlanError& e) {
    return {Outcome::kFail, std::string("run: ") + e.what(), placement};
  }
  if (result.outputs.size() != expected.size()) {
    return {Outcome::kFail, kp::str(result.outputs.size(), " outputs, expected ", expected.size())};
  }
  const bool by_property = has_random_op(model);
  const bool truncated_bfloat16 = kTruncatedBfloat16.count(name) > 0;
  for (size_t i = 0; i < expected.size() && by_property; ++i) {
    const std::string diff = check_random_property(model, i, result.outputs[i], expected[i]);
    if (!diff.empty()) return {Outcome::kFail, kp::str("output ", i, " (by property): ", diff), placement};
  }
  for (size_t i = 0; i < expected.size() && !by_property; ++i) {
    const std::string diff = truncated_bfloat16 ? compare_bfloat16_ulp(result.outputs[i], expected[i])
                                                : compare(result.outputs[i], expected[i]);
    if (!diff.empty()) return {Outcome::kFail, kp::str("output ", i, ": ", diff), placement};
  }
  if (g_pool != nullptr) {
    kp::RunOptions threaded;
    threaded.backends = &kp::builtin_runtime_backends();
    threaded.thread_pool = g_pool;
    try {
      const kp::RunResult again = kp::run_program(plan.bytes, run_inputs, threaded);
      for (size_t i = 0; i < result.outputs.size(); ++i) {
        if (again.outputs[i].bytes != result.outputs[i].bytes) {
          return {Outcome::kFail,
                  kp::str("output ", i, " on ", g_pool->concurrency(), " threads differs from one thread's"),
                  placement};
        }
      }
    } catch (const kp::PlanError& e) {
      return {Outcome::kFail, std::string("run on threads: ") + e.what(), placement};
    }
  }
  // Random outputs cannot be checked against the reference elsewhere either.
  // A truncating reference is exported as the host's own output (which is
  // within one ulp of it), since other runtimes compare exported bytes exactly.
  if (!g_export.empty() && !by_property) {
    export_case(name, plan.bytes, run_inputs, truncated_bfloat16 ? result.outputs : expected);
  }
  return {by_property ? Outcome::kPassByProperty : Outcome::kPass, "", placement,
          placement.on_device() || g_targets == "cpu" ? "" : host_reason(plan)};
}

// What a run counted, over the tests it ran.
struct Totals {
  int pass = 0, by_property = 0, fail = 0, skip = 0;
  int on_device = 0, only_device = 0;  // passing tests (see Placement)
  int passed() const { return pass + by_property; }
  int total() const { return pass + by_property + fail + skip; }
};

// The floors file's key of this run: the --target list, and /PRECISION
// after it with --precision fp16 or bf16 ("cuda:0,cpu/fp16").
std::string floor_key() { return g_precision == "fp32" ? g_targets : g_targets + "/" + g_precision; }

// One count against its floor: false when it dropped below it.
bool check_floor(const char* what, int count, long floor, const std::string& path) {
  if (floor < 0) return true;
  if (count < floor) {
    std::printf(
        "FLOOR DROPPED: target %s: %d %s, below the floor of %ld in %s (an op refused, a dtype lost or a "
        "backend taking less work: find which, or lower the floor in the same change and say why)\n",
        floor_key().c_str(), count, what, floor, path.c_str());
    return false;
  }
  if (count > floor) {
    std::printf("note: target %s: %d %s, above the floor of %ld: raise the floor in %s\n", floor_key().c_str(), count,
                what, floor, path.c_str());
  }
  return true;
}

// The line of `g_targets` in the floors file at `path` (see the top of the
// file and the file's own header); false, with a message, when the file is
// unreadable, malformed or has no such line, when it was recorded on another
// number of node tests, or when a count dropped.
bool check_floors(const std::string& path, const Totals& t) {
  std::ifstream in(path);
  if (!in) {
    std::printf("FLOORS: cannot read %s\n", path.c_str());
    return false;
  }
  long node_tests = -1, floors[4] = {-1, -1, -1, -1};
  bool found = false;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string key;
    if (!(words >> key) || (key != "node_tests" && key != floor_key())) continue;
    const int fields = key == "node_tests" ? 1 : 4;
    long* out = key == "node_tests" ? &node_tests : floors;
    std::string word;
    for (int i = 0; i < fields; ++i) {
      char* end = nullptr;
      if (!(words >> word) || (word != "-" && (std::strtol(word.c_str(), &end, 10) < 0 || *end != '\0'))) {
        std::printf("FLOORS: %s:%d: expected %d count(s) (or -) after '%s'\n", path.c_str(), number, fields,
                    key.c_str());
        return false;
      }
      out[i] = word == "-" ? -1 : std::strtol(word.c_str(), nullptr, 10);
    }
    found = found || key == floor_key();
  }
  if (!found) {
    std::printf("FLOORS: %s has no line for target %s: add one with this run's counts\n", path.c_str(),
                floor_key().c_str());
    return false;
  }
  if (node_tests < 0) {
    std::printf("FLOORS: %s has no node_tests line (how many node tests its floors were recorded on)\n", path.c_str());
    return false;
  }
  if (node_tests != t.total()) {
    std::printf("FLOORS: %s was recorded on %ld node tests, this data holds %d: record the floors again\n",
                path.c_str(), node_tests, t.total());
    return false;
  }
  bool held = check_floor("tests passed by value", t.pass, floors[0], path);
  held = check_floor("tests passed by property", t.by_property, floors[1], path) && held;
  held = check_floor("passing tests ran on the device", t.on_device, floors[2], path) && held;
  held = check_floor("passing tests ran wholly on the device", t.only_device, floors[3], path) && held;
  if (held) std::printf("the floors of target %s in %s hold\n", floor_key().c_str(), path.c_str());
  return held;
}

}  // namespace

int main(int argc, char** argv) {
  std::string root = kDefaultData, filter;
  std::string floors;
  bool verbose = false, all_ops = false;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--data") && i + 1 < argc) {
      root = argv[++i];
    } else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
      filter = argv[++i];
    } else if (!std::strcmp(argv[i], "--target") && i + 1 < argc) {
      g_targets = argv[++i];
    } else if (!std::strcmp(argv[i], "--verbose")) {
      verbose = true;
    } else if (!std::strcmp(argv[i], "--all-ops")) {
      all_ops = true;
    } else if (!std::strcmp(argv[i], "--export") && i + 1 < argc) {
      g_export = argv[++i];
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--floors") && i + 1 < argc) {
      floors = argv[++i];
    } else if (!std::strcmp(argv[i], "--precision") && i + 1 < argc) {
      g_precision = argv[++i];
      g_unit_roundoff = g_precision == "fp16" ? std::ldexp(1.0, -11) : g_precision == "bf16" ? std::ldexp(1.0, -8) : 0;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--data DIR] [--filter SUBSTRING] [--target LIST] [--verbose] [--all-ops] "
                   "[--export DIR] [--threads N] [--floors FILE] [--precision fp16|bf16]\n",
                   argv[0]);
      return 2;
    }
  }
  kiln::PosixThreadPool pool;
  if (threads > 1) {
    if (pool.start(threads) != kiln::Error::kOk) return 2;
    g_pool = &pool;
    std::printf("each passing test runs again on %d threads, compared byte for byte\n", threads);
  }
  const std::vector<std::string> tests = list_dir(root);
  if (tests.empty()) {
    std::fprintf(stderr, "no ONNX node tests under %s (install libonnx-testdata)\n", root.c_str());
    return 1;
  }
  if (!g_export.empty() && mkdir(g_export.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "cannot create %s\n", g_export.c_str());
    return 1;
  }
  kp::register_builtin_backends();
  Totals t;
  std::map<std::string, int> skip_reasons, host_reasons;
  std::map<std::string, OpStats> per_op;
  std::vector<std::string> failures;
  for (const std::string& name : tests) {
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    const std::string dir = root + "/" + name;
    if (!exists(dir + "/model.onnx")) continue;
    TestResult r;
    try {
      r = run_test(dir, name);
    } catch (const std::exception& e) {
      r = {Outcome::kFail, std::string("exception: ") + e.what()};
    }
    bool expanded = false;
    std::string op = tested_op(root, name, &expanded);
    if (op.empty()) op = "(several ops)";
    OpStats& stats = per_op[op];
    const bool passed = r.outcome == Outcome::kPass || r.outcome == Outcome::kPassByProperty;
    if (expanded) {
      ++stats.expanded_total;
      if (passed) ++stats.expanded_pass;
    } else {
      ++(r.outcome == Outcome::kPass             ? stats.pass
         : r.outcome == Outcome::kPassByProperty ? stats.by_property
         : r.outcome == Outcome::kFail           ? stats.fail
                                                 : stats.skip);
      if (r.outcome == Outcome::kSkip) ++stats.skip_reasons[r.detail];
    }
    switch (r.outcome) {
      case Outcome::kPass:
      case Outcome::kPassByProperty:
        ++(r.outcome == Outcome::kPass ? t.pass : t.by_property);
        t.on_device += r.placement.on_device() ? 1 : 0;
        t.only_device += r.placement.only_device() ? 1 : 0;
        if (!r.host_reason.empty()) ++host_reasons[r.host_reason];
        if (verbose) {
          std::printf("PASS%s %s%s\n", r.outcome == Outcome::kPass ? "" : " (by property)", name.c_str(),
                      r.placement.only_device() ? " (device only)"
                      : r.placement.on_device() ? " (device)"
                                                : "");
        }
        break;
      case Outcome::kFail:
        ++t.fail;
        failures.push_back(name + ": " + r.detail);
        std::printf("FAIL %s: %s\n", name.c_str(), r.detail.c_str());
        break;
      case Outcome::kSkip:
        ++t.skip;
        ++skip_reasons[r.detail];
        if (verbose) std::printf("SKIP %s: %s\n", name.c_str(), r.detail.c_str());
        break;
    }
  }
  std::vector<std::pair<int, std::string>> reasons;
  for (const auto& [reason, count] : skip_reasons) reasons.emplace_back(count, reason);
  std::sort(reasons.rbegin(), reasons.rend());
  std::printf("\nskipped, by reason:\n");
  for (const auto& [count, reason] : reasons) std::printf("  %4d  %s\n", count, reason.c_str());
  std::printf("\nper op (%s; skip reasons of the op's own tests):\n", all_ops ? "every op" : "the ops kiln targets");
  if (all_ops) {
    for (const auto& [op, stats] : per_op) print_op_stats(op, stats);
  } else {
    for (const char* op : kTargetOps) {
      auto it = per_op.find(op);
      if (it != per_op.end()) {
        print_op_stats(op, it->second);
      } else if (filter.empty()) {
        print_op_stats(op, OpStats{});
      }
    }
  }
  // Passes by property never join the passes by value (see the top of the file).
  std::printf(
      "\nONNX node tests: %d passed, %d passed by property (random outputs: dtype, shape, range), "
      "%d failed, %d skipped (of %d)\n",
      t.pass, t.by_property, t.fail, t.skip, t.total());
  int status = t.fail == 0 ? 0 : 1;
  if (g_targets != "cpu") {
    std::vector<std::pair<int, std::string>> host;
    for (const auto& [reason, count] : host_reasons) host.emplace_back(count, reason);
    std::sort(host.rbegin(), host.rend());
    std::printf("\npassing tests that ran no kernel on the device, by reason:\n");
    for (const auto& [count, reason] : host) std::printf("  %4d  %s\n", count, reason.c_str());
    std::printf("target %s: %d of the %d passing tests ran at least one kernel on a device, %d every kernel\n",
                g_targets.c_str(), t.on_device, t.passed(), t.only_device);
    const uint64_t messages = kp::shutdown_builtin_runtime_backends();
    if (messages != 0) {
      std::printf("the backends reported %llu diagnostic message(s)\n", static_cast<unsigned long long>(messages));
      status = 1;
    }
  }
  if (!floors.empty() && !filter.empty()) {
    std::printf("the floors in %s are not checked: --filter runs a subset\n", floors.c_str());
  } else if (!floors.empty() && !check_floors(floors, t)) {
    status = 1;
  }
  return status;
}
