#include "planning.h"

#include <algorithm>
#include <memory>

#include <onnx/onnx_pb.h>

#include "cli/plan_options.h"
#include "cli/progress.h"
#include "cli/quantize_options.h"
#include "core/error.h"
#include "emit/self_test_file.h"
#include "exec/run.h"
#include "kiln/runtime/posix_thread_pool.h"
#include "log_capture.h"
#include "onnx/import.h"
#include "pipeline.h"
#include "report/plan_report.h"
#include "runtime.h"
#include "targets/runtime_backends.h"

namespace kiln::python {

Planned plan_model(const std::string& model, bool is_path, const std::vector<std::string>& arguments,
                   std::map<std::string, planner::HostTensor> frozen) {
  planner::PlanOptions options = planner::cli::plan_options_from_arguments(arguments);
  for (auto& [name, tensor] : frozen) options.import.frozen_inputs[name] = std::move(tensor);
  planner::cli::SearchProgress progress(is_path ? model : "the model");
  options.memory.solve.progress = progress.callback();
  const planner::PlanResult result =
      is_path ? planner::plan_onnx_file(model, options) : planner::plan_onnx_bytes(model, "the model", options);
  progress.finish();
  return {result.bytes, planner::plan_json(result), planner::memory_svg(result.program)};
}

std::string make_self_test(const std::string& program, const std::string& method,
                           const std::vector<planner::HostTensor>& inputs,
                           const std::vector<planner::HostTensor>& outputs, float tolerance) {
  // A negative tolerance: derived from the program (emit/self_test_file.h).
  if (tolerance < 0) tolerance = planner::derived_self_test_tolerance(program, method);
  return planner::make_self_test(program, method, inputs, outputs, tolerance);
}

SelfTestVerdict run_self_test(const std::string& program, const std::string& test, const std::string& method,
                              int threads) {
  LogCapture log;
  PosixThreadPool pool;
  planner::RunOptions options;
  options.method = method;
  options.self_test = &test;
  options.backends = &planner::runtime_backends_for(program);
  if (threads > 1) {
    if (pool.start(threads) != Error::kOk) throw RunFailure{"Internal", "cannot start threads"};
    options.thread_pool = &pool;
  }
  planner::RunResult result;
  try {
    result = planner::run_program(program, {}, options);
  } catch (const planner::PlanError& e) {
    const std::string logged = log.text();
    throw RunFailure{"SelfTestFailed", std::string(e.what()) + (logged.empty() ? "" : " (" + logged + ")")};
  }
  const SelfTestReport& r = result.self_test;
  return {r.passed, r.num_outputs, r.worst_output, r.max_error, r.tolerance};
}

namespace {

// Calibration items held as arrays, each by input name or in input order.
class NamedCalibration final : public planner::quantize::CalibrationData {
 public:
  explicit NamedCalibration(std::vector<CalibrationItem> items) : items_(std::move(items)) {}
  size_t size() const override { return items_.size(); }
  std::vector<planner::HostTensor> item(size_t index, const std::vector<std::string>& input_names) override {
    const CalibrationItem& item = items_.at(index);
    std::vector<planner::HostTensor> out;
    const bool named = !item.empty() && !item.front().first.empty();
    if (!named) {
      for (const auto& entry : item) out.push_back(entry.second);
      return out;
    }
    for (const std::string& name : input_names) {
      auto it = std::find_if(item.begin(), item.end(), [&](const auto& entry) { return entry.first == name; });
      if (it == item.end()) planner::fail(describe(index), ": no array for input '", name, "'");
      out.push_back(it->second);
    }
    if (item.size() != input_names.size()) {
      planner::fail(describe(index), ": ", item.size(), " arrays for a model of ", input_names.size(), " inputs");
    }
    return out;
  }

 private:
  std::vector<CalibrationItem> items_;
};

}  // namespace

planner::quantize::QuantizeResult quantize_model(const std::string& model, bool is_path,
                                                 const std::vector<std::string>& arguments, const std::string& folder,
                                                 std::vector<CalibrationItem> items) {
  namespace q = planner::quantize;
  q::QuantizeOptions options = planner::cli::quantize_options_from_arguments(arguments);
  planner::cli::StepProgress progress;
  options.progress = [&](const char* stage, size_t done, size_t total) { progress.update(stage, done, total); };
  std::unique_ptr<q::CalibrationData> data;
  if (folder.empty()) {
    if (items.empty()) planner::fail("kiln.quantize(): no calibration items");
    data = std::make_unique<NamedCalibration>(std::move(items));
  } else {
    data = q::open_calibration_folder(folder);
  }
  q::QuantizeResult result =
      is_path ? q::quantize_model(model, *data, options) : q::quantize_model_bytes(model, "the model", *data, options);
  progress.finish();
  return result;
}

}  // namespace kiln::python
