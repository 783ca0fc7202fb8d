// kiln plan: ONNX model -> .kiln program, with a memory summary.

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/plan_methods.h"
#include "cli/plan_options.h"
#include "cli/progress.h"
#include "cli/region_options.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file_util.h"
#include "emit/emitter.h"
#include "emit/program_file.h"
#include "emit/self_test_file.h"
#include "exec/run.h"
#include "onnx/import.h"
#include "pipeline.h"
#include "report/plan_report.h"
#include "targets/runtime_backends.h"
#include "targets/target.h"

namespace kiln::planner::cli {
namespace {

constexpr const char* kHelp =
    "usage: kiln plan MODEL.onnx -o OUT.kiln [options]\n"
    "       kiln plan --method NAME=MODEL.onnx ... -o OUT.kiln [options]\n"
    "\n"
    "Plans MODEL.onnx into a program and prints its memory plan.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE          the program to write (required)\n"
    "  --input-shape NAME=DIMS    static shape for an input with symbolic dims (1x3x224x224);\n"
    "                             MIN:MAX bounds a dimension (1:8x3x224x224): memory is planned\n"
    "                             for MAX, the runtime binds any size in between\n"
    "  --freeze NAME=FILE         replace input NAME by the constant in FILE (.npy or .pb)\n"
    "  --fold-budget MIB          the largest constant that folding makes (default 64); all folded\n"
    "                             constants together stay within 16 times that; larger ones run at\n"
    "                             run time\n"
    "  --algo NAME                memory planning: auto (default), search, best-fit, first-fit, naive\n"
    "  --time-limit SEC           time budget of the memory search (default 10)\n"
    "  --report DIR               also write DIR/plan.json and DIR/memory.svg (the memory plan)\n"
    "  --alignment BYTES          arena alignment (default 64)\n"
    "  --plan-io                  also reserve arena memory for inputs and outputs\n"
    "  --inplace-ops LIST         ONNX ops whose outputs may reuse a dying input's bytes, and\n"
    "                             Concat, whose inputs' producers then write into it\n"
    "                             (comma-separated; default: every op whose kernel allows it, Concat)\n"
    "  --no-inplace               no in-place reuse and no views: every output gets its own bytes\n"
    "  --compare-inplace          report the bytes in-place reuse saves against a full second plan\n"
    "                             without it (doubles planning time; default: a first-fit estimate)\n"
    "  --no-packing               float Conv, Gemm and MatMul without packing scratch, int8 ones\n"
    "                             with 2 KiB blocks: smaller arenas, slower kernels (microcontrollers)\n"
    "  --threads N                the most threads the program will run on (default 4): kernels that\n"
    "                             give each thread scratch of its own (convolutions by regions, groups\n"
    "                             or packed positions, products by rows or batches, Winograd by tiles)\n"
    "                             get at most N blocks; 1 plans the smallest arenas, every kernel still\n"
    "                             split on a pool\n"
    "  --no-fuse                  every node runs as the model writes it: no BatchNormalization folded\n"
    "                             into Conv, no bias, activation or gated pattern fused into its\n"
    "                             producer, no bias or residual Add fused into an all-reduce's write\n"
    "  --quantized-io             method inputs read only by a QuantizeLinear and outputs written only by\n"
    "                             a DequantizeLinear (per tensor) take their int8/uint8 data, scale and\n"
    "                             zero point; those Q and DQ nodes go (the application passes quantized\n"
    "                             data, as TFLite Micro's int8 models take it); the rest stay float\n"
    "  --strip-names              leave tensor and instruction names out of the program (the method's\n"
    "                             inputs and outputs keep theirs), and views that only rename a tensor:\n"
    "                             a smaller program for firmware, whose messages name tensors by index\n"
    "  --target LIST              devices in order of preference, BACKEND:N or cpu (default cpu)\n"
    "  --device-count NAME=N      how many devices of a backend the target machine has\n"
    "  --place NODE=DEVICE        run a node on a given device of the target list\n"
    "  --device-io                keep method inputs and outputs on the device that reads or writes them\n"
    "  --precision P              arithmetic of device delegates: fp32 (default), tf32 (cuda: TF32 tensor\n"
    "                             cores on FP32 storage), fp16 or bf16 (cuda: device tensors stored in 16\n"
    "                             bits, half the arena bytes, FP32 accumulation; Softmax, LayerNormalization\n"
    "                             and reductions stay FP32; Casts in the delegate where 16 bits meet FP32);\n"
    "                             a device backend that cannot run it refuses the plan. On the CPU bf16\n"
    "                             packs the constant weights of Conv (one group), Gemm and MatMul in BF16\n"
    "                             and multiplies in BF16 with FP32 accumulation (AVX512-BF16; the runtime\n"
    "                             refuses such a program on a processor without it); tf32 and fp16 leave\n"
    "                             the CPU in FP32\n"
    "  --keep-fp32 NODE[,NODE]    with fp16/bf16: these model nodes' device kernels stay FP32 (repeatable)\n"
    "  --ranks N                  ranks running the program together: the group AllReduce nodes\n"
    "                             of the model reduce over (default 1)\n"
    "  --tensor-parallel N        split MatMul/Gemm pairs and attention heads across N ranks, with an\n"
    "                             AllReduce where partial results meet; one program for all ranks,\n"
    "                             each rank's weight shards in its constant segment\n"
    "  --allreduce MODE           how an AllReduce on a device (cuda) runs: auto (default: one-shot below\n"
    "                             512 KiB / ranks, two-shot from there), one-shot (every rank reads every\n"
    "                             peer's operand) or two-shot (reduce-scatter, then all-gather); the\n"
    "                             summary and plan.json say which each collective got and why\n"
    "  --bundle-test FILE         an input for a bundled self-test (once per method input, in order):\n"
    "                             the program runs on it here and OUT.kiln.test keeps the inputs and\n"
    "                             outputs, for `kiln run --self-test` or run_self_test() on a device\n"
    "  --test-tolerance X         the self-test's relative tolerance per output (default: derived\n"
    "                             from the program, 0 for integer outputs; docs/profiling.md)\n"
    "  --method NAME=MODEL        plan MODEL as method NAME of the program (repeatable, instead of\n"
    "                             one MODEL): byte-identical constants are stored once, and the\n"
    "                             methods, which never run at the same time, may share one host\n"
    "                             buffer the size of the largest's arenas\n"
    "  --concurrent-methods       the methods may run at the same time: no shared buffer\n";

// --precision: checked against the targets when planning (check_precision).
void parse_precision_option(const Args& args, PlanOptions& options) {
  options.precision = args.get("--precision", "fp32");
  if (options.precision != "fp32" && options.precision != "tf32" && options.precision != "fp16" &&
      options.precision != "bf16") {
    throw UsageError{"--precision must be fp32, tf32, fp16 or bf16"};
  }
  for (const std::string& list : args.all("--keep-fp32")) {
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = std::min(list.find(',', start), list.size());
      if (comma > start) options.keep_fp32.insert(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  if (!options.keep_fp32.empty() && options.precision != "fp16" && options.precision != "bf16") {
    throw UsageError{"--keep-fp32 goes with --precision fp16 or bf16"};
  }
}

void print_io_quantization(const char* what, const LTensor& t) {
  if (!t.quantized) return;
  std::printf("  %-6s       '%s' %s %s, scale %.9g, zero point %d\n", what, t.name.c_str(), dtype_str(t.dtype).c_str(),
              shape_str(t.shape).c_str(), static_cast<double>(t.scale), t.zero_point);
}

// How many of the method's tensors each storage holds, the constants' and
// the bookkeeping's bytes.
void print_method_counts(const LMethod& m, uint64_t constant_bytes, uint64_t bookkeeping) {
  size_t planned = 0, constants = 0, user = 0, aliases = 0;
  for (const LTensor& t : m.tensors) {
    switch (t.storage) {
      case Storage::kPlanned: ++planned; break;
      case Storage::kConstant: ++constants; break;
      case Storage::kUser: ++user; break;
      case Storage::kAlias: ++aliases; break;
    }
  }
  std::printf("  method '%s': %zu instructions, %zu inputs, %zu outputs\n", m.name.c_str(), m.instructions.size(),
              m.inputs.size(), m.outputs.size());
  std::printf("  tensors:     %zu (%zu planned, %zu constant, %zu user-provided, %zu alias)\n", m.tensors.size(),
              planned, constants, user, aliases);
  std::printf("  constants:   %s bytes\n", group_digits(constant_bytes).c_str());
  std::printf("  bookkeeping: %s bytes\n", group_digits(bookkeeping).c_str());
}

// Delegate calls and copies between devices, where the method has any.
void print_devices(const LMethod& m, size_t delegates, const PlanResult& result) {
  size_t copies = 0, copy_bytes = 0;
  for (const LInstruction& ins : m.instructions) {
    if (ins.kind != LInstruction::Kind::kCopy) continue;
    const LTensor& src = m.tensors[static_cast<size_t>(ins.inputs[0])];
    const LTensor& dst = m.tensors[static_cast<size_t>(ins.outputs[0])];
    if (same_device(src.device, dst.device)) continue;
    ++copies;
    copy_bytes += src.nbytes();
  }
  if (delegates > 0 || copies > 0 || !m.init_instructions.empty()) {
    std::printf(
        "  devices:     %zu delegate call%s, %zu cross-device cop%s (%s bytes per run), %zu constant "
        "upload%s at load; %d round trip%s removed\n",
        delegates, delegates == 1 ? "" : "s", copies, copies == 1 ? "y" : "ies", group_digits(copy_bytes).c_str(),
        m.init_instructions.size(), m.init_instructions.size() == 1 ? "" : "s", result.round_trips_removed,
        result.round_trips_removed == 1 ? "" : "s");
  }
}

// How the kernels whose backend had a choice run (a CUDA Conv: direct or
// through a GEMM), counted per kernel and device; each layer's choice and
// why are in plan.json (kernel_choices).
void print_kernel_choices(const LMethod& m) {
  std::map<std::string, std::map<std::string, int>> counts;  // "Conv on cuda:0" -> choice -> count
  for (const LInstruction& ins : m.instructions) {
    if (ins.kind == LInstruction::Kind::kKernel && !ins.choice.empty()) {
      ++counts[ins.op + " on " + device_str(ins.device)][ins.choice];
    }
  }
  for (const auto& [what, choices] : counts) {
    std::string line;
    for (const auto& [choice, n] : choices) line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + choice;
    std::printf("  kernels:     %s: %s (each layer's choice and why: plan.json kernel_choices)\n", what.c_str(),
                line.c_str());
  }
}

// --precision fp16/bf16: what 16-bit storage changed (passes/precision.h).
void print_precision(const PlanResult& result) {
  const PrecisionStats& p = result.precision_stats;
  if (p.cpu_bf16_products > 0) {
    std::printf(
        "  precision:   bf16 on the CPU: %d product%s with BF16 weights (%s bytes; AVX512-BF16 needed where it "
        "runs)\n",
        p.cpu_bf16_products, p.cpu_bf16_products == 1 ? "" : "s", group_digits(p.cpu_bf16_weight_bytes).c_str());
  }
  // The devices' line where there are device kernels (or nothing else to say).
  if (p.storage == DType::FLOAT32 || (p.kernels_16bit + p.kernels_fp32 == 0 && p.cpu_bf16_products > 0)) return;
  std::printf("  precision:   %s: %d device kernel%s on %s storage, %d kept FP32, %d cast%s, %d constant%s converted\n",
              result.precision.c_str(), p.kernels_16bit, p.kernels_16bit == 1 ? "" : "s", dtype_str(p.storage).c_str(),
              p.kernels_fp32, p.casts, p.casts == 1 ? "" : "s", p.constants_converted,
              p.constants_converted == 1 ? "" : "s");
}

// The int8 share of the linear ops, the quantized inputs and outputs.
void print_quantization(const LMethod& m, const PlanResult& result, const PlanOptions& options) {
  if (result.int8.int8_ops > 0) {
    const Int8Share& q = result.int8;
    std::string folded;
    for (const auto& [op, count] : result.qdq.folded) folded += str(folded.empty() ? "" : ", ", count, " ", op);
    std::printf("  int8:        %d of %d linear ops (%s of %s MACs, %.1f%%); QDQ folded: %s\n", q.int8_ops,
                q.linear_ops, group_digits(static_cast<uint64_t>(q.int8_macs)).c_str(),
                group_digits(static_cast<uint64_t>(q.linear_macs)).c_str(),
                q.linear_macs > 0 ? 100.0 * static_cast<double>(q.int8_macs) / static_cast<double>(q.linear_macs) : 0.0,
                folded.empty() ? "none" : folded.c_str());
  }
  for (const int t : m.inputs) print_io_quantization("input", m.tensors[static_cast<size_t>(t)]);
  for (const int t : m.outputs) print_io_quantization("output", m.tensors[static_cast<size_t>(t)]);
  if (options.quantized_io) {
    const QuantizedIoStats& q = result.quantized_io;
    std::printf("  quantized-io: %d of %d inputs, %d of %d outputs quantized\n", q.inputs, q.inputs + q.float_inputs,
                q.outputs, q.outputs + q.float_outputs);
  }
}

// Inputs bounded above: each bound and how many extents follow them.
void print_bounds(const LMethod& m) {
  if (m.symbols.empty()) return;
  std::string bounds;
  for (const LSymbol& s : m.symbols) {
    bounds +=
        str(bounds.empty() ? "" : ", ", "'", s.name, "' ", s.min, ":", s.max, " (",
            m.tensors[static_cast<size_t>(m.inputs[static_cast<size_t>(s.input)])].name, " dimension ", s.axis, ")");
  }
  std::printf("  bounded:     %s; memory planned at the maximum, %zu extents follow the bounds\n", bounds.c_str(),
              m.dynamic_dims.size());
}

// In-place reuse and fusion: what the passes saved.
void print_inplace_and_fusion(const PlanResult& result) {
  const InplaceSaving& saving = result.inplace_saving;
  std::printf(
      "  in place:    %d outputs over a dying input, %d views, %d concats removed (%d inputs written "
      "in place, %s bytes not copied); %s bytes saved against --no-inplace (%s -> %s), %s\n",
      result.inplace.outputs_in_place, result.inplace.views, result.inplace.concats_removed,
      result.inplace.concat_pieces, group_digits(result.inplace.concat_bytes).c_str(),
      group_digits(saving.bytes_saved()).c_str(), group_digits(saving.without).c_str(),
      group_digits(saving.with).c_str(),
      saving.estimated() ? "first-fit estimate (--compare-inplace plans it)" : "planned");
  const FuseStats& fuse = result.fuse;
  if (fuse.total() > 0) {
    std::string kinds;
    for (const auto& [kind, count] : fuse.activations_by_kind) {
      kinds += str(kinds.empty() ? " (" : ", ", kind, " ", count);
    }
    if (!kinds.empty()) kinds += ")";
    std::printf(
        "  fused:       %d BatchNormalization into Conv, %d bias Add into MatMul, %d activations into "
        "their producer%s; SiLU, HardSwish and GELU patterns: %d into their producer, %d into one "
        "element-wise pass; %d BatchNormalization[+Relu] ahead of a 1x1 Conv into its input; %d bias or "
        "residual Add into an all-reduce's write\n",
        fuse.batch_norms_folded, fuse.biases_fused, fuse.activations_fused, kinds.c_str(), fuse.gated_into_producer,
        fuse.gated_standalone, fuse.input_affines_fused, fuse.all_reduce_addends);
  }
}

// "cuda:0" or "cpu and cuda:0".
std::string join_devices(const std::vector<std::string>& devices) {
  std::string all;
  for (size_t i = 0; i < devices.size(); ++i)
    all += (i == 0 ? "" : i + 1 == devices.size() ? " and " : ", ") + devices[i];
  return all;
}

// The tensor-parallel split and the collectives, where there are any.
void print_ranks(const PlanResult& result) {
  if (result.tensor_parallel.row_splits > 0) {
    const TensorParallelStats& tp = result.tensor_parallel;
    std::printf(
        "  tensor-parallel: %u ranks; %d MatMul/Gemm split by columns, %d by rows (each then an "
        "AllReduce), %d Reshape head counts divided; weights %s bytes per rank of %s\n",
        result.ranks, tp.column_splits, tp.row_splits, tp.reshapes, group_digits(tp.weight_bytes_per_rank).c_str(),
        group_digits(tp.weight_bytes_total).c_str());
  }
  if (result.symmetric.collectives > 0) {
    const SymmetricStats& s = result.symmetric;
    std::printf(
        "  collectives: %d on %s over group 0 of %u rank%s; inputs in the symmetric arena: %d zero copy "
        "(%s bytes), %d method input%s copied once at entry (%s bytes), %d explicit cop%s (%s bytes)\n",
        s.collectives, join_devices(s.devices).c_str(), result.ranks, result.ranks == 1 ? "" : "s", s.zero_copy,
        group_digits(s.zero_copy_bytes).c_str(), s.input_buffers, s.input_buffers == 1 ? "" : "s",
        group_digits(s.input_buffer_bytes).c_str(), s.explicit_copies, s.explicit_copies == 1 ? "y" : "ies",
        group_digits(s.explicit_copy_bytes).c_str());
  }
  for (const AllReduceChoice& c : result.all_reduce) {
    if (c.algorithm == fb::AllReduceAlgorithm::COMMUNICATOR) continue;
    std::string adds;
    for (const std::string& add : c.fused_adds)
      adds += (adds.empty() ? "; adds fused into its write: '" : ", '") + add + "'";
    std::printf("  all-reduce:  '%s' on %s, %s bytes over %u ranks: %s kernel (%u block%s): %s%s\n", c.name.c_str(),
                c.device.c_str(), group_digits(c.bytes).c_str(), c.ranks, all_reduce_algorithm_name(c.algorithm),
                c.blocks, c.blocks == 1 ? "" : "s", c.why.c_str(), adds.c_str());
  }
}

// Where an arena peaks: the instruction and the largest few tensors live there.
void print_peak(const LMethod& m, const LArena& arena) {
  const LInstruction& peak = m.instructions[static_cast<size_t>(arena.peak_instruction)];
  std::printf("        peak at instruction %d (%s '%s'), %zu tensors live:", arena.peak_instruction,
              peak.what().c_str(), peak.name.c_str(), arena.peak_tensors.size());
  // The largest few, by size.
  std::vector<int> live = arena.peak_tensors;
  std::stable_sort(live.begin(), live.end(), [&](int x, int y) {
    return m.tensors[static_cast<size_t>(x)].nbytes() > m.tensors[static_cast<size_t>(y)].nbytes();
  });
  for (size_t k = 0; k < live.size() && k < 4; ++k) {
    const LTensor& t = m.tensors[static_cast<size_t>(live[k])];
    std::printf("%s '%s' %s", k == 0 ? "" : ",", t.name.c_str(), group_digits(t.nbytes()).c_str());
  }
  std::printf("%s\n", live.size() > 4 ? ", ..." : "");
}

void print_arenas(const LMethod& m) {
  std::printf("  %-5s %-8s %-9s %14s %14s %7s %14s  %s\n", "arena", "device", "kind", "size", "lower bound", "ratio",
              "first fit", "algorithm");
  for (size_t a = 0; a < m.arenas.size(); ++a) {
    const LArena& arena = m.arenas[a];
    const double ratio =
        arena.lower_bound ? static_cast<double>(arena.size) / static_cast<double>(arena.lower_bound) : 1.0;
    std::printf("  %-5zu %-8s %-9s %14s %14s %7.4f %14s  %s%s\n", a, device_str(arena.device).c_str(),
                arena.kind == fb::ArenaKind::SYMMETRIC ? "symmetric" : "ordinary", group_digits(arena.size).c_str(),
                group_digits(arena.lower_bound).c_str(), ratio, group_digits(arena.first_fit).c_str(),
                arena.algorithm.c_str(), arena.optimal ? ", optimal" : "");
    if (arena.peak_instruction >= 0 && static_cast<size_t>(arena.peak_instruction) < m.instructions.size()) {
      print_peak(m, arena);
    }
  }
}

// The bytes of the constants one method of several reads (each once).
uint64_t method_constant_bytes(const LProgram& program, const LMethod& m) {
  std::set<int> used;
  for (const LTensor& t : m.tensors) {
    if (t.storage == Storage::kConstant) used.insert(t.constant);
  }
  uint64_t bytes = 0;
  for (int c : used) bytes += program.constants[static_cast<size_t>(c)]->nbytes();
  return bytes;
}

// `parts`: each method's own statistics (--method), or empty (one method,
// whose statistics `result` holds).
void print_summary(const std::string& model, const std::string& output, const PlanResult& result,
                   const PlanOptions& options, const std::vector<PlanResult>& parts) {
  const LProgram& program = result.program;
  std::printf("kiln plan: %s -> %s (%s bytes)\n", model.c_str(), output.c_str(),
              group_digits(result.bytes.size()).c_str());
  uint64_t constant_bytes = 0;
  for (const auto& c : program.constants) constant_bytes += c->nbytes();
  // Figures only the emitted program knows.
  const ProgramFile file(result.bytes, output);
  std::vector<uint64_t> bookkeeping;
  std::vector<size_t> delegate_counts;
  for (const fb::Method* m : *file.program().methods()) {
    bookkeeping.push_back(m->bookkeeping_bytes());
    delegate_counts.push_back(m->delegates() != nullptr ? m->delegates()->size() : 0);
  }
  for (const LMethod& m : program.methods) {
    const size_t index = static_cast<size_t>(&m - program.methods.data());
    const PlanResult& stats = index < parts.size() ? parts[index] : result;
    print_method_counts(m, parts.empty() ? constant_bytes : method_constant_bytes(program, m), bookkeeping[index]);
    print_devices(m, delegate_counts[index], stats);
    print_kernel_choices(m);
    print_precision(stats);
    print_quantization(m, stats, options);
    print_bounds(m);
    print_inplace_and_fusion(stats);
    print_ranks(stats);
    print_arenas(m);
    print_regions(m);
  }
  print_arena_groups(result);
}

// `kiln plan --help`: the options and the targets built in.
void print_help() {
  std::fputs(kHelp, stdout);
  std::fputs(region_options_help(), stdout);
  std::string targets = "cpu";
  for (const std::string& name : backend_planner_names()) targets += ", " + name + ":N";
  std::printf("\ntargets built in: %s\n", targets.c_str());
}

// --inplace-ops: comma-separated op names.
std::set<std::string> parse_op_list(const std::string& list) {
  std::set<std::string> ops;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = list.find(',', pos);
    const std::string op = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!op.empty()) ops.insert(op);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ops;
}

// The options that shape the memory plan: folding, the algorithm, alignment.
void parse_memory_options(const Args& args, PlanOptions& options) {
  const long fold_mib = args.get_int("--fold-budget", 64);
  if (fold_mib < 1 || fold_mib > 65536) throw UsageError{"--fold-budget must be from 1 to 65536 (MiB)"};
  options.fold_budget.tensor_bytes = static_cast<uint64_t>(fold_mib) << 20;
  options.fold_budget.total_bytes = options.fold_budget.tensor_bytes * 16;
  options.memory.solve.algorithm = memory::parse_algorithm(args.get("--algo", "auto"));
  options.memory.solve.time_limit_s = args.get_double("--time-limit", 10.0);
  if (options.memory.solve.time_limit_s < 0) throw UsageError{"--time-limit must not be negative"};
  const long alignment = args.get_int("--alignment", 64);
  if (alignment < 1 || alignment > 4096 || (alignment & (alignment - 1)) != 0) {
    throw UsageError{"--alignment must be a power of two from 1 to 4096"};
  }
  options.memory.alignment = static_cast<uint32_t>(alignment);
}

// --ranks and --tensor-parallel, which must agree.
void parse_rank_options(const Args& args, PlanOptions& options) {
  const long ranks = args.get_int("--ranks", 1);
  if (ranks < 1 || ranks > 1024) throw UsageError{"--ranks must be from 1 to 1024"};
  const long tensor_parallel = args.get_int("--tensor-parallel", 0);
  if (tensor_parallel < 0 || tensor_parallel > 1024 || (args.has("--tensor-parallel") && tensor_parallel < 2)) {
    throw UsageError{"--tensor-parallel must be from 2 to 1024"};
  }
  if (args.has("--ranks") && args.has("--tensor-parallel") && ranks != tensor_parallel) {
    throw UsageError{"--ranks and --tensor-parallel disagree"};
  }
  options.ranks = static_cast<uint32_t>(ranks);
  options.tensor_parallel = static_cast<uint32_t>(tensor_parallel);
  if (!parse_all_reduce_mode(args.get("--allreduce", "auto"), &options.all_reduce)) {
    throw UsageError{"--allreduce must be auto, one-shot or two-shot"};
  }
}

// --device-count and --place.
void parse_device_options(const Args& args, PlanOptions& options) {
  for (const std::string& spec : args.all("--device-count")) {
    auto [name, count] = split_assignment(spec, "--device-count");
    char* end = nullptr;
    const long n = std::strtol(count.c_str(), &end, 10);
    if (count.empty() || *end != '\0' || n < 0) throw UsageError{"--device-count needs NAME=N, got '" + spec + "'"};
    options.device_counts[name] = static_cast<int>(n);
  }
  for (const std::string& spec : args.all("--place")) {
    auto [node, device] = split_assignment(spec, "--place");
    options.placements[node] = device;
  }
}

PlanOptions parse_plan_options(const Args& args) {
  PlanOptions options;
  for (const std::string& spec : args.all("--input-shape")) {
    auto [name, dims] = split_assignment(spec, "--input-shape");
    std::vector<DimBound> bounds;
    options.import.input_shapes[name] = parse_bounded_dims(dims, name, &bounds);
    for (const DimBound& b : bounds) options.bounds.push_back({name, b.axis, b.min, b.max});
  }
  for (const std::string& spec : args.all("--freeze")) {
    auto [name, file] = split_assignment(spec, "--freeze");
    options.import.frozen_inputs[name] = read_tensor_file(file);
  }
  parse_memory_options(args, options);
  options.plan_io = args.has("--plan-io");
  options.lower.packing_scratch = !args.has("--no-packing");
  const long threads = args.get_int("--threads", 4);
  if (threads < 1 || threads > 64) throw UsageError{"--threads must be from 1 to 64"};
  options.lower.thread_blocks = threads;
  options.fuse = !args.has("--no-fuse");
  options.targets = args.get("--target", "cpu");
  options.device_io = args.has("--device-io");
  options.names = !args.has("--strip-names");
  options.quantized_io = args.has("--quantized-io");
  parse_rank_options(args, options);
  parse_device_options(args, options);
  parse_precision_option(args, options);
  if (args.has("--no-inplace") && args.has("--inplace-ops")) {
    throw UsageError{"--no-inplace and --inplace-ops exclude each other"};
  }
  options.inplace.enabled = !args.has("--no-inplace");
  options.compare_without_inplace = args.has("--compare-inplace");
  if (args.has("--inplace-ops")) options.inplace.ops = parse_op_list(args.get("--inplace-ops"));
  options.memory.regions = parse_region_options(args);
  options.memory.hot_constants = args.has("--hot-constants");
  if (options.memory.hot_constants && options.memory.regions.empty()) {
    throw UsageError{"--hot-constants copies constants into memory regions: give --memory-region too"};
  }
  return options;
}

// --bundle-test: runs the program here on the given inputs and writes
// them, with the outputs, as OUTPUT.test.
void bundle_self_test(const Args& args, const std::string& output, const PlanResult& result,
                      const PlanOptions& options) {
  std::vector<HostTensor> inputs;
  for (const std::string& file : args.all("--bundle-test")) inputs.push_back(read_tensor_file(file));
  // Float data for a quantized input is quantized as the model's
  // QuantizeLinear would have (the test then holds int8 data).
  const std::vector<IoQuantization> quantization = io_quantization(result.bytes, options.method_name).inputs;
  for (size_t i = 0; i < inputs.size() && i < quantization.size(); ++i) {
    if (quantization[i].quantized && inputs[i].dtype == DType::FLOAT32) {
      inputs[i] = quantize_for(inputs[i], quantization[i]);
    }
  }
  // Unless given: derived from the program (emit/self_test_file.h).
  uint64_t roundings = 0;
  const double derived = derived_self_test_tolerance(result.bytes, options.method_name, &roundings);
  const double tolerance = args.get_double("--test-tolerance", derived);
  if (!(tolerance >= 0)) throw UsageError{"--test-tolerance must not be negative"};
  const std::string why = args.has("--test-tolerance") ? std::string("given")
                          : derived == 0               ? std::string("derived: integer outputs, exact")
                                         : str("derived: 8u*sqrt(", roundings, " roundings on the longest chain)");
  RunOptions run;
  run.method = options.method_name;
  run.backends = &runtime_backends_for(result.bytes);
  const RunResult reference = run_program(result.bytes, inputs, run);
  const std::string test_path = output + ".test";
  write_file_atomic(test_path, make_self_test(result.bytes, options.method_name, inputs, reference.outputs,
                                              static_cast<float>(tolerance)));
  std::printf("  self-test:   %s (%zu input%s, %zu output%s computed here, tolerance %.3g, %s)\n", test_path.c_str(),
              inputs.size(), inputs.size() == 1 ? "" : "s", reference.outputs.size(),
              reference.outputs.size() == 1 ? "" : "s", tolerance, why.c_str());
}

// Every option `kiln plan` takes; kiln.plan() in the Python package takes
// the same (plan_options_from_arguments below).
const std::vector<OptionSpec>& plan_option_specs() {
  // clang-format off
  static const std::vector<OptionSpec> specs = {
      {"-o", true}, {"--output", true}, {"--input-shape", true}, {"--freeze", true}, {"--fold-budget", true},
      {"--algo", true}, {"--time-limit", true}, {"--alignment", true}, {"--plan-io", false},
      {"--inplace-ops", true}, {"--no-inplace", false}, {"--compare-inplace", false},
      {"--target", true}, {"--device-count", true}, {"--place", true}, {"--device-io", false},
      {"--precision", true}, {"--keep-fp32", true}, {"--no-packing", false}, {"--threads", true}, {"--no-fuse", false}, {"--strip-names", false}, {"--quantized-io", false}, {"--report", true}, {"--ranks", true},
      {"--tensor-parallel", true}, {"--allreduce", true}, {"--bundle-test", true}, {"--test-tolerance", true},
      {"--memory-region", true}, {"--memory-regions", true}, {"--hot-constants", false}, {"--method", true}, {"--concurrent-methods", false},
      {"--help", false}};
  // clang-format on
  return specs;
}

}  // namespace

PlanOptions plan_options_from_arguments(const Argv& argv) {
  const Args args(argv, plan_option_specs());
  if (!args.positional().empty()) throw UsageError{"unexpected argument '" + args.positional()[0] + "'"};
  return parse_plan_options(args);
}

std::vector<std::string> plan_option_names() {
  std::vector<std::string> names;
  for (const OptionSpec& spec : plan_option_specs()) names.push_back(spec.name);
  return names;
}

int cmd_plan(const Argv& argv) {
  const Args args(argv, plan_option_specs());
  if (args.has("--help")) {
    print_help();
    return 0;
  }
  const std::vector<MethodModel> methods = parse_method_options(args);
  if (methods.empty() && args.positional().size() != 1) throw UsageError{"expects one model file"};
  const std::string model = methods.empty() ? args.positional()[0] : methods.front().path;
  const std::string output = args.has("-o") ? args.get("-o") : args.get("--output");
  if (output.empty()) throw UsageError{"missing -o OUT.kiln"};

  PlanOptions options = parse_plan_options(args);
  StepProgress fold_progress;
  options.fold_progress = [&](size_t done, size_t total) { fold_progress.update("folding constants", done, total); };
  SearchProgress progress(model);
  options.memory.solve.progress = progress.callback();
  std::vector<PlanResult> parts;
  const PlanResult result = methods.empty()
                                ? plan_onnx_file(model, options)
                                : plan_onnx_methods(methods, options, args.has("--concurrent-methods"), &parts);
  progress.finish();
  write_file_atomic(output, result.bytes);
  if (args.has("--report")) write_plan_report(result, args.get("--report"));
  print_summary(model, output, result, options, parts);
  if (args.has("--bundle-test")) bundle_self_test(args, output, result, options);
  if (args.has("--report")) {
    std::printf("  report:      %s/plan.json, %s/memory.svg\n", args.get("--report").c_str(),
                args.get("--report").c_str());
  }
  return 0;
}

std::string group_digits(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace kiln::planner::cli
