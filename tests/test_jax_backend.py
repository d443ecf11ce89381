"""The JAX adapter's backend stages its arguments through aligned host buffers reused from call
to call (on the CPU; elsewhere it keeps the point on the device while it is unchanged):
products stay those of a fresh call when theta changes, also in place, and returned arrays are
never overwritten by later calls, also where XLA hands back an argument's own buffer.

Covers: ``paramgeo.adapters._model``.
"""

import numpy as np
import pytest

import paramgeo

jax = pytest.importorskip("jax")


def _model(rng):
    import jax.numpy as jnp

    def net(params, x):
        (W1, b1), (W2,) = params
        return jnp.tanh(x @ W1.T + b1) @ W2.T

    params = [(rng.standard_normal((5, 3)), np.zeros(5)), (rng.standard_normal((2, 5)),)]
    return paramgeo.from_jax(net, params, rng.standard_normal((4, 3)))


def test_kept_point_and_staged_buffers_give_fresh_products(rng):
    p = _model(rng)
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    J = p.jacobian(theta)
    first = p.jvp(theta, v)
    np.testing.assert_allclose(first, J @ v, rtol=1e-12, atol=1e-12)
    again = p.jvp(theta, 2 * v)  # same point (kept), a new tangent through the same buffer
    np.testing.assert_allclose(again, 2 * (J @ v), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(first, J @ v, rtol=1e-12, atol=1e-12)  # not overwritten
    np.testing.assert_allclose(p.vjp(theta, w), J.T @ w, rtol=1e-12, atol=1e-12)
    theta[-1] += 0.5  # changed in place: the kept device copy must not be used
    J2 = p.jacobian(theta)
    assert not np.allclose(J2, J)
    np.testing.assert_allclose(p.jvp(theta, v), J2 @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(p.vjp(theta, w), J2.T @ w, rtol=1e-12, atol=1e-12)


def test_a_product_that_returns_its_argument_is_not_overwritten(rng):
    """phi(theta) = theta: J v = v and J^T w = w are the staged arguments themselves (JAX may
    forward an argument's buffer as the result); each returned array stays the product of its
    own call after later calls reuse the staging buffers."""
    p = paramgeo.from_jax(lambda params, x: params["a"], {"a": np.ones(6)}, np.zeros(1),
                          name="jax-identity")
    theta, v = rng.standard_normal(6), rng.standard_normal(6)
    results = [(p.jvp(theta, k * v), k * v) for k in (1.0, 2.0, 3.0)]
    results += [(p.vjp(theta, k * v), k * v) for k in (4.0, 5.0)]
    results += [(p.forward(k * theta), k * theta) for k in (1.0, -1.0)]
    for got, expected in results:
        np.testing.assert_array_equal(got, expected)


def test_points_of_random_point_are_read_in_place_and_give_the_same_products(rng):
    """random_point lays its points on a 64-byte boundary (passed to XLA without a copy);
    the products there equal those at an unaligned copy of the same point (staged), and J v,
    J^T w agree with the Jacobian by reverse mode."""
    from paramgeo.adapters._model import FrameworkModel

    p = _model(rng)
    theta = p.random_point(np.random.default_rng(5))
    assert theta.ctypes.data % 64 == 0
    np.testing.assert_array_equal(theta, FrameworkModel.random_point(p, np.random.default_rng(5)))
    shifted = np.empty(p.n + 1)[1:]  # 8 bytes off any 64-byte boundary
    shifted[...] = theta
    v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
    J = p.jacobian(theta)
    for point in (theta, shifted, theta):
        np.testing.assert_allclose(p.jvp(point, v), J @ v, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(p.vjp(point, w), J.T @ w, rtol=1e-12, atol=1e-12)


def test_a_forwarded_point_of_the_caller_is_returned_as_a_copy():
    """phi(theta) = theta at an aligned point (read in place): the result equals theta but is
    not theta's memory, so writing into either leaves the other unchanged."""
    p = paramgeo.from_jax(lambda params, x: params["a"], {"a": np.ones(8)}, np.zeros(1),
                          name="jax-identity-point")
    theta = p.random_point(np.random.default_rng(0))
    out = p.forward(theta)
    np.testing.assert_array_equal(out, theta)
    assert not np.shares_memory(out, theta)
