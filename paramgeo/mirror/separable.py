"""Separable power-law mirror maps: the potentials of diagonal networks of depth L >= 3.

Gradient flow of a diagonal network of depth L >= 3 moves each coordinate of the dual variable
mu(t) = -int_0^t grad ell(beta(s)) ds, and the predictor is an explicit function of it,

    beta_i = (A_i - c mu_i)^(-k) - (B_i + c mu_i)^(-k),   k = L / (L - 2),
    -B_i / c < mu_i < A_i / c,

(A_i = inf or B_i = inf drops a term). For beta = u^L - v^L from (u0, v0) > 0:
u^(2-L) = u0^(2-L) - L (L - 2) mu, so A = u0^(2-L), B = v0^(2-L), c = L (L - 2) (Woodworth et
al. 2020, Section 5); for a balanced product w_1 * ... * w_L: |w|^(2-L) = |w0|^(2-L) - (L - 2)
sign(beta0) mu, so c = L - 2 and one term. This is grad R*(mu) of the Legendre potential R of
the induced mirror flow (Li et al. 2022, Theorem 4.8), with

    R*(mu) = sum_i [(A_i - c mu_i)^(1-k) - A_i^(1-k) + (B_i + c mu_i)^(1-k) - B_i^(1-k)]
             / (c (k - 1)),
    Hess R*(mu) = diag(c k [(A - c mu)^(-k-1) + (B + c mu)^(-k-1)]),

R(beta) = <mu, beta> - R*(mu) at mu = grad R(beta) (the inverse map, by bisection), Hess R =
(Hess R*)^{-1}.

Vanishing initialisation. With A_i = T a_i, B_i = T b_i and T -> infinity (T = alpha^(2-L) for
an initialisation of scale alpha), beta_i(T m) -> 0 for -b_i / c < m_i < a_i / c: in the time
t = T tau the flow follows the saddle-to-saddle limit with activation thresholds a_i / c and
b_i / c (:func:`paramgeo.flows.saddle_to_saddle`), and its limit minimises the weighted l1
norm sum_i (a_i / c) beta_i^+ + (b_i / c) beta_i^- subject to the data. Near that limit
c mu_i / A_i = 1 - O(T^-1): 1 - c mu_i / A_i cancels about log10(T) digits, so the
implicit-bias problem is solved in its dual with mpmath at log10(T) + 30 digits
(``Potential.conjugate_mp``, ``Potential.digits``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..errors import ParamgeoError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .potentials import Potential


class PowerMirrorMap:
    """The map mu -> beta_i = (A_i - c mu_i)^(-k) - (B_i + c mu_i)^(-k) and its potential.

    A, B: arrays of length p with entries in (0, inf] (inf drops the term); c > 0; depth L >= 3
    (k = L / (L - 2)). See the module docstring for the formulas.
    """

    def __init__(self, A, B, c, L):
        self.A = np.asarray(A, float)
        self.B = np.asarray(B, float)
        if self.A.shape != self.B.shape or np.any(self.A <= 0) or np.any(self.B <= 0):
            raise ParamgeoError("PowerMirrorMap needs positive A and B of one shape (inf drops "
                                "a term)")
        if int(L) < 3:
            raise ParamgeoError(f"PowerMirrorMap describes depth L >= 3, got L = {L}")
        self.c, self.L = float(c), int(L)
        self.k = self.L / (self.L - 2.0)
        self.lo, self.hi = -self.B / self.c, self.A / self.c  # the open domain of mu

    # ------------------------------------------------------------ float64
    def _terms(self, mu):
        mu = np.asarray(mu, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            qp = np.where(np.isinf(self.A), np.inf, self.A - self.c * mu)
            qm = np.where(np.isinf(self.B), np.inf, self.B + self.c * mu)
        if np.any(qp <= 0) or np.any(qm <= 0):
            return None
        return qp, qm

    def conjugate_grad(self, mu: ArrayLike) -> NDArray[np.float64]:
        """grad R*(mu) = beta(mu); NaN outside the domain."""
        t = self._terms(mu)
        if t is None:
            return np.full(self.A.shape, np.nan)
        qp, qm = t
        return qp ** -self.k - qm ** -self.k

    def conjugate_value(self, mu: ArrayLike) -> float:
        """R*(mu) (inf outside the domain)."""
        t = self._terms(mu)
        if t is None:
            return float("inf")
        e = 1.0 - self.k
        with np.errstate(invalid="ignore"):
            val = (np.where(np.isinf(self.A), 0.0, t[0] ** e - self.A ** e)
                   + np.where(np.isinf(self.B), 0.0, t[1] ** e - self.B ** e))
        return float(np.sum(val) / (self.c * (self.k - 1.0)))

    def conjugate_hessian_diag(self, mu: ArrayLike) -> NDArray[np.float64]:
        """The diagonal of Hess R*(mu) = c k [(A - c mu)^(-k-1) + (B + c mu)^(-k-1)]."""
        qp, qm = self._terms(mu)
        return self.c * self.k * (qp ** (-self.k - 1) + qm ** (-self.k - 1))

    def inverse(self, beta: ArrayLike) -> NDArray[np.float64]:
        """grad R(beta): the mu with beta(mu) = beta, coordinate by coordinate (beta is
        increasing in mu). One-term coordinates in closed form, the others by bisection on the
        domain (-B/c, A/c) polished by Newton steps. NaN where beta is not attained."""
        beta = np.asarray(beta, float)
        mu = np.full(beta.shape, np.nan)
        k, c = self.k, self.c
        only_p, only_m = np.isinf(self.B), np.isinf(self.A)
        with np.errstate(divide="ignore", invalid="ignore"):
            ok = only_p & ~only_m & (beta > 0)
            mu[ok] = (self.A[ok] - beta[ok] ** (-1.0 / k)) / c
            ok = only_m & ~only_p & (beta < 0)
            mu[ok] = ((-beta[ok]) ** (-1.0 / k) - self.B[ok]) / c
        both = ~only_p & ~only_m
        if np.any(both):
            lo, hi = self.lo[both].copy(), self.hi[both].copy()
            A, B, b = self.A[both], self.B[both], beta[both]
            for _ in range(2100):  # bisection to the resolution of float64 on (lo, hi)
                mid = 0.5 * (lo + hi)
                if np.all((mid == lo) | (mid == hi)):
                    break
                val = (A - c * mid) ** -k - (B + c * mid) ** -k
                below = val < b
                lo = np.where(below, mid, lo)
                hi = np.where(below, hi, mid)
            mu[both] = 0.5 * (lo + hi)
        return mu

    # ------------------------------------------------------------ mpmath
    def conjugate_mp(self, mu: Any) -> Optional[tuple[float, Any, Any]]:
        """(R*(mu), beta(mu), diag Hess R*(mu)) for mu given as mpmath numbers: the gaps
        A - c mu and B + c mu to the boundary are formed at mpmath's working precision (they
        cancel log10(A) digits), then everything else in float64 from them. None outside the
        domain."""
        import mpmath

        c = mpmath.mpf(self.c)
        qp = np.array([mpmath.mpf(a) - c * m if np.isfinite(a) else mpmath.inf
                       for m, a in zip(mu, self.A)])
        qm = np.array([mpmath.mpf(b) + c * m if np.isfinite(b) else mpmath.inf
                       for m, b in zip(mu, self.B)])
        qp, qm = qp.astype(float), qm.astype(float)
        if np.any(qp <= 0) or np.any(qm <= 0):
            return None
        k, e = self.k, 1.0 - self.k
        with np.errstate(invalid="ignore"):
            val = (np.where(np.isinf(self.A), 0.0, qp ** e - self.A ** e)
                   + np.where(np.isinf(self.B), 0.0, qm ** e - self.B ** e))
        return (float(np.sum(val) / (self.c * (k - 1.0))), qp ** -k - qm ** -k,
                self.c * k * (qp ** (-k - 1) + qm ** (-k - 1)))

    def digits(self) -> int:
        """Working precision of the dual variable: 30 digits plus the log10(A) that
        1 - c mu / A cancels near the thresholds (A the largest finite amplitude)."""
        amps = np.r_[self.A, self.B]
        amps = amps[np.isfinite(amps)]
        top = float(amps.max()) if amps.size else 1.0
        return 30 + max(0, int(math.ceil(math.log10(top))))

    def limit(self) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        """(upper, lower, T): the vanishing-initialisation thresholds a_i / c, b_i / c
        (inf where a term is absent) for A = T a, B = T b, T the smallest finite amplitude."""
        amps = np.r_[self.A, self.B]
        T = float(amps[np.isfinite(amps)].min())
        return self.A / (self.c * T), self.B / (self.c * T), T

    def potential(self, theta0: ArrayLike, beta0: ArrayLike, formula: str, reference: str,
                  value: Optional[Callable[[Any], float]] = None,
                  grad: Optional[Callable[[Any], Any]] = None,
                  hessian: Optional[Callable[[Any], Any]] = None) -> Potential:
        """The :class:`paramgeo.mirror.Potential` of this map (closed-form ``value``, ``grad``,
        ``hessian`` of R where the caller has them, else through the inverse map)."""
        from .potentials import Potential

        return Potential(formula=formula, source="closed form", reference=reference,
                         theta0=np.asarray(theta0, float).copy(), beta0=np.asarray(beta0, float),
                         value=value or self.value, grad=grad or self.inverse,
                         hessian=hessian or self.hessian, conjugate_grad=self.conjugate_grad,
                         conjugate_mp=self.conjugate_mp, digits=self.digits(), limit=self.limit())

    # ------------------------------------------------------------ the potential
    def value(self, beta: ArrayLike) -> float:
        """R(beta) = <mu, beta> - R*(mu), mu = grad R(beta) (inf outside the range)."""
        mu = self.inverse(beta)
        if not np.all(np.isfinite(mu)):
            return float("inf")
        return float(mu @ np.asarray(beta, float) - self.conjugate_value(mu))

    def hessian(self, beta: ArrayLike) -> NDArray[np.float64]:
        """Hess R(beta) = diag(1 / Hess R*(grad R(beta)))."""
        return np.diag(1.0 / self.conjugate_hessian_diag(self.inverse(beta)))
