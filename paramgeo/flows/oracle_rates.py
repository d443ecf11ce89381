"""The oracle-stopped rate under label flips, route by route, and the sample counts of the
oracle stop and the interpolator (Gaussian mixtures of :class:`paramgeo.flows.risk.GaussianMixture`).

Rate decomposition (:func:`rate_decomposition`). On one sample (X, y) per (N, seed) four
estimators share the data: ridge regression of t = 2 y on x at the penalty the deterministic
equivalent finds best (the equivalent's own Monte Carlo check), ridge at the per-sample oracle
penalty, gradient flow on the same squares stopped at the per-sample oracle time (filter
1 - exp(-tau s) in place of ridge's s / (s + lambda)), and logistic GD at its oracle step
(:func:`paramgeo.flows.risk.early_stopping`). With S = X^T X / N = V diag(s) V^T and
b = V^T X^T (2 y) / N, ridge is V (b / (s + lambda)) and the flow V ((1 - e^(-tau s)) b / s).
Each column's mean over seeds is fitted to N^-rate; the gaps between neighbouring columns split
the distance between the predicted rate (:func:`paramgeo.flows.label_flips.oracle_rate_theory`)
and the measured one into the equivalent's error, the per-sample oracle, the filter and the
loss.

Sample counts (:func:`sample_counts`). For targets eps, N(eps) is the smallest N of the grid
(log-log interpolated between grid points) at which the mean excess is <= eps: for the
oracle stop, and for the max-margin interpolator while the samples are separable (beyond the
separability threshold there is no interpolator). N_GD(eps) is fitted to eps^-k. Every
interpolator of the sample is bounded below by the best one (:func:`best_interpolator`), whose
excess depends on N / d alone (:func:`interpolator_floor`), so an interpolator reaching eps
needs a dimension d >= N / l(eps).

Efficiency and lower bounds: :func:`efficiency_ratio` is the large-N ratio of the unpenalised
logistic fit's excess to least squares'; :func:`minimax_lower_bound` gives Le Cam's and
Fano's bounds over the Bayes directions on the first K coordinates.

References: Buna, Liu, Rebeschini, early stopping of logistic GD under label-flip noise; Wu,
Bartlett, Telgarsky, Yu (2025), "Benefits of early stopping in gradient descent for
overparameterized logistic regression"; Hastie, Montanari, Rosset, Tibshirani (2022); Gordon
(1988) and Thrampoulidis, Oymak, Hassibi (2015), the Gaussian min-max comparison; Cover (1965);
Efron (1975), the efficiency of logistic regression against discriminant analysis; Tsybakov
(2009), "Introduction to nonparametric estimation".
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ..errors import ShapeError
from ..results import Result
from .label_flips import oracle_rate_theory
from .risk import early_stopping
from .structure import PowerLaw, power_law_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .risk import GaussianMixture

ROUTES = ("theory", "ridge_at_theory", "ridge_oracle", "flow_oracle", "logistic_oracle")


def square_loss_estimators(X: ArrayLike, y: ArrayLike, ridges: ArrayLike,
                           times: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ridge and gradient-flow estimators of the least squares of t = 2 y on x.

    With S = X^T X / N = V diag(s) V^T and c = V^T X^T (2 y) / N: ridge lambda is
    V (c / (s + lambda)) and gradient flow on (1 / 2N) |X w - 2 y|^2 from 0 at time tau is
    V ((1 - exp(-tau s)) c / s) (-> tau c on s = 0). Returns (ridge weights of shape
    (len(ridges), d), flow weights of shape (len(times), d))."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    N = X.shape[0]
    s, V = np.linalg.eigh(X.T @ X / N)
    s = np.maximum(s, 0.0)
    c = V.T @ (X.T @ (2.0 * y)) / N
    lam = np.asarray(ridges, float)[:, None]
    tau = np.asarray(times, float)[:, None]
    ridge = (c / (s + lam)) @ V.T
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(s > 0, -np.expm1(-tau * s) / np.where(s > 0, s, 1.0), tau)
    return ridge, (gain * c) @ V.T


@dataclasses.dataclass(frozen=True, kw_only=True)
class RateDecomposition(Result):
    """Mean excess 0-1 risk per N (``means[route]``, standard errors ``errors[route]`` over
    ``seeds``; routes in :data:`ROUTES`, ``theory`` without error), the power law fitted to each
    over ``sizes`` (``rates[route]``), the local slopes of the theory and ``capped``, the number
    of logistic runs whose oracle step is their last (the run was too short)."""

    sizes: np.ndarray
    seeds: int
    means: dict
    errors: dict
    rates: dict
    theory_local: np.ndarray
    capped: int

    def __str__(self):
        head = "".join(f" {r:>21}" for r in ROUTES)
        lines = [f"{'N':>6}{head}"]
        for k, n in enumerate(self.sizes):
            cells = []
            for r in ROUTES:
                e = self.errors.get(r)
                cells.append(f"{self.means[r][k]:12.3e}" + (f" +-{e[k]:7.1e}" if e is not None
                                                            else " " * 9))
            lines.append(f"{int(n):6d}" + "".join(f" {c:>21}" for c in cells))
        lines.append("rate" + "".join(f"   {self.rates[r].exponent:8.3f} +- "
                                      f"{self.rates[r].error:5.3f}  " for r in ROUTES))
        return "\n".join(lines)


def rate_decomposition(model: GaussianMixture, sizes: Sequence[int],
                       seeds: Sequence[int] = tuple(range(8)), steps: int = 2000,
                       ridges: Optional[ArrayLike] = None,
                       times: Optional[ArrayLike] = None) -> RateDecomposition:
    """Oracle-stopped excess 0-1 risk over N by five routes on shared samples (module
    docstring): the deterministic equivalent's minimum over ``ridges`` (default 1e-9..1e4, 200
    points), ridge on the samples at the equivalent's best penalty, ridge and gradient flow on
    squares at the per-sample oracle (``times`` default 1e-2..1e9, 200 points) and logistic GD
    at its oracle step (``steps`` log-spaced records). Fits excess ~ N^-rate to each mean."""
    sizes = np.asarray(sorted(int(n) for n in sizes))
    if len(seeds) < 2:
        raise ShapeError("rate decomposition: give at least 2 seeds (the error bars)")
    ridges = np.geomspace(1e-9, 1e4, 200) if ridges is None else np.asarray(ridges, float)
    times = np.geomspace(1e-2, 1e9, 200) if times is None else np.asarray(times, float)
    theory = oracle_rate_theory(model, [int(n) for n in sizes], ridges)
    rows: dict[str, list[Any]] = {r: [] for r in ROUTES[1:]}
    capped = 0
    for n, lam in zip(sizes, theory.best_ridge):
        per: dict[str, list[float]] = {r: [] for r in ROUTES[1:]}
        for seed in seeds:
            X, y = model.sample(n, np.random.default_rng(seed))
            ridge, flow = square_loss_estimators(X, y, np.append(ridges, lam), times)
            er = model.excess_risk(ridge)
            per["ridge_at_theory"].append(float(er[-1]))
            per["ridge_oracle"].append(float(np.min(er)))
            per["flow_oracle"].append(float(np.min(model.excess_risk(flow))))
            run = early_stopping(model, n, steps, seed=seed, interpolator=False)
            per["logistic_oracle"].append(run.oracle_excess)
            capped += run.oracle_step >= int(run.steps[-1])
        for r in ROUTES[1:]:
            rows[r].append(per[r])
    means = {"theory": theory.predicted}
    errors = {}
    for r in ROUTES[1:]:
        a = np.array(rows[r])
        means[r] = a.mean(1)
        errors[r] = a.std(1, ddof=1) / np.sqrt(a.shape[1])
    rates = {r: power_law_fit(sizes, means[r], sizes[0], sizes[-1]) for r in ROUTES}
    return RateDecomposition(sizes=sizes, seeds=len(seeds), means=means, errors=errors,
                             rates=rates, theory_local=theory.local_rates, capped=capped)


def best_interpolator(model: GaussianMixture, X: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
    """The interpolator closest in angle to the Bayes direction on the sample (an oracle: it
    knows the model), so its excess 0-1 risk bounds that of every interpolator of (X, y) below.

    Whiten, u = Sigma^-1/2 x, and rotate so that e_1 is a = Sigma^-1/2 mu / snr; with w = e_1 +
    v, v _|_ e_1, the excess is increasing in the angle, tan(angle) = |v|, and interpolation is
    Z v >= c with rows z_i = y_i u_i (perpendicular part) and c_i = -y_i u_i . a. The dual of
    min |v|^2 / 2 s.t. Z v >= c is, for Z of full row rank, min_(alpha >= 0) |Z^T alpha - p|^2
    with p = Z^+ c (non-negative least squares), and v = Z^T alpha. Returns w in the original
    coordinates (Sigma^-1/2 (e_1 + v) rotated back); needs N < d (full row rank)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    N, d = X.shape
    if N >= d:
        raise ShapeError(f"best interpolator: needs N < d for a full-row-rank design; got "
                         f"N = {N}, d = {d}")
    root = np.sqrt(model.cov)
    a = model.mean / root
    a = a / np.linalg.norm(a)
    U = y[:, None] * (X / root)
    Z = U - np.outer(U @ a, a)
    return (a + min_norm_cone(Z, -U @ a)) / root


def min_norm_cone(Z: ArrayLike, c: ArrayLike) -> NDArray[np.float64]:
    """argmin |v| subject to Z v >= c (entrywise), for Z of full row rank (N <= d rows): the
    dual min_(alpha >= 0) |Z^T alpha|^2 / 2 - c . alpha equals, with p = Z^+ c (so c = Z p),
    min_(alpha >= 0) |Z^T alpha - p|^2 / 2 up to a constant, a non-negative least squares
    problem; v = Z^T alpha (Boyd and Vandenberghe 2004, Sec. 5.2). With rows y_i x_i and c = 1
    this is the hard-margin SVM without bias (:func:`paramgeo.losses.max_margin`)."""
    from scipy.optimize import nnls

    Z, c = np.asarray(Z, float), np.asarray(c, float)
    p = np.linalg.lstsq(Z, c, rcond=None)[0]
    alpha = nnls(Z.T, p, maxiter=50 * Z.shape[0])[0]
    return Z.T @ alpha


def interpolator_floor(snr: float, flip: float, ratio: ArrayLike) -> NDArray[np.float64]:
    """Predicted excess 0-1 risk of the best interpolator (:func:`best_interpolator`) at
    N / (d - 1) = ``ratio``, by Gordon's comparison (the convex Gaussian min-max theorem): the
    least r with ratio E[(c / r - h)_+^2] <= 1, h ~ N(0, 1) and c = -y u . a distributed as
    (1 - eta) N(-snr, 1) + eta N(snr, 1), is tan(angle) of the best interpolator, and the excess
    is (1 - 2 eta) (Phi(-snr / sqrt(1 + r^2)) - Phi(-snr)). The same for every spectrum (the
    0-1 risk and separability are invariant under whitening). nan where ratio E[h_-^2] =
    ratio / 2 >= 1 (Cover's threshold: no interpolator). References: Gordon (1988);
    Thrampoulidis, Oymak, Hassibi (2015); Cover (1965)."""
    from scipy.optimize import brentq
    from scipy.special import ndtr

    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()

    def spread(r):  # E[(c / r - h)_+^2], with E_h[(m - h)_+^2] = (m^2 + 1) Phi(m) + m phi(m)
        m = np.concatenate([-snr + nodes, snr + nodes]) / r
        pc = np.concatenate([(1 - flip) * weights, flip * weights])
        val = (m ** 2 + 1) * ndtr(m) + m * np.exp(-m ** 2 / 2) / np.sqrt(2 * np.pi)
        return float(pc @ val)

    out = []
    for ell in np.atleast_1d(np.asarray(ratio, float)):
        if ell / 2 >= 1:
            out.append(np.nan)
            continue
        rs = np.geomspace(1e-4, 1e4, 400)
        ok = np.array([ell * spread(r) <= 1 for r in rs])
        k = int(np.argmax(ok))
        r = rs[0] if k == 0 else brentq(lambda t: ell * spread(t) - 1, rs[k - 1], rs[k])
        out.append((1 - 2 * flip) * (ndtr(-snr / np.sqrt(1 + r * r)) - ndtr(-snr)))
    return np.array(out).reshape(np.shape(ratio))


def efficiency_ratio(snr: float, flip: float) -> float:
    """Large-N ratio of the excess 0-1 risk of the unpenalised logistic fit to that of least
    squares of 2 y on x (both converge to the Bayes direction; the excess is proportional to the
    mean squared angle, so the ratio is that of the angular variances, the same for every d and
    spectrum).

    In whitened coordinates the perpendicular components are independent of (y, u_1), so both
    sandwich covariances are multiples of the identity there: logistic E[sigma(-y m)^2] /
    (E[sigma'(m)]^2 (c* snr)^2) with m = c* snr u_1 at the logistic optimum c*
    (:func:`paramgeo.flows.label_flips.logistic_optimum`), least squares sigma^2 / |beta*|^2
    with |beta*| = 2 (1 - 2 eta) snr / (1 + snr^2), sigma^2 = 4 - |beta*|^2 (1 + snr^2). The
    margins y* u_1 ~ N(snr, 1) are integrated by 100-node Gauss-Hermite quadrature. References:
    Huber (1967) for the sandwich covariance, Efron (1975) for the comparison."""
    from scipy.special import expit

    from .label_flips import logistic_optimum
    from .risk import GaussianMixture

    model = GaussianMixture(cov=np.ones(1), mean=np.array([float(snr)]), flip=float(flip))
    scale, _ = logistic_optimum(model)  # w* = c* Sigma^-1 mu; whitened length c* snr
    nodes, weights = np.polynomial.hermite_e.hermegauss(100)
    weights = weights / weights.sum()
    clean = scale * snr * (snr + nodes)  # y m on unflipped points; -clean on flipped ones
    g = (1 - flip) * weights @ expit(-clean) ** 2 + flip * weights @ expit(clean) ** 2
    h = weights @ (expit(clean) * expit(-clean))
    beta = 2 * (1 - 2 * flip) * snr / (1 + snr ** 2)
    sigma2 = 4 - beta ** 2 * (1 + snr ** 2)
    return float(g / h ** 2 / (scale * snr) ** 2 / (sigma2 / beta ** 2))


@dataclasses.dataclass(frozen=True, kw_only=True)
class InterpolatorExcess(Result):
    """Mean excess 0-1 risk (standard errors over ``seeds``) per N < d of the max-margin
    interpolator (``max_margin``) and of the best
    interpolator (``best``, :func:`best_interpolator`), beside Gordon's prediction for the best
    (``predicted``, :func:`interpolator_floor` at N / (d - 1))."""

    d: int
    sizes: np.ndarray
    seeds: int
    max_margin: np.ndarray
    max_margin_se: np.ndarray
    best: np.ndarray
    best_se: np.ndarray
    predicted: np.ndarray

    def __str__(self):
        lines = [f"{'N':>6} {'max-margin excess':>22} {'best interpolator':>22} "
                 f"{'Gordon':>10}   (d = {self.d}, {self.seeds} seeds)"]
        for k, n in enumerate(self.sizes):
            lines.append(f"{int(n):6d} {self.max_margin[k]:12.3e} +-{self.max_margin_se[k]:7.1e} "
                         f"{self.best[k]:12.3e} +-{self.best_se[k]:7.1e} "
                         f"{self.predicted[k]:10.3e}")
        return "\n".join(lines)


def interpolator_excess(model: GaussianMixture, sizes: Sequence[int],
                        seeds: Sequence[int] = tuple(range(8))) -> InterpolatorExcess:
    """Excess 0-1 risk of the max-margin direction (:func:`min_norm_cone` with rows y_i x_i and
    c = 1) and of the best interpolator on the same samples, for each N < d in ``sizes``, with
    Gordon's prediction for the best."""
    sizes = np.asarray(sorted(int(n) for n in sizes))
    if np.any(sizes >= model.d):
        raise ShapeError(f"interpolator excess: every N must be below d = {model.d}")
    mm, mse, best, bse = [], [], [], []
    for n in sizes:
        a, b = [], []
        for seed in seeds:
            X, y = model.sample(n, np.random.default_rng(seed))
            b.append(float(model.excess_risk(best_interpolator(model, X, y))))
            a.append(float(model.excess_risk(min_norm_cone(y[:, None] * X, np.ones(n)))))
        a_, b_ = np.array(a), np.array(b)
        mm.append(a_.mean())
        mse.append(a_.std(ddof=1) / np.sqrt(a_.size))
        best.append(b_.mean())
        bse.append(b_.std(ddof=1) / np.sqrt(b_.size))
    snr = float(np.sqrt(model.mean @ (model.mean / model.cov)))
    return InterpolatorExcess(d=model.d, sizes=sizes, seeds=len(seeds), max_margin=np.array(mm),
                              max_margin_se=np.array(mse), best=np.array(best),
                              best_se=np.array(bse),
                              predicted=interpolator_floor(snr, model.flip,
                                                           sizes / (model.d - 1)))


def sample_count(sizes: ArrayLike, values: ArrayLike, eps: float) -> float:
    """The smallest N at which the curve ``values`` over ``sizes`` reaches ``eps``: the first
    grid point with value <= eps, log-log interpolated with its predecessor; inf if none."""
    n, v = np.asarray(sizes, float), np.asarray(values, float)
    below = np.flatnonzero(np.isfinite(v) & (v <= eps))
    if below.size == 0:
        return float("inf")
    k = int(below[0])
    if k == 0 or not np.isfinite(v[k - 1]):
        return float(n[k])
    t = np.log(v[k - 1] / eps) / np.log(v[k - 1] / v[k])
    return float(np.exp(np.log(n[k - 1]) + t * np.log(n[k] / n[k - 1])))


@dataclasses.dataclass(frozen=True, kw_only=True)
class SampleCounts(Result):
    """For each target ``targets[k]``: the smallest N (:func:`sample_count`) at which the
    oracle stop (``oracle``) and the max-margin interpolator (``max_margin``) reach it (inf:
    never on the grid), ``ratio_needed``, the largest N / (d - 1) at which Gordon's
    best-interpolator excess is <= eps (:func:`interpolator_floor` inverted), and
    ``dimension_needed`` = 1 + oracle / ratio_needed, the d at which some interpolator of the
    oracle stop's N samples can still reach eps; power laws N_GD ~ eps^-k (``oracle_fit``) and
    d_needed ~ eps^-k (``dimension_fit``), exponent k."""

    targets: np.ndarray
    oracle: np.ndarray
    max_margin: np.ndarray
    ratio_needed: np.ndarray
    dimension_needed: np.ndarray
    oracle_fit: object
    dimension_fit: object

    def __str__(self):
        lines = [f"{'eps':>10} {'N oracle stop':>14} {'N max margin':>13} "
                 f"{'N/(d-1) allowed':>16} {'d needed':>10}"]
        for row in zip(self.targets, self.oracle, self.max_margin, self.ratio_needed,
                       self.dimension_needed):
            lines.append(f"{row[0]:10.2e} {row[1]:14.4g} {row[2]:13.4g} {row[3]:16.3g} "
                         f"{row[4]:10.3g}")
        for name, f in (("N oracle stop", self.oracle_fit), ("d needed", self.dimension_fit)):
            if f is not None:
                lines.append(f"{name} ~ eps^-{f.exponent:.3f} (+- {f.error:.3f})")
        return "\n".join(lines)


def _eps_power(targets, counts):
    ok = np.isfinite(counts) & (counts > 0)
    if ok.sum() < 3:
        return None
    fit = power_law_fit(1 / targets[ok], 1 / counts[ok], 0, np.inf)  # 1 / N ~ (1 / eps)^-k
    return dataclasses.replace(fit, t_min=float(targets[ok].min()),
                               t_max=float(targets[ok].max()))


def sample_counts(rates: RateDecomposition, interpolators: InterpolatorExcess, snr: float,
                  flip: float, targets: ArrayLike) -> SampleCounts:
    """Sample counts per target eps from the logistic oracle-stop means of ``rates`` and the
    max-margin means of ``interpolators`` (:func:`sample_count`), the N / (d - 1) the best
    interpolator allows (bisection on a grid of :func:`interpolator_floor`, which increases
    with the ratio) and the dimension that allows the oracle stop's N; power laws in eps."""
    targets = np.asarray(targets, float)
    oracle = np.array([sample_count(rates.sizes, rates.means["logistic_oracle"], e)
                       for e in targets])
    mm = np.array([sample_count(interpolators.sizes, interpolators.max_margin, e)
                   for e in targets])
    grid = np.geomspace(1e-7, 1.999, 800)
    floor = interpolator_floor(snr, flip, grid)
    needed = np.array([grid[floor <= e].max() if np.any(floor <= e) else 0.0 for e in targets])
    with np.errstate(divide="ignore"):
        dims = 1 + oracle / needed
    return SampleCounts(targets=targets, oracle=oracle, max_margin=mm, ratio_needed=needed,
                        dimension_needed=dims, oracle_fit=_eps_power(targets, oracle),
                        dimension_fit=_eps_power(targets, dims))


def _excess_at_angle(snr, flip, angle):
    from scipy.special import ndtr

    return (1 - 2 * flip) * (ndtr(-snr * np.cos(angle)) - ndtr(-snr))


@dataclasses.dataclass(frozen=True, kw_only=True)
class MinimaxBound(Result):
    """Lower bounds on the minimax expected excess 0-1 risk per N (``sizes``): Le Cam's
    two-point bound (``le_cam``), Fano's over a Gilbert-Varshamov packing of the Bayes direction
    in ``support`` whitened coordinates (``fano``, nan where support - 1 < 8) and their maximum
    (``bound``)."""

    snr: float
    flip: float
    support: int
    sizes: np.ndarray
    le_cam: np.ndarray
    fano: np.ndarray
    bound: np.ndarray


def minimax_lower_bound(snr: float, flip: float, sizes: Sequence[int],
                        support: int = 10) -> MinimaxBound:
    """Lower bounds on inf_w-hat sup E[R(w-hat) - R_B] over the mixtures with known Sigma,
    flip rate eta, mu^T Sigma^-1 mu = snr^2 and Bayes direction on the first ``support``
    coordinates. In whitened coordinates the excess is E(angle) = (1 - 2 eta) (Phi(-snr
    cos(angle)) - Phi(-snr)) of the angle between w-hat and mu~ = Sigma^-1/2 mu, increasing;
    the angle is a metric; one sample's KL between two mixtures is at most |mu~ - mu~'|^2 / 2
    (that of (x, y*), by data processing through the flips).

    Le Cam: mu~_+- = snr (cos s e_1 +- sin s e_2) (support >= 2), angle 2s apart, KL of N
    samples 2 N snr^2 sin^2 s, so the bound is max_s E(s) / 2 (1 - sqrt(N snr^2 sin^2 s))
    (Pinsker). Fano: k = support - 1 >= 8, mu~_v = a e_1 + b v on a Gilbert-Varshamov code
    v in {+-1}^k of >= 2^(k/8) words at Hamming distance >= k/8, a^2 + k b^2 = snr^2; angles
    at least phi with cos phi = (a^2 + b^2 (k - 2 ceil(k/8))) / snr^2, KL at most 2 N k b^2, so
    the bound is max_b E(phi / 2) (1 - (2 N k b^2 + log 2) / (k log 2 / 8)) (Tsybakov 2009,
    Thm 2.5 and Lemma 2.9)."""
    sizes = np.asarray(sorted(int(n) for n in sizes))
    if support < 2:
        raise ShapeError(f"minimax bound: support {support} < 2 leaves no direction to learn")
    k = int(support) - 1
    grid = np.geomspace(1e-7, 1.0, 2000)
    lecam, fano = [], []
    for n in sizes:
        s = grid * np.pi / 4
        lecam.append(float(np.max(_excess_at_angle(snr, flip, s) / 2 *
                                  np.maximum(0, 1 - np.sqrt(n * snr ** 2 * np.sin(s) ** 2)))))
        if k < 8:
            fano.append(np.nan)
            continue
        b = grid * snr / np.sqrt(k)
        a2 = snr ** 2 - k * b ** 2
        cos = np.clip((a2 + b ** 2 * (k - 2 * math.ceil(k / 8))) / snr ** 2, -1, 1)
        p = 1 - (2 * n * k * b ** 2 + math.log(2)) / (k * math.log(2) / 8)
        fano.append(float(np.max(_excess_at_angle(snr, flip, np.arccos(cos) / 2) *
                                 np.maximum(p, 0))))
    lecam_a, fano_a = np.array(lecam), np.array(fano)
    return MinimaxBound(snr=float(snr), flip=float(flip), support=int(support), sizes=sizes,
                        le_cam=lecam_a, fano=fano_a, bound=np.fmax(lecam_a, fano_a))


@dataclasses.dataclass(frozen=True, kw_only=True)
class EquivalentCheck(Result):
    """At one N and the equivalent's best penalty: the equivalent's excess (``equivalent``),
    the mean excess of ridge on drawn samples (``drawn``, standard error ``drawn_se``) and the
    excess plugged in from the drawn mean margin moments (``plug_in``)."""

    N: int
    ridge: float
    equivalent: float
    drawn: float
    drawn_se: float
    plug_in: float


def equivalent_check(model: GaussianMixture, N: int,
                     seeds: Sequence[int] = tuple(range(200))) -> EquivalentCheck:
    """Splits the error of the deterministic equivalent at N: its excess is (1 - 2 eta)
    (Phi(-m) - Phi(-snr)) at the margin m = E[w . mu] / sqrt(E[w^T Sigma w]) of its moments;
    ``plug_in`` puts the drawn samples' mean moments into the same formula, so equivalent -
    plug_in is the error of the moments and plug_in - drawn that of plugging moments into a
    nonlinear excess (Jensen)."""
    from scipy.special import ndtr

    from .label_flips import ridge_equivalent

    n = int(N)
    lam = float(oracle_rate_theory(model, [n, 2 * n, 4 * n]).best_ridge[0])
    mean, second, excess = [], [], []
    for seed in seeds:
        X, y = model.sample(n, np.random.default_rng(seed))
        w = square_loss_estimators(X, y, [lam], [1.0])[0][0]
        mean.append(float(w @ model.mean))
        second.append(float(w @ (model.cov * w)))
        excess.append(float(model.excess_risk(w)))
    snr = float(np.sqrt(model.mean @ (model.mean / model.cov)))
    plug = (1 - 2 * model.flip) * (ndtr(-np.mean(mean) / np.sqrt(np.mean(second))) - ndtr(-snr))
    e = np.array(excess)
    return EquivalentCheck(N=n, ridge=lam, equivalent=float(ridge_equivalent(model, n, [lam])[0]),
                           drawn=float(e.mean()), drawn_se=float(e.std(ddof=1) / np.sqrt(e.size)),
                           plug_in=float(plug))
