"""Sweeps (paramgeo.sweeps, ``paramgeo sweep``): spec validation, cell keys, tables, failing
cells, resume after an interruption, and a Dask cluster losing a worker mid-sweep.

Covers: ``paramgeo.cli``, ``paramgeo.sweeps.run``, ``paramgeo.sweeps.spec``.
"""

import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.cli import main
from paramgeo.sweeps import load_spec, sweep
from paramgeo.sweeps import run as sweep_run
from paramgeo.sweeps.spec import SweepSpecError

#: Small search cells (about 0.3 s each once the engines are imported).
SEARCH = """
query = "search"
plugin = "uut"
sizes = { d = 3, r = 2 }
options = { starts = 2 }
[grid]
options.seed = [0, 1, 2, 3, 4, 5]
"""

#: Fast cells (a few milliseconds each).
DESCRIBE = """
query = "describe"
plugin = "hadamard"
[grid]
sizes.p = [2, 3, 4, 5, 6, 7]
"""


def write(tmp_path, text, name="grid.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def within(seconds, fn):
    """fn() in a daemon thread; fail (instead of hanging the suite) after ``seconds``."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the sweep did not finish within {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


# ------------------------------------------------------------------- spec and validation

@pytest.mark.parametrize("text, message", [
    ('query = "nope"\nplugin = "uut"', "unknown query 'nope'; available: check, critical"),
    ('query = "describe"\nplugin = "nope"', "unknown parameterization 'nope'"),
    ('query = "describe"\nplugin = "uut"\n[grid]\nsizes.d = [3, 0]', "cell 1"),
    ('query = "describe"\nplugin = "uut"\n[grid]\nsizes.d = []', "sizes.d is an empty list"),
    ('query = "describe"\nplugin = "uut"\noptions = { starts = 3 }', "has no option starts"),
    ('query = "pacbayes"\nplugin = "hadamard"', "needs options.posterior"),
    ('query = "describe"\nplugin = "uut"\nsizes = { d = 3 }\n[grid]\nsizes.d = [2]',
     "sizes.d is set twice"),
    ('query = "describe"\nplugin = "uut"\n[grid]\noptions.seed = [0, 0]', "the same computation"),
    ('query = "describe"\nplugin = "uut"\nsize = 3', "unknown key(s) size"),
    ('query = "describe"\nplugin = ', "not valid TOML"),
])
def test_malformed_spec_is_one_error_line_before_any_worker(tmp_path, monkeypatch, text,
                                                             message):
    def no_workers(*args):
        raise AssertionError("a worker was started for a malformed sweep file")

    monkeypatch.setattr(sweep_run, "_run_dask", no_workers)
    out = tmp_path / "out.parquet"
    res = CliRunner().invoke(main, ["sweep", str(write(tmp_path, text)), "-o", str(out)])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], lines
    assert not out.exists() and not (tmp_path / "out.parquet.partial.jsonl").exists()


def test_size_out_of_range_names_the_size(tmp_path):
    with pytest.raises(SweepSpecError, match=r"cell 0 .*degree"):
        load_spec({"query": "describe", "plugin": "monomial",
                   "sizes": {"widths": "2,2,1", "degree": 1}})


def test_unknown_output_format_and_existing_output(tmp_path):
    spec = {"query": "describe", "plugin": "hadamard", "sizes": {"p": 2}}
    with pytest.raises(SweepSpecError, match="unknown format .xlsx"):
        sweep(spec, tmp_path / "t.xlsx", workers=0)
    sweep(spec, tmp_path / "t.csv", workers=0)
    with pytest.raises(SweepSpecError, match="pass --resume .* or --overwrite"):
        sweep(spec, tmp_path / "t.csv", workers=0)


def test_cell_key_is_the_computation_not_its_spelling(tmp_path):
    a = load_spec({"query": "describe", "plugin": "monomial",
                   "sizes": {"widths": "2,2,1", "degree": 3}}).cells[0]
    b = load_spec({"query": "describe", "plugin": "monomial",
                   "sizes": {"widths": [2, 2, 1], "degree": 3}, "options": {"seed": 0}}).cells[0]
    c = load_spec({"query": "describe", "plugin": "monomial",
                   "sizes": {"widths": "2,2,1", "degree": 3}, "options": {"seed": 1}}).cells[0]
    assert a.key == b.key and a.key != c.key and len(a.key) == 16
    # a data file enters by content: rewriting it changes the key, renaming it does not
    X = np.eye(3)
    np.savez(tmp_path / "d1.npz", X=X, y=np.ones(3))
    np.savez(tmp_path / "d2.npz", X=X, y=np.ones(3))

    def key(name):
        return load_spec({"query": "implicit-bias", "plugin": "hadamard", "sizes": {"p": 3},
                          "options": {"data": str(tmp_path / name), "init_scale": 0.1}}
                         ).cells[0].key

    k1 = key("d1.npz")
    assert key("d2.npz") == k1
    np.savez(tmp_path / "d1.npz", X=X, y=2 * np.ones(3))
    assert key("d1.npz") != k1


def test_grid_and_cells_expand_as_a_product_in_order():
    spec = load_spec({"query": "describe", "plugin": "uut",
                      "grid": {"sizes": {"d": [2, 3]}, "options": {"seed": [0, 1]}},
                      "cells": [{"sizes": {"r": 1}}, {"sizes": {"r": 2}}]})
    got = [(c.sizes["r"], c.sizes["d"], c.options["seed"]) for c in spec.cells]
    assert got == [(r, d, s) for r in (1, 2) for d in (2, 3) for s in (0, 1)]


# --------------------------------------------------------------- tables and failing cells

def test_inline_sweep_table_matches_the_closed_form(tmp_path):
    """describe over uut: generic rank d r - r(r-1)/2 (the Bures-Wasserstein dimension)."""
    spec = {"query": "describe", "plugin": "uut",
            "grid": {"sizes": {"d": [2, 3, 4], "r": [1, 2]}}}
    summary = sweep(spec, tmp_path / "t.jsonl", workers=0)
    df = summary.table
    assert (summary.cells, summary.done, summary.failed, summary.skipped) == (6, 6, 0, 0)
    assert list(df.columns[:7]) == ["cell", "status", "error", "query", "plugin", "d", "r"]
    assert (df["generic_rank"] == df["d"] * df["r"] - df["r"] * (df["r"] - 1) // 2).all()
    assert (df["symmetry.name"] == [f"O({r})" for r in df["r"]]).all()
    assert json.loads(df["predictor_shape"][0]) == [2, 2]  # lists as JSON text
    back = pd.read_json(tmp_path / "t.jsonl", lines=True)
    assert back["generic_rank"].tolist() == df["generic_rank"].tolist()
    assert not (tmp_path / "t.jsonl.partial.jsonl").exists()


def test_failing_cell_records_its_error_and_the_sweep_goes_on(tmp_path):
    np.save(tmp_path / "bad.npy", np.ones(5))  # uut d=3 r=2 needs 6 entries
    spec = {"query": "critical", "plugin": "uut", "sizes": {"d": 3, "r": 2},
            "cells": [{"options": {"seed": 0}}, {"options": {"at": str(tmp_path / "bad.npy")}},
                      {"options": {"seed": 1}}]}
    df = sweep(spec, tmp_path / "t.parquet", workers=0).table
    assert df["status"].tolist() == ["ok", "error", "ok"]
    assert "holds shape (5,); uut needs 6 entries" in df["error"][1]
    assert df["verdict"][0] == "regular" and pd.isna(df["verdict"][1])
    assert pd.read_parquet(tmp_path / "t.parquet")["status"].tolist() == ["ok", "error", "ok"]


def test_resume_from_a_csv_table_runs_only_new_cells(tmp_path):
    spec = {"query": "describe", "plugin": "hadamard", "grid": {"sizes": {"p": [2, 3]}}}
    sweep(spec, tmp_path / "t.csv", workers=0)
    spec["grid"]["sizes"]["p"] = [2, 3, 4]
    s = sweep(spec, tmp_path / "t.csv", workers=0, resume=True)
    assert (s.done, s.skipped) == (1, 2)
    df = pd.read_csv(tmp_path / "t.csv")
    assert df["p"].tolist() == [2, 3, 4] and df["generic_rank"].tolist() == [2, 3, 4]


def test_interrupted_sweep_resumes_with_the_cli(tmp_path):
    spec_file = write(tmp_path, DESCRIBE)
    out = tmp_path / "t.parquet"
    reference = sweep(spec_file, workers=0).table

    def interrupt(done, total):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(spec_file, out, workers=0, progress=interrupt)
    assert not out.exists()
    journal = [json.loads(line) for line in
               (tmp_path / "t.parquet.partial.jsonl").read_text().splitlines()]
    assert len(journal) == 2
    res = CliRunner().invoke(main, ["sweep", str(spec_file), "-o", str(out)])
    assert res.exit_code == 2 and "--resume" in res.output  # never silently restarts
    res = CliRunner().invoke(main, ["sweep", str(spec_file), "-o", str(out), "--resume",
                                    "--workers", "0", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert (summary["cells"], summary["done"], summary["skipped"]) == (6, 4, 2)
    table = pd.read_parquet(out)
    assert table.equals(reference)  # the two journal rows survive exactly
    assert not (tmp_path / "t.parquet.partial.jsonl").exists()


# ----------------------------------------------------------------------------- on Dask

def test_killed_worker_mid_sweep_loses_no_cell_and_computes_each_once(tmp_path):
    """A LocalCluster of two worker processes; when the first cell is in, one worker is
    killed (SIGKILL). Its cells are rescheduled; the table has every cell once, equal to the
    serial run (so also independent of the worker count)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=40) as cl, \
            Client(cl, timeout="30s") as cluster:
        _kill_a_worker_mid_sweep(tmp_path, cluster)


def _kill_a_worker_mid_sweep(tmp_path, cluster):
    spec_file = write(tmp_path, SEARCH)
    serial = sweep(spec_file, workers=0).table
    pids = cluster.run(os.getpid)
    killed, moves = [], {}

    def kill_one(done, total):
        if not killed:  # the first cell is in: kill one worker (busy with the next cells)
            pid = sorted(pids.values())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        if done == total:  # the scheduler's record of each task, while the futures are held
            moves.update(cluster.run_on_scheduler(_left_processing))

    s = within(90, lambda: sweep(spec_file, tmp_path / "t.parquet", client=cluster,
                                 progress=kill_one))
    assert killed and killed[0] not in cluster.run(os.getpid).values()  # it really died
    assert any(moves.values()), moves  # a cell in flight on the dead worker was rescheduled
    assert (s.cells, s.done, s.failed) == (6, 6, 0)
    table = pd.read_parquet(tmp_path / "t.parquet")
    assert table["cell"].is_unique and len(table) == 6
    assert table.equals(serial)


def _left_processing(dask_scheduler):
    """key -> how often the task went from processing back to released (its worker died)."""
    return {key: sum(1 for e in dask_scheduler.story(key)
                     if len(e) > 2 and e[1] == "processing" and e[2] == "released")
            for key in dask_scheduler.tasks}


def test_sweep_is_exposed_lazily():
    """paramgeo.sweep is the function; importing paramgeo or its CLI imports no Dask."""
    assert paramgeo.sweep is sweep
    code = ("import sys, paramgeo, paramgeo.cli; "
            "print(any(m in sys.modules for m in ('dask', 'distributed', 'pandas')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
