// The CUDA backend's planner half: exactly the ops (and attributes) its
// runtime half runs: the shared table of ONNX ops
// (kiln/backends/common/op_support.h) whose kernel is in the backend's
// table (cuda_kernels.h, which also says which inputs a kernel may
// overwrite); the layout of its device arenas (256-byte aligned offsets,
// what cudaMalloc guarantees and float4 loads want) and the host state of a
// delegate (cuda_abi.h).
//
// Beyond float32 operands (the table's rule) every op here needs:
//   - no empty tensor (the CPU handles those without launching anything);
//   - rank at most 8;
//   - fewer than 2^31 elements per tensor (the kernels index in 32 bits);
//   - MatMul: at most 4 batch dims (what the reference GEMM walks).
// Collectives (AllReduce) run on the device too (runs_collectives): the
// partitioner keeps one there when a CUDA kernel produces its operand, and
// the runtime half's all-reduce kernels run it (device_all_reduce: their
// grid, signal words and state, cuda_abi.h).

#include <string>

#include "backends/cuda/cuda_abi.h"
#include "backends/cuda/cuda_kernels.h"
#include "kiln/backends/common/op_support.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::planner {
namespace {

using Check = std::function<std::string(const NodeView&)>;

std::string matmul_batches(const NodeView& node) {
  return node.input(0).rank() > 6 || node.input(1).rank() > 6 ? "more than 4 batch dims" : "";
}

// The operand limits (above), then the op's own check; shape arguments
// (the constant inputs) are exempt from the limits.
OpSupport support_of(const backends::OnnxOp& op) {
  OperandLimits limits;
  limits.max_rank = backends::cuda::kMaxRank;
  limits.max_elements = (int64_t{1} << 31) - 1;
  limits.too_large = "has 2^31 elements or more";
  Check extra = nullptr;
  if (op.check == backends::OpCheck::kWindows1d2d) extra = windows_1d_2d;
  if (op.check == backends::OpCheck::kMatMulBatches) extra = matmul_batches;
  std::vector<int> constants(op.constant_inputs, op.constant_inputs + op.num_constant_inputs);
  return op_support(op.name, operand_rules(limits, extra, constants.empty() ? SIZE_MAX : 1), constants);
}

}  // namespace

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_cuda_backend_planner() {
  namespace cuda = backends::cuda;
  const uint64_t fixed = cuda::delegate_state_bytes(0, 0);
  TablePlannerSpec spec{"cuda",
                        fb::DeviceType::CUDA,
                        cuda::kMaxDevices,
                        cuda::kArenaAlignment,
                        fixed,
                        cuda::delegate_state_bytes(1, 0) - fixed,
                        cuda::delegate_state_bytes(0, 1) - fixed,
                        {},
                        {}};
  spec.precisions = {"fp32", "tf32", "fp16", "bf16"};
  spec.kernel_scratch = [](const std::string& kernel, int64_t output_elements) -> uint64_t {
    return kernel == "Gemm" || kernel == "MatMul" ? backends::cuda::gemm_workspace_bytes(output_elements) : 0;
  };
  cuda::kKernels.for_each([&](const backends::KernelInfo& k) { spec.inplace.push_back({k.name, k.inplace_inputs}); });
  for (const backends::OnnxOp& op : backends::kOnnxOps) {
    if (cuda::kKernels.find(op.kernel) != nullptr) spec.ops.push_back(support_of(op));
  }
  // Collectives stay on the GPU: symmetric device arenas (runtime half:
  // a device communicator maps them).
  spec.collectives = true;
  spec.all_reduce = [](uint64_t bytes) {
    DeviceAllReduce a;
    a.blocks = cuda::all_reduce_blocks(bytes);
    a.signal_bytes = cuda::all_reduce_signal_bytes(a.blocks);
    a.state_bytes = cuda::kAllReduceStateBytes;
    a.max_ranks = cuda::kAllReduceMaxRanks;
    return a;
  };
  register_backend_planner(make_table_planner(std::move(spec)));
}

}  // namespace kiln::planner
