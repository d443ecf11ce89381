"""Vertical projectors: P_V at theta, the Euclidean orthogonal projection onto the tangent of
the orbit G.theta, applied without an n x n matrix or a dense basis.

:func:`sparse_projector` serves any group with sparse generators (connected components, batched
SVDs); matrix groups build theirs from Sylvester closed forms through :func:`_projector`
(:mod:`paramgeo.symmetry.groups`). The matrix-free rank route deflates the vertical space with
them (:mod:`paramgeo.linalg.matfree`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import numpy as np

from ..errors import SizeError
from ..linalg.numerics import RankDecision, RankPolicy, decide_rank

#: the most entries the dense blocks of :func:`sparse_projector` may hold (400 MB of float64)
MAX_PROJECTOR_BLOCK_ENTRIES = 50_000_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class VerticalProjector:
    """P_V at theta: the Euclidean orthogonal projection onto the vertical space (the tangent of
    the orbit G.theta, spanned by the generator columns), applied without forming an n x n
    matrix or a dense basis.

    ``dim`` is the orbit dimension (the numerical rank of the generators under the tolerance
    policy) and ``decision`` the :class:`paramgeo.geometry.RankDecision` behind it, whose
    singular values are those of the n x dim(G) generator matrix. ``P(w)`` returns P_V w;
    ``retol(tol)`` is the same projector decided with the tolerance ``tol`` from the spectra
    already computed (a product of groups decides with one tolerance over all factors).
    """

    dim: int
    decision: RankDecision
    apply: Callable
    retol: Callable

    def __call__(self, w):
        return self.apply(np.asarray(w, dtype=float))


def _decide(singular_values, policy):
    return decide_rank(np.asarray(singular_values, dtype=float), policy, warn=False)


def _fixed_tol(tol):
    return RankPolicy(rtol=0.0, atol=float(tol))


def _projector(singular_values, policy, build_apply):
    """A :class:`VerticalProjector` from the generator singular values and ``build_apply(tol)``
    (the projection keeping the directions whose singular value exceeds tol)."""

    def decided(decision):
        return VerticalProjector(
            dim=decision.rank, decision=decision, apply=build_apply(decision.tol),
            retol=lambda tol: decided(_decide(singular_values, _fixed_tol(tol))))

    return decided(_decide(singular_values, policy))


def sparse_projector(G: Any, policy: Optional[RankPolicy] = None) -> VerticalProjector:
    """:class:`VerticalProjector` onto the column space of a (sparse) n x k matrix G.

    Columns that share a nonzero row are joined into connected components (scipy.sparse.csgraph);
    components touch disjoint rows, so their column spaces are orthogonal and P = sum_c U_c
    U_c^T with U_c the left singular vectors of the small dense block of component c above one
    global tolerance tol = max(atol, rtol * s_max) (the policy of :mod:`paramgeo.geometry.jacobian`).
    Blocks of equal shape are decomposed together (one batched LAPACK call), so a torus with
    10^5 one-generator components costs a few vectorised operations."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    G = sp.csc_matrix(G, dtype=float)
    G.eliminate_zeros()
    n, k = G.shape
    if k == 0 or G.nnz == 0:
        return _projector(np.zeros(min(k, n)), policy, lambda tol: np.zeros_like)
    if G.nnz > MAX_PROJECTOR_BLOCK_ENTRIES:  # each nonzero is an entry of some block: refuse
        # before the component analysis, whose sorts of nnz entries are the slow part
        raise SizeError(
            f"the {k} symmetry generators have {G.nnz:.3g} nonzero entries, so their dense "
            f"blocks would hold at least as many ({8e-9 * G.nnz:.3g} GB), more than "
            f"{MAX_PROJECTOR_BLOCK_ENTRIES:.3g}; use smaller sizes")
    pattern = G.copy()
    pattern.data[:] = 1.0
    _, label = connected_components(pattern.T @ pattern, directed=False)
    coo = G.tocoo()
    comp = label[coo.col]
    row_keys = np.unique(comp.astype(np.int64) * n + coo.row)  # sorted: component, then row
    row_comp, rows = np.divmod(row_keys, n)
    n_comp = int(label.max()) + 1
    row_count = np.bincount(row_comp, minlength=n_comp)
    row_start = np.concatenate([[0], np.cumsum(row_count)[:-1]])
    col_order = np.argsort(label, kind="stable")
    col_count = np.bincount(label, minlength=n_comp)
    col_start = np.concatenate([[0], np.cumsum(col_count)[:-1]])
    col_local = np.empty(k, dtype=np.int64)
    col_local[col_order] = np.arange(k) - col_start[label[col_order]]
    entry_row = np.searchsorted(row_keys, comp.astype(np.int64) * n + coo.row) - row_start[comp]
    groups = []
    shapes = np.unique(np.stack([row_count, col_count], axis=1)[row_count > 0], axis=0)
    entries = int(np.sum(row_count * col_count))
    if entries > MAX_PROJECTOR_BLOCK_ENTRIES:
        a, b = (int(x) for x in shapes[np.argmax(shapes[:, 0] * shapes[:, 1])])
        raise SizeError(
            f"the {k} symmetry generators join into connected blocks (generators sharing "
            f"coordinates) whose dense SVDs would hold {entries:.3g} entries "
            f"({8e-9 * entries:.3g} GB; the largest block is {a} x {b}), more than "
            f"{MAX_PROJECTOR_BLOCK_ENTRIES:.3g}; use smaller sizes")
    for a, b in shapes.tolist():
        members = np.flatnonzero((row_count == a) & (col_count == b))
        slot = np.full(n_comp, -1)
        slot[members] = np.arange(len(members))
        block = np.zeros((len(members), a, b))
        sel = slot[comp] >= 0
        block[slot[comp[sel]], entry_row[sel], col_local[coo.col[sel]]] = coo.data[sel]
        index = rows[row_start[members][:, None] + np.arange(a)[None, :]]
        U, s, _ = np.linalg.svd(block, full_matrices=False)
        groups.append((index, U, s))
    def build_apply(tol):
        bases = [(index, U * (s > tol)[:, None, :]) for index, U, s in groups]

        def apply(w):
            out = np.zeros_like(w)
            for index, U in bases:
                out[index] = np.einsum("gab,gb->ga", U, np.einsum("gab,ga->gb", U, w[index]))
            return out

        return apply

    return _projector(np.concatenate([s.ravel() for _, _, s in groups]), policy, build_apply)
