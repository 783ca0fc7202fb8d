// The Vulkan backend's planner half (see vulkan_planner.cc).

#ifndef KILN_BACKENDS_VULKAN_PLANNER_VULKAN_PLANNER_H_
#define KILN_BACKENDS_VULKAN_PLANNER_VULKAN_PLANNER_H_

#include <memory>

#include "planner/targets/target.h"

namespace kiln::planner {

std::unique_ptr<BackendPlanner> make_vulkan_planner();

}  // namespace kiln::planner

#endif  // KILN_BACKENDS_VULKAN_PLANNER_VULKAN_PLANNER_H_
