"""The deterministic equivalent of the spiked model's filter risks (the theory of the gain of
early-stopped negatively shifted GD over negative ridge, :mod:`paramgeo.flows.negative_ridge`).

The sample covariance X^T X / N of :class:`paramgeo.flows.risk.SpikedModel` (gamma = d / N > 1)
is replaced by its deterministic equivalent (:func:`spiked_spectrum`): the Marchenko-Pastur bulk,
the BBP outlier and its overlap with the spike, and e_1's spectral measure; every filter's
excess risk is then a functional of the filter (:func:`equivalent_risk`), minimised over ridge's
admissible penalties and shifted GD's (shift, stop) as the sample version does
(:func:`equivalent_filter_risks`). :func:`effective_penalty` is the ridge that a penalty puts on
the spike (the barrier: it cannot go below sigma^2 (sqrt(gamma) - 1)), :func:`gain_asymptote`
the gain's limit law.

References: Marchenko, Pastur (1967); Silverstein (1995); Baik, Ben Arous, Peche (2005); Paul
(2007); Benaych-Georges, Nadakuditi (2011); Dobriban, Wager (2018), "High-dimensional
asymptotics of prediction: ridge regression and classification".
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional, Sequence

import numpy as np

from ..errors import ShapeError
from ..results import Result
from .risk import gd_filter, mp_edges, ridge_filter, shifted_gd_filter


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpikedSpectrum(Result):
    """The deterministic equivalent of the sample covariance X^T X / N of the spiked model
    (gamma = d / N > 1, spike theta = ell sigma^2): the outlier eigenvalue and its squared
    overlap with e_1 (nan and 0 below the BBP threshold ell <= sqrt(gamma)), the e_1-weight of
    the null space, and quadrature nodes on the bulk [a, b] with the weights of the nonzero
    eigenvalues' law (``bulk_weights``, sum 1) and of e_1's spectral measure
    (``spike_weights``)."""

    gamma: float
    sigma2: float
    spike: float
    outlier: float
    overlap: float
    null_weight: float
    nodes: np.ndarray
    bulk_weights: np.ndarray
    spike_weights: np.ndarray

    def __str__(self):
        a, b = mp_edges(self.gamma, self.sigma2)
        return (f"spiked spectrum, gamma = {self.gamma:g}, spike {self.spike:g}:\n  outlier "
                f"{self.outlier:.4g}, overlap {self.overlap:.4f}, null weight "
                f"{self.null_weight:.4f}, bulk [{a:.3g}, {b:.3g}]")


def effective_penalty(lam: float, gamma: float, sigma2: float = 1.0) -> float:
    """kappa(lambda) = 1 / m(-lambda): the ridge that ridge lambda puts on the spike direction,
    the root kappa^2 - (lambda + sigma^2 (gamma - 1)) kappa - lambda sigma^2 = 0 of the
    Marchenko-Pastur equation lambda = kappa (1 - gamma sigma^2 / (kappa + sigma^2)),

        kappa = [lambda + sigma^2 (gamma - 1) + sqrt((lambda + sigma^2 (gamma - 1))^2
                 + 4 lambda sigma^2)] / 2,

    defined for lambda >= -a, a = sigma^2 (sqrt(gamma) - 1)^2 the lower edge (s_min), where it
    reaches its least value sigma^2 (sqrt(gamma) - 1); kappa(0) = sigma^2 (gamma - 1) (the
    implicit penalty). m is the Stieltjes transform of the nonzero eigenvalues' law (Silverstein
    1995; Dobriban, Wager 2018)."""
    c = lam + sigma2 * (gamma - 1.0)
    disc = c * c + 4.0 * lam * sigma2
    if disc < -1e-12 * max(c * c, sigma2 ** 2):
        raise ShapeError(f"effective penalty: lambda = {lam:g} is below the barrier -a = "
                         f"{-sigma2 * (math.sqrt(gamma) - 1) ** 2:g}")
    return 0.5 * (c + math.sqrt(max(disc, 0.0)))


def spiked_spectrum(gamma: float, spike: float, sigma2: float = 1.0,
                    nodes: int = 2000) -> SpikedSpectrum:
    """The spiked sample covariance's deterministic equivalent (gamma > 1, ell = spike / sigma^2).

    The resolvent is (S - z)^-1 ~ -(I + m(z) Sigma)^-1 / z with m the Stieltjes transform of
    the nonzero eigenvalues, z sigma^2 m^2 + (z + sigma^2 (1 - gamma)) m + 1 = 0, so e_1's
    spectral measure has the transform g(z) = -1 / (z (1 + sigma_1 m(z))), sigma_1 = sigma^2 +
    spike: an atom kappa / (kappa + sigma_1) at 0 (kappa = sigma^2 (gamma - 1)), a density
    Im g / pi on the bulk [sigma^2 (1 - sqrt gamma)^2, sigma^2 (1 + sqrt gamma)^2], and above
    the BBP threshold ell > sqrt(gamma) the outlier s = sigma^2 (1 + ell)(1 + gamma / ell) with
    the overlap (1 - gamma / ell^2) / (1 + gamma / ell) (Baik, Ben Arous, Peche 2005; Paul
    2007; Benaych-Georges, Nadakuditi 2011). Bulk nodes s = c + r cos(phi) at midpoints in
    phi (Gauss-Chebyshev: spectrally accurate for the square-root edges)."""
    if not gamma > 1.0:
        raise ShapeError(f"spiked spectrum: needs gamma = d / N > 1, got {gamma}")
    lo, hi = mp_edges(gamma, sigma2)
    phi = np.pi * (np.arange(int(nodes)) + 0.5) / int(nodes)
    s = 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos(phi)
    ds = 0.5 * (hi - lo) * np.sin(phi) * np.pi / int(nodes)
    disc = np.maximum(4.0 * s * sigma2 - (s + sigma2 * (1.0 - gamma)) ** 2, 0.0)
    m = (-(s + sigma2 * (1.0 - gamma)) + 1j * np.sqrt(disc)) / (2.0 * s * sigma2)
    sigma1 = sigma2 + spike
    g = -1.0 / (s * (1.0 + sigma1 * m))
    ell = spike / sigma2
    if ell > math.sqrt(gamma):
        outlier = sigma2 * (1 + ell) * (1 + gamma / ell)
        overlap = (1 - gamma / ell ** 2) / (1 + gamma / ell)
    else:
        outlier, overlap = float("nan"), 0.0
    kappa = sigma2 * (gamma - 1.0)
    return SpikedSpectrum(gamma=float(gamma), sigma2=float(sigma2), spike=float(spike),
                          outlier=outlier, overlap=overlap, null_weight=kappa / (kappa + sigma1),
                          nodes=s, bulk_weights=m.imag / np.pi * ds,
                          spike_weights=g.imag / np.pi * ds)


def equivalent_risk(spec: SpikedSpectrum, h: Callable[[np.ndarray], np.ndarray], N: float,
                    noise: float = 0.5, signal: float = 1.0) -> float:
    """Deterministic-equivalent excess risk of the filter estimator sum_j h(s_j)/s_j (v_j . b) v_j
    (b = X^T y / N, beta* = signal e_1, noise variance noise^2):

        R = signal^2 (sigma^2 E_2 + theta E_1^2) + (noise^2 / N) sum_j h_j^2 / s_j
            (sigma^2 + theta <v_j, e_1>^2),   E_k = int (1 - h)^k d mu_1,

    mu_1 = e_1's spectral measure (h = 0 on its null atom), the variance sum over the N nonzero
    eigenvalues: N - 1 in the bulk and the outlier (all N in the bulk below the BBP point);
    ``N = math.inf`` gives the proportional limit (the outlier's variance drops out)."""
    sigma2, theta = spec.sigma2, spec.spike
    with np.errstate(over="ignore", invalid="ignore"):
        hb = np.asarray(h(spec.nodes), float)
        e1 = spec.null_weight + np.sum((1 - hb) * spec.spike_weights)  # numpy: inf, no raise
        e2 = spec.null_weight + np.sum((1 - hb) ** 2 * spec.spike_weights)
        bulk_frac = 1.0 if spec.overlap == 0 else 1.0 - 1.0 / N  # N = inf: the limit
        var = sigma2 * bulk_frac * np.sum(hb ** 2 / spec.nodes * spec.bulk_weights)
        var += theta / N * np.sum(hb ** 2 / spec.nodes * spec.spike_weights)
        if spec.overlap > 0:
            so = spec.outlier
            ho = np.asarray(h(np.array([so])), float)[0]
            e1 += (1 - ho) * spec.overlap
            e2 += (1 - ho) ** 2 * spec.overlap
            var += ho ** 2 / (N * so) * (sigma2 + theta * spec.overlap)
        risk = signal ** 2 * (sigma2 * e2 + theta * e1 ** 2) + noise ** 2 * var
    return float(risk) if np.isfinite(risk) else float("inf")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EquivalentRisks(Result):
    """Deterministic-equivalent best risks at (gamma, spike, noise, N): ridge over its
    admissible penalties lambda > -a (``ridge_lambda`` the best, ``ridge_penalty`` its
    effective penalty kappa(lambda) on the spike, ``barrier_penalty`` = sigma^2 (sqrt(gamma) - 1)
    the least one), GD over its stop, shifted GD over (shift, stop), and ``gain`` =
    ridge / shifted."""

    gamma: float
    spike: float
    noise: float
    N: float
    ridge_risk: float
    ridge_lambda: float
    ridge_penalty: float
    barrier_penalty: float
    gd_risk: float
    shifted_risk: float
    shifted_shift: float
    shifted_steps: int
    gain: float

    def __str__(self):
        return (f"deterministic equivalent, gamma = {self.gamma:g}, spike {self.spike:g}, noise "
                f"{self.noise:g}, N = {self.N:g}:\n  ridge {self.ridge_risk:.4g} (lambda "
                f"{self.ridge_lambda:.3g}, effective penalty {self.ridge_penalty:.3g} >= "
                f"{self.barrier_penalty:.3g}), GD {self.gd_risk:.4g},\n  shifted GD "
                f"{self.shifted_risk:.4g} (shift {self.shifted_shift:.3g}, {self.shifted_steps} "
                f"steps); gain {self.gain:.3f}")


def equivalent_filter_risks(gamma: float, spike: float, noise: float = 0.5, N: float = math.inf,
                            sigma2: float = 1.0, steps: int = 1000,
                            shifts: Optional[Sequence[float]] = None, refine: bool = False,
                            nodes: int = 2000) -> EquivalentRisks:
    """:func:`equivalent_risk` minimised as :func:`paramgeo.flows.risk.spiked_filter_risks`
    minimises the sample risks: ridge over lambda in (-a, 10 s_max) (bounded search in
    log(lambda + a), a the lower MP edge, the limit of s_min), GD and shifted GD with step
    1 / s_max (s_max the outlier, or the upper edge below the BBP point) over the stops
    round(geomspace(1, steps, 80)) and the shifts linspace(0, 1.5 kappa, 31), kappa =
    sigma^2 (gamma - 1) - 2 sigma^2 / N. ``refine`` polishes the best shift between its grid
    neighbours at every stop (the best shifted-GD filter rather than the grid's)."""
    from scipy.optimize import minimize_scalar

    spec = spiked_spectrum(gamma, spike, sigma2, nodes)
    lo, hi = mp_edges(gamma, sigma2)
    s_max = spec.outlier if spec.overlap > 0 else hi
    lr = 1.0 / s_max

    def risk(h):
        return equivalent_risk(spec, h, N, noise)

    rid = minimize_scalar(lambda u: risk(lambda z: ridge_filter(z, -lo + math.exp(u))),
                          bounds=(math.log(lo) - 30.0, math.log(10 * s_max)), method="bounded")
    lam = -lo + math.exp(rid.x)
    ts = np.unique(np.round(np.geomspace(1, steps, 80)).astype(int))
    gd = min(risk(lambda z, t=t: gd_filter(z, t, lr)) for t in ts)
    kappa = sigma2 * (gamma - 1.0) - 2.0 * sigma2 / N
    grid = np.linspace(0.0, 1.5 * kappa, 31) if shifts is None else np.asarray(shifts, float)
    best = (math.inf, 0.0, 0)
    for t in ts:
        vals = [risk(lambda z, mu=mu: shifted_gd_filter(z, t, lr, mu)) for mu in grid]
        k = int(np.argmin(vals))
        cand = (vals[k], float(grid[k]), int(t))
        if refine and grid.size > 2:
            res = minimize_scalar(lambda mu: risk(lambda z: shifted_gd_filter(z, t, lr, mu)),
                                  bounds=(grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]),
                                  method="bounded", options={"xatol": 1e-10 * (1 + kappa)})
            if res.fun < cand[0]:
                cand = (float(res.fun), float(res.x), int(t))
        if cand[0] < best[0]:
            best = cand
    return EquivalentRisks(gamma=float(gamma), spike=float(spike), noise=float(noise),
                           N=float(N), ridge_risk=float(rid.fun), ridge_lambda=lam,
                           ridge_penalty=effective_penalty(lam, gamma, sigma2),
                           barrier_penalty=sigma2 * (math.sqrt(gamma) - 1.0), gd_risk=gd,
                           shifted_risk=best[0], shifted_shift=best[1], shifted_steps=best[2],
                           gain=float(rid.fun) / best[0])


def gain_asymptote(gamma: float, spike: float, noise: float = 0.5, sigma2: float = 1.0) -> float:
    """The gain's limit law 2 noise sqrt(spike / gamma) / sigma^2 = 2 (noise / sigma)
    sqrt(ell / gamma) (N -> inf, then ell = spike / sigma^2 -> inf at fixed gamma).

    Shifted GD stopped after O(1) steps of 1 / s_max leaves the bulk (h ~ t s / s_max) and
    cancels the spike's error on the outlier, so its risk tends to sigma^2 (1 - overlap) ~
    sigma^4 gamma / spike. Ridge's spike error is kappa(lambda) / (kappa(lambda) + sigma_1)
    (kappa(lambda) of :func:`effective_penalty`, >= sigma^2 (sqrt(gamma) - 1) on the admissible
    side) and its bulk variance noise^2 sigma^2 int s / (s + lambda)^2 dnu does not fall with
    the spike: with x = lambda / sigma^2 >> gamma the risk is sigma^2 (x^2 / ell + c gamma / x^2),
    c = noise^2 / sigma^2, least at x^4 = c gamma ell, 2 sigma noise sqrt(gamma / ell)."""
    return 2.0 * noise * math.sqrt(spike / gamma) / sigma2
