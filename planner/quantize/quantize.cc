#include "quantize/quantize.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/file_util.h"
#include "exec/evaluate.h"
#include "exec/run.h"
#include "onnx/import.h"
#include "passes/infer.h"
#include "pipeline.h"
#include "quantize/onnx_edit.h"
#include "quantize/qdq_writer.h"

namespace kiln::planner::quantize {
namespace {

onnx::ModelProto parse_model(const std::string& bytes, const std::string& what) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) {
    fail(what, ": not an ONNX model (protobuf parse failed; truncated or not ONNX)");
  }
  if (!model.has_graph()) fail(what, ": model has no graph");
  return model;
}

ImportOptions import_options(const QuantizeOptions& options) {
  ImportOptions import;
  import.input_shapes = options.input_shapes;
  return import;
}

// Every tensor's dtype and shape (and value, where folding made it a
// constant), from the planner's own inference.
ValueTable infer_values(const onnx::ModelProto& model, const std::string& what, const QuantizeOptions& options) {
  onnx::ModelProto copy = model;
  Graph graph = import_onnx_model(copy, what, import_options(options));
  const KernelEvaluator evaluator{};
  InferOptions infer;
  infer.evaluator = &evaluator;
  infer_and_fold(graph, infer);
  ValueTable table;
  for (const Value& v : graph.values) table[v.name] = ValueFacts{v.dtype, v.shape, v.constant};
  return table;
}

// The graph's inputs that are not initializers, in order.
std::vector<std::string> input_names(const onnx::GraphProto& graph) {
  std::vector<std::string> names;
  for (const auto& input : graph.input()) {
    if (find_initializer(graph, input.name()) == nullptr) names.push_back(input.name());
  }
  return names;
}

// Plans `model` for the CPU (first fit: the memory layout does not matter
// here) and loads it.
std::unique_ptr<MethodRunner> plan_and_load(onnx::ModelProto model, const std::string& what,
                                            const QuantizeOptions& options) {
  PlanOptions plan;
  plan.import = import_options(options);
  plan.memory.solve.algorithm = memory::Algorithm::kGreedyFirstFit;
  const PlanResult result = plan_graph(import_onnx_model(model, what, plan.import), plan);
  return std::make_unique<MethodRunner>(result.bytes, RunOptions{});
}

size_t index_of(const std::vector<IoInfo>& io, const std::string& name) {
  for (size_t i = 0; i < io.size(); ++i) {
    if (io[i].name == name) return i;
  }
  fail("internal error: the planned model has no input or output '", name, "'");
}

// An item's samples: its arrays as they are, or split along the first
// dimension where the inputs take one sample there. float64 arrays for
// float32 inputs are converted.
std::vector<std::vector<HostTensor>> samples_of(std::vector<HostTensor> item, const std::vector<IoInfo>& inputs,
                                                const std::string& what) {
  if (item.size() != inputs.size()) fail(what, ": ", item.size(), " arrays for the model's ", inputs.size(), " inputs");
  int64_t n = -1;
  for (size_t i = 0; i < item.size(); ++i) {
    HostTensor& t = item[i];
    if (t.dtype == DType::FLOAT64 && inputs[i].dtype == DType::FLOAT32) {
      HostTensor f(DType::FLOAT32, t.shape);
      for (int64_t k = 0; k < t.numel(); ++k) f.data<float>()[k] = static_cast<float>(t.data<double>()[k]);
      t = std::move(f);
    }
    const std::vector<int64_t>& want = inputs[i].shape;
    int64_t rows = 1;
    if (t.shape != want) {
      const bool stacked = !want.empty() && want[0] == 1 && t.shape.size() == want.size() &&
                           std::equal(want.begin() + 1, want.end(), t.shape.begin() + 1);
      if (!stacked) {
        fail(what, ": input ", i, " ('", inputs[i].name, "') has shape ", shape_str(t.shape), ", the model takes ",
             shape_str(want), " (or N of them stacked along the first dimension)");
      }
      rows = t.shape[0];
    }
    if (n >= 0 && rows != n) fail(what, ": the inputs hold different numbers of samples (", n, " and ", rows, ")");
    n = rows;
  }
  if (n == 1) return {std::move(item)};
  std::vector<std::vector<HostTensor>> samples(static_cast<size_t>(n));
  for (size_t i = 0; i < item.size(); ++i) {
    const size_t row_bytes = item[i].nbytes() / static_cast<size_t>(n);
    for (int64_t r = 0; r < n; ++r) {
      HostTensor t(item[i].dtype, inputs[i].shape);
      std::copy_n(item[i].bytes.begin() + static_cast<std::ptrdiff_t>(row_bytes * static_cast<size_t>(r)), row_bytes,
                  t.bytes.begin());
      samples[static_cast<size_t>(r)].push_back(std::move(t));
    }
  }
  return samples;
}

// Runs `visit(sample)` on every calibration sample, with progress in
// samples (the total estimated from the first item's count until the last
// item is read).
template <typename Visit>
size_t for_each_sample(CalibrationData& data, const std::vector<std::string>& names, const std::vector<IoInfo>& inputs,
                       const QuantizeOptions& options, const char* stage, Visit visit) {
  size_t samples = 0, per_item = 0;
  for (size_t k = 0; k < data.size(); ++k) {
    std::vector<std::vector<HostTensor>> item = samples_of(data.item(k, names), inputs, data.describe(k));
    if (k == 0) per_item = item.size();
    const size_t total = samples + item.size() + (data.size() - k - 1) * per_item;
    for (std::vector<HostTensor>& sample : item) {
      visit(sample);
      ++samples;
      if (options.progress) options.progress(stage, samples, total);
    }
  }
  if (samples == 0) fail("no calibration samples");
  return samples;
}

// The float model with every tensor in `observe` a graph output (but graph
// inputs, which are observed from the samples, and constants).
struct FloatModel {
  std::unique_ptr<MethodRunner> runner;
  std::map<std::string, size_t> observed_output, observed_input;
};

FloatModel plan_float(const onnx::ModelProto& model, const std::vector<std::string>& observe, const ValueTable& values,
                      const std::string& what, const QuantizeOptions& options) {
  onnx::ModelProto copy = model;
  onnx::GraphProto& graph = *copy.mutable_graph();
  for (const std::string& name : observe) {
    const ValueFacts& facts = values.at(name);
    if (is_graph_input(graph, name) || is_graph_output(graph, name) || facts.constant != nullptr) continue;
    onnx::ValueInfoProto* out = graph.add_output();
    out->set_name(name);
    auto* type = out->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : facts.shape) type->mutable_shape()->add_dim()->set_dim_value(d);
  }
  FloatModel f;
  f.runner = plan_and_load(std::move(copy), what, options);
  for (const std::string& name : observe) {
    if (values.at(name).constant != nullptr) continue;
    if (is_graph_input(model.graph(), name)) {
      f.observed_input[name] = index_of(f.runner->inputs(), name);
    } else {
      f.observed_output[name] = index_of(f.runner->outputs(), name);
    }
  }
  return f;
}

std::map<std::string, TensorStats> calibrate(FloatModel& f, CalibrationData& data,
                                             const std::vector<std::string>& names,
                                             const std::vector<std::string>& observe, const ValueTable& values,
                                             const QuantizeOptions& options, size_t* out_samples) {
  const int bins = options.method == CalibrationMethod::kMinMax ? 0 : options.histogram_bins;
  std::map<std::string, TensorStats> stats;
  for (const std::string& name : observe) {
    TensorStats& s = stats.emplace(name, TensorStats(bins)).first->second;
    const std::shared_ptr<const HostTensor>& constant = values.at(name).constant;
    if (constant != nullptr) s.add(constant->data<float>(), static_cast<size_t>(constant->numel()));
  }
  MethodRunner& runner = *f.runner;
  *out_samples =
      for_each_sample(data, names, runner.inputs(), options, "calibrating", [&](std::vector<HostTensor>& in) {
        runner.bind_inputs(in);
        runner.execute();
        for (const auto& [name, i] : f.observed_output) {
          const HostTensor& t = runner.output_values()[i];
          stats.at(name).add(t.data<float>(), static_cast<size_t>(t.numel()));
        }
        for (const auto& [name, i] : f.observed_input) {
          stats.at(name).add(in[i].data<float>(), static_cast<size_t>(in[i].numel()));
        }
      });
  return stats;
}

Range chosen_range(const TensorStats& s, const QuantizeOptions& options) {
  switch (options.method) {
    case CalibrationMethod::kMinMax: return s.minmax();
    case CalibrationMethod::kPercentile: return s.percentile(options.percentile, options.activation_symmetric);
    case CalibrationMethod::kEntropy: return s.entropy();
  }
  return s.minmax();
}

// Each calibrated activation's range (through range_from and the fixed
// ranges) and parameters.
struct Activations {
  std::map<std::string, QuantParams> params;
  std::map<std::string, Range> observed, range;
};

Activations activation_params(const QdqPlan& plan, const std::map<std::string, TensorStats>& stats,
                              const onnx::GraphProto& graph, const QuantizeOptions& options) {
  Activations a;
  for (const QdqPlan::Tensor& t : plan.tensors) {
    if (t.weight || !t.shared_from.empty() || find_initializer(graph, t.name) != nullptr) continue;
    Range observed, range;
    if (const auto fixed = plan.fixed_ranges.find(t.name); fixed != plan.fixed_ranges.end()) {
      observed = range = fixed->second;
    } else {
      const auto from = plan.range_from.find(t.name);
      const TensorStats& s = stats.at(from != plan.range_from.end() ? from->second : t.name);
      observed = s.observed();
      range = chosen_range(s, options);
    }
    a.observed[t.name] = observed;
    a.range[t.name] = range;
    a.params[t.name] = quant_params(range, options.activation_type, options.activation_symmetric);
  }
  return a;
}

std::vector<LayerRange> layer_report(const std::vector<WrittenTensor>& written, const Activations& a,
                                     const onnx::GraphProto& marked) {
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const onnx::NodeProto& node : marked.node()) {
    for (const std::string& out : node.output()) producer[out] = &node;
  }
  std::vector<LayerRange> layers;
  for (const WrittenTensor& w : written) {
    LayerRange l;
    l.tensor = w.name;
    const auto p = producer.find(w.name);
    l.node = p != producer.end() ? node_label(*p->second) : "";
    l.op = p != producer.end() ? p->second->op_type() : is_graph_input(marked, w.name) ? "(input)" : "(constant)";
    const std::string& source = w.shared_from.empty() ? w.name : w.shared_from;
    if (a.observed.count(source) != 0) {
      l.observed = a.observed.at(source);
      l.range = a.range.at(source);
    }
    l.params = w.params;
    l.shared_from = w.shared_from;
    layers.push_back(l);
  }
  return layers;
}

struct AccuracySums {
  double max_abs = 0, error_power = 0, float_power = 0;
  int64_t count = 0, rows = 0, top1 = 0;
};

void accumulate(AccuracySums& s, const HostTensor& f, const HostTensor& q) {
  for (int64_t i = 0; i < f.numel(); ++i) {
    const double d = static_cast<double>(q.data<float>()[i]) - f.data<float>()[i];
    s.max_abs = std::max(s.max_abs, std::fabs(d));
    s.error_power += d * d;
    s.float_power += static_cast<double>(f.data<float>()[i]) * f.data<float>()[i];
  }
  s.count += f.numel();
  const int64_t classes = f.shape.size() >= 2 ? f.shape.back() : 0;
  if (classes < 2) return;
  for (int64_t r = 0; r < f.numel() / classes; ++r) {
    const float* fr = f.data<float>() + r * classes;
    const float* qr = q.data<float>() + r * classes;
    s.top1 += std::max_element(fr, fr + classes) - fr == std::max_element(qr, qr + classes) - qr ? 1 : 0;
    ++s.rows;
  }
}

std::vector<OutputAccuracy> evaluate(FloatModel& f, MethodRunner& quantized, CalibrationData& data,
                                     const std::vector<std::string>& names, const QuantizeOptions& options) {
  std::vector<std::pair<size_t, size_t>> pairs;  // (float output, quantized output) of each float output
  for (size_t i = 0; i < quantized.outputs().size(); ++i) {
    if (quantized.outputs()[i].dtype != DType::FLOAT32) continue;
    pairs.emplace_back(index_of(f.runner->outputs(), quantized.outputs()[i].name), i);
  }
  std::vector<AccuracySums> sums(pairs.size());
  MethodRunner& runner = *f.runner;
  for_each_sample(data, names, runner.inputs(), options, "evaluating", [&](std::vector<HostTensor>& in) {
    runner.bind_inputs(in);
    runner.execute();
    quantized.bind_inputs(in);
    quantized.execute();
    for (size_t k = 0; k < pairs.size(); ++k) {
      accumulate(sums[k], runner.output_values()[pairs[k].first], quantized.output_values()[pairs[k].second]);
    }
  });
  std::vector<OutputAccuracy> accuracy;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const AccuracySums& s = sums[k];
    OutputAccuracy a;
    a.name = quantized.outputs()[pairs[k].second].name;
    a.max_abs_error = s.max_abs;
    a.rms_error = s.count ? std::sqrt(s.error_power / static_cast<double>(s.count)) : 0.0;
    a.float_rms = s.count ? std::sqrt(s.float_power / static_cast<double>(s.count)) : 0.0;
    a.sqnr_db = s.error_power > 0 ? 10.0 * std::log10(s.float_power / s.error_power) : INFINITY;
    a.rows = s.rows;
    a.top1_agree = s.top1;
    accuracy.push_back(a);
  }
  return accuracy;
}

void check_options(const onnx::ModelProto& model, const QuantizeOptions& options, const std::string& what) {
  if (options.activation_type != DType::UINT8 && options.activation_type != DType::INT8) {
    fail("activations quantize to uint8 or int8, not ", dtype_str(options.activation_type));
  }
  if (!(options.percentile > 0 && options.percentile <= 100)) fail("the percentile is in (0, 100]");
  if (options.histogram_bins < 256 || options.histogram_bins % 2 != 0) {
    fail("the histogram needs an even number of bins, at least 256");
  }
  std::set<std::string> labels;
  for (const onnx::NodeProto& node : model.graph().node()) labels.insert(node_label(node));
  for (const std::string& name : options.exclude) {
    if (labels.count(name) == 0) fail(what, ": no node '", name, "' to keep float");
  }
  int opset = 0;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  }
  if (opset < 10) fail(what, ": opset ", opset, "; QuantizeLinear needs opset 10 or newer");
  if (opset < 13 && options.per_channel) fail(what, ": opset ", opset, "; per-channel weights need opset 13 or newer");
}

}  // namespace

const char* method_name(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::kMinMax: return "minmax";
    case CalibrationMethod::kPercentile: return "percentile";
    case CalibrationMethod::kEntropy: return "entropy";
  }
  return "?";
}

QuantizeResult quantize_model_bytes(const std::string& model_bytes, const std::string& what, CalibrationData& data,
                                    const QuantizeOptions& options) {
  onnx::ModelProto model = parse_model(model_bytes, what);
  check_options(model, options, what);
  QuantizeResult result;
  result.batch_norms_folded = prepare_float_model(model);
  const ValueTable values = infer_values(model, what, options);
  const onnx::ModelProto float_model = model;
  QdqOptions qdq;
  qdq.activation_type = options.activation_type;
  qdq.activation_symmetric = options.activation_symmetric;
  qdq.per_channel = options.per_channel;
  qdq.weight_symmetric = options.weight_symmetric;
  qdq.reduce_range = options.reduce_range;
  qdq.exclude.insert(options.exclude.begin(), options.exclude.end());
  const QdqPlan plan = plan_qdq(model, values, qdq);
  const onnx::GraphProto marked = model.graph();
  const std::vector<std::string> observe = plan.to_calibrate(float_model.graph());
  const std::vector<std::string> names = input_names(float_model.graph());

  FloatModel f = plan_float(float_model, observe, values, what, options);
  const std::map<std::string, TensorStats> stats = calibrate(f, data, names, observe, values, options, &result.samples);
  const Activations activations = activation_params(plan, stats, float_model.graph(), options);
  const std::vector<WrittenTensor> written = write_qdq(model, plan, activations.params, qdq);
  result.layers = layer_report(written, activations, marked);
  for (const QdqPlan::Tensor& t : plan.tensors) result.weights += t.weight ? 1 : 0;
  result.biases = static_cast<int>(plan.biases.size());
  result.quantized_nodes = plan.quantized_nodes;
  result.float_nodes = plan.float_nodes;
  result.removed_nodes = plan.removed_nodes;
  if (!model.SerializeToString(&result.model_bytes)) fail("internal error: cannot serialize the quantized model");
  if (options.evaluate) {
    const std::unique_ptr<MethodRunner> quantized = plan_and_load(model, what + " (quantized)", options);
    result.accuracy = evaluate(f, *quantized, data, names, options);
  }
  return result;
}

QuantizeResult quantize_model(const std::string& model_path, CalibrationData& data, const QuantizeOptions& options) {
  return quantize_model_bytes(read_file(model_path), model_path, data, options);
}

}  // namespace kiln::planner::quantize
