"""Registering a parameterization: from Python (forward only), and from an expression spec with
`paramgeo define` (safe parsing, storage in PARAMGEO_HOME, registry, describe).

Covers: ``paramgeo.cli``, ``paramgeo.contract.registry``, ``paramgeo.expressions.parser``,
``paramgeo.reports.contract_check``, ``paramgeo_plugins.uut``.
"""

import json

import autograd.numpy as anp
import numpy as np
import pytest
import sympy
from click.testing import CliRunner

import paramgeo
from paramgeo.contract import registry
from paramgeo.cli import main
from paramgeo.reports.contract_check import finite_difference_jacobian
from paramgeo.expressions.parser import ExpressionError, block_symbols, parse_expression

UV = '''
name = "uv3"
summary = "beta = u * v for u, v in R^3"
predictor = "u * v"

[parameters]
u = [3]
v = [3]
'''

HYPERBOLIC = '''
name = "hyperbolic3"
predictor = "u**2 - v**2"

[parameters]
u = [3]
v = [3]
'''


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A temporary PARAMGEO_HOME; names defined in the test are unregistered afterwards."""
    monkeypatch.setenv("PARAMGEO_HOME", str(tmp_path / "home"))
    before = set(registry._registered)
    yield tmp_path / "home"
    for name in set(registry._registered) - before:
        registry.unregister(name)


def run(*args):
    return CliRunner().invoke(main, list(args))


def write(tmp_path, text, name="spec.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --------------------------------------------------------------------------- safe expressions
def scope():
    return {"u": block_symbols("u", (3,)), "v": block_symbols("v", (3,)),
            "W": block_symbols("W", (2, 3)), "p": 3}


def test_expressions_become_sympy_arrays():
    u0, v0 = sympy.Symbol("u_0", real=True), sympy.Symbol("v_0", real=True)
    out = parse_expression("u * v", scope())
    assert out.shape == (3,) and out[0] == u0 * v0
    assert parse_expression("0.1 * u[0]", scope())[()] == sympy.Rational(1, 10) * u0
    assert parse_expression("W @ u", scope()).shape == (2,)
    assert parse_expression("W.T @ W", scope()).shape == (3, 3)
    assert parse_expression("W[:, 0]", scope()).shape == (2,)
    assert parse_expression("sum(u * v)", scope())[()] == sum(parse_expression("u * v", scope()))
    assert parse_expression("tanh(-u[0]) + p", scope())[()] == sympy.tanh(-u0) + 3
    assert parse_expression("sigmoid(u[0])", scope())[()] == 1 / (1 + sympy.exp(-u0))


@pytest.mark.parametrize("text,token,col", [
    ("__import__('os')", "'__import__' is not an allowed function", 1),
    ("u * w", "'w' is not a declared name (declared: W, p, u, v", 5),
    ("max(u)", "'max' is not an allowed function", 1),
    ("u.__class__", "'u.__class__' is not allowed: attribute access", 1),
    ("u + 'abc'", "is not allowed: constant (only numbers)", 5),
    ("u ** 1000", "'1000' is too large an exponent", 6),
    ("[x for x in u]", "is not allowed: list comprehension", 1),
    ("u[0] if u[1] else v[0]", "is not allowed: conditional expression", 1),
    ("u < v", "is not allowed: comparison", 1),
    ("exp(u, v)", "exp() takes exactly one argument", 1),
    ("exp", "'exp' is a function", 1),
    ("u[7]", "'u[7]' is out of range", 1),
    ("u[v]", "'v' is not allowed as an index", 3),
    ("W @ v[0:2]", "shapes do not fit", 1),
    ("(u * v", "syntax error", 1),
])
def test_rejected_expressions_name_token_and_position(text, token, col):
    with pytest.raises(ExpressionError) as err:
        parse_expression(text, scope(), where="predictor")
    msg = str(err.value)
    assert token in msg and f"column {col}" in msg and "\n" not in msg, msg


def test_no_eval_exec_or_sympify_in_the_parser_modules():
    from pathlib import Path

    for module in ("expressions/parser.py", "expressions/userdefs.py"):
        source = (Path(paramgeo.__file__).parent / module).read_text()
        for word in ("eval(", "exec(", "sympify("):
            assert word not in source, (module, word)


# --------------------------------------------------------------------------- python route
class Softplus2(paramgeo.Parameterization):
    """phi(a, b) = log(1 + e^a) * b, forward only."""

    name = "test-softplus-product"
    size_params = {"p": paramgeo.Size("int", default=3, minimum=1)}

    def make_spec(self):
        return paramgeo.ParamSpec(a=(self.p,), b=(self.p,))

    def make_predictor_shape(self):
        return (self.p,)

    def forward(self, theta):
        a, b = theta[: self.p], theta[self.p:]
        return anp.log1p(anp.exp(a)) * b


def test_forward_only_class_gets_everything(home, rng):
    paramgeo.register(Softplus2)
    param = paramgeo.get("test-softplus-product", p=3)
    theta = rng.standard_normal(6)
    J = param.jacobian(theta)
    np.testing.assert_allclose(J, finite_difference_jacobian(param, theta), atol=1e-7)
    a, b = theta[:3], theta[3:]
    np.testing.assert_allclose(J, np.hstack([np.diag(b / (1 + np.exp(-a))),
                                             np.diag(np.log1p(np.exp(a)))]))
    assert paramgeo.generic_rank(param) == 3
    assert paramgeo.check(param).passed
    found = paramgeo.symmetry.discover(param, discrete=False)
    assert found.dim == 0  # softplus(a) * b has no linear symmetry (only non-linear ones)


# --------------------------------------------------------------------------- spec route
def test_define_list_describe_uv(home, tmp_path):
    res = run("define", write(tmp_path, UV))
    assert res.exit_code == 0, res.output
    assert "defined uv3: n = 6 parameters -> predictor 3" in res.output
    assert (home / "definitions" / "uv3.toml").read_text() == UV
    assert "uv3" in run("list").output
    out = json.loads(run("describe", "uv3", "--json").output)
    assert out["generic_rank"] == 3 and out["n"] == 6
    assert out["symmetry"] is None
    assert out["discovered_symmetry"]["dim"] == 3
    assert out["discovered_symmetry"]["name"] == "torus of rescalings (R\\{0})^3"
    assert out["quotient_dim"] == 3 and out["rank_is_quotient_dim"]


def test_define_hyperbolic_discovers_undeclared_symmetry(home, tmp_path):
    assert run("define", write(tmp_path, HYPERBOLIC)).exit_code == 0
    out = json.loads(run("describe", "hyperbolic3", "--json").output)
    assert out["generic_rank"] == 3 and out["symmetry"] is None
    assert out["discovered_symmetry"]["dim"] == 3
    assert "hyperbolic rotations" in out["discovered_symmetry"]["name"]
    check = run("check", "hyperbolic3")
    assert check.exit_code == 0 and "discovered so(1,1)^3" in check.output


@pytest.mark.parametrize("expr,token", [
    ("__import__('os')", "'__import__'"),
    ("u * w", "'w'"),
    ("max(u, v)", "'max'"),
    ("open('x')", "'open'"),
])
def test_bad_spec_is_one_line_exit_2_and_nothing_saved(home, tmp_path, expr, token):
    spec = UV.replace('predictor = "u * v"', f'predictor = "{expr}"')
    res = run("define", write(tmp_path, spec))
    assert res.exit_code == 2
    assert token in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert "Traceback" not in res.output
    assert not (home / "definitions" / "uv3.toml").exists()
    assert "uv3" not in paramgeo.available()


@pytest.mark.parametrize("text,fragment", [
    ("name = 'x'\n[parameters]\nu = [3]\npredictor = 'u'\n", "must come before the first"),
    ("name = 'Bad Name'\npredictor = 'u'\n[parameters]\nu = [3]\n", "`name` must be lower"),
    ("name = 'x'\npredictor = 'u'\n", "a [parameters] table is needed"),
    ("name = 'x'\npredictor = 'u'\nfoo = 1\n[parameters]\nu = [3]\n", "unknown key(s) foo"),
    ("name = 'x'\npredictor = 'u'\n[parameters]\nu = [0]\n", "positive integers"),
    ("name = 'x'\npredictor = 'log(u - u)'\n[parameters]\nu = [3]\n", "undefined"),
    ("name = 'x'\npredictor = 'u / 0'\n[parameters]\nu = [3]\n", "undefined"),
    ("name = 'x'\npredictor = 'log(-1 - u*u)'\n[parameters]\nu = [3]\n", "not finite"),
    ("name = 'uut'\npredictor = 'u'\n[parameters]\nu = [3]\n", "is taken"),
    ("name = 'x'\npredictor = 'u\n", "not valid TOML"),
])
def test_malformed_specs(home, tmp_path, text, fragment):
    res = run("define", write(tmp_path, text))
    assert res.exit_code == 2 and fragment in res.output, res.output
    assert not (home / "definitions").exists() or not list((home / "definitions").iterdir())


def test_redefine_needs_replace_and_undefine_removes(home, tmp_path):
    path = write(tmp_path, UV)
    assert run("define", path).exit_code == 0
    res = run("define", path)
    assert res.exit_code == 2 and "already defined" in res.output
    changed = UV.replace('"u * v"', '"2 * u * v"')
    assert run("define", write(tmp_path, changed, "b.toml"), "--replace").exit_code == 0
    theta = np.arange(1.0, 7.0)
    np.testing.assert_allclose(paramgeo.get("uv3").forward(theta), 2 * theta[:3] * theta[3:])
    res = run("undefine", "uv3", "--json")
    assert res.exit_code == 0 and json.loads(res.output)["name"] == "uv3"
    assert "uv3" not in paramgeo.available()
    assert not (home / "definitions" / "uv3.toml").exists()
    assert run("undefine", "uv3").exit_code == 2
    res = run("undefine", "uut")
    assert res.exit_code == 2 and "not a user definition" in res.output


def test_sizes_matrices_and_list_predictor(home, tmp_path, rng):
    spec = '''
name = "tied-scores"
summary = "S = W W^T, W in R^{d x r}"
predictor = "W @ W.T"
[sizes]
d = 3
r = 2
[parameters]
W = ["d", "r"]
'''
    assert run("define", write(tmp_path, spec)).exit_code == 0
    uut = paramgeo.get("uut", d=4, r=2)
    mine = paramgeo.get("tied-scores", d=4, r=2)
    theta = uut.random_point(rng)
    np.testing.assert_allclose(mine.forward(theta), uut.forward(theta))
    np.testing.assert_allclose(mine.jacobian(theta), uut.jacobian(theta), atol=1e-12)
    assert paramgeo.generic_rank(mine) == 7
    assert paramgeo.check(mine).passed
    listed = '''
name = "two-outputs"
predictor = ["a[0] * b[0]", "exp(a[1]) - b[1]"]
[parameters]
a = [2]
b = [2]
'''
    assert run("define", write(tmp_path, listed, "l.toml")).exit_code == 0
    param = paramgeo.get("two-outputs")
    theta = np.array([0.5, -1.0, 2.0, 3.0])
    np.testing.assert_allclose(param.forward(theta), [1.0, np.exp(-1.0) - 3.0])
    # the lambdified exact Jacobian against autograd and finite differences
    np.testing.assert_allclose(param.jacobian(theta),
                               finite_difference_jacobian(param, theta), atol=1e-7)
    report = paramgeo.check(param)
    assert report.passed and "jacobian-autograd" in {i.property for i in report.items}


def test_python_api_define_undefine(home):
    cls = paramgeo.define(text=UV)
    assert cls.name == "uv3" and paramgeo.get("uv3").n == 6
    assert paramgeo.undefine("uv3").name == "uv3.toml"


def test_symmetry_discovered_feeds_the_engines(home, tmp_path):
    spec = HYPERBOLIC.replace('name = "hyperbolic3"', 'name = "hyp-sym"\nsymmetry = "discovered"')
    assert run("define", write(tmp_path, spec)).exit_code == 0
    param = paramgeo.get("hyp-sym")
    group = param.symmetry()
    assert group.dim == 3 and "hyperbolic" in group.name
    theta = np.array([1.0, 0.0, 2.0, 1.0, 0.0, -1.0])  # u_1 = v_1 = 0
    assert paramgeo.geometry.orbit_dim(param, theta) == 2
    assert paramgeo.geometry.orbit_dim(param, theta + 0.5) == 3
    report = paramgeo.check(param)
    assert report.passed and {"invariance", "generators-in-kernel"} <= {
        i.property for i in report.items}
    bad = UV.replace('name = "uv3"', 'name = "x"\nsymmetry = "all"')
    res = run("define", write(tmp_path, bad, "bad.toml"))
    assert res.exit_code == 2 and "`symmetry` must be" in res.output
