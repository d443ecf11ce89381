"""Negative ridge and shifted GD (paramgeo.flows.negative_ridge) against independent routes: the
plane fit on exact power laws, the hold-out choice against shifted GD iterated by hand and
ridge solved by hand, the gain's ridge risk against a brute-force grid of penalties.

Covers: ``paramgeo.flows.negative_ridge``, ``paramgeo.flows.risk``.
"""

import numpy as np
import pytest

from paramgeo.errors import ShapeError
from paramgeo.flows.negative_ridge import (
    fit_plane,
    gain_over_spike,
    holdout_selection,
    risk_gain,
)
from paramgeo.flows.risk import SpikedModel, shifted_gd


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
