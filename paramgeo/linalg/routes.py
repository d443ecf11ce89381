"""The rank route: which of dense SVD, sparse and matrix-free certificates decides a rank.

:func:`choose_route` takes the plugin's closed form where it declares one and otherwise the
route that costs least at the point, by a cost model measured once (:func:`route_prices`):
one JVP + VJP pair timed at the point, LAPACK's SVD and eigensolver rates timed once per
process (:func:`_lapack_rates`), and the time of the plugin's ``jacobian`` once a dense rank
has taken it. :mod:`paramgeo.linalg.matfree` holds the matrix-free certificate itself.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..errors import ParamgeoError
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray
# the Parameterization arguments are typed Any: paramgeo.contract imports this package

#: m x n up to which horizontal_lift's route="auto" forms the dense Jacobian (16 MB).
DENSE_MAX_ENTRIES = 2_000_000
#: m x n up to which the rank's route="auto" may form the dense Jacobian (256 MB); below it the
#: dense and matrix-free routes are priced (:func:`route_prices`), beyond it J is never formed.
DENSE_MEMORY_ENTRIES = 32_000_000
#: SVD work m n min(m, n) up to which route="auto" takes the dense route unpriced (1e9 flops:
#: a fraction of a second, about what measuring LAPACK's rates once per process costs)
UNPRICED_WORK = 1_000_000_000
#: products priced for the largest eigenvalue (Lanczos to relative accuracy 1e-4, ncv = 8)
LARGEST_PRODUCTS = 30
#: the work m n min(m, n) of that SVD above which route="auto" prefers a declared sparse J
#: (a 1000 x 2000 SVD costs 2e9 and takes seconds to a minute on a shared core; shift-invert
#: on the sparse J of hadamard p=1000 takes a fraction of a second).
DENSE_MAX_WORK_IF_SPARSE = 200_000_000
#: products a first Lanczos run for the smallest eigenvalue is priced at; an operator that is
#: cheaper to assemble (dim products and one symmetric eigensolve) is assembled at once, and a
#: run that has not converged within the assembled price is stopped and assembled instead
LANCZOS_PRODUCTS = 400
#: largest Gram side the matrix-free route may assemble (dim products, then one pivoted
#: Cholesky factorisation) when that is cheaper than counting a rank drop by locked Lanczos:
#: 8192^2 floats are 0.5 GB, and LAPACK factors in place.
ASSEMBLE_MAX_DIM = 8192
#: exact and high-precision: :mod:`paramgeo.geometry.precision` (mpmath singular values, same policy)
ROUTES = ("auto", "closed-form", "dense", "sparse", "matrix-free", "exact", "high-precision")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoutePrices(Result):
    """The predicted CPU seconds of the dense and matrix-free rank routes at one point, and the
    route chosen (the cheaper).

    dense = t_J + c_svd m n min(m, n): t_J the measured time of this parameterization's
    ``jacobian`` (0 before the first dense rank has timed it: the first point then weighs the
    SVD alone), c_svd LAPACK's rate (gesdd,
    singular values only) measured once in this process. matrix_free = t_pair (LARGEST_PRODUCTS
    + min(dim + c_eigh dim^3 / t_pair, LANCZOS_PRODUCTS)): one JVP + VJP pair timed at the
    point, the products of the largest eigenvalue, then the cheaper of assembling the Gram
    operator of side dim = min(m, n) (dim products and a symmetric eigensolve) and a first
    Lanczos run of LANCZOS_PRODUCTS products (see :func:`paramgeo.linalg.matfree.certify_rank`, which
    keeps to that price: a Lanczos run stops at the assembled price and assembles)."""

    chosen: str
    dense: float
    matrix_free: float
    pair_seconds: float
    jacobian_seconds: float


def choose_route(param: Any, route: str = "auto",
                 theta: Optional[ArrayLike] = None) -> str:
    """The rank route for ``param``: ``closed-form`` (the plugin declares ``rank_at``),
    ``sparse`` (a declared ``sparse_jacobian`` where the dense SVD's work m n min(m, n) exceeds
    DENSE_MAX_WORK_IF_SPARSE or m n exceeds DENSE_MAX_ENTRIES), ``dense`` where m n <=
    DENSE_MEMORY_ENTRIES and the SVD's work is at most UNPRICED_WORK, otherwise the cheaper of
    ``dense`` and ``matrix-free`` by their predicted cost at ``theta`` (:func:`route_prices`;
    default a random point of seed 0), and ``matrix-free`` where m n exceeds
    DENSE_MEMORY_ENTRIES. An explicit ``route`` is validated and returned; ``exact`` and
    ``high-precision`` (:mod:`paramgeo.geometry.precision`) are chosen only when asked for, or by
    :func:`paramgeo.geometry.rank_at` when a float64 decision is in doubt."""
    if route not in ROUTES:
        raise ParamgeoError(f"unknown rank route {route!r}; choose one of {', '.join(ROUTES)}")
    if route == "closed-form" and not param.provides("rank_at"):
        raise ParamgeoError(f"{param.name} declares no closed-form rank (capability 'rank_at'); "
                            "use route='auto', 'dense' or 'matrix-free'")
    if route == "sparse" and not param.provides("sparse_jacobian"):
        raise ParamgeoError(f"{param.name} declares no sparse Jacobian; use route='matrix-free'")
    if route == "exact" and not param.provides("symbolic"):
        raise ParamgeoError(f"{param.name} declares no symbolic form (capability 'symbolic'), "
                            "so J cannot be formed exactly; use route='high-precision'")
    route = static_route(param, route)
    if route != "priced":
        return route
    if theta is None:
        theta = param.random_point(np.random.default_rng(0))
    return route_prices(param, theta).chosen


def static_route(param: Any, route: str = "auto") -> str:
    """:func:`choose_route` by size alone: the route, or ``priced`` where the cheaper of dense
    and matrix-free is to be chosen by :func:`route_prices` (``route`` already validated)."""
    if route != "auto":
        return route
    if param.provides("rank_at"):
        return "closed-form"
    entries = param.m * param.n
    work = entries * min(param.m, param.n)
    if param.provides("sparse_jacobian"):
        return "dense" if (entries <= DENSE_MAX_ENTRIES
                           and work <= DENSE_MAX_WORK_IF_SPARSE) else "sparse"
    if entries > DENSE_MEMORY_ENTRIES:
        return "matrix-free"
    if work <= UNPRICED_WORK:
        return "dense"
    return "priced"


def route_prices(param: Any, theta: ArrayLike) -> RoutePrices:
    """:class:`RoutePrices` of the dense and matrix-free rank routes of ``param`` at
    ``theta``: one JVP + VJP pair timed there (CPU seconds), the SVD and eigensolver rates of
    :func:`_lapack_rates`, and the time of ``jacobian`` once a dense rank has measured it."""
    theta = param.as_theta(theta)
    rng = np.random.default_rng(0)
    v = rng.standard_normal(param.n)
    start = time.process_time()
    param.vjp(theta, param.jvp(theta, v))
    pair = time.process_time() - start
    m, n = param.m, param.n
    dim = min(m, n)
    jacobian = param.__dict__.get("_jacobian_seconds", 0.0)
    dense = jacobian + _lapack_rates()[2] * m * n * dim
    assembled = dim * pair + _eigh_seconds(dim) if dim <= ASSEMBLE_MAX_DIM else float("inf")
    free = pair * LARGEST_PRODUCTS + min(assembled, pair * LANCZOS_PRODUCTS)
    return RoutePrices(chosen="dense" if dense <= free else "matrix-free", dense=dense,
                       matrix_free=free, pair_seconds=pair, jacobian_seconds=jacobian)


def timed_jacobian(param: Any, theta: ArrayLike) -> NDArray[np.float64]:
    """J(theta), its CPU time kept on ``param`` for :func:`route_prices`."""
    start = time.process_time()
    J = param.jacobian(theta)
    param.__dict__["_jacobian_seconds"] = time.process_time() - start
    return J


#: side of the PSD matrix on which this process measures LAPACK's rates once (after a warm-up
#: call: a process's first call of a LAPACK routine pays for loading it, ten times the call)
CALIBRATION_DIM = 512
_RATES: dict = {}


def _lapack_rates():
    """CPU seconds per dim^3 of the symmetric eigensolve (scipy.linalg.eigh of the 65
    smallest pairs, as _assembled calls it: 4/3 dim^3 flops of tridiagonalisation) and of the
    pivoted Cholesky factorisation (dpstrf, dim^3 / 3 flops), and per m n min(m, n) of the
    singular values of an m x n matrix (numpy.linalg.svd without vectors, gesdd, as the dense
    rank calls it), measured once in this process: the first two on a CALIBRATION_DIM x
    CALIBRATION_DIM PSD matrix, the SVD on a CALIBRATION_DIM / 2 x 4 CALIBRATION_DIM one, each
    after a warm-up call on a 32-sided one.
    Per dim^3 both rates fall slowly with dim (blocking pays more on larger matrices: on one
    core 2.2e-10 and 9e-11 s at 512, 1.6e-10 and 4.4e-11 s at 2048), so the prices err high,
    which lets locked Lanczos explore a little longer than needed."""
    from scipy.linalg import eigh, lapack

    if not _RATES:
        rng = np.random.default_rng(0)
        for size in (32, CALIBRATION_DIM):
            X = rng.standard_normal((size, size // 2))
            A = np.asfortranarray(X @ X.T)
            B = A.copy(order="F")
            S = rng.standard_normal((size // 2, 4 * size))
            start = time.process_time()
            eigh(A, subset_by_index=[0, min(64, size - 1)], overwrite_a=True,
                 check_finite=False)
            middle = time.process_time()
            lapack.dpstrf(B, tol=-1.0, lower=0, overwrite_a=1)
            end = time.process_time()
            np.linalg.svd(S, compute_uv=False)
            svd = time.process_time() - end
            _RATES["eigh"], _RATES["factor"] = (middle - start) / size ** 3, (
                end - middle) / size ** 3
            _RATES["svd"] = svd / (S.size * min(S.shape))
    return _RATES["eigh"], _RATES["factor"], _RATES["svd"]


def _eigh_seconds(dim):
    """Predicted CPU seconds of a dim x dim symmetric eigensolve (:func:`_lapack_rates`)."""
    return _lapack_rates()[0] * dim ** 3


def _factor_seconds(dim):
    """Predicted CPU seconds of the pivoted Cholesky factorisation of a dim x dim PSD matrix
    (:func:`_lapack_rates`)."""
    return _lapack_rates()[1] * dim ** 3
