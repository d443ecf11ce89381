"""Reliability: a broken plugin blamed on the plugin, sweep outputs written safely, no silent
wrong answers, every request bounded before work starts, invalid API arguments refused.

One test (or one property) per reproduction of a hostile input or a plugin fault; every test
here runs in about a second.

Covers: ``paramgeo.cli``, ``paramgeo.cli._common``, ``paramgeo.contract.registry``,
``paramgeo.contract.trust``,
``paramgeo.critical.searching``, ``paramgeo.dynamics.trajectory``,
``paramgeo.expressions.userdefs``, ``paramgeo.flows.descent``, ``paramgeo.flows.online``,
``paramgeo.geometry.jacobian``, ``paramgeo.linalg.numerics``, ``paramgeo.losses.predictor``,
``paramgeo.mirror.potentials``, ``paramgeo.mirror.report``, ``paramgeo.pacbayes.bounds``,
``paramgeo.pacbayes.engine``, ``paramgeo.pacbayes.gaussians``, ``paramgeo.sweeps.queries``,
``paramgeo.sweeps.run``, ``paramgeo.sweeps.spec``, ``paramgeo.sweeps.table``,
``paramgeo.symmetry.groups``, ``paramgeo_plugins.deep_diagonal``, ``paramgeo_plugins.hadamard``,
``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import json
import math
import os
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import paramgeo
from paramgeo import Parameterization, ParamSpec, Size
from paramgeo.cli import main
from paramgeo.critical import search
from paramgeo.errors import (ArgumentError, ContractError, ParamgeoError, PluginError, ShapeError,
                             SizeError)
from paramgeo.geometry import generic_rank, horizontal_projection, rank_at
from paramgeo.mirror import mirror
from paramgeo.contract.registry import load_plugin_file
from tests.test_cli_inputs import _interrupt_at

# a NaN forward also makes numpy warn; the guard's error is what is tested
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

# --------------------------------------------------------------------- broken plugins

BROKEN = textwrap.dedent('''
    import autograd.numpy as anp
    import numpy as np
    from paramgeo import Parameterization, ParamSpec, Size

    class Base(Parameterization):
        size_params = {"d": Size("int", default=3)}
        def make_spec(self): return ParamSpec(u=(self.d,))
        def make_predictor_shape(self): return (self.d,)

    class Raises(Base):
        name = "b-raises"
        def forward(self, theta): raise RuntimeError("boom")

    class NaN(Base):
        name = "b-nan"
        def forward(self, theta): return anp.sqrt(theta) * 2

    class Cplx(Base):
        name = "b-complex"
        def forward(self, theta): return theta * 1j

    class Str(Base):
        name = "b-str"
        def forward(self, theta): return "hello"

    class WrongShape(Base):
        name = "b-shape"
        def forward(self, theta): return anp.concatenate([theta, theta])

    class Untraceable(Base):
        name = "b-untrace"
        def forward(self, theta): return np.array([float(t) ** 2 for t in theta])

    class BadJac(Base):
        name = "b-jac"
        capabilities = frozenset({"jacobian"})
        def forward(self, theta): return theta ** 2
        def jacobian(self, theta): return np.eye(2)

    class BadSym(Base):
        name = "b-sym"
        capabilities = frozenset({"symmetry"})
        def forward(self, theta): return theta ** 2
        def symmetry(self): return 42

    class BadRP(Base):
        name = "b-rp"
        def forward(self, theta): return theta ** 2
        def random_point(self, rng): return np.zeros(2)

    class BadSpec(Base):
        name = "b-spec"
        def forward(self, theta): return theta ** 2
        def make_spec(self): return {"u": 3}
''')

#: plugin -> (the method blamed, a word of the problem)
FAULTS = {
    "b-raises": ("forward", "raised RuntimeError: boom"),
    "b-nan": ("forward", "returned nan"),
    "b-complex": ("forward", "complex values"),
    "b-str": ("forward", "type str"),
    "b-shape": ("forward", "returned shape (6,)"),
    "b-untrace": ("forward", "cannot be traced by autograd"),
    "b-jac": ("jacobian", "returned shape (2, 2)"),
    "b-sym": ("symmetry", "not a paramgeo.symmetry.SymmetryGroup"),
    "b-rp": ("random_point", "returned shape (2,)"),
    "b-spec": ("make_spec", "not a ParamSpec"),
}


@pytest.fixture(scope="module")
def broken_file(tmp_path_factory):
    """The broken plugins, registered for this module's tests and removed after them (so that
    `describe --all` in other modules never meets them, whatever the test order)."""
    from paramgeo.contract.registry import available, unregister

    path = tmp_path_factory.mktemp("plugins") / "broken.py"
    path.write_text(BROKEN)
    before = set(available())
    load_plugin_file(path)
    yield path
    for name in set(available()) - before:
        unregister(name)


def _cli(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kwargs)


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_a_broken_plugin_is_blamed_by_name_in_the_api(broken_file, name):
    method, problem = FAULTS[name]
    with pytest.raises(PluginError) as info:
        p = paramgeo.get(name)
        rank_at(p, p.random_point(np.random.default_rng(0)))
        p.symmetry()
    err = info.value
    assert (err.plugin, err.method) == (name, method)
    assert problem in err.problem and err.fix
    assert str(err).startswith(f"plugin {name!r}: {method}()") and "fix:" in str(err)


#: the CLI commands and their extra arguments, each run on every broken plugin
COMMANDS = {
    "describe": [], "rank": [], "critical": [], "search": ["--starts", "1"],
    "discover": [], "mirror": [],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", ["b-raises", "b-nan", "b-untrace", "b-jac", "b-shape"])
def test_every_command_reports_the_plugin_fault_in_one_line(broken_file, command, name):
    result = _cli("--plugin", broken_file, command, name, *COMMANDS[command])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and f"plugin {name!r}: {FAULTS[name][0]}()" in lines[0]
    assert "internal error" not in result.output and "report it" not in result.output


@pytest.mark.parametrize("command", ["flow", "implicit-bias"])
def test_flow_and_implicit_bias_blame_the_plugin(broken_file, tmp_path, command):
    data = tmp_path / "d.npz"
    np.savez(data, X=np.random.default_rng(0).standard_normal((2, 3)), y=np.ones(2))
    extra = (["--loss", "squared", "--steps", "3"] if command == "flow"
             else ["--init-scale", "0.5"])
    result = _cli("--plugin", broken_file, command, "b-untrace", "--data", data, *extra)
    assert result.exit_code == 2
    assert "plugin 'b-untrace': forward() cannot be traced by autograd" in result.stderr
    assert "autograd.numpy" in result.stderr  # the fix


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_check_reports_each_fault_as_a_failed_property(broken_file, name):
    result = _cli("--plugin", broken_file, "check", name, "--json")
    assert result.exit_code == 1, result.output  # a failed contract, not a crash
    report = json.loads(result.stdout)
    failed = {item["property"] for item in report["items"] if not item["passed"]}
    assert FAULTS[name][0].replace("_", "-") in failed
    assert all(name in item["hint"] for item in report["items"] if not item["passed"])


def test_a_broken_group_method_is_a_failed_property():
    from paramgeo.symmetry import SymmetryGroup

    class Group(SymmetryGroup):
        name, dim = "broken", 0

        def act(self, g, theta):
            raise ZeroDivisionError("no")

        def random_element(self, rng):
            return None

    class P(Parameterization):
        name = "broken-group"
        capabilities = frozenset({"symmetry"})

        def make_spec(self):
            return ParamSpec(u=(2,))

        def make_predictor_shape(self):
            return (2,)

        def forward(self, theta):
            return theta ** 2

        def symmetry(self):
            return Group()

    report = paramgeo.check(P())
    hints = [i.hint for i in report.failures() if i.property == "symmetry-group"]
    assert not report.passed and hints and "ZeroDivisionError" in hints[0]


def test_a_paramgeo_error_inside_a_plugin_passes_unchanged():
    class P(Parameterization):
        name = "sized"
        size_params = {"d": Size("int", default=2)}

        def validate_sizes(self):
            if self.d > 3:
                raise SizeError("d must be <= 3")

        def make_spec(self):
            return ParamSpec(u=(self.d,))

        def make_predictor_shape(self):
            return (self.d,)

        def forward(self, theta):
            return theta

    with pytest.raises(SizeError, match="d must be <= 3"):
        P(d=4)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_huge_theta_may_overflow_without_blame():
    """Non-finite phi at |theta| > 1e6 is the input's size, not the plugin's fault."""
    p = paramgeo.get("deep-diagonal", p=2, depth=3)
    out = p.forward(np.full(p.n, 1e150))
    assert np.all(np.isinf(out))


def test_wrong_argument_lengths_are_the_callers_shape_error():
    p = paramgeo.get("uut", d=3, r=2)
    for call in (lambda: p.jacobian(np.ones(5)), lambda: p.jvp(np.ones(6), np.ones(2)),
                 lambda: p.vjp(np.ones(6), np.ones(4)), lambda: p.forward("abc")):
        with pytest.raises(ShapeError, match="argument"):
            call()


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_the_fast_result_check_tells_an_inf_from_a_large_finite_value(broken_file):
    """The guard's common-case check is one inner product: an inf entry fails it and is blamed;
    finite entries whose squares would overflow (1e200) pass, silently, for small results (the
    sum, by the inner product with ones) and large ones (over 65536 entries: the careful
    checks)."""
    small, large = paramgeo.get("uut", d=3, r=2), paramgeo.get("uut", d=260, r=1)
    assert small.m <= 65536 < large.m
    for p in (small, large):
        big = np.full(p.n, 1e100)  # phi entries 2e200: finite, their squares overflow
        assert np.all(np.isfinite(p.forward(big))) and np.all(np.isfinite(p.jvp(big, big)))
    assert np.all(np.isfinite(small.jacobian(np.full(small.n, 1e100))))
    q = paramgeo.get("b-nan")
    with pytest.raises(PluginError, match="returned nan"):
        q.jvp(-np.ones(q.n), np.ones(q.n))


def test_trusted_turns_the_checks_off_inside_the_block_only():
    p = paramgeo.get("uut", d=3, r=2)
    theta, v = np.ones(p.n), np.ones(p.n)
    with paramgeo.trusted():
        with paramgeo.trusted():  # blocks nest
            assert np.array_equal(p.jvp(theta, v), type(p).jvp.__wrapped__(p, theta, v))
        with pytest.raises(ValueError):  # numpy's own error: no argument check ran
            p.jvp(np.ones(5), v)
    with pytest.raises(ShapeError, match="argument theta must have 6 entries"):
        p.jvp(np.ones(5), v)


def test_trusted_view_calls_the_plugins_own_methods_and_leaves_the_parameterization_checked():
    """``with trusted(p) as q``: q's methods are the plugin's functions bound to a copy of p
    (no guard layer: a wrong length reaches numpy), with the same values as p's checked
    methods; p itself keeps its guarded methods, during the block and after it."""
    p = paramgeo.get("uut", d=3, r=2)
    rng = np.random.default_rng(0)
    theta, v, w = rng.standard_normal(p.n), rng.standard_normal(p.n), rng.standard_normal(p.m)
    cls = type(p)
    with paramgeo.trusted(p) as q:
        assert q is not p and type(q) is cls and q.n == p.n
        for name in ("forward", "jvp", "vjp", "jacobian"):
            assert getattr(q, name).__func__ is getattr(cls, name).__wrapped__, name
        assert np.array_equal(q.jvp(theta, v), p.jvp(theta, v))
        assert np.allclose(q.jvp(theta, v), q.jacobian(theta) @ v, rtol=1e-12, atol=1e-12)
        assert np.array_equal(q.vjp(theta, w), p.vjp(theta, w))
        with pytest.raises(ValueError):  # numpy's own error: nothing checked the length
            q.jvp(np.ones(5), v)
        assert "jvp" not in vars(p)  # p still resolves its methods on the (guarded) class
    assert p.jvp.__func__ is cls.jvp and getattr(cls.jvp, "__paramgeo_guarded__", False)
    with pytest.raises(ShapeError, match="argument theta must have 6 entries"):
        p.jvp(np.ones(5), v)
    with paramgeo.trusted() as nothing:
        assert nothing is None
    with pytest.raises(ParamgeoError, match="param must be a parameterization"):
        with paramgeo.trusted(np.ones(3)):
            pass


# --------------------------------------------------------------------- sweeps

SPEC = 'query = "describe"\nplugin = "uvt"\n[grid]\nsizes.m = [{}]\n'


@pytest.fixture
def sweep_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(SPEC.format("2, 3"))
    return tmp_path


def test_a_second_sweep_on_a_locked_output_refuses_naming_the_first(sweep_dir):
    from paramgeo.sweeps import sweep
    from paramgeo.sweeps.spec import SweepSpecError
    from paramgeo.sweeps.table import OutputLock

    with OutputLock(sweep_dir / "shared.csv", "sweep first.toml"):
        with pytest.raises(SweepSpecError, match="another sweep .sweep first.toml, pid"):
            sweep("s.toml", "shared.csv", workers=0)
    assert not (sweep_dir / "shared.csv").exists()
    summary = sweep("s.toml", "shared.csv", workers=0)  # the lock is free again
    assert summary.done == 2 and not (sweep_dir / "shared.csv.lock").exists()


def test_the_lock_is_exclusive_between_processes(sweep_dir):
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from paramgeo.sweeps.table import OutputLock;"
         "l = OutputLock('out.csv', 'sweep other.toml').__enter__(); print('locked', flush=True);"
         "time.sleep(30)"], stdout=subprocess.PIPE, text=True, cwd=sweep_dir)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0")
        assert result.exit_code == 2 and "sweep other.toml" in result.stderr
        assert f"pid {holder.pid}" in result.stderr
    finally:
        holder.kill()
        holder.wait()
    assert _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0").exit_code == 0


def test_no_link_is_followed_and_no_user_file_is_touched(sweep_dir):
    victim = sweep_dir / "victim.txt"
    victim.write_text("mine")
    (sweep_dir / "out.csv.tmp").symlink_to(victim)
    (sweep_dir / "other.csv.tmp").write_text("also mine")
    assert _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0").exit_code == 0
    assert victim.read_text() == "mine" and (sweep_dir / "other.csv.tmp").read_text() == "also mine"
    assert (sweep_dir / "out.csv.tmp").is_symlink()
    assert len((sweep_dir / "out.csv").read_text().splitlines()) == 3
    assert oct(os.stat(sweep_dir / "out.csv").st_mode & 0o777) != oct(0o600)
    assert not [p for p in os.listdir(sweep_dir) if p.startswith(".out.csv")]  # no temp left


def test_a_journal_that_is_a_link_is_refused(sweep_dir):
    victim = sweep_dir / "victim2.txt"
    victim.write_text("mine\n")
    (sweep_dir / "out.csv.partial.jsonl").symlink_to(victim)
    result = _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0", "--resume")
    assert result.exit_code == 2 and "symbolic link" in result.stderr
    assert victim.read_text() == "mine\n"


def test_a_journal_line_that_is_not_a_row_is_refused(sweep_dir):
    (sweep_dir / "out.csv.partial.jsonl").write_text('{"a": 1}\n[1, 2]\n')
    result = _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0", "--resume")
    assert result.exit_code == 2 and "line 1 is not a row" in result.stderr


@pytest.mark.parametrize("folder", ["missing", "readonly"])
def test_the_output_folder_is_checked_before_any_cell(sweep_dir, monkeypatch, folder):
    import paramgeo.sweeps.run as run

    monkeypatch.setattr(run, "run_cell", lambda task: pytest.fail("a cell ran"))
    if folder == "readonly":
        (sweep_dir / folder).mkdir()
        real = os.access  # root may write anywhere: the folder's answer is patched
        monkeypatch.setattr(os, "access", lambda path, mode: os.path.basename(path) != folder
                            and real(path, mode))
    result = _cli("sweep", "s.toml", "-o", f"{folder}/out.csv", "--workers", "0")
    assert result.exit_code == 2
    assert ("does not exist" if folder == "missing" else "not writable") in result.stderr


def test_an_interrupted_cell_is_never_stored_complete(sweep_dir, monkeypatch):
    """Ctrl-C absorbed by a search cell (its result says interrupted) stops an in-process
    sweep; the cell is in no table or journal, so --resume computes it."""
    import dataclasses

    import paramgeo.critical.searching as searching
    from paramgeo.sweeps import sweep

    real = searching.search

    def interrupted(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), interrupted=True)

    monkeypatch.setattr(searching, "search", interrupted)
    monkeypatch.setattr(paramgeo.critical, "search", interrupted)
    (sweep_dir / "s.toml").write_text('query = "search"\nplugin = "uut"\n'
                                      'options = { starts = 1 }\n')
    with pytest.raises(KeyboardInterrupt):
        sweep("s.toml", "out.csv", workers=0)
    journal = sweep_dir / "out.csv.partial.jsonl"
    assert not (sweep_dir / "out.csv").exists()
    assert not journal.exists() or journal.read_text() == ""
    monkeypatch.setattr(paramgeo.critical, "search", real)
    monkeypatch.setattr(searching, "search", real)
    summary = sweep("s.toml", "out.csv", workers=0, resume=True)
    assert summary.done == 1 and summary.table["status"].tolist() == ["ok"]


@pytest.mark.parametrize("options, message", [
    ("{ starts = 1000000000 }", "options.starts must be an integer in [1, 100000]"),
    ("{ maxiter = 1.5 }", "must be an integer"),
])
def test_sweep_options_get_the_cli_caps(sweep_dir, options, message):
    (sweep_dir / "s.toml").write_text(f'query = "search"\nplugin = "uut"\noptions = {options}\n')
    result = _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0")
    assert result.exit_code == 2 and message in result.stderr


@pytest.mark.filterwarnings("ignore:.*options.time is deprecated:FutureWarning")
@pytest.mark.parametrize("query, option", [("flow", "t_final"), ("flow", "time"),
                                           ("implicit-bias", "t_final")])
def test_a_sweeps_flow_horizon_gets_the_flows_bound(sweep_dir, query, option):
    """t_final = 1e300 is refused with the file, as records = 1e9 is, not in the cell's row."""
    np.savez(sweep_dir / "d.npz", X=np.eye(3), y=np.ones(3))
    method = ', method = "flow"' if query == "flow" else ""
    (sweep_dir / "s.toml").write_text(
        f'query = "{query}"\nplugin = "hadamard"\nsizes = {{ p = 3 }}\n'
        f'options = {{ data = "d.npz", init_scale = 0.1{method}, {option} = 1e300 }}\n')
    result = _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0")
    assert result.exit_code == 2 and "options.t_final must be at most 1e+30" in result.stderr
    assert not (sweep_dir / "out.csv").exists()


def test_a_warning_on_the_command_line_is_one_line(sweep_dir):
    """Python's format (file name, line number, a line of source) is not shown: the warning is
    one line, as the commands' own (a real process: pytest would capture the warning)."""
    import subprocess
    import sys

    np.savez(sweep_dir / "d.npz", X=np.eye(3), y=np.ones(3))
    (sweep_dir / "s.toml").write_text('query = "flow"\nplugin = "hadamard"\nsizes = { p = 3 }\n'
                                      'options = { data = "d.npz", time = 1e300 }\n')
    proc = subprocess.run([sys.executable, "-c", "from paramgeo.cli import main; main()",
                           "sweep", "s.toml", "-o", "out.csv", "--workers", "0"],
                          capture_output=True, text=True, timeout=120, cwd=sweep_dir)
    warning, error = proc.stderr.strip().splitlines()
    assert warning.startswith("Warning: ") and "options.time is deprecated" in warning
    assert error.startswith("Error: ") and proc.returncode == 2


def test_a_huge_grid_is_counted_before_it_is_validated(sweep_dir):
    values = ", ".join(map(str, range(1, 1001)))
    (sweep_dir / "s.toml").write_text(f'query = "describe"\nplugin = "uut"\n[grid]\n'
                                      f'sizes.d = [{values}]\noptions.seed = [{values}]\n')
    result = _cli("sweep", "s.toml", "-o", "out.csv", "--workers", "0")
    assert result.exit_code == 2 and "1e+06 cells" in result.stderr


def test_sweep_workers_capped_and_bad_files_refused(sweep_dir):
    from paramgeo.sweeps import sweep
    from paramgeo.sweeps.spec import SweepSpecError

    with pytest.raises(SweepSpecError, match="4 per core"):
        sweep("s.toml", "out.csv", workers=1_000_000)
    with pytest.raises(SweepSpecError, match="spec must be the path"):
        sweep(None)
    (sweep_dir / "deep.toml").write_text("a = " + "[" * 2000 + "]" * 2000 + "\n")
    with pytest.raises(SweepSpecError, match="nested too deeply"):
        sweep("deep.toml")
    (sweep_dir / "big.toml").write_text('query = "mirror"\nplugin = "uut"\n'
                                        f'options = {{ init_scale = {"9" * 400} }}\n')
    with pytest.raises(SweepSpecError, match="finite number"):
        sweep("big.toml")


# --------------------------------------------------------------------- define

@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAMGEO_HOME", str(tmp_path))
    return tmp_path


# names that Python's parser merges (NFKC) with an ASCII or another name
MERGING = [("\u210c", "H"), ("\ufb01", "fi"), ("\u00b5", "\u03bc"), ("\u212b", "\u00c5")]


@pytest.mark.parametrize("odd, plain", MERGING)
def test_define_refuses_names_python_would_merge(home, odd, plain):
    from paramgeo.expressions.userdefs import SpecError, load_text

    text = (f'name = "nfkc"\npredictor = "{odd} * 2 + {plain}"\n[parameters]\n'
            f'"{odd}" = [3]\n"{plain}" = [3]\n')
    with pytest.raises(SpecError, match="NFKC"):
        load_text(text)


@given(st.text(alphabet=st.characters(categories=("Lu", "Ll", "Lo", "Nl")), min_size=1,
               max_size=3))
@settings(max_examples=60)
def test_every_accepted_block_name_is_read_by_python_as_written(name):
    import unicodedata

    from paramgeo.expressions.userdefs import SpecError, parse_spec

    text = f'name = "x"\npredictor = "1"\n[parameters]\n"{name}" = [1]\n'
    try:
        spec = parse_spec(text)
    except SpecError:
        return
    (block,) = spec["parameters"]
    assert unicodedata.normalize("NFKC", block) == block


@pytest.mark.parametrize("predictor, message", [
    ("((((9**64)**64)**64)**64)**64 * u", "digits"),
    ("u * (10**60)**60", "digits"),
])
def test_define_refuses_exploding_constants(home, predictor, message):
    from paramgeo.expressions.userdefs import load_text

    with pytest.raises(ParamgeoError, match=message):
        load_text(f'name = "x"\npredictor = "{predictor}"\n[parameters]\nu = [3]\n')


def test_define_refuses_exploding_expression_trees(home):
    from paramgeo.expressions.userdefs import load_text

    for expr in ("sum(U@U@U@U)", "sum(U@U@U)"):
        with pytest.raises(ParamgeoError, match="nodes"):
            load_text(f'name = "x"\npredictor = "{expr}"\n[parameters]\nU = [10, 10]\n')
    cls = load_text('name = "x"\npredictor = "sum(U@U)"\n[parameters]\nU = [4, 4]\n')
    assert cls().n == 16


@pytest.mark.parametrize("sizes, shape", [("p = " + "9" * 400, '["p"]'),
                                         ("", "[" + "9" * 400 + "]")])
def test_define_names_a_400_digit_size_in_a_short_line(home, sizes, shape):
    from paramgeo.expressions.userdefs import SpecError, load_text

    with pytest.raises(SpecError, match=r"~1e\+399 parameters") as info:
        load_text(f'name = "x"\npredictor = "u"\n[sizes]\n{sizes}\n[parameters]\nu = {shape}\n')
    assert len(str(info.value)) < 250


@pytest.mark.parametrize("text, message", [
    ('name = "x"\npredictor = "u"\n[parameters]\nu = [[3]]\n', "must be a list of positive"),
    ('name = "x"\npredictor = ' + "[" * 2000 + '"u"' + "]" * 2000 + '\n[parameters]\nu = [1]\n',
     "nested too deeply"),
])
def test_define_refuses_malformed_shapes_and_nesting(home, text, message):
    from paramgeo.expressions.userdefs import load_text

    with pytest.raises(ParamgeoError, match=message):
        load_text(text)


# --------------------------------------------------------------------- bounds

@pytest.mark.parametrize("name, sizes", [
    ("deep-diagonal", {"depth": 10**9}),
    ("rope-attention", {"r": 10**9}),
    ("qk-attention", {"output": "attention", "tokens": 10**8}),
])
def test_size_guards_run_before_anything_is_allocated(name, sizes):
    with pytest.raises(SizeError, match="more than paramgeo builds"):
        paramgeo.get(name, **sizes)


def test_gaussian_scales_are_bounded():
    from paramgeo.pacbayes import DiagonalGaussian, PacBayesInputError
    from paramgeo.pacbayes.gaussians import _positive

    with pytest.raises(PacBayesInputError, match="std must lie"):
        DiagonalGaussian(mean=np.zeros(3), std=1e300)
    with pytest.raises(PacBayesInputError, match="prior scale must lie"):
        _positive(1e-300, "prior scale", bounded=True)


def test_flow_records_and_horizon_are_bounded():
    from paramgeo.flows import gradient_flow
    from paramgeo.losses import LinearMeasurements

    p = paramgeo.get("hadamard", p=2)
    loss = LinearMeasurements(np.eye(2), np.ones(2))
    with pytest.raises(ArgumentError, match="n_records"):
        gradient_flow(p, loss, np.ones(4), 1.0, n_records=10**9)
    with pytest.raises(ArgumentError, match="n_records"):
        gradient_flow(p, loss, np.ones(4), 1.0, n_records=0)
    with pytest.raises(ParamgeoError, match="final time"):
        gradient_flow(p, loss, np.ones(4), 1e300)
    with pytest.raises(ArgumentError, match="loss must be"):
        gradient_flow(p, None, np.ones(4), 1.0)
    result = _cli("flow", "hadamard", "-p", "p=2", "--loss", "squared", "--data", "x.npz",
                  "--records", "1000000000")
    assert result.exit_code == 2 and "--records" in result.stderr
    result = _cli("flow", "hadamard", "-p", "p=2", "--loss", "squared", "--data", "x.npz",
                  "--method", "gd", "--steps", str(10 ** 11))
    assert result.exit_code == 2 and "--steps" in result.stderr
    from paramgeo.sweeps.queries import get_query

    with pytest.raises(ValueError, match="integer in"):
        get_query("flow").options["steps"].convert(10 ** 11)


# --------------------------------------------------------------------- API arguments

def _uut():
    return paramgeo.get("uut", d=4, r=2)


@pytest.mark.parametrize("call, error, argument", [
    (lambda: paramgeo.get("uut", d=True), SizeError, "d=True"),
    (lambda: rank_at(None, np.ones(3)), ArgumentError, "param"),
    (lambda: rank_at(_uut(), np.ones((2, 4))), ShapeError, "single block"),
    (lambda: generic_rank(_uut(), n_points=0), ArgumentError, "n_points"),
    (lambda: horizontal_projection(_uut(), np.ones(8), np.full(8, np.nan)),
     ShapeError, "tangent vector v"),
    (lambda: paramgeo.check(None), ArgumentError, "param"),
    (lambda: paramgeo.check(_uut(), seed=-1), ArgumentError, "seed"),
    (lambda: search(_uut(), maxiter=0), ArgumentError, "maxiter"),
    (lambda: mirror(_uut(), alpha=math.nan), ArgumentError, "alpha"),
])
def test_invalid_api_arguments_are_refused_naming_them(call, error, argument):
    with pytest.raises(error, match=argument.replace("(", r"\(")):
        call()


def test_pacbayes_api_arguments():
    from paramgeo.pacbayes import PacBayesInputError
    from paramgeo.pacbayes.bounds import certificates, kl_inverse_upper
    from paramgeo.pacbayes.gaussians import kl_gaussian

    with pytest.raises(PacBayesInputError, match="budget c"):
        kl_inverse_upper(0.1, math.nan)
    with pytest.raises(PacBayesInputError, match="q must be"):
        kl_inverse_upper(math.nan, 0.1)
    with pytest.raises(PacBayesInputError, match="DiagonalGaussian"):
        kl_gaussian(1, 2)
    with pytest.raises(PacBayesInputError, match="catoni_grid"):
        certificates(0.1, 1.0, 100, 0.05, catoni_grid=[])


@given(st.floats(0, 1), st.floats(0, 50))
def test_kl_inverse_upper_brackets_the_budget(q, c):
    """An independent route (the closed-form Bernoulli relative entropy): the bisection's
    upper end p* is over the budget (or 1) and a point 1e-11 below it within the budget."""
    from paramgeo.pacbayes.bounds import kl_bernoulli, kl_inverse_upper

    p = kl_inverse_upper(q, c)
    assert q <= p <= 1
    assert p == 1.0 or kl_bernoulli(q, p) > c
    assert kl_bernoulli(q, max(q, p - 1e-11)) <= c + 1e-12  # rounding of kl near 0


def test_the_plugin_error_type_is_a_contract_error():
    assert issubclass(PluginError, ContractError)
    err = PluginError("mine", "forward", "returned nan", "make it finite")
    assert str(err) == "plugin 'mine': forward() returned nan; fix: make it finite"


def test_a_correct_plugin_of_the_user_is_untouched_by_the_guard():
    class Mine(Parameterization):
        name = "mine"

        def make_spec(self):
            return ParamSpec(u=(2,), v=(2,))

        def make_predictor_shape(self):
            return (2,)

        def forward(self, theta):
            u, v = self.spec.unpack(theta).values()
            return u * v

    p = Mine()
    theta = np.array([1.0, 2.0, 3.0, 4.0])
    assert np.allclose(p.forward(theta), [3.0, 8.0])
    assert np.allclose(p.jacobian(theta), [[3, 0, 1, 0], [0, 4, 0, 2]])
    assert paramgeo.check(p).passed


# --------------------------------------------------------------------- CLI requests

def test_implicit_bias_refuses_zero_data_rows(tmp_path):
    data = tmp_path / "z.npz"
    np.savez(data, X=np.zeros((0, 3)), y=np.zeros(0))
    result = _cli("implicit-bias", "hadamard", "-p", "p=3", "--data", data, "--init-scale", "0.1")
    assert result.exit_code == 2 and "no data rows" in result.stderr


def test_data_out_of_reach_of_a_numerical_potential_is_one_line():
    """phi = u^2 (no closed-form potential) reaches only beta >= 0; the least-change
    interpolator of data with y < 0 has negative entries, where the dual minimisation of the
    numerical potential runs mu off to overflow: a ParamgeoError, not scipy's ValueError."""
    from paramgeo.mirror.potentials import numerical_potential

    class Squares(Parameterization):
        name = "squares"

        def make_spec(self):
            return ParamSpec(u=(3,))

        def make_predictor_shape(self):
            return (3,)

        def forward(self, theta):
            return theta ** 2

    potential = numerical_potential(Squares(), np.full(3, 0.1))
    assert potential.value(np.full(3, 0.01)) == pytest.approx(0.0, abs=1e-9)  # R(beta0) = 0
    with pytest.raises(ParamgeoError, match="outside the domain of the mirror potential"):
        potential.value(np.array([-0.04, 0.75, -0.5]))


def test_an_unwritable_plot_is_refused_before_the_run(tmp_path, monkeypatch):
    import paramgeo.dynamics.trajectory as trajectory

    monkeypatch.setattr(trajectory, "_flow", lambda *a, **k: pytest.fail("the flow ran"))
    data = tmp_path / "d.npz"
    np.savez(data, X=np.eye(3), y=np.ones(3))
    result = _cli("flow", "hadamard", "-p", "p=3", "--loss", "squared", "--data", data,
                  "--method", "flow", "--plot", "/proc/x.png")
    assert result.exit_code == 2 and "cannot write a plot to '/proc/x.png'" in result.stderr


@pytest.mark.parametrize("command, route", [("rank", "matrix-free"), ("rank", "auto"),
                                            ("critical", None)])
def test_a_point_whose_jacobian_overflows_is_one_line(tmp_path, command, route):
    """Entries of 1e300 overflow J (or its closed-form singular values): one error line, with
    numpy's overflow warnings not shown (a real process: pytest would capture them)."""
    import subprocess
    import sys

    at = tmp_path / "big.npy"
    np.save(at, np.full(8, 1e300))
    args = [command, "uut", "-p", "d=4", "-p", "r=2", "--at", str(at)]
    args += ["--route", route] if route else []
    proc = subprocess.run([sys.executable, "-c", "from paramgeo.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "overflow" in line and "internal error" not in line


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_no_rank_is_decided_on_non_finite_values():
    """rank 0 with tol inf was the closed form's answer at theta = 1e300; the dense SVD of the
    same J (entries ~1e300, still finite) decides the rank of a rank-1 U: d k - k(k-1)/2 = 4
    (Journee et al. 2010)."""
    from paramgeo.linalg.numerics import decide_rank

    p = _uut()
    with pytest.raises(ShapeError, match="singular values are not all finite"):
        rank_at(p, np.full(8, 1e300))
    assert rank_at(p, np.full(8, 1e300), route="dense").rank == 4
    for bad in (np.inf, np.nan):
        with pytest.raises(ShapeError, match="entries are not all finite"):
            decide_rank(np.array([[1.0, 0.0], [0.0, bad]]))
        with pytest.raises(ShapeError, match="singular values are not all finite"):
            decide_rank(np.array([bad, 1.0]))


def test_a_size_may_be_named_like_an_argument(home):
    """`-p name=3` used to collide with get(name, ...): unknown sizes are refused as such, and
    a definition whose size is named `name` (or `self`) is built at any value of it."""
    from paramgeo.expressions.userdefs import load_text

    for size in ("name", "self"):
        with pytest.raises(SizeError, match=f"unknown size {size}"):
            paramgeo.get("uut", **{size: 3})
        result = _cli("rank", "uut", "-p", f"{size}=3")
        assert result.exit_code == 2 and f"unknown size {size}" in result.stderr
        cls = load_text(f'name = "x"\npredictor = "u"\n[sizes]\n{size} = 3\n'
                        f'[parameters]\nu = ["{size}"]\n')
        assert cls().n == 3 and cls(**{size: 5}).n == 5


# --------------------------------------------------------------------- interrupts

class _CtrlC(Parameterization):
    """u * v that raises KeyboardInterrupt (a Ctrl-C) at its ``after``-th forward."""

    name = "ctrl-c"
    size_params = {"after": Size("int", default=40)}

    def make_spec(self):
        return ParamSpec(u=(2,), v=(2,))

    def make_predictor_shape(self):
        return (2,)

    def forward(self, theta):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == self.after:
            raise KeyboardInterrupt
        return theta[:2] * theta[2:]


@pytest.mark.parametrize("method", ["gd", "flow"])
def test_an_interrupted_run_returns_what_finished(method):
    from paramgeo.flows import gradient_descent, gradient_flow
    from paramgeo.losses import LinearMeasurements

    p, loss = _CtrlC(), LinearMeasurements(np.eye(2), np.ones(2))
    theta0 = np.full(4, 0.5)
    traj = (gradient_descent(p, loss, theta0, 1000, 0.1) if method == "gd"
            else gradient_flow(p, loss, theta0, 100.0))
    assert traj.interrupted and not traj.success and traj.message.startswith("interrupted")
    assert len(traj.times) >= 2 and traj.times[-1] > 0
    assert np.allclose(traj.thetas[0], theta0)


def test_flow_prints_the_finished_steps_then_exits_130(tmp_path):
    from paramgeo.contract.registry import register, unregister

    register(_CtrlC, replace=True)
    data = tmp_path / "d.npz"
    np.savez(data, A=np.eye(2), y=np.ones(2))
    try:
        result = _cli("flow", "ctrl-c", "--loss", "squared", "--data", data, "--steps", "500")
    finally:
        unregister("ctrl-c")
    assert result.exit_code == 130
    assert "Trajectory (gd)" in result.stdout and "|grad L|" in result.stdout
    assert "Error: interrupted after" in result.stderr


class _NumpyModel(Parameterization):
    """u * v in plain numpy with closed-form J, J v and J^T w: usable by the J-only engines,
    untraceable by autograd."""

    name = "numpy-model"
    capabilities = frozenset({"jacobian", "jvp", "vjp"})

    def make_spec(self):
        return ParamSpec(u=(2,), v=(2,))

    def make_predictor_shape(self):
        return (2,)

    def forward(self, theta):
        theta = np.asarray(theta, dtype=float)
        return theta[:2] * theta[2:]

    def jacobian(self, theta):
        return np.hstack([np.diag(theta[2:]), np.diag(theta[:2])])

    def jvp(self, theta, v):
        return self.jacobian(theta) @ v

    def vjp(self, theta, w):
        return self.jacobian(theta).T @ w


def test_an_untraceable_forward_with_closed_forms_works_where_no_trace_is_needed():
    p = _NumpyModel()
    assert generic_rank(p) == 2  # J only
    with pytest.raises(PluginError, match="cannot be traced by autograd"):
        p.hessian_vp(np.ones(4), np.ones(2), np.ones(4))  # needs second derivatives of forward
    report = paramgeo.check(p)
    failed = [i for i in report.failures() if i.property == "forward"]
    assert failed and "cannot be traced" in failed[0].hint and "autograd.numpy" in failed[0].hint


def test_a_cell_past_its_time_limit_records_an_error_and_the_sweep_goes_on(sweep_dir,
                                                                            monkeypatch):
    import time

    from paramgeo.sweeps import queries, sweep

    real = queries.QUERIES["describe"]

    def slow(param, seed):
        if param.sizes["m"] == 3:
            while True:  # a cell that never ends
                time.sleep(0.01)
        return real.run(param, seed)

    monkeypatch.setitem(queries.QUERIES, "describe", queries.dataclasses.replace(real, run=slow))
    summary = sweep("s.toml", "out.csv", workers=0, cell_time_limit=0.5)
    rows = {str(r["m"]): r for r in summary.table.to_dict("records")}
    assert rows["2"]["status"] == "ok"
    assert rows["3"]["status"] == "error" and "time limit of 0.5 s" in rows["3"]["error"]


def test_the_cell_watchdog_fires_only_for_cells_still_running():
    """One watchdog thread serves every limited cell: a cell that ends in time is never
    interrupted afterwards, a later cell with a shorter limit is still caught, and cells on two
    threads each get their own deadline."""
    import threading
    import time

    from paramgeo.sweeps.run import CellTimeLimit, _time_limit

    with _time_limit(0.2):
        pass
    time.sleep(0.4)  # the first cell's deadline passes after it ended: nothing is raised

    def overrun(limit, out):
        try:
            with _time_limit(limit):
                while True:
                    time.sleep(0.005)
        except CellTimeLimit:
            out.append(time.monotonic())

    caught, start = [], time.monotonic()
    threads = [threading.Thread(target=overrun, args=(lim, caught)) for lim in (0.6, 0.15)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(caught) == 2 and not any(t.is_alive() for t in threads)
    assert 0.1 < min(caught) - start < 0.5 < max(caught) - start < 2.0


# ------------------------------------------------- a plugin's own symmetry group, in every engine

BROKEN_GROUP = textwrap.dedent('''
    import autograd.numpy as anp
    import numpy as np
    from paramgeo import Parameterization, ParamSpec, Size
    from paramgeo.symmetry import SymmetryGroup

    class Rescale(SymmetryGroup):
        """u v invariant under (u, v) -> (g u, v / g); broken as MODE says."""
        name = "R*"
        def __init__(self, mode):
            self.mode = mode
        @property
        def dim(self):
            return -1 if self.mode == "dim" else 1
        def act(self, g, theta):
            if self.mode == "raise":
                raise RuntimeError("act failed")
            t = np.array(theta, float)
            t[0], t[1] = g * t[0], t[1] / g
            return t * np.nan if self.mode == "nan" else t
        def random_element(self, rng):
            return float(np.exp(rng.normal()))
        def generators(self, theta):
            if self.mode == "raise":
                raise RuntimeError("generators failed")
            if self.mode == "shape":
                return np.ones((2, 2))
            g = np.zeros((len(theta), 1))
            g[0, 0], g[1, 0] = theta[0], -theta[1]
            return g * np.nan if self.mode == "nan" else g

    class BrokenGroup(Parameterization):
        name = "b-group"
        size_params = {"mode": Size("choice", default="raise",
                                    choices=("raise", "nan", "shape", "dim"))}
        capabilities = frozenset({"symmetry"})
        def make_spec(self): return ParamSpec(u=(1,), v=(1,), w=(2,))
        def make_predictor_shape(self): return (2,)
        def forward(self, theta):
            return anp.stack([theta[0] * theta[1], theta[2] * theta[3]])
        def symmetry(self): return Rescale(self.mode)
''')

#: what each mode breaks: the method named in the error, and the problem
GROUP_FAULTS = {"raise": ("generators", "raised RuntimeError"),
                "nan": ("generators", "returned nan at the finite point"),
                "shape": ("generators", "returned shape (2, 2), expected (n, dim) shape (4, 1)"),
                "dim": ("dim", "returned -1, not a non-negative integer")}


@pytest.fixture(scope="module")
def group_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("group")
    plugin = folder / "group.py"
    plugin.write_text(BROKEN_GROUP)
    rng = np.random.default_rng(0)
    np.save(folder / "theta.npy", rng.standard_normal(4))
    np.savez(folder / "flow.npz", A=rng.standard_normal((3, 2)), y=np.ones(3))
    np.savez(folder / "q.npz", mean=rng.standard_normal(4), std=0.1, empirical_risk=0.1)
    return folder


#: each engine that uses the declared group, with its arguments (FOLDER: the fixture's folder)
GROUP_COMMANDS = {
    "describe": [], "critical": ["--at", "FOLDER/theta.npy"], "search": ["--starts", "1"],
    "mirror": [], "flow": ["--data", "FOLDER/flow.npz", "--steps", "3"],
    "pacbayes": ["--posterior", "FOLDER/q.npz", "--prior-scale", "1", "--sample-size", "100",
                 "--delta", "0.05", "--samples", "4"],
    "rank": ["--route", "matrix-free"], "discover": [],
}


#: every engine once, the faults taken in turn (describe, the cheapest, with each of them)
GROUP_CASES = [("describe", mode) for mode in sorted(GROUP_FAULTS)] + [
    ("critical", "nan"), ("search", "shape"), ("mirror", "raise"), ("flow", "dim"),
    ("pacbayes", "nan"), ("rank", "shape"), ("discover", "dim")]


@pytest.mark.parametrize("command, mode", GROUP_CASES)
def test_a_broken_group_is_the_plugins_fault_in_every_engine(group_files, command, mode):
    args = [a.replace("FOLDER", str(group_files)) for a in GROUP_COMMANDS[command]]
    result = _cli("--plugin", group_files / "group.py", command, "b-group", "-p",
                  f"mode={mode}", *args)
    assert "internal error" not in result.output and "report it" not in result.output
    if command in ("rank", "discover") and result.exit_code == 0:
        return  # these read only what they need of the group (discover: its name and dim)
    assert result.exit_code == 2, result.output
    method, problem = GROUP_FAULTS[mode]
    line = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert len(line) == 1, result.stderr
    assert f"plugin 'b-group': symmetry().{method}() {problem}" in line[0]
    assert "fix:" in line[0]


def test_a_broken_group_in_the_api_names_the_plugin(group_files):
    from paramgeo.geometry import vertical_space

    load_plugin_file(group_files / "group.py")
    p = paramgeo.get("b-group", mode="nan")
    group = p.symmetry()
    theta = np.ones(4)
    with pytest.raises(PluginError, match=r"plugin 'b-group': symmetry\(\)\.act\(\) returned nan"):
        group.act(2.0, theta)
    with pytest.raises(PluginError, match=r"symmetry\(\)\.generators\(\)"):
        vertical_space(p, theta)
    # a huge theta may overflow without blame, as for forward
    assert np.isnan(group.act(2.0, np.full(4, 1e300))).all()


# ------------------------------------------- Ctrl-C: every long command prints what it finished

def test_an_interrupted_mirror_returns_the_finished_levels():
    p = paramgeo.get("hadamard", p=3)
    full = mirror(p, method="numeric")
    part = mirror(p, method="numeric", progress=_interrupt_at(2))
    assert part.interrupted and not full.interrupted
    assert part.algebra_levels == full.algebra_levels[:1] and not part.algebra_stabilised
    assert part.laws == ("(search skipped: interrupted)",) and not part.laws_complete
    assert "INTERRUPTED (Ctrl-C)" in str(part) and "interrupted (Ctrl-C) during" in str(part)


def test_mirror_cli_prints_the_algebra_then_exits_130(monkeypatch):
    import paramgeo.mirror.report as report

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "conservation_laws", interrupted)
    result = _cli("mirror", "hadamard", "-p", "p=3")
    assert result.exit_code == 130, result.output
    assert "generated Lie algebra: dimension" in result.stdout
    assert "(search interrupted)" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: interrupted during the mirror computation; the output above holds the "
        "finished ones")


def test_an_interrupt_before_anything_finished_is_one_line_and_130(monkeypatch):
    import paramgeo.mirror.report as report

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "commuting_test", interrupted)
    result = _cli("mirror", "hadamard", "-p", "p=3")
    assert result.exit_code == 130
    assert result.stdout == ""
    assert result.stderr.strip() == "Error: interrupted before any result was finished"


def test_an_interrupted_pacbayes_keeps_the_finished_priors(tmp_path):
    from paramgeo.pacbayes import DiagonalGaussian, pacbayes_report

    p = paramgeo.get("uvt", m=2, n=2, r=1)
    q = DiagonalGaussian(mean=np.random.default_rng(0).standard_normal(p.n), std=0.3)
    args = (p, q, [1.0, 2.0], 1000, 0.05, 0.1)
    kwargs = dict(method="montecarlo", samples=6, seed=1, inner_samples=16)
    full = pacbayes_report(*args, **kwargs)
    part = pacbayes_report(*args, progress=_interrupt_at(4), **kwargs)  # 3 of 6 posterior samples
    assert part.interrupted and not full.interrupted and "INTERRUPTED (Ctrl-C)" in part.detail
    assert [pk.prior for pk in part.priors] == ["neutral", "neutral"]
    assert len(part.certificates) == 2 and all(math.isfinite(c.catoni)
                                               for _, _, c in part.certificates)
    later = pacbayes_report(*args, progress=_interrupt_at(8), **kwargs)  # in scale 1's log Z
    assert [pk.prior for pk in later.priors] == ["neutral", "neutral"]
    last = pacbayes_report(*args, progress=_interrupt_at(14), **kwargs)  # in scale 2's log Z
    assert [(pk.prior, pk.scale) for pk in last.priors] == [
        ("neutral", 1.0), ("implicit-bias", 1.0), ("neutral", 2.0)]
    assert last.priors[:2] == full.priors[:2]  # the finished ones are the full run's


def test_pacbayes_cli_prints_the_finished_priors_then_exits_130(tmp_path, monkeypatch):
    import paramgeo.pacbayes.engine as engine

    real, calls = engine.orbit_log_integral, {"n": 0}

    def orbit_then_interrupt(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "orbit_log_integral", orbit_then_interrupt)
    post = tmp_path / "q.npz"
    np.savez(post, mean=np.ones(4), std=0.3, empirical_risk=0.1)
    result = _cli("pacbayes", "uvt", "-p", "m=2", "-p", "n=2", "-p", "r=1", "--posterior",
                  post, "--prior-scale", "1", "--sample-size", "1000", "--delta", "0.05", "--method",
                  "montecarlo", "--samples", "6")
    assert result.exit_code == 130, result.output
    assert "INTERRUPTED (Ctrl-C) after 3 of 12 orbit integrals" in result.stdout
    assert "McAllester" in result.stdout and "neutral" in result.stdout
    assert result.stderr.strip().splitlines()[-1].startswith(
        "Error: interrupted during the orbit integrals")


class _BrokenForAll(Parameterization):
    name = "a-broken-one"

    def make_spec(self):
        return ParamSpec(u=(2,))

    def make_predictor_shape(self):
        return (2,)

    def forward(self, theta):
        raise RuntimeError("broken on purpose")


def test_describe_all_reports_a_broken_plugin_and_goes_on(monkeypatch):
    from paramgeo.contract import registry
    from paramgeo.contract.registry import register, unregister

    keep = {"uut", "hadamard"}  # a short registry: the broken plugin and two good ones
    real = registry.available
    monkeypatch.setattr(registry, "available", lambda: [n for n in real() if n in keep]
                        + ["a-broken-one"])
    register(_BrokenForAll, replace=True)
    try:
        result = _cli("describe", "--all")
    finally:
        unregister("a-broken-one")
    assert result.exit_code == 2, result.output
    assert "uut" in result.stdout and "hadamard" in result.stdout  # the others are described
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert errors[0].startswith("Error: plugin 'a-broken-one': forward() raised RuntimeError")
    assert errors[-1] == ("Error: 1 of 3 plugins failed (a-broken-one; their errors are above); "
                          "the others are shown")
    assert "internal error" not in result.output


def test_a_grid_is_validated_once_per_axis_value(sweep_dir, monkeypatch):
    """A product grid resolves each plugin size once and converts each option value once, so
    a grid at the cell cap starts quickly; a bad value anywhere is still refused."""
    import paramgeo.cli._common as common
    from paramgeo.sweeps.spec import load_spec

    calls = {"resolve": 0}
    real = common.resolve

    def counting(*args, **kwargs):
        calls["resolve"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(common, "resolve", counting)
    seeds = ", ".join(map(str, range(200)))
    (sweep_dir / "g.toml").write_text(f'query = "rank"\nplugin = "uut"\n[grid]\n'
                                      f'sizes = {{ d = [2, 3, 4, 5, 6] }}\n'
                                      f'options = {{ seed = [{seeds}] }}\n')
    spec = load_spec("g.toml")
    assert len(spec.cells) == 1000 and calls["resolve"] == 5
    assert len({c.key for c in spec.cells}) == 1000
    assert {c.options["seed"] for c in spec.cells} == set(range(200))
    (sweep_dir / "bad.toml").write_text(f'query = "rank"\nplugin = "uut"\n[grid]\n'
                                        f'sizes = {{ d = [2, 3] }}\n'
                                        f'options = {{ seed = [{seeds}, "x"] }}\n')
    with pytest.raises(ParamgeoError, match=r"cell 200 .*options.seed"):
        load_spec("bad.toml")


@pytest.mark.parametrize("where", ["sweep", "describe"])
def test_a_400_digit_size_is_refused_in_one_line(sweep_dir, where):
    huge = "9" * 400
    if where == "sweep":
        (sweep_dir / "big.toml").write_text(f'query = "describe"\nplugin = "uut"\n'
                                            f'sizes = {{ d = {huge} }}\n')
        result = _cli("sweep", "big.toml", "-o", "b.csv", "--workers", "0")
    else:
        result = _cli("describe", "uut", "-p", f"d={huge}")
    assert result.exit_code == 2, result.output
    assert "n = ~1e+400 parameters, more than paramgeo handles" in result.stderr
    assert "internal error" not in result.output


def test_online_sgd_prints_the_finished_records_then_exits_130(monkeypatch):
    import paramgeo.flows.online as online

    real, calls = online.AttentionIndexed.labels, {"n": 0}

    def labels_then_interrupt(self, *args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(online.AttentionIndexed, "labels", labels_then_interrupt)
    result = _cli("online-sgd", "uut", "-p", "d=6", "-p", "r=2", "--horizon", "2",
                  "--threshold", "0.99")
    assert result.exit_code == 130, result.output
    assert "INTERRUPTED (Ctrl-C)" in result.stdout and "cosine" in result.stdout
    assert result.stderr.strip().splitlines()[-1].startswith("Error: interrupted after ")
