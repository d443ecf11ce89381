"""paramgeo benchmarks: closed forms against the generic routes, as ratios measured in one run.

Usage: python benchmarks/run.py [--repeats N]

Each row times a paramgeo closed form against a baseline computed in the same run and prints
the median times and the ratio baseline / closed form (> 1 means the closed form is faster),
with an agreement check (max relative difference). Medians over repeats because these machines
are noisy.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests' geomstats oracles


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(np.max(np.abs(b)), 1e-300))


ROWS = []


def row(label, fast, slow, repeats, target=None):
    """Time ``fast`` and ``slow`` (each returning an array), print the ratio and agreement."""
    a, b = fast(), slow()
    t_fast, t_slow = median_time(fast, repeats), median_time(slow, repeats)
    ratio = t_slow / t_fast
    verdict = "" if target is None else ("  target %.0fx: %s" % (target, "met" if ratio >= target else "MISSED"))
    line = (f"{label:<48} {t_fast * 1e3:10.3f} ms {t_slow * 1e3:10.3f} ms {ratio:9.1f}x "
            f"{rel(a, b):9.1e}{verdict}")
    print(line, flush=True)
    ROWS.append((label, t_fast, t_slow, ratio, rel(a, b)))


def autograd_dense_jacobian(param, theta):
    """The naive route's first step: the dense m x n Jacobian from autograd."""
    from paramgeo import Parameterization

    return Parameterization.jacobian(param, theta)


def bench_uut(repeats):
    import paramgeo
    from tests.test_geometry import bures_wasserstein_bundle

    rng = np.random.default_rng(0)
    for d in (50, 100, 200):
        r = 10
        p = paramgeo.get("uut", d=d, r=r)
        theta = p.random_point(rng)
        v, w = rng.standard_normal(p.n), rng.standard_normal(p.m)
        reps = repeats if d < 200 else max(3, repeats // 3)
        row(f"uut d={d} r={r}: JVP closed vs autograd dense J",
            lambda: p.jvp(theta, v), lambda: autograd_dense_jacobian(p, theta) @ v, reps,
            target=50 if d == 200 else None)
        row(f"uut d={d} r={r}: VJP closed vs autograd dense J",
            lambda: p.vjp(theta, w), lambda: autograd_dense_jacobian(p, theta).T @ w, reps)
        bundle = bures_wasserstein_bundle(d, r)
        U, V = theta.reshape(d, r), v.reshape(d, r)
        row(f"uut d={d} r={r}: horizontal proj vs geomstats BW",
            lambda: paramgeo.horizontal_projection(p, theta, v),
            lambda: np.asarray(bundle.horizontal_projection(V, U)).ravel(), 50 * repeats,
            target=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print(f"{'row':<48} {'paramgeo':>13} {'baseline':>13} {'ratio':>10} {'max rel':>9}")
    bench_uut(args.repeats)


if __name__ == "__main__":
    main()
