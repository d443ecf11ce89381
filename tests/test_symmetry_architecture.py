"""Symmetry groups of layered networks from their architecture graphs (from_architecture), and
group actions on both sides of a block (hidden_layer_group, blocks_of(..., axis=0)).

Independent routes: invariance of phi under random group elements, the generators in the
kernel of J, the vertical projector against the SVD of the dense generators (the contract
check), and the dimension against the linear symmetries discovery finds from J alone.

Covers: ``paramgeo.dynamics.trajectory``, ``paramgeo.losses.predictor``,
``paramgeo.symmetry.architecture``, ``paramgeo.symmetry.conserved``,
``paramgeo.symmetry.discovery``, ``paramgeo.symmetry.groups``.
"""

import autograd.numpy as anp
import networkx as nx
import numpy as np
import pytest

import paramgeo
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.errors import ParamgeoError
from paramgeo.symmetry import (blocks_of, discover, from_architecture, hidden_layer_group)

SIGMA = {"identity": lambda z: z, "relu": lambda z: anp.maximum(z, 0.0), "tanh": anp.tanh,
         "power": lambda z: z ** 3, "square": lambda z: z ** 2, "sigmoid": lambda z: 1.0 / (1.0 + anp.exp(-z))}


class MLP(Parameterization):
    """x -> W_L sigma(... sigma(W_1 x + b_1) ...) on a fixed batch X, weights stored (out, in)
    as torch does; its symmetry read from its own architecture graph."""

    name = "test-mlp"
    size_params = {"widths": Size("ints", default=(3, 4, 2)),
                   "act": Size("choice", default="relu", choices=tuple(SIGMA)), "bias": Size("bool", default=False)}
    capabilities = frozenset({"symmetry", "architecture"})

    def make_spec(self):
        blocks = {}
        for l in range(1, len(self.widths)):
            blocks[f"W{l}"] = (self.widths[l], self.widths[l - 1])
            if self.bias and l < len(self.widths) - 1:
                blocks[f"b{l}"] = (self.widths[l],)
        return ParamSpec(blocks)

    def make_predictor_shape(self):
        return (5, self.widths[-1])

    def forward(self, theta):
        X = np.random.default_rng(1).standard_normal((5, self.widths[0]))
        p, z = self.spec.unpack(theta), X
        L = len(self.widths) - 1
        for l in range(1, L + 1):
            z = anp.dot(z, p[f"W{l}"].T) + (p[f"b{l}"] if f"b{l}" in p else 0.0)
            if l < L:
                z = SIGMA[self.act](z)
        return z

    def architecture(self):
        g, L = nx.DiGraph(), len(self.widths) - 1
        for l, w in enumerate(self.widths):
            for j in range(w):
                attrs = {"layer": l}
                if 0 < l < L:
                    attrs["activation"] = "power" if self.act == "power" else self.act
                    attrs["degree"] = 3
                    if self.bias:
                        attrs["bias"] = self.spec.slices[f"b{l}"].start + j
                g.add_node((l, j), **attrs)
        for l in range(1, L + 1):
            start = self.spec.slices[f"W{l}"].start
            for j in range(self.widths[l]):
                for i in range(self.widths[l - 1]):
                    g.add_edge((l - 1, i), (l, j), index=start + j * self.widths[l - 1] + i)
        return g

    def symmetry(self):
        return from_architecture(self.architecture(), self.spec)


def _invariance(param, rng, trials=3):
    G = param.symmetry()
    theta = param.random_point(rng)
    errs = [np.abs(param.forward(G.act(G.random_element(rng), theta)) - param.forward(theta)).max()
            for _ in range(trials)]
    kernel = np.abs(param.jacobian(theta) @ G.generators(theta)).max() if G.dim else 0.0
    return G, max(errs), kernel


@pytest.mark.parametrize("act,bias,widths,name,dim", [
    ("identity", False, (3, 4, 2), "GL(4)", 16),
    ("identity", True, (2, 3, 2, 2), "GL(3) x GL(2)", 13),
    ("relu", True, (2, 3, 2), "(R_{>0})^3 x S_3", 3),
    ("tanh", True, (2, 3, 2), "S_3 x (Z_2)^3", 0),
    ("power", False, (2, 2, 2, 1), "(R\\{0})^4 x S_2 x S_2", 4),
    ("sigmoid", True, (2, 3, 1), "S_3", 0),
])
def test_from_architecture_groups_leave_phi_invariant(rng, act, bias, widths, name, dim):
    param = MLP(widths=widths, act=act, bias=bias)
    G, err, kernel = _invariance(param, rng)
    assert (G.name, G.dim) == (name, dim)
    assert err < 1e-10 and kernel < 1e-10


@pytest.mark.parametrize("act,widths", [("identity", (2, 3, 2)), ("relu", (2, 3, 2)),
                                        ("power", (2, 2, 1))])
def test_from_architecture_dimension_matches_discovery(act, widths):
    # discovery reads the linear symmetries from J alone: an independent route to the dimension
    param = MLP(widths=widths, act=act, bias=False)
    assert discover(param, discrete=False, compare=False).dim == param.symmetry().dim


def test_from_architecture_passes_the_contract_check():
    for act, checked in (("identity", "vertical-projector"), ("tanh", "invariance")):
        report = paramgeo.check(MLP(widths=(2, 3, 2), act=act, bias=True))
        assert report.passed, report
        assert checked in {item.property for item in report.items}


def test_power_needs_a_degree():
    g = nx.DiGraph()
    g.add_node("x", layer=0)
    g.add_node("h", layer=1, activation="power")
    g.add_node("y", layer=2)
    g.add_edge("x", "h", index=0)
    g.add_edge("h", "y", index=1)
    with pytest.raises(ParamgeoError, match="degree"):
        from_architecture(g, 2)


def test_hidden_layer_group_on_both_sides(rng):
    # W3 W2 W1 with weights stored (out, in): GL(4) x GL(3), W_in -> g^-1 W_in, W_out -> W_out g
    spec = ParamSpec(W1=(4, 6), W2=(3, 4), W3=(5, 3))
    G = (hidden_layer_group(4, blocks_of(spec, "W1", axis=0), blocks_of(spec, "W2"))
         * hidden_layer_group(3, blocks_of(spec, "W2", axis=0), blocks_of(spec, "W3")))
    theta = rng.standard_normal(spec.size)
    g1, g2 = G.random_element(rng)
    W = spec.unpack(G.act((g1, g2), theta))
    W0 = spec.unpack(theta)
    assert np.allclose(W["W1"], np.linalg.solve(g1, W0["W1"]))
    assert np.allclose(W["W2"], np.linalg.solve(g2, W0["W2"] @ g1))
    assert np.allclose(W["W3"], W0["W3"] @ g2)
    # the closed-form projectors agree with the SVD of the dense generators
    w = rng.standard_normal(spec.size)
    for group in (G.factors[0], hidden_layer_group(4, blocks_of(spec, "W1", axis=0),
                                                    blocks_of(spec, "W2"), orthogonal=True)):
        U, s, _ = np.linalg.svd(group.generators(theta), full_matrices=False)
        U = U[:, s > 1e-10 * s[0]]
        P = group.vertical_projector(theta)
        assert P.dim == U.shape[1] and np.allclose(P(w), U @ (U.T @ w), atol=1e-12)


def test_linear_layers_with_biases_conserve_their_matrix_laws(rng):
    # balancedness with biases: W_l W_l^T + b_l b_l^T - W_{l+1}^T W_{l+1} (Du, Hu, Lee 2018)
    from paramgeo.symmetry.conserved import matrix_laws
    from paramgeo.flows import gradient_flow
    from paramgeo.losses import LinearMeasurements

    p = MLP(widths=(12, 3, 2, 2), act="identity", bias=True)
    laws = matrix_laws(p.symmetry(), p.spec)
    assert [str(law) for law in laws] == ["W1 W1^T + b1 b1^T - W2^T W2",
                                          "W2 W2^T + b2 b2^T - W3^T W3"]
    loss = LinearMeasurements(rng.standard_normal((6, p.m)), rng.standard_normal(6))
    flow = gradient_flow(p, loss, p.random_point(rng), 2.0, rtol=1e-10, atol=1e-12,
                         n_records=5)
    assert flow.losses[-1] < 0.9 * flow.losses[0]
    for law in laws:
        before, after = law.value(flow.thetas[0]), law.value(flow.thetas[-1])
        assert np.abs(after - before).max() < 1e-7 * max(1.0, np.abs(before).max())
    W = p.spec.unpack(flow.thetas[-1])  # the first law recomputed from the blocks directly
    direct = W["W1"] @ W["W1"].T + np.outer(W["b1"], W["b1"]) - W["W2"].T @ W["W2"]
    assert np.allclose(laws[0].value(flow.thetas[-1]), direct)
