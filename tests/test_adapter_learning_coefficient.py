"""A framework deep linear network offers the exact learning coefficient, as the deep-linear
plugin does, and its orientation (net(I) = (W_L ... W_1)^T) is named where it matters.

Independent routes: the two-layer value is Aoyagi-Watanabe's reduced-rank regression formula
(:func:`paramgeo.llc.reduced_rank_regression`, a separate closed form); at a point of generic
rank it is the regular value d / 2 with d the generic rank; the contract check compares the
declared value with a short MALA estimate on the torch model; the JAX network stores its
weights (in, out), so its value comes through the other storage order.

Covers: ``paramgeo.cli``, ``paramgeo.llc.exact``, ``paramgeo.losses.predictor``,
``paramgeo_plugins.deep_linear``.
"""

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.errors import ShapeError
from paramgeo.llc import exact_learning_coefficient, reduced_rank_regression

torch = pytest.importorskip("torch")


def torch_dln(widths, bias=False, act=None):
    layers = []
    for a, b in zip(widths, widths[1:]):
        if layers and act is not None:
            layers.append(act())
        layers.append(torch.nn.Linear(a, b, bias=bias))
    return torch.nn.Sequential(*layers)


def test_two_layers_give_aoyagi_watanabe_at_every_true_rank():
    """widths (4, 3, 2) = y = B A x with A 3 x 4, B 2 x 3: the adapter's value at a true
    product of rank r (both factors of rank r) is reduced_rank_regression(4, 3, 2, r)."""
    model = paramgeo.from_torch(torch_dln((4, 3, 2)), torch.eye(4))
    rng = np.random.default_rng(0)
    for r in range(3):
        A = rng.standard_normal((3, r)) @ rng.standard_normal((r, 4))
        B = rng.standard_normal((2, r)) @ rng.standard_normal((r, 3))
        # B of rank r and B A of rank r: B's row space must meet A's column space fully
        B = B @ (A @ np.linalg.pinv(A)) if r else B
        theta = model.spec.pack(A, B)
        got = exact_learning_coefficient(model, theta)
        want = reduced_rank_regression(4, 3, 2, r)
        assert (got.lam, got.exact) == (want.lam, want.exact), r


def test_deep_network_agrees_with_the_plugin_and_the_regular_value():
    """widths (6, 4, 3, 5): at 0 the plugin's value (the same theta layout); at a random point
    (ranks 4, 3, 3 of the factors against 3 of the product: no formula) the regular
    d / 2 = 12, rank J being the generic rank 24."""
    model = paramgeo.from_torch(torch_dln((6, 4, 3, 5)), torch.eye(6))
    plugin = paramgeo.get("deep-linear", widths=(6, 4, 3, 5))
    zero = np.zeros(model.n)
    assert exact_learning_coefficient(model, zero) == exact_learning_coefficient(plugin, zero)
    assert model.learning_coefficient(model.theta0) is None
    assert exact_learning_coefficient(model, model.theta0).lam == 12.0 == \
        paramgeo.generic_rank(model) / 2


def test_jax_weights_stored_in_by_out_give_the_same_value():
    """A JAX network x @ W_1 @ W_2 (flax's kernel layout): the adapter transposes what it
    reads, so the value at (W_1, W_2) is the torch network's at (W_1^T, W_2^T)."""
    pytest.importorskip("jax")

    def net(params, x):
        for W in params:
            x = x @ W
        return x

    rng = np.random.default_rng(1)
    A = rng.standard_normal((4, 1)) @ rng.standard_normal((1, 3))   # (in, out), rank 1
    B = rng.standard_normal((3, 1)) @ rng.standard_normal((1, 2))
    B = np.linalg.pinv(A) @ A @ B                                   # B's columns in A's rows
    jm = paramgeo.from_jax(net, [A, B], np.eye(4), activation="identity")
    tm = paramgeo.from_torch(torch_dln((4, 3, 2)), torch.eye(4))
    want = exact_learning_coefficient(tm, tm.spec.pack(A.T, B.T))
    assert exact_learning_coefficient(jm, jm.spec.pack(A, B)) == want
    rrr = reduced_rank_regression(4, 3, 2, 1)
    assert (want.lam, want.exact) == (rrr.lam, rrr.exact)


def test_only_deep_linear_networks_on_a_spanning_probe_declare_a_value():
    """Biases, an activation, or a probe that does not span the inputs: no formula (None), so
    exact_learning_coefficient falls back on the regular value or says it has none."""
    zero = np.zeros(1)
    cases = {"bias": paramgeo.from_torch(torch_dln((3, 2, 2), bias=True), torch.eye(3)),
             "tanh": paramgeo.from_torch(torch_dln((3, 2, 2), act=torch.nn.Tanh), torch.eye(3)),
             "probe": paramgeo.from_torch(torch_dln((3, 2, 2)), torch.eye(3)[:2])}
    for label, model in cases.items():
        zero = np.zeros(model.n)
        assert model.learning_coefficient(zero) is None, label
    with pytest.raises(paramgeo.ParamgeoError, match="estimate it"):
        exact_learning_coefficient(cases["probe"], zero)
    # the same network on data: the inputs it is evaluated on decide, as the probe does
    model = paramgeo.from_torch(torch_dln((3, 2, 2)), torch.eye(3))
    X = np.random.default_rng(0).standard_normal((20, 3))
    zero = np.zeros(model.n)
    assert model.on_inputs(X).learning_coefficient(zero) == model.learning_coefficient(zero)
    assert model.on_inputs(X[:, :2] @ np.ones((2, 3))).learning_coefficient(zero) is None


def test_contract_check_compares_the_declared_value_with_an_estimate():
    model = paramgeo.from_torch(torch_dln((3, 2, 2)), torch.eye(3))
    report = paramgeo.check(model)
    item = next(i for i in report.items if i.property == "learning-coefficient")
    assert item.passed and "declared lambda = 2" in item.note, item


def test_regression_loss_names_the_orientation():
    """net(I) is inputs x outputs; the regression loss wants outputs x inputs and says so."""
    from paramgeo.losses import Regression

    model = paramgeo.from_torch(torch_dln((3, 2, 2)), torch.eye(3))
    assert model.predictor_shape == (3, 2)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 3))
    with pytest.raises(ShapeError, match="inputs x outputs.*loss mse"):
        Regression(X, X @ rng.standard_normal((3, 2))).check_dim(model)


def test_llc_exact_from_the_command_line():
    from paramgeo.cli import main

    res = CliRunner().invoke(main, ["--plugin", "examples/torch_deep_linear.py", "llc", "exact",
                                    "torch-dln", "--truth-zero", "--json"])
    assert res.exit_code == 0, res.output
    assert '"lam_exact": "2"' in res.output
