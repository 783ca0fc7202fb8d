// DevicePlan: where each node of a Graph runs and in which order. The
// partitioner makes it (passes/partition.h), the graph passes after it keep
// it in step with the graph (passes/fuse.h), and lowering reads it
// (lower/lowerer.h). It sits beside the graph rather than in either stage,
// so neither lower/ nor passes/ includes the other to pass it along.

#ifndef KILN_PLANNER_IR_DEVICE_PLAN_H_
#define KILN_PLANNER_IR_DEVICE_PLAN_H_

#include <vector>

#include "kiln/schema/program_generated.h"

namespace kiln::planner {

struct DevicePlan {
  std::vector<fb::Device> node_device;  // per node; empty: all on the CPU
  std::vector<int> order;               // node schedule; empty: topological order
  // Graph inputs live on the device of their first reader, outputs stay on
  // the device that produced them (for applications that bind device memory).
  bool device_io = false;
};

}  // namespace kiln::planner

#endif  // KILN_PLANNER_IR_DEVICE_PLAN_H_
