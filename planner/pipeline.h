// The planner pipeline, from a model to a verified program:
//
//   import (ONNX checker + shape inference)
//   -> infer static shapes, fold constants     (passes/infer)
//   -> remove dead nodes
//   -> fold BatchNormalization into Conv       (passes/fuse)
//   -> partition across targets                (passes/partition, targets/)
//   -> fuse biases into MatMul, activations     (passes/fuse)
//      into their producer
//   -> lower to kernel calls, with copies      (lower/, ops/)
//      where a tensor crosses devices
//   -> remove copy round trips, cluster copies (passes/copies)
//   -> in-place reuse and views                (passes/inplace)
//   -> plan memory per arena                   (memory/)
//   -> emit the .kiln bytes                    (emit/)
//   -> verify the emitted plan independently   (verify/)

#ifndef KILN_PLANNER_PIPELINE_H_
#define KILN_PLANNER_PIPELINE_H_

#include <map>
#include <string>

#include "ir/graph.h"
#include "lower/lowerer.h"
#include "lower/program.h"
#include "memory/method_plan.h"
#include "onnx/import.h"
#include "passes/fuse.h"
#include "passes/inplace.h"

namespace kiln::planner {

struct PlanOptions {
  ImportOptions import;
  memory::MethodPlanOptions memory;
  // Give method inputs and outputs fallback memory in the arena, so a method
  // runs without the application binding them.
  bool plan_io = false;
  InplaceOptions inplace;
  // Fold BatchNormalization into Conv and activations into their producer.
  bool fuse = true;
  LowerOptions lower;
  std::string method_name = "forward";
  // Devices in order of preference ("vulkan:0,cpu"); see targets/target.h.
  std::string targets = "cpu";
  std::map<std::string, int> device_counts;
  // Node name -> device it must run on.
  std::map<std::string, std::string> placements;
  // Method inputs and outputs stay on the device that reads or writes them.
  bool device_io = false;
};

struct PlanResult {
  Graph graph;         // after folding and dead-node removal
  LProgram program;    // lowered and planned
  std::string bytes;   // the .kiln file
  InplaceStats inplace;
  FuseStats fuse;
  int round_trips_removed = 0;
  // Total arena bytes of the same plan without in-place reuse (equal to the
  // planned total when reuse is off).
  uint64_t arena_bytes_without_inplace = 0;
};

// Sum of the sizes of a method's arenas.
uint64_t total_arena_bytes(const LMethod& method);

// Throws PlanError (or UnsupportedError) with a message naming the file,
// node or tensor at fault; also when the verifier rejects the plan.
PlanResult plan_onnx_file(const std::string& path, const PlanOptions& options);
PlanResult plan_graph(Graph graph, const PlanOptions& options);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PIPELINE_H_
