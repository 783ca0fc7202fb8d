// Copy passes: after lowering, the copies that keep devices apart (made by
// lower/lowerer.h, one per tensor and device) are cleaned up so each device
// gets few, large delegate calls and no bytes travel twice.
//
//   1. remove_round_trips: a device-to-host copy followed by a host-to-device
//      copy of the same bytes back to the same device goes; the reader uses
//      the device original.
//   2. cluster_copies: each copy into a device moves up to the start of the
//      run of that device's kernels it feeds, so one delegate call covers
//      the run.
//   3. compact_tensors: tensors nothing refers to any more (after copies and
//      views were removed) are dropped, so no arena reserves bytes for them.
//
// Each rewrites one LMethod in place; run them in that order, before the
// in-place pass and memory planning.

#ifndef KILN_PLANNER_PASSES_COPIES_H_
#define KILN_PLANNER_PASSES_COPIES_H_

#include "lower/program.h"

namespace kiln::planner {

// Returns how many copies were removed.
int remove_round_trips(LMethod& method);

void cluster_copies(LMethod& method);

// Renumbers the tensors that stay.
void compact_tensors(LMethod& method);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_COPIES_H_
