#!/usr/bin/env python3
"""The documented install of the Python package (`pip install
--no-build-isolation ./python`, docs/python.md), into a fresh directory
(pip --target) from a copy of python/, against this build tree: it must
work offline with Debian's setuptools, install the module without its debug
information, and the installed package must plan and run a model.

    install_test.py --build BUILD_DIR --workdir DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECK = """
import numpy as np, onnx, kiln
from onnx import helper, TensorProto
assert kiln.__file__.startswith(%(site)r), kiln.__file__
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
program = kiln.plan(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
(y,) = program(x)
assert np.array_equal(y, np.maximum(x, 0)), y
print("installed kiln plans and runs")
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    work = os.path.abspath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    source, site = os.path.join(work, "python"), os.path.join(work, "site")
    # A copy, so pip's build files stay out of the checkout.
    shutil.copytree(os.path.join(ROOT, "python"), source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, KILN_SOURCE_DIR=ROOT, KILN_BUILD_DIR=os.path.abspath(args.build),
               PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--quiet",
                    "--target", site, source], check=True, env=env)
    installed = [f for f in os.listdir(os.path.join(site, "kiln")) if f.startswith("_kiln.")]
    built = [f for f in os.listdir(os.path.join(args.build, "python", "kiln")) if f.startswith("_kiln.")]
    if installed != built:
        sys.exit(f"FAIL: installed module {installed}, built {built}")
    size = os.path.getsize(os.path.join(site, "kiln", installed[0]))
    built_size = os.path.getsize(os.path.join(args.build, "python", "kiln", built[0]))
    if not size < built_size:
        sys.exit(f"FAIL: the installed module ({size} bytes) keeps the build's debug information ({built_size})")
    for name in ("__init__.py", "program.py", "errors.py", "py.typed"):
        if not os.path.exists(os.path.join(site, "kiln", name)):
            sys.exit(f"FAIL: the install has no kiln/{name}")
    check_env = dict(os.environ, PYTHONPATH=site)
    subprocess.run([sys.executable, "-s", "-c", CHECK % {"site": site}], check=True, env=check_env, cwd=work)
    print(f"PASS: pip installed kiln into {site} (module {size:,} bytes, {built_size:,} in the build)")


if __name__ == "__main__":
    main()
