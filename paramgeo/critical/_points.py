"""The stratum a point lies on: the activity of a network's hidden neurons (silent, out-zero,
redundant, dependent layers) or the channel pattern of a factorization, with the nearly-met
conditions that :func:`paramgeo.critical.near_stratum` may snap, and the stratum's generic rank.
"""

import dataclasses
import itertools
import math

import numpy as np

from ..linalg.numerics import RankPolicy, decide_rank, null_basis
from .patterns import _class_label, _natural, _pattern_label, _stratum_rank, _zero_pattern


@dataclasses.dataclass(kw_only=True)
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
    return _NetworkPoint(states=states, groups=groups, dependent=dependent, live_in=live_in,
                         near=sorted(near, key=lambda c: c[0]))


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
    from ..symmetry import block_matrix

    pattern, states_per_class = [], []
    for cls in struct.classes:
        f = cls.factor
        sides = [s for s in struct.sides if s in cls.units[0].sides]
        kernels = {}
        for side in sides:
            blocks = f.right if side.startswith("right") else f.contragredient
            M = np.vstack([block_matrix(theta, block) for block in blocks])
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


@dataclasses.dataclass(kw_only=True)
class _PointStratum:
    label: str
    proper: bool
    generic_rank: int  # of the stratum
    causes: list  # structural causes it names: "subnetwork", "dependent-weights", "factor-rank"
    network: object = None  # the _NetworkPoint, for networks


def _point_stratum(param, struct, theta, R, zero_tol, policy, n_points, rng):
    """The stratum theta lies on and its generic rank (R when not proper)."""
    if struct.kind == "network":
        point = _network_point(struct, theta, zero_tol)
        causes = (["subnetwork"] if point.groups or any(point.states.values()) else []) + (
            ["dependent-weights"] if point.dependent else [])
        sampler = _network_sampler(struct, param, point)
        out = _PointStratum(label=_network_label(struct, point), proper=bool(causes),
                            generic_rank=R, causes=causes, network=point)
    else:
        pattern, spc = _point_pattern_factor(struct, theta, policy)
        proper = any(map(any, pattern))

        def sampler(g):
            return _zero_pattern(struct, param.random_point(g), pattern, spc)[0]

        out = _PointStratum(label=_pattern_label(struct, pattern, spc), proper=proper,
                            generic_rank=R, causes=["factor-rank"] if proper else [])
    if out.proper:
        out.generic_rank = _stratum_rank(param, sampler, n_points, rng, policy)
    return out
