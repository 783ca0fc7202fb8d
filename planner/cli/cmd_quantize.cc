// kiln quantize: post-training static quantization of a float ONNX model
// into a QDQ ONNX model (planner/quantize/quantize.h does the work).

#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/quantize_options.h"
#include "core/error.h"
#include "core/file_util.h"
#include "quantize/quantize.h"
#include "report/json.h"

namespace kiln::planner::cli {
namespace {

namespace q = ::kiln::planner::quantize;

constexpr const char* kHelp =
    "usage: kiln quantize MODEL.onnx --calibration DIR -o OUT.onnx [options]\n"
    "\n"
    "Quantizes a float ONNX model after training (static quantization): runs it on\n"
    "the calibration inputs with kiln, keeps each activation's range (statistics, not\n"
    "the values), and writes a QDQ model laid out as ONNX Runtime's quantize_static\n"
    "writes it: a QuantizeLinear / DequantizeLinear pair on each quantized tensor,\n"
    "int8 weights (per output channel) with their DequantizeLinear, int32 biases with\n"
    "scale = input scale x weight scale, and the ops that only move data (MaxPool,\n"
    "Reshape, Transpose, Resize, Slice, Pad, ...) between a DQ and a Q of one scale.\n"
    "kiln plan and ONNX Runtime both run the file. Prints each quantized activation's\n"
    "range and how close the quantized model's outputs come to the float model's over\n"
    "the calibration set.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE       the quantized model to write (required)\n"
    "  --calibration DIR       the calibration inputs (required): .npy or .pb files, one\n"
    "                          per sample, for a model of one input; or one subfolder per\n"
    "                          sample holding a file per input, named after the input\n"
    "                          (x.npy) or by position (input_0.pb, as ONNX's test data).\n"
    "                          An array [N, ...] for an input [1, ...] holds N samples\n"
    "  --method minmax|percentile|entropy\n"
    "                          how each activation's range is chosen (default minmax):\n"
    "                          the smallest and largest value seen; the central\n"
    "                          --percentile of the values; or the clipping threshold whose\n"
    "                          quantized distribution is closest to the observed one\n"
    "                          (least KL divergence)\n"
    "  --percentile P          for --method percentile (default 99.999)\n"
    "  --activations uint8|int8\n"
    "                          the activations' type (default uint8)\n"
    "  --symmetric             symmetric activation ranges (zero point 0 for int8, 127\n"
    "                          for uint8); Relu and Clip then stay as nodes\n"
    "  --per-tensor            one scale per weight instead of one per output channel\n"
    "  --asymmetric-weights    with --per-tensor: weights with a zero point\n"
    "  --reduce-range          weights on 7 bits, [-64, 64], as ONNX Runtime's reduce_range:\n"
    "                          exact and about twice as fast on x86 without VNNI\n"
    "  --exclude NODE[,NODE...]\n"
    "                          nodes that stay float, by name (repeatable); they read\n"
    "                          their quantized neighbours' dequantized values\n"
    "  --input-shape NAME=DIMS static shape for an input with symbolic dims (1x3x224x224)\n"
    "  --report FILE           also write the ranges and the accuracy as JSON\n"
    "  --no-evaluate           do not run the quantized model against the float one\n"
    "\n"
    "Progress goes to the terminal (nothing when stderr is not one).\n";

q::QuantizeOptions parse_quantize_options(const Args& args) {
  q::QuantizeOptions o;
  const std::string method = args.get("--method", "minmax");
  if (method == "minmax") {
    o.method = q::CalibrationMethod::kMinMax;
  } else if (method == "percentile") {
    o.method = q::CalibrationMethod::kPercentile;
  } else if (method == "entropy") {
    o.method = q::CalibrationMethod::kEntropy;
  } else {
    throw UsageError{"--method is minmax, percentile or entropy"};
  }
  o.percentile = args.get_double("--percentile", 99.999);
  if (!(o.percentile > 0 && o.percentile <= 100)) throw UsageError{"--percentile is in (0, 100]"};
  if (args.has("--percentile") && o.method != q::CalibrationMethod::kPercentile) {
    throw UsageError{"--percentile goes with --method percentile"};
  }
  const std::string type = args.get("--activations", "uint8");
  if (type != "uint8" && type != "int8") throw UsageError{"--activations is uint8 or int8"};
  o.activation_type = type == "int8" ? DType::INT8 : DType::UINT8;
  o.activation_symmetric = args.has("--symmetric");
  o.per_channel = !args.has("--per-tensor");
  o.weight_symmetric = !args.has("--asymmetric-weights");
  if (!o.weight_symmetric && o.per_channel) throw UsageError{"--asymmetric-weights goes with --per-tensor"};
  o.reduce_range = args.has("--reduce-range");
  for (const std::string& list : args.all("--exclude")) {
    std::stringstream in(list);
    for (std::string name; std::getline(in, name, ',');) {
      if (!name.empty()) o.exclude.push_back(name);
    }
  }
  for (const std::string& spec : args.all("--input-shape")) {
    auto [name, dims] = split_assignment(spec, "--input-shape");
    o.input_shapes[name] = parse_dims(dims, name);
  }
  o.evaluate = !args.has("--no-evaluate");
  return o;
}

// clang-format off
std::vector<OptionSpec> quantize_option_specs() {
  return {{"-o", true}, {"--output", true}, {"--calibration", true}, {"--method", true}, {"--percentile", true},
          {"--activations", true}, {"--symmetric", false}, {"--per-tensor", false}, {"--asymmetric-weights", false},
          {"--reduce-range", false}, {"--exclude", true}, {"--input-shape", true}, {"--report", true}, {"--no-evaluate", false},
          {"--help", false}};
}
// clang-format on

std::string range_text(q::Range r) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "[%.5g, %.5g]", static_cast<double>(r.min), static_cast<double>(r.max));
  return buf;
}

void print_layers(const q::QuantizeResult& r) {
  std::printf("  %-32s %-18s %-24s %-24s %12s %5s\n", "tensor", "op", "observed", "range", "scale", "zp");
  for (const q::LayerRange& l : r.layers) {
    const std::string observed = l.shared_from.empty() ? range_text(l.observed) : "as " + l.shared_from;
    const std::string range = l.shared_from.empty() ? range_text(l.range) : "";
    std::printf("  %-32s %-18s %-24s %-24s %12.6g %5d\n", l.tensor.c_str(), l.op.c_str(), observed.c_str(),
                range.c_str(), static_cast<double>(l.params.scale), l.params.zero_point);
  }
}

void print_accuracy(const q::QuantizeResult& r) {
  std::printf("accuracy against the float model over the %zu calibration samples:\n", r.samples);
  for (const q::OutputAccuracy& a : r.accuracy) {
    std::printf("  output %s: max |error| %.6g, rms error %.6g (float rms %.6g), SQNR %.1f dB", a.name.c_str(),
                a.max_abs_error, a.rms_error, a.float_rms, a.sqnr_db);
    if (a.rows > 0) {
      std::printf(", top-1 agreement %lld of %lld (%.1f%%)", static_cast<long long>(a.top1_agree),
                  static_cast<long long>(a.rows),
                  100.0 * static_cast<double>(a.top1_agree) / static_cast<double>(a.rows));
    }
    std::printf("\n");
  }
}

void json_range(JsonWriter& j, const char* key, q::Range r) {
  j.key(key).begin_array().value(static_cast<double>(r.min)).value(static_cast<double>(r.max)).end_array();
}

std::string report_json(const std::string& model, const std::string& output, const q::QuantizeResult& r,
                        const q::QuantizeOptions& o) {
  JsonWriter j;
  j.begin_object().field("model", model).field("output", output).field("method", q::method_name(o.method));
  j.field("activations", dtype_str(o.activation_type)).field("symmetric", o.activation_symmetric);
  j.field("per_channel", o.per_channel).field("reduce_range", o.reduce_range);
  j.field("samples", static_cast<uint64_t>(r.samples));
  j.field("quantized_nodes", static_cast<uint64_t>(r.quantized_nodes.size()));
  j.key("float_nodes").begin_array();
  for (const std::string& n : r.float_nodes) j.value(n);
  j.end_array().key("layers").begin_array();
  for (const q::LayerRange& l : r.layers) {
    j.begin_object().field("tensor", l.tensor).field("node", l.node).field("op", l.op);
    if (l.shared_from.empty()) {
      json_range(j, "observed", l.observed);
      json_range(j, "range", l.range);
    } else {
      j.field("shared_from", l.shared_from);
    }
    j.field("scale", static_cast<double>(l.params.scale)).field("zero_point", l.params.zero_point).end_object();
  }
  j.end_array().key("accuracy").begin_array();
  for (const q::OutputAccuracy& a : r.accuracy) {
    j.begin_object().field("output", a.name).field("max_abs_error", a.max_abs_error).field("rms_error", a.rms_error);
    j.field("float_rms", a.float_rms).field("sqnr_db", std::isfinite(a.sqnr_db) ? a.sqnr_db : 999.0);
    if (a.rows > 0) j.field("rows", a.rows).field("top1_agree", a.top1_agree);
    j.end_object();
  }
  j.end_array().end_object();
  return j.str() + "\n";
}

}  // namespace

q::QuantizeOptions quantize_options_from_arguments(const Argv& argv) {
  const Args args(argv, quantize_option_specs());
  if (!args.positional().empty()) throw UsageError{"unexpected argument '" + args.positional()[0] + "'"};
  return parse_quantize_options(args);
}

std::vector<std::string> quantize_option_names() {
  std::vector<std::string> names;
  for (const OptionSpec& spec : quantize_option_specs()) names.push_back(spec.name);
  return names;
}

int cmd_quantize(const Argv& argv) {
  const Args args(argv, quantize_option_specs());
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError{"expects one model file"};
  const std::string model = args.positional()[0];
  const std::string output = args.has("-o") ? args.get("-o") : args.get("--output");
  if (output.empty()) throw UsageError{"missing -o OUT.onnx"};
  if (!args.has("--calibration")) throw UsageError{"missing --calibration DIR"};
  q::QuantizeOptions options = parse_quantize_options(args);
  StepProgress progress;
  options.progress = [&](const char* stage, size_t done, size_t total) { progress.update(stage, done, total); };
  const std::unique_ptr<q::CalibrationData> data = q::open_calibration_folder(args.get("--calibration"));
  const q::QuantizeResult r = q::quantize_model(model, *data, options);
  progress.finish();
  write_file_atomic(output, r.model_bytes);
  std::printf("quantized %s -> %s: %zu nodes quantized (%zu Relu/Clip folded into their producer), %zu kept float\n",
              model.c_str(), output.c_str(), r.quantized_nodes.size(), r.removed_nodes.size(), r.float_nodes.size());
  std::printf("  %d weights int8 %s%s, %d biases int32; %s activations%s, %s ranges over %zu samples\n", r.weights,
              options.per_channel ? "per channel" : "per tensor", options.reduce_range ? " on [-64, 64]" : "", r.biases,
              dtype_str(options.activation_type).c_str(), options.activation_symmetric ? " (symmetric)" : "",
              q::method_name(options.method), r.samples);
  if (r.batch_norms_folded > 0) std::printf("  %d BatchNormalization folded into Conv\n", r.batch_norms_folded);
  print_layers(r);
  if (!r.accuracy.empty()) print_accuracy(r);
  if (args.has("--report")) {
    write_file_atomic(args.get("--report"), report_json(model, output, r, options));
    std::printf("  report: %s\n", args.get("--report").c_str());
  }
  return 0;
}

}  // namespace kiln::planner::cli
