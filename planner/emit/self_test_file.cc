#include "emit/self_test_file.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kiln/schema/digest.h"
#include "kiln/schema/selftest_generated.h"

namespace kiln::planner {
namespace {

constexpr uint32_t kAlignment = 64;

void pad_to(std::string& s, size_t alignment) {
  while (s.size() % alignment != 0) s.push_back('\0');
}

}  // namespace

uint64_t program_digest(const std::string& program_bytes) {
  uint32_t prefix = 0;
  if (program_bytes.size() < 8) return 0;
  std::memcpy(&prefix, program_bytes.data(), sizeof(prefix));
  const size_t n = std::min<size_t>(program_bytes.size(), static_cast<size_t>(prefix) + 4);
  return abi::fnv1a64(reinterpret_cast<const uint8_t*>(program_bytes.data()), n);
}

std::string make_self_test(const std::string& program_bytes, const std::string& method,
                           const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& outputs,
                           float tolerance) {
  if (program_bytes.size() < 8) fail("internal error: no program to bundle a self-test with");
  fb::SelfTestT test;
  test.program_digest = program_digest(program_bytes);
  test.method = method;
  test.tolerance = tolerance;
  test.segment_alignment = kAlignment;
  std::string segment;
  auto add = [&](const HostTensor& t) {
    auto out = std::make_unique<fb::SelfTestTensorT>();
    out->dtype = t.dtype;
    out->shape = t.shape;
    pad_to(segment, kAlignment);
    out->data = std::make_unique<fb::DataRef>(segment.size(), t.bytes.size());
    segment.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
    return out;
  };
  for (const HostTensor& t : inputs) test.inputs.push_back(add(t));
  for (const HostTensor& t : outputs) test.outputs.push_back(add(t));
  test.segment_size = segment.size();
  flatbuffers::FlatBufferBuilder builder(1024);
  builder.FinishSizePrefixed(fb::SelfTest::Pack(builder, &test), fb::SelfTestIdentifier());
  std::string bytes(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
  pad_to(bytes, kAlignment);
  return bytes + segment;
}

}  // namespace kiln::planner
