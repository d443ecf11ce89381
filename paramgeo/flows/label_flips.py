"""Early stopping under label flips: the rate theory gives for the oracle stop, the calibration
of logistic to 0-1 excess risk, and the interpolator's gap (Gaussian mixtures of
:class:`paramgeo.flows.risk.GaussianMixture`).

Rate theory (:func:`oracle_rate_theory`). In its early phase logistic GD from w_0 = 0 is GD on
the quadratic log 2 - y u / 2 + u^2 / 8 (u = w . x), i.e. least squares of t = 2 y on x, and a
GD stop at time tau acts like a ridge penalty of about 1 / tau. The regression has
Sigma_x = E x x^T = Sigma + mu mu^T, target beta* = 2 (1 - 2 eta) Sigma_x^-1 mu (parallel to the
Bayes direction Sigma^-1 mu by Sherman-Morrison) and noise sigma^2 = 4 - beta*^T Sigma_x beta*.
The deterministic equivalent of ridge lambda (Hastie, Montanari, Rosset, Tibshirani 2022; Bach
2024) replaces it by an effective penalty kappa solving

    kappa - lambda = (kappa / N) tr(Sigma_x (Sigma_x + kappa)^-1),

with df2 = tr(Sigma_x^2 (Sigma_x + kappa)^-2): the estimator is beta_k = Sigma_x (Sigma_x +
kappa)^-1 beta* plus a centred fluctuation of covariance (s_eff^2 / N) (Sigma_x + kappa)^-1
Sigma_x (Sigma_x + kappa)^-1, s_eff^2 = (sigma^2 + kappa^2 beta*^T Sigma_x (Sigma_x + kappa)^-2
beta*) / (1 - df2 / N). The 0-1 risk depends on w only through the margin m = w . mu /
sqrt(w^T Sigma w), so the predicted excess is (1 - 2 eta) (Phi(-m) - Phi(-snr)) with
m = beta_k . mu / sqrt(beta_k^T Sigma beta_k + (s_eff^2 / N) tr(Sigma (Sigma_x + kappa)^-2
Sigma_x)) (:func:`ridge_equivalent`); its minimum over lambda is the predicted oracle excess.

Calibration (:func:`calibration_path`). The population logistic risk L(w) = (1 - eta)
E log(1 + e^-u) + eta E log(1 + e^u), u ~ N(w . mu, w^T Sigma w), is exact by Gauss-Hermite
quadrature (:func:`logistic_risk`); by the symmetry of the mixture about the Bayes direction its
minimiser is w* = c* Sigma^-1 mu (a one-dimensional problem, :func:`logistic_optimum`). Near w*
the 0-1 excess is quadratic in the angle and the logistic excess quadratic in w - w*, so
E_01(w) <= C (L(w) - L*) holds with a finite C (no square root), which the ratio along the run
measures.

References: Buna, Liu, Rebeschini, early stopping of logistic GD under label-flip noise (oracle
stop minimax in excess 0-1 risk, calibration without the square root, interpolators needing
exponentially more samples); Wu, Bartlett, Telgarsky, Yu (2025), "Benefits of early stopping in
gradient descent for overparameterized logistic regression"; Hastie, Montanari, Rosset,
Tibshirani (2022), "Surprises in high-dimensional ridgeless least squares interpolation".
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import ndtr

from ..errors import ShapeError
from ..results import Result
from .risk import logistic_gd
from .structure import PowerLaw, power_law_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .risk import GaussianMixture

_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(120)


def _margin_stats(model, w):
    w = np.asarray(w, float)
    return np.sum(w * model.mean, axis=-1), np.sum(w * w * model.cov, axis=-1)


def logistic_risk(model: GaussianMixture, w: ArrayLike) -> Any:
    """Exact population logistic risk L(w) = (1 - eta) E log(1 + e^-u) + eta E log(1 + e^u),
    u ~ N(w . mu, w^T Sigma w) (the margin given the clean label), by 120-node Gauss-Hermite
    quadrature; ``w`` of shape (..., d)."""
    m, v = _margin_stats(model, w)
    u = np.asarray(m)[..., None] + np.sqrt(2 * np.asarray(v))[..., None] * _NODES
    loss = (1 - model.flip) * np.logaddexp(0, -u) + model.flip * np.logaddexp(0, u)
    return loss @ _WEIGHTS / math.sqrt(math.pi)


def logistic_optimum(model: GaussianMixture) -> tuple[float, float]:
    """(c*, L*): the population logistic minimiser w* = c* Sigma^-1 mu and its risk.

    In whitened coordinates the mixture is symmetric about a = Sigma^-1/2 mu, so the gradient
    vanishes across a at every multiple of it and, L being convex, the minimiser is on that line:
    with w = c Sigma^-1 mu, m = c snr^2 and v = c^2 snr^2. Needs flip > 0 (without flips the
    infimum 0 is not attained)."""
    if model.flip <= 0:
        raise ShapeError("logistic optimum: with flip = 0 the logistic risk has no minimiser "
                         "(it tends to 0 as |w| grows); give a flip rate in (0, 1/2)")
    bayes = model.mean / model.cov
    snr = math.sqrt(float(bayes @ model.mean))
    res = minimize_scalar(lambda a: float(logistic_risk(model, a / snr * bayes)),
                          bounds=(1e-6, 60.0), method="bounded", options={"xatol": 1e-10})
    return float(res.x / snr), float(res.fun)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CalibrationPath(Result):
    """Logistic GD on N samples: at each recorded step the exact 0-1 excess ``excess01`` and
    logistic excess ``logistic_excess`` L(w_t) - L*, their ratio ``ratio`` and its sup over the
    run ``constant`` (the C of E_01 <= C (L - L*)); ``sqrt_ratio`` E_01 / sqrt(L - L*) (the
    generic calibration's scale)."""

    N: int
    steps: np.ndarray
    excess01: np.ndarray
    logistic_excess: np.ndarray
    ratio: np.ndarray
    sqrt_ratio: np.ndarray
    constant: float
    optimum_scale: float

    def __str__(self):
        i = int(np.argmin(self.excess01))
        return (f"calibration along logistic GD (N = {self.N}): E_01 <= C (L - L*) with "
                f"C = {self.constant:.4g} over {self.steps.size} recorded steps\n"
                f"  at the oracle step {int(self.steps[i])}: E_01 = {self.excess01[i]:.3g}, "
                f"L - L* = {self.logistic_excess[i]:.3g}, ratio {self.ratio[i]:.3g}, "
                f"E_01 / sqrt(L - L*) = {self.sqrt_ratio[i]:.3g}")


def calibration_path(model: GaussianMixture, N: int, steps: int = 2000, seed: int = 0,
                     records: int = 60, lr: Optional[float] = None) -> CalibrationPath:
    """Logistic GD (:func:`paramgeo.flows.risk.logistic_gd`) on N samples of ``model`` with the
    exact 0-1 excess R(w_t) - R_B and logistic excess L(w_t) - L* at each recorded step."""
    X, y = model.sample(N, np.random.default_rng(seed))
    record, W = logistic_gd(X, y, steps, lr, records)
    scale, best = logistic_optimum(model)
    e01 = model.excess_risk(W)
    elog = logistic_risk(model, W) - best
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(elog > 0, e01 / elog, np.nan)
        sqrt_ratio = np.where(elog > 0, e01 / np.sqrt(np.maximum(elog, 0)), np.nan)
    return CalibrationPath(N=int(N), steps=record, excess01=e01, logistic_excess=elog, ratio=ratio, sqrt_ratio=sqrt_ratio,
                           constant=float(np.nanmax(ratio)), optimum_scale=scale)


def ridge_equivalent(model: GaussianMixture, N: int, ridges: ArrayLike) -> NDArray[np.float64]:
    """Predicted excess 0-1 risk of ridge regression of 2 y on x with penalty lambda (each of
    ``ridges``) on N samples, by the deterministic equivalent of the module docstring; the
    stand-in for logistic GD stopped at time 1 / lambda. Returns an array like ``ridges``, nan
    where df2 >= N (the equivalent does not apply)."""
    lam, mu, eta = model.cov, model.mean, model.flip
    sx = np.diag(lam) + np.outer(mu, mu)
    e, V = np.linalg.eigh(sx)
    target = 2 * (1 - 2 * eta) * np.linalg.solve(sx, mu)
    sigma2 = 4.0 - float(target @ sx @ target)
    tc, mc = V.T @ target, V.T @ mu
    sc = V.T @ (lam[:, None] * V)
    snr = math.sqrt(float(mu @ (mu / lam)))
    out = []
    for ridge in np.atleast_1d(np.asarray(ridges, float)):
        if ridge <= 0:
            raise ShapeError(f"ridge equivalent: penalty {ridge:g} must be positive")
        kappa = brentq(lambda k: k - ridge - k / N * np.sum(e / (e + k)), ridge,
                       ridge + np.sum(e) / N + 1.0, xtol=1e-14 * ridge)
        df2 = float(np.sum(e ** 2 / (e + kappa) ** 2))
        if df2 >= N:  # outside the equivalent's range (more effective parameters than samples)
            out.append(np.nan)
            continue
        bias = kappa ** 2 * float(np.sum(e * tc ** 2 / (e + kappa) ** 2))
        s_eff = (sigma2 + bias) / (1 - df2 / N)
        bk = e / (e + kappa) * tc
        spread = s_eff / N * float(np.sum(np.diag(sc) * e / (e + kappa) ** 2))
        margin = float(bk @ mc) / math.sqrt(float(bk @ sc @ bk) + spread)
        out.append((1 - 2 * eta) * (ndtr(-margin) - ndtr(-snr)))
    return np.array(out).reshape(np.shape(ridges))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RateTheory(Result):
    """Predicted oracle excess 0-1 risk per sample size (``predicted``, the minimum of
    :func:`ridge_equivalent` over ``ridges``), the penalty reaching it (``best_ridge``), the
    power law fitted to it over ``sizes`` and the local slopes d log excess / d log N between
    neighbouring sizes."""

    sizes: np.ndarray
    predicted: np.ndarray
    best_ridge: np.ndarray
    rate: PowerLaw
    local_rates: np.ndarray

    def __str__(self):
        lines = [f"{'N':>8} {'predicted oracle excess':>24} {'ridge':>10}"]
        for n, p, r in zip(self.sizes, self.predicted, self.best_ridge):
            lines.append(f"{int(n):8d} {p:24.4g} {r:10.3g}")
        lines.append(f"predicted oracle excess ~ N^-{self.rate.exponent:.3f} "
                     f"(local rates {', '.join(f'{x:.2f}' for x in self.local_rates)})")
        return "\n".join(lines)


def oracle_rate_theory(model: GaussianMixture, sizes: Sequence[int],
                       ridges: Optional[ArrayLike] = None) -> RateTheory:
    """The rate theory for the oracle-stopped excess: :func:`ridge_equivalent` minimised over a
    log grid of penalties (default 1e-9..1e4, 200 points) for each N in ``sizes``, and the power
    law N^-rate fitted to it (the slope least squares gives; compare with
    :func:`paramgeo.flows.risk.excess_risk_rates` over the same sizes)."""
    sizes = np.asarray(sorted(int(n) for n in sizes))
    ridges = np.geomspace(1e-9, 1e4, 200) if ridges is None else np.asarray(ridges, float)
    best, where = [], []
    for n in sizes:
        values = ridge_equivalent(model, n, ridges)
        if not np.any(np.isfinite(values)):
            raise ShapeError(f"rate theory: no penalty in the grid is in the equivalent's range "
                             f"at N = {n}; give larger ridges")
        k = int(np.nanargmin(values))
        best.append(float(values[k]))
        where.append(float(ridges[k]))
    best = np.array(best)
    local = -np.diff(np.log(best)) / np.diff(np.log(sizes))
    return RateTheory(sizes=sizes, predicted=best, best_ridge=np.array(where),
                      rate=power_law_fit(sizes, best, sizes[0], sizes[-1]), local_rates=local)
