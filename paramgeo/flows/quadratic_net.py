"""Positive quadratic networks f_U(x) = x^T U U^T x: spectral initialiser, population curvature
and its deviation over N, and local linear convergence of gradient descent from the spectral
start.

Model: x ~ N(0, I_d), y = x^T Q* x with Q* = U* U*^T (d x r), loss
L(U) = (1/2N) sum_i (x_i^T U U^T x_i - y_i)^2. For Gaussian x (Isserlis),

    E (x^T D x)^2 = 2 |D|_F^2 + (tr D)^2        (D symmetric),
    E [ (x^T Q* x) x x^T ] = 2 Q* + tr(Q*) I,

so the population loss is (1/2)(2 |Q - Q*|_F^2 + (tr(Q - Q*))^2) and the measurement-weighted
matrix M = (1/N) sum_i y_i x_i x_i^T estimates 2 Q* + tr(Q*) I. The spectral initialiser
(:func:`spectral_init`) takes the top-r eigenpairs (m_k, v_k) of M and tau = mean(y) (which
estimates tr Q*): U_0 = [v_k sqrt(max(m_k - tau, 0) / 2)].

Curvature. At an interpolator (zero residuals) the Hessian of L in U is the Gram form
H_N[V, V] = (1/N) sum_i (x_i^T (U V^T + V U^T) x_i)^2 (:func:`empirical_hessian`), whose
population is H[V, V] = 2 |U V^T + V U^T|_F^2 + (2 tr(U^T V))^2 (:func:`population_hessian`);
both vanish on the vertical directions V = U A (A antisymmetric, the O(r) orbit), so they are
compared on the horizontal space, of dimension d r - r (r - 1) / 2 (:func:`curvature_deviation`:
|H_N - H|_op / |H|_op over N, which falls like N^-1/2).

Local linear convergence. Near the orbit of U*, GD U <- U - eta grad L contracts the horizontal
error by the factor rho = max |1 - eta h| over the nonzero eigenvalues h of H_N (the vertical
directions do not move Q), so |U_t U_t^T - Q*|_F ~ rho^t (:func:`local_convergence`: the
measured factor beside the predicted one, from H_N and from the population H).

Finite steps in a commuting regime (:func:`step_size_gap`). When the measurements share an
eigenbasis E and U_0 = alpha E, gradient flow is the entropy mirror flow of the eigenvalues and
its limit the Bregman projection argmin R s.t. the data (``paramgeo.mirror``); gradient descent
multiplies each eigenvalue by (1 - 2 eta g_j)^2 = exp(-4 eta g_j - 4 eta^2 g_j^2 + O(eta^3))
per step, mirror descent with a drift of order eta^2 per step over order 1/eta steps, so its
limit Q_eta differs from the projection by O(eta): |Q_eta - Q_R| ~ C eta.

References: positive quadratic networks and their quotient dynamics (factor gradient horizontal,
GD an exact congruence, population curvature, spectral initialiser, local linear convergence);
Candes, Li, Soltanolkotabi (2015), "Phase retrieval via Wirtinger flow" (spectral initialisation
and local linear convergence); Isserlis (1918).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from ..errors import ShapeError
from ..results import Result
from .structure import PowerLaw, power_law_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization
    from ..losses.predictor import Loss

#: Relative error below which |U U^T - Q*| is round-off (the measured rate stops there).
ROUND_OFF = 1e-12


def quadratic_measurements(u_star: NDArray[np.float64], N: int, rng: np.random.Generator
                           ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(X, y): N rows x_i ~ N(0, I_d) and y_i = |U*^T x_i|^2 = x_i^T Q* x_i."""
    u_star = np.asarray(u_star, float)
    X = rng.standard_normal((int(N), u_star.shape[0]))
    return X, np.sum((X @ u_star) ** 2, axis=1)


def spectral_init(X: NDArray[np.float64], y: NDArray[np.float64], r: int) -> NDArray[np.float64]:
    """U_0 = [v_k sqrt(max(m_k - tau, 0) / 2)]_{k <= r} from the top-r eigenpairs of
    M = (1/N) sum_i y_i x_i x_i^T and tau = mean(y), since E M = 2 Q* + tr(Q*) I and
    E y = tr Q* for x ~ N(0, I). Returns U_0 of shape (d, r)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ShapeError(f"spectral init: X must be (N, d) and y (N,); got {X.shape}, {y.shape}")
    if not 1 <= int(r) <= X.shape[1]:
        raise ShapeError(f"spectral init: rank r = {r} must be in 1..d = {X.shape[1]}")
    M = X.T @ (y[:, None] * X) / X.shape[0]
    m, V = np.linalg.eigh(M)
    top = np.argsort(m)[::-1][:int(r)]
    return V[:, top] * np.sqrt(np.maximum(m[top] - y.mean(), 0.0) / 2.0)


def _tangent_map(u):
    """The d^2 x d r matrix of V -> vec(U V^T + V U^T) (V flattened row-major)."""
    d, r = u.shape
    J = np.zeros((d * d, d * r))
    for a in range(d):
        for k in range(r):
            V = np.zeros((d, r))
            V[a, k] = 1.0
            J[:, a * r + k] = (u @ V.T + V @ u.T).ravel()
    return J


def population_hessian(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """d r x d r matrix of H[V, V] = 2 |U V^T + V U^T|_F^2 + (2 tr(U^T V))^2, the Hessian of the
    population loss at an interpolator U (its Gram form under E (x^T D x)^2 = 2 |D|^2 +
    (tr D)^2)."""
    u = np.asarray(u, float)
    J = _tangent_map(u)
    trace = np.eye(u.shape[0]).ravel() @ J
    return 2 * J.T @ J + np.outer(trace, trace)


def empirical_hessian(X: NDArray[np.float64], u: NDArray[np.float64]) -> NDArray[np.float64]:
    """d r x d r matrix of H_N[V, V] = (1/N) sum_i (x_i^T (U V^T + V U^T) x_i)^2, the Hessian of
    L at an interpolator U (Gauss-Newton is exact where the residuals vanish):
    H_N = (4/N) B^T B with rows B_i = vec(x_i (U^T x_i)^T)."""
    X, u = np.asarray(X, float), np.asarray(u, float)
    B = (X[:, :, None] * (X @ u)[:, None, :]).reshape(X.shape[0], -1)
    return 4.0 * B.T @ B / X.shape[0]


def _horizontal_basis(u):
    """Orthonormal basis (columns) of the horizontal space at U: the orthogonal complement of
    the vertical space {U A : A antisymmetric} in R^{d r}."""
    d, r = u.shape
    cols = []
    for i in range(r):
        for j in range(i + 1, r):
            A = np.zeros((r, r))
            A[i, j], A[j, i] = 1.0, -1.0
            cols.append((u @ A).ravel())
    if not cols:
        return np.eye(d * r)
    q, _ = np.linalg.qr(np.array(cols).T, mode="complete")
    return q[:, len(cols):]


def horizontal_spectrum(H: NDArray[np.float64], u: NDArray[np.float64]) -> NDArray[np.float64]:
    """Eigenvalues (ascending) of the Hessian H restricted to the horizontal space at U."""
    P = _horizontal_basis(np.asarray(u, float))
    return np.linalg.eigvalsh(P.T @ H @ P)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CurvatureDeviation(Result):
    """Relative deviation |H_N - H|_op / |H|_op on the horizontal space per N (mean over seeds,
    ``deviation``), the smallest horizontal eigenvalue of H_N (``min_curvature``) beside the
    population's (``population_min``), and the fitted power law deviation ~ N^-rate
    (predicted 1/2)."""

    sizes: np.ndarray
    deviation: np.ndarray
    min_curvature: np.ndarray
    population_min: float
    population_max: float
    rate: PowerLaw

    def __str__(self):
        lines = [f"population curvature on the horizontal space: [{self.population_min:.4g}, "
                 f"{self.population_max:.4g}]",
                 f"{'N':>7} {'|H_N - H| / |H|':>16} {'min curvature H_N':>18}"]
        for n, dev, lo in zip(self.sizes, self.deviation, self.min_curvature):
            lines.append(f"{int(n):7d} {dev:16.4g} {lo:18.4g}")
        lines.append(f"deviation ~ N^-{self.rate.exponent:.3f} (+- {self.rate.error:.3f}; "
                     "predicted 0.5)")
        return "\n".join(lines)


def curvature_deviation(u_star: ArrayLike, sizes: Sequence[int],
                        seeds: Sequence[int] = (0, 1, 2)) -> CurvatureDeviation:
    """The empirical Hessian at U* against the population one over sample sizes ``sizes``
    (x ~ N(0, I_d), ``seeds`` draws per size)."""
    u_star = np.asarray(u_star, float)
    P = _horizontal_basis(u_star)
    H = P.T @ population_hessian(u_star) @ P
    pop = np.linalg.eigvalsh(H)
    sizes = np.asarray(sorted(int(n) for n in sizes))
    dev, low = [], []
    for n in sizes:
        ds, ls = [], []
        for s in seeds:
            X, _ = quadratic_measurements(u_star, n, np.random.default_rng(s))
            HN = P.T @ empirical_hessian(X, u_star) @ P
            ds.append(np.linalg.norm(HN - H, 2) / pop[-1])
            ls.append(np.linalg.eigvalsh(HN)[0])
        dev.append(np.mean(ds))
        low.append(np.mean(ls))
    dev = np.array(dev)
    return CurvatureDeviation(sizes=sizes, deviation=dev, min_curvature=np.array(low), population_min=float(pop[0]), population_max=float(pop[-1]),
                              rate=power_law_fit(sizes, dev, sizes[0], sizes[-1], 0.5))


@dataclasses.dataclass(frozen=True, kw_only=True)
class LocalConvergence(Result):
    """GD from ``u0``: the error |U_t U_t^T - Q*|_F / |Q*|_F per step (``errors``), the
    initial error, the measured contraction factor per step (geometric mean over the last
    quarter of the steps whose error is above round-off, 1e-12) beside the predicted max |1 - eta h| over the horizontal eigenvalues h of
    H_N (``predicted``) and of the population H (``population_predicted``)."""

    lr: float
    errors: np.ndarray
    measured: float
    predicted: float
    population_predicted: float

    def __str__(self):
        return (f"GD from the spectral start, step {self.lr:.4g}: relative error "
                f"{self.errors[0]:.3g} -> {self.errors[-1]:.3g} in {self.errors.size - 1} "
                f"steps\n  contraction per step: measured {self.measured:.6f}, predicted "
                f"{self.predicted:.6f} (from H_N), {self.population_predicted:.6f} "
                "(from the population H)")


def local_convergence(X: ArrayLike, y: ArrayLike, u0: ArrayLike, u_star: ArrayLike,
                      steps: int = 200, lr: Optional[float] = None) -> LocalConvergence:
    """Gradient descent U <- U - eta grad L, grad L = (2/N) sum_i r_i x_i x_i^T U with
    r_i = x_i^T U U^T x_i - y_i, from ``u0`` for ``steps`` steps; eta defaults to
    1 / h_max (h_max the top horizontal eigenvalue of H_N at U*), so that the predicted factor
    is 1 - h_min / h_max. The measured factor is taken over the last quarter of the steps before
    the error reaches round-off: the slowest horizontal mode takes over only late when the
    smallest eigenvalues are close."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    u, u_star = np.array(u0, float), np.asarray(u_star, float)
    h = horizontal_spectrum(empirical_hessian(X, u_star), u_star)
    hp = horizontal_spectrum(population_hessian(u_star), u_star)
    lr = 1.0 / h[-1] if lr is None else float(lr)
    q_star = u_star @ u_star.T
    scale = np.linalg.norm(q_star)
    errors = [np.linalg.norm(u @ u.T - q_star) / scale]
    for _ in range(int(steps)):
        r = np.sum((X @ u) ** 2, axis=1) - y
        u = u - lr * 2.0 * X.T @ (r[:, None] * (X @ u)) / X.shape[0]
        errors.append(np.linalg.norm(u @ u.T - q_star) / scale)
    errors = np.array(errors)
    if not np.all(np.isfinite(errors)):
        raise ShapeError(f"local convergence: GD with step {lr:.3g} diverged; give a smaller lr")
    above = np.flatnonzero(errors > ROUND_OFF)
    last = int(above[-1]) if above.size else 0
    if last < 8:
        raise ShapeError("local convergence: the error is at round-off within 8 steps; start "
                         "farther from U* or take a smaller lr")
    first = (3 * last) // 4
    measured = math.exp((math.log(errors[last]) - math.log(errors[first])) / (last - first))
    rho = float(np.max(np.abs(1 - lr * h)))
    rho_pop = float(np.max(np.abs(1 - lr * hp)))
    return LocalConvergence(lr=lr, errors=errors, measured=measured, predicted=rho, population_predicted=rho_pop)


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepSizeGap(Result):
    """|Q_eta - Q_R|_F of the gradient-descent limit from the Bregman projection per step size
    (``lrs``, ``gaps``), the flow's own distance (``flow_gap``, the integration's floor) and the
    power law gap ~ eta^order fitted (``order``, predicted 1)."""

    lrs: np.ndarray
    gaps: np.ndarray
    flow_gap: float
    order: float
    order_error: float

    def __str__(self):
        rows = ", ".join(f"{g:.3g} at {e:g}" for e, g in zip(self.lrs, self.gaps))
        return (f"GD limit vs the Bregman projection: {rows} (flow: {self.flow_gap:.2g}); "
                f"gap ~ eta^{self.order:.3f} (+- {self.order_error:.3f}; predicted 1)")


def step_size_gap(param: Parameterization, theta0: ArrayLike, loss: Loss, lrs: Sequence[float],
                  stop_loss: float = 1e-24, max_steps: int = 200_000) -> StepSizeGap:
    """Gradient descent with each step size in ``lrs`` from ``theta0`` (a commuting regime of
    ``param``, e.g. ``uut`` from alpha E) run until the loss is below ``stop_loss``, its limit
    predictor against the Bregman projection that ``paramgeo.mirror.regime_implicit_bias``
    predicts for the flow."""
    from ..mirror import regime_implicit_bias
    from .descent import gradient_descent

    bias = regime_implicit_bias(param, theta0, loss)
    target = np.asarray(bias.beta_predicted, float)
    gaps = []
    for lr in lrs:
        run = gradient_descent(param, loss, theta0, max_steps, float(lr), stop_loss=stop_loss,
                               conserved=False)
        if run.losses[-1] > stop_loss:
            raise ShapeError(f"step-size gap: descent with step {lr:g} did not reach the loss "
                             f"{stop_loss:g} in {max_steps} steps; give larger steps or a "
                             "looser stop_loss")
        gaps.append(float(np.linalg.norm(np.asarray(run.final_predictor) - target)))
    lrs, gaps = np.asarray(lrs, float), np.array(gaps)
    fit = power_law_fit(lrs, gaps, lrs.min(), lrs.max())
    return StepSizeGap(lrs=lrs, gaps=gaps, flow_gap=float(np.linalg.norm(bias.beta_flow - target)),
                       order=-fit.exponent, order_error=fit.error)
