// Progress of long work on a terminal: one line on stderr, rewritten in
// place and erased when the work ends. Nothing at all when stderr is not a
// terminal, so logs and pipes stay clean. Not thread-safe.
//   SearchProgress  a memory search: best plan, lower bound, elapsed time
//   StepProgress    counted steps (constant folding, quantizer calibration):
//                   what, done of total, elapsed time; drawn from half a
//                   second after it was made, at most 10 times a second,
//                   and erased when done reaches total

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

class StepProgress {
 public:
  StepProgress();
  ~StepProgress();
  StepProgress(const StepProgress&) = delete;
  StepProgress& operator=(const StepProgress&) = delete;

  bool enabled() const { return enabled_; }
  // "calibrating: 37 of 128 (2.1 s)"; `what` may change between calls.
  void update(const std::string& what, size_t done, size_t total);
  void finish();

 private:
  bool enabled_;
  bool drawn_ = false;
  double start_s_ = 0, last_s_ = -1;
};

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_PROGRESS_H_
