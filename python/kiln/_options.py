"""What kiln.plan() and kiln.quantize() share: keyword options turned into
the CLI's arguments (parsed by the CLI's own code), and the model given as
a path, an onnx.ModelProto or its bytes."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Tuple

import numpy as np

from .errors import OptionError


def _value_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_value_text(v) for v in value)
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def cli_arguments(options: Mapping[str, Any], known: Iterable[str], function: str,
                  listing: Iterable[str]) -> Tuple[List[str], Dict[str, np.ndarray]]:
    """CLI arguments for keyword options, and the arrays given to --freeze.

    True is a flag, False or None leaves the option out; a dict is the
    repeated NAME=VALUE form (a shape as 1x3x224x224; memory regions as
    {"tcm": "64K:fast"}, repeated NAME:SIZE[:SPEED]); a list or tuple is a
    comma list. An unknown keyword is an OptionError naming `function` and
    the keywords it takes (`listing`)."""
    known = set(known)
    arguments: List[str] = []
    frozen: Dict[str, np.ndarray] = {}
    for key, value in options.items():
        option = "--" + key.replace("_", "-")
        if option not in known:
            raise OptionError(f"{function} has no option '{key}' (options: {', '.join(listing)})")
        if value is None or value is False:
            continue
        if value is True:
            arguments.append(option)
        elif isinstance(value, Mapping):
            for name, item in value.items():
                if option == "--freeze" and not isinstance(item, (str, os.PathLike)):
                    frozen[name] = np.asarray(item)
                elif option == "--memory-region":
                    # {"tcm": "64K:fast"}: NAME:SIZE[:SPEED], repeated.
                    arguments.append(f"{option}={name}:{_value_text(item)}")
                elif option == "--input-shape":
                    arguments.append(f"{option}={name}=" + "x".join(_dim_text(d) for d in item))
                else:
                    arguments.append(f"{option}={name}={_value_text(item)}")
        else:
            arguments.append(f"{option}={_value_text(value)}")
    return arguments, frozen


def _dim_text(dim: Any) -> str:
    """One --input-shape dimension: an int, or (MIN, MAX) for one bounded above."""
    if isinstance(dim, (tuple, list)):
        if len(dim) != 2:
            raise OptionError(f"a bounded dimension is (MIN, MAX), got {dim!r}")
        return f"{int(dim[0])}:{int(dim[1])}"
    return str(int(dim))


def model_argument(model: Any, function: str) -> Tuple[bytes | str, bool]:
    """(data, is_path) of a model given as a path, an onnx.ModelProto or its
    serialized bytes."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), True
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), False
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString(), False
    raise TypeError(f"{function} takes a path, an onnx.ModelProto or its bytes, not {type(model).__name__}")
