// Targets: the devices a model may run on, in order of preference, and the
// registries of the backends that serve them.
//
// `kiln plan --target gpu:0,cpu` asks: run each node on device 0 of backend
// "gpu" when that backend supports it, else on the CPU. Each backend
// declares, in its own folder (backends/<name>/, through
// kiln/planner/backend_planner.h), which ops it supports with which dtypes
// and attributes, the alignment of its device arenas, and how much host
// state a delegate needs; the planner asks, never assumes.

#ifndef KILN_PLANNER_TARGETS_TARGET_H_
#define KILN_PLANNER_TARGETS_TARGET_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/planner/backend_planner.h"
#include "kiln/schema/program_generated.h"
#include "lower/program.h"

namespace kiln::planner {

// One entry of a target list.
struct TargetDevice {
  std::string backend;  // "cpu", or a backend planner's name
  fb::Device device{fb::DeviceType::CPU, 0};
  const BackendPlanner* planner = nullptr;  // nullptr for the CPU
  std::string str() const;                  // "cpu", "<backend>:0"
};

// Parses "<backend>:0,cpu". `device_counts` narrows how many devices of a
// backend exist ("--device-count gpu=1"). Throws PlanError naming an
// unknown backend, a device index out of range, or a duplicate.
std::vector<TargetDevice> parse_targets(const std::string& list, const std::map<std::string, int>& device_counts = {});

// Throws PlanError unless `precision` is fp32, tf32, fp16 or bf16 and every
// device backend of `targets` runs it (the CPU computes in FP32 whatever
// it is: it ignores the option).
void check_precision(const std::string& precision, const std::vector<TargetDevice>& targets);

// The registry of backend planner halves (filled by
// register_builtin_backends()).
const BackendPlanner* find_backend_planner(const std::string& name);
const BackendPlanner* backend_planner_for(fb::DeviceType type);
std::vector<std::string> backend_planner_names();

// The host runtime halves registered so far (register_host_backend()).
const std::vector<HostBackendInfo>& host_backends();

// Registers both halves of every backend built into kiln: the calls the
// build generates from the backends' kiln_add_backend() lines
// (cmake/KilnBackends.cmake). Idempotent.
void register_builtin_backends();

}  // namespace kiln::planner

#endif  // KILN_PLANNER_TARGETS_TARGET_H_
