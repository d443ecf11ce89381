"""Where a sweep runs and how its cells travel: a grid too small for a cluster runs in this
process (and the summary says why) unless workers are asked for; on Dask the cells go in
batches, with the same table as one cell at a time.

Covers: ``paramgeo.cli``, ``paramgeo.sweeps.run``.
"""

import pytest
from click.testing import CliRunner

from paramgeo.cli import main
from paramgeo.sweeps import run as sweep_run
from paramgeo.sweeps import sweep

pytest.importorskip("distributed")

GRID = {"query": "describe", "plugin": "hadamard", "grid": {"sizes": {"p": [2, 3, 4, 5, 6]}}}


def _no_dask(*args):
    raise AssertionError("a Dask cluster was started for a grid of milliseconds")


def test_small_grid_runs_in_this_process_and_says_why(monkeypatch):
    monkeypatch.setattr(sweep_run, "_run_dask", _no_dask)
    s = sweep(GRID)
    assert (s.cells, s.done, s.failed, s.workers, s.scheduler) == (5, 5, 0, 1, "this process")
    assert s.why.startswith("in this process: 5 cells") and "--workers N" in s.why
    assert list(s.table["param_dim"]) == [4, 6, 8, 10, 12]  # every cell, the first one included, once
    assert s.why in str(s) and s.to_dict()["why"] == s.why


def test_grid_priced_above_a_cluster_start_goes_to_dask(monkeypatch):
    sent = []

    def fake_dask(cells, finished, workers, scheduler, client):
        sent.extend(cells)
        for cell in cells:
            finished(sweep_run.run_cell(cell.task()))
        return 2, "a local Dask cluster"

    monkeypatch.setattr(sweep_run, "_run_dask", fake_dask)
    monkeypatch.setattr(sweep_run, "CLUSTER_START_SECONDS", 0.0)
    monkeypatch.setattr(sweep_run, "default_workers", lambda: 2)
    s = sweep(GRID)
    assert len(sent) == 4 and s.scheduler == "a local Dask cluster"  # the first cell ran here
    assert s.why.startswith("on a local Dask cluster: 5 cells") and "--workers 0" in s.why
    monkeypatch.setattr(sweep_run, "default_workers", lambda: 1)
    one_core = sweep(GRID)
    assert one_core.scheduler == "this process" and "one core" in one_core.why


def test_asked_for_workers_are_used_and_cli_prints_why(monkeypatch, tmp_path):
    monkeypatch.setattr(sweep_run, "_run_dask", _no_dask)
    assert sweep(GRID, workers=0).why == ""  # asked for: nothing to explain
    spec = tmp_path / "g.toml"
    spec.write_text('query = "describe"\nplugin = "hadamard"\n[grid]\nsizes.p = [2, 3]\n')
    res = CliRunner().invoke(main, ["sweep", str(spec), "-o", str(tmp_path / "t.csv")])
    assert res.exit_code == 0, res.output
    assert "in this process: 2 cells" in res.output


def test_cells_travel_in_batches_with_the_same_table():
    """12 cells on one worker go as BATCHES_PER_WORKER = 4 tasks of 3 cells; the table equals
    the one computed in this process, row for row."""
    from distributed import Client, LocalCluster

    grid = {"query": "describe", "plugin": "hadamard",
            "grid": {"sizes": {"p": list(range(2, 14))}}}
    keys = []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0", silence_logs=40) as cluster, \
            Client(cluster) as client:
        def seen(done, total):
            if done == total:  # while the futures are held
                keys.extend(client.run_on_scheduler(
                    lambda dask_scheduler: list(dask_scheduler.tasks)))

        s = sweep(grid, client=client, progress=seen)
    tasks = [k for k in keys if str(k).startswith("paramgeo-cells-")]
    assert len(tasks) == sweep_run.BATCHES_PER_WORKER == 4
    assert s.done == 12 and s.table.equals(sweep(grid, workers=0).table)


def test_workers_at_least_cores_get_a_hint(monkeypatch):
    """--workers N with N >= the cores: the summary says once that the workers share the cores
    with this process; fewer workers, --workers 0 and the chosen default get no such line."""
    ran = []

    def fake_dask(cells, finished, workers, scheduler, client):
        ran.append(workers)
        for cell in cells:
            finished(sweep_run.run_cell(cell.task()))
        return workers, "a local Dask cluster"

    monkeypatch.setattr(sweep_run, "_run_dask", fake_dask)
    monkeypatch.setattr(sweep_run, "default_workers", lambda: 2)
    s = sweep(GRID, workers=2)
    assert ran == [2] and s.why.startswith("2 worker(s) on 2 core(s): the workers share")
    assert "--workers 0" in s.why and str(s).count("share the cores") == 1
    assert sweep(GRID, workers=1).why == "" and sweep(GRID, workers=0).why == ""
    assert sweep_run.crowded_cores_hint(3).startswith("3 worker(s) on 2 core(s)")
    assert sweep_run.crowded_cores_hint(None) == ""
