"""Negative ridge against early-stopped negatively shifted GD in the spike-plus-flat model
(:class:`paramgeo.flows.risk.SpikedModel`): the risk gain over sizes (d, N) with fitted exponents, and
the hold-out selection of (shift, stop) with its transfer measured.

Risk gain (:func:`risk_gain`). On each sample :func:`paramgeo.flows.risk.spiked_filter_risks` gives
the best risk of ridge over its admissible penalties lambda > -s_min (the pole below the
smallest nonzero eigenvalue of X^T X / N), of GD over its stop, and of shifted GD over its
shift and stop. The gain is G = R_ridge / R_shifted (mean risks over seeds); over a grid of
(d, N) with d > N the plane log G = c + p log d + q log N is fitted by least squares, with
standard errors: G ~ d^p N^q.

Over the spike strength theta at fixed (d, N) (:func:`gain_over_spike`) the gain is fitted as
G ~ theta^p (least squares in log-log).

Hold-out transfer (:func:`holdout_selection`). A fraction of the sample is held out; the
estimator beta(mu, t) of shifted GD (filter s (1 - (1 - eta (s - mu))^t) / (s - mu)) on the rest
is computed for every (shift, stop) on the grid, and the pair with the least hold-out squared
error (1/n) |X_h beta - y_h|^2 is chosen; its population risk is set beside the oracle pair's
(least population risk on the same training sample): the transfer ratio R(selected) /
R(oracle) >= 1. The same is done for ridge over admissible penalties.

Theory against measurement (:func:`gain_check`). The measured gains at each (d, N, spike), with
jackknife errors over seeds, beside the deterministic equivalent's
(:func:`paramgeo.flows.spiked_equivalent.equivalent_filter_risks`) at the same (gamma, N) and
in the proportional limit, and the fitted exponents of both.

References: Kobak, Lomond, Sanchez (2020), "The optimal ridge penalty for real-world
high-dimensional data can be zero or negative due to the implicit ridge regularization";
early-stopped negatively shifted GD and its Marchenko-Pastur barrier (risk improvement over
every admissible endpoint, hold-out transfer).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np

from ..errors import ShapeError
from ..results import Result
from .risk import SpikedModel, ridge_filter, shifted_gd_filter, spiked_filter_risks
from .spiked_equivalent import equivalent_filter_risks
from .structure import PowerLaw, power_law_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


@dataclasses.dataclass(frozen=True, kw_only=True)
class RiskGain(Result):
    """Mean best risks over seeds per (d, N) (``ridge``, ``gd``, ``shifted``), the gain
    R_ridge / R_shifted, and the fitted plane log gain = c + p log d + q log N (``p``, ``q``
    with standard errors ``p_error``, ``q_error``)."""

    d: np.ndarray
    N: np.ndarray
    ridge: np.ndarray
    gd: np.ndarray
    shifted: np.ndarray
    gain: np.ndarray
    p: float
    p_error: float
    q: float
    q_error: float

    def __str__(self):
        lines = [f"{'d':>6} {'N':>5} {'ridge':>9} {'GD':>9} {'shifted GD':>11} {'gain':>7}"]
        for row in zip(self.d, self.N, self.ridge, self.gd, self.shifted, self.gain):
            lines.append("{:6d} {:5d} {:9.4g} {:9.4g} {:11.4g} {:7.3g}".format(
                int(row[0]), int(row[1]), *row[2:]))
        lines.append(f"gain ~ d^{self.p:.3f} (+- {self.p_error:.3f}) "
                     f"N^{self.q:.3f} (+- {self.q_error:.3f})")
        return "\n".join(lines)


def fit_plane(d: ArrayLike, N: ArrayLike, values: ArrayLike) -> tuple[float, float, float, float]:
    """(p, p_error, q, q_error): least squares of log values = c + p log d + q log N with the
    standard errors sqrt(diag(s^2 (A^T A)^-1)), s^2 the residual variance (needs 4 points)."""
    d, N, values = (np.asarray(a, float) for a in (d, N, values))
    if values.size < 4 or np.any(values <= 0):
        raise ShapeError(f"plane fit: needs at least 4 positive values, got {values.size}")
    A = np.column_stack([np.ones_like(d), np.log(d), np.log(N)])
    if np.linalg.matrix_rank(A) < 3:
        raise ShapeError("plane fit: the sizes must vary in both d and N, not along one line")
    coef, *_ = np.linalg.lstsq(A, np.log(values), rcond=None)
    resid = np.log(values) - A @ coef
    cov = (resid @ resid / max(values.size - 3, 1)) * np.linalg.inv(A.T @ A)
    return float(coef[1]), math.sqrt(cov[1, 1]), float(coef[2]), math.sqrt(cov[2, 2])


def risk_gain(sizes: Sequence[tuple[int, int]], spike: float = 20.0, noise: float = 0.5,
              seeds: Sequence[int] = (0, 1, 2), steps: int = 1000,
              progress: Optional[Callable[[int, int], None]] = None) -> RiskGain:
    """The best risks of ridge, GD and shifted GD (:func:`paramgeo.flows.risk.spiked_filter_risks`)
    for every (d, N) in ``sizes`` (pairs with d > N), mean over ``seeds``, and the fitted gain
    exponents."""
    rows = []
    sizes = [(int(d), int(n)) for d, n in sizes]
    for i, (d, n) in enumerate(sizes):
        model = SpikedModel(d=d, spike=spike, noise=noise)
        rs = [spiked_filter_risks(model, n, seed=s, steps=steps) for s in seeds]
        rows.append([d, n] + [float(np.mean([getattr(r, f) for r in rs]))
                              for f in ("ridge_risk", "gd_risk", "shifted_risk")])
        if progress is not None:
            progress(i + 1, len(sizes))
    rows = np.array(rows)
    gain = rows[:, 2] / rows[:, 4]
    p, p_error, q, q_error = fit_plane(rows[:, 0], rows[:, 1], gain)
    return RiskGain(d=rows[:, 0].astype(int), N=rows[:, 1].astype(int), ridge=rows[:, 2],
                    gd=rows[:, 3], shifted=rows[:, 4], gain=gain, p=p, p_error=p_error, q=q,
                    q_error=q_error)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpikeGain(Result):
    """Mean best risks of ridge and shifted GD per spike strength at fixed (d, N), their ratio
    ``gain`` and the fitted power law gain ~ spike^exponent (``fit``: a
    :class:`paramgeo.flows.structure.PowerLaw` of 1 / gain, so ``exponent`` is the gain's growth)."""

    d: int
    N: int
    spikes: np.ndarray
    ridge: np.ndarray
    shifted: np.ndarray
    gain: np.ndarray
    fit: PowerLaw

    def __str__(self):
        rows = ", ".join(f"{g:.3g} at {s:g}" for s, g in zip(self.spikes, self.gain))
        return (f"gain of shifted GD over ridge, d = {self.d}, N = {self.N}: {rows}; gain ~ "
                f"spike^{self.fit.exponent:.3f} (+- {self.fit.error:.3f})")


def gain_over_spike(d: int, N: int, spikes: Sequence[float], noise: float = 0.5,
                    seeds: Sequence[int] = (0, 1, 2), steps: int = 1000) -> SpikeGain:
    """:func:`paramgeo.flows.risk.spiked_filter_risks` at one (d, N) for each spike strength, mean
    over ``seeds``, and the power law of the gain R_ridge / R_shifted over the spike."""
    rows = []
    for spike in spikes:
        rs = [spiked_filter_risks(SpikedModel(d=int(d), spike=float(spike), noise=noise),
                                  int(N), seed=s, steps=steps) for s in seeds]
        rows.append([np.mean([r.ridge_risk for r in rs]), np.mean([r.shifted_risk for r in rs])])
    rows, spikes = np.array(rows), np.asarray(spikes, float)
    gain = rows[:, 0] / rows[:, 1]
    return SpikeGain(d=int(d), N=int(N), spikes=spikes, ridge=rows[:, 0], shifted=rows[:, 1], gain=gain,
                     fit=power_law_fit(spikes, 1.0 / gain, spikes.min(), spikes.max()))


@dataclasses.dataclass(frozen=True, kw_only=True)
class HoldoutTransfer(Result):
    """Hold-out selection on one sample: the chosen (shift, stop) and ridge penalty, their
    population risks beside the oracle choices' on the same training sample, and the transfer
    ratios R(selected) / R(oracle)."""

    d: int
    n_train: int
    n_holdout: int
    shift: float
    stop: int
    shifted_risk: float
    oracle_shift: float
    oracle_stop: int
    oracle_shifted_risk: float
    ridge_lambda: float
    ridge_risk: float
    oracle_ridge_risk: float

    @property
    def shifted_transfer(self):
        return self.shifted_risk / self.oracle_shifted_risk

    @property
    def ridge_transfer(self):
        return self.ridge_risk / self.oracle_ridge_risk

    def __str__(self):
        return (f"hold-out selection, d = {self.d}, {self.n_train} train / {self.n_holdout} "
                f"held out\n  shifted GD: chosen shift {self.shift:.3g}, stop {self.stop}: "
                f"risk {self.shifted_risk:.4g} (oracle {self.oracle_shifted_risk:.4g} at "
                f"{self.oracle_shift:.3g}, {self.oracle_stop}; transfer "
                f"{self.shifted_transfer:.3f})\n  ridge: chosen lambda {self.ridge_lambda:.3g}: "
                f"risk {self.ridge_risk:.4g} (oracle {self.oracle_ridge_risk:.4g}; transfer "
                f"{self.ridge_transfer:.3f})")


def holdout_selection(model: SpikedModel, N: int, holdout: float = 0.25, seed: int = 0,
                      steps: int = 1000, shifts: Optional[Sequence[float]] = None,
                      ridges: int = 80) -> HoldoutTransfer:
    """Draw N samples of ``model``, hold out round(holdout N), choose (shift, stop) of shifted
    GD (step 1 / s_max, stops log-spaced to ``steps``, shifts default 0..1.5 kappa, 31 values)
    and the ridge penalty (``ridges`` values log-spaced above -s_min) by hold-out squared error,
    and measure their population risks against the oracle choices."""
    n_hold = int(round(holdout * N))
    n_train = int(N) - n_hold
    if n_hold < 2 or n_train < 2 or model.d <= n_train:
        raise ShapeError(f"hold-out: {n_train} train and {n_hold} held-out samples with d = "
                         f"{model.d}; need both >= 2 and d > the training size")
    X, y = model.sample(N, np.random.default_rng(seed))
    Xt, yt, Xh, yh = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    _, sv, Vt = np.linalg.svd(Xt, full_matrices=False)
    s = sv ** 2 / n_train
    proj = Vt @ (Xt.T @ yt / n_train)
    hold = Xh @ Vt.T
    lr = 1.0 / float(s[0])
    kappa = model.implicit_penalty(n_train)
    shifts = np.linspace(0.0, 1.5 * kappa, 31) if shifts is None else np.asarray(shifts)
    stops = np.unique(np.round(np.geomspace(1, steps, 80)).astype(int))

    def scores(h):
        c = h / s * proj
        if not np.all(np.isfinite(c)):
            return np.inf, np.inf
        return float(np.mean((hold @ c - yh) ** 2)), model.risk_in_rows(Vt, c)

    shifted = []
    with np.errstate(over="ignore", invalid="ignore"):  # shifts past s_min diverge late
        for mu in shifts:
            for t in stops:
                shifted.append((*scores(shifted_gd_filter(s, t, lr, mu)), float(mu), int(t)))
    chosen = min(shifted, key=lambda r: r[0])
    oracle = min(shifted, key=lambda r: r[1])
    lams = -s[-1] + np.geomspace(1e-4 * s[-1], 10 * s[0], int(ridges))
    ridge = [(*scores(ridge_filter(s, lam)), float(lam)) for lam in lams]
    rc = min(ridge, key=lambda r: r[0])
    ro = min(ridge, key=lambda r: r[1])
    return HoldoutTransfer(d=model.d, n_train=n_train, n_holdout=n_hold, shift=chosen[2], stop=chosen[3], shifted_risk=chosen[1],
                           oracle_shift=oracle[2], oracle_stop=oracle[3], oracle_shifted_risk=oracle[1], ridge_lambda=rc[2], ridge_risk=rc[1], oracle_ridge_risk=ro[1])


def _jackknife(per_seed: np.ndarray, stat: Callable[[np.ndarray], np.ndarray]):
    """stat of the seed means and its jackknife standard error over the seeds (axis 0)."""
    n = per_seed.shape[0]
    full = np.asarray(stat(per_seed.mean(axis=0)), float)
    if n < 2:
        return full, np.full_like(full, np.nan)
    loo = np.array([stat(np.delete(per_seed, i, axis=0).mean(axis=0)) for i in range(n)])
    return full, np.sqrt((n - 1) / n * np.sum((loo - loo.mean(axis=0)) ** 2, axis=0))


@dataclasses.dataclass(frozen=True, kw_only=True)
class GainCheck(Result):
    """Measured gains R_ridge / R_shifted (ratio of seed means, jackknife errors) at each
    (d, N, spike) beside the deterministic equivalent's at the same (gamma, spike, noise, N)
    (``predicted``) and in the proportional limit (``limit``, N = inf); the fitted exponents of
    the gain over the spike (``spike_exponent``: one (d, N), several spikes) or over the sizes
    (``p``, ``q``: gain ~ d^p N^q at one spike), measured (jackknife errors) and predicted."""

    d: np.ndarray
    N: np.ndarray
    spikes: np.ndarray
    seeds: int
    ridge: np.ndarray
    ridge_error: np.ndarray
    shifted: np.ndarray
    shifted_error: np.ndarray
    gain: np.ndarray
    gain_error: np.ndarray
    predicted_ridge: np.ndarray
    predicted_shifted: np.ndarray
    predicted: np.ndarray
    limit: np.ndarray
    exponents: dict

    def __str__(self):
        lines = [f"{'d':>5} {'N':>4} {'spike':>6} {'ridge':>15} {'shifted GD':>15} "
                 f"{'gain':>13} {'predicted':>9} {'limit':>6}"]
        for i in range(self.gain.size):
            lines.append(
                f"{self.d[i]:5d} {self.N[i]:4d} {self.spikes[i]:6g} {self.ridge[i]:7.4f} +- "
                f"{self.ridge_error[i]:.4f} {self.shifted[i]:7.4f} +- {self.shifted_error[i]:.4f} "
                f"{self.gain[i]:5.3f} +- {self.gain_error[i]:.3f} {self.predicted[i]:9.3f} "
                f"{self.limit[i]:6.3f}")
        for name, (val, err, pred, lim) in self.exponents.items():
            lines.append(f"{name}: measured {val:.3f} +- {err:.3f}, predicted {pred:.3f} "
                         f"(limit N = inf: {lim:.3f})")
        lines.append(f"({self.seeds} seeds)")
        return "\n".join(lines)


def gain_check(cases: Sequence[tuple[int, int, float]], noise: float = 0.5,
               seeds: Sequence[int] = tuple(range(12)), steps: int = 1000,
               fit: str = "spike") -> GainCheck:
    """Monte Carlo gains (:func:`paramgeo.flows.risk.spiked_filter_risks` per seed) at each
    (d, N, spike) in ``cases`` against :func:`equivalent_filter_risks` at gamma = d / N and the
    same N (and N = inf). ``fit="spike"``: the slope of log gain on log spike (one (d, N));
    ``fit="sizes"``: the plane log gain = c + p log d + q log N (:func:`fit_plane`, one spike).
    Errors of the measured gains and exponents by the jackknife over seeds."""
    cases = [(int(d), int(n), float(sp)) for d, n, sp in cases]
    d, N, spikes = (np.array([c[k] for c in cases]) for k in range(3))
    per = np.array([[[getattr(r, f) for f in ("ridge_risk", "shifted_risk")]
                     for r in (spiked_filter_risks(SpikedModel(d=c[0], spike=c[2], noise=noise),
                                                   c[1], seed=s, steps=steps) for c in cases)]
                    for s in seeds])  # seeds x cases x 2
    pred = [equivalent_filter_risks(c[0] / c[1], c[2], noise, N=c[1], steps=steps) for c in cases]
    lim = [equivalent_filter_risks(c[0] / c[1], c[2], noise, steps=steps).gain for c in cases]
    pg = np.array([p.gain for p in pred])

    def ratio(m):
        return m[:, 0] / m[:, 1]

    if fit == "spike":
        def slope(g):
            return np.polyfit(np.log(spikes), np.log(g), 1)[:1]
        names = ["gain ~ spike^e, e"]
    elif fit == "sizes":
        def slope(g):
            p, _, q, _ = fit_plane(d, N, g)
            return np.array([p, q])
        names = ["gain ~ d^p N^q, p", "q"]
    else:
        raise ShapeError(f"gain check: fit is 'spike' or 'sizes', got {fit!r}")
    gain, gain_error = _jackknife(per, ratio)
    ex, ex_err = _jackknife(per, lambda m: slope(ratio(m)))
    exponents = {nm: (float(ex[i]), float(ex_err[i]), float(slope(pg)[i]),
                      float(slope(np.array(lim))[i])) for i, nm in enumerate(names)}
    means = per.mean(axis=0)
    errs = per.std(axis=0, ddof=1) / math.sqrt(len(seeds)) if len(seeds) > 1 else means * np.nan
    return GainCheck(d=d, N=N, spikes=spikes, seeds=len(seeds), ridge=means[:, 0],
                     ridge_error=errs[:, 0], shifted=means[:, 1], shifted_error=errs[:, 1],
                     gain=gain, gain_error=gain_error,
                     predicted_ridge=np.array([p.ridge_risk for p in pred]),
                     predicted_shifted=np.array([p.shifted_risk for p in pred]), predicted=pg,
                     limit=np.array(lim), exponents=exponents)
