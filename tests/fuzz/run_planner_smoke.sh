#!/usr/bin/env bash
# usage: run_planner_smoke.sh FUZZER NODE_TEST_DIR WORKDIR RUNS
# Seeds the planner's fuzzer with every model.onnx of the ONNX node tests
# (Debian libonnx-testdata) and runs run_smoke.sh over them.
set -euo pipefail
fuzzer=$1 node_tests=$2 work=$3 runs=$4
seeds="$work-seeds"
rm -rf "$seeds"
mkdir -p "$seeds"
for model in "$node_tests"/*/model.onnx; do
  cp "$model" "$seeds/$(basename "$(dirname "$model")").onnx"
done
exec "$(dirname "$0")/run_smoke.sh" "$fuzzer" "$seeds" "$work" "$runs"
