"""The tidy table of a sweep: one row per cell, streamed to a journal, written by extension.

A row is the cell's key, status and error, its parameters (:meth:`Cell.columns`) and the
query's JSON fields flattened (nested dicts joined with ``.``; lists as JSON text; a field named
like a parameter is prefixed ``result.``). Finished rows are appended to the journal
``OUT.partial.jsonl`` (flushed and synced) as they arrive, so a killed sweep loses no finished
cell; at the end the table is written in cell order as Parquet (pyarrow), CSV or JSONL by the
extension of OUT and the journal is removed.
"""

import json
import math
import os
from pathlib import Path

from ..results import to_jsonable
from .spec import SweepSpecError

FORMATS = (".parquet", ".csv", ".jsonl")
BOOKKEEPING = ("cell", "status", "error")


def check_output(path):
    """The output path, refused (SweepSpecError) unless its extension is a known format."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise SweepSpecError(f"output {str(path)!r}: unknown format {path.suffix or '(none)'}; "
                             f"give a file ending in {', '.join(FORMATS)}")
    if path.is_dir():
        raise SweepSpecError(f"output {str(path)!r} is a directory; give a file name")
    return path


def journal_path(path):
    return Path(f"{path}.partial.jsonl")


def flatten(value, prefix=""):
    """A result (Result, dict) as a flat dict: nested dicts joined with ``.``, lists as JSON
    text, the non-finite floats that ``to_jsonable`` writes as text back to floats."""
    value = to_jsonable(value)
    if not isinstance(value, dict):
        return {prefix or "value": _scalar(value)}
    out = {}
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


def make_row(cell, outcome):
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

    def append(self, row):
        if self._fh is None:
            self._fh = open(self.path, "a")
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self):
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_rows(path):
    """Rows already finished for the output ``path``: those of the written table (if any),
    then those of the journal of an interrupted run (a torn last line is ignored)."""
    rows = {}
    path = Path(path)
    if path.is_file():
        for row in _read_table(path):
            rows[row["cell"]] = row
    journal = journal_path(path)
    if journal.is_file():
        for line in journal.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
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


def frame(rows):
    """The rows as a pandas DataFrame (bookkeeping columns first, then first-seen order)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    return df[list(BOOKKEEPING) + [c for c in df.columns if c not in BOOKKEEPING]]


def write_table(df, path):
    """Write ``df`` to ``path`` as Parquet, CSV or JSONL (by extension), atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".parquet":
        _arrow_safe(df).to_parquet(tmp, index=False)
    elif path.suffix == ".csv":
        df.to_csv(tmp, index=False)
    else:
        df.to_json(tmp, orient="records", lines=True)
    os.replace(tmp, path)


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
