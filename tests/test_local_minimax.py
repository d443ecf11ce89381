"""The local minimax lower bound around a model (paramgeo.flows.minimax.local_lower_bound),
each ingredient by a second route: the hypotheses built by ``local_means`` lie in the class
with the model's snr, at the reported angle from the model; the local separation (excess
quadratic in the perturbation) against the exact 0-1 risk of
:class:`paramgeo.flows.risk.GaussianMixture` on every vertex of a small local cube; the KL of
neighbouring hypotheses by Monte Carlo (``mixture_kl``) against the 2 beta_j^2 the bound
uses; the bound below the Monte Carlo risk of a test that knows the cube; and the slope at
large d and N against the class's closed-form rate.

Covers: ``paramgeo.flows.minimax``.
"""

import itertools
import math

import numpy as np
import pytest
from scipy.special import ndtr

from paramgeo.errors import ParamgeoError
from paramgeo.flows.minimax import (
    class_radius,
    excess_slope,
    local_lower_bound,
    local_means,
    mixture_kl,
    nonparametric_rate,
)
from paramgeo.flows.risk import GaussianMixture

SIZES = [25 * 2 ** k for k in range(10)]


@pytest.mark.parametrize("kind, decay", [("polynomial", 1.5), ("exponential", 0.05)])
def test_local_hypotheses_lie_in_the_class_near_the_model(kind, decay):
    model = GaussianMixture.from_spectrum(200, kind, decay, snr=3.0, flip=0.1)
    lam, R0 = model.cov, class_radius(model)
    bound = local_lower_bound(model, SIZES, slack=0.1)
    assert bound.radius == pytest.approx(1.1 * R0) and bound.model_radius == R0
    assert np.all(np.diff(bound.bound) < 0) and np.all(bound.amplitudes[:, :10] == 0)
    rng = np.random.default_rng(0)
    base = model.mean / np.sqrt(lam) / 3.0
    for beta2, reach in zip(bound.amplitudes, bound.reach):
        for mean in local_means(model, beta2, rng.choice((-1.0, 1.0), size=(3, 200))):
            member = GaussianMixture(cov=lam, mean=mean, flip=0.1)
            whitened = mean / np.sqrt(lam)
            assert class_radius(member) <= bound.radius * (1 + 1e-9)
            assert np.linalg.norm(whitened) == pytest.approx(3.0, rel=1e-12)
            assert math.sqrt(1 - (whitened @ base / 3.0) ** 2) == pytest.approx(reach, 1e-9)
    wider = local_lower_bound(model, SIZES, slack=0.3)
    assert np.all(wider.bound >= bound.bound) and np.all(wider.count >= bound.count)
    with pytest.raises(ParamgeoError, match="give a radius"):
        local_lower_bound(model, SIZES, radius=0.99 * R0)


def test_local_separation_against_the_exact_risk():
    """Every vertex v of a local cube on the 5 free coordinates of a d = 8 model (support 3):
    the exact excess of any w under v is at least sum_(j wrong) alpha_j, alpha_j =
    G'(0) beta_j^2 / (2 snr^2), and at a neighbour's Bayes direction it is exactly
    G(2 beta_j^2 / snr^2), between 4 alpha_j and 4 alpha_j e^(snr^2 t)."""
    snr, eta = 3.0, 0.1
    model = GaussianMixture.from_spectrum(8, "polynomial", 1.5, snr=snr, flip=eta, support=3)
    bound = local_lower_bound(model, [30], slack=0.01)
    beta2 = bound.amplitudes[0]
    on = np.flatnonzero(beta2 > 0)
    assert on.size == 5 and len(set(np.round(beta2[on], 12))) == 5  # the budget binds
    cost = 1 / model.cov[on] - (bound.model_radius / snr) ** 2
    budget = 30 * (bound.radius ** 2 - bound.model_radius ** 2)
    assert 30 * beta2[on] @ cost == pytest.approx(budget, rel=1e-9)
    value = 30 * beta2[on] @ (1 - np.sqrt(30 * beta2[on]))
    x = np.random.default_rng(4).uniform(0, 4 / 9, size=(2000, 5))  # random feasible cubes
    x *= np.minimum(1.0, budget / (x @ cost))[:, None]
    assert np.all(np.sum(x * (1 - np.sqrt(x)), axis=1) <= value * (1 + 1e-9))
    alpha = excess_slope(snr, eta) * beta2[on] / (2 * snr ** 2)
    vertices = np.array(list(itertools.product((-1.0, 1.0), repeat=on.size)))
    signs = np.ones((len(vertices), 8))
    signs[:, on] = vertices
    means = local_means(model, beta2, signs)
    rng = np.random.default_rng(1)
    root = np.sqrt(model.cov)
    tries = np.concatenate([means / model.cov,
                            (means[rng.integers(len(means), size=300)]
                             + 0.3 * rng.standard_normal((300, 8)) * root) / model.cov,
                            rng.standard_normal((300, 8))])
    for v, m in zip(vertices, means):
        member = GaussianMixture(cov=model.cov, mean=m, flip=eta)
        excess = member.excess_risk(tries)
        wrong = np.where((tries * root)[:, on] > 0, 1.0, -1.0) != v
        assert np.all(excess >= wrong @ alpha * (1 - 1e-9))
        for j in range(on.size):  # the neighbour across coordinate j
            row = int(np.flatnonzero((vertices == v * np.where(np.arange(on.size) == j, -1, 1))
                                     .all(1))[0])
            t = 2 * beta2[on[j]] / snr ** 2
            exact = (1 - 2 * eta) * (ndtr(-snr * (1 - t)) - ndtr(-snr))
            assert excess[row] == pytest.approx(exact, rel=1e-9)
            assert 4 * alpha[j] < exact < 4 * alpha[j] * math.exp(snr ** 2 * t)


def test_neighbours_kl_against_the_bound():
    model = GaussianMixture.from_spectrum(6, "exponential", 0.05, snr=3.0, flip=0.1, support=2)
    beta2 = local_lower_bound(model, [4], slack=0.5).amplitudes[0]
    j = int(np.flatnonzero(beta2 > 0)[0])
    signs = np.ones((2, 6))
    signs[1, j] = -1.0
    m1, m2 = local_means(model, beta2, signs) / np.sqrt(model.cov)
    assert float((m1 - m2) @ (m1 - m2)) / 2 == pytest.approx(2 * beta2[j], rel=1e-12)
    rng = np.random.default_rng(2)
    clean, se = mixture_kl(m1, m2, 0.0, rng=rng)
    assert abs(clean - 2 * beta2[j]) < 4 * se
    flipped, se = mixture_kl(m1, m2, 0.1, rng=rng)
    assert 0.5 * beta2[j] < flipped < 2 * beta2[j] + 3 * se


def test_local_bound_below_a_cube_test():
    """The test v-hat_j = sign(sum_i y_i u_ij) on the perturbed coordinates, which knows the
    model and the cube: its mean excess at the vertex v = (1, .., 1) is at least the bound
    and at most 30 times it."""
    snr, eta = 3.0, 0.1
    model = GaussianMixture.from_spectrum(12, "polynomial", 1.5, snr=snr, flip=eta, support=3)
    for n in (40, 160):
        bound = local_lower_bound(model, [n], slack=0.5)
        beta2 = bound.amplitudes[0]
        on = beta2 > 0
        truth = GaussianMixture(cov=model.cov, mean=local_means(model, beta2, np.ones(12))[0],
                                flip=eta)
        rng = np.random.default_rng(3)
        excess = []
        for _ in range(300):
            X, y = truth.sample(n, rng)
            guess = np.where(y @ (X / np.sqrt(model.cov)) > 0, 1.0, -1.0)
            guess[~on] = 1.0
            excess.append(float(truth.excess_risk(local_means(model, beta2, guess)[0]
                                                  / model.cov)))
        mean, se = np.mean(excess), np.std(excess, ddof=1) / math.sqrt(len(excess))
        assert bound.bound[0] <= mean + 3 * se
        assert mean < 30 * bound.bound[0]


def test_local_slope_against_the_class_rate():
    poly = GaussianMixture.from_spectrum(100_000, "polynomial", 1.5, snr=3.0, flip=0.1)
    far = local_lower_bound(poly, [10 ** 6, 10 ** 7, 10 ** 8])
    assert far.last.max() < 100_000
    assert far.rate.exponent == pytest.approx(nonparametric_rate("polynomial", 1.5), abs=0.01)
    expo = GaussianMixture.from_spectrum(2000, "exponential", 0.05, snr=3.0, flip=0.1)
    wide = local_lower_bound(expo, [10 ** 5, 10 ** 7, 10 ** 9])
    assert np.allclose(np.diff(wide.count), math.log(100) / 0.05, atol=3)  # J ~ log N / a
    scaled = wide.bound * np.array([10 ** 5, 10 ** 7, 10 ** 9]) / wide.count
    assert np.allclose(scaled / scaled[-1], 1.0, atol=0.05)  # bound ~ log N / N


def test_local_errors_name_the_fix():
    model = GaussianMixture.from_spectrum(20, "polynomial", 1.5, snr=3.0, flip=0.1)
    with pytest.raises(ParamgeoError, match="give a reach"):
        local_lower_bound(model, [100], reach=0.0)
    full = GaussianMixture.from_spectrum(5, "polynomial", 1.5, snr=3.0, flip=0.1, support=5)
    with pytest.raises(ParamgeoError, match="support is smaller"):
        local_lower_bound(full, [100])
    with pytest.raises(ParamgeoError, match="LocalBound.amplitudes"):
        local_means(model, np.ones(20), np.ones(20))


def test_local_bound_against_the_class_bound_at_a_one_coordinate_model():
    """A model on the top coordinate alone has mean cost c0 = c_1, so its local cube and the
    class's cube of :func:`nonparametric_lower_bound` (same radius) share the ellipsoid: the
    water filling is at least the class's uniform cube, equal when every free coordinate is
    at N b^2 = 4/9, and not far above it where the budget binds."""
    from paramgeo.flows.minimax import nonparametric_lower_bound

    model = GaussianMixture.from_spectrum(200, "polynomial", 1.5, snr=3.0, flip=0.1, support=1)
    radius = 1.3 * class_radius(model)
    local = local_lower_bound(model, SIZES, radius=radius)
    cube = nonparametric_lower_bound(model, SIZES, radius=radius)
    ratio = local.bound / cube.bound
    assert np.all(ratio >= 1 - 1e-9) and np.all(ratio < 1.15)
    small = GaussianMixture.from_spectrum(10, "exponential", 0.05, snr=3.0, flip=0.1,
                                          support=1)
    both = [f(small, [400], radius=3 * class_radius(small)).bound[0]
            for f in (local_lower_bound, nonparametric_lower_bound)]
    assert both[0] == pytest.approx(both[1], rel=1e-12)
