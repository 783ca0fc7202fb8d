// Runs a .kiln program through the runtime from host code: what `kiln run`,
// constant folding, the conformance runner and the benchmarks use. The
// runtime is used exactly as an application would (Program::load,
// MethodMeta-sized buffers, zero-copy binding); only the buffers come from
// the host heap here.

#ifndef KILN_PLANNER_EXEC_RUN_H_
#define KILN_PLANNER_EXEC_RUN_H_

#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/communicator.h"
#include "kiln/runtime/kernel.h"
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

// Float32 data quantized for a quantized input as QuantizeLinear does
// (round half to even, saturate; NaN gives the zero point), so a float .npy
// can feed a program planned with --quantized-io.
HostTensor quantize_for(const HostTensor& x, const IoQuantization& q);
// A quantized output's real values, (q - zero_point) * scale, as float32.
HostTensor dequantize_from(const HostTensor& q, const IoQuantization& quantization);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_EXEC_RUN_H_
