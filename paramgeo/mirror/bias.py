"""The implicit-bias problem of a mirror flow and its comparison with gradient flow.

The limit of the mirror flow on a squared loss with data X beta = y solves
argmin R(beta) subject to X beta = y (Gunasekar, Lee, Soudry, Srebro 2018; Li et al. 2022,
Theorem 4.10): :func:`solve_implicit_bias` solves it with Newton's method in coordinates of the
affine constraint set; :func:`implicit_bias` compares it with the gradient-flow limit, with the
minimum-l1 solution (scipy.optimize.linprog; the alpha -> 0 limit of the hyperbolic entropy) and
the minimum-l2 solution (the pseudoinverse; the alpha -> infinity limit).
"""

from __future__ import annotations

import dataclasses
from typing import Optional
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..results import Result
from .potentials import mirror_potential

if TYPE_CHECKING:
    from os import PathLike
    from pathlib import Path

    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization
    from ..dynamics.trajectory import Trajectory
    from .potentials import Potential


def _check_data(X, y):
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    if X.ndim != 2:
        raise ShapeError(f"the design X must be a 2-d array (N x p), got shape {X.shape}")
    if X.shape[0] != y.shape[0]:
        raise ShapeError(f"X has {X.shape[0]} rows but y has {y.shape[0]} entries; they must agree")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ShapeError("X or y contains NaN or infinite values")
    return X, y


#: the largest |X|_F^2 / N and |y|^2 / N :func:`implicit_bias` integrates: the curvature of the
#: flow's loss in beta and its size, with a margin of 1e100 below float64's overflow (1.8e308)
#: for the products of the field, its Jacobian and LSODA's finite differences
MAX_DATA_SCALE = 1e200


def _check_scale(X, y):
    """Refuse (ShapeError) data whose mean squares |X|_F^2 / N or |y|^2 / N exceed
    MAX_DATA_SCALE: the flow on |X beta - y|^2 / (2N) would overflow, or never end."""
    n = max(len(y), 1)
    with np.errstate(over="ignore"):
        for label, size in (("|X|_F^2 / N", np.sum(np.square(X / n ** 0.5))),
                            ("|y|^2 / N", np.sum(np.square(y / n ** 0.5)))):
            if not size <= MAX_DATA_SCALE:
                raise ShapeError(f"the data are too large for the flow: {label} = {size:.3g} "
                                 f"is over {MAX_DATA_SCALE:g}, where the gradient flow's field "
                                 "and curvature overflow float64; divide X and y by a common "
                                 "scale")


def min_l1(X: ArrayLike, y: ArrayLike, upper: Optional[ArrayLike] = None,
           lower: Optional[ArrayLike] = None) -> NDArray[np.float64]:
    """argmin |beta|_1 s.t. X beta = y, by linear programming (scipy.optimize.linprog, HiGHS):
    beta = a - b, a, b >= 0, minimise sum(a + b).

    With ``upper``/``lower`` (scalars or arrays of positive weights, inf forbidding that sign):
    the weighted ("modified") l1 problem argmin sum_i upper_i beta_i^+ + lower_i beta_i^-
    s.t. X beta = y, the limit of diagonal networks at vanishing initialisation
    (:func:`paramgeo.flows.saddle_to_saddle`)."""
    from scipy.optimize import linprog

    X, y = _check_data(X, y)
    p = X.shape[1]
    w = np.concatenate([np.broadcast_to(np.asarray(1.0 if upper is None else upper, float), (p,)),
                        np.broadcast_to(np.asarray(1.0 if lower is None else lower, float), (p,))])
    if np.any(w <= 0) or np.any(np.isnan(w)):
        raise ParamgeoError("min_l1: the weights must be positive (inf forbids a sign)")
    bounds = [(0, 0) if np.isinf(wi) else (0, None) for wi in w]
    res = linprog(np.where(np.isinf(w), 0.0, w), A_eq=np.hstack([X, -X]), b_eq=y,
                  bounds=bounds, method="highs")
    if not res.success:
        raise ParamgeoError(f"the minimum-l1 problem has no solution: {res.message}")
    return res.x[:p] - res.x[p:]


def min_l2(X: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
    """argmin |beta|_2 s.t. X beta = y: the pseudoinverse solution X^+ y."""
    X, y = _check_data(X, y)
    return np.linalg.pinv(X) @ y


def solve_implicit_bias(potential: Potential, X: ArrayLike, y: ArrayLike, *, tol: float = 1e-12,
                        maxiter: int = 5000) -> tuple[NDArray[np.float64], float]:
    """argmin R(beta) subject to X beta = y, R the potential (minus its linear part at beta0).

    Coordinates on the affine set: beta = b_p + N z (b_p = projection of beta0 onto it, N an
    orthonormal basis of ker X); damped Newton with Armijo backtracking (Boyd and
    Vandenberghe 2004, Algorithm 9.5) on z with gradient N^T grad R and Hessian N^T Hess R N,
    until the Newton decrement falls below ``tol`` (or a step no longer lowers R in floating
    point). When b_p lies outside the domain of R (an entropy on an orthant), the concave dual
    max_nu <y, nu> - R*(X^T nu) is solved instead (:func:`_solve_implicit_bias_dual`).
    Returns (beta, kkt) where kkt is the relative size of the part of grad R(beta) outside
    range X^T (0 at the solution).
    """
    from scipy.linalg import null_space

    X, y = _check_data(X, y)
    if X.shape[1] != len(potential.beta0):
        raise ShapeError(f"X has {X.shape[1]} columns but the predictor has "
                         f"{len(potential.beta0)} entries")
    if potential.conjugate_mp is not None and potential.digits > 0:
        return _solve_implicit_bias_dual_mp(potential, X, y, tol=tol, maxiter=maxiter)
    beta0 = np.asarray(potential.beta0, float)
    bp = beta0 + np.linalg.lstsq(X, y - X @ beta0, rcond=None)[0]
    if np.linalg.norm(X @ bp - y) > 1e-8 * (1 + np.linalg.norm(y)):
        raise ParamgeoError("X beta = y has no solution (inconsistent data); the implicit-bias "
                            "problem needs an underdetermined, consistent system")
    N = null_space(X)
    if N.shape[1] == 0:
        return bp, 0.0

    def parts(z):
        beta = bp + N @ z
        return N.T @ potential.grad(beta), N.T @ potential.hessian(beta) @ N

    z = np.zeros(N.shape[1])
    value = potential.value(bp)
    if not np.isfinite(value):  # e.g. an entropy whose domain is an orthant: go through the dual
        return _solve_implicit_bias_dual(potential, X, y, tol=tol, maxiter=maxiter)
    for _ in range(maxiter):  # damped Newton with Armijo backtracking (R is strictly convex)
        g, H = parts(z)
        step = np.linalg.solve(H, g)
        dec = float(g @ step)  # Newton decrement squared
        if dec <= tol * tol:
            break
        t, accepted = 1.0, False
        while t > 1e-12:
            new = potential.value(bp + N @ (z - t * step))
            # a step that does not lower R in floating point is no progress: finish below
            if np.isfinite(new) and new <= value - 0.25 * t * dec and new < value:
                accepted = True
                break
            t /= 2
        if not accepted:  # at the resolution of R's values: finish with pure Newton steps
            for _ in range(20):
                z_new = z - step
                g_new, _ = parts(z_new)
                if not np.all(np.isfinite(g_new)) or np.linalg.norm(g_new) >= np.linalg.norm(g):
                    break
                z = z_new
                g, H = parts(z)
                step = np.linalg.solve(H, g)
            break
        z, value = z - t * step, new
    beta = bp + N @ z
    g = potential.grad(beta)
    kkt = float(np.linalg.norm(N.T @ g) / max(np.linalg.norm(g), 1e-300))
    return beta, kkt


def _conjugate_grad(potential, mu, start, tol=1e-13, maxiter=500):
    """grad R*(mu) = argmin_beta R(beta) - <mu, beta>, by damped Newton from ``start`` (a point
    of the domain of R) with backtracking that stays in the domain; the plugin's or the
    numerical construction's inverse mirror map when the potential carries one."""
    if potential.conjugate_grad is not None:
        return np.asarray(potential.conjugate_grad(mu), float)
    beta = np.asarray(start, float).copy()
    val = potential.value(beta) - mu @ beta
    for _ in range(maxiter):
        g = potential.grad(beta) - mu
        step = np.linalg.solve(potential.hessian(beta), g)
        dec = float(g @ step)
        if dec <= tol * tol:
            break
        t = 1.0
        while t > 1e-14:
            cand = beta - t * step
            new = potential.value(cand) - mu @ cand if np.all(np.isfinite(cand)) else np.inf
            if np.isfinite(new) and new <= val - 0.25 * t * dec and new < val:
                break
            t /= 2
        else:
            break
        beta, val = cand, new
    return beta


def _solve_implicit_bias_dual(potential, X, y, *, tol=1e-12, maxiter=500):
    """argmin R s.t. X beta = y through the concave dual max_nu <y, nu> - R*(X^T nu).

    KKT: grad R(beta) = X^T nu and X beta = y, so beta = grad R*(X^T nu) (Rockafellar 1970,
    Theorem 23.5). Newton on nu with gradient y - X beta(nu) and Hessian
    -X Hess R(beta)^{-1} X^T, backtracking on the dual value; beta(nu) by :func:`_conjugate_grad`
    warm-started at the previous iterate (nu = 0 gives beta0, inside the domain). Used when the
    least-change interpolator lies outside the domain of R (entropies on an orthant).
    """
    beta0 = np.asarray(potential.beta0, float)
    nu = np.zeros(X.shape[0])

    def dual(nu, start):
        mu = X.T @ nu
        b = _conjugate_grad(potential, mu, start)
        return float(y @ nu - (mu @ b - potential.value(b))), b

    val, beta = dual(nu, beta0)
    for _ in range(maxiter):
        g = y - X @ beta
        if np.linalg.norm(g) <= tol * (1 + np.linalg.norm(y)):
            break
        Hd = X @ np.linalg.solve(potential.hessian(beta), X.T)
        step = np.linalg.lstsq(Hd, g, rcond=None)[0]
        t = 1.0
        while t > 1e-14:
            new, b = dual(nu + t * step, beta)
            if np.isfinite(new) and new >= val + 1e-4 * t * (g @ step):
                break
            t /= 2
        else:
            break
        nu, val, beta = nu + t * step, new, b
    if np.linalg.norm(X @ beta - y) > 1e-6 * (1 + np.linalg.norm(y)):
        raise ParamgeoError(
            f"the implicit-bias problem has no solution in the domain of the potential (dual "
            f"Newton stopped with |X beta - y| = {np.linalg.norm(X @ beta - y):.3g}); the data "
            "may not be reachable from theta0")
    from scipy.linalg import null_space

    N = null_space(X)
    gr = potential.grad(beta)
    kkt = float(np.linalg.norm(N.T @ gr) / max(np.linalg.norm(gr), 1e-300)) if N.size else 0.0
    return beta, kkt


def _solve_implicit_bias_dual_mp(potential, X, y, *, tol=1e-12, maxiter=5000):
    """The dual route of :func:`_solve_implicit_bias_dual` with the dual variable nu kept in
    mpmath at ``potential.digits`` digits, for separable potentials carrying ``conjugate_mp``
    (power-law mirror maps, whose dual variables mu = X^T nu sit within 1 / T of the boundary
    of the domain at initialisation scale alpha, T = alpha^(2-L): float64 would lose log10(T)
    digits in the gaps to the boundary, which fix beta).

    Damped Newton on the concave dual D(nu) = <y, nu> - R*(X^T nu): gradient y - X beta(nu),
    Hessian -X diag(Hess R*) X^T, Armijo backtracking on D that stays in the domain (Boyd and
    Vandenberghe 2004, Algorithm 9.5; a step halving the residual is also taken, as D's
    increase falls below float64's resolution of R* near the solution), until
    |X beta - y| <= tol (1 + |y|). Only nu and
    mu = X^T nu are high precision (``conjugate_mp`` takes mu as mpmath numbers and returns
    R*(mu), beta and diag Hess R* in float64, from the gaps computed in high precision); the
    Newton step and the increase D(nu + t s) - D(nu) = t <y, s> - (R*(new) - R*(old)) are
    float64. X and y are taken as exact binary numbers.
    """
    import mpmath

    N, p = X.shape
    ynorm = float(np.linalg.norm(y))
    with mpmath.workdps(int(potential.digits)):
        cols = [[mpmath.mpf(float(v)) for v in X[:, i]] for i in range(p)]

        def at(nu):
            return potential.conjugate_mp([mpmath.fdot(col, nu) for col in cols])

        nu = [mpmath.mpf(0)] * N
        rstar, beta, hess = at(nu)
        t_last = 1.0
        for _ in range(maxiter):
            g = y - X @ beta
            if np.linalg.norm(g) <= tol * (1 + ynorm):
                break
            H = (X * hess) @ X.T
            step = np.linalg.lstsq(H, g, rcond=None)[0]
            slope = float(g @ step)
            if not slope > 0:
                break
            t = min(1.0, 4.0 * t_last)  # start near the last accepted step
            while t > 1e-30:
                cand = [a + mpmath.mpf(t * float(d)) for a, d in zip(nu, step)]
                new = at(cand)
                # Armijo on D; near the solution D's increase is below float64's resolution
                # of R*, where a step that shrinks the residual |y - X beta| is taken instead
                if new is not None and (
                        t * float(y @ step) - (new[0] - rstar) >= 1e-4 * t * slope
                        or np.linalg.norm(y - X @ new[1]) <= 0.5 * np.linalg.norm(g)):
                    break
                t /= 2
            else:
                break
            nu, t_last = cand, t
            rstar, beta, hess = new
        mu_f = np.array([float(mpmath.fdot(col, nu)) for col in cols])
    residual = float(np.linalg.norm(X @ beta - y))
    if residual > 1e-6 * (1 + ynorm):
        raise ParamgeoError(
            f"the implicit-bias problem has no solution in the domain of the potential (dual "
            f"Newton at {potential.digits} digits stopped with |X beta - y| = {residual:.3g}); "
            "the data may not be reachable from theta0")
    from scipy.linalg import null_space

    Nk = null_space(X)
    kkt = float(np.linalg.norm(Nk.T @ mu_f) / max(np.linalg.norm(mu_f), 1e-300)) if Nk.size \
        else 0.0
    return np.asarray(beta, float), kkt


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImplicitBias(Result):
    """The gradient-flow limit against argmin R s.t. X beta = y, min-l1 and min-l2.

    Where the potential declares its vanishing-initialisation limit (``Potential.limit``:
    thresholds upper, lower), beta_l1 minimises the modified l1 norm |b|_w = sum_i upper_i b_i^+
    + lower_i b_i^- (divided by the smallest threshold) and the gap is measured in that norm.

    Attributes:
        alpha: the initialisation scale (None when theta0 was given).
        potential: the potential R, in words.
        deviation: |beta_flow - beta_R|_inf.
        relative_deviation: deviation / |beta_R|_inf.
        kkt: the KKT residual of argmin R (relative norm of the projected gradient).
        flow_time: the time the flow reached.
        flow_loss: the loss at its end.
        l1_gap: |beta_R|_1 - |beta_l1|_1 (-> 0 as alpha -> 0).
        l1_distance: |beta_R - beta_l1|_inf.
        l2_distance: |beta_R - X^+ y|_inf (-> 0 as alpha -> infinity).
        beta_flow: the flow's limit phi(theta(t_final)), shape (m,).
        beta_potential: argmin R s.t. X beta = y, shape (m,).
        beta_l1: the minimum-l1 interpolator, shape (m,).
        beta_l2: the minimum-l2 interpolator X^+ y, shape (m,).
    """

    alpha: Optional[float]
    potential: str
    deviation: float
    relative_deviation: float
    kkt: float
    flow_time: float
    flow_loss: float
    l1_gap: float
    l1_distance: float
    l2_distance: float
    beta_flow: np.ndarray
    beta_potential: np.ndarray
    beta_l1: np.ndarray
    beta_l2: np.ndarray

    def plot(self, path: str | PathLike[str], *, title: Optional[str] = None) -> Path:
        """Draw the four predictors coordinate by coordinate (PNG, SVG or PDF by the suffix of
        ``path``; needs matplotlib): the gradient-flow limit, argmin R, the minimum-l1 and the
        minimum-l2 interpolators. Returns the path."""
        from ..io.files import check_plot_path, save_figure
        from ..dynamics.trajectory import _pyplot_figure

        path = check_plot_path(path)
        fig = _pyplot_figure((max(6.0, 0.12 * len(self.beta_flow) + 4), 4.0))
        ax = fig.subplots()
        i = np.arange(len(self.beta_flow))
        ax.axhline(0.0, color="0.8", lw=0.8)
        ax.plot(i, self.beta_l2, "_", color="C3", ms=10, mew=2, label="min-l2 (X^+ y)")
        ax.plot(i, self.beta_l1, "x", color="C2", ms=7, label="min-l1 (linprog)")
        ax.plot(i, self.beta_potential, "+", color="C1", ms=10, label="argmin R s.t. X beta = y")
        ax.plot(i, self.beta_flow, "o", mfc="none", color="C0", ms=7, label="gradient-flow limit")
        ax.set_xlabel("coordinate i")
        ax.set_ylabel("beta_i")
        a = f"alpha = {self.alpha:g}: " if self.alpha is not None else ""
        ax.set_title(title or f"implicit bias, {a}|flow - argmin R| = {self.deviation:.2g}, "
                              f"|b - b_l1| = {self.l1_distance:.2g}, |b - b_l2| = "
                              f"{self.l2_distance:.2g}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        save_figure(fig, path)
        return path

    def __str__(self):
        a = f" alpha = {self.alpha:g}" if self.alpha is not None else ""
        return "\n".join([
            f"ImplicitBias{a}",
            f"  potential       {self.potential}",
            f"  |flow limit - argmin R|_inf   {self.deviation:.3g} (relative "
            f"{self.relative_deviation:.2g}; flow to t = "
            f"{self.flow_time:.4g}, loss {self.flow_loss:.3g}; KKT residual {self.kkt:.2g})",
            f"  l1 gap |b_R|_1 - |b_l1|_1     {self.l1_gap:.3g}",
            f"  |b_R - b_l1|_inf              {self.l1_distance:.3g}",
            f"  |b_R - X^+ y|_inf             {self.l2_distance:.3g}",
        ])


def implicit_bias(param: Parameterization, X: ArrayLike, y: ArrayLike,
                  alpha: Optional[float] = None, theta0: Optional[ArrayLike] = None, *,
                  t_final: float = 1e9, stop_loss: Optional[float] = None, rtol: float = 1e-10,
                  atol: float = 1e-15, potential: Optional[Potential] = None,
                  trajectory: Optional[Trajectory] = None, chart: str = "theta",
                  time_scale: float = 1.0, exact_jacobian: bool = False) -> ImplicitBias:
    """Solve argmin R(beta) s.t. X beta = y and compare with the limit of gradient flow.

    For a commuting parameterization, gradient flow on ell(beta) = |X beta - y|^2 / (2N) from
    theta0 converges to argmin R(beta) s.t. X beta = y, R the mirror potential of theta0 (Li,
    Wang, Lee, Arora 2022, Theorem 4.8; for diagonal networks the hyperbolic entropy, whose
    alpha -> 0 and alpha -> infinity limits are min-l1 and min-l2, Woodworth et al. 2020). The
    flow runs to ``t_final`` or until the loss falls below ``stop_loss``; the potential's
    minimiser is :func:`solve_implicit_bias`; the references are :func:`min_l1` and
    :func:`min_l2`. From a small initialisation of a depth-L diagonal network, ``chart="log"``
    with ``time_scale=alpha**(2 - L)`` and ``atol`` ~ 1e-12 keeps every coordinate to relative
    accuracy (docs/plugins/deep-diagonal.md).

    Args:
        param: a commuting parameterization phi: R^n -> R^m.
        X: the design, shape (N, m).
        y: the targets, shape (N,), with X beta = y solvable and underdetermined.
        alpha: the initialisation scale, theta0 = ``param.init_at_scale(alpha)``; default 1.
        theta0: the initialisation itself, shape (n,), instead of alpha.
        t_final: the flow's final time.
        stop_loss: stop the flow below this loss; default 1e-26 (1 + |y|^2 / N).
        rtol: the flow's relative tolerance.
        atol: its absolute tolerance.
        potential: the mirror potential, if already built (else :func:`mirror_potential`).
        trajectory: a flow already run from theta0 (its last point is the limit).
        chart: "theta" or "log", as in :func:`paramgeo.flows.gradient_flow`.
        time_scale: integrate in t / time_scale.
        exact_jacobian: give an implicit integrator the exact Jacobian of the field.

    Returns:
        The :class:`ImplicitBias`: the flow's limit, argmin R, min-l1 and min-l2 predictors
        and their distances.

    Raises:
        ShapeError: X, y or theta0 of the wrong shape or not finite.
        ParamgeoError: X beta = y has no solution, or the potential's minimisation fails.
        NotCommutingError: the fields grad phi_i do not commute (no potential).

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.mirror import implicit_bias
        >>> X, y = np.array([[1.0, 2.0, 0.5]]), np.array([1.0])
        >>> found = implicit_bias(paramgeo.get("hadamard", p=3), X, y, alpha=0.01)
        >>> found.beta_l1                       # small alpha: close to the minimum-l1 solution
        array([0. , 0.5, 0. ])
        >>> bool(found.l1_distance < 0.01), bool(found.deviation < 1e-6)
        (True, True)
    """
    from ..dynamics.trajectory import gradient_flow
    from ..losses.predictor import LinearMeasurements

    X, y = _check_data(X, y)
    _check_scale(X, y)
    if X.shape[1] != param.m:
        raise ShapeError(f"X has {X.shape[1]} columns but {param.name} {param.sizes} has "
                         f"predictors of dimension {param.m}; they must agree")
    if theta0 is None:
        if alpha is None or not np.isfinite(alpha) or alpha <= 0:
            raise ParamgeoError(f"give a positive init scale alpha (or theta0), got {alpha}")
        theta0 = param.init_at_scale(alpha)
    theta0 = param.as_theta(theta0)
    potential = potential or mirror_potential(param, theta0)
    loss = LinearMeasurements(X, y)
    if trajectory is None:
        stop = stop_loss if stop_loss is not None else 1e-26 * (1 + y @ y / len(y))
        trajectory = gradient_flow(param, loss, theta0, t_final, rtol=rtol, atol=atol,
                                   n_records=40, log_times=True, stop_loss=stop, chart=chart,
                                   time_scale=time_scale, exact_jacobian=exact_jacobian)
    if not trajectory.success and not trajectory.interrupted:
        raise ParamgeoError(
            f"implicit_bias: the gradient flow failed before reaching its limit "
            f"({trajectory.message}; t = {trajectory.times[-1]:.4g}, loss "
            f"{trajectory.losses[-1]:.3g}), so there is no limit to compare with argmin R; "
            "loosen atol (e.g. 1e-12), or for small initialisations integrate with "
            "chart='log', time_scale=alpha**(2 - L) and exact_jacobian=True")
    beta_flow = trajectory.final_predictor
    beta_R, kkt = solve_implicit_bias(potential, X, y)
    if potential.limit is not None:  # the modified l1 norm of the alpha -> 0 limit
        upper, lower, _ = potential.limit
        b1 = min_l1(X, y, upper=upper, lower=lower)
        scale = float(np.min(np.r_[upper, lower]))

        def norm(b):
            pos, neg = b > 0, b < 0
            return float((upper[pos] @ b[pos] - lower[neg] @ b[neg]) / scale)
    else:
        b1 = min_l1(X, y)

        def norm(b):
            return float(np.abs(b).sum())
    b2 = min_l2(X, y)
    deviation = float(np.abs(beta_flow - beta_R).max())
    return ImplicitBias(alpha=None if alpha is None else float(alpha), potential=potential.formula,
                        deviation=deviation,
                        relative_deviation=deviation / max(float(np.abs(beta_R).max()), 1e-300),
                        kkt=kkt, flow_time=float(trajectory.times[-1]),
                        flow_loss=float(trajectory.losses[-1]), l1_gap=norm(beta_R) - norm(b1),
                        l1_distance=float(np.abs(beta_R - b1).max()),
                        l2_distance=float(np.abs(beta_R - b2).max()), beta_flow=beta_flow,
                        beta_potential=beta_R, beta_l1=b1, beta_l2=b2)
