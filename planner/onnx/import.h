// ONNX import: reads a model with the ONNX C++ library, runs its checker,
// and builds the planner's Graph: initializers and Constant nodes become
// constants, graph inputs keep their (static) shapes. ONNX's shape inference
// is deferred (Graph::onnx_shapes) until the planner's own inference has
// validated every node, because libonnx trusts attributes and crashes on
// hostile ones; until then only the attributes it divides by are checked.
// Every declared size is checked (checked_nbytes) before anything is
// allocated.

#ifndef KILN_PLANNER_ONNX_IMPORT_H_
#define KILN_PLANNER_ONNX_IMPORT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "ir/graph.h"

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace kiln::planner {

struct ImportOptions {
  // Static shapes for inputs whose ONNX shape has symbolic or unknown dims.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Graph inputs replaced by constants (shape arguments of Reshape and the
  // like must be known at plan time).
  std::map<std::string, HostTensor> frozen_inputs;
};

// Throws PlanError naming `path` (or the node or tensor at fault).
Graph import_onnx_file(const std::string& path, const ImportOptions& options);
Graph import_onnx_model(onnx::ModelProto& model, const std::string& what, const ImportOptions& options);
// Each graph input's dimension names (dim_param), "" where a dimension has
// none: which bounded dimensions are one (passes/bounds.h).
std::map<std::string, std::vector<std::string>> onnx_input_dim_params(const onnx::ModelProto& model);

// The kiln dtype of an ONNX TensorProto element type, or nullopt.
std::optional<DType> dtype_from_onnx(int32_t elem_type);
HostTensor from_tensor_proto(const onnx::TensorProto& proto, const std::string& what);
// Reads a serialized TensorProto (.pb, as in the ONNX test data).
HostTensor read_tensor_proto_file(const std::string& path);
// Reads a .pb or .npy file by its extension.
HostTensor read_tensor_file(const std::string& path);

}  // namespace kiln::planner

#endif  // KILN_PLANNER_ONNX_IMPORT_H_
