#!/usr/bin/env python3
"""kiln as a user gets it: the C API test against the build tree, then
`cmake --install` into a fresh prefix and an application built against the
installed package only (examples/app with find_package(kiln), and again with
pkg-config), planning with the installed CLI and checking the output
against PyTorch's.

    install_test.py --build BUILD_DIR --capi-test CAPI_TEST --workdir DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--capi-test", required=True)
    parser.add_argument("--workdir", required=True)
    # The build's sanitizers (KILN_SANITIZE): its installed libraries are
    # instrumented, so the applications built against them are too.
    parser.add_argument("--sanitize", default="")
    args = parser.parse_args()
    sanitize = [f"-fsanitize={args.sanitize}"] if args.sanitize else []
    work = os.path.abspath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    prefix = os.path.join(work, "prefix")
    demo = os.path.join(work, "demo")

    run(["cmake", "--install", args.build, "--prefix", prefix], stdout=subprocess.DEVNULL)
    kiln = os.path.join(prefix, "bin", "kiln")
    for path in ["include/kiln/kiln.h", "lib/libkiln_c.a", "lib/libkiln_runtime.a", "lib/libkiln_cpu_kernels.a",
                 "lib/cmake/kiln/kilnConfig.cmake", "lib/pkgconfig/kiln.pc", "bin/kiln"]:
        if not os.path.exists(os.path.join(prefix, path)):
            sys.exit(f"FAIL: the install has no {path}")

    run([sys.executable, os.path.join(ROOT, "examples", "demo", "make_model.py"), demo], stdout=subprocess.DEVNULL)
    program = os.path.join(work, "demo.kiln")
    run([kiln, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", program], stdout=subprocess.DEVNULL)
    x = np.load(os.path.join(demo, "input.npy")).astype(np.float32)
    want = np.load(os.path.join(demo, "expected.npy")).astype(np.float32)
    x.tofile(os.path.join(work, "input.bin"))
    want.tofile(os.path.join(work, "expected.bin"))

    # The C API from C99, in the build tree; and with the program planned
    # into two memory regions (two host arenas, each named).
    run([args.capi_test, program, os.path.join(work, "input.bin"), os.path.join(work, "expected.bin")])
    regions = os.path.join(work, "demo_regions.kiln")
    run([kiln, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", regions, "--memory-region", "tcm:32K:fast",
         "--memory-region", "sram:1M"], stdout=subprocess.DEVNULL)
    run([args.capi_test, regions, os.path.join(work, "input.bin"), os.path.join(work, "expected.bin")])

    def check_output(path, how):
        got = np.fromfile(path, dtype=np.float32).reshape(want.shape)
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        print(f"{how}: max relative error against PyTorch {err:.2e}")
        if err > 1e-4:
            sys.exit(f"FAIL: {how} computes something else")

    # find_package(kiln) from the installed prefix only.
    app_build = os.path.join(work, "app-build")
    run(["cmake", "-S", os.path.join(ROOT, "examples", "app"), "-B", app_build, "-G", "Ninja",
         f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_C_FLAGS=" + " ".join(sanitize),
         "-DCMAKE_EXE_LINKER_FLAGS=" + " ".join(sanitize)], stdout=subprocess.DEVNULL)
    run(["cmake", "--build", app_build], stdout=subprocess.DEVNULL)
    out = os.path.join(work, "out_cmake.bin")
    run([os.path.join(app_build, "kiln_app"), program, os.path.join(work, "input.bin"), out])
    check_output(out, "examples/app via find_package(kiln)")

    # pkg-config, C compiler only.
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "kiln"], env=env, check=True, text=True,
                           stdout=subprocess.PIPE).stdout.split()
    exe = os.path.join(work, "kiln_app_pc")
    run(["cc", "-std=c99", "-D_POSIX_C_SOURCE=200112L", *sanitize, os.path.join(ROOT, "examples", "app", "app.c"),
         "-o", exe, *flags])
    out = os.path.join(work, "out_pc.bin")
    run([exe, program, os.path.join(work, "input.bin"), out])
    check_output(out, "examples/app via pkg-config")
    print("all checks passed")


if __name__ == "__main__":
    main()
