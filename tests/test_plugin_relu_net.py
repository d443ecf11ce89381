"""The relu-net plugin: closed forms off the kinks, rescaling/permutation symmetry, the kink
report of the engines, and the exact count of activation patterns.

Oracles: autograd (which differentiates np.maximum) and central finite differences for the
closed-form derivatives; the forward written out neuron by neuron; explicit rescalings
(t w, t b, a / t) and neuron permutations for the invariance; the rank bound
sum_j (min(|S_j|, d + 1) + k - 1) derived from the per-neuron span; Cover's formula and, for
d = 1, the hand count 2N of threshold dichotomies on a line; random (w, b) for the patterns.
The mean-field stationary measure of noisy GD with weight decay (the Newton fixed point on a
sphere grid) against the closed form for one input, the arc-cosine-kernel linear response at
large temperature, the noisy gradient descent itself at width 200 (predictor and mode masses;
d = 2 and d = 1),
i.i.d. neurons drawn from the measure, and, as T -> 0, the cutting-plane group-lasso dual
checked by strong duality against a proximal-gradient primal on its support.

Covers: ``paramgeo.cli``, ``paramgeo.critical.classification``, ``paramgeo.flows.mean_field``,
``paramgeo.geometry.kinks``, ``paramgeo.reports.description``, ``paramgeo.reports.testing``,
``paramgeo.symmetry.discovery``, ``paramgeo_plugins.relu_net``, ``paramgeo_plugins.uvt``.
"""

import json
import warnings
from math import comb

import numpy as np
import pytest
from click.testing import CliRunner

import paramgeo
from paramgeo.geometry.kinks import kink_report
from paramgeo.cli import main
from paramgeo.critical import classify
from paramgeo.reports.description import describe
from paramgeo.symmetry import discover
from paramgeo.errors import NumericalDoubtWarning
from paramgeo.reports.testing import assert_closed_forms
from paramgeo.flows import mean_field

ReluNet = paramgeo.get_class("relu-net")


def on_kink(p, rng, neuron=1, sample=4):
    """A random point moved onto the kink of ``neuron`` at input ``sample`` (b = -w . x)."""
    blocks = p.spec.unpack(ReluNet.random_point(p, rng))
    W, b, a = (np.array(blocks[k]) for k in ("W", "b", "a"))
    b[neuron] = -W[neuron] @ p.X[sample]
    return p.point(W, b, a)


def test_forward_neuron_by_neuron(rng):
    p = paramgeo.get("relu-net", d=3, width=4, outputs=2, n_inputs=5)
    theta = p.random_point(rng)
    blocks = p.spec.unpack(theta)
    W, b, a = blocks["W"], blocks["b"], blocks["a"]
    expected = np.array([[sum(a[j, c] * max(W[j] @ x + b[j], 0.0) for j in range(4))
                          for c in range(2)] for x in p.X])
    np.testing.assert_allclose(p.forward(theta), expected, atol=1e-13)
    np.testing.assert_array_equal(p.X, np.random.default_rng(0).standard_normal((5, 3)))


@pytest.mark.parametrize("sizes", [dict(), dict(d=3, width=5, outputs=1, n_inputs=7)])
def test_closed_forms_match_autograd_and_finite_differences_off_kinks(rng, sizes):
    p = paramgeo.get("relu-net", **sizes)
    for _ in range(3):
        theta = p.random_point(rng)
        assert kink_report(p, theta).closest > 1e-4  # off the kinks
        assert_closed_forms(p, theta, rng)


def test_explicit_rescalings_and_permutations_leave_phi_invariant(rng):
    p = paramgeo.get("relu-net", width=4)
    theta = p.random_point(rng)
    blocks = p.spec.unpack(theta)
    W, b, a = (np.array(blocks[k]) for k in ("W", "b", "a"))
    t = np.exp(rng.uniform(-1, 1, 4))
    scaled = p.point(W * t[:, None], b * t, a / t[:, None])
    np.testing.assert_allclose(p.forward(scaled), p.forward(theta), atol=1e-12)
    perm = np.array([2, 0, 3, 1])
    np.testing.assert_allclose(p.forward(p.point(W[perm], b[perm], a[perm])), p.forward(theta),
                               atol=1e-12)
    # a negative t is not a symmetry (relu is only positively homogeneous)
    flipped = p.point(-W, -b, -a)
    assert not np.allclose(p.forward(flipped), p.forward(theta))
    # generators are (w_j, b_j, -a_j) per neuron and lie in ker J
    G = p.symmetry().generators(theta)
    for j in range(4):
        incoming, outgoing = p.neuron_indices(j)
        col = np.zeros(p.n)
        col[incoming], col[outgoing] = theta[incoming], -theta[outgoing]
        np.testing.assert_allclose(G[:, j], col)
    assert np.abs(p.jacobian(theta) @ G).max() < 1e-12


def test_describe_symmetry_dimension_is_the_width_and_discover_agrees():
    p = paramgeo.get("relu-net", width=4, outputs=1)
    assert describe(p).symmetry == {"name": "(R_{>0})^4 x S_4", "dim": 4}
    p = paramgeo.get("relu-net", width=3, outputs=1)
    found = discover(p, discrete=False)
    assert found.dim == 3 and found.orbit_dim == 3 and "torus of rescalings" in found.algebra
    res = CliRunner().invoke(main, ["describe", "relu-net", "--json"], catch_exceptions=False)
    out = json.loads(res.output)
    # N k = 20 >= 12: every neuron active on >= d + 1 inputs reaches the quotient dimension
    assert out["symmetry"]["dim"] == 3 and out["quotient_dim"] == 15 - 3 == out["generic_rank"]


def test_rank_is_bounded_by_the_per_neuron_spans(rng):
    """rank J <= sum_j (min(|S_j|, d + 1) + k - 1) over neurons with S_j nonempty, with
    equality at generic points when N k is large enough (the spans are independent)."""
    p = paramgeo.get("relu-net", d=2, width=3, outputs=2, n_inputs=12)
    for _ in range(5):
        theta = p.random_point(rng)
        blocks = p.spec.unpack(theta)
        active = (p.X @ blocks["W"].T + blocks["b"] > 0).sum(axis=0)
        bound = sum(min(s, 3) + 2 - 1 for s in active if s > 0)
        assert paramgeo.rank_at(p, theta).rank == min(bound, p.m)


def test_kinks_are_reported_not_decided(rng):
    p = paramgeo.get("relu-net")
    theta = on_kink(p, rng)
    labels, dist = p.kinks(theta)
    assert len(labels) == dist.size == p.sizes["n_inputs"] * p.sizes["width"]
    assert labels[int(np.argmin(dist))] == "neuron 1 at input 4" and dist.min() < 1e-15
    # the distance is invariant under the neuron rescalings
    g = p.symmetry().random_element(rng)
    np.testing.assert_allclose(p.kinks(p.symmetry().act(g, theta))[1].min(), 0.0, atol=1e-15)
    # phi is really nonsmooth there: one-sided slopes along b_1 differ by a_1 at input 4
    e = np.zeros(p.n)
    e[p.spec.slices["b"].start + 1] = 1.0
    h = 1e-6
    right = (p.forward(theta + h * e) - p.forward(theta)) / h
    left = (p.forward(theta) - p.forward(theta - h * e)) / h
    np.testing.assert_allclose((right - left)[4], p.spec.unpack(theta)["a"][1], atol=1e-6)
    with pytest.warns(NumericalDoubtWarning, match="ON A KINK"):
        decision = paramgeo.rank_at(p, theta)
    assert decision.kinks.on_kink and decision.kinks.kinks == ("neuron 1 at input 4",)
    c = classify(p, theta)
    assert c.verdict == "kink" and c.causes == () and "no rank decision" in c.explanation
    # off the kink (a random point) no flag and no warning
    free = p.random_point(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalDoubtWarning)
        assert not paramgeo.rank_at(p, free).kinks.on_kink
    assert classify(p, free).verdict in ("regular", "critical")
    # smooth plugins carry no kink report
    assert paramgeo.rank_at(paramgeo.get("uvt"), np.ones(14)).kinks is None


def test_cli_reports_the_kink(tmp_path, rng):
    p = paramgeo.get("relu-net")
    path = tmp_path / "kink.npy"
    np.save(path, on_kink(p, rng))
    res = CliRunner().invoke(main, ["critical", "relu-net", "--at", str(path), "--json"])
    out = json.loads(res.output)
    assert res.exit_code == 0 and out["verdict"] == "kink"
    assert out["kinks"]["kinks"] == ["neuron 1 at input 4"]
    res = CliRunner().invoke(main, ["rank", "relu-net", "--at", str(path)])
    assert "Warning: " in res.stderr and "one-sided Jacobian" in res.stderr  # the CLI's line
    assert "ON A KINK: 1 of 30 nonsmooth conditions met (neuron 1 at input 4)" in res.output


def test_contract_flags_kinks_at_random_points(rng):
    """A plugin whose random_point sits on a kink fails the ``kinks`` property."""

    class OnKink(ReluNet):
        name = "relu-on-kink"

        def random_point(self, g):
            return on_kink(self, g, neuron=0, sample=2)

    report = paramgeo.check(OnKink(d=1, width=1, outputs=1, n_inputs=4))
    assert not report.passed and "kinks" in {i.property for i in report.failures()}
    assert paramgeo.check(ReluNet(d=1, width=1, outputs=1, n_inputs=4)).passed


@pytest.mark.parametrize("d,N", [(1, 5), (2, 6), (2, 9), (3, 7), (2, 3), (3, 2)])
def test_activation_patterns_count_is_covers(d, N):
    patterns = ReluNet(d=d, n_inputs=N).activation_patterns()
    assert len(set(patterns)) == len(patterns) == 2 * sum(comb(N - 1, k) for k in range(d + 1))


def test_activation_patterns_on_a_line_and_by_sampling(rng):
    # d = 1: 1[w x + b > 0] selects the points above or below a threshold: 2N patterns
    x = np.array([[-1.5], [-0.2], [0.3], [1.1], [2.0]])
    expected = {tuple(int(i >= c) for i in range(5)) for c in range(6)}
    expected |= {tuple(1 - v for v in pat) for pat in expected}
    assert set(ReluNet(X=x).activation_patterns()) == expected and len(expected) == 10
    # every pattern of random (w, b) is among the enumerated ones
    p = ReluNet(d=2, n_inputs=6)
    exact = set(p.activation_patterns())
    U = rng.standard_normal((20000, 3))
    seen = {tuple(r) for r in (np.hstack([p.X, np.ones((6, 1))]) @ U.T > 0).T.astype(int)}
    assert seen <= exact and len(seen) >= 0.8 * len(exact)


def test_inputs_not_in_general_position_are_refused():
    X = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [0.0, 1.0]])  # three on a line
    with pytest.raises(paramgeo.ShapeError, match="general position"):
        ReluNet(X=X).activation_patterns()


def test_user_inputs_keyword_and_errors(rng):
    X = rng.standard_normal((7, 3))
    p = ReluNet(X=X, width=2)
    assert (p.sizes["n_inputs"], p.sizes["d"], p.predictor_shape) == (7, 3, (7, 2))
    with pytest.raises(paramgeo.ShapeError, match="drop n_inputs, d"):
        ReluNet(X=X, d=2)
    with pytest.raises(paramgeo.ShapeError, match="finite 2-d array"):
        ReluNet(X=np.ones(3))


# The mean-field stationary measure of noisy GD with weight decay (paramgeo.flows.mean_field),
# on the inputs of examples/relu_width_collapse.py (d = 2, N = 6, k = 3).

def _collapse_data():
    data = np.random.default_rng(0)
    return data.standard_normal((6, 2)), data.standard_normal((6, 3))


def test_mean_field_one_input_is_the_closed_form():
    x, y = np.array([0.3, -0.5]), np.array([0.7, -0.2, 0.4])
    for T in (1e-3, 1e-5):
        m = mean_field.stationary_measure(x[None], y[None], width=100, tau=T / 100,
                                          weight_decay=0.1, n_grid=50_000)
        exact = mean_field.single_point_residual(x, y, width=100, tau=T / 100,
                                                 weight_decay=0.1)
        np.testing.assert_allclose(m.residual.ravel(), exact, rtol=1e-5)
        # one mode, at the lifted input's direction, active on it
        assert m.n_modes == 1 and m.mode_patterns == [(1,)]
        x1 = np.append(x, 1)
        np.testing.assert_allclose(m.modes[0], x1 / np.linalg.norm(x1), atol=1e-8)


def test_mean_field_large_temperature_is_the_arccos_kernel_response():
    X, Y = _collapse_data()
    gaps = []
    for T in (1e2, 1e3):
        m = mean_field.stationary_measure(X, Y, width=10, tau=T / 10, weight_decay=0.1,
                                          n_grid=50_000)
        lin = mean_field.linear_response(X, Y, width=10, tau=T / 10, weight_decay=0.1)
        gaps.append(np.abs(m.residual - lin).max() / np.abs(lin).max())
    # the neglected terms are O(|g|^2 / lambda^2) = O(T^-2) relative
    assert gaps[0] < 2e-3 and gaps[1] < gaps[0] / 30


def test_mean_field_is_the_wide_limit_of_noisy_gd():
    """Second route: the noisy gradient descent itself at width 200, time-averaged, against the
    fixed point at the same effective temperature T = h tau; the masses of the modes' nearest-
    direction cells among the recorded neurons against the measure's."""
    X, Y = _collapse_data()
    h, T, lam = 200, 0.1, 0.1
    m = mean_field.stationary_measure(X, Y, width=h, tau=T / h, weight_decay=lam,
                                      n_grid=50_000)
    run = mean_field.particle_langevin(X, Y, width=h, tau=T / h, weight_decay=lam,
                                       steps=20_000, lr=0.1, rng=np.random.default_rng(1))
    assert np.abs(m.predictor - run.predictor).max() < 0.03 * np.abs(m.predictor).max()
    cells = np.bincount(np.argmax(m.directions @ m.modes.T, 1), weights=m.mass,
                        minlength=m.n_modes)
    seen = np.bincount(np.argmax(run.directions @ m.modes.T, 1), minlength=m.n_modes)
    assert np.abs(cells - seen / len(run.directions)).max() < 0.03
    # i.i.d. neurons drawn from the measure reproduce its predictor h E[a relu(u . x~)]
    W, b, a = mean_field.sample_neurons(m, X, 200_000, np.random.default_rng(2))
    f = h * (np.maximum(X @ W.T + b, 0) @ a) / len(a)
    assert np.abs(f - m.predictor).max() < 0.03 * np.abs(m.predictor).max()


def test_mean_field_zero_temperature_modes_bound_and_patterns():
    """Claims (a)-(c) on the stationary measure: finitely many modes, at most 2P - 1, with
    distinct ternary patterns; as T -> 0 the fixed point tends to the group-lasso dual r*, and
    strong duality (a second route) holds on the limit's support directions."""
    X, Y = _collapse_data()
    lam, P = 1e-2, len(ReluNet(X=X, width=1, outputs=3).activation_patterns())
    limit = mean_field.zero_temperature_limit(X, Y, weight_decay=lam)
    gaps = []
    for T in (1e-2, 1e-4):
        m = mean_field.stationary_measure(X, Y, width=1, tau=T, weight_decay=lam,
                                          n_grid=50_000)
        assert 1 <= m.n_modes <= 2 * P - 1 and m.patterns_unique
        assert m.gap.min() > 0 and m.grid_peaks >= m.n_modes
        # second route for the modes: the grid's own strict local maxima of the density; every
        # exact mode has one within a few spacings (the others lie on ridges, below a mode)
        V, _, nb = mean_field.sphere_grid(2, 50_000)
        peaks = V[m.density > m.density[nb].max(1)]
        near = np.arccos(np.clip(m.modes @ peaks.T, -1, 1)).min(1)
        assert near.max() < 3 * m.spacing
        gaps.append(np.abs(m.residual - limit.residual).max())
    assert gaps[1] < 0.01 < gaps[0]
    assert 1 <= limit.support <= len(limit.modes) <= 2 * P - 1
    assert len(set(limit.mode_patterns)) == len(limit.modes)
    X1 = np.hstack([X, np.ones((6, 1))])
    for v, pat in zip(limit.modes, limit.mode_patterns):  # a 0 is a hyperplane through x~_i
        z = X1 @ v
        assert all((s == 0 and abs(t) < 1e-9) or (s == np.sign(t) and abs(t) > 1e-9)
                   for s, t in zip(pat, z))
    # the primal group lasso on the support: min (1/2N)|F beta - Y|^2 + lam sum |beta_m|
    F = np.maximum(X1 @ limit.modes[:limit.support].T, 0)
    beta = np.zeros((limit.support, 3))
    step = 6 / np.linalg.norm(F, 2) ** 2
    for _ in range(20_000):
        z = beta - step * F.T @ (F @ beta - Y) / 6
        shrink = 1 - step * lam / np.maximum(np.linalg.norm(z, axis=1), 1e-300)
        beta = z * np.maximum(0, shrink)[:, None]
    primal = np.sum((F @ beta - Y) ** 2) / 12 + lam * np.linalg.norm(beta, axis=1).sum()
    r = limit.residual
    dual = -(np.sum(r * Y) + 0.5 * np.sum(r * r)) / 6
    assert abs(primal - dual) < 1e-7 * abs(dual) + 1e-10
    np.testing.assert_allclose(F @ beta, limit.predictor, atol=1e-5)


def test_mean_field_on_a_line_is_the_wide_limit_of_noisy_gd():
    """d = 1 (the circle of directions): the fixed point against noisy GD at width 200, and the
    modes' bound and distinct ternary patterns (N = 5: P = 10)."""
    data = np.random.default_rng(3)
    X, Y = data.standard_normal((5, 1)), data.standard_normal((5, 2))
    h, tau, lam = 200, 1e-2 / 200, 0.05
    m = mean_field.stationary_measure(X, Y, width=h, tau=tau, weight_decay=lam, n_grid=20_000)
    run = mean_field.particle_langevin(X, Y, width=h, tau=tau, weight_decay=lam, steps=20_000,
                                       lr=0.1, rng=np.random.default_rng(1))
    assert np.abs(m.predictor - run.predictor).max() < 0.01 * np.abs(m.predictor).max()
    assert 1 <= m.n_modes <= 2 * 10 - 1 and m.patterns_unique
