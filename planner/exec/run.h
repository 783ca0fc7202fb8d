// Runs a .kiln program through the runtime from host code: what `kiln run`,
// constant folding, the conformance runner and the benchmarks use. The
// runtime is used exactly as an application would (Program::load,
// MethodMeta-sized buffers, zero-copy binding); only the buffers come from
// the host heap here.

#ifndef KILN_PLANNER_EXEC_RUN_H_
#define KILN_PLANNER_EXEC_RUN_H_

#include <memory>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/communicator.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/method.h"
#include "kiln/runtime/self_test.h"
#include "ops/host_kernels.h"  // host_kernel_registry(), which programs run with

namespace kiln::planner {

struct RunOptions {
  std::string method = "forward";
  int runs = 1;  // executions; timing reports their median
  // Backends serving device arenas and delegates (not owned); nullptr: the
  // runtime's global registry. See targets/runtime_backends.h.
  const BackendRegistry* backends = nullptr;
  // Time every instruction (Method::set_observer) on every run.
  bool profile = false;
  // Records every execute() and instruction (Method::set_tracer); not owned.
  EventTracer* tracer = nullptr;
  // Workers the kernels may split their work across
  // (Method::set_thread_pool); not owned; nullptr: the calling thread only.
  ThreadPool* thread_pool = nullptr;
  // A bundled self-test's bytes (a .kiln.test file): run it instead of the
  // inputs (which must then be empty) and fill RunResult::self_test.
  const std::string* self_test = nullptr;
  // Communicators by group (not owned; see MemoryManager::communicators):
  // empty for a program of one rank.
  std::vector<Communicator*> communicators;
  // Host arenas and the program buffer of 2 MiB or more on huge pages
  // (advised as transparent huge pages on Linux); false: small pages.
  bool huge_pages = true;
};

struct RunResult {
  std::vector<HostTensor> outputs;
  std::vector<double> latencies_ms;  // one per run
  // With RunOptions::profile: per instruction, its milliseconds in each
  // run (instruction_ms[i][r]).
  std::vector<std::vector<double>> instruction_ms;
  SelfTestReport self_test;
  double median_ms() const;
};

// Throws PlanError with the runtime's error name (and what it logged) on any
// failure, naming the input at fault for a dtype or shape mismatch.
RunResult run_program(const std::string& program_bytes, const std::vector<HostTensor>& inputs,
                      const RunOptions& options);

// A method's input or output as MethodMeta describes it.
struct IoInfo {
  std::string name;
  DType dtype = DType::FLOAT32;
  std::vector<int64_t> shape;
};

// One method of a program, loaded once and executed any number of times on
// inputs bound between runs: what run_program does for one set of inputs,
// for callers that run many (quantizer calibration, kiln bench). The
// program's bytes are copied; its arenas, bookkeeping and output buffers are
// allocated at construction and reused by every run. RunOptions::runs,
// profile and self_test are not used here; the tracer, thread pool,
// backends and communicators are. Not thread safe.
class MethodRunner {
 public:
  // Throws PlanError as run_program does.
  MethodRunner(const std::string& program_bytes, const RunOptions& options);
  ~MethodRunner();
  MethodRunner(const MethodRunner&) = delete;
  MethodRunner& operator=(const MethodRunner&) = delete;

  const std::vector<IoInfo>& inputs() const;
  const std::vector<IoInfo>& outputs() const;
  // Binds the inputs, checked against inputs() (dtype and shape, naming the
  // input at fault). Zero copy: they must stay alive and unmoved until the
  // last execute() that reads them.
  void bind_inputs(const std::vector<HostTensor>& inputs);
  // One execute() of the method; its wall time in milliseconds.
  double execute();
  // The buffers the method writes its outputs into, overwritten by each run.
  const std::vector<HostTensor>& output_values() const;
  std::vector<HostTensor>& output_values();
  // Sets the tracer for the following runs (not owned; nullptr: none).
  void set_tracer(EventTracer* tracer);

  // What the loaded method holds: its host arenas' sizes, the bookkeeping
  // bytes and the program's constant segment.
  std::vector<uint64_t> arena_bytes() const;
  uint64_t bookkeeping_bytes() const;
  uint64_t constant_bytes() const;
  size_t num_instructions() const;

  // Runs a bundled self-test's bytes (a .kiln.test file) instead of inputs.
  SelfTestReport run_self_test(const std::string& test_bytes);
  // The loaded method, for what the runner does not wrap (observers).
  Method& method();

  struct State;  // the program, its memory and the method (run.cc)

 private:
  std::unique_ptr<State> state_;
};

// A method input's or output's quantization (kiln plan --quantized-io), as
// MethodMeta reports it.
struct IoQuantization {
  bool quantized = false;
  DType dtype = DType::FLOAT32;
  float scale = 0.f;
  int32_t zero_point = 0;
};

// Per input and per output of `method`, in order (one load of the program).
struct MethodIoQuantization {
  std::vector<IoQuantization> inputs;
  std::vector<IoQuantization> outputs;
};
MethodIoQuantization io_quantization(const std::string& program_bytes, const std::string& method);

// Where the symmetric arenas of `method` live (the device type of the
// first; CPU when it has none): the memory its communicator must map.
DeviceType symmetric_device_type(const std::string& program_bytes, const std::string& method);

// Float32 data quantized for a quantized input as QuantizeLinear does
// (round half to even, saturate; NaN gives the zero point), so a float .npy
// can feed a program planned with --quantized-io.
HostTensor quantize_for(const HostTensor& x, const IoQuantization& q);
// A quantized output's real values, (q - zero_point) * scale, as float32.
HostTensor dequantize_from(const HostTensor& q, const IoQuantization& quantization);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EXEC_RUN_H_
