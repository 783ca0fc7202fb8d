// What the kernel tests share: reproducible input values, the sentinel that
// guard regions are filled with, readable names for parameterised cases,
// and fused-activation tables.

#ifndef KILN_TESTS_KERNELS_KERNEL_TEST_VALUES_H_
#define KILN_TESTS_KERNELS_KERNEL_TEST_VALUES_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "gemm.h"

namespace kiln::kernels {

// A FusedActivation table built with flatbuffers, as kernels read them.
class Activation {
 public:
  Activation(fb::Activation kind, float alpha, float beta) {
    builder_.Finish(fb::CreateFusedActivation(builder_, kind, alpha, beta));
  }
  const fb::FusedActivation* get() const {
    return flatbuffers::GetRoot<fb::FusedActivation>(builder_.GetBufferPointer());
  }

 private:
  flatbuffers::FlatBufferBuilder builder_;
};

// Written past the end of outputs and scratch; must still be there after.
constexpr float kSentinel = 12345.f;

// `n` values in [-1, 1], the same for the same seed on every machine.
inline std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001) / 1000.f - 1.f;
  }
  return v;
}

inline const char* gemm_path_name(GemmPath path) {
  switch (path) {
    case GemmPath::kAuto: return "auto";
    case GemmPath::kAvx2: return "avx2";
    case GemmPath::kPortable: return "portable";
  }
  return "unknown";
}

// "3x3" style joins of numbers for test names (letters, digits, '_' only).
inline std::string dims_name(std::initializer_list<int64_t> dims, const char* sep = "x") {
  std::string out;
  for (int64_t d : dims) {
    if (!out.empty()) out += sep;
    out += std::to_string(d);
  }
  return out;
}

}  // namespace kiln::kernels

#endif  // KILN_TESTS_KERNELS_KERNEL_TEST_VALUES_H_
