"""Symmetry teleportation: moving a point along its orbit to optimise an objective.

For a loss L(theta) = ell(phi(theta)) and the continuous factors of G = ``param.symmetry()``,
:func:`teleport` searches exact group elements g(a) = (exp(sum_i a_i X_i) for each matrix
factor, exp(a) coordinatewise for each rescaling torus), a the coordinates in a basis X_i of the
Lie algebra, for the one that minimises or maximises an objective f(g(a) . theta):

* ``"grad_norm"``: |grad L(g . theta)|, grad L = J^T grad ell (Zhao, Dehmamy, Walters, Yu 2022,
  "Symmetry teleportation for accelerated optimization", who move by first-order group steps
  I + T; here the elements are exact, so phi(g . theta) = phi(theta) holds to rounding and is
  checked);
* ``"sharpness"``: the largest eigenvalue of the Hessian of L at g . theta
  (:func:`paramgeo.losses.loss_hessian`, J^T Hess(ell) J + sum_i g_i Hess(phi_i));
* ``"hessian_trace"``: the trace of that Hessian;
* a callable f(theta) -> float.

The orbit is not compact (GL(r), tori): off a minimum the gradient norm grows without bound
along it, and the sharpness can too. The search is therefore bounded, |a_i| <= ``radius``;
``at_bound`` says whether the optimum found touches the bound (then the objective's supremum
or infimum over the whole orbit may lie beyond it). The search is derivative-free (Nelder-Mead with
bounds, scipy) from a = 0 and ``starts`` - 1 random points of the box; it is a local search and
says so (``exact`` is never claimed).

Example with a closed form: at a global minimum of (1/2)|U V^T - Y|_F^2 the Hessian is J^T J,
whose largest eigenvalue is |U|_2^2 + |V|_2^2 (the eigenvalues of J J^T are those of U U^T plus
those of V V^T); over the GL(r) orbit (U g, V g^{-T}) it is at least 2 |U g|_2 |V g^{-T}|_2 >=
2 sigma_1(Y), with equality at the balanced factors U = P S^1/2, V = Q S^1/2 of the SVD Y = P S
Q^T, so the flattest point of the orbit has sharpness 2 sigma_1(Y).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from ..contract.arguments import integer, number, parameterization
from ..errors import ArgumentError, NotProvidedError, ParamgeoError
from ..losses.predictor import loss_hessian, value_and_grad
from ..results import Result
from ..symmetry import MatrixGroupAction, ProductGroup, ScalingTorus

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..losses.predictor import Loss
    from ..contract.parameterization import Parameterization

#: the built-in objectives of :func:`teleport`
OBJECTIVES = ("grad_norm", "sharpness", "hessian_trace")
#: objective evaluations per Lie-algebra coordinate and start
MAX_EVALUATIONS = 300
#: the largest phi(g . theta) - phi(theta) (relative) accepted as invariance
INVARIANCE_TOL = 1e-8


@dataclasses.dataclass(frozen=True, kw_only=True)
class Teleport(Result):
    """The result of :func:`teleport`.

    Attributes:
        objective: the objective's name.
        mode: "max" or "min".
        before: the objective at theta.
        after: the objective at g . theta.
        theta: the teleported point g . theta, shape (n,).
        g: the group element, one entry per continuous factor (a matrix, or the torus'
            scalings).
        loss_before: L(theta).
        loss_after: L(g . theta) (equal: phi is invariant).
        radius: the bound |a_i| <= radius on the Lie-algebra coordinates.
        at_bound: the optimum found touches that bound (the true one may lie further out).
        invariance_error: |phi(g . theta) - phi(theta)| / (1 + |phi(theta)|).
    """

    objective: str
    mode: str
    before: float
    after: float
    theta: np.ndarray
    g: tuple
    loss_before: float
    loss_after: float
    radius: float
    at_bound: bool
    invariance_error: float

    def __str__(self):
        bound = ("  the optimum found touches the search bound: the orbit's "
                 f"{'supremum' if self.mode == 'max' else 'infimum'} may lie further out"
                 if self.at_bound else "  inside the search bound")
        return "\n".join([
            f"teleport ({self.mode}imise {self.objective}) over |a_i| <= {self.radius:g}",
            f"  objective  {self.before:.6g} -> {self.after:.6g}",
            f"  loss       {self.loss_before:.6g} -> {self.loss_after:.6g}",
            f"  |phi(g.theta) - phi(theta)| / (1 + |phi|)  {self.invariance_error:.2e}",
            bound])


def _continuous_factors(group):
    factors = group.factors if isinstance(group, ProductGroup) else (group,)
    out = []
    for f in factors:
        if isinstance(f, MatrixGroupAction) and f.dim > 0:
            out.append((f, f.dim))
        elif isinstance(f, ScalingTorus) and np.any(f.exponents):
            out.append((f, f.exponents.shape[0]))
    return out


def expm_small(X: ArrayLike, terms: int = 18) -> NDArray[np.float64]:
    """exp(X) for a small square matrix by scaling and squaring: exp(X) = exp(X / 2^s)^(2^s)
    with |X / 2^s|_1 <= 1/2 and the Taylor series to ``terms`` terms (remainder below
    0.5^19 / 19!, under 1e-22 relative); checked against scipy.linalg.expm in the tests."""
    X = np.asarray(X, float)
    norm = np.linalg.norm(X, 1)
    s = max(0, int(np.ceil(np.log2(norm))) + 1) if norm > 0 else 0
    Y = X / 2.0 ** s
    out = term = np.eye(len(X))
    for j in range(1, terms + 1):
        term = term @ Y / j
        out = out + term
    for _ in range(s):
        out = out @ out
    return out


def _elements(factors, a):
    els, k = [], 0
    for f, size in factors:
        coeffs = a[k:k + size]
        k += size
        if isinstance(f, ScalingTorus):
            els.append(np.exp(coeffs))
        else:
            els.append(expm_small(np.tensordot(coeffs, f.algebra_basis, axes=1)))
    return els


def _act(factors, els, theta):
    for (f, _), el in zip(factors, els):
        theta = f.act(el, theta)
    return theta


def _objective(param, loss, objective):
    if callable(objective):
        return "user function", lambda t: float(objective(t))
    if objective not in OBJECTIVES:
        raise ArgumentError(f"objective must be one of {', '.join(OBJECTIVES)} or a callable "
                            f"f(theta) -> float, got {objective!r}")
    if objective == "grad_norm":
        vg = value_and_grad(param, loss)
        return objective, lambda t: float(np.linalg.norm(vg(t)[1]))
    if objective == "sharpness":
        return objective, lambda t: float(np.linalg.eigvalsh(loss_hessian(param, loss, t))[-1])
    return objective, lambda t: float(np.trace(loss_hessian(param, loss, t)))


def teleport(param: Parameterization, loss: Loss, theta: ArrayLike, objective: str = "grad_norm",
             mode: str = "max", radius: float = 1.0, starts: int = 4, seed: int = 0) -> Teleport:
    """Move theta along its orbit to maximise or minimise an objective at the same loss.

    theta -> g . theta with g = exp(sum_i a_i A_i) over the continuous factors of
    ``param.symmetry()``, |a_i| <= ``radius``: phi, hence the loss, is unchanged while the
    objective ("grad_norm", "sharpness", "hessian_trace" or a callable f(theta)) moves
    (symmetry teleportation, Zhao, Dehmamy, Walters, Yu 2022; the objectives and the bound:
    module docstring).

    Args:
        param: a parameterization that declares a symmetry group with continuous factors.
        loss: the loss ell on predictors.
        theta: the point, shape (n,).
        objective: "grad_norm", "sharpness", "hessian_trace" or a callable f(theta).
        mode: "max" or "min".
        radius: the bound on the Lie-algebra coordinates.
        starts: searches from a = 0 and random points of the box.
        seed: seed of those points.

    Returns:
        The :class:`Teleport`.

    Raises:
        ArgumentError: an unknown objective or mode, or a group with no continuous factor.
        NotProvidedError: ``param`` declares no symmetry.
        ParamgeoError: a group element found does not leave phi invariant.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.losses.predictor import LinearMeasurements
        >>> from paramgeo.quotient import teleport
        >>> p = paramgeo.get("hadamard", p=2)                    # (u, v) -> (c u, v / c)
        >>> loss = LinearMeasurements(np.eye(2), [1.0, 2.0])
        >>> moved = teleport(p, loss, np.array([1.0, 1.0, 0.5, 0.5]), radius=0.5)
        >>> bool(moved.after > moved.before), bool(np.isclose(moved.loss_after, moved.loss_before))
        (True, True)
    """
    from scipy.optimize import minimize

    parameterization(param)
    theta = param.as_theta(theta)
    if mode not in ("max", "min"):
        raise ArgumentError(f"mode must be 'max' or 'min', got {mode!r}")
    radius = number(radius, "radius", positive=True)
    starts = integer(starts, "starts", minimum=1)
    if not param.provides("symmetry"):
        raise NotProvidedError(param.name, "symmetry", "symmetry")
    factors = _continuous_factors(param.symmetry())
    if not factors:
        raise ArgumentError(f"teleport: the group {param.symmetry().name} of {param.name} has "
                            "no continuous factor (O(r), GL(r), a rescaling torus) to move along")
    name, f = _objective(param, loss, objective)
    vg = value_and_grad(param, loss)
    sign = -1.0 if mode == "max" else 1.0
    k = sum(size for _, size in factors)

    def cost(a):
        return sign * f(_act(factors, _elements(factors, a), theta))

    rng = np.random.default_rng(seed)
    points = [np.zeros(k)] + [rng.uniform(-radius, radius, k) for _ in range(starts - 1)]
    best = None
    for a0 in points:
        sol = minimize(cost, a0, method="Nelder-Mead", bounds=[(-radius, radius)] * k,
                       options=dict(xatol=1e-7, fatol=1e-11, maxfev=MAX_EVALUATIONS * k,
                                    adaptive=k > 4))
        if best is None or sol.fun < best.fun:
            best = sol
    assert best is not None  # starts >= 1
    a = best.x if best.fun < cost(np.zeros(k)) else np.zeros(k)
    els = _elements(factors, a)
    moved = _act(factors, els, theta)
    phi0 = np.asarray(param.forward_flat(theta))
    inv = float(np.linalg.norm(np.asarray(param.forward_flat(moved)) - phi0)
                / (1.0 + np.linalg.norm(phi0)))
    if inv > INVARIANCE_TOL:
        raise ParamgeoError(f"teleport: the group element found moves phi by {inv:.2e} "
                            f"(relative); {param.symmetry().name} is not a symmetry of "
                            f"{param.name} at this point")
    return Teleport(objective=name, mode=mode, before=f(theta), after=f(moved), theta=moved,
                    g=tuple(els), loss_before=vg(theta)[0], loss_after=vg(moved)[0],
                    radius=radius, at_bound=bool(np.any(np.abs(a) >= radius * (1 - 1e-6))),
                    invariance_error=inv)


class Teleporter:
    """A step of symmetry teleportation inside gradient descent: ``gradient_descent(param, loss,
    theta0, steps, lr, callback=Teleporter(param, loss, every=k))`` moves theta along its orbit
    after every k-th step with :func:`teleport` (the other arguments are teleport's), so the
    descent continues from the point of the orbit with the largest gradient norm (by default)
    within the bound; the loss and phi are unchanged by each move (checked by teleport). Zhao,
    Dehmamy, Walters, Yu (2022) teleport every few steps to accelerate descent. ``moves``
    lists (step, objective before, objective after) of the teleportations made."""

    def __init__(self, param, loss, every, objective="grad_norm", mode="max", radius=1.0,
                 starts=1, seed=0):
        self.every = integer(every, "every", minimum=1)
        self.param, self.loss = parameterization(param), loss
        self.options = dict(objective=objective, mode=mode, radius=radius, starts=starts,
                            seed=seed)
        _objective(param, loss, objective)  # refuse a bad objective before the descent starts
        self.moves = []

    def __call__(self, t, theta):
        """theta teleported when t is a multiple of ``every``, else theta unchanged."""
        if t % self.every:
            return theta
        moved = teleport(self.param, self.loss, theta, **self.options)
        self.moves.append((t, moved.before, moved.after))
        return moved.theta
