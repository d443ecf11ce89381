"""The guarded call layer between engines and a plugin's methods.

Every engine reaches a plugin only through the methods of the contract (``forward``,
``jacobian``, ``jvp``, ``vjp``, ``random_point``, ``symmetry``, ``make_spec``, ...). Each of
those methods, as a plugin defines it, is wrapped once when its class is created
(``Parameterization.__init_subclass__``), so that

* its arguments are checked first (theta of length n, v of length n, w of length m): a wrong
  argument is the caller's :class:`~paramgeo.errors.ShapeError`, naming the argument;
* an exception raised inside the plugin's code (anything but a ``ParamgeoError``, which passes
  unchanged) becomes a :class:`~paramgeo.errors.PluginError` naming the plugin, the method,
  what went wrong and the fix; a forward that fails only when autograd traces it (it works on a
  plain array) is reported as untraceable, with the fix for that;
* its result is checked against what the contract promises: real floats (not complex, not a
  string or object array), the promised shape (phi: predictor_shape; J: m x n; J v: m;
  J^T w: n; random_point: n), finite wherever theta is finite and of moderate size
  (|theta|_inf <= ``FINITE_INPUT_BOUND``: beyond it an overflow is the size of the input, not a
  fault of the plugin).

The base class's derived methods (autograd's Jacobian, JVP and VJP of ``forward``) get the same
argument and result checks; an exception there can only come from ``forward`` (already guarded)
or from paramgeo itself, so it is not converted. The CLI turns a ``PluginError`` into one
``Error:`` line and exit code 2 like every ``ParamgeoError``; ``paramgeo check`` reports it as a
failed property. Engines never catch it per command: this module is the one place.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np
from autograd.tracer import Box, getval

from ..errors import ParamgeoError, PluginError, ShapeError
from .trust import _TRUSTED

#: Entries of theta up to this size in absolute value must give a finite phi and J; beyond it a
#: non-finite value may be an honest overflow (phi = u^p at |u| = 1e200), not the plugin's fault.
FINITE_INPUT_BOUND = 1e6

#: numpy's float64 dtype (a singleton: the fast path compares it by identity)
_F64 = np.dtype(float)

#: How to make forward traceable, the fix of every untraceable forward.
UNTRACEABLE_FIX = ("write forward with autograd.numpy (import autograd.numpy as np; no "
                   "numpy.asarray, float() or in-place writes on theta), or use "
                   "paramgeo.from_torch / paramgeo.from_jax for a framework's model, or make "
                   "it an autograd primitive (autograd.extend.primitive with defvjp/defjvp) "
                   "and declare closed-form 'jvp' and 'vjp'")


def _flat_shape(p):
    return (p.n,)


def _jac_shape(p):
    return (p.m, p.n)


#: method -> (names of its vector arguments after self, each with the length it must have,
#:            the shape its result must have, or None for no array check)
ARRAY_METHODS = {
    "forward": (("theta",), lambda p: p.predictor_shape),
    "jacobian": (("theta",), _jac_shape),
    "jvp": (("theta", "v"), lambda p: (p.m,)),
    "vjp": (("theta", "w"), _flat_shape),
    "hessian_vp": (("theta", "w", "v"), _flat_shape),
    "jacobian_derivative": (("theta", "v"), _jac_shape),
    "horizontal_projection": (("theta", "v"), _flat_shape),
    "random_point": ((), _flat_shape),
    "init_at_scale": ((), _flat_shape),
    "sparse_jacobian": (("theta",), None),
    "rank_at": (("theta",), None),
    "kinks": (("theta",), None),
    "mirror_potential": (("theta0",), None),
    "quadratic_forms": (("theta",), None),
    "batched_vjp": ((), None),
}
#: methods that are guarded for their exceptions (and the few structural checks below) only
OTHER_METHODS = ("make_spec", "make_predictor_shape", "validate_sizes", "symmetry", "symbolic",
                 "architecture", "input_action")
GUARDED = tuple(ARRAY_METHODS) + OTHER_METHODS

#: the length each vector argument must have
_ARG_LENGTH = {"theta": lambda p: p.n, "theta0": lambda p: p.n, "v": lambda p: p.n,
               "w": lambda p: p.m}


def plugin_label(param: Any) -> str:
    """The plugin's name as users know it (its registry name, else its class name)."""
    cls = type(param)
    return getattr(cls, "name", "") or cls.__name__


def _preview(theta, k=3):
    arr = np.ravel(np.asarray(getval(theta), dtype=float))
    head = ", ".join(f"{x:.3g}" for x in arr[:k])
    return f"theta=[{head}{', ...' if arr.size > k else ''}]"


def _check_args(param, method, names, args):
    """The vector arguments converted to float vectors of the right length (a Box, traced by
    autograd, is checked for its shape and passed unchanged); ShapeError otherwise."""
    out = list(args)
    for i, name in enumerate(names[:len(args)]):
        value = args[i]
        need = _ARG_LENGTH[name](param)
        if type(value) is np.ndarray and value.shape == (need,) and value.dtype.kind == "f":
            continue  # the common case, at no cost
        if isinstance(value, Box) or (isinstance(value, np.ndarray) and value.dtype == object):
            # traced by autograd, or numbers of another kind (the high-precision route's mpmath
            # reals): the size is checked, the values pass unchanged
            size = np.size(getval(value))
            if size != need:
                raise ShapeError(f"{plugin_label(param)}.{method}: argument {name} must have "
                                 f"{need} entries, got {size}")
            continue
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise ShapeError(f"{plugin_label(param)}.{method}: argument {name} must be an array "
                             f"of {need} numbers, got {type(value).__name__}") from None
        if arr.shape != (need,):
            # flat, or the one shape it has: a single block's (theta, v) or phi's (w)
            shapes = ([tuple(param.predictor_shape)] if name == "w" else
                      list(param.spec.blocks.values())[:1] if len(param.spec.blocks) == 1 else [])
            if arr.size != need or (arr.ndim > 1 and arr.shape not in shapes):
                raise ShapeError(f"{plugin_label(param)}.{method}: argument {name} must have "
                                 f"{need} entries, got shape {np.shape(value)}")
            arr = arr.ravel()
        out[i] = arr
    return out


def _moderate(theta):
    """Whether theta is finite with |theta|_inf <= FINITE_INPUT_BOUND (None: no theta)."""
    if theta is None:
        return True
    arr = np.asarray(getval(theta), dtype=float)
    return bool(arr.size == 0 or (np.all(np.isfinite(arr))
                                  and np.max(np.abs(arr)) <= FINITE_INPUT_BOUND))


def _result_problem(param, method, out, shape_of, theta, traced):
    """What is wrong with the result ``out`` of ``method`` (None when nothing is), with its
    fix: (problem, fix)."""
    value = getval(out)
    if (type(value) is np.ndarray and value.dtype.kind == "f"
            and value.shape == tuple(shape_of(param)) and math.isfinite(value.sum())):
        return None  # the common case: one reduction (an overflowing sum is checked below)
    if method == "sparse_jacobian":
        value = getattr(value, "shape", None)
        if value is not None and tuple(value) != (param.m, param.n):
            return (f"returned a matrix of shape {tuple(value)}, expected (m, n) = "
                    f"({param.m}, {param.n})",
                    "return the m x n Jacobian as a scipy.sparse matrix")
        return None
    if isinstance(value, str) or not isinstance(value, (np.ndarray, np.generic, list, tuple,
                                                        float, int)):
        return (f"returned an object of type {type(value).__name__}, not an array of floats",
                f"return a float array of shape {shape_of(param)}")
    try:
        arr = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        return (f"returned something that is not an array ({exc})",
                f"return a float array of shape {shape_of(param)}")
    if arr.dtype.kind in "cC":
        return (f"returned complex values (dtype {arr.dtype}) at {_preview(theta)}"
                if theta is not None else f"returned complex values (dtype {arr.dtype})",
                "return real floats (phi must map R^n to real predictors; take the real part "
                "or split real and imaginary parts into separate outputs)")
    if arr.dtype.kind not in "biuf":
        if traced and arr.dtype.kind == "O":
            return (f"cannot be traced by autograd (it returned an object array when traced "
                    f"at {_preview(theta)})", UNTRACEABLE_FIX)
        return (f"returned an array of dtype {arr.dtype}, not of floats",
                f"return a float array of shape {shape_of(param)}")
    expected = tuple(shape_of(param))
    if arr.shape != expected:
        where = {"forward": "make_predictor_shape() says", "random_point": "n is",
                 "init_at_scale": "n is"}.get(method, "the contract needs")
        fix = {"forward": "return an array of predictor_shape, or fix make_predictor_shape()",
               "jacobian": "return the m x n matrix d phi / d theta, or drop 'jacobian' from "
                           "`capabilities` to use autograd's",
               "random_point": "return a flat vector of length n (self.n)",
               }.get(method, f"return an array of shape {expected}")
        return (f"returned shape {arr.shape}, but {where} {expected}", fix)
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)) and _moderate(theta):
        bad = int(np.flatnonzero(~np.isfinite(arr.ravel()))[0])
        what = "nan" if np.isnan(arr.ravel()[bad]) else "inf"
        where = f" at the finite point {_preview(theta)}" if theta is not None else ""
        if method in ("forward", "random_point", "init_at_scale"):
            fix = ("return finite values for every finite theta (guard the log, sqrt, division "
                   "or power that leaves its domain)" if method == "forward" else
                   "return a finite vector")
        else:
            fix = ("forward is not differentiable there, or the closed form divides by zero; "
                   "make phi smooth (e.g. sqrt(x^2 + eps) instead of |x|) or fix the closed form")
        return (f"returned {what} (entry {bad} of shape {arr.shape}){where}", fix)
    return None


def _structure_problem(param, method, out):
    """Structural checks of the non-array methods: (problem, fix) or None."""
    if method == "make_spec":
        if not all(hasattr(out, a) for a in ("blocks", "slices", "size", "unpack")):
            return (f"returned an object of type {type(out).__name__}, not a ParamSpec",
                    "return paramgeo.ParamSpec(name=shape, ...) of the parameter blocks")
    elif method == "make_predictor_shape":
        try:
            shape = tuple(out)
            ok = all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0
                     for s in shape)
        except TypeError:
            ok = False
        if not ok:
            return (f"returned {out!r}, not a tuple of non-negative integers",
                    "return the shape of phi(theta), e.g. (d, d)")
    elif method == "symmetry":
        missing = [a for a in ("name", "dim", "act", "random_element", "generators")
                   if not hasattr(out if a == "name" else type(out), a)]  # dim may be costly
        if missing:
            return (f"returned an object of type {type(out).__name__}, not a "
                    f"paramgeo.symmetry.SymmetryGroup (it lacks {', '.join(missing)})",
                    "return a SymmetryGroup (OrthogonalGroup, GeneralLinearGroup, ScalingTorus, "
                    "... or a subclass), or drop 'symmetry' from `capabilities`")
    return None


def _raise_fault(param, method, problem, fix, cause=None):
    error = PluginError(plugin_label(param), method, problem, fix)
    if cause is not None:
        raise error from cause
    raise error


def guarded(fn: Callable[..., Any], method: str, plugin_code: bool = True) -> Callable[..., Any]:
    """``fn`` (the method ``method`` of a Parameterization) with its arguments and result
    checked and, for a plugin's own code (``plugin_code``), its exceptions reported as a
    :class:`PluginError` (see the module docstring).

    The array methods of one or two vector arguments (forward, jacobian, jvp, vjp, ...) get a
    wrapper of fixed arity: called positionally with float64 arrays of the lengths cached on
    the instance, it checks them by a few identity and shape comparisons and the result by one
    inner product (finite only if every entry is), a fraction of a microsecond a call; any
    other call takes the general path below."""
    if getattr(fn, "__paramgeo_guarded__", False):
        return fn
    names, shape_of = ARRAY_METHODS.get(method, ((), None))
    #: the attribute holding each vector argument's length ("n" or "m")
    lengths = tuple("m" if name == "w" else "n" for name in names)
    has_theta = bool(names) and names[0] in ("theta", "theta0")
    #: the instance attribute caching (shape of each vector argument..., result shape)
    cache = f"_guard_shapes_{method}"
    arity = len(names)

    def fault(self, exc, args, kwargs, traced):
        """Report the exception ``exc`` of the plugin's code as a PluginError."""
        theta = args[0] if has_theta and args else None
        if traced and _works_untraced(fn, self, args, kwargs):
            _raise_fault(self, method, f"cannot be traced by autograd ({type(exc).__name__}: "
                         f"{_short(exc)})", UNTRACEABLE_FIX, exc)
        at = f" at {_preview(theta)}" if theta is not None else ""
        _raise_fault(self, method, f"raised {type(exc).__name__}: {_short(exc)}{at}",
                     f"fix {type(self).__name__}.{method} (`paramgeo check "
                     f"{plugin_label(self)}` tests every method of the contract)", exc)

    def finish(self, out, theta, traced):
        """out, once the checks of an uncommon result pass (PluginError otherwise)."""
        if shape_of is not None:
            problem = _result_problem(self, method, out, shape_of, theta, traced)
        else:
            problem = _structure_problem(self, method, out)
        if problem is not None:
            _raise_fault(self, method, *problem)
        if method == "symmetry":
            claim_group(out, plugin_label(self))
        return out

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        if _TRUSTED[0]:
            return fn(self, *args, **kwargs)
        state = self.__dict__
        shapes = state.get(cache)
        ready = shapes is not None or "predictor_shape" in state  # sizes, spec, shape known
        if shapes is None and ready:
            result = None if shape_of is None else tuple(shape_of(self))
            shapes = state[cache] = (*((state[length],) for length in lengths), result,
                                     _summing_ones(result))
        # the common case, checked at the cost of a few comparisons: every vector argument a
        # float64 array of its length (then nothing is traced and nothing is exotic)
        plain = ready and len(args) == arity and all(
            type(value) is np.ndarray and value.dtype is _F64 and value.shape == shape
            for value, shape in zip(args, shapes))
        if plain:
            traced = exotic = False
        else:
            if names and ready:
                args = _check_args(self, method, names, args)
            traced = any(isinstance(a, Box) for a in args)
            exotic = any(isinstance(a, np.ndarray) and a.dtype == object for a in args)
        try:
            out = fn(self, *args, **kwargs)
        except (ParamgeoError, MemoryError):
            raise
        except (Exception, SystemExit) as exc:  # a stray sys.exit() is the plugin's fault too
            if not plugin_code:
                raise
            fault(self, exc, args, kwargs, traced)
        if (not ready or exotic) and method not in OTHER_METHODS:
            return out  # object arrays in, object arrays out: their caller checks them
        if plain and _common_result(out, shapes[-2], shapes[-1]):
            return out
        return finish(self, out, args[0] if has_theta and args else None, traced)

    if shape_of is None or arity not in (1, 2):
        call.__paramgeo_guarded__ = True  # type: ignore[attr-defined]
        return call

    # the fast wrappers of fixed arity: positional-only slots (a keyword call such as
    # jvp(theta, v=v) fills **kwargs and takes the general path), no argument packing, the
    # checks of _common_result inline (every name a local or closure variable)
    ndarray, f64, isfinite, vdot = np.ndarray, _F64, math.isfinite, np.vdot
    trusted_blocks = _TRUSTED
    if arity == 1:
        @functools.wraps(fn)
        def fast(self, a=_NONE, /, *args, **kwargs):
            if args or kwargs or a is _NONE:
                return call(self, *(() if a is _NONE else (a,)), *args, **kwargs)
            if trusted_blocks[0]:
                return fn(self, a)
            shapes = self.__dict__.get(cache)
            if (shapes is None or type(a) is not ndarray or a.dtype is not f64
                    or a.shape != shapes[0]):
                return call(self, a)
            try:
                out = fn(self, a)
            except (ParamgeoError, MemoryError):
                raise
            except (Exception, SystemExit) as exc:  # a stray sys.exit() is the plugin's fault
                if not plugin_code:
                    raise
                fault(self, exc, (a,), {}, False)
            ones = shapes[2]
            if (type(out) is ndarray and out.dtype is f64 and out.shape == shapes[1]
                    and (isfinite(out.dot(ones) if out.ndim == 1 else vdot(out, ones))
                         if ones is not None else _finite_large(out))):
                return out
            return finish(self, out, a if has_theta else None, False)
    else:
        @functools.wraps(fn)
        def fast(self, a=_NONE, b=_NONE, /, *args, **kwargs):
            if args or kwargs or b is _NONE:
                return call(self, *[x for x in (a, b) if x is not _NONE], *args, **kwargs)
            if trusted_blocks[0]:
                return fn(self, a, b)
            shapes = self.__dict__.get(cache)
            if (shapes is None or type(a) is not ndarray or type(b) is not ndarray
                    or a.dtype is not f64 or b.dtype is not f64
                    or a.shape != shapes[0] or b.shape != shapes[1]):
                return call(self, a, b)
            try:
                out = fn(self, a, b)
            except (ParamgeoError, MemoryError):
                raise
            except (Exception, SystemExit) as exc:  # a stray sys.exit() is the plugin's fault
                if not plugin_code:
                    raise
                fault(self, exc, (a, b), {}, False)
            ones = shapes[3]
            if (type(out) is ndarray and out.dtype is f64 and out.shape == shapes[2]
                    and (isfinite(out.dot(ones) if out.ndim == 1 else vdot(out, ones))
                         if ones is not None else _finite_large(out))):
                return out
            return finish(self, out, a if has_theta else None, False)

    fast.__paramgeo_guarded__ = True  # type: ignore[attr-defined]
    return fast


#: the default of the fast wrappers' positional slots (an argument not given)
_NONE = object()


#: results up to this many entries are summed by an inner product with a cached array of ones
_SUMMED_BY_ONES = 65536


def _summing_ones(shape):
    """The array of ones whose inner product with a result of ``shape`` is its sum (None for
    results over _SUMMED_BY_ONES entries or of no fixed shape). The sum is finite only if every
    entry is, and it overflows only for entries near the float64 maximum (the inner product of
    a result with itself would overflow, with a RuntimeWarning, at entries beyond 1e154)."""
    if shape is None or math.prod(shape) > _SUMMED_BY_ONES:
        return None
    return np.ones(shape)


@np.errstate(over="ignore", invalid="ignore")
def _finite_large(out):
    """Whether every entry of the large float64 array ``out`` is finite, by one inner product
    (an overflow of it, at entries beyond 1e154, only sends the result to the careful checks
    of _result_problem, silently)."""
    return math.isfinite(out.dot(out) if out.ndim == 1 else np.vdot(out, out))


def _common_result(out, shape, ones):
    """Whether ``out`` is the common result: a float64 array of ``shape`` whose entries are
    finite, told by one inner product (with ``ones``, see _summing_ones)."""
    if type(out) is not np.ndarray or out.dtype is not _F64 or out.shape != shape:
        return False
    if ones is None:
        return _finite_large(out)
    return math.isfinite(out.dot(ones) if out.ndim == 1 else np.vdot(out, ones))


def _works_untraced(fn, self, args, kwargs):
    """Whether ``fn`` succeeds on the plain values of its (traced) arguments."""
    try:
        fn(self, *[getval(a) for a in args], **kwargs)
    except (Exception, SystemExit):
        return False
    return True


def _short(exc, limit=200):
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def guard_class(cls: type) -> None:
    """Wrap each contract method ``cls`` defines itself (see GUARDED) with :func:`guarded`."""
    for method in GUARDED:
        fn = cls.__dict__.get(method)
        if callable(fn) and not isinstance(fn, (staticmethod, classmethod, type)):
            setattr(cls, method, guarded(fn, method))


# ------------------------------------------------------------------ a plugin's own symmetry group
#: the SymmetryGroup methods guarded in a subclass defined outside paramgeo (a plugin's own group)
GROUP_METHODS = ("act", "random_element", "generators", "sparse_generators", "support",
                 "vertical_projector")
GROUP_FIX = ("fix {cls}.{method} (`paramgeo check {plugin}` tests the declared group: invariance, "
             "generators in ker J, generator rank = dim)")


def group_owner(group: Any) -> str:
    """The plugin label of the parameterization whose ``symmetry()`` returned ``group``, else
    the group's class name (a group used on its own)."""
    return getattr(group, "_paramgeo_plugin", None) or type(group).__name__


def claim_group(group: Any, label: str) -> None:
    """Mark ``group`` (and the factors of a product) as returned by the plugin ``label``, so
    that a fault of its methods names that plugin."""
    for g in (group, *getattr(group, "factors", ())):
        try:
            object.__setattr__(g, "_paramgeo_plugin", label)
        except (AttributeError, TypeError):  # __slots__ or a frozen object: named by its class
            pass


def _group_fault(group, method, problem, fix=None, cause=None):
    plugin = group_owner(group)
    fix = fix or GROUP_FIX.format(cls=type(group).__name__, method=method, plugin=plugin)
    error = PluginError(plugin, f"symmetry().{method}", problem, fix)
    if cause is not None:
        raise error from cause
    raise error


def _group_result_problem(group, method, out, theta, dim):
    """What is wrong with ``out`` = group.method(..., theta) (None when nothing is)."""
    if method == "random_element":
        return None  # opaque to paramgeo: act() is checked
    if method == "vertical_projector":
        if not all(hasattr(out, a) for a in ("dim", "apply", "decision")):
            return (f"returned an object of type {type(out).__name__}, not a "
                    "paramgeo.symmetry.VerticalProjector",
                    "return sparse_projector(generators, policy) or drop the override")
        return None
    n = np.size(getval(theta))
    if method == "sparse_generators":
        shape = getattr(out, "shape", None)
        data = getattr(out, "data", None)
        if shape is None or data is None:
            return (f"returned an object of type {type(out).__name__}, not a scipy.sparse "
                    "matrix", "return scipy.sparse.csc_matrix(generators)")
        value, expected = np.asarray(data), (n, dim)
        shape = tuple(shape)
    else:
        value = getval(out)
        expected = {"act": np.shape(getval(theta)), "generators": (n, dim),
                    "support": (n,)}[method]
        if isinstance(value, str) or not isinstance(value, (np.ndarray, np.generic, list, tuple,
                                                            float, int)):
            return (f"returned an object of type {type(value).__name__}, not an array",
                    None)
        try:
            value = np.asarray(value)
        except ValueError as exc:
            return f"returned something that is not an array ({exc})", None
        shape = value.shape
    if method == "act" and shape != expected and value.size == n:
        shape = expected  # g . theta flat or in the block's shape: both are theta
    if shape != expected:
        what = {"act": "theta's", "generators": "(n, dim)", "sparse_generators": "(n, dim)",
                "support": "(n,)"}[method]
        return f"returned shape {shape}, expected {what} shape {expected}", None
    kinds = "b" if method == "support" else "biuf"
    if value.dtype.kind not in kinds:
        return (f"returned an array of dtype {value.dtype}, expected "
                f"{'booleans' if method == 'support' else 'real floats'}", None)
    if (method != "support" and value.size and not math.isfinite(float(np.sum(value)))
            and not np.all(np.isfinite(value)) and _moderate(theta)):
        what = "nan" if np.any(np.isnan(value)) else "inf"
        return f"returned {what} at the finite point {_preview(theta)}", None
    return None


def _guarded_group_method(fn, method):
    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        try:
            out = fn(self, *args, **kwargs)
        except (ParamgeoError, MemoryError):
            raise
        except Exception as exc:
            _group_fault(self, method, f"raised {type(exc).__name__}: {_short(exc)}", cause=exc)
        if method == "random_element":
            return out
        at = 1 if method == "act" else 0
        theta = args[at] if len(args) > at else kwargs.get("theta")
        if theta is None:
            return out
        dim = _group_dim(self) if method in ("generators", "sparse_generators") else 0
        problem = _group_result_problem(self, method, out, theta, dim)
        if problem is not None:
            _group_fault(self, method, problem[0], problem[1])
        return out

    call.__paramgeo_guarded__ = True
    return call


def _dim_problem(out):
    if isinstance(out, bool) or not isinstance(out, (int, np.integer)) or out < 0:
        return (f"returned {out!r}, not a non-negative integer",
                "return the dimension of the group as a manifold (0 for a finite group) as an "
                "int")
    return None


def _group_dim(group):
    """group.dim, checked (a plain class attribute as well as a property)."""
    out = group.dim
    problem = _dim_problem(out)
    if problem is not None:
        _group_fault(group, "dim", *problem)
    return int(out)


def _guarded_dim(fget):
    @functools.wraps(fget)
    def dim(self):
        try:
            out = fget(self)
        except (ParamgeoError, MemoryError):
            raise
        except Exception as exc:
            _group_fault(self, "dim", f"raised {type(exc).__name__}: {_short(exc)}", cause=exc)
        problem = _dim_problem(out)
        if problem is not None:
            _group_fault(self, "dim", *problem)
        return int(out)

    dim.__paramgeo_guarded__ = True
    return dim


def guard_group_class(cls: type) -> None:
    """Wrap the methods of the SymmetryGroup subclass ``cls`` that it defines itself (see
    GROUP_METHODS, and the ``dim`` property): an exception inside them, or a result of the wrong
    shape, dtype or with NaN/inf at a finite theta, becomes a :class:`PluginError` naming the
    plugin whose ``symmetry()`` returned the group, ``symmetry().METHOD``, the problem and the
    fix."""
    for method in GROUP_METHODS:
        fn = cls.__dict__.get(method)
        if callable(fn) and not getattr(fn, "__paramgeo_guarded__", False):
            setattr(cls, method, _guarded_group_method(fn, method))
    prop = cls.__dict__.get("dim")
    if isinstance(prop, property) and not getattr(prop.fget, "__paramgeo_guarded__", False):
        setattr(cls, "dim", property(_guarded_dim(prop.fget), doc=prop.__doc__))
