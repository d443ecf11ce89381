"""Generic geometry of a parameterization, valid for every plugin.

All functions read only the contract: J(theta) and, where declared, the symmetry generators.

Tolerance policy (the one used everywhere a rank is decided)
--------------------------------------------------------------
For a matrix with singular values s_1 >= s_2 >= ... the numerical rank is

    rank = #{ i : s_i > tol },   tol = max(atol, rtol * s_1),   rtol = 1e-9 by default.

rtol = 1e-9 sits far above round-off in a Jacobian evaluated in double precision (about
1e-15 relative) and far below the smallest singular values of the generic points of the built-in
parameterizations, so a decision against it is robust; the points that optimisers drive towards
singularity (``paramgeo.critical``) reach 1e-10 and below. A decision is *doubtful* when some
singular value lies within a factor ``band`` (1e3) of tol; it is then reported with the figures
(the singular value closest to tol and the gap s_rank / s_{rank+1}) and a
:class:`~paramgeo.errors.NumericalDoubtWarning` is emitted, so a near-singular point is called
near-singular, not silently regular. Change it for one call by passing ``policy=RankPolicy(...)``.
"""

import dataclasses
import warnings

import numpy as np

from .errors import NumericalDoubtWarning, ShapeError
from .results import Result


@dataclasses.dataclass(frozen=True)
class RankPolicy:
    """rank = #{s_i > max(atol, rtol * s_max)}; doubtful if some s_i is within ``band`` of tol."""

    rtol: float = 1e-9
    atol: float = 0.0
    band: float = 1e3

    def tol(self, singular_values):
        smax = float(singular_values[0]) if len(singular_values) else 0.0
        return max(self.atol, self.rtol * smax)


DEFAULT_POLICY = RankPolicy()


@dataclasses.dataclass(frozen=True)
class RankDecision(Result):
    """A numerical rank with the evidence: singular values, tolerance, gap, doubt."""

    rank: int
    tol: float
    singular_values: np.ndarray
    gap: float  # s_rank / s_{rank+1} (inf if nothing below, or full rank)
    doubtful: bool
    closest: float  # the singular value closest to tol on a log scale (nan if none)


def decide_rank(matrix_or_singular_values, policy=None, what="matrix", warn=True):
    """Decide the numerical rank under the tolerance policy (see module docstring)."""
    policy = policy or DEFAULT_POLICY
    arr = np.asarray(matrix_or_singular_values, dtype=float)
    s = np.linalg.svd(arr, compute_uv=False) if arr.ndim == 2 else np.sort(arr)[::-1]
    tol = policy.tol(s)
    rank = int(np.sum(s > tol))
    above = s[rank - 1] if rank > 0 else np.inf
    below = s[rank] if rank < len(s) else 0.0
    gap = float(above / below) if below > 0 else float("inf")
    positive = s[s > 0]
    if len(positive) and tol > 0:
        closest = float(positive[np.argmin(np.abs(np.log(positive / tol)))])
        doubtful = bool(tol / policy.band < closest < tol * policy.band)
    else:
        closest, doubtful = float("nan"), False
    if doubtful and warn:
        warnings.warn(
            f"rank of {what} decided near the tolerance: singular value {closest:.3g} vs "
            f"tol {tol:.3g} (rank {rank}, gap {gap:.3g}); pass a RankPolicy to decide otherwise",
            NumericalDoubtWarning,
            stacklevel=2,
        )
    return RankDecision(rank, tol, s, gap, doubtful, closest)


def as_rng(seed):
    """A numpy Generator from a seed, or the Generator itself (never global random state)."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def range_basis(matrix, policy=None, what="matrix", warn=True):
    """(B, decision): an orthonormal basis B of the column space of ``matrix`` (its left singular
    vectors above the tolerance) and the :class:`RankDecision` that chose its size. ``warn``
    as in :func:`decide_rank` (False: the doubt is only recorded in the decision)."""
    matrix = np.atleast_2d(np.asarray(matrix, dtype=float))
    if matrix.shape[1] == 0 or matrix.shape[0] == 0:
        return np.zeros((matrix.shape[0], 0)), decide_rank(np.zeros(0), policy, what, warn=False)
    u, s, _ = np.linalg.svd(matrix, full_matrices=False)
    decision = decide_rank(s, policy, what=what, warn=warn)
    return u[:, : decision.rank], decision


def null_basis(matrix, policy=None, what="matrix", warn=True):
    """(N, decision): an orthonormal basis N (columns) of the null space {x : matrix x = 0}
    under the tolerance policy, and the :class:`RankDecision` of ``matrix``. ``warn`` as in
    :func:`decide_rank`."""
    matrix = np.atleast_2d(np.asarray(matrix, dtype=float))
    _, s, vt = np.linalg.svd(matrix, full_matrices=True)
    decision = decide_rank(s, policy, what=what, warn=warn)
    return vt[decision.rank:].T, decision


def rational_rref(M, pivot_tol=1e-9, max_den=12, snap_tol=1e-9):
    """Reduced row echelon form of the rows of M (partial pivoting in column order; a pivot must
    exceed ``pivot_tol`` times the largest |entry|), as a list of the nonzero rows. Entries
    within ``snap_tol`` of a fraction with denominator <= ``max_den`` become that
    ``fractions.Fraction`` (others stay floats), so bases of exact objects (Lie algebras of
    integer matrices, polynomial conservation laws) read exactly and the same for every seed:
    the RREF of a row space is unique."""
    import fractions

    B = np.array(M, dtype=float)
    if B.ndim != 2 or B.size == 0:
        return []
    scale = max(float(np.max(np.abs(B))), 1e-300)
    row = 0
    for col in range(B.shape[1]):
        if row == B.shape[0]:
            break
        pivot = row + int(np.argmax(np.abs(B[row:, col])))
        if abs(B[pivot, col]) <= pivot_tol * scale:
            continue
        B[[row, pivot]] = B[[pivot, row]]
        B[row] /= B[row, col]
        others = np.arange(B.shape[0]) != row
        B[others] -= np.outer(B[others, col], B[row])
        row += 1
    out = []
    for r in B[:row]:
        vals = []
        for c in r:
            f = fractions.Fraction(float(c)).limit_denominator(max_den)
            vals.append(f if abs(float(f) - c) < snap_tol else float(c))
        out.append(vals)
    return out


def solve_sylvester_psd(A, B, C, rtol=1e-12):
    """X with A X + X B = C for symmetric positive semi-definite A (r x r) and B (s x s).

    Solved in the eigenbases A = P diag(a) P^T, B = Q diag(b) Q^T: X = P [(P^T C Q)_ij /
    (a_i + b_j)] Q^T, with the pseudo-inverse (zero) where a_i + b_j <= rtol * max(a, b, 1),
    which gives the minimum-norm least-squares solution at rank-deficient A, B. This is the
    equation of the horizontal projections of U U^T (A = B = U^T U) and U V^T (A = U^T U,
    B = V^T V); see Massart and Absil (2020) and Mishra et al. (2014).
    """
    a, P = np.linalg.eigh(A)
    b, Q = (a, P) if B is A else np.linalg.eigh(B)
    if not a.size or not b.size:
        return np.zeros(np.shape(C))
    denom = a[:, None] + b[None, :]
    floor = rtol * max(a[-1], b[-1], 1.0)  # eigh sorts ascending
    Ct = P.T @ C @ Q
    if a[0] + b[0] > floor:  # every a_i + b_j is above the floor (full-rank A, B)
        return P @ (Ct / denom) @ Q.T
    safe = np.abs(denom) > floor
    return P @ np.where(safe, Ct / np.where(safe, denom, 1.0), 0.0) @ Q.T


def rank_at(param, theta, policy=None):
    """Rank of J(theta) with its singular values (a :class:`RankDecision`).

    From the plugin's closed form where it declares the ``rank_at`` capability (a function of
    the ranks of its factors, e.g. rank J = d k - k(k-1)/2 for U U^T at rank U = k; see the
    plugin), else from the SVD of the dense Jacobian. The kernel dimension is n - rank."""
    theta = param.as_theta(theta)
    if param.provides("rank_at"):
        return param.rank_at(theta, policy)
    return decide_rank(param.jacobian(theta), policy, what=f"J of {param.name}")


def generic_rank(param, n_points=3, seed=0, policy=None):
    """Generic rank of phi: the maximum of rank J over ``n_points`` random points.

    The rank of a polynomial (or analytic) map's Jacobian equals its generic value outside a
    measure-zero set, so random points attain it almost surely; the maximum guards against an
    unlucky draw.
    """
    rng = as_rng(seed)
    return max(
        decide_rank(param.jacobian(param.random_point(rng)), policy, warn=False).rank
        for _ in range(n_points)
    )


def kernel(param, theta, policy=None):
    """Orthonormal basis (n x k) of ker J(theta)."""
    return null_basis(param.jacobian(param.as_theta(theta)), policy, f"J of {param.name}")[0]


def vertical_space(param, theta, policy=None):
    """Orthonormal basis (n x k) of the tangent of the orbit G.theta (zero columns without G)."""
    theta = param.as_theta(theta)
    if not param.provides("symmetry"):
        return np.zeros((param.n, 0))
    gens = param.symmetry().generators(theta)
    return range_basis(gens, policy, what=f"symmetry generators of {param.name}")[0]


def orbit_dim(param, theta, policy=None):
    """Dimension of the orbit through theta (rank of the generators; drops at stabilizers)."""
    return vertical_space(param, theta, policy).shape[1]


def horizontal_projection(param, theta, v, policy=None, generic=False):
    """Projection of v onto the horizontal space (orthogonal complement of the vertical space).

    Uses the plugin's closed form where declared, unless ``generic=True`` (the test oracle):
    h = v - V V^T v with V an orthonormal basis of the vertical space.
    """
    theta = param.as_theta(theta)
    v = np.asarray(v, dtype=float)
    if v.shape != (param.n,):
        raise ShapeError(f"a tangent vector must have {param.n} entries, got shape {v.shape}")
    if param.provides("horizontal_projection") and not generic:
        return np.asarray(param.horizontal_projection(theta, v), dtype=float)
    V = vertical_space(param, theta, policy)
    return v - V @ (V.T @ v)


def quotient_metric(param, theta, u, v, policy=None):
    """Quotient metric g(u, v) = <h(u), h(v)>: the Euclidean metric on horizontal vectors."""
    hu = horizontal_projection(param, theta, u, policy)
    hv = horizontal_projection(param, theta, v, policy)
    return float(hu @ hv)


def predictor_metric(param, theta):
    """The m x m matrix J J^T: gradient flow on theta moves phi by -J J^T grad ell (its
    inverse on range J is the metric the parameterization induces on predictors)."""
    J = param.jacobian(param.as_theta(theta))
    return J @ J.T


def horizontal_lift(param, theta, w, policy=None):
    """The horizontal vector h with J h = w of least norm: h = J^+ w (minimum-norm solution
    lies in range J^T = (ker J)^perp, which is horizontal since vertical vectors lie in ker J).

    The pseudo-inverse follows the tolerance policy: with J = U diag(s) V^T and r the rank
    decided by :func:`decide_rank`, J^+ w = sum_{i <= r} v_i (u_i . w) / s_i, so singular values
    at or below the tolerance are treated as zero (not inverted) and a decision near the
    tolerance warns, as everywhere else a rank is decided (Golub and Van Loan, "Matrix
    computations", Section 5.5.4, truncated SVD). For w outside range J this is the
    least-squares solution of least norm.
    """
    J = param.jacobian(param.as_theta(theta))
    w = np.asarray(w, float).ravel()
    if w.shape != (J.shape[0],):
        raise ShapeError(f"a predictor tangent vector must have {J.shape[0]} entries, "
                         f"got shape {w.shape}")
    u, s, vt = np.linalg.svd(J, full_matrices=False)
    r = decide_rank(s, policy, what=f"J of {param.name}").rank
    return vt[:r].T @ ((u[:, :r].T @ w) / s[:r])


def fiber_bundle(param):
    """Hand ``param`` to geomstats as a ``FiberBundle`` over its predictor space.

    The total space is geomstats ``Euclidean(n)``; riemannian_submersion is phi (flattened),
    tangent_riemannian_submersion is the JVP, vertical and horizontal projections and the
    horizontal lift are the generic ones above. The returned bundle works with geomstats'
    ``QuotientMetric`` machinery (see :func:`quotient_metric_geomstats`).
    """
    from geomstats.geometry.euclidean import Euclidean
    from geomstats.geometry.fiber_bundle import FiberBundle

    class ParameterizationBundle(FiberBundle):
        def __init__(self):
            total = Euclidean(param.n)
            super().__init__(total_space=total)
            self.param = param

        def riemannian_submersion(self, point):
            return np.asarray(param.forward_flat(np.asarray(point, float)))

        def tangent_riemannian_submersion(self, tangent_vec, base_point):
            return param.jvp(base_point, tangent_vec)

        def vertical_projection(self, tangent_vec, base_point):
            return tangent_vec - horizontal_projection(param, base_point, tangent_vec)

        def horizontal_projection(self, tangent_vec, base_point):
            return horizontal_projection(param, base_point, tangent_vec)

        def horizontal_lift(self, tangent_vec, base_point=None, fiber_point=None):
            if fiber_point is None:
                raise ShapeError("horizontal_lift needs fiber_point (a theta over base_point)")
            return horizontal_lift(param, fiber_point, tangent_vec)

    return ParameterizationBundle()


def quotient_metric_geomstats(param, theta, a, b):
    """geomstats' ``QuotientMetric.inner_product`` of predictor tangent vectors a, b at
    phi(theta), through :func:`fiber_bundle` (an independent route to the quotient metric)."""
    bundle = fiber_bundle(param)
    total = bundle._total_space
    total.fiber_bundle = bundle
    from geomstats.geometry.euclidean import Euclidean
    from geomstats.geometry.quotient_metric import QuotientMetric

    base = Euclidean(param.m, equip=False)
    metric = QuotientMetric(space=base, total_space=total)
    theta = param.as_theta(theta)
    return float(metric.inner_product(np.ravel(a), np.ravel(b), fiber_point=theta))
