// The thresholds' override (parallel.h): KILN_PARALLEL_MIN_WORK or
// set_parallel_min_work(), read with one relaxed atomic load per call.

#include "parallel.h"

#include <stdlib.h>

#include <atomic>

namespace kiln {
namespace kernels {

#if defined(KILN_BARE_METAL)

// Firmware runs every kernel on one thread: nothing to override (and no
// 64-bit atomics to pull in).
int64_t parallel_min_work_override() { return -1; }
void set_parallel_min_work(int64_t) {}

#else

namespace {

// -2 until the environment is read; then the override, or -1 for none.
std::atomic<int64_t> g_min_work{-2};

int64_t from_environment() {
  const char* value = getenv("KILN_PARALLEL_MIN_WORK");
  if (value == nullptr || value[0] == '\0') return -1;
  char* end = nullptr;
  const long long v = strtoll(value, &end, 10);
  return *end == '\0' && v >= 0 ? static_cast<int64_t>(v) : -1;
}

}  // namespace

int64_t parallel_min_work_override() {
  int64_t v = g_min_work.load(std::memory_order_relaxed);
  if (v == -2) {
    // Racing first readers compute the same value.
    v = from_environment();
    g_min_work.store(v, std::memory_order_relaxed);
  }
  return v;
}

void set_parallel_min_work(int64_t work) { g_min_work.store(work < 0 ? -1 : work, std::memory_order_relaxed); }

#endif

}  // namespace kernels
}  // namespace kiln
