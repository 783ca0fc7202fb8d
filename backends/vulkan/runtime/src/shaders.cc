#include "shaders.h"

namespace kiln::backends::vulkan::internal {
namespace {

// Each <name>.spv.inc is glslc's C initializer output for a shader of
// shaders/ (see backends/vulkan/CMakeLists.txt for which source and defines).
const uint32_t kUnary[] =
#include "unary.spv.inc"
    ;
const uint32_t kBinary[] =
#include "binary.spv.inc"
    ;
const uint32_t kMatMul[] =
#include "matmul.spv.inc"
    ;
const uint32_t kMatMulBlocked[] =
#include "matmul_blocked.spv.inc"
    ;
const uint32_t kMatMulBlockedVec4[] =
#include "matmul_blocked_vec4.spv.inc"
    ;
const uint32_t kConv[] =
#include "conv.spv.inc"
    ;
const uint32_t kConvBlocked[] =
#include "conv_blocked.spv.inc"
    ;
const uint32_t kConvDirect[] =
#include "conv_direct.spv.inc"
    ;
const uint32_t kPool[] =
#include "pool.spv.inc"
    ;
const uint32_t kReduce[] =
#include "reduce.spv.inc"
    ;
const uint32_t kSoftmax[] =
#include "softmax.spv.inc"
    ;
const uint32_t kLayerNorm[] =
#include "layer_norm.spv.inc"
    ;
const uint32_t kBatchNorm[] =
#include "batch_norm.spv.inc"
    ;
const uint32_t kStridedCopy[] =
#include "strided_copy.spv.inc"
    ;
const uint32_t kCopyRows[] =
#include "copy_rows.spv.inc"
    ;

struct Entry {
  const char* name;
  const uint32_t* code;
  size_t code_bytes;
  uint32_t bindings;
  uint32_t variants;
};

constexpr Entry kEntries[kShaderCount] = {
    {"unary", kUnary, sizeof(kUnary), 2, KILN_UNARY_COUNT},
    {"binary", kBinary, sizeof(kBinary), 3, KILN_BINARY_COUNT},
    {"matmul", kMatMul, sizeof(kMatMul), 4, 1},
    {"matmul_blocked", kMatMulBlocked, sizeof(kMatMulBlocked), 4, 1},
    {"matmul_blocked_vec4", kMatMulBlockedVec4, sizeof(kMatMulBlockedVec4), 4, 1},
    {"conv", kConv, sizeof(kConv), 4, 1},
    {"conv_blocked", kConvBlocked, sizeof(kConvBlocked), 4, 1},
    {"conv_direct", kConvDirect, sizeof(kConvDirect), 4, 1},
    {"pool", kPool, sizeof(kPool), 2, KILN_POOL_COUNT},
    {"reduce", kReduce, sizeof(kReduce), 2, KILN_REDUCE_COUNT},
    {"softmax", kSoftmax, sizeof(kSoftmax), 2, KILN_SOFTMAX_COUNT},
    {"layer_norm", kLayerNorm, sizeof(kLayerNorm), 6, 1},
    {"batch_norm", kBatchNorm, sizeof(kBatchNorm), 6, 1},
    {"strided_copy", kStridedCopy, sizeof(kStridedCopy), 2, 1},
    {"copy_rows", kCopyRows, sizeof(kCopyRows), 2, 1},
};

struct Table {
  ShaderInfo info[kShaderCount];
  constexpr Table() : info() {
    uint32_t first = 0;
    for (uint32_t i = 0; i < kShaderCount; ++i) {
      info[i] = {kEntries[i].name,     kEntries[i].code,     kEntries[i].code_bytes,
                 kEntries[i].bindings, kEntries[i].variants, first};
      first += kEntries[i].variants;
    }
  }
};

constexpr Table kTable;
static_assert(kTable.info[kShaderCount - 1].first_pipeline + kEntries[kShaderCount - 1].variants == kPipelineCount,
              "kPipelineCount does not match the shader table");

}  // namespace

const ShaderInfo& shader_info(ShaderId id) { return kTable.info[id]; }

}  // namespace kiln::backends::vulkan::internal
