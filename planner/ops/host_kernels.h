// The CPU kernels the planner's op definitions lower to (kernels/cpu),
// as the runtime registers them: what the in-place pass asks about a kernel
// (KernelEntry::inplace_inputs) and what programs run with on the host
// (exec/run.h). One registry, filled on first use, shared by both, so the
// planner and the runtime read the same declarations.
//
// Thread safe (the first use fills it once); lives until the process exits.

#ifndef KILN_PLANNER_OPS_HOST_KERNELS_H_
#define KILN_PLANNER_OPS_HOST_KERNELS_H_

#include "kiln/runtime/kernel.h"

namespace kiln::planner {

const KernelRegistry& host_kernel_registry();

}  // namespace kiln::planner

#endif  // KILN_PLANNER_OPS_HOST_KERNELS_H_
