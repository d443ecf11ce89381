"""Bad inputs that used to escape as internal errors (issue 14, section 2): each is one
``Error:`` line and exit code 2, or a documented behaviour.

Covers: ``paramgeo.cli``, ``paramgeo.cli._common``, ``paramgeo.critical.searching``,
``paramgeo.expressions.symbolic``, ``paramgeo.linalg.routes``, ``paramgeo.reports.description``,
``paramgeo.symmetry.discovery``, ``paramgeo_plugins.deep_diagonal``, ``paramgeo_plugins.hadamard``,
``paramgeo_plugins.monomial``, ``paramgeo_plugins.uut``.
"""

import sys

import numpy as np
import pytest
from click.testing import CliRunner
from numpy.lib import format as npformat

import paramgeo
from paramgeo.cli import main


def _one_error_line(res, fragment):
    assert res.exit_code == 2, res.output
    assert fragment in res.output, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    lines = [line for line in res.output.strip().splitlines() if not line.startswith("Note:")]
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output


def _rank_at(path):
    return CliRunner().invoke(main, ["rank", "uut", "-p", "d=4", "-p", "r=2", "--at", str(path)])


def _header_only(path, shape, descr="<f8"):
    """An .npy file that declares ``shape`` and holds no data (no memory is needed to write it)."""
    with open(path, "wb") as f:
        npformat.write_array_header_1_0(f, {"descr": descr, "fortran_order": False,
                                            "shape": shape})


def test_zero_byte_point_file(tmp_path):
    (tmp_path / "empty.npy").write_bytes(b"")
    _one_error_line(_rank_at(tmp_path / "empty.npy"), "empty.npy' is empty")


def test_point_header_declaring_1e11_entries_is_refused_before_loading(tmp_path):
    _header_only(tmp_path / "big.npy", (10 ** 11,))
    _one_error_line(_rank_at(tmp_path / "big.npy"), "holds shape (100000000000,); uut needs 8")


def test_truncated_and_text_point_files(tmp_path):
    np.save(tmp_path / "ok.npy", np.ones(8))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "ok.npy").read_bytes()[:-16])
    _one_error_line(_rank_at(tmp_path / "cut.npy"), "is truncated or unreadable")
    (tmp_path / "text.npy").write_text("1 2 3 4 5 6 7 8\n")
    _one_error_line(_rank_at(tmp_path / "text.npy"), "is not a readable .npy array")
    assert _rank_at(tmp_path / "ok.npy").exit_code == 0


@pytest.mark.parametrize("dtype", ["timedelta64[s]", "datetime64[s]", "bool"])
def test_time_and_bool_points_are_not_numbers(tmp_path, dtype):
    np.save(tmp_path / "t.npy", np.arange(8).astype(dtype))
    _one_error_line(_rank_at(tmp_path / "t.npy"), f"holds {dtype} values; theta must be real")


def test_npz_member_declaring_1e11_entries_is_refused(tmp_path):
    import zipfile

    _header_only(tmp_path / "X.npy", (10 ** 6, 10 ** 5))
    np.save(tmp_path / "y.npy", np.ones(3))
    with zipfile.ZipFile(tmp_path / "data.npz", "w") as z:
        z.write(tmp_path / "X.npy", "X.npy")
        z.write(tmp_path / "y.npy", "y.npy")
    res = CliRunner().invoke(main, ["implicit-bias", "hadamard", "--data",
                                    str(tmp_path / "data.npz"), "--init-scale", "0.1"])
    _one_error_line(res, "array X declares shape (1000000, 100000)")


@pytest.mark.parametrize("sizes", [["-p", "p=\u0663"], ["-p", "p=\uff13"]])
def test_unicode_digits_in_sizes(sizes):
    res = CliRunner().invoke(main, ["describe", "hadamard", *sizes])
    _one_error_line(res, "expected an integer (ASCII digits)")


def test_unicode_digits_in_int_lists():
    res = CliRunner().invoke(main, ["describe", "monomial", "-p", "widths=2,\u0663,1"])
    _one_error_line(res, "expected comma-separated integers")


def test_unicode_digits_in_python_sizes():
    with pytest.raises(paramgeo.errors.SizeError, match="ASCII digits"):
        paramgeo.get("hadamard", p="\u0663")
    assert paramgeo.get("hadamard", p="3").n == 6


def test_limit_inf_means_no_limit(monkeypatch):
    """PARAMGEO_MAX_JACOBIAN_ENTRIES=inf lifts the limit (documented in docs/cli.md)."""
    monkeypatch.setenv("PARAMGEO_MAX_JACOBIAN_ENTRIES", "inf")
    res = CliRunner().invoke(main, ["describe", "uut", "--route", "dense"])
    assert res.exit_code == 0 and "generic_rank" in res.output, res.output
    monkeypatch.setenv("PARAMGEO_MAX_JACOBIAN_ENTRIES", "100")
    _one_error_line(CliRunner().invoke(main, ["describe", "uut", "-p", "d=8", "--route",
                                              "dense"]), "more than the limit 100")


@pytest.mark.parametrize("value", ["nan", "-1", "lots", ""])
def test_limit_that_is_not_a_number(monkeypatch, value):
    monkeypatch.setenv("PARAMGEO_MAX_JACOBIAN_ENTRIES", value)
    _one_error_line(CliRunner().invoke(main, ["describe", "uut", "--route", "dense"]),
                    "must be a number >= 0 (e.g. 1e8), or inf for no limit")


def test_deep_diagonal_too_deep_is_refused_in_one_line():
    """depth 10^4 joins 10^4 factors of a coordinate into one 10^4 x 10^4 block of the torus's
    generators (10^6 used to exhaust memory building dense rows)."""
    res = CliRunner().invoke(main, ["describe", "deep-diagonal", "-p", "p=1", "-p",
                                    "depth=10000"])
    _one_error_line(res, "the largest block is 10000 x 9999")


def test_memory_error_is_one_line(monkeypatch):
    import paramgeo.reports.description

    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 745. GiB")

    monkeypatch.setattr(paramgeo.reports.description, "describe", exhausted)
    _one_error_line(CliRunner().invoke(main, ["describe", "uut"]), "out of memory")


@pytest.mark.parametrize("variant,depth", [("product", 3), ("signed", 2), ("signed", 4),
                                           ("signed", 3)])
def test_deep_diagonal_discrete_symmetries_leave_phi_invariant(variant, depth):
    param = paramgeo.get("deep-diagonal", p=5, depth=depth, variant=variant)
    rng = np.random.default_rng(1)
    group = param.symmetry()
    theta = param.random_point(rng)
    moved = 0
    for _ in range(20):
        g = group.random_element(rng)
        other = group.act(g, theta)
        np.testing.assert_allclose(param.forward(other), param.forward(theta), rtol=1e-12,
                                   atol=1e-12)
        moved += not np.allclose(other, theta)
    assert moved >= 15  # the elements are not (mostly) the identity


def test_deep_diagonal_symmetry_of_a_deep_net_is_built_in_linear_memory():
    import tracemalloc

    param = paramgeo.get("deep-diagonal", p=3, depth=200_000)
    tracemalloc.start()
    group = param.symmetry()
    g = group.random_element(np.random.default_rng(0))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200 * param.n  # bytes: O(n), not the 1.4e12 of dense rows
    assert group.act(g, np.ones(param.n)).shape == (param.n,)


def test_slow_dense_route_is_announced_before_it_starts(monkeypatch):
    import paramgeo.cli._common as common

    monkeypatch.setattr(common, "SLOW_SVD_WORK", 100)
    res = CliRunner().invoke(main, ["describe", "uut", "--route", "dense"])
    assert res.exit_code == 0
    assert "Note: uut (d=4, r=2): every dense SVD of the 16 x 8 Jacobian" in res.output


def test_hadamard_1000_is_fast():
    """describe hadamard p=1000 took a minute (five 1000 x 2000 dense SVDs on a busy core): the
    closed-form rank answers it, and a plugin with a sparse J but no closed form (hadamard
    without rank_at) takes the sparse route above 2e8 flops of SVD work instead of the SVD."""
    from paramgeo.linalg import routes
    from paramgeo_plugins.hadamard import Hadamard

    class NoClosedRank(Hadamard):
        capabilities = Hadamard.capabilities - {"rank_at"}

    assert routes.choose_route(paramgeo.get("hadamard", p=1000)) == "closed-form"
    assert routes.choose_route(NoClosedRank(p=1000)) == "sparse"
    assert routes.choose_route(NoClosedRank(p=100)) == "dense"
    assert routes.choose_route(paramgeo.get("monomial", widths=(20, 20, 1))) == "dense"
    res = CliRunner().invoke(main, ["describe", "hadamard", "-p", "p=1000", "--json"])
    assert res.exit_code == 0 and '"generic_rank": 1000' in res.output


# ------------------------------------------ long runs: progress, Ctrl-C, refusal of the endless
def _interrupt_at(k):
    """A progress callback that presses Ctrl-C when ``k`` units are done."""
    def progress(done, total):
        if done == k:
            raise KeyboardInterrupt
    return progress


def test_search_interrupted_returns_the_finished_starts():
    from paramgeo.critical import search

    param = paramgeo.get("monomial", widths=(2, 2, 1), degree=2)
    part = search(param, starts=5, seed=3, maxiter=20, progress=_interrupt_at(2))
    full = search(param, starts=2, seed=3, maxiter=20)
    assert part.interrupted and not full.interrupted
    assert part.starts == 5 and len(part.points) == 2
    assert [p["ratio"] for p in part.points] == [p["ratio"] for p in full.points]
    assert part.critical == full.critical and part.other == full.other
    assert "INTERRUPTED after 2 of 5 starts" in str(part)


def test_search_cli_interrupted_prints_result_and_one_line(monkeypatch):
    import paramgeo.critical.searching as searching

    calls = {"n": 0}
    classify = searching.classify

    def classify_then_interrupt(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return classify(*args, **kwargs)

    monkeypatch.setattr(searching, "classify", classify_then_interrupt)
    res = CliRunner().invoke(main, ["search", "monomial", "-p", "widths=2,2,1", "-p", "degree=2",
                                    "--starts", "6", "--maxiter", "10"])
    assert res.exit_code == 130, res.output
    assert "INTERRUPTED after 2 of 6 starts" in res.output
    assert res.output.strip().splitlines()[-1] == (
        "Error: interrupted after 2 of 6 starts; the output above holds the finished ones")


def test_exact_interrupted_keeps_finished_points_and_is_not_cached():
    from paramgeo.expressions.symbolic import exact_analysis

    param = paramgeo.get("uut", d=3, r=2)
    part = exact_analysis(param, n_points=3, seed=7, progress=_interrupt_at(1))
    assert part.interrupted and len(part.rational_ranks) == 1 and part.symbolic_rank is None
    full = exact_analysis(param, n_points=3, seed=7)
    assert not full.interrupted and full.rational_ranks[0] == part.rational_ranks[0]
    assert full.symbolic_rank == 5  # d r - r(r-1)/2


def test_exact_cli_interrupted(monkeypatch):
    import paramgeo.expressions.symbolic as symbolic

    rank_at = symbolic.exact_rank_at
    calls = {"n": 0}

    def rank_then_interrupt(*args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return rank_at(*args)

    monkeypatch.setattr(symbolic, "exact_rank_at", rank_then_interrupt)
    res = CliRunner().invoke(main, ["exact", "hadamard", "-p", "p=2", "--points", "4",
                                    "--seed", "11"])
    assert res.exit_code == 130, res.output
    assert "INTERRUPTED after 1 of 4 points" in res.output
    assert res.output.strip().splitlines()[-1].startswith(
        "Error: interrupted after 1 of 4 rational points")


def test_discover_interrupted_keeps_the_scaling_symmetries(monkeypatch):
    from paramgeo.symmetry import discover

    param = paramgeo.get("hadamard", p=3)
    part = discover(param, progress=_interrupt_at(4))
    assert part.interrupted and part.dim is None and part.discrete is None  # not searched
    assert part.note.startswith("interrupted after 4 of ")
    full = discover(param)
    assert part.scaling_dim == full.scaling_dim == 3 and full.dim == 3

    monkeypatch.setattr(sys.modules["paramgeo.symmetry"], "discover", lambda *a, **k: discover(
        *a, **{**k, "progress": _interrupt_at(4)}))  # what the command imports
    res = CliRunner().invoke(main, ["discover", "hadamard", "-p", "p=3"])
    assert res.exit_code == 130, res.output
    assert "scaling symmetries: dimension 3" in res.output
    assert res.output.strip().splitlines()[-1].startswith("Error: interrupted after 4 of ")


@pytest.mark.parametrize("args,fragment", [
    (["search", "monomial", "--starts", "1000000000"], "1000000000 is not in the range 1<=x<=100000"),
    (["exact", "uut", "--points", "1000000"], "1000000 is not in the range 1<=x<=1000"),
    (["discover", "uut", "-p", "d=100", "-p", "r=10", "--max-dim", "1000000"],
     "runs up to about n = 84"),
])
def test_endless_runs_are_refused_saying_what_would_run(args, fragment):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and fragment in res.output, res.output
    assert res.output.strip().splitlines()[-1].startswith("Error: ")  # after click's usage


def test_progress_is_shown_when_asked():
    res = CliRunner().invoke(main, ["exact", "hadamard", "-p", "p=2", "--progress"])
    assert res.exit_code == 0 and "exact" in res.stderr
    res = CliRunner().invoke(main, ["discover", "hadamard", "-p", "p=2", "--progress"])
    assert res.exit_code == 0 and "discover (linear search)" in res.stderr
