"""kiln from Python: plan an ONNX model into a program with static memory
plans, and run it on NumPy arrays.

    import kiln
    program = kiln.plan("model.onnx", input_shape={"x": (1, 3, 224, 224)})
    (y,) = program(x)
    program.save("model.kiln")
    program = kiln.load("model.kiln")
    int8 = kiln.quantize("model.onnx", calibration=[x1, x2, x3])

See docs/python.md for more.
"""
from __future__ import annotations

import os
from typing import Any, List, Mapping, Optional, Sequence, Union

from . import _kiln
from ._options import cli_arguments, model_argument
from .errors import KilnError, OptionError, PlanError, RunError, UnsupportedError
from .program import Arena, Bound, Method, PathLike, Program, Quantization, SelfTestReport, TensorSpec
from .quantize import QuantizedModel, quantize, quantize_options

__version__ = "0.1.0"

__all__ = [
    "plan", "load", "plan_options", "quantize", "quantize_options", "QuantizedModel", "backends", "isa", "processor_isa", "isa_paths", "set_isa",
    "Program", "Method", "TensorSpec", "Quantization", "Arena", "Bound", "SelfTestReport",
    "KilnError", "PlanError", "UnsupportedError", "OptionError", "RunError",
]

# Options of `kiln plan` that kiln.plan() does differently: the program is
# returned (Program.save), the report kept (Program.report), the self-test
# made from arrays.
_NOT_OPTIONS = {"-o", "--output", "--report", "--help", "--bundle-test", "--test-tolerance"}


def plan_options() -> List[str]:
    """The keywords kiln.plan() takes: `kiln plan`'s options, spelled with
    underscores (``input_shape``, ``fold_budget``, ``tensor_parallel``, ...),
    and ``bundle_test`` and ``test_tolerance``."""
    names = [n[2:].replace("-", "_") for n in _kiln.plan_option_names() if n not in _NOT_OPTIONS]
    return sorted(names + ["bundle_test", "test_tolerance"])


def _arguments(options: Mapping[str, Any]) -> tuple:
    """`kiln plan` arguments for keyword options, and the frozen arrays."""
    return cli_arguments(options, set(_kiln.plan_option_names()) - _NOT_OPTIONS, "kiln.plan()", plan_options())


def plan(model: Union[PathLike, bytes, Any], *, threads: Optional[int] = None, bundle_test: Optional[Sequence[Any]] = None,
         test_tolerance: Optional[float] = None, **options: Any) -> Program:
    """Plans an ONNX model into a Program, as ``kiln plan`` does.

    Args:
        model: an ONNX file's path, an ``onnx.ModelProto``, or its serialized bytes.
        threads: the threads the program's methods start with (Method.threads).
        bundle_test: inputs for a bundled self-test (one per input of the first
            method), which Program.self_test() runs and Program.save() writes.
        test_tolerance: the self-test's relative tolerance per output; None
            derives it from the program as ``kiln plan --bundle-test`` does
            (0 for integer outputs).
        **options: ``kiln plan``'s options with underscores for dashes, e.g.
            ``target="vulkan:0,cpu"``, ``input_shape={"x": (1, 3, 224, 224)}``,
            ``fold_budget=64``, ``tensor_parallel=2``, ``quantized_io=True``,
            ``algo="best-fit"``, ``freeze={"w": array_or_file}``,
            ``device_count={"vulkan": 1}``, ``place={"node": "cpu"}``.
            plan_options() lists them; ``kiln plan --help`` says what each does.

    Raises:
        PlanError: the planner could not plan the model (UnsupportedError for
            what kiln does not support); OptionError: an option `kiln plan`
            would refuse.
    """
    arguments, frozen = _arguments(options)
    data, is_path = model_argument(model, "kiln.plan()")
    program_bytes, report_json, memory_svg = _kiln.plan(data, is_path, arguments, frozen)
    program = Program(program_bytes, report_json=report_json, memory_svg=memory_svg, threads=threads)
    if bundle_test is not None:
        program.bundle_test(bundle_test, tolerance=test_tolerance)
    return program


def load(path: PathLike, *, threads: Optional[int] = None) -> Program:
    """Reads a .kiln program (and its bundled self-test, PATH.test, where one
    lies beside it). RunError when the file is not a valid program."""
    with open(path, "rb") as f:
        data = f.read()
    test_path = os.fspath(path) + ".test"
    self_test = None
    if os.path.exists(test_path):
        with open(test_path, "rb") as f:
            self_test = f.read()
    return Program(data, self_test=self_test, threads=threads)


def backends() -> List[str]:
    """The device backends built in ("null", "vulkan", ...), besides the CPU:
    the targets kiln.plan(..., target="NAME:0,cpu") can name and programs
    can run on. A program makes only the backends its devices name."""
    return _kiln.builtin_backends()


def isa() -> str:
    """The instruction-set path the CPU kernels take now: "scalar", "avx2",
    "avx512" or "neon"."""
    return _kiln.active_isa()


def processor_isa() -> str:
    """The best path this processor can run."""
    return _kiln.processor_isa()


def isa_paths() -> List[str]:
    """Every path this processor can run, slowest first."""
    return _kiln.isa_paths()


def set_isa(name: str) -> None:
    """Caps the CPU kernels at path `name` (what ``kiln run --isa`` does), for
    every program in this process; call it before methods run. RunError
    when the processor cannot run it, OptionError for an unknown name."""
    _kiln.set_isa(name)
