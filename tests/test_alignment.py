"""Early-stage alignment of logistic GD (paramgeo.flows.alignment), each quantity against an
independent route: a hand-written GD loop, the closed-form constant c = log(2)/3 of
X = [[1, 1], [1, -2]], the exact norm identity of the radial/tangential split and Soudry's
asymptotics (radial steps sum to |w_hat| log(t2/t1)).

Covers: ``paramgeo.flows.alignment``.
"""

import math

import numpy as np
import pytest

from paramgeo.errors import ParamgeoError, ShapeError
from paramgeo.flows.alignment import alignment_times, fit_alignment_law, predicted_constant

# two support vectors z = (1, 1), (1, -2) with w_hat = (1, 0), and a non-support point (3, 2.5)
X3 = np.array([[1.0, 1.0], [1.0, -2.0], [3.0, 2.5]])
Y3 = np.ones(3)
DELTAS = [0.06, 0.05, 0.045, 0.04, 0.035, 0.03]


@pytest.fixture(scope="module")
def run():
    return alignment_times(X3, Y3, DELTAS, 20000)


def test_predicted_constant_closed_form():
    # alpha = (2/3, 1/3); z_n . w_tilde = -log alpha_n gives 3 w_tilde_2 = -log 2, |w_hat| = 1
    assert predicted_constant(X3, Y3) == pytest.approx(math.log(2) / 3, rel=1e-6)
    # support vectors not spanning R^3: the constant is not a closed form
    X = np.array([[1.0, 0.0, 0.0], [2.0, 1.0, 0.0]])
    assert math.isnan(predicted_constant(X, np.ones(2)))


def test_times_match_hand_loop():
    steps = 3000
    r = alignment_times(X3, Y3, [0.1, 0.07, 0.05], steps)
    w, err = np.zeros(2), []
    for _ in range(steps):  # GD written out: w += (lr / N) sum_i z_i / (1 + exp(z_i . w))
        w = w + r.lr / 3 * sum(z / (1.0 + math.exp(z @ w)) for z in X3)
        err.append(np.linalg.norm(w / np.linalg.norm(w) - np.array([1.0, 0.0])))
    err = np.array(err)
    assert np.allclose(r.error, err, atol=1e-9)
    for d, t in zip(r.deltas, r.times):
        assert np.all(err[t - 1:] <= d) and err[t - 2] > d


def test_exp_law_with_closed_form_constant(run):
    fit = fit_alignment_law(run.deltas, run.times, run.predicted_c)
    assert fit.law == "exp(c / delta)"
    assert fit.exp_rms < fit.power_rms / 10
    assert fit.c == pytest.approx(math.log(2) / 3, rel=0.03)  # 0.2275 +- 0.0004 vs 0.2310
    # a power law would have one exponent; the fitted one drifts across delta windows
    early = fit_alignment_law(run.deltas[:3], run.times[:3])
    late = fit_alignment_law(run.deltas[3:], run.times[3:])
    assert late.p - early.p > 5 * (late.p_error + early.p_error)


def test_radial_tangential(run):
    n = run.norm
    # exact: |w_{t+1}|^2 = (|w_t| + r_t)^2 + tau_t^2
    assert np.allclose(n[1:] ** 2, (n[:-1] + run.radial) ** 2 + run.tangential ** 2,
                       rtol=1e-12)
    # Soudry: radial steps sum to |w_hat| log(t2 / t1), |w_hat| = 1 / margin = 1
    assert run.radial[999:19999].sum() == pytest.approx(math.log(20), rel=2e-3)
    # tangential steps ~ c / (t log t), approached from above
    t = np.array([1000, 5000, 19998])
    scaled = run.tangential[t - 1] * t * np.log(t)
    assert np.all(np.diff(scaled) < 0) and scaled[-1] == pytest.approx(run.predicted_c, rel=0.15)


def test_fit_recovers_synthetic_laws():
    d = np.array([0.1, 0.08, 0.06, 0.05, 0.04])
    exp_fit = fit_alignment_law(d, np.exp(1.5 + 0.3 / d))
    assert exp_fit.c == pytest.approx(0.3, rel=1e-9) and exp_fit.law == "exp(c / delta)"
    pow_fit = fit_alignment_law(d, 7.0 * d ** -2.5)
    assert pow_fit.p == pytest.approx(2.5, rel=1e-9) and pow_fit.law == "delta^-p"


def test_errors():
    with pytest.raises(ShapeError, match="not linearly separable"):
        alignment_times(np.array([[1.0], [1.0]]), np.array([1.0, -1.0]), [0.1], 10)
    with pytest.raises(ParamgeoError, match="deltas"):
        alignment_times(X3, Y3, [0.0], 10)
    with pytest.raises(ParamgeoError, match=">= 3"):
        fit_alignment_law([0.1, 0.05], [3, 10])
    with pytest.raises(ShapeError):
        alignment_times(X3, Y3[:2], [0.1], 10)
