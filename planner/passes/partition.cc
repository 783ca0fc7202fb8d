#include "passes/partition.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "kiln/schema/device.h"
#include "passes/inplace.h"

namespace kiln::planner {
namespace {

const TargetDevice* find_target(const std::vector<TargetDevice>& targets, const fb::Device& device) {
  for (const TargetDevice& t : targets) {
    if (same_device(t.device, device)) return &t;
  }
  return nullptr;
}

// Empty when `target` runs `node`, else why not.
std::string reason(const Graph& graph, const Node& node, const TargetDevice& target) {
  if (target.planner == nullptr) return "";  // the CPU lowers every op the planner knows
  return target.planner->unsupported_reason(NodeView(graph, node));
}

std::vector<int> affinity_order(const Graph& graph, const std::vector<fb::Device>& device) {
  // Kahn's algorithm; among ready nodes prefer the last scheduled node's
  // device, then the lowest index (determinism).
  std::vector<int> pending(graph.nodes.size(), 0);
  const auto readers = graph.consumers();
  std::set<int> ready;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int v : graph.nodes[n].inputs) {
      if (v >= 0 && graph.values[static_cast<size_t>(v)].producer >= 0) ++pending[n];
    }
    if (pending[n] == 0) ready.insert(static_cast<int>(n));
  }
  std::vector<int> order;
  fb::Device last(fb::DeviceType::CPU, 0);
  while (!ready.empty()) {
    int pick = *ready.begin();
    for (int n : ready) {
      if (same_device(device[static_cast<size_t>(n)], last)) {
        pick = n;
        break;
      }
    }
    ready.erase(pick);
    order.push_back(pick);
    last = device[static_cast<size_t>(pick)];
    for (int v : graph.nodes[static_cast<size_t>(pick)].outputs) {
      if (v < 0) continue;
      for (int reader : readers[static_cast<size_t>(v)]) {
        for (int in : graph.nodes[static_cast<size_t>(reader)].inputs) {
          if (in == v && --pending[static_cast<size_t>(reader)] == 0) ready.insert(reader);
        }
      }
    }
  }
  if (order.size() != graph.nodes.size()) fail("the graph has a cycle");
  return order;
}

bool is_collective(const Node& node) { return node.domain == "com.microsoft" && node.op_type == "AllReduce"; }

// The target a node inherits from its inputs' producer, or nullptr: a view
// follows the device of the value it views, where that device runs it; a
// collective the one device that produces every tensor it reduces, where
// that device's backend runs collectives (the CPU always does), so that
// reducing never moves its operands.
const TargetDevice* inherited_target(const Graph& graph, const Node& node, const DevicePlan& plan,
                                     const std::vector<TargetDevice>& targets) {
  const bool collective = is_collective(node);
  const bool view = view_ops().count(node.op_type) != 0 && node.domain.empty();
  if ((!collective && !view) || node.inputs.empty()) return nullptr;
  const fb::Device* source = nullptr;
  for (size_t i = 0; i < (collective ? node.inputs.size() : 1); ++i) {
    const int v = node.inputs[i];
    if (v < 0) continue;
    const int producer = graph.values[static_cast<size_t>(v)].producer;
    if (producer < 0) return nullptr;
    const fb::Device& device = plan.node_device[static_cast<size_t>(producer)];
    if (source != nullptr && !same_device(*source, device)) return nullptr;
    source = &device;
  }
  const TargetDevice* target = source != nullptr ? find_target(targets, *source) : nullptr;
  if (target == nullptr || !reason(graph, node, *target).empty()) return nullptr;
  if (collective && target->planner != nullptr && !target->planner->runs_collectives()) return nullptr;
  return target;
}

}  // namespace

DevicePlan partition(const Graph& graph, const PartitionOptions& options) {
  DevicePlan plan;
  plan.device_io = options.device_io;
  const bool cpu_only = std::all_of(options.targets.begin(), options.targets.end(),
                                    [](const TargetDevice& t) { return is_host(t.device); });
  if (cpu_only && options.placements.empty()) {
    // Everything on the CPU in topological order: the empty plan says so.
    return plan;
  }
  for (const auto& [name, where] : options.placements) {
    bool found = false;
    for (const Node& node : graph.nodes) found = found || node.name == name;
    if (!found) fail("--place names node '", name, "', which is not in the model (after folding)");
  }
  plan.node_device.assign(graph.nodes.size(), fb::Device(fb::DeviceType::CPU, 0));
  for (int n : graph.topological_order()) {
    const Node& node = graph.nodes[static_cast<size_t>(n)];
    fb::Device& device = plan.node_device[static_cast<size_t>(n)];
    auto pinned = options.placements.find(node.name);
    if (pinned != options.placements.end()) {
      const std::vector<TargetDevice> one = parse_targets(pinned->second);
      const TargetDevice* target = find_target(options.targets, one.at(0).device);
      if (target == nullptr) {
        fail(graph.describe(node), ": placed on ", pinned->second, ", which is not one of the targets");
      }
      const std::string why = reason(graph, node, *target);
      if (!why.empty()) fail(graph.describe(node), ": placed on ", target->str(), ", which cannot run it: ", why);
      device = target->device;
      continue;
    }
    if (const TargetDevice* target = inherited_target(graph, node, plan, options.targets)) {
      device = target->device;
      continue;
    }
    std::string reasons;
    bool placed = false;
    for (const TargetDevice& target : options.targets) {
      const std::string why = reason(graph, node, target);
      if (why.empty()) {
        device = target.device;
        placed = true;
        break;
      }
      reasons += (reasons.empty() ? "" : "; ") + target.str() + ": " + why;
    }
    if (!placed) {
      const bool has_cpu = std::any_of(options.targets.begin(), options.targets.end(),
                                       [](const TargetDevice& t) { return is_host(t.device); });
      fail(graph.describe(node), ": no target in the list runs op ", node.op_type, " (", reasons,
           has_cpu ? "" : "; add cpu to --target to run it on the host", ")");
    }
  }
  plan.order = affinity_order(graph, plan.node_device);
  return plan;
}

}  // namespace kiln::planner
