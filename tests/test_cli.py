"""The paramgeo CLI, driven with click's CliRunner and, once, as a real subprocess.

Covers: ``paramgeo.cli``, ``paramgeo.cli._flow``, ``paramgeo.contract.registry``,
``paramgeo.dynamics.trajectory``, ``paramgeo.flows``, ``paramgeo.losses.predictor``,
``paramgeo.mirror.bias``, ``paramgeo.sweeps.queries``, ``paramgeo.sweeps.spec``.
"""

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
    assert out["n"] == 8 and out["m"] == 16
    assert out["generic_rank"] == 7 and out["quotient_dim"] == 7
    assert out["symmetry"] == {"name": "O(2)", "dim": 1}


def test_describe_hadamard_json():
    out = json.loads(run("describe", "hadamard", "-p", "p=5", "--json").output)
    assert (out["n"], out["generic_rank"], out["symmetry"]["dim"], out["quotient_dim"]) \
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


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["rank"], "Missing argument 'NAME'. (see 'paramgeo rank --help')"),
        (["nosuch"], "No such command 'nosuch'. (see 'paramgeo --help')"),
        (["llc", "estimate", "uvt", "--bogus"], "No such option '--bogus'"),
        (["flow", "uut", "--data", "x.npz", "--steps", "0"], "'--steps': 0 is not in the range"),
        (["--plugin"], "Option '--plugin' requires an argument. (see 'paramgeo --help')"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args, fragment):
    """click's usage errors (a usage line, a "Try ... --help" line, then the error) are one
    line like every other error, ending with where the help is."""
    res = CliRunner().invoke(main, args, prog_name="paramgeo")
    assert res.exit_code == 2 and fragment in res.output, res.output
    assert res.output.startswith("Error: ") and len(res.output.strip().splitlines()) == 1
    assert "--help')" in res.output and "Usage:" not in res.output


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
    # monomial widths 2,3,1 degree 2: predictors are binary quadratic forms (3 coefficients),
    # quotient dim 9 - 3 = 6 > 3, so the rank (3) is capped by the predictor dimension
    row = next(line for line in res.output.splitlines() if line.startswith("monomial"))
    assert row.split()[3:6] == ["9", "3", "3"] and row.endswith(
        "6             no: capped by predictor dim"), row
    assert "capped by predictor" in res.output.split(row)[1]  # the legend explains it


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

    from paramgeo.contract import registry

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


# ---------------------------------------------------------------- hostile input (first-user pass)

def _hostile_files(d):
    """The bad files the hostile-input cases below refer to, written into ``d``."""
    np.save(d / "str.npy", np.array(["a"] * 8))
    np.save(d / "cplx.npy", np.ones(8) * 1j)
    np.save(d / "theta.npy", np.zeros(8))
    np.savez(d / "emptyA.npz", A=np.zeros((0, 5)), y=np.zeros(0))
    np.savez(d / "good.npz", A=np.ones((3, 5)), y=np.ones(3))
    np.savez(d / "mismatch.npz", A=np.ones((3, 5)), y=np.ones(4))
    np.savez(d / "poststr.npz", mean=np.array(["a"] * 10), std=0.1, empirical_risk=0.1)
    (d / "notpy.txt").write_text("x = 1\n")
    (d / "huge.toml").write_text('name = "huge"\npredictor = "u**2"\n[parameters]\n'
                                 'u = [100000000]\n')
    (d / "hyp.toml").write_text('name = "hyp-ux"\npredictor = "u**2 - v**2"\n[sizes]\np = 3\n'
                                '[parameters]\nu = ["p"]\nv = ["p"]\n')


HOSTILE = [
    (["rank", "uut", "--seed", "-1"], "-1 is not in the range x>=0"),
    (["critical", "uut", "--seed", "-5"], "-5 is not in the range x>=0"),
    (["rank", "uut", "--at", "{d}/str.npy"], "holds <U1 values; theta must be real numbers"),
    (["rank", "uut", "--at", "{d}/cplx.npy"], "holds complex128 values"),
    (["describe", "uut", "-p", "d=4", "-p", "d=5"], "size d is given twice"),
    (["describe", "monomial", "-p", "widths=2,,1"], "expected comma-separated integers"),
    (["describe", "uut", "--all"], "give either --all or a NAME"),
    (["describe", "--all", "-p", "p=3"], "give either --all or a NAME"),
    (["--plugin", "{d}/notpy.txt", "list"], "is not a Python file"),
    (["describe", "uut", "-p", "d=99999999999999999999"], "more than paramgeo handles"),
    (["rank", "uut", "-p", "d=3000", "-p", "r=2", "--route", "dense"],
     "the dense Jacobian would have m x n"),
    (["describe", "hadamard", "-p", "p=100000", "--route", "dense"],
     "PARAMGEO_MAX_JACOBIAN_ENTRIES"),
    (["mirror", "uut", "-p", "d=3000", "-p", "r=2"], "take the matrix-free route"),
    (["describe", "uut", "-p", "d=30000", "-p", "r=300"], "PARAMGEO_MAX_MATRIX_FREE_BYTES"),
    (["flow", "hadamard", "--data", "{d}/emptyA.npz"], "array 'y' is empty"),
    (["flow", "hadamard", "--data", "{d}/mismatch.npz"], "y has 4, A has 3"),
    (["flow", "hadamard", "--data", "{d}/good.npz", "--method", "flow", "--rtol", "0"],
     "rtol must be a positive number"),
    (["flow", "hadamard", "--data", "{d}/good.npz", "--stop-grad", "nan"],
     "stop_grad must be a non-negative number"),
    (["flow", "hadamard", "--data", "{d}/good.npz", "--method", "flow", "--lr", "3"],
     "--lr: only for --method gd"),
    (["flow", "hadamard", "--data", "{d}/good.npz", "--seed", "-1"], "not in the range x>=0"),
    (["implicit-bias", "hadamard", "--data", "{d}/theta.npy", "--init-scale", "0.1"],
     "is not an .npz archive (it is a single .npy array)"),
    (["pacbayes", "hadamard", "--posterior", "{d}/theta.npy", "--prior-scale", "1", "--sample-size", "10",
      "--delta", "0.05"], "is not an .npz archive (it is a single .npy array)"),
    (["pacbayes", "hadamard", "--posterior", "{d}/poststr.npz", "--prior-scale", "1", "--sample-size",
      "10", "--delta", "0.05"], "must hold real numbers, got dtype <U1"),
    (["pacbayes", "hadamard", "--posterior", "{d}/poststr.npz", "--prior-scale", "1", "--sample-size",
      "10", "--delta", "0.05", "--samples", "0"], "0 is not in the range x>=2"),
    (["define", "{d}/huge.toml"], "at most 5000"),
]


@pytest.mark.parametrize("args,fragment", HOSTILE, ids=[" ".join(a[:3]) for a, _ in HOSTILE])
def test_hostile_input_is_one_error_line(tmp_path, monkeypatch, args, fragment):
    monkeypatch.setenv("PARAMGEO_HOME", str(tmp_path / "home"))
    _hostile_files(tmp_path)
    res = CliRunner().invoke(main, [a.format(d=tmp_path) for a in args])
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    assert res.output.strip().splitlines()[-1].startswith("Error: ")


def test_spec_definition_refuses_sizes_beyond_sympy(tmp_path, monkeypatch):
    """-p on a defined spec can ask for a Jacobian sympy would take minutes over: refused."""
    monkeypatch.setenv("PARAMGEO_HOME", str(tmp_path / "home"))
    _hostile_files(tmp_path)
    assert run("define", str(tmp_path / "hyp.toml")).exit_code == 0
    res = CliRunner().invoke(main, ["describe", "hyp-ux", "-p", "p=1000"])
    assert res.exit_code == 2 and "sympy differentiates at most 1000000" in res.output
    res = CliRunner().invoke(main, ["describe", "hyp-ux", "-p", "p=100000"])
    assert res.exit_code == 2 and "at most 5000" in res.output


def test_implicit_integrator_refused_for_huge_n(rng):
    from paramgeo import get
    from paramgeo.errors import ParamgeoError
    from paramgeo.flows import MAX_IMPLICIT_DIM, gradient_flow
    from paramgeo.losses import LinearMeasurements

    p = MAX_IMPLICIT_DIM // 2 + 1
    param = get("hadamard", p=p)
    loss = LinearMeasurements(rng.standard_normal((2, p)), np.ones(2))
    with pytest.raises(ParamgeoError, match="use an explicit integrator"):
        gradient_flow(param, loss, 0.01 * np.ones(param.n), 1.0, method="LSODA")


def test_closed_pipe_is_not_an_internal_error(tmp_path):
    """`paramgeo ... | head -1`: the pipe closes early; exit quietly, no 'internal error'."""
    proc = subprocess.run(
        f"{sys.executable} {ROOT / 'cli.py'} strata hadamard -p p=10 | head -1", shell=True,
        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.stdout.startswith("hadamard (p=10): 1024 strata")
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_short_help_covers_every_command_and_matches_its_help():
    """`paramgeo --help` lists commands from SHORT_HELP without importing them: every command
    has an entry, and it is the command's own first sentence, whole."""
    import click

    from paramgeo.cli import COMMANDS, SHORT_HELP, main

    assert set(SHORT_HELP) == set(COMMANDS)
    ctx = click.Context(main)
    for name, text in SHORT_HELP.items():
        assert text == main.get_command(ctx, name).get_short_help_str(limit=300), name


# ------------------------------------- stiff flows: --chart, --time-scale, --exact-jacobian
def _sparse_data(path):
    """N = 4 measurements of a non-negative 2-sparse beta in p = 8, written to ``path``."""
    X = np.random.default_rng(1).standard_normal((4, 8))
    y = X @ np.r_[1.0, 1.5, np.zeros(6)]
    np.savez(path, X=X, y=y)
    return X, y


STIFF = {"chart": "log", "time_scale": 10.0, "exact_jacobian": True}


def test_flow_stiff_options_give_the_api_trajectory(tmp_path):
    """`flow --integrator BDF --chart log --time-scale 10 --exact-jacobian` prints the numbers
    of gradient_flow with the same options (bit for bit), each option changes those numbers (so
    none is dropped on the way), and it is the same flow as the run in theta to the tolerances.
    (BDF uses its Jacobian at every step; LSODA only once the flow is stiff.)"""
    from paramgeo import get
    from paramgeo.flows import gradient_flow
    from paramgeo.losses import LinearMeasurements

    X, y = _sparse_data(tmp_path / "d.npz")
    par = get("deep-diagonal", p=8, depth=3)
    args = ["flow", "deep-diagonal", "-p", "p=8", "-p", "depth=3", "--data",
            str(tmp_path / "d.npz"), "--method", "flow", "--t-final", "30", "--init-scale", "0.1",
            "--integrator", "BDF", "--rtol", "1e-10", "--atol", "1e-12", "--json"]
    res = run(*args, "--chart", "log", "--time-scale", "10", "--exact-jacobian")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)

    def api(**options):
        return gradient_flow(par, LinearMeasurements(X, y), par.init_at_scale(0.1), 30.0,
                             method="BDF", rtol=1e-10, atol=1e-12, **options)

    traj = api(**STIFF)
    assert out["success"] and out["final_predictor"] == traj.final_predictor.tolist()
    assert out["loss_final"] == float(traj.losses[-1]) and out["n_evals"] == traj.n_evals
    for dropped in STIFF:
        other = api(**{k: v for k, v in STIFF.items() if k != dropped})
        assert (other.n_evals, other.final_predictor.tolist()) != \
               (traj.n_evals, traj.final_predictor.tolist()), dropped
    plain = json.loads(run(*args).output)
    assert np.allclose(plain["final_predictor"], out["final_predictor"], rtol=1e-6, atol=1e-8)
    assert plain["final_predictor"] != out["final_predictor"]


def test_implicit_bias_stiff_options_match_the_api_and_the_sweep(tmp_path):
    """Deep diagonal (product, depth 4) at alpha = 1e-6: implicit-bias with the log chart, the
    time scale alpha^(2-L) and the exact Jacobian reports the limit of implicit_bias with the
    same options, at argmin R_alpha (high-precision dual solve) to 1e-6 relative; the sweep
    query with those options gives the same limit."""
    from paramgeo import get
    from paramgeo.mirror import implicit_bias
    from paramgeo.sweeps.queries import get_query

    X, y = _sparse_data(tmp_path / "d.npz")
    res = run("implicit-bias", "deep-diagonal", "-p", "p=8", "-p", "depth=4", "--data",
              str(tmp_path / "d.npz"), "--init-scale", "1e-6", "--t-final", "1e30", "--chart",
              "log", "--time-scale", "1e12", "--exact-jacobian", "--atol", "1e-12", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    par = get("deep-diagonal", p=8, depth=4)
    options = dict(t_final=1e30, atol=1e-12, chart="log", time_scale=1e12, exact_jacobian=True)
    ref = implicit_bias(par, X, y, 1e-6, **options)
    assert out["beta_flow"] == ref.beta_flow.tolist() and out["flow_time"] == ref.flow_time
    assert out["relative_deviation"] < 1e-6 and out["flow_loss"] < 1e-24
    swept = get_query("implicit-bias").run(par, data=str(tmp_path / "d.npz"), init_scale=1e-6,
                                           rtol=1e-10, **options)
    assert swept.beta_flow.tolist() == out["beta_flow"]


def test_flow_sweep_query_passes_the_stiff_options(tmp_path):
    """The sweep's flow query with chart, time_scale, exact_jacobian is the CLI's train() with
    them (BDF, so the Jacobian is used), and differs from the run without them."""
    from paramgeo import get
    from paramgeo.cli._flow import load_data, train
    from paramgeo.sweeps.queries import QUERIES

    _sparse_data(tmp_path / "d.npz")
    par = get("deep-diagonal", p=8, depth=3)
    query = QUERIES["flow"]
    options = {k: o.default for k, o in query.options.items()}
    options.update(data=str(tmp_path / "d.npz"), method="flow", t_final=30.0, init_scale=0.1,
                   integrator="BDF", atol=1e-12, **STIFF)
    row = query.run(par, **options)
    traj = train(par, "squared", load_data(tmp_path / "d.npz"), "d.npz", method="flow",
                 t_final=30.0, alpha=0.1, integrator="BDF", atol=1e-12, **STIFF)
    assert row["n_evals"] == traj.n_evals
    assert row["final_predictor"].tolist() == traj.final_predictor.tolist()
    plain = query.run(par, **dict(options, chart="theta", time_scale=1.0, exact_jacobian=False))
    assert plain["final_predictor"].tolist() != row["final_predictor"].tolist()


STIFF_REFUSED = [
    (["--method", "gd", "--exact-jacobian"], "--exact-jacobian: only for --method flow"),
    (["--method", "gd", "--chart", "log", "--time-scale", "2"],
     "--chart, --time-scale: only for --method flow"),
    (["--integrator", "RK45", "--exact-jacobian"],
     "exact_jacobian is used by the implicit integrators LSODA, BDF, Radau, not by RK45"),
    (["--chart", "log"], "the log chart needs every entry of theta0 nonzero (8 are 0)"),
    (["--time-scale", "0"], "the time scale must be a positive number, got 0.0"),
    (["--time-scale", "-3"], "the time scale must be a positive number, got -3.0"),
    (["--time-scale", "nan"], "the time scale must be a positive number, got nan"),
    (["--time-scale", "inf"], "the time scale must be a positive number, got inf"),
    (["--chart", "polar"], "'polar' is not one of 'theta', 'log'"),
]


@pytest.mark.parametrize("extra,fragment", STIFF_REFUSED,
                         ids=[" ".join(e) for e, _ in STIFF_REFUSED])
def test_stiff_flow_options_refused_in_one_line(tmp_path, extra, fragment):
    """Bad combinations: exit 2 and one Error line (hadamard's init_at_scale has v = 0, off
    the log chart)."""
    _sparse_data(tmp_path / "d.npz")
    method = [] if "--method" in extra else ["--method", "flow"]
    for args in (["flow", "hadamard", "-p", "p=8", "--data", str(tmp_path / "d.npz"),
                  "--init-scale", "0.1", *method, *extra],
                 ["implicit-bias", "hadamard", "-p", "p=8", "--data", str(tmp_path / "d.npz"),
                  "--init-scale", "0.1", *extra]):
        if args[0] == "implicit-bias" and ("--method" in extra or "--integrator" in extra):
            continue  # implicit-bias has neither: its flow is LSODA's
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, (args, res.output)
        assert fragment in res.output, (args, res.output)
        assert "Traceback" not in res.output
        assert res.output.strip().splitlines()[-1].startswith("Error: ")


def test_sweep_refuses_bad_stiff_options(tmp_path):
    from paramgeo.sweeps.spec import SweepSpecError, load_spec

    _sparse_data(tmp_path / "d.npz")
    for query in ("flow", "implicit-bias"):
        for name, value, fragment in (("time_scale", 0, "must be a positive number"),
                                      ("time_scale", float("inf"), "must be a finite number"),
                                      ("chart", "polar", "must be one of theta, log"),
                                      ("exact_jacobian", "yes", "must be true or false")):
            spec = {"query": query, "plugin": "hadamard", "sizes": {"p": 8},
                    "options": {"data": str(tmp_path / "d.npz"), "init_scale": 0.1,
                                name: value}}
            with pytest.raises(SweepSpecError, match=f"options.{name} {fragment}"):
                load_spec(spec)
