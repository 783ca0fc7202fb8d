// The kernel tables of each source file of the portable kernels, gathered by
// register_portable_kernels(). Internal.

#ifndef KILN_KERNELS_PORTABLE_SRC_PORTABLE_KERNELS_H_
#define KILN_KERNELS_PORTABLE_SRC_PORTABLE_KERNELS_H_

#include <stddef.h>

#include "kiln/runtime/kernel.h"

namespace kiln {
namespace kernels {

extern const KernelEntry kElementwiseKernels[];
extern const size_t kNumElementwiseKernels;
extern const KernelEntry kLinearKernels[];
extern const size_t kNumLinearKernels;
extern const KernelEntry kPoolKernels[];
extern const size_t kNumPoolKernels;
extern const KernelEntry kShapeKernels[];
extern const size_t kNumShapeKernels;
extern const KernelEntry kNormKernels[];
extern const size_t kNumNormKernels;
extern const KernelEntry kCompareKernels[];
extern const size_t kNumCompareKernels;
extern const KernelEntry kResizeKernels[];
extern const size_t kNumResizeKernels;
extern const KernelEntry kReduceKernels[];
extern const size_t kNumReduceKernels;
extern const KernelEntry kWinogradKernels[];
extern const size_t kNumWinogradKernels;

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_PORTABLE_SRC_PORTABLE_KERNELS_H_
