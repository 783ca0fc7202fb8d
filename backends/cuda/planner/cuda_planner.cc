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
// How each call runs and the scratch it needs (plan_kernel): a Gemm/MatMul
// gets cuBLASLt's workspace; a Conv runs direct or as im2col + GEMM
// (plan_conv, by the rule in cuda_abi.h), the choice in its parameters.
// Collectives (AllReduce) run on the device too (runs_collectives): the
// partitioner keeps one there when a CUDA kernel produces its operand, and
// the runtime half's all-reduce kernels run it (device_all_reduce: their
// grid, signal words and state, cuda_abi.h).

#include <sstream>
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

template <typename... Args>
std::string text(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

KernelPlan::Scratch workspace(const std::vector<int64_t>& output) {
  int64_t elements = 1;
  for (int64_t d : output) elements *= d;
  return {"workspace", fb::DType::UINT8, static_cast<int64_t>(backends::cuda::gemm_workspace_bytes(elements))};
}

int64_t product(const std::vector<int64_t>& dims, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < dims.size(); ++i) p *= dims[i];
  return p;
}

// A Conv: direct, or im2col + GEMM (cuda_abi.h gives the rule and its
// figures). The choice goes into ConvParams.algorithm.
KernelPlan plan_conv(KernelCallInfo& call) {
  namespace cuda = backends::cuda;
  KernelPlan plan;
  plan.choice = "direct";
  auto* p = call.params != nullptr ? call.params->AsConvParams() : nullptr;
  if (p == nullptr || call.inputs.size() < 2 || call.outputs.empty()) return plan;
  const std::vector<int64_t>& x = call.inputs[0];
  const std::vector<int64_t>& w = call.inputs[1];
  const std::vector<int64_t>& y = call.outputs[0];
  if (x.size() < 3 || w.size() != x.size() || y.size() != x.size() || p->kernel.size() != 2 || p->strides.size() != 2 ||
      p->pads.size() != 4) {
    return plan;
  }
  const int64_t m = w[0], k = product(w, 1), n = product(y, 2), batch = x[0];
  const std::string dims = text("M ", m, ", N ", n, ", K ", k);
  if (p->group != 1) {
    plan.why = p->group == x[1] ? "depthwise" : text(p->group, " groups");
    return plan;
  }
  if (p->packed_weights || call.inputs.size() > 3) {
    plan.why = "weights packed or an input affine map (CPU lowerings)";
    return plan;
  }
  if (m < cuda::kConvGemmMinDim || n < cuda::kConvGemmMinDim || k < cuda::kConvGemmMinDim) {
    plan.why = text(dims, ": below ", cuda::kConvGemmMinDim, " in a GEMM dimension");
    return plan;
  }
  const bool as_columns = cuda::conv_reads_input_as_columns(p->kernel[0], p->kernel[1], p->strides[0], p->strides[1],
                                                            int64_t{p->pads[0]} + p->pads[1] + p->pads[2] + p->pads[3]);
  const int64_t columns = as_columns ? 0 : batch * k * n;
  if (static_cast<uint64_t>(columns) * 4 > cuda::kConvColumnsMaxBytes) {
    plan.why = text(dims, ": a column buffer of ", static_cast<uint64_t>(columns) * 4, " bytes as float32 (more than ",
                    cuda::kConvColumnsMaxBytes, ")");
    return plan;
  }
  p->algorithm = fb::ConvAlgorithm::IM2COL_GEMM;
  if (as_columns) {
    plan.choice = "GEMM";
    plan.why = text(dims, " (each at least ", cuda::kConvGemmMinDim,
                    "); 1x1, stride 1, unpadded: the input is the operand, no im2col");
  } else {
    plan.choice = "im2col+GEMM";
    plan.why = text(dims, " (each at least ", cuda::kConvGemmMinDim, "); column buffer ", batch, " x ", k, " x ", n);
    plan.scratch.push_back({"columns", fb::DType::FLOAT32, columns});
  }
  plan.scratch.push_back(workspace(y));
  return plan;
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
  spec.plan_kernel = [](KernelCallInfo& call) {
    if (call.kernel == "Conv") return plan_conv(call);
    KernelPlan plan;
    if ((call.kernel == "Gemm" || call.kernel == "MatMul") && !call.outputs.empty()) {
      plan.scratch.push_back(workspace(call.outputs[0]));
    }
    return plan;
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
