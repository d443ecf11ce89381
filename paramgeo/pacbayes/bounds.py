"""PAC-Bayes certificates for a loss in [0, 1], n i.i.d. samples, confidence 1 - delta (KL in nats).

* McAllester (1999) in Maurer's (2004) form:  L <= L_hat + sqrt((KL + ln(2 sqrt(n)/delta)) / (2n));
* Maurer-Seeger (Seeger 2002; Maurer 2004):  kl(L_hat || L) <= (KL + ln(2 sqrt(n)/delta)) / n,
  inverted by bisection: L <= sup{p : kl(L_hat || p) <= rhs};
* Catoni (2007, Thm 1.2.6):  L <= (1 - exp(-C L_hat - (KL + ln(1/delta))/n)) / (1 - exp(-C)),
  C over a grid of ``catoni_grid`` values with a union bound (delta / len(grid)).

A union bound over J prior scales chosen before seeing the data replaces delta by delta / J
(each prior scale's certificate then holds simultaneously; report the best).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from scipy import special

from ..results import Result
from .gaussians import PacBayesInputError, _positive

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def _check_cert_inputs(empirical_risk, kl, n, delta):
    try:
        emp, kl, delta = float(empirical_risk), float(kl), float(delta)
    except (TypeError, ValueError):
        raise PacBayesInputError("empirical risk, KL and delta must be numbers") from None
    if isinstance(n, float) and not float(n).is_integer():
        raise PacBayesInputError(f"n must be a positive integer (sample size), got {n!r}")
    try:
        n = int(n)
    except (TypeError, ValueError):
        raise PacBayesInputError(f"n must be a positive integer, got {n!r}") from None
    if n < 1:
        raise PacBayesInputError(f"n must be a positive integer (sample size), got {n}")
    if not (0.0 < delta < 1.0):
        raise PacBayesInputError(f"delta must lie in (0, 1), got {delta!r}; e.g. --delta 0.05")
    if not (0.0 <= emp <= 1.0):
        raise PacBayesInputError(
            f"the empirical risk must lie in [0, 1] (a bounded loss), got {emp!r}"
        )
    if not (math.isfinite(kl) and kl >= 0.0):
        raise PacBayesInputError(f"KL must be finite and >= 0, got {kl!r}")
    return emp, kl, n, delta


def kl_bernoulli(q: float, p: float) -> float:
    """kl(q || p) = q ln(q/p) + (1-q) ln((1-q)/(1-p)) with 0 ln 0 = 0 (scipy.special.xlogy),
    the KL divergence of Bernoulli(q) from Bernoulli(p); q and p are probabilities in [0, 1]
    (anything else, NaN included, is a PacBayesInputError)."""
    for label, value in (("q", q), ("p", p)):
        if isinstance(value, bool) or not (isinstance(value, numbers.Real)
                                           and 0.0 <= value <= 1.0):
            raise PacBayesInputError(f"kl_bernoulli: {label} must be a probability in [0, 1], "
                                     f"got {value!r}")
    q, p = float(q), float(p)
    if p <= 0.0:
        return 0.0 if q == 0.0 else math.inf
    if p >= 1.0:
        return 0.0 if q == 1.0 else math.inf
    return float(special.xlogy(q, q) - special.xlogy(q, p)
                 + special.xlogy(1 - q, 1 - q) - special.xlogy(1 - q, 1 - p))


def kl_inverse_upper(q: float, c: float, tol: float = 1e-12) -> float:
    """sup{p in [q, 1] : kl(q || p) <= c} by bisection (kl(q || .) increases on [q, 1])."""
    if not (isinstance(q, numbers.Real) and 0.0 <= q <= 1.0):
        raise PacBayesInputError(f"q must be a risk in [0, 1], got {q!r}")
    if not (isinstance(c, numbers.Real) and c >= 0):  # also refuses NaN
        raise PacBayesInputError(f"the kl budget c must be a number >= 0, got {c!r}")
    lo, hi = float(q), 1.0
    if kl_bernoulli(q, hi) <= c:
        return 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if kl_bernoulli(q, mid) <= c:
            lo = mid
        else:
            hi = mid
    return hi


def mcallester_bound(empirical_risk: float, kl: float, n: int, delta: float) -> float:
    """L <= L_hat + sqrt((KL + ln(2 sqrt(n)/delta)) / (2n))  (McAllester 1999; Maurer 2004,
    whose ln(2 sqrt(n)/delta) form is proved for n >= 8)."""
    emp, kl, n, delta = _check_cert_inputs(empirical_risk, kl, n, delta)
    return emp + math.sqrt((kl + math.log(2 * math.sqrt(n) / delta)) / (2 * n))


def maurer_seeger_bound(empirical_risk: float, kl: float, n: int, delta: float) -> float:
    """L <= kl^{-1}(L_hat, (KL + ln(2 sqrt(n)/delta)) / n)  (Seeger 2002; Maurer 2004)."""
    emp, kl, n, delta = _check_cert_inputs(empirical_risk, kl, n, delta)
    return kl_inverse_upper(emp, (kl + math.log(2 * math.sqrt(n) / delta)) / n)


def catoni_bound(empirical_risk: float, kl: float, n: int, delta: float, C: float) -> float:
    """L <= (1 - exp(-C L_hat - (KL + ln(1/delta))/n)) / (1 - exp(-C))  for a fixed C > 0
    (Catoni 2007, Theorem 1.2.6)."""
    emp, kl, n, delta = _check_cert_inputs(empirical_risk, kl, n, delta)
    C = _positive(C, "Catoni's C")
    return -math.expm1(-C * emp - (kl + math.log(1 / delta)) / n) / -math.expm1(-C)


DEFAULT_CATONI_GRID = tuple(float(c) for c in np.geomspace(0.1, 20.0, 12))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Certificates(Result):
    """The three certificates on the true risk for one (empirical risk, KL, n, delta).

    Attributes:
        empirical_risk: L_hat, the posterior's empirical risk.
        kl: KL(Q || P).
        n: the number of samples.
        delta: the confidence level asked for.
        union: the number of priors in the union bound.
        delta_used: delta / union (Catoni's grid further divides by its length).
        mcallester: L_hat + sqrt((KL + ln(2 sqrt(n) / delta)) / (2n)) (McAllester 1999).
        maurer_seeger: kl^-1(L_hat, (KL + ln(2 sqrt(n) / delta)) / n) (Seeger 2002; Maurer
            2004).
        catoni: the smallest Catoni bound over the grid of C (Catoni 2007).
        catoni_C: the C attaining it.
    """

    empirical_risk: float
    kl: float
    n: int
    delta: float
    union: int
    delta_used: float
    mcallester: float
    maurer_seeger: float
    catoni: float
    catoni_C: float


def certificates(empirical_risk: float, kl: float, n: int, delta: float, union: int = 1,
                 catoni_grid: Sequence[float] = DEFAULT_CATONI_GRID) -> Certificates:
    """McAllester, Maurer-Seeger and Catoni bounds on the true risk L of the posterior.

    With probability >= 1 - delta / union over the sample (a union bound over ``union`` priors
    fixed before the data): L <= L_hat + sqrt((KL + ln(2 sqrt(n) / delta')) / (2n))
    (McAllester 1999; Maurer 2004), L <= kl^-1(L_hat, (KL + ln(2 sqrt(n) / delta')) / n)
    (Seeger 2002; Maurer 2004), and Catoni's bound (2007, Theorem 1.2.6) minimised over
    ``catoni_grid`` with delta' / len(grid).

    Args:
        empirical_risk: L_hat, in [0, 1].
        kl: KL(Q || P) >= 0, in nats.
        n: the number of samples (>= 1).
        delta: the confidence level, in (0, 1).
        union: the number of priors in the union bound.
        catoni_grid: the values of Catoni's C tried.

    Returns:
        The :class:`Certificates`.

    Raises:
        PacBayesInputError: a risk outside [0, 1], a negative KL, n < 1, delta outside (0, 1)
            or union < 1.

    Examples:
        >>> from paramgeo.pacbayes import certificates
        >>> c = certificates(empirical_risk=0.1, kl=5.0, n=1000, delta=0.05)
        >>> round(c.mcallester, 4), round(c.maurer_seeger, 4), round(c.catoni, 4)
        (0.1779, 0.1531, 0.149)
    """
    emp, kl, n, delta = _check_cert_inputs(empirical_risk, kl, n, delta)
    if int(union) < 1:
        raise PacBayesInputError(f"union must be a positive number of priors, got {union}")
    d = delta / int(union)
    grid = tuple(catoni_grid)
    if not grid or not all(isinstance(C, numbers.Real) and math.isfinite(C) and C > 0
                           for C in grid):
        raise PacBayesInputError(f"catoni_grid must be a non-empty list of finite numbers C > 0, "
                                 f"got {list(grid)!r}")
    cat = [(catoni_bound(emp, kl, n, d / len(grid), C), C) for C in grid]
    best, bestC = min(cat)
    return Certificates(empirical_risk=emp, kl=kl, n=n, delta=delta, union=int(union), delta_used=d,
                        mcallester=mcallester_bound(emp, kl, n, d),
                        maurer_seeger=maurer_seeger_bound(emp, kl, n, d), catoni=best,
                        catoni_C=float(bestC))


