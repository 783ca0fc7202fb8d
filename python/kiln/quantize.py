"""kiln.quantize(): post-training static quantization of a float ONNX model
into a QDQ model laid out as ONNX Runtime's quantize_static writes it, as
``kiln quantize`` does (same options, same code)."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _kiln
from ._options import cli_arguments, model_argument
from .program import PathLike, Program

__all__ = ["quantize", "quantize_options", "QuantizedModel"]

# Options of `kiln quantize` that kiln.quantize() does differently: the model
# is returned (QuantizedModel.save), the calibration is an argument, the
# report is the QuantizedModel itself; `evaluate=False` is --no-evaluate.
_NOT_OPTIONS = {"-o", "--output", "--calibration", "--report", "--help", "--no-evaluate"}


def quantize_options() -> List[str]:
    """The keywords kiln.quantize() takes: ``kiln quantize``'s options with
    underscores (``method``, ``percentile``, ``activations``, ``symmetric``,
    ``per_tensor``, ``asymmetric_weights``, ``reduce_range``, ``exclude``,
    ``input_shape``) and
    ``evaluate``."""
    names = [n[2:].replace("-", "_") for n in _kiln.quantize_option_names() if n not in _NOT_OPTIONS]
    return sorted(names + ["evaluate"])


def _arguments(options: Mapping[str, Any], evaluate: bool) -> List[str]:
    known = set(_kiln.quantize_option_names()) - _NOT_OPTIONS
    arguments, _ = cli_arguments(options, known, "kiln.quantize()", quantize_options())
    return arguments if evaluate else ["--no-evaluate"] + arguments


def _items(calibration: Iterable[Any]) -> List[List[Tuple[str, np.ndarray]]]:
    """Each item: one array (a model of one input), a sequence of arrays in
    input order, or a mapping of input name to array."""
    items = []
    for item in calibration:
        if isinstance(item, Mapping):
            items.append([(str(name), np.ascontiguousarray(array)) for name, array in item.items()])
        elif isinstance(item, np.ndarray):
            items.append([("", np.ascontiguousarray(item))])
        else:
            items.append([("", np.ascontiguousarray(array)) for array in item])
    return items


class QuantizedModel:
    """A QDQ ONNX model made by kiln.quantize(), with what calibration saw.

    Attributes:
        model_bytes: the serialized ONNX model (ONNX Runtime runs it too).
        layers: one dict per quantized activation: tensor, node, op,
            observed (min, max), range (min, max) kept, scale, zero_point,
            shared_from (the tensor whose parameters it shares, or None).
        accuracy: one dict per output against the float model over the
            calibration set: max_abs_error, rms_error, float_rms, sqnr_db,
            and rows / top1_agree for outputs with classes on the last axis
            (empty with evaluate=False).
        samples: calibration samples seen.
        quantized_nodes, float_nodes, removed_nodes: node names.
    """

    def __init__(self, model_bytes: bytes, summary: Dict[str, Any]) -> None:
        self.model_bytes = model_bytes
        self.samples: int = summary["samples"]
        self.layers: List[Dict[str, Any]] = summary["layers"]
        self.accuracy: List[Dict[str, Any]] = summary["accuracy"]
        self.quantized_nodes: List[str] = summary["quantized_nodes"]
        self.float_nodes: List[str] = summary["float_nodes"]
        self.removed_nodes: List[str] = summary["removed_nodes"]
        self.weights: int = summary["weights"]
        self.biases: int = summary["biases"]
        self.batch_norms_folded: int = summary["batch_norms_folded"]

    @property
    def model(self) -> Any:
        """The model as an ``onnx.ModelProto`` (needs the onnx package)."""
        import onnx

        return onnx.load_model_from_string(self.model_bytes)

    def save(self, path: PathLike) -> None:
        """Writes the model to `path` (whole or not at all: a temporary file
        renamed)."""
        path = os.fspath(path)
        temporary = path + ".tmp"
        with open(temporary, "wb") as f:
            f.write(self.model_bytes)
        os.replace(temporary, path)

    def plan(self, **options: Any) -> Program:
        """kiln.plan() of the quantized model (int8 kernels where kiln folds
        the QDQ pairs)."""
        from . import plan

        return plan(self.model_bytes, **options)

    def __repr__(self) -> str:
        return (f"<kiln.QuantizedModel: {len(self.quantized_nodes)} nodes quantized, {len(self.float_nodes)} float, "
                f"{len(self.layers)} activations over {self.samples} samples>")


def quantize(model: Union[PathLike, bytes, Any], calibration: Union[PathLike, Iterable[Any]], *,
             output: Optional[PathLike] = None, evaluate: bool = True, **options: Any) -> QuantizedModel:
    """Quantizes a float ONNX model after training, as ``kiln quantize`` does.

    Args:
        model: an ONNX file's path, an ``onnx.ModelProto``, or its bytes.
        calibration: a folder (``kiln quantize --calibration``'s layout) or
            an iterable of items, each one array (a model of one input), a
            sequence of arrays in input order, or a dict of input name to
            array. An array [N, ...] for an input [1, ...] holds N samples.
        output: where to write the quantized model as well (optional).
        evaluate: run the quantized model against the float one on the
            calibration set (QuantizedModel.accuracy).
        **options: ``kiln quantize``'s options with underscores, e.g.
            ``method="entropy"``, ``percentile=99.99``, ``activations="int8"``,
            ``symmetric=True``, ``per_tensor=True``, ``reduce_range=True``,
            ``exclude=["fc2"]``,
            ``input_shape={"x": (1, 3, 32, 32)}``.

    Raises:
        PlanError: the model or a calibration item could not be used;
        OptionError: an option ``kiln quantize`` would refuse.
    """
    arguments = _arguments(options, evaluate)
    data, is_path = model_argument(model, "kiln.quantize()")
    if isinstance(calibration, (str, os.PathLike)):
        folder, items = os.fspath(calibration), []
    else:
        folder, items = "", _items(calibration)
    model_bytes, summary = _kiln.quantize(data, is_path, arguments, folder, items)
    result = QuantizedModel(model_bytes, summary)
    if output is not None:
        result.save(output)
    return result
