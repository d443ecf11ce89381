"""The uvt plugin: phi(U, V) = U V^T, its GL(r) symmetry, Euclidean and balanced quotient geometry.

Oracles: autograd and central finite differences for the closed-form derivatives; the dimension
r(m + n - r) of the manifold of rank-r m x n matrices (Absil, Mahony, Sepulchre 2008, Prop. 3.3;
Mishra et al. 2014) for the generic rank; the generic projection v - V V^T v for the Euclidean
horizontal projection; for the balanced metric of Mishra et al. (2014), the metric written as a
block matrix and the metric-orthogonal projection onto the span of the GL(r) generators, and
Manopt's fixedrankfactory_2factors ``proj`` formula solved with scipy's Sylvester solver.

Covers: ``paramgeo.cli``, ``paramgeo.expressions.symbolic``, ``paramgeo.reports.contract_check``,
``paramgeo.reports.description``, ``paramgeo_plugins.uvt``.
"""

import json

import numpy as np
import pytest
import scipy.linalg
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import paramgeo
from paramgeo import Parameterization, geometry
from paramgeo.cli import main
from paramgeo.reports.contract_check import finite_difference_jacobian
from paramgeo.reports.description import describe


def fixed_rank_dim(m, n, r):
    """Dimension of the manifold of m x n matrices of rank r (r <= min(m, n))."""
    return r * (m + n - r)


def split(p, theta):
    m, n, r = p.sizes["m"], p.sizes["n"], p.sizes["r"]
    return theta[: m * r].reshape(m, r), theta[m * r:].reshape(n, r)


sizes = st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)).map(
    lambda t: (t[0], t[1], min(t[2], t[0], t[1]))
)


# ---------------------------------------------------------------- acceptance and ranks
def test_describe_acceptance_through_the_cli():
    res = CliRunner().invoke(main, ["describe", "uvt", "-p", "m=4", "-p", "n=3", "-p", "r=2",
                                    "--json"], catch_exceptions=False)
    out = json.loads(res.output)
    assert out["n"] == 14 and out["m"] == 12
    assert out["generic_rank"] == 10 and out["quotient_dim"] == 10
    assert out["symmetry"] == {"name": "GL(2)", "dim": 4}
    assert out["rank_is_quotient_dim"] is True


@pytest.mark.parametrize("m,n,r", [(4, 3, 2), (3, 4, 2), (5, 5, 1), (6, 4, 3), (3, 3, 3),
                                   (5, 2, 2), (2, 6, 2), (1, 4, 1)])
def test_generic_rank_is_the_fixed_rank_manifold_dimension(m, n, r):
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    d = describe(p)
    assert d.generic_rank == fixed_rank_dim(m, n, r)
    # the quotient by GL(r) has dimension (m + n) r - r^2, the same number
    assert d.quotient_dim == (m + n) * r - r * r == d.generic_rank
    if r == min(m, n):  # edge case: full rank, the open set of all m x n matrices
        assert d.generic_rank == m * n


def test_r_above_min_dimension_is_refused_with_the_fix():
    with pytest.raises(paramgeo.SizeError, match="choose r <= min"):
        paramgeo.get("uvt", m=4, n=3, r=4)


@pytest.mark.parametrize("m,n,r,k", [(5, 4, 3, 1), (5, 4, 3, 2), (4, 4, 2, 1)])
def test_rank_drop_at_a_rank_deficient_factor(rng, m, n, r, k):
    """rank U = k, V generic: range J = {M : row M in col V} + {M : col M in col U}, of
    dimension m r + k n - k r (derived: the two subspaces meet in col U x col V)."""
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    U = rng.standard_normal((m, k)) @ rng.standard_normal((k, r))
    V = rng.standard_normal((n, r))
    theta = p.spec.pack(U, V)
    assert paramgeo.rank_at(p, theta).rank == m * r + k * n - k * r
    # the orbit keeps dimension r^2: its stabilizer {L : U L = 0, V L^T = 0} needs the rows
    # of L in ker V = 0; with V also of rank k it is ker U x ker V, of dimension (r - k)^2
    assert geometry.orbit_dim(p, theta) == r * r
    V2 = rng.standard_normal((n, k)) @ rng.standard_normal((k, r))
    assert geometry.orbit_dim(p, p.spec.pack(U, V2)) == r * r - (r - k) ** 2


# ---------------------------------------------------------------- closed-form derivatives
@settings(max_examples=20, deadline=None)
@given(size=sizes, seed=st.integers(0, 2**32 - 1))
def test_closed_forms_match_autograd_and_finite_differences(size, seed):
    m, n, r = size
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    rng = np.random.default_rng(seed)
    theta = p.random_point(rng)
    J = p.jacobian(theta)
    J_auto = Parameterization.jacobian(p, theta)
    np.testing.assert_allclose(J, J_auto, atol=1e-12)
    np.testing.assert_allclose(J, finite_difference_jacobian(p, theta), atol=1e-7)
    v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
    np.testing.assert_allclose(p.jvp(theta, v), Parameterization.jvp(p, theta, v), atol=1e-12)
    np.testing.assert_allclose(p.vjp(theta, w), Parameterization.vjp(p, theta, w), atol=1e-12)
    U, V = split(p, theta)
    dU, dV = split(p, v)
    np.testing.assert_allclose(p.jvp(theta, v), (dU @ V.T + U @ dV.T).ravel(), atol=1e-12)


def test_symbolic_matches_forward(rng):
    from paramgeo.expressions.symbolic import exact_jacobian, lambdify_parameterization

    p = paramgeo.get("uvt", m=3, n=2, r=2)
    theta = p.random_point(rng)
    np.testing.assert_allclose(lambdify_parameterization(p)(theta), p.forward_flat(theta))
    symbols, _ = p.symbolic()
    Jsym = np.array(exact_jacobian(p).subs(dict(zip(symbols, theta))), dtype=float)
    np.testing.assert_allclose(Jsym, p.jacobian(theta), atol=1e-12)


# ---------------------------------------------------------------- symmetry
@settings(max_examples=20, deadline=None)
@given(size=sizes, seed=st.integers(0, 2**32 - 1))
def test_invariance_under_random_gl_elements(size, seed):
    m, n, r = size
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    rng = np.random.default_rng(seed)
    theta = p.random_point(rng)
    group = p.symmetry()
    for _ in range(3):
        A = group.random_element(rng)
        moved = group.act(A, theta)
        U, V = split(p, theta)
        U2, V2 = split(p, moved)
        np.testing.assert_allclose(U2, U @ A, atol=1e-12)
        np.testing.assert_allclose(V2, V @ np.linalg.inv(A).T, atol=1e-10)
        np.testing.assert_allclose(p.forward(moved), p.forward(theta), atol=1e-9)
    G = group.generators(theta)
    assert G.shape == (p.n, r * r) and np.linalg.matrix_rank(G) == r * r
    np.testing.assert_allclose(p.jacobian(theta) @ G, 0, atol=1e-12)


# ---------------------------------------------------------------- Euclidean geometry
@settings(max_examples=20, deadline=None)
@given(size=sizes, seed=st.integers(0, 2**32 - 1))
def test_euclidean_horizontal_projection_matches_generic(size, seed):
    m, n, r = size
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    rng = np.random.default_rng(seed)
    theta, v = p.random_point(rng), rng.standard_normal(p.n)
    closed = paramgeo.horizontal_projection(p, theta, v)
    generic = paramgeo.horizontal_projection(p, theta, v, generic=True)
    np.testing.assert_allclose(closed, generic, atol=1e-9)


def test_euclidean_projection_at_rank_deficient_factors(rng):
    p = paramgeo.get("uvt", m=5, n=4, r=3)
    U = rng.standard_normal((5, 1)) @ rng.standard_normal((1, 3))
    V = rng.standard_normal((4, 2)) @ rng.standard_normal((2, 3))
    theta, v = p.spec.pack(U, V), rng.standard_normal(p.n)
    closed = paramgeo.horizontal_projection(p, theta, v)
    generic = paramgeo.horizontal_projection(p, theta, v, generic=True)
    np.testing.assert_allclose(closed, generic, atol=1e-9)


# ---------------------------------------------------------------- balanced geometry
def balanced_matrix(p, theta):
    """The balanced metric as an n x n matrix in theta coordinates (row-major blocks):
    blockdiag(I_m kron (U^T U)^{-1}, I_n kron (V^T V)^{-1})."""
    U, V = split(p, theta)
    return scipy.linalg.block_diag(np.kron(np.eye(U.shape[0]), np.linalg.inv(U.T @ U)),
                                   np.kron(np.eye(V.shape[0]), np.linalg.inv(V.T @ V)))


def generic_balanced_projection(p, theta, v):
    """v minus its metric-orthogonal projection onto span of the GL(r) generators G:
    v - G (G^T M G)^{-1} G^T M v."""
    M = balanced_matrix(p, theta)
    G = p.symmetry().generators(theta)
    coef = np.linalg.solve(G.T @ M @ G, G.T @ M @ v)
    return v - G @ coef


def manopt_projection(p, theta, v):
    """Manopt fixedrankfactory_2factors proj: S Omega + Omega S = AS with S = LtL RtR,
    AS = LtL R^T eta_R - eta_L^T L RtR; (eta_L + L Omega^T, eta_R - R Omega)."""
    U, V = split(p, theta)
    dU, dV = split(p, v)
    GU, GV = U.T @ U, V.T @ V
    S = GU @ GV
    AS = GU @ V.T @ dV - dU.T @ U @ GV
    omega = scipy.linalg.solve_sylvester(S, S, AS)
    return np.concatenate([(dU + U @ omega.T).ravel(), (dV - V @ omega).ravel()])


@settings(max_examples=20, deadline=None)
@given(size=sizes, seed=st.integers(0, 2**32 - 1))
def test_balanced_metric_and_projection_match_generic_routes(size, seed):
    m, n, r = size
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    rng = np.random.default_rng(seed)
    theta = p.random_point(rng)
    x, y = rng.standard_normal(p.n), rng.standard_normal(p.n)
    M = balanced_matrix(p, theta)
    assert p.balanced_metric(theta, x, y) == pytest.approx(x @ M @ y, rel=1e-9, abs=1e-9)
    h = p.balanced_horizontal_projection(theta, x)
    np.testing.assert_allclose(h, generic_balanced_projection(p, theta, x), atol=1e-8)
    np.testing.assert_allclose(h, manopt_projection(p, theta, x), atol=1e-8)
    # h is balanced-orthogonal to every vertical direction, and projecting twice changes nothing
    G = p.symmetry().generators(theta)
    scale = np.linalg.norm(G) * np.linalg.norm(M) * max(1.0, np.linalg.norm(x))
    np.testing.assert_allclose(G.T @ M @ h, 0, atol=1e-10 * scale)
    np.testing.assert_allclose(p.balanced_horizontal_projection(theta, h), h, atol=1e-9)


def test_balanced_metric_is_gl_invariant_and_euclidean_is_not(rng):
    """The balanced metric makes GL(r) act by isometries, so the quotient metric of a tangent
    xi of the rank-r manifold is the same at every point of the fiber; the Euclidean one is
    not (Mishra et al. 2014, Section 3: the motivation of the balanced metric)."""
    p = paramgeo.get("uvt", m=5, n=4, r=2)
    theta = p.random_point(rng)
    group = p.symmetry()
    xi = p.jvp(theta, rng.standard_normal(p.n)).reshape(5, 4)  # tangent at X = U V^T
    eta = p.jvp(theta, rng.standard_normal(p.n)).reshape(5, 4)
    A = np.array([[3.0, 1.0], [0.0, 0.5]])  # far from orthogonal
    moved = group.act(A, theta)
    np.testing.assert_allclose(p.forward(moved), p.forward(theta), atol=1e-12)
    g0 = p.balanced_quotient_metric(theta, xi, eta)
    g1 = p.balanced_quotient_metric(moved, xi, eta)
    assert g0 == pytest.approx(g1, rel=1e-9)
    # isometry of the total space: g_{theta A}(xi A, eta A) = g_theta(xi, eta)
    x, y = rng.standard_normal(p.n), rng.standard_normal(p.n)
    xa, ya = group.act(A, x), group.act(A, y)  # the action is linear in theta
    assert p.balanced_metric(moved, xa, ya) == pytest.approx(p.balanced_metric(theta, x, y))
    # Euclidean: the minimum-norm lifts at the two fiber points give different lengths
    e0 = np.sum(paramgeo.geometry.horizontal_lift(p, theta, xi.ravel()) ** 2)
    e1 = np.sum(paramgeo.geometry.horizontal_lift(p, moved, xi.ravel()) ** 2)
    assert abs(e0 - e1) > 1e-2 * e0


def test_balanced_lift_is_a_horizontal_preimage(rng):
    p = paramgeo.get("uvt", m=6, n=4, r=3)
    theta = p.random_point(rng)
    xi = p.jvp(theta, rng.standard_normal(p.n))
    h = p.balanced_horizontal_lift(theta, xi)
    np.testing.assert_allclose(p.jvp(theta, h), xi, atol=1e-10)
    np.testing.assert_allclose(h, generic_balanced_projection(p, theta, h), atol=1e-10)
    with pytest.raises(paramgeo.ShapeError, match="not tangent"):
        p.balanced_horizontal_lift(theta, rng.standard_normal(p.m))


def test_the_two_metrics_agree_at_orthonormal_balanced_points(rng):
    """At U^T U = V^T V = c I the two horizontal spaces coincide and g_bal = g_Euclid / c."""
    p = paramgeo.get("uvt", m=5, n=4, r=2)
    c = 2.5
    U = np.linalg.qr(rng.standard_normal((5, 2)))[0] * np.sqrt(c)
    V = np.linalg.qr(rng.standard_normal((4, 2)))[0] * np.sqrt(c)
    theta, v, w = p.spec.pack(U, V), rng.standard_normal(p.n), rng.standard_normal(p.n)
    np.testing.assert_allclose(p.balanced_horizontal_projection(theta, v),
                               p.horizontal_projection(theta, v), atol=1e-12)
    assert p.balanced_metric(theta, v, w) == pytest.approx(v @ w / c)
    # at a generic point the horizontal spaces differ
    theta = p.random_point(rng)
    assert np.linalg.norm(p.balanced_horizontal_projection(theta, v)
                          - p.horizontal_projection(theta, v)) > 1e-3


def test_balanced_geometry_refuses_rank_deficient_factors(rng):
    p = paramgeo.get("uvt", m=4, n=3, r=2)
    U = np.outer(rng.standard_normal(4), rng.standard_normal(2))
    theta = p.spec.pack(U, rng.standard_normal((3, 2)))
    with pytest.raises(paramgeo.ShapeError, match="full column rank"):
        p.balanced_horizontal_projection(theta, rng.standard_normal(p.n))


def test_contract_at_several_sizes():
    for m, n, r in [(3, 5, 2), (3, 3, 3), (2, 2, 1)]:
        report = paramgeo.check(paramgeo.get("uvt", m=m, n=n, r=r))
        assert report.passed, str(report)
