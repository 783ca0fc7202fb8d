"""Builds the kiln Python package: the compiled module (kiln._kiln) comes from
kiln's own CMake build, target kiln_python, and is copied beside the Python
sources.

    python3 -m pip install --no-build-isolation ./python

Environment:
    KILN_SOURCE_DIR  the kiln checkout (default: this folder's parent)
    KILN_BUILD_DIR   the CMake build tree to use (default: build/release of
                     this checkout, the one scripts/kiln-dev builds; made and
                     configured when missing)
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.environ.get("KILN_SOURCE_DIR") or os.path.dirname(HERE))


def run(command, **kwargs):
    print("+ " + " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)


def has_module_target(build):
    """Whether the CMake tree at `build` builds the module (target kiln_python)."""
    for name in ("build.ninja", "Makefile"):
        path = os.path.join(build, name)
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                return "kiln_python" in f.read()
    return False


class CMakeBuild(build_ext):
    """Builds target kiln_python in kiln's CMake tree instead of compiling
    sources itself."""

    def build_extension(self, ext):
        build = os.path.abspath(os.environ.get("KILN_BUILD_DIR") or os.path.join(ROOT, "build", "release"))
        env = dict(os.environ)
        # ccache keys on paths relative to the checkout, as scripts/kiln-dev sets it.
        env.setdefault("CCACHE_BASEDIR", ROOT)
        env.setdefault("CCACHE_NOHASHDIR", "true")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                         f"-DKILN_PYTHON={sys.executable}"]
            if shutil.which("ninja"):
                configure += ["-G", "Ninja"]
            if shutil.which("ccache"):
                configure += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
            run(configure, env=env)
        elif not has_module_target(build):
            # Configured before pybind11-dev or python3-dev was installed.
            run(["cmake", "-S", ROOT, "-B", build, "-DKILN_BUILD_PYTHON=ON"], env=env)
        run(["cmake", "--build", build, "--target", "kiln_python"], env=env)
        stage = os.path.join(build, "python", "kiln")
        module = [f for f in os.listdir(stage) if f.startswith("_kiln.") and f.endswith(".so")]
        if len(module) != 1:
            sys.exit(f"setup.py: no _kiln module in {stage}: configure the build with python3-dev and pybind11-dev")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(stage, module[0]), target)
        # The build keeps debug information; the installed module need not.
        if shutil.which("strip"):
            run(["strip", "--strip-debug", target])


setup(
    name="kiln",
    version="0.1.0",
    description="Plan ONNX models into programs with static memory plans, and run them",
    packages=["kiln"],
    package_data={"kiln": ["py.typed"]},
    ext_modules=[Extension("kiln._kiln", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
