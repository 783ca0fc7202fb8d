#include "cli/progress.h"

#include <unistd.h>

#include <chrono>
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

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

StepProgress::StepProgress() : enabled_(isatty(STDERR_FILENO) == 1), start_s_(now_s()) {}

StepProgress::~StepProgress() { finish(); }

void StepProgress::update(const std::string& what, size_t done, size_t total) {
  if (!enabled_) return;
  if (done >= total) return finish();
  const double now = now_s();
  if (now - start_s_ < 0.5 || now - last_s_ < 0.1) return;
  last_s_ = now;
  std::fprintf(stderr, "\r\033[K  %s: %zu of %zu (%.1f s)", what.c_str(), done, total, now - start_s_);
  std::fflush(stderr);
  drawn_ = true;
}

void StepProgress::finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace kiln::planner::cli
