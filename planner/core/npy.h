// Reading and writing NumPy .npy files (format versions 1 to 3, C order,
// little-endian) for `kiln run`, tests and benchmarks.

#ifndef KILN_PLANNER_CORE_NPY_H_
#define KILN_PLANNER_CORE_NPY_H_

#include <string>

#include "core/host_tensor.h"

namespace kiln::planner {

// Throws PlanError naming `path` for anything it cannot read.
HostTensor read_npy(const std::string& path);
HostTensor parse_npy(const std::string& bytes, const std::string& what);
void write_npy(const std::string& path, const HostTensor& tensor);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_CORE_NPY_H_
