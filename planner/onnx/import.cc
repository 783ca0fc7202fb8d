#include "onnx/import.h"

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "core/error.h"
#include "core/file_util.h"
#include "core/npy.h"

namespace kiln::planner {
namespace {

template <typename Field, typename T>
void copy_field(const Field& field, HostTensor& out, const std::string& what) {
  if (static_cast<int64_t>(field.size()) != out.numel()) {
    fail(what, ": has ", field.size(), " values, shape ", shape_str(out.shape), " needs ", out.numel());
  }
  T* data = out.data<T>();
  for (int i = 0; i < field.size(); ++i) data[i] = static_cast<T>(field.Get(i));
}

std::vector<int64_t> static_shape(const onnx::TypeProto_Tensor& type, const std::string& name, bool* out_known) {
  std::vector<int64_t> shape;
  *out_known = type.has_shape();
  if (!type.has_shape()) return shape;
  for (const auto& dim : type.shape().dim()) {
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
    } else {
      *out_known = false;
      shape.push_back(-1);
    }
  }
  return shape;
}

Attribute convert_attribute(const onnx::AttributeProto& a, const std::string& what) {
  Attribute out;
  switch (a.type()) {
    // clang-format off
    case onnx::AttributeProto::INT: out.kind = Attribute::Kind::kInt; out.i = a.i(); break;
    case onnx::AttributeProto::FLOAT: out.kind = Attribute::Kind::kFloat; out.f = a.f(); break;
    case onnx::AttributeProto::STRING: out.kind = Attribute::Kind::kString; out.s = a.s(); break;
    // clang-format on
    case onnx::AttributeProto::INTS:
      out.kind = Attribute::Kind::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      out.kind = Attribute::Kind::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::STRINGS:
      out.kind = Attribute::Kind::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::TENSOR:
      out.kind = Attribute::Kind::kTensor;
      out.tensor = std::make_shared<HostTensor>(from_tensor_proto(a.t(), what + " attribute '" + a.name() + "'"));
      break;
    default: out.kind = Attribute::Kind::kOther; break;
  }
  return out;
}

// ONNX messages span lines; kiln prints one.
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// ONNX's shape inference divides by some attributes and sizes loops by
// others without checking them first (a Conv with strides [0, 0] dies of
// SIGFPE inside libonnx). It runs before kiln's own inference, so these are
// checked here, for every node of every (sub)graph, by attribute name.
void check_attributes_onnx_trusts(const onnx::GraphProto& graph, const std::string& what) {
  static const char* const kPositive[] = {"strides", "dilations", "kernel_shape", "blocksize", "group", "size"};
  int unnamed = 0;
  for (const auto& node : graph.node()) {
    const std::string name = node.name().empty() ? node.op_type() + "_" + std::to_string(unnamed++) : node.name();
    for (const auto& attr : node.attribute()) {
      if (attr.type() == onnx::AttributeProto::GRAPH && attr.has_g()) check_attributes_onnx_trusts(attr.g(), what);
      for (const auto& g : attr.graphs()) check_attributes_onnx_trusts(g, what);
      for (const char* key : kPositive) {
        if (attr.name() != key) continue;
        std::vector<int64_t> values(attr.ints().begin(), attr.ints().end());
        if (attr.type() == onnx::AttributeProto::INT) values = {attr.i()};
        for (int64_t v : values) {
          if (v <= 0) {
            fail(what, ": node '", name, "' (", node.op_type(), "): attribute '", key, "' must be positive, has ",
                 attr.type() == onnx::AttributeProto::INT ? std::to_string(attr.i()) : shape_str(values));
          }
        }
      }
    }
  }
}

}  // namespace

std::optional<DType> dtype_from_onnx(int32_t elem_type) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT: return DType::FLOAT32;
    case onnx::TensorProto::FLOAT16: return DType::FLOAT16;
    case onnx::TensorProto::BFLOAT16: return DType::BFLOAT16;
    case onnx::TensorProto::DOUBLE: return DType::FLOAT64;
    case onnx::TensorProto::INT8: return DType::INT8;
    case onnx::TensorProto::UINT8: return DType::UINT8;
    case onnx::TensorProto::INT16: return DType::INT16;
    case onnx::TensorProto::UINT16: return DType::UINT16;
    case onnx::TensorProto::INT32: return DType::INT32;
    case onnx::TensorProto::UINT32: return DType::UINT32;
    case onnx::TensorProto::INT64: return DType::INT64;
    case onnx::TensorProto::UINT64: return DType::UINT64;
    case onnx::TensorProto::BOOL: return DType::BOOL;
    default: return std::nullopt;
  }
}

namespace {

// How many values the typed field that holds `dtype` carries.
uint64_t typed_value_count(const onnx::TensorProto& proto, DType dtype) {
  switch (dtype) {
    case DType::FLOAT32: return static_cast<uint64_t>(proto.float_data_size());
    case DType::FLOAT64: return static_cast<uint64_t>(proto.double_data_size());
    case DType::INT64: return static_cast<uint64_t>(proto.int64_data_size());
    case DType::UINT64:
    case DType::UINT32: return static_cast<uint64_t>(proto.uint64_data_size());
    default: return static_cast<uint64_t>(proto.int32_data_size());
  }
}

}  // namespace

HostTensor from_tensor_proto(const onnx::TensorProto& proto, const std::string& what) {
  if (proto.has_data_location() && proto.data_location() == onnx::TensorProto::EXTERNAL) {
    unsupported(what, ": tensors with external data are not supported");
  }
  const auto dtype = dtype_from_onnx(proto.data_type());
  if (!dtype) {
    unsupported(what, ": unsupported element type ",
                onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(proto.data_type())));
  }
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  // The size is checked against the data present before anything is
  // allocated: a hostile header must not make the planner allocate 64 GiB.
  const uint64_t nbytes = checked_nbytes(*dtype, shape, what);
  if (proto.has_raw_data() && proto.raw_data().size() != nbytes) {
    fail(what, ": raw data is ", proto.raw_data().size(), " bytes, shape ", shape_str(shape), " of ", dtype_str(*dtype),
         " needs ", nbytes);
  }
  if (!proto.has_raw_data() && nbytes > 0) {
    const uint64_t numel = nbytes / dtype_bytes(*dtype);
    if (typed_value_count(proto, *dtype) != numel) {
      fail(what, ": has ", typed_value_count(proto, *dtype), " values, shape ", shape_str(shape), " needs ", numel);
    }
  }
  HostTensor out(*dtype, shape);
  if (proto.has_raw_data()) {
    // memcpy with the null pointer of an empty vector is undefined, even of 0 bytes.
    if (out.nbytes() > 0) std::memcpy(out.bytes.data(), proto.raw_data().data(), out.nbytes());
    return out;
  }
  if (out.numel() == 0) return out;
  switch (*dtype) {
    case DType::FLOAT32: copy_field<decltype(proto.float_data()), float>(proto.float_data(), out, what); break;
    case DType::FLOAT64: copy_field<decltype(proto.double_data()), double>(proto.double_data(), out, what); break;
    case DType::INT64: copy_field<decltype(proto.int64_data()), int64_t>(proto.int64_data(), out, what); break;
    case DType::UINT64: copy_field<decltype(proto.uint64_data()), uint64_t>(proto.uint64_data(), out, what); break;
    case DType::INT32: copy_field<decltype(proto.int32_data()), int32_t>(proto.int32_data(), out, what); break;
    case DType::UINT32: copy_field<decltype(proto.uint64_data()), uint32_t>(proto.uint64_data(), out, what); break;
    case DType::INT16: copy_field<decltype(proto.int32_data()), int16_t>(proto.int32_data(), out, what); break;
    case DType::UINT16:
    case DType::FLOAT16:
    case DType::BFLOAT16: copy_field<decltype(proto.int32_data()), uint16_t>(proto.int32_data(), out, what); break;
    case DType::INT8: copy_field<decltype(proto.int32_data()), int8_t>(proto.int32_data(), out, what); break;
    case DType::UINT8:
    case DType::BOOL: copy_field<decltype(proto.int32_data()), uint8_t>(proto.int32_data(), out, what); break;
  }
  return out;
}

HostTensor read_tensor_proto_file(const std::string& path) {
  const std::string bytes = read_file(path);
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) fail(path, ": not a serialized ONNX TensorProto");
  return from_tensor_proto(proto, path);
}

HostTensor read_tensor_file(const std::string& path) {
  auto ends_with = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  if (ends_with(".npy")) return read_npy(path);
  if (ends_with(".pb")) return read_tensor_proto_file(path);
  fail(path, ": unknown tensor file type (expected .npy or .pb)");
}

Graph import_onnx_file(const std::string& path, const ImportOptions& options) {
  const std::string bytes = read_file(path);
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) {
    fail(path, ": not an ONNX model (protobuf parse failed; truncated or not ONNX)");
  }
  return import_onnx_model(model, path, options);
}

std::map<std::string, std::vector<std::string>> onnx_input_dim_params(const onnx::ModelProto& model) {
  std::map<std::string, std::vector<std::string>> params;
  for (const auto& input : model.graph().input()) {
    std::vector<std::string>& names = params[input.name()];
    for (const auto& dim : input.type().tensor_type().shape().dim()) names.push_back(dim.dim_param());
  }
  return params;
}

namespace {

// Shapes the user fixed go into the model first, so that ONNX's checker and
// shape inference see them.
void apply_input_shapes(onnx::ModelProto& model, const ImportOptions& options) {
  for (auto& input : *model.mutable_graph()->mutable_input()) {
    auto it = options.input_shapes.find(input.name());
    if (it == options.input_shapes.end()) continue;
    auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : it->second) shape->add_dim()->set_dim_value(d);
  }
}

// The opset of each domain the model imports, the default domain as "".
std::map<std::string, int> read_opsets(const onnx::ModelProto& model) {
  std::map<std::string, int> opsets;
  for (const auto& opset : model.opset_import()) {
    opsets[opset.domain() == "ai.onnx" ? "" : opset.domain()] = static_cast<int>(opset.version());
  }
  return opsets;
}

// Initializers first: they are constants, even when also listed as inputs.
void add_initializers(Graph& graph, const onnx::GraphProto& g) {
  for (const auto& init : g.initializer()) {
    Value v;
    v.name = init.name();
    auto tensor = std::make_shared<HostTensor>(from_tensor_proto(init, "initializer '" + init.name() + "'"));
    v.dtype = tensor->dtype;
    v.shape = tensor->shape;
    v.has_type = v.has_shape = true;
    v.constant = std::move(tensor);
    graph.add_value(std::move(v));
  }
}

// The graph's inputs that are not initializers: frozen ones become
// constants, the others method inputs of a known static shape.
void add_inputs(Graph& graph, const onnx::GraphProto& g, const ImportOptions& options) {
  for (const auto& input : g.input()) {
    if (graph.find_value(input.name()) >= 0) continue;  // an initializer
    auto frozen = options.frozen_inputs.find(input.name());
    Value v;
    v.name = input.name();
    if (frozen != options.frozen_inputs.end()) {
      v.constant = std::make_shared<HostTensor>(frozen->second);
      v.dtype = frozen->second.dtype;
      v.shape = frozen->second.shape;
      v.has_type = v.has_shape = true;
      graph.add_value(std::move(v));
      continue;
    }
    if (!input.type().has_tensor_type()) unsupported("input '", input.name(), "' is not a tensor");
    const auto dtype = dtype_from_onnx(input.type().tensor_type().elem_type());
    if (!dtype) unsupported("input '", input.name(), "' has an unsupported element type");
    bool known = false;
    v.shape = static_shape(input.type().tensor_type(), input.name(), &known);
    if (!known) {
      fail("input '", input.name(), "' has shape ", shape_str(v.shape),
           " with unknown dimensions; give it with --input-shape ", input.name(), "=DIMS (such as 1x3x224x224)");
    }
    checked_nbytes(*dtype, v.shape, "input '" + input.name() + "'");
    v.dtype = *dtype;
    v.has_type = v.has_shape = true;
    v.is_graph_input = true;
    graph.inputs.push_back(graph.add_value(std::move(v)));
  }
  for (const auto& [name, tensor] : options.frozen_inputs) {
    bool found = false;
    for (const auto& input : g.input()) found = found || input.name() == name;
    if (!found) fail("--freeze names '", name, "', which is not an input of the model");
  }
}

// The nodes in order, each reading values defined before it and defining
// its outputs once; unnamed nodes are named after their op.
void add_nodes(Graph& graph, const onnx::GraphProto& g, const std::map<std::string, int>& opsets) {
  int unnamed = 0;
  for (const auto& proto : g.node()) {
    Node node;
    node.name = proto.name().empty() ? proto.op_type() + "_" + std::to_string(unnamed++) : proto.name();
    node.op_type = proto.op_type();
    node.domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
    node.opset = opsets.count(node.domain) ? opsets.at(node.domain) : 0;
    const std::string where = graph.describe(node);
    for (const auto& attr : proto.attribute()) node.attrs[attr.name()] = convert_attribute(attr, where);
    for (const auto& name : proto.input()) {
      if (name.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      const int id = graph.find_value(name);
      if (id < 0) fail(where, ": input '", name, "' is not defined before it is used");
      node.inputs.push_back(id);
    }
    const int node_index = static_cast<int>(graph.nodes.size());
    for (const auto& name : proto.output()) {
      if (name.empty()) {
        node.outputs.push_back(-1);
        continue;
      }
      Value v;
      v.name = name;
      v.producer = node_index;
      if (graph.find_value(name) >= 0) fail(where, ": output '", name, "' is defined twice");
      node.outputs.push_back(graph.add_value(std::move(v)));
    }
    graph.nodes.push_back(std::move(node));
  }
}

void add_outputs(Graph& graph, const onnx::GraphProto& g, const std::string& what) {
  for (const auto& output : g.output()) {
    const int id = graph.find_value(output.name());
    if (id < 0) fail("graph output '", output.name(), "' is never produced");
    graph.values[static_cast<size_t>(id)].is_graph_output = true;
    graph.outputs.push_back(id);
  }
  if (graph.outputs.empty()) fail(what, ": model has no outputs");
}

// The copy of the model that ONNX's shape inference reads. libonnx takes
// the last type declared for a name, and trusts ranks: a value_info or
// graph output entry naming a graph input would replace that input's type
// (a fuzzed QLinearConv whose output was renamed to its input, declared
// with one dimension less, crashed libonnx's convolution inference). Inputs
// keep their own declaration; initializers their data.
std::shared_ptr<onnx::ModelProto> copy_for_shape_inference(const onnx::ModelProto& model) {
  auto copy = std::make_shared<onnx::ModelProto>(model);
  onnx::GraphProto& cg = *copy->mutable_graph();
  std::map<std::string, const onnx::ValueInfoProto*> inputs;
  for (const auto& input : cg.input()) inputs[input.name()] = &input;
  std::set<std::string> initializers;
  for (const auto& init : cg.initializer()) initializers.insert(init.name());
  auto* infos = cg.mutable_value_info();
  for (int i = infos->size() - 1; i >= 0; --i) {
    const std::string& name = infos->Get(i).name();
    if (inputs.count(name) || initializers.count(name)) infos->DeleteSubrange(i, 1);
  }
  for (auto& output : *cg.mutable_output()) {
    const auto it = inputs.find(output.name());
    if (it != inputs.end() && it->second != &output) {
      *output.mutable_type() = it->second->type();
    } else if (initializers.count(output.name()) && output.type().has_tensor_type()) {
      output.mutable_type()->mutable_tensor_type()->clear_shape();
    }
  }
  // libonnx 1.12's STFT inference counts frames other than its reference
  // does (floor((length - frame) / step) + 1: 18 for 203 samples, frames
  // of 32 and steps of 10, where it says 19) and takes onesided as 0
  // when it is left out (the schema's default is 1). Moved to a domain
  // without a schema, STFT gets no inferred shape; kiln's inference
  // decides it, and what follows is checked from there.
  bool has_stft = false;
  for (auto& node : *cg.mutable_node()) {
    if (node.op_type() != "STFT" || !(node.domain().empty() || node.domain() == "ai.onnx")) continue;
    node.set_domain("kiln.unchecked");
    has_stft = true;
  }
  if (has_stft) {
    onnx::OperatorSetIdProto* opset = copy->add_opset_import();
    opset->set_domain("kiln.unchecked");
    opset->set_version(1);
  }
  return copy;
}

// ONNX's shape inference over `copy`, deferred: the static shapes it finds,
// by value name.
std::function<std::map<std::string, std::vector<int64_t>>()> deferred_onnx_shapes(
    std::shared_ptr<onnx::ModelProto> copy, const std::string& what) {
  return [copy, what]() {
    try {
      onnx::ShapeInferenceOptions shape_options(/*check_type=*/false, /*strict_mode=*/0,
                                                /*data_prop=*/true);
      onnx::shape_inference::InferShapes(*copy, onnx::OpSchemaRegistry::Instance(), shape_options);
    } catch (const std::exception& e) {
      fail(what, ": ONNX shape inference: ", one_line(e.what()));
    }
    std::map<std::string, std::vector<int64_t>> shapes;
    auto add = [&](const onnx::ValueInfoProto& info) {
      if (!info.type().has_tensor_type()) return;
      bool known = false;
      std::vector<int64_t> shape = static_shape(info.type().tensor_type(), info.name(), &known);
      if (known) shapes[info.name()] = std::move(shape);
    };
    for (const auto& info : copy->graph().value_info()) add(info);
    for (const auto& info : copy->graph().output()) add(info);
    return shapes;
  };
}

}  // namespace

Graph import_onnx_model(onnx::ModelProto& model, const std::string& what, const ImportOptions& options) {
  if (!model.has_graph()) fail(what, ": model has no graph");
  apply_input_shapes(model, options);
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    fail(what, ": ONNX checker: ", one_line(e.what()));
  }
  check_attributes_onnx_trusts(model.graph(), what);

  Graph graph;
  const onnx::GraphProto& g = model.graph();
  graph.name = g.name();
  const std::map<std::string, int> opsets = read_opsets(model);
  // A model without the default domain can only use ops of other domains,
  // which lowering will name if they are unsupported.
  graph.opset = opsets.count("") ? opsets.at("") : 0;
  if (graph.opset > 17) {
    unsupported(what, ": opset ", graph.opset, " is newer than kiln supports (up to 17)");
  }
  add_initializers(graph, g);
  add_inputs(graph, g, options);
  add_nodes(graph, g, opsets);
  add_outputs(graph, g, what);
  // ONNX shape inference runs later, on a copy, once kiln's inference has
  // validated every node (Graph::onnx_shapes).
  graph.onnx_shapes = deferred_onnx_shapes(copy_for_shape_inference(model), what);
  return graph;
}

}  // namespace kiln::planner
