// kiln pack's memory regions: one static buffer per region of the program
// (`kiln plan --memory-region`), as large and as aligned as the region's
// arena in any method, with the linker section `--section REGION=SECTION`
// names, so a linker script places it in that memory.

#ifndef KILN_PLANNER_CLI_PACK_REGIONS_H_
#define KILN_PLANNER_CLI_PACK_REGIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime/program.h"

namespace kiln::planner::cli {

struct PackRegion {
  std::string name;     // the region's name in the program
  std::string symbol;   // the buffer's C name: ARRAY_region_NAME
  std::string macro;    // ARRAY_REGION_NAME (_SIZE, _ALIGNMENT)
  std::string section;  // "" when none was named: the buffer lands in .bss
  uint64_t size = 0;
  uint32_t alignment = 1;
};

// The program's regions, in order of first appearance, with the sections
// `specs` (REGION=SECTION) name. Fails naming a region the program lacks.
std::vector<PackRegion> pack_regions(const Program& program, const std::string& array,
                                     const std::vector<std::string>& specs);

// The header's lines (sizes, alignments, the buffers' declarations) and the
// source's (the buffers); both empty without regions.
std::string region_header_text(const std::vector<PackRegion>& regions);
std::string region_source_text(const std::vector<PackRegion>& regions);

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_PACK_REGIONS_H_
