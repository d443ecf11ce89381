"""paramgeo.quotient.alignment: each solver against an independent route (brute force over the
group, scipy optimisers from random starts, planted pairs with a known element).

Covers: ``paramgeo.quotient.alignment``, ``paramgeo.symmetry.actions``, ``paramgeo.symmetry.groups``,
``paramgeo_plugins.deep_linear``, ``paramgeo_plugins.hadamard``, ``paramgeo_plugins.relu_net``,
``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

import paramgeo
from paramgeo.errors import ArgumentError, ShapeError
from paramgeo.quotient import align


def test_uut_reflection_aligns_to_zero_with_the_reflection(rng):
    p = paramgeo.get("uut", d=4, r=2)
    U = rng.standard_normal((4, 2))
    V = U @ np.diag([1.0, -1.0])
    a = align(p, U.ravel(), V.ravel())
    assert a.distance < 1e-12
    assert np.allclose(a.g, np.diag([1.0, -1.0]), atol=1e-10)
    assert a.certificate.exact and a.isometric
    assert a.naive_distance > 1.0
    assert a.invariance_error < 1e-12


def test_uut_procrustes_against_brute_force_over_o2(rng):
    """min over O(2) by a 1-D search over rotations, with and without a reflection."""
    p = paramgeo.get("uut", d=3, r=2)
    for _ in range(10):
        U, V = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))

        def cost(t, refl):
            R = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) @ np.diag(refl)
            return np.sum((U - V @ R) ** 2)

        brute = np.inf
        for refl in ([1.0, 1.0], [1.0, -1.0]):
            grid = np.linspace(0, 2 * np.pi, 721)
            t0 = grid[np.argmin([cost(t, refl) for t in grid])]
            res = minimize_scalar(lambda t: cost(t, refl), bracket=(t0 - 0.01, t0, t0 + 0.01))
            brute = min(brute, res.fun)
        a = align(p, U.ravel(), V.ravel())
        assert a.distance ** 2 == pytest.approx(brute, abs=1e-9)
        assert np.allclose(a.g.T @ a.g, np.eye(2), atol=1e-12)


def test_uvt_planted_pair_aligns_at_g0_inverse(rng):
    q = paramgeo.get("uvt", m=5, n=4, r=3)
    U, V = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    G0 = rng.standard_normal((3, 3))
    t1 = q.spec.pack(U=U, V=V)
    t2 = q.spec.pack(U=U @ G0, V=V @ np.linalg.inv(G0).T)
    a = align(q, t1, t2)
    assert a.distance < 1e-10
    assert np.allclose(a.g, np.linalg.inv(G0), atol=1e-8)
    assert a.certificate.exact and not a.isometric


def test_uvt_random_pair_no_worse_than_random_restarts_and_bound_holds(rng):
    q = paramgeo.get("uvt", m=4, n=3, r=2)
    t1, t2 = q.random_point(rng), q.random_point(rng)
    a = align(q, t1, t2)

    def f(vec):
        g = vec.reshape(2, 2)
        if abs(np.linalg.det(g)) < 1e-8:
            return 1e6
        return np.sum((t1 - q.symmetry().act(g, t2)) ** 2)

    others = [minimize(f, rng.standard_normal(4), method="Nelder-Mead",
                       options=dict(xatol=1e-10, fatol=1e-12, maxiter=4000)).fun
              for _ in range(8)]
    assert a.distance ** 2 <= min(others) + 1e-7
    c = a.certificate
    assert 0 <= c.lower_bound <= a.distance + 1e-12
    assert c.gap == pytest.approx(a.distance - c.lower_bound)


def test_hadamard_torus_planted_and_against_one_dimensional_search(rng):
    h = paramgeo.get("hadamard", p=4)
    t = h.random_point(rng)
    c = np.array([-2.0, 0.5, 3.0, -0.25])
    a = align(h, t, h.symmetry().act(c, t))
    assert a.distance < 1e-12 and a.certificate.exact
    assert np.allclose(a.g, 1 / c)
    # a random pair: each coordinate pair (u_i, v_i) separately, c over R\{0} by a log search
    t1, t2 = h.random_point(rng), h.random_point(rng)
    a = align(h, t1, t2)
    total = 0.0
    for i in range(4):
        x, y = t1[[i, 4 + i]], t2[[i, 4 + i]]
        total += min(minimize_scalar(lambda s, sg=sg: np.sum(
            (x - sg * np.array([np.exp(s), np.exp(-s)]) * y) ** 2), bounds=(-20, 20),
            method="bounded", options=dict(xatol=1e-12)).fun for sg in (1.0, -1.0))
    assert a.distance ** 2 == pytest.approx(total, abs=1e-8)


def test_relu_net_planted_permutation_and_rescaling(rng):
    r = paramgeo.get("relu-net", d=3, width=5, outputs=2)
    t = r.random_point(rng)
    G = r.symmetry()
    t2 = G.act(G.random_element(rng), t)
    a = align(r, t, t2)
    assert a.distance < 1e-10
    assert np.allclose(a.act(t2), a.aligned)
    # a random pair: the bound is a bound, and aligning never increases the distance
    b = align(r, t, r.random_point(rng))
    assert b.certificate.lower_bound <= b.distance <= b.naive_distance
    assert b.invariance_error < 1e-12


def test_deep_torch_mlp_overlapping_unit_classes(rng):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 5),
                              torch.nn.ReLU(), torch.nn.Linear(5, 2)).double()
    p = paramgeo.from_torch(net, torch.randn(6, 3, dtype=torch.float64))
    G = p.symmetry()
    assert "S_4" in G.name and "S_5" in G.name
    t = p.random_point(rng)
    t2 = G.act(G.random_element(rng), t)
    a = align(p, t, t2)
    assert a.distance < 1e-9 * np.linalg.norm(t)
    assert a.invariance_error < 1e-10


def test_sign_flips_against_enumeration(rng):
    from paramgeo.symmetry import SignedPermutationGroup

    class Flips(paramgeo.Parameterization):
        """phi = (x0 x1 x2, x1^2), invariant under the flips of (x0, x1) and of (x0, x2):
        generators with overlapping supports (the enumeration route)."""
        name = "test-flips"
        capabilities = frozenset({"symmetry"})

        def make_spec(self):
            return paramgeo.ParamSpec(x=(3,))

        def make_predictor_shape(self):
            return (2,)

        def forward(self, theta):
            import autograd.numpy as anp
            return anp.stack([theta[0] * theta[1] * theta[2], theta[1] ** 2])

        def symmetry(self):
            return SignedPermutationGroup("flips", [(np.arange(3), [-1.0, -1.0, 1.0]),
                                                    (np.arange(3), [-1.0, 1.0, -1.0])], 3)

    p = Flips()
    for _ in range(5):
        x, y = rng.standard_normal(3), rng.standard_normal(3)
        a = align(p, x, y)
        group = [np.array(s) for s in ([1, 1, 1], [-1, -1, 1], [-1, 1, -1], [1, -1, -1])]
        assert a.distance == pytest.approx(min(np.linalg.norm(x - s * y) for s in group))
        assert a.certificate.exact


def test_bad_input_is_one_clear_error():
    p = paramgeo.get("uut", d=3, r=2)
    with pytest.raises(ShapeError):
        align(p, np.ones(5), np.ones(6))
    with pytest.raises(ArgumentError, match="max_sweeps"):
        align(p, np.ones(6), np.ones(6), max_sweeps=0)


def test_relaxation_bound_below_the_enumerated_minimum(rng):
    """Two overlapping unit classes (a 2-3-3-1 layout of positions): the bound is at most the
    minimum over all 3! x 3! elements, which the weight-matching route reaches or exceeds."""
    import itertools

    from paramgeo.quotient.alignment import relaxation_bound
    from paramgeo.symmetry import UnitPermutationGroup

    # layer 1 unit i: W1[i, :2] at 2i, 2i+1; W2[:, i] at 6 + 3j + i; layer 2 unit j: W2[j, :]
    # at 6 + 3j + (0, 1, 2) and w3[j] at 15 + j
    c1 = np.array([[2 * i, 2 * i + 1] + [6 + 3 * j + i for j in range(3)] for i in range(3)])
    c2 = np.array([[6 + 3 * j + k for k in range(3)] + [15 + j] for j in range(3)])
    G = UnitPermutationGroup([("layer 1", c1), ("layer 2", c2)], 18)
    for _ in range(5):
        x, y = rng.standard_normal(18), rng.standard_normal(18)
        best = min(np.linalg.norm(x - G.act((np.array(p), np.array(q)), y))
                   for p in itertools.permutations(range(3))
                   for q in itertools.permutations(range(3)))
        bound = relaxation_bound(G, x, y)
        assert 0 < bound <= best + 1e-12
        assert np.linalg.norm(x - y) >= best


def test_factors_restrict_to_a_subgroup(rng):
    r = paramgeo.get("relu-net", d=2, width=3, outputs=1)
    t1, t2 = r.random_point(rng), r.random_point(rng)
    whole = align(r, t1, t2)
    perms = align(r, t1, t2, factors=[1])
    assert perms.group == "S_3" and perms.isometric and not whole.isometric
    assert whole.distance <= perms.distance + 1e-12
    # the certificate and the invariance check wait until read, then stay
    assert "certificate" not in perms.__dict__ and "invariance_error" not in perms.__dict__
    assert perms.invariance_error < 1e-12 and perms.certificate.exact
    assert perms.certificate is perms.certificate and "invariance_error" in perms.__dict__
    assert perms.to_dict()["certificate"]["exact"] is True
    with pytest.raises(ArgumentError, match="factors"):
        align(r, t1, t2, factors=[5])


def test_deep_linear_gl_factors_planted_pair_exact(rng):
    """GL(2) x GL(2) share the middle weights: the joint refinement reaches the orbit."""
    p = paramgeo.get("deep-linear", widths="1,2,2,1")
    G = p.symmetry()
    for _ in range(3):
        t = p.random_point(rng)
        a = align(p, t, G.act(G.random_element(rng), t))
        assert a.distance < 1e-10 and a.certificate.exact
        assert "jointly" in a.certificate.method
        assert np.allclose(p.forward_flat((t + a.aligned) / 2), p.forward_flat(t))


def test_relaxation_bound_of_a_positive_torus_below_the_searched_minimum(rng):
    from paramgeo.quotient.alignment import relaxation_bound
    from paramgeo.symmetry import ScalingTorus

    T = ScalingTorus(np.array([[1, -1, 0, 0], [0, 0, 1, 0]]), signed=False)
    for _ in range(20):
        x, y = rng.standard_normal(4), rng.standard_normal(4)
        best = sum(minimize_scalar(lambda s, i=i: np.sum(
            (x[idx] - y[idx] * np.exp(s * e)) ** 2), bounds=(-30, 30), method="bounded").fun
            for i, (idx, e) in enumerate(((np.array([0, 1]), np.array([1, -1])),
                                          (np.array([2]), np.array([1])))))
        best += (x[3] - y[3]) ** 2
        bound = relaxation_bound(T, x, y)
        assert bound ** 2 <= best + 1e-9
        assert bound ** 2 >= (x[3] - y[3]) ** 2 - 1e-12  # the fixed entry always counts
