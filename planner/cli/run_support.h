// What `kiln run` and `kiln bench` share: the CPU path (--isa), the thread
// count (--threads or KILN_THREADS) and the capture of a run's trace records.

#ifndef KILN_PLANNER_CLI_RUN_SUPPORT_H_
#define KILN_PLANNER_CLI_RUN_SUPPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "exec/trace_file.h"
#include "kiln/runtime/event_tracer.h"

namespace kiln::planner::cli {

// --isa: the CPU kernels' path, which the processor must have (UsageError
// for an unknown name, PlanError for a path the processor lacks).
void select_isa(const std::string& name);

// --threads N (or KILN_THREADS): the threads kernels split across, this one
// included; UsageError outside 1 to PosixThreadPool::kMaxThreads.
long thread_count(const Args& args);

// A trace buffer for `runs` executions of a method of `instructions`
// instructions (one record each and one per execute()), with room for 64 Ki
// records that delegates add besides; records beyond it are counted as
// dropped.
class TraceCapture {
 public:
  EventTracer* start(size_t instructions, long runs);
  bool started() const { return tracer_ != nullptr; }
  // What was recorded, as `kiln profile` reads it.
  TraceFile trace(const std::string& program_bytes, const std::string& method) const;

 private:
  std::vector<TraceRecord> buffer_;
  std::unique_ptr<EventTracer> tracer_;
};

}  // namespace kiln::planner::cli

#endif  // KILN_PLANNER_CLI_RUN_SUPPORT_H_
