"""Polynomial conservation laws of gradient flow through a parameterization.

A conservation law is h with <grad h, X_i> = 0 identically for every i (then it is orthogonal to
every bracket too: [X_i, X_j] h = X_i X_j h - X_j X_i h = 0). For polynomial h of degree <= D
this is a linear system in the coefficients, solved exactly over the rationals with sympy when
``symbolic()`` is available, by sampling and an SVD otherwise.
"""

from __future__ import annotations

import dataclasses
import fractions
import itertools
import math
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..errors import ParamgeoError
from ..linalg.numerics import as_rng, decide_rank, policy_of, rational_rref
from ..results import Result
from .lie import _method, lie_algebra, symbolic_fields, vector_fields

if TYPE_CHECKING:
    from ..linalg.numerics import RankPolicy
    from ..contract.parameterization import Parameterization
    from .lie import LieAlgebra

#: the largest number of unknown coefficients of the conservation-law linear system
LAWS_MAX_UNKNOWNS = 2500


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConservationLaws(Result):
    """Polynomial conservation laws of gradient flow found up to a degree.

    ``laws`` are printed polynomials h with <grad h, grad phi_i> = 0 identically (a basis of
    that space in reduced echelon form); ``independent`` is the number of functionally
    independent ones (rank of their gradients at a random point); ``expected`` = n - dim of the
    generated Lie algebra (Marcotte et al. 2023); ``complete`` when independent == expected.
    """

    laws: tuple
    degree: int
    independent: int
    expected: int
    complete: bool
    method: str

    def __str__(self):
        note = "" if self.complete else " (incomplete: laws of higher degree or non-polynomial)"
        head = (f"ConservationLaws ({self.method}, degree <= {self.degree}): "
                f"{self.independent} independent found, {self.expected} expected{note}")
        return "\n".join([head] + [f"  {law}" for law in self.laws])


def _exponents(n, degree):
    out = []
    for d in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(n), d):
            e = [0] * n
            for k in combo:
                e[k] += 1
            out.append(tuple(e))
    return out


def conservation_laws(param: Parameterization, degree: int = 2, seed: int = 0,
                      policy: Optional[RankPolicy] = None, method: str = "auto",
                      algebra: Optional[LieAlgebra] = None) -> ConservationLaws:
    """Polynomial conservation laws h of gradient flow: <grad h, grad phi_i> = 0 for every i.

    h ranges over polynomials of degree <= ``degree`` with no constant term; with sympy the
    identity is solved exactly over the rationals (polynomial phi), else numerically from the
    identity at random points and an SVD null space under the tolerance policy. The count of
    functionally independent laws is compared with n - dim Lie(X), the number there are
    (Marcotte, Gribonval, Peyre 2023, Theorem 3.3).

    Args:
        param: the parameterization phi: R^n -> R^m.
        degree: the largest degree of the laws searched.
        seed: seed of the random points.
        policy: the tolerance policy of the numeric route; None: the default.
        method: "auto", "symbolic" or "numeric".
        algebra: the :class:`LieAlgebra` if already computed (else it is).

    Returns:
        The :class:`ConservationLaws`: ``laws``, ``independent``, ``expected`` and
        ``complete``.

    Raises:
        ParamgeoError: a degree below 1, more than ``LAWS_MAX_UNKNOWNS`` monomials, or the
            symbolic route on a plugin without symbolic expressions.

    Examples:
        >>> import paramgeo
        >>> from paramgeo.mirror import conservation_laws
        >>> found = conservation_laws(paramgeo.get("hadamard", p=2))   # phi = u * v
        >>> found.laws, found.complete
        (('u_0**2 - v_0**2', 'u_1**2 - v_1**2'), True)
    """
    if int(degree) < 1:
        raise ParamgeoError(f"the degree of the laws must be >= 1, got {degree}")
    degree = int(degree)
    method = _method(param, method)
    policy = policy_of(param, policy)
    algebra = algebra or lie_algebra(param, seed=seed, policy=policy, method=method)
    exps = _exponents(param.n, degree)
    if len(exps) > LAWS_MAX_UNKNOWNS:
        raise ParamgeoError(
            f"{param.name}: {len(exps)} monomials of degree <= {degree} in {param.n} parameters "
            f"exceed the limit {LAWS_MAX_UNKNOWNS}; lower the degree or the sizes")
    coeffs, symbols, how = None, None, method
    if method == "symbolic":
        coeffs, symbols = _laws_symbolic(param, exps)
        if coeffs is None:
            how = "numeric"
    if coeffs is None:
        coeffs = _laws_numeric(param, exps, degree, seed, policy)
        if symbols is None:
            symbols = _default_symbols(param)
    laws = tuple(_format_law(c, exps, symbols) for c in coeffs)
    indep = _independent_count(coeffs, exps, param, seed, policy)
    return ConservationLaws(laws=laws, degree=degree, independent=indep, expected=algebra.n_laws,
                            complete=indep == algebra.n_laws, method=how)


def _default_symbols(param):
    import sympy

    names = [lab.replace("[", "_").replace("]", "").replace(",", "_") for lab in
             param.spec.labels()]
    return list(sympy.symbols(names, real=True))


def _laws_symbolic(param, exps):
    """Rational coefficient vectors (rows, reduced echelon) or None if phi is not polynomial."""
    import sympy
    from sympy.polys.domains import QQ
    from sympy.polys.matrices import DomainMatrix

    symbols, fields = symbolic_fields(param)
    monos = [sympy.Mul(*[s ** e for s, e in zip(symbols, ex)]) for ex in exps]
    grads = [[sympy.diff(mo, s) for s in symbols] for mo in monos]
    rows = {}
    try:
        for i, X in enumerate(fields):
            for k, g in enumerate(grads):
                expr = sum((gi * xi for gi, xi in zip(g, X) if gi != 0 and xi != 0),
                           sympy.Integer(0))
                if expr == 0:
                    continue
                poly = sympy.Poly(expr, *symbols)
                if poly.domain not in (sympy.ZZ, sympy.QQ):
                    return None, symbols
                for mono, c in poly.terms():
                    rows.setdefault((i, mono), {})[k] = QQ(c.p, c.q) if hasattr(c, "p") \
                        else QQ(int(c))
    except sympy.PolynomialError:
        return None, symbols
    ncol = len(exps)
    if not rows:
        mat = [[QQ(0)] * ncol]
    else:
        mat = [[r.get(k, QQ(0)) for k in range(ncol)] for r in rows.values()]
    dm = DomainMatrix(mat, (len(mat), ncol), QQ)
    null = dm.nullspace()  # rows spanning the null space
    if null.shape[0] == 0:
        return [], symbols
    rref, _ = null.rref()
    out = []
    for row in rref.to_Matrix().tolist():
        if any(c != 0 for c in row):
            out.append([sympy.Rational(c) for c in row])
    return out, symbols


def _monomial_grads(exps, theta):
    """G[k] = grad of theta^exps[k] at theta (len(exps) x n)."""
    E = np.asarray(exps, float)
    out = np.zeros_like(E)
    for j in range(E.shape[1]):
        Ej = E.copy()
        coef = Ej[:, j].copy()
        Ej[:, j] = np.maximum(Ej[:, j] - 1, 0)
        out[:, j] = coef * np.prod(theta[None, :] ** Ej, axis=1)
    return out


def _points_needed(n, n_mono, degree, rank):
    """How many random points the sampled system starts from.

    At a point theta the identity <grad h, X_i>(theta) = 0 (i = 1..m) says only that
    grad h(theta) is orthogonal to the span of the fields, at most rank X(theta) <= n
    conditions, however large m is; and the points must determine grad h, a vector of
    polynomials of degree D - 1 in n variables (C(n + D - 1, D - 1) coefficients each). With
    fewer points the null space is spuriously large: at k <= n points where X has full rank n,
    every quadratic h = b.theta + theta^T H theta / 2 with H (theta_j - theta_1) = 0 and
    b = -H theta_1 passes, a space of dimension s (s + 1) / 2 with s = n + 1 - k. So: at least
    C(n + D - 1, D - 1) points and twice as many conditions as monomials, plus a margin."""
    conditions = int(np.ceil(2 * n_mono / max(rank, 1)))
    return max(conditions, math.comb(n + degree - 1, degree - 1)) + 3


def _null_rows(blocks, policy):
    """Rows spanning the null space of the stacked blocks (in the original coordinates)."""
    A = np.vstack(blocks)
    norms = np.maximum(np.linalg.norm(A, axis=0, keepdims=True), 1e-300)
    # all of V (the null space) without the rows x rows U of a tall system
    _, s, vt = np.linalg.svd(A / norms, full_matrices=A.shape[0] < A.shape[1])
    rank = decide_rank(s, policy, what="conservation-law system", warn=False).rank
    return vt[rank:] / norms


def _laws_numeric(param, exps, degree, seed, policy):
    """The laws from the identity at random points: the null space of the stacked
    (m x monomials) blocks <grad mono_k, X_i>(theta_j), sampled until it is stable (a further
    batch of points leaves its dimension unchanged)."""
    rng = as_rng(seed + 1 if isinstance(seed, int) else seed)
    blocks = []

    def sample(count):
        for _ in range(count):
            th = param.random_point(rng)
            X = vector_fields(param, th)  # m x n
            blocks.append(X @ _monomial_grads(exps, th).T)  # (m, c): <grad mono_k, X_i>
        return decide_rank(X, policy, warn=False).rank

    rank = sample(1)
    start = _points_needed(param.n, len(exps), degree, rank)
    sample(start - 1)
    N = _null_rows(blocks, policy)
    extra = max(3, start // 4)
    while N.shape[0]:
        sample(extra)
        M = _null_rows(blocks, policy)
        stable = M.shape[0] == N.shape[0]
        N = M
        if stable or len(blocks) > 8 * start:
            break
    if N.shape[0] == 0:
        return []
    # snapped to rationals with denominator <= 1000 within 1e-9, so exact laws print exactly
    return rational_rref(N, pivot_tol=1e-8, max_den=1000, snap_tol=1e-9)


def _format_law(coeffs, exps, symbols):
    import sympy

    expr = sympy.Integer(0)
    for c, ex in zip(coeffs, exps):
        if c != 0:
            if isinstance(c, fractions.Fraction):
                c = sympy.Rational(c.numerator, c.denominator)
            elif not isinstance(c, sympy.Basic):
                c = sympy.Float(float(c), 8)
            expr += c * sympy.Mul(*[s ** e for s, e in zip(symbols, ex)])
    return str(expr)


def _independent_count(coeffs, exps, param, seed, policy):
    if not coeffs:
        return 0
    th = param.random_point(as_rng(seed + 7 if isinstance(seed, int) else seed))
    G = _monomial_grads(exps, th)  # c x n
    C = np.asarray([[float(c) for c in row] for row in coeffs])
    return decide_rank(C @ G, policy, warn=False).rank
