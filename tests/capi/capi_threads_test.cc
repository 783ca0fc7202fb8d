// The C API's threading contract (kiln.h: one thread at a time per method,
// separate methods may run concurrently): four threads, each executing its
// own kiln_method of one kiln_program thousands of times, two of them on
// an application pool passed through kiln_thread_pool (a PosixThreadPool
// behind the C struct, every kernel that can split splitting), and one
// thread per program for two programs; every output compared bit for bit
// with one thread's. KILN_CONCURRENCY_ITERATIONS sets the executions per
// thread (default 2000).

#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "parallel.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace kiln::testing {
namespace {

int iterations() {
  const char* env = getenv("KILN_CONCURRENCY_ITERATIONS");
  const int n = env != nullptr ? atoi(env) : 2000;
  return n > 1 ? n : 1;
}

std::vector<float> noise(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001) / 1000.f - 1.f;
  }
  return v;
}

std::string cnn_program() {
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 20, 20});
  int y = b.node("Relu", {b.node("Conv", {x, b.ramp("w1", {16, 3, 3, 3}, 0.05f), b.ramp("b1", {16})},
                                 {{"pads", ints_attr({1, 1, 1, 1})}})});
  y = b.node("AveragePool", {y}, {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
  y = b.node("Flatten", {b.node("GlobalAveragePool", {b.node("Conv", {y, b.ramp("pw", {24, 16, 1, 1}, 0.05f)})})});
  b.output(b.node("Softmax", {b.node("Gemm", {y, b.ramp("fc", {24, 10}, 0.1f)})}));
  return b.plan().bytes;
}

std::string mlp_program() {
  GraphBuilder b;
  const int x = b.input("x", {8, 96});
  const int h = b.node("Relu", {b.node("Gemm", {x, b.ramp("w1", {96, 128}, 0.02f), b.ramp("b1", {128})})});
  b.output(b.node("Sigmoid", {b.node("Gemm", {h, b.ramp("w2", {128, 32}, 0.02f)})}));
  return b.plan().bytes;
}

// The application's pool behind the C struct.
void posix_parallel_for(void* pool, int64_t count, kiln_task_fn task, void* task_context) {
  static_cast<PosixThreadPool*>(pool)->parallel_for(count, task, task_context);
}

// One kiln_method with buffers of its own.
class CMethod {
 public:
  explicit CMethod(const kiln_program& program) {
    kiln_method_info info;
    EXPECT_EQ(kiln_program_method_info(&program, "forward", &info), KILN_OK);
    bookkeeping_ = std::make_unique<AlignedBytes>(std::string(info.bookkeeping_bytes, '\0'));
    std::vector<void*> arenas;
    std::vector<size_t> sizes;
    for (size_t i = 0; i < info.num_arenas; ++i) {
      kiln_arena_info arena;
      EXPECT_EQ(kiln_program_arena_info(&program, "forward", i, &arena), KILN_OK);
      arenas_.push_back(std::make_unique<AlignedBytes>(std::string(arena.size, '\0')));
      arenas.push_back(arenas_.back()->data());
      sizes.push_back(arena.size);
    }
    loaded_ = kiln_method_load(&method_, &program, "forward", bookkeeping_->data(), bookkeeping_->size(), arenas.data(),
                               sizes.data(), info.num_arenas) == KILN_OK;
    EXPECT_TRUE(loaded_);
    kiln_tensor_info in, out;
    EXPECT_EQ(kiln_program_input_info(&program, "forward", 0, &in), KILN_OK);
    EXPECT_EQ(kiln_program_output_info(&program, "forward", 0, &out), KILN_OK);
    input_floats_ = in.nbytes / sizeof(float);
    output_.resize(out.nbytes / sizeof(float));
    if (loaded_) {
      EXPECT_EQ(kiln_method_set_output(&method_, 0, output_.data(), out.nbytes), KILN_OK);
    }
  }
  ~CMethod() {
    if (loaded_) kiln_method_destroy(&method_);
  }
  size_t input_floats() const { return input_floats_; }
  void set_pool(kiln_thread_pool* pool) { EXPECT_EQ(kiln_method_set_thread_pool(&method_, pool), KILN_OK); }
  // The output's bytes, or "" when a call failed.
  std::string run(const std::vector<float>& input) {
    if (kiln_method_set_input(&method_, 0, input.data(), input.size() * sizeof(float)) != KILN_OK) return "";
    if (kiln_method_execute(&method_) != KILN_OK) return "";
    return std::string(reinterpret_cast<const char*>(output_.data()), output_.size() * sizeof(float));
  }

 private:
  kiln_method method_;
  bool loaded_ = false;
  std::unique_ptr<AlignedBytes> bookkeeping_;
  std::vector<std::unique_ptr<AlignedBytes>> arenas_;
  size_t input_floats_ = 0;
  std::vector<float> output_;
};

struct CProgram {
  explicit CProgram(const std::string& bytes, uint32_t seed) : file(bytes) {
    EXPECT_EQ(kiln_program_load(&program, file.data(), file.size()), KILN_OK);
    CMethod one(program);
    for (uint32_t k = 0; k < 4; ++k) {
      inputs.push_back(noise(one.input_floats(), seed * 10 + k));
      expected.push_back(one.run(inputs.back()));
      EXPECT_FALSE(expected.back().empty());
    }
  }
  AlignedBytes file;
  kiln_program program;
  std::vector<std::vector<float>> inputs;
  std::vector<std::string> expected;
};

struct CJob {
  CProgram* program;
  kiln_thread_pool* pool;
  std::string name;
};

// Loads each job's method here, then executes all at once, one thread each.
void run_at_once(const std::vector<CJob>& jobs, int runs) {
  std::vector<std::unique_ptr<CMethod>> methods;
  for (const CJob& job : jobs) {
    methods.push_back(std::make_unique<CMethod>(job.program->program));
    if (job.pool != nullptr) methods.back()->set_pool(job.pool);
  }
  std::atomic<int> ready{0};
  std::vector<int> wrong(jobs.size(), 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < jobs.size(); ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < static_cast<int>(jobs.size())) std::this_thread::yield();
      const CProgram& p = *jobs[t].program;
      for (int r = 0; r < runs; ++r) {
        const size_t k = (r + t) % p.inputs.size();
        if (methods[t]->run(p.inputs[k]) != p.expected[k]) ++wrong[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < jobs.size(); ++t) {
    EXPECT_EQ(wrong[t], 0) << jobs[t].name << ": " << wrong[t] << " of " << runs << " runs differ from one thread's";
  }
}

class CApiThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(kiln_register_cpu_kernels(), KILN_OK); }
  void TearDown() override { kernels::set_parallel_min_work(-1); }
};

TEST_F(CApiThreadsTest, MethodsOfOneProgramOnFourThreads) {
  CProgram cnn(cnn_program(), 1);
  kernels::set_parallel_min_work(0);
  PosixThreadPool pools[2];
  kiln_thread_pool c_pools[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(pools[i].start(2), Error::kOk);
    c_pools[i] = kiln_thread_pool{2, posix_parallel_for, &pools[i], {0, 0}};
  }
  run_at_once({{&cnn, nullptr, "method 0"},
               {&cnn, nullptr, "method 1"},
               {&cnn, &c_pools[0], "method 2 on a pool"},
               {&cnn, &c_pools[1], "method 3 on a pool"}},
              iterations());
}

TEST_F(CApiThreadsTest, TwoProgramsOneThreadEach) {
  CProgram cnn(cnn_program(), 2), mlp(mlp_program(), 3);
  kernels::set_parallel_min_work(0);
  PosixThreadPool pool;
  ASSERT_EQ(pool.start(2), Error::kOk);
  kiln_thread_pool c_pool{2, posix_parallel_for, &pool, {0, 0}};
  run_at_once({{&cnn, &c_pool, "cnn on a pool"}, {&mlp, nullptr, "mlp"}}, iterations());
}

}  // namespace
}  // namespace kiln::testing
