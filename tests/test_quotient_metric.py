"""paramgeo.quotient distances, log, exp, geodesics: Bures-Wasserstein against scipy's sqrtm,
the geodesic midpoint against the optimal-transport closed form, and geomstats as a reference
(its exp inverts our log; its SO(k) aligner is measured against ours).

Covers: ``paramgeo.quotient.metric``, ``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uut``,
``paramgeo_plugins.uvt``.
"""

import warnings

import numpy as np
import pytest
from scipy.linalg import sqrtm

import paramgeo
from paramgeo.errors import ArgumentError
from paramgeo.quotient import distance, exp, geodesic, log


def bures_wasserstein_sq(A, B):
    sA = sqrtm(A)
    return float(np.trace(A) + np.trace(B) - 2 * np.trace(sqrtm(sA @ B @ sA)).real)


def test_bures_wasserstein_by_factors_against_sqrtm_200_pairs():
    rng = np.random.default_rng(7)
    worst = 0.0
    for k in range(200):
        d = 2 + k % 3  # d = r = 2, 3, 4: full-rank PSD, where sqrtm is accurate
        p = paramgeo.get("uut", d=d, r=d)
        U, V = rng.standard_normal((d, d)), rng.standard_normal((d, d))
        D = distance(p, U.ravel(), V.ravel())
        assert D.kind == "quotient distance" and D.exact
        worst = max(worst, abs(D.value ** 2 - bures_wasserstein_sq(U @ U.T, V @ V.T)))
    assert worst < 1e-10


def test_geodesic_midpoint_is_the_transport_interpolation(rng):
    """gamma(1/2) U U^T equals M A M, M = (I + T)/2, T = A^-1/2 (A^1/2 B A^1/2)^1/2 A^-1/2
    the optimal transport map from A to B (McCann interpolation of centred Gaussians)."""
    p = paramgeo.get("uut", d=3, r=3)
    U, V = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    A, B = U @ U.T, V @ V.T
    sA = sqrtm(A).real
    isA = np.linalg.inv(sA)
    T = isA @ sqrtm(sA @ B @ sA).real @ isA
    M = 0.5 * (np.eye(3) + T)
    mid = geodesic(p, U.ravel(), V.ravel(), 0.5)[0].reshape(3, 3)
    assert np.allclose(mid @ mid.T, M @ A @ M, atol=1e-9)
    ends = geodesic(p, U.ravel(), V.ravel(), [0.0, 1.0])
    assert np.allclose(ends[0], U.ravel())
    assert np.allclose(ends[1].reshape(3, 3) @ ends[1].reshape(3, 3).T, B, atol=1e-10)
    # d(gamma(s), gamma(t)) = |s - t| d(U, V): a minimising geodesic
    d = distance(p, U.ravel(), V.ravel()).value
    g = geodesic(p, U.ravel(), V.ravel(), [0.2, 0.7])
    assert distance(p, g[0], g[1]).value == pytest.approx(0.5 * d, rel=1e-9)


def test_exp_log_round_trip_and_horizontality(rng):
    p = paramgeo.get("uut", d=4, r=2)
    U, V = rng.standard_normal(8), rng.standard_normal(8)
    v = log(p, U, V)
    assert np.linalg.norm(v) == pytest.approx(distance(p, U, V).value)
    Um = U.reshape(4, 2)
    S = Um.T @ v.reshape(4, 2)  # horizontal: U^T v symmetric
    assert np.allclose(S, S.T, atol=1e-12)
    back = exp(p, U, v)
    assert distance(p, back, V).value < 1e-10
    # exp of a vertical direction does not move the point: exp(U, U Omega) = U
    Om = np.array([[0.0, 1.0], [-1.0, 0.0]])
    assert np.allclose(exp(p, U, (Um @ Om).ravel()), U, atol=1e-12)


def _geomstats_bw():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from geomstats.geometry.rank_k_psd_matrices import (PSDBuresWassersteinMetric,
                                                            RankKPSDMatrices)
        space = RankKPSDMatrices(3, 2, equip=False)
        space.equip_with_metric(PSDBuresWassersteinMetric)
    return space


def test_geomstats_exp_inverts_our_log():
    space = _geomstats_bw()
    p = paramgeo.get("uut", d=3, r=2)
    rng = np.random.default_rng(3)
    for _ in range(5):
        U, V = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
        v = log(p, U.ravel(), V.ravel()).reshape(3, 2)
        tangent = U @ v.T + v @ U.T  # the push-forward dphi(v) at A = U U^T
        B = np.asarray(space.metric.exp(tangent, U @ U.T))
        assert np.allclose(B, V @ V.T, atol=1e-8)


def test_geomstats_so_k_aligner_is_never_below_and_often_above():
    """geomstats aligns rank-k PSD factors over SO(k); with reflections the distance can only
    be smaller. Ours equals sqrtm's formula on every pair; geomstats' exceeds it on many."""
    space = _geomstats_bw()
    p = paramgeo.get("uut", d=3, r=2)
    rng = np.random.default_rng(0)
    wrong, sqrtm_error = 0, 0.0
    for _ in range(200):
        U, V = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
        ours = distance(p, U.ravel(), V.ravel()).value ** 2
        theirs = float(space.metric.squared_dist(U @ U.T, V @ V.T))
        s = np.linalg.svd(U.T @ V, compute_uv=False)
        closed = np.sum(U ** 2) + np.sum(V ** 2) - 2 * s.sum()
        assert ours == pytest.approx(closed, abs=1e-10)
        assert theirs >= ours - 1e-8
        wrong += theirs > ours + 1e-6
        with warnings.catch_warnings():  # scipy warns that A is singular: the point here
            warnings.simplefilter("ignore")
            sqrtm_error = max(sqrtm_error, abs(ours - bures_wasserstein_sq(U @ U.T, V @ V.T)))
    assert wrong == 87  # the count docs/quotient.md reports
    # sqrtm at the singular rank-2 matrices of R^3: the error docs/quotient.md reports (1.2e-7)
    assert 1e-8 < sqrtm_error < 1e-6


def test_non_isometric_groups_are_named_and_refused(rng):
    q = paramgeo.get("uvt", m=3, n=3, r=2)
    t1, t2 = q.random_point(rng), q.random_point(rng)
    D = distance(q, t1, t2)
    assert D.kind == "orbit distance"
    with pytest.raises(ArgumentError, match="isometries"):
        log(q, t1, t2)
    with pytest.raises(ArgumentError, match="isometries"):
        geodesic(paramgeo.get("hadamard", p=2), np.ones(4), np.ones(4), 0.5)
