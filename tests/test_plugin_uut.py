"""uut's products (the JVP as one product, the VJP in one pass over tiles of W) against
autograd's forward / reverse mode and the plugin's closed-form Jacobian, on grids of several
tiles (d not a multiple of the tile) and below the tile threshold.

Covers: ``paramgeo_plugins.uut``.
"""

import numpy as np
import pytest

import paramgeo
from paramgeo import Parameterization


@pytest.mark.parametrize("d,r,tile", [(10, 3, 3), (11, 2, 4), (9, 4, 512), (7, 2, 1)])
def test_tiled_products_match_autograd(monkeypatch, d, r, tile):
    p = paramgeo.get("uut", d=d, r=r)
    monkeypatch.setattr(type(p), "TILE", tile)
    monkeypatch.setattr(type(p), "TILED_MIN_D", 2 * tile)
    rng = np.random.default_rng(d * r)
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    J = p.jacobian(theta)
    for mine, auto, dense in ((p.jvp(theta, v), Parameterization.jvp(p, theta, v), J @ v),
                              (p.vjp(theta, w), Parameterization.vjp(p, theta, w), J.T @ w)):
        assert np.allclose(mine, auto, rtol=1e-12, atol=1e-12)
        assert np.allclose(mine, dense, rtol=1e-12, atol=1e-12)


def test_default_tiles_past_the_threshold():
    """d = 2400 with the default TILE = 256 (past TILED_MIN_D): nine full tiles and a ragged
    one, against the plain expressions U dU^T + dU U^T and (W + W^T) U."""
    d = 2400
    p = paramgeo.get("uut", d=d, r=3)
    assert p.d >= p.TILED_MIN_D and d % p.TILE
    rng = np.random.default_rng(0)
    U, dU, W = (rng.standard_normal(s) for s in ((d, 3), (d, 3), (d, d)))
    jvp = p.jvp(U.ravel(), dU.ravel()).reshape(d, d)
    assert np.allclose(jvp, U @ dU.T + dU @ U.T, rtol=1e-12, atol=1e-12)
    assert np.allclose(p.vjp(U.ravel(), W.ravel()).reshape(d, 3), (W + W.T) @ U,
                       rtol=1e-12, atol=1e-11)
