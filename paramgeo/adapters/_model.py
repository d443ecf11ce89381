"""The framework-neutral half of the adapters: a Parameterization whose derivatives come from a
framework, and the autograd primitive that keeps its ``forward`` traceable by every engine.

A framework backend (``_torch.py``, ``_jax.py``) supplies, for a flat framework function
f: R^a -> R^b (host float64 arrays in and out), the products

    jvp(x, dx) = Df(x) dx,   vjp(x, g) = Df(x)^T g,   jac(x) = Df(x)   (b x a),

as functions the framework computes (torch.func, jax.jvp/vjp/jacrev under jax.jit). From them
:class:`_Op` builds the tower of derivative maps an engine may ask for when it traces
``forward`` with autograd to any order: the VJP map (x, g) -> Df(x)^T g and the JVP map
(x, dx) -> Df(x) dx of an op are ops again, so a k-th derivative is k framework
differentiations of f, never finite differences. The autograd primitive :func:`_apply`
(autograd.extend.primitive with defvjp/defjvp) evaluates an op on a flat vector and hands its
derivatives to the next op of the tower.

Second-order products of the parameterization phi = f_0 (theta -> predictor):

* hessian_vp(theta, w, v) = (sum_i w_i Hess phi_i(theta)) v: the JVP of the VJP map
  (theta, w) -> J(theta)^T w along (v, 0);
* jacobian_derivative(theta, v) = d/dt J(theta + t v): the Jacobian of the JVP map
  (theta, v) -> J(theta) v in theta (the first n columns).

Model (the pattern of curvlinops' Jacobian operators, Dangel et al., and of neural-tangents'
empirical kernels, Novak et al. 2022, "Fast finite width neural tangent kernel"): theta is the
model's parameters in float64 packed block by block, the predictor its outputs on a fixed probe
batch. The products run on the framework's device; the eigensolvers of the engines run on the
host with numpy.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import autograd
import numpy as np
from autograd.extend import defjvp, defvjp, primitive

from ..errors import (ContractError, NumericalDoubtWarning, ParamgeoError, PluginError,
                      ShapeError, SizeError)
from ..contract.parameterization import Parameterization, ParamSpec

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray


class Backend:
    """What a framework backend shares: from its ``jvp_pair(fn)`` (x, dx) -> Df(x) dx and
    ``vjp_pair(fn)`` (x, g) -> Df(x)^T g, the same products as maps of one stacked vector
    z = (x, dx) or (x, g), x its first ``a`` entries (the form :class:`_Op` differentiates)."""

    def jvp_map(self, fn, a):
        pair = self.jvp_pair(fn)
        return lambda z: pair(z[:a], z[a:])

    def vjp_map(self, fn, a):
        pair = self.vjp_pair(fn)
        return lambda z: pair(z[:a], z[a:])

    #: whether value_vjp computes in float32 when asked (``single``)
    single = False

    def value_vjp(self, fn):
        """(x, single) -> (f(x), g -> Df(x)^T g) with host arrays: here the compiled forward
        and the compiled VJP pair, two calls (a backend whose VJP returns the forward's value
        overrides it with one pass); float64 whatever ``single`` says."""
        call, pair = self.compile(fn), self.compile(self.vjp_pair(fn))
        return lambda x, single=False: (self.run(call, x), lambda g: self.run(pair, x, g))


class _Op:
    """A flat framework function f: R^a -> R^b with host float64 arrays in and out, and the
    ops of its VJP map (x, g) -> Df(x)^T g: R^(a+b) -> R^a and JVP map
    (x, dx) -> Df(x) dx: R^(2a) -> R^b, built on first use. ``model`` names the fault."""

    def __init__(self, backend, fn, a, b, model, what):
        self.backend, self.fn, self.a, self.b = backend, fn, a, b
        self.model, self.what = model, what
        self._call = self._vjp = self._jvp = self._jac = self._pair_jvp = self._pair_vjp = None

    def __call__(self, x):
        if self._call is None:
            self._call = self.backend.compile(self.fn)
        return self.model._run(self.what, self._call, x)

    @property
    def vjp_op(self):
        if self._vjp is None:
            self._vjp = _Op(self.backend, self.backend.vjp_map(self.fn, self.a), self.a + self.b,
                            self.a, self.model, f"the VJP of {self.what}")
        return self._vjp

    @property
    def jvp_op(self):
        if self._jvp is None:
            self._jvp = _Op(self.backend, self.backend.jvp_map(self.fn, self.a), 2 * self.a,
                            self.b, self.model, f"the JVP of {self.what}")
        return self._jvp

    def jvp(self, x, dx):
        """Df(x) dx, with x and dx apart (the direct product, no concatenation)."""
        if self._pair_jvp is None:
            self._pair_jvp = self.backend.compile(self.backend.jvp_pair(self.fn))
        return self.model._run(f"the JVP of {self.what}", self._pair_jvp, x, dx)

    def vjp(self, x, g):
        """Df(x)^T g, with x and g apart."""
        if self._pair_vjp is None:
            self._pair_vjp = self.backend.compile(self.backend.vjp_pair(self.fn))
        return self.model._run(f"the VJP of {self.what}", self._pair_vjp, x, g)

    def jacobian(self, x):
        """Df(x), b x a, by the framework (reverse mode when b <= a, else forward mode)."""
        if self._jac is None:
            self._jac = self.backend.compile(self.backend.jacobian_map(self.fn, self.b <= self.a))
        return self.model._run(f"the Jacobian of {self.what}", self._jac, x).reshape(
            self.b, self.a)


@primitive
def _apply(op, x):
    """op(x) for a flat float vector x: an autograd primitive whose derivatives are ops."""
    return op(np.asarray(x, dtype=float))


def _concat(x, y):
    import autograd.numpy as anp

    return anp.concatenate([x, y])


defvjp(_apply, lambda ans, op, x: lambda g: _apply(op.vjp_op, _concat(x, g)), argnums=(1,))
defjvp(_apply, lambda dx, ans, op, x: _apply(op.jvp_op, _concat(x, dx)), argnums=(1,))


class FrameworkModel(Parameterization):
    """A model from a framework as a parameterization: theta = its parameters (float64, the
    named blocks of ``spec``), phi(theta) = its outputs on the fixed probe batch.

    Subclasses are built per model by :func:`paramgeo.from_torch` / :func:`paramgeo.from_jax`,
    which set the class attribute ``_source`` (a function returning the backend, the block
    shapes, the predictor shape, the flat forward function and the model's own parameters),
    so that ``cls()`` rebuilds the model (the registry and ``--plugin FILE.py`` instantiate
    classes). forward is the autograd primitive :func:`_apply` (engines that trace it get
    framework derivatives to any order); jacobian, jvp, vjp, hessian_vp and
    jacobian_derivative call the framework directly.

    Before any engine runs the model is refused (one error naming it and what went wrong)
    when its output on the probe is empty or not finite at theta0, or when forward is not a
    function of theta (:func:`paramgeo.contract.determinism.function_of_theta`: random numbers, state
    that forward changes, parameters updated in place); the round-off of forward is measured
    (:func:`paramgeo.geometry.precision.arithmetic_noise`) and, where it is above float64's, sets
    ``rank_policy`` (rtol = 1000 x noise) with a warning.

    Attributes: ``framework`` ("torch" or "jax"), ``device`` (where the products run),
    ``theta0`` (the model's parameters as a flat float64 vector), ``backend``, ``noise`` (the
    measured relative round-off of forward), ``rank_policy`` (None, or the policy every rank
    decision on this model defaults to).
    """

    name = "framework-model"
    capabilities = frozenset({"jacobian", "jvp", "vjp", "batched_vjp", "on_inputs"})
    references = (
        "Dangel et al., curvlinops: linear operators for the curvature of neural networks "
        "(torch.func products behind a scipy LinearOperator)",
        "Novak, Sohl-Dickstein, Schoenholz (2022) Fast finite width neural tangent kernel "
        "(JAX products of any function of a params pytree)",
    )
    framework = ""
    _source = None
    #: the rank policy of this model (:func:`paramgeo.linalg.numerics.policy_of`): None (the default
    #: policy) unless forward's measured round-off is above float64's
    rank_policy = None
    _warned_noise = None  # the round-off the precision warning of this class was given for

    def __init__(self, /, **sizes):
        if sizes:  # refused before the model is built; a framework model has no sizes
            raise SizeError(f"{type(self).name}: unknown size {', '.join(sorted(sizes))}; a "
                            "model from PyTorch or JAX has no sizes: change the model in its "
                            "file instead")
        built = type(self)._source()
        self.backend, self._blocks, self._out_shape = built["backend"], built["blocks"], \
            built["predictor_shape"]
        self.device = self.backend.device
        self._layers = built.get("layers")
        self._probe = built.get("probe")  # the inputs phi is the output on
        self._graph_reader = built.get("graph")  # reads the computational graph, on demand
        super().__init__()
        self.theta0 = self.spec.pack(*built["theta0"])
        self._f = _Op(self.backend, built["forward"], self.n, self.m, self, "forward")
        self._forward_on = built["forward_on"]
        self._batched = None  # phi and its VJP at a stack of points (vmap), built on first use
        self._state = built.get("state")
        self._what = built.get("what", f"{self.framework} model")
        self._check_forward()
        self._check_function(built["forward"], built.get("written"))
        self._measure_precision()

    #: the contract method a product of the tower is reported under (the outermost product)
    _METHODS = (("the JVP of the VJP of", "hessian_vp"),
                ("the Jacobian of the JVP of", "jacobian_derivative"),
                ("the Jacobian of", "jacobian"), ("the JVP of", "jvp"), ("the VJP of", "vjp"))

    # the model's fault is the model's: a PluginError (one line naming it, the method and a
    # fix; `paramgeo check` reports it as a failed property)
    def _run(self, what, fn, *args):
        return self._guard(what, self.backend.run, fn, *args)

    def _guard(self, what, call, *args):
        try:
            return call(*args)
        except ParamgeoError:
            raise
        except (Exception, SystemExit) as exc:  # a sys.exit() in the model is the model's
            method = next((m for head, m in self._METHODS if what.startswith(head)), "forward")
            raise PluginError(
                self.name, method,
                f"failed in {self.framework} ({what} of the {self.framework} model): "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                f"the model must run on the probe with float64 parameters and be "
                f"differentiable by {self.backend.transforms}: {self.framework} operations "
                "only (no round trips through numpy, no in-place updates of its parameters, "
                "no Python control flow on their values)") from exc

    def _check_forward(self):
        if self.n == 0:
            raise ShapeError(f"{self.name} ({self._what}): the parameters have no entries "
                             f"(blocks {dict(self._blocks)}): there is no theta to analyse; "
                             "give a model with at least one parameter")
        out = self._f(self.theta0)
        if out.shape != (self.m,) or not np.all(np.isfinite(out)):
            raise ContractError(
                f"{self.name} ({self.framework} model): forward on the probe gave "
                f"{'non-finite values' if out.shape == (self.m,) else f'shape {out.shape}'} "
                f"at the model's own parameters; give a probe the model accepts")

    def _check_function(self, forward, written=None):
        """Refuse a model whose forward is not a function of theta (see
        :func:`paramgeo.contract.determinism.function_of_theta`): at theta0 and a random point, forward
        run uncompiled (so that a traced function re-runs its Python each time). ``written``
        (torch): theta -> what forward writes into the parameters it is given, added to the
        checked array, since the backend hands forward a copy."""
        from ..contract.determinism import function_of_theta

        def evaluate(theta):
            if written is not None:
                theta += self._run("forward", written, theta)
            return self._run("forward", forward, theta)

        theta1 = self.random_point(np.random.default_rng(0))
        problem = function_of_theta(evaluate, self.theta0, theta1, state=self.model_state,
                                    labels=self.spec.labels)
        if problem is not None:
            raise ContractError(
                f"{self.name} ({self._what}): forward is not a function of theta: {problem}; "
                "paramgeo analyses theta -> the output on the probe, which must depend on theta "
                "alone: switch randomness off (no dropout with training=True, no torch.randn or "
                "np.random in forward) and keep counters, caches and parameter updates out of "
                "forward")

    def model_state(self) -> dict[str, Any]:
        """The framework model's state that forward must leave unchanged, {what: snapshot}
        (see :mod:`._checks`)."""
        return self._state() if self._state is not None else {}

    def _measure_precision(self):
        """Measure the round-off of forward (:func:`paramgeo.geometry.precision.arithmetic_noise` at a
        random point); where it is above float64's, set ``rank_policy`` (rtol =
        NOISE_MARGIN x noise, read by every rank decision on this model) and warn."""
        from ..linalg.numerics import DEFAULT_POLICY
        from ..geometry.precision import FLOAT32_UNIT, arithmetic_noise, noise_policy

        rng = np.random.default_rng(1)
        self.noise = arithmetic_noise(self._f, self.random_point(rng), rng)
        policy = noise_policy(self.noise)
        if policy is DEFAULT_POLICY:
            return
        self.rank_policy = policy
        if type(self)._warned_noise == self.noise:  # the same model rebuilt: said once
            return
        type(self)._warned_noise = self.noise
        level = "float32 or coarser" if self.noise > FLOAT32_UNIT / 64 else "below float64"
        warnings.warn(
            f"{self.name} ({self._what}) computes below float64 precision: the measured "
            f"round-off of forward is {self.noise:.2g} relative ({level}; float64's is about "
            f"1e-16), so rank decisions are limited to that precision: singular values below "
            f"{policy.rtol:.2g} x the largest count as zero (model.rank_policy); compute in "
            "float64 inside forward for finer decisions", NumericalDoubtWarning, stacklevel=4)

    def make_spec(self) -> ParamSpec:
        return ParamSpec(dict(self._blocks))

    def make_predictor_shape(self) -> tuple[int, ...]:
        return self._out_shape

    def forward(self, theta: ArrayLike) -> NDArray[np.float64]:
        import autograd.numpy as anp

        return anp.reshape(_apply(self._f, theta), self.predictor_shape)

    def random_point(self, rng: np.random.Generator) -> NDArray[np.float64]:
        """Each weight block (two or more axes) i.i.d. N(0, 1 / fan_in) (fan_in the product of
        its trailing axes, as in Glorot/He initialisations), each vector block (biases,
        scales) i.i.d. N(0, 1/4)."""
        parts = []
        for shape in self.spec.blocks.values():
            scale = 1.0 / np.sqrt(max(int(np.prod(shape[1:])), 1)) if len(shape) > 1 else 0.5
            parts.append(scale * rng.standard_normal(int(np.prod(shape))))
        return np.concatenate(parts) if parts else np.zeros(0)

    def on_inputs(self, X: Any) -> FrameworkModel:
        """The same model on the inputs X (a batch the model accepts, shape
        (B, *input_shape)): theta -> model(theta; X), with this model's ``spec`` and
        ``theta0`` and its predictor the outputs on X (shape model(X).shape). The framework
        module or function is shared, not copied; derivatives come from the framework as for
        the probe."""
        import copy

        other = copy.copy(self)
        other._probe = X  # the inputs its predictor is the output on
        other._f = _Op(self.backend, self._forward_on(X), self.n, None, other, "forward")
        other._batched = None
        out = other._f(self.theta0)
        other._out_shape = other.predictor_shape = tuple(
            int(s) for s in self._output_shape(X, out))
        other.m = int(out.size)
        other._f.b = other.m
        other._jac = autograd.jacobian(other.forward_flat)
        if not np.all(np.isfinite(out)):
            raise ContractError(f"{self.name} ({self.framework} model): forward on the inputs "
                                "gave non-finite values at the model's own parameters; give "
                                "inputs the model accepts")
        return other

    def _output_shape(self, X, out):
        """The shape of the outputs on X: the probe's output shape with its leading (batch)
        axis set to X's batch size, where that accounts for every output."""
        rest = tuple(self.predictor_shape[1:])
        batch = np.shape(X)[0] if np.ndim(X) else 1
        if self.predictor_shape and batch * int(np.prod(rest)) == out.size:
            return (batch,) + rest
        return (out.size,)

    @property
    def single_precision(self):
        """Whether :meth:`batched_vjp` can compute in float32 (``single=True``): torch
        models; JAX models compute in float64."""
        return self.backend.single

    def batched_vjp(self, thetas: ArrayLike, single: bool = False) -> tuple[Any, Any]:
        """(Phi, vjp) at the K rows of thetas at once: phi vectorized over the rows by the
        framework's vmap (torch.func.vmap, jax.vmap), vjp(G) = (J(thetas[k])^T G[k])_k the
        framework's VJP of that vectorized map (the rows are independent, so the VJP of the
        stacked map is the stack of VJPs; torch keeps the forward pass of Phi for it, one
        forward and one backward pass in all). ``single``: in float32 where
        ``single_precision`` (the model's parameters, inputs and buffers cast; Phi and the
        VJP come back as float32 arrays), float64 otherwise. A model that vmap cannot
        vectorize (e.g. in-place operations) is evaluated row by row instead, in float64."""
        thetas = np.asarray(thetas, dtype=float).reshape(-1, self.n)
        K = len(thetas)
        what = "forward (vectorized over points)"
        if self._batched is None:
            self._batched = self.backend.value_vjp(self.backend.batch_map(self._f.fn, self.n))
        if self._batched is not False:
            try:
                phis, pull = self._guard(what, self._batched, thetas.ravel(), bool(single))
                return phis.reshape((K,) + self.predictor_shape), lambda G: self._guard(
                    f"the VJP of {what}", pull, np.ravel(G)).reshape(K, self.n)
            except PluginError:
                self._batched = False  # vmap cannot run this model: row by row from now on
        phis = np.stack([self._f(t) for t in thetas]).reshape((K,) + self.predictor_shape)
        return phis, lambda G: np.stack([self._f.vjp(t, g) for t, g in
                                         zip(thetas, np.asarray(G, float).reshape(K, -1))])

    # ------------------------------------------------------------------ derivatives
    def jacobian(self, theta: ArrayLike) -> NDArray[np.float64]:
        return self._f.jacobian(self.as_theta(theta))

    # theta, v and w arrive checked by the guard (paramgeo.contract.guard: float vectors of lengths
    # n and m, else one line naming the argument), as in the base class's products
    def jvp(self, theta: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        """J(theta) v by the framework's forward mode."""
        return self._f.jvp(theta, v)

    def vjp(self, theta: ArrayLike, w: ArrayLike) -> NDArray[np.float64]:
        """J(theta)^T w by the framework's reverse mode."""
        return self._f.vjp(theta, w)

    def hessian_vp(self, theta: ArrayLike, w: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        """(sum_i w_i Hess phi_i(theta)) v: the framework's JVP of (theta, w) -> J^T w along
        (v, 0) (forward over reverse)."""
        theta, w, v = (np.asarray(a, dtype=float).ravel() for a in (theta, w, v))
        return self._f.vjp_op.jvp_op(np.concatenate([theta, w, v, np.zeros(self.m)]))

    def jacobian_derivative(self, theta: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
        """d/dt J(theta + t v) at t = 0 (m x n): the framework's Jacobian of
        (theta, v) -> J(theta) v in theta."""
        theta, v = (np.asarray(a, dtype=float).ravel() for a in (theta, v))
        return self._f.jvp_op.jacobian(np.concatenate([theta, v]))[:, :self.n]


def model_class(base, name, source, module_name):
    """A subclass of ``base`` (a FrameworkModel) for one model: ``cls()`` runs ``source``.
    Its ``__module__`` is the caller's module, so that a plugin file defining the model
    (``model = paramgeo.from_torch(...)``) registers it under ``--plugin FILE.py``."""
    if not isinstance(name, str) or not name.strip():
        raise ParamgeoError(f"the model's name must be a non-empty string, got {name!r}")
    cls_name = "".join(part.capitalize() for part in
                       "".join(c if c.isalnum() else " " for c in name).split()) or "Model"
    return type(cls_name, (base,), {"name": name, "_source": staticmethod(source),
                                    "__module__": module_name,
                                    "__qualname__": cls_name})
