#include "pipeline.h"

#include "core/error.h"
#include "emit/emitter.h"
#include "exec/evaluate.h"
#include "lower/lowerer.h"
#include "passes/copies.h"
#include "passes/fuse.h"
#include "passes/infer.h"
#include "passes/partition.h"
#include "targets/target.h"
#include "verify/verifier.h"

namespace kiln::planner {
namespace {

uint64_t total_first_fit_bytes(const LMethod& method) {
  uint64_t total = 0;
  for (const LArena& arena : method.arenas) total += arena.first_fit;
  return total;
}

}  // namespace

PlanResult plan_graph(Graph graph, const PlanOptions& options) {
  const KernelEvaluator evaluator{};
  InferOptions infer_options;
  infer_options.evaluator = &evaluator;
  infer_and_fold(graph, infer_options);
  eliminate_dead_nodes(graph);
  PlanResult result;
  if (options.fuse) result.fuse.batch_norms_folded = fold_batch_norms(graph);
  PartitionOptions partition_options;
  partition_options.targets = parse_targets(options.targets, options.device_counts);
  partition_options.placements = options.placements;
  partition_options.device_io = options.device_io;
  DevicePlan devices = partition(graph, partition_options);
  if (options.fuse) {
    result.fuse.biases_fused = fuse_matmul_biases(graph, devices);
    result.fuse.activations_fused = fuse_activations(graph, devices);
  }
  LMethod& method = lower_graph(graph, result.program, options.method_name, devices, options.lower);
  result.round_trips_removed = remove_round_trips(method);
  cluster_copies(method);
  if (options.plan_io) {
    for (LTensor& t : method.tensors) {
      if (t.storage == Storage::kUser) t.user_fallback = true;
    }
  }
  compact_tensors(method);
  memory::MethodPlanOptions memory_options = options.memory;
  memory_options.device_alignment = [](const fb::Device& device) {
    const BackendPlanner* backend = backend_planner_for(device.type());
    return backend != nullptr ? backend->arena_alignment() : 64u;
  };
  InplaceSaving& saving = result.inplace_saving;
  if (options.inplace.enabled) {
    LMethod baseline = method;
    memory::MethodPlanOptions baseline_options = memory_options;
    if (!options.compare_without_inplace) {
      saving.measure = InplaceSaving::Measure::kFirstFit;
      baseline_options.solve.algorithm = memory::Algorithm::kGreedyFirstFit;
    }
    memory::plan_method_memory(baseline, baseline_options);
    saving.without = total_arena_bytes(baseline);
    result.inplace = apply_inplace(method, options.inplace);
  }
  memory::plan_method_memory(method, memory_options);
  saving.with = saving.estimated() ? total_first_fit_bytes(method) : total_arena_bytes(method);
  if (!options.inplace.enabled) saving.without = saving.with;
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

uint64_t total_arena_bytes(const LMethod& method) {
  uint64_t total = 0;
  for (const LArena& arena : method.arenas) total += arena.size;
  return total;
}

PlanResult plan_onnx_file(const std::string& path, const PlanOptions& options) {
  return plan_graph(import_onnx_file(path, options.import), options);
}

}  // namespace kiln::planner
