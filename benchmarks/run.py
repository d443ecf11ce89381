"""paramgeo benchmarks: closed forms against the generic routes, as ratios measured in one run.

Usage: python benchmarks/run.py [--repeats N] [TOPIC ...]

Rows live in ``benchmarks/bench_<topic>.py``, each defining ``bench(row, repeats)`` and calling
``row(label, fast, slow, repeats, target=None)`` once per comparison.

Each row times a paramgeo closed form against a baseline computed in the same run and prints
the median times and the ratio baseline / closed form (> 1 means the closed form is faster),
with an agreement check (max relative difference). Medians over repeats because these machines
are noisy.
"""

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks.*, tests.* oracles


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
    verdict = "" if target is None else (
        "  target %.3gx: %s" % (target, "met" if ratio >= target else "MISSED"))
    line = (f"{label:<48} {t_fast * 1e3:10.3f} ms {t_slow * 1e3:10.3f} ms {ratio:9.1f}x "
            f"{rel(a, b):9.1e}{verdict}")
    print(line, flush=True)
    ROWS.append((label, t_fast, t_slow, ratio, rel(a, b)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("only", nargs="*", help="run only these modules, e.g. uut monomial")
    args = parser.parse_args()
    print(f"{'row':<48} {'paramgeo':>13} {'baseline':>13} {'ratio':>10} {'max rel':>9}")
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("bench_*.py")):
        topic = path.stem[len("bench_"):]
        if args.only and topic not in args.only:
            continue
        module = importlib.import_module(f"benchmarks.{path.stem}")
        module.bench(row, args.repeats)


if __name__ == "__main__":
    main()
