"""Exact symbolic analysis: ranks over Q and Q(theta), exact kernels, lambdified fast paths,
and the cache; checked against the numeric route and closed forms.

Covers: ``paramgeo.cli``, ``paramgeo.contract.registry``, ``paramgeo.expressions.symbolic``,
``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uut``.
"""

import numpy as np
import pytest
import sympy

import paramgeo
from paramgeo.expressions import symbolic as S

SYMBOLIC = [name for name in paramgeo.available()
            if paramgeo.get_class(name).capabilities and "symbolic" in
            paramgeo.get_class(name).capabilities]
EXTRA = [("uut", {"d": 3, "r": 3}), ("uut", {"d": 5, "r": 1}), ("hadamard", {"p": 2}),
         ("uvt", {"m": 3, "n": 2, "r": 2})]


@pytest.mark.parametrize("name,sizes", [(n, {}) for n in SYMBOLIC] + EXTRA)
def test_symbolic_and_numeric_generic_ranks_agree(name, sizes):
    param = paramgeo.get(name, **sizes)
    result = S.exact_analysis(param)
    numeric = paramgeo.generic_rank(param)
    assert result.exact  # every built-in is polynomial, so the ranks are exact over Q
    assert result.generic_rank == numeric, (result, numeric)
    assert max(result.rational_ranks) == numeric
    if result.symbolic_rank is not None:
        assert result.symbolic_rank == numeric
    assert result.kernel_dim == param.n - numeric


def test_closed_form_ranks():
    # uut: d r - r(r-1)/2 for r <= d, d(d+1)/2 for r > d (Burer-Monteiro)
    for d, r in [(4, 2), (3, 3), (2, 3)]:
        expected = d * r - r * (r - 1) // 2 if r <= d else d * (d + 1) // 2
        assert S.exact_analysis(paramgeo.get("uut", d=d, r=r)).symbolic_rank == expected


def test_exact_kernel_at_a_rational_point_is_exact(rng):
    param = paramgeo.get("uut", d=4, r=2)
    point = S.rational_point(param, rng)
    kernel = S.exact_kernel(param, point)
    assert len(kernel) == 1
    J = S.exact_jacobian(param).xreplace(point)
    assert (J * kernel[0]).is_zero_matrix  # exactly zero, no tolerance
    # it is the so(2) generator U -> U [[0, 1], [-1, 0]] up to a rational factor
    U = sympy.Matrix(4, 2, [point[s] for s in S.symbolic_form(param)[0]])
    gen = list(U * sympy.Matrix([[0, 1], [-1, 0]]))
    ratio = {sympy.nsimplify(a / b) for a, b in zip(kernel[0], gen) if b != 0}
    assert len(ratio) == 1


def test_symbolic_kernel_is_the_vertical_space():
    kernel = S.exact_kernel(paramgeo.get("hadamard", p=3))
    u = sympy.symbols("u_0:3", real=True)
    v = sympy.symbols("v_0:3", real=True)
    expected = [(-u[i], v[i]) for i in range(3)]
    got = {tuple(k[j] for j in range(6) if k[j] != 0) for k in kernel}
    assert got == set(expected) or got == {(-a, -b) for a, b in expected}


def test_lambdified_fast_path_matches_the_plugin(rng):
    for name, sizes in [("uut", {"d": 4, "r": 2}), ("uvt", {}), ("monomial", {})]:
        param = paramgeo.get(name, **sizes)
        theta = param.random_point(rng)
        np.testing.assert_allclose(S.lambdify_parameterization(param)(theta),
                                   param.forward_flat(theta), atol=1e-12)
        np.testing.assert_allclose(S.lambdify_jacobian(param)(theta), param.jacobian(theta),
                                   atol=1e-11)


def test_cache_computes_once_per_class_and_sizes():
    class Counting(paramgeo.get_class("hadamard")):
        calls = 0

        def symbolic(self):
            type(self).calls += 1
            return super().symbolic()

    first = S.exact_analysis(Counting(p=3))
    second = S.exact_analysis(Counting(p=3))
    assert first is second and Counting.calls == 1
    assert S.exact_jacobian(Counting(p=3)) is S.exact_jacobian(Counting(p=3))
    S.exact_analysis(Counting(p=4))
    assert Counting.calls == 2
    S.clear_cache()
    S.exact_analysis(Counting(p=3))
    assert Counting.calls == 3


def test_transcendental_map_uses_high_precision(tmp_path, monkeypatch):
    monkeypatch.setenv("PARAMGEO_HOME", str(tmp_path))
    from paramgeo.contract import registry

    try:
        paramgeo.define(text='name = "soft"\npredictor = "exp(a) * b"\n'
                             '[parameters]\na = [2]\nb = [2]\n')
        param = paramgeo.get("soft")
        result = S.exact_analysis(param)
        numeric = paramgeo.generic_rank(param)
    finally:
        registry.unregister("soft")
    # exp(a) is not rational: 60-digit evaluation, and no rank over a ring in exp(a_i)
    assert not result.exact and result.symbolic_rank is None
    assert result.generic_rank == numeric == 2


def test_exact_kernel_refusals_name_the_fix(tmp_path, monkeypatch):
    """Not a missing capability: a non-rational phi or a J above the size limit raise
    ExactComputationError (a ParamgeoError) whose one line names the alternative."""
    monkeypatch.setenv("PARAMGEO_HOME", str(tmp_path))
    from paramgeo.contract import registry

    try:
        paramgeo.define(text='name = "soft-kernel"\npredictor = "exp(a) * b"\n'
                             '[parameters]\na = [2]\nb = [2]\n')
        soft = paramgeo.get("soft-kernel")
        with pytest.raises(S.ExactComputationError, match="use paramgeo.kernel") as err:
            S.exact_kernel(soft)
        assert isinstance(err.value, paramgeo.ParamgeoError) and "()" not in str(err.value)
        point = S.rational_point(soft, np.random.default_rng(0))
        with pytest.raises(S.ExactComputationError, match="not rational in theta"):
            S.exact_kernel(soft, point)
    finally:
        registry.unregister("soft-kernel")
    with pytest.raises(S.ExactComputationError, match="pass max_entries=18"):
        S.exact_kernel(paramgeo.get("hadamard", p=3), max_entries=10)


def test_not_provided_is_a_clear_error():
    class NoSym(paramgeo.get_class("hadamard")):
        capabilities = paramgeo.get_class("hadamard").capabilities - {"symbolic"}
        symbolic = paramgeo.Parameterization.symbolic

    with pytest.raises(paramgeo.NotProvidedError, match="symbolic"):
        S.exact_analysis(NoSym(p=2))


def test_exact_command(tmp_path):
    from click.testing import CliRunner

    from paramgeo.cli import main

    res = CliRunner().invoke(main, ["exact", "uut", "-p", "d=4", "-p", "r=2", "--json"])
    assert res.exit_code == 0, res.output
    import json

    out = json.loads(res.output)
    assert out["generic_rank"] == 7 and out["symbolic_rank"] == 7 and out["exact"]
