#!/usr/bin/env bash
# Plan and build here, run there: everything bench/cuda_gpu.sh needs on a GPU
# machine that has an NVIDIA driver, CUDA, CMake, Ninja and PyTorch but no
# flatc, ONNX or protobuf, no Debian packages and no network. Run from the
# repository root on a machine with kiln's planner dependencies and nvcc
# (README's Debian setup):
#
#   bench/cuda_bundle.sh [OUT]           (default bundle/cuda, git-ignored)
#
# OUT then holds (and OUT.tar.gz, the same packed: what is carried):
#   bin/kiln-runner      the runtime, the CUDA backend's GPU build for sm_90
#                        only (KILN_CUDA_ARCHITECTURES=90-real; cudart static,
#                        cuBLASLt from the GPU machine's toolkit), its host
#                        execution model and the Vulkan backend; stripped,
#                        libstdc++ linked statically; with the cuda-ipc
#                        communicator and `all-reduce-bench` (bench/cuda_allreduce)
#   bin/cuda_bandwidth   bench/cuda_bandwidth.cu for sm_90
#   bin/nccl_communicator_test  tests/comm/nccl_communicator_test.cc from the
#                        build tree, where it was built (KILN_WITH_NCCL): one
#                        rank's device peers and captured ncclAllReduce
#   lib/libvulkan.so.1   the Vulkan loader (libvulkan1), for GPU machines
#                        with NVIDIA's Vulkan driver but no loader
#   schema/, include/    the generated schema headers and the flatbuffers
#                        headers, to build kiln-runner there when the carried
#                        one cannot start (bench/cuda_gpu.sh does it then)
#   node/<test>/         the ONNX node tests that run at least one kernel on
#                        the device, planned for --target cuda:0,cpu (checked
#                        here under the host execution model), with inputs
#                        and ONNX's expected outputs
#   node_vulkan/<test>/  the same for --target vulkan:0,cpu (checked here on
#                        lavapipe where it is installed)
#   node_fp16/, node_bf16/  the same planned with --precision fp16 / bf16
#                        (16-bit device tensors; ONNX's expected outputs,
#                        checked within the storage's rounding)
#   models/<name>/       mobilenet_v2, resnet18 and a transformer encoder
#                        block planned for cuda:0,cpu (and encoder_block for
#                        vulkan:0,cpu too), their input, kiln's CPU output
#                        and PyTorch's (bench/cuda_models.py bundle); the
#                        encoder block also planned with --precision fp16
#                        and bf16, mobilenet_v2 with fp16 (program_fp16.kiln,
#                        program_bf16.kiln; more 16-bit copies would pass
#                        the carry limit: the default bundle packs to 56.6 MiB)
#   collectives/         the tensor-parallel MLP (tests/collectives/make_models.py)
#                        planned for cuda:0,cpu on 2 ranks, one program per
#                        all-reduce kernel, its input and the single-rank
#                        CPU program's output (bench/cuda_collectives.sh)
#   gemm/                GEMM chains of 1 and 257 products of 4096 x 4096 for
#                        TFLOP/s (no constants: tiny)
#   MANIFEST             the commit, the CUDA version the runner needs, counts
#
# MODELS=a,b picks the models (default mobilenet_v2,resnet18,encoder_block),
# VULKAN_MODELS those also planned for Vulkan (default encoder_block),
# PRECISION_MODELS those also planned in fp16 and bf16, MODEL:P naming its
# own (default mobilenet_v2:fp16,encoder_block),
# GEMM=N the GEMM size (0: none), NODE_TESTS=0 leaves the node tests out,
# VULKAN=0 the Vulkan node tests (a build without KILN_WITH_VULKAN),
# NODE_PRECISIONS the 16-bit node tests (default "fp16 bf16"; "" for none),
# COLLECTIVES=0 the collectives.
# KILN_RUNNER=PATH carries that kiln-runner instead of building one (the
# dry run's test does, with the release tree's). The bundle must stay under
# KILN_BUNDLE_LIMIT_MB packed (default: 63 MiB less the working tree's
# tracked files, since both travel in the same 64 MiB): the check fails
# otherwise. The default bundle packs to 56.6 MiB.
# The planner comes from KILN_BUNDLE_BUILD (default build/release, which must
# hold kiln and kiln_onnx_node_tests); the runner is built in
# KILN_RUNNER_BUILD (default build/cuda-runner; delete it when done).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${1:-bundle/cuda}
build=${KILN_BUNDLE_BUILD:-build/release}
runner_build=${KILN_RUNNER_BUILD:-build/cuda-runner}
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# What travels to the GPU machine is at most 64 MiB, the working tree's
# tracked files included (about 4.4 MiB): the bundle gets the rest, less 1 MiB.
tree_mb=$(git ls-files -z 2>/dev/null | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print int(s / 1048576) + 1}')
limit_mb=${KILN_BUNDLE_LIMIT_MB:-$((63 - ${tree_mb:-5}))}
log() { printf '\033[1m==> %s\033[0m\n' "$*"; }
py=${PYTHON:-$(sed -n 's/^KILN_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)}
py=${py:-python3}
for tool in "$build/bin/kiln" "$build/tests/kiln_onnx_node_tests"; do
  [ -x "$tool" ] || { echo "missing $tool: build $build first (cmake --build --preset release)" >&2; exit 2; }
done

rm -rf "$out" "$out.tar.gz"
mkdir -p "$out/bin" "$out/lib" "$out/schema/kiln/schema" "$out/include"

if [ -n "${KILN_RUNNER:-}" ]; then
  log "kiln-runner: $KILN_RUNNER (given)"
  cp "$KILN_RUNNER" "$out/bin/kiln-runner"
else
  log "kiln-runner for sm_90 ($runner_build: runtime, CUDA and Vulkan backends; no planner)"
  cmake -S . -B "$runner_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_PLANNER=OFF \
    -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_RUNNER=ON -DKILN_WITH_CUDA=ON -DKILN_WITH_VULKAN=ON \
    -DKILN_CUDA_ARCHITECTURES=90-real -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$runner_build" --target kiln_runner
  cp "$runner_build/bin/kiln-runner" "$out/bin/kiln-runner"
fi
strip "$out/bin/kiln-runner"

log "cuda_bandwidth for sm_90"
$(command -v ccache || true) "$nvcc" -O3 -std=c++17 -arch=sm_90 -I. -Ibackends/cuda/runtime/src -Ibackends/cuda/runtime/include \
  -Iruntime/include -Ischema/include -I"$build/schema/include" -Iplatform/include -Ibackends/common/include \
  bench/cuda_bandwidth.cu -o "$out/bin/cuda_bandwidth"
strip "$out/bin/cuda_bandwidth"
if [ -x "$build/tests/comm/comm_nccl_communicator_test" ]; then
  cp "$build/tests/comm/comm_nccl_communicator_test" "$out/bin/nccl_communicator_test"
  strip "$out/bin/nccl_communicator_test"
fi

log "the Vulkan loader (libvulkan1)"
loader=$(ldconfig -p | sed -n 's/.*libvulkan\.so\.1 (libc6,x86-64) => //p' | head -1)
if [ -n "$loader" ]; then
  cp -L "$loader" "$out/lib/libvulkan.so.1"
else
  (cd "$out/lib" && apt-get download libvulkan1 >/dev/null && dpkg -x libvulkan1_*.deb unpacked &&
    cp -L unpacked/usr/lib/*/libvulkan.so.1 . && rm -rf unpacked libvulkan1_*.deb)
fi

log "schema headers and flatbuffers headers"
for fbs in program delegate selftest; do
  cp "$build/schema/include/kiln/schema/${fbs}_generated.h" "$out/schema/kiln/schema/"
  cp "schema/$fbs.fbs" "$out/schema/kiln/schema/"
done
flatbuffers=$(sed -n 's/^KILN_FLATBUFFERS_INCLUDE_DIR:PATH=//p' "$build/CMakeCache.txt")
cp -r "${flatbuffers:-/usr/include}/flatbuffers" "$out/include/"

# Keeps only the exported cases whose program delegates to `backend`.
keep_delegated() {
  local dir=$1 backend=$2 kept=0 dropped=0
  for case in "$dir"/*/; do
    if grep -qa "$backend" "$case/program.kiln"; then kept=$((kept + 1)); else rm -rf "$case"; dropped=$((dropped + 1)); fi
  done
  echo "$dir: $kept cases delegate to $backend ($dropped CPU-only cases left out)"
}

if [ "${NODE_TESTS:-1}" != 0 ]; then
  log "ONNX node tests for --target cuda:0,cpu (planned and checked here under the host execution model)"
  KILN_CUDA_EXECUTION=host "$build/tests/kiln_onnx_node_tests" --target cuda:0,cpu --export "$out/node" | tail -1
  keep_delegated "$out/node" cuda
  for precision in ${NODE_PRECISIONS-fp16 bf16}; do
    log "ONNX node tests for --target cuda:0,cpu --precision $precision"
    KILN_CUDA_EXECUTION=host "$build/tests/kiln_onnx_node_tests" --target cuda:0,cpu --precision "$precision" \
      --export "$out/node_$precision" | tail -1
    keep_delegated "$out/node_$precision" cuda
  done
  if [ "${VULKAN:-1}" != 0 ]; then
    log "ONNX node tests for --target vulkan:0,cpu"
    lavapipe=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -1 || true)
    VK_ICD_FILENAMES=${lavapipe:-${VK_ICD_FILENAMES:-}} "$build/tests/kiln_onnx_node_tests" --target vulkan:0,cpu \
      --export "$out/node_vulkan" | tail -1
    keep_delegated "$out/node_vulkan" vulkan
  fi
fi

if [ "${COLLECTIVES:-1}" != 0 ]; then
  log "collectives: the tensor-parallel MLP for cuda:0,cpu on 2 ranks (one-shot, two-shot)"
  c=$out/collectives
  mkdir -p "$c/models"
  "$py" tests/collectives/make_models.py "$c/models" >/dev/null
  cp "$c/models/mlp_gemm.input.npy" "$c/input.npy"
  "$build/bin/kiln" plan "$c/models/mlp_gemm.onnx" -o "$c/models/mlp.kiln" >/dev/null
  "$build/bin/kiln" run "$c/models/mlp.kiln" --input "$c/input.npy" --output-dir "$c/models/out" >/dev/null
  cp "$c/models/out/output_0.npy" "$c/expected.npy"
  for mode in one-shot two-shot; do
    "$build/bin/kiln" plan "$c/models/mlp_gemm.onnx" -o "$c/mlp.tp2.$mode.kiln" --target cuda:0,cpu \
      --tensor-parallel 2 --allreduce "$mode" >/dev/null
  done
  rm -rf "$c/models"
  ls "$c"
fi

models=${MODELS-mobilenet_v2,resnet18,encoder_block}
gemm=${GEMM-4096}
if [ -n "$models" ] || [ "$gemm" != 0 ]; then
  log "models: ${models:-none}; GEMM ${gemm}"
  "$py" bench/cuda_models.py bundle --kiln "$build/bin/kiln" --out "$out/models" --models "$models" \
    --vulkan-models "${VULKAN_MODELS-encoder_block}" --precision-models "${PRECISION_MODELS-mobilenet_v2:fp16,encoder_block}" \
    --gemm "$gemm"
fi

cuda_version=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
  echo "cuda $cuda_version"
  echo "runner ${KILN_RUNNER:-built for sm_90}"
  echo "node cases $(find "$out" -path "$out/node/*/program.kiln" | wc -l)"
  echo "vulkan node cases $(find "$out" -path "$out/node_vulkan/*/program.kiln" | wc -l)"
  echo "16-bit node cases $(find "$out" -path "$out/node_[fb][pf]16/*/program.kiln" | wc -l)"
  echo "models ${models:-none}"
  echo "gemm $gemm"
  echo "collectives $(ls "$out/collectives" 2>/dev/null | grep -c '\.kiln$')"
} >"$out/MANIFEST"
cat "$out/MANIFEST"
log "packing (gzip -9: about 1.5 minutes, 1 MiB smaller than the default level)"
tar -C "$out" -cf - . | gzip -9 >"$out.tar.gz"
packed=$(stat -c %s "$out.tar.gz")
echo "bundle: $(du -sh "$out" | cut -f1) unpacked, $((packed / 1048576)) MiB packed ($out.tar.gz; limit $limit_mb MiB)"
if [ "$packed" -gt $((limit_mb * 1048576)) ]; then
  echo "the packed bundle is over $limit_mb MiB (64 MiB travel, the working tree's ${tree_mb:-?} MiB with it): carry fewer models (MODELS=...) or make two bundles" >&2
  exit 1
fi
