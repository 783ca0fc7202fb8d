// The kiln subcommands. Each takes its arguments (after the subcommand name)
// and returns the process exit status; errors are thrown (PlanError: status
// 1, UsageError: status 2) and printed by main().

#ifndef KILN_PLANNER_CLI_COMMANDS_H_
#define KILN_PLANNER_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace kiln::planner::cli {

using Argv = std::vector<std::string>;

int cmd_plan(const Argv& argv);
int cmd_run(const Argv& argv);
int cmd_inspect(const Argv& argv);
int cmd_verify(const Argv& argv);
int cmd_pack(const Argv& argv);
int cmd_memplan(const Argv& argv);
int cmd_profile(const Argv& argv);
int cmd_bench(const Argv& argv);
int cmd_quantize(const Argv& argv);

// "1,234,567"
std::string group_digits(uint64_t value);

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_COMMANDS_H_
