"""The critical-point engine against closed-form ranks and independent routes.

Oracles: the rank of U U^T's Jacobian at rank k, d k - k(k-1)/2 (dimension of rank-k PSD
matrices); Hadamard's rank p - #{i : u_i = v_i = 0}; exact sympy ranks of the coefficient map of
a two-neuron monomial network; autograd Hessians; the closed-form Hessian -2 (Y kron I) of the
Burer-Monteiro loss at U = 0.

Covers: ``paramgeo.cli``, ``paramgeo.contract.registry``, ``paramgeo.critical.classification``,
``paramgeo.critical.loss_points``, ``paramgeo.critical.searching``,
``paramgeo.critical.stratification``, ``paramgeo.linalg.numerics``, ``paramgeo.losses.predictor``,
``paramgeo_plugins.hadamard``, ``paramgeo_plugins.monomial``, ``paramgeo_plugins.uut``,
``paramgeo_plugins.uvt``.
"""

import json
import warnings

import autograd
import autograd.numpy as anp
import networkx as nx
import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.cli import main
from paramgeo.critical import (
    classify,
    loss_hessian,
    loss_point,
    search,
    near_stratum,
    strata,
)
from paramgeo.errors import ParamgeoError
from paramgeo.linalg import RankPolicy
from paramgeo.losses import CallableLoss, LinearMeasurements


def uut_rank(d, k):
    """Rank of d(UU^T) at rank U = k (Massart-Absil): d k - k(k-1)/2."""
    return d * k - k * (k - 1) // 2


def rank_k_factor(rng, d, r, k):
    return (rng.standard_normal((d, k)) @ rng.standard_normal((k, r))).ravel()


# ------------------------------------------------------------------ uut / factorizations

def test_uut_rank_one_is_the_rank_one_psd_stratum_not_an_orbit_drop(rng):
    """r = 2, rank U = 1: the stabilizer is one reflection, the orbit keeps dimension 1, and
    the rank d k - k(k-1)/2 = 4 is that of the rank-1 PSD stratum: the factor lost rank."""
    p = paramgeo.get("uut", d=4, r=2)
    c = classify(p, rank_k_factor(rng, 4, 2, 1))
    assert c.verdict == "critical" and c.causes == ("factor-rank",)
    assert c.orbit_dim == c.generic_orbit_dim == 1 and c.rank_drops == (("U", 1, 2),)
    assert "U lost rank 1 (rank 1 of 2)" in str(c) and "orbit" not in c.explanation
    assert (c.rank, c.generic_rank) == (uut_rank(4, 1), uut_rank(4, 2)) == (4, 7)
    assert c.kernel_dim == 8 - 4 and c.rank_equals_stratum_generic
    assert c.stratum_generic_rank == 4 and c.on_proper_stratum


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_uut_rank_k_matches_closed_form(rng, k):
    d, r = 5, 3
    p = paramgeo.get("uut", d=d, r=r)
    theta = rank_k_factor(rng, d, r, k) if k else np.zeros(p.n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = classify(p, theta)
    assert c.rank == uut_rank(d, k) and c.generic_rank == uut_rank(d, r)
    assert c.verdict == ("regular" if k == r else "critical")
    assert c.stratum_generic_rank == uut_rank(d, k)
    # the orbit dimension of O(3) at rank k: dim O(3) - dim O(3 - k)
    assert c.orbit_dim == 3 - (3 - k) * (2 - k) // 2 if k < 3 else c.orbit_dim == 3


def test_uut_strata_chain_with_closed_form_ranks():
    d, r = 5, 3
    s = strata(paramgeo.get("uut", d=d, r=r))
    ranks = sorted((data["generic_rank"] for _, data in s.graph.nodes(data=True)), reverse=True)
    assert ranks == [uut_rank(d, k) for k in (3, 2, 1, 0)]
    assert s.top == "full" and s.graph.nodes["full"]["generic_rank"] == uut_rank(d, r)
    assert nx.is_directed_acyclic_graph(s.graph) and s.graph.number_of_edges() == 3


def test_uvt_factor_rank_drops_without_stabilizer(rng):
    """U V^T with a rank-deficient U and full V: no stabilizer, a factor channel vanishes;
    rank of d(UV^T) at rank U = a, rank V = b (a + b <= r... here a = r - 1, b = r):
    m b + n a - a b when the kernels pair trivially."""
    if "uvt" not in paramgeo.available():
        pytest.skip("uvt plugin not installed")
    m_, n_, r = 4, 3, 2
    p = paramgeo.get("uvt", m=m_, n=n_, r=r)
    U = np.outer(rng.standard_normal(m_), rng.standard_normal(r))
    V = rng.standard_normal((n_, r))
    theta = p.spec.pack(U=U, V=V)
    c = classify(p, theta)
    # image {dU V^T + U dV^T}: rank of UV^T is 1 = a; dimension m*1 + n*1 - 1*1 ... from
    # the tangent space of rank-1 matrices (m + n - 1) plus the dU V^T directions outside it
    J_rank = np.linalg.matrix_rank(p.jacobian(theta))
    assert c.rank == J_rank < c.generic_rank == r * (m_ + n_) - r * r
    assert c.verdict == "critical" and "orbit-degenerate" not in c.causes
    assert c.causes == ("factor-rank",) and c.rank_drops == (("U", 1, 2),)


# ------------------------------------------------------------------ hadamard

def test_hadamard_removed_coordinate_is_critical(rng):
    h = paramgeo.get("hadamard", p=5)
    t = h.random_point(rng)
    t[0] = t[5] = 0.0
    c = classify(h, t)
    assert c.verdict == "critical" and c.rank == 4 and c.generic_rank == 5
    assert "subnetwork" in c.causes and "orbit-degenerate" in c.causes
    assert c.inactive == (("h0", "removed"),)
    only_u = h.random_point(rng)
    only_u[0] = 0.0
    c2 = classify(h, only_u)
    assert c2.verdict == "regular" and c2.rank == 5
    assert c2.on_proper_stratum and c2.stratum == "h0: in-zero" and c2.stratum_generic_rank == 5


@pytest.mark.parametrize("removed", [(1,), (0, 3), (0, 2, 4)])
def test_hadamard_rank_closed_form(rng, removed):
    h = paramgeo.get("hadamard", p=5)
    t = h.random_point(rng)
    for i in removed:
        t[i] = t[5 + i] = 0.0
    c = classify(h, t)
    assert c.rank == 5 - len(removed) == c.stratum_generic_rank
    assert {n for n, _ in c.inactive} == {f"h{i}" for i in removed}


def test_hadamard_strata_subset_lattice():
    s = strata(paramgeo.get("hadamard", p=3))
    assert s.graph.number_of_nodes() == 8  # subsets of 3 coordinates
    for node, data in s.graph.nodes(data=True):
        removed = 0 if node == "full" else node.count("removed")
        assert data["generic_rank"] == 3 - removed
    assert [n for n in s.graph if s.graph.in_degree(n) == 0] == ["full"]


# ------------------------------------------------------------------ monomial

def sympy_rank_two_neurons(k, W, a):
    """Exact rank of d(coefficients of a_1 (w_1.x)^k + a_2 (w_2.x)^k)/d(W, a) at rationals."""
    import sympy

    x, y = sympy.symbols("x y")
    w = sympy.symbols("w0:4")
    av = sympy.symbols("a0:2")
    f = sum(av[j] * (w[2 * j] * x + w[2 * j + 1] * y) ** k for j in range(2))
    coeffs = sympy.Poly(sympy.expand(f), x, y).coeffs()
    coeffs += [0] * (k + 1 - len(coeffs))
    params = list(w) + list(av)
    Jm = sympy.Matrix([[sympy.diff(c, q) for q in params] for c in coeffs])
    subs = dict(zip(params, [sympy.Rational(v) for v in list(W.ravel()) + list(a)]))
    return Jm.subs(subs).rank()


@pytest.fixture
def mono221():
    return paramgeo.get("monomial", widths=(2, 2, 1), degree=4)


def _mono_point(p):
    W1 = np.array([[1.0, 2.0], [-3.0, 1.0]])
    a = np.array([2.0, -1.0])
    return p.spec.pack(W1=W1, W2=a[None, :]), W1, a


def test_monomial_221_random_point_regular(mono221, rng):
    c = classify(mono221, mono221.random_point(rng))
    assert c.verdict == "regular" and c.generic_rank == 4 and not c.on_proper_stratum


def test_monomial_221_out_zero(mono221):
    theta, W1, a = _mono_point(mono221)
    a0 = a.copy()
    a0[1] = 0.0
    theta[mono221.spec.slices["W2"].start + 1] = 0.0
    c = classify(mono221, theta)
    exact = sympy_rank_two_neurons(4, W1, a0)
    assert exact == 3 and c.rank == exact
    assert c.verdict == "critical" and c.causes == ("subnetwork",)
    assert c.inactive == (("h1_1", "out-zero"),)


def test_monomial_221_in_zero_and_redundant(mono221):
    theta, W1, a = _mono_point(mono221)
    start = mono221.spec.slices["W1"].start
    t_in = theta.copy()
    t_in[start:start + 2] = 0.0
    W_in = W1.copy()
    W_in[0] = 0.0
    c = classify(mono221, t_in)
    assert c.rank == sympy_rank_two_neurons(4, W_in, a) == 2
    assert c.inactive == (("h1_0", "in-zero"),) and "subnetwork" in c.causes
    t_red = theta.copy()
    t_red[start + 2:start + 4] = -1.5 * theta[start:start + 2]
    W_red = W1.copy()
    W_red[1] = -1.5 * W1[0]
    c = classify(mono221, t_red)
    assert c.rank == sympy_rank_two_neurons(4, W_red, a) == 2
    assert c.verdict == "critical" and c.causes == ("subnetwork",)
    assert c.redundant == (("h1_0", "h1_1"),)


def test_monomial_231_degree3_regular_on_subnetwork_stratum(rng):
    p = paramgeo.get("monomial", widths=(2, 3, 1), degree=3)
    assert p.m == 4  # binary cubics: 4 coefficients
    theta = p.random_point(rng)
    theta[p.spec.slices["W2"].start] = 0.0
    c = classify(p, theta)
    assert c.verdict == "regular" and c.rank == 4 == c.generic_rank
    assert c.on_proper_stratum and c.stratum == "layer 1: 1 out-zero"
    assert c.stratum_generic_rank == 4 and "proper stratum" in c.explanation


def test_monomial_strata_poset_unique_top(mono221):
    s = strata(mono221)
    tops = [n for n in s.graph if s.graph.in_degree(n) == 0]
    assert tops == ["full"] == [s.top]
    # closed forms: two neurons 4 (Alexander-Hirschowitz: min(2*2, 5) ... generic rank 4);
    # one neuron a (w.x)^4: a cone over the rational normal curve, dimension 2; none: 0
    ranks = {n: d["generic_rank"] for n, d in s.graph.nodes(data=True)}
    assert ranks == {"full": 4, "layer 1: 1 removed": 2, "layer 1: 2 removed": 0}
    data = json.loads(json.dumps(s.to_dict()))
    g = nx.node_link_graph(data["poset"], edges="edges")
    assert set(g.edges) == set(s.graph.edges)
    g2 = nx.parse_graphml(s.graphml())
    assert g2.number_of_nodes() == 3 and g2.nodes["full"]["generic_rank"] == 4
    dot = s.dot()
    assert dot.startswith('digraph "monomial"') and '"full" -> "layer 1: 1 removed";' in dot


def test_monomial_strata_all_kinds(mono221):
    s = strata(mono221, kinds="all")
    ranks = {n: d["generic_rank"] for n, d in s.graph.nodes(data=True)}
    assert ranks["layer 1: 1 out-zero"] == 3 and ranks["layer 1: 1 in-zero"] == 2
    assert s.graph.has_edge("full", "layer 1: 1 out-zero")
    assert s.graph.has_edge("layer 1: 1 out-zero", "layer 1: 1 removed")
    assert not s.graph.has_edge("full", "layer 1: 1 removed")  # not a covering relation
    assert nx.has_path(s.graph, "full", "layer 1: 2 removed")


def test_near_singular_is_flagged(rng):
    p = paramgeo.get("uut", d=4, r=2)
    theta = rank_k_factor(rng, 4, 2, 1) + 3e-9 * rng.standard_normal(8)
    c = classify(p, theta)
    assert c.near_singular and "NEAR-SINGULAR" in str(c)


# ------------------------------------------------------------------ search

def test_hessian_vp_matches_jacobian_derivative(rng, mono221):
    """The search gradient uses the contract's hessian_vp(theta, w, v) = (dJ[v])^T w; the
    oracle is the directional derivative of J (autograd forward over reverse)."""
    for p in (mono221, paramgeo.get("uut", d=3, r=2)):
        theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
        expected = p.jacobian_derivative(theta, v).T @ w
        np.testing.assert_allclose(p.hessian_vp(theta, w, v), expected,
                                   rtol=1e-10, atol=1e-12)


def test_search_uut_finds_rank_deficient_factors():
    d, r = 3, 2
    res = search(paramgeo.get("uut", d=d, r=r), starts=3, seed=1)
    assert res.critical >= 2 and res.other == 0
    for pt in res.points:
        if pt["verdict"] == "critical":
            assert pt["rank"] == uut_rank(d, 1) and pt["causes"] == ["factor-rank"]


def test_search_monomial_finds_subnetworks(mono221):
    res = search(mono221, starts=3, seed=2)
    assert res.critical >= 2
    assert res.subnetwork + res.other == res.critical
    for pt in res.points:
        if pt["verdict"] == "critical" and "subnetwork" in pt["causes"]:
            assert pt["rank"] <= 3 and (pt["stratum"] != "full" or pt["near"] is not None)


def test_near_in_zero_neuron_certified_with_degree_exponent(mono221):
    """An in-zero neuron approached to eps = 1e-4: its J columns a k (w.x)^(k-1) x_i scale like
    eps^(k-1), so s_R/s_1 ~ eps^3 at k = 4 falls below the tolerance before the weights count
    as zero; the engine certifies 'near the in-zero stratum' with the exponent k - 1."""
    theta, W1, a = _mono_point(mono221)
    start = mono221.spec.slices["W1"].start
    theta[start:start + 2] *= 1e-4
    c = classify(mono221, theta)
    assert c.verdict == "critical" and c.rank < 4 and c.stratum == "full"
    assert c.causes == ("subnetwork",) and c.near is not None
    assert c.near.stratum == "layer 1: 1 in-zero"
    assert c.near.snapped_rank == sympy_rank_two_neurons(4, np.array([[0, 0], W1[1]]), a) == 2
    assert abs(c.near.exponent - 3) < 0.1 and c.near.predicted_ratio <= c.tol / c.singular_values[0]
    assert c.near.distance == pytest.approx(1e-4 * np.linalg.norm(W1[0]) / np.linalg.norm(
        np.concatenate([1e-4 * W1[0], W1[1], a])), rel=1e-6)
    assert "within" in c.explanation and "near stratum" in str(c)
    # snapping disabled: the same point is 'other', and a regular point has no certificate
    assert classify(mono221, theta, snap_max=0).causes == ("other",)
    assert near_stratum(mono221, _mono_point(mono221)[0]) is None


def test_dependent_incoming_weights_are_named(rng):
    """Widths 3,3,1, k = 3, rank W_1 = 2 with no two rows proportional: f = sum_j a_j l_j^3 with
    l_j in a plane of linear forms, so the image of J is sum_j l_j^2 V, of dimension
    3 + min(6, k + 1) = 7 < 9 (generic): critical, cause dependent-weights, not a subnetwork."""
    p = paramgeo.get("monomial", widths=(3, 3, 1), degree=3)
    W1 = rng.standard_normal((3, 2)) @ rng.standard_normal((2, 3))
    theta = p.spec.pack(W1=W1, W2=rng.standard_normal((1, 3)))
    c = classify(p, theta)
    assert (c.rank, c.generic_rank) == (3 + min(6, 3 + 1), 9)
    assert c.verdict == "critical" and c.causes == ("dependent-weights",)
    assert c.dependent[0]["layer"] == 1 and (c.dependent[0]["rank"], c.dependent[0]["of"]) == (2, 3)
    assert c.stratum == "layer 1: incoming rank 2 of 3" and c.rank_equals_stratum_generic
    assert not c.inactive and not c.redundant and "not a subnetwork" in c.explanation
    # at k = 5 the same dependence costs nothing: 3 + min(6, 6) = 9 = generic
    p5 = paramgeo.get("monomial", widths=(3, 3, 1), degree=5)
    c5 = classify(p5, p5.spec.pack(W1=W1, W2=rng.standard_normal((1, 3))))
    assert c5.verdict == "regular" and c5.rank == 9 and c5.on_proper_stratum


def test_silent_neuron_makes_the_next_layer_redundant(rng):
    """Widths 2,2,2,1, k = 3 with h1_0's incoming weights zero: the layer-2 neurons only see
    h1_1, so they are redundant, and f = c (w.x)^9 has J image l^8 V: rank 2."""
    p = paramgeo.get("monomial", widths=(2, 2, 2, 1), degree=3)
    theta = p.random_point(rng)
    theta[p.spec.slices["W1"].start:p.spec.slices["W1"].start + 2] = 0.0
    c = classify(p, theta)
    assert c.rank == 2 == c.stratum_generic_rank and c.causes == ("subnetwork",)
    assert c.inactive == (("h1_0", "in-zero"),) and c.redundant == (("h2_0", "h2_1"),)


# ------------------------------------------------------------------ losses

def _sensing(d, Y):
    """ell(M) = 1/2 |M - Y|_F^2 as LinearMeasurements with A = identity on entries."""
    return LinearMeasurements(np.eye(d * d).reshape(d * d, d, d) * np.sqrt(d * d),
                              Y.ravel() * np.sqrt(d * d))


def test_loss_hessian_against_autograd_and_jacobian_derivative(rng):
    p = paramgeo.get("uut", d=3, r=2)
    Y = rng.standard_normal((3, 3))
    loss = _sensing(3, Y @ Y.T)
    theta = p.random_point(rng)
    H = loss_hessian(p, loss, theta)
    H_auto = autograd.hessian(lambda t: loss.value(p.forward_flat(t)))(theta)
    np.testing.assert_allclose(H, H_auto, rtol=1e-9, atol=1e-10)
    g = loss.grad(p.forward_flat(theta))
    J = p.jacobian(theta)
    cols = np.column_stack([p.jacobian_derivative(theta, e).T @ g for e in np.eye(p.n)])
    np.testing.assert_allclose(H, J.T @ loss.hessian(p.forward_flat(theta)) @ J + cols,
                               rtol=1e-9, atol=1e-10)


def test_loss_spurious_saddle_at_zero(rng):
    d, r = 3, 2
    p = paramgeo.get("uut", d=d, r=r)
    B = rng.standard_normal((d, d))
    Y = B @ B.T
    res = loss_point(p, _sensing(d, Y), np.zeros(p.n))
    assert res.kind == "spurious critical" and res.verdict == "strict saddle"
    # Hessian of 1/2|UU^T - Y|^2 at U = 0 is -2 (Y kron I_r): all negative for Y > 0
    expected = np.sort(np.linalg.eigvalsh(-2 * np.kron(Y, np.eye(r))))
    np.testing.assert_allclose(np.sort(res.eigenvalues), expected, rtol=1e-9)
    assert res.signature == (0, d * r, 0)


def test_loss_true_minimum_and_degenerate(rng):
    d = 3
    U0 = rng.standard_normal((d, 2))
    p = paramgeo.get("uut", d=d, r=2)
    res = loss_point(p, _sensing(d, U0 @ U0.T), U0.ravel())
    assert res.kind == "true critical" and res.verdict == "minimum"
    assert res.horizontal_dim == p.n - 1 == uut_rank(d, 2)  # O(2) removed
    u = rng.standard_normal(d)
    U1 = np.column_stack([u, np.zeros(d)])
    res = loss_point(p, _sensing(d, np.outer(u, u)), U1.ravel())
    assert res.kind == "true critical" and res.verdict == "degenerate"
    # horizontal dim: n minus orbit dim (1); zero eigenvalues: horizontal dim - rank J
    assert res.signature == (uut_rank(d, 1), 0, (p.n - 1) - uut_rank(d, 1))


def test_loss_strict_saddle_at_lower_eigenvector():
    p = paramgeo.get("uut", d=3, r=1)
    Y = np.diag([3.0, 1.0, 0.0])
    theta = np.array([0.0, 1.0, 0.0])  # U = e_2, UU^T matches the second eigenvalue
    res = loss_point(p, _sensing(3, Y), theta)
    assert res.kind == "spurious critical" and res.verdict == "strict saddle"
    assert res.signature[1] >= 1
    res2 = loss_point(p, CallableLoss(lambda b: anp.sum((b - Y.ravel()) ** 2), m=9), theta)
    assert res2.verdict == "strict saddle"


def test_loss_signature_near_the_tolerance_is_flagged():
    """beta = u * v at u = v = (1, 1), ell = (1/4)((beta_1 - 1)^2 + 1e-8 (beta_2 - 1)^2):
    a true minimum whose horizontal Hessian has eigenvalues 2 * (1/2) * (1, 1e-8) (|grad
    beta_i|^2 = u_i^2 + v_i^2 = 2), so 1e-8 sits a factor 5 above tol = 1e-9 * 1: counted
    positive, but the signature is reported as decided near the tolerance."""
    p = paramgeo.get("hadamard", p=2)
    A = np.diag([1.0, 1e-4])
    loss = LinearMeasurements(A, A @ np.ones(2))
    with pytest.warns(paramgeo.NumericalDoubtWarning, match="horizontal space"):
        res = loss_point(p, loss, np.ones(4))
    assert res.verdict == "minimum" and res.signature == (2, 0, 0)
    np.testing.assert_allclose(np.sort(res.eigenvalues), [1e-8, 1.0], rtol=1e-6)
    assert res.near_degenerate and res.closest == pytest.approx(1e-8, rel=1e-6)
    assert res.tol == pytest.approx(1e-9, rel=1e-6) and "NEAR-DEGENERATE" in str(res)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clear = loss_point(p, LinearMeasurements(np.eye(2), np.ones(2)), np.ones(4))
    assert clear.verdict == "minimum" and not clear.near_degenerate


# ------------------------------------------------------------------ errors and CLI

class _Plain(Parameterization):
    """A map with no symmetry and no architecture."""

    name = "plain-test-map"
    size_params = {"k": Size("int", default=2)}

    def make_spec(self):
        return ParamSpec(x=(self.k,))

    def make_predictor_shape(self):
        return (1,)

    def forward(self, theta):
        return anp.reshape(anp.sum(theta ** 3), (1,))


def test_errors_name_the_problem(mono221):
    with pytest.raises(ParamgeoError, match="defines no strata"):
        strata(_Plain())
    with pytest.raises(ParamgeoError, match="kinds must be"):
        strata(mono221, kinds="some")
    with pytest.raises(ParamgeoError, match="max_strata"):
        strata(paramgeo.get("hadamard", p=5), kinds="all", max_strata=10)
    c = classify(_Plain(), np.zeros(2), policy=RankPolicy(atol=1e-12))
    assert c.verdict == "critical" and c.causes == ("other",)


HYPERBOLIC = """
name = "hyperbolic3-crit"
predictor = "u**2 - v**2"

[parameters]
u = [3]
v = [3]
"""


def test_no_strata_without_structure(tmp_path, monkeypatch):
    """A user-defined map beta_i = u_i^2 - v_i^2 (no graph, no matrix group): J = [2 diag(u),
    -2 diag(v)] has rank #{i : (u_i, v_i) != 0}. The result says there are no strata: no
    sentinel rank leaks into the text or the JSON."""
    from paramgeo.contract import registry

    monkeypatch.setenv("PARAMGEO_HOME", str(tmp_path / "home"))
    before = set(registry._registered)
    try:
        (tmp_path / "h.toml").write_text(HYPERBOLIC)
        assert run("define", str(tmp_path / "h.toml")).exit_code == 0
        np.save(tmp_path / "t.npy", np.array([1.0, 0.0, 2.0, 1.0, 0.0, 3.0]))
        text = run("critical", "hyperbolic3-crit", "--at", str(tmp_path / "t.npy")).output
        assert "critical (other)" in text and "rank 2 / generic 3" in text
        assert "stratum: none" in text and "-1" not in text
        out = json.loads(run("critical", "hyperbolic3-crit", "--at", str(tmp_path / "t.npy"),
                             "--json").output)
        assert out["structure"] == "none" and out["stratum"] is None
        assert out["stratum_generic_rank"] is None and out["rank_equals_stratum_generic"] is None
        assert out["near"] is None and out["rank"] == 2
        np.save(tmp_path / "r.npy", np.array([1.0, 2.0, 2.0, 1.0, 0.0, 3.0]))
        text = run("critical", "hyperbolic3-crit", "--at", str(tmp_path / "r.npy")).output
        assert "regular" in text and "stratum: none" in text and "-1" not in text
    finally:
        for name in set(registry._registered) - before:
            registry.unregister(name)


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_cli_critical_strata_search(tmp_path, rng):
    np.save(tmp_path / "U.npy", rank_k_factor(rng, 4, 2, 1).reshape(4, 2))
    out = json.loads(run("critical", "uut", "-p", "d=4", "-p", "r=2", "--at",
                         str(tmp_path / "U.npy"), "--json").output)
    assert out["verdict"] == "critical" and out["causes"] == ["factor-rank"]
    assert (out["rank"], out["generic_rank"]) == (4, 7) and out["rank_drops"] == [["U", 1, 2]]
    res = run("strata", "monomial", "-p", "widths=2,2,1", "-p", "degree=4", "--json")
    data = json.loads(res.output)
    g = nx.node_link_graph(data["poset"], edges="edges")
    assert [n for n in g if g.in_degree(n) == 0] == [data["top"]] == ["full"]
    assert {d["id"]: d["generic_rank"] for d in data["poset"]["nodes"]}["full"] == 4
    assert run("strata", "uut", "--format", "dot").output.startswith("digraph")
    assert "<graphml" in run("strata", "uut", "--format", "graphml").output
    out = json.loads(run("search", "uut", "-p", "d=3", "-p", "r=2", "--starts", "2",
                         "--json").output)
    assert out["starts"] == 2 and len(out["points"]) == 2
    bad = CliRunner().invoke(main, ["strata", "hadamard", "-p", "p=12", "--kinds", "all"])
    assert bad.exit_code == 2 and "max_strata" in bad.output
