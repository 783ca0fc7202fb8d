// Inputs bounded above: how a DynamicDim's value follows the symbols
// (schema/program.fbs). One definition for the planner's verifier, the
// runtime's validator and the runtime's rebinding. Header-only, no heap.

#ifndef KILN_SCHEMA_DYNAMIC_DIMS_H_
#define KILN_SCHEMA_DYNAMIC_DIMS_H_

#include <cstdint>

#include "kiln/schema/program_generated.h"

namespace kiln {
namespace abi {

// Symbols a method may have: one bit each in DynamicDim.symbols.
constexpr uint32_t kMaxSymbols = 16;

constexpr int64_t floor_div(int64_t a, int64_t b) { return (a % b != 0 && ((a < 0) != (b < 0))) ? a / b - 1 : a / b; }

// scale * floor((mul * S + bias) / divisor) + offset, S the product of the
// values of the symbols in d.symbols(). False when a product or sum
// overflows 64 bits or the divisor is not positive.
inline bool evaluate_dynamic_dim(const fb::DynamicDim& d, const int64_t* values, uint32_t num_values, int64_t* out) {
  if (d.divisor() <= 0) return false;
  int64_t s = 1;
  for (uint32_t k = 0; k < num_values && k < kMaxSymbols; ++k) {
    if ((d.symbols() & (1u << k)) != 0 && __builtin_mul_overflow(s, values[k], &s)) return false;
  }
  int64_t t = 0;
  if (__builtin_mul_overflow(d.mul(), s, &t) || __builtin_add_overflow(t, d.bias(), &t)) return false;
  t = floor_div(t, d.divisor());
  if (__builtin_mul_overflow(d.scale(), t, &t) || __builtin_add_overflow(t, d.offset(), &t)) return false;
  *out = t;
  return true;
}

// The index of the first entry of tensor t in `dims` (sorted by tensor),
// or dims->size() when t has none.
inline uint32_t first_dynamic_dim(const flatbuffers::Vector<const fb::DynamicDim*>& dims, uint32_t t) {
  uint32_t lo = 0;
  uint32_t hi = dims.size();
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (dims.Get(mid)->tensor() < t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace abi
}  // namespace kiln

#endif  // KILN_SCHEMA_DYNAMIC_DIMS_H_
