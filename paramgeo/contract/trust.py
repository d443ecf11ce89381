"""The switch that turns the guard's checks off: :func:`trusted`.

The guarded call layer (:mod:`paramgeo.contract.guard`) checks every call of a plugin's
contract methods: its arguments, its exceptions and its result. Inside a loop whose arguments
the caller makes itself (a sampler's or a flow's steps), once one checked call has passed,
those checks are pure cost: a fraction of a microsecond a call, which is comparable to the
product itself at small n. ``trusted()`` turns them off inside a block; ``trusted(param)``
also yields a view of ``param`` whose methods are the plugin's own code, called with no layer
in between at all.
"""

from __future__ import annotations

import contextlib
import copy
import types
import weakref
from typing import Any, Iterator, Optional

from ..errors import ParamgeoError

#: how many ``trusted()`` blocks are open (process-wide; 0: every call is checked)
_TRUSTED = [0]


@contextlib.contextmanager
def trusted(param: Optional[Any] = None) -> Iterator[Any]:
    """Turn the guard's checks off inside the block (a context manager).

    Every guarded method then calls the plugin's code directly (no argument or result checks,
    exceptions unconverted), which saves a fraction of a microsecond per call (most of it the
    inner product that tells a result finite): for inner loops whose arguments the caller makes
    itself (a sampler's or a flow's steps) once one checked call has passed. A fault inside the
    block surfaces as the plugin's own exception or a non-finite value instead of a
    ``PluginError``. Process-wide (all threads) while open; blocks nest.

    With a parameterization, ``with trusted(p) as q:`` also binds ``q``, a shallow copy of
    ``p`` whose contract methods (forward, jacobian, jvp, vjp, ...) are the plugin's own
    functions bound to it: a call of ``q.jvp(theta, v)`` costs what the plugin's method costs,
    with not even the guard's call layer in between (about 0.1 us a call less than a guarded
    method inside the block). ``p`` itself is not changed, and ``q`` shares its arrays. Use
    ``q`` only inside the block: after it, its calls stay unchecked.

    Args:
        param: a Parameterization whose unguarded view the block binds, or None.

    Returns:
        The context manager; ``with ... as`` binds the unguarded view of ``param``, or None.

    Raises:
        ParamgeoError: ``param`` is not a parameterization.

    Examples:
        >>> import numpy as np, paramgeo
        >>> p = paramgeo.get("uut", d=2, r=1)
        >>> with paramgeo.trusted():
        ...     g = p.vjp(np.ones(2), np.ones(4))      # J^T w of u u^T: 2 (sum u) (1, 1)
        >>> g
        array([4., 4.])
        >>> with paramgeo.trusted(p) as q:
        ...     jv = q.jvp(np.ones(2), np.array([1.0, 0.0]))  # u du^T + du u^T
        >>> jv
        array([2., 1., 1., 0.])
    """
    if param is not None and not getattr(getattr(type(param), "forward", None),
                                         "__paramgeo_guarded__", False):
        raise ParamgeoError(f"trusted(param): param must be a parameterization (paramgeo.get(...) "
                            f"or a Parameterization subclass), got {type(param).__name__}")
    _TRUSTED[0] += 1
    try:
        yield None if param is None else _unguarded_view(param)
    finally:
        _TRUSTED[0] -= 1


def _unguarded_view(param: Any) -> Any:
    """A shallow copy of ``param`` with each guarded method of its class bound, as the plugin
    wrote it, in the copy's own ``__dict__`` (an instance attribute shadows the class's
    function, so the call reaches the plugin's code directly)."""
    view = copy.copy(param)
    for name, fn in _plugin_functions(type(param)):
        view.__dict__[name] = types.MethodType(fn, view)
    return view


def _plugin_functions(cls: type) -> tuple:
    """(name, the plugin's own function) of each guarded method of ``cls``, its own or
    inherited (a class's methods are wrapped once, when it is created), kept per class while
    the class lives."""
    found = _FUNCTIONS.get(cls)
    if found is None:
        pairs = []
        for name in dir(cls):
            method: Any = getattr(cls, name, None)
            if getattr(method, "__paramgeo_guarded__", False):
                pairs.append((name, method.__wrapped__))
        found = _FUNCTIONS[cls] = tuple(pairs)
    return found


#: the plugin functions of each class a view was made of (weak: a class made on the fly, such
#: as an adapted framework model's, is not kept alive by it)
_FUNCTIONS: "weakref.WeakKeyDictionary[type, tuple]" = weakref.WeakKeyDictionary()
