// kiln profile: reads a trace (`kiln run --profile=FILE`) and prints where
// the time went: per op type and per instruction (medians over the runs),
// and how much of each execute() the instructions account for; writes a
// Chrome trace (chrome://tracing, Perfetto) with --chrome.

#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/trace_report.h"
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

// The labels from --program, which must be the program the trace ran.
InstructionLabels read_labels(const std::string& program_path, const std::string& path, const TraceFile& trace) {
  const std::string bytes = read_file(program_path);
  if (program_digest(bytes) != trace.program_digest) fail(program_path, ": not the program ", path, " traced");
  return instruction_labels(bytes, program_path, trace.method);
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

  // Instruction labels from the program: op type and node name.
  const InstructionLabels labels =
      args.has("--program") ? read_labels(args.get("--program"), path, trace) : InstructionLabels{};
  const TraceTimes t = collect_times(trace);
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
    write_file_atomic(args.get("--chrome"), chrome_trace(trace, labels));
    std::printf("\nChrome trace: %s\n", args.get("--chrome").c_str());
  }
  return 0;
}

}  // namespace kiln::planner::cli
