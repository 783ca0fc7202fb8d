#!/usr/bin/env bash
# All-reduce latency, mpi-shm beside MPI_Allreduce, over 2, 4 and 8 host
# ranks (bench/RESULTS.md has the figures and what they mean).
#
#   bench/allreduce/run.sh [BUILD_DIR] [RANKS...]    default: build/release 2 4 8
#
# Builds kiln_allreduce_bench in BUILD_DIR (configured already) and runs it
# under mpirun, local only (shared memory and self), as root if need be,
# more ranks than cores allowed. Extra allreduce_bench arguments can go in
# BENCH_ARGS (--min-bytes, --max-bytes, --rounds).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build/release}
shift || true
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2 4 8)

cmake --build "$build" --target kiln_allreduce_bench >/dev/null
bench="$build/bench/allreduce/kiln_allreduce_bench"
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
echo "# $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# Open MPI $(mpirun --version | head -1 | awk '{print $NF}')"
for n in "${ranks[@]}"; do
  echo
  mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$n" "$bench" ${BENCH_ARGS:-}
done
