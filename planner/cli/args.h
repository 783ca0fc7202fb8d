// Command-line parsing for the kiln subcommands: positional arguments and
// --options, each declared with whether it takes a value. Unknown options and
// missing values are errors with a usage hint.

#ifndef KILN_PLANNER_CLI_ARGS_H_
#define KILN_PLANNER_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::planner::cli {

struct OptionSpec {
  std::string name;  // "--input", "-o"
  bool takes_value;
  // A flag that may also carry a value written `--name=VALUE` (never the
  // next argument): `--profile` or `--profile=FILE`.
  bool optional_value = false;
};

class Args {
 public:
  // Throws UsageError.
  Args(const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs);

  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> all(const std::string& name) const;
  double get_double(const std::string& name, double fallback) const;
  long get_int(const std::string& name, long fallback) const;

 private:
  std::vector<std::string> positional_;
  std::multimap<std::string, std::string> values_;
};

// One dimension given as MIN:MAX (parse_bounded_dims).
struct DimBound {
  uint32_t axis = 0;
  int64_t min = 1;
  int64_t max = 1;
};

// A mistake in how the command was called (exit status 2).
struct UsageError {
  std::string message;
};

// "1x3x224x224" (or "1,3,224,224"); UsageError naming `what` otherwise.
std::vector<int64_t> parse_dims(const std::string& text, const std::string& what);
// The same, where a dimension may be MIN:MAX ("1:8x3x224x224"): returns the
// dimensions at their largest and appends each bounded one to `out_bounds`.
std::vector<int64_t> parse_bounded_dims(const std::string& text, const std::string& what,
                                        std::vector<DimBound>* out_bounds);
// "NAME=VALUE" of `option`; UsageError otherwise.
std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& option);

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_ARGS_H_
