"""The matrix-free route against the dense one, wherever both fit.

The dense SVD of J (geometry.decide_rank) is the reference: the matrix-free certificate
(Lanczos on the horizontally deflated J^T J, matfree.certify_rank) and the symmetry's vertical
projector must agree with it on rank, kernel dimension, orbit dimension and projections, at the
default sizes of every plugin, at 2-4x larger sizes and at rank-deficient points.

Covers: ``paramgeo.linalg.matfree``, ``paramgeo.linalg.numerics``, ``paramgeo.linalg.routes``,
``paramgeo.reports.description``, ``paramgeo_plugins.deep_diagonal``,
``paramgeo_plugins.hadamard``, ``paramgeo_plugins.monomial``, ``paramgeo_plugins.qk_attention``,
``paramgeo_plugins.relu_net``, ``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import warnings

import numpy as np
import pytest

import paramgeo
from paramgeo import geometry
from paramgeo.linalg import matfree, routes
from paramgeo.reports.description import describe
from paramgeo.errors import NumericalDoubtWarning

CASES = [
    ("uut", {}), ("uut", {"d": 12, "r": 3}),
    ("uvt", {}), ("uvt", {"m": 12, "n": 9, "r": 3}),
    ("hadamard", {}), ("hadamard", {"p": 40}),
    ("deep-diagonal", {}), ("deep-diagonal", {"p": 16, "depth": 3}),
    ("deep-diagonal", {"p": 16, "depth": 2, "variant": "signed"}),
    ("monomial", {}), ("monomial", {"widths": (3, 4, 1), "degree": 3}),
    ("qk-attention", {}), ("qk-attention", {"d": 8, "r": 2, "heads": 2}),
    ("qk-attention", {"d": 6, "r": 2, "heads": 3, "tied": True, "output": "sum"}),
    ("qk-attention", {"d": 5, "r": 2, "heads": 2, "output": "attention", "tokens": 7}),
]


def _ids(case):
    name, sizes = case
    return name + "".join(f"-{k}{v}" for k, v in sizes.items())


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_matrix_free_rank_agrees_with_dense(case, rng):
    name, sizes = case
    p = paramgeo.get(name, **sizes)
    theta = p.random_point(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalDoubtWarning)
        dense = geometry.rank_at(p, theta, route="dense")
        free = geometry.rank_at(p, theta, route="matrix-free")
    assert free.route == "matrix-free" and dense.route == "dense"
    assert free.rank == dense.rank, (free.certificate, dense.singular_values)
    cert = free.certificate
    assert cert.expected - cert.deficiency == free.rank
    # the certified margin is a singular value of J (dense reference) within its error bound
    if cert.sigma_min > 0:
        s = dense.singular_values
        assert np.min(np.abs(s - cert.sigma_min)) <= cert.error_bound + 1e-6 * s[0]
    assert cert.sigma_max == pytest.approx(dense.singular_values[0], rel=1e-3)


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_vertical_projector_agrees_with_dense_basis(case, rng):
    name, sizes = case
    p = paramgeo.get(name, **sizes)
    theta = p.random_point(rng)
    v = rng.standard_normal(p.n)
    V = geometry.vertical_space(p, theta)
    P = geometry.vertical_projector(p, theta)
    assert P.dim == V.shape[1] == geometry.orbit_dim(p, theta)
    np.testing.assert_allclose(P(v), V @ (V.T @ v), atol=1e-10 * (1 + np.linalg.norm(v)))
    np.testing.assert_allclose(
        geometry.horizontal_projection(p, theta, v),
        geometry.horizontal_projection(p, theta, v, generic=True), atol=1e-9)


def _rank_deficient_points():
    """(param, theta, expected rank) at points where J loses rank, with the rank derived by
    hand: U U^T at rank U = k: d k - k(k-1)/2; U V^T at rank U = k, V generic: m r + n k - k r
    (dU V^T spans matrices with rows in row V, U dV^T those with columns in col U);
    Hadamard with u_i = v_i = 0 on z coordinates: p - z; deep-diagonal product with two zero
    factors in z coordinates: p - z."""
    rng = np.random.default_rng(7)
    out = []
    d, r, k = 9, 3, 1
    p = paramgeo.get("uut", d=d, r=r)
    U = rng.standard_normal((d, k)) @ rng.standard_normal((k, r))
    out.append((p, U.ravel(), d * k - k * (k - 1) // 2))
    m, n, r, k = 8, 7, 3, 2
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    U = rng.standard_normal((m, k)) @ rng.standard_normal((k, r))
    out.append((p, p.spec.pack(U, rng.standard_normal((n, r))), m * r + n * k - k * r))
    p = paramgeo.get("hadamard", p=70)
    theta = rng.standard_normal(140)
    theta[[3, 73, 10, 80]] = 0.0
    out.append((p, theta, 68))
    p = paramgeo.get("deep-diagonal", p=30, depth=3)
    theta = rng.standard_normal(90)
    theta[[2, 32, 5, 65]] = 0.0  # coordinates 2 and 5 each lose two factors
    out.append((p, theta, 28))
    return out


@pytest.mark.parametrize("index", range(4))
def test_matrix_free_finds_rank_drops(index):
    param, theta, expected = _rank_deficient_points()[index]
    dense = geometry.rank_at(param, theta, route="dense", warn=False)
    routes = ["matrix-free"] + (["sparse"] if param.provides("sparse_jacobian") else [])
    assert dense.rank == expected
    for route in routes:
        free = geometry.rank_at(param, theta, route=route, warn=False)
        assert free.rank == expected, (route, free.certificate)
        assert free.certificate.deficiency > 0 or free.certificate.expected == expected


def test_matrix_free_counts_a_large_rank_drop():
    """A multiple zero eigenvalue: one Lanczos run sees one vector of it; locking counts all.
    U U^T at rank U = k: rank d k - k(k-1)/2, orbit dimension r(r-1)/2 (the stabilizer of a
    corank-1 factor is trivial in so(r)), so the drop beyond the symmetry is
    d r - r(r-1)/2 - d k + k(k-1)/2 = 27 for d = 30, r = 4, k = 3."""
    d, r, k = 30, 4, 3
    rng = np.random.default_rng(3)
    U = rng.standard_normal((d, k)) @ rng.standard_normal((k, r))
    p = paramgeo.get("uut", d=d, r=r)
    free = geometry.rank_at(p, U.ravel(), route="matrix-free", warn=False)
    assert free.rank == d * k - k * (k - 1) // 2 == geometry.rank_at(p, U.ravel(),
                                                                     route="dense").rank
    assert free.certificate.deficiency == 27 and free.certificate.sigma_min > 1e-3


def test_rank_drop_beyond_the_limit_is_refused():
    d, r = 30, 4
    p = paramgeo.get("uut", d=d, r=r)
    U = np.zeros((d, r))
    U[:, 0] = np.arange(1.0, d + 1)  # rank 1: J loses far more than 2 ranks beyond O(4)
    with pytest.raises(matfree.RankCertificateError, match="rank drop found.*max_deficiency"):
        matfree.certify_rank(p, U.ravel(), max_deficiency=2)


def test_auto_route_by_size():
    from paramgeo_plugins.hadamard import Hadamard

    class NoClosedRank(Hadamard):  # hadamard with its sparse J but without rank_at
        capabilities = Hadamard.capabilities - {"rank_at"}

    assert routes.choose_route(paramgeo.get("uut", d=10, r=2)) == "closed-form"
    assert routes.choose_route(paramgeo.get("monomial", widths=(3, 4, 1))) == "dense"
    assert routes.choose_route(paramgeo.get("monomial", widths=(200, 200, 1))) == "matrix-free"
    assert routes.choose_route(NoClosedRank(p=3000)) == "sparse"
    with pytest.raises(paramgeo.ParamgeoError, match="unknown rank route"):
        routes.choose_route(paramgeo.get("uut"), "fast")


def test_describe_matrix_free_matches_closed_form_generic_rank():
    d, r = 80, 5  # n = 400, m = 6400: matrix-free when asked (auto takes the closed form)
    res = describe(paramgeo.get("uut", d=d, r=r), route="matrix-free")
    assert res.rank_route == "matrix-free"
    auto = describe(paramgeo.get("uut", d=d, r=r))
    assert auto.rank_route == "closed-form" and auto.generic_rank == res.generic_rank
    assert res.generic_rank == d * r - r * (r - 1) // 2 == res.quotient_dim
    assert res.rank_certificate.deficiency == 0 and res.rank_certificate.sigma_min > 0


def test_jacobian_operator_products(rng):
    p = paramgeo.get("qk-attention", d=5, r=2, heads=2)
    theta = p.random_point(rng)
    J = p.jacobian(theta)
    op = matfree.jacobian_operator(p, theta)
    v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
    np.testing.assert_allclose(op @ v, J @ v, atol=1e-12)
    np.testing.assert_allclose(op.T @ w, J.T @ w, atol=1e-12)
    sp = matfree.jacobian_operator(paramgeo.get("hadamard", p=6), np.arange(12.0))
    np.testing.assert_allclose(sp @ np.ones(12), np.arange(6.0, 12.0) + np.arange(6.0))


def test_horizontal_lift_matrix_free_matches_pseudo_inverse(rng):
    p = paramgeo.get("uvt", m=9, n=7, r=2)
    theta = p.random_point(rng)
    w = rng.standard_normal(p.m)  # not in range J: the least-squares lift of least norm
    dense = geometry.horizontal_lift(p, theta, w, route="dense")
    free = geometry.horizontal_lift(p, theta, w, route="matrix-free")
    np.testing.assert_allclose(free, dense, atol=1e-8 * np.linalg.norm(dense))
    np.testing.assert_allclose(np.linalg.pinv(p.jacobian(theta)) @ w, dense, atol=1e-10)


@pytest.mark.parametrize("way", ["eigh", "pivoted Cholesky", "lanczos"])
def test_large_rank_drop_counted_exactly_by_every_way(monkeypatch, way):
    """uut d=40 r=6 at a U of rank 5: J loses (r - k)(d - k) = 35 ranks beyond the O(6) orbit;
    the rank is the rank-5 PSD stratum's dimension d k - k(k-1)/2 = 190. The count switches
    from locked Lanczos to the assembled operator (its eigensolve, or its pivoted Cholesky
    factor) when that is priced cheaper (forced here each way by pricing the dense solvers at
    0 or infinity); every way counts the drop exactly, as the dense SVD does, and the margin
    sigma_min (the smallest horizontal singular value above tol) agrees with the SVD's."""
    from paramgeo.linalg import decide_rank
    from paramgeo.linalg.matfree import certify_rank

    inf = float("inf")
    monkeypatch.setattr(matfree, "_eigh_seconds", lambda dim: 0.0 if way == "eigh" else inf)
    monkeypatch.setattr(matfree, "_factor_seconds",
                        lambda dim: 0.0 if way == "pivoted Cholesky" else inf)
    d, r, k = 40, 6, 5
    p = paramgeo.get("uut", d=d, r=r)
    rng = np.random.default_rng(0)
    theta = (rng.standard_normal((d, k)) @ rng.standard_normal((k, r))).ravel()
    dec = certify_rank(p, theta, warn=False)
    assert dec.rank == d * k - k * (k - 1) // 2 == 190
    assert dec.certificate.deficiency == (r - k) * (d - k)
    note = dec.certificate.note
    assert ("assembled" in note) == (way != "lanczos")
    assert ("Cholesky" in note) == (way == "pivoted Cholesky")
    svd = np.linalg.svd(p.jacobian(theta), compute_uv=False)
    assert dec.certificate.sigma_min == pytest.approx(svd[189], rel=1e-6)
    assert decide_rank(p.jacobian(theta), warn=False).rank == 190


def _relu200():
    """relu-net with m = 200 outputs and n = 996 parameters: J J^T is ill-conditioned enough
    that Lanczos for its smallest eigenvalue does not converge in 50 dim restarts."""
    return paramgeo.get("relu-net", d=10, width=83, outputs=1, n_inputs=200)


def test_ill_conditioned_gram_is_assembled_and_agrees_with_dense(rng, monkeypatch):
    p = _relu200()
    theta = p.random_point(rng)
    dense = geometry.rank_at(p, theta, route="dense").rank
    free = geometry.rank_at(p, theta, route="matrix-free", warn=False)
    assert free.rank == dense == 200
    assert "assembled from 200 products" in free.certificate.note
    # priced so that Lanczos runs first: it stops at the assembled price and assembles
    monkeypatch.setattr(matfree, "LANCZOS_PRODUCTS", 0)
    stopped = geometry.rank_at(p, theta, route="matrix-free", warn=False)
    assert stopped.rank == dense and "assembled" in stopped.certificate.note
    assert stopped.certificate.matvecs < 4000  # at most about twice the assembled price


def test_auto_route_priced_and_recorded(rng, monkeypatch):
    monkeypatch.setattr(routes, "UNPRICED_WORK", 0)  # price this small case
    p = _relu200()
    theta = p.random_point(rng)
    assert routes.static_route(p) == "priced"
    first = geometry.rank_at(p, theta)
    prices = first.prices
    assert prices.chosen == first.route == min(("dense", "matrix-free"), key=lambda r: {
        "dense": prices.dense, "matrix-free": prices.matrix_free}[r])
    assert prices.jacobian_seconds == 0 and prices.pair_seconds > 0
    assert first.rank == geometry.rank_at(p, theta, route="dense").rank
    # a dense rank timed J: the next prices include it
    assert geometry.rank_at(p, theta).prices.jacobian_seconds > 0
    assert routes.choose_route(p, theta=theta) in ("dense", "matrix-free")


def test_route_prices_follow_the_cost_model(rng, monkeypatch):
    p = _relu200()
    theta = p.random_point(rng)
    monkeypatch.setattr(routes, "_lapack_rates", lambda: (1e-10, 1e-10, 1.0))  # SVD: hours
    assert routes.route_prices(p, theta).chosen == "matrix-free"
    monkeypatch.setattr(routes, "_lapack_rates", lambda: (1e-10, 1e-10, 0.0))  # SVD: free
    assert routes.route_prices(p, theta).chosen == "dense"
