// Small edits of an ONNX graph (onnx::GraphProto) the quantizer makes:
// initializers to and from HostTensor, renaming a tensor where nodes read or
// write it, topological order, and the preparation ONNX Runtime's
// quantization tools expect of a float model (its quant_pre_process step):
// Constant nodes become initializers, and a BatchNormalization that alone
// reads a Conv's output folds into the Conv's weights and bias.

#ifndef KILN_PLANNER_QUANTIZE_ONNX_EDIT_H_
#define KILN_PLANNER_QUANTIZE_ONNX_EDIT_H_

#include <onnx/onnx_pb.h>

#include <string>

#include "core/host_tensor.h"

namespace kiln::planner::quantize {

// The initializer of that name, or nullptr.
const onnx::TensorProto* find_initializer(const onnx::GraphProto& graph, const std::string& name);
// Adds `value` as initializer `name` (raw data, little-endian).
void add_initializer(onnx::GraphProto& graph, const std::string& name, const HostTensor& value);

bool is_graph_input(const onnx::GraphProto& graph, const std::string& name);
bool is_graph_output(const onnx::GraphProto& graph, const std::string& name);
// Nodes that read `name` (each node once).
int consumer_count(const onnx::GraphProto& graph, const std::string& name);

// Every node input `from` becomes `to` / every node output.
void rename_inputs(onnx::GraphProto& graph, const std::string& from, const std::string& to);
void rename_outputs(onnx::GraphProto& graph, const std::string& from, const std::string& to);

// Removes the initializers no node reads (and no graph output names).
void remove_unused_initializers(onnx::GraphProto& graph);

// Orders the nodes so that each comes after the producers of its inputs,
// keeping the given order wherever it already does; PlanError on a cycle.
void topological_sort(onnx::GraphProto& graph);

// The float model made ready for quantization (see above). Returns the
// BatchNormalizations folded.
int prepare_float_model(onnx::ModelProto& model);

}  // namespace kiln::planner::quantize

#endif  // KILN_PLANNER_QUANTIZE_ONNX_EDIT_H_
