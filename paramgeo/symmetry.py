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

import abc
import functools

import numpy as np


class SymmetryGroup(abc.ABC):
    """A group acting on flat parameter vectors of length ``n``."""

    #: Display name, e.g. "O(2)", "GL(3)", "(R\\{0})^5".
    name = ""

    @property
    @abc.abstractmethod
    def dim(self):
        """Dimension of the group as a manifold (0 for a finite group)."""

    @abc.abstractmethod
    def act(self, g, theta):
        """The parameter g . theta."""

    @abc.abstractmethod
    def random_element(self, rng):
        """A random group element, drawn from ``rng`` (a numpy Generator)."""

    def generators(self, theta):
        """n x dim matrix whose columns are the infinitesimal actions X . theta of a basis of the
        Lie algebra; they span the tangent of the orbit at theta (the vertical space)."""
        return np.zeros((np.size(theta), 0))

    def __mul__(self, other):
        return ProductGroup(self, other)

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} dim={self.dim}>"


class ProductGroup(SymmetryGroup):
    """Direct product G_1 x ... x G_k acting factor by factor; elements are tuples."""

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

    def act(self, g, theta):
        for factor, element in zip(self.factors, g):
            theta = factor.act(element, theta)
        return theta

    def random_element(self, rng):
        return tuple(f.random_element(rng) for f in self.factors)

    def generators(self, theta):
        return np.hstack([f.generators(theta) for f in self.factors])


class MatrixGroupAction(SymmetryGroup):
    """A matrix group G in GL(r) acting on parameter blocks whose last axis has length r.

    ``right`` blocks B transform as B -> B g, ``contragredient`` blocks as B -> B g^{-T}
    (so that B_right B_contra^T is invariant). A block is named by a (start, stop, shape)
    triple of the flat theta: use :func:`blocks_of` to build them from a ``ParamSpec``.
    The infinitesimal action of X in the Lie algebra is B X (right) and -B X^T (contragredient).
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
            for (start, stop, shape) in blocks:
                out[start:stop] = (np.reshape(theta[start:stop], shape) @ mats).ravel()
        return out

    def act(self, g, theta):
        g = np.asarray(g, dtype=float)
        theta = np.asarray(theta, float)
        return self._transform(theta, g, np.linalg.inv(g).T, theta.copy())

    def generators(self, theta):
        theta = np.asarray(theta, float)
        cols = [self._transform(theta, X, -X.T, np.zeros_like(theta)) for X in self.algebra_basis]
        return np.stack(cols, axis=1) if cols else np.zeros((theta.size, 0))


#: above this n, :func:`linear_action_matrices` returns scipy.sparse matrices by default
SPARSE_ACTION_MIN_N = 200


def linear_action_matrices(group, n, rng=None, sparse=None, tol=1e-9):
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
    from .geometry import as_rng

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
        <= tol * max(np.linalg.norm(G_probe[:, k]), 1e-300))
    return A, linear


def blocks_of(spec, *names):
    """(start, stop, shape) triples of the named blocks of a ParamSpec, for MatrixGroupAction."""
    return tuple((spec.slices[n].start, spec.slices[n].stop, spec.blocks[n]) for n in names)


class OrthogonalGroup(MatrixGroupAction):
    """O(r) acting on the right: B -> B R with R^T R = I (so B B^T is invariant).

    Lie algebra so(r) (skew-symmetric matrices, geomstats ``SkewSymmetricMatrices``), dimension
    r(r-1)/2; random elements are a random reflection times exp of a random skew matrix
    (geomstats ``SpecialOrthogonal.exp``), covering both components of O(r).
    """

    def __init__(self, r, right=()):
        super().__init__(r, right=right)
        self.name = f"O({self.r})"

    @functools.cached_property
    def algebra_basis(self):
        if self.r < 2:
            return np.zeros((0, self.r, self.r))
        from geomstats.geometry.skew_symmetric_matrices import SkewSymmetricMatrices

        return np.asarray(SkewSymmetricMatrices(self.r, equip=False).basis)

    def random_element(self, rng):
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

    @functools.cached_property
    def algebra_basis(self):
        from geomstats.geometry.matrices import Matrices

        return np.asarray(Matrices(self.r, self.r, equip=False).basis)

    def random_element(self, rng):
        from geomstats.geometry.general_linear import GeneralLinear

        X = 0.5 * rng.standard_normal((self.r, self.r))
        reflection = np.diag(np.where(rng.random(self.r) < 0.5, -1.0, 1.0))
        return reflection @ np.asarray(GeneralLinear.exp(X))


class ScalingTorus(SymmetryGroup):
    """Coordinatewise rescalings theta_j -> theta_j * prod_k c_k^{E[k, j]} with integer exponents.

    ``exponents`` is a k x n integer matrix E; the group is (R\\{0})^k (``signed=True``) or
    (R_{>0})^k. Its generators at theta are the columns E[k, :] * theta, its dimension the rank
    of E. Examples: Hadamard u*v has E = [I, -I]; a neuron of a degree-k monomial network scales
    its incoming weights by c and its outgoing weights by c^{-k}.
    """

    def __init__(self, exponents, signed=True, name=None):
        self.exponents = np.atleast_2d(np.asarray(exponents, dtype=int))
        self.signed = bool(signed)
        k = self.exponents.shape[0]
        field = "R\\{0}" if self.signed else "R_{>0}"
        self.name = name or (f"({field})^{k}" if k else "1")

    @property
    def dim(self):
        return int(np.linalg.matrix_rank(self.exponents)) if self.exponents.size else 0

    def act(self, g, theta):
        c = np.asarray(g, dtype=float)
        factors = np.prod(c[:, None] ** self.exponents, axis=0)
        return np.asarray(theta, float) * factors

    def random_element(self, rng):
        k = self.exponents.shape[0]
        c = np.exp(rng.uniform(-1.0, 1.0, size=k))
        if self.signed:
            c *= np.where(rng.random(k) < 0.5, -1.0, 1.0)
        return c

    def generators(self, theta):
        return (self.exponents * np.asarray(theta, float)[None, :]).T


class SignedPermutationGroup(SymmetryGroup):
    """A finite group of signed permutations of the entries of theta, given by generators.

    Each generator is a pair (perm, signs): (g . theta)_j = signs_j * theta_{perm_j}. A random
    element is a random word of length ``word_length`` or ``word_length + 1`` in the generators. Dimension 0, so it
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

    def act(self, g, theta):
        perm, signs = g
        return signs * np.asarray(theta, float)[perm]

    def random_element(self, rng):
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


def __getattr__(name):
    """``paramgeo.symmetry.discover`` (automatic symmetry discovery) lives in
    :mod:`paramgeo.discover`, which builds on this module; it is loaded on first access."""
    if name == "discover":
        from .discover import discover

        return discover
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
