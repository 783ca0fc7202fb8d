#include "pipeline.h"

#include "core/error.h"
#include "emit/emitter.h"
#include "lower/lowerer.h"
#include "passes/infer.h"
#include "verify/verifier.h"

namespace kiln::planner {

PlanResult plan_graph(Graph graph, const PlanOptions& options) {
  infer_and_fold(graph, InferOptions{});
  eliminate_dead_nodes(graph);
  PlanResult result;
  LMethod& method = lower_graph(graph, result.program, options.method_name);
  if (options.plan_io) {
    for (LTensor& t : method.tensors) {
      if (t.storage == Storage::kUser) t.user_fallback = true;
    }
  }
  memory::plan_method_memory(method, options.memory);
  result.bytes = emit_program(result.program);
  const auto errors = verify_program(result.bytes);
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += "\n  " + e;
    fail("internal error: the verifier rejected the plan:", all);
  }
  result.graph = std::move(graph);
  return result;
}

PlanResult plan_onnx_file(const std::string& path, const PlanOptions& options) {
  return plan_graph(import_onnx_file(path, options.import), options);
}

}  // namespace kiln::planner
