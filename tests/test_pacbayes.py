"""PAC-Bayes engine: quotient KL versus parameter KL, chain rule, orbit geometry, certificates.

Oracles: Gaussian closed forms (chain rule for a linear phi), the K_0 density of a product of
centred normals, adaptive scipy quadrature, Monte Carlo, a bisection written here, hand
computations of the bounds, and two independent routes to the Hadamard quotient KL
(one-dimensional quadrature versus Monte Carlo with orbit integrals).

Covers: ``paramgeo.cli``, ``paramgeo.pacbayes.bilinear``, ``paramgeo.pacbayes.engine``,
``paramgeo.pacbayes.gaussians``, ``paramgeo.pacbayes.orbits``, ``paramgeo_plugins.hadamard``,
``paramgeo_plugins.qk_attention``, ``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import integrate, linalg, special, stats

import paramgeo
from paramgeo import pacbayes as pb
from paramgeo.pacbayes.bilinear import _box
from paramgeo.pacbayes.orbits import _OrbitChart
from paramgeo.cli import main
from paramgeo.errors import ParamgeoError, ShapeError


# ----------------------------------------------------------------- distributions and chain rule
def test_diagonal_gaussian_logpdf_and_kl_match_scipy(rng):
    q = pb.DiagonalGaussian(mean=rng.standard_normal(4), std=rng.uniform(0.2, 1.0, 4))
    p = pb.DiagonalGaussian.isotropic(np.zeros(4), 0.7)
    x = rng.standard_normal(4)
    ref = stats.multivariate_normal(q.mean, np.diag(q.std ** 2)).logpdf(x)
    assert q.logpdf(x) == pytest.approx(ref, rel=1e-12)
    assert pb.kl_gaussian(q, p) == pytest.approx(
        pb.kl_mvn(q.mean, np.diag(q.std ** 2), p.mean, np.diag(p.std ** 2)), rel=1e-12)
    s = q.sample(rng, 200000)
    mc = np.mean(q.logpdf(s) - p.logpdf(s))
    assert pb.kl_gaussian(q, p) == pytest.approx(mc, abs=0.02)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chain_rule_linear_projection_closed_forms(seed):
    """KL(Q||P) = KL(Q_bar||P_bar) + E KL(fibre conditionals), phi = a projection and a general
    linear map, all three terms from separate closed forms."""
    rng = np.random.default_rng(seed)
    n = 5

    def spd():
        M = rng.standard_normal((n, n))
        return M @ M.T + 0.5 * np.eye(n)

    mq, mp = rng.standard_normal(n), rng.standard_normal(n)
    Sq, Sp = spd(), spd()
    for A in (np.eye(n)[:2], rng.standard_normal((3, n))):
        cr = pb.gaussian_chain_rule(A, mq, Sq, mp, Sp)
        assert cr.kl_param == pytest.approx(cr.kl_quotient + cr.expected_fibre_kl, rel=1e-10)
        assert cr.expected_fibre_kl > 0 and cr.kl_quotient < cr.kl_param


def test_chain_rule_fibre_term_vanishes_when_conditionals_agree(rng):
    """Q = P tilted by a function of A theta: same fibre conditionals, so equality in (1)."""
    n = 4
    A = np.eye(n)[:2]
    Sp = np.eye(n)
    Sq = np.diag([0.3, 2.0, 1.0, 1.0])  # only the projected coordinates change
    mq = np.array([1.0, -0.5, 0.0, 0.0])
    cr = pb.gaussian_chain_rule(A, mq, Sq, np.zeros(n), Sp)
    assert cr.expected_fibre_kl == pytest.approx(0.0, abs=1e-12)
    assert cr.kl_quotient == pytest.approx(cr.kl_param, rel=1e-12)


# ----------------------------------------------------------------- product densities
def test_product_density_matches_bessel_k0():
    b = np.array([1e-8, 1e-3, 0.2, -0.9, 3.0, -7.0])
    sx, sy = 0.6, 1.7
    ref = np.log(special.k0(np.abs(b) / (sx * sy)) / (math.pi * sx * sy))
    np.testing.assert_allclose(pb.product_logpdf(b, (0, 0), np.diag([sx ** 2, sy ** 2])), ref,
                               rtol=1e-10)
    np.testing.assert_allclose(pb.centred_product_logpdf(b, sx, sy), ref, rtol=1e-12)


@pytest.mark.parametrize("mean,cov", [
    ((0.8, -0.3), [[0.04, 0.01], [0.01, 0.09]]),
    ((1.0, 1.0), [[1e-4, 0.0], [0.0, 1e-4]]),
    ((0.05, 0.02), [[0.01, 0.0], [0.0, 0.04]]),
])
def test_product_density_matches_adaptive_quad(mean, cov):
    mv = stats.multivariate_normal(mean, cov)
    for b in (1e-3, -0.05, 0.3, 0.9, 1.1):
        f = lambda x, b=b: mv.pdf([x, b / x]) / abs(x)  # noqa: E731
        brk = [mean[0], b / mean[1]]
        ref = sum(integrate.quad(f, lo, hi, points=[p for p in brk if lo < p < hi] or None,
                                 limit=500, epsabs=0)[0] for lo, hi in ((-6, 0), (0, 6)))
        if ref < 1e-250:
            continue
        assert pb.product_logpdf([b], mean, cov)[0] == pytest.approx(math.log(ref), abs=1e-7)


def test_laplace_implicit_bias_density_is_normalised_laplace():
    b = np.array([-2.0, -0.1, 0.4, 3.0])
    s = 0.8
    np.testing.assert_allclose(pb.laplace_ib_logpdf(b, (s, s)),
                               stats.laplace(scale=s * s).logpdf(b), rtol=1e-12)


# ----------------------------------------------------------------- quotient KL <= parameter KL
@pytest.mark.parametrize("seed", range(4))
def test_hadamard_quotient_kl_below_parameter_kl(seed):
    rng = np.random.default_rng(100 + seed)
    h = paramgeo.get("hadamard", p=3)
    post = pb.DiagonalGaussian(mean=rng.standard_normal(6), std=rng.uniform(0.05, 0.6, 6))
    rep = pb.quotient_kls(h, post, [0.3, 1.0, 2.0], method="quadrature")
    for pk in rep.priors:
        assert pk.kl_quotient <= pk.kl_param + 1e-9, pk
        assert pk.kl_quotient >= 0
    neutral = [pk for pk in rep.priors if pk.prior == "neutral"]
    for pk in neutral:  # independent route: the parameter KL itself
        assert pk.kl_param == pytest.approx(pb.kl_gaussian(
            post, pb.DiagonalGaussian.isotropic(np.zeros(6), pk.scale)))


def test_hadamard_quotient_kl_matches_monte_carlo_of_densities(rng):
    mq, sq = np.array([0.05, 0.05]), np.array([0.1, 0.1])  # near the singular stratum
    C = np.diag(sq ** 2)
    lo, hi = _box(mq, sq)
    lp = lambda x: pb.centred_product_logpdf(x, 1.0, 1.0)  # noqa: E731
    kl, mass, _ = pb.kl_1d(lambda x: pb.product_logpdf(x, mq, C), [lp], lo, hi)
    assert mass == pytest.approx(1.0, abs=1e-6)
    b = (mq[0] + sq[0] * rng.standard_normal(20000)) * (mq[1] + sq[1] * rng.standard_normal(20000))
    d = pb.product_logpdf(b, mq, C) - lp(b)
    assert abs(kl[0] - d.mean()) < 5 * d.std() / math.sqrt(b.size)


def test_equality_when_fibre_conditionals_agree():
    """P = N(0, I_2), Q proportional to p(u, v) exp(a u v): Q's fibre conditionals on {uv = beta}
    are P's, so KL(Q_bar||P_bar) = KL(Q||P) (closed form, Gaussian)."""
    for a in (0.3, -0.6):
        cov = np.linalg.inv(np.array([[1.0, -a], [-a, 1.0]]))
        kl_param = pb.kl_mvn(np.zeros(2), cov, np.zeros(2), np.eye(2))
        lo, hi = _box((0, 0), np.sqrt(np.diag(cov)))
        kl, _, _ = pb.kl_1d(lambda x, c=cov: pb.product_logpdf(x, (0, 0), c),
                            [lambda x: pb.centred_product_logpdf(x, 1, 1)], lo, hi)
        assert kl[0] == pytest.approx(kl_param, rel=1e-6)
    # and strict inequality when the posterior moves along the fibre
    q = pb.DiagonalGaussian(mean=np.array([2.0, 0.5]), std=np.array([0.3, 0.3]))
    rep = pb.quotient_kls(paramgeo.get("hadamard", p=1), q, [1.0], method="quadrature")
    assert rep.priors[0].kl_quotient < rep.priors[0].kl_param - 0.1


def test_quadrature_and_montecarlo_orbit_integrals_agree():
    """Two routes for hadamard p=1: Gauss-Legendre of product densities vs. the generic Monte
    Carlo estimator with orbit integrals (canonical points, orbit volumes, components)."""
    h = paramgeo.get("hadamard", p=1)
    post = pb.DiagonalGaussian(mean=np.array([0.9, 0.7]), std=np.array([0.2, 0.3]))
    quad = pb.quotient_kls(h, post, [1.0], method="quadrature")
    mc = pb.quotient_kls(h, post, [1.0], method="montecarlo", samples=16, seed=3)
    for a, b in zip(quad.priors, mc.priors):
        assert a.prior == b.prior and b.stderr > 0
        assert abs(a.kl_quotient - b.kl_quotient) < 4 * b.stderr + 0.02, (a, b)


def test_orbit_integral_density_matches_product_formula():
    h = paramgeo.get("hadamard", p=1)
    q = pb.DiagonalGaussian(mean=np.array([0.4, -0.8]), std=np.array([0.3, 0.5]))
    for th in ([0.7, 0.2], [-1.1, 0.05]):
        beta = th[0] * th[1]
        ref = pb.product_logpdf([beta], q.mean, np.diag(q.std ** 2))[0]
        assert pb.orbit_log_integral(h, np.array(th), q.logpdf) == pytest.approx(ref, abs=1e-6)


# ----------------------------------------------------------------- orbit geometry
def test_canonical_point_is_balanced_hadamard(rng):
    h = paramgeo.get("hadamard", p=4)
    th = rng.standard_normal(8)
    cp = pb.canonical_point(h, th)
    u, v = cp.theta[:4], cp.theta[4:]
    assert cp.converged
    np.testing.assert_allclose(np.abs(u), np.sqrt(np.abs(th[:4] * th[4:])), rtol=1e-9)
    np.testing.assert_allclose(np.abs(u), np.abs(v), rtol=1e-9)
    np.testing.assert_allclose(h.forward(cp.theta), h.forward(th), atol=1e-12)


def test_canonical_point_balances_qk_attention(rng):
    qk = paramgeo.get("qk-attention", d=4, r=2, heads=1)
    th = qk.random_point(rng)
    th[:8] *= 3.0  # unbalance
    cp = pb.canonical_point(qk, th)
    U, V = cp.theta[:8].reshape(4, 2), cp.theta[8:].reshape(4, 2)
    assert cp.converged
    np.testing.assert_allclose(U.T @ U, V.T @ V, atol=1e-9)
    np.testing.assert_allclose(qk.forward(cp.theta), qk.forward(th), atol=1e-10)
    # minimum norm: sum of singular values of U V^T (nuclear norm) = |s|^2 / 2
    S = qk.forward(th)[0]
    assert cp.theta @ cp.theta / 2 == pytest.approx(np.linalg.svd(S, compute_uv=False).sum(),
                                                    rel=1e-9)


def test_orbit_volume_and_normal_jacobian_hadamard(rng):
    h = paramgeo.get("hadamard", p=3)
    th = rng.standard_normal(6)
    u, v = th[:3], th[3:]
    vol = pb.orbit_volume(h, th)
    assert vol.volume == pytest.approx(np.prod(np.hypot(u, v)), rel=1e-12)
    assert vol.compact_dim == 0 and vol.dim == 3
    assert pb.normal_jacobian(h, th) == pytest.approx(np.prod(np.hypot(u, v)), rel=1e-12)
    assert pb.log_omega(h, th) == pytest.approx(0.0, abs=1e-12)


def test_orbit_volume_splits_compact_part_qk(rng):
    qk = paramgeo.get("qk-attention", d=3, r=2, heads=1)
    th = qk.random_point(rng)
    vol = pb.orbit_volume(qk, th)
    assert (vol.dim, vol.compact_dim) == (4, 1)
    # change of basis times the two parts is the whole volume (Schur complement); the
    # matrix-unit basis E_ij of gl(2) acts on both blocks (U and V, d = 3 rows each), so each
    # n x n generator has Frobenius norm sqrt(2 d) and the change of basis has |det| (2d)^2 / 2
    # times the 2 x 2 block of (E12, E21) -> (sym, skew), |det| = 1: basis_det = (2 d)^2
    assert vol.basis_det * vol.compact_volume * vol.noncompact_volume == pytest.approx(
        vol.volume, rel=1e-9)
    assert vol.basis_det == pytest.approx(36.0, rel=1e-9)


# ----------------------------------------------------------------- certificates
def _bisect_kl_inverse(q, c):
    def kl(a, b):
        t1 = a * math.log(a / b) if a > 0 else 0.0
        t2 = (1 - a) * math.log((1 - a) / (1 - b)) if a < 1 else 0.0
        return t1 + t2
    lo, hi = q, 1 - 1e-15
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if kl(q, mid) <= c else (lo, mid)
    return lo


@pytest.mark.parametrize("emp,kl,n,delta", [
    (0.1, 5.0, 1000, 0.05), (0.0, 20.0, 500, 0.01), (0.3, 0.5, 100, 0.1), (0.02, 50.0, 10000, 0.05),
])
def test_certificates_against_hand_computation(emp, kl, n, delta):
    eps = math.log(2 * math.sqrt(n) / delta)
    assert pb.mcallester_bound(emp, kl, n, delta) == pytest.approx(
        emp + math.sqrt((kl + eps) / (2 * n)), rel=1e-14)
    assert pb.maurer_seeger_bound(emp, kl, n, delta) == pytest.approx(
        _bisect_kl_inverse(emp, (kl + eps) / n), abs=1e-10)
    C = 2.0
    hand = (1 - math.exp(-C * emp - (kl + math.log(1 / delta)) / n)) / (1 - math.exp(-C))
    assert pb.catoni_bound(emp, kl, n, delta, C) == pytest.approx(hand, rel=1e-13)
    # Maurer-Seeger is never looser than McAllester's Pinsker-relaxed form
    assert pb.maurer_seeger_bound(emp, kl, n, delta) <= pb.mcallester_bound(emp, kl, n, delta)


def test_kl_inverse_by_hand_value():
    # kl(0 || p) = -ln(1 - p), so kl^{-1}(0, c) = 1 - exp(-c)
    assert pb.kl_inverse_upper(0.0, 0.3) == pytest.approx(1 - math.exp(-0.3), abs=1e-11)


def test_union_bound_over_prior_scales():
    one = pb.certificates(0.1, 3.0, 1000, 0.05)
    five = pb.certificates(0.1, 3.0, 1000, 0.05, union=5)
    assert five.delta_used == pytest.approx(0.01)
    assert five.mcallester == pytest.approx(pb.mcallester_bound(0.1, 3.0, 1000, 0.01))
    assert five.maurer_seeger > one.maurer_seeger
    grid = pb.DEFAULT_CATONI_GRID
    assert five.catoni == pytest.approx(min(
        pb.catoni_bound(0.1, 3.0, 1000, 0.01 / len(grid), C) for C in grid))


@pytest.mark.parametrize("args", [
    dict(empirical_risk=0.1, kl=1.0, n=100, delta=0.0),
    dict(empirical_risk=0.1, kl=1.0, n=100, delta=1.5),
    dict(empirical_risk=1.2, kl=1.0, n=100, delta=0.05),
    dict(empirical_risk=0.1, kl=-1.0, n=100, delta=0.05),
    dict(empirical_risk=0.1, kl=float("nan"), n=100, delta=0.05),
    dict(empirical_risk=0.1, kl=1.0, n=0, delta=0.05),
])
def test_certificate_bad_input(args):
    with pytest.raises(pb.PacBayesInputError):
        pb.certificates(**args)


def test_bad_distributions():
    with pytest.raises(ParamgeoError, match="positive"):
        pb.DiagonalGaussian.isotropic(np.zeros(3), -1.0)
    with pytest.raises(ParamgeoError, match="finite"):
        pb.DiagonalGaussian(mean=np.array([0.0, np.nan]), std=1.0)
    with pytest.raises(ShapeError, match="posterior has 3 entries"):
        pb.quotient_kls(paramgeo.get("hadamard", p=2), pb.DiagonalGaussian(mean=np.zeros(3),
                                                                           std=1.0), 1)


def test_implicit_bias_prior_beats_neutral_away_from_zero_and_not_at_zero():
    """Hadamard, one coordinate: the Laplace implicit-bias prior is closer to a posterior on a
    large coefficient and farther from one at the singular stratum (K_0 has a log peak at 0)."""
    h = paramgeo.get("hadamard", p=1)
    far = pb.quotient_kls(h, pb.DiagonalGaussian(mean=np.array([1.5, 1.5]), std=0.05), [1.0]).priors
    near = pb.quotient_kls(h, pb.DiagonalGaussian(mean=np.array([0.02, 0.02]),
                                                  std=0.05), [1.0]).priors
    assert far[1].kl_quotient < far[0].kl_quotient
    assert near[1].kl_quotient > near[0].kl_quotient


# ----------------------------------------------------------------- CLI
def _posterior(tmp_path, mean, std, risk=0.1, name="post.npz"):
    path = tmp_path / name
    np.savez(path, mean=np.asarray(mean), std=np.asarray(std), empirical_risk=risk)
    return str(path)


def test_cli_pacbayes_json(tmp_path):
    path = _posterior(tmp_path, [1.0, 0.02, 1.0, 0.03], 0.1)
    res = CliRunner().invoke(main, ["pacbayes", "hadamard", "-p", "p=2", "--posterior", path,
                                    "--prior-scale", "1.0", "--prior-scale", "0.5",
                                    "--sample-size", "1000", "--delta", "0.05", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["method"] == "quadrature" and len(out["priors"]) == 4
    for pk in out["priors"]:
        assert pk["kl_quotient"] <= pk["kl_param"] + 1e-9
    assert {c[0] for c in out["certificates"]} == {"neutral", "implicit-bias"}
    cert = out["certificates"][0][2]
    assert cert["union"] == 2 and cert["delta_used"] == pytest.approx(0.025)
    text = CliRunner().invoke(main, ["pacbayes", "hadamard", "-p", "p=2", "--posterior", path,
                                     "--prior-scale", "1.0", "--sample-size", "1000", "--delta", "0.05"])
    assert "implicit-bias" in text.output and "Maurer-Seeger" in text.output


@pytest.mark.parametrize("extra,fragment", [
    (["--delta", "1.5"], "delta must lie in (0, 1)"),
    (["--prior-scale", "-1"], "prior scale must be a positive"),
    (["--prior-scale", "nan"], "prior scale must be a positive"),
    (["--sample-size", "0"], "--sample-size must be a positive integer"),
])
def test_cli_pacbayes_bad_numbers(tmp_path, extra, fragment):
    path = _posterior(tmp_path, [1.0, 0.5, 1.0, 0.5], 0.1)
    base = {"--prior-scale": "1.0", "--sample-size": "100", "--delta": "0.05"}
    for k, v in zip(extra[::2], extra[1::2]):
        base[k] = v
    args = ["pacbayes", "hadamard", "-p", "p=2", "--posterior", path]
    for k, v in base.items():
        args += [k, v]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("arrays,fragment", [
    (dict(mean=np.zeros(3), std=0.1, empirical_risk=0.1), "has 3 entries; hadamard needs 4"),
    (dict(mean=np.zeros(4), std=np.ones(3), empirical_risk=0.1), "std"),
    (dict(mean=np.zeros(4), std=0.1), "lacks ['empirical_risk']"),
    (dict(mean=np.zeros(4), std=0.1, empirical_risk=2.0), "must be one number in [0, 1]"),
    (dict(mean=np.array([0, np.nan, 0, 0]), std=0.1, empirical_risk=0.1), "finite"),
    (dict(mean=np.zeros(4), std=-0.1, empirical_risk=0.1), "positive"),
])
def test_cli_pacbayes_bad_posterior_file(tmp_path, arrays, fragment):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    res = CliRunner().invoke(main, ["pacbayes", "hadamard", "-p", "p=2", "--posterior",
                                    str(path), "--prior-scale", "1", "--sample-size", "100",
                                    "--delta", "0.05"])
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


# ----------------------------------------------------------------- examples (smoke, tiny)
def test_fourier_hadamard_example_smoke(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "fourier_hadamard_pacbayes.py"
    spec = importlib.util.spec_from_file_location("fh_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.run(seeds=2, out=tmp_path, workers=1, sparsity=(1,), freqs=2, n_train=12,
                   steps=300)
    assert len(rows) == 2
    for r in rows:
        for m in mod.MEANS:
            assert r[f"{m}_neutral_cert"] >= r[f"{m}_neutral_gibbs"]
            for c, b in mod.CONTRASTS:
                kl, cert = r[f"{m}_{c}_vs_{b}_kl_change"], r[f"{m}_{c}_vs_{b}_cert_change"]
                assert kl == r[f"{m}_{c}_kl"] / r[f"{m}_{b}_kl"] - 1 and kl > -1
                assert cert == r[f"{m}_{c}_cert"] / r[f"{m}_{b}_cert"] - 1 and cert > -1
    assert (tmp_path / "fourier_hadamard_pacbayes.csv").is_file()
    md = (tmp_path / "fourier_hadamard_pacbayes.md").read_text()
    assert "negative = the implicit-bias prior is better" in md and "-40.69%" in md


def test_qk_attention_montecarlo_quotient_kl(rng):
    """Generic Monte Carlo route on qk-attention (r = 1: GL(1), two components): error bars,
    KL_quotient <= KL_param, and the implicit-bias parameter KL shifted by the same amount."""
    qk = paramgeo.get("qk-attention", d=2, r=1, heads=1)
    post = pb.DiagonalGaussian.isotropic(np.array([0.9, -0.4, 0.7, 0.5]), 0.1)
    rep = pb.quotient_kls(qk, post, [1.0], method="auto", samples=6, seed=1)
    assert rep.method == "montecarlo"
    neutral, ib = rep.priors
    assert 0 < neutral.stderr < 0.5 and ib.stderr > 0
    assert neutral.kl_quotient <= neutral.kl_param + 3 * neutral.stderr
    assert ib.kl_param - ib.kl_quotient == pytest.approx(neutral.kl_param - neutral.kl_quotient)
    # canonical point of a GL(1) orbit: |q| = |k|
    cp = pb.canonical_point(qk, np.array([3.0, 0.3, 0.1, -0.2]))
    assert np.linalg.norm(cp.theta[:2]) == pytest.approx(np.linalg.norm(cp.theta[2:]), rel=1e-9)


def test_montecarlo_refuses_nonabelian_compact_part():
    """GL(3) has the non-abelian compact part SO(3): refused with a message naming why."""
    qk = paramgeo.get("qk-attention", d=3, r=3, heads=1)
    post = pb.DiagonalGaussian.isotropic(np.ones(qk.n), 0.1)
    with pytest.raises(paramgeo.NotProvidedError, match="compact part is not abelian"):
        pb.quotient_kls(qk, post, [1.0], samples=4)


# ----------------------------------------------------------------- general groups (GL(2), ...)
def test_group_structure_gl2_heads():
    """GL(2)^H: H commuting rotation generators with their periods, 3H symmetric directions,
    2^H components (sign of det per head); GL(1): one symmetric direction, 2 components."""
    for heads in (1, 2):
        st = pb.group_structure(paramgeo.get("qk-attention", d=2, r=2, heads=heads))
        assert (len(st.compact), len(st.noncompact), len(st.components)) == \
            (heads, 3 * heads, 2 ** heads)
        for b, T in zip(st.compact, st.periods):
            np.testing.assert_allclose(linalg.expm(T * b), np.eye(b.shape[0]), atol=1e-9)
            assert not np.allclose(linalg.expm(T / 2 * b), np.eye(b.shape[0]), atol=1e-3)
    st = pb.group_structure(paramgeo.get("qk-attention", d=2, r=1, heads=1))
    assert (len(st.compact), len(st.noncompact), len(st.components)) == (0, 1, 2)


def test_orbit_chart_factor_matches_area_formula(rng):
    """The closed-form coarea factor of the Cartan chart (ad-based d exp, Gram of generators,
    NJ transported by J(g s) = J(s) g^-1) against the area formula sqrt det(DF^T DF) / NJ with
    DF from ``scipy.linalg.expm_frechet`` and NJ from the SVD of the plugin's J."""
    qk = paramgeo.get("qk-attention", d=3, r=2, heads=1)
    st = pb.group_structure(qk)
    s = qk.random_point(rng)
    chart = _OrbitChart(qk, st, s, np.eye(qk.n))
    for D in st.components:
        chart.D = D
        z = rng.standard_normal(chart.k) * 0.7
        th, lg = chart.evaluate(z[None])
        c = chart.c
        X = np.tensordot(z[c:], st.noncompact, axes=1)
        K = linalg.expm(np.tensordot(z[:c], st.compact, axes=1))
        E = linalg.expm(X)
        np.testing.assert_allclose(th[0], D @ K @ E @ s, atol=1e-12)
        cols = [D @ b @ K @ E @ s for b in st.compact] + \
            [D @ K @ linalg.expm_frechet(X, P, compute_expm=False) @ s for P in st.noncompact]
        DF = np.stack(cols, 1)
        sv = np.linalg.svd(qk.jacobian(th[0]), compute_uv=False)
        ref = 0.5 * np.linalg.slogdet(DF.T @ DF)[1] - np.sum(np.log(sv[: qk.n - chart.k]))
        assert lg[0] == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("th", [[0.7, 0.2], [2.0, 1.5], [-0.9, 0.6]])
def test_importance_orbit_integral_matches_closed_form(th):
    """uvt m = n = r = 1 is the one-dimensional Hadamard case: the general importance-sampling
    orbit integral against the product density (Craig; K_0 for the centred prior)."""
    u = paramgeo.get("uvt", m=1, n=1, r=1)
    q = pb.DiagonalGaussian(mean=np.array([0.4, -0.8]), std=np.array([0.3, 0.5]))
    beta = th[0] * th[1]
    ref = [pb.product_logpdf([beta], q.mean, np.diag(q.std ** 2))[0],
           pb.centred_product_logpdf(beta, 1.0, 1.0)]
    val, err = pb.orbit_log_integral(u, np.array(th), [q.logpdf, lambda t: -0.5 * np.sum(
        t * t, -1) - math.log(2 * math.pi)], method="importance", samples=256, seed=1,
        return_error=True)
    for v, e, r in zip(val, err, ref):
        assert 0 < e < 0.05
        assert abs(v - r) < 4 * e + 1e-3, (v, r, e)


def test_importance_agrees_with_quadrature_at_r1():
    """qk-attention r = 1 (GL(1)): the general path against the one-dimensional quadrature,
    per orbit integral and for the whole Monte Carlo quotient KL (same posterior draws)."""
    qk = paramgeo.get("qk-attention", d=2, r=1, heads=1)
    post = pb.DiagonalGaussian.isotropic(np.array([0.9, -0.4, 0.7, 0.5]), 0.1)
    prior = pb.DiagonalGaussian.isotropic(np.zeros(4), 0.5)
    th = post.sample(np.random.default_rng(5))
    quad = pb.orbit_log_integral(qk, th, [post.logpdf, prior.logpdf], method="quadrature")
    imp, err = pb.orbit_log_integral(qk, th, [post.logpdf, prior.logpdf], method="importance",
                                     samples=256, return_error=True)
    assert np.all(np.abs(imp - quad) < 4 * err + 1e-3), (imp, quad, err)
    a = pb.quotient_kls(qk, post, [0.5], samples=8, seed=2, orbit_method="quadrature")
    b = pb.quotient_kls(qk, post, [0.5], samples=8, seed=2, orbit_method="importance",
                        inner_samples=128)
    assert "importance" in b.detail and "quad" in a.detail
    for pa, pbk in zip(a.priors, b.priors):
        assert abs(pa.kl_quotient - pbk.kl_quotient) < 0.05, (pa, pbk)


def test_gl2_push_forward_is_normalised(rng):
    """uvt m = n = r = 2 (GL(2), predictor manifold open in R^4, Hausdorff = Lebesgue):
    E_{beta ~ Q_bar}[r(beta) / q_bar(beta)] = int r = 1 for any density r; r is the linearised
    push-forward N(phi(m), s^2 J J^T). Catches a wrong orbit volume, torus period or component
    count (each a constant factor)."""
    u = paramgeo.get("uvt", m=2, n=2, r=2)
    m = np.array([1.0, 0.3, -0.2, 0.8, 0.7, -0.5, 0.4, 1.1])
    q = pb.DiagonalGaussian.isotropic(m, 0.08)
    J = u.jacobian(m)
    r = stats.multivariate_normal(u.forward_flat(m), 0.08 ** 2 * J @ J.T)
    ths = q.sample(rng, 30)
    lq = np.array([pb.orbit_log_integral(u, t, q.logpdf, samples=96, seed=i)
                   for i, t in enumerate(ths)])
    ratio = np.exp(r.logpdf(np.array([u.forward_flat(t) for t in ths])) - lq)
    se = ratio.std(ddof=1) / math.sqrt(len(ratio))
    assert se < 0.05
    assert abs(ratio.mean() - 1.0) < 4 * se + 0.01, (ratio.mean(), se)


def test_gl2_equality_when_fibre_conditionals_agree(rng):
    """Q proportional to P(theta) exp(a tr(U V^T)) (a correlated Gaussian) has P's fibre
    conditionals, so log(q/p)(theta) = log(q_bar/p_bar)(phi theta) exactly (chain rule with
    zero fibre term); the two independent importance-sampled orbit integrals must agree."""
    u = paramgeo.get("uvt", m=2, n=2, r=2)
    a = 0.4
    prec = np.block([[np.eye(4), -a * np.eye(4)], [-a * np.eye(4), np.eye(4)]])
    cov = np.linalg.inv(prec)
    qd = stats.multivariate_normal(np.zeros(8), cov)
    pd = stats.multivariate_normal(np.zeros(8), np.eye(8))
    for th in qd.rvs(4, random_state=rng):
        (lq, lp), err = pb.orbit_log_integral(u, th, [qd.logpdf, pd.logpdf], samples=128,
                                              seed=3, return_error=True)
        gap = (qd.logpdf(th) - pd.logpdf(th)) - (lq - lp)
        assert abs(gap) < 4 * math.hypot(*err) + 1e-3, (gap, err)
    assert pb.kl_mvn(np.zeros(8), cov, np.zeros(8), np.eye(8)) > 0.1


def test_qk_r2_quotient_kl_below_parameter_kl(rng):
    """qk-attention r = 2 (GL(2) per head, non-abelian): the general Monte Carlo estimator,
    KL_quotient <= KL_param with error bars; two heads (4 components): an orbit integral."""
    qk = paramgeo.get("qk-attention", d=3, r=2, heads=1)
    post = pb.DiagonalGaussian.isotropic(qk.random_point(rng), 0.05)
    rep = pb.quotient_kls(qk, post, [1.0], samples=5, seed=1, inner_samples=64)
    assert rep.method == "montecarlo" and "importance" in rep.detail
    for pk in rep.priors:
        assert 0 < pk.stderr < 1.0
        assert pk.kl_quotient < pk.kl_param - 1.0, pk  # a 4-dim orbit of a 12-dim Theta
    qk2 = paramgeo.get("qk-attention", d=2, r=2, heads=2)  # GL(2) x GL(2): 4 components
    post2 = pb.DiagonalGaussian.isotropic(qk2.random_point(rng), 0.05)
    val, err = pb.orbit_log_integral(qk2, post2.sample(rng), post2.logpdf, samples=48,
                                     return_error=True)
    assert math.isfinite(val) and 0 < err < 0.2


def test_qk_attention_example_smoke(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "qk_attention_pacbayes.py"
    spec = importlib.util.spec_from_file_location("qk_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.run(seeds=1, samples=3, scales=(1.0,), steps=200, out=tmp_path, d=2, r=2,
                   inner_samples=32)
    assert len(rows) == 1 and math.isfinite(rows[0]["kl_quot_ib"])
    assert (tmp_path / "qk_attention_pacbayes.md").is_file()


def test_montecarlo_reports_progress():
    import paramgeo
    from paramgeo.pacbayes import DiagonalGaussian, quotient_kls

    p = paramgeo.get("hadamard", p=2)
    q = DiagonalGaussian(mean=np.array([1.0, 0.5, 0.8, -0.4]), std=np.full(4, 0.1))
    calls = []
    quotient_kls(p, q, [1.0, 2.0], method="montecarlo", samples=3,
                 progress=lambda done, total: calls.append((done, total)))
    # 3 posterior samples, then 3 prior samples for each of the 2 scales
    assert calls[-1] == (9, 9) and [c[0] for c in calls] == list(range(1, 10))


# ----------------------------------------------------------------- finite and trivial groups
SMALLEST_GROUPS = [
    ("uut", {"d": 3, "r": 1}),                                   # O(1) = {+-1}
    ("uvt", {"m": 2, "n": 2, "r": 1}),                           # GL(1)
    ("hadamard", {"p": 1}),                                      # R\{0}
    ("deep-diagonal", {"p": 1, "depth": 3, "variant": "signed"}),  # Z_2, finite
    ("deep-diagonal", {"p": 1, "depth": 2, "variant": "product"}),  # torus x S_2
    ("monomial", {"widths": "1,1,1", "degree": 2}),              # torus, one neuron
    ("qk-attention", {"d": 2, "r": 1, "heads": 1, "tied": "true"}),  # O(1)
    ("qk-attention", {"d": 2, "r": 1, "heads": 1}),              # GL(1)
]


@pytest.mark.parametrize("name,sizes", SMALLEST_GROUPS)
def test_every_builtin_at_its_smallest_group_gives_a_number(tmp_path, name, sizes):
    """Every built-in at r = 1 (or its smallest group) through the `pacbayes` command: a KL,
    a quotient KL below it (up to two standard errors) and a certificate."""
    param = paramgeo.get(name, **sizes)
    mean = param.random_point(np.random.default_rng(3))
    path = _posterior(tmp_path, mean, 0.2)
    args = ["pacbayes", name, "--posterior", path, "--prior-scale", "1", "--sample-size", "100",
            "--delta", "0.05", "--samples", "3", "--json"]
    for k, v in sizes.items():
        args += ["-p", f"{k}={v}"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    neutral = out["priors"][0]
    assert neutral["kl_quotient"] <= neutral["kl_param"] + 2 * neutral["stderr"] + 1e-9
    assert 0.1 < out["best"]["neutral"]["maurer_seeger"] <= 1.0


def test_issue_commands_print_kl_quotient_and_certificate(tmp_path):
    path = _posterior(tmp_path, [0.3, -0.8, 1.1], 0.5)
    for name, extra in (("uut", []), ("qk-attention", ["-p", "heads=1", "-p", "tied=true"])):
        res = CliRunner().invoke(main, ["pacbayes", name, "-p", "d=3", "-p", "r=1", *extra,
                                        "--posterior", path, "--prior-scale", "1", "--sample-size", "100",
                                        "--delta", "0.05"])
        assert res.exit_code == 0, res.output
        assert "sums over the 2 elements of the finite group" in res.output
        row = next(ln for ln in res.output.splitlines() if ln.startswith("neutral"))
        kl, kl_quot = float(row.split()[2]), float(row.split()[3])
        assert kl_quot < kl - 0.5  # about log 2 below: Q charges one of the two sheets
        assert "Maurer-Seeger" in res.output


def _folded_kl(mq, sq, sp, lo=0.0):
    """KL on [0, inf) of the folded densities q(a) + q(-a) and p(a) + p(-a) (scipy quad)."""
    def q(a):
        return stats.norm.pdf(a, mq, sq) + stats.norm.pdf(-a, mq, sq)

    def f(a):
        qa = q(a)
        return qa * (math.log(qa) - math.log(2 * stats.norm.pdf(a, 0, sp))) if qa > 0 else 0.0

    return integrate.quad(f, lo, abs(mq) + 12 * sq, limit=200, epsabs=1e-12)[0]


def test_finite_group_quotient_kl_matches_1d_integration():
    """uut d = r = 1: phi(u) = u^2, G = O(1) = {+-1}; the quotient is |u| in [0, inf) with the
    folded densities. The engine (Monte Carlo over Q, exact sum over G) against scipy quad."""
    p = paramgeo.get("uut", d=1, r=1)
    for mq, sq in ((0.3, 0.4), (1.2, 0.3)):
        q = pb.DiagonalGaussian(mean=[mq], std=[sq])
        rep = pb.quotient_kls(p, q, [1.0], samples=300, seed=1)
        exact = _folded_kl(mq, sq, 1.0)
        got = rep.priors[0]
        assert abs(got.kl_quotient - exact) < 4 * got.stderr + 1e-3, (got, exact)
        assert got.kl_quotient < got.kl_param
        # finite group: the implicit-bias prior is the neutral prior on Theta / G
        assert rep.priors[1].kl_quotient == pytest.approx(got.kl_quotient, abs=1e-12)


def test_finite_group_quotient_kl_matches_2d_integration():
    """uut d = 2, r = 1: G = {+-1} on R^2, the quotient a half-plane; KL of the symmetrised
    densities by scipy dblquad over {u_1 > 0}."""
    p = paramgeo.get("uut", d=2, r=1)
    mq, sq, sp = np.array([0.2, -0.1]), np.array([0.3, 0.5]), 0.8
    q = pb.DiagonalGaussian(mean=mq, std=sq)

    def dens(u, m, s):
        return np.prod(stats.norm.pdf(u, m, s))

    def f(y, x):
        u = np.array([x, y])
        qa = dens(u, mq, sq) + dens(-u, mq, sq)
        pa = 2 * dens(u, 0.0, sp)
        return qa * math.log(qa / pa) if qa > 0 else 0.0

    exact = integrate.dblquad(f, 0, 5, -5, 5, epsabs=1e-9)[0]
    got = pb.quotient_kls(p, q, [sp], samples=300, seed=2).priors[0]
    assert abs(got.kl_quotient - exact) < 4 * got.stderr + 1e-3, (got, exact)


def test_large_finite_group_is_refused_in_one_line(tmp_path):
    """deep-diagonal signed, depth 4, p = 8: G = {+-1}^16 has 65536 elements, more than the exact
    sum takes; refused with the reason (uniform component draws were tried and missed the few
    components that carry the posterior: 6.29 +- 0.004 against the exact 7.67 nats)."""
    path = _posterior(tmp_path, np.full(16, 0.5), 0.25)
    res = CliRunner().invoke(main, ["pacbayes", "deep-diagonal", "-p", "p=8", "-p", "depth=4",
                                    "-p", "variant=signed", "--posterior", path,
                                    "--prior-scale", "1", "--sample-size", "100", "--delta", "0.05"])
    assert res.exit_code == 2, res.output
    assert "more than 4096 components" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_trivial_group_quotient_kl_equals_parameter_kl():
    class NoSymmetry(paramgeo.Parameterization):
        name = "no-symmetry-test"
        size_params = {"q": paramgeo.Size("int", default=2)}

        def make_spec(self):
            return paramgeo.ParamSpec(w=(self.q,))

        def make_predictor_shape(self):
            return (self.q,)

        def forward(self, theta):
            return theta ** 3

    param = NoSymmetry()
    q = pb.DiagonalGaussian(mean=[0.5, -1.0], std=[0.2, 0.3])
    rep = pb.quotient_kls(param, q, [0.5, 1.0])
    assert rep.method == "exact"
    for pk in rep.priors:
        assert pk.kl_quotient == pk.kl_param and pk.stderr == 0.0


def test_gl1_far_orbit_is_a_number_not_an_svd_failure(rng):
    """qk-attention r = 1 untied (GL(1)): the orbit quadrature reaches points where J
    overflows; the factor there is 0, not a LinAlgError."""
    p = paramgeo.get("qk-attention", d=3, r=1, heads=1)
    q = pb.DiagonalGaussian(mean=np.array([3.0, -2.0, 1.0, 1e-3, 2e-3, -1e-3]), std=0.5)
    rep = pb.quotient_kls(p, q, [1.0], samples=8, seed=0)
    assert all(math.isfinite(pk.kl_quotient) for pk in rep.priors)


def test_prior_constructions_are_densities_and_the_section_is_a_gamma_law():
    """Every construction integrates to 1; the section's arc-length measure is the neutral
    Gaussian on the rays y = +-x (r = sqrt(2 |beta|) half-normal), i.e. |beta| ~
    Gamma(1/2, scale s^2) (scipy.stats), an independent route to the closed form; the
    orbit-volume factor sqrt(2 |beta|) turns it into the Laplace density."""
    from scipy import integrate, stats

    s = 0.7
    for name, logp in pb.PRIOR_CONSTRUCTIONS.items():
        f = lambda b: float(np.exp(logp(np.array([b]), s))[0])  # noqa: E731
        total = integrate.quad(f, -np.inf, 0)[0] + integrate.quad(f, 0, np.inf)[0]
        assert abs(total - 1) < 1e-6, name
    b = np.array([0.05, 0.3, 1.7])
    gamma = stats.gamma(a=0.5, scale=s ** 2).logpdf(b) - np.log(2)
    assert np.allclose(pb.section_logpdf(b, (s, s)), gamma)
    ratio = pb.laplace_ib_logpdf(b, (s, s)) - pb.section_logpdf(b, (s, s))
    assert np.allclose(ratio - 0.5 * np.log(2 * b), ratio[0] - 0.5 * np.log(2 * b[0]))
    # the predictor Gaussian has the push-forward's variance s^4 (x y, x, y ~ N(0, s^2))
    var = integrate.quad(lambda x: x * x * np.exp(pb.centred_product_logpdf(np.array([x]), s,
                                                                              s))[0],
                         0, np.inf, limit=200)[0] * 2
    assert abs(var - s ** 4) < 1e-6


def test_prior_kls_keep_the_two_priors_of_bilinear_component_kls(rng):
    h = paramgeo.get("hadamard", p=2)
    post = pb.DiagonalGaussian.isotropic(rng.standard_normal(4), 0.2)
    kls, _, _ = pb.bilinear_prior_kls(h, post, [0.5, 1.0])
    neutral, ib, _, _ = pb.bilinear_component_kls(h, post, [0.5, 1.0])
    assert np.allclose(kls["neutral"], neutral) and np.allclose(kls["ib"], ib)
    assert set(kls) == set(pb.PRIOR_CONSTRUCTIONS)
    with pytest.raises(pb.PacBayesInputError, match="unknown prior construction"):
        pb.bilinear_prior_kls(h, post, [1.0], ("flat",))
