"""Quadratic conserved quantities theta^T S theta of gradient flow, read off the Lie algebra of a
linear symmetry action (:func:`conserved_quantities`); every trajectory of
:mod:`paramgeo.trajectory` records them.

References: Kunin, Sagastuy-Brena, Ganguli, Yamins, Tanaka (2021), "Neural mechanics: symmetry
and broken conservation laws in deep learning dynamics"; Marcotte, Gribonval, Peyre (2023),
"Abide by the law and follow the flow: conservation laws for gradient flows".
"""

import dataclasses
import math

import numpy as np

from .results import Result, to_jsonable


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
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
    combinations: np.ndarray = None
    nonlinear: tuple = ()
    note: str = ""

    def __post_init__(self):
        object.__setattr__(self, "matrices", tuple(self.matrices))
        object.__setattr__(self, "labels", tuple(self.labels))
        object.__setattr__(self, "combinations", np.zeros((0, 0)) if self.combinations is None
                           else np.asarray(self.combinations, float))
        object.__setattr__(self, "nonlinear", tuple(self.nonlinear))

    def __len__(self):
        return len(self.matrices)

    def values(self, thetas):
        """(T, q) array of Q_c(theta_t) for parameters ``thetas`` of shape (T, n)."""
        thetas = np.atleast_2d(np.asarray(thetas, float))
        cols = [np.sum(np.asarray(S @ thetas.T).T * thetas, axis=1) for S in self.matrices]
        return np.stack(cols, axis=1) if cols else np.zeros((len(thetas), 0))

    def scales(self, thetas):
        """(T, q) array of theta^T |S_c| theta (|S| entrywise): the size of the terms whose
        cancellation Q_c measures, the denominator of the relative drift."""
        thetas = np.atleast_2d(np.asarray(thetas, float))
        cols = [np.sum(np.asarray(abs(S) @ np.abs(thetas.T)).T * np.abs(thetas), axis=1)
                for S in self.matrices]
        return np.stack(cols, axis=1) if cols else np.zeros((len(thetas), 0))

    def to_dict(self):
        """JSON-able: the labels, the combinations, and each S_c as sparse (row, col, value)
        triples of its upper triangle."""
        mats = []
        for S in self.matrices:
            coo = S.tocoo()
            keep = coo.row <= coo.col
            mats.append({"row": coo.row[keep], "col": coo.col[keep], "value": coo.data[keep]})
        return to_jsonable({"labels": self.labels, "matrices": mats,
                            "combinations": self.combinations, "nonlinear": self.nonlinear,
                            "note": self.note})

    def __str__(self):
        head = f"ConservedQuantities: {len(self)}" + (f" ({self.note})" if self.note else "")
        return "\n".join([head] + [f"  {lab}" for lab in self.labels])

    def __repr__(self):
        return f"<ConservedQuantities {list(self.labels)}{' ' + self.note if self.note else ''}>"


_CONSERVED_CACHE = {}


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


def conserved_quantities(param, *, max_dim=2000, tol=1e-10):
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
    if n > max_dim:
        return ConservedQuantities(note=f"skipped: n = {n} > max_dim = {max_dim}")
    from .symmetry import linear_action_matrices

    A, linear = linear_action_matrices(param.symmetry(), n, sparse=True)
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
    result = ConservedQuantities(matrices, labels, combos, nonlinear, note)
    _CONSERVED_CACHE[key] = result
    return result
