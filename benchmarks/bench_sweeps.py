"""Benchmark rows for sweeps (paramgeo.sweeps) of trivial cells (the ``rank`` query of hadamard
p=3 over 200 seeds, about a millisecond each) against a Python loop calling the same query on
the same resolved plugin, in this process:

* ``--workers 0`` (in this process): target within 1.5x of the loop (ratio >= 0.67);
* Dask, one local worker already started (the cluster's start-up is not counted): the cost per
  cell beyond the loop's, target under 20 ms, as cells travel in batches;
* the default (no workers asked for) on such a grid: it runs in this process, and says why.
"""

import time

import numpy as np

N = 200
SPEC = {"query": "rank", "plugin": "hadamard", "sizes": {"p": 3},
        "grid": {"options": {"seed": list(range(N))}}}


def _loop():
    from paramgeo.cli._common import resolve
    from paramgeo.sweeps.queries import get_query

    query = get_query("rank")
    return np.array([query.run(resolve("hadamard", ["p=3"], dense=query.dense), seed=s,
                               at=None).rank for s in range(N)])


def _ranks(summary):
    return summary.table["rank"].to_numpy()


def bench(row, repeats):
    from paramgeo.sweeps import sweep

    reps = max(3, repeats // 3)
    row(f"sweep --workers 0, {N} trivial cells vs Python loop", lambda: _ranks(
        sweep(SPEC, workers=0)), _loop, reps, target=0.67)
    auto = sweep(SPEC)
    print(f"sweep default, {N} trivial cells: ran {auto.why}", flush=True)
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - the sweep extra
        print("sweep on Dask: skipped (pip install 'paramgeo[sweep]')")
        return
    import logging

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        sweep(SPEC, client=client)  # the worker imports paramgeo and the query once
        dask_times, loop_times = [], []
        for _ in range(reps):
            start = time.perf_counter()
            out = _ranks(sweep(SPEC, client=client))
            dask_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            ref = _loop()
            loop_times.append(time.perf_counter() - start)
        per_cell = (np.median(dask_times) - np.median(loop_times)) / N
        print(f"sweep on Dask (1 worker, started), {N} trivial cells: "
              f"{np.median(dask_times) * 1e3:.1f} ms against the loop's "
              f"{np.median(loop_times) * 1e3:.1f} ms: {per_cell * 1e3:.2f} ms per cell beyond "
              f"it (agree: {bool(np.array_equal(out, ref))})  target 20 ms: "
              f"{'met' if per_cell < 0.020 else 'MISSED'}", flush=True)
