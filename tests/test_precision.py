"""Ranks beyond float64 (paramgeo.geometry.precision) and the causes classify gives at each stratum.

Oracles: the float64 Jacobian and SVD of each plugin (its closed form or autograd) for the
high-precision singular values at generic points; sympy's own exact rank over Q
(symbolic.exact_rank_at) for the exact rank; the orbit dimension from an independent null space
of the Lie algebra action for the orbit-degenerate verdict; closed-form ranks of the strata.

Covers: ``paramgeo.cli``, ``paramgeo.critical.classification``, ``paramgeo.expressions.symbolic``,
``paramgeo.geometry.jacobian``, ``paramgeo.geometry.precision``, ``paramgeo.linalg.numerics``,
``paramgeo_plugins.deep_linear``, ``paramgeo_plugins.hadamard``, ``paramgeo_plugins.monomial``,
``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import fractions
import warnings

import numpy as np
import pytest

import paramgeo
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.geometry import precision
from paramgeo.expressions import symbolic
from paramgeo.critical import classify, near_stratum
from paramgeo.errors import NumericalDoubtWarning
from paramgeo.geometry import rank_at
from paramgeo.linalg import RankPolicy


def uut_rank(d, k):
    return d * k - k * (k - 1) // 2


@pytest.mark.parametrize("name, sizes", [
    ("monomial", {"widths": (2, 2, 1), "degree": 3}), ("uut", {"d": 3, "r": 2}),
    ("uvt", {"m": 3, "n": 2, "r": 2}), ("hadamard", {"p": 3}),
    ("deep-diagonal", {"p": 2, "depth": 3}), ("deep-linear", {"widths": (2, 3, 2)}),
])
def test_exact_singular_values_match_float64_at_generic_points(name, sizes, rng):
    p = paramgeo.get(name, **sizes)
    theta = p.random_point(rng)
    s, info = precision.singular_values(p, theta, 30)
    assert info["route"] == "exact" and info["error_bound"] < 1e-25
    s64 = np.linalg.svd(p.jacobian(theta), compute_uv=False)
    np.testing.assert_allclose([float(x) for x in s], s64, rtol=1e-11, atol=1e-13 * s64[0])


def test_exact_rank_over_q_agrees_with_sympy_at_a_rank_deficient_rational_point():
    p = paramgeo.get("uut", d=4, r=3)
    U = [[fractions.Fraction(i + 1, 7) * c for c in (1, 2, -3)] for i in range(4)]  # rank 1
    point = [x for row in U for x in row]
    d = rank_at(p, [float(x) for x in point], route="exact")
    import sympy

    syms = symbolic.symbolic_form(p)[0]
    exact, ok = symbolic.exact_rank_at(p, {s: sympy.Rational(x.numerator, x.denominator)
                                           for s, x in zip(syms, point)})
    assert ok and exact == uut_rank(4, 1) == 4
    # the float point differs from the rational one by round-off, which lifts the exact rank
    # over Q to full; the numerical rank under the policy is the stratum's
    assert d.rank == 4 and d.route == "exact" and d.certificate.digits == 50
    s, _ = precision.singular_values(p, point, 40)
    assert float(s[4]) < 1e-38 * float(s[0]) and float(s[3]) > 1e-3 * float(s[0])


class _Softplus(Parameterization):
    """phi_i = log(1 + exp(a_i b_i)) + tanh(a_0): no symbolic form, transcendental."""

    name = "softplus-test"
    size_params = {"p": Size("int", default=3)}

    def make_spec(self):
        return ParamSpec(a=(self.p,), b=(self.p,))

    def make_predictor_shape(self):
        return (self.p,)

    def forward(self, theta):
        import autograd.numpy as anp

        a, b = theta[: self.p], theta[self.p:]
        return anp.log(1.0 + anp.exp(a * b)) + anp.tanh(a[0])


class _Casting(_Softplus):
    name = "casting-test"

    def forward(self, theta):
        return np.asarray(theta, float)[: self.p] ** 2


def test_high_precision_route_on_a_plugin_without_symbolic_form(rng):
    p = _Softplus()
    theta = rng.standard_normal(p.n)
    s, info = precision.singular_values(p, theta, 30)
    assert info["route"] == "high-precision" and info["error_bound"] < 1e-25
    s64 = np.linalg.svd(p.jacobian(theta), compute_uv=False)
    np.testing.assert_allclose([float(x) for x in s], s64, rtol=1e-12)
    with pytest.raises(paramgeo.ParamgeoError, match="exact route needs"):
        precision.singular_values(p, theta, 30, route="exact")
    with pytest.raises(precision.PrecisionError, match="casting-test.*float"):
        precision.singular_values(_Casting(), theta, 30)


def test_a_doubtful_float64_decision_is_redone_in_high_precision():
    """hadamard with u_1 = v_1 = 2e-9: s = sqrt(u_i^2 + v_i^2) = (sqrt 2, 2e-9 sqrt 2), s_2 within
    the policy's band (1e3) of tol = 1e-9 s_1. The automatic route redoes the decision in 50
    digits (the float64 rank recorded); the value is still near tol, so the decision stays
    doubtful under the same policy and warns; digits=0 keeps the float64 closed form."""
    p = paramgeo.get("hadamard", p=2)
    theta = np.array([1.0, 2e-9, 1.0, 2e-9])
    with pytest.warns(NumericalDoubtWarning, match="50 digits"):
        auto = rank_at(p, theta)
    assert auto.route == "exact" and auto.certificate.float64_rank == 2 and auto.rank == 2
    assert auto.doubtful and auto.certificate.exact_rank == 2
    np.testing.assert_allclose(auto.singular_values, np.sqrt(2) * np.array([1.0, 2e-9]),
                               rtol=1e-15)
    with pytest.warns(NumericalDoubtWarning):
        assert rank_at(p, theta, digits=0).route == "closed-form"
    assert not rank_at(p, theta, policy=RankPolicy(band=1.5)).doubtful  # s_2 = 2 tol


# ---------------------------------------------------------------- the monomial acceptance point

def _h1_silent(p, rng, eps):
    """A random point of monomial widths 2,2,2,1 with h1_0's incoming weights scaled by eps."""
    theta = p.random_point(rng)
    theta[p.spec.slices["W1"].start:p.spec.slices["W1"].start + 2] *= eps
    return theta


def test_order_12_approach_is_certified_in_high_precision_not_in_float64(rng):
    """widths 2,2,2,1, k = 4, h1_0's incoming weights at relative size ~1e-2: s_6/s_1 ~ 1e-24
    is float64 round-off; float64 calls the point 'other', 50 digits certify it near the
    stratum 'layer 1: 1 in-zero; redundant {h2_0,h2_1}' with order 12."""
    p = paramgeo.get("monomial", widths=(2, 2, 2, 1), degree=4)
    theta = _h1_silent(p, rng, 1e-2)
    c64 = classify(p, theta, precision=0)
    assert c64.verdict == "critical" and c64.causes == ("other",) and c64.precision is None
    c = classify(p, theta)
    assert c.verdict == "critical" and c.causes == ("subnetwork",) and c.precision == 50
    assert c.near.order == 12 and abs(c.near.exponent - 12) < 0.1 and c.near.precision == 50
    assert c.near.stratum == "layer 1: 1 in-zero; redundant {h2_0,h2_1}"
    # the ratio in 50 digits is the power law's value: rho(2T) / rho(T) = 2^12 on the probe
    (t1, r1), (t2, r2), _ = c.near.probe
    assert t2 == 2 * t1 and abs(np.log2(r2 / r1) - 12) < 0.1
    assert c.relevant_ratio < 1e-20 and c.rank_route == "exact"
    # and an independent check of the order: scaling eps by 1/2 divides s_6/s_1 by ~2^12
    half = _h1_silent(p, np.random.default_rng(1), 5e-3)
    full = _h1_silent(p, np.random.default_rng(1), 1e-2)
    ratios = []
    for th in (half, full):
        s, _ = precision.singular_values(p, th, 50)
        ratios.append(float(s[5] / s[0]))
    assert abs(np.log2(ratios[1] / ratios[0]) - 12) < 0.3
    assert near_stratum(p, theta, precision=0) is None
    assert near_stratum(p, theta).order == 12  # float64 fails, so it measures in 50 digits


# ---------------------------------------------------------------- causes at each stratum

def _stabilizer_dim(blocks_left, blocks_right, r):
    """dim {A in gl(r) : X A = 0 for X in blocks_left, A Y = 0 for Y in blocks_right}: the
    Lie algebra of the stabilizer, as a null space of the stacked linear maps A -> X A, A Y."""
    rows = []
    for X in blocks_left:
        rows.append(np.kron(X, np.eye(r)))          # vec(X A) = (X kron I) vec(A), row-major
    for Y in blocks_right:
        rows.append(np.kron(np.eye(r), Y.T))        # vec(A Y) = (I kron Y^T) vec(A)
    M = np.vstack(rows)
    return r * r - np.linalg.matrix_rank(M)


def _low_rank(rng, a, b, k):
    return rng.standard_normal((a, k)) @ rng.standard_normal((k, b))


@pytest.mark.parametrize("d, r, k, causes", [
    (4, 2, 1, ("factor-rank",)),                    # stabilizer O(1): discrete
    (5, 3, 2, ("factor-rank",)),                    # O(1) again
    (5, 3, 1, ("orbit-degenerate", "factor-rank")),  # O(2): orbit dim 3 - 1 = 2
    (5, 3, 0, ("orbit-degenerate", "factor-rank")),  # U = 0: orbit dim 0
])
def test_uut_causes_at_each_rank(d, r, k, causes, rng):
    p = paramgeo.get("uut", d=d, r=r)
    theta = _low_rank(rng, d, r, k).ravel() if k else np.zeros(p.n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalDoubtWarning)
        c = classify(p, theta)
    assert c.causes == causes and c.rank == uut_rank(d, k)
    # orbit of O(r): dim O(r) - dim O(r - k)
    assert c.orbit_dim == r * (r - 1) // 2 - (r - k) * (r - k - 1) // 2
    assert c.rank_drops == (("U", k, r),) and f"U lost rank {r - k}" in str(c)


def test_uvt_causes_one_factor_or_a_shared_channel(rng):
    m, n, r = 4, 3, 2
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    U1, V = _low_rank(rng, m, r, 1), rng.standard_normal((n, r))
    c = classify(p, p.spec.pack(U=U1, V=V))
    # GL(2): U -> U g, V -> V g^-T; Lie algebra {A : U A = 0, A V^T = 0}
    assert _stabilizer_dim([U1], [V.T], r) == 0 and c.orbit_dim == r * r
    assert c.causes == ("factor-rank",) and c.rank_drops == (("U", 1, 2),)
    # a channel vanishing on both sides: U = u e_1^T, V = v e_1^T (up to GL(2))
    e = np.array([1.0, 0.0])
    Us, Vs = np.outer(rng.standard_normal(m), e), np.outer(rng.standard_normal(n), e)
    c2 = classify(p, p.spec.pack(U=Us, V=Vs))
    stab = _stabilizer_dim([Us], [Vs.T], r)
    assert stab == 1 and c2.orbit_dim == r * r - stab
    assert c2.causes == ("orbit-degenerate", "factor-rank")
    assert set(c2.rank_drops) == {("U", 1, 2), ("V", 1, 2)}


@pytest.mark.parametrize("rank1, rank2", [(2, 3), (3, 2), (2, 2), (3, 3)])
def test_deep_linear_causes_at_several_ranks(rank1, rank2, rng):
    """widths 4,3,4: GL(3) on the hidden layer, W1 -> g^-1 W1, W2 -> W2 g; stabilizer algebra
    {A : A W1 = 0, W2 A = 0}. orbit-degenerate exactly when it is nonzero."""
    p = paramgeo.get("deep-linear", widths=(4, 3, 4))
    W1, W2 = _low_rank(rng, 3, 4, rank1), _low_rank(rng, 4, 3, rank2)
    c = classify(p, p.spec.pack(W1=W1, W2=W2))
    stab = _stabilizer_dim([W2], [W1], 3)
    assert c.orbit_dim == 9 - stab
    expected = (("orbit-degenerate",) if stab else ()) + (
        ("factor-rank",) if (rank1, rank2) != (3, 3) else ())
    assert c.causes == expected and c.verdict == ("critical" if expected else "regular")
    # rank of J: n_L n_0 - (n_L - rank W2)(n_0 - rank W1) (the uvt formula, two layers)
    assert c.rank == 16 - (4 - rank2) * (4 - rank1)
    drops = {b: (k, g) for b, k, g in c.rank_drops}
    assert drops == {b: (k, 3) for b, k in (("W1", rank1), ("W2", rank2)) if k < 3}


def test_hadamard_and_monomial_subnetworks(rng):
    h = paramgeo.get("hadamard", p=4)
    t = h.random_point(rng)
    t[[0, 4]] = 0.0  # u_0 = v_0 = 0: the rescaling generator (u_0, -v_0) vanishes
    c = classify(h, t)
    assert c.causes == ("orbit-degenerate", "subnetwork") and c.orbit_dim == 3 and c.rank == 3
    mono = paramgeo.get("monomial", widths=(2, 2, 1), degree=4)
    th = mono.random_point(rng)
    out = th.copy()
    out[mono.spec.slices["W2"].start + 1] = 0.0  # h1_1 out-zero: generator (w_in, -k w_out) != 0
    c = classify(mono, out)
    assert c.causes == ("subnetwork",) and c.orbit_dim == c.generic_orbit_dim == 2
    assert c.inactive == (("h1_1", "out-zero"),) and c.rank == 3
    removed = out.copy()
    removed[2:4] = 0.0  # and its incoming weights: the neuron is removed, its generator is 0
    c = classify(mono, removed)
    assert c.causes == ("orbit-degenerate", "subnetwork") and c.orbit_dim == 1


# ---------------------------------------------------------------- the CLI

def test_cli_precision_option(tmp_path):
    import json

    from click.testing import CliRunner

    from paramgeo.cli import main

    np.save(tmp_path / "U.npy", np.outer([1.0, 2, 3, 4], [1.0, 2.0]))
    np.save(tmp_path / "x.npy", np.array([1.0, 0.5, 1.0, 0.5]))

    def run(*args):
        return CliRunner().invoke(main, [str(a) for a in args])

    res = run("rank", "hadamard", "-p", "p=2", "--at", tmp_path / "x.npy", "--precision", 30,
              "--json")
    out = json.loads(res.output)
    assert res.exit_code == 0 and out["route"] == "exact" and out["certificate"]["digits"] == 30
    text = run("rank", "hadamard", "-p", "p=2", "--at", tmp_path / "x.npy", "--precision", 30)
    assert "certificate: exact, 30 digits" in text.output and "rank over Q 2" in text.output
    res = run("critical", "uut", "-p", "d=4", "-p", "r=2", "--at", tmp_path / "U.npy",
              "--precision", 30)
    assert res.exit_code == 0 and "critical (factor-rank)" in res.output
    assert "(30 digits, route exact)" in res.output and "U lost rank 1" in res.output
    bad = run("critical", "uut", "-p", "d=4", "-p", "r=2", "--at", tmp_path / "U.npy",
              "--precision", 5)
    assert bad.exit_code == 2 and "Error: precision must be at least 16 digits" in bad.output
    assert "Traceback" not in bad.output


class _Rational(Parameterization):
    """phi = (a / (1 + b^2), a b): rational in theta, declared symbolic (the fraction field)."""

    name = "rational-test"
    capabilities = frozenset({"symbolic"})

    def make_spec(self):
        return ParamSpec(a=(1,), b=(1,))

    def make_predictor_shape(self):
        return (2,)

    def forward(self, theta):
        import autograd.numpy as anp

        a, b = theta[0], theta[1]
        return anp.array([a / (1 + b ** 2), a * b])

    def symbolic(self):
        import sympy

        a, b = sympy.symbols("a b", real=True)
        return [a, b], [a / (1 + b ** 2), a * b]


def test_exact_route_on_a_rational_map(rng):
    p = _Rational()
    theta = rng.standard_normal(2)
    s, info = precision.singular_values(p, theta, 30)
    assert info["route"] == "exact"
    s64 = np.linalg.svd(p.jacobian(theta), compute_uv=False)
    np.testing.assert_allclose([float(x) for x in s], s64, rtol=1e-13)
    # at a = 0 the rows (1/(1+b^2), 0) and (b, 0) are parallel: rank 1 exactly
    assert rank_at(p, np.array([0.0, 0.5]), route="exact").certificate.exact_rank == 1
