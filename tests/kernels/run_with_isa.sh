#!/usr/bin/env bash
# Runs a test command with the kernels forced onto one CPU path
# (KILN_ISA=PATH), or reports it skipped (exit 77, which CTest's
# SKIP_RETURN_CODE turns into a skip) where the processor lacks that path.
#
# usage: run_with_isa.sh PATH KILN_ISA_PROBE COMMAND [ARGS...]
set -euo pipefail
isa=$1 probe=$2
shift 2
status=0
"$probe" "$isa" || status=$?
if [ "$status" -ne 0 ]; then exit "$status"; fi
export KILN_ISA=$isa
active=$("$probe")
echo "KILN_ISA=$isa: $active"
case "$active" in
  *"active $isa") ;;
  *) echo "the kernels did not take the $isa path" >&2; exit 1 ;;
esac
exec "$@"
