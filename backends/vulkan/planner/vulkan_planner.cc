// The Vulkan backend's planner half: exactly the ops (and attributes) its
// compute shaders run (backends/vulkan/shaders, lowered to dispatches by
// backends/vulkan/runtime/src/dispatch.cc), the layout rules of its device
// arenas, and the host state a delegate takes at run time.
//
// Offsets in Vulkan arenas are aligned to 256 bytes, the largest
// minStorageBufferOffsetAlignment a conforming device may report, so one
// program runs on every Vulkan 1.1 device (lavapipe reports 16).
//
// Beyond float32 operands (the table's rule) every op here needs:
//   - no empty tensor (the CPU handles those without launching anything);
//   - rank at most 8;
//   - no tensor above 128 MiB: the smallest maxStorageBufferRange a Vulkan
//     device may have, the most one descriptor binds.

#include <string>

#include "backends/vulkan/vulkan_abi.h"
#include "backends/vulkan/vulkan_kernels.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::planner {
namespace {

using Check = std::function<std::string(const NodeView&)>;

// The shared operand limits (above; 2^25 floats are 128 MiB), then `extra`
// (may be null). `tensor_inputs`: how many leading inputs are tensors the
// shaders see (the rest are shape arguments).
Check rules(Check extra = nullptr, size_t tensor_inputs = SIZE_MAX) {
  OperandLimits limits;
  limits.max_rank = 8;
  limits.max_elements = int64_t{1} << 25;
  limits.too_large = "is larger than 128 MiB (what every Vulkan device binds)";
  return operand_rules(limits, std::move(extra), tensor_inputs);
}

// The matmul shader walks at most 3 batch dims.
std::string matmul_batches(const NodeView& node) {
  for (size_t i = 0; i < 2; ++i) {
    if (node.input(i).rank() > 5) return "more than 3 batch dims";
  }
  return "";
}

}  // namespace

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_vulkan_backend_planner() {
  TablePlannerSpec spec;
  spec.name = "vulkan";
  spec.device_type = fb::DeviceType::VULKAN;
  spec.max_devices = backends::vulkan::kMaxDevices;
  spec.arena_alignment = backends::vulkan::kArenaAlignment;
  spec.state_bytes_fixed = backends::vulkan::kDelegateStateBytes;
  for (const backends::vulkan::KernelInfo& k : backends::vulkan::kKernels)
    spec.inplace.push_back({k.name, k.inplace_inputs});
  // binary.comp (Sum and Mean lower to Add, and Mul by 1/n; Pow with a
  // scalar constant exponent to unary.comp's PowScalar).
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean"}) {
    spec.ops.push_back(op_support(op, rules()));
  }
  // unary.comp
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp", "Log", "Sqrt", "Erf", "Floor", "Ceil",
                         "Reciprocal", "Softplus", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish"}) {
    spec.ops.push_back(op_support(op, rules()));
  }
  // Clip's bounds become parameters when they are constants; bounds
  // computed at run time stay on the CPU.
  spec.ops.push_back(op_support("Clip", rules(nullptr, 1), {1, 2}));
  // matmul.comp
  spec.ops.push_back(op_support("Gemm", rules()));
  spec.ops.push_back(op_support("MatMul", rules(matmul_batches)));
  // conv.comp (implicit GEMM) and conv_direct.comp (depthwise, few channels)
  spec.ops.push_back(op_support("Conv", rules(windows_1d_2d)));
  // pool.comp; reduce.comp for the global poolings and the reductions
  spec.ops.push_back(op_support("MaxPool", rules(windows_1d_2d)));
  spec.ops.push_back(op_support("AveragePool", rules(windows_1d_2d)));
  spec.ops.push_back(op_support("GlobalAveragePool", rules()));
  spec.ops.push_back(op_support("GlobalMaxPool", rules()));
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    spec.ops.push_back(op_support(op, rules(nullptr, 1), {1}));
  }
  // softmax.comp, layer_norm.comp, batch_norm.comp
  spec.ops.push_back(op_support("Softmax", rules()));
  spec.ops.push_back(op_support("LogSoftmax", rules()));
  spec.ops.push_back(op_support("LayerNormalization", rules()));
  spec.ops.push_back(op_support("BatchNormalization", rules()));
  // strided_copy.comp, copy_rows.comp
  spec.ops.push_back(op_support("Transpose", rules()));
  spec.ops.push_back(op_support("Slice", rules(nullptr, 1), {1, 2, 3, 4}));
  spec.ops.push_back(op_support("Concat", rules()));
  spec.ops.push_back(op_support("Split", rules(nullptr, 1), {1}));
  // Views: the planner aliases them (no work) or copies with copy_rows.comp.
  for (const char* op : {"Reshape", "Squeeze", "Unsqueeze"}) {
    spec.ops.push_back(op_support(op, rules(nullptr, 1), {1}));
  }
  spec.ops.push_back(op_support("Dropout", rules(nullptr, 1), {1, 2}));
  for (const char* op : {"Flatten", "Identity"}) spec.ops.push_back(op_support(op, rules()));
  register_backend_planner(make_table_planner(std::move(spec)));
}

}  // namespace kiln::planner
