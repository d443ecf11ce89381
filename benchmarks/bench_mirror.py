"""Benchmark rows for the mirror engine on deep linear networks: the Lie algebra bounded by the
matrix conservation laws (fields and brackets at one point) against the nested-autograd route
it replaces, and the whole ``mirror`` report at widths 6,4,3,5 against its 60 s target."""

import time

import numpy as np

import paramgeo
from paramgeo.mirror import lie_algebra, mirror
from paramgeo.mirror.report import _matrix_laws


def bench(row, repeats):
    p = paramgeo.get("deep-linear", widths=(2, 2, 2, 2))
    _, q = _matrix_laws(p, 0, None)
    # the nested route takes about a minute per call at this size: one round
    row("deep-linear 2,2,2,2: Lie algebra bounded vs nested autograd",
        lambda: np.array([lie_algebra(p, bound=p.n - q).dim]),
        lambda: np.array([lie_algebra(p, method="numeric", budget=None).dim]), 1)
    big = paramgeo.get("deep-linear", widths=(6, 4, 3, 5))
    times = []
    for _ in range(max(1, repeats // 5)):
        start = time.perf_counter()
        report = mirror(big)
        times.append(time.perf_counter() - start)
    print(f"{'deep-linear 6,4,3,5: mirror (median)':<60} {np.median(times):10.3f} s   target < 60 s:"
          f" {'met' if np.median(times) < 60 else 'MISSED'} ({report.n_laws} laws, dim "
          f"{report.algebra_dim})", flush=True)
