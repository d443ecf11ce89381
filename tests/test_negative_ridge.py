"""Negative ridge and shifted GD (paramgeo.flows.negative_ridge) against independent routes: the
plane fit on exact power laws, the hold-out choice against shifted GD iterated by hand and
ridge solved by hand, the gain's ridge risk against a brute-force grid of penalties; the
deterministic equivalent (paramgeo.flows.spiked_equivalent) against simulated spectra (the BBP
outlier, its overlap, e_1's null-space weight, the lower edge), against Monte Carlo risks of
fixed filters on drawn samples, against its closed forms (the effective penalty at 0 and at the
barrier, the Stieltjes identity for ridge's spike error, the interpolator's risk) and against
the gain's limit law; the gain check's jackknife against the ratio of seed means.

Covers: ``paramgeo.flows.negative_ridge``, ``paramgeo.flows.spiked_equivalent``,
``paramgeo.flows.risk``.
"""

import math


import numpy as np
import pytest

from paramgeo.errors import ShapeError
from paramgeo.flows.negative_ridge import (
    fit_plane,
    gain_check,
    gain_over_spike,
    holdout_selection,
    risk_gain,
)
from paramgeo.flows.risk import (
    SpikedModel,
    mp_edges,
    ridge_filter,
    shifted_gd,
    shifted_gd_filter,
    spiked_filter_risks,
)
from paramgeo.flows.spiked_equivalent import (
    effective_penalty,
    equivalent_filter_risks,
    equivalent_risk,
    gain_asymptote,
    spiked_spectrum,
)


def test_fit_plane_exact():
    d = np.array([100, 200, 400, 200, 400, 800.0])
    N = np.array([25, 25, 25, 50, 50, 50.0])
    p, pe, q, qe = fit_plane(d, N, 3.0 * d ** -0.4 * N ** 0.7)
    assert (p, q) == pytest.approx((-0.4, 0.7), abs=1e-12) and pe < 1e-10 and qe < 1e-10
    with pytest.raises(ShapeError, match="vary in both"):
        fit_plane([10, 20, 40, 80], [5, 10, 20, 40], [1, 2, 3, 4])


def test_holdout_against_hand_loops():
    model = SpikedModel(d=120, spike=20.0, noise=0.5)
    res = holdout_selection(model, 40, holdout=0.25, seed=3, steps=200)
    X, y = model.sample(40, np.random.default_rng(3))
    Xt, yt, Xh, yh = X[:30], y[:30], X[30:], y[30:]
    lr = 30 / np.linalg.norm(Xt, 2) ** 2

    def hold_and_risk(beta):
        return np.mean((Xh @ beta - yh) ** 2), model.risk(beta)

    chosen = hold_and_risk(shifted_gd(Xt, yt, res.stop, lr, res.shift))
    assert chosen[1] == pytest.approx(res.shifted_risk, rel=1e-8)
    oracle = hold_and_risk(shifted_gd(Xt, yt, res.oracle_stop, lr, res.oracle_shift))
    assert oracle[1] == pytest.approx(res.oracle_shifted_risk, rel=1e-8)
    assert chosen[0] <= oracle[0] + 1e-12 and res.shifted_transfer >= 1.0
    ridge = np.linalg.lstsq(Xt.T @ Xt / 30 + res.ridge_lambda * np.eye(120), Xt.T @ yt / 30,
                            rcond=None)[0]
    assert model.risk(ridge) == pytest.approx(res.ridge_risk, rel=1e-6)


def test_gain_rows_against_brute_force():
    sizes = [(60, 15), (120, 15), (120, 30), (240, 30)]
    gain = risk_gain(sizes, seeds=(0,), steps=300)
    model = SpikedModel(d=60, spike=20.0, noise=0.5)
    X, y = model.sample(15, np.random.default_rng(0))
    s = np.linalg.svd(X, compute_uv=False) ** 2 / 15
    grid = -s[-1] + np.geomspace(1e-6, 100, 2000)
    brute = min(model.risk(X.T @ np.linalg.solve(X @ X.T / 15 + lam * np.eye(15), y / 15))
                for lam in grid)
    assert gain.ridge[0] == pytest.approx(brute, rel=1e-3)
    assert np.all(gain.gain > 1) and np.all(gain.shifted <= gain.gd)


def test_gain_over_spike():
    res = gain_over_spike(60, 15, [5.0, 20.0, 80.0], seeds=(0,), steps=300)
    direct = SpikedModel(d=60, spike=20.0, noise=0.5)
    X, y = direct.sample(15, np.random.default_rng(0))
    lr = 15 / np.linalg.norm(X, 2) ** 2
    # the shifted risk is at most that of shifted GD iterated by hand at any (shift, stop) pair
    hand = min(direct.risk(shifted_gd(X, y, t, lr, mu)) for mu in (0.0, 1.0, 2.0)
               for t in (1, 3, 10))
    assert res.shifted[1] <= hand + 1e-12
    slope = np.polyfit(np.log(res.spikes), np.log(res.gain), 1)[0]
    assert res.fit.exponent == pytest.approx(slope, rel=1e-9)


def test_spectrum_against_simulated():
    d, N, spike = 2000, 250, 20.0
    spec = spiked_spectrum(d / N, spike)
    assert spec.bulk_weights.sum() == pytest.approx(1.0, abs=1e-6)
    assert spec.null_weight + spec.overlap + spec.spike_weights.sum() == pytest.approx(1.0,
                                                                                      abs=1e-6)
    model = SpikedModel(d=d, spike=spike)
    top, ov, null, low = [], [], [], []
    for seed in range(10):
        X, _ = model.sample(N, np.random.default_rng(seed))
        _, sv, Vt = np.linalg.svd(X, full_matrices=False)
        top.append(sv[0] ** 2 / N)
        ov.append(Vt[0, 0] ** 2)
        null.append(1.0 - Vt[:, 0] @ Vt[:, 0])
        low.append(sv[-1] ** 2 / N)
    # within 3 standard errors of the seeds' mean, plus 1% for the O(1 / N) bias
    for sample, pred in ((top, spec.outlier), (ov, spec.overlap), (null, spec.null_weight)):
        se = np.std(sample, ddof=1) / math.sqrt(len(sample))
        assert abs(np.mean(sample) - pred) < 3 * se + 0.01 * pred
    assert np.mean(low) == pytest.approx(mp_edges(d / N)[0], rel=0.05)
    # below the BBP point (ell = 2 < sqrt(8)) there is no outlier
    assert spiked_spectrum(8.0, 2.0).overlap == 0.0


def test_equivalent_risk_against_monte_carlo():
    d, N, spike = 1600, 200, 20.0
    spec = spiked_spectrum(d / N, spike)
    model = SpikedModel(d=d, spike=spike, noise=0.5)
    filters = [lambda s: ridge_filter(s, 1.0), lambda s: ridge_filter(s, -1.5),
               lambda s: shifted_gd_filter(s, 3, 1 / spec.outlier, 8.0)]
    risks = []
    for seed in range(30):
        X, y = model.sample(N, np.random.default_rng(seed))
        _, sv, Vt = np.linalg.svd(X, full_matrices=False)
        s = sv ** 2 / N
        proj = Vt @ (X.T @ y / N)
        risks.append([model.risk_in_rows(Vt, f(s) / s * proj) for f in filters])
    risks = np.array(risks)
    mean, se = risks.mean(axis=0), risks.std(axis=0, ddof=1) / math.sqrt(len(risks))
    for f, m, e in zip(filters, mean, se):
        assert abs(equivalent_risk(spec, f, N) - m) < 3 * e + 0.02 * m


def test_equivalent_closed_forms():
    gamma, spike, noise = 8.0, 20.0, 0.5
    lo = mp_edges(gamma)[0]
    assert effective_penalty(0.0, gamma) == pytest.approx(gamma - 1.0, rel=1e-12)
    assert effective_penalty(-lo, gamma) == pytest.approx(math.sqrt(gamma) - 1.0, rel=1e-6)
    with pytest.raises(ShapeError, match="barrier"):
        effective_penalty(-lo - 0.1, gamma)
    spec = spiked_spectrum(gamma, spike)
    # ridge's spike error int lambda / (s + lambda) d mu_1 = kappa / (kappa + sigma_1)
    for lam in (-2.5, -1.0, 0.5, 4.0):
        quad = (spec.null_weight + spec.overlap * lam / (spec.outlier + lam)
                + np.sum(spec.spike_weights * lam / (spec.nodes + lam)))
        kappa = effective_penalty(lam, gamma)
        assert quad == pytest.approx(kappa / (kappa + 1.0 + spike), rel=1e-6)
    # the interpolator (h = 1 on the nonzero eigenvalues) in the proportional limit
    w0 = spec.null_weight
    closed = w0 + spike * w0 ** 2 + noise ** 2 / (gamma - 1.0)
    assert equivalent_risk(spec, np.ones_like, math.inf, noise) == pytest.approx(closed,
                                                                                 rel=1e-6)


def test_gain_limit_law():
    gamma, spike = 8.0, 1e6
    res = equivalent_filter_risks(gamma, spike, 0.5, refine=True, nodes=400, steps=100)
    assert res.shifted_risk * spike / gamma == pytest.approx(1.0, rel=0.01)
    assert res.gain / gain_asymptote(gamma, spike, 0.5) == pytest.approx(1.0, rel=0.05)
    assert res.ridge_penalty >= res.barrier_penalty


def test_gain_check_jackknife():
    cases = [(60, 15, 5.0), (60, 15, 20.0), (60, 15, 80.0)]
    res = gain_check(cases, seeds=(0, 1, 2), steps=100)
    per = [[spiked_filter_risks(SpikedModel(d=60, spike=sp), 15, seed=s, steps=100)
            for sp in (5.0, 20.0, 80.0)] for s in (0, 1, 2)]
    ridge = np.mean([[r.ridge_risk for r in row] for row in per], axis=0)
    shifted = np.mean([[r.shifted_risk for r in row] for row in per], axis=0)
    assert res.gain == pytest.approx(ridge / shifted, rel=1e-12)
    slope = np.polyfit(np.log([5.0, 20.0, 80.0]), np.log(ridge / shifted), 1)[0]
    assert res.exponents["gain ~ spike^e, e"][0] == pytest.approx(slope, rel=1e-12)
    assert np.all(res.gain_error > 0) and np.all(res.predicted > 1)
