// The options of `kiln plan` for other front ends: kiln.plan() in the Python
// package (python/) takes the same options, parsed by the same code, so the
// two never disagree about a name, a default or a message.

#ifndef KILN_PLANNER_CLI_PLAN_OPTIONS_H_
#define KILN_PLANNER_CLI_PLAN_OPTIONS_H_

#include <string>
#include <vector>

#include "cli/commands.h"
#include "pipeline.h"

namespace kiln::planner::cli {

// Parses `kiln plan` options (no model file) into PlanOptions: what
// `--input-shape x=1x3x8x8 --target cpu` means to the CLI. Throws
// UsageError (cli/args.h) for an unknown option or a bad value, PlanError
// for a --freeze file that cannot be read. The options the CLI handles
// around planning (-o, --report, --bundle-test, --test-tolerance, --help)
// are accepted and ignored.
PlanOptions plan_options_from_arguments(const Argv& argv);

// "--input-shape", "--target", ...: every option `kiln plan` takes.
std::vector<std::string> plan_option_names();

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_PLAN_OPTIONS_H_
