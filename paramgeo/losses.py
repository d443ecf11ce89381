"""Losses on predictors, and their pull-back to parameters.

A :class:`Loss` is a function ell of the flat predictor beta in R^m with its gradient (and, by
default through autograd, its Hessian). Through a parameterization phi it defines the training
loss L(theta) = ell(phi(theta)) whose gradient is the chain rule

    grad L(theta) = J(theta)^T grad ell(phi(theta)),

computed with the plugin's VJP (a closed form where the plugin has one, autograd otherwise), so
the dense Jacobian is never formed (:func:`pullback`).

Built-in losses:

* :class:`LinearMeasurements`: ell(beta) = (1 / 2N) sum_i (<A_i, beta> - y_i)^2 for measurement
  matrices A_i (matrix sensing; quadratic networks with A_i = x_i x_i^T; Hadamard or diagonal
  network regression with A_i = x_i).
* :class:`Logistic`: ell(beta) = (1/N) sum_i log(1 + exp(-y_i <A_i, beta>)), labels y_i = +-1.
* :class:`Exponential`: ell(beta) = (1/N) sum_i exp(-y_i <A_i, beta>).
* :class:`CallableLoss`: any user function written with ``autograd.numpy``.
"""

import abc

import autograd
import autograd.numpy as anp
import numpy as np

from .errors import ParamgeoError, ShapeError


class Loss(abc.ABC):
    """A loss ell: R^m -> R on flat predictors."""

    #: predictor dimension the loss expects (None: any)
    m = None

    @abc.abstractmethod
    def value(self, beta):
        """ell(beta), written with autograd.numpy so that the default derivatives work."""

    def grad(self, beta):
        """grad ell(beta), a vector of length m (autograd unless overridden)."""
        return np.asarray(autograd.grad(self.value)(np.asarray(beta, float)))

    def hessian(self, beta):
        """The m x m Hessian of ell at beta (autograd unless overridden)."""
        return np.asarray(autograd.hessian(self.value)(np.asarray(beta, float)))

    def check_dim(self, param):
        """Raise ShapeError if the loss cannot be applied to the predictors of ``param``."""
        if self.m is not None and self.m != param.m:
            raise ShapeError(
                f"the loss expects predictors of dimension {self.m}, but {param.name} "
                f"{param.sizes} has predictors of dimension {param.m} "
                f"(shape {param.predictor_shape})"
            )


def _design(A, y, name):
    A = np.asarray(A, dtype=float)
    y = np.asarray(y, dtype=float).ravel()
    if A.ndim < 2:
        raise ShapeError(f"{name}: the measurements A must have shape (N, ...), got {A.shape}")
    A = A.reshape(A.shape[0], -1)
    if A.shape[0] != y.shape[0]:
        raise ShapeError(
            f"{name}: {A.shape[0]} measurements but {y.shape[0]} targets; A and y must agree"
        )
    for label, arr in (("A", A), ("y", y)):
        if not np.all(np.isfinite(arr)):
            raise ShapeError(f"{name}: {label} contains NaN or infinite values")
    return A, y


class LinearMeasurements(Loss):
    """ell(beta) = (1 / 2N) sum_i (<A_i, beta> - y_i)^2; A has shape (N, *predictor_shape)."""

    def __init__(self, A, y):
        self.A, self.y = _design(A, y, "squared loss")
        self.N, self.m = self.A.shape

    def residual(self, beta):
        return anp.dot(self.A, beta) - self.y

    def value(self, beta):
        r = self.residual(beta)
        return 0.5 * anp.dot(r, r) / self.N

    def grad(self, beta):
        return self.A.T @ self.residual(np.asarray(beta, float)) / self.N

    def hessian(self, beta):
        return self.A.T @ self.A / self.N


class _MarginLoss(Loss):
    def __init__(self, A, y):
        self.A, self.y = _design(A, y, type(self).__name__)
        if not np.all(np.isin(self.y, (-1.0, 1.0))):
            raise ShapeError(f"{type(self).__name__}: labels y must be -1 or +1")
        self.N, self.m = self.A.shape

    def margins(self, beta):
        return self.y * anp.dot(self.A, beta)


class Logistic(_MarginLoss):
    """ell(beta) = (1/N) sum_i log(1 + exp(-y_i <A_i, beta>)) (labels +-1)."""

    def value(self, beta):
        return anp.mean(anp.logaddexp(0.0, -self.margins(beta)))

    def grad(self, beta):
        s = -self.y / (1.0 + np.exp(self.margins(np.asarray(beta, float))))
        return self.A.T @ s / self.N


class Exponential(_MarginLoss):
    """ell(beta) = (1/N) sum_i exp(-y_i <A_i, beta>) (labels +-1)."""

    def value(self, beta):
        return anp.mean(anp.exp(-self.margins(beta)))

    def grad(self, beta):
        s = -self.y * np.exp(-self.margins(np.asarray(beta, float)))
        return self.A.T @ s / self.N


class CallableLoss(Loss):
    """Wrap a user function ell(beta) -> scalar written with ``autograd.numpy``."""

    def __init__(self, fn, m=None):
        if not callable(fn):
            raise ParamgeoError("CallableLoss needs a callable ell(beta) -> float")
        self.fn, self.m = fn, m

    def value(self, beta):
        out = self.fn(beta)
        if anp.ndim(out) != 0:
            raise ParamgeoError(
                f"the user-provided loss must return a scalar, got shape {anp.shape(out)}"
            )
        return out


def pullback(param, loss):
    """(L, grad L) for L(theta) = ell(phi(theta)), grad L = J^T grad ell(phi(theta)) by VJP."""
    loss.check_dim(param)

    def value(theta):
        return float(loss.value(np.asarray(param.forward_flat(theta))))

    def grad(theta):
        beta = np.asarray(param.forward_flat(theta))
        return param.vjp(theta, loss.grad(beta))

    return value, grad
