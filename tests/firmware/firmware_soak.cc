// A soak of the firmware example's program (examples/firmware: the CNN in
// flash, the arena and bookkeeping static arrays, nothing allocated):
// execute() in a loop for as long as the host lets QEMU run, every run's
// outputs compared bit for bit with the first run's, and the stack's
// high-water mark (kiln_mps2_stack_used) required to stay within
// kInterruptSlack of the first run's: SysTick's interrupt stacks its
// exception frame (up to 104 bytes with the FPU's registers) and its
// handler's on the same stack, wherever execute() happens to be when it
// fires, so the mark grows by that once an interrupt meets the deepest
// call. A line every kReport runs:
//
//   soak: 400 runs, outputs identical, stack 1216 bytes
//
// A difference prints "soak: FAIL ..." and exits 1. With KILN_SOAK_RUNS
// defined it stops after that many runs (exit 0); otherwise the host stops
// it (tests/firmware/firmware_soak.py).

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "firmware_cnn.h"
#include "firmware_cnn_io.h"
#include "kiln/platform/mps2.h"
#include "kiln/runtime/program.h"

namespace {

constexpr uint32_t kReport = 100;
constexpr size_t kInterruptSlack = 256;

alignas(16) uint8_t g_bookkeeping[FIRMWARE_CNN_FORWARD_BOOKKEEPING_BYTES];
alignas(FIRMWARE_CNN_FORWARD_ARENA_0_ALIGNMENT) uint8_t g_arena[FIRMWARE_CNN_FORWARD_ARENA_0_SIZE];
alignas(16) float g_logits[FIRMWARE_CNN_CLASSES];
alignas(16) float g_probabilities[FIRMWARE_CNN_CLASSES];
float g_first_logits[FIRMWARE_CNN_CLASSES];
float g_first_probabilities[FIRMWARE_CNN_CLASSES];

int fail(const char* what, kiln::Error error) {
  kiln_mps2_printf("soak: FAIL: %s: %s\n", what, kiln::error_name(error));
  return 1;
}

}  // namespace

int main() {
  kiln::Error error = firmware_cnn_register_kernels();
  if (error != kiln::Error::kOk) return fail("kernel registration", error);
  kiln::BufferDataLoader loader(firmware_cnn, sizeof(firmware_cnn));
  kiln::Result<kiln::Program> program = kiln::Program::load(loader);
  if (!program.ok()) return fail("Program::load", program.error());
  kiln::BumpAllocator bookkeeping(g_bookkeeping, sizeof(g_bookkeeping));
  kiln::Span<uint8_t> arenas[] = {{g_arena, sizeof(g_arena)}};
  kiln::MemoryManager memory{&bookkeeping, {arenas, 1}};
  kiln::Result<kiln::Method> method = program->load_method("forward", memory);
  if (!method.ok()) return fail("load_method", method.error());
  if ((error = method->set_input(0, kFirmwareCnnInput, sizeof(kFirmwareCnnInput))) != kiln::Error::kOk ||
      (error = method->set_output(0, g_logits, sizeof(g_logits))) != kiln::Error::kOk ||
      (error = method->set_output(1, g_probabilities, sizeof(g_probabilities))) != kiln::Error::kOk) {
    return fail("binding inputs and outputs", error);
  }
  kiln_mps2_printf("soak: the firmware example's program, arena %u bytes, bookkeeping %u bytes, stack %u bytes\n",
                   static_cast<unsigned>(sizeof(g_arena)), static_cast<unsigned>(sizeof(g_bookkeeping)),
                   static_cast<unsigned>(kiln_mps2_stack_size()));

  size_t stack = 0;
  for (uint32_t run = 0;; ++run) {
    // Outputs are cleared first, so a run that writes nothing is caught too.
    memset(g_logits, 0xff, sizeof(g_logits));
    memset(g_probabilities, 0xff, sizeof(g_probabilities));
    if ((error = method->execute()) != kiln::Error::kOk) return fail("execute", error);
    if (run == 0) {
      memcpy(g_first_logits, g_logits, sizeof(g_logits));
      memcpy(g_first_probabilities, g_probabilities, sizeof(g_probabilities));
      stack = kiln_mps2_stack_used();
    } else if (memcmp(g_logits, g_first_logits, sizeof(g_logits)) != 0 ||
               memcmp(g_probabilities, g_first_probabilities, sizeof(g_probabilities)) != 0) {
      kiln_mps2_printf("soak: FAIL: run %u's outputs differ from the first run's\n", static_cast<unsigned>(run));
      return 1;
    } else if (kiln_mps2_stack_used() > stack + kInterruptSlack) {
      kiln_mps2_printf("soak: FAIL: the stack reached %u bytes at run %u, %u after the first\n",
                       static_cast<unsigned>(kiln_mps2_stack_used()), static_cast<unsigned>(run),
                       static_cast<unsigned>(stack));
      return 1;
    }
    if ((run + 1) % kReport == 0) {
      kiln_mps2_printf("soak: %u runs, outputs identical, stack %u bytes\n", static_cast<unsigned>(run + 1),
                       static_cast<unsigned>(kiln_mps2_stack_used()));
    }
#if defined(KILN_SOAK_RUNS)
    if (run + 1 == KILN_SOAK_RUNS) return 0;
#endif
  }
}
