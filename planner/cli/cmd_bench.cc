// kiln bench: times a program's method the way a benchmark tool does
// (warm-up runs, then a number of runs or a time budget, on given or random
// inputs) and reports the latency distribution, the CPU path and threads,
// and the memory the program holds beside the process's peak resident set.

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <utility>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_support.h"
#include "cli/trace_report.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/npy.h"
#include "exec/run.h"
#include "kiln/kernels/isa.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "onnx/import.h"
#include "report/json.h"
#include "targets/runtime_backends.h"

namespace kiln::planner::cli {
namespace {

constexpr const char* kHelp =
    "usage: kiln bench PROGRAM.kiln [--input FILE ...] [options]\n"
    "\n"
    "Times the program's method: warm-up runs, then --runs N timed runs or as many\n"
    "as --time SECONDS allows, on the given inputs or on random ones. Prints the\n"
    "latency's minimum, median (p50), p90, p99, maximum and mean, the CPU path and\n"
    "threads, the bytes the program holds (arenas, constants, bookkeeping) and the\n"
    "process's peak resident memory. `kiln run` runs a program on inputs and shows\n"
    "its outputs; this command only times it.\n"
    "\n"
    "options:\n"
    "  --input FILE        an input (.npy or .pb), once per method input, in order;\n"
    "                      without any, every input is random\n"
    "  --seed N            seed of the random inputs (default 0): the same seed gives\n"
    "                      the same inputs\n"
    "  --range LO,HI       range of the random inputs: floats uniform in [LO, HI),\n"
    "                      integers uniform in LO..HI (clamped to the dtype). Default:\n"
    "                      floats [-1, 1); int8, uint8, int16, uint16 their dtype's\n"
    "                      full range; wider integers 0..99; bool 0 or 1\n"
    "  --save-inputs DIR   write the inputs timed as DIR/input_0.npy, ... (kiln run\n"
    "                      --input takes them back)\n"
    "  --warmup N          untimed runs first (default 10)\n"
    "  --runs N            timed runs (default 100)\n"
    "  --time SECONDS      time runs until SECONDS have passed instead (at least one;\n"
    "                      --runs, when given too, caps them)\n"
    "  --method NAME       the method to time (default forward)\n"
    "  --isa scalar|avx2|avx512\n"
    "                      the CPU kernels' path (as kiln run --isa)\n"
    "  --threads N         threads the kernels split across, this one included\n"
    "                      (default 1, or KILN_THREADS=N)\n"
    "  --per-op            record every instruction of the timed runs through the\n"
    "                      tracer and print the time per operator and the slowest\n"
    "                      instructions (medians over the runs); the tracer adds its\n"
    "                      own small cost to each run\n"
    "  --per-op=FILE       also write the records as Chrome trace JSON (chrome://tracing,\n"
    "                      Perfetto), the trace kiln profile --chrome writes\n"
    "  --top N             with --per-op, instructions to list (default 10)\n"
    "  --json              print the results as one JSON object instead of text\n";

struct BenchOptions {
  long warmup = 10;
  long runs = 100;
  bool runs_given = false;
  double seconds = 0;  // > 0: a time budget
  uint64_t seed = 0;
  bool has_range = false;
  double lo = 0, hi = 0;
  bool per_op = false;
  std::string chrome_path;
  long top = 10;
  bool json = false;
};

BenchOptions parse_bench_options(const Args& args) {
  BenchOptions o;
  o.warmup = args.get_int("--warmup", 10);
  if (o.warmup < 0) throw UsageError{"--warmup must not be negative"};
  o.runs_given = args.has("--runs");
  o.runs = args.get_int("--runs", 100);
  if (o.runs < 1) throw UsageError{"--runs must be at least 1"};
  if (args.has("--time")) {
    o.seconds = args.get_double("--time", 0);
    if (!(o.seconds > 0)) throw UsageError{"--time must be a positive number of seconds"};
    if (!o.runs_given) o.runs = std::numeric_limits<long>::max();
  }
  o.seed = static_cast<uint64_t>(args.get_int("--seed", 0));
  if (args.has("--range")) {
    const std::string text = args.get("--range");
    char* end = nullptr;
    o.lo = std::strtod(text.c_str(), &end);
    if (*end != ',') throw UsageError{"--range is LO,HI"};
    const char* rest = end + 1;
    o.hi = std::strtod(rest, &end);
    if (*end != '\0' || end == rest || !(o.lo < o.hi)) throw UsageError{"--range is LO,HI with LO < HI"};
    o.has_range = true;
  }
  o.per_op = args.has("--per-op");
  o.chrome_path = args.get("--per-op");
  o.top = args.get_int("--top", 10);
  if (o.top < 0) throw UsageError{"--top must not be negative"};
  o.json = args.has("--json");
  return o;
}

// The values of an integer dtype (or bool), as int64.
std::pair<int64_t, int64_t> integer_limits(DType dtype, const std::string& name) {
  switch (dtype) {
    case DType::BOOL: return {0, 1};
    case DType::INT8: return {-128, 127};
    case DType::UINT8: return {0, 255};
    case DType::INT16: return {-32768, 32767};
    case DType::UINT16: return {0, 65535};
    case DType::INT32: return {INT32_MIN, INT32_MAX};
    case DType::UINT32: return {0, UINT32_MAX};
    case DType::INT64: return {INT64_MIN, INT64_MAX};
    case DType::UINT64: return {0, INT64_MAX};
    default: fail("input '", name, "': no random ", dtype_str(dtype), " values (give it with --input)");
  }
}

// Random values of `info`'s dtype and shape (see --range in the help).
HostTensor random_tensor(const IoInfo& info, const BenchOptions& o, std::mt19937_64& rng) {
  HostTensor t(info.dtype, info.shape);
  const bool is_float = info.dtype == DType::FLOAT32 || info.dtype == DType::FLOAT64 || info.dtype == DType::FLOAT16 ||
                        info.dtype == DType::BFLOAT16;
  if (is_float) {
    if (info.dtype != DType::FLOAT32) {
      fail("input '", info.name, "': no random ", dtype_str(info.dtype), " values (give it with --input)");
    }
    std::uniform_real_distribution<float> dist(static_cast<float>(o.has_range ? o.lo : -1.0),
                                               static_cast<float>(o.has_range ? o.hi : 1.0));
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
    return t;
  }
  const auto [type_lo, type_hi] = integer_limits(info.dtype, info.name);
  const bool narrow = dtype_bytes(info.dtype) <= 2;
  int64_t lo = narrow ? type_lo : 0, hi = narrow ? type_hi : 99;
  if (o.has_range && info.dtype != DType::BOOL) {
    lo = std::max(type_lo, static_cast<int64_t>(std::max(std::ceil(o.lo), -9.0e18)));
    hi = std::min(type_hi, static_cast<int64_t>(std::min(std::floor(o.hi), 9.0e18)));
    if (lo > hi) fail("--range holds no value of input '", info.name, "' (", dtype_str(info.dtype), ")");
  }
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  const size_t width = dtype_bytes(info.dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = dist(rng);
    std::memcpy(t.bytes.data() + static_cast<size_t>(i) * width, &v, width);  // little-endian: the low bytes
  }
  return t;
}

// The process's peak resident set (VmHWM), in bytes; 0 where the system
// does not say.
uint64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

// Linear interpolation between the closest ranks (NumPy's default).
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(rank);
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (rank - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

struct Latency {
  double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

Latency latency_of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Latency l;
  if (ms.empty()) return l;
  double sum = 0;
  for (double v : ms) sum += v;
  l = {ms.front(),         percentile(ms, 50), percentile(ms, 90),
       percentile(ms, 99), ms.back(),          sum / static_cast<double>(ms.size())};
  return l;
}

// The runs themselves: warm-up untraced, then the timed runs (traced with
// --per-op) until the count or the time budget is reached.
std::vector<double> time_runs(MethodRunner& runner, const BenchOptions& o, EventTracer* tracer) {
  runner.set_tracer(nullptr);
  for (long r = 0; r < o.warmup; ++r) runner.execute();
  runner.set_tracer(tracer);
  std::vector<double> ms;
  const auto start = std::chrono::steady_clock::now();
  for (long r = 0; r < o.runs; ++r) {
    ms.push_back(runner.execute());
    if (o.seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= o.seconds) {
      break;
    }
  }
  runner.set_tracer(nullptr);
  return ms;
}

struct BenchResult {
  std::string path, method, isa;
  long threads = 1;
  bool random_inputs = false;
  std::vector<double> ms;
  Latency latency;
  std::vector<uint64_t> arenas;
  uint64_t arena_total = 0, constants = 0, bookkeeping = 0, program = 0, peak_rss = 0;
  std::vector<OpTime> per_op;
};

void print_text(const BenchResult& b, const BenchOptions& o) {
  std::printf("%s: method '%s', %zu timed run%s after %ld warm-up, %s inputs", b.path.c_str(), b.method.c_str(),
              b.ms.size(), b.ms.size() == 1 ? "" : "s", o.warmup, b.random_inputs ? "random" : "given");
  if (b.random_inputs) std::printf(" (seed %llu)", static_cast<unsigned long long>(o.seed));
  std::printf("\n  latency ms: min %.3f  p50 %.3f  p90 %.3f  p99 %.3f  max %.3f  mean %.3f\n", b.latency.min,
              b.latency.p50, b.latency.p90, b.latency.p99, b.latency.max, b.latency.mean);
  std::printf("  cpu path %s, %ld thread%s\n", b.isa.c_str(), b.threads, b.threads == 1 ? "" : "s");
  std::printf("  memory: arenas %s bytes (%zu arena%s), constants %s, bookkeeping %s; program file %s\n",
              group_digits(b.arena_total).c_str(), b.arenas.size(), b.arenas.size() == 1 ? "" : "s",
              group_digits(b.constants).c_str(), group_digits(b.bookkeeping).c_str(), group_digits(b.program).c_str());
  std::printf("  peak resident memory of this process: %s bytes\n", group_digits(b.peak_rss).c_str());
}

std::string bench_json(const BenchResult& b, const BenchOptions& o) {
  JsonWriter j;
  j.begin_object().field("program", b.path).field("method", b.method);
  j.field("warmup", static_cast<int64_t>(o.warmup)).field("runs", static_cast<uint64_t>(b.ms.size()));
  j.field("inputs", b.random_inputs ? "random" : "given");
  if (b.random_inputs) j.field("seed", o.seed);
  j.key("latency_ms").begin_object().field("min", b.latency.min).field("p50", b.latency.p50);
  j.field("p90", b.latency.p90).field("p99", b.latency.p99).field("max", b.latency.max);
  j.field("mean", b.latency.mean).end_object();
  j.field("isa", b.isa).field("threads", static_cast<int64_t>(b.threads));
  j.key("memory").begin_object().key("arena_bytes").begin_array();
  for (uint64_t a : b.arenas) j.value(a);
  j.end_array().field("constant_bytes", b.constants).field("bookkeeping_bytes", b.bookkeeping);
  j.field("program_bytes", b.program).field("peak_resident_bytes", b.peak_rss).end_object();
  if (o.per_op) {
    j.key("per_op").begin_array();
    for (const OpTime& op : b.per_op) {
      j.begin_object().field("op", op.op).field("count", op.count).field("ms", op.ms).field("share", op.share);
      j.end_object();
    }
    j.end_array();
  }
  j.end_object();
  return j.str() + "\n";
}

std::vector<HostTensor> bench_inputs(const Args& args, const MethodRunner& runner, const BenchOptions& o) {
  std::vector<HostTensor> inputs;
  for (const std::string& file : args.all("--input")) inputs.push_back(read_tensor_file(file));
  if (!inputs.empty()) return inputs;
  std::mt19937_64 rng(o.seed);
  for (const IoInfo& info : runner.inputs()) inputs.push_back(random_tensor(info, o, rng));
  return inputs;
}

// --save-inputs DIR (made where it does not exist).
void save_inputs(const std::string& dir, const std::vector<HostTensor>& inputs) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fail(dir, ": cannot create the directory");
  for (size_t i = 0; i < inputs.size(); ++i) write_npy(dir + "/input_" + std::to_string(i) + ".npy", inputs[i]);
}

}  // namespace

int cmd_bench(const Argv& argv) {
  // clang-format off
  const Args args(argv, {{"--input", true}, {"--seed", true}, {"--range", true}, {"--save-inputs", true}, {"--warmup", true}, {"--runs", true},
                         {"--time", true}, {"--method", true}, {"--isa", true}, {"--threads", true},
                         {"--per-op", false, true}, {"--top", true}, {"--json", false}, {"--help", false}});
  // clang-format on
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError{"expects one program file"};
  const BenchOptions o = parse_bench_options(args);
  BenchResult b;
  b.path = args.positional()[0];
  b.method = args.get("--method", "forward");
  const std::string bytes = read_file(b.path);
  if (args.has("--isa")) select_isa(args.get("--isa"));
  b.threads = thread_count(args);
  PosixThreadPool pool;
  if (b.threads > 1 && pool.start(static_cast<int>(b.threads)) != Error::kOk)
    fail("cannot start ", b.threads, " threads");

  RunOptions options;
  options.method = b.method;
  options.thread_pool = b.threads > 1 ? &pool : nullptr;
  options.backends = &runtime_backends_for(bytes);
  MethodRunner runner(bytes, options);
  const std::vector<HostTensor> inputs = bench_inputs(args, runner, o);
  b.random_inputs = args.all("--input").empty();
  if (args.has("--save-inputs")) save_inputs(args.get("--save-inputs"), inputs);
  runner.bind_inputs(inputs);
  TraceCapture trace;
  EventTracer* tracer = nullptr;
  // With a time budget, room for the records of 1,000 runs; later ones are dropped.
  if (o.per_op) tracer = trace.start(runner.num_instructions(), std::min<long>(o.runs, 1000));
  b.ms = time_runs(runner, o, tracer);
  const uint64_t validation_messages = shutdown_builtin_runtime_backends();
  if (validation_messages != 0) fail("the backends reported ", validation_messages, " diagnostic message(s)");

  b.latency = latency_of(b.ms);
  b.isa = ::kiln::kernels::isa_name(::kiln::kernels::active_isa());
  b.arenas = runner.arena_bytes();
  for (uint64_t a : b.arenas) b.arena_total += a;
  b.constants = runner.constant_bytes();
  b.bookkeeping = runner.bookkeeping_bytes();
  b.program = bytes.size();
  b.peak_rss = peak_resident_bytes();
  const TraceFile records = trace.trace(bytes, b.method);
  const InstructionLabels labels = o.per_op ? instruction_labels(bytes, b.path, b.method) : InstructionLabels{};
  const TraceTimes times = collect_times(records);
  if (o.per_op) b.per_op = per_op_times(times, labels);
  if (!o.chrome_path.empty()) write_file_atomic(o.chrome_path, chrome_trace(records, labels));
  if (o.json) {
    std::fputs(bench_json(b, o).c_str(), stdout);
    return 0;
  }
  print_text(b, o);
  if (o.per_op) {
    if (records.dropped != 0)
      std::printf("  (the trace kept the first runs' records; %llu dropped)\n",
                  static_cast<unsigned long long>(records.dropped));
    print_ops_and_slowest(times, labels, o.top);
  }
  if (!o.chrome_path.empty()) std::printf("\nChrome trace: %s\n", o.chrome_path.c_str());
  return 0;
}

}  // namespace kiln::planner::cli
