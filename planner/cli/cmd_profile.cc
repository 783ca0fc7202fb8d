// kiln profile: reads a trace (`kiln run --profile=FILE`) and prints where
// the time went: per op type and per instruction (medians over the runs),
// and how much of each execute() the instructions account for; writes a
// Chrome trace (chrome://tracing, Perfetto) with --chrome.

#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/file_util.h"
#include "emit/program_file.h"
#include "emit/self_test_file.h"
#include "exec/trace_file.h"

namespace kiln::planner::cli {
namespace {

constexpr const char* kHelp =
    "usage: kiln profile TRACE [--program PROGRAM.kiln] [--chrome OUT.json] [--top N]\n"
    "\n"
    "Prints where the time of a traced run went (kiln run PROGRAM --profile=TRACE ...):\n"
    "each op type's share and the slowest instructions (medians over the runs), and\n"
    "how much of each execute() the instructions account for.\n"
    "\n"
    "options:\n"
    "  --program FILE   the program that ran: names instructions by op and node\n"
    "                   (checked against the trace's digest)\n"
    "  --chrome FILE    also write the trace as Chrome trace JSON (chrome://tracing, Perfetto)\n"
    "  --top N          instructions to list (default 10)\n";

const char* kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::kExecute: return "execute";
    case TraceKind::kKernel: return "kernel";
    case TraceKind::kDelegate: return "delegate";
    case TraceKind::kCopy: return "copy";
    case TraceKind::kCollective: return "collective";
    case TraceKind::kBackend: return "backend";
  }
  return "?";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

// What the program says of each instruction of the traced method: its op
// type and its node's name.
struct InstructionLabels {
  std::vector<std::string> op_of, node_of;
};

// The labels from --program, which must be the program the trace ran.
InstructionLabels read_labels(const std::string& program_path, const std::string& path, const TraceFile& trace) {
  InstructionLabels labels;
  const std::string bytes = read_file(program_path);
  if (program_digest(bytes) != trace.program_digest) fail(program_path, ": not the program ", path, " traced");
  const ProgramFile file(bytes, program_path);
  for (const fb::Method* m : *file.program().methods()) {
    if (m->name()->str() != trace.method || m->instructions() == nullptr) continue;
    for (const fb::Instruction* ins : *m->instructions()) {
      std::string op = "?";
      switch (ins->kind_type()) {
        case fb::InstructionKind::KernelCall:
          op = m->operators()->Get(ins->kind_as_KernelCall()->op())->name()->str();
          break;
        case fb::InstructionKind::DelegateCall: {
          const fb::Delegate* d = m->delegates()->Get(ins->kind_as_DelegateCall()->delegate());
          op = "delegate " + d->backend()->str();
          break;
        }
        case fb::InstructionKind::CopyCall: op = "copy"; break;
        case fb::InstructionKind::CollectiveCall: op = "all-reduce"; break;
        default: break;
      }
      labels.op_of.push_back(op);
      labels.node_of.push_back(ins->name() != nullptr ? ins->name()->str() : "");
    }
  }
  return labels;
}

// The records' times, in milliseconds: each execute() and each
// instruction's, over the runs.
struct Times {
  std::vector<double> executes;
  std::map<uint32_t, std::vector<double>> per_instruction;
  double instructions_total = 0;
};

Times collect_times(const TraceFile& trace, double ms_per_tick) {
  Times t;
  for (const TraceRecord& r : trace.records) {
    const double ms = static_cast<double>(r.end_ticks - r.start_ticks) * ms_per_tick;
    if (r.kind == TraceKind::kExecute) {
      t.executes.push_back(ms);
    } else if (r.kind != TraceKind::kBackend) {
      t.per_instruction[r.instruction].push_back(ms);
      t.instructions_total += ms;
    }
  }
  return t;
}

// Each op type's share of the per-instruction medians, then the `top`
// slowest instructions.
void print_ops_and_slowest(const Times& t, const InstructionLabels& labels, long top) {
  const std::vector<std::string>& op_of = labels.op_of;
  std::map<std::string, double> per_op;
  double sum_medians = 0;
  for (const auto& [i, ms] : t.per_instruction) {
    const double m = median(ms);
    per_op[i < op_of.size() ? op_of[i] : "instruction"] += m;
    sum_medians += m;
  }
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [op, ms] : per_op) ops.emplace_back(ms, op);
  std::sort(ops.rbegin(), ops.rend());
  std::printf("\n%-28s %10s %7s\n", "op type", "ms", "share");
  for (const auto& [ms, op] : ops) {
    std::printf("%-28s %10.3f %6.1f%%\n", op.c_str(), ms, sum_medians > 0 ? 100.0 * ms / sum_medians : 0.0);
  }
  std::vector<std::pair<double, uint32_t>> slowest;
  for (const auto& [i, ms] : t.per_instruction) slowest.emplace_back(median(ms), i);
  std::sort(slowest.rbegin(), slowest.rend());
  std::printf("\n%5s %-20s %10s  %s\n", "#", "op", "ms", "node");
  for (size_t k = 0; k < slowest.size() && k < static_cast<size_t>(top); ++k) {
    const uint32_t i = slowest[k].second;
    std::printf("%5u %-20s %10.3f  %s\n", i, i < op_of.size() ? op_of[i].c_str() : "", slowest[k].first,
                i < labels.node_of.size() ? labels.node_of[i].c_str() : "");
  }
}

// --chrome: the records as Chrome trace events (execute on thread 0, the
// instructions on 1, what backends add on 2).
std::string chrome_trace(const TraceFile& trace, const InstructionLabels& labels, double ms_per_tick) {
  auto label = [&](const TraceRecord& r) {
    if (r.kind == TraceKind::kExecute) return std::string("execute");
    if (r.kind == TraceKind::kBackend) return str("delegate ", r.instruction, " kernel ", r.detail);
    return r.instruction < labels.op_of.size() ? labels.op_of[r.instruction] : std::string(kind_name(r.kind));
  };
  std::string json = "{\"traceEvents\": [\n";
  const uint64_t origin = trace.records.empty() ? 0 : trace.records.front().start_ticks;
  uint64_t first = origin;
  for (const TraceRecord& r : trace.records) first = std::min(first, r.start_ticks);
  for (size_t k = 0; k < trace.records.size(); ++k) {
    const TraceRecord& r = trace.records[k];
    const double ts = static_cast<double>(r.start_ticks - first) * ms_per_tick * 1e3;
    const double dur = static_cast<double>(r.end_ticks - r.start_ticks) * ms_per_tick * 1e3;
    const std::string node =
        r.kind != TraceKind::kExecute && r.kind != TraceKind::kBackend && r.instruction < labels.node_of.size()
            ? labels.node_of[r.instruction]
            : "";
    json += str("  {\"name\": \"", json_escape(label(r)), "\", \"cat\": \"", kind_name(r.kind),
                "\", \"ph\": \"X\", \"ts\": ", ts, ", \"dur\": ", dur, ", \"pid\": 1, \"tid\": ",
                r.kind == TraceKind::kExecute   ? 0
                : r.kind == TraceKind::kBackend ? 2
                                                : 1,
                ", \"args\": {\"instruction\": ", r.instruction, ", \"node\": \"", json_escape(node), "\"}}",
                k + 1 < trace.records.size() ? ",\n" : "\n");
  }
  json += "]}\n";
  return json;
}

}  // namespace

int cmd_profile(const Argv& argv) {
  const Args args(argv, {{"--program", true}, {"--chrome", true}, {"--top", true}, {"--help", false}});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError{"expects one trace file"};
  const std::string path = args.positional()[0];
  const TraceFile trace = decode_trace(read_file(path), path);
  const long top = args.get_int("--top", 10);
  if (top < 0) throw UsageError{"--top must not be negative"};
  const double ms_per_tick = 1e3 / static_cast<double>(trace.ticks_per_second);

  // Instruction labels from the program: op type and node name.
  const InstructionLabels labels =
      args.has("--program") ? read_labels(args.get("--program"), path, trace) : InstructionLabels{};
  const Times t = collect_times(trace, ms_per_tick);
  double executes_total = 0;
  for (double ms : t.executes) executes_total += ms;
  std::printf("%s: method '%s', %zu run%s, %zu records%s\n", path.c_str(), trace.method.c_str(), t.executes.size(),
              t.executes.size() == 1 ? "" : "s", trace.records.size(),
              trace.dropped ? str(", ", trace.dropped, " dropped (buffer full)").c_str() : "");
  std::printf(
      "execute: median %.3f ms; instructions account for %.1f%% of it (the rest: the execute loop's own "
      "checks and timing)\n",
      median(t.executes), executes_total > 0 ? 100.0 * t.instructions_total / executes_total : 0.0);
  print_ops_and_slowest(t, labels, top);

  if (args.has("--chrome")) {
    write_file_atomic(args.get("--chrome"), chrome_trace(trace, labels, ms_per_tick));
    std::printf("\nChrome trace: %s\n", args.get("--chrome").c_str());
  }
  return 0;
}

}  // namespace kiln::planner::cli
