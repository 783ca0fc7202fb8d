#include "lower/lowerer.h"

#include "core/error.h"
#include "kiln/runtime/tensor.h"
#include "ops/op_registry.h"

namespace kiln::planner {

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
  if (v.is_constant()) {
    t.storage = Storage::kConstant;
    t.constant = static_cast<int>(program_.constants.size());
    program_.constants.push_back(v.constant);
  } else if (v.is_graph_input) {
    t.storage = Storage::kUser;
    t.is_input = true;
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

LInstruction& Lowerer::kernel(std::string op, std::vector<int> inputs, std::vector<int> outputs,
                              fb::ParamsUnion params, std::vector<int> scratch) {
  LInstruction instruction;
  instruction.kind = LInstruction::Kind::kKernel;
  instruction.op = std::move(op);
  instruction.inputs = std::move(inputs);
  instruction.outputs = std::move(outputs);
  instruction.params = std::move(params);
  instruction.scratch = std::move(scratch);
  instruction.name = node_name_;
  method_.instructions.push_back(std::move(instruction));
  return method_.instructions.back();
}

void Lowerer::view(int src, int dst) { kernel("Copy", {src}, {dst}); }

void Lowerer::copy(int src, int dst) {
  LInstruction instruction;
  instruction.kind = LInstruction::Kind::kCopy;
  instruction.inputs = {src};
  instruction.outputs = {dst};
  instruction.name = node_name_;
  method_.instructions.push_back(std::move(instruction));
}

LMethod& lower_graph(Graph& graph, LProgram& program, const std::string& method_name) {
  program.methods.emplace_back();
  LMethod& method = program.methods.back();
  method.name = method_name;
  Lowerer lowerer(graph, program, method);
  for (int input : graph.inputs) method.inputs.push_back(lowerer.tensor(input));
  for (int n : graph.topological_order()) {
    Node& node = graph.nodes[static_cast<size_t>(n)];
    const OpDef* op = find_op(node.domain, node.op_type);
    if (op == nullptr || op->lower == nullptr) {
      unsupported(graph.describe(node), ": op is not supported");
    }
    OpContext ctx(graph, n);
    lowerer.set_node_name(node.name);
    op->lower(ctx, lowerer);
  }
  // Every output is a user-provided tensor written by an instruction. A
  // value that is a constant, a graph input or already an output gets a copy.
  lowerer.set_node_name("output");
  for (int value : graph.outputs) {
    const int t = lowerer.tensor(value);
    LTensor& source = method.tensors[static_cast<size_t>(t)];
    if (source.storage == Storage::kPlanned && !source.is_output) {
      source.storage = Storage::kUser;
      source.is_output = true;
      method.outputs.push_back(t);
      continue;
    }
    LTensor out;
    out.name = source.name;
    out.dtype = source.dtype;
    out.shape = source.shape;
    out.storage = Storage::kUser;
    out.is_output = true;
    source.name += source.storage == Storage::kConstant ? ":constant" : ":source";
    const int dst = method.add_tensor(std::move(out));
    lowerer.copy(t, dst);
    method.outputs.push_back(dst);
  }
  return method;
}

}  // namespace kiln::planner
