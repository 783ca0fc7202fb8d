// Planner errors. The planner is a host tool: it reports a failure by
// throwing PlanError with one message for a person, naming the file, node,
// tensor or op at fault; the CLI prints it on one line and exits non-zero.

#ifndef KILN_PLANNER_CORE_ERROR_H_
#define KILN_PLANNER_CORE_ERROR_H_

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kiln::planner {

class PlanError : public std::runtime_error {
 public:
  explicit PlanError(const std::string& message) : std::runtime_error(message) {}
};

// An op, dtype or attribute the planner does not support (yet). Distinct from
// PlanError's other uses (malformed input) so callers such as the conformance
// runner can tell "skip: unsupported" from "fail".
class UnsupportedError : public PlanError {
 public:
  explicit UnsupportedError(const std::string& message) : PlanError(message) {}
};

// A shape-determining input was not a constant; `input` names the graph input
// that would have to be frozen (see --freeze).
class NotConstantError : public PlanError {
 public:
  NotConstantError(const std::string& message, std::string input) : PlanError(message), input_(std::move(input)) {}
  const std::string& input() const { return input_; }

 private:
  std::string input_;
};

// Concatenates its arguments with operator<<: str("node '", name, "': ", n).
template <typename... Args>
std::string str(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw PlanError(str(std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void unsupported(Args&&... args) {
  throw UnsupportedError(str(std::forward<Args>(args)...));
}

}  // namespace kiln::planner

#endif  // KILN_PLANNER_CORE_ERROR_H_
