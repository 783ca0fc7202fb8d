// The runtime's log lines, caught for Python's exceptions. The module
// defines kiln_pal_log (kiln/platform/platform.h) over the POSIX default:
// while a LogCapture lives on a thread, the warnings and errors that thread
// logs are kept (the message of the exception a failed call raises) instead
// of written to stderr; everything else goes to stderr as the default
// writes it. Lines logged on other threads (thread-pool workers) are never
// caught.

#ifndef KILN_PYTHON_LOG_CAPTURE_H_
#define KILN_PYTHON_LOG_CAPTURE_H_

#include <string>
#include <vector>

namespace kiln::python {

class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The lines caught so far, joined by "; " ("" when none).
  std::string text() const;
  void add(std::string line) { lines_.push_back(std::move(line)); }

 private:
  std::vector<std::string> lines_;
  LogCapture* outer_;
};

}  // namespace kiln::python

#endif  // KILN_PYTHON_LOG_CAPTURE_H_
