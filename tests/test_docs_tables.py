"""The tables of the docs are the code's: cells regenerated here by the scripts that write them.

The tables of docs/critical.md (the monomial critical-point search, written by
``examples/sweeps/tables.py monomial-critical ... --docs docs/critical.md``), of the gallery
(``examples/monomial_critical_search.py``, ``examples/relu_width_collapse.py``) and of
docs/plugins/relu-net.md are produced by scripts that take minutes; a cheap cell of each is
recomputed here with the page's settings (starts, seed, steps) and formatted by the script's own
function, and must be the page's cell. The shown outputs of commands and Python blocks are
compared whole in tests/test_docs.py.

Covers: ``paramgeo.critical.searching``, ``paramgeo_plugins.monomial``.
"""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module(path):
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _table(text, marker=None):
    """Rows (lists of cells) of the first Markdown table of ``text`` (after ``marker``)."""
    if marker:
        text = text.split(marker, 1)[1]
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    block = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        block.append([c.strip() for c in line.strip("|").split("|")])
    return block[0], block[2:]


def test_monomial_critical_search_cell_is_the_codes():
    """widths 3,3,1, k = 2 (the cell with dependent-weights points), 12 starts, seed 0: the
    search's counts, formatted by examples/sweeps/tables.py, are the cell of docs/critical.md
    and the row of the gallery table."""
    pd = pytest.importorskip("pandas")
    import paramgeo
    from paramgeo.critical import search

    toml = (ROOT / "examples" / "sweeps" / "monomial_critical_search.toml").read_text()
    assert "options = { starts = 12, seed = 0 }" in toml
    res = search(paramgeo.get("monomial", widths=(3, 3, 1), degree=2), starts=12, seed=0)
    df = pd.DataFrame([{"widths": "3,3,1", "degree": 2, "starts": res.starts,
                        "critical": res.critical, "subnetwork": res.subnetwork,
                        "near_subnetwork": res.near_subnetwork,
                        "dependent_weights": res.dependent_weights, "other": res.other}])
    tables = _module("examples/sweeps/tables.py")
    _, (row,) = _table(tables.critical_pivot(df))
    head, rows = _table((ROOT / "docs" / "critical.md").read_text(),
                        "<!-- sweep:monomial_critical_search -->")
    page = next(r for r in rows if r[0] == "3,3,1")
    assert page[head.index("k = 2")] == row[1]
    head, rows = _table((ROOT / "docs" / "gallery" / "monomial_critical_search.md").read_text())
    gallery = next(r for r in rows if r[:2] == ["3,3,1", "2"])
    got = {"critical": res.critical, "subnetwork": res.subnetwork,
           "near_subnetwork": res.near_subnetwork, "dependent": res.dependent_weights,
           "other": res.other}
    assert {k: int(gallery[head.index(k)]) for k in got} == got


def test_relu_width_collapse_row_is_the_codes():
    """Width 25 with the script's defaults: the row of docs/plugins/relu-net.md and of the
    gallery table, formatted by the script's own function."""
    ex = _module("examples/relu_width_collapse.py")
    args = ex.parser().parse_args([])
    X, Y, P = ex.problem(args.seed)
    row = ex.table_row(ex.width_row(X, Y, P, 25, args, args.steps))
    for page in ("docs/plugins/relu-net.md", "docs/gallery/relu_width_collapse.md"):
        lines = [line for line in (ROOT / page).read_text().splitlines()
                 if line.startswith("| 25 |")]
        assert lines == [row], (page, row)


def test_table_reader_reads_the_page_tables():
    """The reader above against a table it can be checked on by hand."""
    head, rows = _table("text\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\nmore\n| x |")
    assert head == ["a", "b"] and rows == [["1", "2"], ["3", "4"]]
    head, rows = _table("| z |\n|---|\n| 0 |\n<!-- m -->\n| a |\n|---|\n| 5 |", "<!-- m -->")
    assert head == ["a"] and rows == [["5"]]
