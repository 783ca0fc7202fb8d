// A firmware that must NOT link: it reaches the heap in the one way named by
// KILN_CANARY, and kiln_no_heap has to turn that into a link error. The
// firmware tests build each canary and pass only when the link fails with
// the poisoned symbol named, proving the no-heap check of the real firmware
// can fail at all. KILN_CANARY 0 allocates nothing and must link: the
// control that shows the failures come from the allocation alone.

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <new>

namespace {
// Opaque to the optimiser, so no call below is folded away.
volatile size_t g_size = 16;
void* volatile g_sink = nullptr;
}  // namespace

extern "C" void* __cxa_allocate_exception(size_t size) noexcept;

int main() {
#if KILN_CANARY == 0
  g_sink = nullptr;
#elif KILN_CANARY == 1
  g_sink = malloc(g_size);
#elif KILN_CANARY == 2
  g_sink = calloc(g_size, 4);
#elif KILN_CANARY == 3
  g_sink = realloc(g_sink, g_size);
#elif KILN_CANARY == 4
  free(g_sink);
#elif KILN_CANARY == 5
  g_sink = ::operator new(g_size);
#elif KILN_CANARY == 6
  ::operator delete[](g_sink);
#elif KILN_CANARY == 7
  g_sink = __cxa_allocate_exception(g_size);
#elif KILN_CANARY == 8
  // newlib's printf family allocates behind the caller's back.
  char text[32];
  g_sink = text;
  snprintf(static_cast<char*>(g_sink), sizeof(text), "%d", static_cast<int>(g_size));
#else
#error "KILN_CANARY selects the allocation to try: 0 (none) to 8"
#endif
  return 0;
}
