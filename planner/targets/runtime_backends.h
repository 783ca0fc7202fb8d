// The runtime halves of the backends built into kiln, for the host tools
// (`kiln run`, the conformance runner, benchmarks): a registry holding one
// instance of each, created on first use.
//
// The Vulkan backend is there when kiln was built with KILN_WITH_VULKAN.
// Environment: KILN_VULKAN_VALIDATION=1 enables the Khronos validation
// layer (every validation message then fails the run). Driver host
// allocations go through a pool of KILN_VULKAN_HOST_POOL_MB megabytes
// (default 64; 0 leaves them to the driver). KILN_VULKAN_KERNELS=tiles or
// =registers forces how Gemm, MatMul and Conv run (default: by device type,
// see VulkanOptions::Kernels).

#ifndef KILN_PLANNER_TARGETS_RUNTIME_BACKENDS_H_
#define KILN_PLANNER_TARGETS_RUNTIME_BACKENDS_H_

#include <cstdint>
#include <string>

#include "kiln/runtime/backend.h"

namespace kiln::planner {

BackendRegistry& builtin_runtime_backends();

// Releases every device of the built-in backends (after the last Method is
// gone) and returns how many validation messages they reported in total.
uint64_t shutdown_builtin_runtime_backends();

// "vulkan" when the Vulkan runtime half is built in, and so on.
std::string builtin_runtime_backend_names();

}  // namespace kiln::planner

#endif  // KILN_PLANNER_TARGETS_RUNTIME_BACKENDS_H_
