#include "pipeline.h"

#include <optional>

#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/file_util.h"
#include "emit/emitter.h"
#include "exec/evaluate.h"
#include "lower/lowerer.h"
#include "passes/all_reduce.h"
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

void fold(Graph& graph, const PlanOptions& options) {
  const KernelEvaluator evaluator{};
  InferOptions infer_options;
  infer_options.evaluator = &evaluator;
  infer_options.budget = options.fold_budget;
  infer_options.progress = options.fold_progress;
  infer_and_fold(graph, infer_options);
  eliminate_dead_nodes(graph);
}

// --precision fp16|bf16: device tensors in 16 bits (passes/precision.h).
void store_precision(LMethod& method, PlanResult& result, const PlanOptions& options) {
  PrecisionOptions precision;
  precision.precision = options.precision;
  precision.keep_fp32 = options.keep_fp32;
  result.precision_stats = store_16bit(method, result.program, precision);
  // The CPU's BF16 products: a kernel whose input 1 is a BF16 constant
  // there is one (the packed weights of LowerOptions::bf16_weights).
  for (const LInstruction& instruction : method.instructions) {
    if (instruction.kind != LInstruction::Kind::kKernel || instruction.inputs.size() < 2 || instruction.inputs[1] < 0) {
      continue;
    }
    const LTensor& weights = method.tensors[instruction.inputs[1]];
    if (weights.device.type() == fb::DeviceType::CPU && weights.storage == Storage::kConstant &&
        weights.dtype == DType::BFLOAT16) {
      ++result.precision_stats.cpu_bf16_products;
      result.precision_stats.cpu_bf16_weight_bytes += 2 * static_cast<uint64_t>(shape_numel(weights.shape));
    }
  }
  if (!result.precision_stats.named_unknown.empty()) {
    std::string names;
    for (const std::string& n : result.precision_stats.named_unknown) names += (names.empty() ? "'" : ", '") + n + "'";
    fail("--keep-fp32: no device kernel comes from node ", names,
         " (it keeps FP32 only nodes that run on a device, with --precision fp16 or bf16)");
  }
}

// A method lowered and placed, before memory planning; `baseline` is the
// same method without in-place reuse (to measure what reuse saved).
struct Lowered {
  PlanResult result;
  std::optional<LMethod> baseline;
};

Lowered lower_stage(Graph graph, const PlanOptions& options) {
  fold(graph, options);
  Lowered lowered;
  PlanResult& result = lowered.result;
  // Folding leaves DequantizeLinear alone (its weights stay int8 for this
  // pass); the pass folds the constant ones it does not use into floats.
  const KernelEvaluator evaluator{};
  result.qdq = fold_qdq(graph, &evaluator);
  if (result.qdq.total() > 0) fold(graph, options);
  if (options.quantized_io) result.quantized_io = quantize_io(graph);
  result.int8 = int8_share(graph);
  result.ranks = graph.ranks;
  if (options.fuse) result.fuse.batch_norms_folded = fold_batch_norms(graph);
  PartitionOptions partition_options;
  partition_options.targets = parse_targets(options.targets, options.device_counts);
  check_precision(options.precision, partition_options.targets);
  result.precision = options.precision;
  partition_options.placements = options.placements;
  partition_options.device_io = options.device_io;
  DevicePlan devices = partition(graph, partition_options);
  if (options.fuse) {
    result.fuse.biases_fused = fuse_matmul_biases(graph, devices);
    fuse_gated_activations(graph, devices, &result.fuse);
    // The affine map is applied as the product packs B: without packing
    // scratch there is no packing to apply it in.
    if (options.lower.packing_scratch) fuse_input_affines(graph, devices, &result.fuse);
    fuse_activations(graph, devices, &result.fuse);
  }
  LowerOptions lower = options.lower;
  lower.bf16_weights = options.precision == "bf16";
  LMethod& method = lower_graph(graph, result.program, options.method_name, devices, lower);
  result.round_trips_removed = remove_round_trips(method);
  cluster_copies(method);
  store_precision(method, result, options);
  if (options.fuse) result.fuse.all_reduce_addends = fuse_all_reduce_addends(method);
  if (options.plan_io) {
    for (LTensor& t : method.tensors) {
      if (t.storage == Storage::kUser) t.user_fallback = true;
    }
  }
  compact_tensors(method);
  if (options.inplace.enabled) {
    lowered.baseline = method;
    place_symmetric(*lowered.baseline);
    result.inplace = apply_inplace(method, options.inplace);
  }
  result.symmetric = place_symmetric(method);
  result.graph = std::move(graph);
  return lowered;
}

// Plans the memory of the lowered method (the last of its program).
void plan_memory(Lowered& lowered, const PlanOptions& options) {
  PlanResult& result = lowered.result;
  LMethod& method = result.program.methods.back();
  memory::MethodPlanOptions memory_options = options.memory;
  memory_options.device_alignment = [](const fb::Device& device) {
    const BackendPlanner* backend = backend_planner_for(device.type());
    return backend != nullptr ? backend->arena_alignment() : 64u;
  };
  InplaceSaving& saving = result.inplace_saving;
  if (lowered.baseline) {
    memory::MethodPlanOptions baseline_options = memory_options;
    // Against one host arena: reuse's saving, not the regions'.
    baseline_options.regions.clear();
    if (!options.compare_without_inplace) {
      saving.measure = InplaceSaving::Measure::kFirstFit;
      baseline_options.solve.algorithm = memory::Algorithm::kGreedyFirstFit;
    }
    memory::plan_method_memory(*lowered.baseline, baseline_options);
    saving.without = total_arena_bytes(*lowered.baseline);
  }
  if (lowered.baseline && !memory_options.regions.empty()) {
    // Reuse's saving against one host arena on both sides, not the regions'.
    LMethod one_arena = method;
    memory::MethodPlanOptions one_options = memory_options;
    one_options.regions.clear();
    one_options.hot_constants = false;
    if (saving.estimated()) one_options.solve.algorithm = memory::Algorithm::kGreedyFirstFit;
    memory::plan_method_memory(one_arena, one_options);
    saving.with = saving.estimated() ? total_first_fit_bytes(one_arena) : total_arena_bytes(one_arena);
  }
  memory::plan_method_memory(method, memory_options);
  if (!lowered.baseline || memory_options.regions.empty()) {
    saving.with = saving.estimated() ? total_first_fit_bytes(method) : total_arena_bytes(method);
  }
  if (!lowered.baseline) saving.without = saving.with;
  // After the saving is measured: the signal words are no tensor's.
  result.all_reduce = choose_all_reduce(method, options.all_reduce);
}

void emit_and_verify(PlanResult& result, const PlanOptions& options) {
  EmitOptions emit;
  emit.names = options.names;
  emit.precision = options.precision;
  result.bytes = emit_program(result.program, emit);
  const auto errors = verify_program(result.bytes);
  if (!errors.empty()) {
    std::string all;
    for (const auto& e : errors) all += "\n  " + e;
    fail("internal error: the verifier rejected the plan:", all);
  }
}

void plan_memory_and_emit(Lowered& lowered, const PlanOptions& options) {
  plan_memory(lowered, options);
  emit_and_verify(lowered.result, options);
}

// Moves the one method of `part` into `into`, its constants appended to
// into's (the emitter stores byte-identical constants once).
void merge_method(LProgram& into, LProgram& part) {
  const int base = static_cast<int>(into.constants.size());
  for (auto& c : part.constants) into.constants.push_back(std::move(c));
  LMethod& method = part.methods.back();
  for (LTensor& t : method.tensors) {
    if (t.storage == Storage::kConstant) t.constant += base;
  }
  into.methods.push_back(std::move(method));
}

// Rank r's lowering must be rank 0's with other constant bytes: then one
// memory plan serves every rank and symmetric offsets agree by construction.
void check_same_structure(const LMethod& a, const LMethod& b, const LProgram& pa, const LProgram& pb, uint32_t rank) {
  auto differ = [&](const std::string& what) {
    fail("internal error: --tensor-parallel: rank ", rank, "'s lowering differs from rank 0's (", what, ")");
  };
  if (a.tensors.size() != b.tensors.size()) differ("tensor count");
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    if (!same_tensor(a.tensors[t], b.tensors[t])) differ("tensor '" + a.tensors[t].name + "'");
  }
  if (a.instructions.size() != b.instructions.size()) differ("instruction count");
  for (size_t i = 0; i < a.instructions.size(); ++i) {
    if (!same_instruction(a.instructions[i], b.instructions[i])) differ("instruction " + std::to_string(i));
  }
  if (a.init_instructions.size() != b.init_instructions.size()) differ("init instruction count");
  for (size_t i = 0; i < a.init_instructions.size(); ++i) {
    if (!same_instruction(a.init_instructions[i], b.init_instructions[i])) differ("init instruction");
  }
  if (pa.constants.size() != pb.constants.size()) differ("constant count");
  for (size_t c = 0; c < pa.constants.size(); ++c) {
    if (pa.constants[c]->shape != pb.constants[c]->shape || pa.constants[c]->dtype != pb.constants[c]->dtype) {
      differ("constant " + std::to_string(c) + "'s shape");
    }
  }
}

PlanResult plan_tensor_parallel(Graph graph, const PlanOptions& options) {
  fold(graph, options);
  TensorParallelStats stats;
  std::vector<Graph> graphs = shard_tensor_parallel(graph, options.tensor_parallel, &stats);
  std::vector<Lowered> ranks;
  for (Graph& g : graphs) ranks.push_back(lower_stage(std::move(g), options));
  LProgram& program = ranks[0].result.program;
  for (uint32_t r = 1; r < ranks.size(); ++r) {
    check_same_structure(program.methods.back(), ranks[r].result.program.methods.back(), program,
                         ranks[r].result.program, r);
  }
  program.rank_group = 0;
  program.rank_constants.assign(program.constants.size(), {});
  for (size_t c = 0; c < program.constants.size(); ++c) {
    bool differs = false;
    for (size_t r = 1; r < ranks.size(); ++r) {
      differs = differs || ranks[r].result.program.constants[c]->bytes != program.constants[c]->bytes;
    }
    if (!differs) continue;
    for (size_t r = 0; r < ranks.size(); ++r) program.rank_constants[c].push_back(ranks[r].result.program.constants[c]);
  }
  Lowered& lowered = ranks[0];
  plan_memory_and_emit(lowered, options);
  lowered.result.tensor_parallel = stats;
  return std::move(lowered.result);
}

// Inputs bounded above: lowered at the max without in-place reuse, again at
// every sample (passes/bounds.h), then reuse applied to the max's lowering
// with Concats of varying extent left as copies.
PlanResult plan_bounded(const onnx::ModelProto& model, const std::string& what, const PlanOptions& options) {
  if (options.tensor_parallel > 1 || options.ranks > 1) {
    fail("--input-shape MIN:MAX does not combine with --tensor-parallel or --ranks");
  }
  const std::vector<BoundSymbol> symbols = group_bounds(options.bounds, onnx_input_dim_params(model));
  if (symbols.size() > 16) fail("--input-shape: at most 16 bounded dimension names, ", symbols.size(), " given");
  PlanOptions lowering = options;
  lowering.inplace.enabled = false;
  lowering.lower.bounded = true;
  auto lower_at = [&](const std::map<std::string, std::vector<int64_t>>& shapes) {
    ImportOptions import = options.import;
    import.input_shapes = shapes;
    onnx::ModelProto copy = model;  // the import writes the shapes into it
    Graph graph = import_onnx_model(copy, what, import);
    graph.ranks = options.ranks;
    return lower_stage(std::move(graph), lowering);
  };
  Lowered lowered = lower_at(options.import.input_shapes);
  LProgram& program = lowered.result.program;
  LMethod& method = program.methods.back();
  BoundsFit fit(method, program, symbols);
  for (const std::vector<int64_t>& values : bound_samples(symbols)) {
    const Lowered sample = lower_at(shapes_at(options.import.input_shapes, symbols, values));
    fit.add_sample(values, sample.result.program.methods.back(), sample.result.program);
  }
  fit.fit(method);
  lowered.baseline.reset();
  if (options.inplace.enabled) {
    lowered.baseline = method;
    InplaceOptions inplace = options.inplace;
    inplace.varying_tensors = fit.dynamic_tensors();
    lowered.result.inplace = apply_inplace(method, inplace);
  }
  plan_memory_and_emit(lowered, options);
  return std::move(lowered.result);
}

}  // namespace

PlanResult plan_graph(Graph graph, const PlanOptions& options) {
  if (!options.bounds.empty()) fail("--input-shape MIN:MAX needs the ONNX model (plan_onnx_file)");
  if (options.tensor_parallel > 1) return plan_tensor_parallel(std::move(graph), options);
  graph.ranks = options.ranks;
  Lowered lowered = lower_stage(std::move(graph), options);
  plan_memory_and_emit(lowered, options);
  return std::move(lowered.result);
}

PlanResult plan_onnx_methods(const std::vector<MethodModel>& models, const PlanOptions& options, bool concurrent,
                             std::vector<PlanResult>* out_parts) {
  std::vector<std::pair<std::string, Graph>> graphs;
  for (const MethodModel& model : models) graphs.emplace_back(model.name, import_onnx_file(model.path, options.import));
  return plan_methods(std::move(graphs), options, concurrent, out_parts);
}

PlanResult plan_methods(std::vector<std::pair<std::string, Graph>> graphs, const PlanOptions& options, bool concurrent,
                        std::vector<PlanResult>* out_parts) {
  if (graphs.empty()) fail("no methods to plan");
  if (options.tensor_parallel > 1) fail("--tensor-parallel plans one method; it does not combine with --method");
  if (!options.bounds.empty()) fail("--input-shape MIN:MAX plans one model; it does not combine with --method");
  PlanResult combined;
  for (auto& [name, graph] : graphs) {
    for (const LMethod& m : combined.program.methods) {
      if (m.name == name) fail("method '", name, "' is named twice");
    }
    PlanOptions method_options = options;
    method_options.method_name = name;
    graph.ranks = options.ranks;
    Lowered lowered = lower_stage(std::move(graph), method_options);
    plan_memory(lowered, method_options);
    merge_method(combined.program, lowered.result.program);
    combined.ranks = lowered.result.ranks;
    for (const AllReduceChoice& c : lowered.result.all_reduce) combined.all_reduce.push_back(c);
    if (out_parts != nullptr) out_parts->push_back(std::move(lowered.result));
  }
  if (!concurrent && graphs.size() > 1) {
    std::vector<int> group;
    for (size_t m = 0; m < graphs.size(); ++m) group.push_back(static_cast<int>(m));
    combined.program.arena_groups.push_back(group);
  }
  emit_and_verify(combined, options);
  return combined;
}

uint64_t total_arena_bytes(const LMethod& method) {
  uint64_t total = 0;
  for (const LArena& arena : method.arenas) total += arena.size;
  return total;
}

PlanResult plan_onnx_bytes(const std::string& bytes, const std::string& what, const PlanOptions& options) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) {
    fail(what, ": not an ONNX model (protobuf parse failed; truncated or not ONNX)");
  }
  if (!options.bounds.empty()) return plan_bounded(model, what, options);
  return plan_graph(import_onnx_model(model, what, options.import), options);
}

PlanResult plan_onnx_file(const std::string& path, const PlanOptions& options) {
  if (!options.bounds.empty()) return plan_onnx_bytes(read_file(path), path, options);
  return plan_graph(import_onnx_file(path, options.import), options);
}

}  // namespace kiln::planner
