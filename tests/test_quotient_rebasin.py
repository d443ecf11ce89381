"""Git Re-Basin's 1-2-2-1 deep linear counterexample (Ainsworth, Hayase, Srinivasa 2023;
epsilon = 0.1) on a pair reconstructed from the numbers the paper quotes, and what align over
the whole GL(2) x GL(2) gives on it, against a reduced problem solved by a second route.

Covers: ``paramgeo.quotient.alignment``, ``paramgeo_plugins.deep_linear``.
"""

import itertools

import numpy as np
from scipy.optimize import minimize

import paramgeo
from paramgeo.quotient import align

EPS = 0.1


def _pair():
    p = paramgeo.get("deep-linear", widths="1,2,2,1")
    A = p.spec.pack(W1=np.array([[1.0], [1 + EPS]]), W2=np.diag([1.0, EPS]),
                    W3=np.array([[1.0, 0.0]]))
    B = p.spec.pack(W1=np.array([[1.0], [1 + EPS]]), W2=np.diag([0.0, 1.0]),
                    W3=np.array([[0.0, 1.0]]))
    return p, A, B


def test_weight_matching_numbers_of_the_paper():
    """Weight matching's objective sum_l <W_l^A, P_l W_l^B P_{l-1}^T> for the four pairs of
    hidden-unit permutations, by the layer formula and by (|A|^2 + |B|^2 - |A - P.B|^2) / 2
    through the group's action; the merged midpoints through phi and by the layer product."""
    p, A, B = _pair()
    G = p.symmetry()
    f = lambda t: float(p.forward_flat(t)[0])  # noqa: E731
    a, M, c = np.array([1, 1 + EPS]), np.diag([1, EPS]), np.array([1.0, 0.0])
    b, N, d = np.array([1, 1 + EPS]), np.diag([0.0, 1.0]), np.array([0.0, 1.0])
    I, S = np.eye(2), np.eye(2)[::-1]
    rows = {}
    for P1, P2 in itertools.product((I, S), (I, S)):
        layers = a @ (P1 @ b) + np.sum(M * (P2 @ N @ P1.T)) + c @ (P2 @ d)
        moved = G.act((P1.T, P2.T), B)  # B -> (P1 W1, P2 W2 P1^T, W3 P2^T)
        via_distance = (A @ A + B @ B - np.sum((A - moved) ** 2)) / 2
        assert abs(layers - via_distance) < 1e-12
        product = (c + P2 @ d) @ (M + P2 @ N @ P1.T) @ (a + P1 @ b) / 8
        assert abs(f((A + moved) / 2) - product) < 1e-12
        rows[(P1[0, 0], P2[0, 0])] = (layers, f((A + moved) / 2), np.linalg.norm(A - moved))
    assert abs(rows[(1, 1)][0] - 2.31) < 1e-12 and abs(rows[(0, 0)][0] - 4.2) < 1e-12
    assert max(rows, key=lambda k: rows[k][0]) == (0, 0)  # weight matching swaps both layers
    assert abs(rows[(1, 1)][1] - 0.5525) < 1e-12 and abs(rows[(0, 0)][1] - 1.05) < 1e-12
    assert abs(f(A) - 1.0) < 1e-15 and abs(f(B) - (1 + EPS)) < 1e-15


def _reduced_minimum():
    """The GL(2) x GL(2) orbit of B is {(u, x y^T, w) : y.u = 1 + eps, w.x = 1}; minimising
    |A - .|^2 over u and w in closed form leaves |M - x y^T|^2 + (1 - c.x)^2 / |x|^2 +
    (1 + eps - y.a)^2 / |y|^2 over (x, y), minimised by BFGS from random starts."""
    a, M, c = np.array([1, 1 + EPS]), np.diag([1, EPS]), np.array([1.0, 0.0])

    def F(v):
        x, y = v[:2], v[2:]
        return (np.sum((M - np.outer(x, y)) ** 2) + (1 - c @ x) ** 2 / (x @ x)
                + (1 + EPS - y @ a) ** 2 / (y @ y))

    rng = np.random.default_rng(1)
    best = min((minimize(F, 2 * rng.standard_normal(4), method="BFGS",
                         options={"gtol": 1e-12}) for _ in range(40)), key=lambda r: r.fun)
    x, y = best.x[:2], best.x[2:]
    w = c + (1 - c @ x) * x / (x @ x)
    u = a + (1 + EPS - y @ a) * y / (y @ y)
    midpoint = (c + w) @ (M + np.outer(x, y)) @ (a + u) / 8
    return float(np.sqrt(best.fun)), float(midpoint)


def test_align_over_gl_against_the_reduced_problem():
    p, A, B = _pair()
    f = lambda t: float(p.forward_flat(t)[0])  # noqa: E731
    al = align(p, A, B)
    distance, midpoint = _reduced_minimum()
    assert abs(al.distance - distance) < 1e-7
    assert abs(f((A + al.aligned) / 2) - midpoint) < 1e-7
    # below the best permutation (weight matching's swap, distance sqrt(0.03))
    assert al.distance < np.sqrt(0.03) - 0.06
    # still on the orbit of B: the middle weight keeps rank 1 and phi its value
    W2 = p.spec.unpack(al.aligned)["W2"]
    assert np.linalg.svd(W2, compute_uv=False)[-1] < 1e-8
    assert abs(f(al.aligned) - (1 + EPS)) < 1e-10 and al.invariance_error < 1e-10
    assert not al.certificate.exact
