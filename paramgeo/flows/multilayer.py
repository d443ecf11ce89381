"""A two-layer attention-indexed model under online SGD, matrix-free and batched over seeds
(:func:`two_layer_sgd`), on the loop of :func:`paramgeo.flows.multihead.batched_online`.

The model (Boncoraglio, Troiani, Erba, Zdeborova 2025, Eq. 4-5; Xu, Sagitova, Zdeborova,
"Attention-indexed models"): T tokens X (T x d, i.i.d. N(0, 1) entries), two index matrices and
their attention indices h_l = (X S_l X^T - Tr(S_l) I) / sqrt(d) (T x T, l = 1, 2), and the output
of two stacked attention layers,

    A_1 = c I + softmax_beta(h_1)            (row-wise softmax; X_1 = A_1 X),
    y   = softmax_beta(A_1 h_2 A_1^T),

the second layer's index read on the contextual tokens X_1 = A_1 X (A_1 X S_2 X^T A_1^T / sqrt(d)
with its trace part removed, which for a centered teacher, Tr S*_2 = 0, is the paper's
two-layer model exactly). The loss of a sample is |y(S) - y(S*)|_F^2 / 2. Backpropagation through
the two layers gives dell/dh_2 = A_1^T E_Z A_1 and dell/dh_1 = J_softmax(h_1)^T (E_Z A_1 h_2^T +
E_Z^T A_1 h_2), E_Z = J_softmax(Z)^T (y(S) - y(S*)) at Z = A_1 h_2 A_1^T, and then the factors'
gradients as for the heads of :mod:`paramgeo.flows.multihead`, with X^T E_l X summed over the
tokens. The two layers are stored as two "heads" of the factors (seeds, d, 2, r); the recovery
summaries are the per-layer |cosine| with the teacher's own layer (``first``, ``second``) and
their minimum (``both``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ..errors import ParamgeoError
from .multihead import MultiHeadRun, MultiHeadTeacher, batched_online, head_order_parameters
from .online import _softmax

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

#: the recovery summaries of the two-layer model (module docstring)
LAYER_SUMMARIES = ("first", "second", "both")


def layer_indices(U: NDArray[np.float64], V: NDArray[np.float64], X: NDArray[np.float64],
                  scale: float) -> tuple[NDArray[np.float64], ...]:
    """h_l = scale (X U_l V_l^T X^T - Tr(U_l V_l^T) I) / sqrt(d) for factors (seeds, d, L, r) and
    tokens X (seeds, batch, T, d): returns (h, P, Q), h of shape (seeds, batch, L, T, T) and
    P = X U, Q = X V of shape (seeds, batch, T, L, r); V = U for tied layers.
    Reference: Boncoraglio, Troiani, Erba, Zdeborova (2025)."""
    s, d, L, r = U.shape
    B, T = X.shape[1], X.shape[2]
    Xf = X.reshape(s, B * T, d)
    P = np.matmul(Xf, U.reshape(s, d, L * r)).reshape(s, B, T, L, r)
    Q = P if V is U else np.matmul(Xf, V.reshape(s, d, L * r)).reshape(s, B, T, L, r)
    trace = np.einsum("sdlr,sdlr->sl", U, V)
    h = np.einsum("skalr,skclr->sklac", P, Q) - trace[:, None, :, None, None] * np.eye(T)
    return h * (scale / math.sqrt(d)), P, Q


def _forward(h, beta, c):
    T = h.shape[-1]
    A = c * np.eye(T) + _softmax(h[:, :, 0], beta)
    Z = A @ h[:, :, 1] @ A.swapaxes(-1, -2)
    return A, Z, _softmax(Z, beta)


def _softmax_vjp(f, G, beta):
    return beta * f * (G - np.sum(f * G, axis=-1, keepdims=True))


def two_layer_labels(teacher: MultiHeadTeacher, X: NDArray[np.float64], beta: float = 1.0,
                     c: float = 1.0) -> NDArray[np.float64]:
    """y = softmax_beta(A_1 h_2 A_1^T), A_1 = c I + softmax_beta(h_1), at the teacher's two
    layers (factors (seeds, d, 2, r)) for tokens X (seeds, batch, T, d); a centered teacher's
    index is h_l minus mean_l (X X^T - d I) / sqrt(d).
    Reference: Boncoraglio, Troiani, Erba, Zdeborova (2025), Eq. 4-5."""
    W = teacher.factors
    d, T = W.shape[1], X.shape[2]
    h, _, _ = layer_indices(W, W, X, teacher.scale)
    if teacher.centered:
        G = (X @ X.swapaxes(-1, -2) - d * np.eye(T)) / math.sqrt(d)
        h = h - teacher.means[:, None, :, None, None] * G[:, :, None]
    return _forward(h, beta, c)[2]


def two_layer_loss_and_grad(U: NDArray[np.float64], V: Optional[NDArray[np.float64]],
                            X: NDArray[np.float64], y: NDArray[np.float64], scale: float,
                            beta: float = 1.0, c: float = 1.0) -> tuple[Any, ...]:
    """(loss per seed, dell/dU, dell/dV) of ell = sum_b |y(S) - y_b|_F^2 / 2 for the two-layer
    model (module docstring), layers S_l = scale U_l V_l^T; V None: tied layers W = U and
    dell/dW (dell/dV is then None).
    Reference: Boncoraglio, Troiani, Erba, Zdeborova (2025)."""
    s, d, L, r = U.shape
    if L != 2:
        raise ParamgeoError(f"the two-layer model needs factors with 2 layers, got {L}")
    tied = V is None
    Vv = U if V is None else V
    h, P, Q = layer_indices(U, Vv, X, scale)
    A, Z, f = _forward(h, beta, c)
    res = f - y
    EZ = _softmax_vjp(f, res, beta)
    At = A.swapaxes(-1, -2)
    E2 = At @ EZ @ A
    EA = EZ @ A @ h[:, :, 1].swapaxes(-1, -2) + EZ.swapaxes(-1, -2) @ A @ h[:, :, 1]
    E1 = _softmax_vjp(_softmax(h[:, :, 0], beta), EA, beta)
    E = np.stack([E1, E2], axis=2)  # (s, B, L, T, T)
    k = scale / math.sqrt(d)
    XT = X.reshape(s, -1, d).swapaxes(1, 2)
    tr = np.einsum("sklaa->sl", E)[:, None, :, None]
    EQ = np.einsum("sklac,skclr->skalr", E, Q).reshape(s, -1, L * r)
    ETP = np.einsum("sklca,skclr->skalr", E, P).reshape(s, -1, L * r)
    loss = 0.5 * np.sum(res * res, axis=(1, 2, 3))
    if tied:
        return loss, k * (np.matmul(XT, EQ + ETP).reshape(s, d, L, r) - 2.0 * tr * U), None
    GU = k * (np.matmul(XT, EQ).reshape(s, d, L, r) - tr * Vv)
    GV = k * (np.matmul(XT, ETP).reshape(s, d, L, r) - tr * U)
    return loss, GU, GV


def layer_order_parameters(U: NDArray[np.float64], V: Optional[NDArray[np.float64]],
                           teacher: MultiHeadTeacher) -> dict[str, NDArray[np.float64]]:
    """:func:`paramgeo.flows.multihead.head_order_parameters` of the two layers, with the
    summaries ``first`` = |C_11|, ``second`` = |C_22| (each layer against the teacher's same
    layer: the layers are not interchangeable) and ``both`` = their minimum.
    Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models"."""
    o = head_order_parameters(U, V, teacher)
    diag = np.abs(np.einsum("sll->sl", o["cosine"]))
    o.update(first=diag[:, 0], second=diag[:, 1], both=diag.min(axis=1))
    return o


def two_layer_sgd(teacher: MultiHeadTeacher, start: Sequence[ArrayLike], samples: int,
                  lr: float, *, tokens: int = 4, beta: float = 1.0, c: float = 1.0,
                  batch: int = 1, record_at: Optional[Sequence[float]] = None,
                  threshold: float = 0.25, check_every: Optional[int] = None,
                  stop_at: Optional[str] = None, seed: Any = None) -> MultiHeadRun:
    """Online SGD on the two-layer attention-indexed model (module docstring) for ``seeds``
    independent runs at once: U_l <- U_l - eta dell/dU_l (and V_l; tied: W_l), eta = ``lr``,
    ``tokens`` T tokens per sample; ``teacher`` and ``start`` factors of shape
    (seeds, d, 2, r); weak recovery of the summaries ``first``, ``second``, ``both``; the other
    arguments as in :func:`paramgeo.flows.multihead_sgd`.

    References: Boncoraglio, Troiani, Erba, Zdeborova (2025), "Bayes optimal learning of
    attention-indexed models" (the multi-layer model); Xu, Sagitova, Zdeborova,
    "Attention-indexed models" (online SGD)."""
    if int(tokens) != tokens or tokens < 1:
        raise ParamgeoError(f"tokens must be a positive integer, got {tokens}")
    if teacher.factors.shape[2] != 2:
        raise ParamgeoError("the two-layer teacher needs factors of shape (seeds, d, 2, r)")
    for what, v in (("beta", beta), ("c", c)):
        if not math.isfinite(v):
            raise ParamgeoError(f"{what} must be a finite number, got {v}")

    def step(T, X, rng, U, V, scale):
        y = two_layer_labels(T, X, beta, c)
        return two_layer_loss_and_grad(U, V, X, y, scale, beta, c)[1:]

    return batched_online(teacher, start, samples, lr, step=step,
                          summarize=layer_order_parameters, summaries=LAYER_SUMMARIES,
                          tokens=int(tokens), link="softmax", batch=batch, record_at=record_at,
                          threshold=threshold, check_every=check_every, stop_at=stop_at,
                          seed=seed, model="two-layer")
