"""The parameterization contract.

A parameterization is a smooth map phi: Theta = R^n -> P = R^m from parameters to predictors.
A plugin subclasses :class:`Parameterization` and supplies

* ``name`` and ``size_params`` (a mapping of size names to :class:`Size` declarations);
* ``make_spec()`` -> a :class:`ParamSpec` of named blocks packed into the flat theta;
* ``make_predictor_shape()`` -> the shape of phi(theta);
* ``forward(theta)`` written with ``autograd.numpy`` so that autograd can trace it.

Everything else is derived (Jacobian, JVP, VJP, directional derivative of J by autograd) and may
be overridden by closed forms. Optional capabilities are *declared* in the class attribute
``capabilities`` (never probed with ``hasattr``); calling an undeclared one raises
:class:`~paramgeo.errors.NotProvidedError`. The contract check (``paramgeo.check``) verifies the
declaration against the behaviour.

Engines speak only the flat numpy vector theta; ``spec.unpack(theta)`` gives named arrays.
"""

import abc
import functools
import math
from collections import OrderedDict
from typing import ClassVar, Mapping

import autograd
import autograd.numpy as anp
import numpy as np

from ..errors import NotProvidedError, ShapeError, SizeError, approx
from .guard import guard_class, guarded

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

    def parse(self, key, value):
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


def require_entries(owner, **counts):
    """Refuse (SizeError) sizes that would make a plugin allocate arrays of more than
    ``MAX_BUILD_ENTRIES`` entries: call it in ``validate_sizes`` with, e.g.,
    ``require_entries("qk-attention", parameters=2 * H * d * r, tokens=T * d)``, before
    building anything. The counts are exact Python integers (no overflow)."""
    for what, count in counts.items():
        if count > MAX_BUILD_ENTRIES:
            raise SizeError(f"{owner}: the {what.replace('_', ' ')} would have {approx(count)} "
                            f"entries at these sizes, more than paramgeo builds "
                            f"({MAX_BUILD_ENTRIES:.3g}); use smaller sizes")


def fixed_array(owner, label, value, sizes, names):
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

    def unpack(self, theta):
        """Return an ordered dict of named arrays (views of theta; autograd-traceable)."""
        return OrderedDict(
            (name, anp.reshape(theta[self.slices[name]], shape))
            for name, shape in self.blocks.items()
        )

    def pack(self, *arrays, **named):
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

    def labels(self):
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

    Attributes
    ----------
    spec : ParamSpec
    predictor_shape : tuple of int
    n : int          parameter dimension
    m : int          predictor dimension (product of predictor_shape)
    sizes : dict     the validated sizes
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
    def make_spec(self):
        """Return the :class:`ParamSpec` of the parameter blocks."""

    @abc.abstractmethod
    def make_predictor_shape(self):
        """Return the shape of phi(theta)."""

    @abc.abstractmethod
    def forward(self, theta):
        """phi(theta), written with ``autograd.numpy``; returns an array of predictor_shape."""

    # ------------------------------------------------------------------ hooks
    def validate_sizes(self):
        """Check relations between sizes (e.g. r <= d); raise SizeError. Default: none."""

    @functools.partial(guarded, method="random_point", plugin_code=False)
    def random_point(self, rng):
        """A random theta at a sensible scale; default i.i.d. N(0, 1) entries."""
        return rng.standard_normal(self.n)

    @functools.partial(guarded, method="init_at_scale", plugin_code=False)
    def init_at_scale(self, alpha):
        """The initialisation of scale ``alpha`` used in the plugin's literature (implicit-bias
        and mirror-flow studies); default alpha * (1, ..., 1). Plugins override it where the
        literature uses another one (e.g. an unbiased initialisation with phi(theta_0) = 0)."""
        return float(alpha) * np.ones(self.n)

    # ------------------------------------------------------------------ derived
    def provides(self, capability):
        """Whether the plugin declared the optional ``capability`` (see ``CAPABILITIES``)."""
        return capability in self.capabilities

    def as_theta(self, theta):
        """Validate and return theta as a flat float vector of length n (ShapeError otherwise)."""
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

    def forward_flat(self, theta):
        """phi(theta) flattened to a vector of length m."""
        return anp.reshape(self.forward(theta), (-1,))

    @functools.partial(guarded, method="jacobian", plugin_code=False)
    def jacobian(self, theta):
        """The m x n Jacobian J(theta) = d phi / d theta (autograd unless overridden)."""
        return np.asarray(self._jac(np.asarray(theta, dtype=float))).reshape(self.m, self.n)

    @functools.partial(guarded, method="jvp", plugin_code=False)
    def jvp(self, theta, v):
        """J(theta) v, a vector of length m (autograd forward mode unless overridden)."""
        from autograd.differential_operators import make_jvp

        return np.asarray(make_jvp(self.forward_flat)(np.asarray(theta, float))(v)[1])

    @functools.partial(guarded, method="vjp", plugin_code=False)
    def vjp(self, theta, w):
        """J(theta)^T w, a vector of length n (autograd reverse mode unless overridden)."""
        vjp_fun, _ = autograd.make_vjp(self.forward_flat)(np.asarray(theta, float))
        return np.asarray(vjp_fun(np.asarray(w, float)))

    @functools.partial(guarded, method="jacobian_derivative", plugin_code=False)
    def jacobian_derivative(self, theta, v):
        """The m x n matrix d/dt J(theta + t v) at t = 0 (second derivative of phi along v).

        Row i is (Hess phi_i) v, the Jacobian of theta -> J(theta) v: reverse mode over the
        forward-mode JVP (m backward passes; symmetric second derivatives make it equal to
        d/dt J(theta + t v))."""
        from autograd.differential_operators import make_jvp

        import warnings

        v = np.asarray(v, float)
        along = autograd.jacobian(lambda x: make_jvp(self.forward_flat)(x)(v)[1])
        with warnings.catch_warnings():  # a linear phi has a constant Jacobian: no dependence
            warnings.filterwarnings("ignore", "Output seems independent of input")
            out = along(np.asarray(theta, float))
        return np.asarray(out, dtype=float).reshape(self.m, self.n)

    @functools.partial(guarded, method="hessian_vp", plugin_code=False)
    def hessian_vp(self, theta, w, v):
        """(sum_i w_i Hess phi_i(theta)) v = (d/dt J(theta + t v))^T w, a vector of length n.

        The second-order term of the Hessian of a loss ell o phi (with w = grad ell) and the
        derivative of the field J^T w along v (Lie brackets of the fields grad phi_i). Default:
        reverse-over-reverse autograd on <w, phi(theta)>, never forming an m x n matrix.
        """
        import warnings

        w, v = np.asarray(w, float), np.asarray(v, float)
        grad = autograd.grad(lambda t: anp.dot(w, self.forward_flat(t)))
        with warnings.catch_warnings():  # a linear phi has a constant field: no dependence
            warnings.filterwarnings("ignore", "Output seems independent of input")
            return np.asarray(autograd.grad(lambda t: anp.dot(grad(t), v))(
                np.asarray(theta, float)), dtype=float)

    # ------------------------------------------------------------------ optional
    def symmetry(self):
        """The symmetry group G (a :class:`paramgeo.symmetry.SymmetryGroup`)."""
        raise NotProvidedError(type(self).__name__, "symmetry", "symmetry")

    def symbolic(self):
        """(symbols, exprs): sympy symbols in theta order and phi's m entries as expressions."""
        raise NotProvidedError(type(self).__name__, "symbolic", "symbolic")

    def architecture(self):
        """A networkx DiGraph: neurons as nodes, weights as edges with attribute ``index``."""
        raise NotProvidedError(type(self).__name__, "architecture", "architecture")

    def sparse_jacobian(self, theta):
        """J(theta) as a ``scipy.sparse`` matrix (m x n), for maps whose Jacobian has O(n)
        nonzeros (coordinatewise products); the matrix-free rank route then factors J J^T."""
        raise NotProvidedError(type(self).__name__, "sparse_jacobian", "sparse_jacobian")

    def horizontal_projection(self, theta, v):
        """Closed-form projection of v onto the horizontal space at theta."""
        raise NotProvidedError(type(self).__name__, "horizontal_projection", "horizontal_projection")

    def quadratic_forms(self, theta, X):
        """(f, vjp) for a square d x d predictor Q = phi(theta) and inputs X (N x d):
        f_i = x_i^T Q x_i, and vjp(c) = J(theta)^T vec(sum_i c_i x_i x_i^T), computed from the
        factors without forming Q (for U U^T: f = |U^T x_i|^2, vjp(c) = 2 X^T diag(c) X U). Used
        by ``paramgeo.losses.QuadraticMeasurements`` (quadratic networks f(x) = x^T Q x)."""
        raise NotProvidedError(type(self).__name__, "quadratic_forms", "quadratic_forms")

    def batched_vjp(self, thetas):
        """(Phi, vjp) at K points at once, thetas of shape (K, n): Phi[k] = phi(thetas[k])
        (shape (K, *predictor_shape)) and vjp(G) = (J(thetas[k])^T G[k])_k (shape (K, n)) for
        G of shape (K, m), each one batched array operation instead of K calls (for U V^T:
        Phi = U V^T, vjp(G) = (G V, G^T U) per point). Used by
        :func:`paramgeo.losses.batched_value_and_grad` (the LLC estimator's chains)."""
        raise NotProvidedError(type(self).__name__, "batched_vjp", "batched_vjp")

    def on_inputs(self, X):
        """The same parameters on other inputs: a parameterization theta -> f(theta; X) with
        the same ``spec`` (theta means the same weights) whose predictor is the model's outputs
        on the batch X (shape (B, *input_shape)), where this one's predictor is its outputs on
        its own fixed probe. Plugins whose predictor is a model's outputs declare it (the
        framework adapters do); losses on data (:func:`paramgeo.llc.estimate_llc` with
        ``data``) evaluate the model on each batch through it."""
        raise NotProvidedError(type(self).__name__, "on_inputs", "on_inputs")

    def rank_at(self, theta, policy=None):
        """rank J(theta) in closed form from the factors, as a
        :class:`paramgeo.geometry.RankDecision` under the tolerance ``policy`` (a ``RankPolicy``;
        None: the default); the kernel dimension is n - rank. ``singular_values``, ``tol``,
        ``gap``, ``doubtful`` and ``closest`` are those of the decision the rank rests on: the
        singular values of J itself where the plugin has them in closed form, else those of
        the factor whose rank decision is nearest its tolerance (the plugin documents which).
        Used by :func:`paramgeo.geometry.rank_at` instead of an SVD of the dense Jacobian;
        the contract check compares it with that SVD at random and at rank-deficient points."""
        raise NotProvidedError(type(self).__name__, "rank_at", "rank_at")

    def kinks(self, theta):
        """(labels, distances) for a piecewise-smooth phi: one scale-free distance per condition
        under which phi is not differentiable, 0 exactly on that kink (see
        :mod:`paramgeo.geometry.kinks`; for ReLU |w_j . x_i + b_j| / (|w_j| |x_i| + |b_j|))."""
        raise NotProvidedError(type(self).__name__, "kinks", "kinks")
    def input_action(self):
        """A :class:`paramgeo.symmetry.equivariance.InputAction`: a group acting on the fixed inputs the
        predictor is evaluated on (token positions, data points), the predictor on moved inputs
        and how it is expected to move; :func:`paramgeo.symmetry.equivariance.input_equivariance` tests
        f(theta; g . z_0) = rho(g) f(theta; z_0)."""
        raise NotProvidedError(type(self).__name__, "input_action", "input_action")

    def learning_coefficient(self, theta):
        """The exact learning coefficient (RLCT lambda and multiplicity m) at the true parameter
        theta, a :class:`paramgeo.llc.LearningCoefficient`, or None where the plugin knows no
        formula at this point (:func:`paramgeo.llc.exact_learning_coefficient` then tries the
        regular case d / 2). Assumes a loss with positive definite Hessian in the predictor."""
        raise NotProvidedError(type(self).__name__, "learning_coefficient", "learning_coefficient")

    def mirror_potential(self, theta0):
        """Closed-form Legendre potential of the mirror flow started at phi(theta0), for a
        commuting parameterization: a :class:`paramgeo.mirror.Potential`, or None where the
        plugin knows no closed form at this theta0 (the engine then builds one numerically)."""
        raise NotProvidedError(type(self).__name__, "mirror_potential", "mirror_potential")

    def __repr__(self):
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"{type(self).__name__}({sizes})"
