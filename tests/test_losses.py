"""Losses on predictors and their pull-back through a parameterization.

Covers: ``paramgeo.losses.predictor``, ``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uut``.
"""

import autograd.numpy as anp
import numpy as np
import pytest

import paramgeo
from paramgeo.losses import CallableLoss, Exponential, LinearMeasurements, Logistic, pullback


@pytest.mark.parametrize("cls", [LinearMeasurements, Logistic, Exponential])
def test_closed_form_gradients_match_autograd(rng, cls):
    A = rng.standard_normal((7, 4))
    y = np.sign(rng.standard_normal(7)) if cls is not LinearMeasurements else rng.standard_normal(7)
    loss = cls(A, y)
    beta = rng.standard_normal(4)
    from paramgeo.losses import Loss

    np.testing.assert_allclose(loss.grad(beta), Loss.grad(loss, beta), rtol=1e-10, atol=1e-12)


def test_squared_loss_value_and_hessian(rng):
    A, y = rng.standard_normal((5, 3)), rng.standard_normal(5)
    loss = LinearMeasurements(A, y)
    beta = rng.standard_normal(3)
    assert loss.value(beta) == pytest.approx(0.5 * np.mean((A @ beta - y) ** 2))
    np.testing.assert_allclose(loss.hessian(beta), A.T @ A / 5)


def test_pullback_is_chain_rule(rng):
    p = paramgeo.get("uut", d=3, r=2)
    X = rng.standard_normal((6, 3))
    A = np.einsum("ni,nj->nij", X, X)  # quadratic network f_U(x) = x^T U U^T x
    loss = LinearMeasurements(A, rng.standard_normal(6))
    value, grad = pullback(p, loss)
    theta = p.random_point(rng)
    h = 1e-6
    fd = np.array([(value(theta + h * e) - value(theta - h * e)) / (2 * h) for e in np.eye(p.n)])
    np.testing.assert_allclose(grad(theta), fd, rtol=1e-6, atol=1e-8)


def test_bad_inputs_are_named(rng):
    with pytest.raises(paramgeo.ShapeError, match="5 measurements but 4 targets"):
        LinearMeasurements(rng.standard_normal((5, 3)), np.zeros(4))
    with pytest.raises(paramgeo.ShapeError, match="A contains NaN"):
        LinearMeasurements(np.full((2, 2), np.nan), np.zeros(2))
    with pytest.raises(paramgeo.ShapeError, match="labels y must be -1 or \\+1"):
        Logistic(np.ones((2, 2)), np.array([0.0, 1.0]))
    with pytest.raises(paramgeo.ShapeError, match="dimension 3, but hadamard"):
        pullback(paramgeo.get("hadamard", p=2), LinearMeasurements(np.ones((2, 3)), np.ones(2)))
    with pytest.raises(paramgeo.ParamgeoError, match="must return a scalar"):
        CallableLoss(lambda b: b * 2).value(np.ones(2))
    assert CallableLoss(lambda b: anp.sum(b ** 2)).grad(np.ones(2)) == pytest.approx([2, 2])


@pytest.mark.parametrize("name,sizes", [("uut", dict(d=5, r=2)), ("uvt", dict(m=5, n=5, r=2))])
def test_structured_pullback_matches_the_flat_chain_rule(rng, name, sizes):
    """QuadraticMeasurements uses the plugin's quadratic_forms (never forming phi); the dense
    LinearMeasurements with A_i = x_i x_i^T goes through the flat predictor: same L, grad L."""
    from paramgeo.losses import QuadraticMeasurements

    p = paramgeo.get(name, **sizes)
    X, y = rng.standard_normal((9, 5)), rng.standard_normal(9)
    fast = QuadraticMeasurements(X, y)
    assert fast.structured_pullback(p) is not None
    value_f, grad_f = pullback(p, fast)
    value_d, grad_d = pullback(p, LinearMeasurements(np.einsum("ni,nj->nij", X, X), y))
    theta = p.random_point(rng)
    assert value_f(theta) == pytest.approx(value_d(theta), rel=1e-12)
    np.testing.assert_allclose(grad_f(theta), grad_d(theta), rtol=1e-10, atol=1e-12)


def test_quadratic_loss_refuses_non_square_predictors(rng):
    from paramgeo.losses import QuadraticMeasurements

    with pytest.raises(paramgeo.ShapeError, match="square 2 x 2 predictors"):
        pullback(paramgeo.get("hadamard", p=4), QuadraticMeasurements(np.ones((3, 2)), np.ones(3)))
