// Comparison of names (kernels, backends, methods) for the runtime's lookups
// by name, which run at registration and load only. A byte loop: newlib's
// strcmp, word at a time, is 732 bytes of Cortex-M code that names of a few
// bytes do not need.

#ifndef KILN_RUNTIME_SRC_NAMES_H_
#define KILN_RUNTIME_SRC_NAMES_H_

namespace kiln {
namespace internal {

// True when the NUL-terminated strings a and b are equal.
inline bool same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

}  // namespace internal
}  // namespace kiln

#endif  // KILN_RUNTIME_SRC_NAMES_H_
