"""Benchmark rows for the critical-point engine against the naive route.

Naive route: the autograd dense Jacobian (``paramgeo.Parameterization.jacobian``, bypassing the
plugin's closed form) and a full SVD every time, including the generic rank (3 random points)
recomputed for every query, and for strata every subset of hidden neurons enumerated separately
(no twin reduction).

Rows:
* classify at a random point of a monomial network, widths (6, 10, 10, 1), degree 3 (2002
  coefficients, 170 weights): paramgeo.critical.classify (closed-form J, singular values only,
  generic rank cached per plugin and sizes) vs naive rank + generic rank;
* strata enumeration, widths (3, 4, 4, 1), degree 3: paramgeo.critical.strata (twin neurons
  counted, 25 strata) vs the 2^8 subsets of hidden neurons, each rank by autograd + full SVD.
Both sides return the same numbers (ranks), checked in the 'max rel' column.
"""

import itertools

import numpy as np

import paramgeo
from paramgeo import Parameterization
from paramgeo.critical import classify, strata


def naive_rank(param, theta):
    J = Parameterization.jacobian(param, theta)
    _, s, _ = np.linalg.svd(J, full_matrices=True)
    return int(np.sum(s > 1e-9 * s[0]))


def bench(row, repeats):
    rng = np.random.default_rng(0)
    p = paramgeo.get("monomial", widths=(6, 10, 10, 1), degree=3)
    theta = p.random_point(rng)

    def naive_classify():
        g = np.random.default_rng(1)
        generic = max(naive_rank(p, p.random_point(g)) for _ in range(3))
        return np.array([naive_rank(p, theta), generic])

    def fast_classify():
        c = classify(p, theta)
        return np.array([c.rank, c.generic_rank])

    row(f"classify monomial (6,10,10,1) k=3 (m={p.m}, n={p.n})", fast_classify, naive_classify,
        max(2, repeats // 5))

    q = paramgeo.get("monomial", widths=(3, 4, 4, 1), degree=3)
    graph = q.architecture()
    hidden = {1: [f"h1_{j}" for j in range(4)], 2: [f"h2_{j}" for j in range(4)]}

    def naive_strata():
        g = np.random.default_rng(2)
        ranks = {}
        for mask in itertools.product((0, 1), repeat=8):
            removed = [n for n, b in zip(hidden[1] + hidden[2], mask) if b]
            idx = [d["index"] for u, v, d in graph.edges(data=True)
                   if u in removed or v in removed]
            best = 0
            for _ in range(2):
                t = q.random_point(g)
                t[idx] = 0.0
                best = max(best, naive_rank(q, t))
            key = (sum(mask[:4]), sum(mask[4:]))
            ranks[key] = max(ranks.get(key, 0), best)
        return np.array([ranks[k] for k in sorted(ranks)])

    def fast_strata():
        s = strata(q)
        ranks = {}
        for node, data in s.graph.nodes(data=True):
            counts = {1: 0, 2: 0}
            for part in node.split("; "):
                if part != "full":
                    layer, rest = part.split(": ")
                    counts[int(layer.split()[1])] = int(rest.split()[0])
            ranks[(counts[1], counts[2])] = data["generic_rank"]
        return np.array([ranks[k] for k in sorted(ranks)])

    row(f"strata monomial (3,4,4,1) k=3 (m={q.m}, n={q.n})", fast_strata, naive_strata,
        max(2, repeats // 5))
