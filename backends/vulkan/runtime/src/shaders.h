// The compute shaders built into the Vulkan backend: GLSL sources in
// backends/vulkan/shaders/, compiled to SPIR-V by glslc when kiln is built
// and embedded here as word arrays (nothing binary is committed).
//
// A pipeline is a shader with specialization constant 0 set to one of its
// variants (the KILN_* op codes of shaders/shader_ops.h); each device makes
// a pipeline the first time a delegate needs it.

#ifndef KILN_BACKENDS_VULKAN_RUNTIME_SRC_SHADERS_H_
#define KILN_BACKENDS_VULKAN_RUNTIME_SRC_SHADERS_H_

#include <stddef.h>
#include <stdint.h>

#include "backends/vulkan/shaders/shader_ops.h"

namespace kiln::backends::vulkan::internal {

enum ShaderId : uint32_t {
  kShaderUnary,
  kShaderBinary,
  kShaderMatMul,
  kShaderMatMulBlocked,
  kShaderMatMulBlockedVec4,
  kShaderConv,
  kShaderConvBlocked,
  kShaderConvDirect,
  kShaderPool,
  kShaderReduce,
  kShaderSoftmax,
  kShaderLayerNorm,
  kShaderBatchNorm,
  kShaderStridedCopy,
  kShaderCopyRows,
  kShaderCount,
};

struct ShaderInfo {
  const char* name;
  const uint32_t* code;
  size_t code_bytes;
  uint32_t bindings;        // storage buffers 0 .. bindings - 1
  uint32_t variants;        // values of specialization constant 0; 1: none
  uint32_t first_pipeline;  // index of variant 0 among all pipelines
};

constexpr uint32_t kPipelineCount = KILN_UNARY_COUNT + KILN_BINARY_COUNT + 1 + 1 + 1 + 1 + 1 + 1 + KILN_POOL_COUNT +
                                    KILN_REDUCE_COUNT + KILN_SOFTMAX_COUNT + 1 + 1 + 1 + 1;

const ShaderInfo& shader_info(ShaderId id);

}  // namespace kiln::backends::vulkan::internal

#endif  // KILN_BACKENDS_VULKAN_RUNTIME_SRC_SHADERS_H_
