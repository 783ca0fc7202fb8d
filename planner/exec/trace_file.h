// The trace file `kiln run --profile=FILE` writes and `kiln profile` reads:
// the EventTracer's records (runtime/include/kiln/runtime/event_tracer.h)
// after a fixed header.
//
//   offset  size  field
//   0       8     magic "KILNTRC1"
//   8       4     record size (24)
//   12      4     reserved (0)
//   16      8     ticks per second of the records' clock
//   24      8     records
//   32      8     records dropped (the buffer was full)
//   40      8     digest of the program (schema/include/kiln/schema/digest.h)
//   48      32    method name, NUL-padded
//   80      ...   records, 24 bytes each, little-endian

#ifndef KILN_PLANNER_EXEC_TRACE_FILE_H_
#define KILN_PLANNER_EXEC_TRACE_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime/event_tracer.h"

namespace kiln::planner {

struct TraceFile {
  uint64_t ticks_per_second = 0;
  uint64_t dropped = 0;
  uint64_t program_digest = 0;
  std::string method;
  std::vector<TraceRecord> records;
};

std::string encode_trace(const TraceFile& trace);
// Throws PlanError naming `path` when `bytes` are not a trace.
TraceFile decode_trace(const std::string& bytes, const std::string& path);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EXEC_TRACE_FILE_H_
