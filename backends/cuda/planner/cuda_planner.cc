// The CUDA backend's planner half: exactly the ops (and attributes) its
// runtime half runs (lowered to launches by runtime/src/lower.cc, kernels
// in runtime/src/kernels.cuh; Gemm and MatMul through cuBLASLt on the GPU),
// the layout of its device arenas (256-byte aligned offsets, what
// cudaMalloc guarantees and float4 loads want) and the host state of a
// delegate (cuda_abi.h). Which inputs a kernel may overwrite is the table
// both halves read (cuda_kernels.h).
//
// Beyond float32 operands (the table's rule) every op here needs:
//   - no empty tensor (the CPU handles those without launching anything);
//   - rank at most 8;
//   - fewer than 2^31 elements per tensor (the kernels index in 32 bits).

#include <string>

#include "backends/cuda/cuda_abi.h"
#include "backends/cuda/cuda_kernels.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::planner {
namespace {

using Check = std::function<std::string(const NodeView&)>;

std::string common_rules(const NodeView& node, size_t tensor_inputs) {
  auto check = [](const ValueView& v, const char* what, size_t i) -> std::string {
    const std::string operand = std::string(what) + " " + std::to_string(i);
    if (!v.has_shape()) return operand + " has no static shape";
    if (v.rank() > cuda_backend::kMaxRank) return operand + " has rank " + std::to_string(v.rank()) + " (8 at most)";
    if (v.numel() == 0) return operand + " is empty";
    if (v.numel() >= (int64_t{1} << 31)) return operand + " has 2^31 elements or more";
    return "";
  };
  for (size_t i = 0; i < node.num_inputs() && i < tensor_inputs; ++i) {
    if (!node.has_input(i)) continue;
    const std::string why = check(node.input(i), "input", i);
    if (!why.empty()) return why;
  }
  for (size_t i = 0; i < node.num_outputs(); ++i) {
    if (!node.has_output(i)) continue;
    const std::string why = check(node.output(i), "output", i);
    if (!why.empty()) return why;
  }
  return "";
}

// The shared rules, then `extra` (may be null). `tensor_inputs`: how many
// leading inputs are tensors (the rest are shape arguments).
Check rules(Check extra = nullptr, size_t tensor_inputs = 1024) {
  return [extra, tensor_inputs](const NodeView& node) {
    std::string why = common_rules(node, tensor_inputs);
    if (why.empty() && extra) why = extra(node);
    return why;
  };
}

std::string spatial_1d_2d(const NodeView& node) {
  const size_t rank = node.input(0).rank();
  if (node.num_outputs() > 1 && node.has_output(1)) return "MaxPool's Indices output runs on the CPU only";
  return rank == 3 || rank == 4 ? "" : "only 1-D and 2-D (NCW, NCHW) windows";
}

// The GEMM walks at most 4 batch dims.
std::string matmul_batches(const NodeView& node) {
  for (size_t i = 0; i < 2; ++i) {
    if (node.input(i).rank() > 6) return "more than 4 batch dims";
  }
  return "";
}

}  // namespace

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_cuda_backend_planner() {
  TablePlannerSpec spec;
  spec.name = "cuda";
  spec.device_type = fb::DeviceType::CUDA;
  spec.max_devices = cuda_backend::kMaxDevices;
  spec.arena_alignment = cuda_backend::kArenaAlignment;
  spec.state_bytes_fixed = cuda_backend::delegate_state_bytes(0, 0);
  spec.state_bytes_per_kernel = cuda_backend::delegate_state_bytes(1, 0) - cuda_backend::delegate_state_bytes(0, 0);
  spec.state_bytes_per_operand = cuda_backend::delegate_state_bytes(0, 1) - cuda_backend::delegate_state_bytes(0, 0);
  for (const cuda_backend::KernelInfo& k : cuda_backend::kKernels) spec.inplace.push_back({k.name, k.inplace_inputs});
  // Binary kernels (Sum and Mean lower to Add, and Mul by 1/n).
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"}) {
    spec.ops.push_back(op_support(op, rules()));
  }
  // Unary kernels.
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp", "Log", "Sqrt", "Erf", "Floor", "Ceil",
                         "Reciprocal", "Softplus", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish"}) {
    spec.ops.push_back(op_support(op, rules()));
  }
  // Clip's bounds become parameters when they are constants; bounds
  // computed at run time stay on the CPU.
  spec.ops.push_back(op_support("Clip", rules(nullptr, 1), {1, 2}));
  // cuBLASLt (the reference GEMM kernel under the host execution model).
  spec.ops.push_back(op_support("Gemm", rules()));
  spec.ops.push_back(op_support("MatMul", rules(matmul_batches)));
  // Direct convolution (groups and depthwise included).
  spec.ops.push_back(op_support("Conv", rules(spatial_1d_2d)));
  spec.ops.push_back(op_support("MaxPool", rules(spatial_1d_2d)));
  spec.ops.push_back(op_support("AveragePool", rules(spatial_1d_2d)));
  spec.ops.push_back(op_support("GlobalAveragePool", rules()));
  spec.ops.push_back(op_support("GlobalMaxPool", rules()));
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    spec.ops.push_back(op_support(op, rules(nullptr, 1), {1}));
  }
  spec.ops.push_back(op_support("Softmax", rules()));
  spec.ops.push_back(op_support("LogSoftmax", rules()));
  spec.ops.push_back(op_support("LayerNormalization", rules()));
  spec.ops.push_back(op_support("BatchNormalization", rules()));
  // The strided-copy kernel.
  spec.ops.push_back(op_support("Transpose", rules()));
  spec.ops.push_back(op_support("Slice", rules(nullptr, 1), {1, 2, 3, 4}));
  spec.ops.push_back(op_support("Concat", rules()));
  spec.ops.push_back(op_support("Split", rules(nullptr, 1), {1}));
  // Views: the planner aliases them (no work) or copies with the strided kernel.
  for (const char* op : {"Reshape", "Squeeze", "Unsqueeze"}) {
    spec.ops.push_back(op_support(op, rules(nullptr, 1), {1}));
  }
  spec.ops.push_back(op_support("Dropout", rules(nullptr, 1), {1, 2}));
  for (const char* op : {"Flatten", "Identity"}) spec.ops.push_back(op_support(op, rules()));
  register_backend_planner(make_table_planner(std::move(spec)));
}

}  // namespace kiln::planner
