"""Early stopping under label flips (paramgeo.flows.label_flips, paramgeo.flows.oracle_rates),
each quantity against an independent route: the quadrature logistic risk against Monte Carlo,
its one-dimensional minimiser against a full d-dimensional minimisation, the ridge deterministic
equivalent against ridge regression on drawn samples, the calibration ratio's limit at the
optimum; the spectral ridge and flow estimators against linear solves and the matrix
exponential, the rate decomposition's ordering on shared samples, the efficiency ratio of
logistic to least squares against Newton fits on drawn samples, the non-negative least squares
max-margin against SLSQP, the best interpolator against SLSQP and Gordon's floor against its
small-ratio closed form and Monte Carlo, the sample count on an exact power law, and the Le Cam
bound against its large-N closed form; for the well-specified logistic design, the quadrature
excess 0-1 risk against Monte Carlo and its small-angle limit, the kernel-form sample, GD and
max-margin interpolator against the explicit design, explicit GD and the SLSQP hard-margin
SVM, and the power and exponential sample-count fits on exact laws.

Covers: ``paramgeo.flows.label_flips``, ``paramgeo.flows.oracle_rates``,
``paramgeo.flows.logistic_separation``, ``paramgeo.flows.risk``.
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
from paramgeo.flows.oracle_rates import (
    best_interpolator,
    efficiency_ratio,
    equivalent_check,
    interpolator_excess,
    interpolator_floor,
    min_norm_cone,
    minimax_lower_bound,
    rate_decomposition,
    sample_count,
    square_loss_estimators,
)
from paramgeo.flows.risk import GaussianMixture
from paramgeo.losses.predictor import max_margin


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


def test_square_loss_estimators_against_solves():
    from scipy.linalg import expm

    model = GaussianMixture.from_spectrum(8, "exponential", 0.3, snr=2.0, flip=0.1, support=3)
    X, y = model.sample(40, np.random.default_rng(0))
    ridge, flow = square_loss_estimators(X, y, [0.1, 1.0], [0.5, 7.0])
    S, c = X.T @ X / 40, X.T @ (2 * y) / 40
    for lam, w in zip([0.1, 1.0], ridge):
        assert np.allclose(w, np.linalg.solve(S + lam * np.eye(8), c), rtol=1e-10, atol=1e-12)
    for tau, w in zip([0.5, 7.0], flow):  # w(tau) = S^-1 (I - e^(-tau S)) c
        assert np.allclose(w, np.linalg.solve(S, (np.eye(8) - expm(-tau * S)) @ c), rtol=1e-8)
    # N < d: the null directions of S get tau c (the flow's limit there), by a hand loop
    Xs, ys = X[:5], y[:5]
    w = np.zeros(8)
    for _ in range(20000):
        w -= 1e-4 * (Xs.T @ (Xs @ w) / 5 - Xs.T @ (2 * ys) / 5)
    assert np.allclose(square_loss_estimators(Xs, ys, [1.0], [2.0])[1][0], w, rtol=1e-3)


def test_rate_decomposition_on_shared_samples():
    model = GaussianMixture.from_spectrum(30, "polynomial", 1.5, snr=3.0, flip=0.1, support=5)
    res = rate_decomposition(model, [40, 80, 160], seeds=(0, 1), steps=300)
    # the per-sample oracle minimises over a grid that holds the equivalent's penalty
    assert np.all(res.means["ridge_oracle"] <= res.means["ridge_at_theory"] * (1 + 1e-12))
    assert set(res.rates) == set(res.means) and res.capped >= 0
    assert np.all(res.errors["logistic_oracle"] >= 0)
    with pytest.raises(ShapeError, match="at least 2 seeds"):
        rate_decomposition(model, [40, 80, 160], seeds=(0,))


def test_efficiency_ratio_against_newton_fits():
    from scipy.special import expit

    model = GaussianMixture(cov=np.ones(4), mean=np.array([3.0, 0, 0, 0]), flip=0.1)
    ex_log, ex_ls = [], []
    for seed in range(150):
        X, y = model.sample(3000, np.random.default_rng(seed))
        w_ls = np.linalg.lstsq(X, 2 * y, rcond=None)[0]
        w = 0.2 * w_ls
        for _ in range(12):  # Newton on the empirical logistic risk: the unpenalised fit
            p = expit(-y * (X @ w))
            hess = (X * (p * (1 - p))[:, None]).T @ X / 3000
            w = w + np.linalg.solve(hess, (X * (y * p)[:, None]).mean(0))
        ex_log.append(model.excess_risk(w))
        ex_ls.append(model.excess_risk(w_ls))
    # 2.55 measured against 2.453 (about 6% sampling error on each mean)
    assert np.mean(ex_log) / np.mean(ex_ls) == pytest.approx(efficiency_ratio(3.0, 0.1),
                                                             rel=0.15)


def test_max_margin_and_best_interpolator_against_slsqp():
    from scipy.optimize import minimize

    model = GaussianMixture.from_spectrum(40, "polynomial", 1.5, snr=3.0, flip=0.1)
    X, y = model.sample(25, np.random.default_rng(0))
    v = min_norm_cone(y[:, None] * X, np.ones(25))
    assert np.allclose(v / np.linalg.norm(v), max_margin(X, y).direction, atol=1e-8)
    w = best_interpolator(model, X, y)
    assert np.all(y * (X @ w) > -1e-9)
    assert model.excess_risk(w) <= model.excess_risk(v) + 1e-12
    # second route: least excess among interpolators = least tan(angle) in whitened coordinates
    root = np.sqrt(model.cov)
    a = model.mean / root / np.linalg.norm(model.mean / root)
    U = y[:, None] * (X / root)
    Z, c = U - np.outer(U @ a, a), -U @ a
    res = minimize(lambda t: t @ t, np.linalg.lstsq(Z, c + 1e-3, rcond=None)[0], method="SLSQP",
                   jac=lambda t: 2 * t, constraints=[{"type": "ineq", "fun": lambda t: Z @ t - c,
                                                     "jac": lambda t: Z}],
                   options={"ftol": 1e-14, "maxiter": 500})
    assert model.excess_risk((a + res.x) / root) == pytest.approx(model.excess_risk(w), rel=1e-4)


def test_interpolator_floor_closed_form_and_monte_carlo():
    from scipy.special import ndtr

    snr, eta, ell = 3.0, 0.1, 1e-4
    phi = np.exp(-snr ** 2 / 2) / np.sqrt(2 * np.pi)

    def pos2(m):  # E[Y_+^2], Y ~ N(m, 1)
        return (m * m + 1) * ndtr(m) + m * np.exp(-m * m / 2) / np.sqrt(2 * np.pi)

    # small ratio: r^2 = ell E[c_+^2] / (1 - ell P(c > 0)), excess ~ (1 - 2 eta) phi snr r^2 / 2
    r2 = ell * ((1 - eta) * pos2(-snr) + eta * pos2(snr)) / (
        1 - ell * ((1 - eta) * ndtr(-snr) + eta * ndtr(snr)))
    small = (1 - 2 * eta) * phi * snr * r2 / 2
    assert interpolator_floor(snr, eta, ell) == pytest.approx(small, rel=2e-3)
    assert np.isnan(interpolator_floor(snr, eta, 2.05))  # beyond Cover's threshold
    model = GaussianMixture.from_spectrum(300, "exponential", 0.05, snr=snr, flip=eta)
    res = interpolator_excess(model, [75], seeds=range(10))
    assert abs(res.best[0] - res.predicted[0]) < max(3 * res.best_se[0], 0.25 * res.predicted[0])
    assert res.max_margin[0] > res.best[0]


def test_sample_count_and_minimax_bound():
    n = np.array([10.0, 100.0, 1000.0])
    assert sample_count(n, n ** -0.5, 0.05) == pytest.approx(400.0, rel=1e-12)
    assert sample_count(n, n ** -0.5, 1e-3) == np.inf
    snr, eta, N = 3.0, 0.1, 10 ** 7
    bound = minimax_lower_bound(snr, eta, [N], support=10)
    # Le Cam, small angles: max_t (1 - 2 eta) phi snr t / (2 N snr^2) / 2 (1 - sqrt(t)) at
    # t = 4/9 is (1 - 2 eta) phi / (27 N snr)
    phi = np.exp(-snr ** 2 / 2) / np.sqrt(2 * np.pi)
    assert bound.le_cam[0] == pytest.approx((1 - 2 * eta) * phi / (27 * N * snr), rel=1e-2)
    wide = minimax_lower_bound(snr, eta, [N, 10 * N], support=200)
    assert wide.fano[0] > bound.fano[0] and wide.fano[1] == pytest.approx(wide.fano[0] / 10,
                                                                          rel=2e-2)
    assert np.isnan(minimax_lower_bound(snr, eta, [N], support=5).fano[0])


def test_equivalent_check_agrees_at_large_n():
    model = GaussianMixture.from_spectrum(20, "polynomial", 1.5, snr=3.0, flip=0.1, support=5)
    c = equivalent_check(model, 1600, seeds=range(30))
    # three routes to the same excess where the equivalent is accurate (N / d = 80)
    assert c.plug_in == pytest.approx(c.equivalent, rel=0.1)
    assert abs(c.drawn - c.equivalent) < max(4 * c.drawn_se, 0.1 * c.equivalent)


def test_zero_one_excess_against_monte_carlo_and_small_angle():
    from paramgeo.flows.logistic_separation import LogisticDesign, zero_one_excess

    design = LogisticDesign.from_decay(8, 2.0, support=3, scale=2.0, tail=0.0)
    lam, ws = design.spectrum, design.w_star
    w = ws + np.random.default_rng(3).standard_normal(8) * 0.8
    X = np.random.default_rng(4).standard_normal((1_000_000, 8)) * np.sqrt(lam)
    v = X @ ws
    p = 1 / (1 + np.exp(-v))  # the error is averaged over the label given x (no label noise)
    err = np.where(X @ w > 0, 1 - p, p) - np.where(v > 0, 1 - p, p)
    exact = zero_one_excess(design.signal, w @ (lam * w), w @ (lam * ws))
    assert abs(err.mean() - exact) < 4 * err.std() / np.sqrt(err.size)
    assert zero_one_excess(design.signal, 1.0, -1.0 / np.sqrt(design.signal)) > 0.5 - 0.3
    theta = 1e-3  # small angle: E -> sqrt(s) theta^2 / (4 sqrt(2 pi))
    s = design.signal
    small = zero_one_excess(s, 1.0, np.cos(theta) * np.sqrt(s))
    assert small == pytest.approx(np.sqrt(s) * theta ** 2 / (4 * np.sqrt(2 * np.pi)), rel=1e-3)


def test_kernel_max_margin_and_gd_against_explicit_solves():
    from paramgeo.flows.logistic_separation import (
        LogisticDesign,
        explicit_sample,
        gram_sample,
        kernel_gd,
        kernel_max_margin,
    )

    design = LogisticDesign.from_decay(60, 2.0, support=10, tail=0.0)
    X, y = explicit_sample(design, 25, np.random.default_rng(7))
    g = gram_sample(design, 25, np.random.default_rng(7))  # the same draw, in kernel form
    assert np.allclose(g.K, X @ X.T) and np.array_equal(g.y, y)
    assert np.allclose(g.K2, (X * design.spectrum) @ X.T)
    w_kernel = X.T @ kernel_max_margin(g.K, g.y)
    direct = max_margin(X, y)  # hard-margin SVM by SLSQP on the explicit design
    assert np.allclose(w_kernel / np.linalg.norm(w_kernel), direct.direction, atol=1e-6)
    assert np.min(y * (X @ w_kernel)) == pytest.approx(1.0, abs=1e-8)
    marks, betas = kernel_gd(g.K, g.y, 50, records=5)
    w, eta = np.zeros(60), 4.0 * 25 / np.linalg.eigvalsh(g.K)[-1]
    for _ in range(50):  # explicit GD on the mean logistic loss
        w += eta * X.T @ (y / (1 + np.exp(y * (X @ w)))) / 25
    assert marks[-1] == 50 and np.allclose(X.T @ betas[-1], w, atol=1e-10)


def test_fit_laws_recovers_known_laws():
    from paramgeo.flows.logistic_separation import fit_laws

    eps = np.geomspace(0.2, 0.01, 8)
    exp_law = fit_laws(eps, np.exp(2.0 * eps ** -0.5))
    assert exp_law.exp_k == pytest.approx(0.5, abs=1e-9) and exp_law.exp_c == pytest.approx(2.0)
    assert exp_law.exp_rms < 1e-9 < exp_law.power_rms
    power = fit_laws(eps, 3.0 * eps ** -1.5)
    assert power.power_k == pytest.approx(1.5, abs=1e-9) and power.power_rms < 1e-9
    assert power.exp_rms > 1e-3
    with pytest.raises(ShapeError):
        fit_laws([0.1, 0.2], [10.0, 5.0])
