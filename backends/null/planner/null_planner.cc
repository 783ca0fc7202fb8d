// The null backend's planner half: the ONNX ops it takes (float32 only, the
// table's rule), its arena alignment and the host state of a delegate. Its
// kernels are the portable CPU kernels, so which inputs a kernel may
// overwrite comes from their own table (KernelEntry::inplace_inputs), the
// same one the runtime half checks at init.

#include <stdexcept>
#include <string>

#include "backends/null/null_abi.h"
#include "kiln/kernels/portable.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::planner {
// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_null_backend_planner() {
  TablePlannerSpec spec;
  spec.name = "null";
  spec.device_type = fb::DeviceType::NULL_DEVICE;
  spec.max_devices = backends::null::kMaxDevices;
  spec.arena_alignment = backends::null::kArenaAlignment;
  spec.state_bytes_fixed = backends::null::kDelegateHeaderBytes;
  spec.state_bytes_per_kernel = backends::null::kStepBytes;
  spec.state_bytes_per_operand = backends::null::kOperandBytes;
  KernelRegistry kernels;
  if (register_portable_kernels(kernels) != Error::kOk) {
    throw std::logic_error("the null backend: the portable kernels do not fit a KernelRegistry");
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    spec.inplace.push_back({kernels.entry(i).name, kernels.entry(i).inplace_inputs});
  }
  // clang-format off
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Relu", "Sigmoid", "Tanh",
                         "Neg", "Abs", "Exp", "Log", "Sqrt", "Erf", "Floor", "Ceil", "Reciprocal", "Softplus",
                         "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "Gemm", "MatMul", "GlobalAveragePool",
                         "GlobalMaxPool", "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization",
                         "Transpose", "Concat", "Flatten", "Identity"}) {
    // clang-format on
    spec.ops.push_back(op_support(op));
  }
  spec.ops.push_back(op_support("Conv", windows_1d_2d));
  spec.ops.push_back(op_support("MaxPool", windows_1d_2d));
  spec.ops.push_back(op_support("AveragePool", windows_1d_2d));
  spec.ops.push_back(op_support("Clip", nullptr, {1, 2}));
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
        "ReduceLogSumExp", "ReduceSumSquare", "Split", "Reshape", "Squeeze", "Unsqueeze"}) {
    spec.ops.push_back(op_support(op, nullptr, {1}));
  }
  spec.ops.push_back(op_support("Slice", nullptr, {1, 2, 3, 4}));
  spec.ops.push_back(op_support("Dropout", nullptr, {1, 2}));
  register_backend_planner(make_table_planner(std::move(spec)));
}

}  // namespace kiln::planner
