"""uut's tiled products (the symmetric-panel JVP and the one-pass VJP over tiles of W) against
autograd's forward / reverse mode and the plugin's closed-form Jacobian, on grids of several
tiles (d not a multiple of the tile) and below the tile threshold."""

import numpy as np
import pytest

import paramgeo
from paramgeo import Parameterization


@pytest.mark.parametrize("d,r,tile", [(10, 3, 3), (11, 2, 4), (9, 4, 512), (7, 2, 1)])
def test_tiled_products_match_autograd(monkeypatch, d, r, tile):
    p = paramgeo.get("uut", d=d, r=r)
    monkeypatch.setattr(type(p), "TILE", tile)
    rng = np.random.default_rng(d * r)
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    J = p.jacobian(theta)
    for mine, auto, dense in ((p.jvp(theta, v), Parameterization.jvp(p, theta, v), J @ v),
                              (p.vjp(theta, w), Parameterization.vjp(p, theta, w), J.T @ w)):
        assert np.allclose(mine, auto, rtol=1e-12, atol=1e-12)
        assert np.allclose(mine, dense, rtol=1e-12, atol=1e-12)


def test_default_tile_at_two_and_a_bit_tiles():
    """d = 1100 with TILE = 512: two full tiles and a ragged one, against the plain expressions
    U dU^T + dU U^T and (W + W^T) U."""
    p = paramgeo.get("uut", d=1100, r=3)
    assert p.d >= 2 * p.TILE
    rng = np.random.default_rng(0)
    U, dU, W = (rng.standard_normal(s) for s in ((1100, 3), (1100, 3), (1100, 1100)))
    jvp = p.jvp(U.ravel(), dU.ravel()).reshape(1100, 1100)
    assert np.allclose(jvp, U @ dU.T + dU @ U.T, rtol=1e-12, atol=1e-12)
    assert np.allclose(p.vjp(U.ravel(), W.ravel()).reshape(1100, 3), (W + W.T) @ U,
                       rtol=1e-12, atol=1e-11)
