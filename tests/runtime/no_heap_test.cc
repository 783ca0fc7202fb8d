// Zero-heap proof at run time: with malloc/calloc/realloc/free wrapped by
// the linker (-Wl,--wrap) and operator new/delete replaced, loading a
// program, loading a method and executing it perform no heap allocation,
// on one thread and on a thread pool (started before the window) with every
// kernel splitting its work (KILN_PARALLEL_MIN_WORK=0).
// (Planning the test program beforehand allocates freely; only the window
// around the runtime calls is counted.)

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "kiln/kernels/cpu.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "kiln/runtime/program.h"
#include "support/graph_builder.h"
#include "support/program_bytes.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int> g_allocations{0};
}  // namespace

extern "C" {
void* __real_malloc(size_t size);
void* __real_calloc(size_t n, size_t size);
void* __real_realloc(void* p, size_t size);
void __real_free(void* p);

void* __wrap_malloc(size_t size) {
  if (g_counting) ++g_allocations;
  return __real_malloc(size);
}
void* __wrap_calloc(size_t n, size_t size) {
  if (g_counting) ++g_allocations;
  return __real_calloc(n, size);
}
void* __wrap_realloc(void* p, size_t size) {
  if (g_counting) ++g_allocations;
  return __real_realloc(p, size);
}
void __wrap_free(void* p) {
  if (g_counting && p != nullptr) ++g_allocations;
  __real_free(p);
}
}

void* operator new(size_t size) {
  if (g_counting) ++g_allocations;
  void* p = __real_malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* p) noexcept {
  if (g_counting && p != nullptr) ++g_allocations;
  __real_free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }

namespace kiln::testing {
namespace {

TEST(NoHeapTest, LoadAndExecuteAllocateNothing) {
  setenv("KILN_PARALLEL_MIN_WORK", "0", 1);  // read by the first kernel that could split
  ASSERT_EQ(register_cpu_kernels(), Error::kOk);
  PosixThreadPool workers;
  ASSERT_EQ(workers.start(3), Error::kOk);
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 8, 8});
  const int conv =
      b.node("Conv", {x, b.ramp("w", {8, 3, 3, 3}), b.ramp("b", {8})}, {{"pads", ints_attr({1, 1, 1, 1})}});
  const int relu = b.node("Relu", {conv});
  const int pool = b.node("AveragePool", {relu}, {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}});
  const int t = b.node("Transpose", {pool}, {{"perm", ints_attr({0, 2, 3, 1})}});
  const int flat = b.node("Flatten", {t});
  const int fc = b.node("Gemm", {flat, b.ramp("fc", {128, 4})});
  const int sm = b.node("Softmax", {fc});
  b.output(b.node("Add", {sm, b.ramp("bias", {4})}));
  const std::string bytes = b.plan().bytes;
  // Buffers the application owns, prepared before the window.
  AlignedBytes file(bytes);
  // Static arrays, as firmware declares them.
  alignas(64) static uint8_t bookkeeping_memory[32768];
  alignas(64) static uint8_t arena_memory[1 << 17];
  std::vector<float> input(3 * 8 * 8, 0.5f), output(4, 0.f);

  g_allocations = 0;
  g_counting = true;
  BufferDataLoader loader(file.data(), file.size());
  Result<Program> program = Program::load(loader);
  bool ok = program.ok();
  if (ok) {
    MethodMeta meta = program->method_meta("forward").get();
    BumpAllocator bookkeeping(bookkeeping_memory, sizeof(bookkeeping_memory));
    Span<uint8_t> arenas[1] = {Span<uint8_t>(arena_memory, static_cast<size_t>(meta.arena(0)->size))};
    MemoryManager memory;
    memory.bookkeeping = &bookkeeping;
    memory.arenas = Span<const Span<uint8_t>>(arenas, 1);
    Result<Method> method = program->load_method("forward", memory);
    ok = method.ok() && method->set_input(0, input.data(), input.size() * 4) == Error::kOk &&
         method->set_output(0, output.data(), output.size() * 4) == Error::kOk && method->execute() == Error::kOk &&
         method->execute() == Error::kOk;
    if (ok) {
      method->set_thread_pool(&workers);
      ok = method->execute() == Error::kOk && method->execute() == Error::kOk;
    }
  }
  g_counting = false;
  ASSERT_TRUE(ok);
  EXPECT_EQ(g_allocations.load(), 0) << "heap calls during load + execute";
  EXPECT_NE(output[0], 0.f);
  // The interposition itself works: a heap call inside the window is seen.
  g_counting = true;
  void* volatile p = std::malloc(16);
  std::free(p);
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 2);
}

}  // namespace
}  // namespace kiln::testing
