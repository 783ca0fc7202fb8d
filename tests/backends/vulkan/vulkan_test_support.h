// Helpers for the Vulkan backend's tests: a Vulkan backend with the
// validation layer on, programs loaded and run through it (as an
// application would: device arenas from the backend, host inputs and
// outputs bound), and single-kernel programs built by hand for kernels the
// planner does not lower yet.

#ifndef KILN_TESTS_BACKENDS_VULKAN_VULKAN_TEST_SUPPORT_H_
#define KILN_TESTS_BACKENDS_VULKAN_VULKAN_TEST_SUPPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "kiln/backends/vulkan/vulkan_backend.h"
#include "kiln/runtime/program.h"
#include "support/program_bytes.h"

namespace kiln::testing {

using planner::HostTensor;

// A backend with validation on, registered in its own registry.
struct TestBackend {
  explicit TestBackend(backends::vulkan::VulkanOptions options = default_options(), size_t pool_bytes = 64u << 20);
  static backends::vulkan::VulkanOptions default_options();
  std::vector<uint8_t> pool;
  std::unique_ptr<backends::vulkan::VulkanBackend> backend;
  BackendRegistry registry;
};

// The backend most tests share (opening a device takes a while).
TestBackend& shared_backend();
// Empty when a Vulkan device exists; otherwise why tests must skip.
std::string vulkan_unavailable();

// In a test: skips it, naming the reason, when there is no Vulkan device.
#define SKIP_WITHOUT_VULKAN()                                      \
  do {                                                             \
    const std::string why = ::kiln::testing::vulkan_unavailable(); \
    if (!why.empty()) GTEST_SKIP() << why;                         \
  } while (0)

// A program loaded through `registry`, with host arenas and bookkeeping
// from the heap and device arenas from the backend.
class LoadedMethod {
 public:
  LoadedMethod(const std::string& program, const BackendRegistry& registry);
  // kOk when the method loaded.
  Error error() const { return method_ == nullptr ? error_ : Error::kOk; }
  Method& method() { return *method_; }
  // Binds inputs and output buffers, executes once.
  Error run(const std::vector<HostTensor>& inputs, std::vector<HostTensor>* outputs);
  // Executes again with what is bound.
  Error execute() { return method_->execute(); }

 private:
  LoadedProgram program_;
  std::vector<std::unique_ptr<AlignedBytes>> arenas_;
  std::vector<Span<uint8_t>> spans_;
  std::unique_ptr<AlignedBytes> bookkeeping_bytes_;
  BumpAllocator bookkeeping_;
  std::unique_ptr<Method> method_;
  Error error_ = Error::kOk;
  std::vector<HostTensor> inputs_;
};

// max |a - b| / max(max |b|, 1e-30); infinity when shapes differ.
double relative_error(const HostTensor& a, const HostTensor& b);

// Deterministic float32 data in [-scale, scale).
HostTensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float scale = 1.f);

// A program of one method whose only work is one delegate call on
// vulkan:0 running kernel `op`: each input is copied from a host input to
// the device, each output back to a host output. `alias_output0_to`
// (>= 0) plans output 0 in place of that input.
std::string single_kernel_program(const std::string& op, fb::ParamsUnion params,
                                  const std::vector<std::vector<int64_t>>& inputs,
                                  const std::vector<std::vector<int64_t>>& outputs, int alias_output0_to = -1);

}  // namespace kiln::testing

#endif  // KILN_TESTS_BACKENDS_VULKAN_VULKAN_TEST_SUPPORT_H_
