"""The paramgeo CLI, driven with click's CliRunner and, once, as a real subprocess."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from paramgeo.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_describe_uut_json():
    res = run("describe", "uut", "-p", "d=4", "-p", "r=2", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["param_dim"] == 8 and out["predictor_dim"] == 16
    assert out["generic_rank"] == 7 and out["quotient_dim"] == 7
    assert out["symmetry"] == {"name": "O(2)", "dim": 1}


def test_describe_hadamard_json():
    out = json.loads(run("describe", "hadamard", "-p", "p=5", "--json").output)
    assert (out["param_dim"], out["generic_rank"], out["symmetry"]["dim"], out["quotient_dim"]) \
        == (10, 5, 5, 5)


def test_rank_at_rank_one_point(tmp_path, rng):
    U = np.outer(rng.standard_normal(4), rng.standard_normal(2))
    np.save(tmp_path / "U.npy", U)
    res = run("rank", "uut", "-p", "d=4", "-p", "r=2", "--at", str(tmp_path / "U.npy"), "--json")
    out = json.loads(res.output)
    assert out["rank"] == 4 and out["generic_rank"] == 7
    assert len(out["singular_values"]) == 8


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["describe", "nosuch"], "unknown parameterization 'nosuch'; available:"),
        (["describe", "uut", "-p", "d=abc"], "size d='abc' is invalid: expected an integer"),
        (["describe", "uut", "-p", "q=3"], "unknown size q"),
        (["describe", "uut", "-p", "d"], "must look like KEY=VALUE"),
        (["rank", "uut", "--at", "missing.npy"], "point file 'missing.npy' does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, fragment):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2
    assert fragment in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_point_file_wrong_shape_or_nan(tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((3, 2)))
    res = CliRunner().invoke(main, ["rank", "uut", "--at", str(tmp_path / "bad.npy")])
    assert res.exit_code == 2 and "needs 8 entries" in res.output
    nan = np.zeros((4, 2))
    nan[1, 1] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    res = CliRunner().invoke(main, ["rank", "uut", "--at", str(tmp_path / "nan.npy")])
    assert res.exit_code == 2 and "non-finite value at U[1,1]" in res.output


def test_check_passes_and_broken_file_fails(tmp_path):
    res = run("check", "hadamard", "-p", "p=3")
    assert res.exit_code == 0 and "passed" in res.output
    path = tmp_path / "bad.py"
    path.write_text(
        "from paramgeo import get_class\n"
        "class Bad(get_class('hadamard')):\n"
        "    name = 'bad-hadamard'\n"
        "    def jvp(self, theta, v):\n"
        "        return 0 * super().jvp(theta, v)\n"
    )
    res = CliRunner().invoke(main, ["check", str(path)])
    assert res.exit_code == 1
    assert "FAIL  jvp" in res.output and "fails the contract: jvp" in res.output


def test_list_and_describe_all():
    res = run("list")
    assert "uut" in res.output and "hadamard" in res.output
    res = run("describe", "--all")
    assert res.exit_code == 0
    assert "generic rank" in res.output and "O(2) (1)" in res.output


def test_every_command_has_help_and_docs():
    docs = (ROOT / "docs" / "cli.md").read_text()
    for name in COMMANDS:
        res = run(name, "--help")
        assert res.exit_code == 0 and "Example" in res.output, name
        assert f"paramgeo {name}" in docs, f"docs/cli.md does not document `paramgeo {name}`"


def test_cli_py_shim_runs():
    out = subprocess.run([sys.executable, str(ROOT / "cli.py"), "describe", "hadamard", "-p",
                          "p=2", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["generic_rank"] == 2


def test_broken_entry_point_is_skipped_in_listings(monkeypatch):
    from importlib.metadata import EntryPoint

    from paramgeo import registry

    eps = dict(registry._discover())
    eps["broken-ep"] = EntryPoint("broken-ep", "nosuchmodule_xyz:Thing", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "_entry_points", eps)
    res = CliRunner().invoke(main, ["list"])
    assert res.exit_code == 0
    assert "uut" in res.stdout and "Warning: skipping broken-ep" in res.stderr


def test_npz_given_as_point_is_a_readable_error(tmp_path):
    np.savez(tmp_path / "x.npz", theta=np.zeros(8))
    res = CliRunner().invoke(main, ["rank", "uut", "--at", str(tmp_path / "x.npz")])
    assert res.exit_code == 2 and "is an .npz archive" in res.output
