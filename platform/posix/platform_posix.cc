// Weak POSIX defaults of the platform layer: logs to stderr, ticks from
// CLOCK_MONOTONIC in nanoseconds, abort() to end. Any of them can be replaced
// by a strong definition linked into the application.

#include "kiln/platform/platform.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define KILN_WEAK __attribute__((weak))

extern "C" {

KILN_WEAK void kiln_pal_init(void) {}

KILN_WEAK void kiln_pal_log(kiln_log_level level, const char* file, int line, const char* message, size_t length) {
  static const char* const kPrefix[] = {"D", "I", "W", "E"};
  // One write() per line so lines from several threads do not interleave.
  char line_buffer[1024];
  size_t n = 0;
  auto put = [&](const char* s, size_t len) {
    for (size_t i = 0; i < len && n + 1 < sizeof(line_buffer); ++i) line_buffer[n++] = s[i];
  };
  auto put_cstr = [&](const char* s) {
    size_t len = 0;
    while (s[len] != '\0') ++len;
    put(s, len);
  };
  put("[kiln ", 6);
  put_cstr(kPrefix[static_cast<int>(level) & 3]);
  if (file != nullptr) {
    put(" ", 1);
    const char* base = file;
    for (const char* p = file; *p != '\0'; ++p) {
      if (*p == '/') base = p + 1;
    }
    put_cstr(base);
    char digits[16];
    int d = 0;
    unsigned value = line < 0 ? 0u : static_cast<unsigned>(line);
    do {
      digits[d++] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0 && d < 15);
    put(":", 1);
    while (d > 0) put(&digits[--d], 1);
  }
  put("] ", 2);
  put(message, length);
  put("\n", 1);
  ssize_t ignored = write(2, line_buffer, n);
  (void)ignored;
}

KILN_WEAK void kiln_pal_abort(void) { abort(); }

KILN_WEAK uint64_t kiln_pal_ticks(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

KILN_WEAK uint64_t kiln_pal_ticks_per_second(void) { return 1000000000ull; }

}  // extern "C"
