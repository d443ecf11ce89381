"""Architecture graphs of layered models read from their layers (torch ``nn.Sequential`` of
``Linear`` layers and elementwise activations; a JAX list of dense layers).

A layer is a dict ``{"weight": block, "bias": block or None, "in": a, "out": b,
"transposed": bool}``: the weight block holds W[j, i] (neuron j of the layer, input i) at
``start + j * a + i`` when stored (out, in) as torch ``Linear.weight``, at
``start + i * b + j`` when ``transposed`` (in, out), as a JAX/flax ``kernel`` used as
x @ W. Between layers l and l + 1 sits one elementwise activation (name, degree), the
activation of the hidden neurons of layer l.

The graph has the format of the built-in layered plugins (``monomial``, ``deep-linear``): nodes
x{i} (layer 0), h{l}_{j} (hidden layer l, attributes ``activation``, ``degree`` for powers,
``bias`` the position of its bias in theta), y{o} (outputs, layer L); one edge per weight with
``index`` (its position in theta) and ``block`` (its block name). The symmetry group is read
from it by :func:`paramgeo.symmetry.from_architecture` (Neyshabur, Salakhutdinov, Srebro 2015;
Chen, Lu, Hecht-Nielsen 1993; Arora, Cohen, Hazan 2018).
"""

from typing import ClassVar

import numpy as np

from ..errors import ShapeError

#: torch elementwise activation modules and the name :mod:`paramgeo.symmetry` knows them by
TORCH_ACTIVATIONS = {
    "ReLU": "relu", "LeakyReLU": "leaky_relu", "Tanh": "tanh", "Hardtanh": "hardtanh",
    "Softsign": "softsign", "Sigmoid": "sigmoid", "GELU": "gelu", "SiLU": "silu",
    "Softplus": "softplus", "ELU": "elu", "Identity": None, "Dropout": None,
}


def torch_layers(module, probe_shape):
    """(layers, activations) of an ``nn.Sequential`` of ``Linear`` layers and elementwise
    activations (see the module docstring), or None for any other module. An activation
    module may declare itself with the attributes ``paramgeo_activation`` (a name of
    :data:`paramgeo.symmetry.ACTIVATIONS`) and ``degree`` (for "power")."""
    import torch

    if not isinstance(module, torch.nn.Sequential):
        return None
    names = {id(p): key for key, p in module.named_parameters()}
    layers, activations, pending = [], [], []
    for child in module:
        if isinstance(child, torch.nn.Linear):
            if layers:
                if len(pending) > 1:
                    return None  # two activations in a row: not one elementwise function
                activations.append(pending[0] if pending else ("identity", None))
            elif pending:
                return None  # an activation of the inputs: not a layer of neurons
            pending = []
            if id(child.weight) not in names:
                return None
            layers.append({"weight": names[id(child.weight)],
                           "bias": None if child.bias is None else names[id(child.bias)],
                           "in": child.in_features, "out": child.out_features,
                           "transposed": False})
            continue
        declared = getattr(child, "paramgeo_activation", None)
        kind = type(child).__name__
        if declared is None and kind not in TORCH_ACTIVATIONS:
            return None
        if any(True for _ in child.parameters()):
            return None  # a parametrised activation (PReLU) has weights of its own
        if kind == "Hardtanh" and not (child.min_val == -child.max_val):
            return None  # odd only when symmetric
        act = declared if declared is not None else TORCH_ACTIVATIONS[kind]
        if act is not None:
            pending.append((str(act), getattr(child, "degree", None)))
    if not layers or len({layer["weight"] for layer in layers}) != len(layers):
        return None
    if len(probe_shape) < 1 or probe_shape[-1] != layers[0]["in"]:
        return None
    return layers, activations


def graph(layers, activations, spec):
    """The architecture DiGraph of ``layers`` with ``activations`` (see the module
    docstring) addressing the flat theta of ``spec``."""
    import networkx as nx

    L = len(layers)
    widths = [layers[0]["in"]] + [layer["out"] for layer in layers]

    def node(l, j):
        return f"x{j}" if l == 0 else (f"y{j}" if l == L else f"h{l}_{j}")

    g = nx.DiGraph()
    for j in range(widths[0]):
        g.add_node(node(0, j), layer=0)
    for l, layer in enumerate(layers, start=1):
        w = spec.slices[layer["weight"]].start
        b = None if layer["bias"] is None else spec.slices[layer["bias"]].start
        for j in range(layer["out"]):
            attrs = {"layer": l}
            if l < L:
                act, degree = activations[l - 1]
                attrs["activation"] = act
                if degree is not None:
                    attrs["degree"] = int(degree)
                if b is not None:
                    attrs["bias"] = b + j
            g.add_node(node(l, j), **attrs)
            for i in range(layer["in"]):
                index = w + (i * layer["out"] + j if layer["transposed"] else j * layer["in"] + i)
                g.add_edge(node(l - 1, i), node(l, j), index=index, block=layer["weight"])
    return g


class LayeredModel:
    """Mixin of a FrameworkModel whose layers were read (``self._layers``): declares the
    architecture graph and the symmetry group from_architecture reads from it, and, for a deep
    linear network, the exact learning coefficient (:meth:`learning_coefficient`)."""

    capabilities: ClassVar[frozenset] = frozenset({"architecture", "symmetry",
                                                   "learning_coefficient"})
    _graph = None  # built on first use
    _group = None  # read from the graph on first use
    references: ClassVar[tuple] = (
        "Neyshabur, Salakhutdinov, Srebro (2015) Path-SGD (rescalings of ReLU neurons)",
        "Chen, Lu, Hecht-Nielsen (1993) On the geometry of feedforward neural network error "
        "surfaces (sign flips and permutations)",
        "Arora, Cohen, Hazan (2018) On the optimization of deep networks (GL(h) of linear "
        "layers)",
    )

    def architecture(self):
        """The layered DiGraph: x{i}, h{l}_{j} (with activation, degree, bias), y{o}; one edge
        per weight with its ``index`` in theta and its ``block``."""
        if self._graph is None:
            self._graph = graph(*self._layers, self.spec)
        return self._graph.copy()

    def symmetry(self):
        """The group of the architecture graph (:func:`paramgeo.symmetry.from_architecture`):
        GL(h) of linear hidden layers (W_in -> g^-1 W_in, b -> g^-1 b, W_out -> W_out g),
        rescalings of ReLU neurons, sign flips of odd ones (tanh), permutations of twins.
        Built once per model (the layers do not change) and shared by later calls."""
        from ..symmetry import from_architecture

        if self._group is None:
            self._group = from_architecture(self.architecture(), self.spec)
        return self._group

    def deep_linear_weights(self, theta):
        """[W_1, ..., W_L] at theta (each out x in, W_1 first, whatever the storage order)
        when the model is a deep linear network whose predictor determines the end-to-end
        matrix W_L ... W_1: two or more layers, no biases, no activation between them, and a
        probe whose rows span the inputs (rank n_0; the identity probe does, and then the
        predictor is net(I) = (W_L ... W_1)^T, in x out). None for any other model."""
        from ..symmetry.architecture import ACTIVATIONS

        layers, activations = self._layers
        if (len(layers) < 2 or any(layer["bias"] is not None for layer in layers)
                or any(ACTIVATIONS.get(act) != "linear" for act, _ in activations)):
            return None
        n0 = layers[0]["in"]
        probe = np.asarray(self._probe, float)
        if probe.size % n0 or np.linalg.matrix_rank(probe.reshape(-1, n0)) < n0:
            return None
        theta = self.as_theta(theta)
        return [theta[self.spec.slices[layer["weight"]]].reshape(layer["in"], layer["out"]).T
                if layer["transposed"] else
                theta[self.spec.slices[layer["weight"]]].reshape(layer["out"], layer["in"])
                for layer in layers]

    def learning_coefficient(self, theta):
        """For a deep linear network (:meth:`deep_linear_weights`), Aoyagi's lambda at a true
        parameter where every W_l has the rank of the product (Aoyagi 2024, Theorem 1;
        :func:`paramgeo.llc.deep_linear_at`), as the ``deep-linear`` plugin gives it; None
        for other models and points. It is the coefficient of a loss on the predictor (the
        outputs on the probe) or, equally, of the model's squared error on inputs of full
        rank (``estimate_llc(model, "mse", ..., data=(X, Y))``)."""
        from ..llc import deep_linear_at

        weights = self.deep_linear_weights(theta)
        return None if weights is None else deep_linear_at(weights)


def check_layers(layers, activations, spec):
    """Raise ShapeError unless the layers chain (each layer's input width the previous
    layer's output width) and their blocks have the shapes the layers say."""
    for k, layer in enumerate(layers):
        shape = (layer["in"], layer["out"]) if layer["transposed"] else (layer["out"],
                                                                        layer["in"])
        if tuple(spec.blocks[layer["weight"]]) != shape:
            raise ShapeError(f"dense layer {k}: weight {layer['weight']} has shape "
                             f"{spec.blocks[layer['weight']]}, expected {shape}")
        if layer["bias"] is not None and tuple(spec.blocks[layer["bias"]]) != (layer["out"],):
            raise ShapeError(f"dense layer {k}: bias {layer['bias']} has shape "
                             f"{spec.blocks[layer['bias']]}, expected ({layer['out']},)")
        if k and layers[k - 1]["out"] != layer["in"]:
            raise ShapeError(f"dense layers {k - 1} and {k} do not chain: widths "
                             f"{layers[k - 1]['out']} and {layer['in']}")
    if len(activations) != len(layers) - 1:
        raise ShapeError(f"{len(layers)} dense layers need {len(layers) - 1} activations "
                         f"between them, got {len(activations)}")


class GraphModel:
    """Mixin of a FrameworkModel whose computational graph was read (``self._read_graph()``
    returns a :class:`paramgeo.adapters._graph.Reading`): declares the symmetry group of the
    layer rules that survive verification and the architecture graph of the units they found.

    The reading and the verification run once per model class, on first use."""

    capabilities: ClassVar[frozenset] = frozenset({"architecture", "symmetry"})
    references: ClassVar[tuple] = (
        "Neyshabur, Salakhutdinov, Srebro (2015) Path-SGD (rescalings of ReLU units)",
        "Ioffe, Szegedy (2015) Batch normalization (scale invariance)",
        "Vaswani et al. (2017) Attention is all you need; Elhage et al. (2021) A mathematical "
        "framework for transformer circuits (QK and OV circuits per head)",
    )
    _graph_cache = None  # per class: (group, units, notes, refused)

    def _graph_state(self):
        cls = type(self)
        if cls.__dict__.get("_graph_cache") is None:
            cls._graph_cache = _verified_reading(self)
        return cls._graph_cache

    def symmetry(self):
        """The product of the verified rule groups read from the computational graph
        (:mod:`paramgeo.symmetry.rules`; see :attr:`graph_notes` for what no rule covers)."""
        return self._graph_state()[0]

    @property
    def graph_notes(self):
        """What the graph reader could not cover, and the rules verification refused."""
        state = self._graph_state()
        return tuple(state[2]) + tuple(state[3])

    def architecture(self):
        """The units (neurons, channels, heads) as nodes: ``layer`` (1, 2, ... in graph order;
        0 and the last for the inputs and outputs), ``activation``, ``inputs`` and ``outputs``
        (the positions in theta that produce and read the unit)."""
        import networkx as nx

        units = self._graph_state()[1]
        g = nx.DiGraph()
        g.add_node("inputs", layer=0)
        layers = {}
        for label, *_ in units:
            layers.setdefault(label, len(layers) + 1)
        top = len(layers) + 1
        g.add_node("outputs", layer=top)
        for label, name, inp, out, act in units:
            g.add_node(name, layer=layers[label], unit_class=label, activation=act,
                       inputs=[int(i) for i in np.ravel(inp)],
                       outputs=[int(i) for i in np.ravel(out)])
        return g


def _verified_reading(model):
    """(group, units, notes, refused): the reading's groups that pass
    :func:`paramgeo.symmetry.verify_group`, as one product."""
    import warnings

    from ..symmetry import FieldGroup, ProductGroup, ScalingTorus, ShearGroup, verify_group

    reading = model._read_graph()
    if reading is None:
        return ScalingTorus(np.zeros((0, model.n), dtype=int)), [], [model._graph_reason], []
    kept, refused = [], []
    groups = list(reading.groups)
    if reading.discover:
        from ..symmetry.structured import structured_discovery

        groups.append(("structured discovery", structured_discovery(model, reading.discover)))
    for name, group in groups:
        if group.dim == 0 and isinstance(group, (FieldGroup, ShearGroup)):
            continue  # nothing found (discrete groups of dimension 0 are kept)
        result = verify_group(model, group)
        if result.passed:
            kept.append(group)
        else:
            refused.append(f"rule '{name}' refused by verification ({result})")
    if refused:
        warnings.warn(f"{model.name}: " + "; ".join(refused), stacklevel=3)
    if not kept:
        group = ScalingTorus(np.zeros((0, model.n), dtype=int))
    else:
        group = kept[0] if len(kept) == 1 else ProductGroup(*kept)
    return group, reading.units, list(reading.notes), refused
