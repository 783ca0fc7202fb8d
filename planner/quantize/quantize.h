// Post-training static quantization: a float ONNX model and calibration
// inputs in, a QDQ ONNX model out (`kiln quantize`, and kiln.quantize in
// Python, call quantize_model()).
//
//   1. Prepare the float model as ONNX Runtime's quant_pre_process would:
//      Constant nodes become initializers, BatchNormalization folds into the
//      Conv before it (onnx_edit.h).
//   2. Decide what to quantize, op by op, as ONNX Runtime's QDQ quantizer
//      does (qdq_writer.h: plan_qdq); the user's --exclude nodes stay float.
//   3. Calibrate on kiln's own executor: the float model is planned with
//      every activation to observe made a graph output, loaded once
//      (exec/run.h MethodRunner) and run on each calibration input; each
//      observed tensor feeds its TensorStats (calibration.h: minimum,
//      maximum and a fixed-size histogram), so memory does not grow with
//      the calibration set. Graph inputs are observed from the inputs
//      themselves.
//   4. Derive each activation's range (min/max, percentile or entropy) and
//      scale and zero point, and write the QDQ model (write_qdq).
//   5. Check it: plan the quantized model (kiln's QDQ pass folds it into
//      int8 kernels), run it and the float model on every calibration input
//      again, and measure how far the quantized outputs are from the float
//      ones.
//
// Throws PlanError naming the file, tensor or node at fault.

#ifndef KILN_PLANNER_QUANTIZE_QUANTIZE_H_
#define KILN_PLANNER_QUANTIZE_QUANTIZE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "quantize/calibration.h"

namespace kiln::planner::quantize {

// Calibration inputs, one item at a time: each item holds the method's
// inputs in order, either one sample (each array of its input's shape) or
// N samples stacked (each array [N, ...] where its input is [1, ...]).
// Implementations read lazily (a folder of files) or hold arrays (the Python
// binding).
class CalibrationData {
 public:
  virtual ~CalibrationData() = default;
  virtual size_t size() const = 0;
  // Item `index` (< size()) for a model whose inputs have these names;
  // throws PlanError naming what it could not read.
  virtual std::vector<HostTensor> item(size_t index, const std::vector<std::string>& input_names) = 0;
  // What errors call item `index` ("calibration item 3", a file's path).
  virtual std::string describe(size_t index) const { return "calibration item " + std::to_string(index); }
};

// Items held in memory.
class CalibrationArrays final : public CalibrationData {
 public:
  explicit CalibrationArrays(std::vector<std::vector<HostTensor>> items) : items_(std::move(items)) {}
  size_t size() const override { return items_.size(); }
  std::vector<HostTensor> item(size_t index, const std::vector<std::string>&) override { return items_.at(index); }

 private:
  std::vector<std::vector<HostTensor>> items_;
};

// A folder of .npy or .pb files, taken in name order:
//   - files directly in it: one item each, for a model of one input;
//   - subfolders: one item each, holding one file per input, named after
//     the input (x.npy) or by position as in ONNX's test data (input_0.pb).
// Throws PlanError for a folder that is neither (or empty).
std::unique_ptr<CalibrationData> open_calibration_folder(const std::string& path);

struct QuantizeOptions {
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.999;            // for kPercentile
  int histogram_bins = 2048;             // per sign, for kPercentile and kEntropy
  DType activation_type = DType::UINT8;  // or INT8
  bool activation_symmetric = false;
  bool per_channel = true;       // int8 weights per output channel
  bool weight_symmetric = true;  // with per_channel false: per-tensor weights symmetric or not
  // Weights on [-64, 64] (7 bits), as ONNX Runtime's reduce_range: AVX2
  // without VNNI then multiplies with vpmaddubsw exactly (docs/int8.md).
  bool reduce_range = false;
  // Nodes that stay float, by node name (or their first output's name).
  std::vector<std::string> exclude;
  // Static shapes for inputs with symbolic dims (as kiln plan --input-shape).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Run the quantized model against the float one on the calibration set.
  bool evaluate = true;
  // Called after each sample of each pass ("calibrating", "evaluating"),
  // with the samples done and the total (estimated from the first item's
  // samples until every item is read).
  std::function<void(const char* stage, size_t done, size_t total)> progress;
};

// One quantized activation: its producer, what calibration saw, the range
// it kept and what that quantizes to.
struct LayerRange {
  std::string tensor, node, op;  // the tensor, and the node (and op) writing it
  Range observed, range;
  QuantParams params;
  std::string shared_from;  // quantized with this tensor's parameters
};

// How close the quantized model's outputs came to the float model's over
// the calibration set.
struct OutputAccuracy {
  std::string name;
  double max_abs_error = 0;  // largest |quantized - float|
  double rms_error = 0;      // root mean square of quantized - float
  double float_rms = 0;      // root mean square of the float output
  double sqnr_db = 0;        // 10 log10(float power / error power)
  // For outputs of rank >= 2 with more than one class on the last axis:
  // how often the quantized model's largest entry (argmax) is the float
  // model's.
  int64_t rows = 0, top1_agree = 0;
};

struct QuantizeResult {
  std::string model_bytes;  // the QDQ model (serialized ModelProto)
  size_t samples = 0;       // calibration samples (an item may hold several)
  int batch_norms_folded = 0;
  std::vector<LayerRange> layers;
  std::vector<std::string> quantized_nodes, float_nodes, removed_nodes;
  int weights = 0, biases = 0;
  std::vector<OutputAccuracy> accuracy;  // empty without QuantizeOptions::evaluate
};

QuantizeResult quantize_model(const std::string& model_path, CalibrationData& data, const QuantizeOptions& options);
// The same from a model's serialized bytes (`what` names it in errors).
QuantizeResult quantize_model_bytes(const std::string& model_bytes, const std::string& what, CalibrationData& data,
                                    const QuantizeOptions& options);

// "minmax", "percentile", "entropy".
const char* method_name(CalibrationMethod method);

}  // namespace kiln::planner::quantize

#endif  // KILN_PLANNER_QUANTIZE_QUANTIZE_H_
