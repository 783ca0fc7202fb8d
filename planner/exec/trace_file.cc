#include "exec/trace_file.h"

#include <cstring>

#include "core/error.h"

namespace kiln::planner {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'T', 'R', 'C', '1'};
constexpr size_t kHeaderBytes = 80;
constexpr size_t kNameBytes = 32;

template <typename T>
void put(std::string& out, size_t offset, T v) {
  std::memcpy(&out[offset], &v, sizeof(v));
}
template <typename T>
T get(const std::string& in, size_t offset) {
  T v;
  std::memcpy(&v, &in[offset], sizeof(v));
  return v;
}

}  // namespace

std::string encode_trace(const TraceFile& trace) {
  std::string out(kHeaderBytes + trace.records.size() * sizeof(TraceRecord), '\0');
  std::memcpy(&out[0], kMagic, sizeof(kMagic));
  put<uint32_t>(out, 8, sizeof(TraceRecord));
  put<uint64_t>(out, 16, trace.ticks_per_second);
  put<uint64_t>(out, 24, trace.records.size());
  put<uint64_t>(out, 32, trace.dropped);
  put<uint64_t>(out, 40, trace.program_digest);
  std::memcpy(&out[48], trace.method.data(), std::min(trace.method.size(), kNameBytes - 1));
  if (!trace.records.empty()) {
    std::memcpy(&out[kHeaderBytes], trace.records.data(), trace.records.size() * sizeof(TraceRecord));
  }
  return out;
}

TraceFile decode_trace(const std::string& bytes, const std::string& path) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    fail(path, ": not a kiln trace (kiln run --profile=FILE writes one)");
  }
  if (get<uint32_t>(bytes, 8) != sizeof(TraceRecord)) fail(path, ": trace records of another size");
  TraceFile trace;
  trace.ticks_per_second = get<uint64_t>(bytes, 16);
  const uint64_t count = get<uint64_t>(bytes, 24);
  trace.dropped = get<uint64_t>(bytes, 32);
  trace.program_digest = get<uint64_t>(bytes, 40);
  trace.method = std::string(bytes.data() + 48, strnlen(bytes.data() + 48, kNameBytes));
  if (trace.ticks_per_second == 0 || count > (bytes.size() - kHeaderBytes) / sizeof(TraceRecord)) {
    fail(path, ": trace is truncated or corrupt");
  }
  trace.records.resize(count);
  if (count > 0) std::memcpy(trace.records.data(), bytes.data() + kHeaderBytes, count * sizeof(TraceRecord));
  return trace;
}

}  // namespace kiln::planner
