"""The LLC estimator on data: losses of a model's outputs, models evaluated on data batches
(on_inputs), minibatch SGLD, the pre-check against the curvature, weight-refined blocks.

Covers: ``paramgeo.cli``, ``paramgeo.contract.registry``, ``paramgeo.llc.data``,
``paramgeo.llc.diagnostics``, ``paramgeo.llc.estimate``, ``paramgeo.llc.exact``,
``paramgeo.llc._sampler``, ``paramgeo.losses.outputs``, ``paramgeo.losses.predictor``,
``paramgeo_plugins.deep_linear``.
"""

import math
import warnings

import autograd
import numpy as np
import pytest

import paramgeo
from paramgeo.errors import ParamgeoError
from paramgeo.llc import (LLCWarning, block_learning_coefficient, estimate_llc,
                          localization_check)
from paramgeo.llc.data import batch_picker, control_variates, make_batches
from paramgeo.llc.diagnostics import retained
from paramgeo.llc.estimate import block_mask
from paramgeo.losses import Regression, batched_value_and_grad
from paramgeo.losses.outputs import CrossEntropy, SquaredError

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Small float64 products run ~100x faster on one thread than on two contended ones."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        return fn(*args, **kwargs)


def _linear_net(widths=(5, 3, 5), seed=0):
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(a, b, bias=False) for a, b in zip(widths[:-1], widths[1:])]
    return torch.nn.Sequential(*layers)


def test_output_losses_against_autograd_and_their_formulas():
    rng = np.random.default_rng(0)
    Y, F = rng.standard_normal((6, 2)), rng.standard_normal((3, 12))
    mse = SquaredError(Y)
    for beta in F:
        assert mse.value(beta) == pytest.approx(0.5 * np.sum((beta.reshape(6, 2) - Y) ** 2) / 6)
        np.testing.assert_allclose(mse.grad(beta), autograd.grad(mse.value)(beta), atol=1e-14)
    values, grads = mse.value_grad_batch(F)
    np.testing.assert_allclose(values, [mse.value(b) for b in F])
    np.testing.assert_allclose(grads, [mse.grad(b) for b in F])
    labels = np.array([0, 2, 1, 2, 0, 1])
    for ce in (CrossEntropy(labels), CrossEntropy(np.eye(3)[labels])):
        for beta in rng.standard_normal((3, 18)) * 5:
            logits = beta.reshape(6, 3)
            direct = np.mean(np.log(np.exp(logits).sum(axis=1)) - logits[np.arange(6), labels])
            assert ce.value(beta) == pytest.approx(direct, rel=1e-12)
            np.testing.assert_allclose(ce.grad(beta), autograd.grad(ce.value)(beta), atol=1e-14)
        values, grads = ce.value_grad_batch(rng.standard_normal((4, 18)))
        assert values.shape == (4,) and grads.shape == (4, 18)
    with pytest.raises(paramgeo.errors.ShapeError, match="integers"):
        CrossEntropy(np.array([0.5, 1.0]))
    with pytest.raises(paramgeo.errors.ShapeError, match="probabilities"):
        CrossEntropy(np.ones((2, 3)))


def test_framework_models_on_other_inputs_and_vectorized_over_points():
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(1)
    X = rng.standard_normal((7, 3))
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    model = paramgeo.from_torch(net, torch.randn(5, 3))
    on_x = model.on_inputs(X)
    assert on_x.predictor_shape == (7, 2) and on_x.n == model.n
    with torch.no_grad():
        np.testing.assert_allclose(on_x.forward(model.theta0),
                                   net.double()(torch.tensor(X)).numpy(), atol=1e-13)

    def fn(p, x):
        return jnp.tanh(x @ p["W"]) @ p["v"]

    jmodel = paramgeo.from_jax(fn, {"W": rng.standard_normal((3, 4)), "v": np.ones(4)},
                               np.ones((5, 3)))
    for m in (on_x, jmodel.on_inputs(X)):
        thetas = m.theta0 + 0.3 * rng.standard_normal((3, m.n))
        G = rng.standard_normal((3, m.m))
        phis, vjp = m.batched_vjp(thetas)
        np.testing.assert_allclose(np.reshape(phis, (3, -1)),
                                   [m.forward_flat(t) for t in thetas], atol=1e-13)
        np.testing.assert_allclose(vjp(G), [m.vjp(t, g) for t, g in zip(thetas, G)],
                                   atol=1e-12)
    # float32 (torch): the same values to float32's round-off; JAX offers float64 only
    assert on_x.single_precision and not jmodel.single_precision
    thetas = on_x.theta0 + 0.3 * rng.standard_normal((3, on_x.n))
    G = rng.standard_normal((3, on_x.m))
    phis, vjp = on_x.batched_vjp(thetas, single=True)
    assert phis.dtype == np.float32 and vjp(G).dtype == np.float32
    np.testing.assert_allclose(phis.reshape(3, -1), [on_x.forward_flat(t) for t in thetas],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vjp(G), [on_x.vjp(t, g) for t, g in zip(thetas, G)],
                               rtol=1e-5, atol=1e-5)


def test_the_data_route_is_the_regression_loss():
    """A torch deep linear net on (X, Y) with the mse loss is Regression(X, Y) through the
    deep-linear plugin: the same theta (W1 then W2, stored (out, in)), the same L_n, hence the
    same chains (SGLD, fixed step, the same seed). In float32 (the default for torch models
    on data; its noise from torch's generator) the estimate agrees within its error bars, and
    the same seed repeats the run."""
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((200, 5)), rng.standard_normal((200, 5))
    model = paramgeo.from_torch(_linear_net(), X[:3])
    plugin = paramgeo.get("deep-linear", widths=(5, 3, 5))
    theta = model.theta0
    options = dict(sampler="sgld", step=1e-3, chains=3, burn=20, draws=60, bias_check=False,
                   precheck=False, seed=4)
    a = _quiet(estimate_llc, model, "mse", theta, data=(X, Y), precision="double", **options)
    b = _quiet(estimate_llc, plugin, Regression(X, Y), theta, **options)
    assert a.loss_star == pytest.approx(b.loss_star, rel=1e-12)
    np.testing.assert_allclose(a.traces, b.traces, rtol=1e-7, atol=1e-9)
    assert a.llc == pytest.approx(b.llc, rel=1e-7)
    single = _quiet(estimate_llc, model, "mse", theta, data=(X, Y), **options)
    assert abs(single.llc - b.llc) < 4 * math.hypot(single.se, b.se)
    again = _quiet(estimate_llc, model, "mse", theta, data=(X, Y), **options)
    np.testing.assert_array_equal(again.traces, single.traces)
    xi = model.backend.normals(3)((200, 100))
    assert xi.dtype == np.float32 and abs(xi.mean()) < 4 / 141 and abs(xi.var() - 1) < 4 * 0.01
    with pytest.raises(ParamgeoError, match="precision='single' needs"):
        estimate_llc(plugin, Regression(X, Y), theta, precision="single", **options)


def test_minibatches_average_to_the_full_loss():
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((50, 5)), rng.standard_normal((50, 5))
    model = paramgeo.from_torch(_linear_net(), X[:3])
    batches = make_batches(model, "mse", (X, Y), batch_size=16)
    assert [len(loss.Y) for loss in batches.losses] == [16, 16, 16, 2] and batches.n == 50
    full = make_batches(model, "mse", (X, Y))
    value, grad = full.full()
    w = model.theta0 + 0.1 * rng.standard_normal(model.n)
    pairs = batches.value_grads()
    assert sum(c * v(w) for c, (v, _) in zip(batches.weights, pairs)) == pytest.approx(value(w))
    np.testing.assert_allclose(sum(c * g(w) for c, (_, g) in zip(batches.weights, pairs)),
                               grad(w), atol=1e-13)
    # a Loss built from samples splits through its minibatch(): the same weighted sum
    plugin = paramgeo.get("deep-linear", widths=(5, 3, 5))
    split = make_batches(plugin, Regression(X, Y), batch_size=16)
    assert len(split) == 4 and split.n == 50
    assert split.full()[0](w) == pytest.approx(Regression(X, Y).value(plugin.forward_flat(w)))
    # an iterable of batches (a DataLoader) gives the same loss
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.tensor(X), torch.tensor(Y)), batch_size=20)
    from_loader = make_batches(model, "mse", loader)
    assert from_loader.n == 50 and len(from_loader) == 3
    assert from_loader.full()[0](w) == pytest.approx(value(w))
    picks = np.bincount([p() for p in [batch_picker(batches.weights,
                                                    np.random.default_rng(0))] * 20000],
                        minlength=4) / 20000
    np.testing.assert_allclose(picks, batches.weights, atol=0.012)  # 4 s.d. of 20000 draws


def test_minibatch_sgld_on_a_regular_model_against_d_over_2():
    """Softmax regression (2 inputs, bias, 3 classes) is regular on the quotient by the shift
    of all classes' weights: lambda = (C - 1)(inputs + 1) / 2 = 3. At its maximum-likelihood
    point with n = 2000, minibatch SGLD (batches of 200) recovers it."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(5)
    n = 2000
    X = rng.standard_normal((n, 2))
    logits = X @ np.array([[1.0, -0.5, 0.0], [0.3, 0.8, -1.0]])
    labels = np.array([rng.choice(3, p=np.exp(z) / np.exp(z).sum()) for z in logits])
    model = paramgeo.from_torch(torch.nn.Linear(2, 3), X[:2])
    value, grad = make_batches(model, "cross-entropy", (X, labels)).full()
    w_star = minimize(value, model.theta0, jac=grad, method="BFGS", options=dict(gtol=1e-10)).x
    est = _quiet(estimate_llc, model, "cross-entropy", w_star, data=(X, labels),
                 batch_size=200, chains=8, burn=300, draws=600, bias_check=False)
    assert est.sampler == "sgld" and est.batches == 10
    assert abs(est.llc - 3.0) < max(4 * est.se, 0.3), est
    with pytest.raises(ParamgeoError, match="MALA"):
        estimate_llc(model, "cross-entropy", w_star, data=(X, labels), batch_size=200,
                     sampler="mala")


def test_control_variates_are_unbiased_and_exact_at_w_star():
    """Minibatch SGLD's control variates: the batch-weighted mean of L_b + shift_b and of
    grad L_b + grad_shift_b is the full loss and gradient at any w (against the full-batch
    route); at w* every batch's corrected gradient is the full one, and near w* their spread
    over batches shrinks with |w - w*| while the plain minibatch gradients' does not."""
    rng = np.random.default_rng(7)
    X, Y = rng.standard_normal((60, 5)), rng.standard_normal((60, 5))
    model = paramgeo.from_torch(_linear_net(), X[:3])
    batches = make_batches(model, "mse", (X, Y), batch_size=16)
    value, grad = make_batches(model, "mse", (X, Y)).full()
    fns, c = batches.batched(), batches.weights
    w_star = model.theta0
    shift, grad_shift = control_variates(fns, c, w_star, value(w_star), 1e9)
    for w in (w_star, w_star + 0.3 * rng.standard_normal(model.n)):
        L, G = zip(*[f(w[None]) for f in fns])
        L, G = np.array([v[0] for v in L]) + shift, np.array([g[0] for g in G])
        assert c @ L == pytest.approx(value(w), rel=1e-12)
        np.testing.assert_allclose(c @ (G + grad_shift), grad(w), atol=1e-12)
    G_star = np.array([f(w_star[None])[1][0] for f in fns]) + grad_shift
    np.testing.assert_allclose(G_star, np.tile(grad(w_star), (len(fns), 1)), atol=1e-12)
    near = w_star + 1e-3 * rng.standard_normal(model.n)
    plain = np.array([f(near[None])[1][0] for f in fns])
    assert (plain + grad_shift).var(axis=0).sum() < 1e-4 * plain.var(axis=0).sum()
    assert control_variates(fns, c, w_star, value(w_star), 10)[1] is None  # over the budget


def test_the_sgld_burn_in_step_against_the_variance_recursion():
    """On a Gaussian direction of curvature kappa = n beta h + gamma an SGLD chain from w*
    has Var w_t = v_t, v_{t+1} = (1 - e_t kappa / 2)^2 v_t + e_t (e_t its step), so the mean
    trace is n beta h v_t / 2: with burn_step = 8 the burn-in reaches the stationary value
    (1 / (2 (1 - eps kappa / 4)) at the draws' step) that the plain burn-in falls short of."""
    from paramgeo.llc._sampler import sample_chains

    nb, h, gamma, K = 50.0, 2.0, 1.0, 4000
    kappa = nb * h + gamma
    eps, burn, draws = 0.05 / kappa, 30, 30

    def quadratic(W):
        return 0.5 * h * W[:, 0] ** 2, h * W

    for burn_step in (8.0, 1.0):
        run = sample_chains([quadratic], "sgld", np.zeros(1), np.full(K, nb), np.full(K, eps),
                            gamma, 0.0, burn, draws, np.random.default_rng(0), None,
                            burn_step=burn_step)
        v, expected = 0.0, []
        for t in range(burn + draws):
            e = eps * (burn_step if t < burn else 1.0)
            v = (1 - e * kappa / 2) ** 2 * v + e
            expected.append(nb * h * v / 2)
        mean, se = run["traces"].mean(axis=0), run["traces"].std(axis=0) / np.sqrt(K)
        assert np.all(np.abs(mean - expected) < 5 * se + 1e-12)
        stationary = nb * h / (2 * kappa * (1 - eps * kappa / 4))
        reached = expected[burn] / stationary
        assert reached > 0.99 if burn_step == 8 else reached < 0.9


def test_retained_fraction_in_closed_form():
    # temperatures (1/2, 2): lambda_hat = 4/3 lambda_1 - 1/3 lambda_2 with
    # lambda_k = a t_k / (2 (a t_k + 1)), so r(1) = 4/3 * 1/3 - 1/3 * 2/3 = 2/9
    assert retained(1.0, (0.5, 2.0)) == pytest.approx(2 / 9)
    assert retained(1e9, (0.5, 2.0)) == pytest.approx(1.0, abs=1e-8)
    assert retained(3.0, (1.0,)) == pytest.approx(0.75)


def test_the_pre_check_reads_the_spectrum_and_predicts_the_estimate():
    """On the block W1 of a deep linear net the loss is quadratic with Hessian
    (A^T A) (x) S_xx (A = W2, row-major W1): the pre-check's Lanczos values are its
    eigenvalues, and its quadratic prediction is what MALA (exact for this Gaussian posterior)
    measures, also where gamma takes most of it."""
    plugin = paramgeo.get("deep-linear", widths=(3, 2, 3))
    rng = np.random.default_rng(6)
    n = 400
    X = rng.standard_normal((n, 3)) * np.array([1.0, 0.5, 0.2])
    W1, W2 = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    theta = plugin.spec.pack(W1, W2)
    loss = Regression(X, X @ (W2 @ W1).T + rng.standard_normal((n, 3)))
    mask = block_mask(plugin, "W1")
    from paramgeo.losses import pullback

    _, g = pullback(plugin, loss)
    # the minimiser over W1 (the others fixed): one Newton step of the quadratic
    H = np.kron(W2.T @ W2, loss.Sxx)
    w1 = W1.ravel() - np.linalg.solve(H, g(theta)[mask > 0])
    w_star = plugin.spec.pack(w1.reshape(2, 3), W2)
    nbeta, gamma = n / math.log(n), 20.0
    check, notes = localization_check(batched_value_and_grad(plugin, loss), w_star, nbeta,
                                      gamma, (0.5, 2.0), np.random.default_rng(0), mask)
    h = np.sort(np.linalg.eigvalsh(H))
    assert check["exact_spectrum"] and check["curved"] == 6
    assert check["top"] == pytest.approx(nbeta * h[-1], rel=1e-5)
    assert check["bottom"] == pytest.approx(nbeta * h[0], rel=1e-5)
    predicted = float(np.sum(retained(nbeta * h / gamma, (0.5, 2.0))) / 2)
    assert check["quadratic"] == pytest.approx(predicted, rel=1e-5)
    assert predicted < 0.9 * 3 and any("localization-bound" in note and "lower gamma" in note
                                       for note in notes)
    est = _quiet(estimate_llc, plugin, loss, w_star, block="W1", gamma=gamma, bias_check=False)
    assert abs(est.llc - predicted) < 4 * est.se, (est.llc, predicted, est.se)
    assert abs(est.llc - 3.0) > 8 * est.se  # the localization-bound estimate misses d/2 = 3
    assert est.curvature["quadratic"] == pytest.approx(predicted, rel=1e-5)


@pytest.mark.parametrize("block, rank_a, rank_b", [("W1", 2, 5), ("W2", 5, 3)])
def test_weight_refined_llc_of_a_deep_linear_layer(block, rank_a, rank_b):
    """phi = W2 W1 is affine in each layer: lambda_l = rank A_l rank B_l / 2 (A_1 = W2 of rank
    2, B_1 = I_5; A_2 = I_5, B_2 = W1 of rank 3), and the estimator on that block alone finds
    it at the block's least-squares minimum."""
    plugin = paramgeo.get("deep-linear", widths=(5, 3, 5))
    rng = np.random.default_rng(0)
    W1, W2 = rng.standard_normal((3, 5)), rng.standard_normal((5, 3))
    W2[:, 2] = W2[:, 0]  # rank 2
    theta = plugin.spec.pack(W1, W2)
    exact = block_learning_coefficient(plugin, theta, block)
    assert exact.lam == rank_a * rank_b / 2 and "affine" in exact.case
    n = 10_000
    X = rng.standard_normal((n, 5))
    loss = Regression(X, X @ (W2 @ W1).T + rng.standard_normal((n, 5)))
    # the least-squares minimum over the block: B = A W B' with the other factors fixed
    A, B = (W2, np.eye(5)) if block == "W1" else (np.eye(5), W1)
    K = np.kron(A.T @ A, B @ loss.Sxx @ B.T)
    rhs = (A.T @ loss.Syx @ B.T).ravel()
    Wb = (np.linalg.pinv(K) @ rhs).reshape(A.shape[1], B.shape[0])
    w_star = plugin.spec.pack(*((Wb, W2) if block == "W1" else (W1, Wb)))
    est = _quiet(estimate_llc, plugin, loss, w_star, block=block)
    assert est.block == (block,)
    assert abs(est.llc - exact.lam) < max(3 * est.se_total, 0.03 * exact.lam), est


def test_bad_data_inputs_name_the_fix():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((20, 5)), rng.standard_normal((20, 5))
    model = paramgeo.from_torch(_linear_net(), X[:2])
    plugin = paramgeo.get("deep-linear", widths=(5, 3, 5))
    with pytest.raises(ParamgeoError, match="on_inputs.*from_torch"):
        estimate_llc(plugin, "mse", plugin.spec.pack(np.ones((3, 5)), np.ones((5, 3))),
                     data=(X, Y))
    with pytest.raises(ParamgeoError, match="without data"):
        estimate_llc(model, "mse")
    with pytest.raises(ParamgeoError, match="'mse', 'cross-entropy'"):
        estimate_llc(model, "hinge", data=(X, Y))
    with pytest.raises(ParamgeoError, match="batch_size"):
        estimate_llc(model, "mse", data=(X, Y), batch_size=0)
    with pytest.raises(paramgeo.errors.ShapeError, match="20 inputs but 19 targets"):
        estimate_llc(model, "mse", data=(X, Y[:19]))
    with pytest.raises(ParamgeoError, match="no block 'W3'.*'0.weight'"):
        estimate_llc(model, "mse", data=(X, Y), block="W3")
    with pytest.raises(paramgeo.errors.ShapeError, match="shape"):
        estimate_llc(model, "mse", data=(X, Y[:, :2]))
    with pytest.raises(ParamgeoError, match="precision='half'; choose one of 'auto'"):
        estimate_llc(model, "mse", data=(X, Y), precision="half")
    with pytest.raises(ParamgeoError, match=r"burn_step=0.5 must be a number in \[1, 20\]"):
        estimate_llc(model, "mse", data=(X, Y), burn_step=0.5)


@pytest.fixture
def own_registry(monkeypatch):
    """What a test registers through --plugin is forgotten after it."""
    from paramgeo.contract import registry

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    monkeypatch.setattr(registry, "_sources", dict(registry._sources))


def test_the_cli_estimates_a_plugin_file_model_on_an_npz(tmp_path, own_registry):
    import json
    import textwrap

    from click.testing import CliRunner

    from paramgeo.cli import main

    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent("""\
        import torch
        import paramgeo

        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        model = paramgeo.from_torch(net, torch.zeros(1, 3), name="tiny-mlp")
        """))
    rng = np.random.default_rng(0)
    X, labels = rng.standard_normal((60, 3)), rng.integers(0, 2, 60)
    np.savez(tmp_path / "d.npz", X=X, Y=labels)
    args = ["--plugin", str(path), "llc", "estimate", "tiny-mlp", "--loss", "cross-entropy",
            "--data", str(tmp_path / "d.npz"), "--batch-size", "20", "--chains", "2",
            "--burn", "30", "--steps", "40", "--no-bias-check", "--json"]
    res = CliRunner().invoke(main, args)  # 2 short chains at a random w*: warnings on purpose
    assert "Warning: LLC estimator (before sampling): mixing-bound" in res.stderr
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # warnings go to stderr
    assert out["batches"] == 3 and out["sampler"] == "sgld" and out["sample_size"] == 60
    model = paramgeo.get("tiny-mlp")
    direct = _quiet(estimate_llc, model, "cross-entropy", data=(X, labels), batch_size=20,
                    chains=2, burn=30, draws=40, bias_check=False)
    assert out["llc"] == pytest.approx(direct.llc, rel=1e-9)
    assert out["curvature"]["top"] == pytest.approx(direct.curvature["top"], rel=1e-9)
    res = CliRunner().invoke(main, args[:-1] + ["--sampler", "mala"])
    assert res.exit_code != 0 and "Error:" in res.output and "sgld" in res.output
    assert "Traceback" not in res.output
    np.savez(tmp_path / "e.npz", X=X)
    res = CliRunner().invoke(main, args[:7] + ["--data", str(tmp_path / "e.npz")])
    assert res.exit_code != 0 and "no array 'Y'" in res.output


def test_the_tanh_network_at_n_80_is_flagged_before_sampling():
    """The JAX tanh MLP 3 -> 9 -> 3 (54 parameters, regular: lambda = 27) at its least-squares
    fit on n = 80 samples: the pre-check reads all 54 curvatures (n beta h over five orders of
    magnitude, a few below gamma / 1000), predicts an estimate far below their d / 2 at
    gamma = 1, and says that no gamma is both small enough and large enough (localization
    against mixing) at this n."""
    jnp = pytest.importorskip("jax.numpy")
    from scipy.optimize import minimize

    from paramgeo.llc.diagnostics import mixing_check

    rng = np.random.default_rng(0)

    def mlp(p, x):
        return jnp.tanh(x @ p["W1"]) @ p["W2"]

    teacher = {"W1": rng.standard_normal((3, 9)) / np.sqrt(3),
               "W2": rng.standard_normal((9, 3)) / 3}
    X = rng.standard_normal((80, 3))
    model = paramgeo.from_jax(mlp, teacher, X)
    Y = model.forward(model.theta0) + rng.standard_normal((80, 3))
    batches = make_batches(model, "mse", (X, Y))
    value, grad = batches.full()
    w_star = minimize(value, model.theta0, jac=grad, method="L-BFGS-B",
                      options=dict(gtol=1e-12, maxiter=5000)).x
    nbeta = 80 / math.log(80)
    check, notes = localization_check(batches.batched()[0], w_star, nbeta, 1.0, (0.5, 2.0),
                                      np.random.default_rng(0))
    assert check["exact_spectrum"] and check["curved"] + check["flat"] == 54
    assert check["curved"] >= 45 and check["unlocalized"] == check["curved"] / 2
    assert check["quadratic"] < 0.7 * check["unlocalized"] and check["suggested_gamma"] < 1e-2
    assert check["top"] / check["slowest"] > 1e5
    assert any(note.startswith("localization-bound") and "lower gamma" in note
               for note in notes)
    mixing = mixing_check(check, [1e-3, 1e-3], (0.5, 2.0), nbeta, 1.0, 1000, "mala")
    assert mixing and "no gamma is both" in mixing[0] and "more samples" in mixing[0]
