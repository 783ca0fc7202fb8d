// Bundled self-tests: inputs and expected outputs the planner stored beside
// a program (`kiln plan --bundle-test`, a .kiln.test file, schema/selftest.fbs),
// run on the device against the program it loaded, so firmware can check at
// boot that the program in its flash still computes what it did on the host.
//
// The test's bytes are used in place (inputs are bound zero copy from them);
// outputs are written into scratch the caller provides
// (self_test_scratch_bytes). Nothing is allocated. The Method must come from
// the program the test was made for (checked by digest) and must not be
// executing; its inputs and outputs are left bound to the test's memory.

#ifndef KILN_RUNTIME_SELF_TEST_H_
#define KILN_RUNTIME_SELF_TEST_H_

#include <stdint.h>

#include "kiln/runtime/method.h"
#include "kiln/runtime/program.h"
#include "kiln/runtime/result.h"
#include "kiln/runtime/span.h"

namespace kiln {

struct SelfTestReport {
  uint32_t num_outputs = 0;
  float tolerance = 0.f;
  // The worst output's max |got - want| / max |want| (for non-float
  // outputs: 0 when equal, 1 otherwise).
  float max_error = 0.f;
  uint32_t worst_output = 0;
  bool passed = false;
};

// Bytes of scratch run_self_test needs for the outputs (each 64-byte
// aligned). kInvalidProgram for bytes that are not a self-test.
Result<uint64_t> self_test_scratch_bytes(Span<const uint8_t> test);

// Verifies `test` (flatbuffer and ranges; 16-byte aligned), checks that it
// was made for `program` and names `method`'s method, binds its inputs,
// executes, and compares every output. kOk means it ran: the verdict is
// out_report->passed. kInvalidArgument when the test belongs to another
// program or method, kBufferTooSmall for short scratch, and any error of
// binding or executing.
Error run_self_test(const Program& program, Method& method, Span<const uint8_t> test, Span<uint8_t> scratch,
                    SelfTestReport* out_report);

}  // namespace kiln

#endif  // KILN_RUNTIME_SELF_TEST_H_
