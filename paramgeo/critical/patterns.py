"""What the strata are read from: the generic rank and orbit dimension of phi, the hidden
neurons of an architecture graph or the channels of a matrix-group factorization (with their
twins), and activity patterns of them.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from ..errors import NumericalDoubtWarning, ParamgeoError
from ..geometry.jacobian import generic_rank, orbit_dim, rank_at
from ..linalg.numerics import as_rng, policy_of

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..contract.parameterization import Parameterization
    from ..linalg.numerics import RankPolicy


# ---------------------------------------------------------------------------- generic values

_GENERIC_CACHE: dict = {}


def _rank(param, theta, policy):
    """rank J(theta) on the route :func:`paramgeo.geometry.rank_at` picks (closed form, dense
    SVD or the matrix-free certificate), without the doubt warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalDoubtWarning)  # a kink report, if any
        return rank_at(param, theta, policy, warn=False).rank


def _orbit_dim(param, theta, policy):
    """geometry.orbit_dim without the doubt warning (a doubtful orbit rank is not our verdict)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalDoubtWarning)
        return orbit_dim(param, theta, policy)


def generic_values(param: Parameterization, policy: Optional[RankPolicy] = None, n_points: int = 3,
                   seed: int = 0) -> tuple[int, int]:
    """(generic rank of J, generic orbit dimension): maxima over ``n_points`` random points
    (:func:`paramgeo.geometry.generic_rank`, and the orbit dimension at the same points).

    Cached per (plugin class, sizes, policy): a polynomial map attains its generic rank off a
    measure-zero set, so random points are generic almost surely.
    """
    policy = policy_of(param, policy)
    key = (type(param), tuple(sorted(param.sizes.items())), policy)
    if key not in _GENERIC_CACHE:
        rng = as_rng(seed)
        points = [param.random_point(rng) for _ in range(n_points)]
        _GENERIC_CACHE[key] = (generic_rank(param, n_points, seed, policy),
                               max(_orbit_dim(param, t, policy) for t in points))
    return _GENERIC_CACHE[key]


# ---------------------------------------------------------------------------- structure

@dataclasses.dataclass(kw_only=True)
class _Unit:
    """A hidden neuron or a factor channel: named sides, each a tuple of flat theta indices."""

    name: str
    sides: dict  # side -> tuple of indices
    preds: dict = dataclasses.field(default_factory=dict)  # predecessor -> index (neurons)
    layer: int = 0


@dataclasses.dataclass(kw_only=True)
class _Class:
    label: str
    units: list
    factor: object = None  # the MatrixGroupAction for a channel class


class _Structure:
    """The units a parameterization's strata are made of (neurons, or channels of a factor)."""

    def __init__(self, kind, sides, classes, side_names):
        self.kind, self.sides, self.classes = kind, tuple(sides), classes
        self.side_names = side_names  # side -> display name

    @property
    def units(self):
        """All units, classes in order (for networks: by layer)."""
        return [u for cls in self.classes for u in cls.units]

    def states(self, kinds):
        """Allowed states (frozensets of zeroed sides) other than active, in a fixed order."""
        full = frozenset(self.sides)
        if kinds == "deleted":
            return [full]
        subsets = [frozenset(c) for k in range(1, len(self.sides) + 1)
                   for c in itertools.combinations(self.sides, k)]
        return subsets

    def state_name(self, state):
        if not state:
            return "active"
        if state == frozenset(self.sides):
            return "removed"
        return "+".join(self.side_names[s] for s in self.sides if s in state) + "-zero"


def _network_structure(param):
    graph = param.architecture()
    layers = {node: int(data["layer"]) for node, data in graph.nodes(data=True)}
    if not layers:
        raise ParamgeoError(f"{param.name}: the architecture graph has no nodes")
    top = max(layers.values())
    hidden = sorted((n for n, l in layers.items() if 0 < l < top),
                    key=lambda n: (layers[n], _natural(n)))
    groups = {}
    for node in hidden:
        data = graph.nodes[node]
        if "inputs" in data:  # a unit read from a computational graph: its positions given
            cls = data.get("unit_class", layers[node])
            preds = {f"{cls}<{i}": int(k) for i, k in enumerate(data["inputs"])}
            succs = {f"{cls}>{i}": int(k) for i, k in enumerate(data.get("outputs", ()))}
        else:
            preds = {p: int(graph.edges[p, node]["index"]) for p in graph.predecessors(node)}
            succs = {s: int(graph.edges[node, s]["index"]) for s in graph.successors(node)}
        unit = _Unit(name=str(node),
                     sides={"in": tuple(preds.values()), "out": tuple(succs.values())}, preds=preds,
                     layer=layers[node])
        twin = (layers[node], frozenset(preds), frozenset(succs))
        groups.setdefault(twin, []).append(unit)
    per_layer = {}
    for (layer, _, _), units in groups.items():
        per_layer.setdefault(layer, []).append(units)
    classes = []
    for layer in sorted(per_layer):
        for units in per_layer[layer]:
            if len(units) == 1:
                label = units[0].name
            elif len(per_layer[layer]) == 1:
                label = f"layer {layer}"
            else:
                label = f"layer {layer} ({','.join(u.name for u in units)})"
            classes.append(_Class(label=label, units=units))
    return _Structure("network", ("in", "out"), classes, {"in": "in", "out": "out"})


def _natural(name):
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


def _matrix_factors(group):
    from ..symmetry import MatrixGroupAction, ProductGroup

    factors = group.factors if isinstance(group, ProductGroup) else (group,)
    return [f for f in factors if isinstance(f, MatrixGroupAction) and f.r > 0]


def _block_label(param, blocks):
    from ..symmetry import block_index

    names = []
    for block in blocks:
        idx = block_index(block)
        for name, sl in param.spec.slices.items():
            if sl.start <= idx.min() < sl.stop and name not in names:
                names.append(name)
    return ",".join(names) or "?"


def _factor_structure(param):
    from ..symmetry import block_index

    if not param.provides("symmetry"):
        return None
    factors = _matrix_factors(param.symmetry())
    if not factors:
        return None
    classes, sides, side_names = [], [], {}
    for fi, f in enumerate(factors):
        for side, blocks in (("right", f.right), ("contra", f.contragredient)):
            if blocks:
                key = f"{side}{fi}"
                sides.append(key)
                side_names[key] = _block_label(param, blocks)
        units = []
        for j in range(f.r):
            unit_sides = {}
            for side, blocks in (("right", f.right), ("contra", f.contragredient)):
                if blocks:
                    unit_sides[f"{side}{fi}"] = tuple(
                        int(i) for block in blocks for i in block_index(block)[:, j])
            units.append(_Unit(name=f"{f.name} channel {j}", sides=unit_sides))
        classes.append(_Class(
            label=f"{f.name} on {_block_label(param, f.right + f.contragredient)}", units=units,
            factor=f))
    return _Structure("factor", sides, classes, side_names)


def _all_linear(graph):
    """Whether every hidden neuron of an architecture graph has a linear activation."""
    from ..symmetry import ACTIVATIONS

    layers = dict(graph.nodes(data="layer"))
    top = max(layers.values(), default=0)
    return all(ACTIVATIONS.get(str(graph.nodes[v].get("activation")).lower()) == "linear"
               or (str(graph.nodes[v].get("activation")).lower() == "power"
                   and graph.nodes[v].get("degree") == 1)
               for v, layer in layers.items() if 0 < layer < top)


def structure(param: Parameterization) -> Optional[_Structure]:
    """The units of ``param``'s strata: hidden neurons of the architecture graph if declared,
    else the channels of the matrix-group factors of its symmetry group; None if neither. A
    network whose hidden neurons are all linear (activation "identity") with a matrix-group
    symmetry (GL(h) of its layers) is read as factors: its strata are rank drops of the weight
    matrices, not neurons."""
    if param.provides("architecture"):
        graph = param.architecture()
        if not (_all_linear(graph) and param.provides("symmetry")
                and _matrix_factors(param.symmetry())):
            return _network_structure(param)
    return _factor_structure(param)


def _block_name(param, block):
    """The spec blocks a matrix-group block covers: ``W1`` for a whole block (or its
    transpose), ``WQ[1]`` for the slice h = 1 of a (H, d, r) block, joined by "," (a weight
    with its bias row: ``W1,b1``)."""
    from ..symmetry import block_index

    idx = np.unique(block_index(block))
    names = []
    for name, sl in param.spec.slices.items():
        inside = idx[(idx >= sl.start) & (idx < sl.stop)]
        if not inside.size:
            continue
        shape = param.spec.blocks[name]
        if inside.size == sl.stop - sl.start:
            names.append(name)
        elif len(shape) > 1 and inside.size * shape[0] == sl.stop - sl.start:
            names.append(f"{name}[{(int(inside[0]) - sl.start) // inside.size}]")
        else:
            names.append(f"{name}[part]")
    return ",".join(names) or "?"


def factor_rank_drops(param: Parameterization, struct: _Structure, theta: ArrayLike,
                      policy: Optional[RankPolicy],
                      seed: Union[int, np.random.Generator, None] = 0
                      ) -> tuple[tuple[str, int, int], ...]:
    """For a factor structure: (block, rank, generic rank) of every block a matrix factor acts
    on whose matrix (the block seen with the group's r columns) has lower rank at theta than at
    a random point, e.g. ("W1", 2, 4) where the weight W_1 of a deep linear network lost rank.
    A block acted on by two factors (W2 between two hidden layers) is reported once."""
    from ..linalg.numerics import decide_rank
    from ..symmetry import block_index, block_matrix

    generic_point = param.random_point(as_rng(seed))
    out, seen = [], set()
    for cls in struct.classes:
        f = cls.factor
        for block in f.right + f.contragredient:
            key = tuple(np.unique(block_index(block)))
            if key in seen:
                continue
            seen.add(key)
            rank = decide_rank(block_matrix(theta, block), policy, warn=False).rank
            generic = decide_rank(block_matrix(generic_point, block), policy, warn=False).rank
            if rank < generic:
                out.append((_block_name(param, block), int(rank), int(generic)))
    return tuple(out)


# ---------------------------------------------------------------------------- patterns

def _class_states(struct, cls, kinds):
    unit_sides = frozenset(cls.units[0].sides)
    return [s for s in struct.states(kinds) if s <= unit_sides and s]


def _compositions(total, parts):
    """All tuples of ``parts`` non-negative ints with sum <= total."""
    for counts in itertools.product(range(total + 1), repeat=parts):
        if sum(counts) <= total:
            yield counts


def _pattern_label(struct, pattern, states_per_class):
    parts = []
    for cls, counts, states in zip(struct.classes, pattern, states_per_class):
        parts.extend(_class_label(struct, cls, {s: c for c, s in zip(counts, states) if c}))
    return "; ".join(parts) or "full"


def _class_label(struct, cls, counts):
    """['layer 1: 1 in-zero, 1 removed'] from {state: count} (no count for a single unit)."""
    if not counts:
        return []
    order = sorted(counts, key=lambda s: (len(s), [struct.sides.index(x) for x in s]))
    items = [struct.state_name(s) if len(cls.units) == 1
             else f"{counts[s]} {struct.state_name(s)}" for s in order]
    return [f"{cls.label}: {', '.join(items)}"]


def _zero_pattern(struct, theta, pattern, states_per_class):
    """Zero the sides the pattern prescribes, on the first units of each class."""
    theta = theta.copy()
    zeroed = set()
    for cls, counts, states in zip(struct.classes, pattern, states_per_class):
        k = 0
        for c, s in zip(counts, states):
            for unit in cls.units[k:k + c]:
                for side in s:
                    zeroed.update(unit.sides[side])
            k += c
    idx = np.fromiter(zeroed, dtype=int, count=len(zeroed))
    theta[idx] = 0.0
    return theta, len(zeroed)


def _stratum_rank(param, sampler, n_points, rng, policy):
    return max(_rank(param, sampler(rng), policy) for _ in range(n_points))
