// A data race on purpose: two threads increment one plain integer. The tsan
// stage runs it expecting ThreadSanitizer's report (tsan.catches_a_race), so
// that a stage which stopped seeing races (the sanitizer off, reports
// suppressed, the options lost) cannot pass unseen.

#include <stdio.h>

#include <thread>

namespace {
long g_counter = 0;  // plain on purpose
}

int main() {
  auto bump = [] {
    for (int i = 0; i < 100000; ++i) ++g_counter;
  };
  std::thread a(bump), b(bump);
  a.join();
  b.join();
  printf("counter %ld\n", g_counter);
  return 0;
}
