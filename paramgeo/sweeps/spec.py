"""Sweep files: parsing, expansion into cells, validation, and the stable hash of a cell.

A sweep file (TOML) fixes some parameters at the top level and varies others::

    query = "describe"                 # any registered query (paramgeo.sweeps.QUERIES)
    plugin = "monomial"                # a registered plugin, or a .py file
    plugin_files = ["my_param.py"]     # optional: files that register plugins
    sizes = { degree = 2 }             # fixed sizes
    options = { seed = 0 }             # fixed options of the query

    [grid]                             # cartesian product: every value is a list
    sizes.widths = ["2,2,1", "3,2,1"]
    options.seed = [0, 1, 2]

    [[cells]]                          # explicit cells (combined with the grid by product)
    sizes = { widths = "2,2,1", degree = 4 }

Every cell is validated (query, plugin, sizes, options, files) before anything runs; a mistake
is one :class:`SweepSpecError` naming the file, the cell and the fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Mapping, Union

from ..errors import ParamgeoError, approx
from ..results import to_jsonable
from .queries import REQUIRED, get_query

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: The most cells of one sweep (each one a row of the table and a Dask task).
MAX_CELLS = 100_000

TOP_KEYS = ("query", "plugin", "plugin_files", "sizes", "options", "grid", "cells")
VARYING = ("query", "plugin", "sizes", "options")


class SweepSpecError(ParamgeoError, ValueError):
    """A sweep file is malformed: unknown query, plugin, size or option, an empty grid, ..."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
    """One task of a sweep: a query on a plugin at given sizes with given options.

    ``sizes`` are the plugin's full sizes (defaults filled) and ``options`` the query's full
    options (defaults filled), so two spellings of one computation have one ``key``: the
    first 16 hex digits of the SHA-256 of their canonical JSON (files by content).
    """

    index: int
    query: str
    plugin: str
    sizes: dict
    options: dict
    plugin_files: tuple
    key: str
    time_limit: object = None  # seconds a worker gives the cell (not part of its key)

    def task(self) -> dict[str, Any]:
        """The picklable description a worker runs (see :func:`paramgeo.sweeps.run_cell`)."""
        return {"key": self.key, "query": self.query, "plugin": self.plugin,
                "sizes": self.sizes, "options": self.options,
                "plugin_files": list(self.plugin_files), "time_limit": self.time_limit}

    def columns(self) -> dict[str, Any]:
        """The cell's parameters as table columns: query, plugin, its sizes (written as on the
        command line, ``2,2,1``) and its options."""
        out = {"query": self.query, "plugin": self.plugin}
        out.update({k: _size_text(v) for k, v in self.sizes.items()})
        out.update({k: json.dumps(v) if isinstance(v, list) else v
                    for k, v in self.options.items()})
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """A parsed, validated sweep: its source and its cells in order."""

    source: str
    cells: tuple


def load_spec(spec: Union[str, os.PathLike, Mapping[str, Any], SweepSpec]) -> SweepSpec:
    """A validated :class:`SweepSpec` from a sweep file, a dict of the same structure, or itself.

    The fixed parameters and the grid (a cartesian product) expand into cells, each validated
    (query, plugin, sizes, options, files) before anything runs (the file format: module
    docstring and docs/sweeps.md).

    Args:
        spec: a path to a TOML file, a dict of the same structure, or a SweepSpec (returned as
            is).

    Returns:
        The :class:`SweepSpec` with its ``cells``.

    Raises:
        SweepSpecError: any mistake, naming the file, the cell and the fix.

    Examples:
        >>> from paramgeo.sweeps import load_spec
        >>> spec = load_spec({"query": "rank", "plugin": "uut",
        ...                   "grid": {"sizes": {"d": [2, 3], "r": [1, 2]}}})
        >>> len(spec.cells), spec.cells[0].sizes
        (4, {'d': 2, 'r': 1})
    """
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, dict):
        return expand(spec, "<dict>", Path.cwd())
    if not isinstance(spec, (str, os.PathLike)):
        raise SweepSpecError(f"spec must be the path of a TOML sweep file, a dict or a "
                             f"SweepSpec, got {type(spec).__name__}")
    path = Path(spec)
    if not path.is_file():
        raise SweepSpecError(f"sweep file {str(spec)!r} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SweepSpecError(f"sweep file {str(spec)!r} is not valid TOML: {exc}") from None
    except RecursionError:
        raise SweepSpecError(f"sweep file {str(spec)!r}: arrays or tables nested too deeply "
                             "(a sweep file needs a few levels)") from None
    return expand(data, str(spec), path.resolve().parent)


def expand(data: Mapping[str, Any], source: str, base: Union[str, os.PathLike]) -> SweepSpec:
    """Expand the sweep ``data`` (fixed keys, ``grid`` product, ``cells`` list) into validated
    :class:`Cell` objects; relative file paths are taken from the folder ``base``."""
    where = f"sweep file {source}"
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise SweepSpecError(f"{where}: unknown key(s) {', '.join(unknown)}; a sweep file has "
                             f"{', '.join(TOP_KEYS)}")
    fixed = _flat({k: data[k] for k in VARYING if k in data}, where)
    grid = data.get("grid", {})
    if not isinstance(grid, dict):
        raise SweepSpecError(f"{where}: [grid] must be a table of lists")
    axes = _flat(grid, f"{where}, [grid]")
    for name, values in axes.items():
        if not isinstance(values, list):
            raise SweepSpecError(f"{where}, [grid]: {name} must be a list of values, got "
                                 f"{values!r} (put a single value at the top level)")
        if not values:
            raise SweepSpecError(f"{where}, [grid]: {name} is an empty list, so the grid has "
                                 "no cells; give it at least one value")
    cases = data.get("cells", [{}])
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise SweepSpecError(f"{where}: cells must be an array of tables ([[cells]])")
    if not cases:
        raise SweepSpecError(f"{where}: cells is empty, so the sweep has no cells")
    cases = [_flat(c, f"{where}, cells[{i}]") for i, c in enumerate(cases)]
    files = data.get("plugin_files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise SweepSpecError(f"{where}: plugin_files must be a list of paths")
    files = tuple(str(_existing(base, f, where)) for f in files)
    _load_plugin_files(files, where)
    total = len(cases) * math.prod(len(values) for values in axes.values())
    if total > MAX_CELLS:  # counted before a single cell is validated
        raise SweepSpecError(f"{where}: the grid has {approx(total)} cells, more than one sweep "
                             f"runs ({MAX_CELLS:,}); split it into several sweep files")
    # each axis value is validated once: the resolved plugins and the converted options are
    # kept by value (the grid is a product, so its cells repeat them)
    cells: list[Cell] = []
    seen: dict = {}
    params: dict = {}
    converted: dict = {}
    warned: set = set()
    for case in cases:
        for point in itertools.product(*axes.values()):
            raw = dict(fixed)
            for part, label in ((dict(zip(axes, point)), "[grid]"), (case, "cells")):
                for k, v in part.items():
                    if k in raw:
                        raise SweepSpecError(f"{where}: {k} is set twice (at the top level or "
                                             f"in [grid], and in {label}); set it in one place")
                    raw[k] = v
            cell = _cell(len(cells), raw, files, base, f"{where}, cell {len(cells)}", params,
                         converted, warned=warned, sweep_where=where)
            if cell.key in seen:
                raise SweepSpecError(f"{where}: cells {seen[cell.key]} and {cell.index} are the "
                                     f"same computation ({_describe(raw)}); remove one")
            seen[cell.key] = cell.index
            cells.append(cell)
    return SweepSpec(source=source, cells=tuple(cells))


def _flat(table, where):
    """{"query": q, "plugin": p, "sizes": {...}, "options": {...}} -> {"query", "plugin",
    "sizes.k", "options.k"} (one namespace per kind, so a size and an option may share a name)."""
    out = {}
    for k, v in table.items():
        if k in ("query", "plugin"):
            out[k] = v
        elif k in ("sizes", "options"):
            if not isinstance(v, dict):
                raise SweepSpecError(f"{where}: {k} must be a table, e.g. {k} = {{ name = 1 }}")
            out.update({f"{k}.{name}": value for name, value in v.items()})
        else:
            raise SweepSpecError(f"{where}: unknown key {k!r}; use query, plugin, sizes.NAME "
                                 "or options.NAME")
    return out


def _describe(raw):
    return ", ".join(f"{k}={_size_text(v)}" for k, v in raw.items())


def _size_text(value):
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return value


def _existing(base, value, where):
    p = Path(value)
    p = p if p.is_absolute() else base / p
    if not p.is_file():
        raise SweepSpecError(f"{where}: file {value!r} does not exist (paths are relative to "
                             f"the sweep file's folder {str(base)!r})")
    return p.resolve()


def _load_plugin_files(files, where):
    from ..contract.registry import load_plugin_file

    for f in files:
        try:
            load_plugin_file(f)
        except ParamgeoError as exc:
            raise SweepSpecError(f"{where}: {exc}") from None


def _file_digests(files, cache):
    """The digests of the plugin files, read once per sweep file (kept in ``cache``)."""
    if ("files", files) not in cache:
        cache[("files", files)] = [_digest(f) for f in files]
    return cache[("files", files)]


def _digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _single_name(path, where):
    from ..contract.registry import load_plugin_file

    try:
        names = load_plugin_file(path)
    except ParamgeoError as exc:
        raise SweepSpecError(f"{where}: {exc}") from None
    if len(names) != 1:
        raise SweepSpecError(f"{where}: {path} defines several parameterizations "
                             f"({', '.join(names)}); list it in plugin_files and name one")
    return names[0]


class _Where:
    """``where (the cell's parameters)`` for an error message, written out only when one is
    raised."""

    def __init__(self, where, raw):
        self.where, self.raw = where, raw

    def __str__(self):
        return f"{self.where} ({_describe(self.raw)})"

    def __format__(self, spec):
        return format(str(self), spec)


def _cell(index, raw, files, base, where, params, converted, warned=None, sweep_where=None):
    """Validate one cell's raw parameters and build the Cell (with its key); ``params`` and
    ``converted`` keep the plugins resolved and the option values converted so far;
    ``warned``, the (query, former option name) pairs already warned about in the sweep file
    ``sweep_where``, makes a former name one warning per sweep file, not one per cell."""
    from ..cli._common import resolve

    for k in ("query", "plugin"):
        if k not in raw:
            raise SweepSpecError(f"{where}: no {k}; set {k} = \"...\" at the top level, in "
                                 "[grid] or in the cell")
        if not isinstance(raw[k], str):
            raise SweepSpecError(f"{where}: {k} must be a string, got {raw[k]!r}")
    where = _Where(where, raw)
    try:
        query = get_query(raw["query"])
    except ParamgeoError as exc:
        raise SweepSpecError(f"{where}: {exc}") from None
    sizes = {k[6:]: v for k, v in raw.items() if k.startswith("sizes.")}
    plugin = raw["plugin"]
    if plugin.endswith(".py"):  # a plugin file: load it, and let the workers load it too
        path = str(_existing(base, plugin, where))
        plugin, files = _single_name(path, where), files + (path,)
    try:
        pairs = tuple(f"{k}={_size_text(v)}" for k, v in sizes.items())
        cache_key = (plugin, pairs, query.dense)
        if cache_key not in params:
            resolved = resolve(plugin, pairs, dense=query.dense)
            params[cache_key] = resolved, to_jsonable(dict(resolved.sizes))
        param, full_sizes = params[cache_key]
    except ParamgeoError as exc:
        raise SweepSpecError(f"{where}: {exc}") from None
    given = {k[8:]: v for k, v in raw.items() if k.startswith("options.")}
    for old, new in query.renamed.items():
        if old in given:
            if new in given:
                raise SweepSpecError(f"{where}: give options.{new} only (options.{old} is its "
                                     "deprecated former name)")
            if warned is None or (query.name, old) not in warned:
                head = where if warned is None else f"{sweep_where}, query {query.name}"
                warnings.warn(f"{head}: options.{old} is deprecated and goes in the next "
                              f"release; use options.{new}", FutureWarning, stacklevel=2)
                if warned is not None:
                    warned.add((query.name, old))
            given[new] = given.pop(old)
    unknown = sorted(set(given) - set(query.options))
    if unknown:
        raise SweepSpecError(f"{where}: query {query.name!r} has no option "
                             f"{', '.join(unknown)}; its options: "
                             f"{', '.join(query.options) or 'none'}")
    options, digests = {}, {}
    for name, opt in query.options.items():
        if name not in given:
            if opt.default is REQUIRED:
                raise SweepSpecError(f"{where}: query {query.name!r} needs options.{name} "
                                     f"({opt.help or 'required'})")
            options[name] = opt.default
            continue
        given_key = (query.name, name, type(given[name]), repr(given[name]))
        if given_key not in converted:
            try:
                value = opt.convert(given[name])
            except (ValueError, ParamgeoError) as exc:
                raise SweepSpecError(f"{where}: options.{name} {exc}") from None
            digest = None
            if opt.path and value is not None:
                value = str(_existing(base, value, where))
                digest = _digest(value)
            converted[given_key] = value, digest
        value, digest = converted[given_key]
        if digest is not None:
            digests[name] = digest
        options[name] = value
    canonical = json.dumps({"query": query.name, "plugin": param.name, "sizes": full_sizes,
                            "options": {k: (digests.get(k) or v) for k, v in options.items()},
                            "plugin_files": _file_digests(files, converted)},
                           sort_keys=True)
    key = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    return Cell(index=index, query=query.name, plugin=plugin, sizes=full_sizes, options=options,
                plugin_files=files, key=key)
