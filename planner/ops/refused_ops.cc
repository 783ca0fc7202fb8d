// Ops kiln refuses on purpose, each with the reason in its error. A static
// memory plan needs every tensor's size before the program runs:
//   - NonZero, Unique, NonMaxSuppression and Compress make outputs whose
//     length depends on the data. An upper bound (the input's size) would
//     plan the memory, but every consumer would then need a run-time length,
//     which no kernel takes; refused until one does.
//   - If, Loop and Scan run subgraphs chosen or repeated at run time; the
//     instruction list is flat and fixed. Export with the branch or loop
//     resolved (constant condition, unrolled loop) instead.
// The refusal comes from inference, so it names the node and the reason.

#include "ops/op_registry.h"

namespace kiln::planner {
namespace {

void refuse_data_dependent(OpContext& ctx) {
  ctx.not_supported(
      "the output's shape depends on the input's values, and a static memory plan needs every "
      "size before the program runs");
}

void refuse_control_flow(OpContext& ctx) {
  ctx.not_supported(
      "control flow runs subgraphs chosen at run time, and kiln's instruction list is fixed; "
      "export the model with the branch or loop resolved");
}

}  // namespace

void add_refused_ops(std::vector<OpDef>& ops) {
  for (const char* op : {"NonZero", "Unique", "NonMaxSuppression", "Compress"}) {
    ops.push_back({.op_type = op, .infer = refuse_data_dependent, .foldable = false});
  }
  for (const char* op : {"If", "Loop", "Scan"}) {
    ops.push_back({.op_type = op, .infer = refuse_control_flow, .foldable = false});
  }
}

}  // namespace kiln::planner
