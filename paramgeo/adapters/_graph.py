"""The architecture of a torch module read from its computational graph (torch.fx).

The module is traced symbolically (``torch.fx``; torch's own layers stay leaves) and shapes are
propagated on the probe. Walking the graph, every parametrised layer that writes a feature axis
(a dense layer's neurons, a convolution's channels, an embedding's coordinates, a
normalisation layer's features, attention's output) starts a *stream* of units; elementwise
activations, batch normalisation in eval mode, pooling and flattening carry a stream on, and
the layers that read it (dense layers, convolutions) are its consumers. Anything else a stream
meets (a residual sum, the model's output, an unknown operation) makes it *escape*: no unit
symmetry is claimed for it. The rules of :mod:`paramgeo.symmetry.rules` then give, per
stream, the symmetries its units carry; each rule's group is verified against the model before
it is kept (:func:`paramgeo.symmetry.verify_group`), and what the rules leave unexplained is
measured by :func:`paramgeo.critical.completeness`.
"""

import dataclasses
import operator

import numpy as np

from ..symmetry import rules
from ._attention import math_attention
from ._layers import TORCH_ACTIVATIONS
from ._unit_rules import apply_rules

#: activations by the name the rules know them by: torch's activation modules (the table of
#: the layered reader, lower-cased) and the functions and methods of the same names
ACTIVATION_NAMES = {name.lower(): act for name, act in TORCH_ACTIVATIONS.items()} | {
    "leaky_relu": "leaky_relu", "dropout1d": None, "dropout2d": None, "dropout3d": None,
    "alphadropout": None}


@dataclasses.dataclass(kw_only=True)
class Stream:
    """The units written by one layer (see the module docstring)."""

    label: str
    kind: str  # "dense", "conv", "embed", "affine"
    k: int
    incoming: np.ndarray  # (rows, k): column j = the producer's parameters of unit j
    bias: object = None  # (k,) index array of the producer's bias, or None
    bn: object = None  # dict(label, gamma, beta, mu, sigma) of batch norm in eval mode
    layer_norm: bool = False  # an affine stream written by a layer norm with a bias
    parts: tuple = ()  # custom streams: per parameter slice, a (k, size) index array
    part_names: tuple = ()  # and its name
    events: list = dataclasses.field(default_factory=list)  # (kind, stage, data)

    def unit_inp(self, j, stage):
        """The parameters of the last affine stage before unit j's activation."""
        if stage[0]:  # after batch norm
            return np.array([self.bn["gamma"][j], self.bn["beta"][j]])
        return self.incoming[:, j]


@dataclasses.dataclass(kw_only=True)
class Value:
    """What an fx node computes: ``kind`` "data" (no parameters), "stream" (the units of
    ``stream`` along ``axis``; ``flat`` = positions per unit after flattening; ``stage`` =
    (after batch norm, activations applied, max-pooled)), "sum", "tuple" or "opaque"."""

    kind: str
    stream: object = None
    axis: int = -1
    flat: int = 1
    stage: tuple = (False, (), False)
    parts: tuple = ()
    shape: tuple = None


DATA, OPAQUE = Value(kind="data"), Value(kind="opaque")


@dataclasses.dataclass(kw_only=True)
class Reading:
    """What the reader found: rule groups (name, group) to verify, strata units (layer, name,
    inputs, outputs, activation), and notes on what no rule covers."""

    groups: list = dataclasses.field(default_factory=list)
    units: list = dataclasses.field(default_factory=list)
    discover: list = dataclasses.field(default_factory=list)  # (label, slots) per unit
    notes: list = dataclasses.field(default_factory=list)


class _Reader:
    def __init__(self, positions, n):
        self.pos, self.n = positions, n
        self.streams, self.reading = [], Reading()
        self.fields = []
        self.perm_classes, self.perm_adjust = [], {}

    # ------------------------------------------------------------------ helpers
    def idx(self, qualname, attr):
        key = f"{qualname}.{attr}" if qualname else attr
        return self.pos.get(key)

    def escape(self, value, reason):
        if value.kind == "stream":
            value.stream.events.append(("escape", value.stage, reason))
        for part in value.parts:
            self.escape(part, reason)

    def custom(self, label, parts, names):
        """A stream of units whose producer no rule covers: ``parts`` (k, size) index arrays
        named ``names``, unit j owning row j of each; its symmetries are searched by
        structured discovery."""
        parts = tuple(np.asarray(p, dtype=int) for p in parts)
        s = self.new_stream(label, "custom", np.hstack(parts).T)
        s.parts, s.part_names = parts, tuple(names)
        return s

    def new_stream(self, label, kind, incoming, bias=None):
        s = Stream(label=label, kind=kind, k=incoming.shape[1], incoming=incoming, bias=bias)
        self.streams.append(s)
        return s

    # ------------------------------------------------------------------ consumers
    def consume(self, value, label, weight, kind):
        """A dense layer (weight (out, in)) or convolution (weight (out, in, *kernel)) reads
        ``value``: record its columns per unit, or make the stream escape."""
        if value.kind == "data":
            return
        if value.kind != "stream":
            self.escape(value, f"read by {label} after a sum or an unknown operation")
            return
        s = value.stream
        if kind == "dense":
            last = value.shape is not None and value.axis in (-1, len(value.shape) - 1)
            if weight.shape[1] != s.k * value.flat or not last:
                self.escape(value, f"read by {label} along another axis")
                return
            cols = weight.reshape(weight.shape[0], s.k, value.flat)
            out = np.moveaxis(cols, 1, -1).reshape(-1, s.k)
        else:
            if value.axis != 1 or value.flat != 1 or weight.shape[1] != s.k:
                self.escape(value, f"read by {label} along another axis")
                return
            out = np.moveaxis(weight, 1, -1).reshape(-1, s.k)
        s.events.append(("consumer", value.stage, (label, out, weight,
                                                   self.idx(label, "bias"))))

    # ------------------------------------------------------------------ layers
    def dense(self, label, mod):
        W = self.idx(label, "weight")
        b = self.idx(label, "bias")
        incoming = W.T if b is None else np.vstack([W.T, b[None, :]])
        return self.new_stream(label, "dense", incoming, b)

    def conv(self, label, mod):
        W = self.idx(label, "weight")
        b = self.idx(label, "bias")
        flat = W.reshape(W.shape[0], -1).T
        incoming = flat if b is None else np.vstack([flat, b[None, :]])
        return self.new_stream(label, "conv", incoming, b)

    def affine(self, label, weight="weight", bias="bias", layer_norm=False):
        g, b = self.idx(label, weight), self.idx(label, bias)
        if g is None or g.ndim != 1:
            return None
        incoming = g[None, :] if b is None else np.vstack([g, b])
        s = self.new_stream(label, "affine", incoming, b)
        s.layer_norm = layer_norm and b is not None
        return s

    def hyperplane(self, norm, consumer, W, b):
        """The shears of a dense layer ``consumer`` (weight and bias index arrays ``W``, ``b``)
        reading a layer norm's output (see
        :func:`paramgeo.symmetry.rules.layer_norm_hyperplane`)."""
        g, beta = self.idx(norm, "weight"), self.idx(norm, "bias")
        if g is None or beta is None or W is None or b is None:
            return
        self.reading.groups.append((f"{consumer} shears on {norm}'s hyperplane",
                                    rules.layer_norm_hyperplane(g, beta, W, b, self.n,
                                                                consumer)))

    def read_by(self, stream, label, W, b):
        """Record the dense layer ``label`` (weight (out, in) and bias index arrays) reading
        ``stream`` right after its producer."""
        if stream is not None:
            stream.events.append(("consumer", (False, (), False), (label, W, W, b)))

    def attention(self, label, mod, prefix=None):
        """Multi-head attention's rules; returns the output projection's stream."""
        import torch

        p = prefix or label
        W, b = self.idx(p, "in_proj_weight"), self.idx(p, "in_proj_bias")
        Wo, bo = self.idx(p, "out_proj.weight"), self.idx(p, "out_proj.bias")
        if (W is None or Wo is None or getattr(mod, "bias_k", None) is not None
                or not isinstance(mod, torch.nn.MultiheadAttention)):
            self.reading.notes.append(f"{label}: attention with separate or extra "
                                      "projections has no rule")
            return None
        E, H = mod.embed_dim, mod.num_heads
        d = E // H
        heads = []
        for h in range(H):
            rows = slice(h * d, (h + 1) * d)

            def proj(part, rows=rows):
                block = W[part * E:(part + 1) * E][rows].T  # (E, d)
                if b is None:
                    return block
                return np.vstack([block, b[part * E:(part + 1) * E][rows][None, :]])

            heads.append({"q": proj(0), "k": proj(1), "v": proj(2), "o": Wo[:, rows],
                          "key_bias": None if b is None else b[E:2 * E][rows],
                          "value_bias": None if b is None else b[2 * E:][rows]})
        groups, fields = rules.attention_heads(heads, bo, self.n, p)
        for h in range(H):
            self.reading.groups.append((f"{p} head {h} QK", groups[2 * h]))
            self.reading.groups.append((f"{p} head {h} VO", groups[2 * h + 1]))
        if fields:
            self.reading.groups.append((f"{p} key and value biases",
                                        rules.field_group(fields, self.n, f"R^{len(fields)}")))
        perm = np.stack([np.concatenate([hd[k].ravel() for k in ("q", "k", "v")]
                                        + [hd["o"].ravel()]) for hd in heads])
        self.perm_classes.append((f"{p} heads", perm))
        for h, hd in enumerate(heads):
            self.reading.units.append((f"{p} heads", f"{p} head {h}",
                                       hd["v"].ravel(), hd["o"].ravel(), "attention"))
        incoming = Wo.T if bo is None else np.vstack([Wo.T, bo[None, :]])
        return self.new_stream(f"{p}.out_proj", "dense", incoming, bo)

    def encoder_layer(self, label, mod):
        """nn.TransformerEncoderLayer: attention, the feed-forward neurons and the mean shifts
        of its layer norms (post-norm); the output is norm2's features (or opaque)."""
        sa = self.attention(label, mod.self_attn, f"{label}.self_attn")
        act = {1: "relu", 2: "gelu"}.get(getattr(mod, "activation_relu_or_gelu", 0))
        l1 = self.dense(f"{label}.linear1", mod.linear1)
        l2 = self.dense(f"{label}.linear2", mod.linear2)
        stage = (False, (act,) if act else ("other",), False)
        W2 = self.idx(f"{label}.linear2", "weight")
        l1.events.append(("consumer", stage, (f"{label}.linear2", W2, W2,
                                              self.idx(f"{label}.linear2", "bias"))))
        if not mod.norm_first:
            for s in (sa, l2):  # z1 = x + SA(x) and z2 = x1 + FF(x1), each read by a norm
                if s is not None:
                    s.events.append(("ln", (False, (), False), None))
            # x1 = norm1(z1) enters z2 = x1 + linear2(act(linear1(x1))) directly and through
            # linear1: norm1's bias + v, linear1's bias - W1 v and linear2's bias - v leave z2
            # unchanged, for every v (one field per feature c, v = e_c)
            beta1, b1 = self.idx(f"{label}.norm1", "bias"), self.idx(f"{label}.linear1", "bias")
            b2, W1 = self.idx(f"{label}.linear2", "bias"), self.idx(f"{label}.linear1", "weight")
            if beta1 is not None and b1 is not None and b2 is not None:
                import scipy.sparse as sp

                for c in range(len(beta1)):
                    vec = np.zeros(self.n)
                    vec[beta1[c]], vec[b2[c]] = 1.0, -1.0
                    A = sp.csr_matrix((-np.ones(len(b1)), (b1, W1[:, c])),
                                      shape=(self.n, self.n))
                    self.fields.append((A, vec, f"{label}: norm1 bias {c} through the residual "
                                                "and linear1 into the biases"))
            x1 = self.affine(f"{label}.norm1", layer_norm=True)
            self.read_by(x1, f"{label}.linear1", W1, b1)
            if x1 is not None:  # x1 also enters the residual: shears only, no rescaling
                x1.events.append(("escape", (False, (), False), "added to the residual"))
            return self.affine(f"{label}.norm2", layer_norm=True)
        # pre-norm: norm1 feeds only the attention's projections, norm2 only linear1
        self.read_by(self.affine(f"{label}.norm1", layer_norm=True), f"{label}.self_attn",
                     self.idx(f"{label}.self_attn", "in_proj_weight"),
                     self.idx(f"{label}.self_attn", "in_proj_bias"))
        self.read_by(self.affine(f"{label}.norm2", layer_norm=True), f"{label}.linear1",
                     self.idx(f"{label}.linear1", "weight"), self.idx(f"{label}.linear1", "bias"))
        for s in (sa, l2):
            if s is not None:
                s.events.append(("escape", (False, (), False), "added to the residual"))
        return None


def _activation_of(node, gm):
    import torch

    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        declared = getattr(mod, "paramgeo_activation", None)
        if declared is not None:
            return str(declared).lower(), True
        name = type(mod).__name__.lower()
        if any(True for _ in mod.parameters()):
            return "unknown", False
        return (ACTIVATION_NAMES[name], True) if name in ACTIVATION_NAMES else ("unknown", False)
    target = node.target
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    name = name.rstrip("_").lower()
    if node.op == "call_method" and name in ("contiguous", "clone", "detach", "float",
                                             "double"):
        return None, True
    if node.op in ("call_function", "call_method") and name in ACTIVATION_NAMES:
        if target in (torch.nn.functional.dropout,) or name.startswith("dropout"):
            return None, True
        return ACTIVATION_NAMES[name], True
    return "unknown", False


POOLS = {"MaxPool1d": "max", "MaxPool2d": "max", "MaxPool3d": "max", "AvgPool1d": "avg",
         "AvgPool2d": "avg", "AvgPool3d": "avg", "AdaptiveAvgPool1d": "avg",
         "AdaptiveAvgPool2d": "avg", "AdaptiveMaxPool2d": "max", "AdaptiveMaxPool1d": "max"}


def read_torch(model, probe, positions, n):
    """The :class:`Reading` of a float64 eval-mode module ``model`` on ``probe`` (a tensor);
    ``positions`` maps each parameter name to its index array (the parameter's shape) in
    theta. Returns (reading, None) or (None, reason) when the module cannot be traced."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    class Tracer(torch.fx.Tracer):
        """torch's layers and modules declaring ``paramgeo_activation`` stay leaves."""

        def is_leaf_module(self, m, qualname):
            return (getattr(m, "paramgeo_activation", None) is not None
                    or super().is_leaf_module(m, qualname))

    tracer = Tracer()
    wrapped = tracer.is_leaf_module(model, "")
    if wrapped:  # a torch layer itself: trace it as a one-layer model
        model = torch.nn.Sequential(model)
        positions = {f"0.{key}": value for key, value in positions.items()}
    try:
        gm = torch.fx.GraphModule(model, tracer.trace(model))
        with math_attention(torch):
            ShapeProp(gm).propagate(probe)
    except Exception as exc:  # noqa: BLE001 - any tracing failure means "no graph"
        first = str(exc).splitlines()[0] if str(exc) else ""
        return None, f"torch.fx could not trace the module ({type(exc).__name__}: {first[:120]})"
    reader = _Reader(positions, n)
    env = {}

    def shape_of(node):
        meta = node.meta.get("tensor_meta")
        return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None

    def arg(a):
        return env.get(a, DATA) if isinstance(a, torch.fx.Node) else DATA

    for node in gm.graph.nodes:
        args = [arg(a) for a in node.args]
        kw = [arg(a) for a in node.kwargs.values()]
        first = args[0] if args else DATA
        out = OPAQUE
        if node.op == "placeholder":
            out = DATA
        elif node.op == "get_attr":
            out = OPAQUE
        elif node.op == "output":
            for a in args + kw:
                reader.escape(a, "reaches the model's output")
            continue
        elif node.op == "call_module":
            mod = gm.get_submodule(node.target)
            label, tname = node.target, type(mod).__name__
            for a in args[1:] + kw:
                reader.escape(a, f"enters {label} as a second input")
            if isinstance(mod, torch.nn.Linear):
                reader.consume(first, label, reader.idx(label, "weight"), "dense")
                out = Value(kind="stream", stream=reader.dense(label, mod),
                            axis=len(shape_of(node)) - 1)
            elif isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)) \
                    and mod.groups == 1:
                reader.consume(first, label, reader.idx(label, "weight"), "conv")
                out = Value(kind="stream", stream=reader.conv(label, mod), axis=1)
            elif isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                out = _batchnorm(reader, label, mod, first)
            elif isinstance(mod, torch.nn.LayerNorm):
                for part in (first.parts if first.kind == "sum" else (first,)):
                    if part.kind == "stream":
                        part.stream.events.append(("ln", part.stage, label))
                s = (reader.affine(label, layer_norm=True) if len(mod.normalized_shape) == 1
                     else None)
                out = Value(kind="stream", stream=s, axis=len(shape_of(node)) - 1) if s else OPAQUE
            elif isinstance(mod, torch.nn.Embedding):
                W = reader.idx(label, "weight")
                out = Value(kind="stream", stream=reader.new_stream(label, "embed", W),
                            axis=len(shape_of(node)) - 1)
            elif isinstance(mod, torch.nn.MultiheadAttention):
                reader.escape(first, f"enters {label}")
                s = reader.attention(label, mod)
                out = Value(kind="tuple", parts=(Value(kind="stream", stream=s,
                                                  axis=-1) if s else OPAQUE,
                                            OPAQUE))
            elif isinstance(mod, torch.nn.TransformerEncoderLayer):
                reader.escape(first, f"enters {label}")
                s = reader.encoder_layer(label, mod)
                out = Value(kind="stream", stream=s, axis=len(shape_of(node)) - 1) if s else OPAQUE
            elif isinstance(mod, torch.nn.Flatten):
                out = _flatten(first, node.args[0], node, shape_of, reader, label)
            elif tname in POOLS:
                out = _pool(first, POOLS[tname], reader, label)
            else:
                act, known = _activation_of(node, gm)
                if known:
                    out = _activate(first, act)
                else:
                    reader.escape(first, f"enters {label} ({tname}), which no rule covers")
                    for a in args[1:] + kw:
                        reader.escape(a, f"enters {label} ({tname})")
                    out = _unknown_layer(reader, label, tname, mod, shape_of(node))
        else:  # call_function, call_method
            target = node.target
            name = target if isinstance(target, str) else getattr(target, "__name__", "")
            if target in (operator.add, operator.iadd) or name in ("add", "add_"):
                if all(isinstance(a, torch.fx.Node) for a in node.args[:2]):
                    out = Value(kind="sum", parts=tuple(args[:2]))
                else:
                    reader.escape(first, "shifted by a constant")
            elif (target in (operator.mul, torch.mul) or name == "mul") and len(args) == 2 \
                    and all(a.kind == "stream" for a in args) \
                    and args[0].stream.k == args[1].stream.k and args[0].axis == args[1].axis:
                # a gated unit: unit j of the product reads unit j of both factors
                for a in args:
                    reader.escape(a, "multiplied by another stream (a gated unit)")
                parts = [part for a in args for part in _unit_parts(a.stream)]
                names = [nm for a in args for nm in _unit_part_names(a.stream)]
                out = Value(kind="stream", stream=reader.custom(f"{args[0].stream.label}*"
                                                    f"{args[1].stream.label}", parts, names),
                            axis=args[0].axis)
            elif target is operator.getitem and first.kind == "tuple":
                out = first.parts[node.args[1]] if isinstance(node.args[1], int) else OPAQUE
            elif name in ("flatten", "view", "reshape"):
                out = _flatten(first, node.args[0], node, shape_of, reader, name)
            else:
                act, known = _activation_of(node, gm)
                if known:
                    out = _activate(first, act)
                else:
                    for a in args + kw:
                        reader.escape(a, f"enters {name or node.op}, which no rule covers")
        if out.kind == "stream":
            shape = shape_of(node)
            out = dataclasses.replace(out, shape=shape if isinstance(shape, tuple) else None)
        env[node] = out
    apply_rules(reader)
    if wrapped:  # the wrapper's "0." is not the user's name for anything
        _unwrap(reader.reading)
    return reader.reading, None


def _unwrap(reading):
    """Drop the leading "0." / "0 " the one-layer wrapper added to every label."""
    import re

    def fix(text):
        return re.sub(r"(^|(?<=[\s(*+,]))0[. ]", "", text) or text

    reading.groups = [(fix(name), group) for name, group in reading.groups]
    for _, group in reading.groups:
        for g in getattr(group, "factors", (group,)):
            if hasattr(g, "labels"):
                g.labels = tuple(fix(label) for label in g.labels)
    reading.units = [(fix(a), fix(b), *rest) for a, b, *rest in reading.units]
    reading.discover = [(fix(unit[0]), *unit[1:]) for unit in reading.discover]
    reading.notes = [fix(note) for note in reading.notes]


def _unit_parts(stream):
    """The per-unit parameter slices of a stream, as (k, size) index arrays."""
    if stream.kind == "custom":
        return list(stream.parts)
    return [stream.incoming.T]


def _unit_part_names(stream):
    return list(stream.part_names) if stream.kind == "custom" else [f"{stream.label} row"]


def _unknown_layer(reader, label, tname, mod, shape):
    """A parametrised layer no rule covers: when every parameter has the output's feature
    count as its first axis, its units (one row of each parameter) become a custom stream for
    structured discovery; otherwise a note."""
    params = [key for key, _ in mod.named_parameters()]
    if not params:
        return OPAQUE
    k = shape[-1] if shape else None
    parts = [reader.idx(label, key) for key in params]
    if k and all(p is not None and p.ndim >= 1 and p.shape[0] == k for p in parts):
        s = reader.custom(label, [p.reshape(k, -1) for p in parts],
                          [f"{label}.{key} row" for key in params])
        return Value(kind="stream", stream=s, axis=len(shape) - 1)
    reader.reading.notes.append(f"{label} ({tname}): no rule, and its parameters are not "
                                "sliced by its output features")
    return OPAQUE


def _activate(value, act):
    if value.kind != "stream" or act is None:
        return value if value.kind in ("stream", "data") else (OPAQUE if act else value)
    bn, acts, pooled = value.stage
    return dataclasses.replace(value, stage=(bn, acts + (act,), pooled))


def _pool(value, kind, reader, label):
    if value.kind == "data":
        return DATA
    if value.kind != "stream" or value.axis != 1:
        reader.escape(value, f"pooled by {label} along another axis")
        return OPAQUE
    bn, acts, pooled = value.stage
    return dataclasses.replace(value, stage=(bn, acts, pooled or kind == "max"))


def _flatten(value, src, node, shape_of, reader, label):
    if value.kind == "data":
        return DATA
    before, after = shape_of(src), shape_of(node)
    if (value.kind == "stream" and before and after and value.axis == 1 and len(after) == 2
            and after[0] == before[0] and after[1] == int(np.prod(before[1:]))):
        return dataclasses.replace(value, flat=int(np.prod(before[2:])), axis=1)
    if value.kind == "stream" and before == after:
        return value
    reader.escape(value, f"reshaped by {label}")
    return OPAQUE


def _batchnorm(reader, label, mod, value):
    """Batch norm in eval mode with running statistics right after a dense layer or a
    convolution joins its stream; anything else makes its own affine stream."""
    fresh = (False, (), False)
    g, b = reader.idx(label, "weight"), reader.idx(label, "bias")
    stats = mod.track_running_stats and mod.running_mean is not None
    if (value.kind == "stream" and value.stage == fresh and value.stream.bn is None
            and value.axis == 1 and value.flat == 1 and stats and g is not None
            and b is not None and value.stream.kind in ("dense", "conv")):
        s = value.stream
        mu = mod.running_mean.detach().cpu().numpy().astype(float)
        sigma = np.sqrt(mod.running_var.detach().cpu().numpy().astype(float) + mod.eps)
        s.bn = {"label": label, "gamma": g, "beta": b, "mu": mu, "sigma": sigma}
        s.events.append(("bn", fresh, label))
        return dataclasses.replace(value, stage=(True, (), False))
    reader.escape(value, f"normalised by {label}")
    s = reader.affine(label) if stats else None
    return Value(kind="stream", stream=s, axis=1) if s is not None else OPAQUE
