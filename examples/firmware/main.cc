// kiln on a microcontroller: runs a planned CNN on a Cortex-M under QEMU.
//
// Everything is fixed when the image is linked. The program is a const array
// (firmware_cnn.c, written by `kiln pack`) that stays in flash: the runtime
// verifies it and reads the weights in place. The method's arena and its
// bookkeeping are static arrays whose sizes are the planner's figures from
// firmware_cnn.h; the input is a const array in flash too, bound zero-copy.
// Nothing is allocated: the image is linked with every heap function
// poisoned (kiln_no_heap).
//
// At boot it runs the bundled self-test (the input and the outputs the host
// computed, packed beside the program), then the firmware prints the
// outputs beside PyTorch's (firmware_cnn_io.h, from
// make_model.py), and the SysTick ticks execute() took, then exits through
// semihosting with status 0 only when every output is within 1e-4 of
// PyTorch's, relative to the largest magnitude of that output.

#include <stddef.h>
#include <stdint.h>

#include "firmware_cnn.h"
#include "firmware_cnn_io.h"
#include "firmware_cnn_self_test.h"
#include "kiln/platform/mps2.h"
#include "kiln/platform/platform.h"
#include "kiln/runtime/program.h"
#include "kiln/runtime/self_test.h"

#if FIRMWARE_CNN_REGIONS
// Planned into two memory regions (kiln plan --memory-region): kiln pack
// defines one buffer per region, 'fast' in section .blockram (the board's
// block RAM at 0x01000000, by the linker script), 'sram' in .bss.
static_assert(FIRMWARE_CNN_FORWARD_NUM_ARENAS == 2, "the model is planned into two memory regions");
#else
static_assert(FIRMWARE_CNN_FORWARD_NUM_ARENAS == 1, "the model is planned into one arena");
#endif
static_assert(FIRMWARE_CNN_FORWARD_NUM_INPUTS == 1 && FIRMWARE_CNN_FORWARD_NUM_OUTPUTS == 2,
              "the model takes an image and returns logits and probabilities");
static_assert(FIRMWARE_CNN_FORWARD_INPUT_0_BYTES == sizeof(kFirmwareCnnInput), "input size");
static_assert(FIRMWARE_CNN_FORWARD_OUTPUT_0_BYTES == sizeof(kFirmwareCnnExpectedLogits), "logits size");
static_assert(FIRMWARE_CNN_FORWARD_OUTPUT_1_BYTES == sizeof(kFirmwareCnnExpectedProbabilities), "probabilities size");

namespace {

constexpr float kTolerance = 1e-4f;

alignas(16) uint8_t g_bookkeeping[FIRMWARE_CNN_FORWARD_BOOKKEEPING_BYTES];
#if !FIRMWARE_CNN_REGIONS
alignas(FIRMWARE_CNN_FORWARD_ARENA_0_ALIGNMENT) uint8_t g_arena[FIRMWARE_CNN_FORWARD_ARENA_0_SIZE];
#endif
alignas(16) float g_logits[FIRMWARE_CNN_CLASSES];
alignas(16) float g_probabilities[FIRMWARE_CNN_CLASSES];
alignas(64) uint8_t g_self_test_scratch[FIRMWARE_CNN_SELF_TEST_SCRATCH_BYTES];

float magnitude(float v) { return v < 0.0f ? -v : v; }

// Prints got and expected side by side; true when all agree within
// kTolerance relative to the largest expected magnitude.
bool compare(const char* what, const float* got, const float* expected, size_t count) {
  float largest = 0.0f;
  for (size_t i = 0; i < count; ++i) largest = magnitude(expected[i]) > largest ? magnitude(expected[i]) : largest;
  float worst = 0.0f;
  kiln_mps2_printf("%s:\n", what);
  for (size_t i = 0; i < count; ++i) {
    const float error = magnitude(got[i] - expected[i]) / (largest > 0.0f ? largest : 1.0f);
    worst = error > worst ? error : worst;
    kiln_mps2_printf("  [%u] %10.6f   expected %10.6f\n", static_cast<unsigned>(i), got[i], expected[i]);
  }
  const bool ok = worst <= kTolerance;
  kiln_mps2_printf("  max relative error %.7f (tolerance %.4f): %s\n", worst, kTolerance, ok ? "ok" : "MISMATCH");
  return ok;
}

int fail(const char* what, kiln::Error error) {
  kiln_mps2_printf("firmware_cnn: %s failed: %s\n", what, kiln::error_name(error));
  return 1;
}

}  // namespace

int main() {
  kiln_mps2_printf(
      "kiln firmware example: program %u bytes in flash at %p (used in place); static arena %u bytes, "
      "bookkeeping %u bytes\n",
      static_cast<unsigned>(sizeof(firmware_cnn)), static_cast<const void*>(firmware_cnn),
#if FIRMWARE_CNN_REGIONS
      static_cast<unsigned>(FIRMWARE_CNN_REGION_FAST_SIZE + FIRMWARE_CNN_REGION_SRAM_SIZE),
#else
      static_cast<unsigned>(sizeof(g_arena)),
#endif
      static_cast<unsigned>(sizeof(g_bookkeeping)));
  // Only the kernels the program calls: the linker drops every other one.
  kiln::Error error = firmware_cnn_register_kernels();
  if (error != kiln::Error::kOk) return fail("kernel registration", error);

  kiln::BufferDataLoader loader(firmware_cnn, sizeof(firmware_cnn));
  kiln::Result<kiln::Program> program = kiln::Program::load(loader);
  if (!program.ok()) return fail("Program::load", program.error());

  // Zero copy: every constant the runtime hands the kernels lies inside the
  // packed array in flash.
  const auto* constants = program->flatbuffer()->constants();
  const uint32_t num_constants = constants != nullptr ? constants->size() : 0;
  for (uint32_t i = 0; i < num_constants; ++i) {
    const kiln::Span<const uint8_t> weights = program->constant(i);
    if (weights.data() < firmware_cnn || weights.data() + weights.size() > firmware_cnn + sizeof(firmware_cnn)) {
      kiln_mps2_printf("firmware_cnn: constant %u is not read in place\n", static_cast<unsigned>(i));
      return 1;
    }
  }
  kiln_mps2_printf("%u constants read in place from the packed program\n", static_cast<unsigned>(num_constants));

  kiln::BumpAllocator bookkeeping(g_bookkeeping, sizeof(g_bookkeeping));
#if FIRMWARE_CNN_REGIONS
  kiln::Span<uint8_t> arenas[] = {{firmware_cnn_region_fast, FIRMWARE_CNN_REGION_FAST_SIZE},
                                  {firmware_cnn_region_sram, FIRMWARE_CNN_REGION_SRAM_SIZE}};
  const uintptr_t fast = reinterpret_cast<uintptr_t>(firmware_cnn_region_fast);
  kiln_mps2_printf("region 'fast': %u bytes at %p (block RAM); region 'sram': %u bytes at %p\n",
                   static_cast<unsigned>(FIRMWARE_CNN_REGION_FAST_SIZE), static_cast<void*>(firmware_cnn_region_fast),
                   static_cast<unsigned>(FIRMWARE_CNN_REGION_SRAM_SIZE), static_cast<void*>(firmware_cnn_region_sram));
  if (fast < 0x01000000u || fast + FIRMWARE_CNN_REGION_FAST_SIZE > 0x01004000u) {
    kiln_mps2_printf("firmware_cnn: region 'fast' is not in the block RAM\n");
    return 1;
  }
#else
  kiln::Span<uint8_t> arenas[] = {{g_arena, sizeof(g_arena)}};
#endif
  kiln::MemoryManager memory{&bookkeeping, {arenas, sizeof(arenas) / sizeof(arenas[0])}};
  kiln::Result<kiln::Method> method = program->load_method("forward", memory);
  if (!method.ok()) return fail("load_method", method.error());

  // At boot: does the program in flash still compute what it did on the
  // host? The bundled self-test (kiln plan --bundle-test, kiln pack
  // --self-test) holds an input and the host's outputs for it.
  kiln::SelfTestReport report;
  error = kiln::run_self_test(program.get(), method.get(), {firmware_cnn_self_test, FIRMWARE_CNN_SELF_TEST_SIZE},
                              {g_self_test_scratch, sizeof(g_self_test_scratch)}, &report);
  if (error != kiln::Error::kOk) return fail("self-test", error);
  kiln_mps2_printf("self-test: %u outputs, max relative error %.7f (tolerance %.7f): %s\n",
                   static_cast<unsigned>(report.num_outputs), static_cast<double>(report.max_error),
                   static_cast<double>(report.tolerance), report.passed ? "passed" : "FAILED");
  if (!report.passed) return 1;

  if ((error = method->set_input(0, kFirmwareCnnInput, sizeof(kFirmwareCnnInput))) != kiln::Error::kOk ||
      (error = method->set_output(0, g_logits, sizeof(g_logits))) != kiln::Error::kOk ||
      (error = method->set_output(1, g_probabilities, sizeof(g_probabilities))) != kiln::Error::kOk) {
    return fail("binding inputs and outputs", error);
  }

  const uint64_t start = kiln_pal_ticks();
  error = method->execute();
  const uint64_t ticks = kiln_pal_ticks() - start;
  if (error != kiln::Error::kOk) return fail("execute", error);

  const bool logits_ok = compare("logits", g_logits, kFirmwareCnnExpectedLogits, FIRMWARE_CNN_CLASSES);
  const bool probabilities_ok =
      compare("probabilities", g_probabilities, kFirmwareCnnExpectedProbabilities, FIRMWARE_CNN_CLASSES);
  // SysTick counts core clock cycles on silicon; under QEMU it follows the
  // emulator's clock instead (see platform_mps2.cc).
  const uint64_t microseconds = ticks * 1000000u / kiln_pal_ticks_per_second();
  kiln_mps2_printf("execute: %llu cycles of the %u Hz core clock (SysTick), %llu us, %u kiln instructions\n",
                   static_cast<unsigned long long>(ticks), static_cast<unsigned>(kiln_pal_ticks_per_second()),
                   static_cast<unsigned long long>(microseconds),
                   static_cast<unsigned>(method->meta().num_instructions()));
  kiln_mps2_printf("stack: %u of %u bytes used\n", static_cast<unsigned>(kiln_mps2_stack_used()),
                   static_cast<unsigned>(kiln_mps2_stack_size()));
  const bool ok = logits_ok && probabilities_ok;
  kiln_mps2_printf("%s\n", ok ? "PASS: outputs match PyTorch" : "FAIL: outputs differ from PyTorch");
  return ok ? 0 : 1;
}
