"""Is forward a function of theta? The test the adapters run before any engine (and the
contract check's ``function-of-theta`` property for every plugin).

paramgeo analyses a map phi: theta -> predictor; a forward that draws random numbers, keeps
state between calls or writes into the parameters it is given is no such map, and every rank,
kernel and flow computed from it is meaningless. :func:`function_of_theta` evaluates forward
at theta0, theta0, theta1, theta0 and compares the outputs bit for bit, the argument before
and after each call, and a snapshot of the plugin's state (:func:`plugin_state`: attributes
that are numbers, strings or arrays; a framework model's buffers, parameters and submodule
attributes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def snapshot(value: Any) -> Optional[tuple[Any, ...]]:
    """A comparable copy of a piece of state: numbers, strings and None by their repr (so that
    a NaN equals itself), arrays (numpy, torch tensors, JAX arrays) as (dtype, shape, bytes);
    None for anything else (containers, functions, caches: not compared)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return ("value", repr(value))
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray) or type(value).__module__.startswith(("jax", "jaxlib")):
        arr = np.asarray(value)
        return ("array", arr.dtype.str, arr.shape, arr.tobytes())
    return None


def attribute_state(obj: Any, prefix: str = "attribute") -> dict[str, Any]:
    """{"attribute 'name'": snapshot} of the public and private instance attributes of ``obj``
    whose value :func:`snapshot` compares."""
    out = {}
    for key, value in vars(obj).items():
        snap = snapshot(value)
        if snap is not None:
            out[f"{prefix} {key!r}"] = snap
    return out


#: a difference between two evaluations at the same theta at most this (relative) is the
#: round-off of a reduction summed in another order, not randomness
ROUND_OFF_GAP = 1e-12


def plugin_state(param: Any) -> dict[str, Any]:
    """The state of a plugin that forward must leave alone: its attributes
    (:func:`attribute_state`) and, for a model from a framework, the model's buffers,
    parameters and attributes (its ``model_state()``)."""
    state = attribute_state(param)
    if hasattr(param, "model_state"):
        state.update(param.model_state())
    return state


def function_of_theta(evaluate: Callable[[Any], Any], theta0: ArrayLike, theta1: ArrayLike,
                      state: Optional[Callable[[], dict[str, Any]]] = None,
                      labels: Optional[Callable[[], Sequence[str]]] = None) -> Optional[str]:
    """Why ``evaluate`` (theta -> phi(theta)) is not a function of theta, as a phrase, or None.

    phi is evaluated at theta0, theta0, theta1, theta0 (each on a fresh copy of the point);
    it is a function of theta when the three outputs at theta0 agree bit for bit, no call
    changes the array it is given, and ``state()`` (a dict name -> :func:`snapshot`: buffers,
    attributes, the model's own parameters) is the same after every call as before the first.
    ``labels`` returns the names of the coordinates of theta (``spec.labels``), for the
    message.
    """
    before = state() if state is not None else {}
    outs = []
    for theta in (theta0, theta0, theta1, theta0):
        theta = np.asarray(theta, dtype=float)
        arg = theta.copy()
        outs.append(np.array(evaluate(arg), dtype=float, copy=True).ravel())
        moved = np.flatnonzero(~((arg == theta) | (np.isnan(arg) & np.isnan(theta))))
        if len(moved):
            where = labels()[moved[0]] if labels is not None else f"entry {moved[0]}"
            return (f"forward changed the parameters it was given in place ({len(moved)} "
                    f"entries, first {where}: {theta[moved[0]]:.6g} -> {arg[moved[0]]:.6g}), "
                    "e.g. an update such as w.add_(...) under torch.no_grad()")
        after = state() if state is not None else {}
        changed = sorted(k for k in before.keys() | after.keys()
                         if before.get(k) != after.get(k))
        if changed:
            return (f"forward changed {', '.join(changed[:3])}"
                    f"{f' and {len(changed) - 3} more' if len(changed) > 3 else ''} "
                    "(state that a call updates: a counter, a running statistic, a cache)")

    def gap(a, b):
        if a.shape != b.shape:
            return float("inf")
        return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))

    for k, when in ((1, "two evaluations at the same theta"),
                    (3, "an evaluation at theta after one at another theta")):
        if outs[k].shape != outs[0].shape or not np.array_equal(outs[k], outs[0],
                                                                  equal_nan=True):
            size = gap(outs[k], outs[0])
            if size <= ROUND_OFF_GAP:
                return (f"{when} differ at round-off level (largest relative difference "
                        f"{size:.2g}): kernels that sum in a varying order (atomic additions "
                        "on a GPU); make them repeatable, e.g. with "
                        "torch.use_deterministic_algorithms(True)")
            return (f"{when} differ (largest relative difference {size:.2g}): "
                    "forward draws random numbers (dropout in training mode, torch.randn, "
                    "np.random) or reads state it keeps between calls")
    return None
