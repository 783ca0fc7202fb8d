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

// The shared operand limits (above), then `extra` (may be null).
// `tensor_inputs`: how many leading inputs are tensors (the rest are shape
// arguments).
Check rules(Check extra = nullptr, size_t tensor_inputs = SIZE_MAX) {
  OperandLimits limits;
  limits.max_rank = backends::cuda::kMaxRank;
  limits.max_elements = (int64_t{1} << 31) - 1;
  limits.too_large = "has 2^31 elements or more";
  return operand_rules(limits, std::move(extra), tensor_inputs);
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
  spec.max_devices = backends::cuda::kMaxDevices;
  spec.arena_alignment = backends::cuda::kArenaAlignment;
  spec.state_bytes_fixed = backends::cuda::delegate_state_bytes(0, 0);
  spec.state_bytes_per_kernel = backends::cuda::delegate_state_bytes(1, 0) - backends::cuda::delegate_state_bytes(0, 0);
  spec.state_bytes_per_operand =
      backends::cuda::delegate_state_bytes(0, 1) - backends::cuda::delegate_state_bytes(0, 0);
  for (const backends::cuda::KernelInfo& k : backends::cuda::kKernels)
    spec.inplace.push_back({k.name, k.inplace_inputs});
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
  spec.ops.push_back(op_support("Conv", rules(windows_1d_2d)));
  spec.ops.push_back(op_support("MaxPool", rules(windows_1d_2d)));
  spec.ops.push_back(op_support("AveragePool", rules(windows_1d_2d)));
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
