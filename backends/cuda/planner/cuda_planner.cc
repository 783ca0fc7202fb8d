// The CUDA backend's planner half: which ops it runs (cuBLAS for Gemm and
// MatMul, its own kernels for the rest) and the layout of its device arenas
// (256-byte aligned offsets, what cudaMalloc guarantees and vectorised loads
// want).
//
// Only the planner half exists so far: programs for cuda:N can be planned
// and inspected, and their runtime half is future work.

#include "kiln/planner/backend_planner.h"

namespace kiln::planner {

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_cuda_backend_planner() {
  TablePlannerSpec spec;
  spec.name = "cuda";
  spec.device_type = fb::DeviceType::CUDA;
  spec.max_devices = 16;
  spec.arena_alignment = 256;
  spec.state_bytes_fixed = 256;
  spec.state_bytes_per_kernel = 64;
  const uint32_t in0 = 1u << 0, in01 = (1u << 0) | (1u << 1);
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    spec.ops.push_back(op_support(op));
    spec.inplace.push_back({op, in01});
  }
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Exp", "Log",
                         "Sqrt", "Neg", "Abs", "Erf", "Reciprocal"}) {
    spec.ops.push_back(op_support(op));
    spec.inplace.push_back({op, in0});
  }
  for (const char* op : {"Gemm", "MatMul", "Conv", "Softmax", "Transpose", "Concat", "LayerNormalization"}) {
    spec.ops.push_back(op_support(op));
  }
  // Views: aliased by the planner, or a Copy kernel.
  spec.ops.push_back(op_support("Reshape", nullptr, {1}));
  for (const char* op : {"Flatten", "Identity"}) spec.ops.push_back(op_support(op));
  spec.inplace.push_back({"Copy", in0});
  register_backend_planner(make_table_planner(std::move(spec)));
}

}  // namespace kiln::planner
