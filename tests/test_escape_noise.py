"""The order-eta^2 (SGD-noise) drift of a tied |h| head and its escape, d -> infinity
(paramgeo.flows.escape_noise), checked three ways: the particle system against the closed-form
moment hierarchy, the closed form against a Monte Carlo of the exact per-sample step at
d = 256 and 512 (extrapolated in 1 / d), and the noisy plateau against short online-SGD runs
at two step sizes; and the finite-d drift of the overlap (its Edgeworth terms) against the
exact mean step at a run's state.

Covers: ``paramgeo.flows.escape_noise``.
"""

import math

import numpy as np
import pytest

from paramgeo import ParamgeoError
from paramgeo.flows import (
    MultiHeadTeacher,
    escape_rate,
    finite_d_drift,
    multihead_loss_and_grad,
    multihead_sgd,
    noise_drift,
    noisy_escape,
    particle_drift,
    residual_power,
    step_coefficients,
    teacher_labels,
)
from paramgeo.flows.escape_noise import _mp_quantiles


def _moments(f, nu, w, p):
    return w * np.sum(f ** p), w * np.sum(f ** p * nu)


def test_particle_system_is_the_moment_hierarchy():
    """The noise part of the particle drift, pushed to m_p and c_p (p <= 5), equals the closed
    form of noise_drift up to O(1 / n); its mean-flow part gives dM/dt exactly as
    A tau M - (16 eta / sqrt y) L_Q c_2."""
    y, eta, n = 0.5, 0.1, 2000
    w = y / n
    f = 0.8 * _mp_quantiles(y, n)
    nu = np.sin(2 * f) + 0.3 * f ** 2
    nu0 = -w * nu.sum() / (1 - y)
    drifts = [particle_drift(f, nu, nu0, eta, y, noise=z) for z in (True, False)]
    fd, nd = drifts[0][0] - drifts[1][0], drifts[0][1][:, 0] - drifts[1][1][:, 0]
    m = [_moments(f, nu, w, p)[0] for p in range(1, 6)]
    c = [_moments(f, nu, w, p)[1] for p in range(1, 6)]
    Q = m[1]
    dm, dc = noise_drift(m, c, eta, y, residual_power(Q))
    for p in range(1, 6):
        dm_p = w * np.sum(p * f ** (p - 1) * fd)
        dc_p = w * np.sum(p * f ** (p - 1) * fd * nu + f ** p * nd)
        assert dm_p == pytest.approx(dm[p - 1], rel=3e-3)
        assert dc_p == pytest.approx(dc[p - 1], rel=3e-3, abs=1e-6)
    assert abs(dc[0]) < 1e-12  # the overlap has no noise term
    # the mean flow of M (noise off): A tau M - (16 eta / sqrt y) L_Q c_2
    fd0, nd0 = drifts[1][0], drifts[1][1][:, 0]
    LQ = 0.5 - math.sqrt(1 / Q) / math.pi
    A = 16 * eta / (math.pi * math.sqrt(y)) * math.sqrt(1 / Q)
    dM = w * np.sum(fd0 * nu + f * nd0)
    assert dM == pytest.approx(A * m[0] * c[0] - 16 * eta / math.sqrt(y) * LQ * c[1], rel=2e-3)


def test_step_coefficients_are_the_gradient_step():
    """The closed form behind step_coefficients equals the step W - eta dell/dW of
    multihead_loss_and_grad: the eta and eta^2 coefficients of (tau, Q, c_1, c_2), read off
    the exact quartic in eta, agree to 1e-8 on the same samples."""
    d, r, k, seed = 24, 12, 3, 5
    rng = np.random.default_rng(0)
    T = MultiHeadTeacher.planted(d, r, 1, 1, rng)
    W = rng.standard_normal((d, r)) + 0.5 * T.factors[0, :, 0, :]
    got = step_coefficients(W, T, samples=k, rng=seed)
    X = np.random.default_rng(seed).standard_normal((k, d))
    a = 1 / math.sqrt(r * d)
    Ss = T.matrices()[0, 0]

    def order(Wn):
        S = a * Wn @ Wn.T
        return np.array([np.trace(S), np.trace(S @ S), np.trace(S @ Ss),
                         np.trace(S @ S @ Ss)]) / d

    etas = np.array([-2.0, -1.0, 0.5, 1.0, 2.0]) * 0.3
    coef = np.zeros((2, 4))
    for x in X:
        Xs = x[None, None, :]
        yl = teacher_labels(T, Xs, "abs")
        _, G, _ = multihead_loss_and_grad(W[None, :, None, :], None, Xs, yl, "abs", a)
        vals = np.array([order(W - e * G[0, :, 0, :]) - order(W) for e in etas])
        sol = np.linalg.lstsq(np.vander(etas, 5, increasing=True)[:, 1:], vals, rcond=None)[0]
        coef += sol[:2] * d * d / k
    assert np.allclose(got["first"], coef[0], rtol=1e-8, atol=1e-10)
    assert np.allclose(got["second"], coef[1], rtol=1e-8, atol=1e-10)


def test_monte_carlo_step_tends_to_noise_drift():
    """The mean eta^2 coefficient of one exact step (Monte Carlo, 20000 samples) over the
    closed form of noise_drift is 1 + O(1 / d): at d = 256 and 512 the extrapolation
    2 ratio(512) - ratio(256) is 1 within 6% (tau, Q) and 8% (c_2), and the overlap's eta^2
    term vanishes like 1 / d."""
    ratios = {}
    for d in (256, 512):
        r = d // 2
        rng = np.random.default_rng(1)
        T = MultiHeadTeacher.planted(d, r, 1, 1, rng)
        W = 0.8 * (rng.standard_normal((d, r)) + 0.7 * T.factors[0, :, 0, :])
        got = step_coefficients(W, T, samples=20000, rng=2)
        S = W @ W.T / math.sqrt(r * d)
        Ss = T.matrices()[0, 0]
        m = [np.trace(S) / d, np.trace(S @ S) / d]
        c = [np.trace(S @ Ss) / d, np.trace(S @ S @ Ss) / d]
        dm, dc = noise_drift(m, c, 1.0, r / d, float(got["residual"]))
        th = np.array([dm[0], dm[1], dc[1]])
        ratios[d] = np.array(got["second"])[[0, 1, 3]] / th
        assert abs(got["second"][2]) < 0.3 * 64 / d * abs(got["second"][3]) + 3 * got[
            "second_se"][2]
        assert np.all(ratios[d] > 1)  # the finite-d excess, O(1 / d)
    extrapolated = 2 * ratios[512] - ratios[256]
    assert np.all(np.abs(extrapolated[:2] - 1) < 0.06), extrapolated
    assert abs(extrapolated[2] - 1) < 0.08, extrapolated
    # the excess roughly halves from d = 256 to 512
    assert np.all((ratios[512] - 1) < 0.7 * (ratios[256] - 1))


@pytest.mark.parametrize("eta", [0.1, 0.2])
def test_sgd_plateau_follows_the_noisy_flow(eta):
    """Online SGD at d = 128 (4 runs, t = 2): Q = Tr S^2 / d and tau = Tr S / d follow the
    noisy flow (within 0.025 and 0.012), not the mean flow, which undershoots Q by 0.09
    (eta = 0.1) and 0.14 (eta = 0.2): the eta^2 term, not only the leading order."""
    d, r, seeds = 128, 64, 4
    rng = np.random.default_rng([d, 5])
    T = MultiHeadTeacher.planted(d, r, 1, seeds, rng, centered=True)
    start = (rng.standard_normal((seeds, d, 1, r)),)
    run = multihead_sgd(T, start, samples=2 * d * d, lr=eta, batch=d * d // 256,
                        record_at=[0.0, 2.0], seed=[d, 9])
    Q, tau = run.order["norm"][-1, :, 0].mean(), run.order["mean"][-1, :, 0].mean()
    noisy = noisy_escape(eta, horizon=2.0, particles=100).at(2.0)
    lead = noisy_escape(eta, horizon=2.0, particles=100, noise=False).at(2.0)
    assert abs(Q - noisy["norm"]) < 0.025 and abs(tau - noisy["tau"]) < 0.012
    assert Q - lead["norm"] > 0.06
    if eta == 0.2:
        assert lead["tau"] - tau > 0.02


def test_noisy_escape_limits_and_errors():
    """Without noise the flow reaches escape_rate's plateau and rate; with it the plateau
    lies above Q = 4 / pi^2 (L_Q > 0) and the rate is lower, by a fraction that halves with
    eta (order eta^2 against eta)."""
    lead = noisy_escape(0.1, horizon=8.0, particles=100, noise=False)
    ref = escape_rate(0.1)
    assert lead.at(8.0)["norm"] == pytest.approx(ref.norm, rel=0.01)
    assert lead.window_rate(6.0, 8.0) == pytest.approx(ref.rate, rel=0.01)
    drops = []
    for eta in (0.1, 0.05):
        run = noisy_escape(eta, horizon=8.0, particles=100)
        assert run.at(8.0)["LQ"] > 0.02 and run.at(8.0)["norm"] > 0.44
        drops.append(1 - run.window_rate(2.0, 8.0) / escape_rate(eta).rate)
    assert 0.3 < drops[0] < 0.7 and drops[1] == pytest.approx(drops[0] / 2, rel=0.35)
    assert "rate" in str(run) and run.to_dict()["eta"] == 0.05
    with pytest.raises(ParamgeoError, match="lower dt"):
        noisy_escape(0.5, horizon=0.1, dt=0.05, particles=100)
    with pytest.raises(ParamgeoError, match="widen"):
        run.window_rate(3.0, 3.01)
    with pytest.raises(ParamgeoError):
        noisy_escape(0.1, ratio=1.0)


def test_finite_d_drift_is_the_exact_mean_step():
    """At the state of a run at t = 3 (d = 128), the exact mean step of M (step_coefficients,
    10^6 samples) exceeds the Gaussian drift by about 10 eta / d; the Edgeworth terms of
    finite_d_drift account for it within 3 standard errors, the Gaussian drift alone is
    more than 5 off."""
    d, r = 128, 64
    rng = np.random.default_rng([d, 1, 1, 1, 0])
    T = MultiHeadTeacher.planted(d, r, 1, 1, rng, centered=True)
    W = multihead_sgd(T, (rng.standard_normal((1, d, 1, r)),), samples=3 * d * d, lr=0.1,
                      batch=d * d // 256, record_at=[0.0], seed=[d, 3, 0]).final[0][0, :, 0, :]
    got = step_coefficients(W, T, samples=10 ** 6, rng=5, chunk=5000)
    exact, se = float(got["first"][2]), float(got["first_se"][2])
    pred = finite_d_drift(W @ W.T / math.sqrt(r * d), T.matrices()[0, 0], r / d)
    assert abs(exact - pred["total"]) < 3 * se
    assert exact - pred["gaussian"] > 5 * se
    assert 5 < d * (pred["total"] - pred["gaussian"]) < 20
    with pytest.raises(ParamgeoError):
        finite_d_drift(np.zeros((4, 4)), np.eye(4), 0.5)
