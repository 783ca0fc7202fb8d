// libFuzzer target: arbitrary bytes as an ONNX ModelProto through the whole
// planner, as `kiln plan` runs it (import with the ONNX checker and shape
// inference, inference and folding, lowering, memory planning, emission and
// the verifier). Whatever the bytes, the planner must end in a program or a
// PlanError (UnsupportedError and NotConstantError are PlanErrors): any
// other exception, a crash or a sanitizer report is a finding.
//
// Memory planning runs greedy first fit (no search, no time limit), so one
// execution takes milliseconds; the search has its own tests.
//
// Seeds: the ONNX node-test models (Debian libonnx-testdata), copied into
// the smoke run by tests/fuzz/run_planner_smoke.sh.

#include <stddef.h>
#include <stdint.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "onnx/import.h"
#include "pipeline.h"

namespace kp = kiln::planner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnx::ModelProto model;
  if (size == 0 || !model.ParseFromArray(data, static_cast<int>(size))) return 0;
  kp::PlanOptions options;
  options.memory.solve.algorithm = kp::memory::Algorithm::kGreedyFirstFit;
  try {
    kp::Graph graph = kp::import_onnx_model(model, "fuzz.onnx", options.import);
    kp::PlanResult result = kp::plan_graph(std::move(graph), options);
    if (result.bytes.empty()) {
      std::fprintf(stderr, "planner returned an empty program without an error\n");
      std::abort();
    }
  } catch (const kp::PlanError&) {
    // A named refusal: what a hostile model must get.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "planner threw a non-PlanError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
