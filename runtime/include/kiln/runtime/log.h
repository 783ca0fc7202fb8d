// Logging for the runtime and kernels. Messages are formatted into a stack
// buffer and handed to kiln_pal_log(); no allocation. Building with
// KILN_ENABLE_LOGGING=0 removes every message string from the binary (for
// firmware where flash is tight); the error codes stay.

#ifndef KILN_RUNTIME_LOG_H_
#define KILN_RUNTIME_LOG_H_

#include "kiln/platform/platform.h"

#ifndef KILN_ENABLE_LOGGING
#define KILN_ENABLE_LOGGING 1
#endif

namespace kiln {
namespace internal {

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
void log_formatted(kiln_log_level level, const char* file, int line, const char* format, ...);

}  // namespace internal
}  // namespace kiln

#if KILN_ENABLE_LOGGING
#define KILN_LOG(level, ...) ::kiln::internal::log_formatted(KILN_LOG_##level, __FILE__, __LINE__, __VA_ARGS__)
#else
#define KILN_LOG(level, ...) ((void)0)
#endif

#endif  // KILN_RUNTIME_LOG_H_
