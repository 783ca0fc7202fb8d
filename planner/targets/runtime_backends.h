// The runtime halves of the backends built into kiln, for the host tools
// (`kiln run`, constant folding, the conformance runner, benchmarks): one
// registry holding each registered HostBackend's kiln::Backend, each made
// on first use with the options the backend reads from the environment
// (`kiln run --help` lists them).

#ifndef KILN_PLANNER_TARGETS_RUNTIME_BACKENDS_H_
#define KILN_PLANNER_TARGETS_RUNTIME_BACKENDS_H_

#include <cstdint>
#include <string>

#include "kiln/runtime/backend.h"

namespace kiln::planner {

// Makes every registered host backend (register_builtin_backends() must
// have run) and registers it. Throws PlanError when one cannot be made.
BackendRegistry& builtin_runtime_backends();

// Releases every device of the backends made so far (after the last Method
// is gone) and returns how many diagnostics they reported in total.
uint64_t shutdown_builtin_runtime_backends();

// "null, vulkan": the runtime halves built in, comma separated.
std::string builtin_runtime_backend_names();

// The environment variables the built-in runtime halves read, one per line.
std::string builtin_runtime_backend_options();

}  // namespace kiln::planner

#endif  // KILN_PLANNER_TARGETS_RUNTIME_BACKENDS_H_
