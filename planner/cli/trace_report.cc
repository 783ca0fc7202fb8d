#include "cli/trace_report.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "emit/program_file.h"

namespace kiln::planner::cli {
namespace {

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

std::string instruction_op(const fb::Method* m, const fb::Instruction* ins) {
  switch (ins->kind_type()) {
    case fb::InstructionKind::KernelCall: return m->operators()->Get(ins->kind_as_KernelCall()->op())->name()->str();
    case fb::InstructionKind::DelegateCall: {
      const fb::Delegate* d = m->delegates()->Get(ins->kind_as_DelegateCall()->delegate());
      return "delegate " + d->backend()->str();
    }
    case fb::InstructionKind::CopyCall: return "copy";
    case fb::InstructionKind::CollectiveCall: return "all-reduce";
    default: return "?";
  }
}

// Chrome's JSON strings: quotes and backslashes escaped, control bytes left out.
std::string chrome_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

}  // namespace

InstructionLabels instruction_labels(const std::string& bytes, const std::string& what, const std::string& method) {
  InstructionLabels labels;
  const ProgramFile file(bytes, what);
  for (const fb::Method* m : *file.program().methods()) {
    if (m->name()->str() != method || m->instructions() == nullptr) continue;
    for (const fb::Instruction* ins : *m->instructions()) {
      labels.op_of.push_back(instruction_op(m, ins));
      labels.node_of.push_back(ins->name() != nullptr ? ins->name()->str() : "");
    }
  }
  return labels;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

TraceTimes collect_times(const TraceFile& trace) {
  const double ms_per_tick = 1e3 / static_cast<double>(trace.ticks_per_second);
  TraceTimes t;
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

std::vector<OpTime> per_op_times(const TraceTimes& t, const InstructionLabels& labels) {
  std::map<std::string, OpTime> per_op;
  double sum_medians = 0;
  for (const auto& [i, ms] : t.per_instruction) {
    const double m = median(ms);
    OpTime& op = per_op[i < labels.op_of.size() ? labels.op_of[i] : "instruction"];
    op.ms += m;
    op.count += 1;
    sum_medians += m;
  }
  std::vector<OpTime> ops;
  for (auto& [name, op] : per_op) {
    op.op = name;
    op.share = sum_medians > 0 ? op.ms / sum_medians : 0.0;
    ops.push_back(op);
  }
  std::stable_sort(ops.begin(), ops.end(),
                   [](const OpTime& a, const OpTime& b) { return a.ms != b.ms ? a.ms > b.ms : a.op > b.op; });
  return ops;
}

void print_ops_and_slowest(const TraceTimes& t, const InstructionLabels& labels, long top) {
  std::printf("\n%-28s %10s %7s\n", "op type", "ms", "share");
  for (const OpTime& op : per_op_times(t, labels)) {
    std::printf("%-28s %10.3f %6.1f%%\n", op.op.c_str(), op.ms, 100.0 * op.share);
  }
  std::vector<std::pair<double, uint32_t>> slowest;
  for (const auto& [i, ms] : t.per_instruction) slowest.emplace_back(median(ms), i);
  std::sort(slowest.rbegin(), slowest.rend());
  std::printf("\n%5s %-20s %10s  %s\n", "#", "op", "ms", "node");
  for (size_t k = 0; k < slowest.size() && k < static_cast<size_t>(top); ++k) {
    const uint32_t i = slowest[k].second;
    std::printf("%5u %-20s %10.3f  %s\n", i, i < labels.op_of.size() ? labels.op_of[i].c_str() : "", slowest[k].first,
                i < labels.node_of.size() ? labels.node_of[i].c_str() : "");
  }
}

std::string chrome_trace(const TraceFile& trace, const InstructionLabels& labels) {
  const double ms_per_tick = 1e3 / static_cast<double>(trace.ticks_per_second);
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
    json += str("  {\"name\": \"", chrome_escape(label(r)), "\", \"cat\": \"", kind_name(r.kind),
                "\", \"ph\": \"X\", \"ts\": ", ts, ", \"dur\": ", dur, ", \"pid\": 1, \"tid\": ",
                r.kind == TraceKind::kExecute   ? 0
                : r.kind == TraceKind::kBackend ? 2
                                                : 1,
                ", \"args\": {\"instruction\": ", r.instruction, ", \"node\": \"", chrome_escape(node), "\"}}",
                k + 1 < trace.records.size() ? ",\n" : "\n");
  }
  json += "]}\n";
  return json;
}

}  // namespace kiln::planner::cli
