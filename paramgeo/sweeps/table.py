"""The tidy table of a sweep: one row per cell, streamed to a journal, written by extension.

A row is the cell's key, status and error, its parameters (:meth:`Cell.columns`) and the
query's JSON fields flattened (nested dicts joined with ``.``; lists as JSON text; a field named
like a parameter is prefixed ``result.``). Finished rows are appended to the journal
``OUT.partial.jsonl`` (flushed and synced) as they arrive, so a killed sweep loses no finished
cell; at the end the table is written in cell order as Parquet (pyarrow), CSV or JSONL by the
extension of OUT and the journal is removed.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

from ..io.files import UnsafeFileError, check_target, open_own, write_file
from ..results import to_jsonable
from .spec import SweepSpecError

if TYPE_CHECKING:
    from .spec import Cell

FORMATS = (".parquet", ".csv", ".jsonl")
BOOKKEEPING = ("cell", "status", "error")


def check_output(path: Union[str, os.PathLike]) -> Path:
    """The output path, refused (SweepSpecError) unless its extension is a known format and
    its folder exists and is writable, and (UnsafeFileError) when it is a link or not a regular
    file (checked before any cell runs)."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise SweepSpecError(f"output {str(path)!r}: unknown format {path.suffix or '(none)'}; "
                             f"give a file ending in {', '.join(FORMATS)}")
    if path.is_dir():
        raise SweepSpecError(f"output {str(path)!r} is a directory; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise SweepSpecError(f"output {str(path)!r}: the folder {str(folder)!r} does not exist; "
                             "create it first or give another output")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SweepSpecError(f"output {str(path)!r}: the folder {str(folder)!r} is not "
                             "writable; give an output in a folder you can write to")
    # a link or a special file is refused now, not after the cells ran; whether an existing
    # table may be replaced is --resume's or --overwrite's to say
    check_target(path, what="sweep table", replace=True)
    return path


def journal_path(path: Union[str, os.PathLike]) -> Path:
    return Path(f"{path}.partial.jsonl")


def lock_path(path: Union[str, os.PathLike]) -> Path:
    return Path(f"{path}.lock")


_LOCK_LINE = re.compile(r"[^\n]*, pid \d+, started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n?\Z")


def _is_lock(fd):
    """Whether the open file ``fd`` holds what :class:`OutputLock` writes (one holder line)."""
    return bool(_LOCK_LINE.match(os.read(fd, 4096).decode(errors="replace")))


class OutputLock:
    """An exclusive lock on one sweep output, held for the whole sweep: ``OUT.lock`` (never
    through a link) locked with ``flock``, holding who took it. A second sweep on the same
    output refuses at once, naming the first; the kernel drops the lock of a killed sweep."""

    def __init__(self, output, holder):
        self.path, self.holder, self._fd = lock_path(output), holder, None
        self.output = output

    def __enter__(self):
        while True:
            fd = open_own(self.path, os.O_RDWR, what="lock file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                first = os.read(fd, 4096).decode(errors="replace").strip() or "a sweep"
                os.close(fd)
                raise SweepSpecError(f"output {str(self.output)!r} is being written by another "
                                     f"sweep ({first}); wait for it to finish or give another "
                                     "output") from None
            try:  # the previous holder may have removed the file between open and flock
                same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        if os.fstat(fd).st_size and not _is_lock(fd):  # a user's file named like our lock
            os.close(fd)
            raise UnsafeFileError(f"the lock file {str(self.path)!r} exists and was not "
                                  "written by paramgeo sweep; remove it or give another output")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{self.holder}, pid {os.getpid()}, started "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc):
        if self._fd is not None:
            self.path.unlink(missing_ok=True)  # while still locked: no one else holds it
            os.close(self._fd)
            self._fd = None


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A result (Result, dict) as a flat dict: nested dicts joined with ``.``, lists as JSON
    text, the non-finite floats that ``to_jsonable`` writes as text back to floats."""
    value = to_jsonable(value)
    if not isinstance(value, dict):
        return {prefix or "value": _scalar(value)}
    out: dict[str, Any] = {}
    _flatten_into(out, value, prefix)
    return out


def _flatten_into(out, value, prefix):
    """Add the JSON-able dict ``value`` to ``out`` flattened under ``prefix`` (converted once)."""
    for k, v in value.items():
        name = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            _flatten_into(out, v, name)
        else:
            out[name] = _scalar(v)


def _scalar(v):
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    return v


def make_row(cell: Cell, outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The table row of ``cell`` from a worker's ``outcome`` (see run_cell)."""
    params = cell.columns()
    row = {"cell": cell.key, "status": outcome["status"], "error": outcome["error"]}
    row.update(params)
    for k, v in outcome["result"].items():
        row[f"result.{k}" if k in row else k] = v
    return row


class Journal:
    """Append-only JSONL of finished rows next to the output, synced after every row."""

    def __init__(self, path):
        self.path = journal_path(path)
        self._fh = None

    def append(self, row: Mapping[str, Any]) -> None:
        if self._fh is None:
            # an existing journal is appended to only on --resume, after read_rows checked
            # that every line is a row paramgeo wrote
            fd = open_own(self.path, os.O_WRONLY | os.O_APPEND, what="journal")
            self._fh = os.fdopen(fd, "a")
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_rows(path: Union[str, os.PathLike]) -> dict[str, dict[str, Any]]:
    """Rows already finished for the output ``path``: those of the written table (if any),
    then those of the journal of an interrupted run (a torn last line is ignored)."""
    rows = {}
    path = Path(path)
    if path.is_file():
        for row in _read_table(path):
            rows[row["cell"]] = row
    journal = journal_path(path)
    if os.path.lexists(journal):
        with os.fdopen(open_own(journal, os.O_RDONLY, what="journal", create=False)) as fh:
            lines = fh.read().splitlines()
        for number, line in enumerate(lines, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a killed sweep
            if not (isinstance(row, dict) and isinstance(row.get("cell"), str)
                    and "status" in row):
                raise SweepSpecError(f"cannot resume from the journal {str(journal)!r}: line "
                                     f"{number} is not a row written by paramgeo sweep; remove "
                                     "that line (or the journal, to recompute its cells)")
            rows[row["cell"]] = row
    return rows


def _read_table(path):
    import pandas as pd

    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix == ".csv":
            df = pd.read_csv(path, keep_default_na=False, na_values=[""])
        else:
            df = pd.read_json(path, orient="records", lines=True)
    except Exception as exc:  # noqa: BLE001 - any reader failure is the same user problem
        raise SweepSpecError(f"cannot resume from {str(path)!r}: not a readable sweep table "
                             f"({type(exc).__name__}: {exc})") from None
    if "cell" not in df.columns:
        raise SweepSpecError(f"cannot resume from {str(path)!r}: it has no 'cell' column, so "
                             "it was not written by paramgeo sweep")
    return [{k: _none_if_nan(v) for k, v in r.items()} for r in df.to_dict("records")]


def _none_if_nan(v):
    if hasattr(v, "item"):  # numpy scalar
        v = v.item()
    return None if isinstance(v, float) and math.isnan(v) else v


def frame(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The rows as a pandas DataFrame (bookkeeping columns first, then first-seen order)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    return df[list(BOOKKEEPING) + [c for c in df.columns if c not in BOOKKEEPING]]


def write_table(df: Any, path: Union[str, os.PathLike]) -> Any:
    """Write ``df`` to ``path`` as Parquet, CSV or JSONL (by extension), through the one file
    writer (paramgeo.io.files.write_file). An existing table is replaced: the sweep has read it as
    its own (--resume) or was told to (--overwrite)."""
    path = Path(path)

    def content(fh):
        if path.suffix == ".parquet":
            _arrow_safe(df).to_parquet(fh, index=False)
        elif path.suffix == ".csv":
            fh.write(df.to_csv(index=False).encode())
        else:
            fh.write(df.to_json(orient="records", lines=True).encode())

    write_file(path, content, what="sweep table", replace=True)


def _arrow_safe(df):
    """Columns holding several Python types (e.g. a number in one row, text in another) as
    text, which Parquet needs; None stays missing."""
    df = df.copy()
    for c in df.columns:
        if df[c].dtype == object:
            kinds = {type(v) for v in df[c] if v is not None and v == v}
            if len(kinds) > 1 and not kinds <= {int, float}:
                df[c] = [None if v is None else str(v) for v in df[c]]
    return df
