"""paramgeo.quotient.loss_barriers: both barrier definitions on closed-form paths.

Covers: ``paramgeo.losses.predictor``, ``paramgeo.quotient.loss_barriers``,
``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import numpy as np
import pytest

import paramgeo
from paramgeo.errors import ArgumentError
from paramgeo.losses import LinearMeasurements
from paramgeo.quotient import barrier, barriers


def test_hadamard_sign_flip_barrier_half_naive_zero_aligned():
    """L = (1/2)(u v - 1)^2 from (1, 1) to (-1, -1): on the straight path u v = (1 - 2 t)^2,
    so L(1/2) = 1/2 with both end losses 0; aligning the flip c = -1 makes the path constant."""
    h = paramgeo.get("hadamard", p=1)
    L = LinearMeasurements(np.array([[1.0]]), np.array([1.0]))
    naive = barrier(h, L, [1.0, 1.0], [-1.0, -1.0], path="linear", n_points=21)
    t = naive.lambdas
    assert np.allclose(naive.losses, 0.5 * ((1 - 2 * t) ** 2 - 1) ** 2)
    assert naive.ainsworth == pytest.approx(0.5) and naive.entezari == pytest.approx(0.5)
    aligned = barrier(h, L, [1.0, 1.0], [-1.0, -1.0], path="aligned")
    assert aligned.ainsworth == pytest.approx(0.0, abs=1e-15)
    assert aligned.distance < 1e-12


def test_the_two_definitions_differ_when_end_losses_differ():
    lam = np.linspace(0, 1, 5)
    losses = np.array([0.0, 1.0, 1.5, 2.5, 2.0])
    mean, interp = barriers(lam, losses)
    assert mean == pytest.approx(2.5 - 1.0)               # max L - (L0 + L1)/2
    assert interp == pytest.approx(max(losses - 2.0 * lam))  # 1.0 at lambda = 1/4


def test_geodesic_path_on_uut_and_refused_on_uvt(rng):
    p = paramgeo.get("uut", d=3, r=2)
    A = rng.standard_normal((4, 9))
    U, V = rng.standard_normal(6), rng.standard_normal(6)
    L = LinearMeasurements(A, A @ np.ravel(U.reshape(3, 2) @ U.reshape(3, 2).T))
    g = barrier(p, L, U, V, path="geodesic", n_points=11)
    a = barrier(p, L, U, V, path="aligned", n_points=11)
    assert np.allclose(g.losses, a.losses)  # the geodesic's representatives: the aligned line
    assert g.losses[0] == pytest.approx(0.0, abs=1e-20)
    q = paramgeo.get("uvt", m=2, n=2, r=1)
    Lq = LinearMeasurements(np.eye(4), np.ones(4))
    with pytest.raises(ArgumentError, match="isometries"):
        barrier(q, Lq, np.ones(4), -np.ones(4), path="geodesic")
    with pytest.raises(ArgumentError, match="path must be one of"):
        barrier(q, Lq, np.ones(4), -np.ones(4), path="curved")


def test_plot_writes_a_figure(tmp_path):
    pytest.importorskip("matplotlib")
    h = paramgeo.get("hadamard", p=1)
    L = LinearMeasurements(np.array([[1.0]]), np.array([1.0]))
    out = tmp_path / "b.png"
    barrier(h, L, [1.0, 1.0], [-1.0, -1.0], n_points=5).plot(str(out))
    assert out.stat().st_size > 1000
