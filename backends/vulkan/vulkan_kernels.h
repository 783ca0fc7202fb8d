// The kernels the Vulkan backend's shaders run: the device kernels every
// device backend runs (kiln/backends/common/kernel_table.h: unary.comp,
// binary.comp, reduce.comp, matmul.comp, conv.comp, pool.comp,
// softmax.comp, layer_norm.comp, batch_norm.comp, strided_copy.comp,
// copy_rows.comp), and these beside them. One table, read by both halves:
// the planner half places outputs in place only through the inputs it
// declares (and takes an ONNX op when it runs the kernel the op lowers to:
// planner/vulkan_planner.cc), and the runtime half refuses, at init, a
// kernel it does not list or an output that shares bytes with an input not
// declared here. No Vulkan headers: the planner builds without Vulkan.

#ifndef KILN_BACKENDS_VULKAN_VULKAN_KERNELS_H_
#define KILN_BACKENDS_VULKAN_VULKAN_KERNELS_H_

#include "kiln/backends/common/kernel_table.h"

namespace kiln::backends::vulkan {

constexpr KernelInfo kOwnKernels[] = {
    {"PowScalar", kInplaceInput0},  // unary.comp: Pow with a scalar constant exponent
    {"Pow", kInplaceInputs01},      // binary.comp
};

constexpr KernelTable kKernels = {true, kOwnKernels, sizeof(kOwnKernels) / sizeof(kOwnKernels[0])};

}  // namespace kiln::backends::vulkan

#endif  // KILN_BACKENDS_VULKAN_VULKAN_KERNELS_H_
