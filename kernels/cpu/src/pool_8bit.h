// A pooling window's geometry, and one plane of 8-bit max pooling (a QDQ
// model's MaxPool between a DequantizeLinear and a QuantizeLinear of one
// quantization runs on the bytes as they are). pool.cc; internal,
// heap-free.

#ifndef KILN_KERNELS_CPU_SRC_POOL_8BIT_H_
#define KILN_KERNELS_CPU_SRC_POOL_8BIT_H_

#include <stdint.h>

namespace kiln {
namespace kernels {

struct PoolGeometry {
  int64_t planes;  // N * C
  int64_t h, w, oh, ow;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pt, pl, pb, pr;
};

// out (oh x ow) = the largest tap inside the image (h x w) of each window;
// padding never wins. T is uint8_t or int8_t. Every window holds a real
// tap (the kernel's checks).
template <typename T>
void max_pool_8bit_plane(const PoolGeometry& g, const T* in, T* out);

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_POOL_8BIT_H_
