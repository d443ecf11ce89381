"""The parameterization contract: phi: Theta = R^n -> P = R^m, parameters to predictors.

A plugin subclasses :class:`Parameterization` and supplies ``name``, ``size_params`` (sizes
declared by :class:`Size`), ``make_spec()`` (a :class:`ParamSpec` of named blocks packed into
the flat theta), ``make_predictor_shape()`` and ``forward(theta)`` written with
``autograd.numpy``. Everything else is derived by autograd and may be overridden by closed
forms; optional capabilities are *declared* in ``capabilities`` (never probed with ``hasattr``)
and ``paramgeo.check`` verifies the declaration against the behaviour (docs/tutorial-register.md).
"""

from __future__ import annotations

import abc
import functools
import math
import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Optional, Sequence

import autograd
import autograd.numpy as anp
import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import NotProvidedError, ShapeError, SizeError, approx
from .guard import guard_class, guarded
from ..linalg.numerics import RankDecision, RankPolicy

if TYPE_CHECKING:
    import networkx as nx

#: Optional capabilities a plugin may declare, with the method each one promises.
CAPABILITIES = {
    "jacobian": "jacobian",  # closed-form Jacobian (overrides autograd)
    "jvp": "jvp",  # closed-form Jacobian-vector product
    "vjp": "vjp",  # closed-form vector-Jacobian product
    "symmetry": "symmetry",  # the symmetry group G with phi(g . theta) = phi(theta)
    "symbolic": "symbolic",  # sympy expressions of phi in parameter symbols
    "architecture": "architecture",  # networkx DiGraph, neurons as nodes, weights as edges
    "horizontal_projection": "horizontal_projection",  # closed-form horizontal projection
    "mirror_potential": "mirror_potential",  # closed-form Legendre potential of the mirror flow
    "quadratic_forms": "quadratic_forms",  # x_i^T phi(theta) x_i and its VJP, never forming phi
    "rank_at": "rank_at",  # rank of J(theta) in closed form from the factors (a RankDecision)
    "sparse_jacobian": "sparse_jacobian",  # J(theta) as a scipy.sparse matrix (O(nnz) memory)
    "kinks": "kinks",  # piecewise-smooth phi: distances to the sets where it is not differentiable
    "input_action": "input_action",  # a group acting on the fixed inputs (positions, data)
    "learning_coefficient": "learning_coefficient",  # exact (lambda, m) at a true parameter
    "batched_vjp": "batched_vjp",  # phi and its VJP at a batch of points in one array operation
    "on_inputs": "on_inputs",  # the same map on other inputs (a model's outputs on a data batch)
}


#: Attributes of every Parameterization; a size with one of these names is only in ``sizes``.
RESERVED_ATTRIBUTES = frozenset({"n", "m", "spec", "sizes", "predictor_shape", "name"})


class Size:
    """Declaration of one size parameter of a plugin (``d``, ``r``, ``widths``, ``tied``, ...).

    ``kind`` is one of ``int``, ``ints`` (a comma-separated tuple of ints), ``bool``, ``float``
    or ``choice`` (with ``choices``). Values given as strings (from the CLI) are parsed; every
    value is validated against ``minimum`` and ``choices``. ``default`` makes the size optional;
    ``primary=False`` keeps a secondary size (a seed, an option) out of summary tables.
    """

    KINDS = ("int", "ints", "bool", "float", "choice")

    def __init__(self, kind="int", default=None, minimum=None, choices=None, help="",
                 primary=True):
        if kind not in self.KINDS:
            raise ValueError(f"Size kind must be one of {self.KINDS}, got {kind!r}")
        self.kind, self.default, self.minimum = kind, default, minimum
        self.choices, self.help = tuple(choices or ()), help
        #: shown in summary tables (secondary sizes such as seeds only in full output)
        self.primary = primary

    def parse(self, key: str, value: Any) -> Any:
        """Return the validated value of size ``key`` (strings are parsed); raise SizeError."""
        try:
            value = self._convert(value)
        except (TypeError, ValueError):
            expected = {
                "int": "an integer (ASCII digits)",
                "ints": "comma-separated integers such as 2,3,1",
                "bool": "true or false",
                "float": "a number (ASCII digits)",
                "choice": "one of " + ", ".join(self.choices),
            }[self.kind]
            raise SizeError(f"size {key}={value!r} is invalid: expected {expected}") from None
        values = value if self.kind == "ints" else (value,)
        if self.minimum is not None and any(v < self.minimum for v in values):
            raise SizeError(f"size {key}={value!r} is invalid: must be >= {self.minimum}")
        if self.kind == "choice" and value not in self.choices:
            raise SizeError(
                f"size {key}={value!r} is invalid: choose one of {', '.join(self.choices)}"
            )
        return value

    def _convert(self, value):
        if isinstance(value, str) and not value.isascii():
            raise ValueError  # int() and float() also read other scripts' digits, e.g. "\u0663"
        if isinstance(value, bool) and self.kind in ("int", "ints", "float"):
            raise ValueError  # True is no size (int(True) would silently give 1)
        if self.kind == "int":
            if isinstance(value, float) and not float(value).is_integer():
                raise ValueError
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if self.kind == "ints":
            if isinstance(value, str):
                parts = value.replace(" ", "").split(",")
                if not all(parts):  # an empty entry, as in 2,,1 or a trailing comma
                    raise ValueError
                return tuple(int(p) for p in parts)
            if any(isinstance(v, bool) or (isinstance(v, float) and not v.is_integer())
                   for v in value):
                raise ValueError
            return tuple(int(v) for v in value)
        if self.kind == "bool":
            if isinstance(value, str):
                low = value.strip().lower()
                if low in ("1", "true", "yes", "on"):
                    return True
                if low in ("0", "false", "no", "off"):
                    return False
                raise ValueError
            return bool(value)
        if self.kind == "float":
            out = float(value)
            if not math.isfinite(out):
                raise ValueError
            return out
        return str(value)


#: The most entries of any array (a block, the predictor, fixed inputs) a plugin builds while it
#: is instantiated; beyond it the sizes are refused before anything is allocated.
MAX_BUILD_ENTRIES = 50_000_000


def require_entries(owner: str, **counts: int) -> None:
    """Refuse (SizeError) sizes that would make a plugin allocate arrays of more than
    ``MAX_BUILD_ENTRIES`` entries: call it in ``validate_sizes`` with, e.g.,
    ``require_entries("qk-attention", parameters=2 * H * d * r, tokens=T * d)``, before
    building anything. The counts are exact Python integers (no overflow)."""
    for what, count in counts.items():
        if count > MAX_BUILD_ENTRIES:
            raise SizeError(f"{owner}: the {what.replace('_', ' ')} would have {approx(count)} "
                            f"entries at these sizes, more than paramgeo builds "
                            f"({MAX_BUILD_ENTRIES:.3g}); use smaller sizes")


def fixed_array(owner: str, label: str, value: Optional[ArrayLike], sizes: dict,
                names: Sequence[str]) -> Optional[NDArray[np.float64]]:
    """A user's fixed 2-d array of a plugin (lora's W0, relu-net's X) as a finite float array,
    with the sizes ``names`` (one per axis) defaulted in ``sizes`` to its shape; None stays
    None. Raises ShapeError for a non-finite or non-2-d array or sizes contradicting it."""
    if value is None:
        return None
    arr = np.asarray(value, dtype=float)
    if arr.ndim != 2 or not np.all(np.isfinite(arr)):
        raise ShapeError(f"{owner}: {label} must be a finite 2-d array, got shape {arr.shape}")
    for name, extent in zip(names, arr.shape):
        if str(sizes.setdefault(name, extent)).strip() != str(extent):
            raise ShapeError(f"{owner}: {label} has shape {arr.shape} but the sizes say "
                             f"{name}={sizes[name]}; drop {', '.join(names)} (they default to "
                             f"{label}'s shape)")
    return arr


class ParamSpec:
    """Named parameter blocks with shapes, packed in order into one flat vector theta.

    >>> spec = ParamSpec(U=(4, 2), v=(3,))
    >>> spec.size
    11
    """

    def __init__(self, blocks=None, **kwargs):
        items = list((blocks or {}).items()) + list(kwargs.items())
        self.blocks = OrderedDict()
        for name, shape in items:
            shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
            if any(s < 0 for s in shape):
                raise SizeError(f"block {name!r} has a negative dimension in shape {shape}")
            self.blocks[name] = shape
        self.slices = OrderedDict()
        start = 0
        for name, shape in self.blocks.items():
            stop = start + math.prod(shape)
            self.slices[name] = slice(start, stop)
            start = stop
        self.size = start

    def unpack(self, theta: Any) -> OrderedDict[str, Any]:
        """Return an ordered dict of named arrays (views of theta; autograd-traceable)."""
        return OrderedDict(
            (name, anp.reshape(theta[self.slices[name]], shape))
            for name, shape in self.blocks.items()
        )

    def pack(self, *arrays: ArrayLike, **named: ArrayLike) -> NDArray[np.float64]:
        """Flatten blocks (positionally, by name, or as one mapping such as ``unpack``'s
        result) into one theta of length ``size``."""
        if len(arrays) == 1 and isinstance(arrays[0], Mapping) and not named:
            named = dict(arrays[0])
            arrays = ()
        if arrays and named:
            raise TypeError("pack takes blocks either positionally or by name, not both")
        if named:
            missing = set(self.blocks) - set(named)
            extra = set(named) - set(self.blocks)
            if missing or extra:
                raise ShapeError(
                    f"pack needs exactly the blocks {list(self.blocks)}; "
                    f"missing {sorted(missing)}, unexpected {sorted(extra)}"
                )
            arrays = [named[name] for name in self.blocks]
        if len(arrays) != len(self.blocks):
            raise ShapeError(f"pack needs {len(self.blocks)} blocks {list(self.blocks)}")
        out = []
        for (name, shape), arr in zip(self.blocks.items(), arrays):
            arr = np.asarray(arr, dtype=float)
            if arr.shape != shape:
                raise ShapeError(f"block {name!r} must have shape {shape}, got {arr.shape}")
            out.append(arr.ravel())
        return np.concatenate(out) if out else np.zeros(0)

    def labels(self) -> list[str]:
        """Human-readable label of every entry of theta, e.g. ``U[2,1]``."""
        out = []
        for name, shape in self.blocks.items():
            for idx in np.ndindex(*shape):
                out.append(f"{name}[{','.join(map(str, idx))}]" if shape else name)
        return out

    def __repr__(self):
        inner = ", ".join(f"{k}={v}" for k, v in self.blocks.items())
        return f"ParamSpec({inner})"


class Parameterization(abc.ABC):
    """A smooth map phi: R^n -> R^m from flat parameters theta to predictors.

    Subclass it and define ``name``, ``size_params``, ``make_spec``, ``make_predictor_shape``
    and ``forward``. Sizes are passed as keyword arguments (strings are parsed, so the CLI can
    hand ``-p d=4`` through) and become attributes: ``UUT(d=4, r=2).d == 4``, except sizes
    named like a reserved attribute (``RESERVED_ATTRIBUTES``: n, m, ...), which are read from
    ``self.sizes``.

    Attributes:
        spec (ParamSpec): the named parameter blocks packed into theta.
        predictor_shape (tuple[int, ...]): the shape of phi(theta).
        n (int): the parameter dimension.
        m (int): the predictor dimension, the product of predictor_shape.
        sizes (dict): the validated sizes.
    """

    name: ClassVar[str] = ""
    size_params: ClassVar[Mapping[str, Size]] = {}
    capabilities: ClassVar[frozenset] = frozenset()
    references: ClassVar[tuple] = ()

    def __init_subclass__(cls, **kwargs):
        """Route every contract method the subclass defines through the guarded call layer
        (:mod:`paramgeo.contract.guard`): a plugin's fault is reported as that plugin's error."""
        super().__init_subclass__(**kwargs)
        guard_class(cls)

    def __init__(self, /, **sizes):
        cls = type(self)
        unknown = sorted(set(sizes) - set(cls.size_params))
        if unknown:
            known = ", ".join(cls.size_params) or "none"
            raise SizeError(
                f"{cls.name or cls.__name__}: unknown size {', '.join(unknown)}; "
                f"its sizes are: {known}"
            )
        parsed = {}
        for key, decl in cls.size_params.items():
            if key in sizes:
                parsed[key] = decl.parse(key, sizes[key])
            elif decl.default is not None:
                parsed[key] = decl.parse(key, decl.default)
            else:
                raise SizeError(
                    f"{cls.name or cls.__name__}: missing size {key!r}; give it as -p {key}=VALUE"
                )
        self.sizes = parsed
        for key, value in parsed.items():
            if key not in RESERVED_ATTRIBUTES:  # e.g. sizes named m, n: read self.sizes["m"]
                setattr(self, key, value)
        self.validate_sizes()
        self.spec = self.make_spec()
        self.predictor_shape = tuple(int(s) for s in self.make_predictor_shape())
        self.n = self.spec.size
        self.m = math.prod(self.predictor_shape)
        if self.m <= 0 or any(s < 0 for s in self.predictor_shape):
            from ..results import title

            label = title(self.name, self.sizes)
            raise SizeError(f"{label}: the predictor shape "
                            f"{self.predictor_shape} has no entries, so there is no map to "
                            "analyse; give sizes (or a make_predictor_shape) with at least one "
                            "predictor coordinate")
        self._jac = autograd.jacobian(self.forward_flat)

    # ------------------------------------------------------------------ required
    @abc.abstractmethod
    def make_spec(self) -> ParamSpec:
        """Return the :class:`ParamSpec` of the parameter blocks."""

    @abc.abstractmethod
    def make_predictor_shape(self) -> tuple[int, ...]:
        """Return the shape of phi(theta)."""

    @abc.abstractmethod
    def forward(self, theta: ArrayLike) -> NDArray[np.float64]:
        """The predictor phi(theta), written with ``autograd.numpy`` so autograd can trace it.

        Args:
            theta: the flat parameters, shape (n,); ``self.spec.unpack(theta)`` names blocks.

        Returns:
            phi(theta), shape ``predictor_shape`` (m entries).

        Raises:
            PluginError: the plugin's code fails or returns the wrong shape (the guard).

        Examples:
            >>> import paramgeo
            >>> paramgeo.get("uut", d=2, r=1).forward([1.0, 2.0])   # U U^T
            array([[1., 2.],
                   [2., 4.]])
        """

    # ------------------------------------------------------------------ hooks
    def validate_sizes(self) -> None:
        """Check relations between sizes (e.g. r <= d); raise SizeError. Default: none."""

    @functools.partial(guarded, method="random_point", plugin_code=False)
    def random_point(self, rng: np.random.Generator) -> NDArray[np.float64]:
        """A random theta at a sensible scale; default i.i.d. N(0, 1) entries.

        Args:
            rng: the random generator (``numpy.random.default_rng(seed)``).

        Returns:
            theta of shape (n,).
        """
        return rng.standard_normal(self.n)

    @functools.partial(guarded, method="init_at_scale", plugin_code=False)
    def init_at_scale(self, alpha: float) -> NDArray[np.float64]:
        """The initialisation of scale ``alpha`` of the plugin's literature (implicit bias, mirror
        flows): default alpha * (1, ..., 1); a plugin may override it (phi(theta_0) = 0)."""
        return float(alpha) * np.ones(self.n)

    # ------------------------------------------------------------------ derived
    def provides(self, capability: str) -> bool:
        """Whether the plugin declared the optional ``capability`` (see ``CAPABILITIES``)."""
        return capability in self.capabilities

    def as_theta(self, theta: ArrayLike) -> NDArray[np.float64]:
        """theta validated as a flat float vector of length n.

        Args:
            theta: shape (n,), or the shape of the plugin's single parameter block.

        Returns:
            A float64 array of shape (n,).

        Raises:
            ShapeError: wrong shape, not numbers, or a non-finite entry (named by its label).
        """
        try:
            arr = np.asarray(theta, dtype=float)
        except (TypeError, ValueError):
            raise ShapeError(f"{self.name}: a point must be an array of {self.n} numbers, got "
                             f"{type(theta).__name__}") from None
        if arr.shape != (self.n,):
            blocks = list(self.spec.blocks.values())
            # flat, or the shape of the single block (a (2, 4) array is no (4, 2) block)
            if arr.size != self.n or (arr.ndim > 1 and (len(blocks) != 1
                                                        or arr.shape != blocks[0])):
                raise ShapeError(
                    f"{self.name}: a point must have {self.n} entries, flat or in the shape of "
                    f"its single block (blocks {dict(self.spec.blocks)}), got shape "
                    f"{np.shape(theta)}"
                )
            arr = arr.ravel()
        # |theta|^2 is finite unless an entry is NaN or inf, or |theta| > 1e154 (numpy then warns
        # of the overflow and the entries are checked one by one); one dot product is the
        # cheapest full pass, and this runs on every public call
        if not math.isfinite(arr.dot(arr)) and not np.all(np.isfinite(arr)):
            bad = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise ShapeError(
                f"{self.name}: the point has a non-finite value at {self.spec.labels()[bad]}"
            )
        return arr

    def forward_flat(self, theta: ArrayLike) -> NDArray[np.float64]:
        """phi(theta) flattened to a vector of shape (m,) (row-major: vec of the predictor)."""
        return anp.reshape(self.forward(theta), (-1,))

    @functools.partial(guarded, method="jacobian", plugin_code=False)
    def jacobian(self, theta: ArrayLike) -> NDArray[np.float64]:
        """The Jacobian J(theta) = d phi / d theta (autograd unless the plugin overrides it).

        Args:
            theta: the flat parameters, shape (n,).

        Returns:
            J of shape (m, n): J[i, j] = d phi_i / d theta_j, phi flattened as ``forward_flat``.

        Raises:
            ShapeError: theta is not of shape (n,) (the plugin's faults: PluginError).

        Examples:
            >>> import paramgeo
            >>> paramgeo.get("uut", d=2, r=1).jacobian([1.0, 2.0])   # d(u u^T) / du
            array([[2., 0.],
                   [2., 1.],
                   [2., 1.],
                   [0., 4.]])
        """
        return np.asarray(self._jac(np.asarray(theta, dtype=float))).reshape(self.m, self.n)

    @functools.partial(guarded, method="jvp", plugin_code=False)
    def jvp(self, theta: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        """J(theta) v = d/dt phi(theta + t v) at t = 0, by autograd's forward mode by default.

        Args:
            theta: the flat parameters, shape (n,).
            v: a parameter tangent vector, shape (n,).

        Returns:
            J v, shape (m,).

        Raises:
            ShapeError: theta or v is not of shape (n,) (the plugin's faults: PluginError).

        Examples:
            >>> import paramgeo
            >>> paramgeo.get("uut", d=2, r=1).jvp([1.0, 2.0], [1.0, 0.0])   # u e1^T + e1 u^T
            array([2., 2., 2., 0.])
        """
        from autograd.differential_operators import make_jvp

        return np.asarray(make_jvp(self.forward_flat)(np.asarray(theta, float))(v)[1])

    @functools.partial(guarded, method="vjp", plugin_code=False)
    def vjp(self, theta: ArrayLike, w: ArrayLike) -> NDArray[np.float64]:
        """J(theta)^T w, the gradient of w . phi(theta), by autograd's reverse mode by default.

        With w = grad ell(phi) it is the gradient of the loss ell o phi (the chain rule).

        Args:
            theta: the flat parameters, shape (n,).
            w: a predictor cotangent vector, shape (m,) (phi flattened as ``forward_flat``).

        Returns:
            J^T w, shape (n,).

        Raises:
            ShapeError: theta is not of shape (n,) or w not of shape (m,) (plugin faults:
                PluginError).

        Examples:
            >>> import paramgeo
            >>> paramgeo.get("uut", d=2, r=1).vjp([1.0, 2.0], [1.0, 0.0, 0.0, 0.0])   # 2 W u
            array([2., 0.])
        """
        vjp_fun, _ = autograd.make_vjp(self.forward_flat)(np.asarray(theta, float))
        return np.asarray(vjp_fun(np.asarray(w, float)))

    @functools.partial(guarded, method="jacobian_derivative", plugin_code=False)
    def jacobian_derivative(self, theta: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        """d/dt J(theta + t v) at t = 0: row i is (Hess phi_i) v, reverse mode over the JVP.

        Args:
            theta: the flat parameters, shape (n,).
            v: the direction, shape (n,).

        Returns:
            An (m, n) matrix.

        Raises:
            ShapeError: theta or v is not of shape (n,).

        Examples:
            >>> import paramgeo
            >>> paramgeo.get("uut", d=1, r=1).jacobian_derivative([3.0], [1.0])   # d^2 u^2
            array([[2.]])
        """
        from autograd.differential_operators import make_jvp

        v = np.asarray(v, float)
        along = autograd.jacobian(lambda x: make_jvp(self.forward_flat)(x)(v)[1])
        with warnings.catch_warnings():  # a linear phi has a constant Jacobian: no dependence
            warnings.filterwarnings("ignore", "Output seems independent of input")
            out = along(np.asarray(theta, float))
        return np.asarray(out, dtype=float).reshape(self.m, self.n)

    @functools.partial(guarded, method="hessian_vp", plugin_code=False)
    def hessian_vp(self, theta: ArrayLike, w: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        """(sum_i w_i Hess phi_i(theta)) v = (d/dt J(theta + t v))^T w.

        The second-order term of the Hessian of a loss ell o phi (w = grad ell); default:
        reverse-over-reverse autograd on <w, phi(theta)>, never forming an m x n matrix.

        Args:
            theta: the flat parameters, shape (n,).
            w: the predictor weights, shape (m,).
            v: the direction, shape (n,).

        Returns:
            A vector of shape (n,).

        Raises:
            ShapeError: theta or v is not of shape (n,), or w not of shape (m,).

        Examples:
            >>> import paramgeo
            >>> paramgeo.get("uut", d=1, r=1).hessian_vp([3.0], [2.0], [1.0])   # 2 * 2 * 1
            array([4.])
        """
        w, v = np.asarray(w, float), np.asarray(v, float)
        grad = autograd.grad(lambda t: anp.dot(w, self.forward_flat(t)))
        with warnings.catch_warnings():  # a linear phi has a constant field: no dependence
            warnings.filterwarnings("ignore", "Output seems independent of input")
            return np.asarray(autograd.grad(lambda t: anp.dot(grad(t), v))(
                np.asarray(theta, float)), dtype=float)

    # ------------------------------------------------------------------ optional
    def symmetry(self) -> Any:
        """The symmetry group G (a :class:`paramgeo.symmetry.SymmetryGroup`)."""
        raise NotProvidedError(type(self).__name__, "symmetry", "symmetry")

    def symbolic(self) -> tuple[list, list]:
        """(symbols, exprs): sympy symbols in theta order and phi's m entries as expressions."""
        raise NotProvidedError(type(self).__name__, "symbolic", "symbolic")

    def architecture(self) -> nx.DiGraph:
        """A networkx DiGraph: neurons as nodes, weights as edges with attribute ``index``."""
        raise NotProvidedError(type(self).__name__, "architecture", "architecture")

    def sparse_jacobian(self, theta: ArrayLike) -> Any:
        """J(theta) as a ``scipy.sparse`` (m, n) matrix with O(n) nonzeros (factored as J J^T)."""
        raise NotProvidedError(type(self).__name__, "sparse_jacobian", "sparse_jacobian")

    def horizontal_projection(self, theta: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        """Closed-form projection of v onto the horizontal space at theta."""
        raise NotProvidedError(type(self).__name__, "horizontal_projection", "horizontal_projection")

    def quadratic_forms(self, theta: ArrayLike, X: ArrayLike) -> tuple[Any, Any]:
        """(f, vjp) for Q = phi(theta) (d x d) and X (N x d): f_i = x_i^T Q x_i and vjp(c) =
        J^T vec(sum_i c_i x_i x_i^T), from the factors without forming Q (for U U^T: f =
        |U^T x_i|^2, vjp(c) = 2 X^T diag(c) X U); ``paramgeo.losses.QuadraticMeasurements``."""
        raise NotProvidedError(type(self).__name__, "quadratic_forms", "quadratic_forms")

    def batched_vjp(self, thetas: ArrayLike) -> tuple[Any, Any]:
        """(Phi, vjp) at K points at once, thetas (K, n): Phi[k] = phi(thetas[k]), vjp(G) =
        (J(thetas[k])^T G[k])_k for G (K, m) (:func:`paramgeo.losses.batched_value_and_grad`)."""
        raise NotProvidedError(type(self).__name__, "batched_vjp", "batched_vjp")

    def on_inputs(self, X: Any) -> Parameterization:
        """theta -> f(theta; X): the same ``spec`` on the batch X (B, *input_shape), not the probe
        (the losses on data of :func:`paramgeo.llc.estimate_llc`; the adapters declare it)."""
        raise NotProvidedError(type(self).__name__, "on_inputs", "on_inputs")

    def rank_at(self, theta: ArrayLike, policy: Optional[RankPolicy] = None) -> RankDecision:
        """rank J(theta) in closed form from the factors, a :class:`~paramgeo.linalg.numerics.RankDecision`
        under ``policy`` whose singular values are those of J, or of the factor whose decision
        is nearest its tolerance (the plugin documents which); the contract check compares it
        with the SVD of J. Used by :func:`paramgeo.geometry.rank_at`."""
        raise NotProvidedError(type(self).__name__, "rank_at", "rank_at")

    def kinks(self, theta: ArrayLike) -> tuple[Sequence[str], NDArray[np.float64]]:
        """(labels, distances): a scale-free distance to each kink of a piecewise-smooth phi, 0
        on it (:mod:`paramgeo.geometry.kinks`; ReLU: |w_j . x_i + b_j| / (|w_j| |x_i| + |b_j|))."""
        raise NotProvidedError(type(self).__name__, "kinks", "kinks")

    def input_action(self) -> Any:
        """A :class:`paramgeo.symmetry.equivariance.InputAction` on the fixed inputs (token positions, data
        points): :func:`paramgeo.symmetry.equivariance.input_equivariance` tests f(g . z) = rho(g) f(z)."""
        raise NotProvidedError(type(self).__name__, "input_action", "input_action")

    def learning_coefficient(self, theta: ArrayLike) -> Any:
        """The exact (lambda, m) at the true theta, a :class:`paramgeo.llc.LearningCoefficient`, or
        None where no formula applies (:func:`paramgeo.llc.exact_learning_coefficient`)."""
        raise NotProvidedError(type(self).__name__, "learning_coefficient", "learning_coefficient")

    def mirror_potential(self, theta0: ArrayLike) -> Any:
        """The closed-form Legendre potential (:class:`paramgeo.mirror.Potential`) of the mirror
        flow from phi(theta0) of a commuting phi, or None (then built numerically)."""
        raise NotProvidedError(type(self).__name__, "mirror_potential", "mirror_potential")

    def __repr__(self):
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"{type(self).__name__}({sizes})"
