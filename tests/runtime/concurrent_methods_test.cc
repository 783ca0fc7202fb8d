// Concurrent use as the runtime's contract allows it (method.h: one thread
// executes a Method at a time, separate Methods may run at once; program.h: a
// loaded Program may be read from several threads): several threads, each
// executing its own Method of one Program thousands of times, and one thread
// per Program for two Programs, every output compared bit for bit with one
// thread's. The Methods run without a pool, each on a pool of its own, and
// all on one shared pool (a second caller of a PosixThreadPool runs its
// tasks inline); every kernel that can split does (set_parallel_min_work(0))
// where a pool is lent. Programs with delegates (null:0, vulkan:0 where it
// is built, and cuda:0 under the host execution model, skipped for now:
// see MethodsWithCudaDelegatesOnThreads) run the same way.
//
// KILN_CONCURRENCY_ITERATIONS sets the executions per thread (default 2000;
// the delegates a tenth of it, the CUDA host execution model a two-hundredth);
// the tsan stage runs fewer.

#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runtime/posix_thread_pool.h"
#include "kiln/runtime/program.h"
#include "ops/host_kernels.h"
#include "parallel.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"
#include "targets/runtime_backends.h"
#include "targets/target.h"

namespace kiln::testing {
namespace {

using planner::PlanOptions;

int iterations(int divisor = 1) {
  const char* env = getenv("KILN_CONCURRENCY_ITERATIONS");
  const int n = env != nullptr ? atoi(env) : 2000;
  return n / divisor > 1 ? n / divisor : 1;
}

HostTensor noise(std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001) / 1000.f - 1.f;
  }
  return HostTensor::from_floats(v, shape);
}

// A small CNN: convolutions (direct, depthwise, 1x1), pooling, a classifier.
std::string cnn_program(const PlanOptions& options = {}) {
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 24, 24});
  int y = b.node("Relu", {b.node("Conv", {x, b.ramp("w1", {16, 3, 3, 3}, 0.05f), b.ramp("b1", {16})},
                                 {{"pads", ints_attr({1, 1, 1, 1})}})});
  y = b.node("MaxPool", {y}, {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
  y = b.node("Conv", {y, b.ramp("dw", {16, 1, 3, 3}, 0.1f), b.ramp("db", {16})},
             {{"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(16)}});
  y = b.node("Relu", {b.node("Conv", {y, b.ramp("pw", {32, 16, 1, 1}, 0.05f), b.ramp("pb", {32})})});
  y = b.node("Flatten", {b.node("GlobalAveragePool", {y})});
  b.output(b.node("Softmax", {b.node("Gemm", {y, b.ramp("fc", {32, 10}, 0.1f), b.ramp("fb", {10})})}));
  return b.plan(options).bytes;
}

// A transformer-like block: products, a normalisation, a softmax.
std::string block_program(const PlanOptions& options = {}) {
  GraphBuilder b;
  const int x = b.input("x", {16, 64});
  const int h = b.node("Add", {b.node("MatMul", {x, b.ramp("wq", {64, 64}, 0.02f)}), b.ramp("bq", {64})});
  const int n =
      b.node("LayerNormalization", {h, b.ramp("g", {64}, 0.2f), b.ramp("beta", {64}, 0.05f)}, {{"axis", int_attr(-1)}});
  const int scores = b.node("Softmax", {b.node("MatMul", {n, b.node("Transpose", {n})})}, {{"axis", int_attr(-1)}});
  b.output(b.node("Tanh", {b.node("MatMul", {scores, x})}));
  return b.plan(options).bytes;
}

std::vector<int64_t> input_shape_of(const Program& program) {
  const TensorInfo info = program.method_meta("forward")->input(0).get();
  return std::vector<int64_t>(info.dims, info.dims + info.rank);
}

// One Method of a Program with memory of its own (device arenas left to
// their backend), its input bound per run and its outputs concatenated.
class Runner {
 public:
  Runner(const Program& program, const BackendRegistry& backends) {
    const MethodMeta meta = program.method_meta("forward").get();
    for (size_t i = 0; i < meta.num_arenas(); ++i) {
      const ArenaInfo info = meta.arena(i).get();
      if (info.device.type() != DeviceType::CPU) {
        spans_.emplace_back();
        continue;
      }
      arenas_.push_back(std::make_unique<AlignedBytes>(std::string(info.size, '\0')));
      spans_.emplace_back(arenas_.back()->data(), arenas_.back()->size());
    }
    bookkeeping_memory_ = std::make_unique<AlignedBytes>(std::string(meta.bookkeeping_bytes(), '\0'));
    bookkeeping_ = BumpAllocator(bookkeeping_memory_->data(), bookkeeping_memory_->size());
    MemoryManager memory;
    memory.bookkeeping = &bookkeeping_;
    memory.arenas = Span<const Span<uint8_t>>(spans_.data(), spans_.size());
    method_ = std::make_unique<Result<Method>>(
        program.load_method("forward", memory, planner::host_kernel_registry(), backends));
    EXPECT_EQ(method_->error(), Error::kOk);
    if (!method_->ok()) return;
    for (size_t i = 0; i < meta.num_outputs(); ++i) {
      outputs_.emplace_back(meta.output(i)->nbytes);
      EXPECT_EQ((*method_)->set_output(i, outputs_.back().data(), outputs_.back().size()), Error::kOk);
    }
  }
  bool ok() const { return method_->ok(); }
  void set_pool(ThreadPool* pool) { (*method_)->set_thread_pool(pool); }

  // The outputs' bytes, or "" when execute() failed.
  std::string run(const HostTensor& input) {
    if ((*method_)->set_input(0, input.bytes.data(), input.bytes.size()) != Error::kOk) return "";
    if ((*method_)->execute() != Error::kOk) return "";
    std::string out;
    for (const auto& o : outputs_) out.append(reinterpret_cast<const char*>(o.data()), o.size());
    return out;
  }

 private:
  std::vector<std::unique_ptr<AlignedBytes>> arenas_;
  std::vector<Span<uint8_t>> spans_;
  std::unique_ptr<AlignedBytes> bookkeeping_memory_;
  BumpAllocator bookkeeping_{nullptr, 0};
  std::unique_ptr<Result<Method>> method_;
  std::vector<std::vector<uint8_t>> outputs_;
};

// What one thread runs: its own Method of `program`, on `pool` or none,
// over the inputs in turn, each output compared with one thread's.
struct Job {
  const Program* program = nullptr;
  const BackendRegistry* backends = nullptr;
  ThreadPool* pool = nullptr;
  const std::vector<HostTensor>* inputs = nullptr;
  const std::vector<std::string>* expected = nullptr;
  std::string name;
};

// One thread's outputs for each input, from a Method of its own.
std::vector<std::string> one_thread(const Program& program, const BackendRegistry& backends,
                                    const std::vector<HostTensor>& inputs) {
  Runner runner(program, backends);
  std::vector<std::string> out;
  for (const HostTensor& x : inputs) {
    out.push_back(runner.run(x));
    EXPECT_FALSE(out.back().empty());
  }
  return out;
}

// Loads every job's Method on this thread, then executes them all at once,
// one thread each, `runs` times; EXPECTs every output equal to one thread's.
void run_at_once(const std::vector<Job>& jobs, int runs) {
  std::vector<std::unique_ptr<Runner>> runners;
  for (const Job& job : jobs) {
    runners.push_back(std::make_unique<Runner>(*job.program, *job.backends));
    ASSERT_TRUE(runners.back()->ok()) << job.name;
    runners.back()->set_pool(job.pool);
  }
  std::atomic<int> ready{0};
  std::vector<int> wrong(jobs.size(), 0), first_wrong(jobs.size(), -1);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < jobs.size(); ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < static_cast<int>(jobs.size())) std::this_thread::yield();
      const Job& job = jobs[t];
      for (int r = 0; r < runs; ++r) {
        const size_t k = (r + t) % job.inputs->size();
        if (runners[t]->run((*job.inputs)[k]) != (*job.expected)[k] && wrong[t]++ == 0) first_wrong[t] = r;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < jobs.size(); ++t) {
    EXPECT_EQ(wrong[t], 0) << jobs[t].name << ": " << wrong[t] << " of " << runs
                           << " runs differ from one thread's, the first run " << first_wrong[t];
  }
}

struct Fixture {
  explicit Fixture(const std::string& bytes, int seed) : loaded(bytes) {
    EXPECT_EQ(loaded.program.error(), Error::kOk);
    const std::vector<int64_t> shape = input_shape_of(loaded.program.get());
    for (int k = 0; k < 4; ++k) inputs.push_back(noise(shape, static_cast<uint32_t>(seed * 10 + k)));
  }
  LoadedProgram loaded;
  std::vector<HostTensor> inputs;
  std::vector<std::string> expected;
};

class ConcurrentMethodsTest : public ::testing::Test {
 protected:
  void TearDown() override { kernels::set_parallel_min_work(-1); }
};

TEST_F(ConcurrentMethodsTest, MethodsOfOneProgramOnFourThreads) {
  Fixture f(cnn_program(), 1);
  const BackendRegistry& backends = global_backend_registry();
  f.expected = one_thread(f.loaded.program.get(), backends, f.inputs);
  std::vector<Job> jobs;
  for (int t = 0; t < 4; ++t) {
    jobs.push_back(
        {&f.loaded.program.get(), &backends, nullptr, &f.inputs, &f.expected, "method " + std::to_string(t)});
  }
  run_at_once(jobs, iterations());
}

TEST_F(ConcurrentMethodsTest, MethodsOnPoolsOfTheirOwn) {
  Fixture f(cnn_program(), 2);
  const BackendRegistry& backends = global_backend_registry();
  f.expected = one_thread(f.loaded.program.get(), backends, f.inputs);
  kernels::set_parallel_min_work(0);  // every kernel that can split does
  PosixThreadPool pools[3];
  std::vector<Job> jobs;
  for (int t = 0; t < 3; ++t) {
    ASSERT_EQ(pools[t].start(2), Error::kOk);
    jobs.push_back(
        {&f.loaded.program.get(), &backends, &pools[t], &f.inputs, &f.expected, "method " + std::to_string(t)});
  }
  run_at_once(jobs, iterations());
}

TEST_F(ConcurrentMethodsTest, MethodsSharingOnePool) {
  Fixture f(cnn_program(), 3);
  const BackendRegistry& backends = global_backend_registry();
  f.expected = one_thread(f.loaded.program.get(), backends, f.inputs);
  kernels::set_parallel_min_work(0);
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(3), Error::kOk);
  std::vector<Job> jobs;
  for (int t = 0; t < 3; ++t) {
    jobs.push_back({&f.loaded.program.get(), &backends, &pool, &f.inputs, &f.expected, "method " + std::to_string(t)});
  }
  run_at_once(jobs, iterations());
}

TEST_F(ConcurrentMethodsTest, TwoProgramsOneThreadEach) {
  Fixture cnn(cnn_program(), 4), block(block_program(), 5);
  const BackendRegistry& backends = global_backend_registry();
  cnn.expected = one_thread(cnn.loaded.program.get(), backends, cnn.inputs);
  block.expected = one_thread(block.loaded.program.get(), backends, block.inputs);
  kernels::set_parallel_min_work(0);
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(2), Error::kOk);
  run_at_once({{&cnn.loaded.program.get(), &backends, nullptr, &cnn.inputs, &cnn.expected, "cnn"},
               {&block.loaded.program.get(), &backends, &pool, &block.inputs, &block.expected, "block on a pool"}},
              iterations());
}

// Programs with delegates: two Methods of each of two programs at once,
// every node the device takes on it.
void delegates_on_threads(const std::string& target, int runs) {
  const BackendRegistry& backends = planner::builtin_runtime_backends();
  PlanOptions options;
  options.targets = target;
  Fixture cnn(cnn_program(options), 6), block(block_program(options), 7);
  cnn.expected = one_thread(cnn.loaded.program.get(), backends, cnn.inputs);
  block.expected = one_thread(block.loaded.program.get(), backends, block.inputs);
  std::vector<Job> jobs;
  for (int t = 0; t < 2; ++t) {
    jobs.push_back({&cnn.loaded.program.get(), &backends, nullptr, &cnn.inputs, &cnn.expected,
                    target + " cnn " + std::to_string(t)});
    jobs.push_back({&block.loaded.program.get(), &backends, nullptr, &block.inputs, &block.expected,
                    target + " block " + std::to_string(t)});
  }
  const auto start = std::chrono::steady_clock::now();
  run_at_once(jobs, runs);
  printf("%s: 4 threads x %d runs in %.1f s\n", target.c_str(), runs,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

TEST_F(ConcurrentMethodsTest, MethodsWithDelegatesOnThreads) {
  planner::register_builtin_backends();
  std::vector<std::string> targets = {"null:0,cpu"};
  if (planner::builtin_runtime_backend_names().find("vulkan") != std::string::npos) targets.push_back("vulkan:0,cpu");
  for (const std::string& target : targets) {
    SCOPED_TRACE(target);
    delegates_on_threads(target, iterations(10));
  }
  EXPECT_EQ(planner::shutdown_builtin_runtime_backends(), 0u) << "diagnostics reported by the backends";
}

// The CUDA delegate under the host execution model (one scheduler per
// thread), about 150 ms a run here: a twentieth of the runs. Skipped unless
// KILN_CONCURRENCY_CUDA=1: the CUDA backend records and replays every
// Method's work on one stream per device (cuda_backend.cc, DeviceState::
// stream) and counts in plain integers, so a Method capturing its graph
// takes in the launches another thread makes meanwhile (cudaStreamBeginCapture
// against submit's read of the stream's capture, found by the tsan stage)
// and the counters race. Remove the skip once the backend keeps Methods
// apart; the tsan stage then checks it too.
TEST_F(ConcurrentMethodsTest, MethodsWithCudaDelegatesOnThreads) {
  const char* enabled = getenv("KILN_CONCURRENCY_CUDA");
  if (enabled == nullptr || std::string(enabled) != "1") {
    GTEST_SKIP() << "the CUDA delegate shares one stream per device across Methods (a capture takes in another "
                    "thread's launches); KILN_CONCURRENCY_CUDA=1 runs it";
  }
  setenv("KILN_CUDA_EXECUTION", "host", 0);  // read when the backend is made, below
  planner::register_builtin_backends();
  delegates_on_threads("cuda:0,cpu", iterations(200));
  EXPECT_EQ(planner::shutdown_builtin_runtime_backends(), 0u) << "diagnostics reported by the backends";
}

}  // namespace
}  // namespace kiln::testing
