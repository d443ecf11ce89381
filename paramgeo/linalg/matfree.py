"""Matrix-free geometry: J as an operator built from jvp/vjp, and rank certificates.

The dense route forms the m x n Jacobian and its SVD: O(m n) memory and O(m n min(m, n)) time,
a few thousand parameters at most. This module answers the same rank questions from the
plugin's own products J v (``jvp``) and J^T w (``vjp``), or from a sparse J where the plugin
declares ``sparse_jacobian``, allocating O(n k) for k Krylov vectors:

* the symmetry generators span a subspace V of ker J (phi is constant on orbits), so the rank is
  n - dim V exactly when J is injective on the horizontal space H = V^perp. With P_V the
  vertical projector (:meth:`paramgeo.symmetry.SymmetryGroup.vertical_projector`, closed forms
  for matrix groups) the operator

      A = P_H J^T J P_H + s P_V,     s = sigma_max(J)^2,

  is positive definite iff J is injective on H; its smallest eigenvalues are the squared
  smallest horizontal singular values of J (V is an eigenspace of eigenvalue s).
* when m <= n - dim V the question is surjectivity instead: A = J J^T (m x m), rank m iff
  lambda_min(A) > 0.

The smallest eigenvalues come from Lanczos (ARPACK ``eigsh`` on c I - A, which="LA"; Lehoucq,
Sorensen, Yang 1998) or, for a sparse J, from shift-invert Lanczos on a sparse LU of A. The rank decision
uses the same :class:`~paramgeo.geometry.RankPolicy` as the dense route on sigma_i =
sqrt(lambda_i): rank = expected - #{sigma_i <= tol}, tol = max(atol, rtol sigma_max). Each
Ritz pair (theta, x) carries the residual rho = |A x - theta x|, and an eigenvalue of A lies in
[theta - rho, theta + rho] (Parlett, "The symmetric eigenvalue problem", Theorem 4.5.1): the
certificate quotes sigma_min and that bound. The eigenvalues of J^T J resolve singular values
only down to about sqrt(eps) sigma_max ~ 1e-8 sigma_max, so each Ritz vector x is judged by
|J x| instead (accurate to about eps sigma_max for a converged vector); the route decides with
tol = max(policy tol, RTOL_FLOOR sigma_max), RTOL_FLOOR = 1e-10, and a sigma within a factor
BAND = 30 of tol makes the decision *doubtful* (with a warning).
Lanczos from a random start finds the smallest eigenvalue with probability one, but does not
prove that no smaller one exists; the certificate says so ("estimate").
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..errors import NumericalDoubtWarning, ParamgeoError
from ..results import Result
from .routes import ASSEMBLE_MAX_DIM, LANCZOS_PRODUCTS, _eigh_seconds, _factor_seconds

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .numerics import RankDecision, RankPolicy
# the Parameterization arguments are typed Any: paramgeo.contract imports this package

#: rank drops the matrix-free route counts before it refuses (Ritz vectors kept: n x that many).
MAX_DEFICIENCY = 64
#: the matrix-free route decides with tol = max(policy tol, RTOL_FLOOR * sigma_max): the |J x|
#: of Ritz vectors of a zero eigenvalue come out near 1e-12 sigma_max (Lanczos accuracy), so a
#: tolerance far below that could not be met.
RTOL_FLOOR = 1e-10
#: a matrix-free decision is doubtful when a singular value lies within this factor of tol.
BAND = 30.0
#: the share of the assembled price that locked Lanczos may spend counting a drop before the
#: route assembles instead (see _smallest)
SWITCH_AT = 0.1


class RankCertificateError(ParamgeoError):
    """The matrix-free route cannot decide the rank within its limits (the message says why and
    which route would)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankCertificate(Result):
    """How a matrix-free rank was decided.

    ``operator`` is the PSD operator whose smallest eigenvalues were computed; ``expected`` the
    rank if that operator is definite (n - orbit dim, or m); ``deficiency`` the number of
    eigenvalues at or below tol^2; ``sigma_min`` the smallest singular value of J above the
    tolerance on the tested space (the injectivity margin) and ``error_bound`` its Lanczos
    residual bound; ``small`` the singular values at or below tol; ``matvecs`` the J and J^T
    products used; ``seconds`` the wall time.
    """

    route: str
    operator: str
    expected: int
    deficiency: int
    sigma_max: float
    sigma_min: float
    error_bound: float
    small: tuple
    matvecs: int
    seconds: float
    note: str


class _Counted:
    """jvp/vjp (or a sparse J) with a product counter."""

    def __init__(self, param, theta):
        self.param, self.theta, self.count = param, theta, 0
        self.sparse = param.sparse_jacobian(theta).tocsr() if param.provides(
            "sparse_jacobian") else None

    def jvp(self, v):
        self.count += 1
        return self.sparse @ v if self.sparse is not None else np.asarray(
            self.param.jvp(self.theta, v), dtype=float)

    def vjp(self, w):
        self.count += 1
        return self.sparse.T @ w if self.sparse is not None else np.asarray(
            self.param.vjp(self.theta, w), dtype=float)


def jacobian_operator(param: Any, theta: ArrayLike) -> Any:
    """J(theta) as a ``scipy.sparse.linalg.LinearOperator`` (m x n): matvec = jvp, rmatvec =
    vjp (the plugin's closed forms, or autograd's forward/reverse mode), or the plugin's sparse
    Jacobian where it declares ``sparse_jacobian``. Nothing of size m x n is allocated."""
    from scipy.sparse.linalg import LinearOperator

    products = _Counted(param, param.as_theta(theta))
    return LinearOperator((param.m, param.n), dtype=float,
                          matvec=lambda v: products.jvp(np.ravel(v)),
                          rmatvec=lambda w: products.vjp(np.ravel(w)))


def matrix_free_bytes(param: Any) -> int:
    """Bytes the matrix-free route allocates: 2 MAX_DEFICIENCY + 4 Lanczos vectors on the
    smaller side (the Gram it works on) plus a few vectors of length max(m, n) for products."""
    side = min(param.m, param.n)
    return 8 * ((2 * MAX_DEFICIENCY + 4) * side + 4 * max(param.m, param.n))


def certify_rank(param: Any, theta: ArrayLike, policy: Optional[RankPolicy] = None,
                projector: Any = None, route: str = "matrix-free",
                 seed: int = 0, max_deficiency: int = MAX_DEFICIENCY,
                 warn: bool = True) -> RankDecision:
    """Rank of J(theta) without forming J: a :class:`~paramgeo.geometry.RankDecision` whose
    ``certificate`` is a :class:`RankCertificate` (see the module docstring for the method).

    ``projector`` is the :class:`~paramgeo.symmetry.VerticalProjector` at theta (default: the
    declared symmetry's, none without one). ``route`` is ``matrix-free`` (Lanczos on products)
    or ``sparse`` (shift-invert on the plugin's sparse J). Raises :class:`RankCertificateError`
    when the rank drop exceeds ``max_deficiency`` (counting more would keep that many length-n
    vectors; a closed-form ``rank_at`` or the dense route then answers). ``warn=False`` only
    records a doubtful decision in the result.
    """
    from .numerics import RankDecision, policy_of

    policy = policy_of(param, policy)
    theta = param.as_theta(theta)
    start = time.perf_counter()
    if projector is None and param.provides("symmetry"):
        projector = param.symmetry().vertical_projector(theta)
    k = projector.dim if projector is not None else 0
    J = _Counted(param, theta)
    rng = np.random.default_rng(seed)
    predictor_side = param.m <= param.n - k
    dim = param.m if predictor_side else param.n
    started, counted = time.process_time(), J.count
    lam_max = _largest(J, predictor_side, dim, rng)
    pair = max((time.process_time() - started) / max((J.count - counted) / 2, 1), 1e-9)
    sigma_max = float(np.sqrt(lam_max))
    tol = max(policy.tol(np.array([sigma_max])), RTOL_FLOOR * sigma_max)
    if predictor_side:
        expected, name = param.m, "J J^T"

        def apply(x):
            return J.jvp(J.vjp(x))
    else:
        expected, name = param.n - k, "P_H J^T J P_H + s P_V" if k else "J^T J"

        def apply(x):
            if projector is None or k == 0:
                return J.vjp(J.jvp(x))
            xv = projector(x)
            xh = x - xv
            y = J.vjp(J.jvp(xh))
            return y - projector(y) + lam_max * xv
    def sigmas(vec):
        """sigma_i = |J x_i| (|J^T x_i| on the predictor side) for unit Ritz vectors x_i: the
        Rayleigh quotient of J itself, accurate to eps sigma_max, not eps^(1/2) as
        sqrt(lambda_i) would be."""
        if predictor_side:
            return np.array([np.linalg.norm(J.vjp(x)) for x in vec.T])
        out = []
        for x in vec.T:
            h = x - projector(x) if projector is not None and k else x
            size = np.linalg.norm(h)  # a vertical Ritz vector (eigenvalue s) is no candidate
            out.append(np.linalg.norm(J.jvp(h)) / size if size > 0.5 else np.sqrt(lam_max))
        return np.array(out)

    use_sparse, assembled = False, ""
    if expected == 0:
        lam, sigma, res = np.zeros(0), np.zeros(0), np.zeros(0)
    elif dim <= 60:  # tiny: the operator as a dense matrix (dim products), exact eigenvalues
        lam, sigma, res = _assembled(apply, sigmas, dim, lam_max, max_deficiency)
    else:
        # shift-invert needs A assembled: J J^T, or J^T J without a vertical deflation
        use_sparse = route == "sparse" and J.sparse is not None and (predictor_side or k == 0)
        lam, sigma, res, assembled = _smallest(apply, sigmas, J, dim, predictor_side, lam_max,
                                               tol, rng, max_deficiency, use_sparse, pair)
    small = sigma <= tol
    deficiency = int(np.sum(small))
    # _smallest stops once a singular value above tol appears or the count passes the limit
    if deficiency > max_deficiency or (deficiency < expected and not np.any(~small)):
        raise RankCertificateError(
            f"{param.name}: rank drop found: J loses at least {deficiency} ranks beyond the "
            f"symmetry at this point (rank <= {expected - deficiency}, expected {expected} "
            f"without a drop); the matrix-free route counts at most max_deficiency = "
            f"{max_deficiency} (pass a larger one: max_deficiency=N, or --max-deficiency N on "
            "the command line; use route='dense' if m x n fits, or a plugin's closed-form "
            "rank, capability 'rank_at')")
    above = np.flatnonzero(~small)
    if len(above):
        i = int(above[0])
        sigma_min = float(sigma[i])
        # an eigenvalue of A within res of lambda_i: sigma^2 in [lambda_i - res, lambda_i + res]
        bound = float(max(np.sqrt(lam[i] + res[i]) - sigma_min,
                          sigma_min - np.sqrt(max(lam[i] - res[i], 0.0))))
    else:
        sigma_min, bound = 0.0, 0.0
    band = min(policy.band, BAND)
    doubt = [s for s in sigma if tol / band < s < tol * band]
    doubtful = bool(doubt)
    closest = float(doubt[0]) if doubt else float("nan")
    if doubtful and warn:
        warnings.warn(
            f"matrix-free rank of J of {param.name} decided near the tolerance: singular value "
            f"{closest:.3g} vs tol {tol:.3g} (through J^T J it resolves singular values down to "
            f"{RTOL_FLOOR:g} sigma_max); use route='dense' where m x n fits", NumericalDoubtWarning,
            stacklevel=2)
    rank = expected - deficiency
    below = float(sigma[small].max()) if deficiency else 0.0
    gap = float(sigma_min / below) if below > 0 else float("inf")
    route_used = "sparse" if use_sparse else "matrix-free"
    note = (f"{name} assembled from {dim} products and its smallest eigenvalues computed "
            "directly (priced below Lanczos at the measured cost of a product): every "
            "eigenvalue is found"
            if assembled == "eigh" else
            f"{name} assembled from {dim} products; the rank drop read from its pivoted "
            "Cholesky factor (cheaper than counting it by Lanczos), then one Lanczos run with "
            "those vectors locked for the margin: an eigenvalue lies within the bound of each "
            "Ritz value; a smaller one missed by Lanczos is possible in principle, not certified"
            if assembled else
            "Lanczos estimate with residual bound: an eigenvalue lies within the bound of each "
            "Ritz value; a smaller one missed by Lanczos is possible in principle, not certified")
    certificate = RankCertificate(route=route_used, operator=name, expected=int(expected),
                                  deficiency=deficiency, sigma_max=sigma_max, sigma_min=sigma_min,
                                  error_bound=bound, small=tuple(float(s) for s in sigma[small]),
                                  matvecs=J.count, seconds=time.perf_counter() - start, note=note)
    values = np.concatenate([[sigma_max], np.sort(sigma)[::-1]])
    return RankDecision(rank=int(rank), tol=float(tol), singular_values=values, gap=gap,
                        doubtful=doubtful, closest=closest, route=route_used,
                        certificate=certificate)


def _largest(J, predictor_side, dim, rng):
    """lambda_max(J^T J) = sigma_max(J)^2 by Lanczos on the smaller Gram (relative accuracy
    1e-4 suffices: it sets the tolerance scale and the deflation shift)."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    if predictor_side:
        op = LinearOperator((dim, dim), dtype=float, matvec=lambda x: J.jvp(J.vjp(np.ravel(x))))
    else:
        op = LinearOperator((dim, dim), dtype=float, matvec=lambda x: J.vjp(J.jvp(np.ravel(x))))
    if dim <= 60:
        A = np.column_stack([op.matvec(e) for e in np.eye(dim)])
        return float(max(np.linalg.eigvalsh((A + A.T) / 2)[-1], 0.0))
    val = eigsh(op, k=1, which="LA", tol=1e-4, ncv=8, v0=rng.standard_normal(dim),
                return_eigenvectors=False)
    return float(max(val[0], 0.0))


def _smallest(apply, sigmas, J, dim, predictor_side, lam_max, tol, rng, max_deficiency,
              use_sparse, pair):
    """(lambda, sigma, residuals, assembled): the smallest eigenvalues of the PSD operator
    ``apply`` in ascending order, the singular values ``sigmas`` of their Ritz vectors, the
    residual norms, and how the operator was assembled ("" if it was not, "eigh" or "pivoted
    Cholesky"): one Lanczos run for the smallest; at a rank drop, Lanczos runs with the vectors
    found locked, until some sigma lies above tol (or max_deficiency + 1 are found). A large
    drop is counted on the assembled operator instead, once locked Lanczos has spent SWITCH_AT
    of its price: by LAPACK's symmetric eigensolver, or from the pivoted Cholesky factor with
    one locked Lanczos run for the margin, whichever is priced lower.

    The first run is priced too (``pair``: CPU seconds of one product of ``apply``): an
    operator whose assembled price, dim products and one symmetric eigensolve, is below
    LANCZOS_PRODUCTS products is assembled at once, and a first run that has not converged
    within the assembled price (an ill-conditioned spectrum: Lanczos needs many restarts) is
    stopped and the operator assembled, so the call costs at most about twice the assembled
    price where dim <= ASSEMBLE_MAX_DIM."""
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    started, counted = time.process_time(), J.count
    op = LinearOperator((dim, dim), dtype=float, matvec=lambda x: apply(np.ravel(x)))
    # the smallest eigenvalues of A are the largest of c I - A, c > lambda_max(A): ARPACK's
    # convergence test is relative to the Ritz value, which c keeps away from 0 (on A itself a
    # zero eigenvalue can be missed). c = 1.5 lambda_max covers the deflation shift s.
    c = 1.5 * lam_max * (2.0 if not predictor_side else 1.0)
    flipped = LinearOperator((dim, dim), dtype=float, matvec=lambda x: c * np.ravel(x) - apply(
        np.ravel(x)))
    solve = shift = None
    if use_sparse:
        shift, solve = _sparse_shift_invert(J, predictor_side, lam_max, dim)
    q = min(2 if solve is not None else 1, dim - 1)
    ncv = min(dim, 8 if solve is not None else 20)
    first_price = (dim * pair + _eigh_seconds(dim) if not use_sparse and dim <= ASSEMBLE_MAX_DIM
                   else None)
    if first_price is not None and first_price <= LANCZOS_PRODUCTS * pair:
        return (*_assembled(apply, sigmas, dim, lam_max, max_deficiency), "eigh")
    # ARPACK's maxiter counts restarts, each ncv - q products
    restarts = np.inf if first_price is None else first_price / pair / (ncv - q)
    maxiter = int(max(1, min(50 * dim, restarts)))
    try:
        if solve is not None:
            lam, vec = eigsh(op, k=q, sigma=-shift, OPinv=solve, which="LM", ncv=ncv, tol=1e-12,
                             v0=rng.standard_normal(dim))
        else:
            lam, vec = eigsh(flipped, k=q, which="LA", ncv=ncv, tol=1e-13, maxiter=maxiter,
                             v0=rng.standard_normal(dim))
            lam = c - lam
    except ArpackNoConvergence:
        if first_price is not None:
            return (*_assembled(apply, sigmas, dim, lam_max, max_deficiency), "eigh")
        raise RankCertificateError(
            "Lanczos did not converge on the smallest eigenvalue of the Gram operator of J; use "
            "route='dense' if m x n fits") from None
    lam, vec, sigma, res = _ritz(apply, sigmas, lam, vec)
    # Counting a rank drop by locked Lanczos costs about 100-200 products per zero vector; the
    # assembled operator costs dim products and either one symmetric eigensolve (4/3 dim^3
    # flops of tridiagonalisation) or one pivoted Cholesky factorisation (dim^3 / 3 flops) and
    # a locked Lanczos run for the margin. All are priced from what this call measured
    # (CPU seconds per product and of the first run, and LAPACK's rates, _lapack_rates), and
    # the count switches to assembling once the first run and the locked rounds have spent
    # SWITCH_AT of the assembled price while zero vectors keep coming (the drop is not known in
    # advance: this bounds the total at (1 + SWITCH_AT) times the assembled price when the drop
    # is large, and a drop that the first rounds end costs nothing extra). A round starts only
    # if it fits in that share at the price of the last one (scaled by its Krylov size), so a
    # small operator, whose assembled price is a few first runs, is assembled at once. Prices
    # are CPU seconds (process_time): steadier than wall time on a shared machine.
    assemble_price = None
    round_seconds = first_run = time.process_time() - started  # the next round's price
    if dim <= ASSEMBLE_MAX_DIM and not use_sparse and np.any(sigma <= tol):
        per_product = first_run / max(J.count - counted, 1)
        # the factor's route adds a Lanczos run for the margin with the null space locked and a
        # Rayleigh-Ritz step on it: two to four first runs (uut at n = 576 ... 2048, products
        # counted), priced at four
        dense = {"eigh": _eigh_seconds(dim),
                 "pivoted Cholesky": _factor_seconds(dim) + 4 * first_run}
        how = min(dense, key=dense.get)
        assemble_price = 2 * dim * per_product + dense[how]
    # A rank drop. Single-vector Lanczos sees one vector of each eigenspace (in exact
    # arithmetic), so one run cannot count a multiple zero eigenvalue: lock the vectors found
    # (Z, orthonormal) by moving them to the top of the spectrum, A + c Z Z^T, and run again
    # until the smallest singular value left is above tol (Lanczos with explicit deflation;
    # Saad, "Numerical methods for large eigenvalue problems", Section 4.2.3).
    Z = np.zeros((dim, 0))
    locked_lam, locked_sigma = [], []
    assembled = ""
    while np.any(sigma <= tol) and Z.shape[1] <= max_deficiency:
        small = np.flatnonzero(sigma <= tol)
        # ask for more while many come back; after the factor only the margin, the smallest
        # eigenvalue left: one Ritz pair (the eigenvalue above the null space is often a
        # cluster, and single-vector Lanczos finds copies of a multiple eigenvalue slowly)
        block = 1 if assembled else min(32, max(4, 2 * len(small)), dim - 1)
        if (assemble_price is not None and time.process_time() - started + round_seconds * min(
                dim, 2 * block + 16) / ncv >= SWITCH_AT * assemble_price):
            if how == "eigh":
                return (*_assembled(apply, sigmas, dim, lam_max, max_deficiency), how)
            # the whole null space at once; the Lanczos round below then finds the margin
            lam, vec, sigma = _null_space_assembled(apply, sigmas, dim, tol)
            small = np.arange(len(lam))
            Z = np.zeros((dim, 0))
            locked_lam, locked_sigma = [], []
            assemble_price, assembled, block = None, how, 1
        for i in small:  # Gram-Schmidt twice; a vector already in span Z adds nothing
            x = vec[:, i] - Z @ (Z.T @ vec[:, i])
            x = x - Z @ (Z.T @ x)
            if np.linalg.norm(x) > 0.5:
                Z = np.hstack([Z, (x / np.linalg.norm(x))[:, None]])
                locked_lam.append(lam[i])
                locked_sigma.append(sigma[i])
        if Z.shape[1] > max_deficiency:  # refused by the caller: no margin needed
            lam = sigma = res = np.zeros(0)
            break

        def locked(x, Z=Z):
            x = np.ravel(x)
            return c * x - apply(x) - c * (Z @ (Z.T @ x))

        ncv, round_start = min(dim, 2 * block + 16), time.process_time()
        try:
            lam, vec = eigsh(LinearOperator((dim, dim), dtype=float, matvec=locked),
                             k=block, which="LA", ncv=ncv, tol=1e-13,
                             maxiter=50 * dim, v0=rng.standard_normal(dim))
        except ArpackNoConvergence:
            raise RankCertificateError(
                f"Lanczos did not converge while counting a rank drop ({Z.shape[1]} found); "
                "use route='dense' if m x n fits") from None
        round_seconds = time.process_time() - round_start
        fresh = np.linalg.norm(Z.T @ vec, axis=0) < 0.5  # not a locked vector found again
        lam, vec, sigma, res = _ritz(apply, sigmas, c - lam[fresh], vec[:, fresh])
    return (np.concatenate([locked_lam, lam]), np.concatenate([locked_sigma, sigma]),
            np.concatenate([np.zeros(len(locked_lam)), res]), assembled)


def _assemble(apply, dim):
    """The PSD operator ``apply`` as a dim x dim array, column by column (dim products), in
    Fortran order, so LAPACK factors it in place. Not symmetrised: LAPACK's symmetric routines
    read one triangle (eigh the lower, dpstrf with lower=0 the upper), so the rounding
    asymmetry of the columns, of order eps lambda_max, is a backward error of that size, and a
    transposed pass over dim^2 entries (with a temporary as large) is saved."""
    A = np.empty((dim, dim), order="F")
    e = np.zeros(dim)
    for i in range(dim):
        e[i] = 1.0
        A[:, i] = apply(e)
        e[i] = 0.0
    return A


def _assembled(apply, sigmas, dim, lam_max, max_deficiency):
    """(lambda, sigma, residuals) of the PSD operator ``apply`` assembled and solved by LAPACK's symmetric eigensolver for its max_deficiency + 1 smallest eigenvalues
    (scipy.linalg.eigh, subset_by_index); residuals eps dim lambda_max (backward stability of
    the Householder tridiagonalisation)."""
    from scipy.linalg import eigh

    A = _assemble(apply, dim)
    top = min(max_deficiency + 1, dim) - 1
    lam, vec = eigh(A, subset_by_index=[0, top], overwrite_a=True, check_finite=False)
    return lam, sigmas(vec), np.full(len(lam), np.finfo(float).eps * dim * lam_max)


def _null_space_assembled(apply, sigmas, dim, tol):
    """(lambda, Ritz vectors, sigma) of the null space of the PSD operator ``apply``: assembled
    (dim products), factored by LAPACK's pivoted Cholesky (dpstrf, Higham, "Accuracy and
    stability of numerical algorithms", Section 10.3): P^T A P = R^T R with R = [R11 R12]
    of rank c, whose null space is P [-R11^{-1} R12; I]. That basis is orthonormalised and
    Rayleigh-Ritz on it (dim - c products) gives the vectors; those with sigma = |J x| <= tol
    are kept (the rest, if the factor's rank came out low, are found again above tol)."""
    from scipy.linalg import lapack, solve_triangular

    A = _assemble(apply, dim)
    R, piv, rank, info = lapack.dpstrf(A, tol=-1.0, lower=0, overwrite_a=1)
    if info < 0:  # pragma: no cover - an argument error of the LAPACK call
        raise RuntimeError(f"dpstrf failed (info {info})")
    del A
    N = np.zeros((dim, dim - rank))
    N[piv[rank:] - 1] = np.eye(dim - rank)
    # the triangular solve reads R11's upper triangle only (below it A's lower one is left)
    N[piv[:rank] - 1] = -solve_triangular(R[:rank, :rank], R[:rank, rank:], lower=False,
                                          check_finite=False)
    del R
    N, _ = np.linalg.qr(N)
    AN = np.column_stack([apply(x) for x in N.T])
    lam, W = np.linalg.eigh((N.T @ AN + AN.T @ N) / 2)
    vec = N @ W
    sigma = sigmas(vec)
    keep = sigma <= tol
    return lam[keep], vec[:, keep], sigma[keep]


def _ritz(apply, sigmas, lam, vec):
    """Sorted Ritz pairs (lambda, vectors), the singular values of the vectors and the residual
    norms |A x - lambda x|."""
    order = np.argsort(lam)
    lam, vec = np.asarray(lam)[order], vec[:, order]
    res = np.array([np.linalg.norm(apply(vec[:, i]) - lam[i] * vec[:, i])
                    for i in range(len(lam))])
    return lam, vec, sigmas(vec), res


def _sparse_shift_invert(J, predictor_side, lam_max, dim):
    """(shift, x -> (A + shift I)^{-1} x) by one sparse LU (scipy splu) of A = J J^T or J^T J
    (shift = 1e-12 lambda_max keeps A + shift I invertible at a rank drop)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import LinearOperator, splu

    S = J.sparse
    A = (S @ S.T) if predictor_side else (S.T @ S)
    shift = max(1e-12 * lam_max, np.finfo(float).tiny)
    lu = splu(sp.csc_matrix(A + shift * sp.identity(dim)))
    return shift, LinearOperator((dim, dim), dtype=float, matvec=lambda x: lu.solve(np.ravel(x)))
