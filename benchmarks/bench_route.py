"""The rank route chosen by predicted cost (:func:`paramgeo.linalg.routes.route_prices`) against both
routes forced: the generic rank of ``relu-net`` (d = 10 inputs' dimension, one output, N = 200
inputs: m = 200) at n = 1e3 ... 3e4 parameters, across m n = 2e6 (the size where a fixed
memory threshold used to switch to matrix-free). Each call builds a fresh parameterization (no
Jacobian time measured before: the first point is priced as a user's first call is). Target:
the chosen route within 1.3x of the best of the two (ratio >= 1/1.3 against each)."""

import numpy as np

import paramgeo
from paramgeo.geometry import generic_rank

WIDTHS = (83, 250, 833, 1700, 2500)  # n = 12 h: 996 ... 30,000


def bench(row, repeats):
    for h in WIDTHS:
        def rank(route, h=h):
            p = paramgeo.get("relu-net", d=10, width=h, outputs=1, n_inputs=200)
            return np.array([generic_rank(p, route=route)])

        n = 12 * h
        row.many(f"relu-net n={n} m=200: generic rank, chosen route", lambda: rank("auto"),
                 {"dense": lambda: rank("dense"), "matrix-free": lambda: rank("matrix-free")},
                 max(1, min(repeats, 3 if n > 5000 else 7)),
                 targets={"dense": 1 / 1.3, "matrix-free": 1 / 1.3})
