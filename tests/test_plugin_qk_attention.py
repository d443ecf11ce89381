"""The qk-attention plugin: multi-head scores S_h = W_Q^h W_K^h^T, their sum, softmax attention.

Oracles: autograd and central finite differences for the closed forms; literature dimensions
for the generic ranks of scores and sum (rank-k m x n matrices: k(m + n - k), Absil, Mahony,
Sepulchre 2008, Prop. 3.3; rank-k PSD d x d matrices: d k - k(k-1)/2, Journee et al. 2010);
the rank of attention follows from those and the row-shift invariance of softmax (derived in
the plugin's docstring and checked here numerically); the uvt/uut plugins for sum = concatenated
heads.

Covers: ``paramgeo.cli``, ``paramgeo.reports.contract_check``, ``paramgeo.reports.description``,
``paramgeo_plugins.qk_attention``.
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import paramgeo
from paramgeo import Parameterization
from paramgeo.cli import main
from paramgeo.reports.contract_check import finite_difference_jacobian
from paramgeo.reports.description import describe


def rank_k_dim(d, k):
    """Manifold of d x d matrices of rank k."""
    return k * (2 * d - k)


def psd_rank_k_dim(d, k):
    """Manifold of d x d PSD matrices of rank k."""
    return d * k - k * (k - 1) // 2


def heads_of(p, theta):
    """(Q, K) as H x d x r arrays (Q is K when tied)."""
    blocks = p.spec.unpack(theta)
    if p.sizes["tied"]:
        return blocks["W"], blocks["W"]
    return blocks["WQ"], blocks["WK"]


OUTPUTS = [(tied, out) for tied in (False, True) for out in ("scores", "sum", "attention")]


# ---------------------------------------------------------------- acceptance and ranks
def test_describe_acceptance_through_the_cli():
    res = CliRunner().invoke(main, ["describe", "qk-attention", "-p", "d=5", "-p", "r=2",
                                    "-p", "heads=2", "--json"], catch_exceptions=False)
    out = json.loads(res.output)
    assert out["n"] == 40 and out["generic_rank"] == 32
    assert out["symmetry"] == {"name": "GL(2) x GL(2)", "dim": 8}
    assert out["quotient_dim"] == 32 and out["predictor_shape"] == [2, 5, 5]


@pytest.mark.parametrize("d,r,H", [(5, 2, 2), (4, 1, 3), (3, 3, 2), (6, 2, 1), (4, 2, 3)])
def test_generic_ranks_of_scores_and_sum(d, r, H):
    k = min(H * r, d)
    expected = {
        (False, "scores"): H * rank_k_dim(d, r),
        (True, "scores"): H * psd_rank_k_dim(d, r),
        (False, "sum"): rank_k_dim(d, k),
        (True, "sum"): psd_rank_k_dim(d, k),
    }
    for (tied, output), rank in expected.items():
        p = paramgeo.get("qk-attention", d=d, r=r, heads=H, tied=tied, output=output)
        desc = describe(p)
        assert desc.generic_rank == rank, (tied, output)
        group_dim = H * (r * (r - 1) // 2 if tied else r * r)
        assert desc.symmetry["dim"] == group_dim and desc.quotient_dim == p.n - group_dim
        # GL(r)^H explains all redundancy of the stack; the sum has the larger fiber GL(Hr)
        if output == "scores" or H == 1:
            assert desc.rank_is_quotient_dim


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize(
    "d,r,H,T,const",
    [(4, 2, 2, 6, False), (3, 1, 2, 5, False), (4, 2, 2, 6, True), (3, 2, 1, 7, True),
     (5, 2, 2, 4, False), (4, 2, 1, 4, False), (4, 2, 2, 2, False), (5, 3, 1, 3, False)],
)
def test_attention_rank_and_the_row_shift_drop(d, r, H, T, const, tied):
    """T > d, generic X: the rank of scores. Ones in range X (a constant feature, or T <= d):
    the tangent row shifts c 1^T of X S_h X^T are killed by the softmax."""
    p = paramgeo.get("qk-attention", d=d, r=r, heads=H, tied=tied, output="attention",
                     tokens=T, constant_feature=const)
    rank = paramgeo.generic_rank(p)
    if T > d:
        per_head = psd_rank_k_dim(d, r) if tied else rank_k_dim(d, r)
        if const and not tied:
            per_head -= r
    else:
        k = min(r, T)
        per_head = (psd_rank_k_dim(T, k) - (k == T)) if tied else rank_k_dim(T, k) - k
    assert rank == H * per_head


def test_attention_rows_are_distributions_and_shift_invariant(rng):
    p = paramgeo.get("qk-attention", d=4, r=2, heads=2, output="attention", tokens=5)
    A = p.forward(p.random_point(rng))
    assert A.shape == (2, 5, 5) and np.all(A > 0)
    np.testing.assert_allclose(A.sum(axis=-1), 1.0)
    # with a constant feature, S -> S + a e_1^T shifts logit rows by X a: A does not change
    p = paramgeo.get("qk-attention", d=4, r=1, heads=1, output="attention", tokens=5,
                     constant_feature=True)
    theta = p.random_point(rng)
    Q, K = heads_of(p, theta)
    S = Q[0] @ K[0].T
    logits = p.X @ (S + np.outer(rng.standard_normal(4), np.eye(4)[0])) @ p.X.T / 2.0
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(shifted / shifted.sum(-1, keepdims=True), p.forward(theta)[0])


def test_token_matrix_is_seeded_and_documented_sizes():
    a = paramgeo.get("qk-attention", d=3, output="attention", tokens=4, token_seed=3)
    b = paramgeo.get("qk-attention", d=3, output="attention", tokens=4, token_seed=3)
    c = paramgeo.get("qk-attention", d=3, output="attention", tokens=4, token_seed=4)
    np.testing.assert_array_equal(a.X, b.X)
    assert a.X.shape == (4, 3) and not np.allclose(a.X, c.X)
    np.testing.assert_array_equal(
        a.X, np.random.default_rng(3).standard_normal((4, 3)))


def test_bad_sizes_are_refused():
    with pytest.raises(paramgeo.SizeError, match="choose r <= d"):
        paramgeo.get("qk-attention", d=2, r=3)
    with pytest.raises(paramgeo.SizeError, match="scores, sum, attention"):
        paramgeo.get("qk-attention", output="softmax")


# ---------------------------------------------------------------- closed forms
@pytest.mark.parametrize("tied,output", OUTPUTS)
def test_closed_forms_match_autograd_and_finite_differences(rng, tied, output):
    p = paramgeo.get("qk-attention", d=3, r=2, heads=2, tied=tied, output=output, tokens=4)
    for _ in range(2):
        theta = p.random_point(rng)
        J = p.jacobian(theta)
        np.testing.assert_allclose(J, Parameterization.jacobian(p, theta), atol=1e-12)
        np.testing.assert_allclose(J, finite_difference_jacobian(p, theta), atol=1e-7)
        v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
        np.testing.assert_allclose(p.jvp(theta, v), Parameterization.jvp(p, theta, v),
                                   atol=1e-12)
        np.testing.assert_allclose(p.vjp(theta, w), Parameterization.vjp(p, theta, w),
                                   atol=1e-12)


@pytest.mark.parametrize("tied,output", OUTPUTS)
def test_contract_and_symbolic(tied, output):
    p = paramgeo.get("qk-attention", d=3, r=2, heads=2, tied=tied, output=output, tokens=4)
    report = paramgeo.check(p)
    assert report.passed, str(report)
    assert "symbolic" in {i.property for i in report.items}


def test_sum_is_uvt_of_the_concatenated_heads(rng):
    for tied, other in ((False, "uvt"), (True, "uut")):
        p = paramgeo.get("qk-attention", d=5, r=2, heads=2, tied=tied, output="sum")
        theta = p.random_point(rng)
        Q, K = heads_of(p, theta)
        Qc, Kc = np.hstack(list(Q)), np.hstack(list(K))
        if tied:
            q = paramgeo.get(other, d=5, r=4)
            ref = q.forward(q.spec.pack(Qc))
        else:
            q = paramgeo.get(other, m=5, n=5, r=4)
            ref = q.forward(q.spec.pack(Qc, Kc))
        np.testing.assert_allclose(p.forward(theta), ref, atol=1e-12)
        assert paramgeo.generic_rank(p) == paramgeo.generic_rank(q)


# ---------------------------------------------------------------- symmetry
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), which=st.sampled_from(OUTPUTS),
       H=st.integers(1, 3), r=st.integers(1, 3))
def test_invariance_under_random_group_elements(seed, which, H, r):
    tied, output = which
    p = paramgeo.get("qk-attention", d=3, r=r, heads=H, tied=tied, output=output, tokens=4)
    rng = np.random.default_rng(seed)
    theta = p.random_point(rng)
    group = p.symmetry()
    for _ in range(3):
        moved = group.act(group.random_element(rng), theta)
        np.testing.assert_allclose(p.forward(moved), p.forward(theta), atol=1e-8)
    # explicit per-head matrices: (Q_h A_h, K_h A_h^{-T}) or W_h R_h
    Q, K = heads_of(p, theta)
    mats = [np.linalg.qr(rng.standard_normal((r, r)))[0] if tied
            else rng.standard_normal((r, r)) + 3 * np.eye(r) for _ in range(H)]
    Q2 = np.stack([Q[h] @ mats[h] for h in range(H)])
    K2 = np.stack([K[h] @ np.linalg.inv(mats[h]).T for h in range(H)])
    moved = p.spec.pack(Q2) if tied else p.spec.pack(Q2, K2)
    np.testing.assert_allclose(p.forward(moved), p.forward(theta), atol=1e-8)


def test_head_permutation_is_a_symmetry_of_the_sum_only(rng):
    for tied in (False, True):
        for output in ("sum", "scores", "attention"):
            p = paramgeo.get("qk-attention", d=4, r=2, heads=3, tied=tied, output=output)
            theta = p.random_point(rng)
            blocks = {k: v[[2, 0, 1]] for k, v in p.spec.unpack(theta).items()}
            swapped = p.spec.pack(**blocks)
            same = np.allclose(p.forward(swapped), p.forward(theta))
            assert same == (output == "sum"), (tied, output)
            names = p.symmetry().name
            assert ("S_3" in names) == (output == "sum")


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), tied=st.booleans(), output=st.sampled_from(
    ["scores", "sum"]))
def test_horizontal_projection_matches_generic(seed, tied, output):
    p = paramgeo.get("qk-attention", d=4, r=2, heads=2, tied=tied, output=output)
    rng = np.random.default_rng(seed)
    theta, v = p.random_point(rng), rng.standard_normal(p.n)
    np.testing.assert_allclose(paramgeo.horizontal_projection(p, theta, v),
                               paramgeo.horizontal_projection(p, theta, v, generic=True),
                               atol=1e-9)
