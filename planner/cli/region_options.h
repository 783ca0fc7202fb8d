// kiln plan's memory-region options (--memory-region NAME:SIZE[:SPEED],
// --memory-regions FILE) and the per-region lines of its summary.

#ifndef KILN_PLANNER_CLI_REGION_OPTIONS_H_
#define KILN_PLANNER_CLI_REGION_OPTIONS_H_

#include <string>
#include <vector>

#include "cli/args.h"
#include "lower/program.h"
#include "memory/regions.h"

namespace kiln::planner::cli {

// The help lines of the options.
const char* region_options_help();

// "tcm:64K:fast" -> {tcm, 65536, fast}; throws UsageError.
memory::MemoryRegion parse_memory_region(const std::string& spec);

// Every --memory-region, then the lines of each --memory-regions FILE
// (one NAME:SIZE[:SPEED] or NAME SIZE [SPEED] a line, # comments); names
// must differ. Throws UsageError.
std::vector<memory::MemoryRegion> parse_region_options(const Args& args);

// Each region's speed, capacity, planned bytes, lower bound and traffic,
// and the slowest regions' traffic against everything there.
void print_regions(const LMethod& method);

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_REGION_OPTIONS_H_
