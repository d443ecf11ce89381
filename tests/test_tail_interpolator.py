"""The flat tail's margin completion (``tail_interpolator``) against an explicit design: a head
drawn as ``explicit_sample`` draws it plus a finite tail of M coordinates of variance T / M
(so that its Gram tends to T I), the completed weight vector built coordinate by coordinate,
its margins computed from the explicit rows and its excess from the explicit Sigma-weights.

Covers: ``paramgeo.flows.logistic_separation``.
"""

import numpy as np
import pytest

from paramgeo.errors import ShapeError
from paramgeo.flows import LogisticDesign, gram_sample, kernel_gd, tail_interpolator
from paramgeo.flows.logistic_separation import explicit_sample, zero_one_excess


def test_the_completion_interpolates_at_the_estimators_risk_in_an_explicit_design():
    N, M = 30, 200_000
    design = LogisticDesign.from_decay(60, 2.0, support=20)
    T = design.tail
    X, y = explicit_sample(design, N, np.random.default_rng(3))
    rng = np.random.default_rng(4)
    Xt = rng.standard_normal((N, M)) * np.sqrt(T / M)
    # the kernel form with the explicit tail's own Gram in place of T I
    G = Xt @ Xt.T
    assert np.abs(G - T * np.eye(N)).max() < 0.05 * T
    K = X @ X.T + G
    _, betas = kernel_gd(K, y, 300, records=5)
    beta = betas[2]  # an early-stopped estimator: not an interpolator by itself
    assert (y * (K @ beta)).min() < 0
    g = gram_sample(design, N, np.random.default_rng(3))  # the same head and labels
    assert np.allclose(g.K - T * np.eye(N), X @ X.T) and np.array_equal(g.y, y)
    done = tail_interpolator(design, g, beta, margin=1.0)
    # explicit weights: head X^T beta, tail X_t^T (beta + gamma') with X_t X_t^T gamma' = T gamma
    gamma_explicit = np.linalg.solve(G, T * done.gamma)
    w_head = X.T @ beta
    w_tail = Xt.T @ (beta + gamma_explicit)
    margins = y * (X @ w_head + Xt @ w_tail)
    # the explicit margins differ from the kernel ones only through G - T I acting on beta
    assert margins.min() > 1 - 0.1 and done.margin == pytest.approx(1.0)
    lam = design.spectrum
    a = w_head @ (lam * w_head) + (T / M) * (w_tail @ w_tail)
    c = w_head @ (lam * design.w_star)
    explicit = float(zero_one_excess(design.signal, a, c))
    head_only = float(zero_one_excess(design.signal, w_head @ (lam * w_head), c))
    assert done.excess == pytest.approx(head_only, rel=1e-9)
    assert explicit == pytest.approx(done.excess, rel=0.05) and done.excess > 1e-3
    norm2 = w_head @ w_head + w_tail @ w_tail
    assert done.norm ** 2 == pytest.approx(norm2, rel=0.1)


def test_the_completion_refuses_what_it_cannot_complete():
    design = LogisticDesign.from_decay(40, 2.0, support=10)
    g = gram_sample(design, 12, np.random.default_rng(0))
    with pytest.raises(ShapeError, match="12 points"):
        tail_interpolator(design, g, np.zeros(5))
    with pytest.raises(ShapeError, match="margin"):
        tail_interpolator(design, g, np.zeros(12), margin=0.0)
    flat = LogisticDesign.from_decay(40, 2.0, support=10, tail=0.0)
    with pytest.raises(ShapeError, match="no flat tail"):
        tail_interpolator(flat, g, np.zeros(12))
