"""One vocabulary across commands: an option name means the same thing everywhere, former names
still work for one release with a warning, data arrays are accepted under the same names, help
lines are whole, and the figures of implicit-bias and strata are drawn."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.cli import main
from paramgeo.cli._flow import train

FORMER = "is deprecated and goes in the next release"


def run(*args):
    # result.stdout and result.stderr apart: the deprecation warnings go to stderr
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 10))
    beta = np.zeros(10)
    beta[:2] = [1.0, -2.0]
    np.savez(tmp_path / "X.npz", X=X, y=X @ beta)
    np.savez(tmp_path / "A.npz", A=X, y=X @ beta)
    return tmp_path


def test_flow_init_scale_is_the_plugins_init_at_scale(data):
    """flow --init-scale starts where mirror and implicit-bias do: init_at_scale(alpha)."""
    p = paramgeo.get("hadamard", p=10)
    arrays = dict(np.load(data / "A.npz"))
    traj = train(p, "squared", arrays, "A.npz", method="flow", t_final=1.0, alpha=0.05)
    assert np.array_equal(traj.thetas[0], p.init_at_scale(0.05))
    assert np.allclose(traj.thetas[0][:10], 0.1) and np.all(traj.thetas[0][10:] == 0)


def test_flow_t_final_and_its_former_name(data):
    new = run("flow", "hadamard", "-p", "p=10", "--data", data / "A.npz", "--method", "flow",
              "--t-final", 2, "--init-scale", 0.1, "--json")
    assert new.exit_code == 0, new.output
    assert FORMER not in new.stderr
    old = run("flow", "hadamard", "-p", "p=10", "--data", data / "A.npz", "--method", "flow",
              "--time", 2, "--init-scale", 0.1, "--json")
    assert old.exit_code == 0, old.output
    assert "--time " + FORMER + "; use --t-final" in old.stderr
    assert json.loads(old.stdout) == json.loads(new.stdout)
    both = run("flow", "hadamard", "-p", "p=10", "--data", data / "A.npz", "--method", "flow",
               "--time", 2, "--t-final", 2)
    assert both.exit_code == 2 and "give --t-final only" in both.stderr


def test_measurements_named_A_or_X_in_flow_and_implicit_bias(data):
    outs = []
    for name in ("A", "X"):
        res = run("flow", "hadamard", "-p", "p=10", "--data", data / f"{name}.npz", "--steps",
                  50, "--json")
        assert res.exit_code == 0, res.output
        outs.append(json.loads(res.stdout)["loss_final"])
    assert outs[0] == outs[1]
    limits = []
    for name in ("A", "X"):
        res = run("implicit-bias", "hadamard", "-p", "p=10", "--data", data / f"{name}.npz",
                  "--init-scale", 0.01, "--json")
        assert res.exit_code == 0, res.output
        limits.append(json.loads(res.stdout)["beta_flow"])
    assert limits[0] == limits[1]


def test_implicit_bias_plot_and_whole_help_line(data):
    res = run("implicit-bias", "hadamard", "-p", "p=10", "--data", data / "X.npz",
              "--init-scale", 0.01, "--plot", data / "ib.png")
    assert res.exit_code == 0, res.output
    assert (data / "ib.png").stat().st_size > 10_000 and "figure written" in res.stdout
    helptext = run("--help").stdout
    assert "Compare argmin R_alpha(beta) subject to X beta = y with" in helptext
    assert "gradient-flow limit." in helptext and "s.t..." not in helptext


def test_strata_json_plot_and_the_former_format_json(tmp_path):
    args = ("strata", "monomial", "-p", "widths=2,2,1", "-p", "degree=4")
    new = run(*args, "--json")
    assert new.exit_code == 0 and json.loads(new.stdout)["n_strata"] == 3
    old = run(*args, "--format", "json")
    assert old.exit_code == 0 and "--format json " + FORMER in old.stderr
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert run(*args, "--json", "--format", "dot").exit_code == 2
    res = run(*args, "--kinds", "all", "--plot", tmp_path / "poset.svg")
    assert res.exit_code == 0 and "10 strata" in res.stdout
    svg = (tmp_path / "poset.svg").read_text()
    assert "in-zero" in svg and "removed" in svg  # every stratum drawn with its label


def test_sweep_flow_time_is_now_t_final(data):
    from paramgeo.sweeps.spec import load_spec

    def spec(**options):
        return {"query": "flow", "plugin": "hadamard", "sizes": {"p": 10},
                "options": {"data": str(data / "A.npz"), "method": "flow", **options}}

    new = load_spec(spec(t_final=2.0))
    with pytest.warns(FutureWarning, match="options.time is deprecated"):
        old = load_spec(spec(time=2.0))
    assert [c.options for c in old.cells] == [c.options for c in new.cells]
    assert new.cells[0].options["t_final"] == 2.0
