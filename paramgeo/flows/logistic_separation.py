"""Early-stopped GD against interpolation in overparameterized, well-specified logistic
regression with an anisotropic Gaussian design (the regime of Wu, Bartlett, Telgarsky, Yu 2025).

Model (:class:`LogisticDesign`): x ~ N(0, Sigma), Sigma = diag(lambda_1..lambda_D) (+) a flat
tail, P(y = 1 | x) = sigmoid(x . w*), w* on the head coordinates. The head is explicit
(lambda_i = i^-power, i <= D); the coordinates beyond D enter as an isotropic tail of total
trace T and infinite dimension (T = zeta(power, D + 1) by default, the mass of the missing
i^-power coordinates), whose Gram is exactly T I and whose part of a row-span w has Sigma-norm
zero in the limit. So d is infinite and every sample of any size N is linearly separable.

Exact 0-1 risk (:func:`zero_one_excess`). With u = x . w, v = x . w* jointly Gaussian, a =
w^T Sigma w, c = w^T Sigma w*, s = w*^T Sigma w*, rho = c / sqrt(a s), kappa = rho /
sqrt(1 - rho^2), the excess over the Bayes rule sign(x . w*) is the 1-D integral

    E(w) = 2 int_0^inf phi(z) Phi(-kappa z) tanh(sqrt(s) z / 2) dz

(the error is 2 E[1{u > 0} sigmoid(-v)]; subtract the Bayes error and fold z -> -z), computed by
Gauss-Legendre quadrature in t = kappa z; for rho -> 1 it tends to sqrt(s) theta^2 / (4
sqrt(2 pi)), theta the angle in the Sigma geometry.

Kernel form (:func:`gram_sample`). GD from 0 and the max-margin direction lie in the row span,
w = X^T beta, so the sample enters through K = X X^T (+ T I), K2 = X Sigma X^T and b = X Sigma w*
(accumulated over column chunks, never the N x D matrix): margins K beta, a = beta^T K2 beta,
c = beta^T b. Logistic GD (:func:`kernel_gd`) is beta <- beta + eta y sigmoid(-y K beta) / N at
eta = 4 N / lambda_max(K) (1 / smoothness); the oracle stop is the step of least excess. The
max-margin interpolator (:func:`kernel_max_margin`), the limit direction of GD, solves the dual
min_(alpha >= 0) alpha^T G alpha / 2 - 1 . alpha, G = diag(y) K diag(y), beta = y alpha.

Every estimator interpolates once the tail adds the missing margins (:func:`tail_interpolator`),
at no cost in risk.

Sample counts (:func:`separation`): per N the mean excess over seeds of both; N(eps) is the
smallest N reaching eps (:func:`paramgeo.flows.oracle_rates.sample_count`); the interpolator's
pairs (eps, N) are fitted to a power N ~ eps^-k and to N ~ exp(c eps^-k) (:func:`fit_laws`).

References: Wu, Bartlett, Telgarsky, Yu (2025), "Benefits of early stopping in gradient descent
for overparameterized logistic regression" (ICML); Soudry, Hoffer, Nacson, Gunasekar, Srebro
(2018), the max-margin limit of GD; Bartlett, Long, Lugosi, Tsigler (2020), effective ranks.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ..errors import ShapeError
from ..results import Result
from .online import _line_fit
from .oracle_rates import sample_count

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(160)
_T_MAX = 12.0  # Phi(-12) ~ 2e-33


@dataclasses.dataclass(frozen=True, kw_only=True)
class LogisticDesign(Result):
    """x ~ N(0, diag(``spectrum``) (+) (T / inf) I_inf) with T = ``tail``, labels
    P(y = 1 | x) = sigmoid(x . w*), w* = ``w_star`` on the head (module docstring)."""

    spectrum: np.ndarray
    w_star: np.ndarray
    tail: float

    @classmethod
    def from_decay(cls, head: int, power: float = 2.0, support: int = 100, scale: float = 1.0,
                   tail: Optional[float] = None) -> LogisticDesign:
        """lambda_i = i^-power for i <= ``head``, w*_i = ``scale`` for i <= ``support`` and 0
        beyond; ``tail`` defaults to zeta(power, head + 1) = sum_(i > head) i^-power."""
        from scipy.special import zeta

        if support > head:
            raise ShapeError(f"logistic design: support {support} exceeds the head {head}")
        i = np.arange(1, head + 1, dtype=float)
        w = np.where(i <= support, float(scale), 0.0)
        t = float(zeta(power, head + 1)) if tail is None else float(tail)
        return cls(spectrum=i ** -float(power), w_star=w, tail=t)

    @property
    def signal(self) -> float:
        """s = w*^T Sigma w*, the variance of the Bayes logit x . w*."""
        return float(self.w_star @ (self.spectrum * self.w_star))

    def bayes_error(self) -> float:
        """E[sigmoid(-|v|)], v ~ N(0, s): the 0-1 risk of sign(x . w*)."""
        from scipy.special import expit

        z, wt = np.polynomial.hermite_e.hermegauss(120)
        return float(wt @ expit(-np.sqrt(self.signal) * np.abs(z)) / wt.sum())


def zero_one_excess(signal: float, a: ArrayLike, c: ArrayLike) -> NDArray[np.float64]:
    """Exact excess 0-1 risk of sign(x . w) over the Bayes rule, for a Gaussian design and
    logistic labels, from a = w^T Sigma w, c = w^T Sigma w* and s = ``signal`` = w*^T Sigma w*:
    E = 2 int_0^inf phi(z) Phi(-kappa z) tanh(sqrt(s) z / 2) dz, kappa = rho / sqrt(1 - rho^2),
    rho = c / sqrt(a s) (module docstring; valid for every rho). Computed by 160-node
    Gauss-Legendre on [0, 12], in t = kappa z when kappa > 1. Reference: Wu, Bartlett,
    Telgarsky, Yu (2025)."""
    from scipy.special import ndtr

    a_, c_ = np.broadcast_arrays(np.asarray(a, float), np.asarray(c, float))
    rho = np.clip(c_ / np.sqrt(np.maximum(a_, 1e-300) * signal), -1.0, 1.0)
    root = math.sqrt(signal)
    t = (_NODES + 1) * _T_MAX / 2
    wt = _WEIGHTS * _T_MAX / 2
    out = np.empty(rho.shape)
    flat, res = rho.ravel(), out.ravel()
    for k, r in enumerate(flat):
        if r >= 1.0:
            res[k] = 0.0
            continue
        kap = r / math.sqrt(1 - r * r)
        if kap > 1.0:  # z = t / kappa: the Phi(-t) factor sets the scale
            f = np.exp(-(t / kap) ** 2 / 2) * ndtr(-t) * np.tanh(root * t / (2 * kap))
            res[k] = 2 / kap * float(wt @ f) / math.sqrt(2 * math.pi)
        else:  # phi(z) sets the scale
            f = np.exp(-t ** 2 / 2) * ndtr(-kap * t) * np.tanh(root * t / 2)
            res[k] = 2 * float(wt @ f) / math.sqrt(2 * math.pi)
    return out


def _draw(design: LogisticDesign, N: int, rng: np.random.Generator,
           chunk: int = 2048) -> Any:
    """Yields (columns slice, X chunk) of the head design, then finally the labels: the one generator behind :func:`gram_sample` and :func:`explicit_sample` (same seed, same data)."""
    lam = design.spectrum
    D = lam.size
    logit = np.zeros(N)
    for lo in range(0, D, chunk):
        hi = min(D, lo + chunk)
        Xc = rng.standard_normal((N, hi - lo)) * np.sqrt(lam[lo:hi])
        logit += Xc @ design.w_star[lo:hi]
        yield slice(lo, hi), Xc
    y = np.where(rng.random(N) < 1 / (1 + np.exp(-logit)), 1.0, -1.0)
    yield None, y


def explicit_sample(design: LogisticDesign, N: int,
                    rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The head design X (N x D) and the labels, as :func:`gram_sample` draws them (for small
    sizes and tests; the flat tail is not materialised)."""
    cols, y = [], np.zeros(0)
    for sl, part in _draw(design, N, rng):
        if sl is None:
            y = part
        else:
            cols.append(part)
    return np.concatenate(cols, axis=1), y


@dataclasses.dataclass(frozen=True, kw_only=True)
class GramSample(Result):
    """One sample in kernel form: ``K`` = X X^T + T I, ``K2`` = X Sigma X^T, ``b`` = X Sigma w*,
    labels ``y`` (module docstring)."""

    K: np.ndarray
    K2: np.ndarray
    b: np.ndarray
    y: np.ndarray


def gram_sample(design: LogisticDesign, N: int, rng: np.random.Generator,
                chunk: int = 2048) -> GramSample:
    """K = X X^T + T I, K2 = X Sigma X^T, b = X Sigma w* accumulated over column chunks of the
    head (memory N x chunk); the infinite flat tail adds T I to K and nothing to K2 or b."""
    N = int(N)
    K, K2, b = np.zeros((N, N)), np.zeros((N, N)), np.zeros(N)
    y = np.zeros(N)
    for sl, part in _draw(design, N, rng, chunk):
        if sl is None:
            y = part
            continue
        lam = design.spectrum[sl]
        K += part @ part.T
        K2 += (part * lam) @ part.T
        b += part @ (lam * design.w_star[sl])
    K[np.diag_indices(N)] += design.tail
    return GramSample(K=K, K2=K2, b=b, y=y)


def _excess(design, g, beta):
    beta = np.atleast_2d(beta)
    a = np.einsum("ij,jk,ik->i", beta, g.K2, beta)
    return zero_one_excess(design.signal, a, beta @ g.b)


def kernel_max_margin(K: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
    """The hard-margin SVM without bias in kernel form: beta = y alpha, alpha = argmin_(alpha
    >= 0) alpha^T G alpha / 2 - 1 . alpha, G = diag(y) K diag(y) (w = X^T beta is the
    max-margin direction, min |w| s.t. y_i x_i . w >= 1). If G^-1 1 >= 0 (every point a support
    vector) it is the answer; otherwise, with G = R^T R, the dual is the non-negative least
    squares min |R alpha - R^-T 1|^2. Reference: Boyd and Vandenberghe (2004), Sec. 5.2."""
    from scipy.linalg import cho_factor, cho_solve, solve_triangular
    from scipy.optimize import nnls

    K, y = np.asarray(K, float), np.asarray(y, float)
    G = y[:, None] * K * y[None, :]
    fac = cho_factor(G)
    alpha = cho_solve(fac, np.ones(y.size))
    if np.all(alpha >= 0):
        return y * alpha
    R = np.triu(fac[0]) if not fac[1] else np.triu(fac[0].T)
    p = solve_triangular(R, np.ones(y.size), trans="T")
    alpha = nnls(R, p, maxiter=50 * y.size)[0]
    return y * alpha


def kernel_gd(K: ArrayLike, y: ArrayLike, steps: int, records: int = 120,
              eta: Optional[float] = None) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Logistic GD on (1/N) sum log(1 + exp(-y_i x_i . w)) from w = 0 in kernel form, beta <-
    beta + eta y sigmoid(-y K beta) / N (w = X^T beta), eta = 4 N / lambda_max(K) by default.
    Returns the recorded steps (log-spaced, 0 and ``steps`` included) and the betas there."""
    from scipy.special import expit

    K, y = np.asarray(K, float), np.asarray(y, float)
    N = y.size
    if eta is None:
        eta = 4.0 * N / float(np.linalg.eigvalsh(K)[-1])
    marks = np.unique(np.concatenate([[0], np.geomspace(1, steps, records).astype(int)]))
    beta, m = np.zeros(N), np.zeros(N)
    out, k = [], 0
    for t in range(int(steps) + 1):
        if k < marks.size and t == marks[k]:
            out.append(beta.copy())
            k += 1
        if t == steps:
            break
        delta = eta * y * expit(-y * m) / N
        beta += delta
        m += K @ delta
    return marks, np.array(out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TailInterpolator(Result):
    """An estimator completed into an interpolator by the flat tail (:func:`tail_interpolator`):
    w = X^T ``beta`` + X_tail^T ``gamma``, its least margin ``margin`` = min_i y_i x_i . w, its
    norm ``norm`` = |w| and its exact excess 0-1 risk ``excess`` (that of X^T beta alone)."""

    beta: np.ndarray
    gamma: np.ndarray
    margin: float
    norm: float
    excess: float


def tail_interpolator(design: LogisticDesign, sample: GramSample, beta: ArrayLike,
                      margin: float = 1.0) -> TailInterpolator:
    """Completes the row-span estimator w0 = X^T beta into an interpolator with the flat tail
    alone: w = w0 + X_tail^T gamma, gamma_i = y_i max(0, margin - y_i (K beta)_i) / T. The tail's
    Gram is T I, so the margins are y_i (K beta + T gamma)_i >= ``margin`` > 0 for every i (w
    separates the sample), and |w|^2 = beta^T K beta + 2 T beta . gamma + T |gamma|^2; the tail
    has Sigma-weight zero (module docstring), so w^T Sigma w and w^T Sigma w* are those of w0,
    and the excess 0-1 risk of w is exactly that of w0. In this design every estimator is thus
    one margin completion away from an interpolator with the same risk: interpolation as such
    costs nothing, and a gap between early stopping and interpolation is a gap of particular
    interpolators (such as the max-margin direction). Reference: Bartlett, Long, Lugosi,
    Tsigler (2020) (benign overfitting through a flat high-dimensional tail); Wu, Bartlett,
    Telgarsky, Yu (2025)."""
    if not (math.isfinite(margin) and margin > 0):
        raise ShapeError(f"tail interpolator: margin must be a finite number > 0, got {margin}")
    if not design.tail > 0:
        raise ShapeError("tail interpolator: the design has no flat tail (tail = 0); give "
                         "LogisticDesign a tail > 0")
    b = np.asarray(beta, float)
    if b.shape != sample.y.shape:
        raise ShapeError(f"tail interpolator: beta has shape {b.shape}, the sample has "
                         f"{sample.y.size} points")
    T, y = design.tail, sample.y
    Kb = sample.K @ b
    gamma = y * np.maximum(0.0, margin - y * Kb) / T
    margins = y * (Kb + T * gamma)
    norm2 = float(b @ Kb + 2 * T * (b @ gamma) + T * (gamma @ gamma))
    return TailInterpolator(beta=b, gamma=gamma, margin=float(margins.min()),
                            norm=math.sqrt(max(norm2, 0.0)),
                            excess=float(_excess(design, sample, b)[0]))


@dataclasses.dataclass(frozen=True, kw_only=True)
class SeparationRun(Result):
    """Per N (``sizes``): mean excess 0-1 risk over ``seeds`` of oracle-stopped GD
    (``oracle``, standard error ``oracle_se``), of the max-margin interpolator (``interp``,
    ``interp_se``) and of GD's last recorded step (``last``); ``capped`` counts runs whose
    oracle step is their last. Both interpolators at least margin 1: the mean norm of the
    max-margin one (``interp_norm``, the least norm that separates) and of the oracle stop
    completed by the tail (``completed_norm``, :func:`tail_interpolator`; its excess is
    ``oracle``)."""

    sizes: np.ndarray
    seeds: int
    oracle: np.ndarray
    oracle_se: np.ndarray
    interp: np.ndarray
    interp_se: np.ndarray
    last: np.ndarray
    capped: int
    interp_norm: np.ndarray
    completed_norm: np.ndarray

    def __str__(self):
        lines = [f"{'N':>6} {'oracle-stopped GD':>22} {'max-margin interpolator':>24} "
                 f"{'GD last step':>13}   ({self.seeds} seeds)"]
        for k, n in enumerate(self.sizes):
            lines.append(f"{int(n):6d} {self.oracle[k]:12.3e} +-{self.oracle_se[k]:7.1e} "
                         f"{self.interp[k]:14.3e} +-{self.interp_se[k]:7.1e} "
                         f"{self.last[k]:13.3e}")
        return "\n".join(lines)


def separation(design: LogisticDesign, sizes: Sequence[int],
               seeds: Sequence[int] = tuple(range(4)), steps: int = 4000) -> SeparationRun:
    """Excess 0-1 risk of oracle-stopped logistic GD (``steps`` steps, least excess over the
    records) and of the max-margin interpolator on shared samples (:func:`gram_sample`), per N
    and seed, exact by :func:`zero_one_excess`."""
    sizes = np.asarray(sorted(int(n) for n in sizes))
    if len(seeds) < 2:
        raise ShapeError("separation: give at least 2 seeds (the error bars)")
    orc, itp, last, norms = [], [], [], []
    capped = 0
    for n in sizes:
        o, i, l_, nm = [], [], [], []
        for seed in seeds:
            g = gram_sample(design, n, np.random.default_rng([int(seed), int(n)]))
            marks, betas = kernel_gd(g.K, g.y, steps)
            ex = _excess(design, g, betas)
            best = int(np.argmin(ex))
            o.append(float(ex[best]))
            l_.append(float(ex[-1]))
            capped += best == ex.size - 1
            mm = kernel_max_margin(g.K, g.y)
            i.append(float(_excess(design, g, mm)[0]))
            nm.append((math.sqrt(float(mm @ g.K @ mm)),
                       tail_interpolator(design, g, betas[best]).norm))
        orc.append(o)
        itp.append(i)
        last.append(l_)
        norms.append(np.mean(nm, axis=0))
    O, I_, nrm = np.array(orc), np.array(itp), np.array(norms)
    se = np.sqrt(len(seeds))
    return SeparationRun(sizes=sizes, seeds=len(seeds), oracle=O.mean(1),
                         oracle_se=O.std(1, ddof=1) / se, interp=I_.mean(1),
                         interp_se=I_.std(1, ddof=1) / se, last=np.array(last).mean(1),
                         capped=capped, interp_norm=nrm[:, 0], completed_norm=nrm[:, 1])


@dataclasses.dataclass(frozen=True, kw_only=True)
class SampleLaws(Result):
    """Two laws fitted to pairs (eps_j, N_j): a power N = A eps^-k (``power_k``, its standard
    error ``power_k_se``, log A ``power_logA``) and an exponential N = exp(c eps^-k)
    (``exp_c``, ``exp_k``, ``exp_k_se``), each with the root-mean-square residual of log N
    (``power_rms``, ``exp_rms``); ``points`` pairs were used."""

    power_k: float
    power_k_se: float
    power_logA: float
    power_rms: float
    exp_c: float
    exp_k: float
    exp_k_se: float
    exp_rms: float
    points: int

    def __str__(self):
        return (f"N ~ eps^-{self.power_k:.2f} (+- {self.power_k_se:.2f}), rms log N "
                f"{self.power_rms:.3f}; N ~ exp({self.exp_c:.3g} eps^-{self.exp_k:.2f} (+- "
                f"{self.exp_k_se:.2f})), rms log N {self.exp_rms:.3f} ({self.points} points)")


def fit_laws(eps: ArrayLike, counts: ArrayLike) -> SampleLaws:
    """Fits N(eps) to a power, log N = log A + k log(1/eps), and to an exponential,
    log log N = log c + k log(1/eps) (N = exp(c eps^-k)), by least squares on the finite pairs
    with N > 1; slope errors sqrt(sum r^2 / (n - 2) / sum (x - mean)^2). Both laws are compared
    by their rms residual in log N. An exponential law is the shape of the interpolator lower
    bound of Wu, Bartlett, Telgarsky, Yu (2025); a power that of early-stopped GD."""
    e, n = np.asarray(eps, float), np.asarray(counts, float)
    ok = np.isfinite(e) & np.isfinite(n) & (e > 0) & (n > 1)
    if ok.sum() < 3:
        raise ShapeError(f"fit laws: only {int(ok.sum())} finite pairs with N > 1; need 3")
    x, logn = np.log(1 / e[ok]), np.log(n[ok])
    pk, pse, pa = _line_fit(x, logn)
    ek, ese, ec = _line_fit(x, np.log(logn))
    prms = float(np.sqrt(np.mean((logn - (pa + pk * x)) ** 2)))
    erms = float(np.sqrt(np.mean((logn - np.exp(ec + ek * x)) ** 2)))
    return SampleLaws(power_k=pk, power_k_se=pse, power_logA=pa, power_rms=prms,
                      exp_c=float(np.exp(ec)), exp_k=ek, exp_k_se=ese, exp_rms=erms,
                      points=int(ok.sum()))


def sample_counts_logistic(sizes: ArrayLike, oracle: ArrayLike, interp: ArrayLike,
                           targets: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """N(eps) per target for oracle-stopped GD and the max-margin interpolator from their mean
    excess over ``sizes`` (the fields of a :class:`SeparationRun`), by
    :func:`paramgeo.flows.oracle_rates.sample_count`: the first N of the grid reaching eps,
    log-log interpolated with its predecessor; inf if none."""
    t = np.asarray(targets, float)
    return (np.array([sample_count(sizes, oracle, e) for e in t]),
            np.array([sample_count(sizes, interp, e) for e in t]))
