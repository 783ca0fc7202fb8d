"""Programs and their methods: kiln's runtime from Python."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _kiln
from .errors import KilnError, RunError

__all__ = ["Program", "Method", "TensorSpec", "Quantization", "Arena", "SelfTestReport"]

PathLike = Union[str, "os.PathLike[str]"]

# kiln's dtypes as NumPy's. NumPy has no bfloat16: its elements travel as
# their 16 bits in uint16 arrays.
_NUMPY_DTYPES: Dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),
    "float64": np.dtype(np.float64),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
}


def _default_threads() -> int:
    """KILN_THREADS, as `kiln run` reads it, or 1."""
    text = os.environ.get("KILN_THREADS", "")
    return int(text) if text.isdigit() and int(text) > 0 else 1


@dataclass(frozen=True)
class Quantization:
    """How a quantized input or output (kiln.plan(..., quantized_io=True))
    holds its values: real = (q - zero_point) * scale."""

    scale: float
    zero_point: int

    def quantize(self, x: np.ndarray, dtype: Union[str, np.dtype]) -> np.ndarray:
        """Float data as the model's QuantizeLinear makes it: round half to
        even, saturate to `dtype` (int8 or uint8); NaN gives the zero point."""
        want = np.dtype(dtype)
        lo, hi = (-128.0, 127.0) if want == np.int8 else (0.0, 255.0)
        x = np.asarray(x, dtype=np.float32)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            q = np.rint(x / np.float32(self.scale)) + np.float32(self.zero_point)
        q = np.where(np.isnan(q), np.float32(self.zero_point), np.clip(q, lo, hi))
        return q.astype(want)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """The real values of quantized data, as float32."""
        return (np.asarray(q).astype(np.float32) - np.float32(self.zero_point)) * np.float32(self.scale)


@dataclass(frozen=True)
class TensorSpec:
    """A method's input or output, as the program declares it."""

    name: str
    dtype: str  # kiln's name: "float32", "int8", ...
    shape: Tuple[int, ...]
    nbytes: int
    device: str  # "cpu:0", "vulkan:0", ...
    quantization: Optional[Quantization]

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype of its arrays (uint16 for bfloat16's bits)."""
        return _NUMPY_DTYPES[self.dtype]

    @staticmethod
    def _of(d: Mapping[str, Any]) -> "TensorSpec":
        q = d["quantization"]
        return TensorSpec(d["name"], d["dtype"], tuple(d["shape"]), d["nbytes"], d["device"],
                          Quantization(q[0], q[1]) if q is not None else None)


@dataclass(frozen=True)
class Bound:
    """A dimension of an input bounded above (``input_shape={"x": ((1, 8), 3, 224, 224)}``
    at plan time): input ``input``'s axis ``axis`` takes any extent from
    ``min`` to ``max`` when the method is called."""

    name: str  # the model's dimension name, or "input[axis]"
    input: int
    axis: int
    min: int
    max: int


@dataclass(frozen=True)
class Arena:
    """One of a method's arenas: the planned memory its tensors live in."""

    size: int
    alignment: int
    device: str
    region: str  # its memory region (memory_region= at plan time), "" when none
    symmetric: bool  # shared across ranks for collectives
    group: int  # the communicator group of a symmetric arena


@dataclass(frozen=True)
class SelfTestReport:
    """The verdict of a bundled self-test (true when it passed)."""

    passed: bool
    num_outputs: int
    worst_output: int
    max_error: float  # the worst output's max |got - want| / max |want|
    tolerance: float

    def __bool__(self) -> bool:
        return self.passed


class Method:
    """One method of a program: call it with NumPy arrays.

    ``method(x)`` or ``method(input_name=x)`` runs it and returns the outputs
    as a list of new arrays, which the runtime writes directly (no copy).
    Inputs must have the method's dtype and shape (within ``bounds`` for a
    method planned with inputs bounded above; its outputs then have the
    extents the inputs give them); contiguous arrays are
    read where they are (no copy), others are copied once. A quantized input
    also takes float32 data, quantized as the model's QuantizeLinear would.

    The method's memory (bookkeeping and arenas) is allocated at the first
    call and kept until the Method is gone. Calls on one Method run one at
    a time; the GIL is released while it executes.
    """

    def __init__(self, program: "Program", description: Mapping[str, Any], threads: int) -> None:
        self._program = program
        self.name: str = description["name"]
        self.inputs: List[TensorSpec] = [TensorSpec._of(t) for t in description["inputs"]]
        self.outputs: List[TensorSpec] = [TensorSpec._of(t) for t in description["outputs"]]
        self.arenas: List[Arena] = [Arena(**a) for a in description["arenas"]]
        self.bookkeeping_bytes: int = description["bookkeeping_bytes"]
        self.bounds: List[Bound] = [Bound(**b) for b in description["bounds"]]
        self._threads = threads
        self._handle: Optional[Any] = None

    def __repr__(self) -> str:
        return (f"<kiln.Method '{self.name}': {len(self.inputs)} inputs, {len(self.outputs)} outputs, "
                f"{self.arena_bytes:,} arena bytes>")

    @property
    def arena_bytes(self) -> int:
        """The bytes of all its arenas together."""
        return sum(a.size for a in self.arenas)

    @property
    def threads(self) -> int:
        """Threads the kernels split their work across, this one included."""
        return self._threads

    @threads.setter
    def threads(self, threads: int) -> None:
        if self._handle is not None:
            self._handle.set_threads(int(threads))
        elif not 1 <= int(threads) <= 64:
            raise RunError("threads must be from 1 to 64", "InvalidArgument")
        self._threads = int(threads)

    def _loaded(self) -> Any:
        if self._handle is None:
            handle = _kiln.MethodHandle(self._program._handle, self.name)
            if self._threads != 1:
                handle.set_threads(self._threads)
            self._handle = handle
        return self._handle

    def _arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> List[Any]:
        if args and kwargs:
            raise TypeError(f"method '{self.name}' takes its inputs by position or by name, not both")
        if kwargs:
            names = [t.name for t in self.inputs]
            unknown = sorted(set(kwargs) - set(names))
            if unknown:
                raise TypeError(f"method '{self.name}' has no input {unknown[0]!r} (inputs: {', '.join(names)})")
            missing = [n for n in names if n not in kwargs]
            if missing:
                raise TypeError(f"method '{self.name}' misses input {missing[0]!r}")
            return [kwargs[n] for n in names]
        if len(args) != len(self.inputs):
            raise TypeError(f"method '{self.name}' takes {len(self.inputs)} inputs, {len(args)} were given")
        return list(args)

    def _input(self, index: int, value: Any) -> np.ndarray:
        spec = self.inputs[index]
        array = np.asarray(value)
        want = spec.numpy_dtype
        if spec.quantization is not None and array.dtype == np.float32:
            array = spec.quantization.quantize(array, want)
        if array.dtype != want:
            raise RunError(f"input {index} ('{spec.name}') is {array.dtype}, the method expects {spec.dtype}",
                           "DTypeMismatch")
        # With bounds the runtime checks the extents (and which follow them).
        if array.shape != spec.shape and (not self.bounds or array.ndim != len(spec.shape)):
            raise RunError(f"input {index} ('{spec.name}') has shape {list(array.shape)}, the method expects "
                           f"{list(spec.shape)}", "ShapeMismatch")
        if not (array.flags.c_contiguous and array.flags.aligned):
            array = np.ascontiguousarray(array)
        return array

    def __call__(self, *args: Any, **kwargs: Any) -> List[np.ndarray]:
        values = self._arguments(args, kwargs)
        inputs = [self._input(i, v) for i, v in enumerate(values)]
        outputs = [np.empty(t.shape, dtype=t.numpy_dtype) for t in self.outputs]
        extents = self._loaded().run(inputs, outputs, bool(self.bounds))
        if self.bounds:
            # Written at the start of the buffer planned for the largest.
            outputs = [o.reshape(-1)[:int(np.prod(e, dtype=np.int64))].reshape(e) for o, e in zip(outputs, extents)]
        return outputs


class Program:
    """A planned program: what kiln.plan() returns and kiln.load() reads.

    ``program.methods`` maps each method's name to its Method; calling the
    program calls its first method (``program(x)`` is
    ``program.methods["forward"](x)`` for a planned model).
    """

    def __init__(self, data: bytes, *, report_json: Optional[str] = None, memory_svg: Optional[str] = None,
                 self_test: Optional[bytes] = None, threads: Optional[int] = None) -> None:
        """Verifies the program's bytes (RunError when they are not one) and
        makes the device backends it names. `threads` (default: KILN_THREADS
        or 1) is what every method starts with."""
        self._handle = _kiln.ProgramHandle(bytes(data))
        self._report_json = report_json
        self._memory_svg = memory_svg
        self._self_test = self_test
        start = _default_threads() if threads is None else int(threads)
        self.methods: Dict[str, Method] = {
            name: Method(self, self._handle.describe(name), start) for name in self._handle.method_names()
        }

    def __repr__(self) -> str:
        return f"<kiln.Program: {len(self.to_bytes()):,} bytes, methods {', '.join(self.methods)}>"

    def __call__(self, *args: Any, **kwargs: Any) -> List[np.ndarray]:
        """Runs the program's first method."""
        return next(iter(self.methods.values()))(*args, **kwargs)

    def __iter__(self) -> Iterator[str]:
        return iter(self.methods)

    def to_bytes(self) -> bytes:
        """The program's bytes (a .kiln file)."""
        return self._handle.bytes()

    def save(self, path: PathLike) -> None:
        """Writes the program to `path`, and its bundled self-test, if it has
        one, to `path` + ".test" (as `kiln plan --bundle-test` does)."""
        with open(path, "wb") as f:
            f.write(self.to_bytes())
        if self._self_test is not None:
            with open(os.fspath(path) + ".test", "wb") as f:
                f.write(self._self_test)

    def report(self) -> Dict[str, Any]:
        """The plan report (`kiln plan --report`'s plan.json) as a dict:
        arenas, tensors with their offsets and lifetimes, aliases, delegates,
        copies. Only a program planned in this process has one."""
        if self._report_json is None:
            raise KilnError("a program read from bytes or a file carries no plan report; plan it with kiln.plan()")
        return json.loads(self._report_json)

    def memory_svg(self) -> str:
        """The picture of the memory plan (`kiln plan --report`'s
        memory.svg) as SVG text."""
        if self._memory_svg is None:
            raise KilnError("a program read from bytes or a file carries no plan report; plan it with kiln.plan()")
        return self._memory_svg

    def set_threads(self, threads: int) -> None:
        """Sets every method's threads (Method.threads)."""
        for method in self.methods.values():
            method.threads = threads

    def bundle_test(self, inputs: Sequence[np.ndarray], *, tolerance: Optional[float] = None,
                    method: Optional[str] = None) -> bytes:
        """Runs `method` (default: the first) on `inputs` and returns a bundled
        self-test of them and its outputs (a .kiln.test file's bytes, as
        `kiln plan --bundle-test` writes), which this program's save() writes
        beside it from now on."""
        m = self.methods[method] if method is not None else next(iter(self.methods.values()))
        arrays = [m._input(i, x) for i, x in enumerate(m._arguments(list(inputs), {}))]
        outputs = m(*arrays)
        # None: derived from the program, as kiln plan --bundle-test does.
        self._self_test = _kiln.make_self_test(self.to_bytes(), m.name, arrays, outputs,
                                               -1.0 if tolerance is None else float(tolerance))
        return self._self_test

    def self_test(self, test: Union[None, bytes, PathLike] = None, *, method: Optional[str] = None) -> SelfTestReport:
        """Runs a bundled self-test: `test` is a .kiln.test file or its bytes;
        by default the program's own (bundle_test(), kiln.plan(...,
        bundle_test=...), or the PROGRAM.test file kiln.load() found)."""
        if test is None:
            if self._self_test is None:
                raise KilnError("the program has no bundled self-test")
            data = self._self_test
        elif isinstance(test, (bytes, bytearray, memoryview)):
            data = bytes(test)
        else:
            with open(test, "rb") as f:
                data = f.read()
        m = self.methods[method] if method is not None else next(iter(self.methods.values()))
        passed, outputs, worst, error, tolerance = _kiln.run_self_test(self.to_bytes(), data, m.name, m.threads)
        return SelfTestReport(passed, outputs, worst, error, tolerance)
