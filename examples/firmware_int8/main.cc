// kiln's int8 firmware example: one of MLPerf Tiny's models (the DS-CNN
// keyword spotter, visual wake words' MobileNetV1 of width 0.25, or the
// anomaly detector's dense autoencoder), quantized by PyTorch (QDQ ONNX),
// planned on the host, run on a Cortex-M under QEMU. The same source builds
// each model's int8 image and the float32 image of the model it was
// quantized from, for the comparison of flash, RAM and instructions
// (bench/RESULTS.md); model.h and model_io.h, generated per image, say
// which.
//
// As in examples/firmware: the program (`kiln pack --c-array model`) stays
// in flash and is read in place; the arena and bookkeeping are static
// arrays of the planner's sizes; nothing is allocated. At boot it runs the
// bundled self-test (the host kiln's output for the input, which the int8
// kernels must reproduce), then compares its output with PyTorch's
// (model_io.h: the quantized model's within one output step for int8), and
// prints the SysTick ticks execute() took (with -icount shift=0 one tick is
// 40 guest instructions). Exits 0 only when both agree.
//
// The int8 images are planned with `kiln plan --quantized-io`: the
// application passes the quantized input (what a sensor front-end that
// quantizes gives) and reads the output's 8-bit values, as TFLite Micro's
// int8 models do; model_io.h's element types say which (float32 for the
// float images).

#include <stddef.h>
#include <stdint.h>

#include "kiln/platform/mps2.h"
#include "kiln/platform/platform.h"
#include "kiln/runtime/program.h"
#include "kiln/runtime/self_test.h"
#include "model.h"
#include "model_io.h"
#include "model_self_test.h"

static_assert(MODEL_FORWARD_NUM_ARENAS == 1, "the model is planned into one arena");
static_assert(MODEL_FORWARD_NUM_INPUTS == 1 && MODEL_FORWARD_NUM_OUTPUTS == 1, "one input, one output");
static_assert(MODEL_FORWARD_INPUT_0_BYTES == sizeof(kModelInput), "input size");
static_assert(MODEL_FORWARD_OUTPUT_0_BYTES == sizeof(kModelExpected), "output size");

namespace {

alignas(16) uint8_t g_bookkeeping[MODEL_FORWARD_BOOKKEEPING_BYTES];
alignas(MODEL_FORWARD_ARENA_0_ALIGNMENT) uint8_t g_arena[MODEL_FORWARD_ARENA_0_SIZE];
alignas(16) model_output_t g_output[MODEL_OUTPUT_COUNT];
alignas(64) uint8_t g_self_test_scratch[MODEL_SELF_TEST_SCRATCH_BYTES];

int fail(const char* what, kiln::Error error) {
  kiln_mps2_printf("%s: %s failed: %s\n", MODEL_NAME, what, kiln::error_name(error));
  return 1;
}

}  // namespace

int main() {
  kiln_mps2_printf(
      "kiln firmware example, %s: program %u bytes in flash; static arena %u bytes, bookkeeping %u "
      "bytes\n",
      MODEL_NAME, static_cast<unsigned>(sizeof(model)), static_cast<unsigned>(sizeof(g_arena)),
      static_cast<unsigned>(sizeof(g_bookkeeping)));
  kiln::Error error = model_register_kernels();
  if (error != kiln::Error::kOk) return fail("kernel registration", error);

  kiln::BufferDataLoader loader(model, sizeof(model));
  kiln::Result<kiln::Program> program = kiln::Program::load(loader);
  if (!program.ok()) return fail("Program::load", program.error());

  kiln::BumpAllocator bookkeeping(g_bookkeeping, sizeof(g_bookkeeping));
  kiln::Span<uint8_t> arenas[] = {{g_arena, sizeof(g_arena)}};
  kiln::MemoryManager memory{&bookkeeping, {arenas, 1}};
  kiln::Result<kiln::Method> method = program->load_method("forward", memory);
  if (!method.ok()) return fail("load_method", method.error());

  kiln::SelfTestReport report;
  error = kiln::run_self_test(program.get(), method.get(), {model_self_test, MODEL_SELF_TEST_SIZE},
                              {g_self_test_scratch, sizeof(g_self_test_scratch)}, &report);
  if (error != kiln::Error::kOk) return fail("self-test", error);
  kiln_mps2_printf("self-test (the host's output): max relative error %.7f (tolerance %.7f): %s\n",
                   static_cast<double>(report.max_error), static_cast<double>(report.tolerance),
                   report.passed ? "passed" : "FAILED");
  if (!report.passed) return 1;

  if ((error = method->set_input(0, kModelInput, sizeof(kModelInput))) != kiln::Error::kOk ||
      (error = method->set_output(0, g_output, sizeof(g_output))) != kiln::Error::kOk) {
    return fail("binding the input and output", error);
  }
  const uint64_t start = kiln_pal_ticks();
  error = method->execute();
  const uint64_t ticks = kiln_pal_ticks() - start;
  if (error != kiln::Error::kOk) return fail("execute", error);

  float worst = 0.0f;
  for (size_t i = 0; i < MODEL_OUTPUT_COUNT; ++i) {
    const float got = static_cast<float>(g_output[i]), want = static_cast<float>(kModelExpected[i]);
    const float d = got > want ? got - want : want - got;
    worst = d > worst ? d : worst;
    kiln_mps2_printf("  [%2u] %10.6f   PyTorch %10.6f\n", static_cast<unsigned>(i), static_cast<double>(got),
                     static_cast<double>(want));
  }
  const bool ok = worst <= MODEL_TOLERANCE;
  kiln_mps2_printf("max difference %.7f (tolerance %.7f): %s\n", static_cast<double>(worst),
                   static_cast<double>(MODEL_TOLERANCE), ok ? "ok" : "MISMATCH");
  kiln_mps2_printf("execute: %llu ticks of the %u Hz SysTick, %u kiln instructions\n",
                   static_cast<unsigned long long>(ticks), static_cast<unsigned>(kiln_pal_ticks_per_second()),
                   static_cast<unsigned>(method->meta().num_instructions()));
  kiln_mps2_printf("stack: %u of %u bytes used\n", static_cast<unsigned>(kiln_mps2_stack_used()),
                   static_cast<unsigned>(kiln_mps2_stack_size()));
  kiln_mps2_printf("%s\n", ok ? "PASS: output matches PyTorch" : "FAIL: output differs from PyTorch");
  return ok ? 0 : 1;
}
