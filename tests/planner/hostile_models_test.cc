// Hostile models: the planner ends every model in a program or in one line
// naming what is wrong (a PlanError), never in a crash.
//
// - the two crashes of issue 21 (a Conv with strides [0, 0] killed the
//   planner with SIGFPE inside ONNX's shape inference; an input of
//   [2^31, 2^31, 2^31] floats overflowed its byte size to 0), and byte sizes
//   near the limits;
// - an attribute sweep: every ONNX node-test model (Debian libonnx-testdata)
//   whose op kiln supports, with each integer attribute its ONNX schema
//   declares set to zero, negative, huge and wrong-length values, and each
//   input's declared shape changed. Each variant must plan, or fail with one
//   line naming the node; a refusal caused by an attribute must name it.

#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/file_util.h"
#include "onnx/import.h"
#include "ops/op_registry.h"
#include "pipeline.h"

namespace kiln::testing {
namespace {

namespace kp = kiln::planner;

constexpr const char* kNodeTests = "/usr/share/libonnx-testdata/data/node";

struct Outcome {
  bool planned = false;
  std::string error;  // empty when planned
  // The refusal says what kiln lacks (UnsupportedError) or what must be
  // known at plan time (NotConstantError), not what is wrong.
  bool unsupported = false;
};

Outcome plan_model(onnx::ModelProto model) {
  kp::PlanOptions options;
  options.memory.solve.algorithm = kp::memory::Algorithm::kGreedyFirstFit;
  try {
    kp::Graph graph = kp::import_onnx_model(model, "model.onnx", options.import);
    kp::plan_graph(std::move(graph), options);
    return {true, ""};
  } catch (const kp::UnsupportedError& e) {
    return {false, e.what(), true};
  } catch (const kp::NotConstantError& e) {
    return {false, e.what(), true};
  } catch (const kp::PlanError& e) {
    return {false, e.what(), false};
  }
}

onnx::ModelProto one_node_model(const std::vector<int64_t>& x_shape, int out_rank) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto* g = model.mutable_graph();
  g->set_name("g");
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : x_shape) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < out_rank; ++i) {
    y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(i));
  }
  return model;
}

void add_weight(onnx::ModelProto& model, const std::string& name, const std::vector<int64_t>& dims) {
  auto* w = model.mutable_graph()->add_initializer();
  w->set_name(name);
  w->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    w->add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) w->add_float_data(0.5f);
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

TEST(HostileModels, ConvWithZeroStridesIsRefusedNamingNodeAndAttribute) {
  // Issue 21: SIGFPE in ONNX's convPoolShapeInference before this was checked.
  onnx::ModelProto model = one_node_model({1, 3, 8, 8}, 4);
  add_weight(model, "w", {4, 3, 3, 3});
  auto* conv = model.mutable_graph()->add_node();
  conv->set_op_type("Conv");
  conv->set_name("conv");
  conv->add_input("x");
  conv->add_input("w");
  conv->add_output("y");
  auto* strides = conv->add_attribute();
  strides->set_name("strides");
  strides->set_type(onnx::AttributeProto::INTS);
  strides->add_ints(0);
  strides->add_ints(0);
  const Outcome o = plan_model(model);
  ASSERT_FALSE(o.planned);
  EXPECT_TRUE(one_line(o.error)) << o.error;
  EXPECT_NE(o.error.find("'conv'"), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("strides"), std::string::npos) << o.error;
}

TEST(HostileModels, InputWhoseByteSizeOverflowsIsRefusedNamingIt) {
  // Issue 21: [2^31, 2^31, 2^31] floats is 2^95 bytes, which wrapped to 0;
  // the planner emitted the program and only the runtime refused it.
  const int64_t big = int64_t{1} << 31;
  onnx::ModelProto model = one_node_model({big, big, big}, 3);
  auto* relu = model.mutable_graph()->add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");
  relu->add_output("y");
  const Outcome o = plan_model(model);
  ASSERT_FALSE(o.planned);
  EXPECT_TRUE(one_line(o.error)) << o.error;
  EXPECT_NE(o.error.find("'x'"), std::string::npos) << o.error;
}

TEST(HostileModels, ByteSizesAtTheLimit) {
  // 2^34 floats is 64 GiB, the largest tensor accepted; one more element is
  // refused. Zero dims do not hide huge ones.
  EXPECT_EQ(kp::checked_nbytes(kp::DType::FLOAT32, {int64_t{1} << 34}, "t"), uint64_t{1} << 36);
  EXPECT_THROW(kp::checked_nbytes(kp::DType::FLOAT32, {(int64_t{1} << 34) + 1}, "t"), kp::PlanError);
  EXPECT_THROW(kp::checked_nbytes(kp::DType::FLOAT32, {0, int64_t{1} << 40}, "t"), kp::PlanError);
  EXPECT_THROW(kp::checked_nbytes(kp::DType::FLOAT32, {-1, 4}, "t"), kp::PlanError);
  EXPECT_THROW(kp::shape_numel({int64_t{1} << 32, int64_t{1} << 32}), kp::PlanError);
  // An initializer declaring 2^33 floats with no data is refused before
  // anything is allocated.
  onnx::ModelProto model = one_node_model({2}, 1);
  auto* w = model.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(int64_t{1} << 33);
  w->set_raw_data(std::string(16, '\0'));
  auto* add = model.mutable_graph()->add_node();
  add->set_op_type("Add");
  add->add_input("x");
  add->add_input("w");
  add->add_output("y");
  const Outcome o = plan_model(model);
  ASSERT_FALSE(o.planned);
  EXPECT_NE(o.error.find("'w'"), std::string::npos) << o.error;
}

std::vector<std::string> node_test_dirs() {
  std::vector<std::string> out;
  DIR* d = opendir(kNodeTests);
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// The node-test models with one node kiln supports (Constant nodes aside),
// and the index of that node.
struct Subject {
  std::string test;
  onnx::ModelProto model;
  int node = -1;
};

std::vector<Subject> subjects() {
  std::vector<Subject> out;
  for (const std::string& test : node_test_dirs()) {
    Subject s;
    s.test = test;
    const std::string bytes = kp::read_file(std::string(kNodeTests) + "/" + test + "/model.onnx");
    if (!s.model.ParseFromString(bytes)) continue;
    const auto& nodes = s.model.graph().node();
    int count = 0;
    for (int i = 0; i < nodes.size(); ++i) {
      if (nodes[i].op_type() == "Constant") continue;
      s.node = i;
      ++count;
    }
    if (count != 1) continue;
    const auto& node = nodes[s.node];
    if (kp::find_op(node.domain() == "ai.onnx" ? "" : node.domain(), node.op_type()) == nullptr) continue;
    out.push_back(std::move(s));
  }
  return out;
}

// The graph outputs' declared dims become symbols, so a variant whose
// attribute legitimately changes the output shape is not refused for
// disagreeing with the declaration.
void symbolic_outputs(onnx::ModelProto& model) {
  for (auto& out : *model.mutable_graph()->mutable_output()) {
    auto* type = out.mutable_type()->mutable_tensor_type();
    if (!type->has_shape()) continue;
    for (int d = 0; d < type->shape().dim_size(); ++d) {
      type->mutable_shape()->mutable_dim(d)->set_dim_param("out" + std::to_string(d));
    }
  }
}

int opset_of(const onnx::ModelProto& model, const std::string& domain) {
  for (const auto& o : model.opset_import()) {
    if (o.domain() == domain || (domain.empty() && o.domain() == "ai.onnx")) return static_cast<int>(o.version());
  }
  return 17;
}

// Checks one variant's outcome; returns a description of what is wrong.
std::string judge(const Outcome& o, const std::string& node_name, const std::string& op_type,
                  const std::string& attribute) {
  if (o.planned) return "";
  if (!one_line(o.error)) return "error spans lines: " + o.error;
  // Refused at import for an input's unsupported element type: names the input.
  if (o.unsupported && o.error.rfind("input '", 0) == 0) return "";
  const bool names_node = (!node_name.empty() && o.error.find("'" + node_name + "'") != std::string::npos) ||
                          o.error.find(op_type) != std::string::npos;
  if (!names_node) return "error names no node: " + o.error;
  // A refusal for what kiln lacks, or for an output over the size limit,
  // names that instead of the attribute. "axis" names "axes" too.
  // Where kiln's shape and ONNX shape inference's disagree (ONNX's own
  // arithmetic overflows for huge strides), the refusal names both shapes.
  if (o.unsupported || o.error.find("larger than 64 GiB") != std::string::npos ||
      o.error.find("ONNX shape inference") != std::string::npos) {
    return "";
  }
  std::string named = attribute;
  if (named == "axes" && o.error.find("axis") != std::string::npos) named = "axis";
  if (!named.empty() && o.error.find(named) == std::string::npos) {
    return "error names no attribute '" + attribute + "': " + o.error;
  }
  return "";
}

// Attributes whose name a refusal need not repeat: they select behaviour
// (a mode, a flag) rather than give a size, and the refusal names what the
// behaviour lacks instead.
bool names_optional(const std::string& attribute) {
  // clang-format off
  static const char* const kFlags[] = {"keepdims", "noop_with_empty_axes", "select_last_index", "ceil_mode",
                                       "count_include_pad", "transA", "transB", "training_mode", "is_test",
                                       "storage_order", "stash_type", "exclude_outside", "coordinate_transformation_mode"};
  // clang-format on
  for (const char* f : kFlags) {
    if (attribute == f) return true;
  }
  return false;
}

TEST(HostileModels, AttributeSweepOverEverySupportedOp) {
  const std::vector<Subject> all = subjects();
  if (all.empty()) GTEST_SKIP() << "no ONNX node tests at " << kNodeTests;
  const int64_t kValues[] = {0, -1, -5, int64_t{1} << 31, int64_t{1} << 62, std::numeric_limits<int64_t>::min()};
  int variants = 0, planned = 0;
  std::vector<std::string> problems;
  for (const Subject& s : all) {
    const onnx::NodeProto& node = s.model.graph().node(s.node);
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    const auto* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), opset_of(s.model, domain), domain);
    if (schema == nullptr) continue;
    for (const auto& [name, attr] : schema->attributes()) {
      const bool is_int = attr.type == onnx::AttributeProto::INT;
      const bool is_ints = attr.type == onnx::AttributeProto::INTS;
      if (!is_int && !is_ints) continue;
      // Each hostile value; for lists also one entry too many and an empty list.
      std::vector<std::vector<int64_t>> lists;
      for (int64_t v : kValues) {
        if (is_int) {
          lists.push_back({v});
          continue;
        }
        size_t length = 2;
        for (const auto& a : node.attribute()) {
          if (a.name() == name && a.ints_size() > 0) length = static_cast<size_t>(a.ints_size());
        }
        lists.push_back(std::vector<int64_t>(length, v));
        std::vector<int64_t> mixed(length, 1);
        mixed.back() = v;
        lists.push_back(mixed);
      }
      if (is_ints) {
        lists.push_back({});
        lists.push_back(std::vector<int64_t>(7, 1));
      }
      for (const auto& values : lists) {
        onnx::ModelProto model = s.model;
        onnx::NodeProto* n = model.mutable_graph()->mutable_node(s.node);
        onnx::AttributeProto* a = nullptr;
        for (auto& existing : *n->mutable_attribute()) {
          if (existing.name() == name) a = &existing;
        }
        if (a == nullptr) a = n->add_attribute();
        a->Clear();
        a->set_name(name);
        a->set_type(attr.type);
        if (is_int) {
          a->set_i(values[0]);
        } else {
          for (int64_t v : values) a->add_ints(v);
        }
        symbolic_outputs(model);
        const Outcome o = plan_model(model);
        ++variants;
        planned += o.planned ? 1 : 0;
        const std::string problem = judge(o, node.name(), node.op_type(), names_optional(name) ? "" : name);
        if (!problem.empty()) {
          std::string list;
          for (int64_t v : values) list += (list.empty() ? "" : ",") + std::to_string(v);
          problems.push_back(s.test + " " + name + "=[" + list + "]: " + problem);
        }
      }
    }
  }
  std::printf("attribute sweep: %zu models, %d variants, %d planned, %d refused, %zu problems\n", all.size(), variants,
              planned, variants - planned, problems.size());
  for (const std::string& p : problems) ADD_FAILURE() << p;
}

TEST(HostileModels, MismatchedInputShapes) {
  const std::vector<Subject> all = subjects();
  if (all.empty()) GTEST_SKIP() << "no ONNX node tests at " << kNodeTests;
  int variants = 0;
  std::vector<std::string> problems;
  for (const Subject& s : all) {
    const onnx::NodeProto& node = s.model.graph().node(s.node);
    for (int i = 0; i < s.model.graph().input_size(); ++i) {
      const auto& type = s.model.graph().input(i).type();
      if (!type.has_tensor_type() || !type.tensor_type().has_shape()) continue;
      const int rank = type.tensor_type().shape().dim_size();
      // Grow the last dim, zero it, make it huge, and drop or add a dim.
      for (int variant = 0; variant < 5; ++variant) {
        onnx::ModelProto model = s.model;
        auto* shape = model.mutable_graph()->mutable_input(i)->mutable_type()->mutable_tensor_type()->mutable_shape();
        if (variant < 3 && rank == 0) continue;
        if (variant == 0) shape->mutable_dim(rank - 1)->set_dim_value(shape->dim(rank - 1).dim_value() + 3);
        if (variant == 1) shape->mutable_dim(rank - 1)->set_dim_value(0);
        if (variant == 2) shape->mutable_dim(rank - 1)->set_dim_value(int64_t{1} << 40);
        if (variant == 3) {
          if (rank == 0) continue;
          shape->mutable_dim()->RemoveLast();
        }
        if (variant == 4) shape->add_dim()->set_dim_value(2);
        const Outcome o = plan_model(model);
        ++variants;
        const std::string problem = judge(o, node.name(), node.op_type(), "");
        // A refusal about the input itself may name the input instead.
        if (!problem.empty() &&
            !(one_line(o.error) && o.error.find("'" + s.model.graph().input(i).name() + "'") != std::string::npos)) {
          problems.push_back(s.test + " input " + std::to_string(i) + " variant " + std::to_string(variant) + ": " +
                             problem);
        }
      }
    }
  }
  std::printf("shape sweep: %d variants, %zu problems\n", variants, problems.size());
  for (const std::string& p : problems) ADD_FAILURE() << p;
}

}  // namespace
}  // namespace kiln::testing
