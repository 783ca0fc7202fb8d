#include "log_capture.h"

#include <unistd.h>

#include "kiln/platform/platform.h"

namespace kiln::python {
namespace {

thread_local LogCapture* current = nullptr;

const char* base_name(const char* file) {
  const char* base = file;
  for (const char* p = file; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base;
}

}  // namespace

LogCapture::LogCapture() : outer_(current) { current = this; }

LogCapture::~LogCapture() { current = outer_; }

std::string LogCapture::text() const {
  std::string out;
  for (const std::string& line : lines_) out += (out.empty() ? "" : "; ") + line;
  return out;
}

}  // namespace kiln::python

extern "C" void kiln_pal_log(kiln_log_level level, const char* file, int line, const char* message, size_t length) {
  const std::string text(message, length);
  if (level >= KILN_LOG_WARNING && kiln::python::current != nullptr) {
    kiln::python::current->add(text);
    return;
  }
  static const char* const kPrefix[] = {"D", "I", "W", "E"};
  std::string out = std::string("[kiln ") + kPrefix[static_cast<int>(level) & 3];
  if (file != nullptr) out += std::string(" ") + kiln::python::base_name(file) + ":" + std::to_string(line);
  out += "] " + text + "\n";
  // One write() per line, as the default does, so threads do not interleave.
  const ssize_t ignored = write(2, out.data(), out.size());
  (void)ignored;
}
