#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"

namespace kiln::planner::cli {

SearchProgress::SearchProgress(std::string what) : what_(std::move(what)), enabled_(isatty(STDERR_FILENO) == 1) {}

SearchProgress::~SearchProgress() { finish(); }

std::function<void(const memory::Progress&)> SearchProgress::callback() {
  if (!enabled_) return {};
  return [this](const memory::Progress& p) {
    const double ratio = p.lower_bound ? static_cast<double>(p.best) / static_cast<double>(p.lower_bound) : 1.0;
    std::fprintf(stderr, "\r\033[K  searching %s: best %s bytes (%.4f x LB %s), %.1f s, %s nodes", what_.c_str(),
                 group_digits(p.best).c_str(), ratio, group_digits(p.lower_bound).c_str(), p.elapsed_s,
                 group_digits(p.nodes).c_str());
    std::fflush(stderr);
    drawn_ = true;
  };
}

void SearchProgress::finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace kiln::planner::cli
