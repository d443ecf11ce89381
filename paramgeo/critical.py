"""Critical points of a parameterization and of a loss; strata and their poset.

A point theta is a *critical point of the parameterization* phi: R^n -> R^m when

    rank J(theta) < R,   R = generic rank of phi = max_theta rank J(theta),

the singular points of singular learning theory (Watanabe 2009, "Algebraic geometry and
statistical learning theory"). This module reads only the contract: J (``jacobian``,
``jacobian_derivative``), the symmetry generators and, where declared, the architecture graph.

Causes a critical point is given (:func:`classify`):

* ``orbit-degenerate``: the orbit dimension o(theta) = rank of the symmetry generators at theta
  drops below its generic value (a continuous stabilizer appears), as for a rank-deficient U in
  U U^T (Massart and Absil 2020).
* ``subnetwork``: the architecture graph shows hidden neurons that are *inactive* (all incoming
  or all outgoing weights zero) or *redundant* (two neurons of a layer with proportional
  incoming weight vectors: for a homogeneous activation they act as one neuron); or, for a
  factorization without a graph, the rank of the factor drops (channels vanish up to symmetry).
  This is the mechanism of the seed paper: Kohn, Marchetti, Shabir et al., "Singular learning
  and Occam's razor in deep monomial networks", where for large activation degree every
  critical point lies on a subnetwork.
* ``dependent-weights``: a dense layer's incoming weight matrix loses rank without two rows
  being proportional (widths 3,3,1: three incoming vectors in a plane); the layer factors
  through fewer linear forms. Not a subnetwork, and a critical point for small degree only.
* ``other``: rank lost beyond what the point's stratum explains (rank J(theta) below the generic
  rank of the stratum the point lies on), or with no structure to explain it. Before saying
  so, :func:`near_stratum` tests whether theta is critical because it is *close* to a stratum
  (s_R/s_1 decays like a power of the distance to it, and the power law accounts for the lost
  rank); if so the stratum's causes are given and the certificate is attached.

A neuron is *silent* when its incoming weights from non-silent neurons vanish (propagated layer
by layer); the weights out of a silent neuron are don't-cares, so redundancy and dependence
are read on incoming weights from non-silent neurons only.

Strata (:func:`strata`). A stratum is the set of parameters with a given *activity pattern*:

* networks (architecture graph: node attribute ``layer``, 0 = inputs, L = outputs; edge
  attribute ``index`` = position in theta): each hidden neuron is ``active``, ``in-zero`` (all
  incoming weights 0), ``out-zero`` (all outgoing weights 0) or ``removed`` (both). With
  ``kinds="deleted"`` (default) only ``active``/``removed`` are enumerated: the
  sub-architectures obtained by deleting hidden neurons. A neuron with one input and one
  output (a diagonal coordinate) is deleted by zeroing that coordinate pair.
* factorizations (no graph): a matrix group G in GL(r) acting on the right of blocks
  (``right``: B -> B g, ``contragredient``: B -> B g^{-T}) mixes r *channels* (the r columns).
  The pattern counts channels that vanish on the right side, the contragredient side or both,
  up to G: k_R = r - rank[right blocks stacked], k_C = r - rank[contragredient blocks
  stacked], and the number vanishing on both sides is rank(K_R^T K_C) for kernel bases K_R,
  K_C (the pairing <a, b> of kernel vectors is G-invariant). For U U^T this is the stratum
  rank U = r - k, of generic rank d (r-k) - (r-k)(r-k-1)/2.

Neurons (or channels) that are *twins* (same layer, same predecessors, same successors) are
interchangeable: swapping them with their weights is a symmetry of phi, so the pattern only
records how many twins are in each state. The closure of stratum P contains stratum Q when Q
is obtained from P by zeroing more sides; the poset is a networkx DiGraph with the covering
edges P -> Q (its transitive closure is the full closure relation); the top is the all-active
stratum. The generic rank of a stratum is max rank J over random points of it (a random point
with the stratum's weights zeroed, and proportional incoming weights for redundant groups).

Rank decisions use the one tolerance policy of :mod:`paramgeo.geometry` (``RankPolicy``):
rank = #{s_i > max(atol, rtol s_1)}; a decision with a singular value within a factor ``band``
of the tolerance is flagged ``near_singular`` with the singular value and the gap
s_rank / s_{rank+1}. A weight vector counts as zero when its norm is at most
``zero_tol * |theta|`` (default ``zero_tol = policy.rtol``).

Critical points of a loss (:func:`loss_point`): for L = ell o phi,
grad L = J^T grad ell(phi(theta)); a critical point is *true* when grad ell(phi(theta)) = 0 and
*spurious* when only J^T grad ell = 0 (created by the parameterization). The Hessian

    H = J^T Hess(ell) J + sum_i (grad ell)_i Hess(phi_i),
    (sum_i g_i Hess phi_i) v = (d/dt J(theta + t v))^T g,

is restricted to the horizontal space Q (orthonormal complement of the vertical space, which
lies in ker H at a critical point since L is constant on orbits) and its signature decides
minimum / strict saddle / degenerate (Ge, Jin, Zheng 2017, "No spurious local minima in
nonconvex low rank problems"; Levin, Kileel, Boumal 2022, "The effect of smooth
parametrizations on nonconvex optimization landscapes").
"""

import dataclasses
import itertools
import json
import math
import warnings

import numpy as np

from .errors import NumericalDoubtWarning, ParamgeoError
from .geometry import (
    DEFAULT_POLICY,
    RankPolicy,
    as_rng,
    decide_rank,
    generic_rank,
    null_basis,
    orbit_dim,
    rank_at,
    vertical_space,
)
from .results import Result

__all__ = [
    "Classification",
    "LossPoint",
    "NearStratum",
    "SearchResult",
    "Strata",
    "classify",
    "loss_point",
    "near_stratum",
    "search",
    "strata",
    "to_dot",
]

# ---------------------------------------------------------------------------- generic values

_GENERIC_CACHE = {}


def _rank(param, theta, policy):
    """rank J(theta) by :func:`paramgeo.geometry.rank_at` (the plugin's closed form if declared),
    without the doubt warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalDoubtWarning)
        return rank_at(param, theta, policy).rank


def _orbit_dim(param, theta, policy):
    """geometry.orbit_dim without the doubt warning (a doubtful orbit rank is not our verdict)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalDoubtWarning)
        return orbit_dim(param, theta, policy)


def generic_values(param, policy=None, n_points=3, seed=0):
    """(generic rank of J, generic orbit dimension): maxima over ``n_points`` random points
    (:func:`paramgeo.geometry.generic_rank`, and the orbit dimension at the same points).

    Cached per (plugin class, sizes, policy): a polynomial map attains its generic rank off a
    measure-zero set, so random points are generic almost surely.
    """
    policy = policy or DEFAULT_POLICY
    key = (type(param), tuple(sorted(param.sizes.items())), policy)
    if key not in _GENERIC_CACHE:
        rng = as_rng(seed)
        points = [param.random_point(rng) for _ in range(n_points)]
        _GENERIC_CACHE[key] = (generic_rank(param, n_points, seed, policy),
                               max(_orbit_dim(param, t, policy) for t in points))
    return _GENERIC_CACHE[key]


# ---------------------------------------------------------------------------- structure

@dataclasses.dataclass
class _Unit:
    """A hidden neuron or a factor channel: named sides, each a tuple of flat theta indices."""

    name: str
    sides: dict  # side -> tuple of indices
    preds: dict = dataclasses.field(default_factory=dict)  # predecessor -> index (neurons)
    layer: int = 0


@dataclasses.dataclass
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
        preds = {p: int(graph.edges[p, node]["index"]) for p in graph.predecessors(node)}
        succs = {s: int(graph.edges[node, s]["index"]) for s in graph.successors(node)}
        unit = _Unit(str(node), {"in": tuple(preds.values()), "out": tuple(succs.values())},
                     preds, layers[node])
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
            classes.append(_Class(label, units))
    return _Structure("network", ("in", "out"), classes, {"in": "in", "out": "out"})


def _natural(name):
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


def _matrix_factors(group):
    from .symmetry import MatrixGroupAction, ProductGroup

    factors = group.factors if isinstance(group, ProductGroup) else (group,)
    return [f for f in factors if isinstance(f, MatrixGroupAction) and f.r > 0]


def _block_label(param, blocks):
    names = []
    for start, _, _ in blocks:
        for name, sl in param.spec.slices.items():
            if sl.start == start:
                names.append(name)
    return ",".join(names) or "?"


def _factor_structure(param):
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
                    idx = []
                    for start, _, shape in blocks:
                        cols = np.arange(int(np.prod(shape))).reshape(shape)[..., j].ravel()
                        idx.extend(int(start + c) for c in cols)
                    unit_sides[f"{side}{fi}"] = tuple(idx)
            units.append(_Unit(f"{f.name} channel {j}", unit_sides))
        classes.append(_Class(f"{f.name} on {_block_label(param, f.right + f.contragredient)}",
                              units, f))
    return _Structure("factor", sides, classes, side_names)


def structure(param):
    """The units of ``param``'s strata: hidden neurons of the architecture graph if declared,
    else the channels of the matrix-group factors of its symmetry group; None if neither."""
    if param.provides("architecture"):
        return _network_structure(param)
    return _factor_structure(param)


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


# ---------------------------------------------------------------------------- strata

@dataclasses.dataclass(frozen=True)
class Strata(Result):
    """The strata of a parameterization as a poset.

    ``graph``: networkx DiGraph; node = stratum label with attributes ``generic_rank``,
    ``zeroed_params`` (parameters set to 0 on the stratum's linear representative), ``pattern``
    (JSON of the per-class state counts), ``top``; edges P -> Q for Q a maximal stratum in the
    closure of P (covering relation).
    """

    name: str
    sizes: dict
    kind: str  # "network" or "factor"
    kinds: str  # "deleted" or "all"
    generic_rank: int
    top: str
    graph: object

    def to_dict(self):
        import networkx as nx

        return {"name": self.name, "sizes": dict(self.sizes), "kind": self.kind,
                "kinds": self.kinds, "generic_rank": self.generic_rank, "top": self.top,
                "n_strata": self.graph.number_of_nodes(),
                "poset": nx.node_link_data(self.graph, edges="edges")}

    def rows(self):
        """(label, generic rank, zeroed parameters, covered strata) per stratum, top first."""
        order = sorted(self.graph.nodes,
                       key=lambda n: (-self.graph.nodes[n]["generic_rank"],
                                      self.graph.nodes[n]["zeroed_params"], n))
        return [(n, self.graph.nodes[n]["generic_rank"], self.graph.nodes[n]["zeroed_params"],
                 len(list(self.graph.successors(n)))) for n in order]

    def __str__(self):
        lines = [f"{self.name} {self.sizes}: {self.graph.number_of_nodes()} strata "
                 f"({self.kind}, {self.kinds}); generic rank {self.generic_rank}; top: {self.top}"]
        for label, rank, zeroed, covers in self.rows():
            lines.append(f"  rank {rank:>4}  zeroed {zeroed:>4}  covers {covers:>3}  {label}")
        return "\n".join(lines)

    def graphml(self):
        """The poset as GraphML text (networkx)."""
        import io

        import networkx as nx

        buf = io.BytesIO()
        nx.write_graphml(self.graph, buf)
        return buf.getvalue().decode()

    def dot(self):
        """The poset as Graphviz DOT text (written directly; no graphviz needed)."""
        return to_dot(self.graph, name=self.name)


def to_dot(graph, name="strata"):
    """Plain DOT text of a stratum poset: one node per stratum labelled with its generic rank,
    one edge per covering relation."""

    def q(s):
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"digraph {q(name)} {{", "  rankdir=TB;"]
    for node, data in graph.nodes(data=True):
        label = q(node)[:-1] + f"\\nrank {data.get('generic_rank', '?')}" + '"'
        lines.append(f"  {q(node)} [label={label}];")
    for a, b in graph.edges:
        lines.append(f"  {q(a)} -> {q(b)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def strata(param, kinds="deleted", n_points=2, seed=0, policy=None, max_strata=2000,
           progress=None):
    """Enumerate the strata of ``param`` with their generic ranks, as a poset.

    kinds: ``"deleted"`` (units active or removed: sub-architectures by deleting hidden neurons
    or factor channels) or ``"all"`` (every subset of a unit's sides zeroed: in-zero, out-zero,
    removed). The generic rank of stratum S is max rank J(theta) over ``n_points`` random theta
    in S (a random point with the pattern's weights zeroed). ``progress``: an optional callable
    ``progress(done, total)`` called after each stratum (for a progress bar).
    """
    import networkx as nx

    if kinds not in ("deleted", "all"):
        raise ParamgeoError(f"kinds must be 'deleted' or 'all', got {kinds!r}")
    policy = policy or DEFAULT_POLICY
    struct = structure(param)
    if struct is None:
        raise ParamgeoError(
            f"{param.name} has neither an architecture graph nor a matrix-group symmetry, so it "
            "defines no strata; declare `architecture` (networks) or a `symmetry` built from "
            "OrthogonalGroup/GeneralLinearGroup (factorizations)"
        )
    states_per_class = [_class_states(struct, c, kinds) for c in struct.classes]
    per_class = [list(_compositions(len(c.units), len(s)))
                 for c, s in zip(struct.classes, states_per_class)]
    total = math.prod(len(p) for p in per_class)
    if total > max_strata:
        raise ParamgeoError(
            f"{param.name} {param.sizes} has {total} strata of kind {kinds!r}, more than "
            f"max_strata={max_strata}; use kinds='deleted', smaller sizes or raise max_strata"
        )
    rng = as_rng(seed)
    R, _ = generic_values(param, policy)
    graph = nx.DiGraph()
    labels = {}
    for i, pattern in enumerate(itertools.product(*per_class)):
        label = _pattern_label(struct, pattern, states_per_class)
        sample = (lambda g, p=pattern: _zero_pattern(
            struct, param.random_point(g), p, states_per_class)[0])
        _, zeroed = _zero_pattern(struct, np.zeros(param.n), pattern, states_per_class)
        rank = _stratum_rank(param, sample, n_points, rng, policy)
        doc = {cls.label: {struct.state_name(s): c for c, s in zip(counts, states) if c}
               for cls, counts, states in zip(struct.classes, pattern, states_per_class)}
        graph.add_node(label, generic_rank=int(rank), zeroed_params=int(zeroed),
                       pattern=json.dumps(doc, sort_keys=True), top=not any(map(any, pattern)))
        labels[pattern] = label
        if progress is not None:
            progress(i + 1, total)
    # covering edges: one unit moves from state s to a state t covering s
    for pattern, label in labels.items():
        for ci, (counts, states) in enumerate(zip(pattern, states_per_class)):
            full = [frozenset()] + states
            cnt = [len(struct.classes[ci].units) - sum(counts)] + list(counts)
            for a, s in enumerate(full):
                if not cnt[a]:
                    continue
                for b, t in enumerate(full):
                    if s < t and not any(s < u < t for u in full):
                        new = list(cnt)
                        new[a] -= 1
                        new[b] += 1
                        target = list(pattern)
                        target[ci] = tuple(new[1:])
                        graph.add_edge(label, labels[tuple(target)])
    top = labels[tuple(tuple(0 for _ in s) for s in states_per_class)]
    return Strata(param.name, dict(param.sizes), struct.kind, kinds, int(R), top, graph)


# ---------------------------------------------------------------------------- classify

@dataclasses.dataclass(frozen=True)
class NearStratum(Result):
    """Certificate that a critical theta is critical *because* it is close to a stratum S.

    theta_s is theta with the nearly-satisfied conditions made exact (``conditions``); S is its
    stratum, and rank J(theta_s) = ``snapped_rank`` = the generic rank of S < R. Along the ray
    theta(t) = theta_s + t (theta - theta_s) the relevant ratio rho(t) = s_R/s_1 of J(theta(t))
    vanishes at t = 0 like c t^q; ``probe`` holds (t, rho(t)) at t = T, 2T, 4T, ``exponent`` the
    fitted q and ``predicted_ratio`` = rho(T) T^(-q), the value the power law predicts at theta
    (t = 1). The certificate holds when the two measured exponents agree and the prediction is
    below the rank tolerance: proximity to S alone accounts for the lost rank.
    """

    stratum: str
    causes: tuple  # the causes S names ("subnetwork", "dependent-weights")
    conditions: tuple  # e.g. ("h1_0 in-zero (1.3e-02)",), sizes relative to |theta|
    distance: float  # |theta - theta_s| / |theta|
    snapped_rank: int
    exponent: float
    predicted_ratio: float
    probe: tuple


@dataclasses.dataclass(frozen=True)
class Classification(Result):
    """Verdict on a point theta: regular or critical, with causes and the evidence.

    ``structure`` is "network" (architecture graph), "factor" (matrix-group symmetry) or "none";
    with "none" the parameterization defines no strata and the stratum fields are None.
    """

    name: str
    sizes: dict
    verdict: str  # "regular" or "critical"
    causes: tuple  # among "orbit-degenerate", "subnetwork", "dependent-weights", "other"
    rank: int
    generic_rank: int
    kernel_dim: int
    orbit_dim: int
    generic_orbit_dim: int
    near_singular: bool  # a singular value lies within the policy's band of the tolerance
    tol: float
    gap: float  # s_rank / s_{rank+1}
    relevant_ratio: float  # s_R / s_1 with R the generic rank (0 at a critical point)
    singular_values: np.ndarray
    structure: str  # "network", "factor" or "none"
    inactive: tuple  # ((neuron, state), ...) for networks
    redundant: tuple  # groups of neurons with proportional incoming weights
    dependent: tuple  # dense layers whose incoming weight matrix loses rank (dicts)
    stratum: object  # label of the stratum theta lies on ("full" if none proper); None: no strata
    on_proper_stratum: bool
    stratum_generic_rank: object  # int, None without strata
    rank_equals_stratum_generic: object  # bool, None without strata
    subnetwork_distance: object  # float: relative distance to the nearest subnetwork condition
    near: object  # NearStratum certificate for a critical point close to a stratum, or None
    explanation: str

    def __str__(self):
        head = f"{self.name} {self.sizes}: {self.verdict}"
        if self.causes:
            head += f" ({', '.join(self.causes)})"
        if self.near_singular:
            head += " - NEAR-SINGULAR: a singular value is within the tolerance band"
        lines = [
            head,
            f"  rank {self.rank} / generic {self.generic_rank}; kernel dim {self.kernel_dim}; "
            f"orbit dim {self.orbit_dim} (generic {self.generic_orbit_dim})",
            f"  tol {self.tol:.3g}; gap {self.gap:.3g}; s_R/s_1 {self.relevant_ratio:.3g}",
        ]
        if self.stratum is None:
            lines.append("  stratum: none (no architecture graph and no matrix-group symmetry, "
                         "so no strata are defined)")
        else:
            lines.append(f"  stratum: {self.stratum} (generic rank {self.stratum_generic_rank}, "
                         + ("equal to" if self.rank_equals_stratum_generic else "above")
                         + " the rank here)")
        if self.inactive:
            lines.append("  inactive: " + ", ".join(f"{n} ({s})" for n, s in self.inactive))
        if self.redundant:
            lines.append("  redundant: " + "; ".join("{" + ",".join(g) + "}"
                                                      for g in self.redundant))
        for d in self.dependent:
            lines.append(f"  dependent incoming weights in layer {d['layer']}: rank {d['rank']} "
                         f"of {d['of']} (s_min/s_max {d['ratio']:.1e})")
        if self.near is not None:
            lines.append(f"  near stratum: {self.near.stratum} at distance "
                         f"{self.near.distance:.1e} ({'; '.join(self.near.conditions)}); "
                         f"s_R/s_1 ~ t^{self.near.exponent:.2f} along the ray to it, "
                         f"predicting {self.near.predicted_ratio:.1e} here")
        lines.append("  " + self.explanation)
        return "\n".join(lines)


@dataclasses.dataclass
class _NetworkPoint:
    """Activity of the hidden neurons at a point, and the sizes of nearly-met conditions."""

    states: dict  # unit name -> frozenset of zero sides ("in" = silent, "out")
    groups: list  # redundant groups (tuples of unit names)
    dependent: list  # dicts: layer, rank, of, ratio, rows, cols
    live_in: dict  # unit name -> tuple of theta indices of incoming weights from live units
    near: list  # (size, kind, data) of conditions not met exactly, for snapping


def _network_point(struct, theta, zero_tol):
    """Read the activity pattern of a network at theta (sizes relative to |theta|).

    * silent (state ``in``): every incoming weight from a non-silent predecessor is zero (in
      layer order; inputs are never silent). A silent neuron outputs 0, so the weights out of it
      change neither phi nor J: they are don't-cares.
    * out-zero (state ``out``): every outgoing weight is zero.
    * redundant: non-silent neurons of a layer whose incoming weights from non-silent
      predecessors are proportional: sine of their angle (s_2/s_1 of the 2-row matrix) <= zero_tol.
    * dependent: a dense layer (every kept neuron has the same predecessors) whose incoming
      weight matrix M (one row per redundant group or single non-silent neuron, one column per
      live predecessor with a nonzero column) has numerical rank below min(rows, columns), rank
      decided by :func:`paramgeo.geometry.decide_rank` with rtol = zero_tol.
    """
    scale = max(float(np.linalg.norm(theta)), 1e-300)

    def size(idx):
        return float(np.linalg.norm(theta[list(idx)])) / scale if idx else 0.0

    states, live_in, silent, near = {}, {}, set(), []
    for u in struct.units:  # layer order
        live_in[u.name] = tuple(i for p, i in u.preds.items() if p not in silent)
        sizes = {"in": size(live_in[u.name]), "out": size(u.sides["out"])}
        states[u.name] = frozenset(s for s, v in sizes.items() if v <= zero_tol)
        if "in" in states[u.name]:
            silent.add(u.name)
        near += [(v, "zero", (u.name, s)) for s, v in sizes.items() if v > zero_tol]
    by_layer = {}
    for u in struct.units:
        if u.name not in silent:
            by_layer.setdefault(u.layer, []).append(u)
    parent = {}

    def find(a):
        while parent.get(a, a) != a:
            a = parent[a]
        return a

    keys = {}
    for layer, units in by_layer.items():
        keys[layer] = sorted({p for u in units for p in u.preds if p not in silent}, key=_natural)
        for a, b in itertools.combinations(units, 2):
            M = np.array([[theta[u.preds[k]] if k in u.preds else 0.0 for k in keys[layer]]
                          for u in (a, b)])
            s = np.linalg.svd(M, compute_uv=False)
            sine = float(s[1] / s[0]) if len(s) > 1 and s[0] > 0 else 0.0
            if sine <= zero_tol:
                parent[find(b.name)] = find(a.name)
            else:
                near.append((sine, "merge", (a.name, b.name)))
    members = {}
    for units in by_layer.values():
        for u in units:
            members.setdefault(find(u.name), []).append(u)
    groups = [tuple(u.name for u in g) for g in members.values() if len(g) > 1]
    dependent = []
    for layer, units in by_layer.items():
        rows = [u for u in units if find(u.name) == u.name]
        if len(rows) < 3 or any(set(keys[layer]) - set(u.preds) for u in rows):
            continue  # two rows are the redundancy test; sparse layers are not tested
        M = np.array([[theta[u.preds[k]] for k in keys[layer]] for u in rows])
        norms = np.linalg.norm(M, axis=0) / scale
        cols = [k for k, v in zip(keys[layer], norms) if v > zero_tol]
        if len(cols) < 2:
            continue
        M = np.array([[theta[u.preds[k]] for k in cols] for u in rows])
        of = min(len(rows), len(cols))
        d = decide_rank(M, RankPolicy(rtol=zero_tol), warn=False)
        ratio = float(d.singular_values[of - 1] / d.singular_values[0])
        entry = {"layer": layer, "rank": d.rank, "of": of, "ratio": ratio,
                 "rows": tuple(u.name for u in rows), "cols": tuple(cols)}
        if d.rank < of:
            dependent.append(entry)
        else:
            near.append((ratio, "rank", entry))
    return _NetworkPoint(states, groups, dependent, live_in, sorted(near, key=lambda c: c[0]))


def _network_label(struct, point):
    parts = []
    for cls in struct.classes:
        counts = {}
        for u in cls.units:
            state = point.states[u.name]
            if state:
                counts[state] = counts.get(state, 0) + 1
        parts.extend(_class_label(struct, cls, counts))
    parts += ["redundant {" + ",".join(g) + "}" for g in point.groups]
    parts += [f"layer {d['layer']}: incoming rank {d['rank']} of {d['of']}"
              for d in point.dependent]
    return "; ".join(parts) or "full"


def _network_sampler(struct, param, point):
    """Random points of the stratum of ``point``: a random theta, dependent layers replaced by
    random matrices of the same rank, redundant neurons' incoming weights made proportional to
    their group's first neuron, zero sides zeroed."""
    units = {u.name: u for u in struct.units}

    def sample(rng):
        theta = param.random_point(rng)
        for d in point.dependent:
            idx = np.array([[units[r].preds[c] for c in d["cols"]] for r in d["rows"]])
            scale = float(np.std(theta[idx])) or 1.0
            theta[idx] = (rng.standard_normal((len(d["rows"]), d["rank"]))
                          @ rng.standard_normal((d["rank"], len(d["cols"])))
                          ) * scale / math.sqrt(max(d["rank"], 1))
        for g in point.groups:
            base = units[g[0]]
            for other in g[1:]:
                c = rng.uniform(0.5, 1.5) * rng.choice((-1.0, 1.0))
                for key, idx in units[other].preds.items():
                    theta[idx] = c * theta[base.preds[key]] if key in base.preds else 0.0
        for name, state in point.states.items():
            for side in state:
                theta[list(units[name].sides[side])] = 0.0
        return theta

    return sample


def _point_pattern_factor(struct, theta, policy):
    """Per factor class: counts of channels vanishing on each side set, from ranks."""
    pattern, states_per_class = [], []
    for cls in struct.classes:
        f = cls.factor
        sides = [s for s in struct.sides if s in cls.units[0].sides]
        kernels = {}
        for side in sides:
            blocks = f.right if side.startswith("right") else f.contragredient
            M = np.vstack([np.reshape(theta[a:b], shape).reshape(-1, f.r)
                           for a, b, shape in blocks])
            kernels[side] = null_basis(M, policy, warn=False)[0]
        states = [frozenset(c) for k in range(1, len(sides) + 1)
                  for c in itertools.combinations(sides, k)]
        if len(sides) == 1:
            counts = (kernels[sides[0]].shape[1],)
        else:
            a, b = sides
            Ka, Kb = kernels[a], kernels[b]
            both = (decide_rank(Ka.T @ Kb, policy, warn=False).rank
                    if Ka.shape[1] and Kb.shape[1] else 0)
            counts_map = {frozenset([a]): Ka.shape[1] - both, frozenset([b]): Kb.shape[1] - both,
                          frozenset([a, b]): both}
            counts = tuple(counts_map[s] for s in states)
        pattern.append(counts)
        states_per_class.append(states)
    return tuple(pattern), states_per_class


@dataclasses.dataclass
class _PointStratum:
    label: str
    proper: bool
    generic_rank: int  # of the stratum
    causes: list  # structural causes it names: "subnetwork", "dependent-weights"
    stabilizer: bool = False  # a factor channel vanishes on every side (reflection fixes theta)
    network: object = None  # the _NetworkPoint, for networks


def _point_stratum(param, struct, theta, R, zero_tol, policy, n_points, rng):
    """The stratum theta lies on and its generic rank (R when not proper)."""
    if struct.kind == "network":
        point = _network_point(struct, theta, zero_tol)
        causes = (["subnetwork"] if point.groups or any(point.states.values()) else []) + (
            ["dependent-weights"] if point.dependent else [])
        sampler = _network_sampler(struct, param, point)
        out = _PointStratum(_network_label(struct, point), bool(causes), R, causes,
                            network=point)
    else:
        pattern, spc = _point_pattern_factor(struct, theta, policy)
        proper = any(map(any, pattern))
        stabilizer = any(c for cls, counts, states in zip(struct.classes, pattern, spc)
                         for c, st in zip(counts, states) if st == frozenset(cls.units[0].sides))

        def sampler(g):
            return _zero_pattern(struct, param.random_point(g), pattern, spc)[0]

        out = _PointStratum(_pattern_label(struct, pattern, spc), proper, R,
                            ["subnetwork"] if proper else [], stabilizer)
    if out.proper:
        out.generic_rank = _stratum_rank(param, sampler, n_points, rng, policy)
    return out


def _snap(struct, theta, point, conditions):
    """theta with the given nearly-met conditions made exact: a side zeroed, a neuron's live
    incoming weights projected on another's line, a dense layer's incoming matrix truncated to
    one rank less (SVD)."""
    units = {u.name: u for u in struct.units}
    out = theta.copy()
    for kind, data in conditions:
        if kind == "zero":
            name, side = data
            out[list(point.live_in[name] if side == "in" else units[name].sides["out"])] = 0.0
        elif kind == "merge":
            a, b = (units[n] for n in data)
            keys = [k for k in a.preds if k in b.preds]
            ia, ib = [a.preds[k] for k in keys], [b.preds[k] for k in keys]
            wa = out[ia]
            if wa @ wa > 0:
                out[ib] = wa * (wa @ out[ib]) / (wa @ wa)
        else:
            idx = np.array([[units[r].preds[c] for c in data["cols"]] for r in data["rows"]])
            U, s, Vt = np.linalg.svd(out[idx], full_matrices=False)
            s[data["of"] - 1:] = 0.0
            out[idx] = (U * s) @ Vt
    return out


def _describe(struct, conditions_with_sizes):
    names = {"zero": lambda d: f"{d[0]} {d[1]}-zero", "merge": lambda d: f"{d[0]}~{d[1]}",
             "rank": lambda d: f"layer {d['layer']} rank {d['of'] - 1}"}
    return tuple(f"{names[k](d)} ({v:.1e})" for v, k, d in conditions_with_sizes)


def near_stratum(param, theta, policy=None, zero_tol=None, snap_max=0.1, n_points=2, seed=0,
                 max_tries=6, floor=1e-12):
    """Certify that a critical theta is critical because it lies close to a stratum S.

    Candidates: the conditions of the architecture graph that theta nearly meets (a side of a
    neuron of relative norm <= ``snap_max``, two incoming vectors with sine <= ``snap_max``, a
    dense layer's incoming matrix with s_min/s_max <= ``snap_max``), tried one at a time in
    order of size, then the two and three smallest together (at most ``max_tries``). Each gives
    theta_s on a stratum S; it must be explained: rank J(theta_s) = generic rank of S < R, where
    R is the generic rank of the stratum theta itself lies on (the generic rank of phi when it
    lies on none), and R indexes the singular value s_R below.

    The test (why a power law): on the ray theta(t) = theta_s + t (theta - theta_s), J(theta(t))
    is analytic (polynomial for polynomial maps) in t, so by Rellich's theorem its singular
    values are analytic in t up to sign and those vanishing at t = 0 vanish like c t^q with an
    integer order q. The order depends on the condition and the architecture, so it is measured,
    not assumed: for a one-hidden-layer monomial net of degree k, scaling a neuron's incoming
    weights by eps gives rho ~ eps^(k-1) (its J columns are a (w.x)^(k-1) x_i), scaling its
    outgoing weight gives eps^1, a nearly proportional pair of sine delta gives delta^3 for
    two inputs; through a second hidden layer the orders grow (widths 2,2,2,1 at k = 3: an
    in-zero neuron scaled by eps = 0.1 already gives rho ~ 3e-15). rho(t) = s_R/s_1 is
    measured at t = T, 2T, 4T, T the first of 2, 4, 8, ... with rho(T) >= ``floor`` (above
    round-off; T stops at max(64, snap_max / distance), so the ray stays within about
    ``snap_max`` of theta); q1, q2 are the two slopes of log2 rho. The certificate holds when
    |q1 - q2| <= 0.5 and q1 >= 0.75 (a power law of order >= 1, not a crossing at t = 1, where
    rho ~ |t - 1| gives slopes log2 3 and log2 7/3, nor a ray that stays critical) and
    rho(T) T^(-q1), the value the law predicts at theta, is below the
    rank tolerance tol / s_1: then proximity to S alone accounts for the lost rank. A critical
    point that exists for another reason has rho(t) ~ c |t - 1| and fails one of the two tests.

    Returns a :class:`NearStratum`, or None (no candidate, or none certified). Networks only
    (architecture graph); None otherwise.
    """
    policy = policy or DEFAULT_POLICY
    zero_tol = policy.rtol if zero_tol is None else float(zero_tol)
    theta = param.as_theta(theta)
    struct = structure(param)
    if struct is None or struct.kind != "network":
        return None
    rng = as_rng(seed)
    R, _ = generic_values(param, policy)
    decision = decide_rank(param.jacobian(theta), policy, warn=False)
    s1 = float(decision.singular_values[0])
    if decision.rank >= R or s1 <= 0:
        return None
    own = _point_stratum(param, struct, theta, R, zero_tol, policy, n_points, rng)
    R = own.generic_rank  # the drop to explain is below the generic rank of theta's stratum
    if decision.rank >= R:
        return None
    threshold = decision.tol / s1
    point = own.network
    cands = [c for c in point.near if c[0] <= snap_max]
    tries = [[c] for c in cands] + [cands[:j] for j in (2, 3) if len(cands) >= j]
    scale = float(np.linalg.norm(theta))

    def rho(t, theta_s):
        s = np.linalg.svd(param.jacobian(theta_s + t * (theta - theta_s)), compute_uv=False)
        return float(s[R - 1] / s[0]) if s[0] > 0 else 0.0

    for chosen in tries[:max_tries]:
        theta_s = _snap(struct, theta, point, [(k, d) for _, k, d in chosen])
        st = _point_stratum(param, struct, theta_s, R, zero_tol, policy, n_points, rng)
        if not st.proper or st.generic_rank >= R or _rank(param, theta_s, policy) != \
                st.generic_rank:
            continue
        dist = float(np.linalg.norm(theta_s - theta)) / scale
        T, T_max = 2.0, max(64.0, snap_max / max(dist, 1e-300))
        while rho(T, theta_s) < floor and T < T_max:
            T *= 2
        probe = tuple((t, rho(t, theta_s)) for t in (T, 2 * T, 4 * T))
        if probe[0][1] < floor:
            continue  # the ray stays critical up to round-off: no decay to fit
        q1, q2 = (math.log2(probe[i + 1][1] / probe[i][1]) for i in (0, 1))
        predicted = probe[0][1] * T ** (-q1)
        if abs(q1 - q2) <= 0.5 and q1 >= 0.75 and predicted <= threshold:
            return NearStratum(st.label, tuple(st.causes), _describe(struct, chosen), dist,
                               int(st.generic_rank), float(q1), float(predicted), probe)
    return None


def classify(param, theta, policy=None, zero_tol=None, n_points=2, seed=0, snap_max=0.1):
    """Classify theta as a regular or a critical point of phi and name the causes.

    rank = rank J(theta) under the tolerance policy; R = generic rank; kernel_dim = n - rank;
    orbit_dim = rank of the symmetry generators at theta (:func:`paramgeo.geometry.orbit_dim`).
    Critical iff rank < R. Causes: ``orbit-degenerate`` if orbit_dim < its generic value (or a
    factor channel vanishes on every side: its reflection fixes theta); ``subnetwork`` if the
    point lies on a stratum with inactive or redundant neurons, or a factor losing rank without
    a stabilizer; ``dependent-weights`` if a dense layer's incoming weight matrix loses rank
    (no two rows proportional: the layer factors through fewer linear forms); ``other`` if rank
    is below the generic rank of the point's own stratum (max rank J over ``n_points`` random
    points of it) or nothing explains the drop. An ``other`` point of a network is then tested
    for proximity to a stratum (:func:`near_stratum`, conditions within ``snap_max``; 0
    disables it): if certified, ``other`` is replaced by that stratum's causes and ``near``
    holds the certificate. The stratum and whether rank equals its generic rank are reported
    for regular points too; without an architecture graph or a matrix-group symmetry there are
    no strata (``structure = "none"``, stratum fields None).
    """
    policy = policy or DEFAULT_POLICY
    zero_tol = policy.rtol if zero_tol is None else float(zero_tol)
    theta = param.as_theta(theta)
    decision = decide_rank(param.jacobian(theta), policy, warn=False)
    rank, s = decision.rank, decision.singular_values
    R, o_gen = generic_values(param, policy)
    o = _orbit_dim(param, theta, policy)
    ratio = float(s[R - 1] / s[0]) if R > 0 and s[0] > 0 else 0.0
    struct = structure(param)
    rng = as_rng(seed)
    st = (None if struct is None else
          _point_stratum(param, struct, theta, R, zero_tol, policy, n_points, rng))
    critical = rank < R
    causes, near = [], None
    if critical:
        stabilizer = st is not None and st.stabilizer
        if o < o_gen or stabilizer:
            causes.append("orbit-degenerate")
        if st is not None and st.proper and not (struct.kind == "factor" and causes):
            causes += st.causes
        if st is None or rank < st.generic_rank or not causes:
            causes.append("other")
        if "other" in causes and snap_max > 0 and st is not None:
            near = near_stratum(param, theta, policy, zero_tol, snap_max, n_points, rng)
            if near is not None:
                causes = [c for c in causes if c != "other"]
                causes += [c for c in near.causes if c not in causes]
    explanation = _explain(critical, causes, rank, R, st, near, o, o_gen)
    if decision.doubtful:
        explanation += (f"; NEAR-SINGULAR: singular value {decision.closest:.3g} vs tol "
                        f"{decision.tol:.3g} (gap {decision.gap:.3g})")
    net = st.network if st is not None else None
    inactive = tuple((u.name, struct.state_name(net.states[u.name])) for u in struct.units
                     if net.states[u.name]) if net else ()
    dist = (min([0.0] * bool(inactive or net.groups or net.dependent)
                + [c[0] for c in net.near if c[1] != "rank"], default=float("inf"))
            if net else None)
    return Classification(
        param.name, dict(param.sizes), "critical" if critical else "regular", tuple(causes),
        rank, R, param.n - rank, o, o_gen, bool(decision.doubtful), float(decision.tol),
        float(decision.gap), ratio, s, struct.kind if struct else "none", inactive,
        tuple(net.groups) if net else (),
        tuple({k: v for k, v in d.items() if k not in ("rows", "cols")} | {"neurons": d["rows"]}
              for d in net.dependent) if net else (),
        st.label if st else None, bool(st and st.proper),
        int(st.generic_rank) if st else None, (rank == st.generic_rank) if st else None,
        dist, near, explanation)


def _explain(critical, causes, rank, R, st, near, o, o_gen):
    if st is None:
        if not critical:
            return f"regular: rank equals the generic rank {R}"
        if "orbit-degenerate" in causes:
            return (f"critical: rank {rank} < {R}; the isotropy group grows: orbit dim {o} "
                    f"(generic {o_gen}); without strata the engine cannot tell whether that "
                    "accounts for the whole drop, hence also 'other'")
        return f"critical: rank {rank} < {R}, and without strata nothing explains it"
    if not critical:
        return (f"regular: rank equals the generic rank {R}"
                + (f", although theta lies on the proper stratum '{st.label}' (whose generic "
                   f"rank is {st.generic_rank})" if st.proper else ""))
    if near is not None:
        text = (f"critical: within {near.distance:.1e} of the stratum '{near.stratum}' (generic "
                f"rank {near.snapped_rank}); s_R/s_1 decays like t^{near.exponent:.2f} towards "
                f"it, which predicts {near.predicted_ratio:.1e} here, below the tolerance")
    elif "other" in causes:
        text = (f"critical: rank {rank} is below the generic rank {st.generic_rank} of its "
                f"stratum '{st.label}', and no nearby stratum accounts for it: the engine names "
                "no cause for the remaining drop")
    else:
        text = (f"critical: theta lies on the stratum '{st.label}', whose generic rank "
                f"{st.generic_rank} equals the rank here")
    if "dependent-weights" in causes and near is None:
        text += ("; a layer's incoming weights are linearly dependent with no two "
                 "proportional: the layer factors through fewer linear forms, which is not a "
                 "subnetwork")
    if "orbit-degenerate" in causes:
        text += (f"; the isotropy group grows: orbit dim {o} (generic {o_gen})"
                 + (", and channels vanishing on every side are fixed by their reflections"
                    if st.stabilizer else ""))
    return text


# ---------------------------------------------------------------------------- search

@dataclasses.dataclass(frozen=True)
class SearchResult(Result):
    """Critical points found from random starts, classified.

    ``points``: per start, the final s_R/s_1, verdict, causes, stratum, the stratum it was
    certified close to (``near``, with distance and decay exponent), and theta for critical
    points the engine could not explain.
    """

    name: str
    sizes: dict
    generic_rank: int
    starts: int
    critical: int  # verdict critical under the tolerance policy
    near_singular: int  # regular but within the tolerance band (did not reach the tolerance)
    subnetwork: int  # critical with cause subnetwork (on the stratum or certified near it)
    near_subnetwork: int  # of those, certified near rather than exactly on it
    dependent_weights: int  # critical with cause dependent-weights
    orbit_degenerate: int
    other: int  # critical with cause other
    explained: int  # critical and explained (no cause other)
    points: tuple

    def __str__(self):
        lines = [f"{self.name} {self.sizes}: {self.starts} starts, generic rank "
                 f"{self.generic_rank}",
                 f"  critical {self.critical} (subnetwork {self.subnetwork}, of which near "
                 f"{self.near_subnetwork}; dependent-weights {self.dependent_weights}; "
                 f"orbit-degenerate {self.orbit_degenerate}; other {self.other}); "
                 f"near-singular only {self.near_singular}"]
        for i, p in enumerate(self.points):
            near = (f" (near {p['near']} at {p['near_distance']:.1e}, t^{p['exponent']:.1f})"
                    if p["near"] else "")
            lines.append(f"  #{i:<3} s_R/s_1 {p['ratio']:.2e}  {p['verdict']:<8} "
                         f"{','.join(p['causes']) or '-':<28} {p['stratum']}{near}")
        return "\n".join(lines)


def _objective(param, R):
    """f(x) = log(s_R / s_1) of J at theta = x/|x|, with its gradient.

    d s_i = u_i^T dJ v_i, so grad_theta s_i = (d/dt J(theta + t v_i))^T u_i
    = ``param.hessian_vp(theta, u_i, v_i)`` (the contract's Hessian-vector product of
    <u_i, phi>); the chain rule through x -> x/|x| projects out x.
    """

    def f(x):
        nx_ = float(np.linalg.norm(x))
        theta = x / nx_
        U, s, Vt = np.linalg.svd(param.jacobian(theta), full_matrices=False)
        if s[0] <= 0 or s[R - 1] <= 0:
            return -745.0, np.zeros_like(x)
        g = np.zeros_like(x)
        for i, w in ((R - 1, 1.0), (0, -1.0)):
            gi = param.hessian_vp(theta, U[:, i], Vt[i])
            g += w * gi / s[i]
        g = (g - theta * (theta @ g)) / nx_
        return float(np.log(s[R - 1] / s[0])), g

    return f


def _newton_polish(f, x, steps=40, target=1e-15):
    """Newton's method for the root of r(theta) = s_R/s_1 on the sphere: theta <- theta -
    r grad r / |grad r|^2 (then normalised), halving the step until r decreases. L-BFGS on
    log r stalls near the minimum (log r -> -inf has an unbounded gradient); r itself vanishes
    like a distance to the critical set, so Newton converges there quickly."""
    x = x / np.linalg.norm(x)
    val, g = f(x)
    for _ in range(steps):
        r = math.exp(val)
        gr = r * g
        if r < target or not np.any(gr):
            break
        step = r * gr / (gr @ gr)
        for _ in range(30):
            xn = x - step
            xn /= np.linalg.norm(xn)
            vn, gn = f(xn)
            if vn < val:
                break
            step = step / 2
        else:
            break
        x, val, g = xn, vn, gn
    return x


def search(param, starts=20, seed=0, maxiter=100, policy=None, snap_max=0.1, progress=None):
    """Look for critical points of phi from ``starts`` random starts and classify each one.

    Minimises log(s_R(J(theta)) / s_1(J(theta))) over the unit sphere |theta| = 1 (theta =
    x/|x|, so the search cannot shrink theta to 0) with scipy's L-BFGS-B, R the generic rank,
    the gradient from ``param.hessian_vp``, then polishes with Newton steps on
    s_R/s_1 (:func:`_newton_polish`). Each end point is classified with the strict policy
    (:func:`classify`). The optimiser often approaches a subnetwork without reaching it
    exactly; :func:`classify` then certifies the point as near a stratum (:func:`near_stratum`,
    conditions within ``snap_max``) when the decay of s_R/s_1 towards that stratum accounts for
    its lost rank, and otherwise counts it ``other`` (its theta is returned).
    ``progress``: optional callable ``progress(done, total)`` called after each start (e.g. the
    bar of ``paramgeo.cli._common.progress_bar``).
    """
    from scipy.optimize import minimize

    policy = policy or DEFAULT_POLICY
    rng = as_rng(seed)
    R, _ = generic_values(param, policy)
    if R == 0:
        raise ParamgeoError(f"{param.name} {param.sizes} has generic rank 0: nothing to search")
    if starts < 1:
        raise ParamgeoError(f"starts must be a positive integer, got {starts}")
    f = _objective(param, R)
    points = []
    counts = dict.fromkeys(["critical", "near_singular", "subnetwork", "near", "dependent",
                            "orbit", "other"], 0)
    for i in range(starts):
        x0 = param.random_point(rng)
        with np.errstate(all="ignore"):
            res = minimize(f, x0, jac=True, method="L-BFGS-B",
                           options={"maxiter": maxiter, "ftol": 1e-15, "gtol": 1e-12})
            theta = _newton_polish(f, res.x)
        c = classify(param, theta, policy, seed=rng, snap_max=snap_max)
        point = {"ratio": c.relevant_ratio, "verdict": c.verdict, "rank": c.rank,
                 "causes": list(c.causes), "stratum": c.stratum,
                 "stratum_generic_rank": c.stratum_generic_rank,
                 "near": c.near.stratum if c.near else None,
                 "near_distance": c.near.distance if c.near else None,
                 "exponent": c.near.exponent if c.near else None,
                 "subnetwork_distance": c.subnetwork_distance, "near_singular": c.near_singular,
                 "iterations": int(res.nit)}
        if c.verdict == "critical":
            counts["critical"] += 1
            counts["subnetwork"] += "subnetwork" in c.causes
            counts["near"] += "subnetwork" in c.causes and c.near is not None
            counts["dependent"] += "dependent-weights" in c.causes
            counts["orbit"] += "orbit-degenerate" in c.causes
            counts["other"] += "other" in c.causes
            if "other" in c.causes:
                point["theta"] = theta.tolist()
        elif c.near_singular:
            counts["near_singular"] += 1
        points.append(point)
        if progress is not None:
            progress(i + 1, starts)
    return SearchResult(param.name, dict(param.sizes), int(R), int(starts), counts["critical"],
                        counts["near_singular"], counts["subnetwork"], counts["near"],
                        counts["dependent"], counts["orbit"], counts["other"],
                        counts["critical"] - counts["other"], tuple(points))


# ---------------------------------------------------------------------------- losses

@dataclasses.dataclass(frozen=True)
class LossPoint(Result):
    """First- and second-order information of L = ell o phi at theta."""

    name: str
    grad_norm: float  # |J^T grad ell|
    loss_grad_norm: float  # |grad ell(phi(theta))|
    kind: str  # "true critical", "spurious critical" or "not critical"
    signature: tuple  # (positive, negative, zero) eigenvalues of H on the horizontal space
    verdict: str  # "minimum", "strict saddle", "degenerate" (or "not critical")
    horizontal_dim: int
    eigenvalues: np.ndarray
    value: float
    tol: float = 0.0  # eigenvalues with |lambda| <= tol count as zero (the rank policy)
    near_degenerate: bool = False  # some |lambda| within the policy's band of tol
    closest: float = float("nan")  # the |lambda| closest to tol (log scale)

    def __str__(self):
        p, n, z = self.signature
        text = (f"{self.name}: {self.kind}; {self.verdict}\n"
                f"  L = {self.value:.6g}, |grad L| = {self.grad_norm:.3g}, "
                f"|grad ell| = {self.loss_grad_norm:.3g}\n"
                f"  Hessian on the horizontal space (dim {self.horizontal_dim}): "
                f"{p} positive, {n} negative, {z} zero")
        if self.near_degenerate:
            text += (f"\n  NEAR-DEGENERATE: eigenvalue {self.closest:.3g} vs tol {self.tol:.3g}; "
                     "the signature is decided near the tolerance")
        return text


def loss_hessian(param, loss, theta):
    """The n x n Hessian of L = ell o phi: J^T Hess(ell) J + sum_i g_i Hess(phi_i).

    The second term, with g = grad ell(phi(theta)) held fixed, is built column by column from
    the contract's Hessian-vector product: column j is ``param.hessian_vp(theta, g, e_j)`` =
    (d/dt J(theta + t e_j))^T g (autograd reverse over reverse unless the plugin overrides it);
    the tests compare it with ``jacobian_derivative`` and with autograd's Hessian of L."""
    theta = param.as_theta(theta)
    beta = np.asarray(param.forward_flat(theta))
    g = np.asarray(loss.grad(beta))
    J = param.jacobian(theta)
    H = J.T @ np.asarray(loss.hessian(beta)) @ J
    second = np.column_stack([param.hessian_vp(theta, g, e) for e in np.eye(param.n)])
    H = H + second
    return 0.5 * (H + H.T)


def loss_point(param, loss, theta, gtol=1e-8, policy=None):
    """Critical-point analysis of L = ell o phi at theta.

    grad L = J^T g with g = grad ell(phi(theta)). theta is critical when |grad L| <= gtol;
    *true* when also |g| <= gtol, *spurious* otherwise (the parameterization created it).
    The Hessian H (:func:`loss_hessian`) is restricted to the horizontal space
    Q = (vertical space)^perp, H_Q = Q^T H Q; its eigenvalues are counted zero when
    |lambda| <= max(atol, rtol max|lambda|): the rank of H_Q decided by the one tolerance
    policy (:func:`paramgeo.geometry.decide_rank` on |lambda|). No negative and no zero
    eigenvalue -> minimum (strict on the quotient), a negative one -> strict saddle, else
    degenerate. When some |lambda| lies within the policy's band of the tolerance the
    signature is doubtful: ``near_degenerate`` is set, the text says so, and a
    NumericalDoubtWarning names the figures.
    """
    from .losses import pullback

    policy = policy or DEFAULT_POLICY
    theta = param.as_theta(theta)
    value, grad = pullback(param, loss)
    gL = np.asarray(grad(theta))
    g = np.asarray(loss.grad(np.asarray(param.forward_flat(theta))))
    gn, ln = float(np.linalg.norm(gL)), float(np.linalg.norm(g))
    if gn <= gtol:
        kind = "true critical" if ln <= gtol else "spurious critical"
    else:
        kind = "not critical"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        V = vertical_space(param, theta, policy)
    Q = null_basis(V.T, policy, warn=False)[0] if V.shape[1] else np.eye(param.n)
    HQ = Q.T @ loss_hessian(param, loss, theta) @ Q
    lam = np.linalg.eigvalsh(0.5 * (HQ + HQ.T))
    decision = decide_rank(np.abs(lam), policy, what="the Hessian on the horizontal space")
    tol = decision.tol
    pos, neg = int(np.sum(lam > tol)), int(np.sum(lam < -tol))
    zero = int(lam.size - pos - neg)
    if kind == "not critical":
        verdict = "not critical"
    elif neg:
        verdict = "strict saddle"
    elif zero:
        verdict = "degenerate"
    else:
        verdict = "minimum"
    return LossPoint(param.name, gn, ln, kind, (pos, neg, zero), verdict, int(Q.shape[1]), lam,
                     float(value(theta)), float(tol), bool(decision.doubtful),
                     float(decision.closest))
