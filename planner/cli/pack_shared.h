// `kiln pack --shared-arena NAME A.kiln B.kiln ... -o DIR`: one buffer for
// the host arenas of every method of several programs that run one after
// another, never at the same time (firmware running a keyword spotter, then
// a classifier). Reads each program through the runtime (Program::load,
// MethodMeta) and writes DIR/NAME.h with the buffer's bytes and alignment:
// the largest method's host arenas (schema/arena_layout.h), not the sum.

#ifndef KILN_PLANNER_CLI_PACK_SHARED_H_
#define KILN_PLANNER_CLI_PACK_SHARED_H_

#include "cli/args.h"

namespace kiln::planner::cli {

// Runs the command; exit status. Throws UsageError or PlanError.
int pack_shared_arena(const Args& args);

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_PACK_SHARED_H_
