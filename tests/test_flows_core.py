"""Core integrators: gradient flow and gradient descent against closed forms.

Covers: ``paramgeo.dynamics.trajectory``, ``paramgeo.flows.descent``,
``paramgeo.losses.predictor``, ``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uut``.
"""

import numpy as np
import pytest

import paramgeo
from paramgeo.flows import gradient_descent, gradient_flow
from paramgeo.losses import LinearMeasurements


def test_hadamard_flow_matches_closed_form():
    """One coordinate, ell = (beta - y)^2 / 2 with u = v: d beta/dt = -2 beta (beta - y),
    a logistic equation with solution beta(t) = y / (1 + (y / beta0 - 1) exp(-2 y t))."""
    p = paramgeo.get("hadamard", p=1)
    y, a = 2.0, 0.1
    loss = LinearMeasurements(np.ones((1, 1)), [y])
    traj = gradient_flow(p, loss, np.array([a, a]), 5.0, rtol=1e-10, atol=1e-12)
    expected = y / (1 + (y / a**2 - 1) * np.exp(-2 * y * traj.times))
    np.testing.assert_allclose(traj.predictors[:, 0], expected, rtol=1e-6)
    assert traj.success and traj.losses[-1] < 1e-10


def test_gd_small_steps_track_the_flow(rng):
    p = paramgeo.get("uut", d=3, r=2)
    X = rng.standard_normal((10, 3))
    A = np.einsum("ni,nj->nij", X, X)
    target = rng.standard_normal((3, 2))
    loss = LinearMeasurements(A, A.reshape(10, -1) @ (target @ target.T).ravel())
    theta0 = p.random_point(rng)
    lr = 1e-3
    gd = gradient_descent(p, loss, theta0, 500, lr, record_every=500)
    flow = gradient_flow(p, loss, theta0, 500 * lr, rtol=1e-10, atol=1e-12, n_records=2)
    err = np.linalg.norm(gd.final_theta - flow.final_theta) / np.linalg.norm(flow.final_theta)
    assert err < 1e-2
    assert gd.losses[-1] < gd.losses[0]


def test_gd_divergence_is_reported(rng):
    p = paramgeo.get("hadamard", p=2)
    loss = LinearMeasurements(np.eye(2), [1.0, 1.0])
    with pytest.raises(paramgeo.ParamgeoError, match="diverged"):
        gradient_descent(p, loss, np.ones(4) * 10, 100, 10.0)


@pytest.mark.parametrize("structured", [True, False])
def test_gd_records_kept_while_stepping_equal_those_evaluated_after(rng, structured):
    """The losses and gradient norms descent keeps from its steps (one pass with the gradient)
    equal L and |grad L| evaluated afresh at the recorded thetas, for the structured pullback
    (uut's quadratic forms) and the generic one; the last record and SGD's are evaluated."""
    from paramgeo.losses import QuadraticMeasurements, pullback

    p = paramgeo.get("uut", d=4, r=2)
    X = rng.standard_normal((12, 4))
    y = np.sum((X @ rng.standard_normal((4, 2))) ** 2, axis=1)
    loss = QuadraticMeasurements(X, y)
    if not structured:
        A = np.einsum("ni,nj->nij", X, X)
        loss = LinearMeasurements(A, y)
    assert (loss.structured_pullback(p) is not None) == structured
    value, grad = pullback(p, loss)
    theta0 = 0.3 * p.random_point(rng)
    for kwargs in ({"record_every": 7}, {"batch_size": 5, "seed": 1, "record_every": 7}):
        traj = gradient_descent(p, loss, theta0, 30, 1e-2, **kwargs)
        known = traj.evaluate.known["losses"]
        assert np.sum(np.isnan(known)) == (1 if "seed" not in kwargs else len(known))
        np.testing.assert_allclose(traj.losses, [value(t) for t in traj.thetas], rtol=1e-12)
        np.testing.assert_allclose(traj.grad_norms,
                                   [np.linalg.norm(grad(t)) for t in traj.thetas], rtol=1e-12)
        assert traj._loss(-1) == pytest.approx(value(traj.thetas[-1]), rel=1e-12)
