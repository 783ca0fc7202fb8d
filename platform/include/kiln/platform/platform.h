// The platform abstraction layer: the only functions of the runtime that touch
// the world outside the memory it was handed.
//
// Every function here has a weak default for POSIX hosts
// (platform/posix/platform_posix.cc). Firmware links a strong definition of
// its own (platform/mps2/ for the QEMU mps2-an386 board) or overrides single
// functions, for example to route logs to a UART.
//
// All functions may be called from any thread; the defaults are thread safe.
// None of them allocates.

#ifndef KILN_PLATFORM_PLATFORM_H_
#define KILN_PLATFORM_PLATFORM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_log_level {
  KILN_LOG_DEBUG = 0,
  KILN_LOG_INFO = 1,
  KILN_LOG_WARNING = 2,
  KILN_LOG_ERROR = 3,
} kiln_log_level;

// Called once before any other function; idempotent.
void kiln_pal_init(void);

// Writes one finished log line (no trailing newline in `message`).
// `file` and `line` name the source location, or are NULL and 0.
void kiln_pal_log(kiln_log_level level, const char* file, int line, const char* message, size_t length);

// Ends the program after an unrecoverable failure. Never returns.
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void kiln_pal_abort(void);

// A monotonic tick counter and its rate.
uint64_t kiln_pal_ticks(void);
uint64_t kiln_pal_ticks_per_second(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // KILN_PLATFORM_PLATFORM_H_
