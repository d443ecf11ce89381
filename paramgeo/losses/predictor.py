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
  Both have closed-form gradients and Hessians in the margins mu_i = y_i <A_i, beta>;
  ``on_outputs(y)`` applies them to a predictor that is the vector of outputs (A = I), and
  :func:`max_margin` solves the hard-margin SVM their gradient descent converges to in
  direction on separable data (Soudry et al. 2018).
* :class:`QuadraticMeasurements`: ell(Q) = (1 / 2N) sum_i (x_i^T Q x_i - y_i)^2 on square
  predictors Q (d x d): the same loss as LinearMeasurements with A_i = x_i x_i^T (positive
  quadratic networks f_U(x) = x^T U U^T x), stored and evaluated in factored form: O(N d) memory
  instead of O(N d^2), predictions as row sums of (X Q) * X, gradient X^T diag(r) X / N
  (symmetric), both BLAS-3 products instead of a memory-bound N x d^2 matrix-vector product.
* :class:`Regression`: ell(B) = (1 / 2N) sum_i |y_i - B x_i|^2 on out x in predictors
  (multi-output linear regression) from its sufficient statistics, O(out in^2) per evaluation.
* :mod:`paramgeo.losses.outputs`: the Gaussian and categorical negative log-likelihoods of a
  predictor that is a model's outputs on N samples (``SquaredError``, ``CrossEntropy``).
* :class:`CallableLoss`: any user function written with ``autograd.numpy``.

Losses built from samples (all but CallableLoss) support ``minibatch(indices)`` for stochastic
gradients. :func:`paramgeo.losses.data.loss_from_arrays` builds a loss from named arrays (an
``.npz`` file) with readable errors; the layout is documented there and in docs/flows.md.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Optional

import autograd
import autograd.numpy as anp
import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization

from ..errors import ParamgeoError, ShapeError
from ..results import Result


class Loss(abc.ABC):
    """A loss ell: R^m -> R on flat predictors."""

    #: predictor dimension the loss expects (None: any)
    m: Any = None

    @abc.abstractmethod
    def value(self, beta: Any) -> Any:
        """ell(beta), written with autograd.numpy so that the default derivatives work."""

    def grad(self, beta: ArrayLike) -> NDArray[np.float64]:
        """grad ell(beta), a vector of length m (autograd unless overridden)."""
        return np.asarray(autograd.grad(self.value)(np.asarray(beta, float)))

    def hessian(self, beta: ArrayLike) -> NDArray[np.float64]:
        """The m x m Hessian of ell at beta (autograd unless overridden)."""
        return np.asarray(autograd.hessian(self.value)(np.asarray(beta, float)))

    #: number of samples (None for losses not built from samples)
    N: Any = None

    def minibatch(self, indices: Any) -> Loss:
        """The same loss on the samples ``indices`` (for stochastic gradients)."""
        raise ParamgeoError(
            f"{type(self).__name__} is not built from samples, so it has no minibatches; "
            "use full-batch gradients (no batch size)"
        )

    def structured_pullback(self, param: Parameterization) -> Optional[tuple[Any, Any]]:
        """(L, grad L) computed from structure the plugin declares, or None for the generic
        chain rule through the flat predictor (the default)."""
        return None

    def value_grad_batch(self, betas: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(ell(beta_k))_k and (grad ell(beta_k))_k for flat predictors betas of shape (K, m):
        arrays of shape (K,) and (K, m). Default: one value and gradient per row; losses with a
        closed form override it with one batched array operation."""
        betas = np.asarray(betas, float)
        return (np.array([float(self.value(b)) for b in betas]),
                np.array([self.grad(b) for b in betas]).reshape(betas.shape))

    def sample_features(self, betas: ArrayLike) -> Optional[NDArray[np.float64]]:
        """Features f(beta) (shape (T, F) for predictors betas of shape (T, m)) in which every
        sample's loss is linear, ell_i(beta) = c_i + <Phi_i, f(beta)>, or None where the loss has
        no such form (the default). With :meth:`sample_pairing` they give the influence of each
        sample on a posterior mean (the LLC estimator's data-set error bar)."""
        return None

    def sample_pairing(self, V: ArrayLike) -> NDArray[np.float64]:
        """(<Phi_i, V>)_i, shape (N,), for a direction V (shape (F,)) of the feature space of
        :meth:`sample_features`."""
        raise ParamgeoError(f"{type(self).__name__} has no per-sample features")

    def check_dim(self, param: Parameterization) -> None:
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

    def residual(self, beta: Any) -> Any:
        return anp.dot(self.A, beta) - self.y

    def value(self, beta: Any) -> Any:
        r = self.residual(beta)
        return 0.5 * anp.dot(r, r) / self.N

    def grad(self, beta: ArrayLike) -> NDArray[np.float64]:
        return self.A.T @ self.residual(np.asarray(beta, float)) / self.N

    def hessian(self, beta: ArrayLike) -> NDArray[np.float64]:
        return self.A.T @ self.A / self.N

    def value_grad_batch(self, betas: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Residuals R = betas A^T - y (K x N): values |R_k|^2 / 2N, gradients R A / N."""
        R = np.asarray(betas, float) @ self.A.T - self.y
        return 0.5 * np.einsum("kn,kn->k", R, R) / self.N, R @ self.A / self.N

    #: the largest predictor dimension m with per-sample features (there are m + m^2)
    FEATURE_LIMIT = 64

    def sample_features(self, betas: ArrayLike) -> Optional[NDArray[np.float64]]:
        """f(beta) = (beta, beta beta^T): ell_i = y_i^2 / 2 - y_i <A_i, beta>
        + <A_i A_i^T, beta beta^T> / 2 (None for m > FEATURE_LIMIT)."""
        if self.m > self.FEATURE_LIMIT:
            return None
        betas = np.asarray(betas, float)
        return np.hstack([betas, np.einsum("ti,tj->tij", betas, betas).reshape(len(betas), -1)])

    def sample_pairing(self, V: ArrayLike) -> NDArray[np.float64]:
        V = np.asarray(V, float)
        V1, V2 = V[:self.m], V[self.m:].reshape(self.m, self.m)
        return -self.y * (self.A @ V1) + 0.5 * np.einsum("ij,jk,ik->i", self.A, V2, self.A)

    def minibatch(self, indices: Any) -> Loss:
        return type(self)(self.A[indices], self.y[indices])


class QuadraticMeasurements(Loss):
    """ell(Q) = (1 / 2N) sum_i (x_i^T Q x_i - y_i)^2 on flat d x d predictors Q; X is (N, d).

    Equal to ``LinearMeasurements`` with A_i = x_i x_i^T, computed without forming the A_i:
    predictions x_i^T Q x_i = rowsum((X Q) * X), gradient G = X^T diag(r) X / N with residuals
    r_i = x_i^T Q x_i - y_i; G is symmetric, which the congruence identity of gradient descent
    on U -> U U^T rests on (Q_{t+1} = (I - 2 eta G_t) Q_t (I - 2 eta G_t)).
    """

    def __init__(self, X, y):
        X = np.asarray(X, dtype=float)
        if X.ndim != 2:
            raise ShapeError(f"quadratic loss: the inputs X must have shape (N, d), got {X.shape}")
        self.X, self.y = _design(X, y, "quadratic loss")
        self.N, self.d = self.X.shape
        self.m = self.d * self.d

    def predictions(self, beta: Any) -> Any:
        Q = anp.reshape(beta, (self.d, self.d))
        return anp.sum(anp.dot(self.X, Q) * self.X, axis=1)

    def value(self, beta: Any) -> Any:
        r = self.predictions(beta) - self.y
        return 0.5 * anp.dot(r, r) / self.N

    def grad(self, beta: ArrayLike) -> NDArray[np.float64]:
        Q = np.reshape(np.asarray(beta, float), (self.d, self.d))
        r = np.sum((self.X @ Q) * self.X, axis=1) - self.y
        return (self.X.T @ (r[:, None] * self.X) / self.N).ravel()

    def minibatch(self, indices: Any) -> Loss:
        return type(self)(self.X[indices], self.y[indices])

    def check_dim(self, param: Parameterization) -> None:
        if param.predictor_shape != (self.d, self.d):
            raise ShapeError(
                f"the quadratic loss needs square {self.d} x {self.d} predictors, but "
                f"{param.name} {param.sizes} has predictors of shape {param.predictor_shape}"
            )

    def structured_pullback(self, param: Parameterization) -> Optional[tuple[Any, Any]]:
        """With the plugin's ``quadratic_forms`` capability: L(theta) = (1/2N) |f - y|^2 and
        grad L = vjp((f - y) / N) from the factors, O(N d r) for U U^T instead of the O(N d^2)
        of the flat route (the generic route is the test oracle)."""
        if not param.provides("quadratic_forms"):
            return None

        def value(theta):
            f, _ = param.quadratic_forms(theta, self.X)
            r = f - self.y
            return float(0.5 * (r @ r) / self.N)

        def both(theta):
            f, vjp = param.quadratic_forms(theta, self.X)
            r = f - self.y
            return float(0.5 * (r @ r) / self.N), np.asarray(vjp(r / self.N), dtype=float)

        def grad(theta):
            return both(theta)[1]

        grad.value_and_grad = both  # type: ignore[attr-defined]  # value_and_grad's one pass
        return value, grad


class Regression(Loss):
    """ell(B) = (1 / 2N) sum_i |y_i - B x_i|^2 on flat out x in predictors B (multi-output
    linear regression, the reduced-rank regression of Aoyagi and Watanabe 2005 when B = U V^T);
    X is (N, in), Y is (N, out).

    Evaluated from the sufficient statistics S_xx = X^T X / N, S_yx = Y^T X / N and
    s_yy = tr(Y^T Y) / N: ell(B) = tr(B S_xx B^T) / 2 - tr(B S_yx^T) + s_yy / 2, gradient
    B S_xx - S_yx, Hessian I_out (x) S_xx (row-major B), so one evaluation costs O(out in^2)
    whatever N is (the sample route is the test oracle). With Gaussian noise of unit variance
    it is the average negative log-likelihood up to a constant."""

    def __init__(self, X, Y):
        X, Y = np.asarray(X, dtype=float), np.asarray(Y, dtype=float)
        if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0] or X.shape[0] == 0:
            raise ShapeError(f"regression loss: X must be (N, in) and Y (N, out) with the same "
                             f"N >= 1, got X {X.shape} and Y {Y.shape}")
        for label, arr in (("X", X), ("Y", Y)):
            if not np.all(np.isfinite(arr)):
                raise ShapeError(f"regression loss: {label} contains NaN or infinite values")
        self.X, self.Y = X, Y
        self.N = X.shape[0]
        self.shape = (Y.shape[1], X.shape[1])
        self.m = Y.shape[1] * X.shape[1]
        self.Sxx = X.T @ X / self.N
        self.Syx = Y.T @ X / self.N
        self.syy = float(np.sum(Y * Y) / self.N)

    def value(self, beta: Any) -> Any:
        B = anp.reshape(beta, self.shape)
        return (0.5 * anp.sum(anp.dot(B, self.Sxx) * B) - anp.sum(B * self.Syx)
                + 0.5 * self.syy)

    def grad(self, beta: ArrayLike) -> NDArray[np.float64]:
        B = np.reshape(np.asarray(beta, float), self.shape)
        return (B @ self.Sxx - self.Syx).ravel()

    def hessian(self, beta: ArrayLike) -> NDArray[np.float64]:
        return np.kron(np.eye(self.shape[0]), self.Sxx)

    def value_grad_batch(self, betas: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The value and gradient above for a stack of predictors B_k (betas of shape (K, m)),
        from the same sufficient statistics in batched products."""
        betas = np.asarray(betas, float)
        K = betas.size // self.m
        flat = betas.reshape(K, self.m)
        # every row of every B_k at once: one (K out) x in product with S_xx
        BS = (flat.reshape(-1, self.shape[1]) @ self.Sxx).reshape(K, self.m)
        Syx = self.Syx.reshape(1, -1)
        values = np.einsum("ki,ki->k", 0.5 * BS - Syx, flat) + 0.5 * self.syy
        return values, BS - Syx

    def sample_features(self, betas: ArrayLike) -> Optional[NDArray[np.float64]]:
        """f(B) = (B, B^T B): ell_i(B) = |y_i|^2 / 2 - y_i^T B x_i + x_i^T B^T B x_i / 2, so
        Phi_i = (-y_i x_i^T, x_i x_i^T / 2)."""
        B = np.reshape(np.asarray(betas, float), (-1,) + self.shape)
        return np.hstack([B.reshape(len(B), -1),
                          (B.transpose(0, 2, 1) @ B).reshape(len(B), -1)])

    def sample_pairing(self, V: ArrayLike) -> NDArray[np.float64]:
        V = np.asarray(V, float)
        k = self.m
        V1, V2 = V[:k].reshape(self.shape), V[k:].reshape(self.shape[1], self.shape[1])
        return (-np.einsum("ij,ij->i", self.Y @ V1, self.X)
                + 0.5 * np.einsum("ij,ij->i", self.X @ V2, self.X))

    def minibatch(self, indices: Any) -> Loss:
        return type(self)(self.X[indices], self.Y[indices])

    def reduced_rank_minimiser(self, H: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(W1, W2), W1 of shape (H, in) and W2 (out, H), with B = W2 W1 the minimiser of
        ell over matrices of rank <= H (reduced-rank regression; Reinsel and Velu 1998,
        "Multivariate reduced-rank regression", Theorem 2.2): with the whitened
        C = S_yx S_xx^{-1/2} = P diag(s) Q^T, B = P_H diag(s_H) Q_H^T S_xx^{-1/2}; each
        singular value is split evenly, W2 = P_H diag(s_H)^{1/2},
        W1 = diag(s_H)^{1/2} Q_H^T S_xx^{-1/2}, and columns beyond the rank of C are zero (the
        deepest points of the set of minimisers). Raises ShapeError if S_xx is singular."""
        H = int(H)
        ev, E = np.linalg.eigh(self.Sxx)
        if H < 1 or ev[0] <= 1e-12 * max(ev[-1], 1e-300):
            raise ShapeError(f"regression loss: the reduced-rank minimiser needs H >= 1 (got "
                             f"{H}) and inputs X of full column rank (S_xx has eigenvalue "
                             f"{ev[0]:.2e}); give more samples than inputs")
        inv_root = (E / np.sqrt(ev)) @ E.T
        P, S, Qt = np.linalg.svd(self.Syx @ inv_root)
        k = min(H, S.size)
        W2 = np.zeros((self.shape[0], H))
        W1 = np.zeros((H, self.shape[1]))
        W2[:, :k] = P[:, :k] * np.sqrt(S[:k])
        W1[:k] = (np.sqrt(S[:k])[:, None] * Qt[:k]) @ inv_root
        return W1, W2

    def check_dim(self, param: Parameterization) -> None:
        if tuple(param.predictor_shape) != self.shape:
            flipped = tuple(param.predictor_shape) == self.shape[::-1]
            raise ShapeError(
                f"the regression loss needs {self.shape[0]} x {self.shape[1]} predictors "
                f"(outputs x inputs, from Y {self.Y.shape} and X {self.X.shape}), but "
                f"{param.name} {param.sizes} has predictors of shape {param.predictor_shape}"
                + ("; that is inputs x outputs, the layout of a PyTorch or JAX network on the "
                   "identity probe (net(I) = B^T): fit such a model on its data with the "
                   "loss mse, which evaluates it on X" if flipped else ""))


class _MarginLoss(Loss):
    """ell(beta) = (1/N) sum_i l(mu_i) of the margins mu_i = y_i <A_i, beta>, labels +-1.

    grad ell = (1/N) A^T (y * l'(mu)) and Hess ell = (1/N) A^T diag(l''(mu)) A (y_i^2 = 1).
    ``on_outputs(y)`` takes A = I: the predictor is the vector of outputs f(x_i) itself (a
    parameterization whose predictor is its outputs on the N samples)."""

    def __init__(self, A, y):
        self.A, self.y = _design(A, y, type(self).__name__)
        if not np.all(np.isin(self.y, (-1.0, 1.0))):
            raise ShapeError(f"{type(self).__name__}: labels y must be -1 or +1")
        self.N, self.m = self.A.shape

    @classmethod
    def on_outputs(cls, y):
        """The loss of the outputs themselves: A = I_N, mu_i = y_i beta_i."""
        y = np.asarray(y, dtype=float).ravel()
        return cls(np.eye(y.size), y)

    def margins(self, beta: Any) -> Any:
        return self.y * anp.dot(self.A, beta)

    def minibatch(self, indices: Any) -> Loss:
        return type(self)(self.A[indices], self.y[indices])

    def grad(self, beta: ArrayLike) -> NDArray[np.float64]:
        mu = self.margins(np.asarray(beta, float))
        return self.A.T @ (self.y * self.dloss(mu)) / self.N  # type: ignore[attr-defined]

    def hessian(self, beta: ArrayLike) -> NDArray[np.float64]:
        mu = self.margins(np.asarray(beta, float))
        return (self.A.T * self.d2loss(mu)) @ self.A / self.N  # type: ignore[attr-defined]


class Logistic(_MarginLoss):
    """ell(beta) = (1/N) sum_i log(1 + exp(-y_i <A_i, beta>)) (labels +-1).

    l(mu) = log(1 + e^{-mu}), l'(mu) = -sigma(-mu), l''(mu) = sigma(mu) sigma(-mu) with
    sigma(z) = 1 / (1 + e^{-z}) (scipy's expit: no overflow for large |mu|). On separable data
    gradient descent drives |beta| -> infinity and beta / |beta| -> the hard-margin SVM
    direction at rate 1 / log t (Soudry, Hoffer, Nacson, Gunasekar, Srebro 2018, "The implicit
    bias of gradient descent on separable data"); see :func:`max_margin`. The autograd
    defaults are the test oracle of the closed forms."""

    def value(self, beta: Any) -> Any:
        return anp.mean(anp.logaddexp(0.0, -self.margins(beta)))

    @staticmethod
    def dloss(mu: Any) -> Any:
        from scipy.special import expit

        return -expit(-mu)

    @staticmethod
    def d2loss(mu: Any) -> Any:
        from scipy.special import expit

        return expit(mu) * expit(-mu)


class Exponential(_MarginLoss):
    """ell(beta) = (1/N) sum_i exp(-y_i <A_i, beta>) (labels +-1): l(mu) = e^{-mu},
    l'(mu) = -e^{-mu}, l''(mu) = e^{-mu} (the same max-margin limit as the logistic loss,
    Soudry et al. 2018)."""

    def value(self, beta: Any) -> Any:
        return anp.mean(anp.exp(-self.margins(beta)))

    @staticmethod
    def dloss(mu: Any) -> Any:
        return -np.exp(-mu)

    @staticmethod
    def d2loss(mu: Any) -> Any:
        return np.exp(-mu)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaxMargin(Result):
    """The hard-margin SVM of :func:`max_margin`: ``direction`` w / |w|, ``margin`` gamma =
    min_i y_i <A_i, w / |w|> = 1 / |w|, ``w`` the minimiser, ``support`` the indices with
    y_i <A_i, w> = 1 (within 1e-6), ``dual`` alpha >= 0 with w = sum_i alpha_i y_i A_i (non-
    negative least squares on the support), ``kkt_residual`` |w - sum_i alpha_i y_i A_i| / |w|."""

    direction: np.ndarray
    margin: float
    w: np.ndarray
    support: tuple
    dual: np.ndarray
    kkt_residual: float
    success: bool
    message: str


def max_margin(A: ArrayLike, y: ArrayLike, tol: float = 1e-12) -> MaxMargin:
    """The hard-margin SVM without bias: w* = argmin |w|^2 / 2 subject to y_i <A_i, w> >= 1,
    solved with scipy's SLSQP; returns a :class:`MaxMargin` (direction w* / |w*|, margin
    1 / |w*|) with the KKT certificate w* = sum_{i in support} alpha_i y_i A_i, alpha >= 0
    (Boyd and Vandenberghe 2004, Sec. 8.6.1). The limit direction of gradient descent on the
    logistic and exponential losses over separable data (Soudry et al. 2018). A ShapeError
    names non-separable data (SLSQP fails to satisfy the constraints)."""
    from scipy.optimize import minimize, nnls

    A, y = _design(A, y, "max_margin")
    Z = y[:, None] * A  # rows y_i A_i
    w0, *_ = np.linalg.lstsq(Z, np.ones(len(y)), rcond=None)
    w0 = w0 / max(np.min(Z @ w0), 1e-12) if np.min(Z @ w0) > 0 else w0
    res = minimize(lambda w: 0.5 * w @ w, w0, jac=lambda w: w, method="SLSQP",
                   constraints=[{"type": "ineq", "fun": lambda w: Z @ w - 1.0,
                                 "jac": lambda w: Z}],
                   options={"ftol": tol, "maxiter": 1000})
    w = res.x
    if not res.success or np.min(Z @ w) < 1.0 - 1e-6:
        raise ShapeError(f"max_margin: no w with y_i <A_i, w> >= 1 for all i was found "
                         f"(SLSQP: {res.message}); the data are not linearly separable")
    support = np.flatnonzero(Z @ w <= 1.0 + 1e-6)
    alpha_s, _ = nnls(Z[support].T, w)
    dual = np.zeros(len(y))
    dual[support] = alpha_s
    kkt = float(np.linalg.norm(Z.T @ dual - w) / np.linalg.norm(w))
    norm = float(np.linalg.norm(w))
    return MaxMargin(direction=w / norm, margin=1.0 / norm, w=w,
                     support=tuple(int(i) for i in support), dual=dual, kkt_residual=kkt,
                     success=bool(res.success), message=str(res.message))


class CallableLoss(Loss):
    """Wrap a user function ell(beta) -> scalar written with ``autograd.numpy``."""

    def __init__(self, fn, m=None):
        if not callable(fn):
            raise ParamgeoError("CallableLoss needs a callable ell(beta) -> float")
        self.fn, self.m = fn, m

    def value(self, beta: Any) -> Any:
        out = self.fn(beta)
        if anp.ndim(out) != 0:
            raise ParamgeoError(
                f"the user-provided loss must return a scalar, got shape {anp.shape(out)}"
            )
        return out


def loss_hessian(param: Parameterization, loss: Loss, theta: ArrayLike) -> NDArray[np.float64]:
    """The n x n Hessian of L = ell o phi: J^T Hess(ell) J + sum_i g_i Hess(phi_i).

    The second term, with g = grad ell(phi(theta)) held fixed, is built column by column from
    the contract's Hessian-vector product: column j is ``param.hessian_vp(theta, g, e_j)`` =
    (d/dt J(theta + t e_j))^T g (autograd reverse over reverse unless the plugin overrides it);
    the tests compare it with ``jacobian_derivative`` and with autograd's Hessian of L."""
    theta = param.as_theta(theta)
    beta = np.asarray(param.forward_flat(theta))
    g = np.asarray(loss.grad(beta))
    J = param.jacobian(theta)
    H = J.T @ np.asarray(loss.hessian(beta)) @ J
    second = np.column_stack([param.hessian_vp(theta, g, e) for e in np.eye(param.n)])
    H = H + second
    return 0.5 * (H + H.T)


def pullback(param: Parameterization, loss: Loss) -> tuple[Callable[[Any], float],
                                                          Callable[[Any], NDArray[np.float64]]]:
    """(L, grad L) for L(theta) = ell(phi(theta)), grad L = J^T grad ell(phi(theta)) by VJP
    (or the loss's ``structured_pullback`` when the plugin declares the structure it uses)."""
    from ..contract.arguments import parameterization
    from ..errors import ArgumentError

    parameterization(param)
    if not isinstance(loss, Loss):
        raise ArgumentError(f"loss must be a paramgeo.losses.Loss (e.g. LinearMeasurements(A, "
                            f"y)), got {type(loss).__name__}")
    loss.check_dim(param)
    structured = loss.structured_pullback(param)
    if structured is not None:
        return structured

    def value(theta):
        return float(loss.value(np.asarray(param.forward_flat(theta))))

    def grad(theta):
        beta = np.asarray(param.forward_flat(theta))
        return param.vjp(theta, loss.grad(beta))

    return value, grad


def value_and_grad(param: Parameterization,
                   loss: Loss) -> Callable[[Any], tuple[float, NDArray[np.float64]]]:
    """theta -> (L(theta), grad L(theta)) for L = ell(phi(theta)): one forward pass for both
    (grad L = J^T grad ell(phi(theta)) by VJP); where the loss has a ``structured_pullback`` for
    this plugin, its one-pass pair if its gradient carries one (attribute ``value_and_grad``),
    else the value and the gradient of :func:`pullback` called in turn."""
    value, grad = pullback(param, loss)
    if loss.structured_pullback(param) is not None:
        return getattr(grad, "value_and_grad", None) or (lambda theta: (value(theta),
                                                                        grad(theta)))

    def both(theta):
        beta = np.asarray(param.forward_flat(theta))
        return float(loss.value(beta)), param.vjp(theta, loss.grad(beta))

    return both


def batched_value_and_grad(param: Parameterization, loss: Loss, single: bool = False
                           ) -> Callable[[Any], tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """thetas (K, n) -> (values (K,), gradients (K, n)) of L = ell(phi(theta)) at each row: one
    batched pass (the plugin's ``batched_vjp`` and the loss's ``value_grad_batch``, grad L_k =
    J(theta_k)^T grad ell(phi(theta_k))) where the plugin declares ``batched_vjp`` and the loss
    has no ``structured_pullback`` for it; otherwise :func:`value_and_grad` row by row. The
    function's attribute ``batched`` says which. ``single``: phi and its VJP in float32 where
    the plugin offers it (``single_precision``, torch models), the loss in float64."""
    one = value_and_grad(param, loss)  # validates param and loss
    if param.provides("batched_vjp") and loss.structured_pullback(param) is None:
        options = {"single": True} if single and getattr(param, "single_precision",
                                                         False) else {}

        def batch(thetas):
            phis, vjp = param.batched_vjp(thetas, **options)
            values, G = loss.value_grad_batch(np.asarray(phis).reshape(len(thetas), -1))
            return values, vjp(G)

        batch.batched = True  # type: ignore[attr-defined]
        return batch

    def rows(thetas):
        pairs = [one(theta) for theta in thetas]
        return (np.array([value for value, _ in pairs], float),
                np.array([grad for _, grad in pairs], float).reshape(np.shape(thetas)))

    rows.batched = False  # type: ignore[attr-defined]
    return rows
