// kiln run: executes a program on inputs from .npy or .pb files.

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/run_support.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/npy.h"
#include "emit/program_file.h"
#include "emit/self_test_file.h"
#include "exec/run.h"
#include "exec/trace_file.h"
#include "kiln/kernels/isa.h"
#include "kiln/platform/platform.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "onnx/import.h"
#include "targets/runtime_backends.h"
#if KILN_WITH_MPI
#include "kiln/comm/mpi_communicator.h"
#endif
#if KILN_WITH_CUDA_IPC
#include "kiln/comm/cuda_ipc_communicator.h"
#endif

namespace kiln::planner::cli {
namespace {

constexpr const char* kHelp =
    "usage: kiln run PROGRAM.kiln --input FILE [--input FILE ...] [options]\n"
    "\n"
    "Runs the program's method on the inputs (ONNX TensorProto .pb or NumPy .npy,\n"
    "in the order of the method's inputs) and prints each output.\n"
    "\n"
    "options:\n"
    "  --input FILE        an input, once per method input, in order\n"
    "  --output-dir DIR    write output_0.npy, output_1.npy, ... to DIR\n"
    "  --runs N            execute N times and report the median latency (default 1)\n"
    "  --method NAME       the method to run (default forward)\n"
    "  --self-test FILE    run the bundled self-test FILE (kiln plan --bundle-test writes\n"
    "                      PROGRAM.test) instead of inputs: its inputs, its expected\n"
    "                      outputs and tolerance; exit status 1 when it fails\n"
    "  --profile           time every instruction; print the time per operator and\n"
    "                      the slowest instructions (medians over the runs)\n"
    "  --profile=FILE      also write every run's trace records to FILE (read it with\n"
    "                      `kiln profile FILE --program PROGRAM.kiln`)\n"
    "  --isa scalar|avx2|avx512\n"
    "                      the CPU kernels' instruction-set path (default: the best\n"
    "                      the processor has, or KILN_ISA=scalar|avx2|avx512); a path\n"
    "                      the processor lacks is an error\n"
    "  --dequantize        with --output-dir: write a quantized output (kiln plan\n"
    "                      --quantized-io) as its float32 values, (q - zero point) * scale,\n"
    "                      instead of its int8/uint8 data\n"
    "  --threads N         split large kernels (products, convolutions, element-wise\n"
    "                      passes) across N threads, this one included (default 1,\n"
    "                      or KILN_THREADS=N); the outputs are the same bits on any N\n"
    "  --huge-pages on|off host arenas and the program of 2 MiB or more on transparent\n"
    "                      huge pages (default on, Linux; where the system's setting is\n"
    "                      \"madvise\" nothing else in the process gets them): off keeps\n"
    "                      small pages, to compare with a runtime that has none\n"
    "\n"
    "A quantized input (kiln plan --quantized-io) takes int8/uint8 data of its dtype, or\n"
    "float32 data, which is quantized here with the input's scale and zero point, as the\n"
    "model's QuantizeLinear would; a quantized output prints its float values beside.\n"
    "\n"
    "Delegates run on the backend their device names; any diagnostic a backend\n"
    "reports (a validation message) fails the run.\n"
    "\n"
    "Ranks: a program planned for N ranks (kiln plan --tensor-parallel N or --ranks N)\n"
    "runs as N processes started by OpenMPI's launcher, all given the same arguments:\n"
    "  mpirun -n N kiln run PROGRAM.kiln --input FILE ...\n"
    "Their collectives go through MPI shared memory (one-shot all-reduce over\n"
    "symmetric arenas); rank 0 prints and writes the outputs. \"{rank}\" in an --input\n"
    "or --output-dir name stands for the rank: each rank reads its own file, and\n"
    "every rank writes its outputs when the directory names it. A peer that fails or\n"
    "stalls ends every rank with an error after KILN_COLLECTIVE_TIMEOUT_MS (default\n"
    "30000). A program planned with its collectives on cuda:0 runs this way under\n"
    "KILN_CUDA_EXECUTION=host: its device symmetric arenas in MPI shared memory, its\n"
    "collectives run by the CUDA backend's all-reduce kernels (one-shot or two-shot,\n"
    "as planned: kiln plan --allreduce), which read the peers' arenas directly.\n"
    "  --collective-sync flags|barrier   how ranks meet in a collective: per-rank flags\n"
    "                                    in shared memory (default) or MPI barriers\n"
    "  --device-peers on|off             off: the communicator hands out no device peers,\n"
    "                                    as one without load/store access to its peers'\n"
    "                                    memory, so device collectives run through its\n"
    "                                    all_reduce() and fused addends through the backend\n"
    "  --ranks-per-node K                treat every K consecutive ranks as one node: each node\n"
    "                                    reduces in shared memory, node leaders through\n"
    "                                    MPI_Allreduce, then a broadcast in each node (the\n"
    "                                    multi-node path, on one machine)\n"
    "  --comm auto|mpi-shm|cuda-ipc      the communicator (default auto: cuda-ipc for ranks\n"
    "                                    started by scripts/kiln-ranks, mpi-shm under mpirun)\n"
    "\n"
    "cuda-ipc: ranks without MPI, for programs whose collectives run on cuda:0. Its\n"
    "symmetric arenas are CUDA virtual memory every rank maps (two ranks may share one\n"
    "GPU); the ranks meet at KILN_RENDEZVOUS (a socket path, or @name). Start them with\n"
    "  scripts/kiln-ranks -n N -- kiln run PROGRAM.kiln --input FILE ...\n"
    "(KILN_RANK, KILN_WORLD_SIZE and KILN_RENDEZVOUS set for each), or under mpirun with\n"
    "--comm cuda-ipc. kiln's own tools run it under KILN_CUDA_EXECUTION=host.\n";

std::string summary(const HostTensor& t) {
  if (t.numel() == 0) return "(empty)";
  const bool is_float =
      t.dtype == DType::FLOAT32 || t.dtype == DType::FLOAT64 || t.dtype == DType::FLOAT16 || t.dtype == DType::BFLOAT16;
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.float_at(i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  std::string out = str("min ", lo, "  max ", hi, "  mean ", sum / static_cast<double>(t.numel()), "  [");
  const int64_t shown = std::min<int64_t>(t.numel(), 6);
  for (int64_t i = 0; i < shown; ++i) {
    char buf[32];
    if (is_float) {
      std::snprintf(buf, sizeof(buf), "%s%.6g", i ? ", " : "", t.float_at(i));
    } else {
      std::snprintf(buf, sizeof(buf), "%s%lld", i ? ", " : "", static_cast<long long>(t.int_at(i)));
    }
    out += buf;
  }
  return out + (t.numel() > shown ? ", ...]" : "]");
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// The per-instruction medians of a profiled run, summed per operator (the
// kernel's name, or the kind of a non-kernel instruction) and listed for
// the slowest instructions.
void print_profile(const std::string& bytes, const std::string& method_name, const RunResult& result) {
  const ProgramFile file(bytes, "program");
  const fb::Method* method = nullptr;
  for (const fb::Method* m : *file.program().methods()) {
    if (m->name() != nullptr && m->name()->str() == method_name) method = m;
  }
  if (method == nullptr || method->instructions() == nullptr) return;
  struct Row {
    std::string op, name;
    double ms = 0.0;
  };
  std::vector<Row> rows;
  double total = 0.0;
  for (uint32_t i = 0; i < method->instructions()->size(); ++i) {
    const fb::Instruction* in = method->instructions()->Get(i);
    Row row;
    switch (in->kind_type()) {
      case fb::InstructionKind::KernelCall: {
        const uint32_t op = in->kind_as_KernelCall()->op();
        row.op = method->operators() != nullptr && op < method->operators()->size()
                     ? method->operators()->Get(op)->name()->str()
                     : "?";
        break;
      }
      case fb::InstructionKind::DelegateCall: row.op = "(delegate)"; break;
      case fb::InstructionKind::CopyCall: row.op = "(copy)"; break;
      default: row.op = "(collective)"; break;
    }
    row.name = in->name() != nullptr ? in->name()->str() : "";
    row.ms = i < result.instruction_ms.size() ? median(result.instruction_ms[i]) : 0.0;
    total += row.ms;
    rows.push_back(row);
  }
  std::map<std::string, std::pair<double, int>> per_op;
  for (const Row& row : rows) {
    per_op[row.op].first += row.ms;
    per_op[row.op].second += 1;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> ops(per_op.begin(), per_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("profile: %zu instructions, %.3f ms in total (sum of per-instruction medians)\n", rows.size(), total);
  std::printf("  %-24s %6s %10s %7s\n", "operator", "count", "ms", "share");
  for (const auto& [op, v] : ops) {
    std::printf("  %-24s %6d %10.3f %6.1f%%\n", op.c_str(), v.second, v.first,
                total > 0 ? 100.0 * v.first / total : 0.0);
  }
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows[a].ms > rows[b].ms; });
  const size_t shown = std::min<size_t>(order.size(), 20);
  std::printf("  slowest instructions:\n");
  for (size_t j = 0; j < shown; ++j) {
    const Row& row = rows[order[j]];
    std::printf("  %5zu %-16s %10.3f  %s\n", order[j], row.op.c_str(), row.ms, row.name.c_str());
  }
}

void print_help() {
  std::fputs(kHelp, stdout);
  std::printf("\nbackends built in: %s\nenvironment:\n%s", builtin_runtime_backend_names().c_str(),
              builtin_runtime_backend_options().c_str());
}

[[maybe_unused]] bool cuda_runs_on_host() {
  const char* env = std::getenv("KILN_CUDA_EXECUTION");
  return env != nullptr && std::string(env) == "host";
}

// --comm auto: cuda-ipc where kiln's own launcher named a world of several
// ranks (KILN_WORLD_SIZE), else mpi-shm.
std::string pick_communicator(const std::string& option) {
  if (option != "auto") return option;
  const char* world = std::getenv("KILN_WORLD_SIZE");
  return world != nullptr && std::strtol(world, nullptr, 10) > 1 ? "cuda-ipc" : "mpi-shm";
}

#if KILN_WITH_CUDA_IPC
// With several ranks (kiln-ranks' or mpirun's environment), the cuda-ipc
// communicator for a program whose symmetric arenas are on a CUDA device,
// under the host execution model (kiln's tools link only it).
std::unique_ptr<comm::CudaIpcCommunicator> start_cuda_ipc(bool device_peers, DeviceType memory, RunOptions& options) {
  int rank = 0, size = 1, local = 0;
  if (comm::cuda_ipc_ranks_from_environment(&rank, &size, &local) != Error::kOk) {
    fail("cannot tell this rank's place from the environment (KILN_RANK, KILN_WORLD_SIZE)");
  }
  if (size <= 1) return nullptr;
  if (memory != DeviceType::CUDA) {
    fail("--comm cuda-ipc maps CUDA symmetric arenas; this program's collectives run on ", device_type_name(memory),
         " (plan it with --target cuda:0,cpu, or use mpi-shm under mpirun)");
  }
  if (!cuda_runs_on_host()) {
    fail("--comm cuda-ipc: kiln's tools run CUDA programs across ranks under KILN_CUDA_EXECUTION=host only");
  }
  comm::CudaIpcOptions ipc;
  ipc.driver = &comm::hostexec_cuda_ipc_driver();
  ipc.device_peers = device_peers;
  std::unique_ptr<comm::CudaIpcCommunicator> communicator;
  const Error error = comm::CudaIpcCommunicator::create(ipc, &communicator);
  if (error != Error::kOk) fail("cannot start the cuda-ipc communicator: ", error_name(error));
  options.communicators.push_back(communicator.get());
  return communicator;
}
#endif

#if KILN_WITH_MPI
// Under mpirun with more than one rank, the communicator the collectives go
// through (added to `options`); otherwise none.

// A program whose symmetric arenas are on a CUDA device maps them in MPI
// shared windows only under the host execution model of CUDA, where device
// memory is host memory.
std::unique_ptr<comm::MpiCommunicator> start_communicator(const std::string& sync, bool device_peers,
                                                          unsigned ranks_per_node, DeviceType memory,
                                                          RunOptions& options) {
  std::unique_ptr<comm::MpiCommunicator> communicator;
  unsigned world = 1;
  if (comm::launched_by_mpirun(&world) && world > 1) {
    if (memory != DeviceType::CPU && !(memory == DeviceType::CUDA && cuda_runs_on_host())) {
      fail("the program's collectives run on ", device_type_name(memory),
           " devices; kiln run reduces device symmetric arenas through MPI shared windows only under "
           "KILN_CUDA_EXECUTION=host");
    }
    comm::MpiOptions mpi;
    mpi.memory = memory;
    mpi.sync = sync == "barrier" ? comm::MpiSync::kBarrier : comm::MpiSync::kFlags;
    mpi.device_peers = device_peers;
    mpi.ranks_per_node = ranks_per_node;
    const Error error = comm::MpiCommunicator::create(mpi, &communicator);
    if (error != Error::kOk) fail("cannot start the MPI communicator: ", error_name(error));
    options.communicators.push_back(communicator.get());
  }
  return communicator;
}
#endif

// --profile=FILE: a trace buffer for every run's instructions, its execute
// record and what delegates add, written to FILE after the runs.
void start_trace(TraceCapture& trace, const std::string& bytes, const std::string& path, long runs,
                 RunOptions& options) {
  size_t instructions = 0;
  const ProgramFile file(bytes, path);
  for (const fb::Method* m : *file.program().methods()) {
    if (m->name()->str() == options.method && m->instructions() != nullptr) instructions = m->instructions()->size();
  }
  options.tracer = trace.start(instructions, runs);
}

// The exit status of a --self-test run, reported by rank 0.
int report_self_test(const std::string& test_path, const SelfTestReport& r, bool quiet) {
  (void)shutdown_builtin_runtime_backends();
  if (quiet) return r.passed ? 0 : 1;
  std::printf("self-test %s: %u output%s, worst is output %u with max relative error %.3g (tolerance %.3g): %s\n",
              test_path.c_str(), r.num_outputs, r.num_outputs == 1 ? "" : "s", r.worst_output,
              static_cast<double>(r.max_error), static_cast<double>(r.tolerance), r.passed ? "passed" : "FAILED");
  return r.passed ? 0 : 1;
}

// --output-dir: made where it does not exist.
void make_output_dir(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (mkdir(dir.c_str(), 0755) != 0) fail(dir, ": cannot create the output directory");
  } else if (!S_ISDIR(st.st_mode)) {
    fail(dir, ": not a directory");
  }
}

// Each output's summary (and a quantized one's float values), written to
// `dir` as output_N.npy where given.
void print_outputs(const RunResult& result, const std::vector<IoQuantization>& out_quantization, const std::string& dir,
                   bool dequantize) {
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    const HostTensor& out = result.outputs[i];
    std::printf("output %zu: %s %s  %s\n", i, dtype_str(out.dtype).c_str(), shape_str(out.shape).c_str(),
                summary(out).c_str());
    const bool quantized = i < out_quantization.size() && out_quantization[i].quantized;
    if (quantized) {
      std::printf("  quantized: scale %.9g, zero point %d; as float32  %s\n",
                  static_cast<double>(out_quantization[i].scale), out_quantization[i].zero_point,
                  summary(dequantize_from(out, out_quantization[i])).c_str());
    }
    if (!dir.empty()) {
      write_npy(dir + "/output_" + std::to_string(i) + ".npy",
                quantized && dequantize ? dequantize_from(out, out_quantization[i]) : out);
    }
  }
}

// `name` with each "{rank}" replaced by `rank`: under mpirun every rank
// reads its own inputs and writes its own outputs.
std::string for_rank(std::string name, unsigned rank) {
  const std::string key = "{rank}";
  for (size_t at = name.find(key); at != std::string::npos; at = name.find(key, at)) {
    name.replace(at, key.size(), std::to_string(rank));
  }
  return name;
}

}  // namespace

int cmd_run(const Argv& argv) {
  // clang-format off
  const Args args(argv, {{"--input", true}, {"--output-dir", true}, {"--runs", true}, {"--method", true},
                         {"--profile", false, true}, {"--collective-sync", true}, {"--device-peers", true}, {"--ranks-per-node", true}, {"--comm", true}, {"--self-test", true}, {"--isa", true},
                         {"--threads", true}, {"--dequantize", false}, {"--huge-pages", true},
                         {"--help", false}});
  // clang-format on
  if (args.has("--help")) {
    print_help();
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError{"expects one program file"};
  const std::string path = args.positional()[0];
  const long runs = args.get_int("--runs", 1);
  if (runs < 1) throw UsageError{"--runs must be at least 1"};
  const std::string bytes = read_file(path);
  if (args.has("--isa")) select_isa(args.get("--isa"));

  // A pool of threads - 1 workers beside this thread.
  const long threads = thread_count(args);
  PosixThreadPool pool;
  if (threads > 1 && pool.start(static_cast<int>(threads)) != Error::kOk) fail("cannot start ", threads, " threads");

  RunOptions options;
  options.runs = static_cast<int>(runs);
  options.thread_pool = threads > 1 ? &pool : nullptr;
  options.method = args.get("--method", "forward");
  options.backends = &runtime_backends_for(bytes);
  options.profile = args.has("--profile");
  const std::string huge = args.get("--huge-pages", "on");
  if (huge != "on" && huge != "off") throw UsageError{"--huge-pages is on or off"};
  options.huge_pages = huge == "on";
  const std::string sync = args.get("--collective-sync", "flags");
  if (sync != "flags" && sync != "barrier") throw UsageError{"--collective-sync is flags or barrier"};
  const std::string peers = args.get("--device-peers", "on");
  if (peers != "on" && peers != "off") throw UsageError{"--device-peers is on or off"};
  const long per_node = args.get_int("--ranks-per-node", 0);
  if (args.has("--ranks-per-node") && (per_node < 1 || per_node > 1 << 20)) {
    throw UsageError{"--ranks-per-node must be between 1 and 1048576"};
  }
  const std::string comm_name = pick_communicator(args.get("--comm", "auto"));
  if (comm_name != "mpi-shm" && comm_name != "cuda-ipc") throw UsageError{"--comm is auto, mpi-shm or cuda-ipc"};
  unsigned rank = 0;
#if KILN_WITH_CUDA_IPC
  std::unique_ptr<comm::CudaIpcCommunicator> ipc;
  if (comm_name == "cuda-ipc") {
    ipc = start_cuda_ipc(peers == "on", symmetric_device_type(bytes, options.method), options);
    if (ipc != nullptr) rank = ipc->rank();
  }
#else
  if (comm_name == "cuda-ipc") fail("this kiln was built without the cuda-ipc communicator");
#endif
#if KILN_WITH_MPI
  std::unique_ptr<comm::MpiCommunicator> communicator;
  if (comm_name == "mpi-shm") {
    communicator = start_communicator(sync, peers == "on", static_cast<unsigned>(per_node),
                                      symmetric_device_type(bytes, options.method), options);
    if (communicator != nullptr) rank = communicator->rank();
  }
#endif
  // Only rank 0 reports; every rank runs, and writes its outputs where the
  // directory names its rank.
  const std::string dir = for_rank(args.get("--output-dir"), rank);
  const bool quiet = rank != 0 && dir == args.get("--output-dir");
  std::vector<HostTensor> inputs;
  for (const std::string& file : args.all("--input")) inputs.push_back(read_tensor_file(for_rank(file, rank)));
  std::string self_test;
  if (args.has("--self-test")) {
    self_test = read_file(args.get("--self-test"));
    options.self_test = &self_test;
  }
  const std::string trace_path = args.get("--profile");
  TraceCapture trace;
  if (!trace_path.empty()) start_trace(trace, bytes, path, runs, options);
  const MethodIoQuantization quantization = io_quantization(bytes, options.method);
  for (size_t i = 0; i < inputs.size() && i < quantization.inputs.size(); ++i) {
    if (quantization.inputs[i].quantized && inputs[i].dtype == DType::FLOAT32) {
      inputs[i] = quantize_for(inputs[i], quantization.inputs[i]);
    }
  }
  const RunResult result = run_program(bytes, inputs, options);
  if (trace.started()) write_file_atomic(trace_path, encode_trace(trace.trace(bytes, options.method)));
  if (options.self_test != nullptr) return report_self_test(args.get("--self-test"), result.self_test, quiet);
  const uint64_t validation_messages = shutdown_builtin_runtime_backends();
  if (validation_messages != 0) fail("the backends reported ", validation_messages, " diagnostic message(s)");

  if (quiet) return 0;
  if (!dir.empty()) make_output_dir(dir);
  print_outputs(result, quantization.outputs, dir, args.has("--dequantize"));
  std::printf("latency: median %.3f ms over %ld run%s (cpu path %s, %ld thread%s)\n", result.median_ms(), runs,
              runs == 1 ? "" : "s", ::kiln::kernels::isa_name(::kiln::kernels::active_isa()), threads,
              threads == 1 ? "" : "s");
  if (options.profile) print_profile(bytes, options.method, result);
  return 0;
}

}  // namespace kiln::planner::cli
