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
        self.name = " x ".join(f.name for f in self.factors)

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
        self.name = name or f"({field})^{k}"

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
    element is a random word of length ``word_length`` in the generators. Dimension 0, so it
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
        for _ in range(self.word_length):
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
