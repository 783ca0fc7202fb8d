// run_self_test: a bundled self-test (schema/selftest.fbs) against a loaded
// method. The test file is checked like a program (framing, flatbuffer
// verification, every DataRef inside the segment, every tensor's size and
// dtype against the method's) before anything is bound.

#include "kiln/runtime/self_test.h"

#include <string.h>

#include "kiln/runtime/check.h"
#include "kiln/schema/digest.h"
#include "kiln/schema/selftest_generated.h"
#include "names.h"

namespace kiln {
namespace {

constexpr uint64_t kOutputAlignment = 64;

uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

struct ParsedTest {
  const fb::SelfTest* test = nullptr;
  Span<const uint8_t> segment;
};

Result<ParsedTest> parse(Span<const uint8_t> bytes) {
  KILN_CHECK_OR_RETURN(bytes.size() >= 8 && reinterpret_cast<uintptr_t>(bytes.data()) % 16 == 0, Error::kInvalidProgram,
                       "self-test: %u bytes at a misaligned or short buffer", static_cast<unsigned>(bytes.size()));
  KILN_CHECK_OR_RETURN(fb::SizePrefixedSelfTestBufferHasIdentifier(bytes.data()), Error::kInvalidProgram,
                       "not a kiln self-test (file identifier is not '%s')", fb::SelfTestIdentifier());
  uint32_t prefix = 0;
  memcpy(&prefix, bytes.data(), sizeof(prefix));
  KILN_CHECK_OR_RETURN(prefix <= bytes.size() - 4, Error::kInvalidProgram, "self-test is truncated");
  flatbuffers::Verifier verifier(bytes.data(), uint64_t{prefix} + 4, 64, 100000);
  KILN_CHECK_OR_RETURN(fb::VerifySizePrefixedSelfTestBuffer(verifier), Error::kInvalidProgram,
                       "self-test failed flatbuffer verification (truncated or corrupt)");
  ParsedTest parsed;
  parsed.test = fb::GetSizePrefixedSelfTest(bytes.data());
  const uint32_t alignment = parsed.test->segment_alignment();
  KILN_CHECK_OR_RETURN(alignment >= 16 && alignment <= 65536 && (alignment & (alignment - 1)) == 0,
                       Error::kInvalidProgram, "self-test segment alignment %u", alignment);
  const uint64_t base = round_up(uint64_t{prefix} + 4, alignment);
  KILN_CHECK_OR_RETURN(base <= bytes.size() && parsed.test->segment_size() <= bytes.size() - base,
                       Error::kInvalidProgram, "self-test data extends past the end of its %u bytes",
                       static_cast<unsigned>(bytes.size()));
  parsed.segment = bytes.subspan(static_cast<size_t>(base), static_cast<size_t>(parsed.test->segment_size()));
  return parsed;
}

// The tensor's bytes in the segment, checked against what the method
// expects of it.
Result<Span<const uint8_t>> tensor_bytes(const ParsedTest& parsed, const fb::SelfTestTensor* t, const TensorInfo& want,
                                         const char* what, uint32_t index) {
  KILN_CHECK_OR_RETURN(t != nullptr && t->data() != nullptr, Error::kInvalidProgram, "self-test %s %u has no data",
                       what, index);
  const fb::DataRef& ref = *t->data();
  KILN_CHECK_OR_RETURN(ref.offset() <= parsed.segment.size() && ref.size() <= parsed.segment.size() - ref.offset() &&
                           ref.offset() % 16 == 0,
                       Error::kInvalidProgram, "self-test %s %u lies outside its data segment", what, index);
  KILN_CHECK_OR_RETURN(t->dtype() == want.dtype && ref.size() == want.nbytes, Error::kInvalidArgument,
                       "self-test %s %u is %s of %llu bytes; the method's '%s' is %s of %llu", what, index,
                       dtype_name(t->dtype()), static_cast<unsigned long long>(ref.size()), want.name,
                       dtype_name(want.dtype), static_cast<unsigned long long>(want.nbytes));
  return parsed.segment.subspan(static_cast<size_t>(ref.offset()), static_cast<size_t>(ref.size()));
}

float magnitude(float v) { return v < 0.f ? -v : v; }

// max |got - want| / max |want| for float32; 0 or 1 (equal or not) otherwise.
float output_error(DType dtype, const uint8_t* got, const uint8_t* want, uint64_t nbytes) {
  if (dtype != DType::FLOAT32) return memcmp(got, want, static_cast<size_t>(nbytes)) == 0 ? 0.f : 1.f;
  const uint64_t n = nbytes / sizeof(float);
  float largest = 0.f, worst = 0.f;
  for (uint64_t i = 0; i < n; ++i) {
    float g, w;
    memcpy(&g, got + i * sizeof(float), sizeof(float));
    memcpy(&w, want + i * sizeof(float), sizeof(float));
    largest = magnitude(w) > largest ? magnitude(w) : largest;
    const float d = magnitude(g - w);
    if (!(d <= worst)) worst = d;  // NaN counts as the worst
  }
  return largest > 0.f ? worst / largest : worst;
}

}  // namespace

Result<uint64_t> self_test_scratch_bytes(Span<const uint8_t> test) {
  KILN_ASSIGN_OR_RETURN(ParsedTest parsed, parse(test));
  uint64_t total = 0;
  if (parsed.test->outputs() != nullptr) {
    for (const fb::SelfTestTensor* t : *parsed.test->outputs()) {
      if (t != nullptr && t->data() != nullptr) total += round_up(t->data()->size(), kOutputAlignment);
    }
  }
  return total;
}

Error run_self_test(const Program& program, Method& method, Span<const uint8_t> test, Span<uint8_t> scratch,
                    SelfTestReport* out_report) {
  KILN_CHECK_OR_RETURN(out_report != nullptr, Error::kInvalidArgument, "self-test: no report given");
  *out_report = SelfTestReport();
  KILN_ASSIGN_OR_RETURN(ParsedTest parsed, parse(test));
  const Span<const uint8_t> fb_bytes = program.flatbuffer_bytes();
  KILN_CHECK_OR_RETURN(parsed.test->program_digest() == abi::fnv1a64(fb_bytes.data(), fb_bytes.size()),
                       Error::kInvalidArgument, "self-test was made for another program (digest differs)");
  const MethodMeta meta = method.meta();
  KILN_CHECK_OR_RETURN(internal::same_name(parsed.test->method()->c_str(), meta.name()), Error::kInvalidArgument,
                       "self-test is for method '%s', not '%s'", parsed.test->method()->c_str(), meta.name());
  const uint32_t num_inputs = parsed.test->inputs() != nullptr ? parsed.test->inputs()->size() : 0;
  const uint32_t num_outputs = parsed.test->outputs() != nullptr ? parsed.test->outputs()->size() : 0;
  KILN_CHECK_OR_RETURN(num_inputs == meta.num_inputs() && num_outputs == meta.num_outputs(), Error::kInvalidArgument,
                       "self-test has %u inputs and %u outputs; method '%s' has %u and %u", num_inputs, num_outputs,
                       meta.name(), static_cast<unsigned>(meta.num_inputs()),
                       static_cast<unsigned>(meta.num_outputs()));
  for (uint32_t i = 0; i < num_inputs; ++i) {
    KILN_ASSIGN_OR_RETURN(TensorInfo want, meta.input(i));
    KILN_ASSIGN_OR_RETURN(Span<const uint8_t> data,
                          tensor_bytes(parsed, parsed.test->inputs()->Get(i), want, "input", i));
    KILN_RETURN_IF_ERROR(method.set_input(i, data.data(), data.size()));
  }
  uint64_t used = 0;
  for (uint32_t o = 0; o < num_outputs; ++o) {
    KILN_ASSIGN_OR_RETURN(TensorInfo want, meta.output(o));
    KILN_ASSIGN_OR_RETURN(Span<const uint8_t> expected,
                          tensor_bytes(parsed, parsed.test->outputs()->Get(o), want, "output", o));
    const uint64_t offset = round_up(reinterpret_cast<uintptr_t>(scratch.data()) + used, kOutputAlignment) -
                            reinterpret_cast<uintptr_t>(scratch.data());
    KILN_CHECK_OR_RETURN(offset <= scratch.size() && expected.size() <= scratch.size() - offset, Error::kBufferTooSmall,
                         "self-test: %u bytes of output scratch are too few", static_cast<unsigned>(scratch.size()));
    KILN_RETURN_IF_ERROR(method.set_output(o, scratch.data() + offset, expected.size()));
    used = offset + expected.size();
  }
  KILN_RETURN_IF_ERROR(method.execute());
  out_report->num_outputs = num_outputs;
  out_report->tolerance = parsed.test->tolerance();
  out_report->passed = true;
  for (uint32_t o = 0; o < num_outputs; ++o) {
    const Tensor* got = method.output(o);
    const fb::SelfTestTensor& want = *parsed.test->outputs()->Get(o);
    const float error = output_error(want.dtype(), static_cast<const uint8_t*>(got->data()),
                                     parsed.segment.data() + want.data()->offset(), want.data()->size());
    if (o == 0 || !(error <= out_report->max_error)) {
      out_report->max_error = error;
      out_report->worst_output = o;
    }
  }
  out_report->passed = out_report->max_error <= out_report->tolerance;
  return Error::kOk;
}

}  // namespace kiln
