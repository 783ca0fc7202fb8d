#!/usr/bin/env bash
# Plan here, run there: what bench/cuda_gpu.sh needs on a GPU machine that
# has CUDA, CMake, Ninja and PyTorch but no flatc, ONNX or protobuf (and no
# network). Run from the repository root on a machine with kiln's planner
# dependencies (README's Debian setup):
#
#   bench/cuda_bundle.sh [OUT]           (default bundle/cuda, git-ignored)
#
# MODELS=a,b picks the models (default mobilenet_v2,resnet18,encoder_block);
# NODE_TESTS=0 leaves the node tests out. The whole bundle is about 90 MB,
# resnet18 alone 48 MB; where what can be carried is limited (64 MiB), make
# two and run cuda_gpu.sh on each:
#   MODELS=mobilenet_v2,encoder_block bench/cuda_bundle.sh bundle/cuda       (about 40 MB)
#   MODELS=resnet18 NODE_TESTS=0 bench/cuda_bundle.sh bundle/cuda-resnet18   (about 48 MB)
#
# OUT then holds:
#   schema/kiln/schema/  program, delegate and selftest _generated.h with the
#                        .fbs they came from (the GPU build checks that they
#                        equal its tree's: KILN_SCHEMA_GENERATED_DIR)
#   include/flatbuffers/ the flatbuffers headers (KILN_FLATBUFFERS_INCLUDE_DIR)
#   node/<test>/         every ONNX node test kiln passes, planned for
#                        --target cuda:0,cpu (run here under the host
#                        execution model), with inputs and ONNX's expected
#                        outputs (kiln_onnx_node_tests --export)
#   models/<name>/       mobilenet_v2, resnet18 and a transformer encoder
#                        block planned for cuda:0,cpu, their input, kiln's
#                        CPU output as expected and PyTorch's
#                        (bench/cuda_models.py bundle)
#   MANIFEST             the commit and the counts
#
# Carry OUT to the GPU machine with the same commit of the repository, and
# run bench/cuda_gpu.sh OUT there. The planner is built in build/cuda-bundle
# (KILN_BUNDLE_BUILD to use another build with kiln and kiln_onnx_node_tests).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${1:-bundle/cuda}
build=${KILN_BUNDLE_BUILD:-build/cuda-bundle}
log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

log "planner ($build)"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_CUDA=OFF -DKILN_WITH_VULKAN=OFF
fi
cmake --build "$build" --target kiln kiln_onnx_node_tests
# The Python with numpy, onnx and torch that the build's tests use.
py=${PYTHON:-$(sed -n 's/^KILN_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt")}
py=${py:-python3}

rm -rf "$out"
mkdir -p "$out/schema/kiln/schema" "$out/include"
log "schema headers and flatbuffers headers"
for fbs in program delegate selftest; do
  cp "$build/schema/include/kiln/schema/${fbs}_generated.h" "$out/schema/kiln/schema/"
  cp "schema/$fbs.fbs" "$out/schema/kiln/schema/"
done
flatbuffers=$(sed -n 's/^KILN_FLATBUFFERS_INCLUDE_DIR:PATH=//p' "$build/CMakeCache.txt")
cp -r "${flatbuffers:-/usr/include}/flatbuffers" "$out/include/"

if [ "${NODE_TESTS:-1}" != 0 ]; then
  log "ONNX node tests for --target cuda:0,cpu (planned and checked here under the host execution model)"
  KILN_CUDA_EXECUTION=host "$build/tests/kiln_onnx_node_tests" --target cuda:0,cpu --export "$out/node" | tail -4
fi

models=${MODELS:-mobilenet_v2,resnet18,encoder_block}
if [ -n "$models" ]; then
  log "models: $models"
  "$py" bench/cuda_models.py bundle --kiln "$build/bin/kiln" --out "$out/models" --models "$models"
fi

{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
  echo "node cases $(find "$out" -path "$out/node/*/program.kiln" | wc -l)"
  echo "models ${models:-none}"
} > "$out/MANIFEST"
cat "$out/MANIFEST"
du -sh "$out"
