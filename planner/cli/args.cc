#include "cli/args.h"

#include <cstdlib>

namespace kiln::planner::cli {

Args::Args(const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 1 && a[0] == '-' && a != "-") {
      std::string name = a, inline_value;
      bool has_inline = false;
      const size_t eq = a.find('=');
      if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
        name = a.substr(0, eq);
        inline_value = a.substr(eq + 1);
        has_inline = true;
      }
      const OptionSpec* spec = nullptr;
      for (const auto& s : specs) {
        if (s.name == name) spec = &s;
      }
      if (spec == nullptr) throw UsageError{"unknown option '" + name + "'"};
      if (!spec->takes_value) {
        if (has_inline && !spec->optional_value) throw UsageError{"option '" + name + "' takes no value"};
        if (has_inline && inline_value.empty()) throw UsageError{"option '" + name + "=' needs a value"};
        values_.emplace(name, inline_value);
        continue;
      }
      if (has_inline) {
        values_.emplace(name, inline_value);
      } else if (i + 1 < argv.size()) {
        values_.emplace(name, argv[++i]);
      } else {
        throw UsageError{"option '" + name + "' needs a value"};
      }
    } else {
      positional_.push_back(a);
    }
  }
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto range = values_.equal_range(name);
  if (range.first == range.second) return fallback;
  return std::prev(range.second)->second;
}

std::vector<std::string> Args::all(const std::string& name) const {
  std::vector<std::string> out;
  auto range = values_.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

double Args::get_double(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') throw UsageError{"option '" + name + "' needs a number, got '" + v + "'"};
  return d;
}

long Args::get_int(const std::string& name, long fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') throw UsageError{"option '" + name + "' needs an integer, got '" + v + "'"};
  return n;
}

std::vector<int64_t> parse_dims(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t next = text.find_first_of("x,", pos);
    const std::string part = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0) throw UsageError{"bad dimensions '" + text + "' for " + what};
    dims.push_back(v);
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return dims;
}

std::vector<int64_t> parse_bounded_dims(const std::string& text, const std::string& what,
                                        std::vector<DimBound>* out_bounds) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t next = text.find_first_of("x,", pos);
    const std::string part = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    const size_t colon = part.find(':');
    auto number = [&](const std::string& digits) {
      char* end = nullptr;
      const long long v = std::strtoll(digits.c_str(), &end, 10);
      if (digits.empty() || *end != '\0' || v < 0) throw UsageError{"bad dimensions '" + text + "' for " + what};
      return static_cast<int64_t>(v);
    };
    if (colon == std::string::npos) {
      dims.push_back(number(part));
    } else {
      const int64_t lo = number(part.substr(0, colon));
      const int64_t hi = number(part.substr(colon + 1));
      if (lo < 1 || hi < lo) {
        throw UsageError{"bad bound '" + part + "' for " + what + ": MIN:MAX with 1 <= MIN <= MAX"};
      }
      if (out_bounds == nullptr) throw UsageError{"bounds (MIN:MAX) are not taken here: '" + text + "' for " + what};
      out_bounds->push_back({static_cast<uint32_t>(dims.size()), lo, hi});
      dims.push_back(hi);
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return dims;
}

std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& option) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw UsageError{option + " expects NAME=VALUE, got '" + text + "'"};
  return {text.substr(0, eq), text.substr(eq + 1)};
}

}  // namespace kiln::planner::cli
