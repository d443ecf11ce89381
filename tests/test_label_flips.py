"""Early stopping under label flips (paramgeo.flows.label_flips), each quantity against an
independent route: the quadrature logistic risk against Monte Carlo, its one-dimensional
minimiser against a full d-dimensional minimisation, the ridge deterministic equivalent against
ridge regression on drawn samples, and the calibration ratio's limit at the optimum.

Covers: ``paramgeo.flows.label_flips``, ``paramgeo.flows.risk``.
"""

import numpy as np
import pytest
from scipy.optimize import minimize

from paramgeo.errors import ShapeError
from paramgeo.flows.label_flips import (
    calibration_path,
    logistic_optimum,
    logistic_risk,
    oracle_rate_theory,
    ridge_equivalent,
)
from paramgeo.flows.risk import GaussianMixture


def test_logistic_risk_against_monte_carlo():
    model = GaussianMixture.from_spectrum(6, "polynomial", 1.5, snr=2.0, flip=0.15, support=3)
    w = np.random.default_rng(0).standard_normal(6) + 0.5 * model.mean / model.cov
    X, y = model.sample(400_000, np.random.default_rng(1))
    losses = np.logaddexp(0, -y * (X @ w))
    se = losses.std() / np.sqrt(losses.size)
    assert abs(losses.mean() - logistic_risk(model, w)) < 4 * se


def test_optimum_on_the_bayes_line():
    model = GaussianMixture.from_spectrum(5, "exponential", 0.5, snr=2.0, flip=0.2, support=2)
    scale, best = logistic_optimum(model)
    bayes = model.mean / model.cov
    full = minimize(lambda w: float(logistic_risk(model, w)), np.full(5, 0.1), method="BFGS",
                    options={"gtol": 1e-10})
    assert full.fun == pytest.approx(best, abs=1e-9)
    assert np.allclose(full.x, scale * bayes, atol=1e-4 * np.linalg.norm(scale * bayes))
    with pytest.raises(ShapeError, match="flip rate in"):
        logistic_optimum(GaussianMixture(cov=np.ones(2), mean=np.ones(2), flip=0.0))


def test_calibration_without_square_root():
    model = GaussianMixture.from_spectrum(4, "polynomial", 1.0, snr=1.5, flip=0.1, support=2)
    scale, best = logistic_optimum(model)
    star = scale * model.mean / model.cov
    v = np.array([0.0, 0.0, 1.0, -1.0])
    ratios, roots = [], []
    for eps in (1e-2, 5e-3, 2.5e-3):
        w = star + eps * v
        e01, elog = model.excess_risk(w), logistic_risk(model, w) - best
        ratios.append(e01 / elog)
        roots.append(e01 / np.sqrt(elog))
    # both excesses are quadratic in eps: the ratio has a finite limit, E_01 / sqrt(L - L*) -> 0
    assert ratios[2] == pytest.approx(ratios[1], rel=0.02)
    assert roots[2] == pytest.approx(roots[1] / 2, rel=0.05)
    path = calibration_path(model, 200, steps=300, seed=0, records=20)
    assert np.all(path.excess01 <= path.constant * path.logistic_excess * (1 + 1e-12))
    assert np.isfinite(path.constant) and path.constant < 10 * max(ratios)


def test_ridge_equivalent_against_drawn_samples():
    model = GaussianMixture.from_spectrum(30, "polynomial", 1.5, snr=3.0, flip=0.1, support=5)
    N, ridges = 240, np.array([0.03, 0.1, 0.3])
    drawn = []
    for seed in range(24):
        X, y = model.sample(N, np.random.default_rng(seed))
        S, b = X.T @ X / N, 2 * X.T @ y / N
        drawn.append([model.excess_risk(np.linalg.solve(S + r * np.eye(30), b)) for r in ridges])
    drawn = np.array(drawn)
    se = drawn.std(0) / np.sqrt(len(drawn))
    predicted = ridge_equivalent(model, N, ridges)
    assert np.all(np.abs(drawn.mean(0) - predicted) < np.maximum(4 * se, 0.1 * predicted))


def test_rate_theory_parametric_limit():
    d, snr, eta = 40, 3.0, 0.1
    model = GaussianMixture.from_spectrum(d, "polynomial", 1.5, snr=snr, flip=eta, support=5)
    theory = oracle_rate_theory(model, [1e2, 1e4, 1e6, 1e8, 1e9], np.geomspace(1e-10, 1, 120))
    # the local rate climbs towards 1 (d fixed: the parametric d / N) and stays below it
    assert np.all(np.diff(theory.local_rates) > 0) and theory.local_rates[0] < 0.8
    # ridge -> 0: least squares, Sigma-angle^2 = (d - 1) sigma^2 / (N |Sigma^1/2 beta*|^2) and
    # excess = (1 - 2 eta) phi(snr) snr angle^2 / 2, so N excess tends to the closed form; the
    # plug-in margin also counts the spread along the signal: trace (I + a a^T)^-1, not d - 1
    sigma2 = 4 * (1 - (1 - 2 * eta) ** 2 * snr ** 2 / (1 + snr ** 2))
    signal = 4 * (1 - 2 * eta) ** 2 * snr ** 2 / (1 + snr ** 2) ** 2
    phi = np.exp(-snr ** 2 / 2) / np.sqrt(2 * np.pi)
    limit = (1 - 2 * eta) * phi * snr / 2 * (d - 1 + 1 / (1 + snr ** 2)) * sigma2 / signal
    assert theory.sizes[-1] * theory.predicted[-1] == pytest.approx(limit, rel=1e-3)  # 4e-4 left at N = 1e9
