// The Vulkan backend's status helper: every Vulkan call whose failure fails
// the caller goes through KILN_VK_CHECK, which logs the message, the call
// and the VkResult's name, and returns a kiln Error:
//
//   KILN_VK_CHECK(vkCreateFence(...), Error::kDeviceError, "vulkan: vulkan:%u: a delegate's fence", index);
//   -> "vulkan: vulkan:0: a delegate's fence: vkCreateFence(...): VK_ERROR_OUT_OF_HOST_MEMORY"

#ifndef KILN_BACKENDS_VULKAN_RUNTIME_SRC_VK_STATUS_H_
#define KILN_BACKENDS_VULKAN_RUNTIME_SRC_VK_STATUS_H_

#include <vulkan/vulkan.h>

#include "kiln/runtime/check.h"

namespace kiln::backends::vulkan::internal {

// VkResult's name ("VK_ERROR_OUT_OF_DEVICE_MEMORY").
const char* result_name(VkResult result);

}  // namespace kiln::backends::vulkan::internal

#define KILN_VK_CHECK(call, error, ...) \
  KILN_CHECK_STATUS(call, VK_SUCCESS, ::kiln::backends::vulkan::internal::result_name, error, __VA_ARGS__)

#endif  // KILN_BACKENDS_VULKAN_RUNTIME_SRC_VK_STATUS_H_
