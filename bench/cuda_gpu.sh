#!/usr/bin/env bash
# The CUDA backend on a real GPU: what no CI machine of this project can run.
# Plan here, run there: the GPU machines have an NVIDIA GPU (sm_80 or
# sm_90), the CUDA Toolkit, CMake, Ninja and PyTorch, but none of the
# planner's dependencies (flatc, ONNX, protobuf) and no network. So:
#
#   bench/cuda_bundle.sh bundle/cuda     where the planner builds (plans the
#                                        node tests and models, takes the
#                                        generated schema headers)
#   (carry the repository at the same commit, with bundle/cuda, to the GPU machine)
#   bench/cuda_gpu.sh bundle/cuda [build-dir]     on the GPU machine (default build/cuda-gpu)
#
# Steps, each printed with its figures (record them in bench/RESULTS.md):
#   1. build the runtime, the CUDA backend's GPU build and kiln-runner, with
#      no planner and no flatc (KILN_BUILD_PLANNER=OFF, KILN_BUILD_RUNNER=ON,
#      the bundle's schema and flatbuffers headers);
#   2. the ONNX node tests planned for --target cuda:0,cpu, on the GPU
#      (kernels by nvcc, Gemm/MatMul by cuBLASLt), against ONNX's expected
#      outputs (kiln-runner check);
#   3. mobilenet_v2, resnet18 and a transformer encoder block: kiln on
#      cuda:0 against kiln on the CPU (max relative error, planned and run
#      on the CPU when the bundle was made) and PyTorch, and batch-1 latency
#      beside PyTorch eager and torch.compile(mode="reduce-overhead") on the
#      same GPU (bench/cuda_models.py run; KILN_NO_TORCH=1 leaves PyTorch out);
#   4. element-wise bandwidth against a device-to-device copy
#      (bench/cuda_bandwidth.cu).
# Every step runs (STEPS="node models bandwidth" picks; a bundle without
# node/ or models/ skips that step); the exit status is 1 when any failed.
# Without a GPU, KILN_CUDA_EXECUTION=host STEPS=node runs the bundle's node
# tests through the same build under the host execution model (a dry run
# of everything but the GPU); otherwise it is unset, so the GPU runs.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: bench/cuda_gpu.sh BUNDLE [build-dir]   (BUNDLE: made by bench/cuda_bundle.sh)" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
build=${2:-build/cuda-gpu}
py=${PYTHON:-python3}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
log() { printf '\033[1m==> %s\033[0m\n' "$*"; }
failed=()

log "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
"$nvcc" --version | tail -1
cat "$bundle/MANIFEST" 2>/dev/null
echo "this tree: $(git rev-parse HEAD 2>/dev/null || echo 'not a git checkout')"

log "preflight"
missing=()
[ -x "$nvcc" ] || missing+=("nvcc (CUDACXX)")
command -v cmake >/dev/null || missing+=("cmake")
command -v ninja >/dev/null || missing+=("ninja")
for d in schema/kiln/schema include/flatbuffers; do
  [ -d "$bundle/$d" ] || missing+=("$bundle/$d (make the bundle with bench/cuda_bundle.sh)")
done
steps=" ${STEPS:-node models bandwidth} "
[ -d "$bundle/node" ] || steps=${steps/ node / }
[ -d "$bundle/models" ] || steps=${steps/ models / }
echo "steps:$steps"
execution=(env -u KILN_CUDA_EXECUTION)
if [ "${KILN_CUDA_EXECUTION:-}" = host ]; then
  echo "KILN_CUDA_EXECUTION=host: the host execution model, not the GPU (a dry run)"
  execution=(env KILN_CUDA_EXECUTION=host)
fi
torch_flag=()
if [ "${KILN_NO_TORCH:-0}" = 1 ] || [[ "$steps" != *" models "* ]]; then
  torch_flag=(--no-torch)
else
  "$py" -c "import numpy, torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null ||
    missing+=("PyTorch with CUDA, torchvision and numpy for $py (KILN_NO_TORCH=1 runs without PyTorch's columns)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  printf 'missing: %s\n' "${missing[@]}" >&2
  exit 2
fi

log "build ($build: runtime, CUDA backend, kiln-runner; no planner, no flatc)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKILN_BUILD_PLANNER=OFF -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_RUNNER=ON \
  -DKILN_WITH_CUDA=ON -DKILN_WITH_VULKAN=OFF -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DKILN_SCHEMA_GENERATED_DIR="$bundle/schema" -DKILN_FLATBUFFERS_INCLUDE_DIR="$bundle/include" || exit 1
cmake --build "$build" --target kiln_runner || exit 1
runner=$build/bin/kiln-runner

if [[ "$steps" == *" node "* ]]; then
  # Three runs each: the first launches directly, the second captures a
  # CUDA graph, the third replays it; each run's outputs are checked.
  log "ONNX node tests for cuda:0,cpu ($(find "$bundle/node" -name program.kiln | wc -l) cases, 3 runs each)"
  "${execution[@]}" "$runner" check "$bundle/node" --min-cases 500 --runs 3 2>&1 | tail -30 || failed+=("node tests")
fi

if [[ "$steps" == *" models "* ]]; then
  log "models: kiln cuda:0 vs kiln CPU and PyTorch, latency beside PyTorch eager and torch.compile"
  "${execution[@]}" "$py" bench/cuda_models.py run --runner "$runner" --bundle "$bundle/models" \
    --workdir "$build/cuda_models" ${torch_flag[@]+"${torch_flag[@]}"} || failed+=("models")
fi

if [[ "$steps" != *" bandwidth "* ]]; then
  :
elif log "element-wise bandwidth"; "$nvcc" -O3 -std=c++17 -arch=native -I. -Ibackends/cuda/runtime/src -Ibackends/cuda/runtime/include \
     -Iruntime/include -Ischema/include -I"$bundle/schema" -I"$bundle/include" -Iplatform/include \
     bench/cuda_bandwidth.cu -o "$build/cuda_bandwidth"; then
  "$build/cuda_bandwidth" || failed+=("bandwidth")
else
  failed+=("bandwidth (build)")
fi

if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
log "all steps passed"
