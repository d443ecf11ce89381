"""The fused (block by block, numerics.blocks) elementwise products of the elementwise built-ins
against their plain numpy expressions, on sizes spanning several blocks and a partial last one,
with exact zeros among the factors.

Covers: ``paramgeo.linalg.numerics``, ``paramgeo_plugins.deep_diagonal``,
``paramgeo_plugins.hadamard``.
"""

import numpy as np
import pytest

import paramgeo
from paramgeo.linalg.numerics import BLOCK, blocks

P = 2 * BLOCK + 5  # two full blocks and a partial one


def test_blocks_cover_the_range_once():
    covered = np.concatenate([np.arange(P)[b] for b in blocks(P)])
    assert np.array_equal(covered, np.arange(P)) and len(blocks(P)) == 3
    assert blocks(0) == [] and blocks(3, block=2) == [slice(0, 2), slice(2, 3)]


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_deep_diagonal_fused_products_equal_the_plain_expressions(depth, rng):
    p = paramgeo.get("deep-diagonal", p=P, depth=depth)
    W = rng.standard_normal((depth, P))
    W[rng.integers(depth, size=50), rng.integers(P, size=50)] = 0.0  # exact zeros
    X, w = rng.standard_normal((depth, P)), rng.standard_normal(P)
    # c_l = prod_{k != l} w_k directly (np.prod over the other rows)
    C = np.array([np.prod(np.delete(W, l, axis=0), axis=0) for l in range(depth)])
    np.testing.assert_array_equal(p.cofactors(W.ravel()) == 0, C == 0)
    np.testing.assert_allclose(p.cofactors(W.ravel()), C, rtol=1e-13, atol=0)
    np.testing.assert_allclose(p.jvp(W.ravel(), X.ravel()), np.sum(C * X, axis=0),
                               rtol=1e-12, atol=1e-12 * np.max(np.abs(C * X)))
    np.testing.assert_allclose(p.vjp(W.ravel(), w), (C * w).ravel(), rtol=1e-13, atol=0)


def test_hadamard_fused_products_equal_the_plain_expressions(rng):
    p = paramgeo.get("hadamard", p=P)
    theta, x, w = rng.standard_normal(2 * P), rng.standard_normal(2 * P), rng.standard_normal(P)
    u, v = theta[:P], theta[P:]
    np.testing.assert_array_equal(p.jvp(theta, x), v * x[:P] + u * x[P:])
    np.testing.assert_array_equal(p.vjp(theta, w), np.concatenate([w * v, w * u]))
