"""The ``rank_at`` capability: rank J(theta) in closed form from the factors.

Oracle: the SVD of the dense Jacobian (``decide_rank(param.jacobian(theta))``), at every stratum
of each plugin at small sizes (every factor rank, every zero pattern, every per-head rank
combination, and the special token configurations of attention); the literature formulas for
U U^T (d k - k(k-1)/2, Journee et al. 2010) and U V^T (mn - (m - rank U)(n - rank V)); the
contract check must fail a plugin whose closed form is wrong.

Covers: ``paramgeo.critical.stratification``, ``paramgeo.geometry.factor_spectra``,
``paramgeo.linalg.numerics``, ``paramgeo_plugins.hadamard``, ``paramgeo_plugins.qk_attention``,
``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import itertools
import warnings

import numpy as np
import pytest

import paramgeo
from paramgeo import NumericalDoubtWarning
from paramgeo.geometry.factor_spectra import (
    gram_jacobian_singular_values,
    product_jacobian_singular_values,
)
from paramgeo.linalg import decide_rank
from paramgeo_plugins.uut import UUT


def dense(param, theta):
    return decide_rank(param.jacobian(theta), warn=False)


def closed(param, theta):
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalDoubtWarning)  # exact strata: no doubt
        return paramgeo.rank_at(param, theta)


def of_rank(rng, rows, cols, k):
    return rng.standard_normal((rows, k)) @ rng.standard_normal((k, cols))


def assert_same(param, theta, spectrum=True):
    a, b = closed(param, theta), dense(param, theta)
    assert a.rank == b.rank, (param, a.rank, b.rank)
    if spectrum:  # the closed form gives the singular values of J itself
        np.testing.assert_allclose(a.singular_values, b.singular_values,
                                   atol=1e-12 * max(b.singular_values[0], 1.0))
    return a.rank


@pytest.mark.parametrize("d,r", [(4, 2), (4, 3), (3, 5), (5, 1)])
def test_uut_every_factor_rank(rng, d, r):
    p = paramgeo.get("uut", d=d, r=r)
    for k in range(min(d, r) + 1):
        U = of_rank(rng, d, r, k)
        assert assert_same(p, U.ravel()) == d * k - k * (k - 1) // 2


@pytest.mark.parametrize("m,n,r", [(4, 3, 2), (3, 3, 3), (5, 2, 1)])
def test_uvt_every_pair_of_factor_ranks(rng, m, n, r):
    p = paramgeo.get("uvt", m=m, n=n, r=r)
    for ku, kv in itertools.product(range(r + 1), repeat=2):
        theta = np.concatenate([of_rank(rng, m, r, ku).ravel(), of_rank(rng, n, r, kv).ravel()])
        assert assert_same(p, theta) == m * n - (m - ku) * (n - kv)


@pytest.mark.parametrize("name,sizes", [
    ("hadamard", dict(p=3)),
    ("deep-diagonal", dict(p=2, depth=3)),
    ("deep-diagonal", dict(p=2, depth=1)),
    ("deep-diagonal", dict(p=2, depth=3, variant="signed")),
    ("deep-diagonal", dict(p=2, depth=2, variant="signed")),
])
def test_diagonal_nets_every_zero_pattern(rng, name, sizes):
    p = paramgeo.get(name, **sizes)
    base = p.random_point(rng)
    for mask in itertools.product([False, True], repeat=p.n):
        theta = np.where(mask, 0.0, base)
        assert_same(p, theta)


def test_factor_spectra_match_dense_svd_off_square_shapes(rng):
    """r > d for U U^T and k > min(m, n) for U V^T (the sum of many heads)."""
    for d, k, q in [(3, 5, 3), (3, 5, 2), (2, 6, 0)]:
        U = of_rank(rng, d, k, q)
        J = np.asarray(paramgeo.get("uut", d=d, r=k).jacobian(U.ravel()))
        np.testing.assert_allclose(gram_jacobian_singular_values(U),
                                   np.linalg.svd(J, compute_uv=False), atol=1e-12)
    for m, n, k in [(2, 3, 5), (3, 2, 4)]:
        U, V = of_rank(rng, m, k, 2), of_rank(rng, n, k, 1)
        J = np.hstack([np.einsum("ac,bk->abck", np.eye(m), V).reshape(m * n, -1),
                       np.einsum("ak,bc->abck", U, np.eye(n)).reshape(m * n, -1)])
        np.testing.assert_allclose(product_jacobian_singular_values(U, V),
                                   np.linalg.svd(J, compute_uv=False), atol=1e-12)


QK_CONFIGS = [  # (output, tokens, constant_feature): generic X with T > d, ones in range X, T <= d
    ("scores", 6, False), ("sum", 6, False),
    ("attention", 6, False), ("attention", 6, True), ("attention", 2, False),
    ("attention", 3, True),
]


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("output,tokens,const", QK_CONFIGS)
def test_qk_attention_every_per_head_rank_combination(rng, tied, output, tokens, const):
    d, r, H = 3, 2, 2
    p = paramgeo.get("qk-attention", d=d, r=r, heads=H, tied=tied, output=output,
                     tokens=tokens, constant_feature=const)
    ranks = range(r + 1)
    per_head = list(ranks) if tied else list(itertools.product(ranks, repeat=2))
    for combo in itertools.product(per_head, repeat=H):
        Q = np.stack([of_rank(rng, d, r, c if tied else c[0]) for c in combo])
        blocks = [Q] if tied else [Q, np.stack([of_rank(rng, d, r, c[1]) for c in combo])]
        theta = np.concatenate([b.ravel() for b in blocks])
        assert_same(p, theta, spectrum=output != "attention")


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("tokens", [6, 3])
def test_qk_attention_ones_in_the_range_of_a_head(rng, tied, tokens):
    """With a constant feature (1 = X e_1) and e_1 in range K_h (tied: W_h), the softmax kills
    more: the drop of head h is c instead of rank X Q_h (tied: 1 instead of 0)."""
    d, r, H = 4, 2, 2
    p = paramgeo.get("qk-attention", d=d, r=r, heads=H, tied=tied, output="attention",
                     tokens=tokens, constant_feature=True)
    Q, K = (rng.standard_normal((H, d, r)) for _ in range(2))
    K[0][:, 0] = Q[1][:, 1] = np.eye(d)[0]
    theta = np.concatenate([Q.ravel()] + ([] if tied else [K.ravel()]))
    rank = assert_same(p, theta, spectrum=False)
    generic = assert_same(p, p.random_point(rng), spectrum=False)
    assert rank < generic


def test_qk_attention_rank_rests_on_the_nearest_factor_decision(rng):
    p = paramgeo.get("qk-attention", d=3, r=2, heads=2, output="attention", tokens=5)
    theta = p.random_point(rng)
    decision = closed(p, theta)
    assert decision.rank == dense(p, theta).rank and not decision.doubtful
    assert decision.tol > 0 and decision.closest in decision.singular_values


def test_doubtful_closed_form_decision_warns(rng):
    p = paramgeo.get("uut", d=4, r=2)
    U = rng.standard_normal((4, 2))
    U[:, 1] = U[:, 0] + 1e-8 * rng.standard_normal(4)  # sigma_2 / sigma_1 ~ 1e-8, near 1e-9
    with pytest.warns(NumericalDoubtWarning):
        decision = paramgeo.rank_at(p, U.ravel())
    assert decision.doubtful and decision.rank == dense(p, U.ravel()).rank


class WrongRankAt(UUT):
    """Claims the generic rank everywhere: the contract must catch it at rank-deficient U."""

    name = "uut-wrong-rank"

    def rank_at(self, theta, policy=None):
        return super().rank_at(self.random_point(np.random.default_rng(0)), policy)


def test_contract_catches_a_wrong_rank_at():
    report = paramgeo.check(WrongRankAt(d=4, r=2))
    failing = {i.property for i in report.failures()}
    assert failing == {"rank-at"}, str(report)
    assert "rank 0 on right" in str(report) or "rank 1 on right" in str(report)


def test_contract_checks_rank_at_on_every_named_stratum():
    report = paramgeo.check(paramgeo.get("qk-attention", d=3, r=2, heads=2))
    labels = [i.at for i in report.items if i.property == "rank-at"]
    assert report.passed
    for head in (0, 1):
        for side in ("right", "contragredient", "both"):
            for k in (0, 1):
                assert any(f"factor {head} (GL(2)) rank {k} on {side}" in a for a in labels)
    report = paramgeo.check(paramgeo.get("hadamard", p=2))
    labels = [i.at for i in report.items if i.property == "rank-at"]
    assert all(any(f"neuron h{i} {s}" in a for a in labels)
               for i in (0, 1) for s in ("in", "out", "removed"))


def test_strata_ranks_through_the_closed_form():
    """critical.strata gets its ranks from geometry.rank_at: for uut (factor channels of U
    removed) the stratum with j channels removed has rank d k - k(k-1)/2, k = r - j."""
    from paramgeo.critical import strata

    d, r = 5, 3
    result = strata(paramgeo.get("uut", d=d, r=r))
    ranks = sorted(rank for _, rank, _, _ in result.rows())
    assert ranks == sorted(d * k - k * (k - 1) // 2 for k in range(r + 1))
