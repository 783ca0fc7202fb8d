// Partitioning: which device runs each node, and in which order.
//
//   1. Every node goes to the first target in preference order whose backend
//      supports it (the CPU supports everything the planner can lower). A
//      node no listed target supports is an error naming the node and each
//      target's reason. `--place NODE=DEVICE` pins a node.
//   2. Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) cost
//      nothing: they follow the device of the value they view, so no copy is
//      made to reshape bytes on another device. Collectives (AllReduce)
//      follow the device that produces what they reduce, where that
//      device's backend runs collectives (BackendPlanner::runs_collectives;
//      the CPU always does): a program planned for a GPU reduces on it.
//   3. The schedule is a topological order that stays on one device as long
//      as it can (among ready nodes, one on the device of the last scheduled
//      node first), so each device's nodes form maximal runs; the emitter
//      turns each run of device kernels into one delegate call.
//
// Device propagation then happens during lowering (lower/lowerer.h): every
// tensor lives on the device of its producer, and a reader on another
// device gets a copy; passes/copies.h tidies those copies afterwards.

#ifndef KILN_PLANNER_PASSES_PARTITION_H_
#define KILN_PLANNER_PASSES_PARTITION_H_

#include <map>
#include <string>
#include <vector>

#include "ir/device_plan.h"
#include "ir/graph.h"
#include "targets/target.h"

namespace kiln::planner {

struct PartitionOptions {
  std::vector<TargetDevice> targets;
  // Node name -> device ("vulkan:1"); the device must be one of the targets.
  std::map<std::string, std::string> placements;
  bool device_io = false;
};

// An empty plan (everything on the CPU, topological order) when the only
// target is the CPU and no node is placed.
DevicePlan partition(const Graph& graph, const PartitionOptions& options);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PASSES_PARTITION_H_
