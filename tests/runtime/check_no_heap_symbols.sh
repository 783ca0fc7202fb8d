#!/usr/bin/env bash
# Fails when any object of the given static libraries references a heap or
# exception symbol: malloc, calloc, realloc, free, operator new/delete, or
# the C++ exception machinery. The runtime, platform layer and CPU
# kernels must have none.
set -euo pipefail
nm_tool=${NM:-nm}
status=0
for lib in "$@"; do
  if [ ! -f "$lib" ]; then
    echo "missing library: $lib" >&2
    exit 2
  fi
  hits=$("$nm_tool" -A -u "$lib" 2>/dev/null |
    awk '{print $NF, $1}' |
    grep -E '^(malloc|calloc|realloc|free|posix_memalign|aligned_alloc|_Znw[jm].*|_Zna[jm].*|_ZdlPv.*|_ZdaPv.*|__cxa_throw|__cxa_allocate_exception|__cxa_begin_catch|__gxx_personality_v0|_Unwind_Resume|__dynamic_cast|_ZTI.*) ' || true)
  if [ -n "$hits" ]; then
    echo "$lib references heap or exception symbols:" >&2
    echo "$hits" >&2
    status=1
  else
    echo "$lib: no heap or exception symbols"
  fi
done
exit $status
