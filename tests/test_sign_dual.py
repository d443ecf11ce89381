"""The dual of smoothed sign descent (paramgeo.flows.smoothed_sign) against independent routes:
the primal run of SmoothedSignDescent through gradient_descent, softmax(-Z w_k) for p_k, KL by
scipy's rel_entr, and the Hoeffding bound and envelope checked on the recorded run.

Covers: ``paramgeo.dynamics.optimizers``, ``paramgeo.flows.descent``, ``paramgeo.flows.smoothed_sign``,
``paramgeo.losses.predictor``, ``paramgeo_plugins.deep_diagonal``.
"""

import numpy as np
import pytest
from scipy.special import rel_entr, softmax

import paramgeo
from paramgeo.errors import ParamgeoError, ShapeError
from paramgeo.flows import gradient_descent
from paramgeo.flows.smoothed_sign import dual_objective, sign_dual
from paramgeo.losses import Exponential
from paramgeo.dynamics.optimizers import SmoothedSignDescent


def _data(seed=0, N=12, d=4, gap=0.3):
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    X = rng.standard_normal((N, d))
    y = np.sign(X @ u)
    return X + gap * y[:, None] * u, y


@pytest.fixture(scope="module")
def run():
    X, y = _data()
    return X, y, sign_dual(X, y, 0.5, 0.05, 3000)


def test_primal_route_and_dual_iterates(run):
    X, y, r = run
    lin = paramgeo.get("deep-diagonal", p=4, depth=1)
    traj = gradient_descent(lin, Exponential(X, y), np.zeros(4), 200, 0.05, record_every=1,
                            conserved=False,
                            optimizer=SmoothedSignDescent(eps=0.5, anneal="loss"))
    assert np.max(np.abs(traj.thetas - r.w[:201])) < 1e-12
    Z = y[:, None] * X
    for k in (0, 10, 3000):
        assert np.allclose(r.p[k], softmax(-Z @ r.w[k]), rtol=1e-9, atol=1e-15)


def test_kl_recursion_bound_and_envelope(run):
    X, y, r = run
    assert r.identity_residual < 1e-12
    assert np.all(r.bound_slack >= -1e-12)
    assert np.all(r.best_gap <= r.envelope)
    for k in (0, 100, 2000):
        assert r.kl[k] == pytest.approx(np.sum(rel_entr(r.p[-1], r.p[k])), abs=1e-12)
    Z = y[:, None] * X
    assert r.R <= 2 * np.max(np.abs(Z).sum(axis=1))
    assert r.F[7] == pytest.approx(dual_objective(Z, r.p[7], 0.5), rel=1e-14)
    # any reference point of the simplex: the uniform start itself
    uni = sign_dual(X, y, 0.5, 0.05, 300, u=np.full(12, 1 / 12))
    assert uni.kl[0] == 0.0 and uni.identity_residual < 1e-12
    assert np.all(uni.bound_slack >= -1e-12)


def test_errors():
    X, y = _data()
    with pytest.raises(ParamgeoError, match="delta > 0"):
        sign_dual(X, y, 0.0, 0.05, 10)
    with pytest.raises(ParamgeoError, match="simplex"):
        sign_dual(X, y, 0.5, 0.05, 10, u=np.ones(12))
    with pytest.raises(ShapeError):
        sign_dual(X, y[:3], 0.5, 0.05, 10)


def test_endpoint_limits_and_kkt(run):
    X, y, r = run
    from paramgeo.flows.smoothed_sign import endpoint_limits

    e = endpoint_limits(X, y, [1e-3, 3e-3, 1e-2, 0.5, 10, 100, 1000])
    # the SLSQP dual solution at delta = 0.5 is the direction of the run's last step
    s_half = e.s_bar[list(e.deltas).index(0.5)]
    assert np.max(np.abs(s_half - (r.w[-1] - r.w[-2]) / r.lr)) < 1e-9
    assert r.kkt[-1] < 1e-10 < r.kkt[0]  # complementary slackness reached along the run
    # delta -> 0: the l_inf max margin of the linear program, linearly in delta
    small = e.deltas < 0.1
    assert np.all(np.diff(e.linf_gap[small]) > 0)
    assert np.all((e.linf_gap[small] / e.deltas[small] > 0.6)
                  & (e.linf_gap[small] / e.deltas[small] < 0.8))
    assert abs(e.linf_exponent - 1) < 0.1
    # delta -> infinity: the l2 max-margin direction, 1 - cos ~ delta^-2
    assert e.l2_gap[-1] < 1e-8 and abs(e.l2_exponent - 2) < 0.02
    with pytest.raises(ParamgeoError, match="positive"):
        endpoint_limits(X, y, [0.0])


def test_fixed_epsilon_crossover_and_tail():
    from paramgeo.flows.smoothed_sign import fixed_epsilon

    X, y = _data()
    r = fixed_epsilon(X, y, 1e-3, 0.05, 20000)
    # second route to the crossover: the steps themselves, |w_{k+1} - w_k|_inf / eta = |s_k|_inf
    # = |u|_inf / (|u|_inf + eps / L_k) falls below 1/2 exactly when eps / L_k > |u_k|_inf
    lin = paramgeo.get("deep-diagonal", p=4, depth=1)
    traj = gradient_descent(lin, Exponential(X, y), np.zeros(4), 400, 0.05, record_every=1,
                            conserved=False,
                            optimizer=SmoothedSignDescent(eps=1e-3, anneal="constant"))
    step = np.max(np.abs(np.diff(traj.thetas, axis=0)), axis=1) / 0.05
    assert r.crossover == int(np.argmax(step < 0.5)) == 150
    # after it: gradient descent with step eta / eps, L_k ~ eps / (eta gamma_2^2 k)
    k = np.arange(3000, 20001, 1000)
    slope = np.polyfit(np.log(k), np.log(r.losses[k]), 1)[0]
    assert abs(slope + 1) < 0.03
    tails = k * r.losses[k]
    assert np.all(np.diff(tails) < 0) and r.tail == pytest.approx(r.predicted_tail, rel=0.01)
    assert r.cosine[20000] > r.cosine[1000] > r.cosine[100]
    with pytest.raises(ParamgeoError, match="eps > 0"):
        fixed_epsilon(X, y, 0.0, 0.05, 10)
