"""Induced mirror maps and conservation laws of gradient flow through a parameterization.

Gradient flow on theta for L = ell o phi moves the predictor beta = phi(theta) along

    d beta / dt = -J(theta) J(theta)^T grad ell(beta).

Everything here is generic: it reads only the contract (jacobian, jacobian_derivative,
forward, ``symbolic()`` when declared, ``mirror_potential`` when declared, ``init_at_scale``).

The Lie algebra of the vector fields
------------------------------------
The fields are X_i = grad phi_i (the rows of J), i = 1..m. Their Lie bracket is

    [X_i, X_j](theta) = DX_j(theta) X_i(theta) - DX_i(theta) X_j(theta),

with DX_i = Hess phi_i; row j of ``param.jacobian_derivative(theta, X_i)`` is DX_j X_i. The
parameterization is *commuting* when every bracket vanishes (Li, Wang, Lee, Arora, NeurIPS 2022,
"Implicit bias of gradient descent on reparametrized models: on equivalence to mirror descent",
Definition 4.1). The generated algebra is W_1 = span{X_i}, W_{k+1} = W_k + [W_1, W_k]
(right-nested brackets span the Lie algebra, by the Jacobi identity); its dimension at a point
is the rank of the values there, and the iteration stops once that rank no longer grows
(Marcotte, Gribonval, Peyre, NeurIPS 2023, "Abide by the law and follow the flow: conservation
laws for gradient flows", Section 4). The number of independent conservation laws of gradient
flow (for every loss) is n - dim Lie(X)(theta) (same paper, Theorem 3.3).

A conservation law is h with <grad h, X_i> = 0 identically for every i (then it is orthogonal to
every bracket too: [X_i, X_j] h = X_i X_j h - X_j X_i h = 0). For polynomial h of degree <= D
this is a linear system in the coefficients, solved exactly over the rationals with sympy when
``symbolic()`` is available, by sampling and an SVD otherwise.

Mirror potentials
-----------------
For a commuting parameterization (rank J = m), gradient flow from theta_0 is a mirror flow

    d/dt grad R(beta) = -grad ell(beta),   i.e.  d beta/dt = -Hess R(beta)^{-1} grad ell(beta),

for a Legendre function R fixed by theta_0 with grad R(beta_0) = 0 (Li et al. 2022, Theorem
4.8). Its convex conjugate is explicit through the flows of the commuting fields: with
psi(mu) = exp(sum_i mu_i X_i)(theta_0) (the time-one flow of the field mu . X),

    grad R*(mu) = Q(mu) = phi(psi(mu)),  Hess R*(mu) = J J^T at psi(mu),
    R*(mu) = int_0^1 <phi(psi(s mu)), mu> ds,

so grad R(beta) = Q^{-1}(beta) (a convex minimisation), R(beta) = <mu, beta> - R*(mu) and
Hess R(beta) = (J J^T)^{-1} at psi(grad R(beta)): :func:`numerical_potential`. Plugins that know
a closed form declare the ``mirror_potential`` capability (the hyperbolic entropy for Hadamard
products, Woodworth et al. 2020).

Commuting regimes of a loss
---------------------------
A parameterization whose fields do not all commute (UU^T, UV^T) can still induce a mirror flow
for a particular loss and initialisation. For ell(beta) = (1/2N) sum_i (<a_i, beta> - y_i)^2
gradient flow only sees the fields Y_i = J^T a_i; :func:`commuting_regime` tests whether they
commute, finds linear coordinates lambda = C beta through which the loss factors and whose
fields commute (for square predictors with commuting symmetric measurement matrices: the joint
eigenbasis E, lambda_j = e_j^T beta e_j), freezes coordinates whose field vanishes at theta0,
and builds the potential of the others: the plugin's closed form restricted to them when it
passes Li et al.'s identity grad R(lambda(psi(mu))) = mu, else the numerical construction.
For UU^T (dQ/dt = -2 (G Q + Q G)) with commuting A_i and a seed Q0 = U0 U0^T commuting with
them, Q stays diagonal in E and d lambda_j/dt = -4 lambda_j g_j: the entropy
R(lambda) = 1/4 sum_j [lambda_j log(lambda_j / lambda0_j) - lambda_j + lambda0_j]
(Gunasekar et al. 2017, Section 3). :func:`verify_regime` and :func:`regime_implicit_bias`
check the flow and its limit in those coordinates.

The implicit-bias problem
-------------------------
The limit of the mirror flow on a squared loss with data X beta = y solves
argmin R(beta) subject to X beta = y (Gunasekar, Lee, Soudry, Srebro 2018; Li et al. 2022,
Theorem 4.10): :func:`solve_implicit_bias` solves it with Newton's method in coordinates of the
affine constraint set; :func:`implicit_bias` compares it with the gradient-flow limit, with the
minimum-l1 solution (scipy.optimize.linprog; the alpha -> 0 limit of the hyperbolic entropy) and
the minimum-l2 solution (the pseudoinverse; the alpha -> infinity limit).
"""

import dataclasses
import fractions
import itertools
import warnings
from typing import Callable, Optional

import autograd
import autograd.numpy as anp
import numpy as np

from .errors import NumericalDoubtWarning, ParamgeoError, ShapeError
from .geometry import DEFAULT_POLICY, as_rng, decide_rank, range_basis, rational_rref
from .parameterization import Parameterization
from .results import Result, to_jsonable


class NotCommutingError(ParamgeoError):
    """A mirror potential was requested for a parameterization whose fields do not commute."""


# ====================================================================== brackets (numeric)
def vector_fields(param, theta):
    """The m x n matrix whose rows are the fields X_i(theta) = grad phi_i(theta) (= J(theta))."""
    return np.asarray(param.jacobian(param.as_theta(theta)), dtype=float)


def _bracket_parts(param, theta):
    J = vector_fields(param, theta)
    # D[i, j] = DX_j(theta) X_i(theta)  (row j of d/dt J(theta + t X_i))
    D = np.stack([np.asarray(param.jacobian_derivative(theta, J[i]), float)
                  for i in range(param.m)])
    return J, D


def brackets(param, theta):
    """All brackets at theta: B[i, j] = [X_i, X_j](theta) = DX_j X_i - DX_i X_j (m x m x n).

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
#: the largest number of unknown coefficients of the conservation-law linear system
LAWS_MAX_UNKNOWNS = 2500


def _sketched_bracket(param, theta, rng):
    a, b = rng.standard_normal(param.m), rng.standard_normal(param.m)
    ya, yb = param.vjp(theta, a), param.vjp(theta, b)
    dyb_ya, dya_yb = param.hessian_vp(theta, b, ya), param.hessian_vp(theta, a, yb)
    return (float(np.linalg.norm(dyb_ya - dya_yb)),
            float(max(np.linalg.norm(dyb_ya), np.linalg.norm(dya_yb))))


@dataclasses.dataclass(frozen=True)
class CommutingTest(Result):
    """Whether the fields grad phi_i commute, with the evidence.

    ``max_bracket`` is max_{i,j} |[X_i, X_j](theta)| over the test points, ``scale`` the largest
    |DX_j X_i| there, ``relative`` their ratio; commuting iff max_bracket <= tol with
    tol = max(atol, rtol * scale) (the rank tolerance policy, ``paramgeo.geometry``). The
    symbolic route (``method="symbolic"``) decides exactly (every bracket expands to 0) and
    still reports the numeric sizes.
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


def commuting_test(param, n_points=3, seed=0, policy=None, method="auto", theta=None):
    """Decide whether all brackets [X_i, X_j] vanish (Li et al. 2022, Definition 4.1).

    ``method``: "symbolic" (exact, needs the ``symbolic`` capability), "numeric" (brackets at
    ``n_points`` random points, or at ``theta``), "auto" (symbolic when declared). The numeric
    decision uses the rank tolerance policy: commuting iff max |[X_i, X_j]| <= max(atol,
    rtol * max |DX_j X_i|); a value within ``policy.band`` of the tolerance is doubtful and warns.
    """
    method = _method(param, method)
    policy = policy or DEFAULT_POLICY
    if method == "symbolic":
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
    rel = max_b / scale if scale > 0 else 0.0
    return CommutingTest(bool(commuting), "numeric", max_b, scale, rel, tol, doubtful, worst,
                         len(points))


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


def symbolic_fields(param):
    """(symbols, fields): the m fields X_i = grad phi_i as sympy column Matrices (exact)."""
    import sympy

    from .symbolic import exact_jacobian, symbolic_form

    symbols, _ = symbolic_form(param)
    J = exact_jacobian(param)
    return symbols, [sympy.Matrix(J.row(i)).T for i in range(J.rows)]


def _sym_bracket(X, Y, symbols):
    """[X, Y] = DY X - DX Y for sympy column vectors, expanded."""
    out = Y.jacobian(symbols) * X - X.jacobian(symbols) * Y
    return out.applyfunc(lambda e: e.expand())


def symbolic_brackets(param):
    """{(i, j): [X_i, X_j]} for i < j as expanded sympy column Matrices (exact)."""
    symbols, fields = symbolic_fields(param)
    return {(i, j): _sym_bracket(fields[i], fields[j], symbols)
            for i, j in itertools.combinations(range(len(fields)), 2)}


# ====================================================================== Lie algebra
@dataclasses.dataclass(frozen=True)
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

    @property
    def n_laws(self):
        return self.n - self.dim


def _select_independent(candidates, basis, policy):
    """Indices of rows of ``candidates`` independent (over R) of ``basis`` rows and each other.

    Rows are field values stacked over several points, so dependence means dependence as
    functions (with constant coefficients). Greedy Gram-Schmidt with a relative tolerance.
    """
    q = []
    if len(basis):  # orthonormal rows spanning the kept values (rank by the tolerance policy)
        q = list(range_basis(np.asarray(basis, float).T, policy, warn=False)[0].T)
    scale = max([np.linalg.norm(c) for c in candidates] + [0.0])
    keep = []
    for k, c in enumerate(candidates):
        r = c.copy()
        for _ in range(2):  # re-orthogonalise once for stability
            for b in q:
                r = r - (b @ r) * b
        if np.linalg.norm(r) > max(policy.atol, 1e3 * policy.rtol * scale) and scale > 0:
            q.append(r / np.linalg.norm(r))
            keep.append(k)
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


def lie_algebra(param, theta=None, seed=0, max_depth=5, policy=None, method="auto",
                n_test_points=3):
    """Dimension of the Lie algebra generated by X_i = grad phi_i at theta (random if None).

    W_1 = span{X_i}; W_{k+1} = W_k + span{[X_i, w] : w new in W_k}; stop when dim W_k(theta)
    stops growing, reaches n, or when no bracket is new as a function (Marcotte, Gribonval,
    Peyre 2023, Section 4 and their Algorithm; the test point should be generic). Fields are
    pruned to an R-linearly independent set by their values at ``n_test_points`` extra random
    points. ``method`` "symbolic" builds the brackets exactly with sympy (point values then exact
    at a random integer point when theta is None); "numeric" nests autograd derivatives of
    ``forward`` (the k-th level needs derivatives of order k + 1).
    """
    method = _method(param, method)
    policy = policy or DEFAULT_POLICY
    rng = as_rng(seed)
    exact = method == "symbolic" and theta is None
    if exact:
        point = rng.integers(-9, 10, size=param.n)
        point[point == 0] = 1
    else:
        point = param.as_theta(theta) if theta is not None else param.random_point(rng)
    extra = [param.random_point(rng) for _ in range(n_test_points)]
    n = param.n
    if method == "symbolic":
        return _lie_symbolic(param, point, extra, exact, max_depth, policy)

    pts = [point] + extra
    M = _linear_field_matrices(param, rng)
    if M is not None:  # X_i = M_i theta: brackets are matrix commutators
        return _grow_algebra(
            M, lambda mats: np.einsum("kpq,qs->ksp", mats, np.stack(pts, axis=1)),
            lambda first, cur: (np.einsum("lpq,kqr->klpr", cur, first)
                                - np.einsum("kpq,lqr->klpr", first, cur)).reshape(-1, n, n),
            lambda mats, idx: mats[np.asarray(idx, dtype=int)],
            max_depth, policy, n, param.m, "numeric (linear fields)")
    return _grow_algebra(
        autograd.jacobian(param.forward_flat),
        lambda F: np.stack([np.asarray(F(p), float) for p in pts], axis=1),
        lambda first, cur: _numeric_family_brackets(first, cur, n),
        _take, max_depth, policy, n, param.m, "numeric")


def _grow_algebra(fields, values, bracket, take, max_depth, policy, n, m, method):
    """The iteration W_{k+1} = W_k + [W_1, W_k] of :func:`lie_algebra` on a family of fields.

    ``values(family)`` gives an array (k, P, n) of the family's values at the test points (the
    first one is the point where the dimension is read), ``bracket(first, current)`` the family
    of brackets [X_k, C_l], ``take(family, idx)`` a sub-family. New fields are kept when their
    stacked values are independent of those kept so far (dependence as functions)."""
    v1 = values(fields)
    keep = _select_independent([v.ravel() for v in v1], [], policy)
    first = take(fields, keep)
    kept_at_point = [v1[k, 0] for k in keep]
    kept_stack = [v1[k].ravel() for k in keep]
    rank_J = decide_rank(np.asarray(v1[:, 0]), policy, warn=False).rank
    levels, counts = [rank_J], [len(keep)]
    current, stabilised = first, False
    for _ in range(max_depth - 1):
        if levels[-1] == n:
            stabilised = True
            break
        H = bracket(first, current)
        vh = values(H)
        new = _select_independent([v.ravel() for v in vh], kept_stack, policy)
        if not new:
            stabilised = True
            break
        kept_stack += [vh[k].ravel() for k in new]
        kept_at_point += [vh[k, 0] for k in new]
        levels.append(decide_rank(np.asarray(kept_at_point), policy, warn=False).rank)
        counts.append(len(new))
        current = take(H, new)
        if levels[-1] == levels[-2]:
            stabilised = True
            break
    return LieAlgebra(levels[-1], n, m, rank_J, tuple(levels), tuple(counts), stabilised,
                      method)


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


def _lie_symbolic(param, point, extra, exact, max_depth, policy):
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
    for _ in range(max_depth - 1):
        if levels[-1] == n:
            stabilised = True
            break
        cand = [_sym_bracket(x, w, symbols) for x in first for w in current]
        cand = [c for c in cand if any(e != 0 for e in c)]
        if not cand:
            stabilised = True
            break
        cl = [sympy.lambdify([symbols], list(c), "numpy") for c in cand]
        cs = stacked(cl)
        new = _select_independent(cs, kept_stack, policy)
        if not new:
            stabilised = True
            break
        kept += [cand[k] for k in new]
        kept_stack += [cs[k] for k in new]
        levels.append(rank(kept))
        counts.append(len(new))
        current = [cand[k] for k in new]
        if levels[-1] == levels[-2]:
            stabilised = True
            break
    return LieAlgebra(levels[-1], n, param.m, rank_J, tuple(levels), tuple(counts),
                      stabilised, "symbolic")


# ====================================================================== conservation laws
@dataclasses.dataclass(frozen=True)
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


def conservation_laws(param, degree=2, seed=0, policy=None, method="auto", algebra=None):
    """Polynomial conservation laws h (degree <= ``degree``, no constant term).

    Solves <grad h, X_i> = 0 identically for every field X_i = grad phi_i: with sympy, exactly
    over the rationals (coefficients of the polynomial identity; requires polynomial phi); else
    numerically, from the identity at random points and an SVD null space under the tolerance
    policy. The count of functionally independent laws is compared with n - dim Lie(X)
    (Marcotte, Gribonval, Peyre 2023, Theorem 3.3).
    """
    if int(degree) < 1:
        raise ParamgeoError(f"the degree of the laws must be >= 1, got {degree}")
    degree = int(degree)
    method = _method(param, method)
    policy = policy or DEFAULT_POLICY
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
    return ConservationLaws(laws, degree, indep, algebra.n_laws, indep == algebra.n_laws, how)


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


def _laws_numeric(param, exps, degree, seed, policy):
    rng = as_rng(seed + 1 if isinstance(seed, int) else seed)
    n_mono = len(exps)
    n_points = int(np.ceil(2 * n_mono / max(param.m, 1))) + 3
    blocks = []
    for _ in range(n_points):
        th = param.random_point(rng)
        X = vector_fields(param, th)  # m x n
        G = _monomial_grads(exps, th)  # c x n
        blocks.append(X @ G.T)  # (m, c): <grad mono_k, X_i>
    A = np.vstack(blocks)
    A = A / np.maximum(np.linalg.norm(A, axis=0, keepdims=True), 1e-300)
    _, s, vt = np.linalg.svd(A, full_matrices=True)
    rank = decide_rank(s, policy, what="conservation-law system", warn=False).rank
    N = vt[rank:]  # rows span the null space (in column-normalised coordinates)
    if N.shape[0] == 0:
        return []
    N = N / np.maximum(np.linalg.norm(np.vstack(blocks), axis=0, keepdims=True), 1e-300)
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


# ====================================================================== potentials
@dataclasses.dataclass(frozen=True, eq=False)
class Potential(Result):
    """A Legendre potential R of the mirror flow started at beta0 = phi(theta0).

    ``value``, ``grad``, ``hessian`` are callables of beta (flat, length m); grad R(beta0) = 0.
    ``conjugate_grad`` (optional) is grad R*(mu), the inverse mirror map. ``formula`` is the
    text of R where known, ``source`` "closed form" or "numerical (Li et al. 2022)".
    """

    formula: str
    source: str
    reference: str
    theta0: np.ndarray
    beta0: np.ndarray
    value: Callable = dataclasses.field(repr=False)
    grad: Callable = dataclasses.field(repr=False)
    hessian: Callable = dataclasses.field(repr=False)
    conjugate_grad: Optional[Callable] = dataclasses.field(default=None, repr=False)

    def to_dict(self):
        return {k: to_jsonable(getattr(self, k))
                for k in ("formula", "source", "reference", "theta0", "beta0")}

    def __str__(self):
        return f"Potential ({self.source}): {self.formula}\n  reference: {self.reference}"


def mirror_potential(param, theta0, method="auto", check=True, seed=0, policy=None):
    """The Legendre potential R of the mirror flow induced from theta0 (Li et al. 2022).

    ``method``: "closed" (the plugin's ``mirror_potential`` capability), "numerical"
    (:func:`numerical_potential`), "auto" (closed form where the plugin has one, else
    numerical). With ``check``, a non-commuting parameterization raises NotCommutingError.
    """
    theta0 = param.as_theta(theta0)
    if method not in ("auto", "closed", "numerical"):
        raise ParamgeoError(f"method must be auto, closed or numerical, got {method!r}")
    if check:
        test = commuting_test(param, n_points=1, seed=seed, policy=policy, method="numeric")
        if not test.commuting:
            raise NotCommutingError(
                f"{param.name} {param.sizes}: the fields grad phi_i do not commute (largest "
                f"bracket {test.max_bracket:.3g}, relative {test.relative:.3g}); gradient flow "
                "is not a mirror flow for every loss, so there is no mirror potential")
    if method in ("auto", "closed") and param.provides("mirror_potential"):
        pot = param.mirror_potential(theta0)
        if pot is not None:
            return pot
    if method == "closed":
        raise ParamgeoError(
            f"{param.name} has no closed-form mirror potential at this theta0; use "
            "method='numerical'")
    return numerical_potential(param, theta0, policy=policy)


def commuting_flow(param, theta0, mu, *, rtol=1e-11, atol=1e-13):
    """(psi(mu), R*(mu)): the time-one flow of the field sum_i mu_i X_i from theta0 (ODE
    d theta/ds = J(theta)^T mu, DOP853) and R*(mu) = int_0^1 <phi(psi(s mu)), mu> ds, integrated
    alongside (Li et al. 2022, Section 4: grad R*(mu) = phi(psi(mu)) for commuting fields)."""
    from scipy.integrate import solve_ivp

    mu = np.asarray(mu, float)

    def rhs(_, z):
        th = z[:-1]
        return np.append(param.vjp(th, mu), np.asarray(param.forward_flat(th)) @ mu)

    sol = solve_ivp(rhs, (0.0, 1.0), np.append(theta0, 0.0), method="DOP853", rtol=rtol,
                    atol=atol)
    if not sol.success:
        raise ParamgeoError(f"flow of the commuting fields failed: {sol.message}")
    return sol.y[:-1, -1], float(sol.y[-1, -1])


def numerical_potential(param, theta0, *, rtol=1e-11, atol=1e-13, policy=None):
    """Li et al. (2022, Section 4) construction of R for a commuting parameterization.

    psi(mu) = time-one flow of the field sum_i mu_i X_i from theta0 (ODE d theta/ds =
    J(theta)^T mu); grad R*(mu) = phi(psi(mu)), Hess R*(mu) = J J^T at psi(mu),
    R*(mu) = int_0^1 <phi(psi(s mu)), mu> ds. Then grad R(beta) = argmin_mu R*(mu) - <beta, mu>
    (trust-region Newton), R(beta) = <mu, beta> - R*(mu), Hess R(beta) = (J J^T)^{-1} at psi(mu).
    Requires rank J(theta0) = m (the fields independent).
    """
    from scipy.optimize import minimize

    theta0 = param.as_theta(theta0)
    m = param.m
    rank = decide_rank(param.jacobian(theta0), policy, warn=False).rank
    if rank != m:
        raise ParamgeoError(
            f"{param.name}: the numerical mirror potential needs the m = {m} fields grad phi_i "
            f"independent at theta0, but rank J(theta0) = {rank}; choose another theta0")
    beta0 = np.asarray(param.forward_flat(theta0), float)
    cache = {}

    def flow(mu):
        key = mu.tobytes()
        if key not in cache:
            th, rstar = commuting_flow(param, theta0, mu, rtol=rtol, atol=atol)
            J = param.jacobian(th)
            cache.clear() if len(cache) > 256 else None
            cache[key] = (th, rstar, np.asarray(param.forward_flat(th), float), J @ J.T)
        return cache[key]

    def dual(beta):
        beta = np.asarray(beta, float)
        res = minimize(lambda mu: flow(mu)[1] - beta @ mu, np.zeros(m),
                       jac=lambda mu: flow(mu)[2] - beta, hess=lambda mu: flow(mu)[3],
                       method="trust-exact", options={"gtol": 1e-12, "maxiter": 500})
        mu = res.x
        if np.linalg.norm(flow(mu)[2] - beta) > 1e-7 * (1 + np.linalg.norm(beta)):
            raise ParamgeoError(
                f"beta is outside the domain of the mirror potential (no mu with "
                f"phi(psi(mu)) = beta; residual {np.linalg.norm(flow(mu)[2] - beta):.3g})")
        return mu

    def value(beta):
        mu = dual(beta)
        return float(mu @ np.asarray(beta, float) - flow(mu)[1])

    def hessian(beta):
        return np.linalg.inv(flow(dual(beta))[3])

    return Potential(
        "R(beta) = <mu, beta> - R*(mu), grad R*(mu) = phi(exp(sum_i mu_i X_i)(theta0)) "
        "(no closed form; evaluated numerically)",
        "numerical (Li et al. 2022)",
        "Li, Wang, Lee, Arora (2022) Implicit bias of gradient descent on reparametrized "
        "models: on equivalence to mirror descent, Theorem 4.8",
        theta0, beta0, value, dual, hessian, conjugate_grad=lambda mu: flow(np.asarray(
            mu, float))[2])


# ====================================================================== mirror flow, verify
def mirror_flow(potential, loss, times, *, rtol=1e-10, atol=1e-13, method="LSODA"):
    """Integrate the mirror flow d/dt grad R(beta) = -grad ell(beta) from beta0 at ``times``.

    With a closed-form potential: d beta/dt = -Hess R(beta)^{-1} grad ell(beta). With only the
    conjugate map (numerical potentials): the dual coordinates mu = grad R(beta) obey
    d mu/dt = -grad ell(grad R*(mu)), mu(0) = 0. Returns the predictors (T x m).
    """
    from scipy.integrate import solve_ivp

    times = np.asarray(times, float)
    beta0 = np.asarray(potential.beta0, float)
    if potential.conjugate_grad is not None and potential.source != "closed form":
        def rhs(_, mu):
            return -loss.grad(potential.conjugate_grad(mu))

        sol = solve_ivp(rhs, (0.0, times[-1]), np.zeros_like(beta0), t_eval=times,
                        method=method, rtol=rtol, atol=atol)
        return np.array([potential.conjugate_grad(mu) for mu in sol.y.T]), sol

    def rhs(_, beta):
        return -np.linalg.solve(potential.hessian(beta), loss.grad(beta))

    sol = solve_ivp(rhs, (0.0, times[-1]), beta0, t_eval=times, method=method, rtol=rtol,
                    atol=atol)
    return sol.y.T, sol


@dataclasses.dataclass(frozen=True)
class Verification(Result):
    """Parameter gradient flow pushed to predictors vs the predicted mirror flow.

    ``deviation`` = max_t |phi(theta(t)) - beta_mirror(t)|_inf along the recorded times;
    ``relative`` divides by max_t |beta(t)|_inf.
    """

    deviation: float
    relative: float
    t_final: float
    n_records: int
    potential: str
    source: str
    flow_success: bool
    mirror_success: bool


def verify(param, theta0, loss, t_final=100.0, *, n_records=60, log_times=True, rtol=1e-11,
           atol=1e-14, potential=None):
    """Integrate gradient flow on theta and the mirror flow of R side by side; report the
    largest deviation of the predictors along the trajectory (Li et al. 2022, Theorem 4.8:
    they coincide for commuting parameterizations)."""
    from .flows import gradient_flow

    theta0 = param.as_theta(theta0)
    potential = potential or mirror_potential(param, theta0)
    traj = gradient_flow(param, loss, theta0, t_final, rtol=rtol, atol=atol,
                         n_records=n_records, log_times=log_times)
    betas, sol = mirror_flow(potential, loss, traj.times, rtol=rtol, atol=atol)
    if betas.shape != traj.predictors.shape:
        raise ParamgeoError(f"the mirror flow stopped early: {sol.message}")
    dev = float(np.abs(betas - traj.predictors).max())
    scale = float(np.abs(traj.predictors).max())
    return Verification(dev, dev / scale if scale > 0 else dev, float(traj.times[-1]),
                        len(traj.times), potential.formula, potential.source,
                        bool(traj.success), bool(sol.success))


# ====================================================================== implicit bias
def _check_data(X, y):
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    if X.ndim != 2:
        raise ShapeError(f"the design X must be a 2-d array (N x p), got shape {X.shape}")
    if X.shape[0] != y.shape[0]:
        raise ShapeError(f"X has {X.shape[0]} rows but y has {y.shape[0]} entries; they must agree")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ShapeError("X or y contains NaN or infinite values")
    return X, y


def min_l1(X, y):
    """argmin |beta|_1 s.t. X beta = y, by linear programming (scipy.optimize.linprog, HiGHS):
    beta = a - b, a, b >= 0, minimise sum(a + b)."""
    from scipy.optimize import linprog

    X, y = _check_data(X, y)
    p = X.shape[1]
    res = linprog(np.ones(2 * p), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None),
                  method="highs")
    if not res.success:
        raise ParamgeoError(f"the minimum-l1 problem has no solution: {res.message}")
    return res.x[:p] - res.x[p:]


def min_l2(X, y):
    """argmin |beta|_2 s.t. X beta = y: the pseudoinverse solution X^+ y."""
    X, y = _check_data(X, y)
    return np.linalg.pinv(X) @ y


def solve_implicit_bias(potential, X, y, *, tol=1e-12, maxiter=5000):
    """argmin R(beta) subject to X beta = y, R the potential (minus its linear part at beta0).

    Coordinates on the affine set: beta = b_p + N z (b_p = projection of beta0 onto it, N an
    orthonormal basis of ker X); damped Newton with Armijo backtracking (Boyd and
    Vandenberghe 2004, Algorithm 9.5) on z with gradient N^T grad R and Hessian N^T Hess R N,
    until the Newton decrement falls below ``tol`` (or a step no longer lowers R in floating
    point). When b_p lies outside the domain of R (an entropy on an orthant), the concave dual
    max_nu <y, nu> - R*(X^T nu) is solved instead (:func:`_solve_implicit_bias_dual`).
    Returns (beta, kkt) where kkt is the relative size of the part of grad R(beta) outside
    range X^T (0 at the solution).
    """
    from scipy.linalg import null_space

    X, y = _check_data(X, y)
    if X.shape[1] != len(potential.beta0):
        raise ShapeError(f"X has {X.shape[1]} columns but the predictor has "
                         f"{len(potential.beta0)} entries")
    beta0 = np.asarray(potential.beta0, float)
    bp = beta0 + np.linalg.lstsq(X, y - X @ beta0, rcond=None)[0]
    if np.linalg.norm(X @ bp - y) > 1e-8 * (1 + np.linalg.norm(y)):
        raise ParamgeoError("X beta = y has no solution (inconsistent data); the implicit-bias "
                            "problem needs an underdetermined, consistent system")
    N = null_space(X)
    if N.shape[1] == 0:
        return bp, 0.0

    def parts(z):
        beta = bp + N @ z
        return N.T @ potential.grad(beta), N.T @ potential.hessian(beta) @ N

    z = np.zeros(N.shape[1])
    value = potential.value(bp)
    if not np.isfinite(value):  # e.g. an entropy whose domain is an orthant: go through the dual
        return _solve_implicit_bias_dual(potential, X, y, tol=tol, maxiter=maxiter)
    for _ in range(maxiter):  # damped Newton with Armijo backtracking (R is strictly convex)
        g, H = parts(z)
        step = np.linalg.solve(H, g)
        dec = float(g @ step)  # Newton decrement squared
        if dec <= tol * tol:
            break
        t, accepted = 1.0, False
        while t > 1e-12:
            new = potential.value(bp + N @ (z - t * step))
            # a step that does not lower R in floating point is no progress: finish below
            if np.isfinite(new) and new <= value - 0.25 * t * dec and new < value:
                accepted = True
                break
            t /= 2
        if not accepted:  # at the resolution of R's values: finish with pure Newton steps
            for _ in range(20):
                z_new = z - step
                g_new, _ = parts(z_new)
                if not np.all(np.isfinite(g_new)) or np.linalg.norm(g_new) >= np.linalg.norm(g):
                    break
                z = z_new
                g, H = parts(z)
                step = np.linalg.solve(H, g)
            break
        z, value = z - t * step, new
    beta = bp + N @ z
    g = potential.grad(beta)
    kkt = float(np.linalg.norm(N.T @ g) / max(np.linalg.norm(g), 1e-300))
    return beta, kkt


def _conjugate_grad(potential, mu, start, tol=1e-13, maxiter=500):
    """grad R*(mu) = argmin_beta R(beta) - <mu, beta>, by damped Newton from ``start`` (a point
    of the domain of R) with backtracking that stays in the domain; the plugin's or the
    numerical construction's inverse mirror map when the potential carries one."""
    if potential.conjugate_grad is not None:
        return np.asarray(potential.conjugate_grad(mu), float)
    beta = np.asarray(start, float).copy()
    val = potential.value(beta) - mu @ beta
    for _ in range(maxiter):
        g = potential.grad(beta) - mu
        step = np.linalg.solve(potential.hessian(beta), g)
        dec = float(g @ step)
        if dec <= tol * tol:
            break
        t = 1.0
        while t > 1e-14:
            cand = beta - t * step
            new = potential.value(cand) - mu @ cand if np.all(np.isfinite(cand)) else np.inf
            if np.isfinite(new) and new <= val - 0.25 * t * dec and new < val:
                break
            t /= 2
        else:
            break
        beta, val = cand, new
    return beta


def _solve_implicit_bias_dual(potential, X, y, *, tol=1e-12, maxiter=500):
    """argmin R s.t. X beta = y through the concave dual max_nu <y, nu> - R*(X^T nu).

    KKT: grad R(beta) = X^T nu and X beta = y, so beta = grad R*(X^T nu) (Rockafellar 1970,
    Theorem 23.5). Newton on nu with gradient y - X beta(nu) and Hessian
    -X Hess R(beta)^{-1} X^T, backtracking on the dual value; beta(nu) by :func:`_conjugate_grad`
    warm-started at the previous iterate (nu = 0 gives beta0, inside the domain). Used when the
    least-change interpolator lies outside the domain of R (entropies on an orthant).
    """
    beta0 = np.asarray(potential.beta0, float)
    nu = np.zeros(X.shape[0])

    def dual(nu, start):
        mu = X.T @ nu
        b = _conjugate_grad(potential, mu, start)
        return float(y @ nu - (mu @ b - potential.value(b))), b

    val, beta = dual(nu, beta0)
    for _ in range(maxiter):
        g = y - X @ beta
        if np.linalg.norm(g) <= tol * (1 + np.linalg.norm(y)):
            break
        Hd = X @ np.linalg.solve(potential.hessian(beta), X.T)
        step = np.linalg.lstsq(Hd, g, rcond=None)[0]
        t = 1.0
        while t > 1e-14:
            new, b = dual(nu + t * step, beta)
            if np.isfinite(new) and new >= val + 1e-4 * t * (g @ step):
                break
            t /= 2
        else:
            break
        nu, val, beta = nu + t * step, new, b
    if np.linalg.norm(X @ beta - y) > 1e-6 * (1 + np.linalg.norm(y)):
        raise ParamgeoError(
            f"the implicit-bias problem has no solution in the domain of the potential (dual "
            f"Newton stopped with |X beta - y| = {np.linalg.norm(X @ beta - y):.3g}); the data "
            "may not be reachable from theta0")
    from scipy.linalg import null_space

    N = null_space(X)
    gr = potential.grad(beta)
    kkt = float(np.linalg.norm(N.T @ gr) / max(np.linalg.norm(gr), 1e-300)) if N.size else 0.0
    return beta, kkt


@dataclasses.dataclass(frozen=True)
class ImplicitBias(Result):
    """The gradient-flow limit against argmin R s.t. X beta = y, min-l1 and min-l2.

    ``deviation`` = |beta_flow - beta_R|_inf; ``l1_gap`` = |beta_R|_1 - |beta_l1|_1 and
    ``l1_distance`` = |beta_R - beta_l1|_inf (-> 0 as alpha -> 0); ``l2_distance`` =
    |beta_R - X^+ y|_inf (-> 0 as alpha -> infinity).
    """

    alpha: Optional[float]
    potential: str
    deviation: float
    kkt: float
    flow_time: float
    flow_loss: float
    l1_gap: float
    l1_distance: float
    l2_distance: float
    beta_flow: np.ndarray
    beta_potential: np.ndarray
    beta_l1: np.ndarray
    beta_l2: np.ndarray

    def __str__(self):
        a = f" alpha = {self.alpha:g}" if self.alpha is not None else ""
        return "\n".join([
            f"ImplicitBias{a}",
            f"  potential       {self.potential}",
            f"  |flow limit - argmin R|_inf   {self.deviation:.3g}  (flow to t = "
            f"{self.flow_time:.4g}, loss {self.flow_loss:.3g}; KKT residual {self.kkt:.2g})",
            f"  l1 gap |b_R|_1 - |b_l1|_1     {self.l1_gap:.3g}",
            f"  |b_R - b_l1|_inf              {self.l1_distance:.3g}",
            f"  |b_R - X^+ y|_inf             {self.l2_distance:.3g}",
        ])


def implicit_bias(param, X, y, alpha=None, theta0=None, *, t_final=1e9, stop_loss=None,
                  rtol=1e-10, atol=1e-15, potential=None, trajectory=None):
    """Solve argmin R(beta) s.t. X beta = y and compare with the limit of gradient flow.

    theta0 is ``param.init_at_scale(alpha)`` unless given. The flow (``paramgeo.flows``) runs on
    ell(beta) = |X beta - y|^2 / (2N) to ``t_final`` or until the loss falls below
    ``stop_loss`` (default 1e-26 (1 + |y|^2 / N)). The potential's minimiser is found by
    :func:`solve_implicit_bias`; the references are :func:`min_l1` and :func:`min_l2`
    (Woodworth et al. 2020: the alpha -> 0 and alpha -> infinity limits of the hyperbolic
    entropy).
    """
    from .flows import gradient_flow
    from .losses import LinearMeasurements

    X, y = _check_data(X, y)
    if X.shape[1] != param.m:
        raise ShapeError(f"X has {X.shape[1]} columns but {param.name} {param.sizes} has "
                         f"predictors of dimension {param.m}; they must agree")
    if theta0 is None:
        if alpha is None or not np.isfinite(alpha) or alpha <= 0:
            raise ParamgeoError(f"give a positive init scale alpha (or theta0), got {alpha}")
        theta0 = param.init_at_scale(alpha)
    theta0 = param.as_theta(theta0)
    potential = potential or mirror_potential(param, theta0)
    loss = LinearMeasurements(X, y)
    if trajectory is None:
        stop = stop_loss if stop_loss is not None else 1e-26 * (1 + y @ y / len(y))
        trajectory = gradient_flow(param, loss, theta0, t_final, rtol=rtol, atol=atol,
                                   n_records=40, log_times=True, stop_loss=stop)
    beta_flow = trajectory.final_predictor
    beta_R, kkt = solve_implicit_bias(potential, X, y)
    b1, b2 = min_l1(X, y), min_l2(X, y)
    return ImplicitBias(
        None if alpha is None else float(alpha), potential.formula,
        float(np.abs(beta_flow - beta_R).max()), kkt, float(trajectory.times[-1]),
        float(trajectory.losses[-1]), float(np.abs(beta_R).sum() - np.abs(b1).sum()),
        float(np.abs(beta_R - b1).max()), float(np.abs(beta_R - b2).max()),
        beta_flow, beta_R, b1, b2)


# ====================================================================== summary report
@dataclasses.dataclass(frozen=True)
class MirrorReport(Result):
    """Everything the ``paramgeo mirror`` command shows for one parameterization."""

    name: str
    sizes: dict
    n: int
    m: int
    commuting: bool
    max_bracket: float
    relative_bracket: float
    algebra_dim: int
    algebra_levels: tuple
    n_laws: int
    laws: tuple
    laws_complete: bool
    laws_degree: int
    potential: Optional[str]
    potential_source: Optional[str]
    alpha: Optional[float]
    method: str

    def __str__(self):
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        lines = [
            f"{self.name} ({sizes}): n = {self.n} parameters, m = {self.m} fields grad phi_i",
            f"commuting: {'yes' if self.commuting else 'no'} (largest bracket "
            f"{self.max_bracket:.3g}, relative {self.relative_bracket:.3g}; {self.method})",
            f"generated Lie algebra: dimension {self.algebra_dim} "
            f"(by bracket depth: {', '.join(map(str, self.algebra_levels))})",
            f"conservation laws: {self.n_laws} = n - dim; polynomial of degree <= "
            f"{self.laws_degree}: {len(self.laws)}"
            + ("" if self.laws_complete else " (not a complete set)"),
        ]
        lines += [f"  {law}" for law in self.laws]
        if self.commuting:
            at = f" from init scale alpha = {self.alpha:g}" if self.alpha is not None else ""
            lines.append(f"mirror potential{at} ({self.potential_source}):")
            lines.append(f"  {self.potential}")
        else:
            lines.append("mirror potential: none (the fields do not commute, so gradient flow "
                         "is not a mirror flow for every loss)")
        return "\n".join(lines)


def mirror(param, alpha=None, theta0=None, degree=2, seed=0, policy=None, method="auto"):
    """Commuting test, generated Lie algebra, conservation laws and mirror potential.

    theta0 = ``param.init_at_scale(alpha)`` (alpha defaults to 1) unless given.
    """
    test = commuting_test(param, seed=seed, policy=policy, method=method)
    max_b, rel = test.max_bracket, test.relative
    alg = lie_algebra(param, seed=seed, policy=policy, method=method)
    try:
        laws = conservation_laws(param, degree=degree, seed=seed, policy=policy, method=method,
                                 algebra=alg)
        law_list, complete = laws.laws, laws.complete
    except ParamgeoError as exc:
        law_list, complete = (f"(search skipped: {exc})",), False
    formula = source = None
    if test.commuting:
        if theta0 is None:
            theta0 = param.init_at_scale(1.0 if alpha is None else alpha)
        try:
            pot = mirror_potential(param, theta0, check=False, policy=policy)
            formula, source = pot.formula, pot.source
        except ParamgeoError as exc:
            formula, source = f"none: {exc}", "unavailable"
    return MirrorReport(param.name, dict(param.sizes), param.n, param.m, test.commuting,
                        max_b, rel, alg.dim, alg.levels, alg.n_laws, law_list, complete,
                        degree, formula, source, None if alpha is None else float(alpha),
                        test.method)


# ====================================================================== commuting regimes
class LinearCoordinates(Parameterization):
    """lambda = C phi(theta): k linear coordinates of another parameterization's predictor.

    Its fields are Z_j = J^T c_j (c_j the rows of C), its Jacobian C J and the derivative of
    that Jacobian C dJ; everything is read from the base parameterization's contract. Used by
    :func:`commuting_regime` for losses that depend on phi only through lambda.
    """

    name = "linear-coordinates"
    capabilities = frozenset({"jacobian", "jvp", "vjp"})

    def __init__(self, base, C, label="coordinates"):
        self.base = base
        self.C = np.atleast_2d(np.asarray(C, dtype=float))
        if self.C.shape[1] != base.m:
            raise ShapeError(f"the coordinate matrix has {self.C.shape[1]} columns but "
                             f"{base.name} has predictors of dimension {base.m}")
        super().__init__()
        self.name = f"{base.name} ({label})"
        self.sizes = dict(base.sizes)

    def make_spec(self):
        return self.base.spec

    def make_predictor_shape(self):
        return (self.C.shape[0],)

    def forward(self, theta):
        return anp.dot(self.C, self.base.forward_flat(theta))

    def random_point(self, rng):
        return self.base.random_point(rng)

    def jacobian(self, theta):
        return self.C @ np.asarray(self.base.jacobian(theta), float)

    def jvp(self, theta, v):
        return self.C @ np.asarray(self.base.jvp(theta, v), float)

    def vjp(self, theta, w):
        return np.asarray(self.base.vjp(theta, self.C.T @ np.asarray(w, float)), float)

    def jacobian_derivative(self, theta, v):
        # row j: d/dt (J^T c_j)(theta + t v) = Hess(c_j . phi)(theta) v  (k Hessian-vector
        # products instead of the m x n derivative of J)
        return np.stack([np.asarray(self.base.hessian_vp(theta, c, v), float) for c in self.C])


def _measurements(param, loss):
    """(A, y): the squared loss (1/2N) sum (<a_i, beta> - y_i)^2 as rows a_i of an N x m A."""
    from .losses import LinearMeasurements, QuadraticMeasurements

    loss.check_dim(param)
    if isinstance(loss, QuadraticMeasurements):  # a_i = vec(x_i x_i^T)
        return np.einsum("ia,ib->iab", loss.X, loss.X).reshape(loss.N, -1), loss.y
    if isinstance(loss, LinearMeasurements):
        return np.asarray(loss.A, float), loss.y
    raise ParamgeoError(
        f"commuting regimes are decided for squared losses on linear measurements "
        f"(LinearMeasurements, QuadraticMeasurements); got {type(loss).__name__}")


def joint_eigenbasis(matrices, seed_matrix=None, *, rng=None, tol=1e-9):
    """(E, residual): an orthonormal E (columns e_j) with E^T S E diagonal for every S given.

    The S are symmetric and assumed to commute. E diagonalises a random combination
    sum_i c_i S_i; within clusters of (numerically) equal eigenvalues the
    compression of ``seed_matrix`` is diagonalised too (so Q0 = seed_matrix is diagonal in E
    whenever it commutes with the S_i). ``residual`` = max_i |offdiag(E^T S_i E)| / |S_i| (two
    retries with fresh combinations if it exceeds ``tol``).
    """
    S = np.asarray(matrices, float)
    rng = as_rng(rng)
    norms = np.maximum(np.linalg.norm(S, axis=(1, 2)), 1e-300)
    best = None
    for _ in range(3):
        T = np.tensordot(rng.standard_normal(len(S)) / norms, S, axes=1)
        w, V = np.linalg.eigh(T)
        cut = np.flatnonzero(np.diff(w) > 1e-7 * max(np.abs(w).max(), 1e-300)) + 1
        E = V.copy()
        if seed_matrix is not None:
            for g in np.split(np.arange(len(w)), cut):
                if len(g) > 1:
                    _, W = np.linalg.eigh(V[:, g].T @ seed_matrix @ V[:, g])
                    E[:, g] = V[:, g] @ W
        D = np.einsum("aj,iab,bk->ijk", E, S, E)
        off = D - np.einsum("ijj->ij", D)[:, :, None] * np.eye(len(w))
        residual = float((np.linalg.norm(off, axis=(1, 2)) / norms).max(initial=0.0))
        if best is None or residual < best[1]:
            best = (E, residual)
        if residual <= tol:
            break
    return best


def _relative_commutators(S):
    """max_{i<j} |S_i S_j - S_j S_i| / (|S_i| |S_j|)."""
    norms = np.maximum(np.linalg.norm(S, axis=(1, 2)), 1e-300)
    out = 0.0
    for i, j in itertools.combinations(range(len(S)), 2):
        c = S[i] @ S[j] - S[j] @ S[i]
        out = max(out, float(np.linalg.norm(c) / (norms[i] * norms[j])))
    return out


def _spectral_coordinates(param, A, beta0, rng, tol):
    """Joint spectral coordinates lambda_j = e_j^T beta e_j of square predictors, or a reason."""
    shape = param.predictor_shape
    if len(shape) != 2 or shape[0] != shape[1]:
        return None, f"predictors of shape {shape} are not square matrices", None
    d = shape[0]
    mats = A.reshape(-1, d, d)
    B0 = beta0.reshape(d, d)
    symmetric = all(np.linalg.norm(B - B.T) <= 1e-12 * (1 + np.linalg.norm(B)) for B in
                    (B0, np.reshape(param.forward_flat(param.random_point(rng)), (d, d))))
    skew = max(float(np.linalg.norm(M - M.T) / max(np.linalg.norm(M), 1e-300)) for M in mats)
    if not symmetric and skew > tol:
        return None, ("the measurement matrices are not symmetric and the predictor is not "
                      "symmetric, so there is no joint spectral basis"), None
    S = (mats + mats.transpose(0, 2, 1)) / 2  # <A_i, beta> = <S_i, beta> for symmetric beta
    u, s, vt = np.linalg.svd(S.reshape(len(S), -1), full_matrices=False)
    basis = vt[s > 1e-12 * s[0]].reshape(-1, d, d) if len(s) and s[0] > 0 else S[:0]
    commutator = _relative_commutators(basis)
    if commutator > tol:
        return None, (f"the (symmetrised) measurement matrices do not commute (largest relative "
                      f"commutator {commutator:.3g})"), commutator
    Q0 = (B0 + B0.T) / 2
    seed_comm = max([float(np.linalg.norm(Q0 @ M - M @ Q0) / max(np.linalg.norm(Q0) *
                                                                  np.linalg.norm(M), 1e-300))
                     for M in basis] + [0.0])
    seed_commutes = seed_comm <= tol
    E, residual = joint_eigenbasis(list(basis) + ([Q0] if seed_commutes else []),
                                   seed_matrix=Q0, rng=rng, tol=tol)
    if residual > 1e3 * tol:
        return None, f"no joint eigenbasis found (residual {residual:.3g})", commutator
    lam0 = np.einsum("aj,ab,bj->j", E, Q0, E)
    order = np.argsort(-lam0, kind="stable")
    E = E[:, order]
    C = np.stack([np.outer(E[:, j], E[:, j]).ravel() for j in range(d)])
    return dict(C=C, basis=E, commutator=commutator, seed_commutes=bool(seed_commutes),
                seed_commutator=seed_comm), None, commutator


def _restrict(full, Ca, beta0, lam0a, label):
    """The predictor-space potential R restricted to beta = beta0 + Ca^T (lambda - lambda0)."""
    def emb(lam):
        return beta0 + Ca.T @ (np.asarray(lam, float) - lam0a)

    return Potential(
        f"{full.formula} [restricted to the {label}]", full.source, full.reference,
        full.theta0, lam0a.copy(), lambda lam: float(full.value(emb(lam))),
        lambda lam: Ca @ np.asarray(full.grad(emb(lam)), float),
        lambda lam: Ca @ np.asarray(full.hessian(emb(lam)), float) @ Ca.T)


def _identity_residual(sub, theta0, pot, rng, n_tests=2):
    """max over a few random mu of |grad R(lambda(psi(mu))) - mu| / |mu|, and |grad R(lambda0)|.

    Li et al. (2022, Section 4): along the flows psi(mu) = exp(sum mu_j Z_j)(theta0) of the
    commuting fields, mu = grad R(lambda(psi(mu))) characterises the potential (with
    grad R(lambda0) = 0). mu is scaled by 1 / sqrt(|K K^T|) (K = C J(theta0)), at most 0.25.
    """
    K = sub.jacobian(theta0)
    scale = max(1.0, float(np.sqrt(np.linalg.norm(K @ K.T, 2))))
    try:
        res = float(np.linalg.norm(pot.grad(pot.beta0)))
        for _ in range(n_tests):
            mu = 0.25 * rng.standard_normal(sub.m) / scale
            th, _ = commuting_flow(sub, theta0, mu)
            g = pot.grad(np.asarray(sub.forward_flat(th), float))
            res = max(res, float(np.linalg.norm(g - mu) / np.linalg.norm(mu)))
    except (ParamgeoError, np.linalg.LinAlgError, FloatingPointError):
        return float("inf")
    return res if np.isfinite(res) else float("inf")


#: a plugin's closed form is accepted in a regime's coordinates when Li et al.'s identity
#: grad R(lambda(psi(mu))) = mu holds to this relative accuracy
IDENTITY_TOL = 1e-7


@dataclasses.dataclass(frozen=True, eq=False)
class CommutingRegime(Result):
    """Whether gradient flow of a squared loss on linear measurements is a mirror flow.

    The loss (1/2N) sum_i (<a_i, beta> - y_i)^2 depends on beta = phi(theta) only through
    linear coordinates lambda = C beta (``coordinates``: "spectral", lambda_j = e_j^T beta e_j
    in a joint orthonormal eigenbasis E of the measurement matrices, or "measurements", an
    orthonormal basis of their span), with <a_i, beta> = sum_j design[i, j] lambda_j.
    ``commuting``: the fields grad <a_i, phi> commute (Li et al. 2022, Definition 4.1;
    ``max_bracket``, ``relative_bracket``). Coordinates whose field vanishes at theta0 are
    ``frozen`` (commuting flows keep them constant); ``potential`` is the Legendre function of
    the ``active`` ones, from the plugin's closed form restricted to them when it passes the
    identity check (``identity_residual``), else by the numerical construction.
    ``seed_commutes``: Q0 = sym phi(theta0) commutes with the measurement matrices (then it is
    diagonal in E and, for UU^T, Q(t) stays diagonal: lambda are its eigenvalues).
    """

    name: str
    commuting: bool
    coordinates: Optional[str]
    reason: str
    max_bracket: float
    relative_bracket: float
    measurement_commutator: Optional[float]
    seed_commutes: Optional[bool]
    basis: Optional[np.ndarray]
    C: Optional[np.ndarray]
    lambda0: Optional[np.ndarray]
    active: tuple
    frozen: tuple
    design: Optional[np.ndarray]
    target: Optional[np.ndarray]
    identity_residual: Optional[float]
    potential: Optional[Potential] = dataclasses.field(default=None, repr=False)
    theta0: Optional[np.ndarray] = dataclasses.field(default=None, repr=False)
    param: Optional[Parameterization] = dataclasses.field(default=None, repr=False)

    @property
    def potential_formula(self):
        return None if self.potential is None else self.potential.formula

    @property
    def potential_source(self):
        return None if self.potential is None else self.potential.source

    def coordinates_param(self):
        """The active coordinates lambda_a = C_a phi(theta) as a parameterization."""
        return LinearCoordinates(self.param, self.C[list(self.active)], f"{self.coordinates} "
                                 "coordinates")

    def reduced_loss(self):
        """The loss as a function of the active coordinates: (1/2N) |D_a lambda_a - y'|^2 with
        y' = y - D_f lambda0_f (frozen coordinates keep their initial values)."""
        from .losses import LinearMeasurements

        a, f = list(self.active), list(self.frozen)
        return LinearMeasurements(self.design[:, a],
                                  self.target - self.design[:, f] @ self.lambda0[f])

    def to_dict(self):
        out = {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name not in ("potential", "theta0", "param")}
        out["potential"] = self.potential_formula
        out["potential_source"] = self.potential_source
        return out

    def __str__(self):
        lines = [f"CommutingRegime of {self.name}",
                 f"  fields grad <A_i, phi> commute: {'yes' if self.commuting else 'no'} "
                 f"(largest bracket {self.max_bracket:.3g}, relative "
                 f"{self.relative_bracket:.3g})"]
        if self.measurement_commutator is not None:
            lines.append(f"  measurement matrices: largest relative commutator "
                         f"{self.measurement_commutator:.3g}; seed commutes: "
                         f"{self.seed_commutes}")
        if self.coordinates:
            lines.append(f"  coordinates: {self.coordinates} ({len(self.active)} active, "
                         f"{len(self.frozen)} frozen)")
        if self.reason:
            lines.append(f"  note: {self.reason}")
        if self.potential is not None:
            lines.append(f"  potential ({self.potential.source}): {self.potential.formula}")
        else:
            lines.append("  potential: none")
        return "\n".join(lines)


def commuting_regime(param, loss, theta0, *, policy=None, seed=0, n_points=2,
                     closed_form=True):
    """Decide whether gradient flow of ``loss`` from theta0 is a mirror flow, and build it.

    For ell(beta) = (1/2N) sum_i (<a_i, beta> - y_i)^2 gradient flow only sees the fields
    Y_i = grad <a_i, phi> = J^T a_i (grad L = sum_i r_i Y_i / N). Steps:

    1. commuting test of the Y_i (:func:`commuting_test` on the coordinates of the measurement
       span, at random points): if they do not commute, no mirror map is claimed;
    2. coordinates lambda = C beta through which the loss factors: for square predictors with
       symmetric (or, for symmetric phi, symmetrised) commuting measurement matrices S_i, the
       joint eigenbasis E (:func:`joint_eigenbasis`, refined by Q0 = sym phi(theta0)) and
       lambda_j = e_j^T beta e_j, so <A_i, beta> = sum_j (e_j^T S_i e_j) lambda_j; kept if the
       fields grad lambda_j commute too (a larger commuting family than the Y_i); otherwise an
       orthonormal basis of the measurement span;
    3. coordinates whose field J^T c_j vanishes at theta0 are frozen (a field commuting with
       the others stays zero along their flows), the others must be independent at theta0;
    4. the potential of the active coordinates: the plugin's ``mirror_potential(theta0)``
       restricted to beta = beta0 + C_a^T (lambda - lambda0), accepted when it satisfies
       grad R(lambda(psi(mu))) = mu at random mu (IDENTITY_TOL), else
       :func:`numerical_potential` of the coordinates (Li et al. 2022, Theorem 4.8).

    For UU^T with commuting A_i and U0 = alpha E[:, :r] this is the entropy
    R(lambda) = 1/4 sum_j [lambda_j log(lambda_j / alpha^2) - lambda_j + alpha^2] on the first
    r spectral coordinates (d/dt log lambda_j = -4 g_j), the others frozen at 0 (Gunasekar et
    al. 2017, Section 3; see docs/mirror.md). Returns a :class:`CommutingRegime`.
    """
    policy = policy or DEFAULT_POLICY
    rng = as_rng(seed)
    theta0 = param.as_theta(theta0)
    A, y = _measurements(param, loss)
    beta0 = np.asarray(param.forward_flat(theta0), float)
    tol = max(policy.rtol, 1e-12)
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    Cm = vt[: decide_rank(s, policy, warn=False).rank]
    if len(Cm) == 0:
        raise ParamgeoError("all measurements are zero; the loss does not depend on theta")
    test = commuting_test(LinearCoordinates(param, Cm, "measurements"), n_points=n_points,
                          seed=rng, policy=policy, method="numeric")
    common = dict(name=param.name, max_bracket=test.max_bracket,
                  relative_bracket=test.relative, theta0=theta0, param=param)
    spec, why, meas_comm = _spectral_coordinates(param, A, beta0, rng, tol)
    if not test.commuting:
        return CommutingRegime(commuting=False, coordinates=None, reason=(
            "the fields grad <A_i, phi> do not commute, so gradient flow of this loss is not a "
            "mirror flow (no potential claimed)" + (f"; {why}" if why else "")),
            measurement_commutator=meas_comm, seed_commutes=None, basis=None, C=None,
            lambda0=None, active=(), frozen=(), design=None, target=None,
            identity_residual=None, **common)
    notes = []
    kind, C, basis, seed_commutes = "measurements", Cm, None, None
    if spec is not None:
        sub = LinearCoordinates(param, spec["C"], "spectral coordinates")
        if commuting_test(sub, n_points=n_points, seed=rng, policy=policy,
                          method="numeric").commuting:
            kind, C, basis = "spectral", spec["C"], spec["basis"]
            seed_commutes = spec["seed_commutes"]
        else:
            notes.append("the fields of the spectral coordinates do not commute; using the "
                         "measurement span")
    else:
        notes.append(f"no spectral coordinates: {why}")
    design = A @ C.T
    lam0 = C @ beta0
    Z = C @ np.asarray(param.jacobian(theta0), float)
    znorm = np.linalg.norm(Z, axis=1)
    if znorm.max(initial=0.0) == 0:
        raise ParamgeoError(f"{param.name}: every coordinate field vanishes at theta0, so "
                            "gradient flow does not move; choose a theta0 with J(theta0) != 0")
    frozen = znorm <= max(policy.atol, 1e-9 * znorm.max())
    active = np.flatnonzero(~frozen)
    out = dict(commuting=True, coordinates=kind, measurement_commutator=meas_comm,
               seed_commutes=seed_commutes, basis=basis, C=C, lambda0=lam0,
               active=tuple(int(i) for i in active),
               frozen=tuple(int(i) for i in np.flatnonzero(frozen)), design=design, target=y,
               **common)
    rank = decide_rank(Z[active], policy, warn=False).rank
    if rank < len(active):
        notes.append(f"the fields of the {len(active)} active coordinates have rank {rank} at "
                     "theta0, so no mirror potential in these coordinates")
        return CommutingRegime(reason="; ".join(notes), identity_residual=None, **out)
    Ca = C[active]
    sub = LinearCoordinates(param, Ca, f"{kind} coordinates")
    pot, residual = None, None
    if closed_form and param.provides("mirror_potential"):
        full = param.mirror_potential(theta0)
        if full is not None:
            cand = _restrict(full, Ca, beta0, lam0[active], f"{kind} coordinates")
            residual = _identity_residual(sub, theta0, cand, rng)
            if residual <= IDENTITY_TOL:
                pot = cand
            else:
                notes.append(f"the plugin's closed form fails grad R(lambda(psi(mu))) = mu in "
                             f"these coordinates (residual {residual:.3g}); built numerically")
    if pot is None:
        pot = numerical_potential(sub, theta0, policy=policy)
    return CommutingRegime(reason="; ".join(notes), identity_residual=residual, potential=pot,
                           **out)


def _regime(param, loss, theta0, regime):
    regime = regime or commuting_regime(param, loss, theta0)
    if regime.potential is None:
        raise NotCommutingError(f"{param.name}: {regime.reason}")
    return regime


@dataclasses.dataclass(frozen=True)
class RegimeVerification(Result):
    """Gradient flow against the mirror flow of a commuting regime, in its coordinates.

    ``deviation`` = max_t |C_a phi(theta(t)) - lambda_mirror(t)|_inf, ``relative`` divides by
    max_t |lambda(t)|_inf; ``frozen_drift`` = max_t |lambda_f(t) - lambda_f(0)|;
    ``off_diagonal`` (spectral coordinates) = max_t |offdiag(E^T beta(t) E)| / max_t |beta(t)|
    (zero when the predictor stays diagonal in E, i.e. lambda are its eigenvalues).
    """

    deviation: float
    relative: float
    frozen_drift: float
    off_diagonal: Optional[float]
    t_final: float
    n_records: int
    potential: str
    source: str
    flow_success: bool
    mirror_success: bool


def verify_regime(param, theta0, loss, t_final=50.0, *, regime=None, n_records=40,
                  log_times=True, rtol=1e-11, atol=1e-14):
    """Integrate gradient flow on theta (``paramgeo.flows``) and the mirror flow of the regime's
    potential on the reduced loss (:func:`mirror_flow`) at the same times; report the largest
    deviation of the active coordinates (Li et al. 2022, Theorem 4.8)."""
    from .flows import gradient_flow

    theta0 = param.as_theta(theta0)
    regime = _regime(param, loss, theta0, regime)
    traj = gradient_flow(param, loss, theta0, t_final, rtol=rtol, atol=atol,
                         n_records=n_records, log_times=log_times, conserved=False)
    lam = np.asarray(traj.predictors) @ regime.C.T
    a, f = list(regime.active), list(regime.frozen)
    mirror_path, sol = mirror_flow(regime.potential, regime.reduced_loss(), traj.times,
                                   rtol=rtol, atol=atol)
    if mirror_path.shape != lam[:, a].shape:
        raise ParamgeoError(f"the mirror flow stopped early: {sol.message}")
    dev = float(np.abs(mirror_path - lam[:, a]).max())
    scale = float(np.abs(lam[:, a]).max())
    drift = float(np.abs(lam[:, f] - regime.lambda0[f]).max()) if f else 0.0
    off = None
    if regime.basis is not None:
        E, d = regime.basis, regime.basis.shape[0]
        Ms = np.einsum("aj,tab,bk->tjk", E, np.asarray(traj.predictors).reshape(-1, d, d), E)
        offd = Ms - np.einsum("tjj->tj", Ms)[:, :, None] * np.eye(d)
        off = float(np.abs(offd).max() / max(np.abs(traj.predictors).max(), 1e-300))
    return RegimeVerification(dev, dev / scale if scale > 0 else dev, drift, off,
                              float(traj.times[-1]), len(traj.times), regime.potential.formula,
                              regime.potential.source, bool(traj.success), bool(sol.success))


@dataclasses.dataclass(frozen=True)
class RegimeImplicitBias(Result):
    """The gradient-flow limit against argmin R(lambda) s.t. the data, in a regime's coordinates.

    ``deviation`` = |lambda_flow - lambda_R|_inf over the active coordinates;
    ``predictor_deviation`` = |phi(theta_flow) - phi(psi(grad R(lambda_R)))|_inf: the limit
    predictor predicted by the commuting flows (theta(t) = psi(mu(t)), Li et al. 2022).
    """

    potential: str
    deviation: float
    predictor_deviation: float
    kkt: float
    flow_time: float
    flow_loss: float
    lambda_flow: np.ndarray
    lambda_potential: np.ndarray
    beta_flow: np.ndarray
    beta_predicted: np.ndarray


def regime_implicit_bias(param, theta0, loss, *, regime=None, t_final=1e9, stop_loss=None,
                         rtol=1e-10, atol=1e-15):
    """Solve argmin R(lambda_a) s.t. D_a lambda_a = y' (:func:`solve_implicit_bias`, the dual
    route when the least-change start leaves the domain) and compare with the limit of gradient
    flow, in the active coordinates of :func:`commuting_regime` (Gunasekar et al. 2018;
    Li et al. 2022, Theorem 4.10). The predicted limit predictor is phi(psi(mu)) with
    mu = grad R(lambda_R) (:func:`commuting_flow`)."""
    from .flows import gradient_flow

    theta0 = param.as_theta(theta0)
    regime = _regime(param, loss, theta0, regime)
    red = regime.reduced_loss()
    lam_R, kkt = solve_implicit_bias(regime.potential, red.A, red.y)
    th_pred, _ = commuting_flow(regime.coordinates_param(), theta0,
                                regime.potential.grad(lam_R))
    beta_pred = np.asarray(param.forward_flat(th_pred), float)
    _, y = _measurements(param, loss)
    stop = stop_loss if stop_loss is not None else 1e-26 * (1 + y @ y / len(y))
    traj = gradient_flow(param, loss, theta0, t_final, rtol=rtol, atol=atol, n_records=40,
                         log_times=True, stop_loss=stop, conserved=False)
    beta_flow = np.asarray(traj.final_predictor, float)
    lam_flow = regime.C[list(regime.active)] @ beta_flow
    return RegimeImplicitBias(regime.potential.formula, float(np.abs(lam_flow - lam_R).max()),
                              float(np.abs(beta_flow - beta_pred).max()), kkt,
                              float(traj.times[-1]), float(traj.losses[-1]), lam_flow, lam_R,
                              beta_flow, beta_pred)
