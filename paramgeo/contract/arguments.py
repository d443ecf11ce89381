"""Checks of the arguments of paramgeo's public functions: a wrong argument is an
:class:`~paramgeo.errors.ArgumentError` naming the argument and what it accepts, before any
work starts (never a NumPy or SciPy traceback, never a silent NaN)."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..errors import ArgumentError, ShapeError
from .parameterization import Parameterization

if TYPE_CHECKING:
    from numpy.typing import NDArray


def parameterization(value: Any, argument: str = "param") -> Parameterization:
    """``value`` if it is a Parameterization instance (e.g. ``paramgeo.get("uut", d=4, r=2)``)."""
    if not isinstance(value, Parameterization):
        raise ArgumentError(f"{argument} must be a paramgeo.Parameterization instance (e.g. "
                            f"paramgeo.get('uut', d=4, r=2)), got {type(value).__name__}")
    return value


def integer(value: Any, argument: str, minimum: Optional[int] = None,
            maximum: Optional[int] = None) -> int:
    """``value`` as an int in [minimum, maximum] (bools and non-integral numbers refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{argument} must be an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ArgumentError(f"{argument} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ArgumentError(f"{argument} must be <= {maximum:g}, got {value}")
    return value


def number(value: Any, argument: str, positive: bool = False,
           maximum: Optional[float] = None) -> float:
    """``value`` as a finite float (> 0 when ``positive``; <= ``maximum`` when given)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(f"{argument} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ArgumentError(f"{argument} must be a finite number, got {value}")
    if positive and value <= 0:
        raise ArgumentError(f"{argument} must be > 0, got {value}")
    if maximum is not None and value > maximum:
        raise ArgumentError(f"{argument} must be <= {maximum:g}, got {value:g}")
    return value


def finite_vector(value: Any, argument: str, length: int) -> NDArray[np.float64]:
    """``value`` as a finite float vector of ``length`` entries (ShapeError otherwise)."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ShapeError(f"{argument} must be an array of {length} numbers, got "
                         f"{type(value).__name__}") from None
    if arr.shape != (length,):
        raise ShapeError(f"{argument} must have shape ({length},), got {arr.shape}")
    # one dot product decides the common case (finite unless an entry is NaN or inf, or the
    # norm overflows; then the entries are checked one by one), as Parameterization.as_theta
    if not math.isfinite(arr.dot(arr)) and not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ShapeError(f"{argument} has a non-finite value at entry {bad} ({arr[bad]})")
    return arr
