"""The deep-linear plugin: phi = W_L ... W_1, its GL(n_1) x ... x GL(n_{L-1}) symmetry, its
generic rank and rank at a point, the critical-point cause and the balancedness laws.

Oracles: the dimension r(n_0 + n_L - r) of the determinantal variety (Trager, Kohn, Bruna 2020)
for the generic rank, read off independently from the SVD of the dense autograd Jacobian at
random points; the rank-at-a-point formula against the dense SVD of the autograd Jacobian at
points where random layers are made rank-deficient; the L = 2 case against uvt's formula.

Covers: ``paramgeo.cli``, ``paramgeo.dynamics.trajectory``, ``paramgeo.linalg.numerics``,
``paramgeo.losses.predictor``, ``paramgeo.mirror.report``, ``paramgeo_plugins.deep_linear``,
``paramgeo_plugins.monomial``.
"""

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo import Parameterization, critical
from paramgeo.cli import main
from paramgeo.errors import BudgetError, SizeError
from paramgeo.flows import gradient_flow
from paramgeo.losses import LinearMeasurements
from paramgeo.mirror import mirror
from paramgeo.linalg.numerics import decide_rank


def determinantal_dim(widths):
    r = min(widths)
    return r * (widths[0] + widths[-1] - r)


def low_rank_point(p, rng, ranks):
    """theta with W_l of rank ranks[l] (None: a random full-rank W_l)."""
    Ws = p.weights(p.random_point(rng))
    for l, k in enumerate(ranks):
        if k is not None:
            a, b = Ws[l].shape
            Ws[l] = rng.standard_normal((a, k)) @ rng.standard_normal((k, b))
    return np.concatenate([W.ravel() for W in Ws])


WIDTHS = [(6, 4, 3, 5), (3, 2, 2, 3), (2, 5, 4, 3), (4, 4, 4), (3, 1, 3), (5, 3, 4, 2, 6)]


@pytest.mark.parametrize("widths", WIDTHS)
def test_generic_rank_is_the_determinantal_variety_dimension(widths):
    p = paramgeo.get("deep-linear", widths=widths)
    autograd_rank = max(decide_rank(Parameterization.jacobian(p, p.random_point(
        np.random.default_rng(s))), warn=False).rank for s in range(2))
    assert autograd_rank == paramgeo.generic_rank(p) == determinantal_dim(widths)
    assert p.generic_rank_formula() == determinantal_dim(widths)


@pytest.mark.parametrize("widths", WIDTHS)
def test_rank_at_matches_the_dense_autograd_rank_at_low_rank_points(rng, widths):
    p = paramgeo.get("deep-linear", widths=widths)
    seen = set()
    for _ in range(8):
        ranks = [int(rng.integers(0, min(a, b) + 1)) if rng.random() < 0.6 else None
                 for a, b in zip(widths[1:], widths[:-1])]
        theta = low_rank_point(p, rng, ranks)
        closed = p.rank_at(theta).rank
        dense = decide_rank(Parameterization.jacobian(p, theta), warn=False).rank
        assert closed == dense, (ranks, closed, dense)
        seen.add(closed)
    assert len(seen) > 1  # the points visit several strata


def test_two_layers_reduce_to_the_uvt_formula(rng):
    # m n - (m - rank W2)(n - rank W1) for W2 W1 (m x n): uvt's rank at a point
    p = paramgeo.get("deep-linear", widths=(4, 3, 5))
    for k1, k2 in [(1, 3), (2, 0), (3, 2)]:
        theta = low_rank_point(p, rng, [k1, k2])
        assert p.rank_at(theta).rank == 5 * 4 - (5 - k2) * (4 - k1)


def test_symmetry_is_the_product_of_hidden_gl_and_acts_on_both_sides(rng):
    p = paramgeo.get("deep-linear", widths=(6, 4, 3, 5))
    G = p.symmetry()
    assert (G.name, G.dim) == ("GL(4) x GL(3)", 25)
    theta = p.random_point(rng)
    g1, g2 = G.random_element(rng)
    W1, W2, W3 = p.weights(G.act((g1, g2), theta))
    V1, V2, V3 = p.weights(theta)
    assert np.allclose(W1, np.linalg.solve(g1, V1)) and np.allclose(W3, V3 @ g2)
    assert np.allclose(W2, np.linalg.solve(g2, V2 @ g1))


def test_contract_check_passes():
    report = paramgeo.check(paramgeo.get("deep-linear", widths=(3, 2, 2, 3)))
    assert report.passed, report
    assert {"rank-at", "vertical-projector", "invariance"} <= {i.property for i in report.items}


def test_critical_names_the_layer_whose_weight_lost_rank(rng):
    p = paramgeo.get("deep-linear", widths=(6, 4, 3, 5))
    theta = low_rank_point(p, rng, [2, None, None])
    c = critical.classify(p, theta)
    # rank at the point from the formula: a = (3, 3, 5), b = (6, 2, 2) -> 18 + 6 + 10 - 6 - 6 = 22
    assert c.verdict == "critical" and c.rank == 22 == p.rank_at(theta).rank
    assert c.rank_drops == (("W1", 2, 4),)
    assert "W1 lost rank" in str(c) and "neuron" not in str(c)


def test_too_few_widths_is_a_clear_error():
    with pytest.raises(SizeError, match="at least two layers"):
        paramgeo.get("deep-linear", widths=(3, 2))
    res = CliRunner().invoke(main, ["describe", "deep-linear", "-p", "widths=3,2"])
    assert res.exit_code == 2 and res.output.startswith("Error:")


# ---------------------------------------------------------------- conservation laws and mirror
def test_mirror_gives_the_balancedness_laws_in_matrix_form():
    p = paramgeo.get("deep-linear", widths=(6, 4, 3, 5))
    rep = mirror(p)
    assert rep.laws_form == "matrix" and rep.laws_complete
    assert [law.split("  ")[0] for law in rep.laws] == ["W1 W1^T - W2^T W2",
                                                        "W2 W2^T - W3^T W3"]
    # 10 + 6 symmetric entries, all independent: n - dim Lie = 51 - 35
    assert (rep.n_laws, rep.algebra_dim) == (16, 35)


def test_the_printed_laws_are_conserved_along_gradient_flow(rng):
    p = paramgeo.get("deep-linear", widths=(3, 2, 2, 3))
    loss = LinearMeasurements(rng.standard_normal((6, p.m)), rng.standard_normal(6))
    theta0 = p.random_point(rng)
    flow = gradient_flow(p, loss, theta0, 3.0, rtol=1e-10, atol=1e-12, n_records=20)
    assert flow.losses[-1] < 0.5 * flow.losses[0]  # the flow moved
    W0, Wt = p.weights(flow.thetas[0]), p.weights(flow.thetas[-1])
    for i in range(2):  # W_i W_i^T - W_{i+1}^T W_{i+1}, computed from the weights directly
        before = W0[i] @ W0[i].T - W0[i + 1].T @ W0[i + 1]
        after = Wt[i] @ Wt[i].T - Wt[i + 1].T @ Wt[i + 1]
        assert np.abs(after - before).max() < 1e-7 * max(1.0, np.abs(before).max())
    assert [lab for lab, _ in flow.conserved_laws] == ["W1 W1^T - W2^T W2", "W2 W2^T - W3^T W3"]
    assert max(d for _, d in flow.conserved_laws) < 1e-8


def test_mirror_refuses_in_one_line_beyond_its_budget():
    # monomial networks have no matrix laws: the Lie algebra is needed, and its next bracket
    # level is estimated and refused
    p = paramgeo.get("monomial", widths=(2, 2, 1), degree=2)
    with pytest.raises(BudgetError, match=r"estimated at about .* over the budget of 0.001 s"):
        mirror(p, budget=1e-3)
    res = CliRunner().invoke(main, ["mirror", "monomial", "-p", "widths=2,2,1",
                                    "--budget", "0.001"])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "--budget" in res.output


def test_mirror_past_the_budget_still_prints_the_matrix_laws():
    # widths 2,3,3,2: the brackets at the point span 8 < 21 - 12, so the nested route would
    # run; past the budget the laws are printed and the algebra is a lower bound
    rep = mirror(paramgeo.get("deep-linear", widths=(2, 3, 3, 2)), budget=1e-3)
    assert not rep.algebra_stabilised and rep.algebra_dim >= 8 and "stopped:" in str(rep)
    assert "W2 W2^T - W3^T W3  (3 x 3 symmetric: 6 entries)" in str(rep)
    assert "completeness not certified" in str(rep)


def test_mirror_cli_prints_uvt_law_in_matrix_form():
    res = CliRunner().invoke(main, ["mirror", "uvt", "-p", "m=3", "-p", "n=2", "-p", "r=2"],
                             catch_exceptions=False)
    assert res.exit_code == 0 and "  U^T U - V^T V  (2 x 2 symmetric: 3 entries)" in res.output


def test_a_middle_weight_losing_rank_is_named_once(rng):
    # W2 sits between GL(4) and GL(3): one rank drop, not one per factor
    p = paramgeo.get("deep-linear", widths=(6, 4, 3, 5))
    c = critical.classify(p, low_rank_point(p, rng, [None, 1, None]))
    # a = (1, 3, 5), b = (6, 4, 1): 6 + 12 + 5 - 4 - 3 = 16
    assert c.rank_drops == (("W2", 1, 3),) and c.rank == 16
