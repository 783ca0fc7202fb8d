// The planner pipeline, from a model to a verified program:
//
//   import (ONNX checker)
//   -> infer static shapes, fold constants     (passes/infer), then
//      within a budget (beyond it, run time);
//      ONNX shape inference as a cross-check
//      of the shapes it accepted
//   -> remove dead nodes
//   -> fold BatchNormalization into Conv       (passes/fuse)
//   -> with --tensor-parallel N: one graph per  (passes/tensor_parallel)
//      rank; each is lowered, the lowerings must
//      agree, and rank 0's is planned with the
//      other ranks' constants beside its own
//   -> partition across targets                (passes/partition, targets/)
//   -> fuse biases into MatMul, activations     (passes/fuse)
//      into their producer
//   -> lower to kernel calls, with copies      (lower/, ops/)
//      where a tensor crosses devices
//   -> remove copy round trips, cluster copies (passes/copies)
//   -> 16-bit storage on devices, with Casts   (passes/precision)
//      where it meets FP32 (--precision fp16|bf16)
//   -> in-place reuse and views                (passes/inplace)
//   -> symmetric placement of collective inputs (passes/symmetric)
//   -> with bounded inputs: lowered again at   (passes/bounds)
//      sample sizes, each extent that varies
//      written as a formula of the bounds
//   -> plan memory per arena                   (memory/)
//   -> one-shot or two-shot all-reduce kernels (passes/all_reduce), with
//      for device collectives                   their signal words
//   -> emit the .kiln bytes                    (emit/)
//   -> verify the emitted plan independently   (verify/)

#ifndef KILN_PLANNER_PIPELINE_H_
#define KILN_PLANNER_PIPELINE_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/program.h"
#include "memory/method_plan.h"
#include "onnx/import.h"
#include "ops/lowering_context.h"
#include "passes/all_reduce.h"
#include "passes/bounds.h"
#include "passes/fuse.h"
#include "passes/infer.h"
#include "passes/inplace.h"
#include "passes/precision.h"
#include "passes/qdq.h"
#include "passes/symmetric.h"
#include "passes/tensor_parallel.h"

namespace kiln::planner {

struct PlanOptions {
  ImportOptions import;
  // Input dimensions bounded above (`--input-shape x=1:8x...`; their max is
  // in import.input_shapes): see passes/bounds.h. One model, CPU only.
  std::vector<InputBound> bounds;
  // How much constant data folding may make (passes/infer.h); what exceeds
  // it runs at run time.
  FoldBudget fold_budget;
  // Called as inference and folding visit the nodes (InferOptions::progress).
  std::function<void(size_t done, size_t total)> fold_progress;
  memory::MethodPlanOptions memory;
  // Give method inputs and outputs fallback memory in the arena, so a method
  // runs without the application binding them.
  bool plan_io = false;
  // Method inputs read only by a QuantizeLinear and outputs written only by
  // a DequantizeLinear carry the quantized values instead (passes/qdq.h).
  bool quantized_io = false;
  InplaceOptions inplace;
  // Fold BatchNormalization into Conv and activations into their producer.
  bool fuse = true;
  LowerOptions lower;
  std::string method_name = "forward";
  // Devices in order of preference ("vulkan:0,cpu"); see targets/target.h.
  std::string targets = "cpu";
  // Arithmetic of device delegates: "fp32" (default), "tf32" (TF32 tensor
  // cores on FP32 storage), "fp16", "bf16"; a device backend that cannot
  // refuses the plan (check_precision); on the CPU bf16 means BF16 weights
  // for the packed products (LowerOptions::bf16_weights).
  std::string precision = "fp32";
  // With fp16/bf16: model nodes whose device kernels stay FP32 beside the
  // ops known to need it (passes/precision.h).
  std::set<std::string> keep_fp32;
  std::map<std::string, int> device_counts;
  // Node name -> device it must run on.
  std::map<std::string, std::string> placements;
  // Method inputs and outputs stay on the device that reads or writes them.
  bool device_io = false;
  // Write tensor and instruction names into the program (EmitOptions).
  bool names = true;
  // Report what in-place reuse saved against a second, full memory plan of
  // the method without reuse (doubles planning time); otherwise the saving
  // is a first-fit estimate (InplaceSaving).
  bool compare_without_inplace = false;
  // Ranks running the program together: the size of communicator group 0,
  // over which imported AllReduce nodes reduce.
  uint32_t ranks = 1;
  // Split the graph's linear layers across this many ranks (0 or 1: off);
  // sets `ranks`.
  uint32_t tensor_parallel = 0;
  // How all-reduces on a device run (kiln plan --allreduce;
  // passes/all_reduce.h).
  AllReduceMode all_reduce = AllReduceMode::kAuto;
};

// What in-place reuse saved, in total arena bytes, measured one of two ways:
//   kPlanned   the method without reuse planned exactly like the real plan
//              (PlanOptions::compare_without_inplace); `with` is the real
//              plan's total. Also the measure when reuse is off (no saving).
//   kFirstFit  an estimate without a second search: the method without
//              reuse planned by greedy first fit, against the first fit of
//              the real plan's arenas (LArena::first_fit). Both sides are
//              the same algorithm, so the difference is reuse's, not the
//              search's.
struct InplaceSaving {
  enum class Measure { kPlanned, kFirstFit };
  Measure measure = Measure::kPlanned;
  uint64_t without = 0;  // arena bytes without in-place reuse
  uint64_t with = 0;     // arena bytes with it, by the same measure
  uint64_t bytes_saved() const { return without > with ? without - with : 0; }
  bool estimated() const { return measure == Measure::kFirstFit; }
};

struct PlanResult {
  std::string precision = "fp32";  // PlanOptions::precision, for the report
  PrecisionStats precision_stats;  // what 16-bit storage changed (passes/precision.h)
  Graph graph;                     // after folding and dead-node removal
  LProgram program;                // lowered and planned
  std::string bytes;               // the .kiln file
  InplaceStats inplace;
  FuseStats fuse;
  int round_trips_removed = 0;
  InplaceSaving inplace_saving;
  SymmetricStats symmetric;
  // Each collective's algorithm and why (passes/all_reduce.h).
  std::vector<AllReduceChoice> all_reduce;
  TensorParallelStats tensor_parallel;
  // QDQ patterns folded into int8 kernels, and how much of the linear work
  // runs int8 (passes/qdq.h).
  QdqStats qdq;
  Int8Share int8;
  // With PlanOptions::quantized_io: the inputs and outputs made quantized.
  QuantizedIoStats quantized_io;
  uint32_t ranks = 1;
};

// One method of a program planned from several models (`kiln plan
// --method NAME=MODEL.onnx`).
struct MethodModel {
  std::string name;
  std::string path;
};

// Plans each model as one method of one program, each lowered and planned
// on its own with `options` (its method_name replaced by the model's name).
// Byte-identical constants are stored once (the emitter's segment). Unless
// `concurrent`, the methods never run at the same time and form one arena
// group: their host arenas may share one buffer, the size of the largest
// (Program.arena_groups). `out_parts`, when given, receives each method's
// own result (its statistics; its program emptied of the method).
PlanResult plan_onnx_methods(const std::vector<MethodModel>& models, const PlanOptions& options, bool concurrent,
                             std::vector<PlanResult>* out_parts = nullptr);
// The same from graphs, each with its method name.
PlanResult plan_methods(std::vector<std::pair<std::string, Graph>> graphs, const PlanOptions& options, bool concurrent,
                        std::vector<PlanResult>* out_parts = nullptr);

// Sum of the sizes of a method's arenas.
uint64_t total_arena_bytes(const LMethod& method);

// Throws PlanError (or UnsupportedError) with a message naming the file,
// node or tensor at fault; also when the verifier rejects the plan.
PlanResult plan_onnx_file(const std::string& path, const PlanOptions& options);
// The same from a serialized ModelProto; `what` names it in messages.
PlanResult plan_onnx_bytes(const std::string& bytes, const std::string& what, const PlanOptions& options);
PlanResult plan_graph(Graph graph, const PlanOptions& options);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_PIPELINE_H_
