"""Losses from named arrays: the data files of ``paramgeo flow``, ``paramgeo llc`` and their
sweep queries (an ``.npz`` file written with ``numpy.savez``), each array checked against the
parameterization before a loss is built (see :func:`loss_from_arrays`)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..errors import ParamgeoError, ShapeError
from .predictor import (Exponential, LinearMeasurements, Logistic, QuadraticMeasurements,
                     Regression)
from ..results import title

if TYPE_CHECKING:
    from ..contract.parameterization import Parameterization
    from .predictor import Loss


#: loss kinds of :func:`loss_from_arrays` -> (class, required arrays, description)
LOSS_KINDS = {
    "squared": (LinearMeasurements, ("A", "y"),
                "A (N, *predictor_shape) or (N, m), y (N,): (1/2N) sum (<A_i, beta> - y_i)^2"),
    "quadratic": (QuadraticMeasurements, ("X", "y"),
                  "X (N, d), y (N,), square d x d predictors: (1/2N) sum (x_i^T Q x_i - y_i)^2"),
    "logistic": (Logistic, ("A", "y"),
                 "A (N, *predictor_shape) or (N, m), y (N,) in {-1, +1}: logistic loss"),
    "exponential": (Exponential, ("A", "y"),
                    "A (N, *predictor_shape) or (N, m), y (N,) in {-1, +1}: exponential loss"),
    "linear-map": (Regression, ("X", "Y"),
                   "X (N, in), Y (N, out), out x in predictors: (1/2N) sum |y_i - B x_i|^2"),
}

#: former loss names -> today's, accepted for one release with a FutureWarning
FORMER_LOSSES = {"regression": "linear-map"}


def _regression_from_arrays(arrays, param, source):
    """The ``linear-map`` loss from arrays X (N, in) and Y (N, out) (ShapeError otherwise)."""
    missing = [n for n in ("X", "Y") if n not in arrays]
    if missing:
        raise ShapeError(f"{source} has no array {', '.join(repr(n) for n in missing)} (found: "
                         f"{', '.join(sorted(arrays)) or 'none'}); the linear-map loss needs "
                         "X (N, in) and Y (N, out)")
    X, Y = np.asarray(arrays["X"]), np.asarray(arrays["Y"])
    for n, arr in (("X", X), ("Y", Y)):
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
            raise ShapeError(f"{source}: array {n!r} must be real numbers, got dtype {arr.dtype}")
    loss = Regression(X, Y)
    loss.check_dim(param)
    return loss


def loss_from_arrays(kind: str, arrays: Mapping[str, Any], param: Parameterization,
                     source: str = "the data") -> Loss:
    """Build the loss ``kind`` (a key of ``LOSS_KINDS``) for ``param`` from named arrays.

    Layout (an ``.npz`` file written with ``numpy.savez``): ``squared``/``logistic``/
    ``exponential`` need ``A`` of shape (N, *predictor_shape) or (N, m) and ``y`` of shape (N,)
    (the measurements may also be named ``X``, as ``paramgeo implicit-bias`` calls them);
    ``quadratic`` needs ``X`` of shape (N, d) and ``y`` (N,) for d x d predictors. Every problem
    (missing array, wrong shape, NaN) raises ShapeError naming the array, the shape found and
    the shape expected.
    """
    if kind in FORMER_LOSSES:
        warnings.warn(f"the loss name {kind!r} is deprecated and goes in the next release; use "
                      f"{FORMER_LOSSES[kind]!r}", FutureWarning, stacklevel=2)
        kind = FORMER_LOSSES[kind]
    if kind not in LOSS_KINDS:
        raise ParamgeoError(f"unknown loss {kind!r}; choose one of {', '.join(LOSS_KINDS)}")
    if kind == "linear-map":
        return _regression_from_arrays(arrays, param, source)
    cls, names, _ = LOSS_KINDS[kind]
    if "A" in names and "A" not in arrays and "X" in arrays:
        arrays = dict(arrays, A=arrays["X"])
    missing = [n for n in names if n not in arrays]
    if missing:
        raise ShapeError(
            f"{source} has no array {', '.join(repr(n) for n in missing)} (found: "
            f"{', '.join(sorted(arrays)) or 'none'}); the {kind} loss needs {', '.join(names)}"
        )
    got = {n: np.asarray(arrays[n]) for n in names}
    for n, arr in got.items():
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
            raise ShapeError(f"{source}: array {n!r} must be real numbers, got dtype {arr.dtype}")
        if not np.all(np.isfinite(arr)):
            raise ShapeError(f"{source}: array {n!r} contains NaN or infinite values")
    y = got["y"]
    if y.ndim != 1:
        raise ShapeError(f"{source}: array 'y' must have shape (N,), got {y.shape}")
    N = y.shape[0]
    if N == 0:
        raise ShapeError(f"{source}: array 'y' is empty; the {kind} loss needs at least one "
                         "sample")
    if kind == "quadratic":
        X = got["X"]
        shape = param.predictor_shape
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ShapeError(
                f"the quadratic loss needs square predictors, but {param.name} has predictor "
                f"shape {shape}; use --loss squared with A_i = x_i x_i^T"
            )
        if X.shape != (N, shape[0]):
            raise ShapeError(f"{source}: array 'X' must have shape ({N}, {shape[0]}) "
                             f"(N samples, d = {shape[0]}), got {X.shape}")
        return cls(X, y)
    A = got["A"]
    ok = A.shape == (N, *param.predictor_shape) or A.shape == (N, param.m)
    if not ok:
        expected = str((N, *param.predictor_shape))
        if len(param.predictor_shape) != 1:
            expected += f" or {(N, param.m)}"
        rows = (f" (one row per entry of y: y has {N}, A has {A.shape[0]})"
                if A.ndim and A.shape[0] != N else "")
        raise ShapeError(f"{source}: array 'A' must have shape {expected} "
                         f"for {title(param.name, param.sizes)}, got {A.shape}{rows}")
    return cls(A.reshape(N, param.m), y)
