"""The one file writer, unique names, Ctrl-C in long loops, the KL helpers' domains and the
edge cases of earlier rounds: each a reproduction that must end in the documented outcome.

Covers: ``paramgeo.cli``, ``paramgeo.cli._common``, ``paramgeo.cli._online``,
``paramgeo.contract.registry``, ``paramgeo.dynamics.trajectory``,
``paramgeo.expressions.symbolic``, ``paramgeo.flows.descent``, ``paramgeo.io.files``,
``paramgeo.llc.estimate``, ``paramgeo.llc.steps``, ``paramgeo.losses.predictor``,
``paramgeo.mirror.bias``, ``paramgeo.pacbayes.bounds``, ``paramgeo.pacbayes.gaussians``,
``paramgeo.sweeps.run``, ``paramgeo.symmetry.projectors``, ``paramgeo_plugins.hadamard``,
``paramgeo_plugins.uut``.
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.contract import registry
from paramgeo.cli import main
from paramgeo.errors import SizeError
from paramgeo.io.files import (PLOT_STAMP, UnsafeFileError, check_plot_path, is_paramgeo_plot,
                            open_own, save_figure, write_file)

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


def _one_error_line(result, code=2):
    """The CLI ended with exit ``code`` and exactly one ``Error:`` line, no traceback."""
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


# --------------------------------------------------------------------- the writer's rules
def test_write_file_replaces_atomically_with_the_plain_mode(tmp_path):
    target = tmp_path / "a.txt"
    write_file(target, "one", what="file")
    mask = os.umask(0o022)
    os.umask(mask)
    assert target.read_text() == "one"
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~mask
    with pytest.raises(UnsafeFileError, match="exists and was not written by paramgeo"):
        write_file(target, "two", what="file")  # replace=False: never over an existing file
    write_file(target, b"two", what="file", replace=True)
    assert target.read_text() == "two" and os.listdir(tmp_path) == ["a.txt"]  # no temp left


def test_write_file_never_writes_through_a_link_or_a_foreign_file(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    (tmp_path / "sym.txt").symlink_to(victim)
    os.link(victim, tmp_path / "hard.txt")
    (tmp_path / "dir.txt").mkdir()
    for name, message in [("sym.txt", "symbolic link"), ("hard.txt", "2 hard links"),
                          ("dir.txt", "not a regular file")]:
        with pytest.raises(UnsafeFileError, match=message):
            write_file(tmp_path / name, "x", what="file", replace=True)
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("also mine")
    with pytest.raises(UnsafeFileError, match="not written by paramgeo"):
        write_file(foreign, "x", what="file", replace=lambda path: False)
    assert victim.read_text() == "mine" and (tmp_path / "sym.txt").is_symlink()
    assert foreign.read_text() == "also mine"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("old")

    def broken(fh):
        fh.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_file(target, broken, what="table", replace=True)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["t.csv"]


def test_open_own_creates_exclusively_and_checks_what_exists(tmp_path):
    path = tmp_path / "journal"
    fd = open_own(path, os.O_WRONLY | os.O_APPEND, what="journal")
    os.write(fd, b"row\n")
    os.close(fd)
    fd = open_own(path, os.O_RDONLY, what="journal", create=False, ours=lambda fd: True)
    assert os.read(fd, 10) == b"row\n"
    os.close(fd)
    with pytest.raises(UnsafeFileError, match="not written by paramgeo"):
        open_own(path, os.O_RDONLY, what="journal", create=False, ours=lambda fd: False)
    os.link(path, tmp_path / "other")
    with pytest.raises(UnsafeFileError, match="hard links"):
        open_own(path, os.O_WRONLY | os.O_APPEND, what="journal")


def test_no_module_writes_a_file_but_through_the_writer():
    """Every place paramgeo writes a file goes through paramgeo.io.files: no other module opens a
    file for writing, saves a figure, renames, or makes its own temporary file."""
    writing = re.compile(r"savefig\(|np\.save(z|z_compressed)?\((?!file)|write_text\("
                         r"|write_bytes\(|os\.replace\(|os\.rename\(|mkstemp\(|TemporaryFile"
                         r"|(?<!fd)open\([^)]*[\"'][wax]b?\+?[\"']|O_CREAT"
                         r"|\.to_csv\((?!index)|\.to_parquet\((?!fh)|\.to_json\((?!orient)")
    offenders = []
    for path in sorted((ROOT / "paramgeo").rglob("*.py")):
        if path.relative_to(ROOT).as_posix() == "paramgeo/io/files.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if writing.search(line.split("#")[0]):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == [], offenders


# --------------------------------------------------------------------- define
SPEC = 'name = "mymap"\npredictor = "u * v"\n[parameters]\nu = [3]\nv = [3]\n'


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAMGEO_HOME", str(tmp_path / "home"))
    (tmp_path / "def1.toml").write_text(SPEC)
    yield tmp_path
    registry.unregister("mymap")


@pytest.mark.parametrize("kind", ["symbolic link", "user's file"])
def test_define_never_writes_through_its_temporary_name(home, kind):
    folder = home / "home" / "definitions"
    folder.mkdir(parents=True)
    victim = home / "victim.txt"
    victim.write_text("mine")
    planted = folder / ".mymap.toml.tmp"
    planted.symlink_to(victim) if kind == "symbolic link" else planted.write_text("mine too")
    result = _cli("define", home / "def1.toml")
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "mine" and planted.is_symlink() == (kind == "symbolic link")
    assert planted.read_text() == ("mine" if kind == "symbolic link" else "mine too")
    target = folder / "mymap.toml"
    assert not target.is_symlink() and target.read_text() == SPEC
    assert sorted(os.listdir(folder)) == [".mymap.toml.tmp", "mymap.toml"]


def test_define_refuses_a_linked_definition(home):
    folder = home / "home" / "definitions"
    folder.mkdir(parents=True)
    victim = home / "victim.txt"
    victim.write_text(SPEC.replace("u * v", "u + v"))
    os.link(victim, folder / "mymap.toml")
    line = _one_error_line(_cli("define", home / "def1.toml", "--replace"))
    assert "hard links" in line and "u + v" in victim.read_text()


@pytest.mark.parametrize("where", ["a-file", "under-a-file", "/proc/paramgeo-nowhere"])
def test_define_with_an_unusable_home_is_one_line(home, monkeypatch, where):
    (home / "a-file").write_text("x")
    target = where if where.startswith("/") else str(home / where.replace("under-a-file",
                                                                          "a-file/sub"))
    monkeypatch.setenv("PARAMGEO_HOME", target)
    line = _one_error_line(_cli("define", home / "def1.toml"))
    assert "definitions folder" in line and "PARAMGEO_HOME" in line


# --------------------------------------------------------------------- sweeps
@pytest.fixture
def sweep_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('query = "describe"\nplugin = "uvt"\n[grid]\n'
                                     'sizes.m = [2, 3]\n')
    (tmp_path / "victim.txt").write_text("")
    return tmp_path


def test_a_hard_linked_journal_is_refused_and_untouched(sweep_dir):
    os.link(sweep_dir / "victim.txt", sweep_dir / "out.csv.partial.jsonl")
    line = _one_error_line(_cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0",
                                "--resume"))
    assert "journal" in line and "hard links" in line
    assert (sweep_dir / "victim.txt").read_text() == ""


@pytest.mark.parametrize("content, message", [(None, "hard links"),
                                              ("my notes\n", "not written by paramgeo")])
def test_a_lock_file_that_is_not_ours_is_refused_and_untouched(sweep_dir, content, message):
    lock = sweep_dir / "out.csv.lock"
    if content is None:
        os.link(sweep_dir / "victim.txt", lock)
    else:
        lock.write_text(content)
    line = _one_error_line(_cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0"))
    assert "lock file" in line and message in line
    assert lock.read_text() == (content or "") and not (sweep_dir / "out.csv").exists()


@pytest.mark.parametrize("kind", ["symbolic", "hard"])
def test_a_linked_output_is_refused_before_any_cell(sweep_dir, monkeypatch, kind):
    import paramgeo.sweeps.run as run

    monkeypatch.setattr(run, "run_cell", lambda task: pytest.fail("a cell ran"))
    victim = sweep_dir / "victim.txt"
    (sweep_dir / "out.csv").symlink_to(victim) if kind == "symbolic" else \
        os.link(victim, sweep_dir / "out.csv")
    line = _one_error_line(_cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0",
                                "--overwrite"))
    assert "sweep table" in line and f"{kind} link" in line and victim.read_text() == ""


def test_a_stale_lock_of_a_killed_sweep_is_taken_over(sweep_dir):
    (sweep_dir / "out.csv.lock").write_text("sweep s.toml, pid 1, started 2026-01-01 00:00:00\n")
    assert _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0").exit_code == 0
    assert not (sweep_dir / "out.csv.lock").exists()


def test_a_cell_time_limit_beyond_the_clock_is_no_limit():
    from paramgeo.sweeps.run import CellTimeLimit, _Watchdog

    dog = _Watchdog()
    with dog.limit(1e300):
        time.sleep(0.05)
        assert dog._thread.is_alive()  # it waits (forever), it does not die of an overflow
    with pytest.raises(CellTimeLimit):  # and the next cell's limit still fires
        with dog.limit(0.05):
            time.sleep(0.3)
            for _ in range(10 ** 6):
                pass


# --------------------------------------------------------------------- plots
def _figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    fig.add_subplot().plot([0, 1], [1, 0])
    return fig


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_plots_are_stamped_and_only_paramgeos_are_replaced(tmp_path, suffix):
    path = tmp_path / f"p{suffix}"
    save_figure(_figure(), path)
    assert is_paramgeo_plot(path) and PLOT_STAMP.encode() in path.read_bytes()
    save_figure(_figure(), path)  # its own plot: replaced
    foreign = tmp_path / f"mine{suffix}"
    _figure().savefig(foreign)  # matplotlib's own, without the stamp
    before = foreign.read_bytes()
    with pytest.raises(UnsafeFileError, match="not written by paramgeo"):
        check_plot_path(foreign)
    with pytest.raises(UnsafeFileError, match="not written by paramgeo"):
        save_figure(_figure(), foreign)
    assert foreign.read_bytes() == before


def test_flow_refuses_a_foreign_plot_before_the_run(tmp_path, monkeypatch):
    import paramgeo.dynamics.trajectory as trajectory

    monkeypatch.setattr(trajectory, "_flow", lambda *a, **k: pytest.fail("the flow ran"))
    data = tmp_path / "d.npz"
    np.savez(data, X=np.eye(3), y=np.ones(3))
    victim = tmp_path / "victim.png"
    victim.write_bytes(b"my picture")
    (tmp_path / "link.png").symlink_to(victim)
    for name, message in [("victim.png", "not written by paramgeo"),
                          ("link.png", "symbolic link")]:
        line = _one_error_line(_cli("flow", "hadamard", "-p", "p=3", "--loss", "squared",
                                    "--data", data, "--method", "flow", "--plot",
                                    tmp_path / name))
        assert message in line
    assert victim.read_bytes() == b"my picture"


@pytest.mark.filterwarnings("ignore:LLC estimator")
def test_every_plot_writer_goes_through_the_writer(tmp_path):
    """The result objects' plot methods (a trajectory, the strata of a network, an implicit
    bias, an LLC estimate and its step sweep, an online run) refuse a symbolic link as their
    target and write a stamped plot otherwise."""
    from paramgeo import critical
    from paramgeo.flows import gradient_descent
    from paramgeo.cli._online import run_online
    from paramgeo.llc import estimate_llc, step_sweep
    from paramgeo.losses import LinearMeasurements
    from paramgeo.mirror import implicit_bias

    p = paramgeo.get("hadamard", p=2)
    loss = LinearMeasurements(np.eye(2), np.ones(2))
    theta = np.full(4, 0.5)
    llc_options = dict(chains=1, draws=8, burn=0, temperatures=(1.0,), bias_check=False)
    results = {
        "trajectory": gradient_descent(p, loss, theta, 5, 0.1),
        "strata": critical.strata(paramgeo.get("hadamard", p=2)),
        "implicit-bias": implicit_bias(p, np.array([[1.0, 2.0]]), np.array([1.0]), alpha=0.5),
        "llc": estimate_llc(p, loss, theta, **llc_options),
        "llc-steps": step_sweep(p, loss, theta, steps=[1e-3], **llc_options),
        "online": run_online(paramgeo.get("uut", d=4, r=2), horizon=0.05, seed=0),
    }
    victim = tmp_path / "victim.png"
    victim.write_bytes(b"mine")
    for label, result in results.items():
        link = tmp_path / f"{label}-link.png"
        link.symlink_to(victim)
        with pytest.raises(UnsafeFileError, match="symbolic link"):
            result.plot(link)
        result.plot(tmp_path / f"{label}.png")
        assert is_paramgeo_plot(tmp_path / f"{label}.png"), label
    assert victim.read_bytes() == b"mine"


# --------------------------------------------------------------------- arrays, names
def test_a_torch_forward_that_updates_its_weights_never_writes_the_callers_array():
    torch = pytest.importorskip("torch")

    class Drift(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))

        def forward(self, x):
            with torch.no_grad():
                self.w.add_(1.0)  # a forward that writes its own weights
            return x * self.w

    # such a forward is no function of theta: refused before any engine runs (the
    # function-of-theta check), and the caller's module is not written
    module = Drift()
    with pytest.raises(paramgeo.errors.ContractError,
                       match="forward changed the parameters it was given in place"):
        paramgeo.from_torch(module, torch.ones(3, dtype=torch.float64), name="drift")
    assert torch.equal(module.w, torch.ones(3, dtype=torch.float64))


def _plugin(tmp_path, filename, name, factor):
    path = tmp_path / filename
    path.write_text(textwrap.dedent(f'''
        from paramgeo import Parameterization, ParamSpec

        class P{factor}(Parameterization):
            name = "{name}"
            def make_spec(self): return ParamSpec(w=(2,))
            def make_predictor_shape(self): return (2,)
            def forward(self, theta): return theta * {factor}
    '''))
    return path


def test_a_plugin_file_cannot_take_a_builtins_or_another_plugins_name(tmp_path):
    line = _one_error_line(_cli("--plugin", _plugin(tmp_path, "a.py", "uut", 2), "describe",
                                "uut"))
    assert "'uut'" in line and "a.py" in line and "entry point paramgeo_plugins.uut:UUT" in line
    a, b = _plugin(tmp_path, "b.py", "twice", 2), _plugin(tmp_path, "c.py", "twice", 3)
    try:
        line = _one_error_line(_cli("--plugin", a, "--plugin", b, "describe", "twice"))
        assert str(a) in line and str(b) in line
        registry.unregister("twice")
        assert registry.load_plugin_file(a) == ["twice"]
        assert registry.load_plugin_file(a) == ["twice"]  # the same file again: its own name
    finally:
        registry.unregister("twice")


def test_a_framework_model_cannot_take_a_builtins_name(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "lin.py"
    path.write_text("import torch, paramgeo\n"
                    "model = paramgeo.from_torch(torch.nn.Linear(3, 2), torch.ones(4, 3), "
                    "name='uut')\n")
    line = _one_error_line(_cli("--plugin", path, "describe", "uut"))
    assert "'uut'" in line and "lin.py" in line and "paramgeo_plugins.uut:UUT" in line
    assert registry.get_class("uut").__module__ == "paramgeo_plugins.uut"
    imposter = type("Imposter", (paramgeo.get_class("hadamard"),), {"name": "uut"})
    with pytest.raises(paramgeo.ContractError, match="Imposter from register.. is already "
                                                     "registered from entry point"):
        registry.register(imposter, replace=True)  # not even with replace=True
    assert registry.get_class("uut").__module__ == "paramgeo_plugins.uut"


def test_a_plugin_cannot_take_a_saved_definitions_name(home, tmp_path):
    assert _cli("define", home / "def1.toml").exit_code == 0
    registry.unregister("mymap")
    line = _one_error_line(_cli("--plugin", _plugin(tmp_path, "m.py", "mymap", 2), "describe",
                                "mymap"))
    assert "m.py" in line and "definition " in line and "mymap.toml" in line
    assert registry.origin("uut").startswith("entry point paramgeo_plugins.uut:UUT")


def test_a_torch_model_given_sizes_is_one_line(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "lin.py"
    path.write_text("import torch, paramgeo\n"
                    "model = paramgeo.from_torch(torch.nn.Linear(3, 2), torch.ones(4, 3), "
                    "name='lin-model')\n")
    try:
        line = _one_error_line(_cli("--plugin", path, "describe", "lin-model", "-p", "d=3"))
    finally:
        registry.unregister("lin-model")
    assert "unknown size d" in line and "no sizes" in line


# --------------------------------------------------------------------- Ctrl-C
class _StuckAfterCtrlC(paramgeo.Parameterization):
    """u * v; its 30th forward is interrupted (the user's Ctrl-C), and the later ones loop for
    10 s from the first of them (long enough to need a second Ctrl-C; bounded, so that a
    regression fails the test instead of hanging it)."""

    name = "stuck-after-ctrl-c"
    calls, stuck_until = 0, None

    def make_spec(self):
        return paramgeo.ParamSpec(u=(2,), v=(2,))

    def make_predictor_shape(self):
        return (2,)

    def forward(self, theta):
        type(self).calls += 1
        if type(self).calls == 30:
            raise KeyboardInterrupt
        if type(self).calls > 30:
            cls = type(self)
            cls.stuck_until = cls.stuck_until or time.perf_counter() + 10.0
            while time.perf_counter() < cls.stuck_until:  # a forward that does not return
                pass
        return theta[:2] * theta[2:]


@pytest.mark.parametrize("method", ["gd", "flow"])
def test_flow_with_a_looping_plugin_ends_after_one_ctrl_c(tmp_path, monkeypatch, method):
    import paramgeo.cli._common as common

    monkeypatch.setattr(common, "AFTER_INTERRUPT_SECONDS", 0.3)
    _StuckAfterCtrlC.calls, _StuckAfterCtrlC.stuck_until = 0, None
    registry.register(_StuckAfterCtrlC)
    data = tmp_path / "d.npz"
    np.savez(data, A=np.eye(2), y=np.ones(2))
    start = time.perf_counter()
    try:
        result = _cli("flow", "stuck-after-ctrl-c", "--loss", "squared", "--data", data,
                      "--method", method)
    finally:
        registry.unregister("stuck-after-ctrl-c")
    assert time.perf_counter() - start < 8
    line = _one_error_line(result, code=130)
    assert line.startswith("Error: interrupted") and "not printed" in line


def test_llc_step_sweep_stops_at_the_first_ctrl_c(monkeypatch):
    """The sweep returns the steps finished (the interrupted one with its draws so far) and
    runs no further step."""
    import paramgeo.llc.steps as steps

    calls = []
    real = steps.estimate_llc

    def estimate(*args, **kwargs):
        calls.append(kwargs["step"])
        out = real(*args, **kwargs)
        if len(calls) == 2:  # as the sampler returns when Ctrl-C comes after the burn-in
            import dataclasses
            out = dataclasses.replace(out, interrupted=True)
        return out

    monkeypatch.setattr(steps, "estimate_llc", estimate)
    p = paramgeo.get("hadamard", p=2)
    from paramgeo.losses import LinearMeasurements

    sweep = steps.step_sweep(p, LinearMeasurements(np.eye(2), np.ones(2)), np.full(4, 0.5),
                             steps=[1e-3, 2e-3, 4e-3], chains=1, draws=8, burn=0,
                             temperatures=(1.0,), bias_check=False)
    assert sweep.interrupted and len(sweep.estimates) == 2 and calls == [1e-3, 2e-3]
    assert sweep.to_dict()["interrupted"] is True


def test_llc_sweep_steps_cli_exits_130_on_one_sigint(tmp_path):
    """The reproduction: a real SIGINT to ``llc estimate --sweep-steps``."""
    rng = np.random.default_rng(0)
    data = tmp_path / "rrr.npz"
    np.savez(data, X=rng.standard_normal((200, 3)), Y=rng.standard_normal((200, 2)),
             theta_star=np.zeros(10))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "cli.py"), "llc", "estimate", "deep-linear", "-p",
         "widths=3,2,2", "--data", str(data), "--truth-zero", "--sweep-lr", "--steps",
         "1000000", "--burn", "20", "--chains", "2", "--progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert proc.stderr.read(1)  # the progress bar: the sampling has started
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-500:]
    assert b"Error: interrupted after" in err and b"Traceback" not in err


# --------------------------------------------------------------------- KL helpers
def test_kl_mvn_against_the_one_dimensional_closed_form_and_its_domain():
    from paramgeo.pacbayes.gaussians import PacBayesInputError, kl_mvn

    mq, sq, mp, sp = np.array([0.3, -1.0]), np.array([0.5, 2.0]), np.array([1.0, 0.0]), \
        np.array([1.5, 0.7])
    # independent coordinates: the sum of ln(s_p/s_q) + (s_q^2 + (m_q - m_p)^2)/(2 s_p^2) - 1/2
    expected = np.sum(np.log(sp / sq) + (sq ** 2 + (mq - mp) ** 2) / (2 * sp ** 2) - 0.5)
    assert kl_mvn(mq, np.diag(sq ** 2), mp, np.diag(sp ** 2)) == pytest.approx(expected,
                                                                            rel=1e-12)
    ok = np.eye(2)
    for Sq, Sp, message in [(np.diag([1.0, -1.0]), ok, "Sq is not positive definite"),
                            (ok, np.zeros((2, 2)), "Sp is not positive definite"),
                            (np.array([[1.0, 0.5], [0.0, 1.0]]), ok, "Sq is not symmetric"),
                            (ok, np.eye(3), "Sp must be a finite 2 x 2"),
                            (np.full((2, 2), np.nan), ok, "Sq must be a finite")]:
        with pytest.raises(PacBayesInputError, match=message):
            kl_mvn(np.zeros(2), Sq, np.zeros(2), Sp)


def test_kl_bernoulli_against_scipy_and_its_domain():
    from scipy.special import rel_entr

    from paramgeo.pacbayes.bounds import kl_bernoulli
    from paramgeo.pacbayes.gaussians import PacBayesInputError

    for q, p in [(0.2, 0.5), (0.0, 0.3), (1.0, 0.9), (0.7, 0.01)]:
        assert kl_bernoulli(q, p) == pytest.approx(rel_entr(q, p) + rel_entr(1 - q, 1 - p),
                                                   rel=1e-12, abs=1e-15)
    for q, p in [(2, 0.5), (0.5, -0.1), (0.5, float("nan")), (True, 0.5), ("0.5", 0.5)]:
        with pytest.raises(PacBayesInputError, match="must be a probability in"):
            kl_bernoulli(q, p)


# --------------------------------------------------------------------- leftovers
EMPTY = '''
from paramgeo import Parameterization, ParamSpec

class Empty(Parameterization):
    name = "empty-out"
    def make_spec(self): return ParamSpec(w=(2,))
    def make_predictor_shape(self): return (0,)
    def forward(self, theta): return theta[:0]
'''


@pytest.mark.parametrize("command", ["describe", "check", "rank", "critical", "mirror"])
def test_a_predictor_with_no_entries_is_one_line(tmp_path, command):
    path = tmp_path / "empty.py"
    path.write_text(EMPTY)
    try:
        line = _one_error_line(_cli("--plugin", path, command, "empty-out"))
    finally:
        registry.unregister("empty-out")
    assert "predictor shape (0,) has no entries" in line


@pytest.mark.parametrize("garbage, problem", [
    ('"garbage"', "returned str 'garbage', not a pair"),
    ("(1, 2, 3)", "not a pair"),
    ("(sympy.symbols('a b'), ['x', 'y'])", "returned str 'x' as expression 0"),
    ("([1, 2], [0, 0])", "returned int 1 among the symbols"),
    ("(sympy.symbols('a b'), [sympy.Symbol('z'), 0])", "expression 0 uses z"),
    ("(sympy.symbols('a a'), [0, 0])", "a symbol twice"),
])
def test_check_of_a_plugin_whose_symbolic_returns_garbage(tmp_path, garbage, problem):
    path = tmp_path / "garbage.py"
    path.write_text(textwrap.dedent(f'''
        import sympy
        from paramgeo import Parameterization, ParamSpec

        class Garbage(Parameterization):
            name = "garbage-sym"
            capabilities = frozenset({{"symbolic"}})
            def make_spec(self): return ParamSpec(w=(2,))
            def make_predictor_shape(self): return (2,)
            def forward(self, theta): return theta * 2
            def symbolic(self): return {garbage}
    '''))
    from paramgeo.expressions.symbolic import clear_cache

    clear_cache()
    try:
        result = _cli("--plugin", path, "check", "garbage-sym")
    finally:
        registry.unregister("garbage-sym")
        clear_cache()
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "FAIL  symbolic" in result.stdout and problem in result.stdout
    assert "plugin 'garbage-sym': symbolic()" in result.stdout


@pytest.mark.filterwarnings("ignore:lsoda")
@pytest.mark.parametrize("scale, message", [(1e200, "the data are too large for the flow"),
                                            (1e20, "the gradient flow failed")])
def test_implicit_bias_with_badly_scaled_data_is_one_line(tmp_path, scale, message):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 3))
    data = tmp_path / "d.npz"
    np.savez(data, X=X * scale, y=X @ np.array([1.0, 0.0, 0.0]))
    start = time.perf_counter()
    line = _one_error_line(_cli("implicit-bias", "hadamard", "-p", "p=3", "--data", data,
                                "--init-scale", "0.1"))
    assert message in line and time.perf_counter() - start < 20


def test_a_huge_symmetry_projector_is_refused_before_its_component_analysis(monkeypatch):
    """describe deep-diagonal -p p=1000000 -p depth=50 (n = 5e7): the torus generators have
    9.8e7 nonzeros; the size error comes before the sorts of connected_components."""
    import scipy.sparse as sp
    import scipy.sparse.csgraph

    from paramgeo.symmetry import projectors

    monkeypatch.setattr(projectors, "MAX_PROJECTOR_BLOCK_ENTRIES", 1000)
    monkeypatch.setattr(scipy.sparse.csgraph, "connected_components",
                        lambda *a, **k: pytest.fail("the components were computed"))
    G = sp.random(3000, 2000, density=0.001, format="csc", random_state=0)
    with pytest.raises(SizeError, match="nonzero entries"):
        projectors.sparse_projector(G)
