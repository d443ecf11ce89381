"""Early-stage alignment of logistic gradient descent with the max-margin direction.

On linearly separable data (labels folded in: z_i = y_i x_i), gradient descent on the logistic
risk L(w) = (1/N) sum_i log(1 + exp(-z_i . w)) from w_0 = 0,

    w_{t+1} = w_t - eta grad L(w_t),    grad L(w) = -(1/N) sum_i sigma(-z_i . w) z_i,

has |w_t| -> infinity and u_t = w_t / |w_t| -> u_mm = w_hat / |w_hat|, the hard-margin SVM
direction (w_hat = argmin |w| s.t. z_i . w >= 1; Soudry, Hoffer, Nacson, Gunasekar, Srebro
2018, "The implicit bias of gradient descent on separable data"). The alignment error
delta_t = |u_t - u_mm| and the time T(delta) = min{t : delta_s <= delta for all s >= t} after
which it stays below delta (within the run; an early transient may cross u_mm) are what
this module measures (:func:`alignment_times`), with the law of T(delta) fitted
(:func:`fit_alignment_law`).

Why T(delta) grows like exp(c / delta): Soudry et al. (Theorem 3) write
w_t = w_hat log t + w_tilde + rho_t with rho_t -> 0, where on the support vectors S
(eta / N) exp(-z_n . w_tilde) = alpha_n, alpha the SVM dual (w_hat = sum_n alpha_n z_n). The
component of w_t across u_mm therefore tends to P w_tilde (P = I - u_mm u_mm^T) while the
norm grows like |w_hat| log t, so delta_t ~ |P w_tilde| / (|w_hat| log t) and

    log T(delta) ~ c / delta,   c = |P w_tilde| / |w_hat|.

P w_tilde is determined by the support vectors alone when they span R^d: z_n . w_tilde =
-log alpha_n + const (the constant moves w_tilde along w_hat only), so c is a closed form
(``predicted_c``) against which the fitted c is checked; when they do not span R^d the part of
w_tilde outside their span depends on the whole path and ``predicted_c`` is nan. A power law
T ~ delta^(-p) is fitted beside it; the residuals tell the two laws apart. The printed rate in
the early-alignment paper's abstract, O(exp(exp(-delta))), does not match this growth (it
decreases in 1/delta); the measured law is exp(c / delta).

The radial/tangential decomposition of each step Delta_t = w_{t+1} - w_t (the paper's radial and
tangential flows): r_t = Delta_t . u_t (norm growth) and tau_t = |(I - u_t u_t^T) Delta_t|
(direction change), with the exact identities |w_{t+1}|^2 = (|w_t| + r_t)^2 + tau_t^2 and
sin angle(u_t, u_{t+1}) = tau_t / |w_{t+1}|. Asymptotically the radial steps sum to
|w_hat| log(t2 / t1) between t1 and t2, and since the angle to u_mm falls like c / log t the
tangential steps decay like tau_t ~ |w_t| d/dt (c / log t) ~ c / (t log t).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..losses.predictor import Logistic, max_margin
from ..results import Result
from .online import _line_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlignmentRun(Result):
    """Logistic GD from w_0 = 0 on separable data, recorded at every step t = 1..steps.

    ``deltas`` / ``times``: T(delta) = min{t : |u_s - u_mm| <= delta for all steps s >= t of
    the run} (-1 where delta_steps > delta: not reached); ``error`` delta_t; ``norm`` |w_t|;
    ``radial`` r_t and ``tangential`` tau_t the components of w_{t+1} - w_t along and across
    u_t (index t - 1 for step t -> t + 1); ``direction`` u_mm; ``margin`` gamma = 1 / |w_hat|;
    ``predicted_c`` the closed-form constant of log T ~ c / delta (nan when the support vectors
    do not span R^d)."""

    lr: float
    steps: int
    deltas: np.ndarray
    times: np.ndarray
    error: np.ndarray
    norm: np.ndarray
    radial: np.ndarray
    tangential: np.ndarray
    direction: np.ndarray
    margin: float
    predicted_c: float

    def __str__(self):
        rows = [f"logistic GD, lr {self.lr:.4g}, {self.steps} steps; max-margin "
                f"direction {np.round(self.direction, 4).tolist()}, margin {self.margin:.4g}"]
        rows += [f"  T({d:g}) = {int(t) if t >= 0 else 'not reached'}"
                 for d, t in zip(self.deltas, self.times)]
        rows.append(f"  |w_T| = {self.norm[-1]:.4g}; closed-form c = {self.predicted_c:.4g}")
        return "\n".join(rows)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlignmentLaw(Result):
    """Fits of T(delta): log T = a + c / delta (``c``, ``c_error``, ``a``, residual rms
    ``exp_rms``) and log T = b + p log(1 / delta) (``p``, ``p_error``, ``power_rms``);
    ``law`` names the fit with the smaller residual; ``predicted_c`` as in AlignmentRun."""

    deltas: np.ndarray
    times: np.ndarray
    c: float
    c_error: float
    a: float
    exp_rms: float
    p: float
    p_error: float
    power_rms: float
    law: str
    predicted_c: float

    def __str__(self):
        return (f"T(delta) over delta = {self.deltas.tolist()}: {self.times.tolist()}\n"
                f"  exp law:   log T = {self.a:.3f} + ({self.c:.4f} +- {self.c_error:.4f}) / "
                f"delta, residual rms {self.exp_rms:.3g}"
                f" (closed-form c = {self.predicted_c:.4f})\n"
                f"  power law: T ~ delta^-({self.p:.3f} +- {self.p_error:.3f}), residual rms "
                f"{self.power_rms:.3g}\n  better fit: {self.law}")


def predicted_constant(X: ArrayLike, y: ArrayLike) -> float:
    """c = |P w_tilde| / |w_hat| of log T(delta) ~ c / delta (module docstring): w_tilde solves
    z_n . w_tilde = -log alpha_n on the support vectors S (z_n = y_n x_n, alpha the SVM dual),
    P = I - u_mm u_mm^T. nan unless the support vectors span R^d with alpha_n > 0."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    mm = max_margin(X, y)
    S = np.array(mm.support)
    Z = (y[:, None] * X)[S]
    alpha = mm.dual[S]
    if np.linalg.matrix_rank(Z) < X.shape[1] or np.any(alpha <= 0):
        return float("nan")
    w_tilde, *_ = np.linalg.lstsq(Z, -np.log(alpha), rcond=None)
    u = mm.direction
    return float(np.linalg.norm(w_tilde - (w_tilde @ u) * u) / np.linalg.norm(mm.w))


def alignment_times(X: ArrayLike, y: ArrayLike, deltas: Sequence[float], steps: int,
                    lr: Optional[float] = None) -> AlignmentRun:
    """Run logistic GD from 0 for ``steps`` steps and measure T(delta) for each delta in
    ``deltas``, recording the radial/tangential decomposition of every step (see the module
    docstring for the formulas). ``lr`` defaults to 4 / s_max, s_max the top eigenvalue of
    X^T X / N (the logistic risk is s_max / 4 smooth, so this is half the stability limit
    2 / (s_max / 4)). Reference: Soudry et al. 2018 for u_mm; the
    early-alignment paper for T(delta) and the radial/tangential split. Raises ShapeError for
    non-separable data, ParamgeoError for deltas outside (0, 2] or steps < 1."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ShapeError(f"X must be (N, d) and y (N,), got {X.shape} and {y.shape}")
    deltas = np.sort(np.asarray(deltas, float).ravel())[::-1]
    if deltas.size == 0 or np.any(deltas <= 0) or np.any(deltas > 2):
        raise ParamgeoError("deltas must be alignment errors in (0, 2] (|u - u_mm| <= 2)")
    steps = int(steps)
    if steps < 1:
        raise ParamgeoError(f"steps must be >= 1, got {steps}")
    mm = max_margin(X, y)
    u_mm = mm.direction
    N = X.shape[0]
    Z = y[:, None] * X
    if lr is None:
        lr = 4.0 / (np.linalg.eigvalsh(Z.T @ Z / N)[-1])
    w = np.zeros(X.shape[1])
    error, norm = np.empty(steps), np.empty(steps)
    radial, tangential = np.empty(steps - 1), np.empty(steps - 1)
    grad = Logistic(X, y).grad
    for t in range(steps):
        step = -lr * grad(w)
        if t > 0:  # decomposition of w_t -> w_{t+1} along u_t = w_t / |w_t|
            u = w / norm[t - 1]
            radial[t - 1] = step @ u
            tangential[t - 1] = np.linalg.norm(step - radial[t - 1] * u)
        w = w + step
        norm[t] = np.linalg.norm(w)
        error[t] = np.linalg.norm(w / norm[t] - u_mm)
    above = [np.flatnonzero(error > d) for d in deltas]
    times = np.array([-1 if a.size and a[-1] == steps - 1 else (a[-1] + 2 if a.size else 1)
                      for a in above])
    return AlignmentRun(lr=float(lr), steps=steps, deltas=deltas, times=times, error=error,
                        norm=norm, radial=radial, tangential=tangential, direction=u_mm,
                        margin=float(mm.margin), predicted_c=predicted_constant(X, y))


def fit_alignment_law(deltas: ArrayLike, times: ArrayLike,
                      predicted_c: float = float("nan")) -> AlignmentLaw:
    """Fit T(delta) measured at ``deltas`` (hitting times ``times`` >= 1) by least squares in
    log T: the exponential law log T = a + c / delta and the power law log T = b + p log(1/delta),
    each with the standard error of its slope and its residual rms; ``law`` is the one with
    the smaller rms. Needs >= 3 reached deltas (times of -1, not reached, are dropped)."""
    deltas, times = np.asarray(deltas, float).ravel(), np.asarray(times, float).ravel()
    if deltas.shape != times.shape:
        raise ShapeError("deltas and times must have the same length")
    keep = times >= 1
    deltas, times = deltas[keep], times[keep]
    if len(np.unique(deltas)) < 3 or np.any(deltas <= 0):
        raise ParamgeoError("fit_alignment_law needs hitting times at >= 3 distinct positive "
                            "deltas (increase steps or use larger deltas)")
    logT = np.log(times)
    rms = []
    fits = []
    for x in (1.0 / deltas, np.log(1.0 / deltas)):
        slope, err, icpt = _line_fit(x, logT)
        fits.append((slope, err, icpt))
        rms.append(float(math.sqrt(np.mean((logT - icpt - slope * x) ** 2))))
    (c, c_err, a), (p, p_err, _) = fits
    law = "exp(c / delta)" if rms[0] <= rms[1] else "delta^-p"
    return AlignmentLaw(deltas=deltas, times=times.astype(int), c=c, c_error=c_err, a=a,
                        exp_rms=rms[0], p=p, p_error=p_err, power_rms=rms[1], law=law,
                        predicted_c=float(predicted_c))
