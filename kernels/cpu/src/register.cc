#include "kiln/kernels/cpu.h"

#include "cpu_kernels.h"

namespace kiln {

Error register_cpu_kernels(KernelRegistry& registry) {
  using namespace kernels;
  KILN_RETURN_IF_ERROR(registry.register_kernels(kElementwiseKernels, kNumElementwiseKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kLinearKernels, kNumLinearKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kQuantizedKernels, kNumQuantizedKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kPoolKernels, kNumPoolKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kShapeKernels, kNumShapeKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kNormKernels, kNumNormKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kReduceKernels, kNumReduceKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kCompareKernels, kNumCompareKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kResizeKernels, kNumResizeKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kWinogradKernels, kNumWinogradKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kMathKernels, kNumMathKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kIndexKernels, kNumIndexKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kRnnKernels, kNumRnnKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kSignalKernels, kNumSignalKernels));
  KILN_RETURN_IF_ERROR(registry.register_kernels(kLinalgKernels, kNumLinalgKernels));
  return Error::kOk;
}

}  // namespace kiln
