// What the int8 tiles of qgemm_avx2.cc and qgemm_vnni.cc share: the load
// of a weight word and where step q of a packed panel (or of a direct
// convolution's offsets) lies. Plain C++; internal.

#ifndef KILN_KERNELS_CPU_SRC_X86_QGEMM_TILE_H_
#define KILN_KERNELS_CPU_SRC_X86_QGEMM_TILE_H_

#include <stdint.h>
#include <string.h>

namespace kiln {
namespace kernels {
namespace x86 {

inline int32_t load_word(const int8_t* p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

// The 64 bytes of step q (four k of 16 columns): a packed panel's row q, or
// with offsets the 64 bytes at base + off[q] (qgemm_tile_offsets_avx2).
template <bool kOffsets>
inline const uint8_t* step_bytes(const uint8_t* base, const int32_t* off, int64_t q) {
  return kOffsets ? base + off[q] : base + q * 64;
}

}  // namespace x86
}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_X86_QGEMM_TILE_H_
