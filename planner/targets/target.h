// Targets: the devices a model may run on, in order of preference, and the
// planner halves of the backends that serve them.
//
// `kiln plan --target vulkan:0,cpu` asks: run each node on vulkan:0 when the
// Vulkan backend supports it, else on the CPU. Each backend declares, in its
// own folder (backends/<name>/planner/), which ops it supports with which
// dtypes and attributes, the alignment of its device arenas, and how much
// host state a delegate needs; the planner asks, never assumes.

#ifndef KILN_PLANNER_TARGETS_TARGET_H_
#define KILN_PLANNER_TARGETS_TARGET_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/schema/program_generated.h"
#include "lower/program.h"

namespace kiln::planner {

// A backend's planner half.
class BackendPlanner {
 public:
  virtual ~BackendPlanner() = default;
  // "vulkan", "cuda": also the Delegate.backend id the runtime looks up.
  virtual std::string name() const = 0;
  virtual fb::DeviceType device_type() const = 0;
  // Device indices the backend can address: 0 .. max_devices() - 1.
  virtual int max_devices() const = 0;
  // Empty when the backend runs `node` (after shape inference); otherwise
  // why not, for messages ("float64 is not supported").
  virtual std::string unsupported_reason(const Graph& graph, const Node& node) const = 0;
  // Alignment of every offset in this backend's device arenas (at least the
  // device's storage-buffer offset alignment).
  virtual uint32_t arena_alignment() const = 0;
  // Kernels of `op` that may write their output over input i (bit i), as
  // the backend's shaders declare; 0 for none.
  virtual uint32_t inplace_inputs(const std::string& op) const { return 0; }
  // Host bytes a delegate of `kernels` calls needs at run time (the
  // backend's runtime half must need no more).
  virtual uint64_t state_bytes(size_t kernels) const = 0;
};

// One entry of a target list.
struct TargetDevice {
  std::string backend;  // "cpu", "vulkan", "cuda"
  fb::Device device{fb::DeviceType::CPU, 0};
  const BackendPlanner* planner = nullptr;  // nullptr for the CPU
  std::string str() const;                  // "vulkan:0"
};

// Parses "vulkan:0,cpu". `device_counts` narrows how many devices of a
// backend exist ("--device-count vulkan=1"). Throws PlanError naming an
// unknown backend, a device index out of range, or a duplicate.
std::vector<TargetDevice> parse_targets(const std::string& list, const std::map<std::string, int>& device_counts = {});

// The registry of backend planner halves (filled by
// register_builtin_backend_planners(), planner/targets/builtin.cc).
void register_backend_planner(std::unique_ptr<BackendPlanner> planner);
const BackendPlanner* find_backend_planner(const std::string& name);
const BackendPlanner* backend_planner_for(fb::DeviceType type);
std::vector<std::string> backend_planner_names();

// Registers the planner halves of every backend built into kiln. Idempotent.
void register_builtin_backend_planners();

}  // namespace kiln::planner

#endif  // KILN_PLANNER_TARGETS_TARGET_H_
