"""deep-diagonal: closed forms against autograd and finite differences, ranks against the
closed forms of the literature, symmetry invariance under random group elements, architecture.

Covers: ``paramgeo.cli``, ``paramgeo.reports.contract_check``, ``paramgeo.reports.description``,
``paramgeo.reports.testing``, ``paramgeo_plugins.deep_diagonal``.
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import paramgeo
from paramgeo import Parameterization, geometry
from paramgeo.reports.contract_check import finite_difference_jacobian
from paramgeo.reports.testing import assert_contract

VARIANTS = [("product", 1), ("product", 2), ("product", 3), ("product", 4),
            ("signed", 2), ("signed", 3), ("signed", 4), ("signed", 5)]


def make(variant, depth, p=4):
    return paramgeo.get("deep-diagonal", p=p, depth=depth, variant=variant)


@pytest.mark.parametrize("variant,depth", VARIANTS)
def test_contract(variant, depth):
    assert_contract(make(variant, depth))


def with_zeros(param, rng):
    """A random point with zero entries placed so that some coordinates lose rank."""
    theta = param.random_point(rng)
    p = param.p
    for j in (0, p, p + 1):  # coordinate 0: two zeros (u and v); coordinate 1: one zero
        if j < param.n:
            theta[j] = 0.0
    return theta


@pytest.mark.parametrize("variant,depth", VARIANTS)
def test_closed_forms_against_autograd_and_finite_differences(variant, depth, rng):
    param = make(variant, depth)
    for theta in (param.random_point(rng), with_zeros(param, rng)):
        J = param.jacobian(theta)
        np.testing.assert_allclose(J, Parameterization.jacobian(param, theta), atol=1e-12)
        np.testing.assert_allclose(J, finite_difference_jacobian(param, theta), atol=1e-7)
        v, w = rng.standard_normal(param.n), rng.standard_normal(param.m)
        np.testing.assert_allclose(param.jvp(theta, v), Parameterization.jvp(param, theta, v),
                                   atol=1e-12)
        np.testing.assert_allclose(param.vjp(theta, w), Parameterization.vjp(param, theta, w),
                                   atol=1e-12)
        # second derivatives: closed form against autograd's reverse over reverse and against
        # central differences of the VJP along v (exact zeros included)
        hv = param.hessian_vp(theta, w, v)
        np.testing.assert_allclose(hv, Parameterization.hessian_vp(param, theta, w, v),
                                   atol=1e-11)
        h = 1e-6
        fd = (param.vjp(theta + h * v, w) - param.vjp(theta - h * v, w)) / (2 * h)
        np.testing.assert_allclose(hv, fd, atol=1e-6 * max(1.0, np.abs(fd).max()))


def product_rank_formula(W):
    """Rank of J for beta = prod_l w_l: coordinates with at most one zero factor."""
    return int(np.sum(np.sum(W == 0, axis=0) <= 1))


def away_from_zero(rng, shape):
    """Entries of magnitude in [0.5, 2] with random signs, so that u^{L-1} is not tiny and the
    rank decision is clear-cut."""
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def signed_rank_formula(u, v):
    """Rank of J = [diag(L u^{L-1}), -diag(L v^{L-1})]: coordinates with (u_i, v_i) != 0."""
    return int(np.sum((u != 0) | (v != 0)))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 6), depth=st.integers(1, 4),
       zero_prob=st.sampled_from([0.0, 0.3, 0.6]))
def test_product_rank_matches_closed_form(seed, p, depth, zero_prob):
    rng = np.random.default_rng(seed)
    param = make("product", depth, p)
    W = away_from_zero(rng, (depth, p)) * (rng.random((depth, p)) >= zero_prob)
    assert paramgeo.rank_at(param, W.ravel()).rank == product_rank_formula(W)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 6), depth=st.integers(2, 5),
       zero_prob=st.sampled_from([0.0, 0.4, 0.7]))
def test_signed_rank_matches_closed_form(seed, p, depth, zero_prob):
    rng = np.random.default_rng(seed)
    param = make("signed", depth, p)
    u = away_from_zero(rng, p) * (rng.random(p) >= zero_prob)
    v = away_from_zero(rng, p) * (rng.random(p) >= zero_prob)
    assert paramgeo.rank_at(param, np.concatenate([u, v])).rank == signed_rank_formula(u, v)


@pytest.mark.parametrize("variant,depth", VARIANTS)
@pytest.mark.parametrize("p", [1, 3, 6])
def test_generic_rank_is_p(variant, depth, p):
    assert paramgeo.generic_rank(make(variant, depth, p)) == p


@pytest.mark.parametrize("p,depth", [(1, 2), (3, 3), (4, 4), (5, 1)])
def test_product_torus_dimension_and_quotient(p, depth, rng):
    param = make("product", depth, p)
    group = param.symmetry()
    assert group.dim == p * (depth - 1)
    theta = param.random_point(rng)
    assert geometry.orbit_dim(param, theta) == p * (depth - 1)
    assert param.n - geometry.orbit_dim(param, theta) == p  # quotient = generic rank


def test_product_orbit_degenerates_with_two_zero_factors(rng):
    """At w_{1,0} = w_{2,0} = 0 the rescalings fix both entries: the orbit loses dimension."""
    param = make("product", 3, 4)
    theta = param.random_point(rng)
    theta[0] = theta[4] = 0.0
    assert geometry.orbit_dim(param, theta) == 4 * 2 - 1


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), variant_depth=st.sampled_from(VARIANTS))
def test_invariance_under_random_group_elements(seed, variant_depth):
    rng = np.random.default_rng(seed)
    param = make(*variant_depth)
    group = param.symmetry()
    theta = param.random_point(rng)
    for _ in range(3):
        moved = group.act(group.random_element(rng), theta)
        np.testing.assert_allclose(param.forward(moved), param.forward(theta), rtol=1e-10,
                                   atol=1e-12)


def test_product_sign_flips_and_factor_swaps():
    """Flipping two factors of a coordinate and swapping factors keep beta; one flip does not."""
    param = make("product", 3, 2)
    W = np.array([[1.5, -2.0], [0.5, 3.0], [-1.0, 0.25]])
    beta = param.forward(W.ravel())
    two = W.copy()
    two[0, 1] *= -1
    two[2, 1] *= -1
    np.testing.assert_allclose(param.forward(two.ravel()), beta)
    one = W.copy()
    one[1, 0] *= -1
    assert not np.allclose(param.forward(one.ravel()), beta)
    swapped = W.copy()
    swapped[[0, 2], 1] = W[[2, 0], 1]
    np.testing.assert_allclose(param.forward(swapped.ravel()), beta)
    # the torus element with a = (-1, ..., ) realises the double flip
    torus = param.symmetry().factors[0]
    c = np.ones(torus.exponents.shape[0])
    c[[2, 3]] = -1.0  # generators (coordinate 1, l=1) and (coordinate 1, l=2)
    np.testing.assert_allclose(torus.act(c, W.ravel()), two.ravel())


@pytest.mark.parametrize("depth", [2, 3, 4, 5])
def test_signed_discrete_symmetries_by_parity(depth, rng):
    """Even L: u_i -> -u_i alone is a symmetry and (u, v) -> (-v, -u) is not; odd L: the reverse."""
    param = make("signed", depth, 3)
    u, v = rng.standard_normal(3), rng.standard_normal(3)
    beta = param.forward(np.concatenate([u, v]))
    flip = u.copy()
    flip[1] *= -1
    swap_u, swap_v = u.copy(), v.copy()
    swap_u[1], swap_v[1] = -v[1], -u[1]
    flips_ok = np.allclose(param.forward(np.concatenate([flip, v])), beta)
    swap_ok = np.allclose(param.forward(np.concatenate([swap_u, swap_v])), beta)
    assert flips_ok == (depth % 2 == 0)
    assert swap_ok == (depth % 2 == 1)


def test_signed_depth_two_has_lorentz_symmetry_deeper_does_not(rng):
    """u^2 - v^2 is invariant under hyperbolic rotations; u^3 - v^3 is not. At depth 2 the
    declared group has dimension p and the quotient dimension equals the generic rank."""
    two, three = make("signed", 2, 3), make("signed", 3, 3)
    assert two.symmetry().dim == 3 and three.symmetry().dim == 0
    from paramgeo_plugins.deep_diagonal import HyperbolicRotations

    group = HyperbolicRotations(3)
    theta = rng.standard_normal(6)
    t = group.random_element(rng)
    np.testing.assert_allclose(two.forward(group.act(t, theta)), two.forward(theta))
    assert not np.allclose(three.forward(group.act(t, theta)), three.forward(theta))
    from paramgeo.reports.description import describe

    desc = describe(two)
    assert desc.quotient_dim == 3 and desc.generic_rank == 3


def inactive_hidden(graph, theta):
    """Hidden neurons with all incoming or all outgoing weights zero (read off the graph)."""
    L = max(d for _, d in graph.nodes(data="layer"))
    out = set()
    for node, layer in graph.nodes(data="layer"):
        if 0 < layer < L:
            ins = [theta[i] for _, _, i in graph.in_edges(node, data="index")]
            outs = [theta[i] for _, _, i in graph.out_edges(node, data="index")]
            if not np.any(ins) or not np.any(outs):
                out.add(node)
    return out


def test_product_architecture_shows_zero_coordinates_as_subnetworks(rng):
    param = make("product", 3, 4)
    graph = param.architecture()
    assert {d for _, d in graph.nodes(data="layer")} == {0, 1, 2, 3}
    assert graph.number_of_edges() == param.n
    assert sorted(i for _, _, i in graph.edges(data="index")) == list(range(param.n))
    theta = param.random_point(rng)
    assert inactive_hidden(graph, theta) == set()
    theta[4 + 2] = 0.0  # w_2 of coordinate 2: h1_2 loses its output, h2_2 its input
    assert inactive_hidden(graph, theta) == {"h1_2", "h2_2"}
    assert param.forward(theta)[2] == 0.0


def test_signed_architecture_tied_chains(rng):
    param = make("signed", 3, 2)
    graph = param.architecture()
    inputs = sorted(n for n, d in graph.nodes(data="layer") if d == 0)
    assert inputs == ["x+0", "x+1", "x-0", "x-1"]
    indices = [i for _, _, i in graph.edges(data="index")]
    assert sorted(set(indices)) == list(range(4)) and len(indices) == 4 * 3  # 3 tied edges each
    theta = param.random_point(rng)
    theta[0] = 0.0  # u_0 = 0 deletes the u-chain of coordinate 0
    assert inactive_hidden(graph, theta) == {"h+1_0", "h+2_0"}


def test_signed_depth_one_is_refused():
    with pytest.raises(paramgeo.SizeError, match="depth >= 2"):
        make("signed", 1)
    with pytest.raises(paramgeo.SizeError, match="variant"):
        paramgeo.get("deep-diagonal", variant="tanh")


def test_describe_acceptance_json():
    from paramgeo.cli import main

    result = CliRunner().invoke(main, ["describe", "deep-diagonal", "-p", "p=4", "-p", "depth=3",
                                       "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["n"] == 12 and data["generic_rank"] == 4
    assert data["symmetry"]["dim"] == 8 and data["quotient_dim"] == 4
