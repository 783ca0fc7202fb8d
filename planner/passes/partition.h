// Partitioning: which device runs each node, and in which order.
//
//   1. Every node goes to the first target in preference order whose backend
//      supports it (the CPU supports everything the planner can lower). A
//      node no listed target supports is an error naming the node and each
//      target's reason. `--place NODE=DEVICE` pins a node.
//   2. Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) cost
//      nothing: they follow the device of the value they view, so no copy is
//      made to reshape bytes on another device.
//   3. The schedule is a topological order that stays on one device as long
//      as it can (among ready nodes, one on the device of the last scheduled
//      node first), so each device's nodes form maximal runs; the emitter
//      turns each run of device kernels into one delegate call.
//
// Device propagation then happens during lowering (lower/lowerer.h): every
// tensor lives on the device of its producer, and a reader on another
// device gets a copy.

#ifndef KILN_PLANNER_PASSES_PARTITION_H_
#define KILN_PLANNER_PASSES_PARTITION_H_

#include <map>
#include <string>
#include <vector>

#include "ir/device_plan.h"
#include "ir/graph.h"
#include "lower/program.h"
#include "targets/target.h"

namespace kiln::planner {

struct PartitionOptions {
  std::vector<TargetDevice> targets;
  // Node name -> device ("vulkan:1"); the device must be one of the targets.
  std::map<std::string, std::string> placements;
  bool device_io = false;
};

// An empty plan (everything on the CPU, topological order) when the only
// target is the CPU.
DevicePlan partition(const Graph& graph, const PartitionOptions& options);

// After lowering: moves each copy into a device to the start of the run of
// that device's kernels it feeds, so one delegate call covers the run.
void cluster_copies(LMethod& method);

// Removes a device-to-host copy followed by a host-to-device copy of the
// same bytes back to the same device: the reader uses the device original.
// Returns how many copies were removed.
int remove_round_trips(LMethod& method);

// Drops tensors nothing refers to any more (after copies and views were
// removed) and renumbers the rest, so no arena reserves bytes for them.
void compact_tensors(LMethod& method);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_PARTITION_H_
