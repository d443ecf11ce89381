"""Quadratic conserved quantities theta^T S theta of gradient flow, read off the Lie algebra of a
linear symmetry action (:func:`conserved_quantities`); every trajectory of
:mod:`paramgeo.dynamics.trajectory` records them.

References: Kunin, Sagastuy-Brena, Ganguli, Yamins, Tanaka (2021), "Neural mechanics: symmetry
and broken conservation laws in deep learning dynamics"; Marcotte, Gribonval, Peyre (2023),
"Abide by the law and follow the flow: conservation laws for gradient flows".
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from ..results import Result, to_jsonable

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import ParamSpec, Parameterization
    from .groups import SymmetryGroup


@dataclasses.dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class ConservedQuantities(Result):
    """Quadratic conserved quantities Q_c(theta) = theta^T S_c theta of gradient flow.

    ``matrices`` are sparse symmetric n x n matrices S_c, ``labels`` readable formulas,
    ``combinations`` (q x k) the coefficients of S_c on the Lie-algebra basis whose
    infinitesimal actions are the columns of ``symmetry().generators``, ``nonlinear`` the
    basis elements skipped because their action is not linear in theta, ``note`` why the list
    may be empty.
    """

    matrices: tuple = ()
    labels: tuple = ()
    combinations: Optional[np.ndarray] = None
    nonlinear: tuple = ()
    note: str = ""
    #: the laws in matrix form (:class:`MatrixLaw`) when the symmetry is made of GL(r) factors;
    #: then the quantities are the upper-triangle entries of each law's matrix, in order
    laws: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "matrices", tuple(self.matrices))
        object.__setattr__(self, "labels", tuple(self.labels))
        object.__setattr__(self, "combinations", np.zeros((0, 0)) if self.combinations is None
                           else np.asarray(self.combinations, float))
        object.__setattr__(self, "nonlinear", tuple(self.nonlinear))
        object.__setattr__(self, "laws", tuple(self.laws))

    def law_columns(self) -> list[tuple[Any, list[int]]]:
        """[(law, column indices of its entries among the quantities)] for matrix laws, else
        one (label, [c]) per quantity: what tables show one row each."""
        if not self.laws:
            return [(lab, [c]) for c, lab in enumerate(self.labels)]
        out, start = [], 0
        for law in self.laws:
            size = law.r * (law.r + 1) // 2
            out.append((law, list(range(start, start + size))))
            start += size
        return out

    def __len__(self):
        return len(self.matrices)

    def values(self, thetas: ArrayLike) -> NDArray[np.float64]:
        """(T, q) array of Q_c(theta_t) for parameters ``thetas`` of shape (T, n)."""
        thetas = np.atleast_2d(np.asarray(thetas, float))
        cols = [np.sum(np.asarray(S @ thetas.T).T * thetas, axis=1) for S in self.matrices]
        return np.stack(cols, axis=1) if cols else np.zeros((len(thetas), 0))

    def scales(self, thetas: ArrayLike) -> NDArray[np.float64]:
        """(T, q) array of theta^T |S_c| theta (|S| entrywise): the size of the terms whose
        cancellation Q_c measures, the denominator of the relative drift."""
        thetas = np.atleast_2d(np.asarray(thetas, float))
        cols = [np.sum(np.asarray(abs(S) @ np.abs(thetas.T)).T * np.abs(thetas), axis=1)
                for S in self.matrices]
        return np.stack(cols, axis=1) if cols else np.zeros((len(thetas), 0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the labels, the combinations, and each S_c as sparse (row, col, value)
        triples of its upper triangle."""
        mats = []
        for S in self.matrices:
            coo = S.tocoo()
            keep = coo.row <= coo.col
            mats.append({"row": coo.row[keep], "col": coo.col[keep], "value": coo.data[keep]})
        return to_jsonable({"labels": self.labels, "matrices": mats,
                            "combinations": self.combinations, "nonlinear": self.nonlinear,
                            "note": self.note, "laws": [str(law) for law in self.laws]})

    def __str__(self):
        head = f"ConservedQuantities: {len(self)}" + (f" ({self.note})" if self.note else "")
        if self.laws:
            return "\n".join([head] + [f"  {law} ({law.r} x {law.r} symmetric)"
                                       for law in self.laws])
        return "\n".join([head] + [f"  {lab}" for lab in self.labels])

    def __repr__(self):
        return f"<ConservedQuantities {list(self.labels)}{' ' + self.note if self.note else ''}>"


_CONSERVED_CACHE: dict = {}


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class MatrixLaw:
    """A conservation law in matrix form: Q(theta) = sign (sum_right B^T B - sum_contra K^T K),
    r x r symmetric, for a GL(r) factor acting by B -> B g on its right blocks and
    K -> K g^{-T} on its contragredient ones (:class:`paramgeo.symmetry.MatrixGroupAction`).

    Every entry is conserved by gradient flow: for X symmetric, A_X theta = (B X, -K X) is the
    infinitesimal action and theta^T A_X theta = <X, sum B^T B - sum K^T K> (Frobenius), with
    A_X a symmetric n x n matrix, so :func:`conserved_quantities`' argument applies (Arora,
    Cohen, Hazan 2018, Theorem 1, for deep linear networks: W_i W_i^T - W_{i+1}^T W_{i+1};
    Marcotte, Gribonval, Peyre 2023, Section 3, for U^T U - V^T V). ``label`` is the formula
    in the plugin's block names, e.g. ``U^T U - V^T V``; ``terms`` the (sign, block) pairs.
    """

    label: str
    r: int
    terms: tuple

    def value(self, theta: ArrayLike) -> NDArray[np.float64]:
        """The r x r matrix Q(theta)."""
        from . import block_matrix

        theta = np.asarray(theta, float)
        out = np.zeros((self.r, self.r))
        for sign, block in self.terms:
            B = block_matrix(theta, block)
            out += sign * (B.T @ B)
        return out

    def __str__(self):
        return self.label


def _gram_label(spec, block):
    """B^T B of a MatrixGroupAction block in the spec's block names: ``U^T U`` for a block
    acted on along its last axis, ``W1 W1^T`` for a weight acted on along its first axis,
    ``b b^T`` for a vector, sums for index blocks spanning several spec blocks."""
    from . import block_index

    idx = block_index(block)
    parts = []
    for name, sl in spec.slices.items():
        rows = [k for k in range(idx.shape[0]) if sl.start <= idx[k, 0] < sl.stop]
        if not rows:
            continue
        sub, shape = idx[rows], spec.blocks[name]
        whole = np.arange(sl.start, sl.stop).reshape(shape) if shape else None
        if len(shape) == 1 and sub.shape == (1, shape[0]) and np.array_equal(sub[0], whole):
            parts.append(f"{name} {name}^T")
        elif len(shape) == 2 and np.array_equal(sub, whole):
            parts.append(f"{name}^T {name}")
        elif len(shape) == 2 and np.array_equal(sub, whole.T):
            parts.append(f"{name} {name}^T")
        elif len(shape) == 3 and sub.shape[0] == shape[1] and (sub[0, 0] - sl.start) % (
                shape[1] * shape[2]) == 0:
            head = (sub[0, 0] - sl.start) // (shape[1] * shape[2])
            parts.append(f"{name}[{head}]^T {name}[{head}]")
        else:
            parts.append(f"B^T B (B the entries {int(sub.min())}..{int(sub.max())} of {name})")
    return " + ".join(parts)


def matrix_laws(group: SymmetryGroup, spec: ParamSpec) -> Optional[tuple[MatrixLaw, ...]]:
    """The conservation laws of gradient flow in matrix form, one :class:`MatrixLaw` per
    GL(r) factor of ``group`` (a :class:`paramgeo.symmetry.GeneralLinearGroup` or a product of
    them with O(r) factors and discrete groups, which contribute no quadratic law: so(r) has
    no symmetric element); None when another continuous factor is present (tori, complex
    scalings, discovered algebras: their laws are listed entry by entry). The terms are
    ordered by their position in theta and the sign chosen so that the first is positive:
    ``U^T U - V^T V`` for U V^T, ``W1 W1^T - W2^T W2`` for W2 W1."""
    from . import GeneralLinearGroup, OrthogonalGroup, ProductGroup, block_index

    factors = group.factors if isinstance(group, ProductGroup) else (group,)
    continuous = [f for f in factors if f.dim > 0]
    if not continuous or not all(isinstance(f, (GeneralLinearGroup, OrthogonalGroup))
                                 for f in continuous):
        return None
    laws = []
    for f in continuous:
        if not isinstance(f, GeneralLinearGroup):
            continue
        terms = sorted([(1.0, b) for b in f.right] + [(-1.0, b) for b in f.contragredient],
                       key=lambda t: int(block_index(t[1]).min()))
        if not terms:
            continue
        flip = terms[0][0]
        terms = tuple((sign * flip, b) for sign, b in terms)
        label = ""
        for k, (sign, b) in enumerate(terms):
            text = _gram_label(spec, b)
            if " + " in text and sign < 0:
                text = f"({text})"
            label += (text if k == 0 else f" {'+' if sign > 0 else '-'} {text}")
        laws.append(MatrixLaw(label=label, r=f.r, terms=terms))
    return tuple(laws) if laws else None


def _entry_matrices(law, n):
    """The symmetric n x n matrices S_ab with theta^T S_ab theta = Q(theta)[a, b], a <= b."""
    import scipy.sparse as sp

    from . import block_index

    out = []
    for a in range(law.r):
        for b in range(a, law.r):
            rows, cols, vals = [], [], []
            for sign, block in law.terms:
                idx = block_index(block)
                rows += [idx[:, a], idx[:, b]]
                cols += [idx[:, b], idx[:, a]]
                vals += [np.full(idx.shape[0], 0.5 * sign)] * 2
            S = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows),
                                                      np.concatenate(cols))), shape=(n, n))
            S.sum_duplicates()
            S.eliminate_zeros()
            out.append(S)
    return out


def _quadratic_label(S, names, max_terms=6):
    S = S.tocoo()
    terms = []
    for i, j, v in sorted(zip(S.row, S.col, S.data)):
        if j < i or abs(v) < 1e-12:
            continue
        coef = v if i == j else 2 * v
        mono = f"{names[i]}^2" if i == j else f"{names[i]}*{names[j]}"
        terms.append((coef, mono))
    if not terms:
        return "0"
    out = []
    for k, (coef, mono) in enumerate(terms[:max_terms]):
        sign = "-" if coef < 0 else ("+" if k else "")
        mag = abs(coef)
        body = mono if math.isclose(mag, 1.0) else f"{mag:.4g}*{mono}"
        out.append(f"{sign} {body}".strip() if k else f"{sign}{body}")
    text = " ".join(out)
    return text + (f" + ... ({len(terms)} terms)" if len(terms) > max_terms else "")


def _stacked(mats, n):
    """The (n*n) x len(mats) sparse matrix whose column c is the flattened n x n matrix mats[c]."""
    import scipy.sparse as sp

    data, r_idx, c_idx = [], [], []
    for c, M in enumerate(mats):
        M = M.tocoo()
        data.append(M.data)
        r_idx.append(M.row.astype(np.int64) * n + M.col)
        c_idx.append(np.full(M.nnz, c))
    return sp.csr_matrix((np.concatenate(data), (np.concatenate(r_idx), np.concatenate(c_idx))),
                         shape=(n * n, len(mats)))


def conserved_quantities(param: Parameterization, *, max_dim: int = 2000,
                         tol: float = 1e-10) -> ConservedQuantities:
    """Quadratic conservation laws of gradient flow from the symmetry group's Lie algebra.

    For a linear action theta -> exp(t A) theta leaving phi invariant, L = ell o phi satisfies
    <grad L(theta), A theta> = 0 for every theta. If S is a *symmetric* element of the Lie
    algebra a = span{A_k}, then along gradient flow

        d/dt theta^T S theta = 2 theta^T S theta' = -2 <S theta, grad L(theta)> = 0,

    so theta^T S theta is conserved (for gradient descent it changes by eta^2 g^T S g per step:
    O(eta^2)). Generically, A_k is recovered as the Jacobian of theta -> X_k theta (the k-th
    column of ``symmetry().generators(theta)``) by evaluating it on the basis vectors e_j; a
    column that is not linear in theta (checked at a random point) is skipped. The symmetric
    elements of a are {sum_k c_k A_k : sum_k c_k (A_k - A_k^T) = 0}, a null space computed from
    the Gram matrix of the antisymmetric parts (the A_k and the linearity test come from
    :func:`paramgeo.symmetry.linear_action_matrices`); combinations giving S = 0 are dropped,
    and the basis is put in echelon form so that each law involves few generators. Examples:
    u_i^2 - v_i^2 for u * v; the entries of U^T U - V^T V for U V^T (GL(r)); none for U U^T
    (so(r) is skew). Parameterizations with n > ``max_dim`` are skipped (note says so).

    When the continuous symmetry is made of GL(r) factors (and O(r) ones, which give none),
    the laws come in matrix form without the search (:func:`matrix_laws`): the quantities are
    the upper-triangle entries of each r x r law, e.g. U^T U - V^T V, and ``laws`` holds them.

    References: Kunin et al. (2021), "Neural mechanics", Section 4 (rescale symmetry);
    Marcotte, Gribonval, Peyre (2023), "Abide by the law and follow the flow", Section 3;
    Zhao, Ganev, Walters, Yu, Dehmamy (2023), "Symmetries, flat minima, and the conserved
    quantities of gradient flow".
    """
    import scipy.linalg

    if not param.provides("symmetry"):
        return ConservedQuantities(note="no symmetry declared")
    key = (type(param), tuple(sorted((k, str(v)) for k, v in param.sizes.items())))
    if key in _CONSERVED_CACHE:
        return _CONSERVED_CACHE[key]
    n = param.n
    group = param.symmetry()
    laws = matrix_laws(group, param.spec)
    if laws is not None:  # matrix form: the entries of each law, no n x n search
        matrices, labels = [], []
        for law in laws:
            matrices += _entry_matrices(law, n)
            labels += [f"({law})[{a},{b}]" for a in range(law.r) for b in range(a, law.r)]
        result = ConservedQuantities(matrices=tuple(matrices), labels=tuple(labels),
                                     combinations=None, nonlinear=(), note="", laws=laws)
        _CONSERVED_CACHE[key] = result
        return result
    if n > max_dim:
        return ConservedQuantities(note=f"skipped: n = {n} > max_dim = {max_dim}")
    from . import linear_action_matrices

    A, linear = linear_action_matrices(group, n, sparse=True)
    K = len(A)
    if K == 0:
        result = ConservedQuantities(note="discrete symmetry only")
        _CONSERVED_CACHE[key] = result
        return result
    nonlinear = tuple(k for k in range(K) if k not in linear)
    if not linear:
        return ConservedQuantities(nonlinear=nonlinear, note="no linear generator")
    lin_A = [A[k] for k in linear]
    MA = _stacked(lin_A, n)
    MD = _stacked([M - M.T for M in lin_A], n)
    gram_d = (MD.T @ MD).toarray()
    w, V = np.linalg.eigh(gram_d)
    null = V[:, w <= tol * max(1.0, float(np.abs(w).max(initial=0.0)))]
    combos = np.zeros((0, K))
    matrices, labels = [], []
    if null.shape[1]:
        gram_a = null.T @ (MA.T @ MA).toarray() @ null
        w2, V2 = np.linalg.eigh(gram_a)
        keep = null @ V2[:, w2 > tol * max(1.0, float(np.abs(w2).max(initial=0.0)))]
        q = keep.shape[1]
        if q:
            _, _, piv = scipy.linalg.qr(keep.T, pivoting=True)
            B = keep @ np.linalg.inv(keep[piv[:q], :])
            B[np.abs(B) < 1e-12] = 0.0
            order = np.argsort(piv[:q])
            B = B[:, order]
            combos = np.zeros((q, K))
            combos[:, linear] = B.T
            names = param.spec.labels()
            for c in range(q):
                S = sum(B[i, c] * lin_A[i] for i in range(len(linear)) if B[i, c] != 0.0)
                S = ((S + S.T) * 0.5).tocsr()
                S.eliminate_zeros()
                matrices.append(S)
                labels.append(_quadratic_label(S, names))
    note = "" if matrices else "the Lie algebra has no symmetric element"
    result = ConservedQuantities(matrices=tuple(matrices), labels=tuple(labels),
                                 combinations=combos, nonlinear=nonlinear, note=note)
    _CONSERVED_CACHE[key] = result
    return result
