// Conversions between float32 and the 16-bit float formats (IEEE binary16
// and bfloat16), bit-exact and heap-free, for Cast and for host tools that
// read such tensors. Float to 16 bits rounds to nearest, ties to even;
// NaN stays NaN (quiet), overflow becomes infinity.

#ifndef KILN_KERNELS_FLOAT16_H_
#define KILN_KERNELS_FLOAT16_H_

#include <stdint.h>
#include <string.h>

namespace kiln {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float32.
    float f = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    memcpy(&bits, &f, sizeof(bits));
    bits |= sign;
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float out;
  memcpy(&out, &bits, sizeof(out));
  return out;
}

inline uint16_t float_to_half(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (magnitude < 0x38800000u) {
    // Below 2^-14: a half subnormal, round(value / 2^-24).
    if (magnitude < 0x33000000u) return sign;  // at most 2^-25: rounds to zero
    const uint32_t exponent = magnitude >> 23;
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;
    uint32_t h = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15) and keep 10 mantissa bits; a
  // rounding carry moves into the exponent, which is the right result.
  uint32_t h = (magnitude >> 13) - (112u << 10);
  const uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float bfloat16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out;
  memcpy(&out, &bits, sizeof(out));
  return out;
}

inline uint16_t float_to_bfloat16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace kiln

#endif  // KILN_KERNELS_FLOAT16_H_
