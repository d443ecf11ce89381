"""Mode training (paramgeo.flows.mode_training) against independent routes: the local exponent
against the log-log slope of the closed-form loss, discrete GD against the closed-form flow,
Adam against a hand-written Adam loop.

Covers: ``paramgeo.flows.mode_training``, ``paramgeo.flows.structure``.
"""

import math

import numpy as np
import pytest

from paramgeo.errors import ShapeError
from paramgeo.flows.mode_training import local_exponent, train_modes, window_exponents
from paramgeo.flows.structure import mode_dynamics

K = 4000
TARGETS = np.arange(1, K + 1) ** -1.5


@pytest.mark.parametrize("m0", [1e-10, 1e-60])
def test_local_exponent_is_the_closed_form_slope(m0):
    k = 30
    # the slope of the closed-form loss over one switch-on spacing around t_k
    t_lo, t_hi = (math.log(TARGETS[j - 1] / m0 - 1) / (4 * TARGETS[j - 1]) for j in (k - 5, k + 5))
    res = mode_dynamics(TARGETS, np.ones(K), m0, np.geomspace(t_lo, t_hi, 5),
                        window=(t_lo, t_hi))
    slope = -math.log(res.loss[-1] / res.loss[0]) / math.log(t_hi / t_lo)
    assert slope == pytest.approx(float(local_exponent(TARGETS, np.ones(K), m0, k)), rel=0.03)


def test_window_table_tends_to_the_limit():
    tab = window_exponents(TARGETS[:1000], np.ones(1000), [1e-10, 1e-100], [(2, 100)],
                           np.geomspace(1, 1e7, 300))
    assert tab.limit == pytest.approx(4 / 3, rel=1e-9)
    assert tab.fitted[0, 0] > tab.fitted[1, 0] > 1.3
    assert np.allclose(tab.fitted[:, 0], tab.local[:, 0], rtol=0.02)


def test_gd_against_the_closed_form_flow():
    targets = np.arange(1, 101) ** -1.5
    run = train_modes(targets, np.ones(100), 1e-6, 20000, 0.01, "gd", records=1000)
    flow = mode_dynamics(targets, np.ones(100), 1e-6, run.times)
    on = np.isfinite(run.switch_on)
    # switch-on times to the record spacing (0.5%) plus GD's lag log(1 + eta lam) / eta vs lam
    assert on.sum() > 15 and np.allclose(run.switch_on[on], flow.switch_on[on], rtol=0.03)
    assert np.allclose(run.loss[-100:], flow.loss[-100:], rtol=0.05)
    assert run.order == pytest.approx(1.0)
    noiseless = train_modes(targets, np.ones(100), 1e-6, 20000, 0.01, "sgd", records=1000)
    assert np.array_equal(noiseless.loss, run.loss)


def test_adam_against_hand_loop():
    targets = np.arange(1, 101) ** -1.5
    run = train_modes(targets, np.ones(100), 1e-8, 3000, 1e-3, "adam", records=30)
    w, m, v = np.full(100, 1e-4), np.zeros(100), np.zeros(100)
    losses, steps = [], set(np.unique(np.round(np.geomspace(1, 3000, 30)).astype(int)))
    for t in range(1, 3001):
        g = 2 * (w * w - targets) * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - 1e-3 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        if t in steps:
            losses.append(0.5 * np.sum((w * w - targets) ** 2))
    assert np.allclose(run.loss, losses, rtol=1e-10)
    assert run.order < 0  # the smallest targets switch on first: no sequential order
    with pytest.raises(ShapeError, match="choose one of"):
        train_modes(targets, np.ones(100), 1e-8, 10, 1e-3, "lbfgs")
