// The runtime halves of the backends built into kiln, for the host tools
// (`kiln run`, constant folding, the conformance runner, benchmarks, the
// Python package): one registry holding each registered HostBackend's
// kiln::Backend, each made on first use with the options the backend reads
// from the environment (`kiln run --help` lists them).
//
// Making a backend costs: opening a device, a memory pool (the null
// backend's), an instance and its shaders (Vulkan's). A tool running a
// program makes only the backends whose devices the program names
// (runtime_backends_for), so a CPU program makes none.

#ifndef KILN_PLANNER_TARGETS_RUNTIME_BACKENDS_H_
#define KILN_PLANNER_TARGETS_RUNTIME_BACKENDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime/backend.h"

namespace kiln::planner {

// The backends serving the devices `program_bytes` names, by name: the
// devices of every method's arenas, tensors and delegates, but the CPU's.
// Throws PlanError for bytes that are not a program, and for a device that
// no backend built in serves.
std::vector<std::string> backends_named_by(const std::string& program_bytes);

// Makes (each once) and registers the built-in runtime halves `names`
// lists (register_builtin_backends() must have run); the registry holds
// every one made so far. Throws PlanError for a name not built in or a
// backend that cannot be made.
BackendRegistry& builtin_runtime_backends(const std::vector<std::string>& names);

// builtin_runtime_backends(backends_named_by(program_bytes)): what running
// one program needs.
BackendRegistry& runtime_backends_for(const std::string& program_bytes);

// Every built-in runtime half (the conformance runner tries each).
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
