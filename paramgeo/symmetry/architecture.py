"""The symmetry group of a layered network read from its architecture graph.

The graph is the ``architecture`` capability's networkx ``DiGraph`` (see
:meth:`paramgeo.Parameterization.architecture`): one node per neuron with its integer ``layer``
(0 for inputs, the largest layer for outputs), one edge u -> v per weight with ``index`` its
position in the flat theta. :func:`from_architecture` also reads, on a hidden node,

* ``activation``: the name of its elementwise activation sigma (``ACTIVATIONS``; a missing or
  unknown name gives the neuron no symmetry beyond the permutations);
* ``degree``: k for ``activation="power"`` (sigma(t) = t^k);
* ``bias``: the position in theta of the neuron's bias, if it has one.

A hidden neuron j with incoming weights w_j (and bias b_j), outgoing weights a_j, computes
a_j sigma(w_j . x + b_j). The symmetries (Neyshabur, Salakhutdinov, Srebro 2015 "Path-SGD" for
the rescalings; Chen, Lu, Hecht-Nielsen 1993 "On the geometry of feedforward neural network
error surfaces" for the sign flips and permutations; Arora, Cohen, Hazan 2018 for GL(h) of
linear layers):

* positively homogeneous sigma (sigma(c t) = c sigma(t) for c > 0: relu, leaky relu):
  (w_j, b_j, a_j) -> (c w_j, c b_j, a_j / c), c > 0, a torus (R_{>0})^k;
* powers sigma(t) = t^k: (w_j, b_j, a_j) -> (c w_j, c b_j, c^{-k} a_j), c in R\\{0}
  (degree-aware; contains the sign flips), a torus (R\\{0})^k;
* odd sigma (tanh, sin, arctan, ...): the sign flip (w_j, b_j, a_j) -> -(w_j, b_j, a_j);
* linear sigma (identity): a class of linear neurons with the same inputs and outputs (a hidden
  layer of a dense network) carries GL(h), W_in -> g^{-1} W_in, b -> g^{-1} b,
  W_out -> W_out g (:func:`paramgeo.symmetry.hidden_layer_group`), which contains their
  rescalings, sign flips and permutations;
* permutations: two neurons of the same layer and activation with the same predecessors and
  successors (twins) can be exchanged with their weights and biases: a graph automorphism
  preserving layers and activations. Adjacent transpositions of each twin class generate
  the symmetric group S_k of the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ParamgeoError
from .actions import UnitPermutationGroup
from .groups import (ProductGroup, ScalingTorus, SignedPermutationGroup, SymmetryGroup,
                     hidden_layer_group)

if TYPE_CHECKING:
    import networkx as nx

#: The activation names :func:`from_architecture` knows and their kind: "linear",
#: "homogeneous" (positively homogeneous of degree 1), "odd", "power" (t^k, node attribute
#: ``degree``) or "none" (no symmetry beyond permutations).
ACTIVATIONS = {
    "identity": "linear", "linear": "linear", "none": "linear",
    "relu": "homogeneous", "leaky_relu": "homogeneous", "leaky-relu": "homogeneous",
    "prelu": "homogeneous",
    "tanh": "odd", "sin": "odd", "arctan": "odd", "atan": "odd", "softsign": "odd",
    "hardtanh": "odd", "erf": "odd",
    "power": "power", "square": "power", "monomial": "power",
    "sigmoid": "other", "gelu": "other", "softplus": "other", "elu": "other", "silu": "other",
    "swish": "other", "exp": "other", "cos": "other",
}


def _kind(name, data, node):
    """(kind, degree) of a hidden node's activation."""
    if name is None:
        return "other", None
    key = str(name).lower()
    kind = ACTIVATIONS.get(key, "other")
    if kind != "power":
        return kind, None
    degree = data.get("degree", 2 if key == "square" else None)
    if degree is None or int(degree) != degree or int(degree) < 1:
        raise ParamgeoError(
            f"architecture graph: node {node!r} has activation {name!r} but no integer degree "
            f">= 1 (got {degree!r}); set the node attribute degree=k for sigma(t) = t^k")
    degree = int(degree)
    return ("linear", None) if degree == 1 else ("power", degree)


def _n_of(n):
    return int(getattr(n, "size", n))


def from_architecture(graph: nx.DiGraph, n: int) -> SymmetryGroup:
    """The symmetry group of the layered network described by ``graph`` (an architecture
    DiGraph: node attributes ``layer``, optional ``activation``, ``degree``, ``bias``; edge
    attribute ``index``) acting on flat parameter vectors of length ``n`` (an int, or the
    plugin's ``ParamSpec``). See the module docstring for the symmetries and references.

    Returns the product (:class:`ProductGroup`) of: a GL(h) (:func:`hidden_layer_group`, with
    index blocks: rows the predecessors in sorted order plus the bias row, columns the h
    neurons) for every class of twin linear neurons; a torus (R_{>0})^k of the rescalings of
    the positively homogeneous neurons; a torus (R\\{0})^k of the degree-aware rescalings of
    the power neurons (exponents +1 on the inputs and bias, -k on the outputs); one
    :class:`UnitPermutationGroup` of the twin classes (each neuron with its incoming weights,
    bias and outgoing weights) and one :class:`SignedPermutationGroup` of the sign flips of odd
    neurons. Factors that would be trivial are left out; with none the trivial torus "1".

    >>> import networkx as nx
    >>> g = nx.DiGraph()
    >>> g.add_nodes_from(["x0", "x1"], layer=0)
    >>> g.add_nodes_from(["h0", "h1"], layer=1, activation="identity")
    >>> g.add_node("y0", layer=2)
    >>> for k, (u, v) in enumerate([(u, v) for v in ("h0", "h1") for u in ("x0", "x1")]):
    ...     g.add_edge(u, v, index=k)
    >>> g.add_edge("h0", "y0", index=4); g.add_edge("h1", "y0", index=5)
    >>> from_architecture(g, 6).name
    'GL(2)'
    """
    n = _n_of(n)
    layers = {}
    for node, data in graph.nodes(data=True):
        if "layer" not in data:
            raise ParamgeoError(f"architecture graph: node {node!r} has no 'layer' attribute; "
                                "give every neuron its layer (0 for inputs)")
        layers[node] = int(data["layer"])
    if not layers:
        return ScalingTorus(np.zeros((0, n), dtype=int))
    top = max(layers.values())
    hidden = sorted((v for v, l in layers.items() if 0 < l < top), key=lambda v: (layers[v],
                                                                                  str(v)))

    def index(u, v):
        return int(graph.edges[u, v]["index"])

    classes: dict[tuple, list] = {}
    for v in hidden:
        data = graph.nodes[v]
        kind, degree = _kind(data.get("activation"), data, v)
        key = (layers[v], kind, degree, frozenset(graph.predecessors(v)),
               frozenset(graph.successors(v)), data.get("bias") is not None)
        classes.setdefault(key, []).append(v)

    factors: list[SymmetryGroup] = []
    rows: dict[str, list] = {"homogeneous": [], "power": []}
    flips, twins = [], []
    for (layer, kind, degree, _, _, _), nodes in sorted(classes.items(), key=lambda kv: (
            kv[0][0], str(kv[1][0]))):
        # neighbours in the order of their weights in theta (the storage order of the layer),
        # the same for every neuron of the class
        preds = sorted(graph.predecessors(nodes[0]), key=lambda u: index(u, nodes[0]))
        succs = sorted(graph.successors(nodes[0]), key=lambda s: index(nodes[0], s))

        def incoming(v, preds=preds):
            bias = graph.nodes[v].get("bias")
            return [index(u, v) for u in preds] + ([int(bias)] if bias is not None else [])

        def outgoing(v, succs=succs):
            return [index(v, s) for s in succs]

        if kind == "linear":
            ins = np.array([incoming(v) for v in nodes], dtype=int).T  # (rows, h)
            outs = np.array([outgoing(v) for v in nodes], dtype=int).T
            if ins.size == 0 or outs.size == 0:
                continue  # a neuron with no inputs or no outputs: nothing to mix
            factors.append(hidden_layer_group(len(nodes), incoming=(ins,), outgoing=(outs,)))
            continue
        for v in nodes:
            if kind in ("homogeneous", "power"):
                row = np.zeros(n, dtype=int)
                row[incoming(v)] = 1
                row[outgoing(v)] = -1 if kind == "homogeneous" else -degree
                rows[kind].append(row)
            elif kind == "odd":
                signs = np.ones(n)
                signs[incoming(v) + outgoing(v)] = -1.0
                flips.append((np.arange(n), signs))
        if len(nodes) > 1:  # twins: unit i owns its incoming weights, bias and outgoing weights
            twins.append((f"layer {layer} ({', '.join(map(str, nodes))})",
                          np.array([incoming(v) + outgoing(v) for v in nodes], dtype=int)))
    if rows["homogeneous"]:
        factors.append(ScalingTorus(np.array(rows["homogeneous"]), signed=False))
    if rows["power"]:
        factors.append(ScalingTorus(np.array(rows["power"]), signed=True))
    if twins:
        factors.append(UnitPermutationGroup(twins, n))
    if flips:
        factors.append(SignedPermutationGroup(
            f"(Z_2)^{len(flips)}" if len(flips) > 1 else "Z_2", flips, n))
    if not factors:
        return ScalingTorus(np.zeros((0, n), dtype=int))
    return factors[0] if len(factors) == 1 else ProductGroup(*factors)
