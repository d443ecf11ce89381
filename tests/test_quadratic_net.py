"""Positive quadratic networks (paramgeo.flows.quadratic_net) against independent routes: the
population Hessian against a Monte Carlo mean, the empirical Hessian against central
differences of the gradient, the GD loop against the engine's descent through the uut plugin,
the spectral initialiser's N^-1/2 error and the measured contraction against 1 - eta h_min.

Covers: ``paramgeo.flows.descent``, ``paramgeo.flows.quadratic_net``,
``paramgeo.losses.predictor``, ``paramgeo.mirror.regimes``, ``paramgeo_plugins.uut``.
"""

import numpy as np
import pytest

import paramgeo
from paramgeo.errors import ShapeError
from paramgeo.flows import gradient_descent
from paramgeo.flows.quadratic_net import (
    curvature_deviation,
    empirical_hessian,
    horizontal_spectrum,
    local_convergence,
    population_hessian,
    quadratic_measurements,
    spectral_init,
)
from paramgeo.losses import QuadraticMeasurements

D, R = 5, 2
U_STAR = np.random.default_rng(7).standard_normal((D, R)) / np.sqrt(D)


def _grad(X, y, u):
    r = np.sum((X @ u) ** 2, axis=1) - y
    return 2.0 * X.T @ (r[:, None] * (X @ u)) / X.shape[0]


def test_population_hessian_is_the_mean():
    rng = np.random.default_rng(0)
    mean = sum(empirical_hessian(quadratic_measurements(U_STAR, 50_000, rng)[0], U_STAR)
               for _ in range(4)) / 4
    H = population_hessian(U_STAR)
    assert np.linalg.norm(mean - H) < 0.02 * np.linalg.norm(H)


def test_empirical_hessian_against_differences():
    X, y = quadratic_measurements(U_STAR, 300, np.random.default_rng(1))
    H = empirical_hessian(X, U_STAR)
    h, cols = 1e-5, []
    for k in range(D * R):
        e = np.zeros(D * R)
        e[k] = h
        plus = _grad(X, y, U_STAR + e.reshape(D, R)).ravel()
        minus = _grad(X, y, U_STAR - e.reshape(D, R)).ravel()
        cols.append((plus - minus) / (2 * h))
    assert np.allclose(np.array(cols).T, H, atol=1e-7 * np.abs(H).max())
    # the vertical direction U A (A antisymmetric) is in the kernel: the O(r) orbit
    A = np.array([[0.0, 1.0], [-1.0, 0.0]])
    assert np.linalg.norm(H @ (U_STAR @ A).ravel()) < 1e-12 * np.abs(H).max()
    assert horizontal_spectrum(H, U_STAR).size == D * R - 1


def test_spectral_init_error_falls_like_root_n():
    errs = []
    for N in (4000, 64000):
        e = []
        for seed in range(3):
            X, y = quadratic_measurements(U_STAR, N, np.random.default_rng(seed))
            u0 = spectral_init(X, y, R)
            e.append(np.linalg.norm(u0 @ u0.T - U_STAR @ U_STAR.T))
        errs.append(np.mean(e))
    assert errs[1] < 0.3 * np.linalg.norm(U_STAR @ U_STAR.T)
    assert errs[0] / errs[1] == pytest.approx(4.0, rel=0.35)
    with pytest.raises(ShapeError, match="rank r"):
        spectral_init(np.ones((3, 2)), np.ones(3), 5)


def test_local_convergence_rate():
    X, y = quadratic_measurements(U_STAR, 2000, np.random.default_rng(3))
    u0 = spectral_init(X, y, R)
    run = local_convergence(X, y, u0, U_STAR, steps=600)
    assert run.errors[-1] < 1e-4 * run.errors[0]
    assert run.measured == pytest.approx(run.predicted, abs=1e-3)
    # the same descent through the engine and the uut plugin
    param = paramgeo.get("uut", d=D, r=R)
    traj = gradient_descent(param, QuadraticMeasurements(X, y), u0.ravel(), 20, run.lr,
                            record_every=1)
    u = u0.copy()
    for _ in range(20):
        u = u - run.lr * _grad(X, y, u)
    assert np.allclose(traj.thetas[-1], u.ravel(), atol=1e-12)


def test_curvature_deviation_rate():
    dev = curvature_deviation(U_STAR, [400, 1600, 6400, 25600], seeds=(0, 1))
    assert abs(dev.rate.exponent - 0.5) < max(3 * dev.rate.error, 0.1)
    assert dev.min_curvature[-1] == pytest.approx(dev.population_min, rel=0.15)


def test_step_size_gap_is_first_order():
    from paramgeo.flows.quadratic_net import step_size_gap
    from paramgeo.losses import LinearMeasurements

    rng = np.random.default_rng(0)
    d, N = 6, 3
    E, _ = np.linalg.qr(rng.standard_normal((d, d)))
    a = np.abs(rng.standard_normal((N, d))) + 0.2
    A = np.einsum("aj,ij,bj->iab", E, a, E)
    y = a @ np.array([2.0, 0.0, 1.0, 0.0, 0.0, 0.5])
    res = step_size_gap(paramgeo.get("uut", d=d, r=d), (0.1 * E).ravel(),
                        LinearMeasurements(A, y), [0.02, 0.01, 0.005])
    assert res.gaps[1] / res.gaps[2] == pytest.approx(2.0, rel=0.08) and res.flow_gap < 1e-8
    # the same descent in the eigenvalues, written out: lambda <- (1 - 2 eta g)^2 lambda
    lam = np.full(d, 0.01)
    for _ in range(200_000):
        r = a @ lam - y
        if 0.5 * r @ r / N < 1e-24:
            break
        lam = (1 - 2 * 0.01 * (a.T @ r / N)) ** 2 * lam
    from paramgeo.mirror import regime_implicit_bias
    target = regime_implicit_bias(paramgeo.get("uut", d=d, r=d), (0.1 * E).ravel(),
                                  LinearMeasurements(A, y)).beta_predicted
    hand = np.linalg.norm((E * lam) @ E.T - np.reshape(target, (d, d)))
    assert hand == pytest.approx(res.gaps[1], rel=1e-6)
