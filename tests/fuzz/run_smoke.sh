#!/usr/bin/env bash
# usage: run_smoke.sh FUZZER CORPUS WORKDIR RUNS
# Runs FUZZER for RUNS executions seeded with CORPUS (copied into WORKDIR),
# one process, fixed seed. Fails on any crash, leak or sanitizer report.
set -euo pipefail
fuzzer=$1 corpus=$2 work=$3 runs=$4
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp "$corpus"/* "$work/corpus/"
"$fuzzer" -runs="$runs" -seed=1 -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" 2>"$work/log" || {
  tail -n 40 "$work/log"
  exit 1
}
grep -E '^(Done|#[0-9]+ +DONE)' "$work/log" | tail -n 1
