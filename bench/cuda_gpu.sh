#!/usr/bin/env bash
# The CUDA backend on a real GPU: what no CI machine of this project can run.
# Run from the repository root on a machine with an NVIDIA GPU (sm_80 or
# sm_90), the CUDA Toolkit, CMake, Ninja and PyTorch with CUDA:
#
#   bench/cuda_gpu.sh [build-dir]        (default build/cuda-gpu)
#
# Steps, each printed with its figures (record them in bench/RESULTS.md):
#   1. build kiln with the GPU build of the CUDA backend (KILN_WITH_CUDA=ON;
#      the planner needs flatc, the ONNX C++ library and protobuf: the
#      preflight names any that is missing);
#   2. the ONNX node tests with --target cuda:0,cpu on the GPU (kernels by
#      nvcc, Gemm/MatMul by cuBLASLt), against the same references as every
#      backend;
#   3. mobilenet_v2, resnet18 and a transformer encoder block: kiln on
#      cuda:0 against kiln on the CPU (max relative error), and batch-1
#      latency beside PyTorch eager and torch.compile(mode="reduce-overhead")
#      on the same GPU (bench/cuda_models.py);
#   4. element-wise bandwidth against a device-to-device copy
#      (bench/cuda_bandwidth.cu).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${1:-build/cuda-gpu}
py=${PYTHON:-python3}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

log "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
"$nvcc" --version | tail -1

log "preflight"
missing=()
command -v flatc >/dev/null || missing+=("flatc (flatbuffers compiler)")
[ -f /usr/include/onnx/onnx_pb.h ] || [ -n "${ONNX_ROOT:-}" ] || missing+=("ONNX C++ headers (libonnx-dev)")
command -v ninja >/dev/null || missing+=("ninja")
"$py" -c "import torch, torchvision, onnx; assert torch.cuda.is_available()" 2>/dev/null ||
  missing+=("PyTorch with CUDA, torchvision and onnx for $py")
if [ ${#missing[@]} -gt 0 ]; then
  printf 'missing: %s\n' "${missing[@]}" >&2
  exit 2
fi

log "build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_CUDA=ON -DKILN_CUDA_IN_TOOLS=ON -DKILN_WITH_VULKAN=OFF \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DKILN_PYTHON="$(command -v "$py")"
cmake --build "$build" --target kiln kiln_onnx_node_tests

log "ONNX node tests on cuda:0 (GPU)"
env -u KILN_CUDA_EXECUTION "$build/tests/kiln_onnx_node_tests" --target cuda:0,cpu | tail -4

log "models: kiln cuda:0 vs kiln CPU, latency beside PyTorch eager and torch.compile"
env -u KILN_CUDA_EXECUTION "$py" bench/cuda_models.py --kiln "$build/bin/kiln" --workdir "$build/cuda_models"

log "element-wise bandwidth"
"$nvcc" -O3 -std=c++17 -arch=native -I. -Ibackends/cuda/runtime/src -Ibackends/cuda/runtime/include \
  -Iruntime/include -Ischema/include -I"$build/schema/include" -Iplatform/include \
  bench/cuda_bandwidth.cu -o "$build/cuda_bandwidth"
"$build/cuda_bandwidth"
