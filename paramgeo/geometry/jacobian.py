"""Generic geometry of a parameterization, valid for every plugin.

All functions read only the contract: J(theta) and, where declared, the symmetry generators.

Tolerance policy: one, used everywhere a rank is decided; it is defined (and explained) in
:mod:`paramgeo.linalg.numerics` with the bases decided under it.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..contract.arguments import finite_vector
from ..errors import NumericalDoubtWarning, ShapeError
from ..io.progress import shows_progress
from ..linalg.numerics import (RankDecision, RankPolicy, Seed, as_rng, decide_rank, null_basis,
                               policy_of, range_basis)

if TYPE_CHECKING:
    from ..contract.parameterization import Parameterization
    from ..symmetry.projectors import VerticalProjector


def solve_sylvester_psd(A: NDArray[np.float64], B: NDArray[np.float64], C: NDArray[np.float64],
                        rtol: float = 1e-12) -> NDArray[np.float64]:
    """X with A X + X B = C for symmetric positive semi-definite A (r x r) and B (s x s).

    Solved in the eigenbases A = P diag(a) P^T, B = Q diag(b) Q^T: X = P [(P^T C Q)_ij /
    (a_i + b_j)] Q^T, with the pseudo-inverse (zero) where a_i + b_j <= rtol * max(a, b, 1),
    which gives the minimum-norm least-squares solution at rank-deficient A, B. This is the
    equation of the horizontal projections of U U^T (A = B = U^T U) and U V^T (A = U^T U,
    B = V^T V); see Massart and Absil (2020) and Mishra et al. (2014).
    """
    a, P = np.linalg.eigh(A)
    b, Q = (a, P) if B is A else np.linalg.eigh(B)
    if not a.size or not b.size:
        return np.zeros(np.shape(C))
    denom = a[:, None] + b[None, :]
    floor = rtol * max(a[-1], b[-1], 1.0)  # eigh sorts ascending
    Ct = P.T @ C @ Q
    if a[0] + b[0] > floor:  # every a_i + b_j is above the floor (full-rank A, B)
        return P @ (Ct / denom) @ Q.T
    safe = np.abs(denom) > floor
    return P @ np.where(safe, Ct / np.where(safe, denom, 1.0), 0.0) @ Q.T


def rank_at(param: Parameterization, theta: ArrayLike, policy: RankPolicy | None = None,
            route: str = "auto", warn: bool = True, max_deficiency: int | None = None,
            digits: int | None = None) -> RankDecision:
    """Rank of the Jacobian J(theta) = d phi / d theta, with its evidence.

    rank J = #{s_i > tol}, s_i the singular values of J and tol = max(atol, rtol * s_max) of
    the tolerance policy (:class:`RankPolicy`; Golub and Van Loan, "Matrix computations",
    Sec. 5.4.1); a singular value within the policy's band of tol makes the decision
    ``doubtful`` and warns. ``route="auto"`` takes the plugin's closed form where it declares
    ``rank_at``, else the cheaper by predicted cost of the dense SVD and the sparse or
    matrix-free certificate (Lanczos on the horizontally deflated J^T J); a float64 decision in
    doubt is redone in high precision when J is small. The routes, their costs and the
    certificates are derived in docs/matrix-free.md and docs/precision.md.

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta: the point, shape (n,) (or the shape of a single parameter block).
        policy: the tolerance policy; None: the plugin's own or the default.
        route: "auto", "dense", "closed-form", "sparse", "matrix-free", "exact" or
            "high-precision" (see :func:`paramgeo.linalg.routes.choose_route`).
        warn: warn (``NumericalDoubtWarning``) when the decision is near the tolerance or
            theta lies on a kink of a piecewise-smooth phi.
        max_deficiency: the most rank drops beyond the symmetry a matrix-free certificate
            counts; None: ``matfree.MAX_DEFICIENCY``.
        digits: decide on singular values computed to this many digits (0: float64 only).

    Returns:
        The :class:`RankDecision`: ``rank``, ``tol``, ``singular_values``, ``gap``,
        ``doubtful``, ``closest``, ``route`` and, by route, ``certificate``, ``prices`` and
        ``kinks``.

    Raises:
        ShapeError: theta is not n finite numbers, or J^T J overflows on the matrix-free route.
        ContractError: the plugin's code fails (a ``PluginError``).

    Examples:
        >>> import numpy as np, paramgeo
        >>> p = paramgeo.get("uut", d=3, r=2)                  # phi(U) = U U^T, U of shape (3, 2)
        >>> paramgeo.rank_at(p, np.arange(1.0, 7.0)).rank      # generic: 6 - dim O(2)
        5
        >>> paramgeo.rank_at(p, [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]).rank   # U of rank 1
        3
    """
    from . import precision
    from ..contract.arguments import parameterization
    from .kinks import kink_report
    from ..linalg.matfree import MAX_DEFICIENCY, certify_rank
    from ..linalg.routes import choose_route, route_prices, static_route, timed_jacobian

    theta = parameterization(param).as_theta(theta)
    policy = policy_of(param, policy)
    asked = route == "auto" and digits is None
    route = static_route(param) if route == "auto" else choose_route(param, route)
    prices = None
    if route == "priced" and not digits:
        prices = route_prices(param, theta)
        route = prices.chosen
    if digits and route not in ("exact", "high-precision"):
        route = "high-precision"
    if route in ("exact", "high-precision"):
        decision = precision.rank(param, theta, policy, digits or precision.DEFAULT_DIGITS,
                                  warn=warn, route=route)
    elif route == "closed-form":
        with warnings.catch_warnings():
            if asked and precision.escalates(param):  # a doubt is redone below, warning there
                warnings.simplefilter("ignore", NumericalDoubtWarning)
            decision = dataclasses.replace(param.rank_at(theta, policy), route="closed-form")
    elif route == "dense":
        escalate = asked and precision.escalates(param)
        decision = decide_rank(timed_jacobian(param, theta), policy, what=f"J of {param.name}",
                               warn=warn and not escalate)
    else:
        try:
            decision = certify_rank(param, theta, policy, route=route, warn=warn,
                                    max_deficiency=MAX_DEFICIENCY if max_deficiency is None
                                    else max_deficiency)
        except np.linalg.LinAlgError as exc:  # e.g. entries near 1e300: J^T J overflows
            raise ShapeError(
                f"{param.name}: the {route} rank at this point could not be decided ({exc}; "
                f"largest |theta| entry {np.max(np.abs(theta)):.3g}): products J^T J overflow "
                "beyond about 1e150; rescale theta or use --route dense") from None
    if (asked and decision.doubtful and decision.route in ("dense", "closed-form")
            and precision.escalates(param)):
        decision = _escalated(param, theta, policy, decision, warn)
    if prices is not None:
        decision = dataclasses.replace(decision, prices=prices)
    kinks = kink_report(param, theta)
    if kinks is None:
        return decision
    if kinks.on_kink and warn:
        warnings.warn(f"{param.name}: theta is {kinks}; the rank {decision.rank} is that of one "
                      "one-sided Jacobian, not a rank of phi", NumericalDoubtWarning, stacklevel=2)
    return dataclasses.replace(decision, kinks=kinks)


def _escalated(param, theta, policy, decision, warn):
    """A float64 decision in doubt, redone at ``precision.DEFAULT_DIGITS`` digits; where forward
    cannot be evaluated in high precision, the float64 decision with its doubt (and warning)."""
    from . import precision

    try:
        return precision.rank(param, theta, policy, precision.DEFAULT_DIGITS, warn=warn,
                              float64=decision)
    except precision.PrecisionError as exc:
        if warn:
            warnings.warn(f"rank of J of {param.name} decided near the tolerance: singular value "
                          f"{decision.closest:.3g} vs tol {decision.tol:.3g}, and not redone in "
                          f"high precision: {exc}", NumericalDoubtWarning, stacklevel=3)
        return decision


def generic_rank(param: Parameterization, n_points: int = 3, seed: int = 0,
                 policy: RankPolicy | None = None, route: str = "auto") -> int:
    """Generic rank of phi: max_k rank J(theta_k) over ``n_points`` random points theta_k.

    The rank of an analytic map's Jacobian equals its generic value outside a measure-zero
    set, so random points attain it almost surely; the maximum guards against an unlucky draw
    (see :func:`generic_rank_decision` for the evidence and the route). For U U^T with U of
    shape (d, r) it is d r - r (r - 1) / 2: n minus the dimension of O(r).

    Args:
        param: the parameterization phi: R^n -> R^m.
        n_points: how many random points (from ``param.random_point``), at least 1.
        seed: seed of the random points (an int or a ``numpy.random.Generator``).
        policy: the tolerance policy; None: the plugin's own or the default.
        route: the rank route, as in :func:`rank_at`.

    Returns:
        The generic rank, an int between 0 and min(n, m).

    Raises:
        ArgumentError: ``n_points`` is not an integer >= 1.

    Examples:
        >>> import paramgeo
        >>> paramgeo.generic_rank(paramgeo.get("uut", d=4, r=2))   # 8 - 1
        7
    """
    return generic_rank_decision(param, n_points, seed, policy, route).rank


@shows_progress("generic rank (random points)")
def generic_rank_decision(param: Parameterization, n_points: int = 3, seed: int = 0,
                          policy: Optional[RankPolicy] = None, route: str = "auto",
                          progress: Union[bool, str, Callable[[int, int], None], None] = "auto"
                          ) -> RankDecision:
    """The :class:`RankDecision` of the random point of largest rank among ``n_points``.

    The rank of a polynomial (or analytic) map's Jacobian equals its generic value outside a
    measure-zero set, so random points attain it almost surely; the maximum guards against an
    unlucky draw. A certified rank that meets its upper bound (m, or n - orbit dimension: no
    rank drop beyond the symmetry) is the generic rank, so the search stops there.
    ``progress(done, total)`` is called after each point (True, False, or "auto", the default:
    a display with elapsed time and ETA in an interactive session; ``paramgeo.io.progress``).
    """
    from ..contract.arguments import integer, parameterization

    parameterization(param)
    integer(n_points, "n_points", minimum=1)
    rng = as_rng(seed)
    best = None
    own = getattr(param, "theta0", None)
    own = own if own is not None and np.shape(own) == (param.n,) else None
    total = n_points + (own is not None)
    for k in range(n_points):
        decision = rank_at(param, param.random_point(rng), policy, route=route, warn=False)
        if callable(progress):
            progress(k + 1, total)
        if best is None or decision.rank > best.rank:
            best = decision
        if decision.route in ("sparse", "matrix-free") and decision.certificate.deficiency == 0:
            return best
    assert best is not None  # n_points >= 1
    if own is not None:
        decision = rank_at(param, own, policy, route=route, warn=False)
        if callable(progress):
            progress(total, total)
        if decision.rank > best.rank:
            best = decision
    return best


def vertical_projector(param: Parameterization, theta: ArrayLike,
                       policy: Optional[RankPolicy] = None) -> VerticalProjector:
    """The symmetry's :class:`~paramgeo.symmetry.VerticalProjector` at theta (P_V w without a
    dense basis; orbit dimension ``.dim``), or the zero projector without a declared group."""
    from ..symmetry import sparse_projector

    theta = param.as_theta(theta)
    if not param.provides("symmetry"):
        return sparse_projector(np.zeros((param.n, 0)), policy)
    return param.symmetry().vertical_projector(theta, policy)


def kernel(param: Parameterization, theta: ArrayLike,
           policy: RankPolicy | None = None) -> NDArray[np.float64]:
    """Orthonormal basis of ker J(theta) = {v : J(theta) v = 0}, shape (n, n - rank J).

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta: the point, shape (n,).
        policy: the tolerance policy deciding the rank; None: the default.

    Returns:
        K of shape (n, k) with K^T K = I and J(theta) K = 0 (to the tolerance).

    Raises:
        ShapeError: theta is not n finite numbers.

    Examples:
        >>> import paramgeo
        >>> paramgeo.kernel(paramgeo.get("uut", d=3, r=2), [1, 1, 0, 0, 0, 0]).shape
        (6, 3)
    """
    return null_basis(param.jacobian(param.as_theta(theta)), policy_of(param, policy),
                      f"J of {param.name}")[0]


def vertical_space(param: Parameterization, theta: ArrayLike,
                   policy: RankPolicy | None = None) -> NDArray[np.float64]:
    """Orthonormal basis of the vertical space: the tangent of the orbit G.theta.

    V_theta = span{X_a(theta)}, X_a the generators of the declared symmetry group G, a subspace
    of ker J(theta) since phi(g . theta) = phi(theta).

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta: the point, shape (n,).
        policy: the tolerance policy deciding the rank of the generators; None: the default.

    Returns:
        V of shape (n, k), k the orbit dimension; zero columns without a declared group.

    Raises:
        ShapeError: theta is not n finite numbers.

    Examples:
        >>> import paramgeo
        >>> paramgeo.vertical_space(paramgeo.get("uut", d=3, r=2), [1, 2, 3, 4, 5, 7]).shape
        (6, 1)
    """
    theta = param.as_theta(theta)
    if not param.provides("symmetry"):
        return np.zeros((param.n, 0))
    gens = param.symmetry().generators(theta)
    return range_basis(gens, policy, what=f"symmetry generators of {param.name}")[0]


def orbit_dim(param: Parameterization, theta: ArrayLike,
              policy: Optional[RankPolicy] = None) -> int:
    """Dimension of the orbit through theta (rank of the generators; drops at stabilizers),
    read from the vertical projector (closed forms for matrix groups; no n x k basis)."""
    projector = vertical_projector(param, theta, policy)
    decision = projector.decision
    if decision.doubtful:
        warnings.warn(
            f"rank of symmetry generators of {param.name} decided near the tolerance: singular "
            f"value {decision.closest:.3g} vs tol {decision.tol:.3g}", NumericalDoubtWarning,
            stacklevel=2)
    return projector.dim


def horizontal_projection(param: Parameterization, theta: ArrayLike, v: ArrayLike,
                          policy: RankPolicy | None = None,
                          generic: bool = False) -> NDArray[np.float64]:
    """Projection of v onto the horizontal space, the orthogonal complement of the vertical one.

    h = v - P_V v, P_V the orthogonal projector onto the tangent of the orbit G.theta (the
    quotient geometry of Absil, Mahony and Sepulchre 2008, "Optimization algorithms on matrix
    manifolds", Sec. 3.5.8). Uses the plugin's closed form where it declares one (for U U^T:
    h = v - U Omega with U^T U Omega + Omega U^T U = U^T v - v^T U, Massart and Absil 2020);
    otherwise the symmetry's vertical projector, never a dense basis.

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta: the point, shape (n,).
        v: the tangent vector, shape (n,).
        policy: the tolerance policy deciding the orbit dimension; None: the default.
        generic: the test oracle instead: h = v - V V^T v with V the orthonormal basis of the
            dense generators (:func:`vertical_space`).

    Returns:
        h of shape (n,), orthogonal to every generator of G at theta.

    Raises:
        ShapeError: theta or v is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> p = paramgeo.get("uut", d=3, r=2)
        >>> theta = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 7.0])
        >>> h = paramgeo.horizontal_projection(p, theta, np.ones(6))
        >>> V = paramgeo.vertical_space(p, theta)
        >>> bool(np.allclose(V.T @ h, 0))
        True
    """
    theta = param.as_theta(theta)
    v = finite_vector(v, "the tangent vector v", param.n)
    if generic:
        V = vertical_space(param, theta, policy)
        return v - V @ (V.T @ v)
    if param.provides("horizontal_projection"):
        return np.asarray(param.horizontal_projection(theta, v), dtype=float)
    return v - vertical_projector(param, theta, policy)(v)


def quotient_metric(param: Parameterization, theta: ArrayLike, u: ArrayLike, v: ArrayLike,
                    policy: RankPolicy | None = None) -> float:
    """Quotient metric g(u, v) = h(u) . h(v): the Euclidean metric on horizontal vectors.

    The Riemannian metric of the quotient R^n / G (Absil, Mahony and Sepulchre 2008, Sec.
    3.6.2), h the horizontal projection (:func:`horizontal_projection`).

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta: the point, shape (n,).
        u: a tangent vector, shape (n,).
        v: a tangent vector, shape (n,).
        policy: the tolerance policy deciding the orbit dimension; None: the default.

    Returns:
        The inner product, a float.

    Raises:
        ShapeError: theta, u or v is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> p = paramgeo.get("uut", d=3, r=2)
        >>> theta = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 7.0])
        >>> V = paramgeo.vertical_space(p, theta)
        >>> round(paramgeo.quotient_metric(p, theta, V[:, 0], np.ones(6)), 12)   # vertical: 0
        0.0
    """
    hu = horizontal_projection(param, theta, u, policy)
    hv = horizontal_projection(param, theta, v, policy)
    return float(hu @ hv)


def predictor_metric(param: Parameterization, theta: ArrayLike) -> NDArray[np.float64]:
    """The m x m matrix K = J J^T, the neural tangent kernel of phi at theta.

    Gradient flow on theta moves phi by d phi / dt = -J J^T grad ell(phi) (Jacot, Gabriel and
    Hongler 2018, "Neural tangent kernel"); the inverse of K on range J is the metric the
    parameterization induces on predictors.

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta: the point, shape (n,).

    Returns:
        K of shape (m, m), symmetric positive semi-definite.

    Raises:
        ShapeError: theta is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> p = paramgeo.get("uut", d=3, r=2)
        >>> K = paramgeo.predictor_metric(p, np.arange(6.0))
        >>> K.shape, bool(np.allclose(K, K.T))
        ((9, 9), True)
    """
    J = param.jacobian(param.as_theta(theta))
    return J @ J.T


def horizontal_lift(param: Parameterization, theta: ArrayLike, w: ArrayLike,
                    policy: Optional[RankPolicy] = None,
                    route: str = "auto") -> NDArray[np.float64]:
    """The horizontal vector h with J h = w of least norm: h = J^+ w (minimum-norm solution
    lies in range J^T = (ker J)^perp, which is horizontal since vertical vectors lie in ker J).

    Dense route (m x n <= DENSE_MAX_ENTRIES, or ``route="dense"``): the pseudo-inverse follows
    the tolerance policy: with J = U diag(s) V^T and r the rank decided by :func:`decide_rank`,
    J^+ w = sum_{i <= r} v_i (u_i . w) / s_i, so singular values at or below the tolerance are
    treated as zero (not inverted) and a decision near the tolerance warns, as everywhere else a
    rank is decided (Golub and Van Loan, "Matrix computations", Section 5.5.4, truncated SVD).
    Matrix-free route: LSMR on the operator J (Fong and Saunders 2011) started at 0, whose
    iterates stay in range J^T and so converge to the same minimum-norm least-squares solution,
    stopped at relative residual 1e-12. For w outside range J this is the least-squares solution
    of least norm.
    """
    from ..linalg.matfree import jacobian_operator
    from ..linalg.routes import DENSE_MAX_ENTRIES

    theta = param.as_theta(theta)
    w = np.asarray(w, float).ravel()
    if w.shape != (param.m,):
        raise ShapeError(f"a predictor tangent vector must have {param.m} entries, "
                         f"got shape {w.shape}")
    if route == "dense" or (route == "auto" and param.m * param.n <= DENSE_MAX_ENTRIES):
        J = param.jacobian(theta)
        u, s, vt = np.linalg.svd(J, full_matrices=False)
        r = decide_rank(s, policy_of(param, policy), what=f"J of {param.name}").rank
        return vt[:r].T @ ((u[:, :r].T @ w) / s[:r])
    from scipy.sparse.linalg import lsmr

    return lsmr(jacobian_operator(param, theta), w, atol=1e-12, btol=1e-12,
                maxiter=10 * min(param.m, param.n))[0]


def fiber_bundle(param: Parameterization) -> Any:
    """Hand ``param`` to geomstats as a ``FiberBundle`` over its predictor space.

    The total space is geomstats ``Euclidean(n)``; riemannian_submersion is phi (flattened),
    tangent_riemannian_submersion is the JVP, vertical and horizontal projections and the
    horizontal lift are the generic ones above. The returned bundle works with geomstats'
    ``QuotientMetric`` machinery (see :func:`quotient_metric_geomstats`).
    """
    from geomstats.geometry.euclidean import Euclidean
    from geomstats.geometry.fiber_bundle import FiberBundle

    class ParameterizationBundle(FiberBundle):
        def __init__(self):
            total = Euclidean(param.n)
            super().__init__(total_space=total)
            self.param = param

        def riemannian_submersion(self, point):
            return np.asarray(param.forward_flat(np.asarray(point, float)))

        def tangent_riemannian_submersion(self, tangent_vec, base_point):
            return param.jvp(base_point, tangent_vec)

        def vertical_projection(self, tangent_vec, base_point):
            return tangent_vec - horizontal_projection(param, base_point, tangent_vec)

        def horizontal_projection(self, tangent_vec, base_point):
            return horizontal_projection(param, base_point, tangent_vec)

        def horizontal_lift(self, tangent_vec, base_point=None, fiber_point=None):
            if fiber_point is None:
                raise ShapeError("horizontal_lift needs fiber_point (a theta over base_point)")
            return horizontal_lift(param, fiber_point, tangent_vec)

    return ParameterizationBundle()


def quotient_metric_geomstats(param: Parameterization, theta: ArrayLike, a: ArrayLike,
                              b: ArrayLike) -> float:
    """geomstats' ``QuotientMetric.inner_product`` of predictor tangent vectors a, b at
    phi(theta), through :func:`fiber_bundle` (an independent route to the quotient metric)."""
    bundle = fiber_bundle(param)
    total = bundle._total_space
    total.fiber_bundle = bundle
    from geomstats.geometry.euclidean import Euclidean
    from geomstats.geometry.quotient_metric import QuotientMetric

    base = Euclidean(param.m, equip=False)
    metric = QuotientMetric(space=base, total_space=total)
    theta = param.as_theta(theta)
    return float(metric.inner_product(np.ravel(a), np.ravel(b), fiber_point=theta))
