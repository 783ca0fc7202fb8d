// Reading a run's trace records (kiln profile, kiln bench --per-op): what
// each instruction of the traced method is (op type and node, from the
// program), the times of each execute() and each instruction over the runs,
// the per-op table and slowest instructions, and the Chrome trace JSON
// (chrome://tracing, Perfetto).

#ifndef KILN_PLANNER_CLI_TRACE_REPORT_H_
#define KILN_PLANNER_CLI_TRACE_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exec/trace_file.h"

namespace kiln::planner::cli {

// What the program says of each instruction of one method: its op type and
// its node's name.
struct InstructionLabels {
  std::vector<std::string> op_of, node_of;
};
// The labels of `method` in the program `bytes` (`what` names it in errors).
InstructionLabels instruction_labels(const std::string& bytes, const std::string& what, const std::string& method);

// The records' times, in milliseconds: each execute() and each
// instruction's, over the runs.
struct TraceTimes {
  std::vector<double> executes;
  std::map<uint32_t, std::vector<double>> per_instruction;
  double instructions_total = 0;
};
TraceTimes collect_times(const TraceFile& trace);

double median(std::vector<double> values);

// Each op type's summed per-instruction medians and its share of all of
// them, largest first.
struct OpTime {
  std::string op;
  int count = 0;
  double ms = 0;
  double share = 0;  // of the sum over all ops, 0 to 1
};
std::vector<OpTime> per_op_times(const TraceTimes& times, const InstructionLabels& labels);

// Prints the per-op table, then the `top` slowest instructions.
void print_ops_and_slowest(const TraceTimes& times, const InstructionLabels& labels, long top);

// The records as Chrome trace events: execute on thread 0, the instructions
// on 1, what backends add on 2.
std::string chrome_trace(const TraceFile& trace, const InstructionLabels& labels);

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_TRACE_REPORT_H_
