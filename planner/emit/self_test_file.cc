#include "emit/self_test_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "core/error.h"
#include "kiln/schema/digest.h"
#include "kiln/schema/program_generated.h"
#include "kiln/schema/selftest_generated.h"

namespace kiln::planner {
namespace {

constexpr uint32_t kAlignment = 64;

void pad_to(std::string& s, size_t alignment) {
  while (s.size() % alignment != 0) s.push_back('\0');
}

int64_t numel(const fb::Tensor& t) {
  int64_t n = 1;
  if (t.shape() != nullptr) {
    for (int64_t d : *t.shape()) n *= d;
  }
  return n;
}

bool is_math_function(const std::string& op) {
  static const char* const kOps[] = {"Exp", "Log", "Tanh", "Sigmoid", "Erf",  "Gelu",      "Softplus", "Pow",
                                     "Sin", "Cos", "Elu",  "Selu",    "Mish", "HardSwish", "Softmax",  "LogSoftmax"};
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return op == o; });
}

// The roundings one kernel adds to each output element (see the header).
uint64_t kernel_roundings(const fb::Method& m, const fb::KernelCall& call, const std::string& op) {
  const auto* in = call.inputs();
  const auto* out = call.outputs();
  if (in == nullptr || in->size() == 0 || in->Get(0) < 0 || out == nullptr || out->size() == 0) return 1;
  const fb::Tensor& x = *m.tensors()->Get(static_cast<uint32_t>(in->Get(0)));
  const fb::Tensor& y = *m.tensors()->Get(out->Get(0));
  const auto dim = [](const fb::Tensor& t, int i) -> int64_t {
    const int64_t rank = t.shape() != nullptr ? t.shape()->size() : 0;
    return i >= 0 && i < rank       ? t.shape()->Get(static_cast<uint32_t>(i))
           : i < 0 && rank + i >= 0 ? t.shape()->Get(static_cast<uint32_t>(rank + i))
                                    : 1;
  };
  int64_t k = 1;
  if (const fb::ConvParams* conv = call.params_as_ConvParams()) {
    k = dim(x, 1) / std::max(1, conv->group());
    if (conv->kernel() != nullptr) {
      for (int v : *conv->kernel()) k *= v;
    }
  } else if (const fb::GemmParams* gemm = call.params_as_GemmParams()) {
    k = gemm->trans_a() ? dim(x, 0) : dim(x, 1);
  } else if (op == "MatMul" || op.rfind("QLinearMatMul", 0) == 0) {
    k = dim(x, -1);
  } else if (op == "LayerNormalization" || op == "Softmax" || op == "LogSoftmax") {
    k = dim(x, -1) * 2;
  } else if (numel(x) > numel(y) && numel(y) > 0) {
    k = numel(x) / numel(y);  // a reduction or pooling
  }
  return static_cast<uint64_t>(std::max<int64_t>(1, k)) + (is_math_function(op) ? 3 : 0);
}

}  // namespace

float derived_self_test_tolerance(const std::string& program_bytes, const std::string& method,
                                  uint64_t* out_roundings) {
  if (program_bytes.size() < 8) return 0;
  const fb::Program* program = fb::GetSizePrefixedProgram(program_bytes.data());
  const fb::Method* m = nullptr;
  for (const fb::Method* candidate : *program->methods()) {
    if (candidate->name() != nullptr && candidate->name()->str() == method) m = candidate;
  }
  if (m == nullptr || m->tensors() == nullptr) return 0;
  bool any_float = false;
  for (uint32_t t : *m->outputs()) {
    const DType dtype = m->tensors()->Get(t)->dtype();
    any_float = any_float || dtype == DType::FLOAT32 || dtype == DType::FLOAT16 || dtype == DType::BFLOAT16 ||
                dtype == DType::FLOAT64;
  }
  if (!any_float) return 0;
  // Roundings along the longest chain reaching each tensor; an alias shares
  // its base's.
  std::vector<uint64_t> depth(m->tensors()->size(), 0);
  auto depth_of = [&](int32_t t) { return t >= 0 ? depth[static_cast<size_t>(t)] : 0; };
  uint64_t deepest = 0;
  if (m->instructions() != nullptr) {
    for (const fb::Instruction* ins : *m->instructions()) {
      const flatbuffers::Vector<int32_t>* inputs = nullptr;
      const flatbuffers::Vector<int32_t>* outputs = nullptr;
      uint64_t added = 0;
      if (const fb::KernelCall* call = ins->kind_as_KernelCall()) {
        inputs = call->inputs();
        outputs = call->outputs();
        added = kernel_roundings(*m, *call, m->operators()->Get(call->op())->name()->str());
      } else if (const fb::DelegateCall* call = ins->kind_as_DelegateCall()) {
        inputs = call->inputs();
        outputs = call->outputs();
        added = 4096;
      } else if (const fb::CopyCall* copy = ins->kind_as_CopyCall()) {
        depth[copy->dst()] = std::max(depth[copy->dst()], depth[copy->src()]);
        continue;
      } else if (const fb::CollectiveCall* call = ins->kind_as_CollectiveCall()) {
        inputs = call->inputs();
        outputs = call->outputs();
        added = 64;
      }
      uint64_t before = 0;
      if (inputs != nullptr) {
        for (int32_t t : *inputs) before = std::max(before, depth_of(t));
      }
      if (outputs == nullptr) continue;
      for (int32_t t : *outputs) {
        if (t < 0) continue;
        depth[static_cast<size_t>(t)] = std::max(depth[static_cast<size_t>(t)], before + added);
        deepest = std::max(deepest, depth[static_cast<size_t>(t)]);
      }
    }
  }
  for (uint32_t t : *m->outputs()) deepest = std::max(deepest, depth[t]);
  if (out_roundings != nullptr) *out_roundings = deepest;
  const double u = 1.0 / 16777216.0;
  return static_cast<float>(std::min(1e-2, 8.0 * u * std::sqrt(static_cast<double>(std::max<uint64_t>(deepest, 1)))));
}

uint64_t program_digest(const std::string& program_bytes) {
  uint32_t prefix = 0;
  if (program_bytes.size() < 8) return 0;
  std::memcpy(&prefix, program_bytes.data(), sizeof(prefix));
  const size_t n = std::min<size_t>(program_bytes.size(), static_cast<size_t>(prefix) + 4);
  return abi::fnv1a64(reinterpret_cast<const uint8_t*>(program_bytes.data()), n);
}

std::string make_self_test(const std::string& program_bytes, const std::string& method,
                           const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs,
                           float tolerance) {
  if (program_bytes.size() < 8) fail("internal error: no program to bundle a self-test with");
  fb::SelfTestT test;
  test.program_digest = program_digest(program_bytes);
  test.method = method;
  test.tolerance = tolerance;
  test.segment_alignment = kAlignment;
  std::string segment;
  auto add = [&](const HostTensor& t) {
    auto out = std::make_unique<fb::SelfTestTensorT>();
    out->dtype = t.dtype;
    out->shape = t.shape;
    pad_to(segment, kAlignment);
    out->data = std::make_unique<fb::DataRef>(segment.size(), t.bytes.size());
    segment.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
    return out;
  };
  for (const HostTensor& t : inputs) test.inputs.push_back(add(t));
  for (const HostTensor& t : outputs) test.outputs.push_back(add(t));
  test.segment_size = segment.size();
  flatbuffers::FlatBufferBuilder builder(1024);
  builder.FinishSizePrefixed(fb::SelfTest::Pack(builder, &test), fb::SelfTestIdentifier());
  std::string bytes(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
  pad_to(bytes, kAlignment);
  return bytes + segment;
}

}  // namespace kiln::planner
