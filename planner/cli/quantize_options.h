// The options of `kiln quantize` for other front ends: kiln.quantize() in the
// Python package takes the same options, parsed by the same code (as
// plan_options.h does for `kiln plan`).

#ifndef KILN_PLANNER_CLI_QUANTIZE_OPTIONS_H_
#define KILN_PLANNER_CLI_QUANTIZE_OPTIONS_H_

#include <string>
#include <vector>

#include "cli/commands.h"
#include "quantize/quantize.h"

namespace kiln::planner::cli {

// Parses `kiln quantize` options (no model file) into QuantizeOptions.
// Throws UsageError for an unknown option or a bad value. The options the
// CLI handles around quantizing (-o, --calibration, --report, --help) are
// accepted and ignored.
quantize::QuantizeOptions quantize_options_from_arguments(const Argv& argv);

// "--method", "--percentile", ...: every option `kiln quantize` takes.
std::vector<std::string> quantize_option_names();

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_QUANTIZE_OPTIONS_H_
