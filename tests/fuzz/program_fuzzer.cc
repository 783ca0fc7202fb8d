// libFuzzer target: arbitrary bytes through Program::load, then every
// method's load and execute on the CPU kernels, with buffers sized from
// MethodMeta. Whatever the bytes, the runtime must refuse them with an Error
// or run without touching memory outside what it was handed (AddressSanitizer
// and UndefinedBehaviorSanitizer watch).
//
// Seeds: tests/fuzz/corpus/ (real programs, made by tests/fuzz/make_corpus.sh).

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kiln/kernels/cpu.h"
#include "kiln/platform/platform.h"
#include "kiln/runtime/program.h"

namespace {

// Static buffers, as firmware would have: no heap in the harness either.
constexpr size_t kMaxProgram = 1 << 20;
constexpr size_t kMaxBookkeeping = 1 << 20;
constexpr size_t kMaxArena = 1 << 22;
constexpr size_t kMaxIo = 1 << 20;
constexpr size_t kMaxArenas = 4;
constexpr size_t kMaxIoTensors = 16;

alignas(64) uint8_t g_program[kMaxProgram];
alignas(64) uint8_t g_bookkeeping[kMaxBookkeeping];
alignas(64) uint8_t g_arenas[kMaxArenas][kMaxArena];
alignas(64) uint8_t g_io[kMaxIoTensors][kMaxIo];

void run_method(const kiln::Program& program, const char* name) {
  kiln::Result<kiln::MethodMeta> meta = program.method_meta(name);
  if (!meta.ok()) return;
  if (meta->bookkeeping_bytes() > kMaxBookkeeping || meta->num_arenas() > kMaxArenas) return;
  kiln::Span<uint8_t> arenas[kMaxArenas];
  for (size_t a = 0; a < meta->num_arenas(); ++a) {
    const kiln::ArenaInfo info = meta->arena(a).get();
    if (info.size > kMaxArena) return;
    arenas[a] = kiln::Span<uint8_t>(g_arenas[a], static_cast<size_t>(info.size));
  }
  kiln::BumpAllocator bookkeeping(g_bookkeeping, static_cast<size_t>(meta->bookkeeping_bytes()));
  kiln::MemoryManager memory;
  memory.bookkeeping = &bookkeeping;
  memory.arenas = kiln::Span<const kiln::Span<uint8_t>>(arenas, meta->num_arenas());
  kiln::Result<kiln::Method> method = program.load_method(name, memory);
  if (!method.ok()) return;
  size_t io = 0;
  for (size_t i = 0; i < method->num_inputs() && io < kMaxIoTensors; ++i, ++io) {
    const uint64_t bytes = meta->input(i)->nbytes;
    if (bytes > kMaxIo) return;
    // Deterministic contents: small integers are valid indices for Gather.
    memset(g_io[io], 0, static_cast<size_t>(bytes));
    (void)method->set_input(i, g_io[io], static_cast<size_t>(bytes));
  }
  for (size_t i = 0; i < method->num_outputs() && io < kMaxIoTensors; ++i, ++io) {
    const uint64_t bytes = meta->output(i)->nbytes;
    if (bytes > kMaxIo) return;
    (void)method->set_output(i, g_io[io], static_cast<size_t>(bytes));
  }
  (void)method->execute();
}

}  // namespace

// Messages are still formatted (hostile values go through the format code)
// but not written: millions of rejected inputs would flood the output.
extern "C" void kiln_pal_log(kiln_log_level, const char*, int, const char*, size_t) {}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool registered = kiln::register_cpu_kernels() == kiln::Error::kOk;
  if (!registered || size > kMaxProgram) return 0;
  memcpy(g_program, data, size);
  kiln::BufferDataLoader loader(g_program, size);
  kiln::Result<kiln::Program> program = kiln::Program::load(loader);
  if (!program.ok()) return 0;
  for (size_t m = 0; m < program->num_methods() && m < 4; ++m) {
    kiln::Result<const char*> name = program->method_name(m);
    if (name.ok()) run_method(*program, name.get());
  }
  return 0;
}
