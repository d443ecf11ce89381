"""The symmetry group's image in GL(n) in the form the orbit integrals need: the Cartan split
of its Lie algebra (compact torus part, symmetric part), periods of the torus, ad matrices and
the coset representatives of its components (Knapp 2002, Prop. 1.143 and Thm 6.31)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from scipy import linalg, optimize

from ..errors import NotProvidedError
from ..results import Result
from .volumes import _basis, _cache, lie_algebra_matrices

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization

MAX_COMPONENTS = 4096  # components summed exactly up to this many (no compact torus)
MAX_TORUS_COMPONENTS = 256  # with a compact torus (cosets told apart by torus_log)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupStructure(Result):
    """The symmetry group's image in GL(n), in the form the orbit integrals need.

    Cartan decomposition (Knapp 2002, "Lie groups beyond an introduction", Prop. 1.143 and
    Thm 6.31): a linear group G whose Lie algebra g (the n x n matrices A_k of the action) is
    closed under transpose splits as g = k + p (skew + symmetric) and its identity component as
    G_0 = K_0 exp(p), g = k exp(X) uniquely, K_0 = G_0 intersected with O(n). Here K_0 must be
    a torus: ``compact`` holds commuting skew B_1..B_c chosen among the skew parts of the
    plugin's own generators, each with a period T_j (expm(T_j B_j) = I), so that
    psi -> exp(sum_j psi_j B_j) on the cell prod_j [0, T_j) covers K_0 uniformly (a group
    homomorphism of tori, every point hit |ker| times; the constant cancels in every density
    ratio, see :func:`orbit_log_integral`). ``noncompact`` is an orthonormal basis P_1..P_p of p;
    ``ad[l]`` is ad_{P_l} = [P_l, .] as a k x k matrix in the basis (B_1..B_c, P_1..P_p).
    ``components`` are orthogonal coset representatives D of G / G_0 (polar parts of
    ``random_element``s, identified up to K_0 and closed under products). A finite group is the case k = 0: G_0 = {1}."""

    compact: np.ndarray
    periods: np.ndarray
    noncompact: np.ndarray
    ad: np.ndarray
    components: tuple
    n_components: int  # |G / G_0|
    generators: np.ndarray  # (g, n, n) polar parts of random elements, generating G / G_0
    #: unitary Vc with B_j = -i Vc diag(torus_weights[j]) Vc^H
    torus_basis: Optional[np.ndarray] = None
    torus_weights: Optional[np.ndarray] = None

    def torus_exp(self, psi: ArrayLike) -> NDArray[np.float64]:
        """exp(sum_j psi_j B_j) for a batch psi (M, c), from the joint eigenbasis."""
        ph = np.exp(-1j * (np.atleast_2d(psi) @ self.torus_weights))
        basis: Any = self.torus_basis
        return np.einsum("ia,ma,ja->mij", basis, ph, basis.conj()).real

    @property
    def basis(self):
        """(k, n, n): the Lie-algebra basis (B_1..B_c, P_1..P_p)."""
        return np.concatenate([self.compact, self.noncompact])


def _rank(rows, tol=1e-9):
    if rows.size == 0:
        return 0
    s = np.linalg.svd(rows, compute_uv=False)
    return int(np.sum(s > tol * max(s[0], 1e-300)))


def _action_matrix(group, g, n):
    return np.stack([np.asarray(group.act(g, e), float) for e in np.eye(n)], axis=1)


def group_structure(param: Parameterization, draws: int = 24, seed: int = 0) -> GroupStructure:
    """:class:`GroupStructure` of ``param.symmetry()``, read from the contract (generators for the
    Lie algebra, ``act`` and ``random_element`` for the components), cached per object. A finite
    group (dimension 0) has an empty Lie algebra and G_0 = {1}: its components are its elements.

    Raises NotProvidedError when the algebra is not closed under transpose (no Cartan
    decomposition), when its compact part is not abelian (e.g. GL(r) with r >= 3, whose maximal
    compact subgroup SO(r) is not a torus) or has a generator without a period, or when a polar
    part of a group element is not itself a symmetry."""
    cache = _cache(param)
    if "G" in cache:
        return cache["G"]
    A = lie_algebra_matrices(param)
    n = param.n
    name = type(param).__name__
    scale = max([float(np.linalg.norm(a)) for a in A] + [1.0])
    B, P = _cartan_split(A, name, scale)
    periods = np.array([_period(b, name, scale) for b in B], float)
    ad = _ad_matrices(B, P, name, scale)
    Vc, lam = _joint_eigenbasis(B, n, name, scale)
    struct = GroupStructure(compact=B, periods=periods, noncompact=P, ad=ad, components=(),
                            n_components=1, generators=np.zeros((0, n, n)), torus_basis=Vc,
                            torus_weights=lam)
    gens = _polar_parts(param, struct, draws, seed)
    struct = dataclasses.replace(struct, generators=np.array(gens).reshape(-1, n, n))
    struct = dataclasses.replace(struct, **_components(param, struct, gens))
    cache["G"] = struct
    return struct


def _cartan_split(A, name, scale):
    """(B, P): commuting skew B_j chosen among the skew parts of the A_k, and an orthonormal basis
    P_l of the symmetric parts; refuses algebras that are not closed under transpose or whose
    compact part is not abelian."""
    k, n = A.shape[0], A.shape[1]
    if k == 0:
        return np.zeros((0, n, n)), np.zeros((0, n, n))
    skew = (A - A.transpose(0, 2, 1)) / 2
    sym = (A + A.transpose(0, 2, 1)) / 2
    if _rank(A.reshape(k, -1)) != k or _rank(np.vstack(
            [A.reshape(k, -1), skew.reshape(k, -1), sym.reshape(k, -1)])) != k:
        raise NotProvidedError(name, "orbit integrals for this symmetry group (its Lie algebra "
                               "must have independent generators and be closed under "
                               "transpose, i.e. admit a Cartan decomposition k + p)")
    B = []
    for S in skew:
        if np.linalg.norm(S) > 1e-10 * scale and \
                _rank(np.array([b.ravel() for b in B + [S]])) == len(B) + 1:
            B.append(S)
    for i in range(len(B)):
        for j in range(i):
            if np.linalg.norm(B[i] @ B[j] - B[j] @ B[i]) > 1e-9 * scale ** 2:
                raise NotProvidedError(
                    name, "orbit integrals for this symmetry group (its compact part is not "
                    "abelian, e.g. SO(r) inside GL(r) or O(r) for r >= 3; the general Monte "
                    "Carlo estimator covers compact parts that are tori: r <= 2)")
    B = np.array(B).reshape(-1, n, n)
    P = _basis(sym.reshape(k, -1)).reshape(-1, n, n)
    if len(B) + len(P) != k:
        raise NotProvidedError(name, "orbit integrals for this symmetry group (the skew and "
                               "symmetric parts do not split its Lie algebra)")
    return B, P


def _period(b, name, scale):
    """The smallest T > 0 with expm(T b) = I (b skew), among 2 pi m / lambda_min, m <= 64."""
    n = b.shape[0]
    lam = np.abs(np.linalg.eigvals(b).imag)
    lam_min = lam[lam > 1e-9 * scale].min()
    for mult in range(1, 65):
        T = 2 * math.pi * mult / lam_min
        if np.allclose(linalg.expm(T * b), np.eye(n), atol=1e-8):
            return T
    raise NotProvidedError(name, "orbit integrals for this symmetry group (a compact generator "
                           "has no period: its one-parameter group is not closed)")


def _ad_matrices(B, P, name, scale):
    """ad[l] = [P_l, .] as a k x k matrix in the basis (B_1..B_c, P_1..P_p)."""
    basis = np.concatenate([B, P])
    k = len(basis)
    flat = basis.reshape(k, -1) if k else np.zeros((0, B.shape[1] ** 2))
    ad = np.zeros((len(P), k, k))
    for l, Pl in enumerate(P):
        br = np.array([(Pl @ X - X @ Pl).ravel() for X in basis])
        coef, *_ = np.linalg.lstsq(flat.T, br.T, rcond=None)
        if np.linalg.norm(flat.T @ coef - br.T) > 1e-8 * scale ** 2 * max(k, 1):
            raise NotProvidedError(name, "orbit integrals for this symmetry group (its Lie "
                                   "algebra is not closed under brackets)")
        ad[l] = coef
    return ad


def _joint_eigenbasis(B, n, name, scale):
    """Unitary Vc and weights lam with B_j = -i Vc diag(lam[j]) Vc^H for every B_j."""
    Vc, lam = np.eye(n, dtype=complex), np.zeros((len(B), n))
    if len(B):
        H = 1j * np.tensordot(np.random.default_rng(0).uniform(1, 2, len(B)), B, axes=1)
        _, Vc = np.linalg.eigh(H)
        lam = np.einsum("ia,jik,ka->ja", Vc.conj(), 1j * B, Vc).real
        for j, b in enumerate(B):  # the joint eigenbasis must diagonalise every B_j
            if not np.allclose(Vc @ np.diag(-1j * lam[j]) @ Vc.conj().T, b, atol=1e-9 * scale):
                raise NotProvidedError(name, "orbit integrals for this symmetry group (no joint "
                                       "eigenbasis of its compact generators)")
    return Vc, lam


def torus_log(struct: GroupStructure, X: ArrayLike,
              tol: float = 1e-7) -> Optional[NDArray[np.float64]]:
    """psi in prod_j [0, T_j) with expm(sum_j psi_j B_j) = X, or None if X is not in K_0:
    grid search over the cell, then ``scipy.optimize.least_squares`` on the Frobenius residual.
    (K_0 abelian, so X must commute with every B_j: checked first.)"""
    B, T = struct.compact, struct.periods
    X = np.asarray(X, float)
    n = X.shape[0]
    c = len(B)
    if not np.allclose(X @ X.T, np.eye(n), atol=1e-8):
        return None
    if c == 0:
        return np.zeros(0) if np.linalg.norm(X - np.eye(n)) < tol * math.sqrt(n) else None
    if any(np.linalg.norm(X @ b - b @ X) > 1e-7 * max(1.0, float(np.linalg.norm(b))) for b in B):
        return None
    G = max(8, int(256 ** (1.0 / c)))
    grid = np.stack(np.meshgrid(*[np.arange(G) * T[j] / G for j in range(c)], indexing="ij"),
                    -1).reshape(-1, c)
    err = np.linalg.norm(struct.torus_exp(grid) - X, axis=(1, 2))
    psi0 = grid[int(np.argmin(err))]
    res = optimize.least_squares(lambda p: (struct.torus_exp(p)[0] - X).ravel(), psi0,
                                 xtol=1e-14, ftol=1e-14, gtol=1e-14)
    if np.linalg.norm(res.fun) < tol * math.sqrt(n):
        return np.mod(res.x, T)
    return None


def _polar_parts(param, struct, draws, seed):
    """Polar parts O = M (M^T M)^{-1/2} of ``draws`` random elements (M the matrix of the action;
    log(M^T M)/2 must lie in p), each checked to be a symmetry: generators of G / G_0."""
    group = param.symmetry()
    n = param.n
    name = type(param).__name__
    rng = np.random.default_rng(seed)
    P = struct.noncompact
    th = param.random_point(np.random.default_rng(seed + 1))
    f0 = np.asarray(param.forward_flat(th), float)
    out = []
    for _ in range(int(draws)):
        M = _action_matrix(group, group.random_element(rng), n)
        w, V = np.linalg.eigh(M.T @ M)
        X = (V * (0.5 * np.log(w))) @ V.T
        if len(P):
            coef = np.tensordot(P, X, axes=([1, 2], [0, 1]))
            resid = np.linalg.norm(X - np.tensordot(coef, P, axes=1))
        else:
            resid = np.linalg.norm(X)
        if resid > 1e-7 * max(1.0, np.linalg.norm(X)):
            raise NotProvidedError(name, "orbit integrals for this symmetry group (its "
                                   "elements have no polar decomposition inside the group)")
        O = M @ (V * w ** -0.5) @ V.T
        if not np.allclose(param.forward_flat(O @ th), f0, rtol=1e-8, atol=1e-10):
            raise NotProvidedError(name, "orbit integrals for this symmetry group (the polar "
                                   "part of a group element is not a symmetry)")
        out.append(O)
    return out


def _components(param, struct, gens):
    """Coset representatives D of G / G_0 generated by the polar parts ``gens``: every element
    of the component group when it has at most ``MAX_COMPONENTS`` (``MAX_TORUS_COMPONENTS`` with
    a compact torus, where cosets are told apart by :func:`torus_log`); refused beyond."""
    name = type(param).__name__
    if len(struct.compact):
        reps = [np.eye(param.n)]
        grown = True
        while grown:
            grown = False
            for D1 in list(reps):
                for D2 in list(gens):
                    X = D1 @ D2
                    if not any(torus_log(struct, D.T @ X) is not None for D in reps):
                        reps.append(X)
                        grown = True
            if len(reps) > MAX_TORUS_COMPONENTS:
                raise NotProvidedError(
                    name, f"orbit integrals for this symmetry group (more than "
                    f"{MAX_TORUS_COMPONENTS} components around a compact torus)")
        return {"components": tuple(reps), "n_components": len(reps)}
    reps = _closure(gens, param.n, MAX_COMPONENTS)
    if reps is None:
        raise NotProvidedError(
            name, f"orbit integrals for this symmetry group (more than {MAX_COMPONENTS} "
            "components: too many to sum, and uniformly drawn components miss the few that "
            "carry a concentrated posterior's mass, see docs/pacbayes.md)")
    return {"components": reps, "n_components": len(reps)}


def _closure(gens, n, limit):
    """All products of ``gens`` (matrices with entries rounded to a key), breadth first, or None
    when there are more than ``limit``."""
    def key(X):
        return (np.round(X, 6) + 0.0).tobytes()

    reps, seen, i = [np.eye(n)], {key(np.eye(n))}, 0
    while i < len(reps):
        for g in gens:
            X = reps[i] @ g
            if key(X) not in seen:
                seen.add(key(X))
                reps.append(X)
                if len(reps) > limit:
                    return None
        i += 1
    return tuple(reps)
