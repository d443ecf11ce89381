"""Sweeps: grids of paramgeo queries from one TOML file, run on Dask, written as tidy tables.

``paramgeo.sweep(spec, output)`` (and ``paramgeo sweep SPEC.toml -o OUT``) expands the spec into
cells (one query on one plugin at given sizes and options; see :mod:`paramgeo.sweeps.spec`),
runs each cell as one task on a ``dask.distributed`` cluster (local by default) and writes one
row per cell (see :mod:`paramgeo.sweeps.table`). Dask, pandas and pyarrow are imported only
when a sweep runs (the ``sweep`` extra).
"""

from . import _quotient_queries  # registers the quotient's queries
from .queries import QUERIES, Option, Query, register_query
from .run import SweepSummary, run_cell, sweep
from .spec import Cell, SweepSpec, SweepSpecError, load_spec

__all__ = ["QUERIES", "Cell", "Option", "Query", "SweepSpec", "SweepSpecError", "SweepSummary",
           "load_spec", "register_query", "run_cell", "sweep"]
