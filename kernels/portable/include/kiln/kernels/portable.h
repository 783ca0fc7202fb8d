// The portable CPU kernels: plain C++17, float32 (and the integer and bool
// dtypes that shape arithmetic, indices and masks use), no heap, no threads.
// They build for any target the runtime builds for, Cortex-M included.
//
// Call register_portable_kernels() once before loading methods; it fills the
// registry with every portable kernel (replacing entries of the same name).
//
// Each kernel is also its own object, `const KernelEntry
// kiln::kernels::kernel_<Name>` (kernel_Conv, kernel_Relu, ...). Firmware
// that registers only those its program calls links only those: `kiln pack`
// writes that registration (NAME_kernels.cc) for a program.

#ifndef KILN_KERNELS_PORTABLE_H_
#define KILN_KERNELS_PORTABLE_H_

#include "kiln/runtime/kernel.h"

namespace kiln {

Error register_portable_kernels(KernelRegistry& registry = global_kernel_registry());

}  // namespace kiln

#endif  // KILN_KERNELS_PORTABLE_H_
