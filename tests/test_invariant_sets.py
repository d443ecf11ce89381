"""Invariant coordinate subspaces of deep diagonal networks (paramgeo.flows.invariant_sets):
the field across a subspace is zero on it (and not off it), descent started on it stays on it
exactly, and the flow's visits follow Algorithm 1 (the saddle recursion, a second route) more
closely as alpha shrinks.

Covers: ``paramgeo.flows.descent``, ``paramgeo.flows.invariant_sets``,
``paramgeo.losses.predictor``, ``paramgeo_plugins.deep_diagonal``, ``paramgeo_plugins.lora``,
``paramgeo_plugins.uut``.
"""

import numpy as np
import pytest

import paramgeo
from paramgeo.errors import ParamgeoError, ShapeError
from paramgeo.flows import gradient_descent
from paramgeo.flows.invariant_sets import _degree, invariant_residual, sim_visits
from paramgeo.losses import LinearMeasurements

RNG = np.random.default_rng(1)
X = RNG.standard_normal((4, 8))
Y_SIGNED = X @ np.r_[1.0, -1.5, np.zeros(6)]
Y_PRODUCT = X @ np.r_[1.0, 1.5, 0.5, np.zeros(5)]


@pytest.mark.parametrize("variant", ["signed", "product"])
def test_coordinate_subspaces_are_invariant(variant):
    par = paramgeo.get("deep-diagonal", p=8, depth=3, variant=variant)
    theta = np.random.default_rng(2).uniform(0.3, 1.0, par.n)
    # u_0, u_3, v_1 (signed); coordinates 0 and 3 in two of the three layers (product)
    off = [0, 3, 9] if variant == "signed" else [0, 3, 8, 11]
    theta[off] = 0.0
    y = Y_SIGNED if variant == "signed" else Y_PRODUCT
    assert invariant_residual(par, X, y, theta, off) == 0.0
    if variant == "product":  # one zero layer is not invariant: w1_0' = -w2_0 w3_0 g_0
        one = np.random.default_rng(2).uniform(0.3, 1.0, par.n)
        one[0] = 0.0
        assert invariant_residual(par, X, y, one, [0]) > 1e-3
    near = theta.copy()
    near[off] = 1e-2
    with pytest.raises(ShapeError, match="must be zero"):
        invariant_residual(par, X, y, near, off)
    traj = gradient_descent(par, LinearMeasurements(X, y), theta, 200, 0.01, record_every=50)
    assert np.all(traj.thetas[:, off] == 0.0) and traj.losses[-1] < traj.losses[0]


def test_visits_follow_algorithm_one():
    par = paramgeo.get("deep-diagonal", p=8, depth=4, variant="signed")
    res = sim_visits(par, X, Y_SIGNED, 1e-3)
    assert res.matched and res.entry_error < 0.03
    assert len(res.visits) == len(res.algorithm) + 1  # one transit: coordinate 2 switching off
    prod = paramgeo.get("deep-diagonal", p=8, depth=3, variant="product")
    coarse, fine = (sim_visits(prod, X, Y_PRODUCT, a) for a in (1e-2, 1e-4))
    assert coarse.matched and fine.matched and fine.entry_error < coarse.entry_error / 5
    with pytest.raises(ParamgeoError, match="no mirror potential"):
        sim_visits(paramgeo.get("uut", d=3, r=1), X, Y_SIGNED, 1e-3)


def test_visits_read_any_diagonal_network_through_the_contract():
    """A third-party copy of the signed deep diagonal network under another name gets the same
    visits (nothing is read by plugin name), and a phi that is not homogeneous of degree
    >= 2 is refused by name with the fix."""
    base = type(paramgeo.get("deep-diagonal", p=8, depth=4))
    Mine = type("MyDiagonal", (base,), {"name": "my-diagonal"})
    mine, par = Mine(p=8, depth=4, variant="signed"), paramgeo.get(
        "deep-diagonal", p=8, depth=4, variant="signed")
    ours, theirs = sim_visits(par, X, Y_SIGNED, 1e-3), sim_visits(mine, X, Y_SIGNED, 1e-3)
    assert theirs.visits == ours.visits and theirs.depth == 4
    assert _degree(mine, mine.random_point(np.random.default_rng(0))) == 4
    lora = paramgeo.get("lora", m=2, n=2, r=1)
    with pytest.raises(ShapeError, match="lora is not homogeneous"):
        _degree(lora, lora.random_point(np.random.default_rng(0)))
