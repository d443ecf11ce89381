"""paramgeo benchmarks: closed forms against the generic routes, as ratios measured in one run.

Usage: python benchmarks/run.py [--repeats N] [--cpu] [TOPIC ...]

Rows live in ``benchmarks/bench_<topic>.py``, each defining ``bench(row, repeats)`` and calling
``row(label, fast, slow, repeats, target=None)`` once per comparison; ``row.many(label, fast,
{name: baseline}, repeats, targets={name: ratio})`` compares one paramgeo call with several
baselines (one line each).

Each row times a paramgeo closed form against a baseline computed in the same run and prints
the median times and the ratio baseline / closed form (> 1 means the closed form is faster),
with an agreement check (max relative difference). The calls of a row are interleaved (one
call of each per round) and timed by their medians, because these machines are shared and
noisy; BLAS runs on one thread (OPENBLAS_NUM_THREADS etc. default to 1 before numpy loads:
threaded BLAS on a loaded 2-core machine spins and makes single calls 100x slower at random).
"""

import argparse
import importlib
import os
import statistics
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402  (after the BLAS thread setting)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks.*, tests.* oracles


def cpu_seconds():
    """CPU time of this process (user + system, fine-grained) and of its finished children
    (the start-up rows' interpreters; os.times, in clock ticks)."""
    return time.process_time() + sum(os.times()[2:4])


#: the clock rows are timed by: wall time, or with --cpu the CPU time (steadier on a loaded
#: machine; it counts the child interpreters of the start-up rows)
CLOCK = [time.perf_counter]


def median_times(fns, repeats, clock=None):
    """Median time of each callable (by ``clock``, default CLOCK), the calls interleaved round
    by round."""
    times = [[] for _ in fns]
    clock = clock or CLOCK[0]
    for _ in range(repeats):
        for fn, ts in zip(fns, times):
            start = clock()
            fn()
            ts.append(clock() - start)
    return [statistics.median(ts) for ts in times]


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(np.max(np.abs(b)), 1e-300))


ROWS = []


def many(label, fast, baselines, repeats, targets=None):
    """Time ``fast`` against every ``baselines[name]`` (callables returning arrays), interleaved;
    print one line per baseline with the ratio t_baseline / t_fast and the agreement."""
    targets = targets or {}
    outs = [fast()] + [slow() for slow in baselines.values()]
    t_fast, *t_slows = median_times([fast, *baselines.values()], repeats)
    for name, out, t_slow in zip(baselines, outs[1:], t_slows):
        ratio, target = t_slow / t_fast, targets.get(name)
        verdict = "" if target is None else "  target %.3gx%s: %s" % (
            target, f" (within {1 / target:.3g}x)" if target < 1 else "",
            "met" if ratio >= target else "MISSED")
        text = f"{label} vs {name}" if name else label
        print(f"{text:<60} {t_fast * 1e3:10.3f} ms {t_slow * 1e3:10.3f} ms {ratio:9.2f}x "
              f"{rel(outs[0], out):9.1e}{verdict}", flush=True)
        ROWS.append((text, t_fast, t_slow, ratio, rel(outs[0], out)))


def row(label, fast, slow, repeats, target=None):
    """Time ``fast`` and ``slow`` (each returning an array), print the ratio and agreement."""
    many(label, fast, {"": slow}, repeats, {"": target})


row.many = many
row.median_times = median_times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--cpu", action="store_true",
                        help="time by CPU seconds instead of wall time")
    parser.add_argument("only", nargs="*", help="run only these modules, e.g. uut monomial; "
                        "modules marked HEAVY run only when named")
    args = parser.parse_args()
    if args.cpu:
        CLOCK[0] = cpu_seconds
    print(f"{'row':<60} {'paramgeo':>13} {'baseline':>13} {'ratio':>10} {'max rel':>9}")
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("bench_*.py")):
        topic = path.stem[len("bench_"):]
        if args.only and topic not in args.only:
            continue
        module = importlib.import_module(f"benchmarks.{path.stem}")
        if getattr(module, "HEAVY", False) and topic not in args.only:
            continue
        module.bench(row, args.repeats)


if __name__ == "__main__":
    main()
