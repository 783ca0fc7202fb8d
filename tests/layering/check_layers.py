#!/usr/bin/env python3
"""Checks that the top-level folders form the one-way stack README.md's
Layout section describes, by reading every #include in the sources:

    schema <- platform <- runtime <- backends/common <- kernels <- capi, backends, comm
                                  \\------------------------------------- planner <- python

- nothing below includes anything above it (the runtime never includes the
  planner, the kernels, a backend or a communicator);
- backends/common, the layer the backends share, includes only the runtime
  and what is below it; the kernels and the backends may include it, nothing
  else;
- the planner includes no backend: backends reach it only through the
  generated registration (cmake/KilnBackends.cmake);
- a backend includes nothing of the planner but its one public header,
  kiln/planner/backend_planner.h;
- a backend includes nothing of another backend;
- capi/ (the C API) wraps the runtime and kernels and nothing else;
- comm/ (the communicators) includes nothing of the planner or a backend,
  but for the host execution model of CUDA (backends/cuda/hostexec/: the
  CUDA API over host memory, test infrastructure), which stands where the
  CUDA Toolkit's headers stand in a GPU build: cuda-ipc's calls are one
  source built over either (comm/cuda_ipc/src/cuda_ipc_driver.cc); of
  comm/, only the planner (kiln run) includes anything;
- python/ (the Python package's module) sits on the C API and the planner
  and includes no backend.

Prints one line per offending include and exits 1 when there is any.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAYERS = ["schema", "platform", "runtime", "backends-common", "kernels", "capi", "backends", "comm", "planner", "python"]
# Where each layer's files are, when not the folder of its name.
FOLDERS = {"backends-common": "backends/common"}
# What each folder may include besides itself.
ALLOWED = {
    "schema": set(),
    "platform": {"schema"},
    "runtime": {"schema", "platform"},
    "backends-common": {"schema", "platform", "runtime"},
    "kernels": {"schema", "platform", "runtime", "backends-common"},
    "capi": {"schema", "platform", "runtime", "kernels"},
    "backends": {"schema", "platform", "runtime", "backends-common", "kernels", "planner-api"},
    "comm": {"schema", "platform", "runtime", "kernels"},
    "planner": {"schema", "platform", "runtime", "kernels", "comm"},
    "python": {"schema", "platform", "runtime", "backends-common", "kernels", "capi", "planner", "planner-api"},
}
PUBLIC_PREFIXES = {
    "kiln/schema/": "schema",
    "kiln/platform/": "platform",
    "kiln/runtime/": "runtime",
    "kiln/kernels/": "kernels",
    "kiln/kiln.h": "capi",
    "kiln/backends/common/": "backends-common",
    "kiln/backends/": "backends",
    "kiln/comm/": "comm",
    "kiln/planner/backend_planner.h": "planner-api",
    "kiln/planner/": "planner",
    "backends/common/": "backends-common",
    "backends/": "backends",
    "comm/": "comm",
    "planner/": "planner",
    "runtime/": "runtime",
    "kernels/": "kernels",
    "platform/": "platform",
    "schema/": "schema",
}
# Includes a layer may make below what ALLOWED says: (layer, prefix).
CUDA_STAND_INS = {("comm", "backends/cuda/hostexec/")}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(include):
    for prefix, layer in PUBLIC_PREFIXES.items():
        if include.startswith(prefix):
            return layer
    return None  # a header of the including folder itself


def backend_of(path):
    parts = path.relative_to(ROOT).parts
    return parts[1] if parts[0] == "backends" and len(parts) > 1 else None


def files_of(layer):
    folder = ROOT / FOLDERS.get(layer, layer)
    for path in sorted(folder.rglob("*")):
        if path.suffix not in {".h", ".cc", ".cu", ".cuh"}:
            continue
        # A folder of its own layer inside this one (backends/common) is not this layer's.
        if any(path.is_relative_to(ROOT / f) for l, f in FOLDERS.items() if l != layer):
            continue
        yield path


def main():
    problems = []
    files = 0
    for layer in LAYERS:
        for path in files_of(layer):
            files += 1
            for include in INCLUDE.findall(path.read_text(errors="replace")):
                target = layer_of(include)
                if target == "planner-api" and layer == "planner":
                    continue
                if target is None or target == layer:
                    if layer == "backends" and target == "backends":
                        other = include.split("/")[1] if include.startswith("backends/") else include.split("/")[2]
                        if other != backend_of(path):
                            problems.append(f"{path.relative_to(ROOT)}: includes another backend's {include}")
                    continue
                if any(layer == l and include.startswith(prefix) for l, prefix in CUDA_STAND_INS):
                    continue
                if target not in ALLOWED[layer]:
                    problems.append(f"{path.relative_to(ROOT)}: {layer}/ must not include {include} ({target})")
    for p in problems:
        print(p)
    print(f"{files} files checked, {len(problems)} include(s) against the layering")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
