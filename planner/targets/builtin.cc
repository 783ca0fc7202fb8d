// The backends built into kiln: one registration line each.

#include "backends/cuda/planner/cuda_planner.h"
#include "backends/vulkan/planner/vulkan_planner.h"
#include "targets/target.h"

namespace kiln::planner {

void register_builtin_backend_planners() {
  static const bool done = [] {
    register_backend_planner(make_vulkan_planner());
    register_backend_planner(make_cuda_planner());
    return true;
  }();
  (void)done;
}

}  // namespace kiln::planner
