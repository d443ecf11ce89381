"""Losses of a model's outputs on N samples: the predictor is the flat (N, ...) array of the
outputs f(x_1), ..., f(x_N) (a framework model on a data batch,
:meth:`paramgeo.Parameterization.on_inputs`), and the loss is an average negative
log-likelihood of the targets (:class:`SquaredError` for Gaussian noise, :class:`CrossEntropy`
for classes). Both are :class:`paramgeo.losses.Loss` objects with closed-form gradients and
batched evaluation (``value_grad_batch``); the LLC estimator on data uses them
(:func:`paramgeo.llc.estimate_llc` with ``loss="mse"`` or ``"cross-entropy"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import autograd.numpy as anp
import numpy as np

from ..errors import ShapeError
from .predictor import Loss

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization


def _outputs(Y, name):
    Y = np.asarray(Y, dtype=float)
    if Y.ndim == 0 or Y.shape[0] == 0:
        raise ShapeError(f"{name}: the targets must have shape (N, ...) with N >= 1 samples, "
                         f"got {Y.shape}")
    if not np.all(np.isfinite(Y)):
        raise ShapeError(f"{name}: the targets contain NaN or infinite values")
    return Y


class SquaredError(Loss):
    """ell(beta) = (1 / 2N) sum_i |y_i - f_i|^2 on a predictor that is the model's outputs
    f_1, ..., f_N on N samples (beta = the flat (N, ...) outputs, Y of the same shape): the
    average negative log-likelihood of y_i ~ N(f_i, I) up to the constant (out / 2) log 2 pi
    (the "mse" of :func:`paramgeo.llc.estimate_llc` on data; the Regression loss is the same
    sum when f_i = B x_i). grad = (beta - Y) / N, Hessian I / N."""

    def __init__(self, Y):
        self.Y = _outputs(Y, "squared-error loss")
        self.N, self.m = self.Y.shape[0], self.Y.size
        self.y = self.Y.ravel()

    def value(self, beta: Any) -> Any:
        r = anp.reshape(beta, (-1,)) - self.y
        return 0.5 * anp.dot(r, r) / self.N

    def grad(self, beta: ArrayLike) -> NDArray[np.float64]:
        return (np.ravel(beta) - self.y) / self.N

    def hessian(self, beta: ArrayLike) -> NDArray[np.float64]:
        return np.eye(self.m) / self.N

    def value_grad_batch(self, betas: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        R = np.asarray(betas, float).reshape(-1, self.m) - self.y
        return 0.5 * np.einsum("km,km->k", R, R) / self.N, R / self.N

    def minibatch(self, indices: Any) -> Loss:
        return type(self)(self.Y[indices])


class CrossEntropy(Loss):
    """ell(beta) = (1/N) sum_i -sum_c p_ic log softmax(f_i)_c on a predictor that is the
    model's logits f_i (N x C) on N samples, with targets p_i: class labels (Y of shape (N,),
    integers 0..C-1, p_i one-hot) or probabilities (Y of shape (N, C), rows summing to 1).
    The average negative log-likelihood of the categorical model; grad = (softmax(f) - p) / N
    row by row, Hessian blocks (diag(s_i) - s_i s_i^T) / N, s_i = softmax(f_i)."""

    def __init__(self, Y, classes=None):
        Y = np.asarray(Y)
        if Y.ndim == 1:
            if (Y.size == 0 or not np.all(np.isfinite(Y.astype(float)))
                    or np.any(Y.astype(float) != np.round(Y.astype(float))) or Y.min() < 0):
                raise ShapeError("cross-entropy loss: labels must be integers 0, 1, ..., C - 1 "
                                 "(shape (N,)) or class probabilities (shape (N, C))")
            labels = Y.astype(int)
            C = int(classes if classes is not None else labels.max() + 1)
            if labels.max() >= C:
                raise ShapeError(f"cross-entropy loss: label {labels.max()} needs at least "
                                 f"{labels.max() + 1} outputs, the model has {C}")
            P = np.zeros((Y.size, C))
            P[np.arange(Y.size), labels] = 1.0
        else:
            P = _outputs(Y, "cross-entropy loss").reshape(Y.shape[0], -1)
            if np.any(P < 0) or not np.allclose(P.sum(axis=1), 1.0):
                raise ShapeError("cross-entropy loss: target rows must be probabilities (non-"
                                 "negative, summing to 1), or give integer labels of shape (N,)")
        self.P, self.classes = P, classes
        self.N, self.C = P.shape
        self.m = P.size

    def value(self, beta: Any) -> Any:
        F = anp.reshape(beta, (self.N, self.C))
        top = anp.max(F, axis=1, keepdims=True)
        logz = top[:, 0] + anp.log(anp.sum(anp.exp(F - top), axis=1))
        return (anp.sum(logz) - anp.sum(self.P * F)) / self.N

    def _softmax(self, F):
        E = np.exp(F - F.max(axis=-1, keepdims=True))
        return E / E.sum(axis=-1, keepdims=True)

    def grad(self, beta: ArrayLike) -> NDArray[np.float64]:
        F = np.reshape(np.asarray(beta, float), (self.N, self.C))
        return ((self._softmax(F) - self.P) / self.N).ravel()

    def value_grad_batch(self, betas: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        F = np.asarray(betas, float).reshape(-1, self.N, self.C)
        top = F.max(axis=2, keepdims=True)
        E = np.exp(F - top)
        Z = E.sum(axis=2, keepdims=True)
        values = (np.sum(top[..., 0] + np.log(Z[..., 0]), axis=1)
                  - np.einsum("knc,nc->k", F, self.P)) / self.N
        return values, ((E / Z - self.P) / self.N).reshape(len(F), -1)

    def minibatch(self, indices: Any) -> Loss:
        return type(self)(self.P[indices])

    def check_dim(self, param: Parameterization) -> None:
        if param.m != self.m:
            raise ShapeError(f"the cross-entropy loss of {self.N} samples and {self.C} classes "
                             f"needs {self.N} x {self.C} logits, but {param.name} has outputs "
                             f"of shape {param.predictor_shape}; the model must output one "
                             "logit per class")
