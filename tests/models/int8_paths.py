#!/usr/bin/env python3
"""An int8 program gives the same bytes on every host path of the kernels:
each of MLPerf Tiny's int8 models (and a MobileNetV2 block, a grouped one), planned with
--quantized-io so that it takes and gives the 8-bit data, runs on the scalar
loops, AVX2 and AVX-512 (VNNI where the processor has it) and the outputs
must be identical, byte for byte. A path the processor lacks is reported
skipped. The int8 products accumulate in int32 and requantize with one
integer rounding (kiln/kernels/qgemm.h), so no path may differ; the NEON
path is checked the same way under qemu-aarch64 (ctest arm64.neon.int8) and
the Cortex-M one by the firmware images' self-tests, made here, with
tolerance 0 (examples/firmware_int8).

usage: int8_paths.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import qdq_models  # noqa: E402
from kiln_checks import expect, finish, test_args  # noqa: E402

PATHS = ["scalar", "avx2", "avx512"]


def run_path(kiln, program, inp, out_dir, isa):
    """The output bytes on one path; None when the processor lacks it."""
    done = subprocess.run([kiln, "run", program, "--input", inp, "--output-dir", out_dir, "--isa", isa],
                          capture_output=True, text=True)
    if done.returncode != 0:
        if "lacks" in done.stderr or "not available" in done.stderr or "does not have" in done.stderr:
            return None
        raise SystemExit(f"kiln run --isa {isa} failed: {done.stderr}")
    return open(os.path.join(out_dir, "output_0.npy"), "rb").read()


def main():
    args = test_args(with_only=True)
    skipped = 0
    for name, (_, shape) in qdq_models.MODELS.items():
        if args.only and name != args.only:
            continue
        path, inp, _ = qdq_models.export(name, shape, args.workdir)
        program = os.path.join(args.workdir, name + "_int8.kiln")
        subprocess.run([args.kiln, "plan", path, "-o", program, "--quantized-io"], check=True,
                       stdout=subprocess.DEVNULL)
        outputs = {}
        for isa in PATHS:
            got = run_path(args.kiln, program, inp, os.path.join(args.workdir, f"{name}_{isa}"), isa)
            if got is None:
                print(f"SKIP {name} on {isa}: the processor lacks it")
                skipped += 1
            else:
                outputs[isa] = got
        reference = outputs["scalar"]
        same = [isa for isa, got in outputs.items() if got == reference]
        detail = ""
        for isa, got in outputs.items():
            if got != reference:
                a = np.frombuffer(reference[128:], dtype=np.int8).astype(int)
                b = np.frombuffer(got[128:], dtype=np.int8).astype(int)
                detail += f"{isa}: {int(np.sum(a != b))} bytes differ, at most {int(np.max(np.abs(a - b)))} steps; "
        expect(f"{name}: the same bytes on {', '.join(outputs)}", len(same) == len(outputs), detail)
    sys.exit(finish(skipped))


if __name__ == "__main__":
    main()
