// Memory regions: a device's memory in parts of different speed (a few tens
// of KB of tightly coupled memory, SRAM, megabytes of PSRAM), each planned
// as an arena of its own that the application places in that memory
// (`kiln plan --memory-region NAME:SIZE[:SPEED]`, `kiln pack --section`).
//
// Traffic is the model of cost: the bytes one run reads and writes in a
// tensor's memory, counted per instruction operand (an input read once, an
// output or scratch tensor written once, each its whole byte size; an alias
// counts for its base). It counts what the kernels touch, not what a cache
// or a DMA engine makes of it, and not the constants, which stay where the
// program is.
//
// Assignment, region by region from the fastest (regions of one speed in
// the order given), over the planned host tensors of ordinary arenas (roots
// of alias chains; symmetric and device arenas are not regions):
//   1. order the tensors by traffic per byte, highest first (ties: the
//      shorter lifetime, then the smaller, then the first made);
//   2. take each in turn into the region while the bytes live at every
//      instruction of its lifetime (sizes aligned: the region's lower bound)
//      stay within the region's capacity;
//   3. plan the region (first fit, or the algorithm asked for when it is a
//      greedy one); while the plan exceeds the capacity (fragmentation),
//      give back the last tensor taken and plan again;
//   4. the last region takes every tensor left.
// Each region is then planned with the options given (the search is never
// worse than first fit, so a region that fitted still does); a region whose
// plan exceeds its capacity fails the plan with the region's name and the
// bytes over.

#ifndef KILN_PLANNER_MEMORY_REGIONS_H_
#define KILN_PLANNER_MEMORY_REGIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lower/program.h"
#include "memory/problem.h"

namespace kiln::planner::memory {

enum class RegionSpeed { kFast = 0, kNormal = 1, kSlow = 2 };

// "fast", "normal", "slow"
const char* region_speed_name(RegionSpeed speed);

struct MemoryRegion {
  std::string name;
  uint64_t capacity = 0;  // bytes
  RegionSpeed speed = RegionSpeed::kNormal;
};

struct Lifetimes;

// Bytes each tensor's memory is read and written over one run, per root
// tensor (aliases count for their base; see the header).
std::vector<uint64_t> tensor_traffic(const LMethod& method);

// Whether tensor t goes into a region at all: planned host memory of an
// ordinary arena (not a symmetric operand, not a constant uploaded at load).
bool region_candidate(const LTensor& t);

// The region (index into `regions`) of every candidate tensor, -1 for the
// others. `algorithm` is the one the final plan uses.
std::vector<int> assign_regions(const LMethod& method, const Lifetimes& lifetimes,
                                const std::vector<MemoryRegion>& regions, uint32_t alignment, Algorithm algorithm);

// Hot constants (`kiln plan --hot-constants`): after every region is
// planned, the room a fast region has left (its capacity less its plan)
// takes copies of constants, made once at load by a load-time copy and read
// by the kernels instead of the program's copy (in flash, on a
// microcontroller). Constants read by CPU kernels, most reads per byte
// first (a constant read by three kernels before one read once), then the
// smaller; each takes the next aligned offset after the plan while it fits,
// so no planned tensor moves and the copies live for the whole method. A
// region's traffic then counts those reads too.
void copy_hot_constants(LMethod& method, const std::vector<MemoryRegion>& regions, uint32_t alignment);

// Fails (PlanError) when a region's planned arena exceeds its capacity,
// naming the region and the bytes over.
void check_region_capacity(const LArena& arena);

}  // namespace kiln::planner::memory

#endif  // KILN_PLANNER_MEMORY_REGIONS_H_
