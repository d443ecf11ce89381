"""Exact learning coefficients: every case of Aoyagi-Watanabe, Aoyagi's deep linear formula
against it at two layers, the regular case, normal crossings and the plugin capability.

Covers: ``paramgeo.llc.estimate``, ``paramgeo.llc.exact``, ``paramgeo.losses.predictor``,
``paramgeo_plugins.deep_diagonal``, ``paramgeo_plugins.deep_linear``,
``paramgeo_plugins.hadamard``, ``paramgeo_plugins.uut``, ``paramgeo_plugins.uvt``.
"""

import itertools
import warnings

import numpy as np
import pytest
import sympy

import paramgeo
from paramgeo.errors import NotProvidedError, SizeError
from paramgeo.llc import (LLCWarning, deep_linear_network, estimate_llc,
                          exact_learning_coefficient, monomial, normal_crossing_sum,
                          reduced_rank_regression)
from paramgeo.losses import Regression


@pytest.mark.parametrize("M,H,N,r,lam,m,case", [
    (5, 3, 5, 0, 6.5, 2, "1, M + H + N + r odd"),
    (5, 4, 5, 0, 8.0, 1, "1, M + H + N + r even"),
    (4, 3, 8, 0, 6.0, 1, "2 (M + H < N + r)"),
    (8, 3, 4, 0, 6.0, 1, "3 (N + H < M + r)"),
    (3, 8, 4, 0, 6.0, 1, "4 (M + N < H + r)"),
])
def test_the_five_reference_cases(M, H, N, r, lam, m, case):
    value = reduced_rank_regression(M, H, N, r)
    assert (value.lam, value.multiplicity, value.case) == (lam, m, case)


def _by_hand(M, H, N, r):
    """Theorem 1 of Aoyagi and Watanabe (2005) written out with if/else (the second route)."""
    if M + H < N + r:
        return sympy.Rational(H * M - H * r + N * r, 2), 1
    if N + H < M + r:
        return sympy.Rational(H * N - H * r + M * r, 2), 1
    if M + N < H + r:
        return sympy.Rational(M * N, 2), 1
    odd = (M + H + N + r) % 2
    return sympy.Rational(2 * (H + r) * (M + N) - (M - N) ** 2 - (H + r) ** 2 + odd, 8), 1 + odd


GRID = [(M, H, N, r) for M, H, N in itertools.product(range(1, 6), repeat=3)
        for r in range(min(M, H, N) + 1)]


def test_piecewise_matches_the_cases_and_aoyagi_2024_on_a_grid():
    seen = set()
    for M, H, N, r in GRID:
        value = reduced_rank_regression(M, H, N, r)
        lam, m = _by_hand(M, H, N, r)
        assert value.exact == str(lam) and value.multiplicity == m
        deep = deep_linear_network((M, H, N), r)  # Aoyagi (2024) at two layers
        assert deep.exact == value.exact and deep.multiplicity == value.multiplicity
        seen.add(value.case)
    assert seen == {"1, M + H + N + r odd", "1, M + H + N + r even", "2 (M + H < N + r)",
                    "3 (N + H < M + r)", "4 (M + N < H + r)"}  # every case is exercised


def test_full_rank_truth_is_the_regular_value():
    for M, H, N in itertools.product(range(1, 6), repeat=3):
        if H <= min(M, N):
            assert reduced_rank_regression(M, H, N, H).lam == H * (M + N - H) / 2


def test_aoyagi_2024_index_sets_agree_and_deep_cases():
    from paramgeo.llc.exact import _aoyagi_lambda, _aoyagi_subsets

    for widths in itertools.product(range(1, 5), repeat=4):
        for r in range(min(widths) + 1):
            Ms = [w - r for w in widths]
            values = {_aoyagi_lambda(Ms, s, r, widths[0], widths[-1])[0]
                      for s in _aoyagi_subsets(Ms)}
            assert len(values) == 1  # the theorem's set exists and fixes lambda
            lam = values.pop()
            # lambda lies between 0 and half the dimension of the image (a rank <= min variety)
            k = min(widths)
            assert 0 <= lam <= sympy.Rational(k * (widths[0] + widths[-1] - k), 2)
    # a deep network with one narrow layer behaves like that bottleneck: widths (4, 1, 4, 4)
    # at r = 0 has Sigma = {1, 2} (M = 4, 1): lambda = 4 * 1 / 2 = 2
    assert deep_linear_network((4, 1, 4, 4)).lam == 2.0
    assert deep_linear_network((4, 1, 4, 4)).multiplicity is None


def test_bad_sizes_are_named():
    with pytest.raises(SizeError, match="true rank r=4"):
        reduced_rank_regression(3, 3, 3, 4)
    with pytest.raises(SizeError, match="at least three widths"):
        deep_linear_network((3, 3))


def test_monomial_and_sums():
    assert monomial((1, 1)) == (sympy.Rational(1, 2), 2)
    assert monomial((1, 2)) == (sympy.Rational(1, 4), 1)
    total = normal_crossing_sum([(sympy.Rational(1, 2), 2), (sympy.Rational(1, 4), 1)], "c", "f")
    assert (total.exact, total.multiplicity) == ("3/4", 2)


def test_plugins_declare_their_coefficients():
    uvt = paramgeo.get("uvt", m=5, n=4, r=3)  # output N = 5, input M = 4, hidden H = 3
    zero = np.zeros(uvt.n)
    assert exact_learning_coefficient(uvt, zero).exact == reduced_rank_regression(4, 3, 5).exact
    rng = np.random.default_rng(0)
    U, V = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    U[:, 2] = V[:, 2] = 0  # a rank-2 truth on its deepest points
    theta = np.concatenate([U.ravel(), V.ravel()])
    assert exact_learning_coefficient(uvt, theta).lam == reduced_rank_regression(4, 3, 5, 2).lam
    U[:, 2] = 1.0  # rank U = 3 > rank U V^T = 2: J rank-deficient, the fibre smooth there
    value = exact_learning_coefficient(uvt, np.concatenate([U.ravel(), V.ravel()]))
    assert value.case.startswith("smooth fibre") and value.lam == (20 - (5 - 3) * (4 - 2)) / 2
    U[:, 1:] = 0
    U[:, 1] = 1.0  # rank U = 2 of 3 columns, V and U V^T of rank 1: a singular fibre
    V[:, 1:] = 0
    with pytest.raises(NotProvidedError, match="estimate it"):
        exact_learning_coefficient(uvt, np.concatenate([U.ravel(), V.ravel()]))
    generic = uvt.random_point(rng)  # full rank truth: the regular value d / 2
    value = exact_learning_coefficient(uvt, generic)
    assert value.lam == 3 * (5 + 4 - 3) / 2 and value.multiplicity == 1
    deep = paramgeo.get("deep-linear", widths=(3, 8, 4))
    assert exact_learning_coefficient(deep, np.zeros(deep.n)).lam == 6.0


def test_regular_case_from_the_engine_for_a_plugin_without_the_capability():
    qk = paramgeo.get("uut", d=4, r=2)
    assert not qk.provides("learning_coefficient")
    value = exact_learning_coefficient(qk, qk.random_point(np.random.default_rng(1)))
    assert value.lam == paramgeo.generic_rank(qk) / 2 and value.case.startswith("regular")


def test_normal_crossings_of_diagonal_networks():
    had = paramgeo.get("hadamard", p=4)
    theta = np.array([1.0, 0.0, 0.0, 2.0, 0.5, 3.0, 0.0, 0.0])  # u, v: coordinates 2 at (0, 0)
    value = exact_learning_coefficient(had, theta)
    assert (value.lam, value.multiplicity) == (2.0, 2)
    deep = paramgeo.get("deep-diagonal", p=3, depth=3)
    w = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 2.0], [1.0, 0.0, 0.0]]).ravel()
    value = exact_learning_coefficient(deep, w)  # zero factors per coordinate: 0, 3, 2
    assert (value.lam, value.multiplicity) == (1.5, 1 + 2 + 1)
    signed = paramgeo.get("deep-diagonal", p=3, depth=3, variant="signed")
    u_v = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 1.0])  # coordinates 0 and 1... u0 = v0 = 0 only
    value = exact_learning_coefficient(signed, u_v)
    assert value.exact == "4/3"  # 1/3 + 1/2 + 1/2
    # where the normal-crossing point is a regular point of phi the two routes agree
    w_regular = np.array([[1.0, 0.0, 2.0], [1.0, 1.0, 2.0], [1.0, 1.0, 2.0]]).ravel()
    assert deep.learning_coefficient(w_regular).lam == paramgeo.rank_at(deep, w_regular).rank / 2


def _fibre_point(M, H, N, r, full, rng):
    """A point of uvt (m = N, n = M, r = H) with U V^T of rank r and the factor ``full``
    ("U" or "V") of rank H > r (the other of rank r)."""
    p = paramgeo.get("uvt", m=N, n=M, r=H)
    U, V = rng.standard_normal((N, H)), rng.standard_normal((M, H))
    (V if full == "U" else U)[:, r:] = 0
    return p, U, V


@pytest.mark.parametrize("case, full, value", [((6, 2, 5, 1), "U", "15/2"),
                                               ((6, 2, 5, 1), "V", "7"),
                                               ((10, 3, 6, 1), "U", "33/2"),
                                               ((10, 3, 6, 1), "V", "25/2")])
def test_smooth_fibre_points_give_half_the_rank(case, full, value):
    """Where a factor of U V^T has full rank H above the rank r0 of the product, the fibre
    {U' V'^T = U V^T} is near the point the manifold {col(U') contains col(B0)} (or the same
    for V'), of dimension n - rank J: lambda = rank J / 2 with rank J = m n - (m - rank U)
    (n - rank V), the case named."""
    M, H, N, r = case
    p, U, V = _fibre_point(M, H, N, r, full, np.random.default_rng(0))
    value_ = exact_learning_coefficient(p, p.spec.pack(U, V))
    rank_u, rank_v = (H, r) if full == "U" else (r, H)
    assert value_.exact == value and value_.lam == (M * N - (N - rank_u) * (M - rank_v)) / 2
    assert value_.case.startswith("smooth fibre") and value_.multiplicity == 1


def test_a_singular_fibre_is_refused_and_the_smooth_value_is_estimated():
    """U of rank 2 (of H = 3 columns) with V of rank 1: the fibre is singular there (points at
    delta along ker J lie delta, not delta^2, from it), so no value; at the smooth points the
    estimator (n = 10^4, at the rank-H least-squares fit reached from the true point) agrees
    with rank J / 2."""
    from paramgeo.llc.exact import fibre_departure

    rng = np.random.default_rng(0)
    p, U, V = _fibre_point(10, 3, 6, 1, "U", rng)
    U[:, 2] = 0
    theta = p.spec.pack(U, V)
    far, near = fibre_departure(p, theta, np.random.default_rng(1))
    assert far / near < 20  # order delta: a kernel direction leaves the fibre
    with pytest.raises(NotProvidedError, match="not smooth"):
        exact_learning_coefficient(p, theta)
    p, U, V = _fibre_point(10, 3, 6, 1, "U", np.random.default_rng(2))
    theta = p.spec.pack(U, V)
    exact = exact_learning_coefficient(p, theta)
    n = 10_000
    X = rng.standard_normal((n, 10))
    loss = Regression(X, X @ (U @ V.T).T + rng.standard_normal((n, 6)))
    W1, W2 = loss.reduced_rank_minimiser(3)
    target, w = (W2 @ W1).ravel(), theta.copy()
    for _ in range(30):  # minimum-norm Gauss-Newton onto the fit's fibre, from the true point
        w = w - np.linalg.lstsq(p.jacobian(w), p.forward_flat(w) - target, rcond=1e-12)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        est = estimate_llc(p, loss, w)
    assert abs(est.llc - exact.lam) < 3 * est.se_total, (est.llc, exact.lam, est.se_total)
