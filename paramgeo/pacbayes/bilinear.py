"""Separable bilinear parameterizations (every predictor coordinate is theta_a theta_b of its own
pair, e.g. Hadamard u * v): the quotient KL as a sum of one-dimensional KLs by quadrature.

The density of beta = x y for a bivariate Gaussian (x, y) is the one-dimensional integral
f(beta) = sum_{s = +-1} int_R f_{x,y}(s e^t, s beta e^{-t}) dt (t = log|x|; Craig 1936), done by
Gauss-Legendre in t; the neutral prior's push-forward is K_0(|beta|/s^2) / (pi s^2) and the
implicit-bias prior's the Laplace density exp(-|beta|/s^2) / (2 s^2).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np
from scipy import integrate, special

from ..errors import NotProvidedError
from .gaussians import PacBayesInputError, _as_posterior, _positive

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization
    from .gaussians import DiagonalGaussian


def bilinear_components(param: Parameterization,
                        seed: int = 0) -> Optional[list[tuple[int, int, int]]]:
    """[(i, a, b), ...] if every predictor coordinate i is theta_a * theta_b of its own pair of
    parameters (disjoint pairs), checked from J's sparsity and ``forward`` at two random points;
    else None."""
    rng = np.random.default_rng(seed)
    th = param.random_point(rng)
    J = param.jacobian(th)
    pairs: list[tuple[int, int, int]] = []
    used: set[int] = set()
    for i in range(param.m):
        cols = np.flatnonzero(np.abs(J[i]) > 0)
        if len(cols) != 2 or used & set(cols):
            return None
        used |= set(cols)
        pairs.append((i, int(cols[0]), int(cols[1])))
    for _ in range(2):
        th = param.random_point(rng)
        f = np.asarray(param.forward_flat(th), float)
        prod = np.array([th[a] * th[b] for _, a, b in pairs])
        if not np.allclose(f, prod, rtol=1e-10, atol=1e-12):
            return None
    return pairs


@functools.lru_cache(maxsize=8)
def _legendre(nodes):
    return special.roots_legendre(nodes)


def product_logpdf(beta: ArrayLike, mean: ArrayLike, cov: ArrayLike, nodes: int = 96,
                   width: float = 12.0) -> NDArray[np.float64]:
    """log density of beta = x y for (x, y) ~ N(mean, cov) (a bivariate Gaussian, correlation
    allowed), at the points ``beta`` (beta != 0; the density has a log singularity at 0 when
    both marginals charge 0):

        f(beta) = sum_{s = +-1} int_R f_{s m, C}(e^t, beta e^{-t}) dt     (x = s e^t),

    by Gauss-Legendre with ``nodes`` nodes in t on the interval where x lies within ``width``
    marginal standard deviations of its mean and beta/x within ``width`` of y's (outside it the
    Gaussian has mass < 1e-30 relative). Reference: Craig (1936), "On the frequency function of
    xy"; the centred independent case is K_0(|beta|/(sx sy)) / (pi sx sy).
    """
    b = np.atleast_1d(np.asarray(beta, float))
    mean = np.asarray(mean, float)
    C = np.asarray(cov, float)
    det = C[0, 0] * C[1, 1] - C[0, 1] ** 2
    if det <= 0:
        raise PacBayesInputError("the bivariate covariance must be positive definite")
    sx, sy = math.sqrt(C[0, 0]), math.sqrt(C[1, 1])
    x_nodes, w_nodes = _legendre(int(nodes))
    ab = np.abs(b)
    total = np.full(b.shape, -np.inf)
    for s in (1.0, -1.0):
        mx, my = s * mean[0], s * mean[1]
        xlo, xhi = max(mx - width * sx, 0.0), mx + width * sx
        ylo, yhi = my - width * sy, my + width * sy
        ymin = np.where(b > 0, max(ylo, 0.0), max(-yhi, 0.0))
        ymax = np.where(b > 0, yhi, -ylo)
        ok = (ymax > 0) & (xhi > 0) & (ab > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lo = np.maximum(ab / np.where(ymax > 0, ymax, 1.0), xlo)
            hi = np.minimum(np.where(ymin > 0, ab / np.where(ymin > 0, ymin, 1.0), np.inf), xhi)
        ok &= hi > lo
        lo, hi = np.where(ok, lo, 1.0), np.where(ok, hi, 2.0)
        tlo, thi = np.log(lo), np.log(hi)
        half = 0.5 * (thi - tlo)
        t = (tlo + thi)[:, None] * 0.5 + half[:, None] * x_nodes[None, :]
        x = np.exp(t)
        y = b[:, None] / x
        zx, zy = x - mx, y - my
        quad = (C[1, 1] * zx * zx - 2 * C[0, 1] * zx * zy + C[0, 0] * zy * zy) / det
        logf = -quad / 2 - math.log(2 * math.pi) - 0.5 * math.log(det)
        val = special.logsumexp(logf + np.log(w_nodes)[None, :], axis=1) + np.log(half)
        total = np.logaddexp(total, np.where(ok, val, -np.inf))
    total = np.where(ab == 0, np.inf, total)
    return total


def laplace_ib_logpdf(beta: ArrayLike, prior_std: tuple[float, float]) -> NDArray[np.float64]:
    """Implicit-bias density (2) of one bilinear coordinate beta = x y under a centred prior
    N(0, diag(sx^2, sy^2)): the minimum-norm points are +-(sqrt|beta|, sign(beta) sqrt|beta|),
    omega = 1 there (vol_G = |(x, -y)| = NJ = |(y, x)|), so p_bar_IB(beta) ~ exp(-lam |beta|),
    lam = (1/sx^2 + 1/sy^2)/2; the normaliser is computed by ``scipy.integrate.quad``
    (closed form lam/2, checked in the tests)."""
    lam = 0.5 * (1 / prior_std[0] ** 2 + 1 / prior_std[1] ** 2)
    return -lam * np.abs(np.asarray(beta, float)) - _laplace_log_norm(lam)


@functools.lru_cache(maxsize=256)
def _laplace_log_norm(lam):
    return math.log(2 * integrate.quad(lambda x: math.exp(-lam * x), 0, math.inf)[0])


def centred_product_logpdf(beta: ArrayLike, sx: float, sy: float) -> NDArray[np.float64]:
    """log density of x y for independent x ~ N(0, sx^2), y ~ N(0, sy^2):
    log K_0(|beta|/(sx sy)) - log(pi sx sy) (Craig 1936; ``scipy.special.k0e`` avoids
    underflow). The neutral prior's push-forward through a bilinear coordinate."""
    z = np.abs(np.asarray(beta, float)) / (sx * sy)
    with np.errstate(divide="ignore"):
        return np.log(special.k0e(z)) - z - math.log(math.pi * sx * sy)


def section_logpdf(beta: ArrayLike, prior_std: tuple[float, float]) -> NDArray[np.float64]:
    """The neutral prior restricted to the canonical section with the section's own measure
    (arc length, no orbit-volume factor), for one bilinear coordinate beta = x y under
    N(0, s^2 I): the section c(beta) = (sqrt|beta|, sign(beta) sqrt|beta|) has
    |c'(beta)| = 1 / sqrt(2 |beta|) and |c|^2 = 2 |beta|, so
    p(beta) = exp(-|beta| / s^2) / (2 sqrt(pi) s sqrt|beta|) (a Gamma(1/2) law in |beta|;
    the orbit-volume factor sqrt(2 |beta|) turns it into the Laplace density of
    :func:`laplace_ib_logpdf`)."""
    s = float(np.sqrt(prior_std[0] * prior_std[1]))
    ab = np.abs(np.asarray(beta, float))
    with np.errstate(divide="ignore"):
        return -ab / s ** 2 - 0.5 * np.log(ab) - math.log(2 * math.sqrt(math.pi) * s)


def predictor_gaussian_logpdf(beta: ArrayLike,
                              prior_std: tuple[float, float]) -> NDArray[np.float64]:
    """A Gaussian placed on the predictor, N(0, tau^2) with tau = sx sy, the standard deviation
    of x y under N(0, diag(sx^2, sy^2)) (so both neutral baselines have the same second
    moment)."""
    tau = float(prior_std[0] * prior_std[1])
    b = np.asarray(beta, float)
    return -0.5 * (b / tau) ** 2 - math.log(math.sqrt(2 * math.pi) * tau)


#: the prior constructions of one bilinear coordinate under the prior scale s, by name:
#: ``neutral`` the push-forward of N(0, s^2 I) (K_0), ``ib`` the canonical section with the
#: orbit-volume factor (Laplace), ``section`` the canonical section with its own arc-length
#: measure, ``predictor`` a Gaussian on the predictor with the push-forward's variance.
PRIOR_CONSTRUCTIONS = {
    "neutral": lambda b, s: centred_product_logpdf(b, s, s),
    "ib": lambda b, s: laplace_ib_logpdf(b, (s, s)),
    "section": lambda b, s: section_logpdf(b, (s, s)),
    "predictor": lambda b, s: predictor_gaussian_logpdf(b, (s, s)),
}


def kl_1d(logq: Callable[[NDArray[np.float64]], NDArray[np.float64]],
          logps: Sequence[Callable[[NDArray[np.float64]], NDArray[np.float64]]], lo: float,
          hi: float, rtol: float = 1e-7, panels: int = 8, order: int = 16,
          max_panels: int = 4096) -> tuple[NDArray[np.float64], float, float]:
    """KL(q || p_j) = int q (log q - log p_j) for 1-D densities given as vectorised log-density
    functions, on [lo, 0] and [0, hi], each with the substitution beta = +-L u^2 (u in [0, 1])
    that removes the log singularity the push-forward densities have at 0, by composite
    Gauss-Legendre (``scipy.special.roots_legendre``, ``order`` nodes per panel, fully
    vectorised), doubling the number of panels until two successive results agree to ``rtol``
    (relative to max(1, |KL|)). Returns (kls, q-mass on [lo, hi], error estimate)."""
    x, w = _legendre(int(order))

    def rule(m):
        edges = np.linspace(0.0, 1.0, m + 1)
        half = 0.5 * np.diff(edges)
        u = (0.5 * (edges[:-1] + edges[1:]))[:, None] + half[:, None] * x[None, :]
        wu = (half[:, None] * w[None, :]).ravel()
        u = u.ravel()
        total = np.zeros(1 + len(logps))
        for L, sign in ((hi, 1.0), (-lo, -1.0)):
            if L <= 0:
                continue
            b = sign * L * u * u
            lq = logq(b)
            q = np.where(np.isfinite(lq), np.exp(np.minimum(lq, 700)), 0.0) * 2 * L * u * wu
            total[0] += q.sum()
            for j, lp in enumerate(logps):
                diff = np.where(q > 0, lq - lp(b), 0.0)
                total[1 + j] += np.sum(q * diff)
        return total

    m, prev = int(panels), rule(int(panels))
    while True:
        cur = rule(2 * m)
        err = float(np.max(np.abs(cur - prev) / np.maximum(1.0, np.abs(cur))))
        m *= 2
        if err <= rtol or 2 * m > max_panels:
            return cur[1:], float(cur[0]), err
        prev = cur


def _box(mean, std, width=10.0):
    xs = [mean[0] - width * std[0], mean[0] + width * std[0]]
    ys = [mean[1] - width * std[1], mean[1] + width * std[1]]
    c = [x * y for x in xs for y in ys]
    return min(c), max(c)




def bilinear_component_kls(
        param: Parameterization, posterior: DiagonalGaussian, scales: Sequence[float],
        pairs: Optional[Sequence[tuple[int, int, int]]] = None, rtol: float = 1e-7
) -> tuple[NDArray[np.float64], NDArray[np.float64], float, float]:
    """Per bilinear coordinate beta_i = theta_a theta_b: KL(Q_bar_i || P_bar_i) for the neutral
    prior N(0, s^2 I) (K_0 push-forward) and for the implicit-bias prior (Laplace) at every
    scale s, by :func:`kl_1d` (to relative tolerance ``rtol``). Returns (neutral, implicit_bias, worst_mass, worst_err) with
    the two arrays of shape (number of coordinates, number of scales); their column sums are the
    quotient KLs (the coordinates are independent under both Q and P)."""
    kls, mass, err = bilinear_prior_kls(param, posterior, scales, ("neutral", "ib"), pairs,
                                        rtol)
    return kls["neutral"], kls["ib"], mass, err


def bilinear_prior_kls(param: Parameterization, posterior: DiagonalGaussian,
                       scales: Sequence[float], priors: Sequence[str] = tuple(PRIOR_CONSTRUCTIONS),
                       pairs: Optional[Sequence[tuple[int, int, int]]] = None,
                       rtol: float = 1e-7) -> tuple[dict[str, NDArray[np.float64]], float, float]:
    """Per bilinear coordinate and prior scale s: KL(Q_bar_i || P_bar_i) for each prior
    construction named in ``priors`` (keys of :data:`PRIOR_CONSTRUCTIONS`), by :func:`kl_1d`.
    Returns ({name: array (coordinates, scales)}, worst q-mass, worst quadrature error); the
    column sums are the quotient KLs (the coordinates are independent under Q and every P).
    References: the orbit-volume implicit-bias prior and the canonical section follow the
    PAC-Bayes-on-the-quotient construction (Laplace density from the neutral Gaussian); the
    densities are derived in the docstrings of :func:`laplace_ib_logpdf` and
    :func:`section_logpdf`."""
    posterior = _as_posterior(param, posterior)
    scales = [_positive(s, "prior scale", bounded=True) for s in np.atleast_1d(scales)]
    unknown = [p for p in priors if p not in PRIOR_CONSTRUCTIONS]
    if unknown:
        raise PacBayesInputError(f"unknown prior construction(s) {unknown}; choose from "
                                 f"{sorted(PRIOR_CONSTRUCTIONS)}")
    pairs = bilinear_components(param) if pairs is None else pairs
    if pairs is None:
        raise NotProvidedError(type(param).__name__, "a separable bilinear structure "
                               "(needed for the quadrature quotient KL; use montecarlo)")
    out = {name: np.zeros((len(pairs), len(scales))) for name in priors}
    worst_mass, worst_err = 1.0, 0.0
    for c, (_, a, b) in enumerate(pairs):
        mq = posterior.mean[[a, b]]
        sq = posterior.std[[a, b]]
        Cq = np.diag(sq ** 2)
        logps = [functools.partial(PRIOR_CONSTRUCTIONS[name], s=s)
                 for s in scales for name in priors]
        lo, hi = _box(mq, sq)
        kls, mass, err = kl_1d(lambda x: product_logpdf(x, mq, Cq), logps, lo, hi, rtol=rtol)
        worst_mass = min(worst_mass, mass)
        worst_err = max(worst_err, err)
        for j, name in enumerate(priors):
            out[name][c] = kls[j::len(priors)]
    return out, worst_mass, worst_err
