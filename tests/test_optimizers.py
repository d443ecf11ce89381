"""Optimizers of paramgeo.dynamics.optimizers through flows.gradient_descent.

Oracles: the update rules written out by hand (sign, g / (|g| + eps), Adam's moments); the
steepest-descent characterisation of sign descent (linprog over the l_inf ball); the exact
dual identities of smoothed sign descent with the exponential loss (entropic mirror step).

Covers: ``paramgeo.dynamics.optimizers``, ``paramgeo.flows.descent``,
``paramgeo.losses.predictor``, ``paramgeo_plugins.deep_diagonal``, ``paramgeo_plugins.hadamard``.
"""

import numpy as np
import pytest
from scipy.optimize import linprog

import paramgeo
from paramgeo.flows import gradient_descent
from paramgeo.losses import Exponential, LinearMeasurements, pullback
from paramgeo.dynamics.optimizers import Adam, SignDescent, SmoothedSignDescent


@pytest.fixture
def problem(rng):
    p = paramgeo.get("hadamard", p=3)
    A, y = rng.standard_normal((8, 3)), rng.standard_normal(8)
    return p, LinearMeasurements(A, y), 0.5 * rng.standard_normal(p.n)


def test_sign_descent_is_steepest_descent_in_l_inf(rng):
    g = rng.standard_normal(6)
    res = linprog(g, bounds=[(-1, 1)] * 6)  # argmin_{|d|_inf <= 1} <g, d>
    direction = SignDescent().start(None, 6)(0, None, g)
    np.testing.assert_allclose(-direction, res.x, atol=1e-9)


@pytest.mark.parametrize("opt,rule", [
    (SignDescent(), lambda g, state, t: np.sign(g)),
    (SmoothedSignDescent(eps=0.3, anneal="inverse"),
     lambda g, state, t: g / (np.abs(g) + 0.3 / (1 + t))),
    (SmoothedSignDescent(eps=0.3, anneal="constant"), lambda g, state, t: g / (np.abs(g) + 0.3)),
])
def test_update_rules_by_hand(problem, opt, rule):
    p, loss, theta0 = problem
    _, grad = pullback(p, loss)
    traj = gradient_descent(p, loss, theta0, 5, 0.01, optimizer=opt, conserved=False)
    theta = theta0.copy()
    for t in range(5):
        theta = theta - 0.01 * rule(grad(theta), None, t)
    np.testing.assert_allclose(traj.final_theta, theta, rtol=1e-12)
    assert traj.method.startswith(opt.name)


def test_adam_by_hand(problem):
    p, loss, theta0 = problem
    _, grad = pullback(p, loss)
    traj = gradient_descent(p, loss, theta0, 6, 0.02, optimizer=Adam(0.8, 0.9, 1e-6),
                            conserved=False)
    theta, m, v = theta0.copy(), 0.0, 0.0
    for t in range(1, 7):
        g = grad(theta)
        m = 0.8 * m + 0.2 * g
        v = 0.9 * v + 0.1 * g * g
        theta = theta - 0.02 * (m / (1 - 0.8 ** t)) / (np.sqrt(v / (1 - 0.9 ** t)) + 1e-6)
    np.testing.assert_allclose(traj.final_theta, theta, rtol=1e-12)


def test_adam_without_averaging_is_sign_descent(problem):
    p, loss, theta0 = problem
    a = gradient_descent(p, loss, theta0, 8, 0.01, optimizer=Adam(0.0, 0.0, 0.0), conserved=False)
    s = gradient_descent(p, loss, theta0, 8, 0.01, optimizer=SignDescent(), conserved=False)
    np.testing.assert_allclose(a.thetas, s.thetas, rtol=1e-12)


def test_smoothed_sign_is_entropic_mirror_descent_on_the_dual(rng):
    """Exponential loss, eps_k = delta L(w_k): w_{k+1} - w_k = eta s(p_k) with s(p) = Z^T p /
    (|Z^T p| + delta), and p_{k+1} = p_k exp(-eta Z s(p_k)) / normaliser (exact identities)."""
    X = rng.standard_normal((10, 3))
    y = np.sign(X @ np.array([1.0, -0.5, 0.3]))
    Z = y[:, None] * X
    lin = paramgeo.get("deep-diagonal", p=3, depth=1)
    delta, eta = 0.4, 0.05
    traj = gradient_descent(lin, Exponential(X, y), np.zeros(3), 200, eta, conserved=False,
                            optimizer=SmoothedSignDescent(eps=delta, anneal="loss"))
    W = traj.thetas
    for k in range(0, 200, 17):
        p = np.exp(-Z @ W[k] - np.max(-Z @ W[k]))
        p /= p.sum()
        u = Z.T @ p
        s = u / (np.abs(u) + delta)
        np.testing.assert_allclose((W[k + 1] - W[k]) / eta, s, atol=1e-12)
        nxt = np.exp(-Z @ W[k + 1] - np.max(-Z @ W[k + 1]))
        mirror = p * np.exp(-eta * Z @ s)
        np.testing.assert_allclose(nxt / nxt.sum(), mirror / mirror.sum(), atol=1e-13)


def test_smoothed_sign_limit_is_the_burg_barrier_point():
    """The example's independent scipy solution agrees with the iterates (short run)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "smoothed_sign.py"
    spec = importlib.util.spec_from_file_location("smoothed_sign", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows, ref, _ = mod.run(steps=2000)
    assert ref["step_err"] < 1e-10 and ref["mirror_err"] < 1e-12 and ref["fenchel_young_err"] < 1e-13
    assert ref["slice_err"] < 1e-6  # the two scipy formulations agree
    assert rows[-1]["s_err"] < 1e-6 and rows[-1]["dual_gap"] < 1e-8


def test_bad_optimizer_settings_are_named():
    with pytest.raises(paramgeo.ParamgeoError, match="must be positive"):
        SmoothedSignDescent(eps=0.0)
    with pytest.raises(paramgeo.ParamgeoError, match="unknown annealing 'cosine'"):
        SmoothedSignDescent(anneal="cosine")
    with pytest.raises(paramgeo.ParamgeoError, match="beta2 must lie in"):
        Adam(beta2=1.0)


def test_underflowed_loss_gives_sign_steps_not_nan():
    direction = SmoothedSignDescent(eps=1.0).start(lambda th: 0.0, 2)
    np.testing.assert_array_equal(direction(0, np.zeros(2), np.array([0.0, -1e-320])), [0, -1])
