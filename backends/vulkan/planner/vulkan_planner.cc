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

constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 27;
constexpr size_t kMaxRank = 8;

using Check = std::function<std::string(const NodeView&)>;

// The rules every Vulkan op shares (above); shape arguments (constant
// inputs beyond the first) are not tensors the shaders see.
std::string common_rules(const NodeView& node, size_t tensor_inputs) {
  auto check = [](const ValueView& v, const char* what, size_t i) -> std::string {
    const std::string operand = std::string(what) + " " + std::to_string(i);
    if (!v.has_shape()) return operand + " has no static shape";
    if (v.rank() > kMaxRank) return operand + " has rank " + std::to_string(v.rank()) + " (8 at most)";
    if (v.numel() == 0) return operand + " is empty";
    if (static_cast<uint64_t>(v.numel()) * 4 > kMaxTensorBytes) {
      return operand + " is larger than 128 MiB (what every Vulkan device binds)";
    }
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
  spec.max_devices = vulkan::kMaxDevices;
  spec.arena_alignment = vulkan::kArenaAlignment;
  spec.state_bytes_fixed = vulkan::kDelegateStateBytes;
  for (const vulkan::KernelInfo& k : vulkan::kKernels) spec.inplace.push_back({k.name, k.inplace_inputs});
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
  spec.ops.push_back(op_support("Conv", rules(spatial_1d_2d)));
  // pool.comp; reduce.comp for the global poolings and the reductions
  spec.ops.push_back(op_support("MaxPool", rules(spatial_1d_2d)));
  spec.ops.push_back(op_support("AveragePool", rules(spatial_1d_2d)));
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
