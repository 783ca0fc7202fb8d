// The planner pipeline, from a model to a verified program:
//
//   import (ONNX checker + shape inference)
//   -> infer static shapes, fold constants     (passes/infer)
//   -> remove dead nodes
//   -> lower to kernel calls                   (lower/, ops/)
//   -> plan memory per arena                   (memory/)
//   -> emit the .kiln bytes                    (emit/)
//   -> verify the emitted plan independently   (verify/)

#ifndef KILN_PLANNER_PIPELINE_H_
#define KILN_PLANNER_PIPELINE_H_

#include <string>

#include "ir/graph.h"
#include "lower/program.h"
#include "memory/method_plan.h"
#include "onnx/import.h"

namespace kiln::planner {

struct PlanOptions {
  ImportOptions import;
  memory::MethodPlanOptions memory;
  // Give method inputs and outputs fallback memory in the arena, so a method
  // runs without the application binding them.
  bool plan_io = false;
  std::string method_name = "forward";
};

struct PlanResult {
  Graph graph;         // after folding and dead-node removal
  LProgram program;    // lowered and planned
  std::string bytes;   // the .kiln file
};

// Throws PlanError (or UnsupportedError) with a message naming the file,
// node or tensor at fault; also when the verifier rejects the plan.
PlanResult plan_onnx_file(const std::string& path, const PlanOptions& options);
PlanResult plan_graph(Graph graph, const PlanOptions& options);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PIPELINE_H_
