// Progress of long memory searches on a terminal: one line on stderr,
// rewritten in place (best plan, lower bound, elapsed time), and erased when
// the search ends. Nothing at all when stderr is not a terminal, so logs and
// pipes stay clean. One reporter per command; not thread-safe.

#ifndef KILN_PLANNER_CLI_PROGRESS_H_
#define KILN_PLANNER_CLI_PROGRESS_H_

#include <functional>
#include <string>

#include "memory/problem.h"

namespace kiln::planner::cli {

class SearchProgress {
 public:
  // `what` names the thing being planned ("arena 0", a file name).
  explicit SearchProgress(std::string what);
  ~SearchProgress();
  SearchProgress(const SearchProgress&) = delete;
  SearchProgress& operator=(const SearchProgress&) = delete;

  // A callback for SolveOptions::progress; empty when stderr is no terminal.
  std::function<void(const memory::Progress&)> callback();
  // Erases the line, if one was drawn.
  void finish();

 private:
  std::string what_;
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_PROGRESS_H_
