"""Symmetry groups of parameterizations: phi(g . theta) = phi(theta).

A :class:`SymmetryGroup` knows its name, its dimension (0 for a discrete group), how an element
acts on a flat theta, how to draw a random element from a ``numpy.random.Generator``, and its
*generators* at theta: an n x k matrix whose columns span the tangent space of the orbit G.theta
(the vertical space). Products compose with :class:`ProductGroup` (or ``g1 * g2``).

Continuous matrix groups reuse geomstats: ``SpecialOrthogonal`` and ``GeneralLinear`` supply the
group exponential and ``SkewSymmetricMatrices`` / ``Matrices`` the Lie algebra bases. Random
elements are exp(X) for a random Lie-algebra element X drawn from the caller's generator (plus a
random reflection for O(r)), so results are reproducible without global seeds.
"""

from __future__ import annotations

import abc
import functools
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..contract.guard import guard_group_class

from .projectors import (  # noqa: F401  (re-exported: part of the groups' public API)
    MAX_PROJECTOR_BLOCK_ENTRIES,
    VerticalProjector,
    _projector,
    sparse_projector,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import ParamSpec
    from ..linalg.numerics import RankPolicy


class SymmetryGroup(abc.ABC):
    """A group acting on flat parameter vectors of length ``n``."""

    #: Display name, e.g. "O(2)", "GL(3)", "(R\\{0})^5".
    name = ""

    def __init_subclass__(cls, **kwargs):
        """A group defined outside paramgeo (a plugin's own) has its methods guarded
        (:func:`paramgeo.contract.guard.guard_group_class`): their faults are that plugin's."""
        super().__init_subclass__(**kwargs)
        if not cls.__module__.startswith("paramgeo."):
            guard_group_class(cls)

    @property
    @abc.abstractmethod
    def dim(self):
        """Dimension of the group as a manifold (0 for a finite group)."""

    @abc.abstractmethod
    def act(self, g: Any, theta: ArrayLike) -> NDArray[np.float64]:
        """The parameter g . theta."""

    @abc.abstractmethod
    def random_element(self, rng: np.random.Generator) -> Any:
        """A random group element, drawn from ``rng`` (a numpy Generator)."""

    def generators(self, theta: ArrayLike) -> NDArray[np.float64]:
        """n x dim matrix whose columns are the infinitesimal actions X . theta of a basis of the
        Lie algebra; they span the tangent of the orbit at theta (the vertical space)."""
        return np.zeros((np.size(theta), 0))

    def sparse_generators(self, theta: ArrayLike) -> Any:
        """The generators as a ``scipy.sparse`` CSC matrix. Default: the dense ``generators``
        converted; groups whose generators have O(n) nonzeros (tori, hyperbolic rotations)
        override it so that large n never allocates n x dim."""
        import scipy.sparse as sp

        return sp.csc_matrix(np.asarray(self.generators(theta), dtype=float))

    def support(self, theta: ArrayLike) -> NDArray[np.bool_]:
        """Boolean mask of the entries of theta that the generators move at theta (their
        nonzero rows); two groups with disjoint supports have orthogonal vertical spaces."""
        G = self.sparse_generators(theta).tocsr()
        return np.diff(G.indptr) > 0

    def vertical_projector(self, theta: ArrayLike,
                           policy: Optional[RankPolicy] = None) -> VerticalProjector:
        """The :class:`VerticalProjector` at theta. Default: the generator matrix splits into
        connected components (generators that share a moved entry of theta), each projected
        with the SVD of its small dense block; one global tolerance decides the rank (the
        policy of :mod:`paramgeo.geometry.jacobian`). Matrix groups override it with closed forms."""
        return sparse_projector(self.sparse_generators(theta), policy)

    def __mul__(self, other):
        return ProductGroup(self, other)

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} dim={self.dim}>"


class ProductGroup(SymmetryGroup):
    """Product G_1 x ... x G_k acting factor by factor, G_1 first; elements are tuples. The
    factors read from a model's layers need not commute (in a pre-norm transformer block: the
    heads' GL factors with the fields of the attention's key and value biases, a layer norm's
    signed rescalings with its offset fields, the MLP units' rescalings with the shears of
    their rows and with the units' permutations), so the order of the tuple is part of the
    element."""

    def __init__(self, *factors):
        flat = []
        for f in factors:
            flat.extend(f.factors if isinstance(f, ProductGroup) else [f])
        self.factors = tuple(flat)
        # the trivial group "1" is left out of the name: (R\{0})^3 x 1 reads (R\{0})^3
        self.name = " x ".join(f.name for f in self.factors if f.name != "1") or "1"

    @property
    def dim(self):
        return sum(f.dim for f in self.factors)

    def act(self, g: Any, theta: ArrayLike) -> NDArray[np.float64]:
        out: Any = theta
        for factor, element in zip(self.factors, g):
            out = factor.act(element, out)
        return out

    def random_element(self, rng: np.random.Generator) -> Any:
        return tuple(f.random_element(rng) for f in self.factors)

    def generators(self, theta: ArrayLike) -> NDArray[np.float64]:
        return np.hstack([f.generators(theta) for f in self.factors])

    def sparse_generators(self, theta: ArrayLike) -> Any:
        import scipy.sparse as sp

        return sp.hstack([f.sparse_generators(theta) for f in self.factors], format="csc")

    def vertical_projector(self, theta: ArrayLike,
                           policy: Optional[RankPolicy] = None) -> VerticalProjector:
        """Sum of the factors' projectors when the continuous factors move disjoint entries of
        theta (their vertical spaces are then orthogonal), with one tolerance over all their
        singular values; the generic component route on the stacked generators otherwise."""
        moving = [f for f in self.factors if f.dim > 0]
        if not moving:
            return sparse_projector(np.zeros((np.size(theta), 0)), policy)
        masks = [f.support(theta) for f in moving]
        if np.max(np.sum(masks, axis=0)) > 1:
            return sparse_projector(self.sparse_generators(theta), policy)
        parts = [f.vertical_projector(theta, policy) for f in moving]

        def build_apply(tol):
            chosen = [p.retol(tol) for p in parts]  # one tolerance over all factors
            return lambda w: sum(p.apply(w) for p in chosen)

        return _projector(np.concatenate([p.decision.singular_values for p in parts]), policy,
                          build_apply)


class MatrixGroupAction(SymmetryGroup):
    """A matrix group G in GL(r) acting on parameter blocks, each seen as a matrix with r columns.

    ``right`` blocks B transform as B -> B g, ``contragredient`` blocks as B -> B g^{-T}
    (so that B_right B_contra^T is invariant). A block is a (start, stop, shape) triple of the
    flat theta whose last axis (length r) is acted on, or an integer array of shape (rows, r)
    holding the flat positions of the matrix B (any layout: a transposed block, a block with a
    bias row, weights scattered over theta); :func:`blocks_of` builds both from a ``ParamSpec``
    and :func:`block_index` / :func:`block_matrix` read them. The infinitesimal action of X in
    the Lie algebra is B X (right) and -B X^T (contragredient).

    Both sides of a hidden layer: with W_in (h x n_in) and W_out (n_out x h), the GL(h) action
    W_in -> g^{-1} W_in, W_out -> W_out g (W_out W_in invariant) is W_out a right block and
    W_in^T a contragredient one: ``GeneralLinearGroup(h, right=blocks_of(spec, "W2"),
    contragredient=blocks_of(spec, "W1", axis=0))`` (:func:`hidden_layer_group`).
    """

    def __init__(self, r, right=(), contragredient=()):
        self.r = int(r)
        self.right = tuple(right)
        self.contragredient = tuple(contragredient)

    @property
    @abc.abstractmethod
    def algebra_basis(self):
        """Array (dim, r, r): a basis of the Lie algebra."""

    @property
    def dim(self):
        return len(self.algebra_basis)

    def _transform(self, theta, right_mat, contra_mat, out):
        """Write B @ right_mat / B @ contra_mat into ``out`` for the acted-on blocks B."""
        for mats, blocks in ((right_mat, self.right), (contra_mat, self.contragredient)):
            for block in blocks:
                _set_block(out, block, block_matrix(theta, block) @ mats)
        return out

    def act(self, g: Any, theta: ArrayLike) -> NDArray[np.float64]:
        g = np.asarray(g, dtype=float)
        theta = np.asarray(theta, float)
        return self._transform(theta, g, np.linalg.inv(g).T, theta.copy())

    def generators(self, theta: ArrayLike) -> NDArray[np.float64]:
        theta = np.asarray(theta, float)
        cols = [self._transform(theta, X, -X.T, np.zeros_like(theta)) for X in self.algebra_basis]
        return np.stack(cols, axis=1) if cols else np.zeros((theta.size, 0))

    def support(self, theta: ArrayLike) -> NDArray[np.bool_]:
        mask = np.zeros(np.size(theta), dtype=bool)
        for block in self.right + self.contragredient:
            mask[block_index(block)] = True
        return mask

    def _spectrum(self, theta, blocks):
        """(s, P): the singular values s (length r, zero-padded) and right singular vectors P of
        the blocks stacked on top of each other, so that sum B^T B = P diag(s^2) P^T (from the
        SVD, not an eigendecomposition of the Gram: s keeps full relative accuracy near 0)."""
        theta = np.asarray(theta, float)
        r = self.r
        stacked = [block_matrix(theta, block) for block in blocks]
        if not stacked:
            return np.zeros(r), np.eye(r)
        B = np.vstack(stacked)
        # thin SVD when B has at least r rows (never the rows x rows factor); else the full one
        _, s, vt = np.linalg.svd(B, full_matrices=B.shape[0] < r)
        return np.concatenate([s, np.zeros(r - len(s))]), vt.T

    def _adjoint(self, theta, w):
        """M = sum B^T W_B - sum W_K^T K over right (B) and contragredient (K) blocks: the
        generators' adjoint applied to w, as an r x r matrix."""
        theta = np.asarray(theta, float)
        r = self.r
        M = np.zeros((r, r))
        for blocks, right in ((self.right, True), (self.contragredient, False)):
            for block in blocks:
                B, Wb = block_matrix(theta, block), block_matrix(w, block)
                M += B.T @ Wb if right else -(Wb.T @ B)
        return M

    def _sylvester_projector(self, theta, policy, sing, generator_singular_values, P, Q, skew):
        """P_V w = (B X, -K X^T) with X = P [(P^T R Q)_ij / sing_ij^2] Q^T (zero where
        sing_ij <= tol), R = M - M^T for skew algebras (so(r)) and M otherwise (gl(r)), M the
        adjoint of the action applied to w: the Sylvester solve in the factors' eigenbases."""
        theta = np.asarray(theta, float)
        denom = sing ** 2

        def build_apply(tol):
            keep = sing > tol

            def apply(w):
                M = self._adjoint(theta, w)
                R = M - M.T if skew else M
                X = P @ np.where(keep, (P.T @ R @ Q) / np.where(keep, denom, 1.0), 0.0) @ Q.T
                return self._transform(theta, X, -X.T, np.zeros_like(w))

            return apply

        return _projector(generator_singular_values, policy, build_apply)


#: above this n, :func:`linear_action_matrices` returns scipy.sparse matrices by default
SPARSE_ACTION_MIN_N = 200


def linear_action_matrices(group: SymmetryGroup, n: int, rng: Optional[np.random.Generator] = None,
                           sparse: Optional[bool] = None,
                           tol: float = 1e-9) -> tuple[Any, tuple[int, ...]]:
    """(A, linear): the matrices A_k of the infinitesimal action of ``group`` on R^n, and which
    of them describe it.

    If the k-th generator column is linear in theta, generators(theta)[:, k] = A_k theta for
    the n x n matrix A_k whose j-th column is generators(e_j)[:, k] (e_j the basis vectors), so
    A_k is read off from n evaluations of ``group.generators``. Linearity is checked at one
    random point theta ~ N(0, I) drawn from ``rng`` (a numpy Generator or a seed; default seed
    0, so the answer is reproducible): column k is linear when
    |A_k theta - generators(theta)[:, k]| <= tol |generators(theta)[:, k]|. ``linear`` is the
    tuple of those k (a column that fails is not an A_k theta: the action is not linear there).

    ``A`` is an array (k, n, n), or with ``sparse=True`` a list of k ``scipy.sparse`` CSR
    matrices (the default for n > ``SPARSE_ACTION_MIN_N``: the A_k of a matrix-group action
    have O(n) nonzero entries). For a linear action these are the Lie-algebra elements the
    conservation laws theta^T S theta (S symmetric in span{A_k}) and orbit volumes are built
    from (Kunin et al. 2021, "Neural mechanics"; Marcotte, Gribonval, Peyre 2023).
    """
    from ..linalg.numerics import as_rng

    n = int(n)
    sparse = n > SPARSE_ACTION_MIN_N if sparse is None else bool(sparse)
    probe = as_rng(0 if rng is None else rng).standard_normal(n)
    G_probe = np.asarray(group.generators(probe), float)
    K = G_probe.shape[1]
    rows, cols, ks, vals = [], [], [], []
    e = np.zeros(n)
    for j in range(n):
        e[j] = 1.0
        G = np.asarray(group.generators(e), float)
        e[j] = 0.0
        i_idx, k_idx = np.nonzero(G)
        rows.append(i_idx)
        cols.append(np.full(len(i_idx), j))
        ks.append(k_idx)
        vals.append(G[i_idx, k_idx])
    rows, cols = np.concatenate(rows).astype(int), np.concatenate(cols).astype(int)
    ks, vals = np.concatenate(ks).astype(int), np.concatenate(vals)
    if sparse:
        import scipy.sparse as sp

        A = [sp.csr_matrix((vals[ks == k], (rows[ks == k], cols[ks == k])), shape=(n, n))
             for k in range(K)]
        predicted = np.stack([A[k] @ probe for k in range(K)], axis=1) if K else G_probe
    else:
        A = np.zeros((K, n, n))
        A[ks, rows, cols] = vals
        predicted = np.einsum("kij,j->ik", A, probe)
    linear = tuple(
        k for k in range(K)
        if np.linalg.norm(predicted[:, k] - G_probe[:, k])
        <= tol * max(float(np.linalg.norm(G_probe[:, k])), 1e-300))
    return A, linear


def blocks_of(spec: ParamSpec, *names: str, axis: int = -1) -> tuple:
    """The named blocks of a ParamSpec as blocks of a :class:`MatrixGroupAction`, acted on
    along ``axis``: (start, stop, shape) triples for the last axis (the default), integer
    index arrays (rows, r) for another axis (``axis=0`` for W_in of a hidden layer stored as
    (h, n_in): its matrix is W_in^T)."""
    if axis in (-1, None):
        return tuple((spec.slices[n].start, spec.slices[n].stop, spec.blocks[n]) for n in names)
    out = []
    for n in names:
        shape = spec.blocks[n]
        idx = np.arange(spec.slices[n].start, spec.slices[n].stop).reshape(shape)
        out.append(np.moveaxis(idx, axis, -1).reshape(-1, shape[axis]))
    return tuple(out)


def block_index(block: Any) -> NDArray[np.int_]:
    """The flat positions of a :class:`MatrixGroupAction` block as a (rows, r) integer array:
    entry [i, j] is where B[i, j] lives in theta."""
    if isinstance(block, np.ndarray):
        return block
    start, stop, shape = block
    return np.arange(start, stop).reshape(-1, shape[-1] if len(shape) else 1)


def block_matrix(theta: ArrayLike, block: Any) -> NDArray[np.float64]:
    """The (rows, r) matrix B of a block read from the flat ``theta`` (a view for a triple)."""
    if isinstance(block, np.ndarray):
        return np.asarray(theta)[block]
    start, stop, shape = block
    return np.reshape(np.asarray(theta)[start:stop], (-1, shape[-1] if len(shape) else 1))


def _set_block(out, block, B):
    if isinstance(block, np.ndarray):
        out[block] = B
    else:
        out[block[0]:block[1]] = np.ravel(B)


def hidden_layer_group(h: int, incoming: Any, outgoing: Any,
                       orthogonal: bool = False) -> MatrixGroupAction:
    """GL(h) (or O(h) with ``orthogonal=True``) of a linear hidden layer of width h, acting on
    both sides: W_in -> g^{-1} W_in (and the layer's bias b -> g^{-1} b), W_out -> W_out g, so
    that W_out W_in and W_out b are invariant. ``incoming`` / ``outgoing`` are blocks (see
    :class:`MatrixGroupAction`) whose matrices have the h hidden neurons as columns: W_in^T
    (with a bias row) and W_out, e.g. ``blocks_of(spec, "W1", axis=0)`` and
    ``blocks_of(spec, "W2")`` for weights stored (out, in). Infinitesimally X in gl(h) moves
    (W_in, W_out) by (-X W_in, W_out X). For O(h), g^{-1} = g^T, so both sides are right blocks
    of :class:`OrthogonalGroup`. Reference: the symmetry of deep linear networks (Arora, Cohen,
    Hazan 2018, "On the optimization of deep networks: implicit acceleration by
    overparameterization"; Trager, Kohn, Bruna 2020)."""
    if orthogonal:
        return OrthogonalGroup(h, right=tuple(outgoing) + tuple(incoming))
    return GeneralLinearGroup(h, right=tuple(outgoing), contragredient=tuple(incoming))


class OrthogonalGroup(MatrixGroupAction):
    """O(r) acting on the right: B -> B R with R^T R = I (so B B^T is invariant).

    Lie algebra so(r) (skew-symmetric matrices, geomstats ``SkewSymmetricMatrices``), dimension
    r(r-1)/2; random elements are a random reflection times exp of a random skew matrix
    (geomstats ``SpecialOrthogonal.exp``), covering both components of O(r).
    """

    def __init__(self, r, right=()):
        super().__init__(r, right=right)
        self.name = f"O({self.r})"

    @property
    def dim(self):
        return self.r * (self.r - 1) // 2  # without building the r(r-1)/2 x r x r basis

    def vertical_projector(self, theta: ArrayLike,
                           policy: Optional[RankPolicy] = None) -> VerticalProjector:
        """Closed form: the projection of w onto {B Omega : Omega skew} solves
        (A Omega + Omega A) = M - M^T with A = sum B^T B, M = sum B^T W (the Sylvester equation
        of the U U^T horizontal projection; Massart and Absil 2020), in the eigenbasis
        A = P diag(a) P^T (a = s^2 from the SVD of the stacked blocks); the generator singular
        values are sqrt(a_i + a_j), i < j."""
        sa, P = self._spectrum(theta, self.right)
        sing = np.hypot(sa[:, None], sa[None, :])
        return self._sylvester_projector(theta, policy, sing, sing[np.triu_indices(self.r, 1)],
                                         P, P, skew=True)

    @functools.cached_property
    def algebra_basis(self):
        if self.r < 2:
            return np.zeros((0, self.r, self.r))
        from geomstats.geometry.skew_symmetric_matrices import SkewSymmetricMatrices

        return np.asarray(SkewSymmetricMatrices(self.r, equip=False).basis)

    def random_element(self, rng: np.random.Generator) -> Any:
        reflection = np.diag(np.where(rng.random(self.r) < 0.5, -1.0, 1.0))
        if self.r < 2:
            return reflection
        from geomstats.geometry.special_orthogonal import SpecialOrthogonal

        coeffs = rng.uniform(-np.pi, np.pi, size=self.dim)
        skew = np.tensordot(coeffs, self.algebra_basis, axes=1)
        return reflection @ np.asarray(SpecialOrthogonal(self.r, equip=False).exp(skew))


class GeneralLinearGroup(MatrixGroupAction):
    """GL(r) acting by (B_right, B_contra) -> (B_right A, B_contra A^{-T}), dimension r^2.

    Lie algebra gl(r) with the matrix-unit basis (geomstats ``Matrices``); random elements are
    exp(X) of a random X (geomstats ``GeneralLinear.exp``), times a random reflection so that
    both components of GL(r) are reached.
    """

    def __init__(self, r, right=(), contragredient=()):
        super().__init__(r, right=right, contragredient=contragredient)
        self.name = f"GL({self.r})"

    @property
    def dim(self):
        return self.r * self.r  # without building the r^2 x r x r basis

    def vertical_projector(self, theta: ArrayLike,
                           policy: Optional[RankPolicy] = None) -> VerticalProjector:
        """Closed form: the projection of w onto {(B X, -K X^T)} (B right, K contragredient
        blocks) solves the Sylvester equation A X + X C = M with A = sum B^T B, C = sum K^T K,
        M = sum B^T W_B - sum W_K^T K (the normal equations; Mishra et al. 2014 for U V^T), in
        the eigenbases of A and C; the generator singular values are sqrt(a_i + c_j)."""
        sa, P = self._spectrum(theta, self.right)
        sc, Q = self._spectrum(theta, self.contragredient)
        sing = np.hypot(sa[:, None], sc[None, :])
        return self._sylvester_projector(theta, policy, sing, sing.ravel(), P, Q, skew=False)

    @functools.cached_property
    def algebra_basis(self):
        from geomstats.geometry.matrices import Matrices

        return np.asarray(Matrices(self.r, self.r, equip=False).basis)

    def random_element(self, rng: np.random.Generator) -> Any:
        from geomstats.geometry.general_linear import GeneralLinear

        X = 0.5 * rng.standard_normal((self.r, self.r))
        reflection = np.diag(np.where(rng.random(self.r) < 0.5, -1.0, 1.0))
        return reflection @ np.asarray(GeneralLinear.exp(X))


class ComplexScalingGroup(MatrixGroupAction):
    """(C^*)^k, complex scalars rho e^{i phi} acting on k column pairs: r = 2k, dimension 2k.

    An element is A = blockdiag(rho_1 R(phi_1), ..., rho_k R(phi_k)) with R(phi) the 2 x 2
    rotation; ``right`` blocks transform as B -> B A, ``contragredient`` blocks as B -> B A^{-T}
    = B blockdiag(rho_i^{-1} R(phi_i)), so B_right M B_contra^T is invariant for every M that
    commutes with A, e.g. the block rotations of rotary position encodings (Su et al. 2021,
    "RoFormer"): A is the commutant of blockdiag(R(omega_1 t), ..., R(omega_k t)) in GL(2k) for
    distinct frequencies. Lie algebra: span{E_ii (x) I_2, E_ii (x) J}, J = [[0, -1], [1, 0]];
    the group is connected, so random elements are exp(X) of a random algebra element.
    """

    def __init__(self, k, right=(), contragredient=()):
        super().__init__(2 * int(k), right=right, contragredient=contragredient)
        self.k = int(k)
        self.name = f"(C^*)^{self.k}" if self.k > 1 else "C^*"

    @functools.cached_property
    def algebra_basis(self):
        J = np.array([[0.0, -1.0], [1.0, 0.0]])
        out = []
        for i in range(self.k):
            E = np.zeros((self.k, self.k))
            E[i, i] = 1.0
            out += [np.kron(E, np.eye(2)), np.kron(E, J)]
        return np.asarray(out).reshape(-1, self.r, self.r)

    def random_element(self, rng: np.random.Generator) -> Any:
        from scipy.linalg import expm

        coeffs = rng.uniform(-1.0, 1.0, size=self.dim)
        return expm(np.tensordot(coeffs, self.algebra_basis, axes=1))


class ScalingTorus(SymmetryGroup):
    """Coordinatewise rescalings theta_j -> theta_j * prod_k c_k^{E[k, j]} with integer exponents.

    ``exponents`` is a k x n integer matrix E (dense, or ``scipy.sparse`` for large k and n: a
    torus of 10^5 independent rescalings has 2 10^5 nonzero exponents, not 10^10); the group is
    (R\\{0})^k (``signed=True``) or (R_{>0})^k. Its generators at theta are the columns
    E[k, :] * theta, its dimension the rank of E. Examples: Hadamard u*v has E = [I, -I]; a
    neuron of a degree-k monomial network scales its incoming weights by c and its outgoing
    weights by c^{-k}.
    """

    def __init__(self, exponents, signed=True, name=None):
        import scipy.sparse as sp

        E = exponents if sp.issparse(exponents) else np.atleast_2d(np.asarray(exponents))
        self._E = sp.csr_matrix(E, dtype=np.int64)
        self.signed = bool(signed)
        k = self._E.shape[0]
        field = "R\\{0}" if self.signed else "R_{>0}"
        self.name = name or (f"({field})^{k}" if k else "1")

    @property
    def exponents(self):
        """The k x n exponent matrix E as a dense integer array."""
        return self._E.toarray()

    @functools.cached_property
    def dim(self):
        # rank E = rank of the generators at theta = 1 (component SVDs; E may be huge and sparse)
        if self._E.nnz == 0:
            return 0
        return sparse_projector(self._E.T.astype(float)).dim

    def act(self, g: Any, theta: ArrayLike) -> NDArray[np.float64]:
        c = np.asarray(g, dtype=float)
        Et = self._E.T.tocsr()
        log_factor = Et @ np.log(np.abs(c))
        flips = Et @ (c < 0).astype(np.int64)  # sign of prod c_k^E = (-1)^(sum over negative c_k)
        factors = np.exp(log_factor) * np.where(flips % 2, -1.0, 1.0)
        return np.asarray(theta, float) * factors

    def random_element(self, rng: np.random.Generator) -> Any:
        k = self._E.shape[0]
        c = np.exp(rng.uniform(-1.0, 1.0, size=k))
        if self.signed:
            c *= np.where(rng.random(k) < 0.5, -1.0, 1.0)
        return c

    def generators(self, theta: ArrayLike) -> NDArray[np.float64]:
        return self.sparse_generators(theta).toarray()

    def sparse_generators(self, theta: ArrayLike) -> Any:
        import scipy.sparse as sp

        return sp.csc_matrix(self._E.multiply(np.asarray(theta, float)[None, :]).T)


class SignedPermutationGroup(SymmetryGroup):
    """A finite group of signed permutations of the entries of theta, given by generators.

    Each generator is a pair (perm, signs): (g . theta)_j = signs_j * theta_{perm_j}. A random
    element is a random word of length ``word_length`` or ``word_length + 1`` in the
    generators. Dimension 0, so it
    adds nothing to the vertical space; it still must leave phi invariant (checked).
    """

    def __init__(self, name, generators, n, word_length=8):
        self.name = name
        self.n = int(n)
        self._gens = [
            (np.asarray(p, dtype=int), np.asarray(s, dtype=float)) for p, s in generators
        ]
        self.word_length = word_length

    @property
    def dim(self):
        return 0

    def act(self, g: Any, theta: ArrayLike) -> NDArray[np.float64]:
        perm, signs = g
        return signs * np.asarray(theta, float)[perm]

    def random_element(self, rng: np.random.Generator) -> Any:
        perm, signs = np.arange(self.n), np.ones(self.n)
        if not self._gens:
            return perm, signs
        # a word of random length word_length or word_length + 1: a fixed length would stay in
        # the even-length subgroup (e.g. an even number of sign flips)
        for _ in range(self.word_length + int(rng.integers(2))):
            p, s = self._gens[rng.integers(len(self._gens))]
            # compose: apply current then generator: (s * (signs*x[perm])[p])
            perm, signs = perm[p], s * signs[p]
        return perm, signs

