// File helpers for the host tools: whole-file reads with clear errors, and
// writes that never leave a half-written file behind (write a temporary file
// beside the target, then rename it into place).

#ifndef KILN_PLANNER_CORE_FILE_UTIL_H_
#define KILN_PLANNER_CORE_FILE_UTIL_H_

#include <string>

namespace kiln::planner {

// Throws PlanError naming `path` when it cannot be read.
std::string read_file(const std::string& path);
// Writes `data` to `path` atomically; throws PlanError on failure and leaves
// no file (neither `path` nor a temporary) behind.
void write_file_atomic(const std::string& path, const std::string& data);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_CORE_FILE_UTIL_H_
