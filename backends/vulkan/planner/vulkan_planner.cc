// The Vulkan backend's planner half: exactly the ops (and attributes) its
// compute shaders run: the shared table of ONNX ops
// (kiln/backends/common/op_support.h) whose kernel is in the backend's
// table (vulkan_kernels.h, which also says which inputs a kernel may
// overwrite); the layout rules of its device arenas, and the host state a
// delegate takes at run time (vulkan_abi.h).
//
// Offsets in Vulkan arenas are aligned to 256 bytes, the largest
// minStorageBufferOffsetAlignment a conforming device may report, so one
// program runs on every Vulkan 1.1 device (lavapipe reports 16).
//
// Beyond float32 operands (the table's rule) every op here needs:
//   - no empty tensor (the CPU handles those without launching anything);
//   - rank at most 8;
//   - no tensor above 128 MiB (2^25 floats): the smallest
//     maxStorageBufferRange a Vulkan device may have, the most one
//     descriptor binds;
//   - MatMul: at most 3 batch dims (what the matmul shaders walk).

#include <string>

#include "backends/vulkan/vulkan_abi.h"
#include "backends/vulkan/vulkan_kernels.h"
#include "kiln/backends/common/op_support.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::planner {
namespace {

using Check = std::function<std::string(const NodeView&)>;

std::string matmul_batches(const NodeView& node) {
  return node.input(0).rank() > 5 || node.input(1).rank() > 5 ? "more than 3 batch dims" : "";
}

// The operand limits (above), then the op's own check; shape arguments
// (the constant inputs) are exempt from the limits.
OpSupport support_of(const backends::OnnxOp& op) {
  OperandLimits limits;
  limits.max_elements = int64_t{1} << 25;
  limits.too_large = "is larger than 128 MiB (what every Vulkan device binds)";
  Check extra = nullptr;
  if (op.check == backends::OpCheck::kWindows1d2d) extra = windows_1d_2d;
  if (op.check == backends::OpCheck::kMatMulBatches) extra = matmul_batches;
  std::vector<int> constants(op.constant_inputs, op.constant_inputs + op.num_constant_inputs);
  return op_support(op.name, operand_rules(limits, extra, constants.empty() ? SIZE_MAX : 1), constants);
}

}  // namespace

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_vulkan_backend_planner() {
  namespace vk = backends::vulkan;
  TablePlannerSpec spec{
      "vulkan", fb::DeviceType::VULKAN, vk::kMaxDevices, vk::kArenaAlignment, vk::kDelegateStateBytes, 0, 0, {}, {}};
  vk::kKernels.for_each([&](const backends::KernelInfo& k) { spec.inplace.push_back({k.name, k.inplace_inputs}); });
  for (const backends::OnnxOp& op : backends::kOnnxOps) {
    if (vk::kKernels.find(op.kernel) != nullptr) spec.ops.push_back(support_of(op));
  }
  register_backend_planner(make_table_planner(std::move(spec)));
}

}  // namespace kiln::planner
