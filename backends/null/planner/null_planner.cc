// The null backend's planner half: the shared table of ONNX ops
// (kiln/backends/common/op_support.h) whose kernel the CPU kernels
// have (float32 only, the table's rule; no operand limits: its kernels are
// the CPU's), its arena alignment and the host state of a delegate. Which
// inputs a kernel may overwrite comes from the CPU kernels' own table
// (KernelEntry::inplace_inputs), the same one the runtime half checks at
// init.

#include <stdexcept>
#include <string>

#include "backends/null/null_abi.h"
#include "kiln/backends/common/op_support.h"
#include "kiln/kernels/cpu.h"
#include "kiln/planner/backend_planner.h"

namespace kiln::planner {

// Registered by the build (kiln_add_backend in ../CMakeLists.txt).
void register_null_backend_planner() {
  namespace null = backends::null;
  TablePlannerSpec spec{"null",
                        fb::DeviceType::NULL_DEVICE,
                        null::kMaxDevices,
                        null::kArenaAlignment,
                        null::kDelegateHeaderBytes,
                        null::kStepBytes,
                        null::kOperandBytes,
                        {},
                        {}};
  KernelRegistry kernels;
  if (register_cpu_kernels(kernels) != Error::kOk) {
    throw std::logic_error("the null backend: the CPU kernels do not fit a KernelRegistry");
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    spec.inplace.push_back({kernels.entry(i).name, kernels.entry(i).inplace_inputs});
  }
  for (const backends::OnnxOp& op : backends::kOnnxOps) {
    if (kernels.find(op.kernel) == nullptr) continue;
    spec.ops.push_back(op_support(op.name, op.check == backends::OpCheck::kWindows1d2d ? windows_1d_2d : nullptr,
                                  {op.constant_inputs, op.constant_inputs + op.num_constant_inputs}));
  }
  register_backend_planner(make_table_planner(std::move(spec)));
}

}  // namespace kiln::planner
