// The digest that ties a bundled self-test to its program: FNV-1a (64 bit)
// over the program's size-prefixed flatbuffer. The planner writes it into
// the test, the runtime computes it from the program it loaded; one
// definition for both (the runtime also digests a symmetric arena's layout
// with it). A fingerprint against mix-ups, not a cryptographic hash.

#ifndef KILN_SCHEMA_DIGEST_H_
#define KILN_SCHEMA_DIGEST_H_

#include <stddef.h>
#include <stdint.h>

namespace kiln::abi {

constexpr uint64_t kFnv1a64Start = 1469598103934665603ull;

// Continues digest `h` over `size` bytes.
inline uint64_t fnv1a64(uint64_t h, const uint8_t* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= 1099511628211ull;
  }
  return h;
}

inline uint64_t fnv1a64(const uint8_t* data, size_t size) { return fnv1a64(kFnv1a64Start, data, size); }

}  // namespace kiln::abi

#endif  // KILN_SCHEMA_DIGEST_H_
