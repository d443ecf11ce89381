"""Base of the small frozen result objects every engine returns.

A result is a frozen dataclass with typed fields, ``to_dict()`` giving plain JSON-able Python
(numpy arrays become lists, numpy scalars become Python numbers) and a readable ``__str__``
listing its fields. The idea follows scipy's ``OptimizeResult`` (documented common fields),
made immutable and typed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Optional

import numpy as np


def title(name: str, sizes: Optional[Mapping[str, Any]]) -> str:
    """The header of a result: the plugin's name with its sizes, "uut (d=4, r=2)", or the name
    alone when it has none (a framework model).

    >>> title("uut", {"d": 4, "r": 2}), title("monomial", {"widths": (2, 2, 1)}), title("m", {})
    ('uut (d=4, r=2)', 'monomial (widths=2,2,1)', 'm')
    """
    sizes = dict(sizes or {})
    inner = ", ".join(f"{k}={_size_text(v)}" for k, v in sizes.items())
    return f"{name} ({inner})" if inner else str(name)


def _size_text(value):
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def to_jsonable(value: Any) -> Any:
    """Convert numpy arrays/scalars, tuples, dataclasses and dicts to JSON-able Python."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return value.to_dict()
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def _fmt(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, np.ndarray):
        with np.printoptions(precision=4, threshold=12, edgeitems=3):
            return np.array2string(value, separator=", ")
    return str(value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Result:
    """Mixin for engine results: ``to_dict()`` for JSON and a field-per-line ``__str__``."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def __str__(self):
        width = max((len(f.name) for f in dataclasses.fields(self)), default=0)
        lines = [type(self).__name__]
        for f in dataclasses.fields(self):
            lines.append(f"  {f.name.ljust(width)}  {_fmt(getattr(self, f.name))}")
        return "\n".join(lines)
