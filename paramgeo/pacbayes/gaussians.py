"""Gaussians on Theta = R^n and their relative entropies: the parameter-space KL and the chain
rule of relative entropy that the quotient KL rests on.

For phi: Theta -> P with push-forwards Q_bar = phi_# Q, P_bar = phi_# P,

    KL(Q || P) = KL(Q_bar || P_bar) + E_{beta ~ Q_bar} KL(Q(. | beta) || P(. | beta))
               >= KL(Q_bar || P_bar)                                                     (1)

(Cover and Thomas 2006, Thm 2.5.3); :func:`gaussian_chain_rule` computes the three terms in
closed form for a linear phi, the oracle for the estimators of the quotient KL.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from scipy import linalg

from ..errors import ParamgeoError, ShapeError
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray


class PacBayesInputError(ParamgeoError, ValueError):
    """A PAC-Bayes input (delta, n, scale, risk, KL, distribution) is out of its range."""


# ---------------------------------------------------------------------------- distributions
@dataclasses.dataclass(frozen=True, kw_only=True)
class DiagonalGaussian(Result):
    """N(mean, diag(std^2)) on Theta = R^n; ``isotropic(mean, s)`` gives N(mean, s^2 I).

    log density  log q(theta) = -sum_j [ (theta_j - mean_j)^2 / (2 std_j^2) + log(std_j) ]
                                - (n/2) log(2 pi).
    """

    mean: np.ndarray
    std: np.ndarray

    def __post_init__(self):
        mean = np.atleast_1d(np.asarray(self.mean, dtype=float))
        std = np.asarray(self.std, dtype=float)
        if std.ndim == 0:
            std = np.full(mean.shape, float(std))
        if mean.ndim != 1 or std.shape != mean.shape:
            raise ShapeError(
                f"a Gaussian needs a flat mean and a std of the same length (or a scalar std); "
                f"got mean {mean.shape}, std {std.shape}"
            )
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))):
            raise PacBayesInputError("a Gaussian's mean and std must be finite (no NaN or inf)")
        if std.size and (std.max() > MAX_SCALE or std.min() < 1 / MAX_SCALE) and np.all(std > 0):
            raise PacBayesInputError(
                f"a Gaussian's std must lie in [{1 / MAX_SCALE:.0e}, {MAX_SCALE:.0e}] (its squares "
                f"and ratios must stay floats); got {std.min():.3g} to {std.max():.3g}")
        if mean.size and np.max(np.abs(mean)) > MAX_SCALE:
            raise PacBayesInputError(f"a Gaussian's mean must lie within +-{MAX_SCALE:.0e}; got "
                                     f"{np.max(np.abs(mean)):.3g}")
        if np.any(std <= 0):
            raise PacBayesInputError(
                f"a Gaussian's std must be positive; got min {std.min():.3g} (use a scale > 0)"
            )
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)

    @classmethod
    def isotropic(cls, mean: ArrayLike, scale: float) -> DiagonalGaussian:
        """N(mean, scale^2 I)."""
        return cls(mean=mean, std=_positive(scale, "scale"))  # type: ignore[arg-type]

    @property
    def n(self):
        return self.mean.size

    def sample(self, rng: np.random.Generator, size: Optional[int] = None) -> NDArray[np.float64]:
        """Samples (size x n, or n if size is None) from ``rng`` (a numpy Generator)."""
        shape = (self.n,) if size is None else (int(size), self.n)
        return self.mean + self.std * rng.standard_normal(shape)

    def logpdf(self, theta: ArrayLike) -> Any:
        """log density at theta (shape (..., n))."""
        z = (np.asarray(theta, float) - self.mean) / self.std
        return -0.5 * np.sum(z * z, axis=-1) - np.sum(np.log(self.std)) \
            - 0.5 * self.n * math.log(2 * math.pi)


#: Largest std, mean entry and prior scale (and 1 / the smallest std or scale) of a Gaussian:
#: KL terms square them and take their ratios, and phi of the samples raises them to the
#: degree of phi; past 1e12 the push-forward loses every digit (KL 0 at std 1e100).
MAX_SCALE = 1e12


def _positive(value, what, bounded=False):
    """``value`` as a positive finite float; with ``bounded`` also within [1 / MAX_SCALE,
    MAX_SCALE] (prior scales)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise PacBayesInputError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise PacBayesInputError(f"{what} must be a positive finite number, got {value!r}")
    if bounded and not 1 / MAX_SCALE <= value <= MAX_SCALE:
        raise PacBayesInputError(f"{what} must lie in [{1 / MAX_SCALE:.0e}, {MAX_SCALE:.0e}], "
                                 f"got {value!r}")
    return value


def kl_gaussian(q: DiagonalGaussian, p: DiagonalGaussian) -> float:
    """KL(N(mq, Sq) || N(mp, Sp)) for diagonal Gaussians, in nats:

        1/2 sum_j [ sq_j^2/sp_j^2 + (mq_j - mp_j)^2/sp_j^2 - 1 + 2 log(sp_j/sq_j) ]

    (the Gaussian relative entropy summed over the independent coordinates; Kullback 1959,
    "Information Theory and Statistics"; checked against :func:`kl_mvn` and Monte Carlo).
    """
    for what, g in (("q (the posterior)", q), ("p (the prior)", p)):
        if not isinstance(g, DiagonalGaussian):
            raise PacBayesInputError(f"kl_gaussian: {what} must be a DiagonalGaussian, got "
                                     f"{type(g).__name__}")
    if q.n != p.n:
        raise ShapeError(f"posterior has {q.n} entries but prior has {p.n}")
    r = (q.std / p.std) ** 2
    d = ((q.mean - p.mean) / p.std) ** 2
    return float(0.5 * np.sum(r + d - 1.0 - np.log(r)))


def kl_mvn(mq: ArrayLike, Sq: ArrayLike, mp: ArrayLike, Sp: ArrayLike) -> float:
    """KL(N(mq, Sq) || N(mp, Sp)) for full covariances:
    1/2 [ tr(Sp^-1 Sq) + (mp - mq)^T Sp^-1 (mp - mq) - k + ln det Sp - ln det Sq ].

    The means must be finite vectors of one length k and the covariances finite, symmetric
    and positive definite k x k matrices (a Cholesky factor exists): the Gaussians' domain.
    Anything else is a PacBayesInputError naming the argument."""
    mq, mp = np.atleast_1d(mq).astype(float), np.atleast_1d(mp).astype(float)
    Sq, Sp = np.atleast_2d(Sq).astype(float), np.atleast_2d(Sp).astype(float)
    k = mq.shape[0]
    for label, m in (("mq", mq), ("mp", mp)):
        if k == 0 or m.shape != (k,) or not np.all(np.isfinite(m)):
            raise PacBayesInputError(f"kl_mvn: the mean {label} must be a finite vector of "
                                     f"length {k}, got shape {m.shape}")
    factors = {}
    for label, S in (("Sq", Sq), ("Sp", Sp)):
        if S.shape != (k, k) or not np.all(np.isfinite(S)):
            raise PacBayesInputError(f"kl_mvn: the covariance {label} must be a finite {k} x "
                                     f"{k} matrix, got shape {S.shape}")
        if not np.allclose(S, S.T, rtol=1e-10, atol=1e-12 * np.abs(S).max()):
            raise PacBayesInputError(f"kl_mvn: the covariance {label} is not symmetric; give "
                                     "a symmetric positive definite matrix")
        try:
            factors[label] = linalg.cho_factor(S)
        except linalg.LinAlgError:
            raise PacBayesInputError(f"kl_mvn: the covariance {label} is not positive "
                                     "definite (no Cholesky factor): a Gaussian needs a "
                                     "positive definite covariance") from None
    cq, cp = factors["Sq"], factors["Sp"]
    diff = mp - mq
    # ln det S = 2 sum ln diag(L) for S = L L^T
    ldq = 2.0 * np.sum(np.log(np.diag(cq[0])))
    ldp = 2.0 * np.sum(np.log(np.diag(cp[0])))
    return float(0.5 * (np.trace(linalg.cho_solve(cp, Sq)) + diff @ linalg.cho_solve(cp, diff)
                        - k + ldp - ldq))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChainRule(Result):
    """The three terms of (1) for a linear phi(theta) = A theta and Gaussian Q, P."""

    kl_param: float
    kl_quotient: float
    expected_fibre_kl: float


def gaussian_chain_rule(A: ArrayLike, mq: ArrayLike, Sq: ArrayLike, mp: ArrayLike,
                        Sp: ArrayLike) -> ChainRule:
    """Terms of KL(Q||P) = KL(Q_bar||P_bar) + E_{Q_bar} KL(Q(.|beta) || P(.|beta)) for the linear
    map phi(theta) = A theta (A of full row rank) and Gaussians Q = N(mq, Sq), P = N(mp, Sp),
    each computed from its own closed form (Gaussian conditioning, e.g. Bishop 2006, 2.3.1).

    Q_bar = N(A mq, A Sq A^T). With N an orthonormal basis of ker A and theta = A^+ beta + N z,
    z | beta ~ N(c + B beta, C) with C = (N^T S^-1 N)^-1, B = -C N^T S^-1 A^+,
    c = C N^T S^-1 m; the fibre KL is Gaussian in z, and its mean over beta ~ Q_bar uses
    E[delta delta^T] = (a + Bd mu)(a + Bd mu)^T + Bd Sigma Bd^T for delta = a + Bd beta.
    """
    A = np.atleast_2d(np.asarray(A, float))
    Apinv = np.linalg.pinv(A)
    N = linalg.null_space(A)
    kl_param = kl_mvn(mq, Sq, mp, Sp)
    mu, Sig = A @ mq, A @ Sq @ A.T
    kl_quot = kl_mvn(mu, Sig, A @ mp, A @ Sp @ A.T)

    def conditional(m, S):
        Si = np.linalg.inv(S)
        C = np.linalg.inv(N.T @ Si @ N)
        return C @ N.T @ Si @ m, -C @ N.T @ Si @ Apinv, C  # z|beta ~ N(c + B beta, C)

    cq, Bq, Cq = conditional(np.asarray(mq, float), np.asarray(Sq, float))
    cp, Bp, Cp = conditional(np.asarray(mp, float), np.asarray(Sp, float))
    Cpi = np.linalg.inv(Cp)
    k = N.shape[1]
    a, Bd = cq - cp, Bq - Bp
    mean_delta = a + Bd @ mu
    second = np.outer(mean_delta, mean_delta) + Bd @ Sig @ Bd.T
    _, ldq = np.linalg.slogdet(Cq)
    _, ldp = np.linalg.slogdet(Cp)
    fibre = 0.5 * (np.trace(Cpi @ Cq) + np.trace(Cpi @ second) - k + ldp - ldq)
    return ChainRule(kl_param=kl_param, kl_quotient=kl_quot, expected_fibre_kl=float(fibre))




def _as_posterior(param, posterior):
    if not isinstance(posterior, DiagonalGaussian):
        raise PacBayesInputError("the posterior must be a DiagonalGaussian")
    if posterior.n != param.n:
        raise ShapeError(
            f"{param.name}: the posterior has {posterior.n} entries but theta has {param.n} "
            f"(blocks {dict(param.spec.blocks)})"
        )
    return posterior
