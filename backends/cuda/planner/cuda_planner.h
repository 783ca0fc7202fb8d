// The CUDA backend's planner half (see cuda_planner.cc).

#ifndef KILN_BACKENDS_CUDA_PLANNER_CUDA_PLANNER_H_
#define KILN_BACKENDS_CUDA_PLANNER_CUDA_PLANNER_H_

#include <memory>

#include "planner/targets/target.h"

namespace kiln::planner {

std::unique_ptr<BackendPlanner> make_cuda_planner();

}  // namespace kiln::planner

#endif  // KILN_BACKENDS_CUDA_PLANNER_CUDA_PLANNER_H_
