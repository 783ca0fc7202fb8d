#include "support/graph_builder.h"

#include <memory>

#include "targets/target.h"

namespace kiln::testing {

Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
Attribute float_attr(float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute string_attr(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(v);
  return a;
}

int GraphBuilder::input(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  planner::Value v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.has_type = v.has_shape = true;
  v.is_graph_input = true;
  const int id = graph_.add_value(std::move(v));
  graph_.inputs.push_back(id);
  return id;
}

int GraphBuilder::constant(const std::string& name, HostTensor value) {
  planner::Value v;
  v.name = name;
  v.dtype = value.dtype;
  v.shape = value.shape;
  v.has_type = v.has_shape = true;
  v.constant = std::make_shared<HostTensor>(std::move(value));
  return graph_.add_value(std::move(v));
}

int GraphBuilder::ramp(const std::string& name, std::vector<int64_t> shape, float scale) {
  HostTensor t(DType::FLOAT32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 7 - 3) * scale;
  return constant(name, std::move(t));
}

int GraphBuilder::node(const std::string& op, std::vector<int> inputs, std::map<std::string, Attribute> attrs,
                       int num_outputs) {
  planner::Node n;
  n.op_type = op;
  n.name = op + "_" + std::to_string(counter_++);
  n.opset = graph_.opset;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  const int index = static_cast<int>(graph_.nodes.size());
  for (int i = 0; i < num_outputs; ++i) {
    planner::Value v;
    v.name = n.name + (i ? "_out" + std::to_string(i) : "");
    v.producer = index;
    n.outputs.push_back(graph_.add_value(std::move(v)));
  }
  const int first = n.outputs.front();
  graph_.nodes.push_back(std::move(n));
  return first;
}

void GraphBuilder::output(int value) {
  graph_.values[static_cast<size_t>(value)].is_graph_output = true;
  graph_.outputs.push_back(value);
}

planner::PlanResult GraphBuilder::plan(const planner::PlanOptions& options) {
  planner::register_builtin_backends();
  return planner::plan_graph(graph_, options);
}

}  // namespace kiln::testing
