#!/usr/bin/env bash
# The CUDA (and Vulkan) delegate on a real GPU, in one go of at most 8
# minutes: what no CI machine of this project can run. Plan and build here,
# run there:
#
#   bench/cuda_bundle.sh bundle/cuda          here: plans, builds kiln-runner
#                                             for sm_90, packs bundle/cuda.tar.gz
#   bench/cuda_gpu.sh bundle/cuda.tar.gz [RESULTS]    on the GPU machine
#   bench/cuda_gpu.sh --dry-run bundle/cuda [RESULTS] here, up to the GPU boundary
#
# Everything the script prints also goes, as it goes, into RESULTS (default
# $OUT/cuda_gpu_results.md where $OUT is set, else build/cuda_gpu_results.md),
# so a run cut short still returns what it measured. Steps, most important
# first, each under its own time limit (seconds, in brackets) and allowed to
# fail alone; a summary table closes the file:
#   1. gpu        nvidia-smi; the driver must run the CUDA the bundle was
#                 built with (its MANIFEST) and the GPU must be sm_90: one
#                 line starting "STOP:" and exit 3 otherwise (unless this
#                 machine's own nvcc can build kiln-runner for it, which it
#                 then does: KILN_CUDA_ARCHITECTURES=native);
#   2. node       the ONNX node tests planned for cuda:0,cpu, each run three
#                 times (direct launches, CUDA graph capture, replay), every
#                 run checked against ONNX's expected outputs [75];
#   2b. node16    the same node tests planned with --precision fp16 and bf16
#                 (16-bit storage, cuBLASLt CUDA_R_16F/16BF), one run each,
#                 within the storage's rounding: 4u of the element plus 4u of
#                 the output's largest (u = 2^-11, 2^-8; kiln_onnx_node_tests
#                 --precision) [25];
#   3. models     mobilenet_v2, resnet18, the encoder block: kiln on cuda:0
#                 against kiln on the CPU (1e-4, FP32) and PyTorch, batch-1
#                 latency beside PyTorch eager and
#                 torch.compile(mode="reduce-overhead"), each torch column
#                 allowed to fail alone (bench/cuda_models.py run) [180];
#   3b. models16  the encoder block planned with --precision fp16 and
#                 bf16, mobilenet_v2 with fp16, against kiln on the CPU, within
#                 the bound the bundle states per model (2u sqrt(k + 1), k
#                 the kernels that round to 16 bits), beside PyTorch eager
#                 and torch.compile in the same precision [90];
#   4. gemm       one 4096^3 GEMM's TFLOP/s through kiln (cuBLASLt) beside
#                 torch.matmul, in FP32, TF32, FP16 and BF16 (kiln plan
#                 --precision; bench/cuda_models.py gemm) [45];
#   5. bandwidth  element-wise kernels against a device-to-device copy
#                 (bench/cuda_bandwidth.cu; target: 85% of the copy) [20];
#   6. vulkan     the node tests and the encoder block planned for
#                 vulkan:0,cpu on the same GPU through NVIDIA's Vulkan driver
#                 and the carried loader (lib/libvulkan.so.1), latency beside
#                 step 3's CUDA figure [75];
#   7. collectives  bench/cuda_collectives.sh BUNDLE (with --dry-run when
#                 this is one), where that script exists: two processes on
#                 the GPU through the cuda-ipc communicator run the
#                 tensor-parallel MLP with both all-reduce kernels, then
#                 time the kernels for 4 KB to 64 MB beside a device copy
#                 and a one-rank ncclAllReduce [60].
#   8. nccl       the nccl communicator on one rank (bin/nccl_communicator_test,
#                 where the bundle carries it): a zeroed arena, device_peers
#                 (one peer, the local copy), all-reduces through all_reduce()
#                 and through ncclAllReduce captured into a CUDA graph and
#                 replayed; NCCL from PyTorch's nvidia-nccl wheel (2.28 or
#                 later), MPI from the machine: skipped (77), saying which
#                 library is missing, where either is not found [20].
# STEPS="node models ..." picks steps (gpu always runs). Exit 1 when a step
# failed or timed out. PYTHON: the Python with numpy and PyTorch (default:
# the first of python3 and /usr/bin/python3 with numpy); KILN_NO_TORCH=1
# leaves PyTorch's columns out.
#
# --dry-run (no GPU needed): the same steps through the carried kiln-runner
# under the host execution model (KILN_CUDA_EXECUTION=host: kernels run on
# the CPU, Gemm on the reference kernel): the node tests three runs each
# (direct, captured, replayed), the models and GEMM chains loaded and bound
# only (a model takes minutes there), the bandwidth binary not run, PyTorch
# left out, Vulkan on lavapipe where it is installed (the encoder block run
# there once).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
dry=0
if [ "${1:-}" = --dry-run ]; then
  dry=1
  shift
fi
if [ $# -lt 1 ] || [ ! -e "$1" ]; then
  echo "usage: bench/cuda_gpu.sh [--dry-run] BUNDLE[.tar.gz] [RESULTS]   (BUNDLE: made by bench/cuda_bundle.sh)" >&2
  exit 2
fi
results=${2:-${OUT:-build}/cuda_gpu_results.md}
work=${KILN_GPU_WORK:-build/cuda-gpu}
py=${PYTHON:-}
if [ -z "$py" ]; then  # the first Python with numpy
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c "import numpy" 2>/dev/null; then py=$candidate && break; fi
  done
fi
py=${py:-python3}
mkdir -p "$work" "$(dirname "$results")"
exec > >(tee -a "$results") 2>&1
log() { printf '\n## %s\n\n' "$*"; }
summary=()
failed=0

# step NAME SECONDS COMMAND...: runs COMMAND under a time limit, records how it ended.
# The limits are the GPU machine's budget; a dry run emulates the kernels on
# the host's few cores, often beside a build, so it allows
# KILN_DRY_RUN_SLACK (default 6) times as long.
step() {
  local name=$1 limit=$2 start=$SECONDS status
  shift 2
  [ $dry = 1 ] && limit=$((limit * ${KILN_DRY_RUN_SLACK:-6}))
  log "$name (at most ${limit} s)"
  timeout --kill-after=5 "$limit" "$@"
  status=$?
  local took=$((SECONDS - start)) how=passed
  if [ $status -eq 124 ] || [ $status -eq 137 ]; then
    how="TIMED OUT"
  elif [ $status -eq 77 ]; then
    how=skipped
  elif [ $status -ne 0 ]; then
    how="FAILED ($status)"
  fi
  [ "$how" = passed ] || [ "$how" = skipped ] || failed=1
  summary+=("| $name | $how | $took |")
  echo "[$name: $how in $took s]"
}

want() { [[ " ${STEPS:-node node16 models models16 gemm bandwidth vulkan collectives nccl} " == *" $1 "* ]]; }

echo "# bench/cuda_gpu.sh $([ $dry = 1 ] && echo '--dry-run ')$1"
echo "started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n); tree $(git rev-parse HEAD 2>/dev/null || echo '(not a git checkout)')"
if [ -f "$1" ]; then
  bundle=$work/bundle
  rm -rf "$bundle" && mkdir -p "$bundle" && tar -xzf "$1" -C "$bundle" || { echo "STOP: cannot unpack $1"; exit 2; }
else
  bundle=$(cd "$1" && pwd)
fi
echo '```'
cat "$bundle/MANIFEST"
echo '```'
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
runner=$bundle/bin/kiln-runner
unset KILN_CUDA_EXECUTION
[ $dry = 1 ] && export KILN_CUDA_EXECUTION=host

# Builds kiln-runner here (no planner, no flatc: the bundle's headers) for this GPU.
build_runner_here() {
  local nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  [ -x "$nvcc" ] || return 1
  cmake -S . -B "$work/runner" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_PLANNER=OFF -DKILN_BUILD_TESTS=OFF \
    -DKILN_BUILD_RUNNER=ON -DKILN_WITH_CUDA=ON -DKILN_WITH_VULKAN=OFF -DKILN_CUDA_ARCHITECTURES=native \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DKILN_SCHEMA_GENERATED_DIR="$bundle/schema" \
    -DKILN_FLATBUFFERS_INCLUDE_DIR="$bundle/include" >/dev/null &&
    cmake --build "$work/runner" --target kiln_runner >/dev/null && runner=$work/runner/bin/kiln-runner
}

# cuBLASLt of the carried runner's CUDA major version, where the loader does
# not find it: the toolkit's lib64, or PyTorch's pip wheel (nvidia/cublas).
find_cublas() {
  local want dir
  want=$(ldd "$runner" 2>/dev/null | sed -n 's/^\s*\(libcublasLt\.so\.[0-9]*\) => not found.*/\1/p')
  [ -n "$want" ] || return 0
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $("$py" -c "import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], 'lib'))" 2>/dev/null); do
    if [ -e "$dir/$want" ]; then
      export LD_LIBRARY_PATH="$dir:$LD_LIBRARY_PATH"
      echo "$want from $dir"
      return 0
    fi
  done
  echo "$want not found (the toolkit's lib64 or PyTorch's nvidia-cublas wheel)"
}

# The GPU, the driver, and whether the carried kiln-runner can run on them.
check_gpu() {
  if [ $dry = 1 ]; then
    echo "dry run: no GPU; the host execution model runs the kernels (timings, PyTorch and the driver check left out)"
    "$runner" isa
    return
  fi
  nvidia-smi || { echo "STOP: nvidia-smi failed: no NVIDIA driver or GPU here"; exit 3; }
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm --format=csv
  local have need cap
  have=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\)\.[0-9]*.*/\1/p' | head -1)
  need=$(sed -n 's/^cuda \([0-9]*\)\..*/\1/p' "$bundle/MANIFEST")
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
  find_cublas
  if [ "${have:-0}" -ge "${need:-0}" ] && [ "$cap" = 9.0 ] && "$runner" isa; then
    echo "the carried kiln-runner (CUDA $need, sm_90) runs here"
    return
  fi
  echo "the carried kiln-runner cannot run here (driver's CUDA ${have:-?}, bundle's CUDA ${need:-?}, GPU sm_${cap/./}): building one with this machine's nvcc"
  build_runner_here && "$runner" isa && return
  echo "STOP: the driver runs CUDA ${have:-?} and this GPU is sm_${cap/./}; the bundle needs CUDA ${need:-?} on sm_90, and no nvcc here builds kiln-runner for it"
  exit 3
}

check_gpu
summary+=("| gpu | passed | - |")

node_cases=$(find "$bundle/node" -name program.kiln 2>/dev/null | wc -l)
# Shell functions run under `timeout` through bash -c (timeout signals the whole step).
vulkan_runs=
[ $dry = 1 ] && vulkan_runs="--runs 2"
export bundle work runner dry py vulkan_runs
if want node && [ "$node_cases" -gt 0 ]; then
  step node 75 "$runner" check "$bundle/node" --runs 3 --min-cases "$node_cases"
fi
# 4u, u the unit roundoff of each 16-bit storage.
node16() {
  local precision u cases
  set -o pipefail
  for precision in fp16 bf16; do
    [ -d "$bundle/node_$precision" ] || continue
    u=$([ $precision = fp16 ] && echo 0.001953125 || echo 0.015625)
    cases=$(find "$bundle/node_$precision" -name program.kiln | wc -l)
    echo "$precision: $cases cases"
    "$runner" check "$bundle/node_$precision" --rtol $u --norm-atol $u --min-cases "$cases" 2>&1 | tail -15 || return 1
  done
}
export -f node16
if want node16 && { [ -d "$bundle/node_fp16" ] || [ -d "$bundle/node_bf16" ]; }; then
  step node16 25 bash -c node16
fi

torch_flag=()
if [ $dry = 1 ] || [ "${KILN_NO_TORCH:-0}" = 1 ]; then
  torch_flag=(--no-torch)
elif ! "$py" -c "import numpy, torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "no PyTorch with CUDA and torchvision for $py: PyTorch's columns left out"
  torch_flag=(--no-torch)
fi
runs_flag=
[ $dry = 1 ] && runs_flag="--load-only"

if want models && [ -d "$bundle/models" ]; then
  step models 180 "$py" bench/cuda_models.py run --runner "$runner" --bundle "$bundle/models" \
    --workdir "$work/models" $runs_flag ${torch_flag[@]+"${torch_flag[@]}"}
fi

models16() {
  local precision status=0
  for precision in fp16 bf16; do
    ls "$bundle"/models/*/program_$precision.kiln >/dev/null 2>&1 || continue
    echo "$precision:"
    # shellcheck disable=SC2086 # the flags are single words or none
    "$py" bench/cuda_models.py run --runner "$runner" --bundle "$bundle/models" --workdir "$work/models_$precision" \
      --program "program_$precision.kiln" --runs 30 $runs_flag $torch_args || status=1
  done
  return $status
}
export -f models16
torch_args="${torch_flag[*]-}"
export runs_flag torch_args
if want models16 && [ -n "$(ls "$bundle"/models/*/program_*16.kiln 2>/dev/null)" ]; then
  step models16 90 bash -c models16
fi

# The dry run loads and binds the chains only (--runs 0): the host
# execution model's reference GEMM would take minutes over 4096^3.
gemm_dry() {
  local n
  n=$("$py" -c "import json; print(json.load(open('$bundle/gemm/meta.json'))['n'])") || return 1
  truncate -s $((n * n * 4)) "$work/gemm_x.bin" &&
    for chain in "$bundle"/gemm/chain_*.kiln; do
      "$runner" run "$chain" --input "$work/gemm_x.bin" --runs 0 || return 1
      echo "$(basename "$chain"): loads and binds"
    done
}
export -f gemm_dry
if want gemm && [ -d "$bundle/gemm" ]; then
  if [ $dry = 1 ]; then
    step gemm 45 bash -c gemm_dry
  else
    step gemm 45 "$py" bench/cuda_models.py gemm --runner "$runner" --bundle "$bundle/gemm" --workdir "$work/gemm" \
      ${torch_flag[@]+"${torch_flag[@]}"}
  fi
fi

if want bandwidth; then
  if [ $dry = 1 ]; then
    step bandwidth 20 sh -c "test -x '$bundle/bin/cuda_bandwidth' && echo 'dry run: cuda_bandwidth carried, not run'"
  else
    step bandwidth 20 "$bundle/bin/cuda_bandwidth"
  fi
fi

# The NVIDIA Vulkan driver's manifest, or one written for its library
# (what NVIDIA's container toolkit mounts); lavapipe in the dry run.
vulkan_icd() {
  local f
  if [ $dry = 1 ]; then
    ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -1
    return
  fi
  for f in /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json \
    /usr/local/share/vulkan/icd.d/nvidia_icd*.json; do
    [ -f "$f" ] && { echo "$f"; return; }
  done
  if ldconfig -p 2>/dev/null | grep -q libGLX_nvidia.so.0; then
    printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "libGLX_nvidia.so.0", "api_version": "1.3"}}\n' \
      >"$work/nvidia_icd.json"
    echo "$work/nvidia_icd.json"
  fi
}
# What the manifest names, where the loader would find that library, and the
# device nodes: a container may have the manifest and the library but not the
# display devices NVIDIA's driver needs to make an instance.
vulkan_driver_report() {
  local lib
  echo '```'
  cat "$1"
  lib=$(sed -n 's/.*"library_path"[^"]*"\([^"]*\)".*/\1/p' "$1" | head -1)
  echo "library $lib: $( (ldconfig -p 2>/dev/null | grep -F "${lib##*/}" | head -3) || true)"
  echo "NVIDIA_DRIVER_CAPABILITIES=${NVIDIA_DRIVER_CAPABILITIES:-(unset)}"
  echo "device nodes: $(ls -d /dev/nvidia* /dev/dri 2>&1 | tr '\n' ' ')"
  echo '```'
}
vulkan_step() {
  local icd
  icd=$(vulkan_icd)
  if [ -z "$icd" ]; then
    echo "vulkan: no Vulkan driver found (nvidia_icd.json or libGLX_nvidia.so.0; lavapipe in a dry run): step skipped"
    return 77
  fi
  echo "VK_ICD_FILENAMES=$icd, loader $(ls "$bundle"/lib/libvulkan.so.1 2>/dev/null || echo 'of this machine')"
  vulkan_driver_report "$icd"
  local first
  first=$(find "$bundle/node_vulkan" -name program.kiln 2>/dev/null | sort | head -1)
  if [ -n "$first" ] && ! VK_ICD_FILENAMES=$icd "$runner" run "$first" --input "${first%/*}/input_0.bin" --runs 1 >/dev/null 2>&1; then
    echo "the first case fails; the Vulkan loader's account of it:"
    VK_ICD_FILENAMES=$icd VK_LOADER_DEBUG=error,warn,driver "$runner" run "$first" --input "${first%/*}/input_0.bin" --runs 1 2>&1 | tail -25
  fi
  local status=0 cases
  cases=$(find "$bundle/node_vulkan" -name program.kiln 2>/dev/null | wc -l)
  if [ "$cases" -gt 0 ]; then
    VK_ICD_FILENAMES=$icd "$runner" check "$bundle/node_vulkan" --runs 2 --min-cases "$cases" 2>&1 | tail -15 ||
      status=1
  fi
  if [ -n "$(find "$bundle/models" -name program_vulkan.kiln 2>/dev/null)" ]; then
    VK_ICD_FILENAMES=$icd "$py" bench/cuda_models.py run --runner "$runner" --bundle "$bundle/models" \
      --program program_vulkan.kiln --device vulkan:0 --workdir "$work/models_vulkan" --no-torch \
      $vulkan_runs || status=1
    echo "(kiln on cuda:0 for the same models: the models table above)"
  fi
  return $status
}
export -f vulkan_icd vulkan_driver_report vulkan_step
if want vulkan; then
  step vulkan 75 bash -c vulkan_step
fi

# Another script's collectives step (symmetric buffers on the GPU), where it exists.
if want collectives && [ -x bench/cuda_collectives.sh ]; then
  dry_flag=()
  [ $dry = 1 ] && dry_flag=(--dry-run)
  step collectives 60 bench/cuda_collectives.sh ${dry_flag[@]+"${dry_flag[@]}"} "$bundle"
fi

# One rank of the nccl communicator, where the bundle carries its test and
# the libraries it needs (NCCL, MPI, the CUDA runtime) load here.
nccl_step() {
  local test=$bundle/bin/nccl_communicator_test dir missing
  [ -x "$test" ] || { echo "nccl: the bundle carries no nccl_communicator_test (built without KILN_WITH_NCCL)"; return 77; }
  if [ "$dry" = 1 ]; then
    echo "nccl: dry run: carried, not run (the host execution model has no NCCL)"
    return 77
  fi
  dir=$("$py" -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
  [ -n "$dir" ] && export LD_LIBRARY_PATH="$dir:$LD_LIBRARY_PATH"
  missing=$(ldd "$test" 2>/dev/null | sed -n 's/^\s*\(\S*\) => not found.*/\1/p' | tr '\n' ' ')
  if [ -n "$missing" ]; then
    echo "nccl: skipped: $missing not found here (NCCL from PyTorch's nvidia-nccl wheel, MPI and the CUDA runtime)"
    return 77
  fi
  "$test"
}
export -f nccl_step
if want nccl; then
  step nccl 20 bash -c nccl_step
fi

log summary
echo "| step | result | seconds |"
echo "|---|---|---|"
printf '%s\n' "${summary[@]}"
echo
echo "finished $(date -u +%Y-%m-%dT%H:%M:%SZ) after $SECONDS s; results in $results"
exit $failed
