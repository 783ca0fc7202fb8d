// The core runtime alone, linked into an image for the size report: load a
// program from memory, size and load its first method, bind its input and
// output, execute it. No kernel is registered and no model is linked (the
// program's address is only known at run time), so the image holds the
// runtime, the platform layer, start-up code and the libc and libgcc
// functions they call -- what every kiln firmware pays before its model and
// kernels. It is linked, not run.

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime/program.h"

// Set by a debugger or a boot loader; volatile so the compiler assumes
// nothing about the program.
const void* volatile g_program = nullptr;
volatile size_t g_program_size = 0;

namespace {
alignas(16) uint8_t g_bookkeeping[64];
alignas(64) uint8_t g_arena[64];
alignas(16) float g_input[16];
alignas(16) float g_output[16];
}  // namespace

int main() {
  kiln::BufferDataLoader loader(g_program, g_program_size);
  kiln::Result<kiln::Program> program = kiln::Program::load(loader);
  if (!program.ok()) return 1;
  kiln::Result<const char*> name = program->method_name(0);
  if (!name.ok()) return 1;
  kiln::Result<kiln::MethodMeta> meta = program->method_meta(name.get());
  if (!meta.ok() || meta->bookkeeping_bytes() > sizeof(g_bookkeeping)) return 1;
  kiln::BumpAllocator bookkeeping(g_bookkeeping, sizeof(g_bookkeeping));
  kiln::Span<uint8_t> arenas[] = {{g_arena, sizeof(g_arena)}};
  kiln::MemoryManager memory{&bookkeeping, {arenas, 1}};
  kiln::Result<kiln::Method> method = program->load_method(name.get(), memory);
  if (!method.ok()) return 1;
  if (method->set_input(0, g_input, sizeof(g_input)) != kiln::Error::kOk) return 1;
  if (method->set_output(0, g_output, sizeof(g_output)) != kiln::Error::kOk) return 1;
  return method->execute() == kiln::Error::kOk ? 0 : 1;
}
