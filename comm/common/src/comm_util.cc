#include "kiln/comm/comm_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime/check.h"

namespace kiln {
namespace comm {
namespace {

constexpr uint32_t kDefaultTimeoutMs = 30000;

}  // namespace

Error check_all_reduce_operands(const char* communicator, uint32_t rank, const AllReduceArgs& args,
                                const uint8_t* arena, uint64_t arena_size, bool aligned) {
  const uint64_t element = dtype_size(args.dtype);
  const uint64_t bytes = args.count * element;
  KILN_CHECK_OR_RETURN(args.count <= arena_size / element && args.input_offset <= arena_size - bytes &&
                           (!aligned || args.input_offset % element == 0),
                       Error::kInvalidArgument,
                       "%s: rank %u: all-reduce of %llu %s elements at offset %llu does not fit symmetric arena %u "
                       "(%llu bytes)%s",
                       communicator, rank, static_cast<unsigned long long>(args.count), dtype_name(args.dtype),
                       static_cast<unsigned long long>(args.input_offset), args.memory.slot,
                       static_cast<unsigned long long>(arena_size), aligned ? " or is misaligned" : "");
  const uint8_t* input = arena + args.input_offset;
  const uint8_t* output = static_cast<const uint8_t*>(args.output);
  KILN_CHECK_OR_RETURN(
      bytes == 0 || (output != nullptr && (!aligned || reinterpret_cast<uintptr_t>(output) % element == 0) &&
                     (output == input || output >= input + bytes || input >= output + bytes)),
      Error::kInvalidArgument, "%s: rank %u: all-reduce output %p is null%s, or overlaps the input without being it",
      communicator, rank, args.output, aligned ? ", misaligned" : "");
  return Error::kOk;
}

uint32_t collective_timeout_ms(uint32_t option) {
  if (option != 0) return option;
  const char* text = getenv("KILN_COLLECTIVE_TIMEOUT_MS");
  if (text == nullptr || *text == '\0') return kDefaultTimeoutMs;
  char* end = nullptr;
  const unsigned long value = strtoul(text, &end, 10);
  if (*end != '\0' || value == 0 || value > 0xffffffffu) {
    KILN_LOG(WARNING, "KILN_COLLECTIVE_TIMEOUT_MS='%s' is not a positive number of milliseconds; using %u", text,
             kDefaultTimeoutMs);
    return kDefaultTimeoutMs;
  }
  return static_cast<uint32_t>(value);
}

bool process_exited(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = fopen(path, "r");
  if (f == nullptr) return false;  // no procfs: kill() alone decides
  char line[512];
  const size_t n = fread(line, 1, sizeof(line) - 1, f);
  fclose(f);
  line[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
  const char* close = strrchr(line, ')');
  return close != nullptr && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

const char* device_peers_unavailable(bool window, uint32_t lsa_ranks, uint32_t ranks) {
  if (!window) return "the arena is ordinary device memory, not a symmetric window";
  if (ranks > kMaxDevicePeers) return "more ranks than the device's all-reduce kernels address";
  if (lsa_ranks < ranks) {
    return "not every rank is in this rank's load/store-accessible team (no NVLink or P2P path to some GPUs)";
  }
  return nullptr;
}

}  // namespace comm
}  // namespace kiln
