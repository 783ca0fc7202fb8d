// EventTracer: a profile of Method::execute() as fixed-size records written
// into a buffer the application provides (no heap, no I/O): one record per
// instruction run (kernel, delegate call, copy, collective) with its start
// and end ticks (kiln_pal_ticks), one for each whole execute(), and any
// records a delegate adds for its own work (the null backend: one per kernel
// it runs). When the buffer is full, later records are counted and dropped.
//
// Not thread safe; the buffer must outlive the tracer and the tracer every
// Method it is set on (Method::set_tracer).

#ifndef KILN_RUNTIME_EVENT_TRACER_H_
#define KILN_RUNTIME_EVENT_TRACER_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/span.h"

namespace kiln {

enum class TraceKind : uint16_t {
  kExecute = 0,     // a whole Method::execute()
  kKernel = 1,      // a CPU kernel call
  kDelegate = 2,    // a delegate call
  kCopy = 3,        // a copy (host, to, from or on a device)
  kCollective = 4,  // a collective
  kBackend = 5,     // a delegate's own record: `detail` is the backend's (its kernel index)
};

struct TraceRecord {
  uint64_t start_ticks = 0;
  uint64_t end_ticks = 0;
  uint32_t instruction = 0;  // index in the method's execute list (0 for kExecute)
  TraceKind kind = TraceKind::kExecute;
  uint16_t detail = 0;
};
static_assert(sizeof(TraceRecord) == 24, "trace records are 24 bytes (the trace file format depends on it)");

class EventTracer {
 public:
  explicit EventTracer(Span<TraceRecord> buffer) : buffer_(buffer) {}

  void record(const TraceRecord& r) {
    if (count_ < buffer_.size()) {
      buffer_[count_++] = r;
    } else {
      ++dropped_;
    }
  }
  Span<const TraceRecord> records() const { return Span<const TraceRecord>(buffer_.data(), count_); }
  size_t dropped() const { return dropped_; }
  void clear() { count_ = dropped_ = 0; }

 private:
  Span<TraceRecord> buffer_;
  size_t count_ = 0;
  size_t dropped_ = 0;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_EVENT_TRACER_H_
