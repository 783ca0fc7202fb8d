#include "lower/lowerer.h"

#include "core/device.h"
#include "core/error.h"
#include "kiln/runtime/tensor.h"
#include "ops/op_registry.h"
#include "targets/target.h"

namespace kiln::planner {
namespace {

int device_key(const fb::Device& d) { return static_cast<int>(d.type()) * 256 + d.index(); }

}  // namespace

fb::Device Lowerer::value_device(int value) const {
  const Value& v = graph_.values[static_cast<size_t>(value)];
  if (v.is_constant()) return fb::Device(fb::DeviceType::CPU, 0);
  if (v.producer >= 0 && !devices_.node_device.empty()) {
    return devices_.node_device[static_cast<size_t>(v.producer)];
  }
  auto it = input_device_.find(value);
  return it != input_device_.end() ? it->second : fb::Device(fb::DeviceType::CPU, 0);
}

int Lowerer::tensor(int value) {
  auto it = value_to_tensor_.find(value);
  if (it != value_to_tensor_.end()) return it->second;
  const Value& v = graph_.values[static_cast<size_t>(value)];
  if (!v.has_shape) fail("value '", v.name, "' has no inferred shape");
  if (v.shape.size() > kMaxRank) {
    unsupported("value '", v.name, "' has rank ", v.shape.size(), "; kiln supports up to ", kMaxRank);
  }
  LTensor t;
  t.name = v.name;
  t.dtype = v.dtype;
  t.shape = v.shape;
  t.device = value_device(value);
  t.quantized = v.io_quantized;
  t.scale = v.io_scale;
  t.zero_point = v.io_zero_point;
  if (v.is_constant()) {
    t.storage = Storage::kConstant;
    t.constant = static_cast<int>(program_.constants.size());
    program_.constants.push_back(v.constant);
  } else if (v.is_graph_input) {
    t.storage = Storage::kUser;
    t.is_input = true;
    // Device inputs live in the device arena, where the application writes them.
    t.user_fallback = !is_host(t.device);
  }
  const int id = method_.add_tensor(std::move(t));
  value_to_tensor_[value] = id;
  return id;
}

int Lowerer::temp(const std::string& stem, DType dtype, std::vector<int64_t> shape) {
  LTensor t;
  t.name = graph_.unique_name(stem);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.device = device_;
  return method_.add_tensor(std::move(t));
}

int Lowerer::constant(const std::string& name, HostTensor data) {
  LTensor t;
  t.name = graph_.unique_name(name);
  t.dtype = data.dtype;
  t.shape = data.shape;
  t.storage = Storage::kConstant;
  t.constant = static_cast<int>(program_.constants.size());
  program_.constants.push_back(std::make_shared<HostTensor>(std::move(data)));
  return method_.add_tensor(std::move(t));
}

int Lowerer::on_device(int t, fb::Device device) {
  if (t < 0) return t;
  const LTensor& source = method_.tensors[static_cast<size_t>(t)];
  if (same_device(source.device, device)) return t;
  const auto key = std::make_pair(t, device_key(device));
  auto it = copies_.find(key);
  if (it != copies_.end()) return it->second;
  // Between two devices the bytes go through the host (a copy the runtime
  // can issue with each side's backend).
  if (!is_host(source.device) && !is_host(device)) {
    const int staged = on_device(t, fb::Device(fb::DeviceType::CPU, 0));
    const int id = on_device(staged, device);
    copies_[key] = id;
    return id;
  }
  LTensor copy;
  copy.name = source.name + "@" + device_str(device);
  copy.dtype = source.dtype;
  copy.shape = source.shape;
  copy.device = device;
  const bool constant = source.storage == Storage::kConstant;
  copy.persistent = constant;
  const int id = method_.add_tensor(std::move(copy));
  LInstruction instruction;
  instruction.kind = LInstruction::Kind::kCopy;
  instruction.inputs = {t};
  instruction.outputs = {id};
  instruction.name = node_name_;
  instruction.source_op = "Copy";
  if (constant) {
    // Uploaded once when the method loads.
    method_.init_instructions.push_back(std::move(instruction));
  } else {
    method_.instructions.push_back(std::move(instruction));
  }
  copies_[key] = id;
  return id;
}

// What the device's backend adds to the call (BackendPlanner::plan_kernel):
// its scratch, appended, its choice recorded in the parameters and, with
// why, on the instruction for the report.
void Lowerer::plan_on_backend(LInstruction& instruction) {
  if (device_.type() == fb::DeviceType::CPU) return;
  const BackendPlanner* backend = backend_planner_for(device_.type());
  if (backend == nullptr) return;
  KernelCallInfo call;
  call.kernel = instruction.op;
  for (int t : instruction.inputs) {
    call.inputs.push_back(t < 0 ? std::vector<int64_t>{} : method_.tensors[static_cast<size_t>(t)].shape);
  }
  for (int t : instruction.outputs) call.outputs.push_back(method_.tensors[static_cast<size_t>(t)].shape);
  call.params = &instruction.params;
  KernelPlan plan = backend->plan_kernel(call);
  for (const KernelPlan::Scratch& s : plan.scratch) {
    instruction.scratch.push_back(temp(node_name_ + "/" + s.stem, s.dtype, {s.elements}));
  }
  instruction.choice = std::move(plan.choice);
  instruction.choice_why = std::move(plan.why);
}

void Lowerer::add_kernel(std::string op, std::vector<int> inputs, std::vector<int> outputs, fb::ParamsUnion params,
                         std::vector<int> scratch) {
  for (int& t : inputs) t = on_device(t, device_);
  for (int t : outputs) {
    if (!same_device(method_.tensors[static_cast<size_t>(t)].device, device_)) {
      fail("internal error: ", node_name_, " writes tensor '", method_.tensors[static_cast<size_t>(t)].name,
           "' on another device");
    }
  }
  LInstruction instruction;
  instruction.kind = LInstruction::Kind::kKernel;
  instruction.op = std::move(op);
  instruction.inputs = std::move(inputs);
  instruction.outputs = std::move(outputs);
  instruction.params = std::move(params);
  instruction.scratch = std::move(scratch);
  instruction.name = node_name_;
  instruction.source_op = node_op_;
  instruction.device = device_;
  plan_on_backend(instruction);
  method_.instructions.push_back(std::move(instruction));
}

void Lowerer::collective(fb::CollectiveKind kind, fb::ReduceOp op, int input, int output) {
  const uint32_t group = 0;
  bool known = false;
  for (const LCommunicator& c : method_.communicators) known = known || c.group == group;
  if (!known) method_.communicators.push_back({group, graph_.ranks});
  LInstruction instruction;
  instruction.kind = LInstruction::Kind::kCollective;
  instruction.collective = kind;
  instruction.reduce_op = op;
  instruction.group = group;
  instruction.inputs = {on_device(input, device_)};
  instruction.outputs = {output};
  instruction.name = node_name_;
  instruction.source_op = node_op_;
  instruction.device = device_;
  method_.instructions.push_back(std::move(instruction));
}

void Lowerer::copy(int src, int dst) {
  LInstruction instruction;
  instruction.kind = LInstruction::Kind::kCopy;
  instruction.inputs = {src};
  instruction.outputs = {dst};
  instruction.name = node_name_;
  instruction.source_op = node_op_;
  method_.instructions.push_back(std::move(instruction));
}

void Lowerer::set_node(int node) {
  const Node& n = graph_.nodes[static_cast<size_t>(node)];
  set_node_info(n.name, n.op_type);
  device_ = devices_.node_device.empty() ? fb::Device(fb::DeviceType::CPU, 0)
                                         : devices_.node_device[static_cast<size_t>(node)];
}

LMethod& lower_graph(Graph& graph, LProgram& program, const std::string& method_name, const DevicePlan& devices,
                     const LowerOptions& options) {
  program.methods.emplace_back();
  LMethod& method = program.methods.back();
  method.name = method_name;
  Lowerer lowerer(graph, program, method, devices, options);
  const std::vector<int> order = devices.order.empty() ? graph.topological_order() : devices.order;
  if (devices.device_io && !devices.node_device.empty()) {
    // An input lives where its first reader runs.
    std::unordered_map<int, bool> placed;
    for (int n : order) {
      for (int v : graph.nodes[static_cast<size_t>(n)].inputs) {
        if (v < 0 || !graph.values[static_cast<size_t>(v)].is_graph_input || placed[v]) continue;
        placed[v] = true;
        lowerer.set_input_device(v, devices.node_device[static_cast<size_t>(n)]);
      }
    }
  }
  for (int input : graph.inputs) method.inputs.push_back(lowerer.tensor(input));
  for (int n : order) {
    Node& node = graph.nodes[static_cast<size_t>(n)];
    const OpDef* op = find_op(node.domain, node.op_type);
    if (op == nullptr || op->lower == nullptr) {
      unsupported(graph.describe(node), ": op is not supported");
    }
    OpContext ctx(graph, n);
    lowerer.set_node(n);
    op->lower(ctx, lowerer);
  }
  // Every output is a user-provided tensor written by an instruction. A
  // value that is a constant, a graph input or already an output gets a
  // copy; so does one on a device, unless outputs stay on their device.
  lowerer.set_node_info("output", "Copy");
  for (int value : graph.outputs) {
    const int t = lowerer.tensor(value);
    LTensor& source = method.tensors[static_cast<size_t>(t)];
    const bool stays = is_host(source.device) || devices.device_io;
    if (source.storage == Storage::kPlanned && !source.is_output && stays) {
      source.storage = Storage::kUser;
      source.is_output = true;
      source.user_fallback = !is_host(source.device);
      method.outputs.push_back(t);
      continue;
    }
    LTensor out;
    out.name = source.name;
    out.dtype = source.dtype;
    out.shape = source.shape;
    out.quantized = source.quantized;
    out.scale = source.scale;
    out.zero_point = source.zero_point;
    out.storage = Storage::kUser;
    out.is_output = true;
    out.device =
        devices.device_io && source.storage != Storage::kConstant ? source.device : fb::Device(fb::DeviceType::CPU, 0);
    out.user_fallback = !is_host(out.device);
    source.name += source.storage == Storage::kConstant ? ":constant" : ":source";
    const int dst = method.add_tensor(std::move(out));
    lowerer.copy(t, dst);
    method.outputs.push_back(dst);
  }
  return method;
}

}  // namespace kiln::planner
