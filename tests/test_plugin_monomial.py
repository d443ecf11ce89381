"""monomial: coefficients against direct evaluation of the network, closed-form derivatives
against autograd and finite differences, generic ranks against the literature (Alexander-
Hirschowitz, symmetric matrices, Kileel-Trager-Bruna), symmetry invariance, architecture.

Covers: ``paramgeo.cli``, ``paramgeo.reports.contract_check``, ``paramgeo.reports.testing``,
``paramgeo_plugins.monomial``.
"""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import paramgeo
from paramgeo import Parameterization, geometry
from paramgeo.reports.contract_check import finite_difference_jacobian
from paramgeo.reports.testing import assert_contract

SIZES = [((2, 3, 1), 2), ((2, 2, 1), 4), ((3, 2, 2), 3), ((2, 3, 3, 1), 3), ((3, 2, 2, 2), 2),
         ((2, 2, 2, 2, 1), 2), ((3, 4), 2)]


def make(widths, degree):
    return paramgeo.get("monomial", widths=widths, degree=degree)


def network(param, theta, x):
    """The network itself, evaluated numerically at the points x (N, n_0): (N, n_L)."""
    Ws = list(param.spec.unpack(theta).values())
    h = x.T
    for W in Ws[:-1]:
        h = (W @ h) ** param.degree
    return (Ws[-1] @ h).T


@pytest.mark.parametrize("widths,degree", SIZES)
def test_contract(widths, degree):
    assert_contract(make(widths, degree))


@pytest.mark.parametrize("widths,degree", SIZES)
def test_coefficients_reproduce_the_network(widths, degree, rng):
    """sum_alpha c_{o,alpha} x^alpha == f_o(x) at random x: the coefficients are exact."""
    param = make(widths, degree)
    theta = param.random_point(rng)
    C = np.asarray(param.forward(theta))
    x = rng.uniform(-1, 1, size=(20, widths[0]))
    powers = np.prod(x[:, None, :] ** param.monomials()[None, :, :], axis=2)  # (N, M)
    np.testing.assert_allclose(powers @ C.T, network(param, theta, x), rtol=1e-10, atol=1e-12)
    assert param.predictor_shape == (widths[-1], math.comb(widths[0] + param.D - 1, param.D))


def test_monomial_order_and_symbolic():
    """Documented order: combinations_with_replacement, x_0^D first, x_{n-1}^D last; sympy's
    coefficients land in the same slots."""
    import sympy

    param = make((3, 2, 1), 2)
    E = param.monomials()
    assert E.tolist() == [[2, 0, 0], [1, 1, 0], [1, 0, 1], [0, 2, 0], [0, 1, 1], [0, 0, 2]]
    symbols, exprs = param.symbolic()
    assert [str(s) for s in symbols[:3]] == ["W1_0_0", "W1_0_1", "W1_0_2"]
    # f = a (w.x)^2 + b (u.x)^2: coefficient of x_0 x_1 is 2 a w_0 w_1 + 2 b u_0 u_1
    a, b = symbols[6], symbols[7]
    w0, w1, u0, u1 = symbols[0], symbols[1], symbols[3], symbols[4]
    assert sympy.expand(exprs[1] - (2 * a * w0 * w1 + 2 * b * u0 * u1)) == 0


@pytest.mark.parametrize("widths,degree", [((2, 3, 3, 1), 3), ((3, 2, 2, 2), 2), ((2, 2, 3), 3)])
def test_closed_forms_against_autograd_and_finite_differences(widths, degree, rng):
    param = make(widths, degree)
    theta = param.random_point(rng)
    J = param.jacobian(theta)
    scale = np.abs(J).max()
    np.testing.assert_allclose(J, Parameterization.jacobian(param, theta), atol=1e-12 * scale)
    np.testing.assert_allclose(J, finite_difference_jacobian(param, theta), atol=1e-6 * scale)
    v, w = rng.standard_normal(param.n), rng.standard_normal(param.m)
    np.testing.assert_allclose(param.jvp(theta, v), Parameterization.jvp(param, theta, v),
                               atol=1e-12 * scale)
    np.testing.assert_allclose(param.vjp(theta, w), Parameterization.vjp(param, theta, w),
                               atol=1e-11 * scale)


def test_second_derivative_through_the_scatter_primitive(rng):
    """jacobian_derivative (autograd of autograd) agrees with finite differences of J."""
    param = make((2, 2, 1), 3)
    theta, v = param.random_point(rng), rng.standard_normal(param.n)
    h = 1e-6
    fd = (param.jacobian(theta + h * v) - param.jacobian(theta - h * v)) / (2 * h)
    np.testing.assert_allclose(param.jacobian_derivative(theta, v), fd, atol=1e-6)


# --------------------------------------------------------------------- ranks from the literature
def symmetric_rank_dim(n, r):
    """dim of n x n symmetric matrices of rank <= r: n r - r(r-1)/2 (r <= n)."""
    r = min(r, n)
    return n * r - r * (r - 1) // 2


AH_EXCEPTIONS = {(3, 4, 5), (4, 4, 9), (5, 4, 14), (5, 3, 7)}  # (n_0, k, r), k >= 3


def alexander_hirschowitz(n, k, r):
    """Affine dimension of the r-th secant of the degree-k Veronese of P^{n-1}, k >= 3:
    min(r n, C(n+k-1, k)), minus one at the four exceptional (n, k, r)."""
    expected = min(r * n, math.comb(n + k - 1, k))
    return expected - 1 if (n, k, r) in AH_EXCEPTIONS else expected


@pytest.mark.parametrize("n0,r", [(2, 1), (2, 2), (3, 2), (4, 3), (3, 5), (4, 2)])
def test_quadratic_shallow_rank_is_symmetric_matrix_rank(n0, r):
    """k = 2, one output: f = x^T W^T diag(a) W x, a symmetric matrix of rank <= r."""
    assert paramgeo.generic_rank(make((n0, r, 1), 2)) == symmetric_rank_dim(n0, r)


@pytest.mark.parametrize("n0,k,r", [(2, 4, 2), (2, 3, 3), (3, 3, 3), (3, 3, 4), (3, 4, 5),
                                    (4, 4, 9), (5, 3, 7), (3, 4, 6), (4, 3, 5)])
def test_shallow_rank_is_alexander_hirschowitz(n0, k, r):
    assert paramgeo.generic_rank(make((n0, r, 1), k)) == alexander_hirschowitz(n0, k, r)


@pytest.mark.parametrize("widths,degree", [((2, 2, 1), 2), ((2, 2, 1), 4), ((2, 3, 1), 3),
                                           ((2, 3, 3, 1), 3), ((3, 4, 1), 3)])
def test_kileel_trager_bruna_bound_attained(widths, degree):
    """Non-defective architectures (Kileel-Trager-Bruna 2019 and Alexander-Hirschowitz): the
    rank equals min(n_params - n_hidden, n_coefficients), written out here from the widths."""
    n_params = sum(a * b for a, b in zip(widths, widths[1:]))
    n_hidden = sum(widths[1:-1])
    D = degree ** (len(widths) - 2)
    n_coeff = widths[-1] * math.comb(widths[0] + D - 1, D)
    expected = min(n_params - n_hidden, n_coeff)
    param = make(widths, degree)
    assert param.kileel_bound() == expected
    assert paramgeo.generic_rank(param) == expected


def test_bottleneck_of_width_one_is_defective():
    """widths (2,1,2,1), k = 3: f = c (w.x)^9 = (c^(1/9) w.x)^9, a 2-dimensional set, below the
    KTB bound 6 - 3 = 3 (Kileel-Trager-Bruna's bottleneck)."""
    param = make((2, 1, 2, 1), 3)
    assert param.kileel_bound() == 3
    assert paramgeo.generic_rank(param) == 2


def test_acceptance_sizes_of_issue_4():
    big = make((6, 10, 10, 1), 3)
    assert (big.m, big.n) == (2002, 170)


# --------------------------------------------------------------------- symmetry
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.sampled_from(SIZES))
def test_invariance_under_random_group_elements(seed, size):
    rng = np.random.default_rng(seed)
    param = make(*size)
    group = param.symmetry()
    theta = param.random_point(rng)
    base = np.asarray(param.forward(theta))
    for _ in range(3):
        moved = group.act(group.random_element(rng), theta)
        np.testing.assert_allclose(param.forward(moved), base, rtol=1e-9,
                                   atol=1e-11 * np.abs(base).max())


@pytest.mark.parametrize("widths,degree", [((2, 3, 1), 2), ((2, 3, 3, 1), 3), ((3, 2, 4, 2), 3)])
def test_torus_dimension_is_number_of_hidden_neurons(widths, degree, rng):
    param = make(widths, degree)
    group = param.symmetry()
    assert group.dim == sum(widths[1:-1])
    assert geometry.orbit_dim(param, param.random_point(rng)) == sum(widths[1:-1])


def test_neuron_rescaling_by_hand(rng):
    """Incoming weights times c, outgoing times c^(-k) leaves f unchanged; c^(-k+1) does not."""
    param = make((2, 3, 1), 3)
    theta = param.random_point(rng)
    W1, W2 = (b.copy() for b in param.spec.unpack(theta).values())
    c = -1.7
    good = param.spec.pack(W1 * np.array([[c], [1], [1]]), W2 * np.array([[c ** -3, 1, 1]]))
    bad = param.spec.pack(W1 * np.array([[c], [1], [1]]), W2 * np.array([[c ** -2, 1, 1]]))
    np.testing.assert_allclose(param.forward(good), param.forward(theta))
    assert not np.allclose(param.forward(bad), param.forward(theta))


def test_permutations_are_graph_automorphisms(rng):
    """Each generator relabels the architecture graph onto itself (fixing inputs, outputs) and
    permutes theta along the edges; it leaves f invariant."""
    param = make((2, 3, 3, 1), 3)
    graph = param.architecture()
    classes = param.permutation_group().classes
    assert [len(index) for _, index in classes] == [3, 3]  # two hidden layers of width 3
    perms = []
    for _, index in classes:  # the adjacent transpositions of each class
        for a in range(len(index) - 1):
            perm = np.arange(param.n)
            perm[index[a]], perm[index[a + 1]] = index[a + 1], index[a]
            perms.append(perm)
    theta = param.random_point(rng)
    index_of = {(u, v): i for u, v, i in graph.edges(data="index")}
    for perm in perms:
        assert sorted(perm) == list(range(param.n))
        moved = perm  # (g . theta)[j] = theta[perm[j]]
        edge_of = {i: e for e, i in index_of.items()}
        # the edge relabelling j -> perm[j] must map edges to edges with the same layers
        for j in range(param.n):
            (u1, v1), (u2, v2) = edge_of[j], edge_of[moved[j]]
            assert graph.nodes[u1]["layer"] == graph.nodes[u2]["layer"]
            assert graph.nodes[v1]["layer"] == graph.nodes[v2]["layer"]
        np.testing.assert_allclose(param.forward(theta[perm]), param.forward(theta))


# --------------------------------------------------------------------- architecture, subnetworks
def test_architecture_layers_and_indices():
    param = make((2, 3, 3, 1), 3)
    graph = param.architecture()
    layers = sorted(d for _, d in graph.nodes(data="layer"))
    assert layers == [0] * 2 + [1] * 3 + [2] * 3 + [3]
    assert sorted(i for _, _, i in graph.edges(data="index")) == list(range(param.n))
    W1 = param.spec.slices["W1"].start
    assert graph.edges["x1", "h1_2"]["index"] == W1 + 2 * 2 + 1  # W1[2, 1]


@pytest.mark.parametrize("change,expected", [("outgoing", 3), ("incoming", 2),
                                             ("proportional", 2), ("none", 4)])
def test_subnetwork_ranks_widths_221_degree_4(change, expected, rng):
    """f = a_1 l_1^4 + a_2 l_2^4 (l_j = w_j . x): J spans {l_j^4, a_j l_j^3 x_i}. With a_2 = 0
    that is {l_1^4, l_1^3 x_i, l_2^4}: 3; with w_2 = 0 or w_2 = c w_1: {l_1^4, l_1^3 x_i}: 2;
    generically l_1^3 x_i, l_2^3 x_i span 4 of the 5 quartics."""
    param = make((2, 2, 1), 4)
    W1, W2 = (b.copy() for b in param.spec.unpack(param.random_point(rng)).values())
    if change == "outgoing":
        W2[0, 1] = 0.0
    elif change == "incoming":
        W1[1] = 0.0
    elif change == "proportional":
        W1[1] = -0.7 * W1[0]
    theta = param.spec.pack(W1, W2)
    assert paramgeo.rank_at(param, theta).rank == expected


def test_bad_sizes_are_refused():
    with pytest.raises(paramgeo.SizeError, match="at least an input and an output"):
        make((3,), 2)
    with pytest.raises(paramgeo.SizeError, match=">= 2"):
        make((2, 2, 1), 1)
    with pytest.raises(paramgeo.SizeError, match="coefficients"):
        make((8, 8, 8, 8, 1), 3)


@pytest.mark.parametrize("widths,degree,n,m,rank", [("2,2,1", 2, 6, 3, 3), ("2,3,3,1", 3, 18, 10, 10)])
def test_describe_acceptance_json(widths, degree, n, m, rank):
    from paramgeo.cli import main

    result = CliRunner().invoke(main, ["describe", "monomial", "-p", f"widths={widths}",
                                       "-p", f"degree={degree}", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["n"], data["m"], data["generic_rank"]) == (n, m, rank)
