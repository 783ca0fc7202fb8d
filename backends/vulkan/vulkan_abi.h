// What the two halves of the Vulkan backend agree on: the planner half
// (backends/vulkan/planner) writes these figures into programs, the runtime
// half (backends/vulkan/runtime) checks at compile time that it needs no
// more. No Vulkan headers here: the planner builds without Vulkan.

#ifndef KILN_BACKENDS_VULKAN_VULKAN_ABI_H_
#define KILN_BACKENDS_VULKAN_VULKAN_ABI_H_

#include <cstdint>

namespace kiln::backends::vulkan {

// Offsets in Vulkan arenas are multiples of this: the largest
// minStorageBufferOffsetAlignment a conforming device may report, so a
// program runs on every Vulkan 1.1 device (lavapipe reports 16).
constexpr uint32_t kArenaAlignment = 256;

// Host bytes one delegate takes from the method's bookkeeping: a fixed
// record (command buffer, descriptor pool, fence). Everything per kernel
// (descriptor sets, push constants, the recorded dispatches and barriers)
// lives in Vulkan objects made at init, so nothing grows with the kernels.
constexpr uint64_t kDelegateStateBytes = 64;

// Devices vulkan:0 .. vulkan:7 may be addressed.
constexpr int kMaxDevices = 8;

}  // namespace kiln::backends::vulkan

#endif  // KILN_BACKENDS_VULKAN_VULKAN_ABI_H_
