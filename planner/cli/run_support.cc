#include "cli/run_support.h"

#include <cstdlib>

#include "core/error.h"
#include "emit/self_test_file.h"
#include "kiln/kernels/isa.h"
#include "kiln/platform/platform.h"
#include "kiln/runtime/posix_thread_pool.h"

namespace kiln::planner::cli {

void select_isa(const std::string& name) {
  namespace kk = ::kiln::kernels;
  kk::Isa isa;
  if (!kk::parse_isa(name.c_str(), &isa)) throw UsageError{"--isa is scalar, avx2 or avx512"};
  if (kk::set_isa(isa) != ::kiln::Error::kOk) {
    fail("--isa ", name, ": this processor's best path is ", kk::isa_name(kk::processor_isa()));
  }
}

long thread_count(const Args& args) {
  long threads = 1;
  if (args.has("--threads")) {
    threads = args.get_int("--threads", 1);
  } else if (const char* env = std::getenv("KILN_THREADS"); env != nullptr && env[0] != '\0') {
    char* end = nullptr;
    threads = std::strtol(env, &end, 10);
    if (*end != '\0') threads = 0;
  }
  if (threads < 1 || threads > PosixThreadPool::kMaxThreads) {
    throw UsageError{str("--threads (or KILN_THREADS) is 1 to ", PosixThreadPool::kMaxThreads)};
  }
  return threads;
}

EventTracer* TraceCapture::start(size_t instructions, long runs) {
  // Delegates add their own records: room for 64 Ki of them besides.
  buffer_.resize(static_cast<size_t>(runs) * (instructions + 1) + (size_t{1} << 16));
  tracer_ = std::make_unique<EventTracer>(Span<TraceRecord>(buffer_.data(), buffer_.size()));
  return tracer_.get();
}

TraceFile TraceCapture::trace(const std::string& program_bytes, const std::string& method) const {
  TraceFile trace;
  trace.ticks_per_second = kiln_pal_ticks_per_second();
  trace.method = method;
  trace.program_digest = program_digest(program_bytes);
  if (tracer_ == nullptr) return trace;
  trace.dropped = tracer_->dropped();
  trace.records.assign(tracer_->records().data(), tracer_->records().data() + tracer_->records().size());
  return trace;
}

}  // namespace kiln::planner::cli
