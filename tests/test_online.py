"""Online SGD on attention-indexed data (paramgeo.flows.online), its exact order-parameter
equations (paramgeo.flows.order_odes), and the matrix-free multi-head engine with the scaling
fit's separation statistic (paramgeo.flows.multihead), and the two-layer model
(paramgeo.flows.multilayer). Small d throughout; the d >= 200
comparison and the weak-recovery scaling are in examples/online_attention.py and
examples/attention_multihead.py.

Covers: ``paramgeo.cli``, ``paramgeo.flows``, ``paramgeo.flows.multihead``,
``paramgeo.flows.multilayer``, ``paramgeo.flows.online``, ``paramgeo.flows.order_odes``,
``paramgeo.sweeps.queries``.
"""

import math

import numpy as np
import pytest

from paramgeo import ParamgeoError, ShapeError, check, get
from paramgeo.flows import (
    LINKS,
    AttentionIndexed,
    Teacher,
    TiedMomentHierarchy,
    UntiedMomentHierarchy,
    compare_with_hierarchy,
    compare_with_odes,
    fit_weak_recovery,
    linear_teacher_odes,
    online_sgd,
    order_parameters,
    tied_moment_odes,
    untied_moment_odes,
)
from paramgeo.flows.multihead import (
    MultiHeadTeacher,
    escape_rate,
    head_order_parameters,
    multihead_loss_and_grad,
    multihead_sgd,
    overlap_growth,
    scaling_separation,
    teacher_labels,
    weighted_exponent,
)
from paramgeo.flows.multilayer import (
    layer_order_parameters,
    two_layer_labels,
    two_layer_loss_and_grad,
    two_layer_sgd,
)
from paramgeo.sweeps.queries import QUERIES


def _sym(rng, d):
    A = rng.standard_normal((d, d)) / math.sqrt(2 * d)
    return A + A.T


def test_indices_are_the_attention_indices():
    """h_ab = (x_a^T S x_b - delta_ab Tr S) / sqrt(d), entry by entry."""
    rng = np.random.default_rng(0)
    d, T = 5, 3
    model = AttentionIndexed(d=d, tokens=T)
    S = rng.standard_normal((d, d))
    X = model.sample(rng, 2)
    h = model.indices(S, X)
    for n in range(2):
        for a in range(T):
            for b in range(T):
                want = (X[n, a] @ S @ X[n, b] - (a == b) * np.trace(S)) / math.sqrt(d)
                assert h[n, a, b] == pytest.approx(want, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("link", sorted(LINKS))
def test_sample_gradient_matches_finite_differences(link):
    """grad_S of sum_b |g(h_b(S)) - y_b|^2 / 2 against central differences, every link, T = 2."""
    rng = np.random.default_rng(1)
    d = 4
    model = AttentionIndexed(d=d, tokens=2, link=link, beta=1.3)
    S = rng.standard_normal((d, d))
    X = model.sample(rng, 3)
    y = model.labels(_sym(rng, d), X, rng)
    _, G = model.loss_and_grad(S, X, y)
    eps = 1e-6
    fd = np.zeros((d, d))
    for i in range(d):
        for j in range(d):
            E = np.zeros((d, d))
            E[i, j] = eps
            fd[i, j] = (model.loss_and_grad(S + E, X, y)[0]
                        - model.loss_and_grad(S - E, X, y)[0]) / (2 * eps)
    assert np.max(np.abs(G - fd)) < 1e-6 * max(1.0, np.max(np.abs(fd)))


def test_step_through_a_plugin_is_the_chain_rule():
    """The step direction of tied S = scale * U U^T is d/dtheta of the sample loss (central
    differences in theta), i.e. scale * J^T grad_S ell."""
    rng = np.random.default_rng(2)
    d, r = 5, 3
    p = get("uut", d=d, r=r)
    scale = 1 / math.sqrt(r * d)
    model = AttentionIndexed(d=d, tokens=2, link="tanh")
    X = model.sample(rng, 2)
    y = model.labels(_sym(rng, d), X, rng)
    theta = rng.standard_normal(p.n)

    def loss(th):
        return model.loss_and_grad(scale * p.forward(th), X, y)[0]

    G = model.loss_and_grad(scale * p.forward(theta), X, y)[1]
    g = scale * p.vjp(theta, G.ravel())
    fd = np.array([(loss(theta + 1e-6 * e) - loss(theta - 1e-6 * e)) / 2e-6
                   for e in np.eye(p.n)])
    assert np.max(np.abs(g - fd)) < 1e-6


def test_mean_gradient_of_the_linear_link_is_a_D_over_d():
    """E[grad_S ell] = T (T + 1) D / d for the linear link (the drift of the equations), by
    Monte Carlo within 5 standard errors in every entry (from means over chunks of samples)."""
    rng = np.random.default_rng(3)
    d, T, chunks, size = 4, 2, 400, 50
    model = AttentionIndexed(d=d, tokens=T, link="linear")
    S, S_star = _sym(rng, d), _sym(rng, d)
    grads = []
    for _ in range(chunks):
        X = model.sample(rng, size)
        grads.append(model.loss_and_grad(S, X, model.labels(S_star, X, rng))[1] / size)
    grads = np.array(grads)
    mean, se = grads.mean(axis=0), grads.std(axis=0) / math.sqrt(chunks)
    want = T * (T + 1) * (S - S_star) / d
    assert np.all(np.abs(mean - want) < 5 * se)
    assert np.max(np.abs(want)) > 20 * np.max(se)  # the test can tell D / d from 0


def test_closed_form_equals_the_integrated_equations():
    model = AttentionIndexed(d=10, tokens=2, link="linear", noise=0.3)
    t = np.linspace(0, 3, 31)
    args = (model, {"mean": 0.7, "norm": 1.5}, {"mean": 0.1, "norm": 1.2, "overlap": 0.05},
            0.4, t)
    a = linear_teacher_odes(*args)
    b = linear_teacher_odes(*args, method="integrate")
    for k in ("mean", "norm", "overlap", "cosine"):
        assert np.max(np.abs(a.order[k] - b.order[k])) < 1e-8


def test_online_sgd_follows_the_exact_equations_at_small_d():
    """Direct S, linear link, d = 48: the run stays within 10% of the equations (O(1/d)
    fluctuations and corrections; the d >= 200 comparison, within 2%, is in
    examples/online_attention.py), and the equations with c doubled are far off."""
    rng = np.random.default_rng(4)
    d = 48
    p = get("matrix", d=d)
    model = AttentionIndexed(d=d, link="linear", noise=0.2)
    run = online_sgd(p, model, Teacher.planted(d, d // 2, rng), p.random_point(rng),
                     samples=2 * d * d, lr=0.5, lr_exponent=1, batch=12, seed=5,
                     record_at=np.linspace(0, 2, 9), test_samples=16)
    assert run.eta == pytest.approx(0.5 / d)
    assert np.allclose(run.t, np.linspace(0, 2, 9))
    ode, cmp = compare_with_odes(run)
    assert cmp.max_deviation < 0.1, str(cmp)
    wrong = linear_teacher_odes(model, run.teacher_order, {k: v[0] for k, v in run.order.items()},
                                2 * run.eta * d, run.t)
    assert np.max(np.abs(wrong.order["overlap"] - run.order["overlap"])) \
        > 0.2 * np.max(run.order["overlap"])
    assert np.isfinite(run.trajectory.losses).all()
    # the moment hierarchies are written in the factors of S = W W^T or U V^T: a direct-S run
    # is refused by its structure (not by its plugin's name), pointing to compare_with_odes
    with pytest.raises(ParamgeoError, match="compare_with_odes"):
        compare_with_hierarchy(run, Teacher.planted(d, d // 2, rng))
    assert run.to_dict()["weak_recovery"] == run.weak_recovery


def test_direct_S_at_zero_stays_there_for_an_even_link_and_tied_S_leaves():
    """For an even link g'(0) = 0, so S = 0 is a fixed point of every sample's step; tied S from
    a random W is not at it. The linear link moves S = 0 at once."""
    rng = np.random.default_rng(6)
    d, r = 12, 6
    teacher = Teacher.planted(d, r, rng, centered=True)
    model = AttentionIndexed(d=d, link="abs", noise=0.1)
    p = get("matrix", d=d)
    run = online_sgd(p, model, teacher, np.zeros(p.n), samples=d * d, lr=0.5, lr_exponent=1,
                     seed=1, test_samples=0)
    assert np.all(run.trajectory.thetas == 0)
    moved = online_sgd(p, AttentionIndexed(d=d, link="linear"), teacher, np.zeros(p.n),
                       samples=d * d, lr=0.5, lr_exponent=1, seed=1, test_samples=0)
    assert np.abs(moved.trajectory.thetas[-1]).max() > 0
    u = get("uut", d=d, r=r)
    tied = online_sgd(u, model, teacher, rng.standard_normal(u.n), samples=d * d, lr=0.1,
                      scale=1 / math.sqrt(r * d), seed=1, test_samples=0)
    assert np.abs(tied.order["norm"][-1] - tied.order["norm"][0]) > 1e-3


def test_weak_recovery_is_detected_and_can_stop_the_run():
    rng = np.random.default_rng(7)
    d = 16
    p = get("matrix", d=d)
    run = online_sgd(p, AttentionIndexed(d=d, link="linear"), Teacher.planted(d, 8, rng),
                     p.random_point(rng), samples=4 * d * d, lr=0.5, lr_exponent=1, batch=4,
                     threshold=0.5, seed=3, stop_at_recovery=True, test_samples=0)
    assert run.weak_recovery is not None and run.samples == run.weak_recovery < 4 * d * d
    assert run.order["cosine"][-1] >= 0.5 > abs(run.order["cosine"][0])
    assert "weak recovery" in run.trajectory.message


def test_order_parameters_against_their_definitions():
    rng = np.random.default_rng(8)
    d = 6
    S, S_star = _sym(rng, d) + 0.3 * np.eye(d), _sym(rng, d)
    o = order_parameters(S, S_star, moments=3)
    ev = np.linalg.eigvalsh(S)
    assert o["mean"] == pytest.approx(ev.mean())
    assert o["norm"] == pytest.approx(np.mean(ev ** 2))
    assert o["moment_3"] == pytest.approx(np.mean(ev ** 3))
    St, Sts = S - ev.mean() * np.eye(d), S_star - np.trace(S_star) / d * np.eye(d)
    assert o["cosine"] == pytest.approx(np.sum(St * Sts) / np.linalg.norm(St)
                                        / np.linalg.norm(Sts))


def test_planted_teachers_have_their_stated_spectra():
    rng = np.random.default_rng(9)
    d, r = 160, 80
    tied = Teacher.planted(d, r, rng).S
    assert np.trace(tied) / d == pytest.approx(math.sqrt(r / d), rel=0.03)
    assert np.linalg.eigvalsh(tied).min() > -1e-10
    centered = Teacher.planted(d, r, rng, centered=True).S
    assert abs(np.trace(centered)) < 1e-9
    direct = Teacher.planted(d, r, rng, kind="direct").S
    assert np.abs(np.linalg.eigvalsh(direct)).max() == pytest.approx(2.0, abs=0.2)


def test_fit_recovers_a_planted_exponent():
    d = np.array([16, 32, 64, 128, 16, 32, 64, 128], float)
    n = 3.0 * d ** 2 * np.log(d) * np.exp(0.05 * np.array([1, -1, 1, -1, -1, 1, -1, 1]))
    fit = fit_weak_recovery(d, n)
    assert abs(fit.exponent - 2) < 3 * fit.exponent_stderr + 1e-12
    assert 0 < fit.exponent_stderr < 0.1
    exact = fit_weak_recovery(d[:4], 3.0 * d[:4] ** 2 * np.log(d[:4]))
    assert exact.exponent == pytest.approx(2.0, abs=1e-12) and exact.exponent_stderr < 1e-10
    pure = fit_weak_recovery(d[:4], 5.0 * d[:4] ** 2)  # d^2 alone: p = 2, gamma below 2
    assert pure.power == pytest.approx(2.0, abs=1e-12) and pure.exponent < 1.9
    with pytest.raises(ParamgeoError, match="3 distinct"):
        fit_weak_recovery([16, 32], [1.0, 2.0])


def test_bad_input_names_the_problem():
    rng = np.random.default_rng(10)
    t = Teacher.planted(4, 2, rng)
    with pytest.raises(ShapeError, match="d x d matrix"):
        online_sgd(get("hadamard", p=3), AttentionIndexed(d=4), t, np.ones(6), 10, 0.1)
    with pytest.raises(ShapeError, match="teacher is 4 x 4"):
        online_sgd(get("matrix", d=3), AttentionIndexed(d=3), t, np.zeros(9), 10, 0.1)
    with pytest.raises(ParamgeoError, match="unknown link 'cubic'"):
        AttentionIndexed(d=4, link="cubic")
    with pytest.raises(ParamgeoError, match="step size"):
        online_sgd(get("matrix", d=4), AttentionIndexed(d=4), t, np.zeros(16), 10, -1.0)
    with pytest.raises(ParamgeoError, match="linear link only"):
        linear_teacher_odes(AttentionIndexed(d=4, link="abs"), {"mean": 0, "norm": 1},
                            {"mean": 0, "norm": 1, "overlap": 0}, 0.5, [0, 1])
    with pytest.raises(ParamgeoError, match="diverged"):
        online_sgd(get("matrix", d=4), AttentionIndexed(d=4, link="quadratic"), t,
                   10 * np.ones(16), 200, 50.0)


def test_sweep_query_runs_to_weak_recovery():
    run = QUERIES["online-sgd"].run
    opts = {name: o.default for name, o in QUERIES["online-sgd"].options.items()}
    out = run(get("uut", d=8, r=4), **dict(opts, horizon=6.0, link="linear", lr=0.3))
    assert out["d"] == 8 and out["weak_recovery"] is not None
    assert out["recovered_over_d2logd"] == pytest.approx(
        out["weak_recovery"] / (64 * math.log(8)))
    with pytest.raises(ParamgeoError, match="needs a size r"):
        run(get("matrix", d=4), **opts)


def test_matrix_plugin_passes_the_contract_check():
    report = check(get("matrix", d=3), seed=0)
    assert report.passed, str(report)


def test_finite_d_second_moment_by_monte_carlo():
    """E[(x^T D x - Tr D)^2 |x x^T - I|_F^2] = (2 d^2 + 18 d + 32) Tr(D^2) + 8 (Tr D)^2 for
    x ~ N(0, I_d), the moment the finite-d equations use, within 5 standard errors."""
    rng = np.random.default_rng(11)
    d, N = 3, 400000
    D = _sym(rng, d) + 0.4 * np.eye(d)
    x = rng.standard_normal((N, d))
    v = (np.einsum("ni,ij,nj->n", x, D, x) - np.trace(D)) ** 2
    a2 = np.sum(x * x, axis=1)
    f = v * (a2 ** 2 - 2 * a2 + d)
    want = (2 * d * d + 18 * d + 32) * np.trace(D @ D) + 8 * np.trace(D) ** 2
    assert abs(f.mean() - want) < 5 * f.std() / math.sqrt(N)
    high_d = 2 * d * d * np.trace(D @ D)  # the leading term alone is far off at d = 3
    assert abs(f.mean() - high_d) > 20 * f.std() / math.sqrt(N)
    assert np.mean(a2 ** 2 - 2 * a2 + d) == pytest.approx(d * (d + 1), rel=0.01)


def test_finite_d_equations_need_one_token():
    model = AttentionIndexed(d=10, tokens=2)
    with pytest.raises(ParamgeoError, match="T = 1 token"):
        linear_teacher_odes(model, {"mean": 0, "norm": 1}, {"mean": 0, "norm": 1, "overlap": 0},
                            0.5, [0, 1], finite_d=True)


def test_cli_runs_to_weak_recovery_and_reports_errors_in_one_line():
    from click.testing import CliRunner

    from paramgeo.cli import main

    res = CliRunner().invoke(main, ["online-sgd", "uut", "-p", "d=10", "-p", "r=5", "--link",
                                    "linear", "--lr", "0.3", "--horizon", "3", "--json"])
    assert res.exit_code == 0, res.output
    import json

    out = json.loads(res.output)
    assert out["weak_recovery"] is not None and out["final"]["cosine"] >= 0.5
    assert out["recovered_over_d2logd"] == pytest.approx(
        out["weak_recovery"] / (100 * math.log(10)))
    res = CliRunner().invoke(main, ["online-sgd", "hadamard", "-p", "p=3"])
    assert res.exit_code == 2 and "Error:" in res.output and "d x d matrix" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(main, ["online-sgd", "matrix", "-p", "d=4"])
    assert res.exit_code == 2 and "needs a size r" in res.output
    res = CliRunner().invoke(main, ["online-sgd", "matrix", "-p", "d=4", "--scale", "big"])
    assert res.exit_code == 2 and "1/sqrt(rd)" in res.output


def test_free_cumulants_round_trip_and_known_laws():
    """Semicircle: kappa = (0, s, 0, 0), moments (0, s, 0, 2 s^2) (Catalan); free Poisson of
    rate 1 (Marchenko-Pastur): every free cumulant 1, moments the Catalan numbers 1, 2, 5, 14."""
    from paramgeo.flows import free_cumulants, free_moments

    assert np.allclose(free_moments([0, 0.5, 0, 0]), [0, 0.5, 0, 0.5])
    assert np.allclose(free_moments([1, 1, 1, 1, 1]), [1, 2, 5, 14, 42])
    rng = np.random.default_rng(12)
    m = rng.standard_normal(6)
    assert np.allclose(free_moments(free_cumulants(m)), m)
    S = _sym(rng, 400)  # GOE of variance 1/d: free cumulants close to (0, 1, 0, 0)
    ev = np.linalg.eigvalsh(S)
    kappa = free_cumulants([np.mean(ev ** k) for k in range(1, 5)])
    assert np.allclose(kappa, [0, 1, 0, 0], atol=0.03)


def test_moments_follow_the_free_convolution_prediction():
    """Direct S, linear link, d = 48: Tr(S^3)/d and Tr(S^4)/d of the run against the free
    convolution of alpha S*, beta S0 and the semicircle closing the norm equation (within 8%
    at this d); leaving the semicircle out (the mean path alone) is three times further off."""
    rng = np.random.default_rng(13)
    d = 48
    p = get("matrix", d=d)
    teacher = Teacher.planted(d, d // 2, rng)
    S0 = p.random_point(rng)
    model = AttentionIndexed(d=d, link="linear", noise=0.5)
    run = online_sgd(p, model, teacher, S0, samples=2 * d * d, lr=0.5, lr_exponent=1,
                     batch=12, seed=14, record_at=np.linspace(0, 2, 9), test_samples=0)
    ode, cmp = compare_with_odes(run, finite_d=True, teacher=teacher.S, start=S0.reshape(d, d))
    assert cmp.deviation["moment_3"] < 0.08 and cmp.deviation["moment_4"] < 0.08, str(cmp)
    b = ode.order["start_weight"][-1]
    mean_path = (1 - b) * teacher.S + b * S0.reshape(d, d)
    no_noise = np.trace(np.linalg.matrix_power(mean_path, 4)) / d
    err = abs(ode.order["moment_4"][-1] - run.order["moment_4"][-1])
    assert abs(no_noise - run.order["moment_4"][-1]) > 3 * err


def test_teacher_from_a_plugin_point():
    rng = np.random.default_rng(15)
    p = get("uut", d=4, r=2)
    theta = rng.standard_normal(p.n)
    U = theta.reshape(4, 2)
    t = Teacher.from_param(p, theta, scale=0.5)
    assert np.allclose(t.S, 0.5 * U @ U.T)
    assert t.to_dict()["order"]["cosine"] == pytest.approx(1.0)
    with pytest.raises(ShapeError, match="d x d matrix"):
        Teacher.from_param(get("hadamard", p=3), np.ones(6))


def _tied_pair(rng, d, r, start=0.7):
    s = 1 / math.sqrt(r * d)
    Wt, W = rng.standard_normal((d, r)), start * rng.standard_normal((d, r))
    return s, s * Wt @ Wt.T, W, s * W @ W.T


def _hierarchy(T, K, beta, noise):
    ev = np.linalg.eigvalsh(T)
    return TiedMomentHierarchy(K, beta, noise, [np.mean(ev ** k) for k in range(1, K + 2)])


def test_tied_hierarchy_rhs_equals_the_matrix_formula():
    """The word bookkeeping (rotations, reversals, arcs) against the drift evaluated with
    matrices: sum over the S of a word of Tr(w[S -> V]) / d plus the pair terms, V = -2 beta
    (D S + S D) + beta^2 tau (2 q + sigma^2) I, for every word of length <= 4 (order 5)."""
    rng = np.random.default_rng(0)
    d, beta, noise = 12, 0.7, 0.4
    _, T, _, S = _tied_pair(rng, d, 6)
    h = _hierarchy(T, 5, beta, noise)
    rhs = h.rhs(h.values(S, T))
    tr = lambda M: np.trace(M) / d
    D = S - T
    tau, q = tr(S), tr(D @ D)
    kick = beta ** 2 * (2 * q + noise ** 2)
    V = -2 * beta * (D @ S + S @ D) + kick * tau * np.eye(d)
    mat = {"s": S, "t": T}
    prod = lambda w: np.linalg.multi_dot([np.eye(d)] + [mat[a] for a in w] + [np.eye(d)])
    checked = 0
    for w in h.words:
        if len(w) > 4:
            continue
        want = 0.0
        pos = [i for i, a in enumerate(w) if a == "s"]
        for i in pos:
            want += tr(V @ prod(w[i + 1:] + w[:i]))
            for j in (j for j in pos if j > i):
                w1, w2 = prod(w[i + 1:j]), prod(w[j + 1:] + w[:i])
                want += kick * (tr(S @ w1) * tr(S @ w2) + tr(S @ w1 @ S) * tr(w2)
                                + tr(w1) * tr(S @ w2 @ S) + tr(w1 @ S) * tr(w2 @ S))
        assert rhs[h.index(w)] == pytest.approx(want, rel=1e-10, abs=1e-12), w
        checked += 1
    assert checked == 11  # s; ss st; sss sst stt; ssss ssst sstt stst sttt
    assert h.index("ts") == h.index("st") and h.index("sst") == h.index("tss")
    with pytest.raises(ParamgeoError, match="not a word"):
        h.index("tt")


def _assert_second_order_drift(rest, want, d):
    """Monte Carlo one-step drifts beyond the linear part (rows of ``rest``) against the
    hierarchy's eta^2 terms ``want``: equal within 4 s.e. + 25/d relative, and resolved (zero,
    the gradient-flow drift alone, would fail the same test)."""
    mc, se = rest.mean(0), rest.std(0) / math.sqrt(len(rest))
    assert np.all(want > 0)
    assert np.all(np.abs(mc - want) <= 4 * se + 25 / d * np.abs(want)), (mc, want, se)
    assert np.all(np.abs(mc) > 4 * se + 25 / d * np.abs(want))


def test_tied_hierarchy_drift_against_monte_carlo():
    """E[tr(w(S'))] - tr(w(S)) for one online SGD sample (W' = W - 2 eta scale G W, fresh x)
    times d^2, by Monte Carlo, against the hierarchy. The linear part -(A S + S A) has its exact
    mean (E[A] = 4 eta scale D / d, Isserlis) and is subtracted sample by sample (a control
    variate); the rest, the beta^2 part, is compared with a tolerance of 4 Monte Carlo standard
    errors plus its O(1/d) finite-size correction (measured: 10-28% of it at d = 80, 21-66% at
    d = 40, halving with d), bounded here by 25 / d."""
    rng = np.random.default_rng(1)
    d, r, eta, noise = 64, 32, 0.3, 0.5
    s, T, W, S = _tied_pair(rng, d, r)
    h = _hierarchy(T, 4, 2 * eta * s * d, noise)
    words = ["s", "ss", "st", "sss", "sst"]
    D = S - T

    def lin(dS):  # the first-order change of each word's trace, batched (n, d, d)
        return np.stack([np.einsum("nii->n", dS), 2 * np.einsum("ij,nij->n", S, dS),
                         np.einsum("ij,nij->n", T, dS), 3 * np.einsum("ij,nij->n", S @ S, dS),
                         np.einsum("ij,nij->n", S @ T + T @ S, dS)], 1) / d

    EA = 4 * eta * s * D / d
    first = lin((-(EA @ S + S @ EA))[None])[0] * d * d
    full = h.rhs(h.values(S, T))
    want = np.array([full[h.index(w)] for w in words]) - first
    base = np.array([np.trace(S), np.sum(S * S), np.sum(S * T), np.trace(S @ S @ S),
                     np.sum((S @ S) * T)]) / d
    rest = []
    for _ in range(6):
        X = rng.standard_normal((1000, d))
        e = ((np.einsum("ni,ij,nj->n", X, D, X) - np.trace(D)) / math.sqrt(d)
             - noise * rng.standard_normal(1000))
        a = (2 * eta * s * e / math.sqrt(d))[:, None, None]  # A = a (x x^T - I)
        xu = np.einsum("ni,nj->nij", X, X @ S)
        AS = a * (xu - S)
        dS1 = -(AS + AS.transpose(0, 2, 1))
        S1 = S + dS1 + a * a * (np.einsum("ni,ni->n", X, X @ S)[:, None, None]
                                * np.einsum("ni,nj->nij", X, X) - xu - xu.transpose(0, 2, 1) + S)
        S1S1 = S1 @ S1
        new = np.stack([np.einsum("nii->n", S1), np.einsum("nij,nij->n", S1, S1),
                        np.einsum("nij,ij->n", S1, T), np.einsum("nij,nji->n", S1S1, S1),
                        np.einsum("nij,ij->n", S1S1, T)], 1) / d
        rest.append((new - base - lin(dS1)) * d * d)
    _assert_second_order_drift(np.concatenate(rest), want, d)


def test_tied_hierarchy_follows_online_sgd_and_converges_in_the_order():
    """At d = 40 (linear link, noise 0.5, small start, eta = 0.02) the hierarchy of order 8
    follows a run's mean, norm and overlap within the O(1/d) of this d, and orders 6, 8, 10
    approach each other (the truncation error falls with the order)."""
    d, r = 40, 20
    rng = np.random.default_rng(2)
    teacher = Teacher.planted(d, r, rng)
    p = get("uut", d=d, r=r)
    model = AttentionIndexed(d=d, link="linear", noise=0.5)
    run = online_sgd(p, model, teacher, 0.3 * rng.standard_normal(p.n), samples=2 * d * d,
                     lr=0.02, scale=1 / math.sqrt(r * d), batch=8, seed=3,
                     record_at=np.linspace(0, 2, 6), test_samples=0)
    ode, cmp = compare_with_hierarchy(run, teacher, order=8)
    assert cmp.max_deviation < 0.06, cmp
    assert set(ode.order) >= {"mean", "norm", "overlap", "cosine", "moment_3", "mixed_2"}
    S0 = run.scale * p.forward_flat(run.trajectory.thetas[0]).reshape(d, d)
    sols = [tied_moment_odes(model, teacher.S, S0, run.eta, run.scale, run.t, order=K)
            for K in (4, 6, 8, 10)]
    gaps = [np.max(np.abs(a.order["moment_3"] - sols[-1].order["moment_3"])) for a in sols[:-1]]
    assert gaps[0] > gaps[1] > gaps[2] > 0
    with pytest.raises(ParamgeoError, match="linear link"):
        tied_moment_odes(AttentionIndexed(d=d, link="abs"), teacher.S, S0, 0.1, 0.1, [0, 1])


def _untied_hierarchy(T, K, beta, noise):
    ev = np.linalg.eigvalsh(T)
    return UntiedMomentHierarchy(K, beta, noise, [np.mean(ev ** k) for k in range(1, K + 2)])


def test_untied_hierarchy_at_equal_factors_is_the_tied_one():
    """U = V = W makes A = B = S = S^T: the untied hierarchy at that state must give the tied
    hierarchy's drift (one step of untied SGD at U = V is a tied step with half the step size,
    and beta = eta scale d equals the tied 2 (eta / 2) scale d), word by word."""
    rng = np.random.default_rng(3)
    d, r, beta, noise = 12, 6, 0.7, 0.4
    s, T, W, S = _tied_pair(rng, d, r)
    hu, ht = _untied_hierarchy(T, 5, beta, noise), _hierarchy(T, 5, beta, noise)
    ru, rt = hu.rhs(hu.values(W, W, T, s)), ht.rhs(ht.values(S, T))
    for w in ht.words:
        assert ru[hu.index(w)] == pytest.approx(rt[ht.index(w)], rel=1e-12, abs=1e-12), w


def test_untied_hierarchy_rhs_equals_the_matrix_formula():
    """The bookkeeping with five letters (S, S^T, the Gram matrices A, B and S*; rotations and
    transposition) against the drift evaluated with matrices, every word of length <= 3, at a
    state with U != V (docs/online-sgd.md, "The moment hierarchy of untied S")."""
    rng = np.random.default_rng(4)
    d, r, beta, noise = 10, 5, 0.6, 0.3
    s, T, U, _ = _tied_pair(rng, d, r)
    V = 0.7 * rng.standard_normal((d, r))
    h = _untied_hierarchy(T, 4, beta, noise)
    rhs = h.rhs(h.values(U, V, T, s))
    S, A, B = s * U @ V.T, s * U @ U.T, s * V @ V.T
    tr = lambda M: np.trace(M) / d
    D = (S + S.T) / 2 - T
    kappa = beta ** 2 * (2 * tr(D @ D) + noise ** 2)
    I = np.eye(d)
    mat = {"s": S, "S": S.T, "a": A, "b": B, "t": T}
    drift = {"s": -2 * beta * (A @ D + D @ B) + kappa * tr(S) * I,
             "a": -2 * beta * (S @ D + D @ S.T) + kappa * tr(B) * I,
             "b": -2 * beta * (S.T @ D + D @ S) + kappa * tr(A) * I}
    drift["S"] = drift["s"].T
    P = {"s": B, "S": A, "a": S.T, "b": S}
    Q = {"s": A, "S": B, "a": S, "b": S.T}
    prod = lambda w: np.linalg.multi_dot([I, I] + [mat[c] for c in w])
    checked = 0
    for w in h.words:
        if len(w) > 3:
            continue
        want = 0.0
        pos = [i for i, c in enumerate(w) if c != "t"]
        for i in pos:
            want += tr(drift[w[i]] @ prod(w[i + 1:] + w[:i]))
            for j in (j for j in pos if j > i):
                w1, w2 = prod(w[i + 1:j]), prod(w[j + 1:] + w[:i])
                Pi, Qi, Pj, Qj = P[w[i]], Q[w[i]], P[w[j]], Q[w[j]]
                want += kappa * (tr(Pi @ w1) * tr(Pj @ w2) + tr(Pi @ w1 @ Qj) * tr(w2)
                                 + tr(w1) * tr(Pj @ w2 @ Qi) + tr(w1 @ Qj) * tr(w2 @ Qi))
        assert rhs[h.index(w)] == pytest.approx(want, rel=1e-10, abs=1e-12), w
        assert h.values(U, V, T, s)[h.index(w)] == pytest.approx(tr(prod(w)), rel=1e-10), w
        checked += 1
    assert checked == 3 + 10 + 29  # s a b; ss sS sa sb st aa ab at bb bt; 29 of length 3
    assert h.index("Ss") == h.index("sS") and h.index("sa") == h.index("aS")
    assert h.index("st") == h.index("St") != h.index("ss")


def test_untied_hierarchy_drift_against_monte_carlo():
    """E[tr(w)] after one online SGD sample (U' = U - eta scale G V, V' = V - eta scale G U,
    fresh x) minus tr(w), times d^2, by Monte Carlo, for words in S, S^T, A, B, S*. The part
    linear in the step, whose mean is exact (E[G] = 2 D / d), is subtracted sample by sample;
    the rest is the beta^2 part of the hierarchy (read off as (rhs(2 beta) - 2 rhs(beta)) / 2)
    up to 4 Monte Carlo standard errors and its O(1/d) finite-size correction (measured:
    9-19% of it at d = 64, 7-12% at d = 128), bounded here by 25 / d."""
    rng = np.random.default_rng(5)
    d, r, eta, noise = 48, 24, 0.3, 0.5
    s, T, U, _ = _tied_pair(rng, d, r)
    V = (U + 0.7 * rng.standard_normal((d, r))) / math.sqrt(2)
    beta = eta * s * d
    h1, h2 = _untied_hierarchy(T, 3, beta, noise), _untied_hierarchy(T, 3, 2 * beta, noise)
    y = h1.values(U, V, T, s)
    quad = (h2.rhs(y) - 2 * h1.rhs(y)) / 2
    words = ["s", "a", "b", "st", "sS", "ss", "ab", "sa", "sb"]
    want = np.array([quad[h1.index(w)] for w in words])
    S, A, B = s * U @ V.T, s * U @ U.T, s * V @ V.T
    D = (S + S.T) / 2 - T
    tr2 = lambda X, Y: np.einsum("...ij,...ji->...", X, Y) / d
    tr1 = lambda X: np.einsum("...ii->...", X) / d
    swap = lambda X: np.swapaxes(X, -1, -2)

    def traces(S, A, B):
        return np.stack([tr1(S), tr1(A), tr1(B), tr2(S, T), tr2(S, swap(S)), tr2(S, S),
                         tr2(A, B), tr2(S, A), tr2(S, B)], -1)

    def first(dS, dA, dB):  # the change of each word to first order in (dS, dA, dB)
        return np.stack([tr1(dS), tr1(dA), tr1(dB), tr2(dS, T), 2 * tr2(dS, S.T),
                         2 * tr2(dS, S), tr2(dA, B) + tr2(dB, A), tr2(dS, A) + tr2(dA, S),
                         tr2(dS, B) + tr2(dB, S)], -1)

    base, rest = traces(S, A, B), []
    for _ in range(8):
        X = rng.standard_normal((500, d))
        e = ((np.einsum("ni,ij,nj->n", X, D, X) - np.trace(D)) / math.sqrt(d)
             - noise * rng.standard_normal(500))
        G = (e / math.sqrt(d))[:, None, None] * (np.einsum("ni,nj->nij", X, X) - np.eye(d))
        U1, V1 = U - eta * s * G @ V, V - eta * s * G @ U
        new = traces(s * U1 @ swap(V1), s * U1 @ swap(U1), s * V1 @ swap(V1))
        lin = first(-eta * s * (A @ G + G @ B), -eta * s * (S @ G + G @ S.T),
                    -eta * s * (S.T @ G + G @ S))
        rest.append((new - base - lin) * d * d)
    _assert_second_order_drift(np.concatenate(rest), want, d)


def test_untied_hierarchy_follows_online_sgd_and_converges_in_the_order():
    """At d = 40 (linear link, noise 0.5, small independent factors, eta = 0.02) the untied
    hierarchy of order 5 follows a run's mean, norm, overlap and Gram trace within the O(1/d)
    of this d, and orders 3, 4, 5 approach order 6 (the truncation error falls with the
    order)."""
    d, r = 40, 20
    rng = np.random.default_rng(0)
    teacher = Teacher.planted(d, r, rng)
    p = get("uvt", m=d, n=d, r=r)
    model = AttentionIndexed(d=d, link="linear", noise=0.5)
    run = online_sgd(p, model, teacher, 0.3 * rng.standard_normal(p.n), samples=2 * d * d,
                     lr=0.02, scale=1 / math.sqrt(r * d), batch=8, seed=3,
                     record_at=np.linspace(0, 2, 6), test_samples=0)
    ode, cmp = compare_with_hierarchy(run, teacher, order=5,
                                      names=("mean", "norm", "overlap", "gram_u"))
    assert cmp.max_deviation < 0.08, cmp
    assert run.order["cosine"][-1] > 0.1  # S moved towards S* over the run
    k = d * r
    U0, V0 = (run.trajectory.thetas[0][:k].reshape(d, r),
              run.trajectory.thetas[0][k:].reshape(d, r))
    sols = [untied_moment_odes(model, teacher.S, U0, V0, run.eta, run.scale, run.t, order=K)
            for K in (3, 4, 5, 6)]
    gaps = [max(np.max(np.abs(a.order[n] - sols[-1].order[n])) / np.max(np.abs(sols[-1].order[n]))
                for n in ("mean", "norm", "overlap")) for a in sols[:-1]]
    assert gaps[0] > gaps[1] > gaps[2] > 0, gaps  # measured 0.13, 0.06, 0.011
    with pytest.raises(ParamgeoError, match="linear link"):
        untied_moment_odes(AttentionIndexed(d=d, link="abs"), teacher.S, U0, V0, 0.1, 0.1, [0, 1])
    with pytest.raises(ParamgeoError, match="two 40 x r"):
        untied_moment_odes(model, teacher.S, U0, V0[:, :3], 0.1, 0.1, [0, 1])


def test_mean_gradient_of_a_nonlinear_link_pulls_along_S_star():
    """Gaussian integration by parts: E[grad_S ell] = (2/d) (E[g'(h)^2 + (g(h) - g(h*)) g''(h)]
    S_sym - E[g'(h) g'(h*)] S*) + O(d^(-3/2)): the teacher enters only through K S*, K =
    E[g'(h) g'(h*)], so its pull on the mean Tr S / d and on the traceless overlap share K
    (docs/online-sgd.md, untied S). Monte Carlo at d = 40, tanh link, an untied S and an
    uncentered teacher: the projections on I and on the traceless S* agree within the O(1/d)
    corrections (measured 1% and 9% at d = 40, 1% and 3% at d = 120)."""
    rng = np.random.default_rng(9)
    d, r = 40, 20
    T = Teacher.planted(d, r, rng).S
    U, V = rng.standard_normal((2, d, r))
    S = U @ V.T / math.sqrt(r * d)
    model = AttentionIndexed(d=d, link="tanh")
    G, c1, K, n = np.zeros((d, d)), 0.0, 0.0, 0
    for _ in range(8):
        X = model.sample(rng, 5000)
        G += model.loss_and_grad(S, X, model.labels(T, X, rng))[1]
        f, fs = np.tanh(model.indices(S, X)[:, 0, 0]), np.tanh(model.indices(T, X)[:, 0, 0])
        c1 += np.sum((1 - f * f) ** 2 - 2 * (f - fs) * f * (1 - f * f))
        K += np.sum((1 - f * f) * (1 - fs * fs))
        n += 5000
    G, c1, K = G / n, c1 / n, K / n
    pred = 2 / d * (c1 * (S + S.T) / 2 - K * T)
    Tt = T - np.trace(T) / d * np.eye(d)
    for M, tol in ((np.eye(d), 0.04), (Tt, 0.15)):
        assert np.sum(G * M) == pytest.approx(np.sum(pred * M), rel=tol)
    assert K > 0.2  # tanh: the pull is O(1) at an uncorrelated start


def _untied_run(d, seed, link, centered, correlated, horizon=3.0):
    r = d // 2
    rng = np.random.default_rng(seed)
    teacher = Teacher.planted(d, r, rng, centered=centered)
    p = get("uvt", m=d, n=d, r=r)
    U, Z = rng.standard_normal((2, d, r))
    V = (U + Z) / math.sqrt(2) if correlated else Z
    return online_sgd(p, AttentionIndexed(d=d, link=link), teacher,
                      np.concatenate([U.ravel(), V.ravel()]), samples=int(horizon * d * d),
                      lr=0.1, scale=1 / math.sqrt(r * d), batch=8, seed=seed,
                      record_at=np.arange(0, horizon + 0.5, 1.0), test_samples=0, moments=0)


def test_untied_mean_is_fast_and_the_overlap_slow():
    """Untied S, link |h|, centered teacher, correlated factors (mean 0.5 at the start): at
    d = 48 and 64 the mean drops by more than a quarter by t = 3 and has nearly stopped
    (its last unit of t moves it by less than 0.3 of the drop), while |cosine| stays below
    0.2 (weak recovery at 0.25 comes at t of 7 to 10, docs/online-sgd.md). Controls with an
    uncentered teacher (mean sqrt(r/d) = 0.71) and independent factors: with |h| the mean does
    not move towards it; with relu the cosine passes 0.25 before the mean is half-way."""
    for d in (48, 64):
        run = _untied_run(d, 3, "abs", centered=True, correlated=True)
        m = run.order["mean"]
        assert m[0] > 0.4 and m[-1] < 0.75 * m[0], m
        assert abs(m[-1] - m[-2]) < 0.3 * (m[0] - m[-1]), m
        assert np.max(np.abs(run.order["cosine"])) < 0.2, run.order["cosine"]
    even = _untied_run(48, 1, "abs", centered=False, correlated=False)
    assert even.teacher_order["mean"] > 0.6
    assert np.max(np.abs(even.order["mean"])) < 0.1, even.order["mean"]
    relu = _untied_run(48, 1, "relu", centered=False, correlated=False)
    assert relu.order["cosine"][-1] > 0.25
    assert relu.order["mean"][-1] < 0.5 * relu.teacher_order["mean"], relu.order["mean"]


# --- multi-head attention-indexed models (paramgeo.flows.multihead) ---------------------------


@pytest.mark.parametrize("tied", [True, False])
def test_multihead_with_one_head_is_the_online_engine(tied):
    """With H = 1 the matrix-free loss and factor gradient equal AttentionIndexed.loss_and_grad
    (one token) pulled back through the uut / uvt plugin's VJP, and the teacher's labels equal
    g(h(S*)) of the d x d centered teacher."""
    rng = np.random.default_rng(3)
    d, r, seeds = 10, 4, 2
    teacher = MultiHeadTeacher.planted(d, r, 1, seeds, rng, centered=True)
    X = rng.standard_normal((seeds, 6, d))
    y = teacher_labels(teacher, X, "abs")
    model = AttentionIndexed(d=d, link="abs")
    S_star = teacher.matrices()
    U, V = rng.standard_normal((2, seeds, d, 1, r))
    loss, GU, GV = multihead_loss_and_grad(U, None if tied else V, X, y, "abs",
                                           1 / math.sqrt(r * d))
    p = get("uut", d=d, r=r) if tied else get("uvt", m=d, n=d, r=r)
    for s in range(seeds):
        Xs = X[s][:, None, :]
        assert np.allclose(model.output(model.indices(S_star[s, 0], Xs))[:, 0, 0], y[s],
                           atol=1e-12)
        th = U[s, :, 0].ravel() if tied else np.concatenate([U[s, :, 0].ravel(),
                                                             V[s, :, 0].ravel()])
        S = p.forward_flat(th).reshape(d, d) / math.sqrt(r * d)
        ell, G = model.loss_and_grad(S, Xs, y[s][:, None, None])
        want = p.vjp(th, G.reshape(-1)) / math.sqrt(r * d)
        got = GU[s, :, 0].ravel() if tied else np.concatenate([GU[s, :, 0].ravel(),
                                                               GV[s, :, 0].ravel()])
        assert loss[s] == pytest.approx(ell, rel=1e-12)
        assert np.allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("tied", [True, False])
def test_multihead_gradient_against_central_differences(tied):
    """H = 3 heads, tanh link, label noise: the factor gradient against central differences of
    the loss along random directions."""
    rng = np.random.default_rng(4)
    d, r, H, seeds = 8, 3, 3, 2
    teacher = MultiHeadTeacher.planted(d, r, H, seeds, rng, centered=False)
    X = rng.standard_normal((seeds, 5, d))
    y = teacher_labels(teacher, X, "tanh", noise=0.3, rng=rng)
    U, V = 0.7 * rng.standard_normal((2, seeds, d, H, r))
    Vv = None if tied else V
    sc = 1 / math.sqrt(r * d)
    _, GU, GV = multihead_loss_and_grad(U, Vv, X, y, "tanh", sc)
    eps = 1e-6
    for _ in range(3):
        DU, DV = rng.standard_normal((2,) + U.shape)
        plus = multihead_loss_and_grad(U + eps * DU, None if tied else V + eps * DV, X, y,
                                       "tanh", sc)[0]
        minus = multihead_loss_and_grad(U - eps * DU, None if tied else V - eps * DV, X, y,
                                        "tanh", sc)[0]
        fd = (plus - minus) / (2 * eps)
        lin = np.einsum("sdhr,sdhr->s", GU, DU)
        if not tied:
            lin = lin + np.einsum("sdhr,sdhr->s", GV, DV)
        assert np.allclose(lin, fd, rtol=1e-6, atol=1e-8)


def test_head_order_parameters_against_a_loop():
    """The cosine matrix, means and norms from r x r products against order_parameters on the
    d x d heads in a loop; matched, best and symmetric against brute force; permuting the
    student heads permutes the cosine rows and leaves the summaries (and the teacher's labels,
    for permuted teacher heads) unchanged."""
    import itertools

    rng = np.random.default_rng(5)
    d, r, H, seeds = 9, 4, 3, 2
    teacher = MultiHeadTeacher.planted(d, r, H, seeds, rng, centered=True)
    U, V = rng.standard_normal((2, seeds, d, H, r))
    U[0, :, 1] += 2 * teacher.factors[0, :, 2]  # some overlap to find
    V[0, :, 1] += 2 * teacher.factors[0, :, 2]
    o = head_order_parameters(U, V, teacher)
    Sst = teacher.matrices()
    for s in range(seeds):
        S = [U[s, :, k] @ V[s, :, k].T / math.sqrt(r * d) for k in range(H)]
        C = np.array([[order_parameters(S[k], Sst[s, l])["cosine"] for l in range(H)]
                      for k in range(H)])
        assert np.allclose(o["cosine"][s], C, atol=1e-12)
        for k in range(H):
            ref = order_parameters(S[k], S[k], moments=0)
            assert o["mean"][s, k] == pytest.approx(ref["mean"], abs=1e-12)
            assert o["norm"][s, k] == pytest.approx(ref["norm"], rel=1e-12)
        matched = max(min(abs(C[k, p[k]]) for k in range(H))
                      for p in itertools.permutations(range(H)))
        assert o["matched"][s] == pytest.approx(matched, abs=1e-12)
        assert o["best"][s] == pytest.approx(np.abs(C).max(), abs=1e-12)
        sym = order_parameters(sum(S), Sst[s].sum(axis=0))["cosine"]
        assert o["symmetric"][s] == pytest.approx(abs(sym), abs=1e-12)
    assert o["best"][0] > 0.3 > o["best"][1]
    perm = [2, 0, 1]
    o2 = head_order_parameters(U[:, :, perm], V[:, :, perm], teacher)
    assert np.allclose(o2["cosine"], o["cosine"][:, perm], atol=1e-12)
    for name in ("matched", "best", "symmetric"):
        assert np.allclose(o2[name], o[name], atol=1e-12)
    X = rng.standard_normal((seeds, 4, d))
    permuted = MultiHeadTeacher(factors=teacher.factors[:, :, perm], centered=True)
    assert np.allclose(teacher_labels(permuted, X, "abs"), teacher_labels(teacher, X, "abs"))


@pytest.mark.parametrize("tied", [True, False])
def test_multihead_sgd_step_and_weak_recovery(tied):
    """One batch of multihead_sgd is theta - eta grad on the batch its seed draws; a short run
    at d = 16, H = 2 reaches weak recovery of every head (matched >= 0.25), after best."""
    rng = np.random.default_rng(6)
    d, r, H, seeds = 16, 8, 2, 2
    teacher = MultiHeadTeacher.planted(d, r, H, seeds, rng, centered=True)
    start = tuple(rng.standard_normal((1 if tied else 2, seeds, d, H, r)))
    run = multihead_sgd(teacher, start, samples=4, lr=0.2, batch=4, seed=9, record_at=[0])
    X = np.random.default_rng(9).standard_normal((seeds, 4, d))
    y = teacher_labels(teacher, X, "abs")
    _, GU, GV = multihead_loss_and_grad(start[0], None if tied else start[1], X, y, "abs",
                                        1 / math.sqrt(r * d))
    assert np.allclose(run.final[0], start[0] - 0.2 * GU, atol=1e-12)
    if not tied:
        assert np.allclose(run.final[1], start[1] - 0.2 * GV, atol=1e-12)
    run = multihead_sgd(teacher, start, samples=40 * d * d, lr=0.2, batch=2, seed=1,
                        stop_at="matched", record_at=np.arange(0, 41, 5.0))
    wr_m, wr_b = run.weak_recovery_time("matched"), run.weak_recovery_time("best")
    assert np.all(np.isfinite(wr_m)) and np.all(wr_b <= wr_m)
    assert run.order["cosine"].shape[1:] == (seeds, H, H)
    with pytest.raises(ParamgeoError):
        multihead_sgd(teacher, start, samples=4, lr=0.1, stop_at="all")
    with pytest.raises(ShapeError):
        multihead_sgd(teacher, (start[0][:, :4],), samples=4, lr=0.1)


def test_scaling_separation_on_synthetic_laws():
    """Runs drawn from n = C d^2 log d e^(s z) and from n = C d^2 e^(s z) (z standard normal):
    over 400 replications the fitted exponent of fit_weak_recovery averages 2 and 2 - gap, and
    its spread across replications is the predicted standard error (to 10%)."""
    rng = np.random.default_rng(7)
    d = np.repeat([16, 32, 64, 128, 256, 512], 8).astype(float)
    spread = 0.5
    sep = scaling_separation(d, spread)
    x = np.log(d)
    for law, target in ((d ** 2 * np.log(d), 2.0), (d ** 2, sep.gamma_d2)):
        g = [fit_weak_recovery(d, 3 * law * np.exp(spread * rng.standard_normal(len(d)))).exponent
             for _ in range(400)]
        assert abs(np.mean(g) - target) < 4 * sep.stderr / math.sqrt(400)
        assert np.std(g) == pytest.approx(sep.stderr, rel=0.1)
    xc = x - x.mean()
    assert sep.gap == pytest.approx(np.polyfit(x, np.log(x), 1)[0], rel=1e-12)
    assert sep.stderr == pytest.approx(spread / math.sqrt(xc @ xc), rel=1e-12)
    m = scaling_separation(d, spread, measured=2.1)
    assert m.from_d2logd == pytest.approx(0.1 / sep.stderr)
    assert m.from_d2 - m.from_d2logd == pytest.approx(sep.separation)
    with pytest.raises(ParamgeoError):
        scaling_separation([16, 16], 0.5)


def test_weighted_exponent_on_a_scatter_that_falls_with_d():
    """Runs from n = C d^2 log d e^(s_d z) with s_d = 1.2 (16 / d)^(1/2): the weighted
    exponent averages 2 (and 2 - gap under n = C d^2) over 300 replications, its spread across
    replications is scaling_separation's weighted standard error for the true s_d (to 15%), and
    the weighted gap reduces to the unweighted one for a constant spread."""
    rng = np.random.default_rng(12)
    d = np.repeat([16, 32, 64, 128, 256, 512], 16).astype(float)
    s_true = 1.2 * np.sqrt(16 / d)
    sep = scaling_separation(d, s_true)
    assert sep.stderr < scaling_separation(d, np.sqrt(np.mean(s_true ** 2))).stderr
    for law, target in ((d ** 2 * np.log(d), 2.0), (d ** 2, sep.gamma_d2)):
        g = np.array([weighted_exponent(d, law * np.exp(s_true * rng.standard_normal(len(d))))[0]
                      for _ in range(300)])
        assert abs(g.mean() - target) < 4 * g.std() / math.sqrt(300)
        assert g.std() == pytest.approx(sep.stderr, rel=0.15)
    flat = scaling_separation(d, np.full(len(d), 0.5))
    assert flat.gap == pytest.approx(scaling_separation(d, 0.5).gap, rel=1e-12)
    assert flat.stderr == pytest.approx(scaling_separation(d, 0.5).stderr, rel=1e-12)
    with pytest.raises(ParamgeoError):
        weighted_exponent([16, 32, 32], [1.0, 2.0, 3.0])


def test_overlap_growth_on_exact_exponentials():
    """|m(t)| = m_0 e^{lambda t} with a sign flip, a nan tail (a stopped run) and records
    outside the window: overlap_growth returns lambda and log m_0 exactly from the records in
    the window, nan for a run with fewer than 3 such records."""
    t = np.linspace(0, 10, 101)
    m = np.column_stack([-0.01 * np.exp(0.4 * t), 0.003 * np.exp(0.7 * t), np.full(101, 0.5)])
    m[80:, 1] = np.nan
    g = overlap_growth(t, m, (0.02, 0.15))
    assert g.rate[:2] == pytest.approx([0.4, 0.7], rel=1e-10)
    assert g.intercept[:2] == pytest.approx([math.log(0.01), math.log(0.003)], rel=1e-10)
    inside = (np.abs(m[:, 0]) >= 0.02) & (np.abs(m[:, 0]) <= 0.15)
    assert g.points[0] == inside.sum() and math.isnan(g.rate[2])
    assert g.mean_rate()[0] == pytest.approx(0.55)
    with pytest.raises(ShapeError):
        overlap_growth(t[:5], m)
    with pytest.raises(ParamgeoError):
        overlap_growth(t, m, (0.2, 0.1))


def test_overlap_growth_predicts_the_log_d_slope_of_a_linear_escape():
    """Second route to the slope a / lambda: runs of dm = lambda m dt + (s / d) dB from
    m_0 = z / d (z standard normal), Euler steps, at d = 64 and 1024. overlap_growth recovers
    lambda at both d (to 5%), m_0 ~ d^(-a) with a = 1, and the mean first time |m| >= 0.25
    grows between the two d by a log(1024 / 64) / lambda (to 10%), a slope in log d."""
    rng = np.random.default_rng(3)
    lam, dt, runs = 0.5, 0.01, 400
    t = np.arange(0, 30, dt)
    first, rate, log_m0 = {}, {}, {}
    for d in (64, 1024):
        m = np.empty((len(t), runs))
        m[0] = rng.standard_normal(runs) / d
        kicks = 0.2 / d * math.sqrt(dt) * rng.standard_normal((len(t) - 1, runs))
        for k in range(1, len(t)):
            m[k] = m[k - 1] * (1 + lam * dt) + kicks[k - 1]
        hit = np.abs(m) >= 0.25
        first[d] = t[np.argmax(hit, axis=0)].mean()
        g = overlap_growth(t, m, (0.02, 0.15))
        rate[d], log_m0[d] = g.mean_rate()[0], np.nanmean(g.intercept)
        assert np.isfinite(g.rate).all()
        assert rate[d] == pytest.approx(lam, rel=0.05)
    a = -(log_m0[1024] - log_m0[64]) / math.log(16)
    assert a == pytest.approx(1.0, abs=0.1)
    assert first[1024] - first[64] == pytest.approx(a * math.log(16) / rate[64], rel=0.1)


def test_escape_rate_against_the_mean_flow_of_a_d_by_d_matrix():
    """Second route to escape_rate: the mean flow dS/dt = -(2 eta / sqrt y) (8 L_Q S^2 +
    2 L_M (S* S + S S*)) of its docstring integrated with d x d matrices (d = 160, a Wishart
    start and centered Wishart teacher, Euler steps, L_Q and L_M from the current Q, M): the
    plateau's Tr S / d and Tr S^2 / d match the eigenvalue map's (to 3% and 5%), and the
    overlap's growth rate while M < 0.02 matches lambda = 8 eta tau / sqrt y (to 10%); the
    rate is proportional to eta and the slope is 1 / lambda."""
    d, y, eta = 160, 0.5, 0.1
    r = int(y * d)
    rng = np.random.default_rng(0)
    Ws = rng.standard_normal((d, r))
    Ss = Ws @ Ws.T / math.sqrt(r * d)
    Ss -= np.trace(Ss) / d * np.eye(d)
    W = rng.standard_normal((d, r))
    S = W @ W.T / math.sqrt(r * d)
    P = np.sum(Ss * Ss) / d
    dt, ts, Ms, plateau = 0.02, [], [], None
    for k in range(int(8.0 / dt)):
        Q, M = np.sum(S * S) / d, np.sum(S * Ss) / d
        rho = M / math.sqrt(Q * P)
        LQ = 0.5 - math.sqrt(P / Q) * math.sqrt(1 - rho ** 2) / math.pi
        LM = -(2 / math.pi) * math.asin(rho)
        S = S - dt * (2 * eta / math.sqrt(y)) * (8 * LQ * S @ S + 2 * LM * (Ss @ S + S @ Ss))
        ts.append(k * dt)
        Ms.append(abs(M))
        if k * dt == pytest.approx(4.0):
            plateau = (np.trace(S) / d, np.sum(S * S) / d)
    theory = escape_rate(eta, y)
    assert plateau[0] == pytest.approx(theory.tau, rel=0.03)
    assert plateau[1] == pytest.approx(theory.norm, rel=0.05)
    ts, Ms = np.array(ts), np.array(Ms)
    sel = (ts >= 3.0) & (Ms < 0.02)
    assert sel.sum() > 20
    assert np.polyfit(ts[sel], np.log(Ms[sel]), 1)[0] == pytest.approx(theory.rate, rel=0.1)
    assert theory.rate == pytest.approx(8 * eta * theory.tau / math.sqrt(y))
    assert escape_rate(eta / 2, y).rate == pytest.approx(theory.rate / 2)
    assert theory.slope == pytest.approx(1 / theory.rate)
    with pytest.raises(ParamgeoError):
        escape_rate(0.1, 1.5)


# --- the two-layer attention-indexed model (paramgeo.flows.multilayer) ------------------------


def _softmax_rows(Z, beta):
    e = np.exp(beta * (Z - Z.max(axis=-1, keepdims=True)))
    return e / e.sum(axis=-1, keepdims=True)


def test_two_layer_labels_against_d_by_d_layers():
    """y = softmax(A_1 h_2 A_1^T), A_1 = c I + softmax(h_1), per sample from the d x d teacher
    layers and h_l = (X S_l X^T - Tr(S_l) I) / sqrt(d) in a loop; for a centered teacher this is
    the second layer read on X_1 = A_1 X with Tr S*_2 = 0."""
    rng = np.random.default_rng(8)
    d, r, T, beta, c = 9, 4, 3, 1.7, 0.6
    teacher = MultiHeadTeacher.planted(d, r, 2, 2, rng, centered=True)
    X = rng.standard_normal((2, 4, T, d))
    y = two_layer_labels(teacher, X, beta, c)
    S = teacher.matrices()
    for s in range(2):
        assert abs(np.trace(S[s, 1])) < 1e-12
        for b in range(4):
            x = X[s, b]
            A = c * np.eye(T) + _softmax_rows(x @ S[s, 0] @ x.T / math.sqrt(d)
                                              - np.trace(S[s, 0]) / math.sqrt(d) * np.eye(T),
                                              beta)
            X1 = A @ x
            want = _softmax_rows(X1 @ S[s, 1] @ X1.T / math.sqrt(d), beta)
            assert np.allclose(y[s, b], want, atol=1e-12)


@pytest.mark.parametrize("tied", [True, False])
def test_two_layer_gradient_and_step(tied):
    """The two-layer factor gradient against central differences; one batch of two_layer_sgd
    is theta - eta grad on the batch its seed draws; a layer's |cosine| summary is the
    diagonal of the cosine matrix."""
    rng = np.random.default_rng(9)
    d, r, T, seeds = 8, 3, 3, 2
    teacher = MultiHeadTeacher.planted(d, r, 2, seeds, rng, centered=True)
    X = rng.standard_normal((seeds, 5, T, d))
    y = two_layer_labels(teacher, X, 1.3, 0.7)
    U, V = rng.standard_normal((2, seeds, d, 2, r))
    sc = 1 / math.sqrt(r * d)
    _, GU, GV = two_layer_loss_and_grad(U, None if tied else V, X, y, sc, 1.3, 0.7)
    DU, DV = rng.standard_normal((2,) + U.shape)
    eps = 1e-6
    loss = [two_layer_loss_and_grad(U + e * DU, None if tied else V + e * DV, X, y, sc, 1.3,
                                    0.7)[0] for e in (eps, -eps)]
    lin = np.einsum("sdhr,sdhr->s", GU, DU)
    if not tied:
        lin = lin + np.einsum("sdhr,sdhr->s", GV, DV)
    assert np.allclose(lin, (loss[0] - loss[1]) / (2 * eps), rtol=1e-6, atol=1e-9)
    start = (U,) if tied else (U, V)
    run = two_layer_sgd(teacher, start, samples=3, lr=0.5, tokens=T, beta=1.3, c=0.7, batch=3,
                        seed=11, record_at=[0])
    Xs = np.random.default_rng(11).standard_normal((seeds, 3, T, d))
    _, GU, GV = two_layer_loss_and_grad(U, None if tied else V, Xs,
                                        two_layer_labels(teacher, Xs, 1.3, 0.7), sc, 1.3, 0.7)
    assert np.allclose(run.final[0], U - 0.5 * GU, atol=1e-12)
    o = layer_order_parameters(U, None if tied else V, teacher)
    assert np.allclose(o["first"], np.abs(o["cosine"][:, 0, 0]))
    assert np.allclose(o["both"], np.minimum(o["first"], o["second"]))
    with pytest.raises(ParamgeoError):
        two_layer_loss_and_grad(U[:, :, :1], None, X, y, sc)
