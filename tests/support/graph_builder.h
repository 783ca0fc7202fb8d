// GraphBuilder: builds small planner graphs in test code, to make programs
// without ONNX files.
//
//   GraphBuilder b;
//   int x = b.input("x", {1, 4});
//   int y = b.node("Relu", {x});
//   b.output(y);
//   std::string program = b.plan().bytes;

#ifndef KILN_TESTS_SUPPORT_GRAPH_BUILDER_H_
#define KILN_TESTS_SUPPORT_GRAPH_BUILDER_H_

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "pipeline.h"

namespace kiln::testing {

using planner::Attribute;
using planner::DType;
using planner::Graph;
using planner::HostTensor;

Attribute int_attr(int64_t v);
Attribute float_attr(float v);
Attribute ints_attr(std::vector<int64_t> v);
Attribute string_attr(std::string v);

class GraphBuilder {
 public:
  explicit GraphBuilder(int opset = 17) { graph_.opset = opset; }

  int input(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::FLOAT32);
  int constant(const std::string& name, HostTensor value);
  // A float32 constant filled with a deterministic ramp (i % 7 - 3) * scale.
  int ramp(const std::string& name, std::vector<int64_t> shape, float scale = 0.1f);
  // Adds a node; returns its first output.
  int node(const std::string& op, std::vector<int> inputs, std::map<std::string, Attribute> attrs = {},
           int num_outputs = 1);
  void output(int value);

  Graph& graph() { return graph_; }
  planner::PlanResult plan(const planner::PlanOptions& options = {});

 private:
  Graph graph_;
  int counter_ = 0;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_SUPPORT_GRAPH_BUILDER_H_
