"""Architectures read from computational graphs: the rules' groups against independent routes
(the Jacobian by torch.autograd / jax.jacfwd and numpy's rank, finite differences of the group
actions), refusal of a wrong rule, completeness, and strata of dead channels and heads.

Covers: ``paramgeo.adapters._jax``, ``paramgeo.critical.group_completeness``, ``paramgeo.mirror.lie``,
``paramgeo.symmetry.actions``, ``paramgeo.symmetry.verify``, ``paramgeo_plugins.uvt``.
"""

import warnings

import numpy as np
import pytest

import paramgeo
from paramgeo import critical
from paramgeo.critical import completeness
from paramgeo.symmetry import FieldGroup, ShearGroup, UnitPermutationGroup, verify_group

torch = pytest.importorskip("torch")
nn = torch.nn


def _numpy_rank(J):
    s = np.linalg.svd(J, compute_uv=False)
    return int((s > 1e-9 * s[0]).sum())


def _autograd_rank(module, probe, theta, model):
    """rank of d module(probe) / d theta by torch.autograd.functional.jacobian (not
    paramgeo's products): the parameters set from theta block by block."""
    names = [k for k, _ in module.named_parameters()]
    m = module.double().eval()
    x = torch.as_tensor(probe)
    x = x.double() if x.is_floating_point() else x
    blocks = model.spec.unpack(theta)

    def f(*tensors):
        return torch.func.functional_call(m, dict(zip(names, tensors)), (x,)).reshape(-1)

    args = tuple(torch.tensor(np.asarray(blocks[k])) for k in names)
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            jac = torch.autograd.functional.jacobian(f, args, vectorize=True,
                                                  strategy="forward-mode")
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
    return _numpy_rank(np.hstack([j.reshape(j.shape[0], -1).numpy() for j in jac]))


@pytest.fixture(scope="module")
def cnn():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                        nn.Linear(144, 3))
    net[1].running_mean.copy_(0.2 * torch.randn(4))
    net[1].running_var.copy_(torch.rand(4) + 0.5)
    X = torch.randn(200, 1, 8, 8)
    return net, X, paramgeo.from_torch(net, X, name="test-cnn")


def test_cnn_group_parts_and_rank(cnn):
    net, X, model = cnn
    G = model.symmetry()
    # per channel: the ReLU rescaling, the conv/BN rescaling, the bias/shift translation
    assert model.n == 483 and G.dim == 12
    assert "S_4" in G.name and "(R_{>0})^4" in G.name
    rank = _autograd_rank(net, X.numpy(), model.theta0, model)
    assert rank == model.n - G.dim == 471
    assert paramgeo.generic_rank(model) == 471
    c = completeness(model, model.theta0)
    assert c.complete and c.kernel_dim == 12


def test_cnn_group_acts_exactly(cnn):
    _, _, model = cnn
    G = model.symmetry()
    result = verify_group(model, G, points=[model.theta0], n_elements=3)
    assert result.passed and result.action_error < 1e-10
    # the channel permutations alone (with the batch-norm statistics' correction)
    perms = next(f for f in G.factors if isinstance(f, UnitPermutationGroup))
    theta = model.theta0
    moved = perms.act((np.array([1, 0, 3, 2]),), theta)
    assert not np.allclose(moved, theta)
    np.testing.assert_allclose(model.forward_flat(moved), model.forward_flat(theta),
                               rtol=1e-10, atol=1e-12)


def test_cnn_dead_channel_is_named(cnn):
    _, _, model = cnn
    theta = model.theta0.copy()
    sl = model.spec.slices["4.weight"]
    W = theta[sl].reshape(3, 144)
    W[:, :36] = 0.0  # channel 0's outgoing weights
    theta[sl] = W.ravel()
    c = critical.classify(model, theta, n_points=1)
    assert c.verdict == "critical" and c.causes == ("subnetwork",)
    assert c.rank == 462 and c.stratum_generic_rank == 462
    assert dict(c.inactive) == {"0 channel 0": "out-zero"}


def test_wrong_rule_is_refused():
    class Square(nn.Module):
        paramgeo_activation = "relu"  # a lie: it squares

        def forward(self, x):
            return x * x

    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), Square(), nn.Linear(4, 2))
    net[1].eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = paramgeo.from_torch(net, torch.randn(30, 3), name="test-lying")
        G = model.symmetry()
    assert any("refused" in str(w.message) for w in caught)
    assert any("relu rescalings" in note for note in model.graph_notes)
    assert verify_group(model, G).passed  # what is kept holds


@pytest.fixture(scope="module")
def encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=8, dropout=0.0,
                                       batch_first=True)
    X = torch.randn(8, 8, 4)
    return layer, X, paramgeo.from_torch(layer, X, name="test-encoder")


def test_encoder_group_explains_the_kernel(encoder):
    layer, X, model = encoder
    G = model.symmetry()
    # per head 2 GL(2) (16) and 4 bias fields (8); 8 ReLU rescalings; mean shifts: out_proj
    # 4 + 1, linear2 8 + 1; linear1's 8 shears on norm1's hyperplane; norm1's bias through the
    # residual and linear1 (4)
    assert model.n == 172 and G.dim == 58
    assert G.name.count("GL(2)") == 4
    rng = np.random.default_rng(2)
    theta = model.random_point(rng)
    assert verify_group(model, G, points=[theta]).passed
    J = model.jacobian(theta)
    gens = G.generators(theta)
    assert np.linalg.norm(J @ gens) <= 1e-8 * np.linalg.norm(J) * np.linalg.norm(gens)
    best = max(_autograd_rank(layer, X.numpy(), model.random_point(np.random.default_rng(k)),
                              model) for k in range(3))
    assert best == model.n - G.dim == 114


def test_encoder_products_and_dead_head(encoder):
    _, _, model = encoder
    theta = model.theta0.copy()
    hv = model.hessian_vp(theta, np.ones(model.m), np.ones(model.n))
    assert hv.shape == (model.n,) and np.all(np.isfinite(hv))
    sl = model.spec.slices["self_attn.out_proj.weight"]
    W = theta[sl].reshape(4, 4)
    W[:, :2] = 0.0  # head 0's slice of W_O
    theta[sl] = W.ravel()
    c = critical.classify(model, theta, n_points=1)
    assert c.verdict == "critical" and "subnetwork" in c.causes
    assert ("self_attn head 0", "out-zero") in c.inactive


def test_jax_nested_dict_mlp():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def mlp(p, x):
        h = jax.nn.relu(x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"])
        h = jnp.tanh(h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"])
        return h @ p["Dense_2"]["kernel"] + p["Dense_2"]["bias"]

    rng = np.random.default_rng(0)
    params = {"Dense_0": {"kernel": rng.normal(size=(3, 5)), "bias": rng.normal(size=5)},
              "Dense_1": {"kernel": rng.normal(size=(5, 4)), "bias": rng.normal(size=4)},
              "Dense_2": {"kernel": rng.normal(size=(4, 2)), "bias": rng.normal(size=2)}}
    x = rng.normal(size=(100, 3))
    model = paramgeo.from_jax(mlp, params, x, name="test-flax-mlp")
    assert "Dense_0.kernel" in model.spec.blocks
    G = model.symmetry()
    assert G.dim == 5 and "S_5" in G.name and "S_4" in G.name and "(Z_2)^4" in G.name
    from paramgeo.adapters._jax import _x64

    theta = model.random_point(rng)
    with _x64(jax):
        J = np.asarray(jax.jacfwd(lambda t: mlp(_unflat(model, t), x).reshape(-1))(
            jnp.asarray(theta)))
    assert paramgeo.rank_at(model, theta).rank == _numpy_rank(J) == model.n - G.dim


def _unflat(model, t):
    blocks, out, start = model.spec.blocks, {}, 0
    for name, shape in blocks.items():
        size = int(np.prod(shape))
        outer, inner = name.split(".")
        out.setdefault(outer, {})[inner] = t[start:start + size].reshape(shape)
        start += size
    return out


def _flow_derivative(group, g_of_t, theta, h=1e-6):
    return (group.act(g_of_t(h), theta) - group.act(g_of_t(-h), theta)) / (2 * h)


def test_field_and_shear_groups_act_as_their_generators():
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n = 5
    A = sp.csr_matrix(np.diag([1.0, -1.0, 0, 0, 0]))
    c = np.array([0, 0, 1.0, 0, 0])
    B = sp.csr_matrix(([-2.0], ([3], [2])), shape=(n, n))
    field = FieldGroup([(A, None, "scale"), (B, c, "shift")], n)
    theta = rng.standard_normal(n)
    G = field.generators(theta)
    for k in range(2):
        e = np.eye(2)[k]
        np.testing.assert_allclose(_flow_derivative(field, lambda t: t * e, theta), G[:, k],
                                   rtol=1e-7, atol=1e-8)
    shear = ShearGroup([(lambda th: np.r_[0, 0, 0, 0, 1.0 / th[0]], "shear")], n)
    np.testing.assert_allclose(shear.act([0.5], theta)[4], theta[4] + 0.5 / theta[0])
    np.testing.assert_allclose(_flow_derivative(shear, lambda t: [t], theta),
                               shear.generators(theta)[:, 0], rtol=1e-7)


def test_completeness_lists_what_a_group_misses():
    p = paramgeo.get("uvt", m=3, n=3, r=2)
    full = completeness(p)
    assert full.complete and full.kernel_dim == 4
    # only the rescaling of column 0 (U[:, 0] * c, V[:, 0] / c): 1 of the 4 dimensions of GL(2)
    E = np.zeros((1, p.n), dtype=int)
    E[0, [0, 2, 4]], E[0, [6, 8, 10]] = 1, -1
    partial = completeness(p, group=paramgeo.symmetry.ScalingTorus(E))
    assert partial.kernel_dim == 4 and partial.explained == 1 and len(partial.unexplained) == 3
    assert all(set(d) <= {"U", "V"} and abs(sum(d.values()) - 1) < 1e-9
               for d in partial.unexplained)
    assert "explains 1 of the 4" in str(partial)


def test_structured_discovery_of_a_gated_unit():
    class Gated(nn.Module):  # no rule covers u(x) * sigmoid(g(x))
        def __init__(self, a, b):
            super().__init__()
            self.u, self.g = nn.Linear(a, b), nn.Linear(a, b)

        def forward(self, x):
            return self.u(x) * torch.sigmoid(self.g(x))

    torch.manual_seed(0)
    net = nn.Sequential(Gated(4, 6), nn.Linear(6, 3))
    X = torch.randn(80, 4)
    model = paramgeo.from_torch(net, X, name="test-gated")
    G = model.symmetry()
    # per unit j: u's row and bias times c, the next layer's column j times 1/c
    assert G.dim == 6
    assert G.labels[0] == "0.u*0.g unit 0: 0.u row x c, 1 column x 1/c"
    assert verify_group(model, G).passed
    rank = _autograd_rank(net, X.numpy(), model.theta0, model)
    assert rank == model.n - G.dim
    assert completeness(model, model.theta0).complete


def test_mirror_prices_the_first_level_before_paying(cnn):
    import time

    from paramgeo.errors import BudgetError
    from paramgeo.mirror import lie_algebra

    _, _, model = cnn
    tic = time.process_time()
    with pytest.raises(BudgetError, match="bracket level 1"):
        lie_algebra(model, budget=0.5)
    assert time.process_time() - tic < 30  # one product, not the 600 fields


class _EmbedLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.e, self.l = nn.Embedding(7, 3), nn.Linear(3, 4)

    def forward(self, tokens):
        return self.l(self.e(tokens))


@pytest.mark.parametrize("case, dim, missing", [
    ("embedding-linear", 12, 0),   # GL(3) and the embedding's offset into the bias (3)
    ("conv-tanh-avgpool", 0, 0),   # sign flips and channel permutations (finite)
    ("layernorm-relu", 9, 0),      # mean shift of the first layer (4), ReLU rescalings (5)
    ("pre-norm-encoder", 68, 1),   # one direction no rule explains, reported as such
])
def test_more_rules_against_the_autograd_rank(case, dim, missing):
    torch.manual_seed(0)
    net, X = {
        "embedding-linear": (_EmbedLinear(), torch.randint(0, 7, (40,))),
        "conv-tanh-avgpool": (nn.Sequential(nn.Conv2d(1, 3, 3), nn.Tanh(), nn.AvgPool2d(2),
                                            nn.Flatten(), nn.Linear(12, 2)),
                              torch.randn(60, 1, 6, 6)),
        "layernorm-relu": (nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.ReLU(),
                                         nn.Linear(5, 2)), torch.randn(80, 3)),
        "pre-norm-encoder": (nn.TransformerEncoderLayer(4, 2, 8, 0.0, batch_first=True,
                                                        norm_first=True), torch.randn(6, 6, 4)),
    }[case]
    model = paramgeo.from_torch(net, X, name=f"test-{case}")
    G = model.symmetry()
    assert G.dim == dim and verify_group(model, G).passed
    if case == "conv-tanh-avgpool":
        assert "(Z_2)^3" in G.name and "S_3" in G.name
    best = max(_autograd_rank(net, X.numpy(), model.random_point(np.random.default_rng(k)),
                              model) for k in range(2))
    assert best == model.n - dim - missing


def test_declared_jax_activations_are_checked():
    pytest.importorskip("jax")
    from paramgeo.errors import ShapeError

    rng = np.random.default_rng(0)
    params = [rng.normal(size=(3, 2)), rng.normal(size=(1, 3))]

    def net(p, x):
        return (x @ p[0].T) ** 2 @ p[1].T

    x = rng.normal(size=(10, 2))
    with pytest.raises(ShapeError, match="unknown activation 'bogus'"):
        paramgeo.from_jax(net, params, x, activation="bogus")
    with pytest.raises(ShapeError, match="must be an integer >= 1"):
        paramgeo.from_jax(net, params, x, activation=("power", 1.5))
    model = paramgeo.from_jax(net, params, x, activation=("power", 2))
    assert model.symmetry().dim == 3


def test_a_lying_declared_activation_in_a_sequential_is_refused():
    from paramgeo.errors import ContractError

    class Tanh(nn.Module):
        paramgeo_activation = "identity"  # a lie

        def forward(self, x):
            return torch.tanh(x)

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 3), Tanh(), nn.Linear(3, 2))
    with pytest.raises(ContractError, match=r"Tanh \(identity\) do not compute what they"):
        paramgeo.from_torch(net, torch.randn(20, 3), name="test-liar")
