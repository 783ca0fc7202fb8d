// The kernel tables of each source file of the CPU kernels, gathered by
// register_cpu_kernels(), and the macros that define them. Internal.
//
// Each source file lists its kernels once, as KILN_<FILE>_KERNELS(K) with
// K(Name, check, run, inplace_inputs) per kernel, and from that list defines
// both its table and one object per kernel, kiln::kernels::kernel_<Name>.
// The table serves register_cpu_kernels(); the single objects let
// firmware register only the kernels its program calls (the registration
// `kiln pack` writes), so the linker drops every other kernel.

#ifndef KILN_KERNELS_CPU_SRC_CPU_KERNELS_H_
#define KILN_KERNELS_CPU_SRC_CPU_KERNELS_H_

#include <stddef.h>

#include "kiln/runtime/kernel.h"

#define KILN_DEFINE_KERNEL_ENTRY(name, check, run, inplace) \
  extern const KernelEntry kernel_##name;                   \
  const KernelEntry kernel_##name = {#name, check, run, inplace};
#define KILN_DEFINE_KERNEL_ENTRIES(list) list(KILN_DEFINE_KERNEL_ENTRY)
#define KILN_KERNEL_TABLE_ROW(name, check, run, inplace) {#name, check, run, inplace},

namespace kiln {
namespace kernels {

extern const KernelEntry kElementwiseKernels[];
extern const size_t kNumElementwiseKernels;
extern const KernelEntry kLinearKernels[];
extern const size_t kNumLinearKernels;
extern const KernelEntry kQuantizedKernels[];
extern const size_t kNumQuantizedKernels;
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
extern const KernelEntry kMathKernels[];
extern const size_t kNumMathKernels;
extern const KernelEntry kIndexKernels[];
extern const size_t kNumIndexKernels;
extern const KernelEntry kRnnKernels[];
extern const size_t kNumRnnKernels;
extern const KernelEntry kSignalKernels[];
extern const size_t kNumSignalKernels;
extern const KernelEntry kLinalgKernels[];
extern const size_t kNumLinalgKernels;

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_CPU_KERNELS_H_
