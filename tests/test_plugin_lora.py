"""The lora plugin: W = W0 + B A, uvt's geometry translated by W0, and its critical init B = 0.

Oracles: autograd and central finite differences for the closed-form derivatives; the explicit
matrix I_m (x) A^T of the linear map dB -> dB A (row-major vec) for the rank at B = 0, whose rank
is m rank(A) (numpy's matrix_rank of A, an independent computation); the dimension r(m + n - r)
of the manifold of rank-r m x n matrices (Absil, Mahony, Sepulchre 2008, Prop. 3.3) for the
generic rank; the uvt plugin at (U, V) = (B, A^T) for the translated map; explicit B g,
g^{-1} A for the GL(r) invariance.

Covers: ``paramgeo.cli``, ``paramgeo.critical.classification``, ``paramgeo.reports.description``,
``paramgeo.reports.testing``, ``paramgeo_plugins.lora``, ``paramgeo_plugins.uvt``.
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.cli import main
from paramgeo.critical import classify
from paramgeo.reports.description import describe
from paramgeo.reports.testing import assert_closed_forms


def factors(p, theta):
    m, n, r = p.sizes["m"], p.sizes["n"], p.sizes["r"]
    return theta[: m * r].reshape(m, r), theta[m * r:].reshape(n, r).T  # B, A


def test_describe_acceptance_through_the_cli():
    res = CliRunner().invoke(main, ["describe", "lora", "-p", "m=6", "-p", "n=5", "-p", "r=2",
                                    "--json"], catch_exceptions=False)
    out = json.loads(res.output)
    assert out["n"] == 22 and out["m"] == 30
    assert out["generic_rank"] == 18 == 2 * (6 + 5 - 2)
    assert out["symmetry"] == {"name": "GL(2)", "dim": 4}
    assert out["quotient_dim"] == 18 and out["rank_is_quotient_dim"] is True


@pytest.mark.parametrize("m,n,r", [(6, 5, 2), (4, 3, 2), (3, 5, 1), (4, 4, 4), (2, 6, 2)])
def test_generic_rank_is_the_fixed_rank_manifold_dimension(m, n, r):
    assert describe(paramgeo.get("lora", m=m, n=n, r=r)).generic_rank == r * (m + n - r)


def test_forward_is_w0_plus_b_a_and_the_translate_of_uvt(rng):
    p = paramgeo.get("lora", m=5, n=4, r=2, w0_seed=3)
    B, A = rng.standard_normal((5, 2)), rng.standard_normal((2, 4))
    theta = p.point(B, A)
    W0 = np.random.default_rng(3).standard_normal((5, 4)) / np.sqrt(4)
    np.testing.assert_allclose(p.W0, W0)
    np.testing.assert_allclose(p.forward(theta), W0 + B @ A, atol=1e-14)
    Bt, At = factors(p, theta)
    np.testing.assert_array_equal(Bt, B)
    np.testing.assert_array_equal(At, A)
    uvt = paramgeo.get("uvt", m=5, n=4, r=2)
    np.testing.assert_allclose(p.forward(theta) - p.W0, uvt.forward(theta), atol=1e-14)
    np.testing.assert_array_equal(p.jacobian(theta), uvt.jacobian(theta))


def test_user_w0_keyword_sets_the_sizes_and_is_checked(rng):
    W0 = rng.standard_normal((3, 7))
    p = paramgeo.get_class("lora")(r=2, W0=W0)
    assert (p.sizes["m"], p.sizes["n"], p.n) == (3, 7, 2 * (3 + 7))
    theta = p.random_point(rng)
    B, A = factors(p, theta)
    np.testing.assert_allclose(p.forward(theta), W0 + B @ A, atol=1e-14)
    assert paramgeo.check(paramgeo.get_class("lora")(r=1, W0=W0[:, :2])).passed
    with pytest.raises(paramgeo.ShapeError, match="drop m, n"):
        paramgeo.get_class("lora")(m=4, r=2, W0=W0)
    with pytest.raises(paramgeo.ShapeError, match="finite 2-d array"):
        paramgeo.get_class("lora")(r=1, W0=np.ones(3))


@pytest.mark.parametrize("m,n,r", [(6, 5, 2), (4, 4, 3)])
def test_closed_forms_match_autograd_and_finite_differences(rng, m, n, r):
    p = paramgeo.get("lora", m=m, n=n, r=r)
    theta = p.random_point(rng)
    v, _ = assert_closed_forms(p, theta, rng, fd_atol=1e-8)
    # J[dB, dA] = dB A + B dA written out
    B, A = factors(p, theta)
    dB, dA = factors(p, v)
    np.testing.assert_allclose(p.jvp(theta, v), (dB @ A + B @ dA).ravel(), atol=1e-12)


def test_quadratic_forms_include_w0(rng):
    p = paramgeo.get("lora", m=4, n=4, r=2)
    theta, X, c = p.random_point(rng), rng.standard_normal((6, 4)), rng.standard_normal(6)
    W = p.forward(theta)
    forms, vjp = p.quadratic_forms(theta, X)
    np.testing.assert_allclose(forms, np.einsum("ia,ab,ib->i", X, W, X), atol=1e-12)
    np.testing.assert_allclose(vjp(c), p.vjp(theta, ((X.T * c) @ X).ravel()), atol=1e-12)


def test_gl_invariance_with_explicit_factors(rng):
    p = paramgeo.get("lora", m=5, n=4, r=3)
    B, A = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    g = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    moved = p.point(B @ g, np.linalg.solve(g, A))
    np.testing.assert_allclose(p.forward(moved), p.forward(p.point(B, A)), atol=1e-12)
    group = p.symmetry()
    np.testing.assert_allclose(group.act(g, p.point(B, A)), moved, atol=1e-12)


@pytest.mark.parametrize("m,n,r", [(6, 5, 2), (4, 3, 1), (3, 6, 3), (4, 3, 3)])
def test_rank_at_b_zero_is_m_r(rng, m, n, r):
    """At B = 0, J(dB, dA) = dB A: the matrix of dB -> vec(dB A) is I_m (x) A^T, so
    J = [I_m (x) A^T, 0] and rank J = m rank(A) = m r for A of full row rank."""
    p = paramgeo.get("lora", m=m, n=n, r=r)
    A = rng.standard_normal((r, n))
    theta = p.point(np.zeros((m, r)), A)
    J_explicit = np.hstack([np.kron(np.eye(m), A.T), np.zeros((m * n, n * r))])
    np.testing.assert_allclose(p.jacobian(theta), J_explicit, atol=1e-14)
    expected = m * np.linalg.matrix_rank(A)
    assert expected == m * r
    assert paramgeo.rank_at(p, theta).rank == expected
    c = classify(p, theta)
    generic = r * (m + n - r)
    assert c.generic_rank == generic
    assert c.verdict == ("critical" if m * r < generic else "regular")
    # the orbit keeps its dimension r^2: (0, -L A) are independent for A of full row rank
    assert c.orbit_dim == c.generic_orbit_dim == r * r
    if c.verdict == "critical":
        assert "orbit-degenerate" not in c.causes and c.causes == ("factor-rank",)
        assert c.rank_drops == (("B", 0, r),)
        assert c.stratum_generic_rank == m * r and c.stratum.endswith("B-zero")


def test_init_at_scale_is_hu_et_al(rng):
    p = paramgeo.get("lora", m=6, n=5, r=2)
    theta = p.init_at_scale(0.5)
    B, A = factors(p, theta)
    assert np.all(B == 0)
    np.testing.assert_allclose(A, 0.5 * np.random.default_rng(1).standard_normal((2, 5)))
    np.testing.assert_allclose(p.forward(theta), p.W0)
    assert paramgeo.rank_at(p, theta).rank == 6 * 2


def test_critical_cli_at_b_zero_reports_rank_and_cause(tmp_path, rng):
    p = paramgeo.get("lora", m=6, n=5, r=2)
    path = tmp_path / "B0.npy"
    np.save(path, p.point(np.zeros((6, 2)), rng.standard_normal((2, 5))))
    args = ["critical", "lora", "-p", "m=6", "-p", "n=5", "-p", "r=2", "--at", str(path)]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0
    assert "critical (factor-rank)" in res.output and "rank 12 / generic 18" in res.output
    assert "B lost rank 2 (rank 0 of 2)" in res.output
    assert "2 B-zero" in res.output
    out = json.loads(CliRunner().invoke(main, args + ["--json"]).output)
    assert (out["rank"], out["generic_rank"], out["verdict"]) == (12, 18, "critical")
    assert out["orbit_dim"] == 4 and out["stratum_generic_rank"] == 12
