"""Generic geometry against closed forms and geomstats' independent implementations.

Covers: ``paramgeo.linalg.numerics``, ``paramgeo.symmetry.groups``, ``paramgeo_plugins.hadamard``,
``paramgeo_plugins.uut``.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import paramgeo
from paramgeo import geometry


def uut_rank_formula(d, k):
    """dim of rank-k PSD d x d matrices: d k - k(k-1)/2 (k <= d)."""
    return d * k - k * (k - 1) // 2


@pytest.mark.parametrize("d,r", [(3, 1), (4, 2), (5, 3), (6, 6), (3, 5)])
def test_uut_generic_rank_closed_form(d, r):
    p = paramgeo.get("uut", d=d, r=r)
    assert paramgeo.generic_rank(p) == uut_rank_formula(d, min(d, r))


@pytest.mark.parametrize("d,r,k", [(4, 2, 1), (5, 3, 2), (5, 3, 1), (6, 4, 2)])
def test_uut_rank_drops_at_rank_k_factor(rng, d, r, k):
    p = paramgeo.get("uut", d=d, r=r)
    U = rng.standard_normal((d, k)) @ rng.standard_normal((k, r))
    assert paramgeo.rank_at(p, U.ravel()).rank == uut_rank_formula(d, k)
    # the orbit degenerates too: O(r) orbit of a rank-k U has dimension r(r-1)/2 - (r-k)(r-k-1)/2
    assert geometry.orbit_dim(p, U.ravel()) == r * (r - 1) // 2 - (r - k) * (r - k - 1) // 2


def test_hadamard_rank_and_kernel(rng):
    p = paramgeo.get("hadamard", p=5)
    theta = p.random_point(rng)
    assert paramgeo.rank_at(p, theta).rank == 5
    theta[0] = theta[5] = 0.0  # u_1 = v_1 = 0
    assert paramgeo.rank_at(p, theta).rank == 4
    K = paramgeo.kernel(p, theta)
    assert K.shape == (10, 6)
    np.testing.assert_allclose(p.jacobian(theta) @ K, 0, atol=1e-12)


def bures_wasserstein_bundle(d, r):
    """geomstats' BuresWassersteinBundle (U -> U U^T modulo O(r)), as its metric builds it."""
    from geomstats.geometry.rank_k_psd_matrices import PSDBuresWassersteinMetric, RankKPSDMatrices

    space = RankKPSDMatrices(d, r, equip=False)
    space.equip_with_metric(PSDBuresWassersteinMetric)
    return space.metric._total_space.fiber_bundle


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(3, 7), r=st.integers(2, 5))
def test_uut_horizontal_projection_matches_geomstats_bures_wasserstein(seed, d, r):
    r = min(r, d - 1)  # geomstats needs 2 <= r < d
    rng = np.random.default_rng(seed)
    U, V = rng.standard_normal((d, r)), rng.standard_normal((d, r))
    p = paramgeo.get("uut", d=d, r=r)
    ours = paramgeo.horizontal_projection(p, U.ravel(), V.ravel())
    generic = paramgeo.horizontal_projection(p, U.ravel(), V.ravel(), generic=True)
    bundle = bures_wasserstein_bundle(d, r)
    theirs = np.asarray(bundle.horizontal_projection(V, U)).ravel()
    np.testing.assert_allclose(ours, theirs, atol=1e-9 * max(1, np.abs(theirs).max()))
    np.testing.assert_allclose(ours, generic, atol=1e-9 * max(1, np.abs(theirs).max()))
    # horizontal means U^T H symmetric
    H = ours.reshape(d, r)
    np.testing.assert_allclose(U.T @ H, H.T @ U, atol=1e-9)


def test_uut_horizontal_projection_at_rank_deficient_point(rng):
    p = paramgeo.get("uut", d=4, r=3)
    U = rng.standard_normal((4, 1)) @ rng.standard_normal((1, 3))
    v = rng.standard_normal(12)
    np.testing.assert_allclose(
        paramgeo.horizontal_projection(p, U.ravel(), v),
        paramgeo.horizontal_projection(p, U.ravel(), v, generic=True),
        atol=1e-9,
    )


def test_quotient_metric_is_bures_wasserstein(rng):
    """Our quotient metric, geomstats' QuotientMetric through our adapter, and geomstats'
    own PSDBuresWassersteinMetric agree on tangent vectors of the rank-r PSD matrices."""
    from geomstats.geometry.rank_k_psd_matrices import PSDBuresWassersteinMetric, RankKPSDMatrices

    d, r = 5, 2
    p = paramgeo.get("uut", d=d, r=r)
    U = rng.standard_normal((d, r))
    x, y = rng.standard_normal(d * r), rng.standard_normal(d * r)
    a, b = p.jvp(U.ravel(), x), p.jvp(U.ravel(), y)
    ours = paramgeo.quotient_metric(p, U.ravel(), geometry.horizontal_lift(p, U.ravel(), a),
                                    geometry.horizontal_lift(p, U.ravel(), b))
    adapter = geometry.quotient_metric_geomstats(p, U.ravel(), a, b)
    space = RankKPSDMatrices(d, r, equip=False)
    space.equip_with_metric(PSDBuresWassersteinMetric)
    bw = space.metric.inner_product(a.reshape(d, d), b.reshape(d, d), fiber_point=U)
    assert ours == pytest.approx(bw, rel=1e-9)
    assert adapter == pytest.approx(bw, rel=1e-9)
    # the quotient metric of x, y equals that of their horizontal parts
    assert paramgeo.quotient_metric(p, U.ravel(), x, y) == pytest.approx(ours, rel=1e-9)


def test_fiber_bundle_adapter_submersion(rng):
    p = paramgeo.get("hadamard", p=3)
    bundle = geometry.fiber_bundle(p)
    theta, v = p.random_point(rng), rng.standard_normal(6)
    np.testing.assert_allclose(bundle.riemannian_submersion(theta), theta[:3] * theta[3:])
    np.testing.assert_allclose(bundle.tangent_riemannian_submersion(v, theta),
                               p.jacobian(theta) @ v)
    vert = bundle.vertical_projection(v, theta)
    np.testing.assert_allclose(p.jacobian(theta) @ vert, 0, atol=1e-12)
    np.testing.assert_allclose(vert + bundle.horizontal_projection(v, theta), v)


def test_predictor_metric_is_jjt(rng):
    p = paramgeo.get("hadamard", p=4)
    theta = p.random_point(rng)
    u, v = theta[:4], theta[4:]
    np.testing.assert_allclose(paramgeo.predictor_metric(p, theta), np.diag(u**2 + v**2))


def test_rank_policy_flags_doubtful_decisions():
    s = np.array([1.0, 1e-3, 5e-10])
    with pytest.warns(paramgeo.NumericalDoubtWarning, match="near the tolerance"):
        decision = geometry.decide_rank(s)
    assert decision.rank == 2 and decision.doubtful
    assert decision.gap == pytest.approx(1e-3 / 5e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clear = geometry.decide_rank(np.array([1.0, 1e-3, 1e-16]))
    assert clear.rank == 2 and not clear.doubtful
    assert geometry.decide_rank(s, paramgeo.RankPolicy(rtol=1e-12), warn=False).rank == 3


def test_symmetry_groups_act_and_compose(rng):
    from paramgeo.symmetry import GeneralLinearGroup, OrthogonalGroup

    R = OrthogonalGroup(3).random_element(rng)
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
    gl = GeneralLinearGroup(2, right=((0, 6, (3, 2)),), contragredient=((6, 10, (2, 2)),))
    theta = rng.standard_normal(10)
    A = gl.random_element(rng)
    moved = gl.act(A, theta)
    U, V = theta[:6].reshape(3, 2), theta[6:].reshape(2, 2)
    U2, V2 = moved[:6].reshape(3, 2), moved[6:].reshape(2, 2)
    np.testing.assert_allclose(U2 @ V2.T, U @ V.T, atol=1e-10)
    assert gl.dim == 4 and gl.generators(theta).shape == (10, 4)
    prod = gl * OrthogonalGroup(2, right=((6, 10, (2, 2)),))
    assert prod.name == "GL(2) x O(2)" and prod.dim == 5


class _Diag(paramgeo.Parameterization):
    """phi(x) = diag(c) x: a linear map with prescribed singular values c (test helper)."""

    name = "diag-test-map"
    size_params = {}
    c = np.array([2.0, 1.0, 1e-13])

    def make_spec(self):
        return paramgeo.ParamSpec(x=(3,))

    def make_predictor_shape(self):
        return (3,)

    def forward(self, theta):
        return theta * self.c


def test_horizontal_lift_is_the_policy_pseudo_inverse(rng):
    """J^+ w by the truncated SVD: equal to lstsq at a generic point, and at a point where a
    singular value sits below the policy's tolerance that direction is not inverted."""
    p = paramgeo.get("uut", d=3, r=2)
    theta = p.random_point(rng)
    J = p.jacobian(theta)
    w = J @ rng.standard_normal(p.n)
    h = geometry.horizontal_lift(p, theta, w)
    np.testing.assert_allclose(J @ h, w, atol=1e-10)
    np.testing.assert_allclose(h, np.linalg.lstsq(J, w, rcond=None)[0], atol=1e-10)
    np.testing.assert_allclose(geometry.vertical_space(p, theta).T @ h, 0, atol=1e-10)
    d = _Diag()
    w = np.array([2.0, 3.0, 1.0])
    # s = (2, 1, 1e-13): 1e-13 <= tol = 2e-9, so the third direction is dropped, where
    # lstsq(rcond=None) would divide by 1e-13
    np.testing.assert_allclose(geometry.horizontal_lift(d, np.zeros(3), w), [1.0, 3.0, 0.0])
    assert abs(np.linalg.lstsq(d.jacobian(np.zeros(3)), w, rcond=None)[0][2]) > 1e12
    with pytest.warns(paramgeo.NumericalDoubtWarning, match="near the tolerance"):
        loose = geometry.horizontal_lift(d, np.zeros(3), w,
                                         policy=paramgeo.RankPolicy(rtol=1e-15))
    assert loose[2] == pytest.approx(1e13)
    with pytest.raises(paramgeo.ShapeError, match="3 entries"):
        geometry.horizontal_lift(d, np.zeros(3), np.ones(4))


def test_linear_action_matrices_read_the_lie_algebra(rng):
    """generators(theta)[:, k] = A_k theta for GL(2) on (U, V) of U V^T, with A_k = the
    right action X_k on U and -X_k^T on V; dense and sparse forms agree; a non-linear column
    is reported as such."""
    from paramgeo.symmetry import GeneralLinearGroup, SymmetryGroup, linear_action_matrices

    gl = GeneralLinearGroup(2, right=((0, 6, (3, 2)),), contragredient=((6, 10, (2, 2)),))
    A, linear = linear_action_matrices(gl, 10, rng=rng)
    assert A.shape == (4, 10, 10) and linear == (0, 1, 2, 3)
    theta = rng.standard_normal(10)
    np.testing.assert_allclose(np.einsum("kij,j->ik", A, theta), gl.generators(theta),
                               atol=1e-12)
    X = gl.algebra_basis[1]  # by hand: U -> U X, V -> -V X^T
    U, V = theta[:6].reshape(3, 2), theta[6:].reshape(2, 2)
    np.testing.assert_allclose(A[1] @ theta, np.concatenate([(U @ X).ravel(),
                                                             (-V @ X.T).ravel()]), atol=1e-12)
    S, lin_s = linear_action_matrices(gl, 10, rng=0, sparse=True)
    assert lin_s == linear
    for k in range(4):
        np.testing.assert_array_equal(S[k].toarray(), A[k])

    class Mixed(SymmetryGroup):
        name, dim = "mixed", 2

        def act(self, g, theta):
            return theta

        def random_element(self, rng):
            return None

        def generators(self, theta):
            return np.stack([2 * theta, theta ** 2], axis=1)

    A, linear = linear_action_matrices(Mixed(), 3)
    assert linear == (0,)
    np.testing.assert_allclose(A[0], 2 * np.eye(3))


def test_rational_rref_is_unique_and_exact(rng):
    """Two bases of one row space give the same RREF, with rational entries snapped."""
    import fractions

    from paramgeo.linalg import rational_rref

    base = np.array([[1.0, 0.5, 0.0, -2.0], [0.0, 0.0, 1.0, 1.0 / 3.0]])
    mixed = rng.standard_normal((2, 2)) @ base
    out = rational_rref(mixed)
    assert out == [[1, fractions.Fraction(1, 2), 0, -2], [0, 0, 1, fractions.Fraction(1, 3)]]
    assert all(isinstance(x, fractions.Fraction) for row in out for x in row)
    assert rational_rref(np.zeros((0, 3))) == []
