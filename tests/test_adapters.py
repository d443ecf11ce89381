"""paramgeo.from_torch and paramgeo.from_jax: framework models as parameterizations.

Oracles: central finite differences of forward (Jacobian), of the VJP (Hessian-vector
products) and of the Jacobian (its directional derivative); autograd tracing of the primitive
forward to second order against the framework's own products; the deep-linear plugin's
generic rank r (n_0 + n_L - r), rank-at-a-point formula, GL(n_1) x GL(n_2) and matrix laws on
the same weights; the qk-attention plugin's generic rank H r (2d - r) for a torch attention
layer's query-key scores.

Covers: ``paramgeo.cli``, ``paramgeo.contract.registry``, ``paramgeo.llc.estimate``,
``paramgeo.losses.predictor``, ``paramgeo.mirror.report``, ``paramgeo_plugins.deep_linear``,
``paramgeo_plugins.qk_attention``.
"""

import os
import subprocess
import sys
import textwrap
import warnings

import autograd
import autograd.numpy as anp

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo import critical
from paramgeo.cli import main
from paramgeo.errors import ParamgeoError, PluginError, ShapeError
from paramgeo.contract.registry import validate_declaration

if os.environ.get("CI"):  # CI installs both (make test): there a missing framework fails
    import jax
    import torch
else:
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

# one intra-op thread: on the 2 shared cores of CI, torch's threads spin against each other
# and make a small backward pass 25x slower
torch.set_num_threads(1)

WIDTHS = (6, 4, 3, 5)


def deep_linear_torch():
    return torch.nn.Sequential(*[torch.nn.Linear(a, b, bias=False)
                                 for a, b in zip(WIDTHS, WIDTHS[1:])])


def linear_chain(params, x):
    for W in params:
        x = x @ W.T
    return x


def deep_linear_jax(rng):
    params = [rng.standard_normal((b, a)) for a, b in zip(WIDTHS, WIDTHS[1:])]
    return paramgeo.from_jax(linear_chain, params, np.eye(WIDTHS[0]), activation="identity")


def tanh_mlp(n_inputs=30):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    X = np.random.default_rng(1).standard_normal((n_inputs, 3))
    return paramgeo.from_torch(net, X, name="tanh-mlp")


def low_rank_first_layer(p, rng, k=2):
    """A random point of p (widths 6, 4, 3, 5) whose first weight has rank k."""
    W = list(p.spec.unpack(p.random_point(rng)).values())
    W[0] = rng.standard_normal((4, k)) @ rng.standard_normal((k, 6))
    return p.spec.pack(*W)


def central_jacobian(f, x, h=1e-6):
    return np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))], axis=1)


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-300))


# ---------------------------------------------------------------- imports and declaration
def test_import_paramgeo_imports_neither_framework():
    code = ("import sys, paramgeo; paramgeo.get('uut', d=2, r=1); paramgeo.check; "
            "print(sorted(m for m in ('torch', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_the_built_classes_pass_the_registry_declaration_check(rng):
    for p in (paramgeo.from_torch(deep_linear_torch(), torch.eye(6)), deep_linear_jax(rng),
              tanh_mlp()):
        validate_declaration(type(p))
        assert p.provides("architecture") and p.provides("symmetry")
        assert type(p)().n == p.n  # the class rebuilds the model, as the registry needs
    plain = paramgeo.from_jax(lambda q, x: jnp.sin(x @ q["W"]), {"W": np.ones((2, 3))},
                              np.ones((4, 2)))
    validate_declaration(type(plain))
    assert not plain.provides("architecture") and list(plain.spec.blocks) == ["W"]


def test_float64_blocks_named_and_the_callers_module_untouched():
    net = deep_linear_torch()
    before = [q.detach().clone() for q in net.parameters()]
    p = paramgeo.from_torch(net, torch.eye(6))
    assert list(p.spec.blocks.items()) == [("0.weight", (4, 6)), ("1.weight", (3, 4)),
                                           ("2.weight", (5, 3))]
    assert all(q.dtype == torch.float32 for q in net.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    W1, W2, W3 = (q.detach().double().numpy() for q in net.parameters())
    assert np.allclose(p.forward(p.theta0), (W3 @ W2 @ W1).T, atol=1e-6)
    assert p.forward(p.theta0).dtype == np.float64


def test_jax_runs_in_float64_and_leaves_the_global_setting(rng):
    q = deep_linear_jax(rng)
    theta = q.random_point(rng)
    W = [np.asarray(a) for a in q.spec.unpack(theta).values()]
    exact = (W[2] @ W[1] @ W[0]).T
    assert rel(q.forward(theta), exact) < 1e-14  # float32 would give about 1e-7
    assert jnp.ones(1).dtype == jnp.float32


# ---------------------------------------------------------------- derivatives
@pytest.fixture(params=["torch", "jax"])
def smooth_model(request):
    """A small nonlinear model with biases (tanh MLP) from each framework."""
    if request.param == "torch":
        return tanh_mlp(n_inputs=5)
    rng = np.random.default_rng(2)

    def mlp(params, x):
        h = jnp.tanh(x @ params["l1"]["kernel"] + params["l1"]["bias"])
        return h @ params["l2"]["kernel"] + params["l2"]["bias"]

    params = {"l1": {"kernel": rng.standard_normal((3, 4)), "bias": rng.standard_normal(4)},
              "l2": {"kernel": rng.standard_normal((4, 2)), "bias": rng.standard_normal(2)}}
    return paramgeo.from_jax(mlp, params, rng.standard_normal((5, 3)))


def test_jacobian_jvp_vjp_against_finite_differences(smooth_model, rng):
    p = smooth_model
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    J = p.jacobian(theta)
    assert J.shape == (p.m, p.n)
    assert rel(J, central_jacobian(p.forward_flat, theta)) < 1e-8
    assert rel(p.jvp(theta, v), J @ v) < 1e-13 and rel(p.vjp(theta, w), J.T @ w) < 1e-13


def test_second_order_products_against_finite_differences(smooth_model, rng):
    p = smooth_model
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    h = 1e-5
    fd_hvp = (p.vjp(theta + h * v, w) - p.vjp(theta - h * v, w)) / (2 * h)
    assert rel(p.hessian_vp(theta, w, v), fd_hvp) < 1e-7
    fd_dj = (p.jacobian(theta + h * v) - p.jacobian(theta - h * v)) / (2 * h)
    assert rel(p.jacobian_derivative(theta, v), fd_dj) < 1e-7


def test_autograd_traces_forward_through_the_framework_to_second_order(smooth_model, rng):
    """Engines trace forward with autograd: the primitive's derivatives (VJP, JVP, and theirs)
    are the framework's, at any order."""
    from autograd.differential_operators import make_jvp

    p = smooth_model
    theta, v, w = p.random_point(rng), rng.standard_normal(p.n), rng.standard_normal(p.m)
    assert rel(autograd.jacobian(p.forward_flat)(theta), p.jacobian(theta)) < 1e-13
    assert rel(make_jvp(p.forward_flat)(theta)(v)[1], p.jvp(theta, v)) < 1e-13
    field = autograd.grad(lambda t: anp.dot(w, p.forward_flat(t)))  # reverse over reverse
    assert rel(autograd.jacobian(field)(theta) @ v, p.hessian_vp(theta, w, v)) < 1e-12
    along = autograd.jacobian(lambda t: make_jvp(p.forward_flat)(t)(v)[1])  # rev over fwd
    assert rel(along(theta), p.jacobian_derivative(theta, v)) < 1e-12


# ---------------------------------------------------------------- deep linear: acceptance
@pytest.fixture(params=["torch", "jax"])
def deep_linear(request, rng):
    if request.param == "torch":
        return paramgeo.from_torch(deep_linear_torch(), torch.eye(6))
    return deep_linear_jax(rng)


def test_deep_linear_rank_symmetry_and_contract_match_the_plugin(deep_linear, rng):
    p, ref = deep_linear, paramgeo.get("deep-linear", widths=WIDTHS)
    r = min(WIDTHS)
    assert paramgeo.generic_rank(p) == r * (WIDTHS[0] + WIDTHS[-1] - r) == 24
    assert paramgeo.generic_rank(p) == paramgeo.generic_rank(ref)
    G = p.symmetry()
    assert (G.name, G.dim) == ("GL(4) x GL(3)", 25) == (ref.symmetry().name, ref.symmetry().dim)
    # the same theta (weights stored (out, in), W_1 first) is a point of both
    theta = p.random_point(rng)
    assert rel(p.forward(theta).T, ref.forward(theta)) < 1e-13
    report = paramgeo.check(p)
    assert report.passed, report
    assert {"invariance", "generators-in-kernel", "jacobian-fd", "declared-vs-discovered"} <= {
        i.property for i in report.items}


def test_deep_linear_rank_drop_of_the_first_layer_is_named(deep_linear, rng):
    p, ref = deep_linear, paramgeo.get("deep-linear", widths=WIDTHS)
    theta = low_rank_first_layer(p, rng)
    # a = (rank W3 W2, rank W3, 5) = (3, 3, 5), b = (6, rank W1, rank W2 W1) = (6, 2, 2):
    # sum a_i b_i - sum a_i b_{i+1} = 18 + 6 + 10 - 6 - 6 = 22
    assert paramgeo.rank_at(p, theta).rank == 22 == ref.rank_at(theta).rank
    c = critical.classify(p, theta)
    first = next(iter(p.spec.blocks))
    assert c.verdict == "critical" and c.rank == 22
    assert c.rank_drops == ((first, 2, 4),)
    assert f"{first} lost rank" in str(c)


def test_mirror_gives_the_balancedness_laws_in_matrix_form():
    from paramgeo.mirror import mirror

    p = paramgeo.from_torch(deep_linear_torch(), torch.eye(6))
    rep = mirror(p)
    assert rep.laws_form == "matrix" and rep.laws_complete
    assert [law.split("  ")[0] for law in rep.laws] == [
        "0.weight 0.weight^T - 1.weight^T 1.weight", "1.weight 1.weight^T - 2.weight^T 2.weight"]
    assert (rep.n_laws, rep.algebra_dim) == (16, 35)  # as for the deep-linear plugin


# ---------------------------------------------------------------- nonlinear layers
def test_tanh_mlp_symmetry_has_the_sign_flips_and_permutations(rng):
    p = tanh_mlp()
    G = p.symmetry()
    assert G.name == "S_4 x (Z_2)^4" and G.dim == 0
    theta = p.random_point(rng)
    W = p.spec.unpack(theta)
    # flipping hidden neuron 1 and swapping neurons 0 and 3 by hand leave the outputs
    W1, b1, W2 = W["0.weight"].copy(), W["0.bias"].copy(), W["2.weight"].copy()
    W1[1], b1[1], W2[:, 1] = -W1[1], -b1[1], -W2[:, 1]
    order = [3, 1, 2, 0]
    moved = p.spec.pack(W1[order], b1[order], W2[:, order], W["2.bias"])
    assert rel(p.forward(moved), p.forward(theta)) < 1e-14 and rel(moved, theta) > 0.1
    for _ in range(3):  # and the declared group's elements leave them too
        assert rel(p.forward(G.act(G.random_element(rng), theta)), p.forward(theta)) < 1e-13
    assert paramgeo.check(p).passed


def test_a_dead_tanh_neuron_is_named(rng):
    p = tanh_mlp()
    W = p.spec.unpack(p.random_point(rng))
    W2 = W["2.weight"].copy()
    W2[:, 2] = 0.0  # hidden neuron 2 sends nothing: its 3 weights and bias are idle
    theta = p.spec.pack(W["0.weight"], W["0.bias"], W2, W["2.bias"])
    c = critical.classify(p, theta)
    assert paramgeo.generic_rank(p) == p.n == 26
    assert c.verdict == "critical" and c.rank == 22
    assert "inactive: h1_2 (out-zero)" in str(c)


def test_relu_rescalings_and_powers_are_read_from_the_layers(rng):
    class Cube(torch.nn.Module):
        paramgeo_activation, degree = "power", 3

        def forward(self, x):
            return x ** 3

    X = rng.standard_normal((12, 2))
    for act, name in ((torch.nn.ReLU(), "(R_{>0})^3"), (Cube(), "(R\\{0})^3")):
        net = torch.nn.Sequential(torch.nn.Linear(2, 3), act, torch.nn.Linear(3, 1))
        p = paramgeo.from_torch(net, X)
        G, theta = p.symmetry(), p.random_point(rng)
        assert G.dim == 3 and name in G.name, G.name
        for _ in range(2):
            assert rel(p.forward(G.act(G.random_element(rng), theta)), p.forward(theta)) < 1e-12
        J = p.jacobian(theta)  # the rescaling directions lie in ker J
        assert np.linalg.norm(J @ G.generators(theta)) < 1e-12 * np.linalg.norm(J)


def test_other_modules_get_their_group_from_the_graph_and_layers_false_none():
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    p = paramgeo.from_torch(net, np.eye(2) + 1.0)
    # layer norm removes the mean: b + t 1 and the columns W[:, i] + t 1 (3 fields)
    assert p.provides("symmetry") and p.symmetry().dim == 3
    assert paramgeo.symmetry.verify_group(p, p.symmetry()).passed
    q = paramgeo.from_torch(deep_linear_torch(), torch.eye(6), layers=False)
    assert not q.provides("architecture") and not q.provides("symmetry")
    with pytest.raises(ShapeError,
                       match=r"jvp: argument v must have 51 entries, got shape \(50,\)"):
        q.jvp(q.theta0, np.ones(50))


def test_a_wrong_length_vector_is_one_line_naming_the_model_and_argument(rng):
    models = [paramgeo.from_torch(deep_linear_torch(), torch.eye(6), name="dl-torch"),
              paramgeo.from_jax(linear_chain, [rng.standard_normal((b, a)) for a, b in
                                               zip(WIDTHS, WIDTHS[1:])], np.eye(6),
                                name="dl-jax")]
    for p in models:
        calls = {"jvp: argument v must have 51 entries": lambda: p.jvp(p.theta0, np.ones(50)),
                 "vjp: argument w must have 30 entries": lambda: p.vjp(p.theta0, np.ones(31)),
                 "vjp: argument theta must have 51 entries": lambda: p.vjp(np.ones(5),
                                                                           np.ones(30))}
        for message, call in calls.items():
            with pytest.raises(ShapeError) as info:
                call()
            assert str(info.value).startswith(f"{p.name}.{message}"), str(info.value)
            assert "\n" not in str(info.value)


def test_products_of_strided_and_integer_inputs_are_those_of_their_values(rng):
    # the guard hands the products float vectors; the backends convert them for the framework
    q = deep_linear_jax(rng)
    theta, v = q.random_point(rng), rng.standard_normal(2 * q.n)[::2]
    np.testing.assert_allclose(q.jvp(theta, v), q.jacobian(theta) @ v, rtol=1e-12, atol=1e-12)
    w = np.arange(q.m)
    np.testing.assert_allclose(q.vjp(theta, w), q.jacobian(theta).T @ w, rtol=1e-12,
                               atol=1e-12)
    t = paramgeo.from_torch(deep_linear_torch(), torch.eye(6))
    assert t.jvp(theta, v).flags.writeable
    np.testing.assert_allclose(t.jvp(theta, v), t.jacobian(theta) @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t.vjp(theta, w), t.jacobian(theta).T @ w, rtol=1e-12,
                               atol=1e-12)


class Itself(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(5))

    def forward(self, x):
        return self.w


def test_a_product_is_never_a_view_of_the_callers_vector(rng):
    p = paramgeo.from_torch(Itself(), torch.zeros(1), layers=False)
    v, w = rng.standard_normal(5), rng.standard_normal(5)
    for out, given in ((p.jvp(p.theta0, v), v), (p.vjp(p.theta0, w), w)):
        np.testing.assert_array_equal(out, given)
        assert not np.may_share_memory(out, given)


def test_jax_dense_layers_with_a_wrong_activation_are_refused(rng):
    params = [{"W": rng.standard_normal((4, 3)), "b": rng.standard_normal(4)},
              {"W": rng.standard_normal((2, 4)), "b": rng.standard_normal(2)}]

    def mlp(params, x):
        return jnp.tanh(x @ params[0]["W"].T + params[0]["b"]) @ params[1]["W"].T + \
            params[1]["b"]

    X = rng.standard_normal((8, 3))
    assert paramgeo.from_jax(mlp, params, X, activation="tanh").symmetry().name == \
        "S_4 x (Z_2)^4"
    with pytest.raises(ShapeError, match="do not describe fn"):
        paramgeo.from_jax(mlp, params, X, activation="relu")


# ---------------------------------------------------------------- attention
class QKScores(torch.nn.Module):
    """The query-key scores q_h k_h^T of an nn.MultiheadAttention layer's in_proj."""

    def __init__(self, d, heads):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(d, heads, bias=False)

    def forward(self, x):
        d, H = self.attn.embed_dim, self.attn.num_heads
        Wq, Wk, _ = self.attn.in_proj_weight.split(d)
        q = (x @ Wq.T).reshape(len(x), H, d // H).transpose(0, 1)
        k = (x @ Wk.T).reshape(len(x), H, d // H).transpose(0, 1)
        return q @ k.transpose(1, 2)


@pytest.mark.parametrize("d, heads", [(4, 2), (6, 3)])
def test_attention_scores_rank_equals_the_qk_attention_plugin(d, heads):
    p = paramgeo.from_torch(QKScores(d, heads), torch.eye(d))
    ref = paramgeo.get("qk-attention", d=d, r=d // heads, heads=heads)
    r = d // heads
    assert p.predictor_shape == (heads, d, d)
    assert paramgeo.generic_rank(p) == paramgeo.generic_rank(ref) == heads * r * (2 * d - r)


# ---------------------------------------------------------------- CLI and errors
@pytest.fixture
def own_registry(monkeypatch):
    """What a test registers through --plugin is forgotten after it (``describe --all`` in
    later tests would otherwise meet its models)."""
    from paramgeo.contract import registry

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    monkeypatch.setattr(registry, "_sources", dict(registry._sources))


def test_the_cli_reaches_a_model_through_plugin_file(tmp_path, own_registry):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent("""\
        import torch
        import paramgeo

        net = torch.nn.Sequential(torch.nn.Linear(3, 2, bias=False),
                                  torch.nn.Linear(2, 3, bias=False))
        model = paramgeo.from_torch(net, torch.eye(3), name="tiny-linear")
        """))
    res = CliRunner().invoke(main, ["--plugin", str(path), "rank", "tiny-linear"])
    assert res.exit_code == 0, res.output
    assert "rank 8" in res.output  # r (n_0 + n_L - r) = 2 (3 + 3 - 2)
    res = CliRunner().invoke(main, ["--plugin", str(path), "describe", "tiny-linear"])
    assert res.exit_code == 0 and "GL(2)" in res.output, res.output


def test_a_probe_the_module_rejects_names_the_model():
    with pytest.raises(ShapeError, match="torch-sequential: the torch module failed on the "
                                         "probe of shape"):
        paramgeo.from_torch(deep_linear_torch(), torch.eye(5))
    with pytest.raises(ShapeError, match="jax-linear-chain: the JAX function failed"):
        paramgeo.from_jax(linear_chain, [np.ones((2, 3))], np.ones((4, 5)))


def test_a_framework_failure_in_a_product_names_the_model_and_method(tmp_path, own_registry):
    class Through(torch.nn.Module):  # a round trip through numpy: not differentiable
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))

        def forward(self, x):
            return torch.from_numpy(np.tanh((x * self.w).detach().numpy()))

    p = paramgeo.from_torch(Through(), np.ones((3, 2)), name="through-numpy")
    for method, product, call in (
            ("jvp", "JVP", lambda: p.jvp(p.theta0, np.ones(2))),
            ("vjp", "VJP", lambda: p.vjp(p.theta0, np.ones(6))),
            ("jacobian", "Jacobian", lambda: p.jacobian(p.theta0)),
            ("hessian_vp", "JVP of the VJP", lambda: p.hessian_vp(p.theta0, np.ones(6),
                                                                   np.ones(2)))):
        with pytest.raises(PluginError, match=rf"plugin 'through-numpy': {method}\(\) failed in "
                                              rf"torch \(the {product} of forward of the torch "
                                              r"model\): .*; fix: .*no round trips through "
                                              "numpy"):
            call()
    report = paramgeo.check(p)  # the model's fault is a failed property, not a crash
    assert not report.passed and "jacobian" in {i.property for i in report.failures()}
    path = tmp_path / "through.py"
    path.write_text(textwrap.dedent("""\
        import numpy as np
        import torch
        import paramgeo

        class Through(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.ones(2))

            def forward(self, x):
                return torch.from_numpy(np.tanh((x * self.w).detach().numpy()))

        model = paramgeo.from_torch(Through(), np.ones((3, 2)), name="through-numpy")
        """))
    res = CliRunner().invoke(main, ["--plugin", str(path), "rank", "through-numpy"])
    assert res.exit_code == 2 and res.output.startswith("Error: plugin 'through-numpy': ")
    assert len(res.output.strip().splitlines()) == 1, res.output


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ParamgeoError, match="needs a torch.nn.Module"):
        paramgeo.from_torch(lambda x: x, np.ones(2))
    with pytest.raises(ParamgeoError, match="needs a function"):
        paramgeo.from_jax(3, {}, np.ones(2))
    with pytest.raises(ShapeError, match="list of dense layers"):
        paramgeo.from_jax(lambda q, x: x @ q["W"], {"W": np.ones((2, 2))}, np.ones((1, 2)),
                          activation="tanh")


def test_the_docs_show_the_example_plugin_file_as_it_is():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "own-model.md").read_text()
    body = (root / "examples" / "torch_model.py").read_text().split('"""', 2)[2].lstrip("\n")
    assert f"```python\n{body}```" in page


def test_strata_of_an_adapted_network_delete_neurons():
    """Deleting k of the 4 tanh neurons leaves 4 - k neurons of 6 parameters each (3 weights,
    a bias, 2 outputs) and the 2 output biases, all independent on 30 generic inputs."""
    strata = critical.strata(tanh_mlp())
    assert strata.kind == "network"
    ranks = {row[0]: row[1] for row in strata.rows()}
    assert ranks == {"full": 26, **{f"layer 1: {k} removed": 6 * (4 - k) + 2
                                    for k in range(1, 5)}}


def test_devices_are_checked_and_the_cpu_runs(rng):
    p = paramgeo.from_torch(deep_linear_torch(), torch.eye(6), device=torch.device("cpu"))
    assert str(p.device) == "cpu"
    theta, w = p.random_point(rng), rng.standard_normal(p.m)
    assert rel(p.jvp(theta, theta), p.jacobian(theta) @ theta) < 1e-13
    assert rel(p.vjp(theta, w), p.jacobian(theta).T @ w) < 1e-13
    with pytest.raises(ParamgeoError, match="torch cannot use the device"):
        paramgeo.from_torch(deep_linear_torch(), torch.eye(6), device="no-such-device")
    q = paramgeo.from_jax(linear_chain, [rng.standard_normal((2, 3))], np.eye(3),
                          device=jax.devices("cpu")[0])
    theta = q.random_point(rng)
    assert rel(q.jvp(theta, theta), q.jacobian(theta) @ theta) < 1e-13
    w = rng.standard_normal(q.m)
    assert rel(q.vjp(theta, w), q.jacobian(theta).T @ w) < 1e-13
    with pytest.raises(ParamgeoError, match="must be a jax.Device"):
        paramgeo.from_jax(linear_chain, [np.ones((2, 3))], np.eye(3), device="gpu")


def test_jax_kernels_and_square_weights_are_read_in_their_storage_order(rng):
    def flax_style(params, x):  # x @ kernel + bias, kernels stored (in, out)
        h = jnp.tanh(x @ params[0]["kernel"] + params[0]["bias"])
        return h @ params[1]["kernel"]

    params = [{"kernel": rng.standard_normal((3, 4)), "bias": rng.standard_normal(4)},
              {"kernel": rng.standard_normal((4, 2))}]
    p = paramgeo.from_jax(flax_style, params, rng.standard_normal((8, 3)), activation="tanh")
    assert p.symmetry().name == "S_4 x (Z_2)^4" and list(p.spec.blocks) == [
        "0.bias", "0.kernel", "1.kernel"]  # jax.tree_util order: dict keys sorted
    G, theta = p.symmetry(), p.random_point(rng)
    assert rel(p.forward(G.act(G.random_element(rng), theta)), p.forward(theta)) < 1e-12

    def square(params, x):  # 3 x 3 weights used as x @ W: the order is not in the shapes
        return (x @ params[0]) @ params[1]

    q = paramgeo.from_jax(square, [rng.standard_normal((3, 3)) for _ in range(2)],
                          np.eye(3), activation="identity")
    G = q.symmetry()
    theta = q.random_point(rng)
    assert G.name == "GL(3)" and rel(q.forward(G.act(G.random_element(rng), theta)),
                                     q.forward(theta)) < 1e-12


def test_the_llc_of_a_framework_model_is_the_plugins():
    """estimate_llc on a torch and a JAX deep linear net (3, 2, 2) equals the deep-linear
    plugin's on the same loss, seed and chains, bias check included: the framework's VJPs
    drive the same chains (the models' predictor is (W2 W1)^T, the plugin's W2 W1, so the
    measurements are permuted to match)."""
    from paramgeo.llc import LLCWarning, estimate_llc
    from paramgeo.losses import LinearMeasurements

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 2, bias=False),
                              torch.nn.Linear(2, 2, bias=False))
    rng = np.random.default_rng(0)
    models = [paramgeo.from_torch(net, torch.eye(3)),
              paramgeo.from_jax(linear_chain, [rng.standard_normal((2, 3)),
                                               rng.standard_normal((2, 2))],
                                np.eye(3), activation="identity")]
    plugin = paramgeo.get("deep-linear", widths=(3, 2, 2))
    A, y = rng.standard_normal((200, 6)), rng.standard_normal(200)
    perm = np.arange(6).reshape(2, 3).T.ravel()  # model predictor k = plugin predictor perm[k]
    theta = rng.standard_normal(plugin.n)
    A_plugin = np.empty_like(A)
    A_plugin[:, perm] = A
    options = dict(chains=2, draws=60, burn=20, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        ref = estimate_llc(plugin, LinearMeasurements(A_plugin, y), np.zeros(plugin.n),
                           **options)
        for model in models:
            assert rel(model.forward_flat(theta), plugin.forward_flat(theta)[perm]) < 1e-12
            est = estimate_llc(model, LinearMeasurements(A, y), np.zeros(plugin.n), **options)
            assert est.llc == pytest.approx(ref.llc, rel=1e-8)
            assert est.llc_check == pytest.approx(ref.llc_check, rel=1e-8)
            assert est.se_total == pytest.approx(ref.se_total, rel=1e-6)
