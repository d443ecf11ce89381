"""The nonparametric minimax lower bound (paramgeo.flows.minimax), each ingredient by a second
route: the hypotheses built by hand lie in the class (snr, source ellipsoid) and the class
holds the model; Assouad's separation against the exact 0-1 risk of
:class:`paramgeo.flows.risk.GaussianMixture` on every vertex of a small cube; the one-sample
KL by Monte Carlo of the likelihood ratio against |mu~ - mu~'|^2 / 2 (exact without flips);
the bound below the Monte Carlo risk of a test that knows the cube; and the bound's slope at
large d and N against the closed-form rate.

Covers: ``paramgeo.flows.minimax``.
"""

import math

import numpy as np
import pytest
from scipy.special import ndtr

from paramgeo.errors import ParamgeoError
from paramgeo.flows.minimax import (
    class_radius,
    cube_means,
    excess_slope,
    mixture_kl,
    nonparametric_lower_bound,
    nonparametric_rate,
)
from paramgeo.flows.risk import GaussianMixture

SIZES = [25 * 2 ** k for k in range(10)]


@pytest.mark.parametrize("kind, decay", [("polynomial", 1.5), ("exponential", 0.05)])
def test_hypotheses_lie_in_the_class_that_holds_the_model(kind, decay):
    model = GaussianMixture.from_spectrum(200, kind, decay, snr=3.0, flip=0.1)
    lam = model.cov
    radius = class_radius(model)
    assert radius == pytest.approx(np.linalg.norm(model.mean / lam), rel=1e-12)  # |w_B|
    bound = nonparametric_lower_bound(model, SIZES)
    assert bound.radius == radius and np.all(np.diff(bound.bound) < 0)
    rng = np.random.default_rng(0)
    for K, b2 in zip(bound.width, bound.amplitude):
        w = np.zeros(200)  # whitened mean, built by hand on the top K + 1 coordinates
        w[0] = math.sqrt(9.0 - K * b2)
        w[1:K + 1] = math.sqrt(b2) * rng.choice((-1.0, 1.0), size=K)
        member = GaussianMixture(cov=lam, mean=w * np.sqrt(lam), flip=0.1)
        assert class_radius(member) <= radius * (1 + 1e-9)
        assert math.sqrt(member.mean @ (member.mean / lam)) == pytest.approx(3.0, rel=1e-12)
    with pytest.raises(ParamgeoError, match="larger radius"):
        nonparametric_lower_bound(model, SIZES, radius=2.9)


def test_assouad_separation_against_the_exact_risk():
    """Every vertex v of a K = 3 cube, many directions w: the exact excess of w under v is at
    least alpha * #{j: sign (Sigma^1/2 w)_(j+1) != v_j}, and within a factor 5 of it at the
    neighbours' Bayes directions: G(2 b^2 / snr^2), 4 alpha times the convexity factor."""
    snr, eta, b2 = 3.0, 0.1, 0.4
    model = GaussianMixture.from_spectrum(8, "polynomial", 1.5, snr=snr, flip=eta)
    vertices, means = cube_means(model, 3, b2)
    alpha = excess_slope(snr, eta) * b2 / (2 * snr ** 2)
    rng = np.random.default_rng(1)
    root = np.sqrt(model.cov)
    tries = np.concatenate([means / model.cov,  # every vertex's Bayes direction
                            (means[rng.integers(8, size=400)]
                             + 0.7 * rng.standard_normal((400, 8)) * root) / model.cov,
                            rng.standard_normal((400, 8))])
    ratios = []
    for v, m in zip(vertices, means):
        member = GaussianMixture(cov=model.cov, mean=m, flip=eta)
        excess = member.excess_risk(tries)
        hamming = np.sum(np.where((tries * root)[:, 1:4] > 0, 1.0, -1.0) != v, axis=1)
        assert np.all(excess >= alpha * hamming * (1 - 1e-9))
        one = hamming[:len(vertices)] == 1
        ratios.extend(excess[:len(vertices)][one] / alpha)
    t = 2 * b2 / snr ** 2
    neighbour = (1 - 2 * eta) * (ndtr(-snr * (1 - t)) - ndtr(-snr)) / alpha
    assert len(ratios) == 8 * 3 and np.allclose(ratios, neighbour, rtol=1e-9)
    assert 4 < neighbour < 4 * math.exp(snr ** 2 * t)


def test_kl_against_its_data_processing_bound():
    rng = np.random.default_rng(2)
    m1 = np.array([1.0, 0.6, -0.6, 0.6])
    m2 = np.array([1.0, -0.6, 0.6, 0.6])
    half = float((m1 - m2) @ (m1 - m2)) / 2
    clean, se = mixture_kl(m1, m2, 0.0, rng=rng)  # without flips the KL is |m1 - m2|^2 / 2
    assert abs(clean - half) < 4 * se
    flipped, se = mixture_kl(m1, m2, 0.1, rng=rng)
    assert 0.5 * half < flipped < half - 10 * se  # the flips lose information
    more, se = mixture_kl(m1, m2, 0.3, rng=rng)
    assert more < flipped - 10 * se


def test_bound_below_a_cube_test_and_within_a_constant():
    """The test v-hat_j = sign(sum_i y_i u_(i, j+1)) that knows the cube: its mean excess at
    a vertex (all vertices alike by symmetry) is at least the bound, and at most 30 times."""
    snr, eta = 3.0, 0.1
    model = GaussianMixture.from_spectrum(12, "polynomial", 1.5, snr=snr, flip=eta)
    for n in (40, 160):
        bound = nonparametric_lower_bound(model, [n])
        K, b2 = int(bound.width[0]), float(bound.amplitude[0])
        vertices, means = cube_means(model, K, b2)
        truth = GaussianMixture(cov=model.cov, mean=means[-1], flip=eta)  # v = (1, .., 1)
        rng = np.random.default_rng(3)
        excess = []
        for _ in range(400):
            X, y = truth.sample(n, rng)
            votes = (y @ (X / np.sqrt(model.cov)))[1:K + 1]
            guess = np.where(votes > 0, 1.0, -1.0)
            row = int(np.flatnonzero((vertices == guess).all(1))[0])
            excess.append(float(truth.excess_risk(means[row] / model.cov)))
        mean, se = np.mean(excess), np.std(excess, ddof=1) / math.sqrt(len(excess))
        assert bound.bound[0] <= mean + 3 * se
        assert mean < 30 * bound.bound[0]


def test_slope_against_the_closed_form_rate():
    poly = GaussianMixture.from_spectrum(100_000, "polynomial", 1.5, snr=3.0, flip=0.1)
    far = nonparametric_lower_bound(poly, [10 ** 6, 10 ** 7, 10 ** 8])
    assert not far.capped.any()
    assert far.rate.exponent == pytest.approx(nonparametric_rate("polynomial", 1.5), abs=0.01)
    # exponential: K ~ log(N B (1 - e^-a) 9 / 4) / a at N b^2 = 4/9, so bound N / K -> G'(0) / 27
    expo = GaussianMixture.from_spectrum(2000, "exponential", 0.05, snr=3.0, flip=0.1)
    sizes = [10 ** 5, 10 ** 7, 10 ** 9]
    bound = nonparametric_lower_bound(expo, sizes)
    budget = bound.radius ** 2 - 9.0
    K = np.log(np.array(sizes) * budget * (1 - math.exp(-0.05)) * 9 / 4) / 0.05
    scaled = bound.bound * np.array(sizes) / K / (excess_slope(3.0, 0.1) / (27 * 9.0))
    assert np.allclose(scaled, 1.0, atol=0.03)
    assert nonparametric_rate("exponential", 0.05) == 1.0
    assert nonparametric_rate("polynomial", 1.0, source=0.5) == pytest.approx(2 / 3)


def test_errors_name_the_fix():
    model = GaussianMixture.from_spectrum(20, "polynomial", 1.5, snr=3.0, flip=0.1)
    with pytest.raises(ParamgeoError, match="give a source above"):
        nonparametric_lower_bound(model, [100], source=-0.6)
    with pytest.raises(ParamgeoError, match="smaller width"):
        cube_means(model, 20, 0.1)
    with pytest.raises(ParamgeoError, match="choose"):
        nonparametric_rate("flat", 1.0)
