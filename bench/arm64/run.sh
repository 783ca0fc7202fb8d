#!/usr/bin/env bash
# Guest instructions per inference of kiln's arm64 build under qemu-aarch64,
# NEON path against the scalar path, on mobilenet_v2, resnet18 and a
# BERT-width transformer encoder block (tests/arm64/export_models.py --set
# bench: random weights, planned by the host's kiln).
#
# Instruction counts are a proxy: QEMU's timing means nothing, and an
# executed-instruction count does not depend on the host's load, but it
# weighs a 4-lane FMLA like a scalar add and knows nothing of caches,
# pipelines or memory bandwidth. Real arm64 silicon decides real speed.
#
# Per model and path: kiln-runner run --runs 1 minus --runs 0 (the same
# process loading the program and binding its buffers, without executing),
# counted by bench/arm64/insn_count.c (a QEMU TCG plugin), so the figure is
# one inference: the first, with its one-time costs (under 0.1% on the demo
# model against the steady state). Each output is also checked against
# PyTorch's (kiln-runner check).
#
# usage: bench/arm64/run.sh [build/arm64] [build/release/bin/kiln]
# (needs the arm64 preset built: cmake --preset arm64 && cmake --build --preset arm64)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build/arm64}
kiln=${2:-$root/build/release/bin/kiln}
work=$build/bench
mkdir -p "$work"
cc -shared -fPIC -O2 -o "$work/insn_count.so" "$root/bench/arm64/insn_count.c"
[ -f "$work/models/encoder_block/program.kiln" ] ||
  /usr/bin/python3 "$root/tests/arm64/export_models.py" --kiln "$kiln" --out "$work/models" --set bench >/dev/null
qemu=(qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu)
runner=$build/bin/kiln-runner

count() {  # model path runs -> instructions
  KILN_ISA=$2 "${qemu[@]}" -plugin "$work/insn_count.so" -d plugin "$runner" run \
    "$work/models/$1/program.kiln" --input "$work/models/$1/input_0.bin" --runs "$3" 2>&1 |
    sed -n 's/^insns: //p'
}

printf '%-14s %-7s %16s %s\n' model path insns/inference "check against PyTorch"
for model in mobilenet_v2 resnet18 encoder_block; do
  for path in neon scalar; do
    base=$(count "$model" "$path" 0)
    one=$(count "$model" "$path" 1)
    check=$(KILN_ISA=$path "${qemu[@]}" "$runner" check "$work/models/$model" --rtol 1e-3 --atol 1e-4 | tail -1)
    printf '%-14s %-7s %16d %s\n' "$model" "$path" $((one - base)) "$check"
  done
done
