"""Closed-form singular values of the Jacobians of the two factor products U V^T and U U^T.

Plugins built from these products (uut, uvt, the heads of qk-attention) use them for the
``rank_at`` capability: the rank of J at a point then costs an SVD of the factors (O(d r^2))
instead of an SVD of the dense m x n Jacobian (O(d^3 r^2) for uut), and the decision is the
one :func:`paramgeo.geometry.decide_rank` takes on the dense singular values, up to round-off.

* phi(U, V) = U V^T, U in R^{m x k}, V in R^{n x k}: J (dU, dV) = dU V^T + U dV^T and
  J^T W = (W V, W^T U), so J J^T W = U U^T W + W V V^T, the Kronecker sum of U U^T and V V^T.
  Its eigenvalues are a_i + b_j (a, b the eigenvalues of U U^T and V V^T, i.e. the squared
  singular values of U and V padded with zeros to m and n), so the singular values of J are
      sqrt(a_i + b_j),  i = 1..m, j = 1..n,
  of which min(mn, (m + n) k) are the singular values of the mn x (m + n) k matrix J. Hence
  rank J = mn - (m - rank U)(n - rank V), the dimension of the tangent space
  {M : P_U^perp M P_V^perp = 0} of the matrices of rank <= rank U, ... (for rank U = rank V =
  r: r(m + n - r), the fixed-rank manifold; Absil, Mahony, Sepulchre 2008, Prop. 3.3; Mishra,
  Meyer, Bonnabel, Sepulchre 2014). (Horn and Johnson, "Topics in matrix analysis", Thm. 4.4.5:
  the eigenvalues of a Kronecker sum are the sums of eigenvalues.)
* phi(U) = U U^T, U in R^{d x k}: J dU = dU U^T + U dU^T, J^T W = (W + W^T) U, and on
  symmetric W, J J^T W = 2 (U U^T W + W U U^T); antisymmetric W are in ker J^T. In the
  eigenbasis of U U^T the symmetric matrices e_i e_j^T + e_j e_i^T (i <= j) are eigenvectors
  with eigenvalue 2 (a_i + a_j), so the singular values of J are
      sqrt(2 (a_i + a_j)),  1 <= i <= j <= d   (2 s_i on the diagonal i = j),
  and zeros, min(d^2, d k) in all. Hence rank J = d q - q(q - 1)/2 with q = rank U, the
  dimension of the PSD matrices of rank q (Journee, Bach, Absil, Sepulchre 2010, Section 2;
  Massart and Absil 2020).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray


def _squared_singular_values(M):
    return np.linalg.svd(np.asarray(M, float), compute_uv=False) ** 2


def _padded(values, count):
    """The values sorted in decreasing order, padded with zeros (or cut) to ``count``."""
    out = np.zeros(count)
    values = np.sort(values)[::-1][:count]
    out[: len(values)] = values
    return out


def product_jacobian_singular_values(U: ArrayLike, V: ArrayLike) -> NDArray[np.float64]:
    """Singular values (decreasing, min(mn, (m + n) k) of them) of the Jacobian of
    (U, V) -> U V^T at U (m x k), V (n x k): sqrt(a_i + b_j) over the squared singular values
    a of U and b of V, each padded with zeros (see the module docstring)."""
    (m, k), n = np.shape(U), np.shape(V)[0]
    a, b = _squared_singular_values(U), _squared_singular_values(V)
    b_full = np.concatenate([b, np.zeros(n - len(b))])
    # a_i + b_j for i with a_i possibly nonzero; the m - len(a) zero a_i repeat b_j
    values = np.concatenate([(a[:, None] + b_full[None, :]).ravel(),
                             np.repeat(b, m - len(a))])
    return _padded(np.sqrt(values), min(m * n, (m + n) * k))


def gram_jacobian_singular_values(U: ArrayLike) -> NDArray[np.float64]:
    """Singular values (decreasing, min(d^2, d k) of them) of the Jacobian of U -> U U^T at
    U (d x k): sqrt(2 (a_i + a_j)), i <= j, over the squared singular values a of U padded with
    zeros to d (see the module docstring)."""
    d, k = np.shape(U)
    a = _squared_singular_values(U)
    q = len(a)
    a_full = np.concatenate([a, np.zeros(d - q)])
    pairs = a[:, None] + a_full[None, :]  # i < q (a_i possibly nonzero), all j
    upper = np.arange(d)[None, :] >= np.arange(q)[:, None]  # i <= j
    return _padded(np.sqrt(2.0 * pairs[upper]), min(d * d, d * k))
