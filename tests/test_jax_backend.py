"""The JAX adapter's backend keeps the point on the device between calls and stages tangents
through aligned host buffers: products stay those of a fresh call when theta changes, also in
place, and returned arrays are never overwritten by later calls."""

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
