"""Numerical conventions shared by every module: the one rank tolerance policy, the
decisions and bases made under it, exact-looking row echelon forms, and seeds.

This is the bottom of the numerical stack: it reads no parameterization, so the symmetry
groups, the matrix-free rank certificates and the geometry all build on it.
:mod:`paramgeo.geometry.jacobian` re-exports every name, the public place to import them from.

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
near-singular, not silently regular. Change it for one call by passing ``policy=RankPolicy(...)``;
a plugin whose arithmetic is coarser than float64 carries its own (``rank_policy``, read by
:func:`policy_of`).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np

from ..errors import NumericalDoubtWarning, ShapeError
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankPolicy:
    """rank = #{s_i > max(atol, rtol * s_max)}; doubtful if some s_i is within ``band`` of tol."""

    rtol: float = 1e-9
    atol: float = 0.0
    band: float = 1e3

    def tol(self, singular_values: Union[Sequence[float], NDArray[np.float64]]) -> float:
        smax = float(singular_values[0]) if len(singular_values) else 0.0
        return max(self.atol, self.rtol * smax)


DEFAULT_POLICY = RankPolicy()


def policy_of(param: Any, policy: Optional[RankPolicy] = None) -> RankPolicy:
    """The policy a rank of ``param`` is decided under: ``policy`` when one is given, else the
    plugin's own ``rank_policy`` attribute where it sets one (a model from a framework whose
    forward computes below float64 sets rtol from the round-off measured in its arithmetic,
    :func:`paramgeo.geometry.precision.arithmetic_noise`), else :data:`DEFAULT_POLICY`."""
    return policy or getattr(param, "rank_policy", None) or DEFAULT_POLICY


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankDecision(Result):
    """A numerical rank with the evidence: rank = #{s_i > tol}, tol = policy.tol(s).

    Attributes:
        rank: the number of singular values above the tolerance.
        tol: the tolerance, max(atol, rtol * s_max) (:class:`RankPolicy`).
        singular_values: the singular values decided on, descending.
        gap: s_rank / s_{rank+1} (inf if nothing below, or full rank).
        doubtful: a singular value lies within the policy's band of tol.
        closest: the singular value closest to tol on a log scale (nan if none).
        route: how the rank was decided: "dense" (SVD of J), "closed-form" (the plugin's
            rank_at), "sparse" or "matrix-free" (:mod:`paramgeo.linalg.matfree`), "exact" or
            "high-precision" (:mod:`paramgeo.geometry.precision`).
        certificate: how a matrix-free or high-precision rank was certified.
        kinks: the ``paramgeo.geometry.kinks.KinkReport`` of a piecewise-smooth phi (rank_at).
        prices: the ``paramgeo.linalg.routes.RoutePrices`` where route "auto" priced the routes.
    """

    rank: int
    tol: float
    singular_values: np.ndarray
    gap: float
    doubtful: bool
    closest: float
    route: str = "dense"
    certificate: Any = None
    kinks: Any = None
    prices: Any = None


def decide_rank(matrix_or_singular_values: ArrayLike, policy: Optional[RankPolicy] = None,
                what: str = "matrix", warn: bool = True) -> RankDecision:
    """Decide the numerical rank under the tolerance policy (see module docstring)."""
    policy = policy or DEFAULT_POLICY
    arr = np.asarray(matrix_or_singular_values, dtype=float)
    if not np.all(np.isfinite(arr)):  # inf or nan: no tolerance decides anything
        kind = "entries" if arr.ndim == 2 else "singular values"
        raise ShapeError(
            f"the rank of {what} cannot be decided: its {kind} are not all finite (they "
            "overflow where products of entries near 1e150 or beyond leave the float range); "
            "rescale the point")
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
    return RankDecision(rank=rank, tol=tol, singular_values=s, gap=gap, doubtful=doubtful,
                        closest=closest)


#: entries per block of the fused elementwise products (:func:`blocks`): 32768 floats are
#: 256 kB a stream, so the few streams of one block stay in the core's L2 cache
BLOCK = 32768


def blocks(size: int, block: int = BLOCK) -> list[slice]:
    """Slices [0, b), [b, 2b), ... covering range(size): the blocks of a fused elementwise
    product. Evaluating a chain of numpy ufuncs block by block (into preallocated buffers,
    ``out=``) reads each input and writes each output once from memory, the temporaries
    staying in cache, instead of one pass over memory per ufunc: what a compiler's loop fusion
    (jax.jit, numexpr) does, at the cost of one Python iteration per block."""
    return [slice(start, min(start + block, size)) for start in range(0, size, block)]


#: a seed: an int (or None: fresh entropy) or a numpy Generator, used as it is (:func:`as_rng`)
Seed = Union[int, np.random.Generator, None]


def as_rng(seed: Seed) -> np.random.Generator:
    """A numpy Generator from a seed, or the Generator itself (never global random state)."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def range_basis(matrix: ArrayLike, policy: Optional[RankPolicy] = None, what: str = "matrix",
                warn: bool = True) -> tuple[NDArray[np.float64], RankDecision]:
    """(B, decision): an orthonormal basis B of the column space of ``matrix`` (its left singular
    vectors above the tolerance) and the :class:`RankDecision` that chose its size. ``warn``
    as in :func:`decide_rank` (False: the doubt is only recorded in the decision)."""
    matrix = np.atleast_2d(np.asarray(matrix, dtype=float))
    if matrix.shape[1] == 0 or matrix.shape[0] == 0:
        return np.zeros((matrix.shape[0], 0)), decide_rank(np.zeros(0), policy, what, warn=False)
    u, s, _ = np.linalg.svd(matrix, full_matrices=False)
    decision = decide_rank(s, policy, what=what, warn=warn)
    return u[:, : decision.rank], decision


def null_basis(matrix: ArrayLike, policy: Optional[RankPolicy] = None, what: str = "matrix",
               warn: bool = True) -> tuple[NDArray[np.float64], RankDecision]:
    """(N, decision): an orthonormal basis N (columns) of the null space {x : matrix x = 0}
    under the tolerance policy, and the :class:`RankDecision` of ``matrix``. ``warn`` as in
    :func:`decide_rank`."""
    matrix = np.atleast_2d(np.asarray(matrix, dtype=float))
    _, s, vt = np.linalg.svd(matrix, full_matrices=True)
    decision = decide_rank(s, policy, what=what, warn=warn)
    return vt[decision.rank:].T, decision


def rational_rref(M: ArrayLike, pivot_tol: float = 1e-9, max_den: int = 12,
                  snap_tol: float = 1e-9) -> list:
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
