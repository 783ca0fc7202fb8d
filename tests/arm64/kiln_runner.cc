// kiln-runner: runs programs planned on another machine, for targets where
// the planner is not built (arm64 Linux, Android). It links the runtime, the
// platform layer and the CPU kernels only (no ONNX, no protobuf), and
// uses the runtime as an application would: Program::load, buffers sized
// from MethodMeta, zero-copy binding. Its own buffers come from the heap;
// the runtime's never do.
//
//   kiln-runner run PROGRAM [--input FILE]... [--output-dir DIR] [--runs N] [--method NAME]
//       Inputs in method order, .npy (any dtype; its bytes must be what the
//       method takes) or raw little-endian bytes (.bin). Writes
//       DIR/output_<i>.bin (raw bytes). --runs 0 loads and binds only: with
//       an instruction counter, count(runs=N) - count(runs=0) is N
//       inferences and nothing else (bench/arm64).
//   kiln-runner check DIR [--rtol R] [--atol A] [--norm-atol F] [--min-cases N] [--runs N]
//       Every folder under DIR holding program.kiln (or DIR itself) is a
//       case: inputs input_<i>.bin, expected outputs expected_<i>.bin,
//       written by the host's conformance runner (kiln_onnx_node_tests
//       --export) or bench/arm64/export_models.sh. Floats must agree within
//       atol + rtol * |expected| (NaN with NaN, infinities by sign), other
//       dtypes exactly, after each of --runs executions (default 1; the
//       CUDA backend's third replays a captured graph). --norm-atol F
//       raises atol to F * max|expected| of each output (cases planned
//       with --precision fp16/bf16, whose errors scale with the output's
//       largest values: kiln_onnx_node_tests --precision). Exit 1 on any
//       failure or fewer than N cases.
//   kiln-runner isa [--expect PATH]
//       Prints the CPU path the kernels take ("cpu path neon"); with
//       --expect, exits 1 unless it is PATH.
//
// The kernels' path follows the ISA switch: KILN_ISA=scalar|neon on arm64
// (kiln/kernels/isa.h).
//
// Built with the CUDA backend (a native build without the planner,
// KILN_BUILD_RUNNER: kiln_runner.cmake), programs planned for cuda:N run
// too: on the GPU (its GPU build), or under the host execution model with
// KILN_CUDA_EXECUTION=host (test infrastructure: Gemm/MatMul on the
// reference GEMM kernel). KILN_CUDA_WORKSPACE_MB and KILN_CUDA_GRAPHS=0 as
// for `kiln run`. What the backend did (delegate calls launched directly,
// replayed from CUDA graphs, Gemm on cuBLASLt or the reference kernel) is
// printed to stderr at exit.
//
// Ranks: started by scripts/kiln-ranks (KILN_WORLD_SIZE, KILN_RANK,
// KILN_RENDEZVOUS) or by mpirun, `run` executes a program planned for
// several ranks with its CUDA collectives through the cuda-ipc communicator
// (comm/cuda_ipc: CUDA virtual memory shared between the processes; on the
// GPU, or under KILN_CUDA_EXECUTION=host with the backend); "{rank}" in
// --input and --output-dir stands for the rank.
//
//   kiln-runner all-reduce-bench [OPTIONS]
//       Under scripts/kiln-ranks: the CUDA backend's all-reduce kernels across
//       the ranks through cuda-ipc, every output checked, timed beside a
//       device copy and NCCL (bench/cuda_allreduce/allreduce_bench.cc).
//
// Built with the Vulkan backend
// (KILN_WITH_VULKAN), programs planned for vulkan:N run on the Vulkan
// loader's devices (KILN_VULKAN_VALIDATION=1 turns the validation layer on).

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kernels/cpu.h"
#include "kiln/kernels/float16.h"
#include "kiln/kernels/isa.h"
#include "kiln/runtime/program.h"
#if KILN_RUNNER_CUDA_IPC
#include "kiln/comm/cuda_ipc_communicator.h"
#endif
#if KILN_RUNNER_VULKAN
#include "kiln/backends/vulkan/vulkan_backend.h"
#endif
#if KILN_RUNNER_ALLREDUCE_BENCH_GPU
namespace kiln_bench::gpu {
int run_all_reduce_bench(int argc, char** argv);
}
#endif
#if KILN_RUNNER_ALLREDUCE_BENCH_HOSTEXEC
namespace kiln_bench::hostexec {
int run_all_reduce_bench(int argc, char** argv);
}
#endif

#if KILN_RUNNER_CUDA_GPU || KILN_RUNNER_CUDA_HOSTEXEC
#include "kiln/backends/cuda/cuda_backend.h"
#define KILN_RUNNER_CUDA 1
// runner_cuda.cc, one per flavour built.
#define KILN_RUNNER_CUDA_DECLARE(flavor)                                         \
  namespace kiln_runner::flavor {                                                \
  kiln::Backend* cuda_backend(const kiln::backends::cuda::CudaOptions& options); \
  const kiln::backends::cuda::CudaStats& cuda_stats();                           \
  uint32_t cuda_shutdown();                                                      \
  }
#if KILN_RUNNER_CUDA_GPU
KILN_RUNNER_CUDA_DECLARE(gpu)
#endif
#if KILN_RUNNER_CUDA_HOSTEXEC
KILN_RUNNER_CUDA_DECLARE(hostexec)
#endif
#endif

namespace {

// 64-byte aligned heap bytes.
class Buffer {
 public:
  explicit Buffer(size_t size) : storage_(new uint64_t[(size + 63) / 8 + 8]), size_(size) {
    const uintptr_t v = reinterpret_cast<uintptr_t>(storage_.get());
    data_ = reinterpret_cast<uint8_t*>((v + 63) & ~uintptr_t{63});
  }
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint64_t[]> storage_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

bool read_file(const std::string& path, std::string* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  out->clear();
  char chunk[65536];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) out->append(chunk, n);
  std::fclose(f);
  return true;
}

bool write_file(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

// The kernels' CPU path, as KILN_ISA names it.
const char* cpu_path() { return kiln::kernels::isa_name(kiln::kernels::active_isa()); }

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The data of a tensor file: a .npy file's bytes after its header (format
// 1.0 to 3.0), or the whole file. False with *error set otherwise.
bool tensor_bytes(const std::string& path, std::string* out, std::string* error) {
  std::string bytes;
  if (!read_file(path, &bytes)) {
    *error = path + ": cannot read";
    return false;
  }
  if (bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0) {
    const int major = static_cast<unsigned char>(bytes[6]);
    size_t header = 0, start = 0;
    if (major == 1) {
      header = static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
      start = 10;
    } else if (bytes.size() >= 12) {
      for (int i = 0; i < 4; ++i) header |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
      start = 12;
    }
    if (start == 0 || start + header > bytes.size()) {
      *error = path + ": malformed .npy header";
      return false;
    }
    if (bytes.find("'fortran_order': True", start) < start + header) {
      *error = path + ": Fortran-order .npy is not supported";
      return false;
    }
    *out = bytes.substr(start + header);
    return true;
  }
  *out = std::move(bytes);
  return true;
}

// A loaded method with its memory: the program's bytes, bookkeeping and
// host arenas.
struct Loaded {
  std::unique_ptr<Buffer> file, bookkeeping_memory;
  std::vector<std::unique_ptr<Buffer>> arenas;
  std::vector<kiln::Span<uint8_t>> spans;
  std::unique_ptr<kiln::BufferDataLoader> loader;
  std::unique_ptr<kiln::BumpAllocator> bookkeeping;
  std::optional<kiln::Program> program;
  std::optional<kiln::Method> method;
};

bool load(const std::string& path, const char* method_name, Loaded* out, std::string* error,
          kiln::Span<kiln::Communicator* const> communicators = {}) {
  std::string bytes;
  if (!read_file(path, &bytes)) {
    *error = path + ": cannot read";
    return false;
  }
  out->file = std::make_unique<Buffer>(bytes.size());
  std::memcpy(out->file->data(), bytes.data(), bytes.size());
  out->loader = std::make_unique<kiln::BufferDataLoader>(out->file->data(), out->file->size());
  kiln::Result<kiln::Program> program = kiln::Program::load(*out->loader);
  if (!program.ok()) {
    *error = path + ": load failed: " + kiln::error_name(program.error());
    return false;
  }
  out->program.emplace(*program);
  kiln::Result<kiln::MethodMeta> meta = out->program->method_meta(method_name);
  if (!meta.ok()) {
    *error = path + ": no method '" + method_name + "'";
    return false;
  }
  out->bookkeeping_memory = std::make_unique<Buffer>(static_cast<size_t>(meta->bookkeeping_bytes()));
  out->bookkeeping =
      std::make_unique<kiln::BumpAllocator>(out->bookkeeping_memory->data(), out->bookkeeping_memory->size());
  for (size_t i = 0; i < meta->num_arenas(); ++i) {
    const kiln::ArenaInfo info = meta->arena(i).get();
    if (info.device.type() != kiln::DeviceType::CPU) {
      // Device arenas: allocated by their backend when the method loads.
      if (kiln::global_backend_registry().for_device(info.device.type()) == nullptr) {
        *error = path + ": arena " + std::to_string(i) +
                 " is on a device this kiln-runner has no backend for (CUDA joins a native build with "
                 "KILN_BUILD_RUNNER)";
        return false;
      }
      out->arenas.push_back(nullptr);
      out->spans.emplace_back();
      continue;
    }
    out->arenas.push_back(std::make_unique<Buffer>(static_cast<size_t>(info.size)));
    out->spans.emplace_back(out->arenas.back()->data(), static_cast<size_t>(info.size));
  }
  kiln::MemoryManager memory;
  memory.bookkeeping = out->bookkeeping.get();
  memory.arenas = kiln::Span<const kiln::Span<uint8_t>>(out->spans.data(), out->spans.size());
  memory.communicators = communicators;
  kiln::Result<kiln::Method> method = out->program->load_method(method_name, memory);
  if (!method.ok()) {
    *error = path + ": method load failed: " + kiln::error_name(method.error());
    return false;
  }
  out->method.emplace(std::move(*method));
  return true;
}

// Binds inputs (their bytes must outlive the runs) and fresh outputs.
bool bind_io(Loaded& loaded, const std::vector<std::string>& inputs, std::vector<std::string>* outputs,
             std::string* error) {
  kiln::Method& method = *loaded.method;
  if (inputs.size() != method.num_inputs()) {
    *error = "the method takes " + std::to_string(method.num_inputs()) + " inputs, " + std::to_string(inputs.size()) +
             " were given";
    return false;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Zero-size inputs still need a valid pointer.
    const void* data = inputs[i].empty() ? static_cast<const void*>(&inputs) : inputs[i].data();
    const kiln::Error e = method.set_input(i, data, inputs[i].size());
    if (e != kiln::Error::kOk) {
      *error =
          "input " + std::to_string(i) + " (" + std::to_string(inputs[i].size()) + " bytes): " + kiln::error_name(e);
      return false;
    }
  }
  outputs->assign(method.num_outputs(), std::string());
  for (size_t i = 0; i < method.num_outputs(); ++i) {
    (*outputs)[i].assign(method.output(i)->nbytes(), '\0');
    (*outputs)[i].reserve(16);
    const kiln::Error e = method.set_output(i, (*outputs)[i].data(), (*outputs)[i].size());
    if (e != kiln::Error::kOk) {
      *error = "output " + std::to_string(i) + ": " + kiln::error_name(e);
      return false;
    }
  }
  return true;
}

bool is_float(kiln::DType t) {
  return t == kiln::DType::FLOAT32 || t == kiln::DType::FLOAT64 || t == kiln::DType::FLOAT16 ||
         t == kiln::DType::BFLOAT16;
}

double float_at(const std::string& bytes, kiln::DType t, size_t i) {
  const char* p = bytes.data();
  switch (t) {
    case kiln::DType::FLOAT64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case kiln::DType::FLOAT16:
    case kiln::DType::BFLOAT16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return t == kiln::DType::FLOAT16 ? kiln::half_to_float(h) : kiln::bfloat16_to_float(h);
    }
    default: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
  }
}

// "" when `got` matches `want` (tensor of dtype t).
std::string compare(const std::string& got, const std::string& want, kiln::DType t, double rtol, double atol,
                    double norm_atol) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " bytes, expected " + std::to_string(want.size());
  }
  if (!is_float(t)) {
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i]) return "byte " + std::to_string(i) + " differs";
    }
    return "";
  }
  const size_t n = got.size() / kiln::dtype_size(t);
  for (size_t i = 0; i < n && norm_atol > 0; ++i) {
    const double b = std::fabs(float_at(want, t, i));
    if (std::isfinite(b)) atol = std::max(atol, norm_atol * b);
  }
  for (size_t i = 0; i < n; ++i) {
    const double a = float_at(got, t, i), b = float_at(want, t, i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::isinf(a) && std::isinf(b) && (a > 0) == (b > 0)) continue;
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      char text[128];
      std::snprintf(text, sizeof(text), "element %zu: %.9g != %.9g", i, a, b);
      return text;
    }
  }
  return "";
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// One case of `check`: "" when it passes.
std::string check_case(const std::string& dir, double rtol, double atol, double norm_atol, long runs) {
  Loaded loaded;
  std::string error;
  if (!load(dir + "/program.kiln", "forward", &loaded, &error)) return error;
  std::vector<std::string> inputs;
  for (size_t i = 0; exists(dir + "/input_" + std::to_string(i) + ".bin"); ++i) {
    inputs.emplace_back();
    if (!tensor_bytes(dir + "/input_" + std::to_string(i) + ".bin", &inputs.back(), &error)) return error;
  }
  std::vector<std::string> outputs;
  if (!bind_io(loaded, inputs, &outputs, &error)) return error;
  std::vector<std::string> wants(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!tensor_bytes(dir + "/expected_" + std::to_string(i) + ".bin", &wants[i], &error)) return error;
  }
  for (long r = 0; r < runs; ++r) {
    const std::string run = runs > 1 ? " (run " + std::to_string(r + 1) + ")" : "";
    const kiln::Error e = loaded.method->execute();
    if (e != kiln::Error::kOk) return "execute" + run + ": " + kiln::error_name(e);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string diff = compare(outputs[i], wants[i], loaded.method->output(i)->dtype(), rtol, atol, norm_atol);
      if (!diff.empty()) return "output " + std::to_string(i) + run + ": " + diff;
      if (r + 1 < runs) std::memset(outputs[i].data(), 0xff, outputs[i].size());  // NaNs: stale outputs fail
    }
  }
  return "";
}

int cmd_check(int argc, char** argv) {
  std::string root;
  // ONNX's backend test tolerances.
  double rtol = 1e-3, atol = 1e-5, norm_atol = 0;
  long min_cases = 1, runs = 1;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rtol" && i + 1 < argc) {
      rtol = std::atof(argv[++i]);
    } else if (a == "--atol" && i + 1 < argc) {
      atol = std::atof(argv[++i]);
    } else if (a == "--norm-atol" && i + 1 < argc) {
      norm_atol = std::atof(argv[++i]);
    } else if (a == "--min-cases" && i + 1 < argc) {
      min_cases = std::atol(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1L, std::atol(argv[++i]));
    } else if (root.empty() && a[0] != '-') {
      root = a;
    } else {
      std::fprintf(stderr, "kiln-runner check: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::string> cases;
  if (exists(root + "/program.kiln")) {
    cases.push_back(root);
  } else {
    for (const std::string& name : list_dir(root)) {
      if (exists(root + "/" + name + "/program.kiln")) cases.push_back(root + "/" + name);
    }
  }
  long pass = 0, fail = 0;
  for (const std::string& dir : cases) {
    const std::string why = check_case(dir, rtol, atol, norm_atol, runs);
    if (why.empty()) {
      ++pass;
    } else {
      ++fail;
      std::printf("FAIL %s: %s\n", dir.c_str(), why.c_str());
    }
  }
  std::printf("cpu path %s: %ld passed, %ld failed (of %zu cases under %s)\n", cpu_path(), pass, fail, cases.size(),
              root.c_str());
  if (static_cast<long>(cases.size()) < min_cases) {
    std::printf("expected at least %ld cases\n", min_cases);
    return 1;
  }
  return fail == 0 ? 0 : 1;
}

// `name` with each "{rank}" replaced by `rank`.
std::string for_rank(std::string name, int rank) {
  const std::string key = "{rank}";
  for (size_t at = name.find(key); at != std::string::npos; at = name.find(key, at)) {
    name.replace(at, key.size(), std::to_string(rank));
  }
  return name;
}

#if KILN_RUNNER_CUDA
// The CUDA backend's flavour in use: 'h' (host execution model) or 'g'.
char g_cuda_flavor = 0;
#endif

#if KILN_RUNNER_CUDA_IPC
// With several ranks in the environment: the cuda-ipc communicator over the
// CUDA backend's flavour in use; *out_rank this rank. False (logged) when
// it cannot start.
bool start_communicator(std::unique_ptr<kiln::comm::CudaIpcCommunicator>* out, int* out_rank) {
  int rank = 0, size = 1, local = 0;
  if (kiln::comm::cuda_ipc_ranks_from_environment(&rank, &size, &local) != kiln::Error::kOk) return false;
  *out_rank = rank;
  if (size <= 1) return true;
  kiln::comm::CudaIpcOptions options;
#if KILN_RUNNER_CUDA_HOSTEXEC
  if (g_cuda_flavor == 'h') options.driver = &kiln::comm::hostexec_cuda_ipc_driver();
#endif
#if KILN_RUNNER_CUDA_IPC_GPU
  if (g_cuda_flavor == 'g') options.driver = &kiln::comm::gpu_cuda_ipc_driver();
#endif
  if (options.driver == nullptr) {
    std::fprintf(stderr, "kiln-runner: %d ranks, but no CUDA build here has cuda-ipc's calls\n", size);
    return false;
  }
  const kiln::Error e = kiln::comm::CudaIpcCommunicator::create(options, out);
  if (e != kiln::Error::kOk) std::fprintf(stderr, "kiln-runner: cuda-ipc: %s\n", kiln::error_name(e));
  return e == kiln::Error::kOk;
}
#endif

int cmd_run(int argc, char** argv) {
  std::string path, output_dir, method_name = "forward";
  std::vector<std::string> input_files;
  long runs = 1;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--input" && i + 1 < argc) {
      input_files.push_back(argv[++i]);
    } else if (a == "--output-dir" && i + 1 < argc) {
      output_dir = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atol(argv[++i]);
    } else if (a == "--method" && i + 1 < argc) {
      method_name = argv[++i];
    } else if (path.empty() && a[0] != '-') {
      path = a;
    } else {
      std::fprintf(stderr, "kiln-runner run: unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  int rank = 0;
  kiln::Communicator* communicators[1] = {nullptr};
  kiln::Span<kiln::Communicator* const> group;
#if KILN_RUNNER_CUDA_IPC
  // Before the method, so it is destroyed after it.
  std::unique_ptr<kiln::comm::CudaIpcCommunicator> communicator;
  if (!start_communicator(&communicator, &rank)) return 1;
  communicators[0] = communicator.get();
  if (communicator != nullptr) group = kiln::Span<kiln::Communicator* const>(communicators, 1);
#endif
  output_dir = for_rank(output_dir, rank);
  Loaded loaded;
  std::string error;
  std::vector<std::string> inputs(input_files.size()), outputs;
  for (size_t i = 0; i < input_files.size(); ++i) {
    input_files[i] = for_rank(input_files[i], rank);
    if (!tensor_bytes(input_files[i], &inputs[i], &error)) {
      std::fprintf(stderr, "kiln-runner: %s\n", error.c_str());
      return 1;
    }
  }
  if (!load(path, method_name.c_str(), &loaded, &error, group) || !bind_io(loaded, inputs, &outputs, &error)) {
    std::fprintf(stderr, "kiln-runner: %s\n", error.c_str());
    return 1;
  }
  std::vector<double> ms;
  for (long r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const kiln::Error e = loaded.method->execute();
    const auto stop = std::chrono::steady_clock::now();
    if (e != kiln::Error::kOk) {
      std::fprintf(stderr, "kiln-runner: execute failed: %s\n", kiln::error_name(e));
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!output_dir.empty() &&
        !write_file(output_dir + "/output_" + std::to_string(i) + ".bin", outputs[i].data(), outputs[i].size())) {
      std::fprintf(stderr, "kiln-runner: cannot write into %s\n", output_dir.c_str());
      return 1;
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%ld run%s, cpu path %s, median %.3f ms (wall time; under an emulator it means little)\n", runs,
              runs == 1 ? "" : "s", cpu_path(), ms.empty() ? 0.0 : ms[ms.size() / 2]);
  return 0;
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

#if KILN_RUNNER_CUDA

bool register_cuda() {
  kiln::backends::cuda::CudaOptions options;
  if (const char* mb = std::getenv("KILN_CUDA_WORKSPACE_MB")) {
    const long n = std::strtol(mb, nullptr, 10);
    options.gemm_workspace_bytes = static_cast<uint64_t>(n > 0 ? n : 0) << 20;
  }
  options.graphs = !env_is("KILN_CUDA_GRAPHS", "0");
  // Several ranks on a node (scripts/kiln-ranks, mpirun): cuda:0 is the rank's own GPU.
  const bool kiln_launcher = std::getenv("KILN_WORLD_SIZE") != nullptr;
  const char* world = std::getenv(kiln_launcher ? "KILN_WORLD_SIZE" : "OMPI_COMM_WORLD_SIZE");
  const char* local = std::getenv(kiln_launcher ? "KILN_LOCAL_RANK" : "OMPI_COMM_WORLD_LOCAL_RANK");
  if (world != nullptr && local != nullptr && std::strtol(world, nullptr, 10) > 1) {
    options.node_rank = static_cast<int>(std::strtol(local, nullptr, 10));
  }
  kiln::Backend* backend = nullptr;
  if (env_is("KILN_CUDA_EXECUTION", "host")) {
#if KILN_RUNNER_CUDA_HOSTEXEC
    backend = kiln_runner::hostexec::cuda_backend(options);
    g_cuda_flavor = 'h';
#endif
  } else {
#if KILN_RUNNER_CUDA_GPU
    backend = kiln_runner::gpu::cuda_backend(options);
    g_cuda_flavor = 'g';
#else
    std::fprintf(stderr,
                 "kiln-runner: built without the CUDA backend's GPU build (KILN_WITH_CUDA); cuda:N programs run "
                 "only with KILN_CUDA_EXECUTION=host\n");
#endif
  }
  return backend == nullptr || kiln::global_backend_registry().register_backend(backend) == kiln::Error::kOk;
}

// What the CUDA backend did; its leaked arenas count as a failure.
int report_cuda(int status) {
  if (g_cuda_flavor == 0) return status;
#if KILN_RUNNER_CUDA_HOSTEXEC
  if (g_cuda_flavor == 'h') {
    const kiln::backends::cuda::CudaStats& s = kiln_runner::hostexec::cuda_stats();
    std::fprintf(stderr,
                 "cuda (host execution model): %llu delegate calls launched directly, %llu replayed from %llu "
                 "captured graphs; %llu Gemm/MatMul kernels on the reference GEMM (cuBLASLt is not modelled)\n",
                 static_cast<unsigned long long>(s.direct_calls), static_cast<unsigned long long>(s.graph_replays),
                 static_cast<unsigned long long>(s.captures), static_cast<unsigned long long>(s.gemm_reference));
    const uint32_t leaks = kiln_runner::hostexec::cuda_shutdown();
    if (leaks != 0) std::fprintf(stderr, "cuda: %u arenas never released\n", leaks);
    return leaks != 0 ? 1 : status;
  }
#endif
#if KILN_RUNNER_CUDA_GPU
  const kiln::backends::cuda::CudaStats& s = kiln_runner::gpu::cuda_stats();
  std::fprintf(stderr,
               "cuda (GPU): %llu delegate calls launched directly, %llu replayed from %llu captured graphs "
               "(%llu capture failures); Gemm/MatMul kernels: %llu on cuBLASLt, %llu on the reference GEMM\n",
               static_cast<unsigned long long>(s.direct_calls), static_cast<unsigned long long>(s.graph_replays),
               static_cast<unsigned long long>(s.captures), static_cast<unsigned long long>(s.capture_failures),
               static_cast<unsigned long long>(s.gemm_library), static_cast<unsigned long long>(s.gemm_reference));
  const uint32_t leaks = kiln_runner::gpu::cuda_shutdown();
  if (leaks != 0) std::fprintf(stderr, "cuda: %u arenas never released\n", leaks);
  return leaks != 0 ? 1 : status;
#else
  return status;
#endif
}
#else
bool register_cuda() { return true; }
int report_cuda(int status) { return status; }
#endif

#if KILN_RUNNER_VULKAN
// Opened only when a program needs a vulkan:N device.
bool register_vulkan() {
  kiln::backends::vulkan::VulkanOptions options;
  options.validation = env_is("KILN_VULKAN_VALIDATION", "1");
  static kiln::backends::vulkan::VulkanBackend backend(options);
  return kiln::backends::vulkan::register_vulkan_backend(kiln::global_backend_registry(), &backend) == kiln::Error::kOk;
}
#else
bool register_vulkan() { return true; }
#endif

}  // namespace

int main(int argc, char** argv) {
  if (kiln::register_cpu_kernels() != kiln::Error::kOk || !register_cuda() || !register_vulkan()) {
    std::fprintf(stderr, "kiln-runner: kernel or backend registration failed\n");
    return 1;
  }
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "run" && argc > 2) return report_cuda(cmd_run(argc - 2, argv + 2));
  if (command == "check" && argc > 2) return report_cuda(cmd_check(argc - 2, argv + 2));
  if (command == "all-reduce-bench") {
#if KILN_RUNNER_ALLREDUCE_BENCH_HOSTEXEC
    if (g_cuda_flavor == 'h') return kiln_bench::hostexec::run_all_reduce_bench(argc - 2, argv + 2);
#endif
#if KILN_RUNNER_ALLREDUCE_BENCH_GPU
    if (g_cuda_flavor == 'g') return kiln_bench::gpu::run_all_reduce_bench(argc - 2, argv + 2);
#endif
    std::fprintf(stderr, "kiln-runner: all-reduce-bench: no CUDA build with cuda-ipc here\n");
    return 2;
  }
  if (command == "isa") {
    const char* active = cpu_path();
    std::printf("cpu path %s\n", active);
    return argc == 4 && std::strcmp(argv[2], "--expect") == 0 && std::strcmp(argv[3], active) != 0 ? 1 : 0;
  }
  std::fprintf(stderr,
               "usage: kiln-runner run PROGRAM [--input FILE]... [--output-dir DIR] [--runs N] [--method NAME]\n"
               "       (ranks: scripts/kiln-ranks -n N -- kiln-runner run ...; {rank} in file names)\n"
               "       kiln-runner check DIR [--rtol R] [--atol A] [--min-cases N] [--runs N]\n"
               "       kiln-runner isa [--expect PATH]\n"
               "       kiln-runner all-reduce-bench [--min-bytes B] [--max-bytes B] [--iterations-bytes B] "
               "[--nccl LIB]\n");
  return 2;
}
