"""One vocabulary across commands: an option name means the same thing everywhere, former names
still work for one release with a warning, data arrays are accepted under the same names, help
lines are whole, and the figures of implicit-bias and strata are drawn.

Covers: ``paramgeo.cli``, ``paramgeo.cli._common``, ``paramgeo.cli._flow``,
``paramgeo.losses.data``, ``paramgeo.sweeps.spec``, ``paramgeo_plugins.hadamard``,
``paramgeo_plugins.uvt``.
"""

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


# --------------------------------------------------------------- the vocabulary table of cli.md
def _commands():
    """path ("llc estimate") -> click command, for every command of the click tree."""
    import click

    ctx = click.Context(main)
    out = {}
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            out.update({f"{name} {sub}": c for sub, c in cmd.commands.items()})
        else:
            out[name] = cmd
    return out


def _table():
    """The rows of the vocabulary table of docs/cli.md: (option, commands, formers), formers
    as (former name, command) pairs."""
    import re
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    section = text.split("## One vocabulary", 1)[1].split("\n\n**Loss names.**", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[1].startswith("`--"):
            continue
        option = cells[1].strip("`").split()[0]
        commands = {c.strip() for c in cells[2].split(",")}
        formers = set(re.findall(r"`(--[\w-]+)` \(([^)]+)\)", cells[3]))
        rows.append((option, commands, formers))
    return rows


def test_the_table_is_what_the_commands_take():
    """Each meaning of the table has its one option in exactly the commands listed (visible in
    their --help), and no command shows that name for anything else; each former name is a
    hidden alias of the table's option in the command listed, and every hidden alias of the
    click tree is in the table."""
    from paramgeo.cli._common import Command, FormerOption

    commands, rows = _commands(), _table()
    assert len(rows) >= 15
    assert all(isinstance(c, Command) for c in commands.values())  # formers are merged
    visible, formers = {}, set()
    for path, cmd in commands.items():
        for p in cmd.params:
            if isinstance(p, FormerOption):
                assert p.hidden, (path, p.opts)
                target = next(q for q in cmd.params if q.name == p.target
                              and not isinstance(q, FormerOption))
                assert p.new in target.opts, (path, p.opts, p.new)
                formers.update((opt, path, p.new) for opt in p.opts)
            elif getattr(p, "opts", None) and not getattr(p, "hidden", False):
                for opt in p.opts:
                    visible.setdefault(opt, set()).add(path)
    listed = set()
    for option, where, former in rows:
        assert where <= set(commands), where - set(commands)
        assert visible.get(option, set()) == where, (option, visible.get(option), where)
        listed |= {(old, path, option) for old, path in former}
    assert listed == formers  # every hidden alias documented, every documented one exists
    # a former name is not also a visible option of the same command
    assert not {(old, path) for old, path, _ in formers if path in visible.get(old, set())}


#: the command of each sweep query whose name is not the command's path
SWEEP_COMMANDS = {"llc": "llc estimate", "quotient-align": "quotient align",
                  "quotient-barrier": "quotient barrier", "quotient-teleport": "quotient teleport"}
#: sweep options with no counterpart among the command's options (each with its reason)
SWEEP_ONLY = {
    ("spectral-filters", "steps"): "the command scans a fixed number of GD steps",
    ("quotient-align", "seed"): "the command takes both points as files; a sweep may draw them",
    ("quotient-align", "planted"): "as seed: the second point drawn from the group",
    ("quotient-align", "factors"): "the factors of the group to align over (Python's align)",
    ("quotient-barrier", "seed"): "as quotient-align",
    ("quotient-barrier", "planted"): "as quotient-align",
}


def _snake(opt):
    return opt.lstrip("-").replace("-", "_")


def test_sweep_options_are_the_commands_options_in_snake_case():
    """Every option of a sweep query that has a CLI counterpart is the command's current
    option name in snake case (`options.sample_size` for `--sample-size`; a flag `--no-x` is
    the option `x = false`), never a former name; each former name a query still accepts is
    renamed as the command renames it."""
    from paramgeo.cli._common import FormerOption
    from paramgeo.sweeps.queries import QUERIES

    commands = _commands()
    former_used, unmatched = [], []
    for query in QUERIES.values():
        cmd = commands[SWEEP_COMMANDS.get(query.name, query.name)]
        current, former = set(), {}
        for p in cmd.params:
            names = [_snake(o) for o in p.opts + p.secondary_opts]  # an argument: its name
            if isinstance(p, FormerOption):
                former.update({name: _snake(p.new) for name in names})
            else:
                current.update(names)
                current.update(name[3:] for name in names if name.startswith("no_"))
        for name in query.options:
            if name in former and name not in current:
                former_used.append(f"{query.name}: options.{name} is the former --"
                                   f"{name.replace('_', '-')}; use {former[name]}")
            elif name not in current and (query.name, name) not in SWEEP_ONLY:
                unmatched.append(f"{query.name}: options.{name}")
        for old, new in query.renamed.items():
            assert old not in query.options and new in query.options, (query.name, old, new)
            assert new in current, (query.name, new)
            assert former.get(old, new) == new, (query.name, old, former.get(old), new)
    assert not former_used, former_used
    assert not unmatched, f"name these as the command does, or list them in SWEEP_ONLY: " \
                          f"{unmatched}"
    assert all(name in QUERIES[q].options for q, name in SWEEP_ONLY)


def _former_sweep_cases(tmp):
    """(query, plugin, sizes, required options, former name, value) for every former option
    name of a sweep query."""
    np.save(tmp / "w.npy", np.zeros(14))
    np.savez(tmp / "d.npz", X=np.ones((4, 3)), Y=np.ones((4, 4)), A=np.ones((4, 5)),
             y=np.ones(4))
    np.savez(tmp / "post.npz", mean=[1.0, 0.02, 1.0, 0.03], std=0.1, empirical_risk=0.1)
    setups = {
        "flow": ("hadamard", {"p": 5}, {"data": str(tmp / "d.npz"), "method": "flow"}),
        "pacbayes": ("hadamard", {"p": 2}, {"posterior": str(tmp / "post.npz"),
                                            "prior_scale": 1.0, "delta": 0.05}),
        "early-stopping": ("hadamard", {"p": 20}, {}),
        "spectral-filters": ("matrix", {"d": 8}, {}),
        "online-sgd": ("uut", {"d": 4, "r": 2}, {}),
        "llc": ("uvt", {"m": 4, "n": 3, "r": 2}, {"data": str(tmp / "d.npz")}),
    }
    values = {"time": 2.0, "n": 1000, "N": 20, "scale": 0.5, "batch": 2,
              "at": str(tmp / "w.npy"), "step": 0.01, "step_scale": 0.1, "draws": 50}
    from paramgeo.sweeps.queries import QUERIES

    cases = [(q, *setups[q], old, values[old]) for q in QUERIES for old in QUERIES[q].renamed]
    assert {c[0] for c in cases} == set(setups) and len(cases) == 10
    return cases


def test_former_sweep_option_names_still_work_with_one_warning(tmp_path):
    """A former option name gives the cells the new name gives, with one warning per sweep
    file (not one per cell) naming the new spelling; both together are refused."""
    import warnings

    from paramgeo.sweeps.queries import QUERIES
    from paramgeo.sweeps.spec import SweepSpecError, load_spec

    for query, plugin, sizes, required, old, value in _former_sweep_cases(tmp_path):
        new = QUERIES[query].renamed[old]

        def spec(**options):
            return {"query": query, "plugin": plugin, "sizes": sizes,
                    "options": {**required, **options}, "grid": {"options": {"seed": [0, 1]}}}

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            former = load_spec(spec(**{old: value}))
        lines = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
        assert len(lines) == 1, (query, old, lines)
        assert f"query {query}: options.{old} {FORMER}; use options.{new}" in lines[0]
        cells = load_spec(spec(**{new: value})).cells
        assert [c.options for c in former.cells] == [c.options for c in cells]
        assert [c.key for c in former.cells] == [c.key for c in cells]
        with pytest.raises(SweepSpecError, match=f"give options.{new} only"):
            load_spec(spec(**{old: value, new: value}))

def test_one_loss_name_set():
    """flow, llc estimate and the quotient commands offer the same losses on predictors (the
    keys of paramgeo.losses.data.LOSS_KINDS); llc estimate adds the model-output losses."""
    from paramgeo.losses.data import LOSS_KINDS

    commands = _commands()
    choices = {path: set(next(p for p in commands[path].params if p.name == "loss_kind")
                         .type.choices)
               for path in ("flow", "llc estimate", "quotient barrier", "quotient teleport")}
    assert choices["flow"] == set(LOSS_KINDS) == choices["quotient barrier"]
    assert choices["quotient teleport"] == set(LOSS_KINDS)
    assert choices["llc estimate"] == set(LOSS_KINDS) | {"mse", "cross-entropy"}
    assert "regression" not in choices["llc estimate"]


def test_linear_map_is_the_former_regression_loss_and_B_applied_to_X(tmp_path):
    """--loss regression still works (one line naming linear-map) and gives what linear-map
    gives; the loss is (1/2N) sum |y_i - B x_i|^2 with B the predictor (out x in), checked
    against a direct evaluation."""
    from paramgeo.losses.data import loss_from_arrays

    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((7, 3)), rng.standard_normal((7, 2))
    param = paramgeo.get("uvt", m=2, n=3, r=2)  # predictors B = U V^T, 2 x 3
    loss = loss_from_arrays("linear-map", {"X": X, "Y": Y}, param)
    B = rng.standard_normal((2, 3))
    assert loss.value(B.ravel()) == pytest.approx(0.5 * np.mean(np.sum((Y - X @ B.T) ** 2, 1)))
    with pytest.warns(FutureWarning, match="'regression' is deprecated.*'linear-map'"):
        old = loss_from_arrays("regression", {"X": X, "Y": Y}, param)
    assert old.value(B.ravel()) == loss.value(B.ravel())
    np.savez(tmp_path / "d.npz", X=X, Y=Y, theta_star=rng.standard_normal(param.n))
    args = ("llc", "estimate", "uvt", "-p", "m=2", "-p", "n=3", "-p", "r=2", "--data",
            tmp_path / "d.npz",
            "--chains", 1, "--burn", 0, "--steps", 20, "--no-bias-check", "--json")
    new, former = run(*args, "--loss", "linear-map"), run(*args, "--loss", "regression")
    assert new.exit_code == 0 and former.exit_code == 0, former.output
    assert "--loss regression " + FORMER + "; use --loss linear-map" in former.stderr
    drop = ("seconds",)
    assert ({k: v for k, v in json.loads(new.stdout).items() if k not in drop}
            == {k: v for k, v in json.loads(former.stdout).items() if k not in drop})


@pytest.mark.parametrize("old,new", [
    (("llc", "exact", "uvt", "-p", "m=3", "-p", "n=3", "-p", "r=1", "--zero"),
     ("llc", "exact", "uvt", "-p", "m=3", "-p", "n=3", "-p", "r=1", "--truth-zero")),
    (("early-stopping", "--d", 20, "--N", 10, "--steps", 20),
     ("early-stopping", "--d", 20, "--sample-size", 10, "--steps", 20)),
    (("spectral-filters", "--d", 20, "--N", 10), ("spectral-filters", "--d", 20,
                                                   "--sample-size", 10)),
    (("online-sgd", "uut", "-p", "d=4", "-p", "r=2", "--horizon", 0.2, "--scale", 0.3,
      "--batch", 2),
     ("online-sgd", "uut", "-p", "d=4", "-p", "r=2", "--horizon", 0.2, "--output-scale", 0.3,
      "--batch-size", 2)),
])
def test_former_names_give_the_same_result_with_one_line(old, new):
    a, b = run(*old, "--json"), run(*new, "--json")
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    assert json.loads(a.stdout) == json.loads(b.stdout)
    lines = [line for line in a.stderr.splitlines() if FORMER in line]
    renamed = {x for x in old if str(x).startswith("--")} - set(new)
    assert len(lines) == len(renamed) and all(any(r + " " in line for line in lines)
                                              for r in renamed)
    assert FORMER not in b.stderr


def test_llc_exact_and_estimate_take_the_same_truth(data, tmp_path):
    """--truth FILE and --truth-zero mean the same in llc exact and llc estimate: the exact
    value llc estimate prints at the truth is llc exact's; the former --at / --zero of llc
    exact give it too, and llc estimate's --at is now --minimum."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 3))
    np.savez(tmp_path / "rrr.npz", X=X, Y=X @ rng.standard_normal((3, 2)) * 0,
             theta_star=np.zeros(10))
    np.save(tmp_path / "t.npy", np.zeros(10))
    sizes = ("deep-linear", "-p", "widths=3,2,2")
    exact = json.loads(run("llc", "exact", *sizes, "--truth", tmp_path / "t.npy", "--json")
                       .stdout)
    assert exact["lam_exact"] == "2" and exact["lam"] == 2.0  # Aoyagi (3, 2, 2) at 0
    former = run("llc", "exact", *sizes, "--at", tmp_path / "t.npy", "--json")
    assert json.loads(former.stdout) == exact and "--at " + FORMER + "; use --truth" in \
        former.stderr
    est = run("llc", "estimate", *sizes, "--data", tmp_path / "rrr.npz", "--truth",
              tmp_path / "t.npy", "--chains", 1, "--burn", 0, "--steps", 20, "--no-bias-check",
              "--json")
    assert est.exit_code == 0, est.output
    assert json.loads(est.stdout)["exact"] == {k: v for k, v in exact.items()
                                               if k not in ("name", "sizes", "n", "m")}
    both = run("llc", "estimate", *sizes, "--data", tmp_path / "rrr.npz", "--at",
               tmp_path / "t.npy", "--minimum", tmp_path / "t.npy")
    assert both.exit_code == 2 and "give --minimum only" in both.stderr


# --------------------------------------------------------------------- one JSON schema
def _json_cases(tmp):
    """command path -> the arguments of a small run of it (each command taking a NAME)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 3))
    np.savez(tmp / "A.npz", A=X, y=X @ np.array([1.0, -2.0, 0.0]))
    np.savez(tmp / "rrr.npz", X=rng.standard_normal((30, 2)), Y=rng.standard_normal((30, 2)),
             theta_star=np.zeros(8))
    np.savez(tmp / "q.npz", mean=0.1 * rng.standard_normal(6), std=0.1, empirical_risk=0.1)
    np.save(tmp / "h.npy", rng.standard_normal(6))
    had = ("hadamard", "-p", "p=3")
    return {
        "describe": ("uut", "-p", "d=4", "-p", "r=2"),
        "rank": ("uut", "-p", "d=4", "-p", "r=2"),
        "check": ("hadamard", "-p", "p=2"),
        "critical": ("uut", "-p", "d=4", "-p", "r=2"),
        "discover": (*had, "--no-discrete"),
        "exact": ("uut", "-p", "d=3", "-p", "r=1", "--points", 1),
        "strata": ("monomial", "-p", "widths=2,2,1", "-p", "degree=4"),
        "search": ("monomial", "-p", "widths=2,1,1", "-p", "degree=3", "--starts", 1,
                   "--maxiter", 5),
        "flow": (*had, "--data", tmp / "A.npz", "--steps", 5),
        "mirror": had,
        "implicit-bias": (*had, "--data", tmp / "A.npz", "--init-scale", 0.1),
        "online-sgd": ("uut", "-p", "d=4", "-p", "r=2", "--horizon", 0.1),
        "pacbayes": (*had, "--posterior", tmp / "q.npz", "--prior-scale", 1, "--sample-size",
                     100, "--delta", 0.05),
        "structure": ("hadamard", "-p", "p=2"),
        "llc exact": ("deep-linear", "-p", "widths=2,2,2", "--truth-zero"),
        "llc estimate": ("deep-linear", "-p", "widths=2,2,2", "--data", tmp / "rrr.npz",
                         "--chains", 1, "--burn", 0, "--steps", 10, "--no-bias-check"),
        "quotient align": (*had, tmp / "h.npy", tmp / "h.npy"),
        "quotient barrier": (*had, tmp / "h.npy", tmp / "h.npy", "--data", tmp / "A.npz",
                             "--points", 3),
        "quotient teleport": (*had, tmp / "h.npy", "--data", tmp / "A.npz", "--starts", 1),
    }


def test_every_json_output_starts_with_the_shared_keys(tmp_path):
    """Every command on a parameterization prints name, sizes, n (parameters) and m (predictor
    entries) first, with the plugin's values, and no former key of one of the shared
    quantities; the table of cli.md lists each former key."""
    from paramgeo.cli._common import JSON_KEYS

    commands = _commands()
    on_a_name = {path for path, cmd in commands.items()
                 if any(p.name == "name" for p in cmd.params)} - {"undefine"}
    cases = _json_cases(tmp_path)
    assert set(cases) == on_a_name  # a new command on a parameterization needs a case here
    for path, args in cases.items():
        res = run(*path.split(), *args, "--json")
        assert res.exit_code == 0, (path, res.output)
        out = json.loads(res.stdout)
        param = paramgeo.get(args[0], **dict(a.split("=") for a in args[2:6:2]
                                               if isinstance(a, str) and "=" in a))
        head = {"name": param.name, "sizes": json.loads(json.dumps(param.sizes)),
                "n": param.n, "m": param.m}
        assert list(out)[:4] == list(head) and {k: out[k] for k in head} == head, path
        assert not set(out) & set(JSON_KEYS), (path, set(out) & set(JSON_KEYS))
        if "near_singular" in out:
            assert isinstance(out["near_singular"], bool) or path == "search"  # a count
