// What the Vulkan backend calls, seen from outside: the Vulkan entry points
// that create objects, allocate or record are wrapped by the linker
// (-Wl,--wrap) and counted, so the tests check the calls themselves, not
// the backend's own bookkeeping.
//
//   - Executing a loaded method allocates nothing, creates nothing,
//     updates no descriptor and records no command: it submits one
//     recorded command buffer per delegate call.
//   - With the barriers dropped (fault injection in the wrapper), the
//     synchronization validation of the Khronos layer reports the hazards
//     and loading fails: the validation layer is on, checks the barriers,
//     and a message fails the run.

#include <gtest/gtest.h>
#include <vulkan/vulkan.h>

#include <atomic>
#include <map>
#include <string>

#include "support/graph_builder.h"
#include "vulkan_test_support.h"

namespace {

std::atomic<bool> g_drop_barriers{false};
std::map<std::string, int>& calls() {
  static std::map<std::string, int> counts;
  return counts;
}
void count(const char* name) { ++calls()[name]; }

}  // namespace

// Each wrapper counts the call and forwards it.
#define KILN_WRAP(ret, name, params, args) \
  extern "C" ret __real_##name params;     \
  extern "C" ret __wrap_##name params {    \
    count(#name);                          \
    return __real_##name args;             \
  }

KILN_WRAP(VkResult, vkAllocateMemory,
          (VkDevice d, const VkMemoryAllocateInfo* i, const VkAllocationCallbacks* a, VkDeviceMemory* m), (d, i, a, m))
KILN_WRAP(VkResult, vkCreateBuffer,
          (VkDevice d, const VkBufferCreateInfo* i, const VkAllocationCallbacks* a, VkBuffer* b), (d, i, a, b))
KILN_WRAP(VkResult, vkCreateDescriptorPool,
          (VkDevice d, const VkDescriptorPoolCreateInfo* i, const VkAllocationCallbacks* a, VkDescriptorPool* p),
          (d, i, a, p))
KILN_WRAP(VkResult, vkAllocateDescriptorSets, (VkDevice d, const VkDescriptorSetAllocateInfo* i, VkDescriptorSet* s),
          (d, i, s))
KILN_WRAP(void, vkUpdateDescriptorSets,
          (VkDevice d, uint32_t n, const VkWriteDescriptorSet* w, uint32_t c, const VkCopyDescriptorSet* cp),
          (d, n, w, c, cp))
KILN_WRAP(VkResult, vkCreateComputePipelines,
          (VkDevice d, VkPipelineCache c, uint32_t n, const VkComputePipelineCreateInfo* i,
           const VkAllocationCallbacks* a, VkPipeline* p),
          (d, c, n, i, a, p))
KILN_WRAP(VkResult, vkCreateShaderModule,
          (VkDevice d, const VkShaderModuleCreateInfo* i, const VkAllocationCallbacks* a, VkShaderModule* m),
          (d, i, a, m))
KILN_WRAP(VkResult, vkAllocateCommandBuffers, (VkDevice d, const VkCommandBufferAllocateInfo* i, VkCommandBuffer* c),
          (d, i, c))
KILN_WRAP(VkResult, vkBeginCommandBuffer, (VkCommandBuffer c, const VkCommandBufferBeginInfo* i), (c, i))
KILN_WRAP(void, vkCmdDispatch, (VkCommandBuffer c, uint32_t x, uint32_t y, uint32_t z), (c, x, y, z))
KILN_WRAP(void, vkCmdPushConstants,
          (VkCommandBuffer c, VkPipelineLayout l, VkShaderStageFlags s, uint32_t o, uint32_t n, const void* v),
          (c, l, s, o, n, v))
KILN_WRAP(VkResult, vkCreateFence, (VkDevice d, const VkFenceCreateInfo* i, const VkAllocationCallbacks* a, VkFence* f),
          (d, i, a, f))
KILN_WRAP(VkResult, vkQueueSubmit, (VkQueue q, uint32_t n, const VkSubmitInfo* s, VkFence f), (q, n, s, f))

extern "C" void __real_vkCmdPipelineBarrier(VkCommandBuffer, VkPipelineStageFlags, VkPipelineStageFlags,
                                            VkDependencyFlags, uint32_t, const VkMemoryBarrier*, uint32_t,
                                            const VkBufferMemoryBarrier*, uint32_t, const VkImageMemoryBarrier*);
extern "C" void __wrap_vkCmdPipelineBarrier(VkCommandBuffer c, VkPipelineStageFlags src, VkPipelineStageFlags dst,
                                            VkDependencyFlags f, uint32_t n, const VkMemoryBarrier* m, uint32_t nb,
                                            const VkBufferMemoryBarrier* b, uint32_t ni,
                                            const VkImageMemoryBarrier* i) {
  count("vkCmdPipelineBarrier");
  if (g_drop_barriers) return;
  __real_vkCmdPipelineBarrier(c, src, dst, f, n, m, nb, b, ni, i);
}

namespace kiln::testing {
namespace {

// Conv, pooling and a classifier, with a node on the CPU in between: two
// delegates, copies both ways.
GraphBuilder split_cnn() {
  GraphBuilder b;
  const int x = b.input("x", {1, 3, 16, 16});
  int h = b.node("Conv", {x, b.ramp("w1", {8, 3, 3, 3}), b.ramp("b1", {8})}, {{"pads", ints_attr({1, 1, 1, 1})}});
  h = b.node("Relu", {h});
  h = b.node("Pad", {h, b.constant("pads", HostTensor::from_int64s({0, 0, 1, 1, 0, 0, 1, 1}, {8}))});
  h = b.node("MaxPool", {h}, {{"kernel_shape", ints_attr({3, 3})}, {"strides", ints_attr({2, 2})}});
  h = b.node("GlobalAveragePool", {h});
  h = b.node("Flatten", {h});
  h = b.node("Gemm", {h, b.ramp("wf", {4, 8}), b.ramp("bf", {4})}, {{"transB", int_attr(1)}});
  b.output(b.node("Softmax", {h}));
  return b;
}

TEST(VulkanExecuteTest, ExecuteOnlySubmitsRecordedWork) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = split_cnn();
  planner::PlanOptions options;
  options.targets = "vulkan:0,cpu";
  const planner::PlanResult plan = b.plan(options);
  const fb::Method* m = fb::GetSizePrefixedProgram(plan.bytes.data())->methods()->Get(0);
  const int delegates = static_cast<int>(m->delegates()->size());
  ASSERT_EQ(delegates, 2);

  LoadedMethod method(plan.bytes, shared_backend().registry);
  ASSERT_EQ(method.error(), Error::kOk);
  std::vector<HostTensor> outputs;
  ASSERT_EQ(method.run({random_tensor({1, 3, 16, 16}, 1)}, &outputs), Error::kOk);
  EXPECT_GT(calls()["vkCmdDispatch"], 0);
  EXPECT_GT(calls()["vkCreateComputePipelines"], 0);

  const std::map<std::string, int> before = calls();
  const backends::vulkan::VulkanStats stats_before = shared_backend().backend->stats();
  constexpr int kRuns = 5;
  for (int r = 0; r < kRuns; ++r) ASSERT_EQ(method.execute(), Error::kOk);
  const backends::vulkan::VulkanStats stats_after = shared_backend().backend->stats();
  for (const auto& [name, n] : calls()) {
    const int delta = n - (before.count(name) ? before.at(name) : 0);
    if (name == "vkQueueSubmit") {
      EXPECT_EQ(delta, kRuns * delegates);
    } else {
      EXPECT_EQ(delta, 0) << name << " was called during execute";
    }
  }
  // What the driver takes from the host pool while a submission is in
  // flight (Mesa keeps a record per vkQueueSubmit) is given back: its
  // queue thread may still hold the last record when the fence signals,
  // but nothing accumulates over the runs.
  EXPECT_LT(stats_after.host_bytes_in_use, stats_before.host_bytes_in_use + 4096);
  std::printf("driver host allocations per execute (from the pool, all freed): %.1f\n",
              static_cast<double>(stats_after.host_allocations - stats_before.host_allocations) / kRuns);
}

TEST(VulkanExecuteTest, MissingBarriersAreCaughtByValidation) {
  SKIP_WITHOUT_VULKAN();
  GraphBuilder b = split_cnn();
  planner::PlanOptions options;
  options.targets = "vulkan:0,cpu";
  const std::string program = b.plan(options).bytes;
  TestBackend faulty;
  g_drop_barriers = true;
  const Error error = LoadedMethod(program, faulty.registry).error();
  g_drop_barriers = false;
  EXPECT_EQ(error, Error::kDelegateInitFailed);
  EXPECT_GT(faulty.backend->validation_messages(), 0u);
  // With the barriers, the same program loads cleanly on the same backend.
  const uint64_t messages = faulty.backend->validation_messages();
  EXPECT_EQ(LoadedMethod(program, faulty.registry).error(), Error::kOk);
  EXPECT_EQ(faulty.backend->validation_messages(), messages);
}

}  // namespace
}  // namespace kiln::testing
