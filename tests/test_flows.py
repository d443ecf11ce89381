"""The flows engine: conserved quantities, push-forward and quotient flows, the seeds' identities
(congruence of descent on U U^T, saddle-to-saddle limit, Lotka-Volterra reduction), schedules,
stochastic gradients, stopping, plots, and the ``flow`` command.

Covers: ``paramgeo.cli``, ``paramgeo.dynamics.trajectory``, ``paramgeo.flows.descent``,
``paramgeo.flows.push_forward``, ``paramgeo.flows.saddle``, ``paramgeo.losses.data``,
``paramgeo.losses.predictor``, ``paramgeo.mirror.laws``, ``paramgeo.mirror.lie``,
``paramgeo.symmetry.conserved``, ``paramgeo_plugins.deep_diagonal``, ``paramgeo_plugins.hadamard``,
``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.cli import main
from paramgeo.flows import (
    compare_flows,
    conserved_quantities,
    gradient_descent,
    gradient_flow,
    jump_times,
    predictor_flow,
    quotient_flow,
    saddle_to_saddle,
    schedule,
)
from paramgeo.losses.data import loss_from_arrays
from paramgeo.losses import LinearMeasurements, Logistic, QuadraticMeasurements

ROOT = Path(__file__).resolve().parents[1]


def _example(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sensing(rng, param, N=8):
    return LinearMeasurements(rng.standard_normal((N, param.m)), rng.standard_normal(N))


# ---------------------------------------------------------------- conserved quantities


def test_conserved_quantities_match_the_known_laws():
    had = conserved_quantities(paramgeo.get("hadamard", p=3))
    assert had.labels == ("u[0]^2 - v[0]^2", "u[1]^2 - v[1]^2", "u[2]^2 - v[2]^2")
    theta = np.arange(1.0, 7.0)
    np.testing.assert_allclose(had.values(theta)[0], theta[:3] ** 2 - theta[3:] ** 2)
    assert len(conserved_quantities(paramgeo.get("uut", d=3, r=2))) == 0  # so(r) is skew
    p = paramgeo.get("uvt", m=3, n=4, r=2)
    uvt = conserved_quantities(p)
    assert len(uvt) == 3  # the entries of the symmetric 2 x 2 matrix U^T U - V^T V
    theta = np.random.default_rng(0).standard_normal(p.n)
    blocks = p.spec.unpack(theta)
    D = blocks["U"].T @ blocks["U"] - blocks["V"].T @ blocks["V"]
    np.testing.assert_allclose(uvt.values(theta)[0], [D[0, 0], D[0, 1], D[1, 1]], rtol=1e-12)
    assert set(json.loads(json.dumps(uvt.to_dict()))) == {"labels", "matrices", "combinations",
                                                          "nonlinear", "note", "laws"}
    assert isinstance(uvt, paramgeo.results.Result) and "U^T U - V^T V" in str(uvt)
    assert [str(law) for law in uvt.laws] == ["U^T U - V^T V"]
    deep = conserved_quantities(paramgeo.get("deep-diagonal", p=2, depth=3))
    assert set(deep.labels) == {"w1[0]^2 - w2[0]^2", "w2[0]^2 - w3[0]^2",
                                "w1[1]^2 - w2[1]^2", "w2[1]^2 - w3[1]^2"}


@pytest.mark.parametrize("name,sizes", [("hadamard", {"p": 4}), ("uvt", {"m": 3, "n": 2, "r": 2}),
                                        ("deep-diagonal", {"p": 3, "depth": 3})])
def test_conserved_drift_flow_vs_descent(rng, name, sizes):
    """Flow at rtol 1e-10: drift < 1e-8 relative. Descent: O(eta^2) per step, so over a fixed
    time horizon the drift halves when eta halves."""
    p = paramgeo.get(name, **sizes)
    loss = _sensing(rng, p)
    theta0 = p.random_point(rng)
    flow = gradient_flow(p, loss, theta0, 3.0, rtol=1e-10, atol=1e-12, n_records=30)
    assert flow.max_conserved_drift < 1e-8
    d1 = gradient_descent(p, loss, theta0, 200, 1e-2, record_every=20).max_conserved_drift
    d2 = gradient_descent(p, loss, theta0, 400, 5e-3, record_every=40).max_conserved_drift
    assert d1 > 1e-6 and 1.6 < d1 / d2 < 2.4


# ---------------------------------------------------------------- push-forward and quotient


def test_pushforward_and_quotient_flows_match_gradient_flow_uut(rng):
    """Closed-form predictor flow dQ/dt = -J J^T G = -2 (Q S + S Q), S = G + G^T ... for the
    squared loss on uut; the quotient flow with the Sylvester projection; gradient is horizontal."""
    p = paramgeo.get("uut", d=3, r=2)
    loss = _sensing(rng, p)
    theta0 = p.random_point(rng)

    def metric(beta, w):
        Q, W = beta.reshape(3, 3), w.reshape(3, 3)
        S = W + W.T
        return (Q @ S + S @ Q).ravel()

    cmp = compare_flows(p, loss, theta0, 1.0, metric=metric, n_records=15)
    assert cmp.predictor_flow_deviation < 1e-7
    assert cmp.quotient_flow_deviation < 1e-7
    assert cmp.vertical_fraction < 1e-8
    generic = compare_flows(p, loss, theta0, 0.5, n_records=8)  # J J^T with the lstsq lift
    assert generic.predictor_flow_deviation < 1e-7


def test_hadamard_predictor_flow_is_the_mirror_flow_metric(rng):
    """beta = u * v with c = u^2 - v^2 conserved: beta' = -sqrt(4 beta^2 + c^2) grad ell."""
    p = paramgeo.get("hadamard", p=3)
    loss = _sensing(rng, p, N=5)
    theta0 = p.random_point(rng)
    c = theta0[:3] ** 2 - theta0[3:] ** 2
    t_eval = np.linspace(0, 2.0, 11)
    path = predictor_flow(p, loss, theta0, 2.0, t_eval=t_eval,
                          metric=lambda b, w: np.sqrt(4 * b ** 2 + c ** 2) * w)
    gf = gradient_flow(p, loss, theta0, 2.0, t_eval=t_eval, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(path.predictors, gf.predictors, atol=1e-7)
    qf = quotient_flow(p, loss, theta0, 2.0, t_eval=t_eval, rtol=1e-11, atol=1e-13,
                       generic=True)
    np.testing.assert_allclose(qf.thetas, gf.thetas, atol=1e-7)


# ---------------------------------------------------------------- the seeds' identities


def test_congruence_identity_of_descent_on_uut():
    ex = _example("quadratic_congruence")
    X, y, theta0 = ex.make_problem(6, 2, 50, seed=3)
    p, loss, lr = paramgeo.get("uut", d=6, r=2), QuadraticMeasurements(X, y), 0.02
    traj = gradient_descent(p, loss, theta0, 100, lr)
    errs = ex.congruence_errors(traj, loss, lr)
    assert len(errs) == 100 and errs.max() < 1e-12
    assert traj.losses[-1] < 0.5 * traj.losses[0]


def test_quadratic_loss_equals_dense_measurements(rng):
    X = rng.standard_normal((7, 4))
    y = rng.standard_normal(7)
    fast = QuadraticMeasurements(X, y)
    dense = LinearMeasurements(np.einsum("ni,nj->nij", X, X), y)
    beta = rng.standard_normal(16)
    assert fast.value(beta) == pytest.approx(dense.value(beta), rel=1e-12)
    np.testing.assert_allclose(fast.grad(beta), dense.grad(beta), rtol=1e-12, atol=1e-14)
    from paramgeo.losses import Loss

    np.testing.assert_allclose(fast.grad(beta), Loss.grad(fast, beta), rtol=1e-10, atol=1e-12)


def test_saddle_to_saddle_small_alpha_converges_to_algorithm():
    ex = _example("saddle_to_saddle")
    X, y = ex.make_problem()
    loss = LinearMeasurements(X, y)
    seq = saddle_to_saddle(loss)
    assert seq.converged and seq.losses[-1] < 1e-20
    assert np.all(np.diff(seq.times) > 0) and np.all(np.diff(seq.losses) < 0)
    # the final saddle interpolates; in every plateau |s| <= 1, and beta_i != 0 only at |s_i| = 1
    for k in range(len(seq.times)):
        s = seq.duals[k]
        assert np.all(np.abs(s) <= 1 + 1e-12)
        on = np.abs(seq.saddles[k]) > 1e-10
        assert np.allclose(np.abs(s[on]), 1.0)
        assert np.all(np.sign(seq.saddles[k][on]) == np.sign(s[on]))
    errs = []
    for alpha in (1e-3, 1e-8):
        tr = ex.run_flow(loss, X.shape[1], alpha, 1.2 * seq.times[-1], records=1500)
        jt = jump_times(tr.times / np.log(1 / alpha), tr.losses, seq.losses)
        errs.append(np.max(np.abs(jt - seq.times[1:])))
    assert errs[1] < 0.06 and errs[1] < errs[0]


def test_saddle_to_saddle_example_rates_are_what_its_docstring_says():
    """The example's docstring states the rates its own numbers show (default alphas 1e-2,
    1e-4, 1e-8): each statement against the fitted exponents and the errors it prints."""
    ex = _example("saddle_to_saddle")
    assert ex.ALPHAS == (1e-2, 1e-4, 1e-8)
    res = ex.main(["--out", "", "--records", "3000"])
    jump, plateau = res["rates"]["jump"], res["rates"]["plateau"]
    assert np.all((jump[2:] > 1.0) & (jump[2:] < 1.8)), jump       # last two jumps: p 1.1-1.7
    assert np.all((plateau[1:] > 0.7) & (plateau[1:] < 5.5)), plateau
    np.testing.assert_allclose(res["errors"]["plateau"][0], np.array(ex.ALPHAS) / 2, rtol=0.02)
    assert np.all(res["errors"]["jump"][:2] < 0.015)
    # the first two jumps show no clean rate: their fitted exponents disagree in sign
    assert jump[1].min() < 0 < jump[1].max()


def test_saddle_to_saddle_one_coordinate_closed_form():
    """ell = (beta - y)^2 / 2 on one coordinate: s' = y until s = 1, so t_1 = 1 / y, beta_1 = y."""
    seq = saddle_to_saddle(LinearMeasurements(np.ones((1, 1)), [2.0]))
    np.testing.assert_allclose(seq.times, [0.0, 0.5])
    np.testing.assert_allclose(seq.saddles[-1], [2.0])
    neg = saddle_to_saddle(LinearMeasurements(np.ones((1, 1)), [-2.0]), lower=None)
    assert not neg.converged and len(neg.times) == 1  # non-negative model never switches on


def test_lotka_volterra_reduction(rng):
    ex = _example("lotka_volterra")
    E, a, y, A, m_star = ex.make_problem(d=3, N=12, seed=1)
    traj, eig, off, lv = ex.simulate(E, a, y, A, 1e-3, 40.0, records=400)
    assert off < 1e-9  # M stays diagonal in the shared eigenbasis
    np.testing.assert_allclose(eig, lv, atol=1e-5)  # eigenvalues follow the LV system
    np.testing.assert_allclose(eig[-1], m_star, rtol=1e-2)


# ---------------------------------------------------------------- integrators


def test_schedules_and_stochastic_descent(rng):
    p = paramgeo.get("hadamard", p=3)
    A = rng.standard_normal((40, 3))
    loss = LinearMeasurements(A, A @ np.array([1.0, -0.5, 0.0]))
    theta0 = np.full(6, 0.5)
    for kind in ("constant", "inverse", "cosine", "step"):
        eta = schedule(kind, 0.05, 200)
        assert eta(0) == pytest.approx(0.05)
        tr = gradient_descent(p, loss, theta0, 200, eta, record_every=50)
        assert tr.losses[-1] < tr.losses[0]
    assert schedule("cosine", 1.0, 100)(100) == pytest.approx(0.0, abs=1e-15)
    a = gradient_descent(p, loss, theta0, 100, 0.05, batch_size=8, seed=7, record_every=100)
    b = gradient_descent(p, loss, theta0, 100, 0.05, batch_size=8, seed=7, record_every=100)
    c = gradient_descent(p, loss, theta0, 100, 0.05, batch_size=8, seed=8, record_every=100)
    full = gradient_descent(p, loss, theta0, 100, 0.05, record_every=100)
    np.testing.assert_array_equal(a.final_theta, b.final_theta)
    assert not np.allclose(a.final_theta, c.final_theta)
    assert not np.allclose(a.final_theta, full.final_theta)
    assert a.method.startswith("sgd") and a.losses[-1] < a.losses[0]
    with pytest.raises(paramgeo.ParamgeoError, match="batch size"):
        gradient_descent(p, loss, theta0, 10, 0.05, batch_size=100)
    with pytest.raises(paramgeo.ParamgeoError, match="unknown schedule"):
        schedule("linear", 0.1, 10)


def test_stopping_on_loss_and_gradient(rng):
    p = paramgeo.get("hadamard", p=2)
    loss = LinearMeasurements(np.eye(2), [1.0, 2.0])
    theta0 = np.full(4, 0.5)
    tr = gradient_flow(p, loss, theta0, 100.0, stop_loss=1e-6)
    assert "loss below" in tr.message and tr.times[-1] < 100
    assert tr.losses[-1] == pytest.approx(1e-6, rel=1e-3)
    tr = gradient_flow(p, loss, theta0, 100.0, stop_grad=1e-4)
    assert "gradient norm below" in tr.message and tr.grad_norms[-1] == pytest.approx(1e-4, rel=1e-3)
    gd = gradient_descent(p, loss, theta0, 5000, 0.1, stop_grad=1e-5, record_every=1000)
    assert "gradient norm below" in gd.message and gd.grad_norms[-1] < 1e-5


@pytest.mark.parametrize("method", ["RK45", "BDF", "Radau"])
def test_explicit_and_stiff_integrators_agree(rng, method):
    p = paramgeo.get("hadamard", p=3)
    loss = _sensing(rng, p, N=4)
    theta0 = np.full(6, 0.3)
    ref = gradient_flow(p, loss, theta0, 2.0, rtol=1e-10, atol=1e-12, n_records=5)
    tr = gradient_flow(p, loss, theta0, 2.0, method=method, rtol=1e-9, atol=1e-11, n_records=5)
    np.testing.assert_allclose(tr.thetas, ref.thetas, atol=1e-6)


def test_logistic_flow_and_progress_bar(rng, capsys):
    p = paramgeo.get("hadamard", p=3)
    A = rng.standard_normal((20, 3))
    loss = Logistic(A, np.sign(A @ np.array([1.0, -1.0, 0.5])))
    tr = gradient_flow(p, loss, np.full(6, 0.1), 5.0, n_records=10, progress=True)
    assert tr.losses[-1] < tr.losses[0] < np.log(2) + 1e-3
    calls = []  # the engine-side callback: progress(done, total), cumulative
    gradient_flow(p, loss, np.full(6, 0.1), 5.0, n_records=10,
                  progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (1000, 1000) and all(t == 1000 for _, t in calls)
    assert all(a[0] < b[0] for a, b in zip(calls, calls[1:]))
    steps = []
    gradient_descent(p, loss, np.full(6, 0.1), 7, 0.1,
                     progress=lambda done, total: steps.append((done, total)))
    assert steps == [(k, 7) for k in range(1, 8)]


# ---------------------------------------------------------------- results, plots


def test_trajectory_to_dict_and_plot(tmp_path, rng):
    pytest.importorskip("matplotlib")
    p = paramgeo.get("hadamard", p=3)
    tr = gradient_flow(p, _sensing(rng, p), p.random_point(rng), 1.0, n_records=10)
    d = tr.to_dict()
    json.dumps(d)
    assert len(d["times"]) == 10 and len(d["conserved_labels"]) == 3
    assert "conserved quantities" in str(tr)
    for suffix in ("png", "svg"):
        out = tr.plot(tmp_path / f"t.{suffix}")
        assert out.stat().st_size > 1000
    with pytest.raises(paramgeo.ParamgeoError, match="use a .png"):
        tr.plot(tmp_path / "t.txt")


# ---------------------------------------------------------------- data files and the CLI


def test_loss_from_arrays_errors(rng):
    p = paramgeo.get("uut", d=3, r=2)
    with pytest.raises(paramgeo.ShapeError, match="has no array 'y'"):
        loss_from_arrays("squared", {"A": np.ones((2, 9))}, p)
    with pytest.raises(paramgeo.ShapeError, match=r"must have shape \(2, 3, 3\) or \(2, 9\)"):
        loss_from_arrays("squared", {"A": np.ones((2, 4)), "y": np.ones(2)}, p)
    with pytest.raises(paramgeo.ShapeError, match="'X' contains NaN"):
        loss_from_arrays("quadratic", {"X": np.full((2, 3), np.nan), "y": np.ones(2)}, p)
    with pytest.raises(paramgeo.ShapeError, match="square predictors"):
        loss_from_arrays("quadratic", {"X": np.ones((2, 3)), "y": np.ones(2)},
                         paramgeo.get("hadamard", p=3))
    loss = loss_from_arrays("squared", {"A": np.ones((2, 3, 3)), "y": np.ones(2)}, p)
    assert loss.A.shape == (2, 9)


def _cli(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def test_cli_runs_the_examples_setups(tmp_path):
    pytest.importorskip("matplotlib")
    quad = tmp_path / "quad.npz"
    _example("quadratic_congruence").main(["--d", "4", "--r", "2", "--n", "30", "--steps", "5",
                                           "--out", "", "--write-data", str(quad)])
    res = _cli("flow", "uut", "-p", "d=4", "-p", "r=2", "--loss", "quadratic", "--data", quad,
               "--method", "gd", "--steps", 20, "--lr", 0.02, "--plot", tmp_path / "q.png",
               "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["loss_final"] < out["loss_initial"] and (tmp_path / "q.png").is_file()
    s2s = tmp_path / "s2s.npz"
    X, y = _example("saddle_to_saddle").make_problem()
    np.savez(s2s, A=X, y=y, theta0=_example("saddle_to_saddle").initial_point(10, 1e-2))
    res = _cli("flow", "hadamard", "-p", "p=10", "--data", s2s, "--method", "flow", "--t-final", 5,
               "--atol", 1e-12, "--plot", tmp_path / "s.svg")
    assert res.exit_code == 0, res.output
    assert "u[0]^2 - v[0]^2" in res.output and (tmp_path / "s.svg").is_file()
    lv = tmp_path / "lv.npz"
    E, a, y, A, _ = _example("lotka_volterra").make_problem(d=3, N=10)
    np.savez(lv, A=A, y=y, theta0=(1e-2 * E).ravel())
    res = _cli("flow", "uut", "-p", "d=3", "-p", "r=3", "--data", lv, "--method", "flow",
               "--t-final", 3, "--json")
    assert res.exit_code == 0, res.output
    res = _cli("flow", "hadamard", "-p", "p=10", "--data", s2s, "--init-scale", 0.1,
               "--batch-size", 3, "--steps", 10, "--schedule", "cosine", "--json")
    assert res.exit_code == 0 and "sgd" in json.loads(res.output)["method"]


@pytest.mark.parametrize("arrays,fragment", [
    ({"A": np.full((3, 4), np.nan), "y": np.ones(3)}, "array 'A' contains NaN"),
    ({"A": np.ones((3, 4))}, "has no array 'y'"),
    ({"A": np.ones((3, 5)), "y": np.ones(3)}, "array 'A' must have shape (3, 4)"),
    ({"A": np.ones((3, 4)), "y": np.ones(3), "theta0": np.ones(3)}, "array 'theta0' has 3"),
    (None, "does not exist"),
    ("junk", "is not an .npz archive"),
])
def test_cli_bad_data_is_one_line_exit_2(tmp_path, arrays, fragment):
    path = tmp_path / "d.npz"
    if isinstance(arrays, dict):
        np.savez(path, **arrays)
    elif arrays == "junk":
        path.write_text("not an archive")
    res = _cli("flow", "hadamard", "-p", "p=4", "--data", path, "--steps", 3)
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_mirror_flow_equals_pushed_forward_flow_hadamard(rng):
    """With the mirror engine's hyperbolic-entropy potential (commuting u * v), the mirror flow
    d/dt grad R(beta) = -grad ell equals phi(theta_gf(t)). compare_flows(mirror=True) and the
    shorthand flows.mirror_flow both integrate paramgeo.mirror's flow."""
    from paramgeo import mirror
    from paramgeo.flows import mirror_flow

    p = paramgeo.get("hadamard", p=3)
    loss = _sensing(rng, p, N=5)
    theta0 = p.random_point(rng)
    cmp = compare_flows(p, loss, theta0, 1.0, n_records=11, mirror=True)
    assert cmp.mirror_flow_deviation < 1e-8 and cmp.notes == "mirror flow compared"
    t = np.linspace(0.0, 1.0, 5)
    direct, _ = mirror.mirror_flow(mirror.mirror_potential(p, theta0), loss, t, atol=1e-12)
    np.testing.assert_array_equal(mirror_flow(p, loss, theta0, t), direct)


# ---------------------------------------------------------------- two routes to conservation laws


@pytest.mark.parametrize("name,sizes", [
    ("hadamard", {"p": 2}), ("uvt", {"m": 2, "n": 2, "r": 2}),
    ("deep-diagonal", {"p": 2, "depth": 3, "variant": "product"}), ("uut", {"d": 2, "r": 2}),
    ("qk-attention", {"d": 2, "r": 2, "heads": 1, "tokens": 3})])
def test_symmetry_laws_lie_in_the_span_of_the_mirror_laws(rng, name, sizes):
    """Two routes to conservation laws of gradient flow: flows.conserved_quantities (theta^T S
    theta for the symmetric elements S of the declared group's Lie algebra) and
    mirror.conservation_laws (every polynomial h of degree <= 2 with <grad h, grad phi_i> = 0,
    Marcotte, Gribonval, Peyre 2023). The first must lie in the span of the second: at random
    points, each Q_c is a linear combination of the mirror laws, with the same coefficients at
    every point. For these models the two spaces coincide (same dimension)."""
    import sympy

    from paramgeo.mirror import conservation_laws, symbolic_fields

    p = paramgeo.get(name, **sizes)
    flows_laws = conserved_quantities(p)
    found = conservation_laws(p, degree=2, method="symbolic")
    symbols, _ = symbolic_fields(p)  # theta order
    local = {str(s): s for s in symbols}
    exprs = [sympy.parse_expr(law, local_dict=local) for law in found.laws]
    assert all(e.free_symbols <= set(symbols) for e in exprs)
    assert all(sympy.Poly(e, *symbols).total_degree() <= 2 for e in exprs)
    mirror_fns = [sympy.lambdify([symbols], e, modules="numpy") for e in exprs]
    points = rng.standard_normal((3 * (len(exprs) + len(flows_laws)) + 5, p.n))
    M = np.array([[float(f(x)) for f in mirror_fns] for x in points]).reshape(len(points), -1)
    F = flows_laws.values(points)
    assert len(flows_laws) == len(exprs)
    if len(exprs) == 0:
        assert name == "uut"  # so(r) is skew: no quadratic law, and none of degree <= 2 at all
        return
    coef = np.linalg.lstsq(M, F, rcond=None)[0]
    assert np.linalg.norm(M @ coef - F) <= 1e-10 * np.linalg.norm(F)
    assert np.linalg.matrix_rank(F) == len(flows_laws)  # independent quadratic forms
