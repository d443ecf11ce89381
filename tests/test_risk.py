"""Risk of linear models: exact 0-1 risk vs Monte Carlo, early-stopped logistic GD, fitted rates,
spectral filters vs the iterations they summarise, the MP edge and the implicit penalty.

Covers: ``paramgeo.cli``, ``paramgeo.contract.registry``, ``paramgeo.flows.risk``,
``paramgeo.sweeps.queries``, ``paramgeo_plugins.hadamard``, ``paramgeo_plugins.matrix``.
"""

import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.cli import main
from paramgeo.errors import ShapeError
from paramgeo.flows.risk import (
    GaussianMixture,
    SpikedModel,
    early_stopping,
    excess_risk_rates,
    filter_estimator,
    gd_filter,
    logistic_gd,
    mp_edges,
    ridge_filter,
    shifted_gd,
    shifted_gd_filter,
    spectrum,
    spiked_filter_risks,
)


@pytest.mark.parametrize("kind", ["polynomial", "exponential"])
def test_exact_zero_one_risk_agrees_with_monte_carlo(kind):
    model = GaussianMixture.from_spectrum(50, kind, decay=1.0 if kind == "polynomial" else 0.1,
                                          snr=1.5, flip=0.15)
    rng = np.random.default_rng(1)
    for w in (model.mean / model.cov, rng.standard_normal(50), model.mean + rng.standard_normal(50)):
        p, se = model.monte_carlo_risk(w, 100_000, np.random.default_rng(2))
        assert abs(p - model.risk(w)) < 3 * se, (p, model.risk(w), se)


def test_bayes_risk_closed_form_and_spectra():
    model = GaussianMixture.from_spectrum(10, "polynomial", 2.0, snr=2.0, flip=0.1)
    # Phi(-2) = erfc(sqrt 2) / 2
    assert model.bayes_risk == pytest.approx(0.1 + 0.8 * 0.5 * math.erfc(math.sqrt(2.0)),
                                             rel=1e-12)
    # the Bayes direction is the minimiser: no random direction does better
    rng = np.random.default_rng(0)
    assert np.all(model.excess_risk(rng.standard_normal((200, 10))) >= -1e-15)
    np.testing.assert_allclose(spectrum(3, "polynomial", 2.0), [1, 1 / 4, 1 / 9])
    np.testing.assert_allclose(spectrum(3, "exponential", 1.0), np.exp([0, -1, -2]))
    with pytest.raises(ShapeError, match="choose one of"):
        spectrum(3, "cubic")
    with pytest.raises(ShapeError, match="flip"):
        GaussianMixture.from_spectrum(3, flip=0.7)


def test_early_stopping_beats_the_interpolator():
    model = GaussianMixture.from_spectrum(200, "polynomial", 1.5)
    res = early_stopping(model, 50, steps=1000, seed=0)
    assert res.max_margin_excess is not None  # d > N: separable
    assert res.oracle_excess < 0.5 * res.max_margin_excess
    assert 0 < res.oracle_step < 2000
    assert np.min(res.excess) == res.oracle_excess and np.all(res.excess >= -1e-12)
    assert res.oracle_excess < 0.5 * res.final_excess


class _Linear(paramgeo.Parameterization):
    name = "linear-test"
    size_params = {"d": paramgeo.Size("int", default=3)}

    def make_spec(self):
        return paramgeo.ParamSpec(w=(self.d,))

    def make_predictor_shape(self):
        return (self.d,)

    def forward(self, theta):
        return 1.0 * theta


def test_logistic_gd_through_a_parameterization():
    model = GaussianMixture.from_spectrum(6, snr=2.0, flip=0.1)
    X, y = model.sample(20, np.random.default_rng(0))
    steps, W = logistic_gd(X, y, 200, lr=0.5, records=10)
    # through phi(w) = w: the same iterates
    steps2, W2 = logistic_gd(X, y, 200, lr=0.5, records=10, param=_Linear(d=6),
                             theta0=np.zeros(6))
    np.testing.assert_array_equal(steps, steps2)
    np.testing.assert_allclose(W2, W, atol=1e-12)
    # through the diagonal network w = u * v (hadamard): a different path, still a classifier
    _, W3 = logistic_gd(X, y, 200, lr=0.5, records=10, param=paramgeo.get("hadamard", p=6))
    assert np.all(np.isfinite(W3)) and not np.allclose(W3[-1], W[-1])
    with pytest.raises(ShapeError, match="weight vector of length d"):
        logistic_gd(X, y, 10, param=_Linear(d=5))


def test_oracle_excess_decays_with_a_fitted_rate():
    model = GaussianMixture.from_spectrum(100, "polynomial", 1.5)
    rates = excess_risk_rates(model, [25, 50, 100, 200, 400], seeds=(0, 1, 2), steps=300,
                              interpolator=False)
    # excess ~ N^-0.52 +- 0.07 on these seeds: a decay, well outside its error bar
    assert rates.oracle_rate.exponent > 3 * rates.oracle_rate.error
    assert rates.oracle[-1] < 0.5 * rates.oracle[0]
    assert rates.interpolator_rate is None and np.all(np.isnan(rates.interpolator))


# ------------------------------------------------------------------------ spectral filters
def _data(d=30, N=20, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, d)) * np.sqrt(spectrum(d, "polynomial", 1.0))
    return X, X[:, 0] + 0.3 * rng.standard_normal(N)


@pytest.mark.parametrize("shift", [0.0, 0.3, 1.5])
def test_shifted_gd_equals_its_filter(shift):
    X, y = _data()
    s_max = np.linalg.norm(X, 2) ** 2 / len(y)
    lr, steps = 0.9 / s_max, 150
    it = shifted_gd(X, y, steps, lr, shift)
    closed = filter_estimator(X, y, lambda s: shifted_gd_filter(s, steps, lr, shift))
    assert np.max(np.abs(it - closed)) / np.max(np.abs(closed)) < 1e-12


def test_filters_limits_and_ridge():
    X, y = _data()
    N = len(y)
    lam = 0.2
    ridge = np.linalg.solve(X.T @ X / N + lam * np.eye(X.shape[1]), X.T @ y / N)
    np.testing.assert_allclose(filter_estimator(X, y, lambda s: ridge_filter(s, lam)), ridge,
                               atol=1e-12)
    s = np.array([0.1, 1.0, 2.0])
    np.testing.assert_allclose(shifted_gd_filter(s, 40, 0.3, 0.0), gd_filter(s, 40, 0.3),
                               rtol=1e-13)
    # at s = mu the filter is its limit lr t s
    assert shifted_gd_filter(np.array([0.5]), 40, 0.3, 0.5)[0] == pytest.approx(0.5 * 0.3 * 40)


def test_mp_edge_and_the_implicit_penalty():
    model = SpikedModel(d=800, spike=20.0, noise=0.5)
    N = 100
    res = spiked_filter_risks(model, N, seed=0, steps=500)
    lo, hi = mp_edges(800 / 100)
    assert (res.mp_lower, res.mp_upper) == (lo, hi)
    # the smallest nonzero eigenvalue of X^T X / N sits near the MP lower edge
    assert abs(res.s_min - lo) / lo < 0.25
    # the ridge matching the interpolator's spike coefficient is the implicit penalty kappa
    assert res.implicit_penalty == pytest.approx((800 - 100 - 2) / 100)
    assert abs(res.penalty_fit - res.implicit_penalty) / res.implicit_penalty < 0.1
    # kappa lies above the negative-ridge barrier s_min by about sigma^2 (2 sqrt(gamma) - 1)
    assert res.implicit_penalty > res.s_min
    assert res.shifted_risk <= res.gd_risk + 1e-12
    assert res.ridge_risk < res.interpolator_risk
    with pytest.raises(ShapeError, match="d > N"):
        spiked_filter_risks(SpikedModel(d=10), 20)


def test_cli_risk_commands():
    runner = CliRunner()
    out = runner.invoke(main, ["early-stopping", "--d", "60", "--sample-size", "20", "--steps", "300"])
    assert out.exit_code == 0, out.output
    assert "oracle step" in out.output and "max-margin interpolator" in out.output
    out = runner.invoke(main, ["spectral-filters", "--d", "200", "--sample-size", "50", "--json"])
    assert out.exit_code == 0, out.output
    assert '"implicit_penalty": 2.96' in out.output
    out = runner.invoke(main, ["spectral-filters", "--d", "20", "--sample-size", "50"])
    assert out.exit_code == 2 and out.output.startswith("Error: spiked filters: need d > N")


def test_early_stopping_sweep_query_trains_through_the_plugin():
    from paramgeo.contract.registry import get_class, load_plugin_file, unregister
    from paramgeo.sweeps.queries import get_query

    # examples/linear_model.py: phi(w) = w from w_0 = 0 (its init_at_scale)
    load_plugin_file(Path(__file__).resolve().parents[1] / "examples" / "linear_model.py")
    linear = get_class("linear")(d=40)
    unregister("linear")
    row = get_query("early-stopping").run(linear, sample_size=15, spectrum="polynomial",
                                          decay=1.5, snr=3.0, support=5, flip=0.1, steps=200,
                                          seed=0)
    model = GaussianMixture.from_spectrum(40, "polynomial", 1.5, 3.0, 0.1, 5)
    direct = early_stopping(model, 15, 200, seed=0)
    assert row["oracle_excess"] == pytest.approx(direct.oracle_excess, abs=1e-12)
    assert row["max_margin_excess"] == pytest.approx(direct.max_margin_excess, rel=1e-6)


def test_spectral_filters_sweep_query_matches_the_engine():
    """The sweep query `spectral-filters` on the plugin's predictor length d: its row equals
    spiked_filter_risks on the same sample, over a grid of N through paramgeo.sweep, and bad
    options or d <= N are refused before or in the cell with the engine's message."""
    from paramgeo.sweeps.queries import get_query

    query = get_query("spectral-filters")
    p = paramgeo.get("matrix", d=8)  # predictor length d = 64
    row = query.run(p, sample_size=20, spike=10.0, noise=0.3, steps=200, seed=1)
    direct = spiked_filter_risks(SpikedModel(d=64, spike=10.0, noise=0.3), 20, 1, 200)
    assert row["d"] == 64 and row["N"] == 20
    for key in ("ridge_risk", "gd_risk", "shifted_risk", "interpolator_risk", "implicit_penalty",
                "mp_lower", "s_min"):
        assert row[key] == direct.__getattribute__(key), key
    assert row["shifted_risk"] <= row["gd_risk"] + 1e-12
    spec = {"query": "spectral-filters", "plugin": "matrix",
            "options": {"steps": 100, "spike": 10.0},
            "grid": {"sizes": {"d": [6]}, "options": {"sample_size": [10, 20]}}}
    table = paramgeo.sweep(spec, workers=0).table
    assert sorted(table["sample_size"]) == [10, 20]
    assert all(r < i for r, i in zip(table["ridge_risk"], table["interpolator_risk"]))
    with pytest.raises(ValueError, match="non-negative"):
        query.options["spike"].convert(-1.0)
    with pytest.raises(ShapeError, match="d > N"):
        query.run(paramgeo.get("matrix", d=4), sample_size=20, spike=1.0, noise=0.1, steps=10,
                  seed=0)
