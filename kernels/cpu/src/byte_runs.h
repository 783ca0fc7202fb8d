// memcpy and memset for the short runs of small feature maps (an 8 x 8
// plane's rows are 8 bytes): fixed-size, possibly overlapping moves the
// compiler inlines, instead of a library call per run. The int8 im2col
// packer (qgemm.cc) and the 8-bit MaxPool's padded planes
// (x86/pool_avx2.cc) use them. Internal.

#ifndef KILN_KERNELS_CPU_SRC_BYTE_RUNS_H_
#define KILN_KERNELS_CPU_SRC_BYTE_RUNS_H_

#include <stdint.h>
#include <string.h>

namespace kiln {
namespace kernels {

inline void copy_run(uint8_t* d, const uint8_t* s, int64_t n) {
  if (n > 64) {
    memcpy(d, s, static_cast<size_t>(n));
  } else if (n >= 16) {
    // 16-byte moves, the last one overlapping (a 32 x 32 plane's rows).
    uint8_t a[16];
    for (int64_t i = 0; i + 16 < n; i += 16) {
      memcpy(a, s + i, 16);
      memcpy(d + i, a, 16);
    }
    memcpy(a, s + n - 16, 16);
    memcpy(d + n - 16, a, 16);
  } else if (n >= 8) {
    uint64_t a, b;
    memcpy(&a, s, 8);
    memcpy(&b, s + n - 8, 8);
    memcpy(d, &a, 8);
    memcpy(d + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    memcpy(&a, s, 4);
    memcpy(&b, s + n - 4, 4);
    memcpy(d, &a, 4);
    memcpy(d + n - 4, &b, 4);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  }
}

inline void fill_run(uint8_t* d, uint8_t v, int64_t n) {
  if (n >= 16) {
    memset(d, v, static_cast<size_t>(n));
  } else if (n >= 8) {
    const uint64_t a = 0x0101010101010101ull * v;
    memcpy(d, &a, 8);
    memcpy(d + n - 8, &a, 8);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  }
}

}  // namespace kernels
}  // namespace kiln

#endif  // KILN_KERNELS_CPU_SRC_BYTE_RUNS_H_
