"""paramgeo.quotient.teleportation: exact group moves, the closed-form minimal sharpness of a
global minimum of (1/2)|U V^T - Y|^2 along GL(r), checked by a second route, and teleportation
every k steps inside gradient descent (Teleporter) against a hand-written loop.

Covers: ``paramgeo.cli``, ``paramgeo.flows.descent``, ``paramgeo.losses.predictor``,
``paramgeo.quotient.teleportation``, ``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uvt``.
"""

import numpy as np
import pytest
from scipy.linalg import expm

import paramgeo
from paramgeo.errors import ArgumentError
from paramgeo.losses import CallableLoss, value_and_grad
from paramgeo.quotient import Teleporter, teleport
from paramgeo.quotient.teleportation import expm_small


def _minimum(rng, m=4, n=3, r=2):
    q = paramgeo.get("uvt", m=m, n=n, r=r)
    P, s, Qt = np.linalg.svd(rng.standard_normal((m, r)) @ rng.standard_normal((r, n)),
                             full_matrices=False)
    P, s, Qt = P[:, :r], s[:r], Qt[:r]
    Y = (P * s) @ Qt
    loss = CallableLoss(lambda b: 0.5 * np.sum((b - Y.ravel()) ** 2), m=m * n)
    return q, loss, P, s, Qt


def _fd_sharpness(q, loss, theta, h=1e-5):
    """Largest eigenvalue of the Hessian by central differences of the gradient."""
    vg = value_and_grad(q, loss)
    H = np.column_stack([(vg(theta + h * e)[1] - vg(theta - h * e)[1]) / (2 * h)
                         for e in np.eye(q.n)])
    return np.linalg.eigvalsh(0.5 * (H + H.T))[-1]


def test_min_sharpness_along_gl_is_two_sigma_one(rng):
    q, loss, P, s, Qt = _minimum(rng)
    G = np.array([[2.0, 0.5], [0.0, 0.7]])
    U, V = P * np.sqrt(s) @ G, Qt.T * np.sqrt(s) @ np.linalg.inv(G).T
    theta = q.spec.pack(U=U, V=V)
    # before: |U|_2^2 + |V|_2^2, by the closed form and by finite differences
    closed = np.linalg.norm(U, 2) ** 2 + np.linalg.norm(V, 2) ** 2
    assert _fd_sharpness(q, loss, theta) == pytest.approx(closed, rel=1e-6)
    res = teleport(q, loss, theta, objective="sharpness", mode="min", radius=3.0, starts=1)
    assert res.before == pytest.approx(closed, rel=1e-10)
    assert res.after == pytest.approx(2 * s[0], rel=1e-6)
    assert _fd_sharpness(q, loss, res.theta) == pytest.approx(2 * s[0], rel=1e-5)
    assert res.invariance_error < 1e-12 and not res.at_bound
    # the balanced factors are the flattest point: the closed form agrees there
    balanced = q.spec.pack(U=P * np.sqrt(s), V=Qt.T * np.sqrt(s))
    assert _fd_sharpness(q, loss, balanced) == pytest.approx(2 * s[0], rel=1e-5)


def test_max_grad_norm_off_a_minimum_is_bounded_and_keeps_the_loss(rng):
    q = paramgeo.get("uvt", m=3, n=3, r=2)
    Y = rng.standard_normal((3, 3))
    loss = CallableLoss(lambda b: 0.5 * np.sum((b - Y.ravel()) ** 2), m=9)
    theta = q.random_point(rng)
    small = teleport(q, loss, theta, objective="grad_norm", mode="max", radius=0.5, starts=1)
    large = teleport(q, loss, theta, objective="grad_norm", mode="max", radius=1.5, starts=1)
    assert small.before < small.after < large.after
    assert large.at_bound  # unbounded along the orbit: the optimum sits on the bound
    assert large.loss_after == pytest.approx(large.loss_before, rel=1e-10)
    assert "search bound" in str(large)


def test_callable_objective_and_errors(rng):
    h = paramgeo.get("hadamard", p=2)
    loss = CallableLoss(lambda b: 0.5 * np.sum((b - 1.0) ** 2), m=2)
    theta = np.array([2.0, 1.0, 0.5, 1.0])
    # the balanced point of the torus minimises |theta|^2: u_i^2 = v_i^2 = |u_i v_i|
    res = teleport(h, loss, theta, objective=lambda t: float(t @ t), mode="min", radius=2.0)
    assert res.after == pytest.approx(2 * np.sum(np.abs(theta[:2] * theta[2:])), rel=1e-6)
    with pytest.raises(ArgumentError, match="objective must be one of"):
        teleport(h, loss, theta, objective="curvature")
    with pytest.raises(ArgumentError, match="mode"):
        teleport(h, loss, theta, mode="up")


def test_expm_small_against_scipy(rng):
    for scale in (0.1, 1.0, 10.0):
        X = scale * rng.standard_normal((3, 3))
        assert np.allclose(expm_small(X), expm(X), rtol=1e-12, atol=1e-12 * np.exp(
            np.linalg.norm(X, 2)))


def test_teleporter_inside_gradient_descent_speeds_it_up():
    """Gradient descent on (1/2)|U V^T - Y|^2 from a small initialisation, plain and with a
    teleportation to the largest gradient norm (radius 0.5) every 15 steps through the
    descent's callback, each against a hand-written loop (the same steps, teleport called at
    the same steps); the teleported run reaches the loss level in fewer steps."""
    from paramgeo.flows import gradient_descent

    rng = np.random.default_rng(0)
    q = paramgeo.get("uvt", m=5, n=4, r=2)
    Y = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 4))
    loss = CallableLoss(lambda b: 0.5 * np.sum((b - Y.ravel()) ** 2), m=20)
    vg = value_and_grad(q, loss)
    theta0 = 0.05 * rng.standard_normal(q.n)
    lr, level, every, radius = 0.02, 1.0, 15, 0.5

    def by_hand(moves):
        theta = theta0.copy()
        for k in range(1, 201):
            theta = theta - lr * vg(theta)[1]
            if moves and k % every == 0:
                t = teleport(q, loss, theta, radius=radius, starts=1)
                assert abs(t.loss_after - t.loss_before) <= 1e-10 * t.loss_before
                assert t.after > t.before  # a larger gradient norm, the same loss
                theta = t.theta
            if vg(theta)[0] < level:
                return k, theta
        return None, theta

    plain_steps, plain_theta = by_hand(False)
    moved_steps, moved_theta = by_hand(True)
    plain = gradient_descent(q, loss, theta0, 200, lr, stop_loss=level)
    tele = Teleporter(q, loss, every=every, radius=radius)
    moved = gradient_descent(q, loss, theta0, 200, lr, stop_loss=level, callback=tele)
    assert plain.times[-1] == plain_steps and np.allclose(plain.thetas[-1], plain_theta)
    assert moved.times[-1] == moved_steps and np.allclose(moved.thetas[-1], moved_theta)
    assert [t for t, _, _ in tele.moves] == list(range(every, moved_steps + 1, every))
    assert all(after > before for _, before, after in tele.moves)
    assert moved_steps < plain_steps


def test_teleporter_refuses_bad_arguments():
    q = paramgeo.get("uvt", m=3, n=2, r=1)
    loss = CallableLoss(lambda b: 0.5 * np.sum(b ** 2), m=6)
    with pytest.raises(ArgumentError, match="every"):
        Teleporter(q, loss, every=0)
    with pytest.raises(ArgumentError, match="objective"):
        Teleporter(q, loss, every=2, objective="steepness")


def test_flow_command_teleports_every_k_steps(tmp_path):
    """paramgeo flow --teleport-every K is gradient descent with a Teleporter callback (the
    same final predictor as the Python call), and is refused with the flow method."""
    import json

    from click.testing import CliRunner

    from paramgeo.cli import main
    from paramgeo.flows import gradient_descent

    rng = np.random.default_rng(0)
    q = paramgeo.get("uvt", m=3, n=2, r=2)
    A = np.eye(6).reshape(6, 3, 2)
    y = rng.standard_normal(6)
    theta0 = 0.1 * rng.standard_normal(q.n)
    np.savez(tmp_path / "d.npz", A=A, y=y, theta0=theta0)
    args = ["flow", "uvt", "-p", "m=3", "-p", "n=2", "-p", "r=2", "--data",
            str(tmp_path / "d.npz"), "--steps", "30", "--lr", "0.05", "--teleport-every", "10",
            "--teleport-radius", "0.5", "--json"]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    # the CLI's squared loss with A = I: (1/(2N)) sum_i (beta_i - y_i)^2, N = 6
    mean = CallableLoss(lambda b: np.sum((b - y) ** 2) / 12, m=6)
    traj = gradient_descent(q, mean, theta0, 30, 0.05,
                            callback=Teleporter(q, mean, every=10, radius=0.5))
    assert np.allclose(json.loads(out.output)["final_predictor"],
                       traj.final_predictor.ravel(), atol=1e-8)
    bad = CliRunner().invoke(main, args[:10] + ["--method", "flow", "--teleport-every", "10"])
    assert bad.exit_code == 2 and "--teleport-every: only for --method gd" in bad.output
