"""Structure matrices A(x) of four layers against finite differences of forward and against
their closed forms; the trace-form checks fail where they should; mode dynamics and the
power law against an ODE solver and the predicted exponent.

Covers: ``paramgeo.cli``, ``paramgeo.contract.registry``, ``paramgeo.flows.structure``,
``paramgeo.sweeps.queries``, ``paramgeo_plugins.qk_attention``, ``paramgeo_plugins.relu_net``,
``paramgeo_plugins.uut``.
"""

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.integrate import solve_ivp

import paramgeo
from paramgeo.cli import main
from paramgeo.errors import ParamgeoError, ShapeError
from paramgeo.contract.registry import load_plugin_file, unregister
from paramgeo.flows.structure import (
    mode_dynamics,
    power_law_fit,
    structure_matrix,
    structure_matrix_fd,
)

LAYERS = Path(__file__).resolve().parents[1] / "examples" / "structure_layers.py"


@pytest.fixture(scope="module", autouse=True)
def layers():
    names = load_plugin_file(LAYERS)
    yield names
    for name in names:
        unregister(name)


def _fd_error(param, units):
    res = structure_matrix(param, units, check=False)
    A_fd = structure_matrix_fd(param, units).reshape(res.A.shape)
    return res, float(np.max(np.abs(A_fd - res.A)))


FOUR = [
    ("perceptron", dict(d=3, width=2, n_inputs=3), {"w": 0, "b": 0, "a": 0}),
    ("qk-attention", dict(output="attention", tied=True, heads=1, d=3, r=2, tokens=3), {"W": 2}),
    ("moe", dict(d=3, experts=3, n_inputs=3), {"w": 0, "g": 0, "a": 0}),
    ("conv", dict(length=5, filter=3, channels=2, n_inputs=2), {"u": 0, "a": 0}),
]


@pytest.mark.parametrize("name,sizes,units", FOUR, ids=[f[0] for f in FOUR])
def test_four_layers_agree_with_finite_differences(name, sizes, units):
    res, err = _fd_error(paramgeo.get(name, **sizes), units)
    assert res.trace_form, str(res)
    assert np.max(np.abs(res.A)) > 1e-3  # a form that is there, not zeros
    assert err < 1e-8, err


def test_perceptron_closed_form():
    # f = sum_j a_j tanh(w_j . x + b_j): A(x) = (1/2) [[0, 0, x], [0, 0, 1], [x^T, 1, 0]]
    param = paramgeo.get("perceptron", d=3, width=2, n_inputs=4)
    res = structure_matrix(param, {"w": 0, "b": 0, "a": 0}, check=False)
    for x, A in zip(param.X, res.A):
        v = np.concatenate([x, [1.0]])
        want = np.zeros((5, 5))
        want[:4, 4] = want[4, :4] = v / 2
        np.testing.assert_allclose(A, want, atol=1e-14)
    assert res.labels == ("w[0,0]", "w[0,1]", "w[0,2]", "b[0]", "a[0]")


def test_moe_closed_form_gate_enters_later():
    # A(x) = (1 / 2E) [[0, 0, x], [0, 0, 0], [x^T, 0, 0]] on (w_e, g_e, a_e)
    E, d = 3, 2
    param = paramgeo.get("moe", d=d, experts=E, n_inputs=3)
    res = structure_matrix(param, {"w": 0, "g": 0, "a": 0}, check=False)
    for x, A in zip(param.X, res.A):
        want = np.zeros((2 * d + 1, 2 * d + 1))
        want[:d, -1] = want[-1, :d] = x / (2 * E)
        np.testing.assert_allclose(A, want, atol=1e-14)


def test_attention_closed_form():
    # softmax(L)_ab at L = 0 is 1/T; the quadratic term is (1/T)(L_ab - mean_c L_ac) with
    # L_ab = x_a W W^T x_b / sqrt(d): A_ab = (1/T sqrt d)(sym(x_a x_b^T) - mean_c sym(x_a x_c^T))
    T, d = 3, 3
    param = paramgeo.get("qk-attention", output="attention", tied=True, heads=1, d=d, r=2,
                         tokens=T)
    res = structure_matrix(param, {"W": 2}, check=False)
    X = param.X

    def sym(u, v):
        return (np.outer(u, v) + np.outer(v, u)) / 2

    for a in range(T):
        mean = sum(sym(X[a], X[c]) for c in range(T)) / T
        for b in range(T):
            want = (sym(X[a], X[b]) - mean) / (T * np.sqrt(d))
            np.testing.assert_allclose(res.A[0, a, b], want, atol=1e-13)
    np.testing.assert_allclose(res.offset, 1.0 / T)


def test_conv_quadratic_sum_is_circulant_in_a_shared_fourier_basis():
    L = 6
    param = paramgeo.get("conv", length=L, filter=L, channels=2, n_inputs=3, readout="sum",
                         activation="quadratic")
    res = structure_matrix(param, {"u": 0})
    assert res.trace_form and res.fd_error < 1e-8
    for x, A in zip(param.X, res.A):
        P = np.array([[x[(t + s) % L] for s in range(L)] for t in range(L)])
        np.testing.assert_allclose(A, P.T @ P / 2, atol=1e-12)
        # diagonal in the Fourier basis, eigenvalues |FFT(x)|^2 / 2
        F = np.fft.fft(np.eye(L)) / np.sqrt(L)
        D = F.conj().T @ A @ F
        np.testing.assert_allclose(D, np.diag(np.diag(D)), atol=1e-11)
        np.testing.assert_allclose(np.sort(np.diag(D).real), np.sort(np.abs(np.fft.fft(x)) ** 2 / 2),
                                   atol=1e-11)


def test_lower_orders_that_do_not_vanish_are_reported():
    # sigmoid(0) = 1/2: df/da = 1/2 at zero, so the quadratic form does not lead
    res = structure_matrix(paramgeo.get("perceptron", activation="sigmoid"),
                           {"w": 0, "b": 0, "a": 0}, check=False)
    assert not res.trace_form and res.gradient == pytest.approx(0.5)
    # the quadratic activation makes every unit's form cubic: A = 0, and the form is trivial
    res = structure_matrix(paramgeo.get("perceptron", activation="quadratic"),
                           {"w": 0, "b": 0, "a": 0}, check=False)
    assert np.max(np.abs(res.A)) < 1e-14


def test_units_that_interact_break_the_trace_form():
    # uut with units = rows of U: M = U U^T couples rows (M_ij = u_i . u_j), cross-unit terms
    res = structure_matrix(paramgeo.get("uut", d=3, r=2), {"U": 0}, check=False)
    assert res.cross_unit > 0.1 and not res.trace_form
    # columns are units: M = sum_k u_k u_k^T, A(entry ij) = sym(e_i e_j^T) / 2
    res = structure_matrix(paramgeo.get("uut", d=3, r=2), {"U": 1})
    assert res.trace_form and res.fd_error < 1e-8
    E = np.zeros((3, 3))
    E[0, 1] = E[1, 0] = 0.5
    np.testing.assert_allclose(res.A[0, 1], E, atol=1e-14)


def test_bad_units_are_named():
    param = paramgeo.get("perceptron")
    with pytest.raises(ShapeError, match="no block"):
        structure_matrix(param, {"V": 0})
    with pytest.raises(ShapeError, match="units along"):
        structure_matrix(paramgeo.get("perceptron", d=3, width=2), {"w": 1, "a": 0})
    with pytest.raises(ShapeError, match="axis"):
        structure_matrix(param, {"w": 2})


def test_kinks_are_refused():
    # relu-net declares kinks: at zero weights every neuron sits on its kink
    with pytest.raises(ParamgeoError, match="kink"):
        structure_matrix(paramgeo.get("relu-net"), {"W": 0, "b": 0, "a": 0}, check=False)


def test_cli_structure_and_its_errors():
    runner = CliRunner()
    out = runner.invoke(main, ["--plugin", str(LAYERS), "structure", "moe", "--units",
                               "w:0,g:0,a:0", "--json"])
    assert out.exit_code == 0, out.output
    assert '"trace_form": true' in out.output
    out = runner.invoke(main, ["structure", "moe", "--units", "w0"])
    assert out.exit_code == 2 and "Error: units 'w0'" in out.output


# ---------------------------------------------------------------- modes and power laws
def test_mode_dynamics_matches_the_ode_and_the_predicted_exponent():
    K, beta = 1000, 1.5
    k = np.arange(1, K + 1)
    targets, c, m0 = k ** -beta, np.ones(K), 1e-100
    times = np.geomspace(1.0, 1e6, 400)
    res = mode_dynamics(targets, c, m0, times)
    # an independent route: the logistic ODE in log m (stiff-free) by solve_ivp, a few modes
    few = [0, 10, 100]
    for k in (0, 10, 100):  # each mode on its own time scale 1 / lambda_k
        lam = 4 * c[k] * targets[k]
        upto = times <= 3 * res.switch_on[k]
        sol = solve_ivp(lambda t, z: lam * (1 - np.exp(z) / targets[k]), (0, times[upto][-1]),
                        [np.log(m0)], t_eval=times[upto], rtol=1e-10, atol=1e-10,
                        max_step=0.5 / lam)
        np.testing.assert_allclose(np.exp(sol.y[0]), res.modes[upto, k], rtol=1e-6)
    # lambda_k ~ k^-1.5, c m*^2 ~ k^-3: exponent (3 - 1) / 1.5 = 4/3
    assert res.fit.predicted == pytest.approx(4 / 3)
    assert abs(res.fit.exponent - res.fit.predicted) < 0.02
    assert res.fit.error < 0.01
    # a larger init (1e-10) leaves log(m*_k / m0) varying with k: the exponent drifts up
    near = mode_dynamics(targets, c, 1e-10, times).fit
    assert near.exponent - near.predicted > 0.05


def test_power_law_fit_recovers_a_known_slope():
    t = np.geomspace(1, 100, 50)
    fit = power_law_fit(t, 3 * t ** -0.7 * (1 + 0.01 * np.sin(t)), 1, 100)
    assert fit.exponent == pytest.approx(0.7, abs=0.01) and fit.error < 0.01
    with pytest.raises(ShapeError, match="widen the window"):
        power_law_fit(t, t, 200, 300)


def test_structure_sweep_cells(tmp_path):
    from paramgeo.sweeps.queries import get_query

    query = get_query("structure")
    res = query.run(paramgeo.get("conv", length=4, filter=2), units="u:0,a:0", check=True)
    assert res.trace_form and res.fd_error < 1e-8
    with pytest.raises(ValueError, match="W:0,a:0"):
        query.options["units"].convert(3)
