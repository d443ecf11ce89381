"""The strata of a parameterization and their poset.

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
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..errors import ParamgeoError
from ..linalg.numerics import as_rng, policy_of
from ..results import Result, title
from .patterns import (
    _class_states,
    _compositions,
    _pattern_label,
    _stratum_rank,
    _zero_pattern,
    generic_values,
    structure,
)

if TYPE_CHECKING:
    from os import PathLike
    from pathlib import Path

    import networkx as nx

    from ..linalg.numerics import RankPolicy
    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class Strata(Result):
    """The strata of a parameterization as a poset.

    Attributes:
        name: the plugin's name.
        sizes: its sizes.
        kind: "network" (architecture graph) or "factor" (matrix-group symmetry).
        kinds: "deleted" or "all" (what was enumerated).
        generic_rank: the generic rank of phi.
        top: the label of the full stratum.
        graph: a networkx DiGraph: node = stratum label with attributes ``generic_rank``,
            ``zeroed_params`` (parameters set to 0 on its linear representative), ``pattern``
            (JSON of the per-class state counts) and ``top``; edges P -> Q for Q a maximal
            stratum in the closure of P (the covering relation).
    """

    name: str
    sizes: dict
    kind: str
    kinds: str
    generic_rank: int
    top: str
    graph: Any

    def to_dict(self) -> dict[str, Any]:
        import networkx as nx

        return {"name": self.name, "sizes": dict(self.sizes), "kind": self.kind,
                "kinds": self.kinds, "generic_rank": self.generic_rank, "top": self.top,
                "n_strata": self.graph.number_of_nodes(),
                "poset": nx.node_link_data(self.graph, edges="edges")}

    def rows(self) -> list[tuple[str, int, int, int]]:
        """(label, generic rank, zeroed parameters, covered strata) per stratum, top first."""
        order = sorted(self.graph.nodes,
                       key=lambda n: (-self.graph.nodes[n]["generic_rank"],
                                      self.graph.nodes[n]["zeroed_params"], n))
        return [(n, self.graph.nodes[n]["generic_rank"], self.graph.nodes[n]["zeroed_params"],
                 len(list(self.graph.successors(n)))) for n in order]

    def __str__(self):
        lines = [f"{title(self.name, self.sizes)}: {self.graph.number_of_nodes()} strata "
                 f"({self.kind}, {self.kinds}); generic rank {self.generic_rank}; top: {self.top}"]
        for label, rank, zeroed, covers in self.rows():
            lines.append(f"  rank {rank:>4}  zeroed {zeroed:>4}  covers {covers:>3}  {label}")
        return "\n".join(lines)

    def graphml(self) -> str:
        """The poset as GraphML text (networkx)."""
        import io

        import networkx as nx

        buf = io.BytesIO()
        nx.write_graphml(self.graph, buf)
        return buf.getvalue().decode()

    def dot(self) -> str:
        """The poset as Graphviz DOT text (written directly; no graphviz needed)."""
        return to_dot(self.graph, name=self.name)

    def plot(self, path: str | PathLike[str], *, title: Optional[str] = None) -> Path:
        """Draw the poset (PNG, SVG or PDF by the suffix of ``path``; needs matplotlib): one box
        per stratum at the height of its generic rank, an arrow from each stratum to the strata
        it covers (the maximal strata in its closure). Returns the path."""
        from ..io.files import check_plot_path, save_figure
        from ..dynamics.trajectory import _pyplot_figure

        path = check_plot_path(path)
        g = self.graph
        levels: dict[int, list[str]] = {}
        for node in sorted(g.nodes, key=lambda n: (g.nodes[n]["zeroed_params"], n)):
            levels.setdefault(g.nodes[node]["generic_rank"], []).append(node)
        widest = max(len(v) for v in levels.values())
        ranks = sorted(levels)
        pos: dict[str, tuple[float, int]] = {}
        for y, rank in enumerate(ranks):
            row = levels[rank]
            for i, node in enumerate(row):
                pos[node] = ((i + 0.5) / len(row) * widest, y)
        fig = _pyplot_figure((max(6.0, 2.6 * widest), max(3.0, 1.3 * len(ranks) + 1)))
        ax = fig.subplots()
        for a, b in g.edges:
            level = pos[a][1] == pos[b][1]  # same generic rank: bend the arrow off the row
            ax.annotate("", xy=pos[b], xytext=pos[a],
                        arrowprops={"arrowstyle": "-|>", "color": "0.45", "shrinkA": 16,
                                    "shrinkB": 16, "mutation_scale": 12,
                                    "connectionstyle": f"arc3,rad={0.35 if level else 0.0}"})
        for node, (x, y) in pos.items():
            label = node.replace("; ", "\n").replace(", ", ",\n")
            ax.text(x, y, f"{label}\nrank {g.nodes[node]['generic_rank']}", ha="center",
                    va="center", fontsize=8,
                    bbox={"boxstyle": "round", "fc": "C1" if node == self.top else "w",
                          "ec": "0.3", "alpha": 0.9})
        ax.set_yticks(range(len(ranks)), [str(r) for r in ranks])
        ax.set_ylabel("generic rank of the stratum")
        ax.set_xticks([])
        ax.set_xlim(-0.2, widest + 0.2)
        ax.set_ylim(-0.6, len(ranks) - 0.4)
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
        sizes = " ".join(f"{k}={v}" for k, v in self.sizes.items())
        ax.set_title(title or f"strata of {self.name} {sizes} ({self.kinds}): "
                              f"{g.number_of_nodes()} strata\narrow: to a maximal stratum in "
                              "the closure", fontsize=10)
        fig.tight_layout()
        save_figure(fig, path)
        return path


def to_dot(graph: nx.DiGraph, name: str = "strata") -> str:
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


def strata(param: Parameterization, kinds: str = "deleted", n_points: int = 2, seed: int = 0,
           policy: Optional[RankPolicy] = None, max_strata: int = 2000,
           progress: Optional[Callable[[int, int], None]] = None) -> Strata:
    """Enumerate the strata of ``param`` with their generic ranks, as a poset.

    A stratum is a sub-architecture (hidden neurons or factor channels deleted, or with some of
    their sides zeroed); its generic rank is max rank J(theta) over ``n_points`` random theta in
    it (random points with the pattern's weights zeroed). Edges P -> Q for Q a maximal stratum
    in the closure of P (docs/critical.md).

    Args:
        param: a parameterization with an architecture graph or a matrix-group symmetry.
        kinds: "deleted" (units active or removed) or "all" (every subset of a unit's sides
            zeroed: in-zero, out-zero, removed).
        n_points: random points per stratum.
        seed: seed of those points.
        policy: the tolerance policy of the ranks; None: the default.
        max_strata: refuse to enumerate more strata than this.
        progress: called as progress(done, total) after each stratum.

    Returns:
        The :class:`Strata` (``graph``, a networkx DiGraph of the strata).

    Raises:
        ParamgeoError: unknown kinds, no strata to enumerate, or more than ``max_strata``.

    Examples:
        >>> import paramgeo
        >>> from paramgeo.critical import strata
        >>> found = strata(paramgeo.get("uut", d=3, r=2))
        >>> sorted(found.graph.nodes(data="generic_rank"))
        [('O(2) on U: 1 removed', 3), ('O(2) on U: 2 removed', 0), ('full', 5)]
    """
    import networkx as nx

    if kinds not in ("deleted", "all"):
        raise ParamgeoError(f"kinds must be 'deleted' or 'all', got {kinds!r}")
    policy = policy_of(param, policy)
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
    return Strata(name=param.name, sizes=dict(param.sizes), kind=struct.kind, kinds=kinds,
                  generic_rank=int(R), top=top, graph=graph)
