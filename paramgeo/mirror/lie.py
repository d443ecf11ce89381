"""The Lie algebra of the fields X_i = grad phi_i (the rows of J), i = 1..m: brackets (numeric
and symbolic), the commuting test and the generated algebra. The bracket is

    [X_i, X_j](theta) = DX_j(theta) X_i(theta) - DX_i(theta) X_j(theta),

with DX_i = Hess phi_i; row j of ``param.jacobian_derivative(theta, X_i)`` is DX_j X_i. phi is
*commuting* when every bracket vanishes (Li, Wang, Lee, Arora, NeurIPS 2022, "Implicit bias of
gradient descent on reparametrized models: on equivalence to mirror descent", Definition 4.1).
The generated algebra is W_1 = span{X_i}, W_{k+1} = W_k + [W_1, W_k] (right-nested brackets span
it, by the Jacobi identity); its dimension at a point is the rank of the values there, computed
until it stops growing, and n - dim Lie(X)(theta) is the number of independent conservation laws
of gradient flow for every loss (Marcotte, Gribonval, Peyre, NeurIPS 2023, "Abide by the law and
follow the flow: conservation laws for gradient flows", Section 4 and Theorem 3.3).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Optional

import autograd
import autograd.numpy as anp
import numpy as np

from ..errors import BudgetError, NumericalDoubtWarning, ParamgeoError
from ..linalg.numerics import RankPolicy, Seed, as_rng, decide_rank, policy_of, range_basis
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization


class NotCommutingError(ParamgeoError):
    """A mirror potential was requested for a parameterization whose fields do not commute."""


# ====================================================================== brackets (numeric)
def vector_fields(param: Parameterization, theta: ArrayLike) -> NDArray[np.float64]:
    """The m x n matrix whose rows are the fields X_i(theta) = grad phi_i(theta) (= J(theta))."""
    return np.asarray(param.jacobian(param.as_theta(theta)), dtype=float)


def _bracket_parts(param, theta):
    J = vector_fields(param, theta)
    # D[i, j] = DX_j(theta) X_i(theta)  (row j of d/dt J(theta + t X_i))
    D = np.stack([np.asarray(param.jacobian_derivative(theta, J[i]), float)
                  for i in range(param.m)])
    return J, D


def brackets(param: Parameterization, theta: ArrayLike) -> NDArray[np.float64]:
    """All brackets at theta: ``B[i, j] = [X_i, X_j](theta) = DX_j X_i - DX_i X_j`` (m x m x n).

    Computed from Hessian-vector products (``jacobian_derivative``), Li et al. (2022) Def. 4.1.
    """
    theta = param.as_theta(theta)
    _, D = _bracket_parts(param, theta)
    return D - D.transpose(1, 0, 2)


#: up to this many fields the commuting test forms every bracket [X_i, X_j]; above it, it
#: brackets random combinations a.X, b.X (zero for random a, b iff every bracket is zero, the
#: brackets being bilinear with constant coefficients) at two Hessian-vector products each.
FULL_BRACKETS_MAX_M = 20
#: the symbolic route ("auto") is used while (m choose 2) * n stays below this
SYMBOLIC_MAX_WORK = 5000
#: the symbolic route asked for by name is refused above this (m choose 2) * n, before sympy
#: starts: the exact Jacobian and brackets would take hours (uvt 30 x 30, r = 30: 7e8)
SYMBOLIC_REFUSED_WORK = 2_000_000
#: default budget of :func:`lie_algebra`, in seconds of estimated work (``budget=``, ``paramgeo
#: mirror --budget``): a bracket level whose estimated time would exceed it is refused
MIRROR_BUDGET = 60.0


class _Budget:
    """The time budget of one Lie-algebra computation: ``check(estimate, what)`` raises a
    :class:`BudgetError` naming the estimate when the time spent plus ``estimate`` exceeds
    the budget, or with ``partial`` records the refusal in ``stopped`` and returns False (the
    caller then stops with what it has); ``progress(done, total)`` forwards to the caller's
    progress callback."""

    def __init__(self, param, budget, progress, partial=False):
        self.name, self.budget, self.callback = param.name, budget, progress
        self.partial, self.stopped, self.interrupted = partial, "", False
        self.start = time.perf_counter()
        self.hint = ("declare a symmetry made of GL(r) factors, whose matrix conservation laws "
                     "bound the algebra")

    @property
    def spent(self):
        return time.perf_counter() - self.start

    def check(self, estimate, what):
        if self.budget is None or self.spent + estimate <= self.budget:
            return True
        if self.partial:
            self.stopped = (f"{what} estimated at about {estimate:.3g} s, over the budget of "
                            f"{self.budget:g} s (--budget, budget=)")
            return False
        raise BudgetError(
            f"{self.name}: the Lie algebra of the fields grad phi_i needs {what}, estimated at "
            f"about {estimate:.3g} s (after {self.spent:.2g} s spent), over the budget of "
            f"{self.budget:g} s; raise it (paramgeo mirror --budget SECONDS, budget= in Python), "
            f"use smaller sizes, or {self.hint}")

    def progress(self, done, total):
        if self.callback is not None:
            self.callback(done, total)

    def interrupt(self, what):
        """Record a Ctrl-C (KeyboardInterrupt) during ``what``: the levels finished are kept."""
        self.stopped, self.interrupted = f"interrupted (Ctrl-C) during {what}", True


def _sketched_bracket(param, theta, rng):
    a, b = rng.standard_normal(param.m), rng.standard_normal(param.m)
    ya, yb = param.vjp(theta, a), param.vjp(theta, b)
    dyb_ya, dya_yb = param.hessian_vp(theta, b, ya), param.hessian_vp(theta, a, yb)
    return (float(np.linalg.norm(dyb_ya - dya_yb)),
            float(max(np.linalg.norm(dyb_ya), np.linalg.norm(dya_yb))))


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommutingTest(Result):
    """Whether the fields grad phi_i commute: max_bracket <= tol = max(atol, rtol * scale).

    ``max_bracket`` is max_{i,j} ``|[X_i, X_j](theta)|`` over the test points, ``scale`` the
    largest |DX_j X_i| there, ``relative`` their ratio; ``method="symbolic"`` decides exactly
    (every bracket expands to 0) and still reports the numeric sizes.
    """

    commuting: bool
    method: str
    max_bracket: float
    scale: float
    relative: float
    tol: float
    doubtful: bool
    worst_pair: tuple
    n_points: int


def commuting_test(param: Parameterization, n_points: int = 3, seed: Seed = 0,
                   policy: Optional[RankPolicy] = None, method: str = "auto",
                   theta: Optional[ArrayLike] = None) -> CommutingTest:
    """Decide whether all brackets [X_i, X_j] vanish (Li et al. 2022, Definition 4.1).

    ``method``: "symbolic" (exact, needs the ``symbolic`` capability), "numeric" (brackets at
    ``n_points`` random points, or at ``theta``), "auto" (symbolic when declared). The numeric
    decision uses the rank tolerance policy: commuting iff max |[X_i, X_j]| <= max(atol,
    rtol * max |DX_j X_i|); a value within ``policy.band`` of the tolerance is doubtful and warns.
    """
    method = _method(param, method)
    policy = policy_of(param, policy)
    if method == "symbolic":
        work = math.comb(param.m, 2) * param.n
        if work > SYMBOLIC_REFUSED_WORK:
            raise BudgetError(
                f"{param.name}: the symbolic commuting test needs (m choose 2) n = {work:.3g} "
                f"bracket entries in sympy (m = {param.m}, n = {param.n}), more than "
                f"{SYMBOLIC_REFUSED_WORK:.0e} (hours of work); use --method numeric (method="
                "'numeric') or smaller sizes")
        nonzero = [pair for pair, expr in symbolic_brackets(param).items()
                   if any(e != 0 for e in expr)]
        num = commuting_test(param, n_points, seed, policy, "numeric", theta)
        return dataclasses.replace(num, commuting=not nonzero, method="symbolic",
                                   doubtful=False, worst_pair=num.worst_pair or
                                   (nonzero[0] if nonzero else ()))
    rng = as_rng(seed)
    points = [param.as_theta(theta)] if theta is not None else \
        [param.random_point(rng) for _ in range(n_points)]
    max_b, scale, worst = 0.0, 0.0, ()
    for th in points:
        if param.m <= FULL_BRACKETS_MAX_M:
            _, D = _bracket_parts(param, th)
            B = D - D.transpose(1, 0, 2)
            norms = np.linalg.norm(B, axis=2)
            scale = max(scale, float(np.linalg.norm(D, axis=2).max(initial=0.0)))
            if norms.size and norms.max() > max_b:
                max_b = float(norms.max())
                worst = tuple(int(k) for k in np.unravel_index(np.argmax(norms), norms.shape))
        else:  # sketch: [a.X, b.X] = sum_ij a_i b_j [X_i, X_j] for random a, b
            for _ in range(2):
                b_norm, s_norm = _sketched_bracket(param, th, rng)
                scale = max(scale, s_norm)
                if b_norm > max_b:
                    max_b, worst = b_norm, ("random combination",)
    tol = policy.tol([scale])
    commuting = max_b <= tol
    doubtful = bool(max_b > 0 and tol > 0 and tol / policy.band < max_b < tol * policy.band)
    if doubtful:
        warnings.warn(
            f"commuting test of {param.name} decided near the tolerance: largest bracket "
            f"{max_b:.3g} vs tol {tol:.3g}; pass a RankPolicy to decide otherwise",
            NumericalDoubtWarning, stacklevel=2)
    return CommutingTest(commuting=bool(commuting), method="numeric", max_bracket=max_b,
                         scale=scale, relative=max_b / scale if scale > 0 else 0.0, tol=tol,
                         doubtful=doubtful, worst_pair=worst, n_points=len(points))


# ====================================================================== symbolic fields
def _method(param, method):
    if method not in ("auto", "symbolic", "numeric"):
        raise ParamgeoError(f"method must be auto, symbolic or numeric, got {method!r}")
    if method == "auto":
        cheap = param.m * (param.m - 1) // 2 * param.n <= SYMBOLIC_MAX_WORK
        return "symbolic" if param.provides("symbolic") and cheap else "numeric"
    if method == "symbolic" and not param.provides("symbolic"):
        raise ParamgeoError(
            f"{param.name} does not declare the 'symbolic' capability; use method='numeric'")
    return method


def symbolic_fields(param: Parameterization) -> tuple[list, list]:
    """(symbols, fields): the m fields X_i = grad phi_i as sympy column Matrices (exact)."""
    import sympy

    from ..expressions.symbolic import exact_jacobian, symbolic_form

    symbols, _ = symbolic_form(param)
    J = exact_jacobian(param)
    return symbols, [sympy.Matrix(J.row(i)).T for i in range(J.rows)]


def _sym_bracket(X, Y, symbols):
    """[X, Y] = DY X - DX Y for sympy column vectors, expanded."""
    out = Y.jacobian(symbols) * X - X.jacobian(symbols) * Y
    return out.applyfunc(lambda e: e.expand())


def symbolic_brackets(param: Parameterization) -> dict[tuple[int, int], Any]:
    """{(i, j): [X_i, X_j]} for i < j as expanded sympy column Matrices (exact)."""
    symbols, fields = symbolic_fields(param)
    return {(i, j): _sym_bracket(fields[i], fields[j], symbols)
            for i, j in itertools.combinations(range(len(fields)), 2)}


# ====================================================================== Lie algebra
@dataclasses.dataclass(frozen=True, kw_only=True)
class LieAlgebra(Result):
    """Dimension of the Lie algebra generated by the fields grad phi_i at a point.

    ``levels[k]`` is dim W_{k+1}(theta) (W_1 = span of the fields, W_{k+1} = W_k + [W_1, W_k]);
    ``dim`` the stabilised value; ``n_laws = n - dim`` the number of independent conservation
    laws (Marcotte, Gribonval, Peyre 2023, Theorem 3.3). ``stabilised`` is False when
    ``max_depth`` was reached while the rank was still growing (then ``dim`` is a lower bound).
    """

    dim: int
    n: int
    m: int
    rank_J: int
    levels: tuple
    n_fields: tuple
    stabilised: bool
    method: str
    #: True when Ctrl-C (KeyboardInterrupt) stopped the levels: ``dim`` is then a lower bound
    interrupted: bool = False

    @property
    def n_laws(self):
        return self.n - self.dim


def _select_independent(candidates, basis, policy, chunk=256):
    """Indices of rows of ``candidates`` independent (over R) of ``basis`` rows and each other.

    Rows are field values stacked over several points (dependence as functions, with constant
    coefficients). Greedy Gram-Schmidt in candidate order: a candidate is kept when its residual
    after projecting out the basis and the candidates kept before it exceeds max(atol, 1e3 rtol
    max|c|); the projections on what was kept before a chunk are matrix products (BLAS-3)."""
    cands = np.asarray(candidates, float)
    cands = cands.reshape(len(cands), -1) if cands.size else cands
    scale = float(np.max(np.linalg.norm(cands, axis=1))) if cands.size else 0.0
    if scale == 0:
        return []
    tol = max(policy.atol, 1e3 * policy.rtol * scale)
    width = cands.shape[1]
    Q = np.zeros((min(width, len(cands) + len(basis)), width))  # orthonormal rows kept
    size = 0
    if len(basis):
        B = range_basis(np.asarray(basis, float).reshape(len(basis), -1).T, policy,
                        warn=False)[0].T
        Q[:len(B)], size = B, len(B)
    keep = []
    for start in range(0, len(cands), chunk):
        block = cands[start:start + chunk].copy()
        for _ in range(2 if size else 0):  # re-orthogonalise once for stability
            block -= (block @ Q[:size].T) @ Q[:size]
        first = size
        for i, r in enumerate(block):
            if size == width:
                return keep
            for _ in range(2 if size > first else 0):
                r = r - (Q[first:size] @ r) @ Q[first:size]
            norm = np.linalg.norm(r)
            if norm > tol:
                Q[size] = r / norm
                size += 1
                keep.append(start + i)
    return keep


def _numeric_family_brackets(F, G, n):
    """A traceable theta -> (a * b, n) of the brackets [F_k, G_l] = DG_l F_k - DF_k G_l.

    Dense derivative tensors by nested autograd: simple and exact, but the k-th level costs
    derivatives of order k + 1 (slow for n of a few dozen; the symbolic route is preferred)."""
    dF, dG = autograd.jacobian(F), autograd.jacobian(G)

    def H(th):
        f, g = F(th), G(th)
        dg_f = anp.einsum("lpq,kq->klp", dG(th), f)
        df_g = anp.einsum("kpq,lq->klp", dF(th), g)
        return anp.reshape(dg_f - df_g, (-1, n))

    return H


def lie_algebra(param: Parameterization, theta: Optional[ArrayLike] = None, seed: int = 0,
                max_depth: int = 5, policy: Optional[RankPolicy] = None, method: str = "auto",
                n_test_points: int = 3, bound: Optional[int] = None,
                budget: Optional[float] = MIRROR_BUDGET,
                progress: Optional[Callable[[int, int], None]] = None,
                partial: bool = False) -> LieAlgebra:
    """Dimension of the Lie algebra generated by X_i = grad phi_i at theta (random if None).

    W_1 = span{X_i}; W_{k+1} = W_k + span{[X_i, w] : w new in W_k}, until dim W_k(theta) stops
    growing, reaches n, or no bracket is new as a function (Marcotte, Gribonval, Peyre 2023,
    Section 4; fields pruned by their values at ``n_test_points`` extra random points).
    ``method``: "symbolic" (exact sympy brackets) or "numeric" (nested autograd derivatives of
    ``forward``). ``bound`` (n minus the conservation laws known in advance): the fields and all
    brackets at the point come first, and when their rank reaches the bound that is the algebra.
    ``budget`` (seconds; None: no limit): each level's time is estimated first and a
    :class:`paramgeo.errors.BudgetError` raised beyond it, or with ``partial=True`` the levels
    done so far returned (``stabilised`` False, ``dim`` a lower bound, the refusal in ``method``);
    ``progress(done, total)`` is called after each level.
    """
    method = _method(param, method)
    policy = policy_of(param, policy)
    clock = _Budget(param, budget, progress, partial)
    rng = as_rng(seed)
    exact = method == "symbolic" and theta is None
    if exact:
        point = rng.integers(-9, 10, size=param.n)
        point[point == 0] = 1
    else:
        point = param.as_theta(theta) if theta is not None else param.random_point(rng)
    extra = [param.random_point(rng) for _ in range(n_test_points)]
    at_point = None
    if bound is not None:
        at_point = _bounded_at_point(param, np.asarray(point, float), int(bound), policy, clock)
        if at_point.stabilised or at_point.interrupted:
            return at_point
    found = _lie_by_levels(param, point, extra, exact, max_depth, policy, method, rng, clock)
    found = dataclasses.replace(found, interrupted=clock.interrupted)
    if at_point is not None and clock.stopped and found.dim < at_point.dim:
        # stopped by the budget (or Ctrl-C) below what the brackets at the point already span
        return dataclasses.replace(at_point, method=f"brackets at the point; stopped: "
                                                    f"{clock.stopped}",
                                   interrupted=clock.interrupted)
    return found


def _lie_by_levels(param, point, extra, exact, max_depth, policy, method, rng, clock):
    """The level-by-level iteration of :func:`lie_algebra` on its symbolic, linear-field or
    nested-autograd route."""
    n = param.n
    if method == "symbolic":
        return _lie_symbolic(param, point, extra, exact, max_depth, policy, clock)

    pts = [point] + extra
    M = _linear_field_matrices(param, rng)
    if M is not None:  # X_i = M_i theta: brackets are matrix commutators
        return _grow_algebra(
            M, lambda mats: np.einsum("kpq,qs->ksp", mats, np.stack(pts, axis=1)),
            lambda first, cur: (np.einsum("lpq,kqr->klpr", cur, first)
                                - np.einsum("kpq,lqr->klpr", first, cur)).reshape(-1, n, n),
            lambda mats, idx: mats[np.asarray(idx, dtype=int)],
            max_depth, policy, n, param.m, "numeric (linear fields)", clock)
    # level 1 is the m fields grad phi_i at every point, one reverse product each: priced
    # from one product before it is paid for (a framework model's Jacobian can take minutes)
    tic = time.perf_counter()
    param.vjp(point, np.eye(1, param.m).ravel())
    clock.check((time.perf_counter() - tic) * param.m * len(pts),
                f"the {param.m} fields grad phi_i at {len(pts)} points (bracket level 1)")
    return _grow_algebra(
        autograd.jacobian(param.forward_flat),
        lambda F: np.stack([np.asarray(F(p), float) for p in pts], axis=1),
        lambda first, cur: _numeric_family_brackets(first, cur, n),
        _take, max_depth, policy, n, param.m, "numeric", clock)


def _bounded_at_point(param, point, bound, policy, clock):
    """dim span{X_i(theta), [X_i, X_j](theta)} at the point, from m ``jacobian_derivative``
    products (row j of d/dt J(theta + t X_i) is DX_j X_i), as a LieAlgebra that is
    ``stabilised`` when it reaches ``bound`` (then it is the dimension of the whole algebra)
    and a lower bound otherwise."""
    J = vector_fields(param, point)
    m, n = J.shape
    rank_J = decide_rank(J, policy, warn=False).rank
    if rank_J >= bound:
        return LieAlgebra(dim=rank_J, n=n, m=m, rank_J=rank_J, levels=(rank_J,), n_fields=(m,),
                          stabilised=True, method="fields at the point, bounded by the laws")
    tic = time.perf_counter()
    D = [np.asarray(param.jacobian_derivative(point, J[0]), float)]
    clock.check((time.perf_counter() - tic) * (m - 1),
                 f"{m} second-derivative products (brackets at the point)")
    clock.progress(1, m)
    try:
        for i in range(1, m):
            D.append(np.asarray(param.jacobian_derivative(point, J[i]), float))
            clock.progress(i + 1, m)
    except KeyboardInterrupt:  # the fields at the point are finished: a lower bound
        clock.interrupt(f"the brackets at the point ({len(D)} of {m} products)")
        return LieAlgebra(dim=rank_J, n=n, m=m, rank_J=rank_J, levels=(rank_J,), n_fields=(m,),
                          stabilised=False, method=f"fields at the point; stopped: {clock.stopped}",
                          interrupted=True)
    D = np.stack(D)
    B = (D - D.transpose(1, 0, 2))[np.triu_indices(m, 1)]
    rank = decide_rank(np.vstack([J, B]), policy, warn=False).rank
    if rank < bound:
        clock.hint = (f"use a point where the brackets reach the bound (the laws bound the "
                      f"dimension by {bound}; the fields and brackets at the point span {rank})")
    return LieAlgebra(dim=rank, n=n, m=m, rank_J=rank_J, levels=(rank_J, rank),
                      n_fields=(m, len(B)), stabilised=rank >= bound,
                      method="brackets at the point, bounded by the laws")


def _grow_algebra(fields, values, bracket, take, max_depth, policy, n, m, method, clock):
    """The iteration W_{k+1} = W_k + [W_1, W_k] of :func:`lie_algebra` on a family of fields.

    ``values(family)`` gives an array (k, P, n) of the family's values at the test points (the
    first one is the point where the dimension is read), ``bracket(first, current)`` the family
    of brackets [X_k, C_l], ``take(family, idx)`` a sub-family. New fields are kept when their
    stacked values are independent of those kept so far (dependence as functions). Before a
    level, its time is estimated as (time of the previous level) x (size of the current family)
    x n and checked against ``clock``'s budget."""
    tic = time.perf_counter()
    v1 = values(fields)
    last = time.perf_counter() - tic
    clock.progress(1, max_depth)
    keep = _select_independent([v.ravel() for v in v1], [], policy)
    first = take(fields, keep)
    kept_at_point = [v1[k, 0] for k in keep]
    kept_stack = [v1[k].ravel() for k in keep]
    rank_J = decide_rank(np.asarray(v1[:, 0]), policy, warn=False).rank
    levels, counts = [rank_J], [len(keep)]
    stabilised = False
    try:
        stabilised = _grow_levels(first, first, values, bracket, take, max_depth, policy, n,
                                  clock, last, keep, levels, counts, kept_at_point, kept_stack)
    except KeyboardInterrupt:  # the levels appended so far are finished
        clock.interrupt(f"bracket level {len(levels) + 1}")
    return LieAlgebra(dim=levels[-1], n=n, m=m, rank_J=rank_J, levels=tuple(levels),
                      n_fields=tuple(counts), stabilised=stabilised,
                      method=method + (f"; stopped: {clock.stopped}" if clock.stopped else ""))


def _grow_levels(first, current, values, bracket, take, max_depth, policy, n, clock, last, keep,
                 levels, counts, kept_at_point, kept_stack):
    """The bracket levels 2, 3, ... of :func:`_grow_algebra`, appending each finished level to
    ``levels`` and ``counts``; True when the algebra stabilised."""
    for depth in range(2, max_depth + 1):
        if levels[-1] == n:
            return True
        size = counts[-1]  # the family bracketed with the first one
        if not clock.check(last * size * n, f"bracket level {depth} ({len(keep)} x {size} "
                                            f"brackets, n = {n}; extrapolated from {last:.2g} s "
                                            f"for level {depth - 1})"):
            return False
        tic = time.perf_counter()
        H = bracket(first, current)
        vh = values(H)
        last = time.perf_counter() - tic
        clock.progress(depth, max_depth)
        new = _select_independent([v.ravel() for v in vh], kept_stack, policy)
        if not new:
            return True
        rank = decide_rank(np.asarray(kept_at_point + [vh[k, 0] for k in new]), policy,
                           warn=False).rank
        kept_stack += [vh[k].ravel() for k in new]  # the level is finished: record it
        kept_at_point += [vh[k, 0] for k in new]
        levels.append(rank)
        counts.append(len(new))
        current = take(H, new)
        if levels[-1] == levels[-2]:
            return True
    return False


def _linear_field_matrices(param, rng, tol=1e-10):
    """The matrices M_i with X_i(theta) = M_i theta when every field X_i = grad phi_i is linear
    in theta (phi a homogeneous quadratic map: U U^T, U V^T, u * v, attention scores), else None.

    M_i[:, j] = J(e_j)[i, :]; linearity is checked at a random point (J(theta) against
    sum_j theta_j J(e_j), relative ``tol``)."""
    n = param.n
    if n > 400:  # n Jacobians and m n x n matrices: keep the fast path for moderate sizes
        return None
    basis = np.stack([param.jacobian(e) for e in np.eye(n)])  # (n_j, m, n_p)
    probe = param.random_point(rng)
    J = param.jacobian(probe)
    if np.linalg.norm(np.tensordot(probe, basis, axes=1) - J) > tol * max(np.linalg.norm(J), 1):
        return None
    return np.transpose(basis, (1, 2, 0))  # M[i, p, j] = J(e_j)[i, p]


def _take(F, idx):
    idx = np.asarray(idx, dtype=int)
    return lambda th: F(th)[idx]


def _lie_symbolic(param, point, extra, exact, max_depth, policy, clock):
    import sympy

    symbols, fields = symbolic_fields(param)
    n = param.n
    pts = [point] + extra
    lam = [sympy.lambdify([symbols], list(f), "numpy") for f in fields]

    def stacked(fns):
        return [np.concatenate([np.asarray(fn(np.asarray(p, float)), float).ravel()
                                for p in pts]) for fn in fns]

    def at_point(exprs):
        if exact:
            sub = {s: sympy.Integer(int(v)) for s, v in zip(symbols, point)}
            return sympy.Matrix([[e.xreplace(sub) for e in f] for f in exprs])
        return np.asarray([fn(np.asarray(point, float)) for fn in
                           [sympy.lambdify([symbols], list(f), "numpy") for f in exprs]],
                          float).reshape(len(exprs), n)

    def rank(exprs):
        M = at_point(exprs)
        if exact:
            return int(M.rank())
        return decide_rank(M, policy, warn=False).rank

    keep = _select_independent(stacked(lam), [], policy)
    first = [fields[k] for k in keep]
    kept, kept_stack = list(first), [stacked(lam)[k] for k in keep]
    rank_J = rank(fields)
    levels, counts = [rank_J], [len(first)]
    current, stabilised = first, False
    clock.progress(1, max_depth)
    depth = 1
    try:
        for depth in range(2, max_depth + 1):
            if levels[-1] == n:
                stabilised = True
                break
            done = _sym_level(first, current, symbols, depth, n, stacked, rank, kept, kept_stack,
                              levels, counts, policy, clock, max_depth)
            if done is None:  # refused by the budget
                break
            stabilised, current = done
            if stabilised:
                break
    except KeyboardInterrupt:  # the levels appended so far are finished
        clock.interrupt(f"symbolic bracket level {depth}")
    return LieAlgebra(dim=levels[-1], n=n, m=param.m, rank_J=rank_J, levels=tuple(levels),
                      n_fields=tuple(counts), stabilised=stabilised, method="symbolic"
                      + (f"; stopped: {clock.stopped}" if clock.stopped else ""))


def _sym_level(first, current, symbols, depth, n, stacked, rank, kept, kept_stack, levels,
               counts, policy, clock, max_depth):
    """Symbolic bracket level ``depth`` of :func:`_lie_symbolic`: None when the budget refuses
    it, else (stabilised, the new family), the level appended to ``levels`` once finished."""
    import sympy

    pairs = [(x, w) for x in first for w in current]
    tic = time.perf_counter()
    cand = [_sym_bracket(*pairs[0], symbols)]  # the first bracket of the level times the rest
    if not clock.check((time.perf_counter() - tic) * (len(pairs) - 1),
                       f"{len(pairs)} symbolic brackets at level {depth} (n = {n})"):
        return None
    cand += [_sym_bracket(x, w, symbols) for x, w in pairs[1:]]
    clock.progress(depth, max_depth)
    cand = [c for c in cand if any(e != 0 for e in c)]
    if not cand:
        return True, current
    cl = [sympy.lambdify([symbols], list(c), "numpy") for c in cand]
    cs = stacked(cl)
    new = _select_independent(cs, kept_stack, policy)
    if not new:
        return True, current
    level = rank(kept + [cand[k] for k in new])
    kept += [cand[k] for k in new]  # the level is finished: record it
    kept_stack += [cs[k] for k in new]
    levels.append(level)
    counts.append(len(new))
    return levels[-1] == levels[-2], [cand[k] for k in new]
