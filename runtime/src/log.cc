#include "kiln/runtime/log.h"

#include <stdarg.h>
#include <stdio.h>

#include "kiln/runtime/check.h"

namespace kiln {
namespace internal {

void log_formatted(kiln_log_level level, const char* file, int line, const char* format, ...) {
  char message[256];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  if (n < 0) return;
  size_t length = static_cast<size_t>(n) < sizeof(message) ? static_cast<size_t>(n) : sizeof(message) - 1;
  kiln_pal_log(level, file, line, message, length);
}

void debug_check_failed(const char* file, int line, const char* condition) {
#if KILN_ENABLE_LOGGING
  log_formatted(KILN_LOG_ERROR, file, line, "check failed: %s", condition);
#else
  (void)file;
  (void)line;
  (void)condition;
#endif
  kiln_pal_abort();
}

}  // namespace internal
}  // namespace kiln
