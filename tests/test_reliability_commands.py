"""Reliability of the newer commands' edges: each hostile argument is one `Error:` line and exit
2, refused before the work (a monkeypatched engine that must not run proves it); a plugin
raising SystemExit or KeyboardInterrupt at import is reported as the plugin's fault.

Covers: ``paramgeo.cli``, ``paramgeo.cli._llc``, ``paramgeo.contract.registry``,
``paramgeo.dynamics.trajectory``, ``paramgeo.flows.online``, ``paramgeo.flows.risk``,
``paramgeo.llc.estimate``, ``paramgeo.llc.steps``, ``paramgeo.losses.predictor``,
``paramgeo_plugins.hadamard``.
"""

import math

import numpy as np
import pytest
from click.testing import CliRunner

from paramgeo.cli import main
from paramgeo.errors import ArgumentError, ParamgeoError


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _refused(result, *phrases):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


@pytest.mark.parametrize("path, phrase", [
    ("/proc/x.png", "in folder '/proc'"),
    ("x.txt", "use a .png, .svg or .pdf name"),
    ("no/such/dir/x.png", "folder 'no/such/dir' does not exist"),
])
def test_llc_estimate_checks_its_plot_path_before_the_estimate(tmp_path, monkeypatch, path,
                                                               phrase):
    import paramgeo.cli._llc as llc_cli

    monkeypatch.setattr(llc_cli, "resolve", lambda *a, **k: pytest.fail("the estimate ran"))
    monkeypatch.chdir(tmp_path)
    np.savez("d.npz", X=np.eye(3), y=np.ones(3))
    _refused(_cli("llc", "estimate", "hadamard", "-p", "p=3", "--loss", "squared", "--data",
                  "d.npz", "--plot", path), f"cannot write a plot to '{path}'", phrase)


def test_an_llc_figure_with_a_bad_name_is_one_error_in_the_api():
    from paramgeo.llc.estimate import LLCEstimate
    from paramgeo.llc.steps import StepSweep

    for cls in (LLCEstimate, StepSweep):
        with pytest.raises(ParamgeoError, match="use a .png, .svg or .pdf name"):
            cls.plot(None, "figure.txt")  # the path is checked before the result is read


@pytest.mark.parametrize("args, phrase", [
    (("--spike", "nan"), "spike must be a finite number, got nan"),
    (("--spike", "inf"), "spike must be a finite number, got inf"),
    (("--spike", "1e300"), "spike must be <= 1e+08"),
    (("--noise", "nan"), "noise must be a finite number"),
    (("--noise", "inf"), "noise must be a finite number"),
    (("--d", "100000", "--sample-size", "1000"),
     "d N = 100000 x 1000 = 1e+08 entries, beyond 1e+07"),
])
def test_spectral_filters_bounds_its_arguments_before_the_work(monkeypatch, args, phrase):
    import paramgeo.flows.risk as risk

    monkeypatch.setattr(risk.np.linalg, "svd", lambda *a, **k: pytest.fail("the work ran"))
    _refused(_cli("spectral-filters", *args), phrase)


def test_the_spiked_model_refuses_non_finite_and_negative_strengths():
    from paramgeo.flows.risk import MAX_SPIKE, SpikedModel

    for kwargs in ({"spike": math.nan}, {"spike": -1.0}, {"noise": math.inf},
                   {"spike": 2 * MAX_SPIKE}, {"d": 1}, {"d": 2.5}):
        with pytest.raises(ArgumentError):
            SpikedModel(**{"d": 10, **kwargs})
    assert SpikedModel(d=10, spike=MAX_SPIKE).spike == MAX_SPIKE


@pytest.mark.parametrize("args, phrase", [
    (("--horizon", "1e300"), "the horizon 1e+300 is 1.2e+303 samples"),
    (("--lr-exponent", "-1e300"), "lr d^(-lr_exponent) = exp(2.996e+300)"),
    (("--lr-exponent", "1e300"), "is outside [1e-100, 1e100]"),
    (("--lr-exponent", "inf"), "lr_exponent must be a finite number, got inf"),
    (("--lr", "1e300"), "is outside [1e-100, 1e100]"),
    (("--teacher-rank", "1000"), "the teacher's rank r* must lie in 1..d = 1..20, got 1000"),
])
def test_online_sgd_bounds_its_horizon_and_step_before_the_run(monkeypatch, args, phrase):
    import paramgeo.flows.online as online

    monkeypatch.setattr(online.AttentionIndexed, "sample",
                        lambda *a, **k: pytest.fail("a sample was drawn"))
    _refused(_cli("online-sgd", "uut", "-p", "d=20", "-p", "r=2", *args), phrase)


@pytest.mark.parametrize("units, phrase", [
    ("U:" + "9" * 5000, "is 9999999999999999999999999999999999999999... (5000 characters)"),
    ("U:\u00b2", "each entry must look like BLOCK:AXIS"),
])
def test_structure_units_are_parsed_without_converting_huge_numbers(units, phrase):
    _refused(_cli("structure", "uut", "-p", "d=3", "-p", "r=2", "--units", units), phrase)


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 4))
    paths = {}
    for scale in (1.0, 1e20, 1e90):
        paths[scale] = tmp_path / f"d{scale:g}.npz"
        np.savez(paths[scale], X=scale * X, y=X @ np.ones(4))
    return paths


@pytest.mark.parametrize("command, args, phrase", [
    ("flow", ("--method", "flow", "--time-scale", "1e300"), "the time scale 1e+300 is beyond"),
    ("implicit-bias", ("--time-scale", "1e300"), "the time scale 1e+300 is beyond"),
    ("implicit-bias", ("--time-scale", "1e25"), "t_final / time_scale = 1e+09 / 1e+25"),
    ("implicit-bias", ("--atol", "1e-300"), "atol = 1e-300 is below 1e-30"),
    ("implicit-bias", ("--t-final", "1e-300"), "give a longer horizon or a shorter time scale"),
    ("flow", ("--method", "flow", "--init-scale", "1e300"), "theta0 has an entry of 2e+300"),
])
def test_flows_bound_time_scale_and_atol_before_the_run(monkeypatch, data, command, args,
                                                        phrase):
    import scipy.integrate

    monkeypatch.setattr(scipy.integrate, "solve_ivp", lambda *a, **k: pytest.fail("it ran"))
    common = ("--init-scale", "0.1") if command == "implicit-bias" else ("--loss", "squared")
    _refused(_cli(command, "hadamard", "-p", "p=4", "--data", data[1.0], *common, *args),
             phrase)


def test_a_flow_on_data_of_1e90_is_refused_at_the_start(monkeypatch, data):
    import scipy.integrate

    monkeypatch.setattr(scipy.integrate, "solve_ivp", lambda *a, **k: pytest.fail("it ran"))
    _refused(_cli("flow", "hadamard", "-p", "p=4", "--data", data[1e90], "--loss", "squared",
                  "--method", "flow"), "the field of the flow at theta0 has an entry of",
             "beyond 1e+100")


def test_a_flow_that_fails_before_its_first_record_ends_at_the_start(data):
    import paramgeo
    from paramgeo.losses import LinearMeasurements
    from paramgeo.dynamics.trajectory import gradient_flow

    p = paramgeo.get("hadamard", p=4)
    arrays = np.load(data[1e20])
    theta0 = p.init_at_scale(0.1)
    with pytest.warns(UserWarning, match="lsoda"):
        traj = gradient_flow(p, LinearMeasurements(arrays["X"], arrays["y"]), theta0, 1e9,
                             rtol=1e-10, atol=1e-15, n_records=40, log_times=True,
                             stop_loss=1e-26)
    assert not traj.success and list(traj.times) == [0.0]
    np.testing.assert_array_equal(traj.thetas[0], theta0)


@pytest.mark.parametrize("body, phrase", [
    ("import sys\nsys.exit(0)\n", "SystemExit: 0 (it calls sys.exit() or exit()"),
    ("raise SystemExit('bye')\n", "SystemExit: bye"),
    ("raise KeyboardInterrupt\n", "KeyboardInterrupt (interrupted while its module ran)"),
])
def test_a_plugin_exiting_or_interrupted_at_import_is_the_plugins_fault(tmp_path, body,
                                                                         phrase):
    path = tmp_path / "exits.py"
    path.write_text(body)
    _refused(_cli("--plugin", path, "list"), f"plugin file '{path}' failed to import", phrase)
    _refused(_cli("describe", path), "failed to import", phrase)


def test_the_risk_in_orthonormal_rows_is_the_risk_of_the_vector():
    from paramgeo.flows.risk import SpikedModel

    rng = np.random.default_rng(0)
    model = SpikedModel(d=30, spike=7.0, sigma2=1.5, signal=0.8)
    V = np.linalg.qr(rng.standard_normal((30, 6)))[0].T  # 6 x 30, orthonormal rows
    for c in (rng.standard_normal(6), np.zeros(6), 1e3 * rng.standard_normal(6)):
        assert model.risk_in_rows(V, c) == pytest.approx(model.risk(V.T @ c), rel=1e-12)


@pytest.mark.parametrize("args, phrase", [
    (("--snr", "nan"), "snr must be a finite number, got nan"),
    (("--snr", "1e100"), "snr must be <= 1e+50, got 1e+100"),
    (("--decay", "nan"), "decay must be a finite number, got nan"),
    (("--decay", "400"), "the polynomial spectrum with decay 400 leaves the float range"),
    (("--decay", "50", "--spectrum", "exponential"), "the exponential spectrum with decay 50"),
])
def test_early_stopping_bounds_the_mixture_before_the_work(monkeypatch, args, phrase):
    import paramgeo.flows.risk as risk

    monkeypatch.setattr(risk, "early_stopping", lambda *a, **k: pytest.fail("the work ran"))
    _refused(_cli("early-stopping", *args), phrase)


def test_an_llc_estimate_whose_chains_cannot_move_says_so(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    np.savez(tmp_path / "d.npz", X=X, y=X @ np.array([1.0, 0.0, 0.0]),
             theta_star=np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.0]))
    args = ("llc", "estimate", "hadamard", "-p", "p=3", "--loss", "squared", "--data",
            tmp_path / "d.npz", "--steps", "50", "--burn", "10", "--chains", "2",
            "--no-bias-check")
    frozen = _cli(*args, "--lr", "1e-300")
    assert frozen.exit_code == 0 and "LLC estimate 0 +- 0" in frozen.stdout
    assert "the chains did not move" in frozen.stdout  # not a silent 0
    moving = _cli(*args)
    assert moving.exit_code == 0 and "did not move" not in moving.output


def test_a_plugin_method_calling_sys_exit_is_the_plugins_fault(tmp_path):
    path = tmp_path / "quitter.py"
    path.write_text(
        "import sys\n"
        "from paramgeo import Parameterization, ParamSpec, Size\n\n\n"
        "class Quitter(Parameterization):\n"
        "    name = 'quitter-test'\n"
        "    size_params = {'p': Size('int', default=2)}\n\n"
        "    def make_spec(self):\n"
        "        return ParamSpec(u=(self.p,))\n\n"
        "    def make_predictor_shape(self):\n"
        "        return (self.p,)\n\n"
        "    def forward(self, theta):\n"
        "        sys.exit(0)\n")
    try:
        _refused(_cli("--plugin", path, "rank", "quitter-test"),
                 "plugin 'quitter-test': forward() raised SystemExit: 0")
    finally:
        from paramgeo.contract.registry import unregister

        unregister("quitter-test")
