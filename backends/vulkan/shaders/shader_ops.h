// Operation codes: the value of specialization constant 0 of the shaders
// that serve several ops (unary, binary, reduce, pool, softmax). Included by
// the GLSL sources and by the runtime's C++, so both agree by construction;
// plain #defines because that is what both preprocessors share.

#ifndef KILN_BACKENDS_VULKAN_SHADERS_SHADER_OPS_H_
#define KILN_BACKENDS_VULKAN_SHADERS_SHADER_OPS_H_

// unary.comp (alpha, beta: UnaryParams), binary.comp and reduce.comp: the
// index of each kernel in kiln/backends/common/kernel_table.h's
// kUnaryKernels, kBinaryKernels and kReduceKernels (lower.cc checks).

// unary.comp
#define KILN_UNARY_RELU 0
#define KILN_UNARY_SIGMOID 1
#define KILN_UNARY_TANH 2
#define KILN_UNARY_NEG 3
#define KILN_UNARY_ABS 4
#define KILN_UNARY_EXP 5
#define KILN_UNARY_LOG 6
#define KILN_UNARY_SQRT 7
#define KILN_UNARY_ERF 8
#define KILN_UNARY_FLOOR 9
#define KILN_UNARY_CEIL 10
#define KILN_UNARY_RECIPROCAL 11
#define KILN_UNARY_SOFTPLUS 12
#define KILN_UNARY_LEAKY_RELU 13
#define KILN_UNARY_ELU 14
#define KILN_UNARY_HARD_SIGMOID 15
#define KILN_UNARY_HARD_SWISH 16
#define KILN_UNARY_GELU 17
#define KILN_UNARY_CLIP 18
#define KILN_UNARY_POW_SCALAR 19
#define KILN_UNARY_COUNT 20

// binary.comp
#define KILN_BINARY_ADD 0
#define KILN_BINARY_SUB 1
#define KILN_BINARY_MUL 2
#define KILN_BINARY_DIV 3
#define KILN_BINARY_MAX 4
#define KILN_BINARY_MIN 5
#define KILN_BINARY_POW 6
#define KILN_BINARY_COUNT 7

// reduce.comp
#define KILN_REDUCE_SUM 0
#define KILN_REDUCE_MEAN 1
#define KILN_REDUCE_MAX 2
#define KILN_REDUCE_MIN 3
#define KILN_REDUCE_PROD 4
#define KILN_REDUCE_L1 5
#define KILN_REDUCE_L2 6
#define KILN_REDUCE_LOG_SUM 7
#define KILN_REDUCE_LOG_SUM_EXP 8
#define KILN_REDUCE_SUM_SQUARE 9
#define KILN_REDUCE_COUNT 10

// pool.comp
#define KILN_POOL_MAX 0
#define KILN_POOL_AVERAGE 1
#define KILN_POOL_COUNT 2

// softmax.comp
#define KILN_SOFTMAX 0
#define KILN_LOG_SOFTMAX 1
#define KILN_SOFTMAX_COUNT 2

// Invocations per workgroup of every shader (8 x 8 for the tiled ones).
#define KILN_WORKGROUP 64

#endif  // KILN_BACKENDS_VULKAN_SHADERS_SHADER_OPS_H_
