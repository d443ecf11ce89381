"""The vanishing-initialisation limit of diagonal (commuting) parameterizations: the
saddle-to-saddle sequence of Pesme and Flammarion (2023) and the jump times of a trajectory."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import ParamgeoError
from ..losses.predictor import LinearMeasurements
from ..results import Result, title

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..losses.predictor import Loss
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class SaddleSequence(Result):
    """The vanishing-initialisation limit: saddles beta_k visited on [t_k, t_{k+1}) in rescaled
    time t / log(1/alpha), the dual variable s at each jump time and the gradient on each
    plateau (s(t) = s_k - (t - t_k) grad ell(beta_k) there), and the plateau losses."""

    times: np.ndarray
    saddles: np.ndarray
    duals: np.ndarray
    gradients: np.ndarray
    losses: np.ndarray
    upper: object  # float, or an array of per-coordinate thresholds
    lower: object
    converged: bool

    def dual_at(self, t: float) -> NDArray[np.float64]:
        """s(t), piecewise linear in the rescaled time t."""
        k = max(int(np.searchsorted(self.times, t, side="right")) - 1, 0)
        return self.duals[k] - (t - self.times[k]) * self.gradients[k]

    def saddle_at(self, t: float) -> Any:
        """The saddle occupied at rescaled time t."""
        k = max(int(np.searchsorted(self.times, t, side="right")) - 1, 0)
        return self.saddles[k]

    def crossing_time(self, i: int, level: float) -> float:
        """First rescaled time at which s_i(t) reaches ``level`` (inf if never)."""
        for k in range(len(self.times)):
            s0, g = self.duals[k, i], self.gradients[k, i]
            end = self.times[k + 1] if k + 1 < len(self.times) else np.inf
            if (s0 - level) * np.sign(-g) >= 0 and s0 == level:
                return float(self.times[k])
            if g != 0:
                dt = (s0 - level) / g
                if 0 <= dt and self.times[k] + dt <= end:
                    return float(self.times[k] + dt)
        return float("inf")

    def __str__(self):
        lines = [f"SaddleSequence: {len(self.times)} saddles "
                 f"({'reaches a minimiser' if self.converged else 'not converged'})"]
        for k, (t, b, L) in enumerate(zip(self.times, self.saddles, self.losses)):
            support = np.flatnonzero(np.abs(b) > 1e-12)
            lines.append(f"  t_{k} = {t:.6g}  loss {L:.6g}  support {support.tolist()}")
        return "\n".join(lines)


def _constrained_min(loss, free_lo, free_hi):
    """argmin ell(beta) with beta_i in [free_lo_i, free_hi_i] (0 where both are 0)."""
    from scipy.optimize import lsq_linear, minimize

    free = np.flatnonzero((free_lo < 0) | (free_hi > 0))
    beta = np.zeros(loss.m)
    if not len(free):
        return beta
    if isinstance(loss, LinearMeasurements):  # squared loss: a bounded least squares
        A = loss.A
        lo, hi = free_lo[free], free_hi[free]
        if np.all(np.isinf(lo)) and np.all(np.isinf(hi)):
            beta[free] = np.linalg.lstsq(A[:, free], loss.y, rcond=None)[0]
        else:
            res = lsq_linear(A[:, free], loss.y, bounds=(lo, hi), method="bvls", tol=1e-14)
            beta[free] = res.x
        return beta

    def f(z):
        b = np.zeros(loss.m)
        b[free] = z
        return float(loss.value(b)), np.asarray(loss.grad(b))[free]

    res = minimize(f, np.zeros(len(free)), jac=True, method="L-BFGS-B",
                   bounds=list(zip(free_lo[free], free_hi[free])),
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
    beta[free] = res.x
    return beta


def saddle_to_saddle(loss: Loss, *, upper: float = 1.0, lower: float = 1.0, max_saddles: int = 100,
                     tol: float = 1e-10) -> SaddleSequence:
    """The vanishing-initialisation limit of gradient flow for the *diagonal* model
    beta = u * v (a two-layer diagonal linear network, the ``hadamard`` parameterization):
    Pesme and Flammarion (2023), "Saddle-to-saddle dynamics in diagonal linear networks",
    Algorithm 1, written for a general loss ell on predictors with box thresholds.

    It is not a generic engine over parameterizations: the jump rule below is derived for
    u * v (coordinatewise, commuting fields) and holds for no other model. Its input is only
    the loss on predictors (no plugin); the model is implied. The same recursion with
    ``lower=None`` and ``upper=1/2`` describes a non-negative diagonal model (the eigenvalues
    of M = W W^T when they evolve in a fixed eigenbasis, see examples/lotka_volterra.py).

    For beta = u * v from u_0 = sqrt(2) alpha 1, v_0 = 0, u^2 - v^2 = 2 alpha^2 is conserved,
    beta' = -2 sqrt(beta^2 + alpha^4) grad ell, i.e. (1/2) arcsinh(beta / alpha^2) =
    -int_0^t grad ell. In rescaled time tau = t / log(1/alpha) the dual variable
    s(tau) = -int_0^tau grad ell(beta) satisfies |s_i| <= 1 in the limit alpha -> 0, with
    beta_i = 0 where |s_i| < 1 and sign(beta_i) = s_i where |s_i| = 1. Algorithm:

        t_0 = 0, s_0 = 0, beta_0 = 0; for k = 0, 1, ...:
          g = grad ell(beta_k); stop if g = 0 (a global minimiser: the minimum-l1 interpolator
          for squared loss in the overparameterised case);
          dt = min over i of the time s_i - dt g_i needs to reach +upper (g_i < 0) or -lower
               (g_i > 0), over coordinates not already on that boundary;
          t_{k+1} = t_k + dt, s_{k+1} = s_k - dt g;
          beta_{k+1} = argmin ell(beta) subject to beta_i >= 0 where s_i = +upper,
                       beta_i <= 0 where s_i = -lower, beta_i = 0 elsewhere.

    ``upper``/``lower`` are the activation thresholds (1 for u * v; ``lower=None`` keeps beta
    non-negative, as for the eigenvalues of M = W W^T, where log m_k / log(1/alpha) =
    -2 + 4 s_k and a mode switches on at s_k = 1/2); arrays give one threshold per coordinate
    (inf: that sign is never reached). Deep diagonal networks (depth L >= 3) follow the same
    recursion in the time t / T, T = alpha^(2-L), with the thresholds of their power-law
    mirror map (``Potential.limit``, :mod:`paramgeo.mirror.separable`; Zhao, Wang, Yang, Bai,
    Zhang 2026, Algorithm 1 for deep networks); the end point then minimises
    sum_i upper_i beta_i^+ + lower_i beta_i^- subject to the data, a weighted ("modified")
    l1 norm (:func:`paramgeo.mirror.min_l1` with weights). The constrained problems are bounded least
    squares (``scipy.optimize.lsq_linear``, BVLS) for the squared loss
    (:class:`paramgeo.losses.LinearMeasurements`), L-BFGS-B otherwise.
    """
    m = loss.m
    if m is None:
        raise ParamgeoError("saddle_to_saddle needs a loss with a known predictor dimension")
    upper = np.broadcast_to(np.asarray(upper, float), (m,)).copy()
    lower_val = np.broadcast_to(np.asarray(np.inf if lower is None else lower, float),
                                (m,)).copy()
    if np.any(upper <= 0) or np.any(lower_val <= 0):
        raise ParamgeoError("saddle_to_saddle: the thresholds upper and lower must be positive "
                            "(inf where a sign is never reached)")
    s, beta, t = np.zeros(m), np.zeros(m), 0.0
    times, saddles, duals, grads, losses = [], [], [], [], []
    converged = False
    for _ in range(max_saddles):
        g = np.asarray(loss.grad(beta), float)
        times.append(t)
        saddles.append(beta.copy())
        duals.append(s.copy())
        grads.append(g.copy())
        losses.append(float(loss.value(beta)))
        if np.max(np.abs(g)) <= tol * max(1.0, float(np.max(np.abs(loss.grad(np.zeros(m)))))):
            converged = True
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where((g < 0) & (s < upper - 1e-13), (upper - s) / -g, np.inf)
            down = np.where((g > 0) & (s > -lower_val + 1e-13), (s + lower_val) / g, np.inf)
        dt = float(min(up.min(), down.min()))
        if not np.isfinite(dt):
            break
        t += dt
        s = s - dt * g
        s = np.where(np.abs(s - upper) < 1e-11 * upper, upper, s)
        s = np.where(np.abs(s + lower_val) < 1e-11 * lower_val, -lower_val, s)
        free_hi = np.where(s >= upper, np.inf, 0.0)
        free_lo = np.where(s <= -lower_val, -np.inf, 0.0)
        beta = _constrained_min(loss, free_lo, free_hi)
    def _out(v):
        return float(v[0]) if np.all(v == v[0]) else v

    return SaddleSequence(times=np.array(times), saddles=np.array(saddles), duals=np.array(duals),
                          gradients=np.array(grads), losses=np.array(losses), upper=_out(upper),
                          lower=_out(lower_val), converged=converged)


def jump_times(times: ArrayLike, losses: ArrayLike,
               plateau_losses: Sequence[float]) -> NDArray[np.float64]:
    """Times at which a recorded loss curve crosses the midpoints between consecutive plateau
    losses (the jump k -> k+1 is dated where the loss passes (L_k + L_{k+1}) / 2)."""
    times, losses = np.asarray(times, float), np.asarray(losses, float)
    out = []
    for a, b in zip(plateau_losses[:-1], plateau_losses[1:]):
        level = 0.5 * (a + b)
        idx = np.flatnonzero(losses <= level)
        if not len(idx) or idx[0] == 0:
            out.append(float("nan"))
            continue
        i = idx[0]
        t0, t1, l0, l1 = times[i - 1], times[i], losses[i - 1], losses[i]
        out.append(float(t0 + (level - l0) * (t1 - t0) / (l1 - l0)) if l1 != l0 else float(t1))
    return np.array(out)



@dataclasses.dataclass(frozen=True, kw_only=True)
class VanishingInitLimit(Result):
    """The alpha -> 0 limit of gradient flow of a diagonal network on X beta = y.

    ``sequence``: the saddle-to-saddle recursion (Algorithm 1) with the thresholds of the
    potential's limit, in the time t / ``time_scale``; ``beta_algorithm`` its end point;
    ``beta_modified_l1``: argmin sum_i upper_i beta_i^+ + lower_i beta_i^- s.t. X beta = y
    (linear programming); ``distance`` = |beta_algorithm - beta_modified_l1|_inf.
    """

    alpha: float
    time_scale: float
    upper: np.ndarray
    lower: np.ndarray
    sequence: SaddleSequence
    beta_algorithm: np.ndarray
    beta_modified_l1: np.ndarray
    distance: float

    def __str__(self):
        return "\n".join([
            f"VanishingInitLimit (thresholds from alpha = {self.alpha:g}, time t / "
            f"{self.time_scale:.4g})",
            f"  upper {np.unique(self.upper).tolist()}  lower {np.unique(self.lower).tolist()}",
            f"  {len(self.sequence.times)} saddles, "
            f"{'reaches' if self.sequence.converged else 'does not reach'} a minimiser",
            f"  |Algorithm 1 end - argmin modified l1|_inf   {self.distance:.3g}",
        ])


def vanishing_init_limit(param: Parameterization, X: ArrayLike, y: ArrayLike, alpha: float = 1e-6,
                         *, max_saddles: int = 200) -> VanishingInitLimit:
    """Algorithm 1 of Zhao, Wang, Yang, Bai, Zhang (2026) for a diagonal network whose mirror
    potential knows its vanishing-initialisation limit (``Potential.limit``: deep-diagonal at
    depth L >= 3, :mod:`paramgeo.mirror.separable`), and the modified l1 problem it converges to.

    From theta0 = init_at_scale(alpha) the mirror map is beta_i = (A_i - c mu_i)^(-k) -
    (B_i + c mu_i)^(-k) with A = T a, B = T b; in the time tau = t / T the dual variable
    s = mu / T = -int grad ell d tau stays in [-b_i / c, a_i / c] as T -> infinity and beta_i
    is zero inside, so the trajectory follows :func:`saddle_to_saddle` with upper = a / c,
    lower = b / c. Its end point minimises sum_i upper_i beta_i^+ + lower_i beta_i^-
    subject to X beta = y (the KKT conditions of that linear program are the end state of the
    recursion: s = X^T nu in the box, beta_i of the sign of the face it touches), which
    :func:`paramgeo.mirror.min_l1` solves independently.
    """
    from ..mirror import min_l1, mirror_potential

    pot = mirror_potential(param, param.init_at_scale(alpha))
    if pot.limit is None:
        raise ParamgeoError(
            f"{title(param.name, param.sizes)}: its mirror potential from init_at_scale({alpha:g}) "
            "declares no vanishing-initialisation limit (Potential.limit); Algorithm 1 is "
            "available for deep-diagonal at depth >= 3 (use saddle_to_saddle with thresholds "
            "1 for u * v)")
    upper, lower, T = pot.limit
    loss = LinearMeasurements(np.asarray(X, float), np.asarray(y, float))
    seq = saddle_to_saddle(loss, upper=upper, lower=lower, max_saddles=max_saddles)
    end = seq.saddles[-1]
    b1 = min_l1(X, y, upper=upper, lower=lower)
    return VanishingInitLimit(alpha=float(alpha), time_scale=float(T), upper=np.asarray(upper),
                              lower=np.asarray(lower), sequence=seq, beta_algorithm=end,
                              beta_modified_l1=b1, distance=float(np.abs(end - b1).max()))
