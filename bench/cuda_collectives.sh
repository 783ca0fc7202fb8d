#!/usr/bin/env bash
# The GPU check's collectives step (bench/cuda_gpu.sh step 7, 60 s): two
# processes on the one GPU, started by scripts/kiln-ranks (no MPI there),
# sharing symmetric arenas through the cuda-ipc communicator (CUDA virtual
# memory exported as file descriptors):
#
#   bench/cuda_collectives.sh [--dry-run] BUNDLE[.tar.gz]
#
#   1. tp-mlp   the tensor-parallel MLP the bundle carries (collectives/:
#               planned here for cuda:0,cpu with --tensor-parallel 2, once
#               with --allreduce one-shot and once two-shot) through the
#               carried kiln-runner, 3 executes each (direct, captured,
#               replayed); both ranks' outputs within 1e-5 relative of the
#               single-rank CPU program's (computed here when bundled);
#   2. timing   kiln-runner all-reduce-bench (bench/cuda_allreduce): both
#               kernels checked element by element
#               and timed for 4 KB to 64 MB, beside a device-to-device copy
#               of the same bytes and ncclAllReduce on one rank where NCCL
#               loads (PyTorch's nvidia-nccl wheel; left out, saying why,
#               where it does not). Two processes on one GPU run at once
#               only under MPS: it is started for this (in a directory of
#               its own, stopped after) where nvidia-cuda-mps-control
#               exists; otherwise, or if that run fails, the GPU's time
#               slices interleave them and the figures say so.
#
# --dry-run (no GPU): the same under the host execution model
# (KILN_CUDA_EXECUTION=host: memfd stands in for the GPU's memory), timing
# sizes up to 1 MB only, no MPS, no NCCL. Exit 77 (skipped) for a bundle
# made before collectives/ existed; 1 when a check failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
dry=0
if [ "${1:-}" = --dry-run ]; then
  dry=1
  shift
fi
if [ $# -lt 1 ] || [ ! -e "$1" ]; then
  echo "usage: bench/cuda_collectives.sh [--dry-run] BUNDLE[.tar.gz]" >&2
  exit 2
fi
work=${KILN_GPU_WORK:-build/cuda-gpu}/collectives
mkdir -p "$work"
if [ -f "$1" ]; then
  bundle=$work/bundle
  rm -rf "$bundle" && mkdir -p "$bundle" && tar -xzf "$1" -C "$bundle" || { echo "cannot unpack $1"; exit 2; }
else
  bundle=$(cd "$1" && pwd)
fi
if [ ! -d "$bundle/collectives" ]; then
  echo "skipped: this bundle carries no collectives (made before bench/cuda_bundle.sh added them)"
  exit 77
fi
py=${py:-}
if [ -z "$py" ]; then
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c "import numpy" 2>/dev/null; then py=$candidate && break; fi
  done
fi
py=${py:-python3}
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
runner=${runner:-$bundle/bin/kiln-runner}
unset KILN_CUDA_EXECUTION
[ $dry = 1 ] && export KILN_CUDA_EXECUTION=host
# A kernel waits for its peer at most this long before it fails the launch.
export KILN_COLLECTIVE_TIMEOUT_MS=${KILN_COLLECTIVE_TIMEOUT_MS:-15000}
ranks() { "$py" scripts/kiln-ranks -n 2 --max-seconds "$1" -- "${@:2}"; }
status=0

echo "### tp-mlp: the tensor-parallel MLP on 2 ranks through cuda-ipc"
c=$bundle/collectives
for mode in one-shot two-shot; do
  out=$work/mlp_$mode
  rm -rf "$out"_0 "$out"_1 && mkdir -p "$out"_0 "$out"_1
  ranks 30 "$runner" run "$c/mlp.tp2.$mode.kiln" --input "$c/input.npy" --output-dir "${out}_{rank}" --runs 3 \
    >"$out.log" 2>&1
  ran=$?
  grep -v '^\[kiln I' "$out.log"
  if [ $ran -ne 0 ]; then
    echo "FAIL: tp-mlp $mode: the ranks failed (status $ran)"
    status=1
    continue
  fi
  "$py" - "$c/expected.npy" "$out" "$mode" <<'EOF' || status=1
import sys
import numpy as np
want = np.load(sys.argv[1]).astype(np.float32)
errors = []
for r in range(2):
    got = np.fromfile(f"{sys.argv[2]}_{r}/output_0.bin", dtype=np.float32)
    if got.size != want.size:
        sys.exit(f"FAIL: tp-mlp {sys.argv[3]}: rank {r} wrote {got.size} floats, not {want.size}")
    errors.append(float(np.max(np.abs(got - want.ravel())) / max(float(np.max(np.abs(want))), 1e-30)))
ok = max(errors) <= 1e-5
print(f"{'ok' if ok else 'FAIL'}: tp-mlp {sys.argv[3]} kernels: ranks 0 and 1 within {max(errors):.1e} relative "
      f"of the single-rank CPU program (bound 1e-5)")
sys.exit(0 if ok else 1)
EOF
done

echo
echo "### timing: the all-reduce kernels across 2 processes, beside a device copy and NCCL"
args=()
if [ $dry = 1 ]; then
  args=(--max-bytes 1048576 --iterations-bytes 4194304)
else
  nccl=$("$py" -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" \
    2>/dev/null || true)
  [ -n "$nccl" ] && [ -e "$nccl" ] && args+=(--nccl "$nccl")
fi
timed=0
if [ $dry = 0 ] && command -v nvidia-cuda-mps-control >/dev/null; then
  mps=$(mktemp -d "${TMPDIR:-/tmp}/kiln-mps.XXXXXX")
  export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    echo "(MPS started: both processes' kernels run at once)"
    ranks 25 "$runner" all-reduce-bench "${args[@]}" && timed=1
    echo quit | nvidia-cuda-mps-control
    sleep 1
  else
    echo "(MPS would not start)"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  rm -rf "$mps"
  [ $timed = 1 ] || echo "(the run under MPS failed: again without it, to 16 MB)"
  [ $timed = 1 ] || args+=(--max-bytes 16777216)
fi
if [ $timed = 0 ]; then
  [ $dry = 0 ] && echo "(no MPS: the two processes' kernels share the GPU by time slices; the figures include them)"
  ranks 25 "$runner" all-reduce-bench "${args[@]}" || status=1
fi
exit $status
