"""The exceptions kiln raises. Each carries kiln's own message: the file,
node, tensor or arena at fault, and for the runtime what it logged."""
import re

__all__ = ["KilnError", "PlanError", "UnsupportedError", "OptionError", "RunError"]


class KilnError(Exception):
    """The base of every error kiln raises."""


class PlanError(KilnError):
    """The planner could not plan the model (a malformed model, a shape it
    cannot infer, a plan its verifier rejects)."""


class UnsupportedError(PlanError):
    """The model uses an op, dtype or attribute kiln does not support."""


class OptionError(KilnError, ValueError):
    """An option of kiln.plan() that `kiln plan` would refuse: an unknown
    name or a bad value."""


class RunError(KilnError):
    """The runtime refused or failed a call.

    Attributes:
        status: the runtime's error name ("ShapeMismatch", "InvalidProgram", ...).
    """

    def __init__(self, message: str, status: str = "") -> None:
        super().__init__(message)
        self.status = status


def _python_names(message: str) -> str:
    """`--fold-budget` -> `fold_budget`: the CLI's option names as kiln.plan()
    spells them."""
    return re.sub(r"'?--([a-z][a-z0-9-]*)'?", lambda m: "'" + m.group(1).replace("-", "_") + "'", message)


def _from_kiln(kind: str, message: str, status: str) -> KilnError:
    """The exception for an error of the compiled module (kiln._kiln)."""
    if kind == "run":
        return RunError(message, status)
    if kind == "unsupported":
        return UnsupportedError(message)
    if kind == "option":
        return OptionError(_python_names(message))
    return PlanError(message)
