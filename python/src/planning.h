// The planner half of the Python package: kiln.plan() over the planner
// library, with the options `kiln plan` takes (parsed by the CLI's own
// code, cli/plan_options.h), and the bundled self-tests.

#ifndef KILN_PYTHON_PLANNING_H_
#define KILN_PYTHON_PLANNING_H_

#include <map>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "quantize/quantize.h"

namespace kiln::python {

struct Planned {
  std::string bytes;        // the .kiln program
  std::string report_json;  // kiln plan --report's plan.json
  std::string memory_svg;   // and its memory.svg
};

// Plans the model: an ONNX file at `model` when `is_path`, else the bytes
// of a serialized ModelProto. `arguments` are `kiln plan` options
// ("--target", "cpu"); `frozen` adds inputs frozen to arrays (--freeze
// takes files). Throws PlanError, and cli::UsageError for a bad option.
Planned plan_model(const std::string& model, bool is_path, const std::vector<std::string>& arguments,
                   std::map<std::string, planner::HostTensor> frozen);

// A bundled self-test (kiln plan --bundle-test's .kiln.test bytes) of
// `inputs` and the `outputs` the program computed for them.
std::string make_self_test(const std::string& program, const std::string& method,
                           const std::vector<planner::HostTensor>& inputs,
                           const std::vector<planner::HostTensor>& outputs, float tolerance);

struct SelfTestVerdict {
  bool passed = false;
  uint32_t num_outputs = 0;
  uint32_t worst_output = 0;
  float max_error = 0.f;
  float tolerance = 0.f;
};

// Runs the self-test `test` against `program`'s method `method` on
// `threads` threads (RunFailure when it cannot run; a wrong output is a
// verdict, not an error).
SelfTestVerdict run_self_test(const std::string& program, const std::string& test, const std::string& method,
                              int threads);

// One calibration item's arrays: by input name, or in input order where a
// name is empty.
using CalibrationItem = std::vector<std::pair<std::string, planner::HostTensor>>;

// kiln.quantize(): the model (a path when `is_path`, else serialized bytes)
// quantized with `kiln quantize` options `arguments`, calibrated on the
// folder `folder` or, when it is empty, on `items`. Throws PlanError, and
// cli::UsageError for a bad option.
planner::quantize::QuantizeResult quantize_model(const std::string& model, bool is_path,
                                                 const std::vector<std::string>& arguments, const std::string& folder,
                                                 std::vector<CalibrationItem> items);

}  // namespace kiln::python

#endif  // KILN_PYTHON_PLANNING_H_
