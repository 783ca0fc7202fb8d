// `kiln plan --method NAME=MODEL.onnx` (repeatable): several models planned
// as the methods of one program (pipeline.h, plan_onnx_methods), and what
// the summary says about them: each method's arenas alone against the one
// buffer methods that never run at the same time share.

#ifndef KILN_PLANNER_CLI_PLAN_METHODS_H_
#define KILN_PLANNER_CLI_PLAN_METHODS_H_

#include <vector>

#include "cli/args.h"
#include "pipeline.h"

namespace kiln::planner::cli {

// The --method options in order; empty when none is given. Throws
// UsageError for a malformed one, a name given twice, or --method beside a
// positional model.
std::vector<MethodModel> parse_method_options(const Args& args);

// The arena groups of a program planned from several methods, with the
// bytes each method's host arenas take alone.
void print_arena_groups(const PlanResult& result);

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_PLAN_METHODS_H_
