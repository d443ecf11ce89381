"""Classification losses (logistic, exponential) and the hard-margin SVM.

Oracles: autograd and central finite differences for the closed-form gradients and Hessians;
for max_margin, the KKT conditions and the dual problem max sum alpha - |sum alpha_i y_i a_i|^2/2,
alpha >= 0, solved by a different method (L-BFGS-B), and a two-point closed form.

Covers: ``paramgeo.flows.descent``, ``paramgeo.losses.predictor``,
``paramgeo_plugins.deep_diagonal``, ``paramgeo_plugins.hadamard``.
"""

import autograd
import numpy as np
import pytest

import paramgeo
from paramgeo.flows import gradient_descent
from paramgeo.losses import Exponential, Logistic, Loss, max_margin, pullback


def central(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def separable(rng, N=30, d=4, gap=0.3):
    w = rng.standard_normal(d)
    X = rng.standard_normal((N, d))
    y = np.sign(X @ w)
    X += gap * y[:, None] * w / np.linalg.norm(w)
    return X, y


@pytest.mark.parametrize("cls", [Logistic, Exponential])
def test_gradient_and_hessian_against_autograd_and_finite_differences(rng, cls):
    A, y = rng.standard_normal((9, 4)), np.sign(rng.standard_normal(9))
    loss = cls(A, y)
    beta = rng.standard_normal(4)
    g = loss.grad(beta)
    np.testing.assert_allclose(g, autograd.grad(loss.value)(beta), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(g, central(loss.value, beta), rtol=1e-6, atol=1e-9)
    H = loss.hessian(beta)
    np.testing.assert_allclose(H, Loss.hessian(loss, beta), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(H, np.array(central(loss.grad, beta)), rtol=1e-6, atol=1e-9)


def test_logistic_derivatives_stay_finite_at_huge_margins():
    A, y = np.array([[1.0], [1.0]]), np.array([1.0, -1.0])
    loss = Logistic(A, y)
    with np.errstate(all="raise"):  # no overflow on the way
        g = loss.grad(np.array([800.0]))
        H = loss.hessian(np.array([800.0]))
    # mu = (800, -800): l'(800) = -sigma(-800) ~ 0, l'(-800) = -sigma(800) = -1
    assert g == pytest.approx([0.5])
    assert np.all(np.isfinite(H)) and abs(H[0, 0]) < 1e-300


def test_on_outputs_is_the_identity_design_through_a_parameterization(rng):
    y = np.sign(rng.standard_normal(5))
    loss = Logistic.on_outputs(y)
    np.testing.assert_array_equal(loss.A, np.eye(5))
    p = paramgeo.get("hadamard", p=5)  # outputs beta = u * v
    value, grad = pullback(p, loss)
    theta = p.random_point(rng)
    np.testing.assert_allclose(grad(theta), central(value, theta), rtol=1e-6, atol=1e-9)
    u, v = theta[:5], theta[5:]
    assert value(theta) == pytest.approx(np.mean(np.log1p(np.exp(-y * u * v))))


def _dual(Z):
    from scipy.optimize import minimize

    G = Z @ Z.T
    res = minimize(lambda a: 0.5 * a @ G @ a - a.sum(), np.zeros(len(Z)),
                   jac=lambda a: G @ a - 1.0, method="L-BFGS-B",
                   bounds=[(0, None)] * len(Z), options={"ftol": 1e-15, "gtol": 1e-12})
    return Z.T @ res.x


def test_max_margin_against_the_dual_and_kkt(rng):
    X, y = separable(rng)
    mm = max_margin(X, y)
    Z = y[:, None] * X
    w_dual = _dual(Z)
    np.testing.assert_allclose(mm.w, w_dual, rtol=1e-5, atol=1e-7)
    assert mm.margin == pytest.approx(np.min(Z @ mm.direction), rel=1e-8)
    assert mm.kkt_residual < 1e-8 and np.all(mm.dual >= 0)
    off = np.setdiff1d(np.arange(len(y)), mm.support)
    assert np.all(mm.dual[off] == 0) and np.all(Z[off] @ mm.w > 1.0)


def test_max_margin_two_points_closed_form():
    a = np.array([3.0, 4.0])
    mm = max_margin(np.stack([a, -a]), np.array([1.0, -1.0]))
    np.testing.assert_allclose(mm.w, a / 25.0, rtol=1e-8)
    assert mm.margin == pytest.approx(5.0)


def test_non_separable_data_is_named():
    with pytest.raises(paramgeo.ShapeError, match="not linearly separable"):
        max_margin(np.array([[1.0], [1.0]]), np.array([1.0, -1.0]))


@pytest.mark.parametrize("cls", [Logistic, Exponential])
def test_gradient_descent_turns_towards_the_max_margin_direction(rng, cls):
    """Soudry et al. (2018): |w_t| grows like log t and w_t / |w_t| -> w_SVM / |w_SVM|."""
    # y_i x_i = (1, 0), (0.5, 3), (0.5, 5), (2, 4): the SVM w = (1, 1/6) (support 0, 1) is far
    # from the first GD direction sum_i y_i x_i = (4, 12)
    Z = np.array([[1.0, 0.0], [0.5, 3.0], [0.5, 5.0], [2.0, 4.0]])
    y = np.array([1.0, -1.0, 1.0, -1.0])
    mm = max_margin(y[:, None] * Z, y)
    np.testing.assert_allclose(mm.w, [1.0, 1.0 / 6.0], rtol=1e-8)
    lin = paramgeo.get("deep-diagonal", p=2, depth=1)  # beta = w
    traj = gradient_descent(lin, cls(y[:, None] * Z, y), np.zeros(2), 3000, 0.1,
                            record_every=1, conserved=False)
    W = traj.thetas[[10, 100, 1000, 3000]]
    cos = W @ mm.direction / np.linalg.norm(W, axis=1)
    assert cos[0] < 0.7 and np.all(np.diff(cos) > 0) and cos[-1] > 0.97
    assert np.all(np.diff(np.linalg.norm(W, axis=1)) > 0)
