"""Orbit geometry from the contract: the Lie-algebra matrices of a linear action, orbit volumes,
the normal Jacobian, the coarea factor omega = vol_G / NJ and the canonical (minimum-norm) point
of an orbit.

Where the fibres of phi are G-orbits, the Lebesgue measure of Theta disintegrates as
d theta = vol_G(theta) dHaar(g) x d beta / NJ(theta), with vol_G(theta) = sqrt det(X^T X),
X = symmetry().generators(theta) (the volume of a unit of Haar measure of the orbit), and NJ the
product of the nonzero singular values of J(theta) (Federer 1969, "Geometric Measure Theory",
3.2.12). The canonical point of an orbit is where the moment map mu_k(theta) = <theta, A_k theta>
vanishes (Kempf and Ness 1979).
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from typing import TYPE_CHECKING

import numpy as np
from scipy import linalg

from ..errors import NotProvidedError
from ..results import Result
from ..symmetry import linear_action_matrices
from .gaussians import PacBayesInputError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization


def lie_algebra_matrices(param: Parameterization) -> NDArray[np.float64]:
    """The n x n matrices A_k of the infinitesimal action, generators(theta)[:, k] = A_k theta,
    read off from ``symmetry().generators`` at the basis vectors and checked for linearity at a
    random point. Returns an array (k, n, n)."""
    return _lie_algebra_cached(param)


#: param -> {"A": Lie algebra matrices, "D": components}
_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cache(param):
    return _CACHE.setdefault(param, {})


def _lie_algebra_cached(param):
    cache = _cache(param)
    if "A" in cache:
        return cache["A"]
    if not param.provides("symmetry"):
        raise NotProvidedError(type(param).__name__, "symmetry", "symmetry")
    group = param.symmetry()
    A, linear = linear_action_matrices(group, param.n, sparse=False)
    if len(linear) < len(A):
        raise PacBayesInputError(
            f"the symmetry {group.name} of {param.name} does not act linearly (generators not "
            "linear in theta); orbit integrals and canonical points need a linear action"
        )
    cache["A"] = A
    return A


@dataclasses.dataclass(frozen=True, kw_only=True)
class OrbitVolume(Result):
    """Volume element of the orbit at theta: sqrt det of the Gram matrix of the generators,
    split into the compact (isometric: skew A_k) and non-compact (symmetric A_k) directions:
    volume = basis_det * compact_volume * noncompact_volume."""

    volume: float
    dim: int
    compact_dim: int
    compact_volume: float
    noncompact_volume: float
    basis_det: float


def orbit_volume(param: Parameterization, theta: ArrayLike) -> OrbitVolume:
    """vol_G(theta) = sqrt det(X^T X), X = symmetry().generators(theta) (n x k): the volume of
    the orbit through theta per unit of Haar measure (in the plugin's Lie-algebra basis).

    Split: the Lie algebra (as n x n matrices A_k, generators = A_k theta) is divided by the
    transpose into its skew part k (isometries; a compact subgroup K whose orbits have finite
    volume, vol x Haar(K), a constant that cancels when a prior is normalised) and its symmetric
    part p (non-compact directions, orbits of infinite volume: only the element per unit Haar
    measure is meaningful), each with a Frobenius-orthonormal basis. compact_volume =
    sqrt det Gram(K_i theta); noncompact_volume = sqrt det Gram of the P_j theta projected off
    the compact directions (Schur complement); basis_det = |det| of the change from the plugin's
    basis to the orthonormal one (nan if the algebra is not closed under transpose).
    """
    theta = param.as_theta(theta)
    X = np.asarray(param.symmetry().generators(theta), float)
    k = X.shape[1]
    if k == 0:
        return OrbitVolume(volume=1.0, dim=0, compact_dim=0, compact_volume=1.0,
                           noncompact_volume=1.0, basis_det=1.0)
    vol = float(np.sqrt(max(np.linalg.det(X.T @ X), 0.0)))
    A = lie_algebra_matrices(param)
    n = param.n
    Ks = _basis(((A - A.transpose(0, 2, 1)) / 2).reshape(k, -1))
    Ps = _basis(((A + A.transpose(0, 2, 1)) / 2).reshape(k, -1))
    KX = np.stack([b.reshape(n, n) @ theta for b in Ks], axis=1) if len(Ks) else np.zeros((n, 0))
    PX = np.stack([b.reshape(n, n) @ theta for b in Ps], axis=1) if len(Ps) else np.zeros((n, 0))
    cvol = float(np.sqrt(max(np.linalg.det(KX.T @ KX), 0.0))) if KX.shape[1] else 1.0
    if KX.shape[1]:
        Qk, _ = np.linalg.qr(KX)
        PX = PX - Qk @ (Qk.T @ PX)
    nvol = float(np.sqrt(max(np.linalg.det(PX.T @ PX), 0.0))) if PX.shape[1] else 1.0
    if len(Ks) + len(Ps) == k:
        T = A.reshape(k, -1) @ np.vstack([Ks, Ps]).T
        bdet = float(abs(np.linalg.det(T)))
    else:
        bdet = float("nan")
    return OrbitVolume(volume=vol, dim=k, compact_dim=len(Ks), compact_volume=cvol,
                       noncompact_volume=nvol, basis_det=bdet)


def _basis(rows, tol=1e-10):
    if rows.size == 0:
        return np.zeros((0, rows.shape[1]))
    u, s, vt = np.linalg.svd(rows, full_matrices=False)
    return vt[: int(np.sum(s > tol * max(s[0], 1e-300)))] if s.size and s[0] > 0 else \
        np.zeros((0, rows.shape[1]))


def normal_jacobian(param: Parameterization, theta: ArrayLike) -> float:
    """NJ(theta) = product of the n - dim(orbit) largest singular values of J(theta): the
    volume factor of d phi on the horizontal space (ker J = vertical space at regular points)."""
    theta = param.as_theta(theta)
    return math.exp(_log_nj(param, theta))


def _log_nj(param, theta):
    J = param.jacobian(theta)
    if not np.all(np.isfinite(J)):  # far out on a non-compact orbit: the density factor is 0
        return math.inf
    s = np.linalg.svd(J, compute_uv=False)
    k = lie_algebra_matrices(param).shape[0] if param.provides("symmetry") else 0
    return float(np.sum(np.log(s[: param.n - k])))


def log_omega(param: Parameterization, theta: ArrayLike) -> float:
    """log(vol_G(theta) / NJ(theta)): the orbit-to-predictor density factor of the coarea
    formula (see the module docstring); vol_G from the generators A_k theta (cached A_k)."""
    A = lie_algebra_matrices(param)
    X = A @ np.asarray(theta, float)  # (k, n): generator k at theta
    if not np.all(np.isfinite(X)):
        return -math.inf
    sign, logdet = np.linalg.slogdet(X @ X.T) if len(X) else (1.0, 0.0)
    if sign <= 0:
        return -math.inf
    return 0.5 * logdet - _log_nj(param, theta)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CanonicalPoint(Result):
    """The minimum-norm point of the orbit of theta (moment map <theta, A_k theta> = 0)."""

    theta: np.ndarray
    moment_norm: float
    iterations: int
    converged: bool


def canonical_point(param: Parameterization, theta: ArrayLike, tol: float = 1e-12,
                    maxiter: int = 100) -> CanonicalPoint:
    """Minimum-norm point s of the identity-component orbit {exp(sum_k xi_k A_k) theta}, found by
    damped Newton steps in the Lie algebra, recentred at every step:

        f(xi) = |exp(xi . A) theta|^2,  grad_k = 2 <theta, A_k theta> = 2 mu_k(theta),
        Hess_kl = 2 <A_k theta, A_l theta> + <theta, (A_k A_l + A_l A_k) theta>,

    xi = -Hess^+ grad with backtracking on f. At the minimum the moment map mu vanishes (Kempf and
    Ness 1979); isometric (skew) directions have zero gradient and Hessian and are left alone.
    For Hadamard this is |u_i| = |v_i|, for UV^T-type blocks U^T U = V^T V. Generic: only the
    plugin's generators are used (they are assumed linear in theta; checked).
    """
    theta = param.as_theta(theta).copy()
    A = lie_algebra_matrices(param)
    if A.shape[0] == 0:
        return CanonicalPoint(theta=theta, moment_norm=0.0, iterations=0, converged=True)
    scale = max(float(theta @ theta), 1e-300)
    for it in range(1, maxiter + 1):
        At = np.einsum("kij,j->ki", A, theta)
        mu = At @ theta
        if np.linalg.norm(mu) <= tol * scale:
            return CanonicalPoint(theta=theta, moment_norm=float(np.linalg.norm(mu)),
                                  iterations=it - 1, converged=True)
        AA = np.einsum("kij,ljm,m->kli", A, A, theta)  # (A_k A_l theta)_i
        M = np.einsum("i,kli->kl", theta, AA)
        H = 2 * At @ At.T + M + M.T
        step = -np.linalg.lstsq(H, 2 * mu, rcond=1e-12)[0]
        f0, m0 = float(theta @ theta), float(np.linalg.norm(mu))
        t = 1.0
        while t > 1e-12:
            cand = linalg.expm(np.tensordot(t * step, A, axes=1)) @ theta
            mc = float(np.linalg.norm(np.einsum("kij,j->ki", A, cand) @ cand))
            # descent on f; near the minimum, where f stalls at round-off, on |mu|
            if float(cand @ cand) < f0 or mc < 0.5 * m0:
                break
            t *= 0.5
        else:
            break
        theta = cand
    At = np.einsum("kij,j->ki", A, theta)
    mun = float(np.linalg.norm(At @ theta))
    return CanonicalPoint(theta=theta, moment_norm=mun, iterations=maxiter,
                          converged=mun <= 1e-8 * scale)


