"""Running a sweep: cells in batches on a Dask cluster (or in this process), rows streamed to
a table.

The client submits the cells in batches (key ``paramgeo-cells-<hash of the first>``; about
BATCHES_PER_WORKER per worker, so Dask's per-task cost of milliseconds is paid once per batch,
not per cell), takes results as they complete and appends each row to the journal at once; a
task lost with a dying worker is rescheduled by the Dask scheduler, and a cell that finishes
twice is written once. Each cell fixes its own seeds, so the table does not depend on the
worker count, the batching or the order. With no workers, scheduler or client asked for, the
first cell runs in this process and prices the grid: a grid that would finish here sooner
than a local cluster starts (CLUSTER_START_SECONDS) runs here, and the summary says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Union

from ..errors import ParamgeoError
from ..results import Result
from .spec import SweepSpecError, load_spec

if TYPE_CHECKING:
    from .spec import SweepSpec
from .table import Journal, OutputLock, check_output, flatten, frame, journal_path, make_row, \
    read_rows, write_table

#: seconds a local Dask cluster of worker processes takes to start and import paramgeo on its
#: workers (5-15 s measured on 2 shared cores): a grid whose cells would all finish in this
#: process within that runs here unless workers, a scheduler or a client are asked for
CLUSTER_START_SECONDS = 10.0
#: cells go to Dask in about this many batches per worker (load balance against per-task cost)
BATCHES_PER_WORKER = 4


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepSummary(Result):
    """What a sweep did.

    Attributes:
        source: where the spec came from.
        output: the table's file ("" for in memory only).
        cells: the cells in the spec.
        done: cells computed now.
        failed: of those, cells that recorded an error.
        skipped: cells already in the table (with resume).
        workers: the workers used (0: this process).
        scheduler: the Dask scheduler's address, or where the cells ran.
        wall_time: seconds.
        table: a pandas DataFrame, one row per cell (left out of ``to_dict``).
        why: why the cells ran where they did, or what to expect of a local cluster with as
            many workers as cores (:func:`crowded_cores_hint`).
    """

    source: str
    output: str
    cells: int
    done: int
    failed: int
    skipped: int
    workers: int
    scheduler: str
    wall_time: float
    table: Any = dataclasses.field(default=None, repr=False, compare=False)
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.pop("table")
        return out

    def __str__(self):
        return (f"sweep {self.source}: {self.cells} cells: {self.done} done ({self.failed} "
                f"failed), {self.skipped} skipped; {self.workers} worker(s) on "
                f"{self.scheduler}; {self.wall_time:.1f} s" +
                (f"; table {self.output}" if self.output else "") +
                (f"\n{self.why}" if self.why else ""))


#: The default time limit of one cell, in seconds (``sweep(cell_time_limit=...)``,
#: ``paramgeo sweep --cell-time-limit``).
DEFAULT_CELL_TIME_LIMIT = 3600.0


class CellTimeLimit(Exception):
    """Raised inside a cell that ran past its time limit (see :func:`_time_limit`)."""


class _Watchdog:
    """One daemon thread per process that raises CellTimeLimit in the threads whose cell
    deadline has passed (an asynchronous exception, so it works on a Dask worker's task threads
    too; it takes effect between Python bytecodes, so one long C call such as a big SVD
    finishes first). A cell registers its thread and deadline under a lock and removes them when
    it ends, so arming a cell costs a lock, not a thread start; the thread is woken only when a
    deadline earlier than the one it sleeps until arrives."""

    def __init__(self):
        self._cond = threading.Condition()
        self._cells = {}  # token -> (thread ident, deadline)
        self._sleeping_until = math.inf
        self._thread = None

    def _run(self):
        with self._cond:
            while True:
                now = time.monotonic()
                for token, (ident, deadline) in list(self._cells.items()):
                    if deadline <= now:
                        del self._cells[token]
                        ctypes.pythonapi.PyThreadState_SetAsyncExc(
                            ctypes.c_ulong(ident), ctypes.py_object(CellTimeLimit))
                self._sleeping_until = min((d for _, d in self._cells.values()),
                                           default=math.inf)
                wait = self._sleeping_until - now
                # a deadline past what the clock can wait for (1e300 s) is no deadline
                self._cond.wait(None if wait >= threading.TIMEOUT_MAX else max(wait, 0.0))

    @contextlib.contextmanager
    def limit(self, seconds):
        token, deadline = object(), time.monotonic() + seconds
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="paramgeo-cell-limit",
                                                daemon=True)
                self._thread.start()
            self._cells[token] = (threading.get_ident(), deadline)
            if deadline < self._sleeping_until:
                self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._cells.pop(token, None)


_WATCHDOG = _Watchdog()


@contextlib.contextmanager
def _time_limit(seconds):
    """Raise CellTimeLimit in this thread once ``seconds`` have passed (see :class:`_Watchdog`;
    None or inf: no limit)."""
    if seconds is None or math.isinf(seconds):
        yield
        return
    with _WATCHDOG.limit(seconds):
        yield


def run_cell(task: Mapping[str, Any]) -> dict[str, Any]:
    """Run one cell (on a worker): load the plugin files, resolve the plugin, call the query.

    Returns ``{"key", "status": "ok" | "error", "error": message or None, "result": flat
    dict}``; an exception becomes the error of the row and never escapes, so one failing cell
    does not stop the sweep.
    """
    from ..cli._common import resolve
    from ..contract.registry import load_plugin_file
    from .queries import get_query

    limit = task.get("time_limit")
    try:
        with _time_limit(limit):
            for f in task["plugin_files"]:
                load_plugin_file(f)
            query = get_query(task["query"])
            pairs = [f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
                     for k, v in task["sizes"].items()]
            param = resolve(task["plugin"], pairs, dense=query.dense)
            result = query.run(param, **task["options"])
        if getattr(result, "interrupted", False):  # Ctrl-C absorbed by the engine: not complete
            return {"key": task["key"], "status": "interrupted", "result": {},
                    "error": "interrupted before it finished"}
        return {"key": task["key"], "status": "ok", "error": None, "result": flatten(result)}
    except CellTimeLimit:
        return {"key": task["key"], "status": "error", "result": {},
                "error": f"ran past the cell time limit of {limit:g} s (raise it with "
                         "--cell-time-limit)"}
    except Exception as exc:  # noqa: BLE001 - recorded in the row, the sweep goes on
        kind = "" if isinstance(exc, ParamgeoError) else f"{type(exc).__name__}: "
        message = " ".join(f"{kind}{exc}".split()) or type(exc).__name__
        return {"key": task["key"], "status": "error", "error": message, "result": {}}


def run_cells(tasks: list[dict[str, Any]]) -> list[Any]:
    """Run a batch of cells (on a worker): the list of their :func:`run_cell` outcomes."""
    return [run_cell(task) for task in tasks]


def default_workers() -> int:
    """The number of cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def max_local_workers() -> int:
    """The most workers a local cluster may have: 4 per core this process may use."""
    return 4 * default_workers()


def crowded_cores_hint(workers: Optional[int]) -> str:
    """The hint a local cluster of ``workers`` processes gets when they are at least as many as
    the cores this process may use (empty otherwise, or for workers None / 0): the workers
    share those cores with this process, which sends the cells and writes the rows, and with
    the Dask scheduler, so each worker gets less than a core and cells of milliseconds mostly
    pay the cluster's own traffic."""
    cores = default_workers()
    if not workers or workers < cores:
        return ""
    return (f"{workers} worker(s) on {cores} core(s): the workers share the cores with this "
            "process (it sends the cells and writes the rows) and the Dask scheduler, so each "
            "gets less than a core: expect at most about "
            f"{max(cores - 1, 1)}x the speed of one worker for long cells, and a slower sweep "
            "than --workers 0 for cells of milliseconds (pass fewer workers, or --workers 0)")


def sweep(spec: Union[str, os.PathLike, dict, SweepSpec],
          output: Union[str, os.PathLike, None] = None, *, workers: Optional[int] = None,
          scheduler: Optional[str] = None, client: Any = None, resume: bool = False,
          overwrite: bool = False, progress: Optional[Callable[[int, int], None]] = None,
          cell_time_limit: Optional[float] = DEFAULT_CELL_TIME_LIMIT) -> SweepSummary:
    """Run a grid of queries, one row per cell, on Dask or in this process.

    The cells are the Cartesian product of the spec's grid (plugins x sizes x points x query
    options); each runs one query (:data:`QUERIES`: rank, check, critical, mirror, flow, ...)
    and gives one table row. Everything is validated before a worker starts: the spec
    (:func:`load_spec`), the output format and, with ``resume``, the existing table. By
    default the first cell runs here and the rest follow it here when they would take less
    than starting a cluster, else on a local cluster of one worker per core
    (``SweepSummary.why`` says which). The spec format and the clusters: docs/sweeps.md.

    Args:
        spec: a TOML path, a dict or a :class:`SweepSpec`.
        output: a .parquet, .csv or .jsonl file (rows stream to ``output.partial.jsonl``
            while running); None keeps the table in memory only.
        workers: the size of a local Dask cluster; 0 runs the cells in this process.
        scheduler: the address of a running Dask scheduler instead.
        client: an existing ``distributed.Client`` instead.
        resume: skip the cells already in ``output`` or its journal (failed ones are retried).
        overwrite: replace an existing output (without it, and without resume, an error).
        progress: called as progress(done, total) after each cell.
        cell_time_limit: seconds after which a cell stops and records an error (None or inf:
            no limit).

    Returns:
        The :class:`SweepSummary`: counts of cells done, failed and skipped, the wall time,
        and ``table``, a pandas DataFrame with one row per cell.

    Raises:
        SweepSpecError: a bad spec, workers or cell_time_limit, more than one of workers,
            scheduler and client, or an output of unknown format, in a missing folder, being
            written by another sweep, or existing without resume or overwrite.
        UnsafeFileError: the output or its lock is a link or a file paramgeo did not write.

    Examples:
        >>> import paramgeo
        >>> summary = paramgeo.sweep({"query": "rank", "plugin": "uut",
        ...                           "grid": {"sizes": {"d": [2, 3], "r": [1, 2]}}}, workers=0)
        >>> summary.table["generic_rank"].tolist()       # d r - r (r - 1) / 2
        [2, 3, 3, 5]
    """
    t0 = time.perf_counter()
    spec = load_spec(spec)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 0):
        raise SweepSpecError(f"workers must be an integer >= 0, got {workers!r}")
    if workers is not None and workers > max_local_workers():
        raise SweepSpecError(f"workers={workers} is more than {max_local_workers()} (4 per core "
                             "of this machine): a larger local cluster only competes for the "
                             "same cores; give fewer, or run on a cluster with --scheduler")
    if sum(x is not None for x in (workers, scheduler, client)) > 1:
        raise SweepSpecError("give at most one of workers, scheduler and client")
    if cell_time_limit is not None and not (isinstance(cell_time_limit, (int, float))
                                            and cell_time_limit > 0):
        raise SweepSpecError(f"cell_time_limit must be a number of seconds > 0 (or None), got "
                             f"{cell_time_limit!r}")
    limit = None if cell_time_limit is None else float(cell_time_limit)
    spec = dataclasses.replace(spec, cells=tuple(dataclasses.replace(c, time_limit=limit)
                                                 for c in spec.cells))
    if output is None:
        return _sweep(spec, None, workers, scheduler, client, resume, overwrite, progress, t0)
    output = check_output(output)
    with OutputLock(output, f"sweep {spec.source}"):
        return _sweep(spec, output, workers, scheduler, client, resume, overwrite, progress, t0)


def _sweep(spec, output, workers, scheduler, client, resume, overwrite, progress, t0):
    """The body of :func:`sweep`, with the output (if any) locked."""
    previous = {}
    if output is not None:
        exists = os.path.lexists(output) or os.path.lexists(journal_path(output))
        if resume:
            previous = read_rows(output)
        elif exists and not overwrite:
            raise SweepSpecError(f"{output} (or its journal {journal_path(output).name}) "
                                 "exists; pass --resume to continue that sweep or --overwrite "
                                 "to start again")
        elif exists:
            for p in (output, journal_path(output)):
                p.unlink(missing_ok=True)
    by_key = {c.key: c for c in spec.cells}
    kept = {k: r for k, r in previous.items() if r.get("status") == "ok"}
    todo = [c for c in spec.cells if c.key not in kept]
    rows = dict(kept)
    journal = Journal(output) if output is not None else None
    counts = {"done": 0, "failed": 0}
    total = len(todo)

    def finished(outcome):
        cell = by_key[outcome["key"]]
        if cell.key in rows:  # finished twice (a worker died after computing it): keep one
            return
        if outcome["status"] == "interrupted":  # Ctrl-C reached the cell: stop the sweep and
            raise KeyboardInterrupt  # store nothing of the cell (--resume computes it again)
        row = rows[cell.key] = make_row(cell, outcome)
        if journal is not None:
            journal.append(row)
        counts["done"] += 1
        counts["failed"] += row["status"] != "ok"
        if progress is not None:
            progress(counts["done"], total)

    why = ""
    try:
        if workers is None and scheduler is None and client is None and todo:
            why, todo = _first_cell_prices(todo, finished)
        if workers == 0 or why.startswith("in this process"):
            n_workers, where = 1, "this process"
            for cell in todo:
                finished(run_cell(cell.task()))
        else:
            why = why or crowded_cores_hint(workers)
            n_workers, where = _run_dask(todo, finished, workers, scheduler, client)
    finally:
        if journal is not None:
            journal.close()
    ordered = [rows[c.key] for c in spec.cells if c.key in rows]
    ordered += [r for k, r in rows.items() if k not in by_key]  # kept from an older spec
    table = frame(ordered)
    if output is not None:
        write_table(table, output)
        journal_path(output).unlink(missing_ok=True)
    return SweepSummary(source=spec.source, output=str(output) if output is not None else "",
                        cells=len(spec.cells), done=counts["done"], failed=counts["failed"],
                        skipped=len(spec.cells) - total, workers=n_workers, scheduler=where,
                        wall_time=round(time.perf_counter() - t0, 3), table=table, why=why)


def _first_cell_prices(todo, finished):
    """Run the first cell here and decide where the rest run: (why, the cells left). Here when
    the rest would take at most CLUSTER_START_SECONDS at the first cell's pace, or on one core;
    on a local Dask cluster otherwise."""
    start = time.perf_counter()
    finished(run_cell(todo[0].task()))
    each = time.perf_counter() - start
    rest, cores = todo[1:], default_workers()
    estimate = each * len(rest)
    if cores < 2:
        return ("in this process: one core, where a cluster cannot run cells side by side "
                "(pass --workers N to use one anyway)"), rest
    if estimate <= CLUSTER_START_SECONDS:
        return (f"in this process: {len(todo)} cells at about {each * 1e3:.3g} ms each take "
                f"about {estimate:.3g} s here, less than starting a local Dask cluster (about "
                f"{CLUSTER_START_SECONDS:g} s); pass --workers N to use one anyway"), rest
    return (f"on a local Dask cluster: {len(todo)} cells at about {each:.3g} s each would take "
            f"about {estimate:.3g} s in this process, more than starting the cluster (about "
            f"{CLUSTER_START_SECONDS:g} s); pass --workers 0 to stay here"), rest


def _run_dask(cells, finished, workers, scheduler, client):
    """Submit every cell to Dask and call ``finished(outcome)`` as results arrive.
    Returns (number of workers, a description of the scheduler)."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise SweepSpecError("paramgeo sweep needs Dask: pip install 'paramgeo[sweep]' "
                             "(or run in this process with --workers 0)") from None
    cluster = own = None
    try:
        if client is None:
            if scheduler is not None:
                try:
                    client = own = Client(scheduler, timeout="10s")
                except (OSError, TimeoutError) as exc:
                    raise SweepSpecError(f"cannot reach the Dask scheduler at {scheduler!r} "
                                         f"({exc}); start one with `dask scheduler`") from None
            else:
                import logging

                # dashboard on a free port: 8787 may belong to another cluster on the machine
                cluster = LocalCluster(n_workers=workers or default_workers(),
                                       threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.ERROR)
                client = own = Client(cluster)
        n_workers = len(client.scheduler_info()["workers"])
        where = (f"the scheduler {scheduler}" if scheduler else
                 "a local Dask cluster" if cluster is not None else "the given Dask client")
        size = max(1, -(-len(cells) // (BATCHES_PER_WORKER * max(n_workers, 1))))
        batches = {f"paramgeo-cells-{cells[i].key}": cells[i:i + size]
                   for i in range(0, len(cells), size)}
        futures = [client.submit(run_cells, [cell.task() for cell in batch], key=key,
                                 pure=False) for key, batch in batches.items()]
        for future in as_completed(futures):
            try:
                outcomes = future.result()
            except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: the cells' rows say so
                outcomes = [{"key": cell.key, "status": "error", "result": {},
                             "error": f"{type(exc).__name__}: {exc}"}
                            for cell in batches[future.key]]
            for outcome in outcomes:
                finished(outcome)
        return n_workers, where
    finally:
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()
