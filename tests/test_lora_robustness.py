"""examples/lora_robustness.py (the LoRA examples' ``--robustness``): the Monte Carlo feature
sensitivity to relative weight noise against the linearisation computed from the dense
Jacobian of a tiny MLP (draw by draw at small eps, and in expectation), the JVP-Hutchinson
estimate against the same dense trace, both against the closed form of a linear feature map
(where the Monte Carlo ratio is exactly quadratic in eps); principal angles against
scipy.linalg.subspace_angles and the PCA basis against the covariance's eigenvectors; planted
cases: layers the feature map ignores (the MLP's and the transformer's output heads) give zero
sensitivity, a pure rescaling of the features moves them but not their subspace; input noise
on a linear feature map against its closed form.

Covers: ``examples/lora_robustness.py``, ``examples/lora_digits.py``,
``examples/lora_transformer.py``.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
scipy_linalg = pytest.importorskip("scipy.linalg")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rob = _load("lora_robustness")
digits = _load("lora_digits")
transformer = _load("lora_transformer")


def _mlp(seed=0):
    """A tiny MLP 6 -> 5 -> 4 -> 3 as a dict, its feature map (the last hidden layer), data."""
    weights = digits.init(seed, widths=(6, 5, 4, 3))
    params = dict(enumerate(weights))
    feature = lambda p, X: digits.hidden([p[i] for i in range(3)], X)  # noqa: E731
    X = torch.randn(30, 6, generator=torch.Generator().manual_seed(seed + 10),
                    dtype=torch.float64)
    return params, feature, X


def _dense_sensitivity(params, feature, X, names):
    """sum_k (||W_k||^2 / n_k) ||J_k||_F^2 / ||h||^2 from the dense Jacobians, and the
    Jacobians."""
    H = feature(params, X)
    total, jac = 0.0, {}
    for name in names:
        W = params[name]
        J = torch.autograd.functional.jacobian(
            lambda w: feature({**params, name: w}, X), W).reshape(H.numel(), W.numel())
        jac[name] = J
        total += float(W.norm() ** 2 / W.numel() * J.pow(2).sum())
    return total / float(H.pow(2).sum()), jac


def test_monte_carlo_and_hutchinson_against_the_dense_linearisation():
    params, feature, X = _mlp(0)
    names = [0, 1]
    exact, jac = _dense_sensitivity(params, feature, X, names)
    H = feature(params, X)
    # draw by draw: at eps = 1e-6 the change is J delta to first order
    gen = torch.Generator().manual_seed(3)
    for _ in range(5):
        state = gen.get_state()
        q = rob.relative_perturbation(params, names, 1e-6, gen)
        gen2 = torch.Generator()
        gen2.set_state(state)
        q2 = rob.relative_perturbation(params, names, 1.0, gen2)  # the same directions
        lin = sum(jac[n] @ (q2[n] - params[n]).reshape(-1) for n in names) * 1e-6
        diff = (feature(q, X) - H).reshape(-1)
        assert torch.allclose(diff, lin, rtol=1e-4, atol=1e-12 * float(H.abs().max()))
    # in expectation: the Monte Carlo mean (many draws) and Hutchinson, within their errors
    out = rob.robustness(feature, lambda p, h: h @ p[2].T, params, X, torch.zeros(30).long(),
                         names=names, eps=(1e-5,), sigmas=(0.1,), draws=1200,
                         input_draws=2, probes=1200, k=2)
    mc = out["weights"][1e-5]
    assert abs(mc["sens"] - exact) < 4 * mc["se"]
    assert mc["se"] < 0.05 * exact
    hut, se = out["linear"]
    assert abs(hut - exact) < 4 * se and se < 0.05 * exact
    # a wrong scaling (||W||^2 instead of ||W||^2 / n) would be off by a factor 5 or more
    assert exact == pytest.approx(float(rob.linearised_sensitivity(
        feature, params, names, X, probes=1200, seed=1)[0]), rel=0.15)


def test_linear_feature_map_against_its_closed_form():
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(4, 7, generator=gen, dtype=torch.float64)
    X = torch.randn(50, 7, generator=gen, dtype=torch.float64)
    params = {"W": W, "head": torch.randn(3, 4, generator=gen, dtype=torch.float64)}
    feature = lambda p, Z: Z @ p["W"].T  # noqa: E731
    H = feature(params, X)
    # E ||X delta^T||^2 = ||W||^2 / (m d) * m ||X||^2 for delta of norm ||W|| uniform
    closed = float(W.norm() ** 2 * X.norm() ** 2 / 7 / H.norm() ** 2)
    out = rob.robustness(feature, lambda p, h: h @ p["head"].T, params, X,
                         torch.zeros(50).long(), eps=(1e-3, 0.3), sigmas=(0.5,), draws=1500,
                         input_draws=300, probes=1500, k=2)
    w = out["weights"]
    # exactly quadratic in eps with the same directions at every eps
    assert w[1e-3]["sens"] == pytest.approx(w[0.3]["sens"], rel=1e-9)
    assert abs(w[1e-3]["sens"] - closed) < 4 * w[1e-3]["se"]
    assert abs(out["linear"][0] - closed) < 4 * out["linear"][1]
    # input noise Z: E ||Z W^T||^2 = sigma^2 N ||W||^2
    noise = 0.25 * 50 * float(W.norm() ** 2) / float(H.norm() ** 2)
    assert out["inputs"][0.5]["change"] == pytest.approx(noise, rel=0.05)


def test_principal_angles_against_scipy():
    rng = np.random.default_rng(0)
    for k in (1, 3, 5):
        U = np.linalg.qr(rng.standard_normal((9, k)))[0]
        V = np.linalg.qr(rng.standard_normal((9, k)))[0]
        got = rob.principal_angles(torch.tensor(U), torch.tensor(V)).numpy()
        assert np.allclose(got, scipy_linalg.subspace_angles(U, V), atol=1e-10)
    # the same subspace in another basis: zero angles (up to arccos's resolution)
    R = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    assert rob.principal_angles(torch.tensor(U[:, :3]),
                                torch.tensor(U[:, :3] @ R)).max() < 1e-6
    # a planted angle between two lines of the plane
    t = 0.3
    a = torch.tensor([[1.0], [0.0]], dtype=torch.float64)
    b = torch.tensor([[np.cos(t)], [np.sin(t)]], dtype=torch.float64)
    assert float(rob.principal_angles(a, b)[0]) == pytest.approx(t, abs=1e-12)


def test_pca_basis_against_the_covariance():
    rng = np.random.default_rng(1)
    H = rng.standard_normal((40, 3, 6)) * np.array([5, 4, 3, 1, 0.5, 0.2]) + 2.0
    U = rob.pca_basis(torch.tensor(H), 3).numpy()
    vals, vecs = np.linalg.eigh(np.cov(H.reshape(-1, 6).T))
    top = vecs[:, ::-1][:, :3]
    assert np.allclose(U @ U.T, top @ top.T, atol=1e-10)
    assert rob.pca_gap(torch.tensor(H), 3) == pytest.approx(vals[::-1][2] / vals[::-1][3])


def test_planted_layers_the_features_ignore():
    params, feature, X = _mlp(1)
    out = rob.robustness(feature, lambda p, h: h @ p[2].T, params, X, torch.zeros(30).long(),
                         names=[2], eps=(1e-2, 0.3), sigmas=(0.1,), draws=8, input_draws=2,
                         probes=8, k=2)
    assert out["linear"] == (0.0, 0.0)
    assert all(r["sens"] == 0.0 and r["angle"] < 1e-5 for r in out["weights"].values())
    assert rob.linearised_sensitivity(feature, params, [0], X, probes=8)[0] > 0
    # the transformer's head: ignored by the last block's output
    p = {k: v.double() for k, v in transformer.init(0).items()}
    Xt = torch.randn(6, transformer.TOKENS, 8, generator=torch.Generator().manual_seed(0),
                     dtype=torch.float64)
    assert rob.linearised_sensitivity(transformer.hidden, p, ["head"], Xt, probes=4) == (0, 0)
    assert rob.linearised_sensitivity(transformer.hidden, p, ["v1"], Xt, probes=4)[0] > 0


def test_a_rescaling_moves_the_features_but_not_their_subspace():
    params, _, X = _mlp(2)
    params["s"] = torch.tensor([1.5], dtype=torch.float64)
    feature = lambda p, Z: p["s"] * digits.hidden([p[0], p[1], p[2]], Z)  # noqa: E731
    out = rob.robustness(feature, lambda p, h: h @ p[2].T, params, X, torch.zeros(30).long(),
                         names=["s"], eps=(1e-2, 0.3), sigmas=(0.1,), draws=4, input_draws=2,
                         probes=4, k=3)
    for e, r in out["weights"].items():
        assert r["sens"] == pytest.approx(1.0, rel=1e-12)  # |delta s| = eps |s|
        assert r["angle"] < 1e-5
    assert out["linear"][0] == pytest.approx(1.0, rel=1e-12)


def test_the_examples_robustness_plumbing():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(20, transformer.TOKENS, 8, generator=g)
    y = torch.randint(0, transformer.CLASSES, (20,), generator=g)
    p = transformer.init(0)
    out = transformer.robustness(p, X, y, eps=(1e-3,), sigmas=(0.1,), draws=3,
                                 input_draws=2, probes=3)
    assert out["weights"][1e-3]["sens"] > 0 and out["inputs"][0.1]["change"] > 0
    assert out["weights"][1e-3]["acc_drop"] == pytest.approx(0.0, abs=0.1)
    assert torch.equal(transformer.readout(p, transformer.hidden(p, X)),
                       transformer.logits(p, X))
    weights = digits.init(0, widths=(64, 8, 8, 5))
    Xd, yd = digits.data(0)["B"][2:]
    out = digits.robustness(weights, Xd[:40], yd[:40], eps=(1e-3,), sigmas=(0.1,), draws=200,
                            input_draws=2, probes=200)
    assert out["weights"][1e-3]["sens"] == pytest.approx(out["linear"][0], rel=0.2)
