// The quantizer's parts (planner/quantize): calibration statistics and the
// ranges they give, quantization parameters against ONNX Runtime's
// arithmetic worked by hand, the QDQ layout written for a small graph
// (ONNX Runtime's names, shared scales, folded Relu, int32 bias, excluded
// nodes), and a whole quantization from arrays whose result kiln plans
// into int8 kernels.

#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "onnx/import.h"
#include "pipeline.h"
#include "quantize/calibration.h"
#include "quantize/onnx_edit.h"
#include "quantize/qdq_writer.h"
#include "quantize/quantize.h"

namespace kiln::planner::quantize {
namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(TensorStatsTest, MinMaxOverBatchesLeavesOutNonFinite) {
  TensorStats s;
  const std::vector<float> a = {1.f, -2.f, NAN}, b = {INFINITY, 5.f, 0.f};
  s.add(a.data(), a.size());
  s.add(b.data(), b.size());
  EXPECT_EQ(s.count(), 4u);
  EXPECT_EQ(s.minmax().min, -2.f);
  EXPECT_EQ(s.minmax().max, 5.f);
}

TEST(TensorStatsTest, HistogramWidensWithoutLosingValues) {
  TensorStats s(2048);
  const std::vector<float> small = uniform(10000, 1, -1.f, 1.f), large = uniform(10000, 2, -100.f, 100.f);
  s.add(small.data(), small.size());
  const double first = s.bin_width();
  s.add(large.data(), large.size());
  // Widened by doubling: a power-of-two multiple of the first width,
  // covering the new largest value.
  const double ratio = s.bin_width() / first;
  EXPECT_EQ(ratio, std::exp2(std::round(std::log2(ratio))));
  EXPECT_GE(s.bin_width() * 2048, 99.0);
  // The 100th percentile of |x| is the largest value, within a bin.
  EXPECT_NEAR(s.percentile(100, true).max, s.observed().max, s.bin_width());
  // Half the values are within [-1, 1]: the 50th percentile of |x|.
  EXPECT_NEAR(s.percentile(50, true).max, 1.0, 2 * s.bin_width());
}

TEST(TensorStatsTest, PercentileCutsTheTails) {
  TensorStats s(2048);
  const std::vector<float> v = uniform(200000, 3, -1.f, 1.f);
  s.add(v.data(), v.size());
  const Range sym = s.percentile(99, true);
  EXPECT_NEAR(sym.max, 0.99, 0.005);
  EXPECT_EQ(sym.min, -sym.max);
  const Range asym = s.percentile(98, false);  // 1% from each end
  EXPECT_NEAR(asym.min, -0.98, 0.005);
  EXPECT_NEAR(asym.max, 0.98, 0.005);
  // One-sided data keeps its minimum.
  TensorStats pos(2048);
  const std::vector<float> p = uniform(200000, 4, 0.f, 1.f);
  pos.add(p.data(), p.size());
  EXPECT_GE(pos.percentile(99.9, false).min, 0.f);
  EXPECT_NEAR(pos.percentile(99.9, false).max, 0.9995, 0.002);
}

TEST(TensorStatsTest, EntropyClipsOutliersNotTheBulk) {
  // Uniform values: nothing to gain by clipping.
  TensorStats u(2048);
  const std::vector<float> v = uniform(100000, 5, 0.f, 1.f);
  u.add(v.data(), v.size());
  EXPECT_GT(u.entropy().max, 0.9f);
  // A Gaussian with one far outlier: the threshold lands a few sigmas out,
  // far below the outlier (the candidates start at 128 bins, 1.25 here);
  // the range is clamped to what was seen.
  TensorStats g(2048);
  std::vector<float> x = gaussian(100000, 6);
  x.push_back(20.f);
  g.add(x.data(), x.size());
  const Range r = g.entropy();
  EXPECT_GT(r.max, 2.5f);
  EXPECT_LT(r.max, 8.f);
  EXPECT_EQ(r.min, std::max(g.observed().min, -r.max));
  // ReLU outputs: exact zeros do not pull the threshold in.
  TensorStats relu(2048), positive(2048);
  std::vector<float> half = gaussian(100000, 7), kept;
  for (float& f : half) {
    if (f > 0) kept.push_back(f);
    f = std::max(f, 0.f);
  }
  relu.add(half.data(), half.size());
  positive.add(kept.data(), kept.size());
  EXPECT_EQ(relu.entropy().max, positive.entropy().max);
  EXPECT_EQ(relu.entropy().min, 0.f);
}

TEST(QuantParamsTest, OnnxRuntimeArithmetic) {
  // [-1, 3] on uint8: scale 4/255, zero point round(1 / (4/255)) = round(63.75).
  QuantParams p = quant_params({-1.f, 3.f}, DType::UINT8, false);
  EXPECT_FLOAT_EQ(p.scale, 4.f / 255.f);
  EXPECT_EQ(p.zero_point, 64);
  p = quant_params({-1.f, 3.f}, DType::INT8, false);
  EXPECT_EQ(p.zero_point, -64);  // round(-128 + 63.75)
  // Symmetric: +-3 on [-127, 127] (int8) or [0, 254] (uint8).
  p = quant_params({-1.f, 3.f}, DType::INT8, true);
  EXPECT_FLOAT_EQ(p.scale, 6.f / 254.f);
  EXPECT_EQ(p.zero_point, 0);
  EXPECT_EQ(quant_params({-1.f, 3.f}, DType::UINT8, true).zero_point, 127);
  // The range always holds 0.
  p = quant_params({0.5f, 2.f}, DType::UINT8, false);
  EXPECT_FLOAT_EQ(p.scale, 2.f / 255.f);
  EXPECT_EQ(p.zero_point, 0);
  // A tie rounds to even: [-a, a] on uint8 puts the zero at 127.5.
  EXPECT_EQ(quant_params({-2.f, 2.f}, DType::UINT8, false).zero_point, 128);
  // Nothing to quantize: scale 1, zero point 0.
  p = quant_params({0.f, 0.f}, DType::UINT8, false);
  EXPECT_EQ(p.scale, 1.f);
  EXPECT_EQ(p.zero_point, 0);
}

// ONNX Runtime's reduce_range: 7-bit weights, [-64, 64] for int8 symmetric
// or not, [0, 127] for uint8.
TEST(QuantParamsTest, ReducedRangeHasSevenBits) {
  QuantParams p = quant_params({-1.f, 3.f}, DType::INT8, true, true);
  EXPECT_FLOAT_EQ(p.scale, 6.f / 128.f);
  EXPECT_EQ(p.zero_point, 0);
  p = quant_params({-1.f, 3.f}, DType::INT8, false, true);
  EXPECT_FLOAT_EQ(p.scale, 4.f / 128.f);
  EXPECT_EQ(p.zero_point, -32);  // round(-64 + 1 / (4/128))
  p = quant_params({-1.f, 3.f}, DType::UINT8, false, true);
  EXPECT_FLOAT_EQ(p.scale, 4.f / 127.f);
  EXPECT_EQ(p.zero_point, 32);  // round(31.75)
  int32_t lo = 0, hi = 0;
  quant_limits(DType::INT8, true, &lo, &hi, true);
  EXPECT_EQ(lo, -64);
  EXPECT_EQ(hi, 64);
}

TEST(QuantParamsTest, QuantizeRoundsHalfToEvenAndSaturates) {
  const QuantParams p{0.5f, 10, DType::UINT8};
  EXPECT_EQ(quantize_value(0.25f, p), 10);  // 0.5 -> 0
  EXPECT_EQ(quantize_value(0.75f, p), 12);  // 1.5 -> 2
  EXPECT_EQ(quantize_value(-100.f, p), 0);  // saturates
  EXPECT_EQ(quantize_value(1000.f, p), 255);
  EXPECT_EQ(quantize_value(NAN, p), 10);
  EXPECT_EQ(quantize_value(-1000.f, QuantParams{1.f, 0, DType::INT8}), -128);
}

// --- a small float graph, built as a protobuf --------------------------

void add_node(onnx::GraphProto& g, const std::string& op, const std::string& name, std::vector<std::string> in,
              std::vector<std::string> out, std::map<std::string, int64_t> ints = {}) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& i : in) n->add_input(i);
  for (const std::string& o : out) n->add_output(o);
  for (const auto& [k, v] : ints) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
               std::vector<int64_t> shape) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->mutable_shape()->add_dim()->set_dim_value(d);
}

HostTensor ramp(std::vector<int64_t> shape, float step) {
  HostTensor t(DType::FLOAT32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = step * static_cast<float>((i * 7) % 13 - 6);
  return t;
}

// x[1,2,6,6] -> Conv(4, 3x3, bias) -> Relu -> MaxPool 2 -> Flatten -> Gemm(transB) -> y[1,3]
onnx::ModelProto small_cnn() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("small");
  add_value(g.mutable_input(), "x", {1, 2, 6, 6});
  add_value(g.mutable_output(), "y", {1, 3});
  add_initializer(g, "w", ramp({4, 2, 3, 3}, 0.1f));
  add_initializer(g, "b", ramp({4}, 0.05f));
  add_initializer(g, "fw", ramp({3, 16}, 0.02f));
  add_initializer(g, "fb", ramp({3}, 0.1f));
  add_node(g, "Conv", "conv", {"x", "w", "b"}, {"c"}, {{"group", 1}});
  add_node(g, "Relu", "relu", {"c"}, {"r"});
  onnx::NodeProto* pool = g.add_node();
  pool->set_op_type("MaxPool");
  pool->set_name("pool");
  pool->add_input("r");
  pool->add_output("p");
  onnx::AttributeProto* k = pool->add_attribute();
  k->set_name("kernel_shape");
  k->set_type(onnx::AttributeProto::INTS);
  k->add_ints(2);
  k->add_ints(2);
  onnx::AttributeProto* s = pool->add_attribute();
  s->set_name("strides");
  s->set_type(onnx::AttributeProto::INTS);
  s->add_ints(2);
  s->add_ints(2);
  add_node(g, "Flatten", "flatten", {"p"}, {"f"});
  add_node(g, "Gemm", "fc", {"f", "fw", "fb"}, {"y"}, {{"transB", 1}});
  return m;
}

ValueTable float_values() {
  ValueTable t;
  for (const char* name : {"x", "c", "r", "p", "f", "y"}) t[name] = ValueFacts{DType::FLOAT32, {}, nullptr};
  return t;
}

std::map<std::string, const onnx::NodeProto*> producers(const onnx::GraphProto& g) {
  std::map<std::string, const onnx::NodeProto*> out;
  for (const auto& n : g.node()) {
    for (const std::string& o : n.output()) out[o] = &n;
  }
  return out;
}

HostTensor init(const onnx::GraphProto& g, const std::string& name) {
  const onnx::TensorProto* t = find_initializer(g, name);
  EXPECT_NE(t, nullptr) << name;
  return t != nullptr ? from_tensor_proto(*t, name) : HostTensor();
}

TEST(QdqWriterTest, MarksAsOnnxRuntimeDoes) {
  onnx::ModelProto m = small_cnn();
  const QdqPlan plan = plan_qdq(m, float_values(), QdqOptions{});
  // The Relu folds into the Conv, which now writes r; MaxPool shares r's
  // scale; Flatten (not a data-movement op of ONNX Runtime's) gets its own
  // as the Gemm's input.
  EXPECT_EQ(plan.removed_nodes, std::vector<std::string>{"relu"});
  std::map<std::string, QdqPlan::Tensor> marked;
  for (const auto& t : plan.tensors) marked[t.name] = t;
  EXPECT_EQ(marked.count("c"), 0u);
  EXPECT_EQ(marked.at("p").shared_from, "r");
  EXPECT_TRUE(marked.at("w").weight);
  EXPECT_EQ(marked.at("w").axis, 0);
  EXPECT_EQ(marked.at("fw").axis, 0);  // transB: output channels are rows
  EXPECT_EQ(marked.at("f").shared_from, "");
  EXPECT_EQ(plan.to_calibrate(m.graph()), (std::vector<std::string>{"x", "r", "f", "y"}));
  ASSERT_EQ(plan.biases.size(), 2u);
  EXPECT_EQ(plan.biases[0].input, "x");
}

TEST(QdqWriterTest, WritesOnnxRuntimesLayout) {
  onnx::ModelProto m = small_cnn();
  const QdqOptions options;
  const QdqPlan plan = plan_qdq(m, float_values(), options);
  std::map<std::string, QuantParams> params;
  for (const std::string& t : plan.to_calibrate(m.graph())) params[t] = quant_params({-1.f, 3.f}, DType::UINT8, false);
  params["r"] = quant_params({0.f, 2.f}, DType::UINT8, false);
  const std::vector<WrittenTensor> written = write_qdq(m, plan, params, options);
  const onnx::GraphProto& g = m.graph();
  const auto by = producers(g);
  // Activations: t -> t_QuantizeLinear -> t_DequantizeLinear -> readers.
  EXPECT_EQ(by.at("x_DequantizeLinear_Output")->name(), "x_DequantizeLinear");
  EXPECT_EQ(by.at("x_QuantizeLinear_Output")->input(0), "x");
  EXPECT_EQ(by.at("r")->op_type(), "Conv");
  EXPECT_EQ(by.at("r")->input(0), "x_DequantizeLinear_Output");
  // The data-movement op reads a DQ and feeds a Q of r's scale and zero point.
  EXPECT_EQ(by.at("p")->input(0), "r_DequantizeLinear_Output");
  EXPECT_EQ(by.at("p_QuantizeLinear_Output")->input(1), "r_scale");
  EXPECT_EQ(by.at("p_QuantizeLinear_Output")->input(2), "r_zero_point");
  // The graph output keeps its name on the last DQ.
  EXPECT_EQ(by.at("y")->name(), "y_DequantizeLinear");
  EXPECT_EQ(by.at("y_QuantizeLinear_Input")->op_type(), "Gemm");
  // Weights: int8 per channel behind w_DequantizeLinear (axis 0).
  const onnx::NodeProto* w_dq = by.at("w_DequantizeLinear_Output");
  EXPECT_EQ(w_dq->input(0), "w_quantized");
  ASSERT_EQ(w_dq->attribute_size(), 1);
  EXPECT_EQ(w_dq->attribute(0).i(), 0);
  EXPECT_EQ(init(g, "w_quantized").dtype, DType::INT8);
  EXPECT_EQ(init(g, "w_scale").shape, std::vector<int64_t>{4});
  EXPECT_EQ(find_initializer(g, "w"), nullptr);  // the float weight is gone
  // Bias: int32, scale = x's scale x w's, zero point 0, written as b.
  const HostTensor bias_scale = init(g, "b_quantized_scale"), w_scale = init(g, "w_scale");
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(bias_scale.data<float>()[c], params["x"].scale * w_scale.data<float>()[c]);
  }
  EXPECT_EQ(init(g, "b_quantized").dtype, DType::INT32);
  EXPECT_EQ(by.at("b")->op_type(), "DequantizeLinear");
  // Every node after the producers of its inputs.
  std::set<std::string> known = {"x"};
  for (const auto& i : g.initializer()) known.insert(i.name());
  for (const auto& n : g.node()) {
    for (const std::string& in : n.input()) EXPECT_TRUE(known.count(in)) << n.name() << " reads " << in;
    known.insert(n.output().begin(), n.output().end());
  }
  EXPECT_EQ(g.value_info_size(), 0);
  EXPECT_EQ(written.size(), 5u);  // x, r, f, y and the shared p
}

TEST(QdqWriterTest, ExcludedAndSymmetric) {
  onnx::ModelProto m = small_cnn();
  QdqOptions options;
  options.exclude = {"conv"};
  options.activation_symmetric = true;
  const QdqPlan plan = plan_qdq(m, float_values(), options);
  EXPECT_EQ(plan.float_nodes, std::vector<std::string>{"conv"});
  EXPECT_TRUE(plan.removed_nodes.empty());
  for (const auto& t : plan.tensors) {
    EXPECT_NE(t.name, "w");
    EXPECT_NE(t.name, "x");  // only the excluded Conv read it
  }
  // The Relu stays (symmetric); its input takes the output's range.
  EXPECT_EQ(plan.range_from.at("c"), "r");
}

TEST(QdqWriterTest, GemmBetaGoesIntoTheQuantizedBias) {
  onnx::ModelProto m = small_cnn();
  for (auto& node : *m.mutable_graph()->mutable_node()) {
    if (node.op_type() != "Gemm") continue;
    onnx::AttributeProto* beta = node.add_attribute();
    beta->set_name("beta");
    beta->set_type(onnx::AttributeProto::FLOAT);
    beta->set_f(0.5f);
  }
  const QdqOptions options;
  const QdqPlan plan = plan_qdq(m, float_values(), options);
  std::map<std::string, QuantParams> params;
  for (const std::string& t : plan.to_calibrate(m.graph())) params[t] = quant_params({-1.f, 3.f}, DType::UINT8, false);
  write_qdq(m, plan, params, options);
  const onnx::GraphProto& g = m.graph();
  for (const auto& node : g.node()) {
    if (node.op_type() != "Gemm") continue;
    for (const auto& a : node.attribute()) {
      if (a.name() == "beta") {
        EXPECT_EQ(a.f(), 1.f);
      }
    }
  }
  // DQ(fb) = q x scale = 0.5 x fb, within half a step.
  const HostTensor q = init(g, "fb_quantized"), scale = init(g, "fb_quantized_scale"), fb = ramp({3}, 0.1f);
  for (int c = 0; c < 3; ++c) {
    const float s = scale.data<float>()[c];
    EXPECT_NEAR(static_cast<float>(q.data<int32_t>()[c]) * s, 0.5f * fb.data<float>()[c], 0.5f * s);
  }
}

TEST(QuantizeTest, FromArraysToAPlanThatRunsInt8) {
  onnx::ModelProto m = small_cnn();
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  // 3 items: two single samples and one of 5 stacked.
  std::vector<std::vector<HostTensor>> items;
  for (int k = 0; k < 2; ++k) items.push_back({ramp({1, 2, 6, 6}, 0.3f + 0.1f * static_cast<float>(k))});
  HostTensor stacked(DType::FLOAT32, {5, 2, 6, 6});
  const std::vector<float> v = gaussian(static_cast<size_t>(stacked.numel()), 8);
  std::copy(v.begin(), v.end(), stacked.data<float>());
  items.push_back({stacked});
  CalibrationArrays data(items);
  QuantizeOptions options;
  std::vector<std::string> stages;
  options.progress = [&](const char* stage, size_t done, size_t total) {
    stages.push_back(std::string(stage) + " " + std::to_string(done) + "/" + std::to_string(total));
  };
  const QuantizeResult r = quantize_model_bytes(bytes, "small", data, options);
  EXPECT_EQ(r.samples, 7u);
  EXPECT_EQ(stages.front(), "calibrating 1/3");
  EXPECT_EQ(stages.back(), "evaluating 7/7");  // in samples: the estimate grows with the stacked item
  ASSERT_EQ(r.accuracy.size(), 1u);
  EXPECT_GT(r.accuracy[0].sqnr_db, 20.0);
  EXPECT_EQ(r.weights, 2);
  // kiln folds the result into int8 kernels.
  onnx::ModelProto q;
  ASSERT_TRUE(q.ParseFromString(r.model_bytes));
  const PlanResult plan = plan_graph(import_onnx_model(q, "quantized", {}), PlanOptions{});
  EXPECT_EQ(plan.int8.int8_ops, 2);
  EXPECT_EQ(plan.int8.linear_ops, 2);
  // The observed range of r is the Conv's output after the Relu: from 0.
  for (const LayerRange& l : r.layers) {
    if (l.tensor == "r") {
      EXPECT_EQ(l.observed.min, 0.f);
    }
  }
}

// --reduce-range: every weight on [-64, 64], each channel's largest at
// +-64, the activations' ranges as without it; kiln plans the products
// with weight range 1 (narrow weights, the AVX2 product's vpmaddubsw).
TEST(QuantizeTest, ReducedRangeWeightsPlanNarrow) {
  onnx::ModelProto m = small_cnn();
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  CalibrationArrays data({{ramp({1, 2, 6, 6}, 0.3f)}, {ramp({1, 2, 6, 6}, 0.5f)}});
  QuantizeOptions options;
  const QuantizeResult full = quantize_model_bytes(bytes, "small", data, options);
  options.reduce_range = true;
  const QuantizeResult reduced = quantize_model_bytes(bytes, "small", data, options);
  EXPECT_GT(reduced.accuracy.at(0).sqnr_db, 15.0);
  ASSERT_EQ(full.layers.size(), reduced.layers.size());
  for (size_t i = 0; i < full.layers.size(); ++i) {
    EXPECT_EQ(full.layers[i].params.scale, reduced.layers[i].params.scale) << full.layers[i].tensor;
    EXPECT_EQ(full.layers[i].params.zero_point, reduced.layers[i].params.zero_point) << full.layers[i].tensor;
  }
  for (const QuantizeResult* r : {&full, &reduced}) {
    onnx::ModelProto q;
    ASSERT_TRUE(q.ParseFromString(r->model_bytes));
    for (const char* name : {"w_quantized", "fw_quantized"}) {
      const HostTensor w = init(q.graph(), name);
      const int64_t channels = w.shape.at(0), per = w.numel() / channels;
      for (int64_t c = 0; c < channels; ++c) {
        int largest = 0;
        for (int64_t i = 0; i < per; ++i) largest = std::max(largest, std::abs(int{w.data<int8_t>()[c * per + i]}));
        EXPECT_EQ(largest, r == &reduced ? 64 : 127) << name << " channel " << c;
      }
    }
    const PlanResult plan = plan_graph(import_onnx_model(q, "quantized", {}), PlanOptions{});
    int narrow = 0;
    for (const LInstruction& ins : plan.program.methods[0].instructions) {
      if (ins.op == "ConvInt8") narrow += ins.params.AsGenericParams()->ints.at(16) == 1;
      if (ins.op == "GemmInt8") narrow += ins.params.AsGenericParams()->ints.at(5) == 1;
    }
    EXPECT_EQ(narrow, r == &reduced ? 2 : 0);
  }
}

}  // namespace
}  // namespace kiln::planner::quantize
