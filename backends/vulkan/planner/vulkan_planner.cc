// The Vulkan backend's planner half: which ops its compute shaders run, and
// the layout rules of its device arenas.
//
// Offsets in Vulkan arenas are aligned to 256 bytes, the largest
// minStorageBufferOffsetAlignment a conforming device may report, so one
// program runs on every Vulkan 1.1 device (lavapipe reports 16).

#include "backends/vulkan/planner/vulkan_planner.h"

#include "planner/targets/table_planner.h"

namespace kiln::planner {
namespace {

std::string spatial_2d(const Graph& graph, const Node& node) {
  const Value& x = node_input(graph, node, 0);
  if (x.shape.size() != 4) return "only 2-D (NCHW) spatial ops";
  return "";
}

}  // namespace

std::unique_ptr<BackendPlanner> make_vulkan_planner() {
  TablePlannerSpec spec;
  spec.name = "vulkan";
  spec.device_type = fb::DeviceType::VULKAN;
  spec.max_devices = 8;
  spec.arena_alignment = 256;
  spec.state_bytes_fixed = 512;
  spec.state_bytes_per_kernel = 128;
  const uint32_t in0 = 1u << 0, in01 = (1u << 0) | (1u << 1);
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"}) spec.ops.push_back(op_support(op, nullptr, in01));
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Exp", "Log",
                         "Sqrt", "Neg", "Abs", "Erf", "Reciprocal", "Elu", "Softplus"}) {
    spec.ops.push_back(op_support(op, nullptr, in0));
  }
  spec.ops.push_back(op_support("Gemm"));
  spec.ops.push_back(op_support("MatMul"));
  spec.ops.push_back(op_support("Conv", spatial_2d));
  spec.ops.push_back(op_support("MaxPool", spatial_2d));
  spec.ops.push_back(op_support("AveragePool", spatial_2d));
  spec.ops.push_back(op_support("GlobalAveragePool"));
  spec.ops.push_back(op_support("BatchNormalization"));
  spec.ops.push_back(op_support("Softmax"));
  spec.ops.push_back(op_support("LogSoftmax"));
  spec.ops.push_back(op_support("Transpose"));
  spec.ops.push_back(op_support("Concat"));
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax"}) spec.ops.push_back(op_support(op, nullptr, 0, {1}));
  spec.ops.push_back(op_support("LayerNormalization"));
  spec.ops.push_back(op_support("Reshape", nullptr, in0, {1}));
  spec.ops.push_back(op_support("Squeeze", nullptr, in0, {1}));
  spec.ops.push_back(op_support("Unsqueeze", nullptr, in0, {1}));
  for (const char* op : {"Flatten", "Identity", "Dropout"}) spec.ops.push_back(op_support(op, nullptr, in0));
  return std::make_unique<TableBackendPlanner>(std::move(spec));
}

}  // namespace kiln::planner
