"""Statistical risk of linear models: exact 0-1 risk under label flips, early-stopped logistic
gradient descent, and the spectral filters of ridge, gradient descent and shifted GD.

Gaussian mixture with label flips (:class:`GaussianMixture`): a clean label y* = +-1 with
probability 1/2, x = y* mu + Sigma^(1/2) z with z ~ N(0, I_d), and the observed label
y = y* flipped with probability eta < 1/2. Sigma = diag(lambda) with a polynomial
(lambda_j = j^-a) or exponential (lambda_j = exp(-a (j - 1))) spectrum (:func:`spectrum`).
For a linear classifier sign(w . x), given y*, y* w . x ~ N(w . mu, w^T Sigma w), so the exact
0-1 risk is

    R(w) = eta + (1 - 2 eta) Phi(-w . mu / sqrt(w^T Sigma w)),

minimised by the Bayes direction w_B = Sigma^-1 mu with R_B = eta + (1 - 2 eta)
Phi(-sqrt(mu^T Sigma^-1 mu)); the excess risk is R(w) - R_B. Logistic GD from w_0 = 0
(:func:`early_stopping`) is stopped at the oracle time argmin_t R(w_t); on separable samples
its direction tends to the max-margin interpolator (Soudry et al. 2018), whose excess risk is
given for comparison; :func:`excess_risk_rates` fits excess ~ N^-rate over sample sizes.

Spectral filters (:func:`ridge_filter`, :func:`gd_filter`, :func:`shifted_gd_filter`): with
Sigma_hat = X^T X / N = sum_j s_j v_j v_j^T and b = X^T y / N, an estimator
beta = sum_j (h(s_j) / s_j) (v_j . b) v_j has filter h:

    ridge:         h(s) = s / (s + lambda)
    GD, t steps:   h(s) = 1 - (1 - eta s)^t               (from beta_0 = 0, step eta)
    shifted GD:    h(s) = s (1 - (1 - eta (s - mu))^t) / (s - mu)

(shifted GD runs GD on (1/2N) |X beta - y|^2 - (mu/2) |beta|^2, a negative ridge -mu;
:func:`shifted_gd` iterates it). In the spike-plus-flat model (:class:`SpikedModel`,
Sigma = sigma^2 I + theta u u^T, d > N) the flat bulk acts on the spike like a ridge penalty
kappa = sigma^2 (d - N - 2) / N ~ sigma^2 (gamma - 1), gamma = d / N (the implicit penalty,
:meth:`SpikedModel.implicit_penalty`), cancelled by the shift mu = kappa; a negative ridge must
keep its pole below the smallest nonzero eigenvalue s_min of Sigma_hat, near the
Marchenko-Pastur edge sigma^2 (sqrt(gamma) - 1)^2, so it cannot reach kappa, which lies
about 2 sigma^2 (sqrt(gamma) - 1) above that edge (close to the bulk's half-width
2 sigma^2 sqrt(gamma)), inside the bulk (:func:`spiked_filter_risks`).

References: Soudry, Hoffer, Nacson, Gunasekar, Srebro (2018), "The implicit bias of gradient
descent on separable data"; Wu, Bartlett, Telgarsky, Yu (2025), "Benefits of early stopping in
gradient descent for overparameterized logistic regression"; early stopping of logistic GD
under label-flip noise (minimax excess 0-1 risk); Kobak, Lomond, Sanchez (2020), "The optimal
ridge penalty for real-world high-dimensional data can be zero or negative due to the implicit
ridge regularization"; Marchenko, Pastur (1967); early-stopped negatively shifted GD.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np
from scipy.special import ndtr

from ..contract.arguments import integer, number
from ..errors import ArgumentError, ShapeError
from ..losses.predictor import Logistic, max_margin, pullback
from ..linalg.numerics import as_rng
from ..results import Result
from .structure import PowerLaw, power_law_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization

SPECTRA = ("polynomial", "exponential")


def spectrum(d: int, kind: str = "polynomial", decay: float = 1.5) -> NDArray[np.float64]:
    """Eigenvalues lambda_j, j = 1..d: j^-decay (polynomial) or exp(-decay (j - 1))
    (exponential)."""
    j = np.arange(1, integer(d, "d", minimum=1) + 1, dtype=float)
    decay = number(decay, "decay")
    with np.errstate(under="ignore", over="ignore"):
        if kind == "polynomial":
            lam = j ** -decay
        elif kind == "exponential":
            lam = np.exp(-decay * (j - 1))
        else:
            raise ShapeError(f"spectrum kind {kind!r} is unknown; choose one of "
                             f"{', '.join(SPECTRA)}")
    if not (np.all(lam > 0) and np.all(np.isfinite(lam))):
        raise ArgumentError(
            f"the {kind} spectrum with decay {decay:g} leaves the float range at d = {int(d)} "
            f"(lambda_d = {lam[-1]:.3g}, lambda_1 / lambda_d beyond 1e308); give a smaller "
            "|decay| or a smaller d")
    return lam


#: Largest signal-to-noise ratio of a Gaussian mixture: the Bayes risk is the flip rate from
#: about 10 on; beyond 1e50 the margins of logistic GD overflow.
MAX_SNR = 1e50


@dataclasses.dataclass(frozen=True, kw_only=True)
class GaussianMixture:
    """x = y* mu + Sigma^(1/2) z, Sigma = diag(cov), labels flipped with probability ``flip``.

    ``from_spectrum(d, kind, decay, snr, flip, support)`` puts the Bayes direction
    w_B = Sigma^-1 mu on the first ``support`` coordinates, w_B = c (1, ..., 1, 0, ..., 0) and
    mu = Sigma w_B, with c such that mu^T Sigma^-1 mu = snr^2."""

    cov: np.ndarray
    mean: np.ndarray
    flip: float

    def __post_init__(self):
        cov, mean = np.asarray(self.cov, float), np.asarray(self.mean, float)
        if cov.ndim != 1 or cov.shape != mean.shape or np.any(cov <= 0):
            raise ShapeError("Gaussian mixture: cov must be a positive vector (the diagonal of "
                             f"Sigma) of the mean's length; got {cov.shape} and {mean.shape}")
        if not 0.0 <= self.flip < 0.5:
            raise ShapeError(f"Gaussian mixture: flip={self.flip} must be in [0, 1/2)")
        object.__setattr__(self, "cov", cov)
        object.__setattr__(self, "mean", mean)

    @classmethod
    def from_spectrum(cls, d: int, kind: str = "polynomial", decay: float = 1.5, snr: float = 3.0,
                      flip: float = 0.1, support: int = 10) -> GaussianMixture:
        lam = spectrum(d, kind, decay)
        snr = number(snr, "snr", positive=True, maximum=MAX_SNR)
        bayes = np.zeros(int(d))
        bayes[:max(1, int(support))] = 1.0
        bayes *= snr / math.sqrt(float(bayes @ (lam * bayes)))
        return cls(cov=lam, mean=lam * bayes, flip=float(flip))

    @property
    def d(self):
        return self.cov.size

    def sample(self, N: int, rng: Any = None) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(X, y): N rows x_i and observed labels y_i = +-1."""
        rng = as_rng(rng)
        clean = rng.choice((-1.0, 1.0), size=int(N))
        X = clean[:, None] * self.mean + rng.standard_normal((int(N), self.d)) * np.sqrt(self.cov)
        flipped = rng.random(int(N)) < self.flip
        return X, np.where(flipped, -clean, clean)

    def risk(self, w: ArrayLike) -> Any:
        """Exact 0-1 risk eta + (1 - 2 eta) Phi(-w . mu / sqrt(w^T Sigma w)); w of shape
        (..., d)."""
        w = np.asarray(w, float)
        scale = np.sqrt(np.sum(w * w * self.cov, axis=-1))
        margin = np.where(scale > 0, np.sum(w * self.mean, axis=-1) / np.where(scale > 0,
                                                                               scale, 1.0), 0.0)
        return self.flip + (1 - 2 * self.flip) * ndtr(-margin)

    @property
    def bayes_risk(self):
        """eta + (1 - 2 eta) Phi(-sqrt(mu^T Sigma^-1 mu)), the risk of w_B = Sigma^-1 mu."""
        return float(self.risk(self.mean / self.cov))

    def excess_risk(self, w: ArrayLike) -> Any:
        return self.risk(w) - self.bayes_risk

    def monte_carlo_risk(self, w: ArrayLike, samples: int = 100_000,
                         rng: Any = None) -> tuple[float, float]:
        """(estimate, standard error) of P(y w . x < 0) from fresh samples (the check of
        :meth:`risk`)."""
        X, y = self.sample(samples, rng)
        wrong = (y * (X @ np.asarray(w, float))) <= 0
        p = float(wrong.mean())
        return p, math.sqrt(max(p * (1 - p), 1e-300) / samples)


def _steps_grid(steps, records):
    grid = np.unique(np.round(np.geomspace(1, steps, records)).astype(int))
    return np.concatenate([[0], grid])


def _top_eigenvalue(X, iterations=30):
    """The top eigenvalue of X^T X by power iteration from (1, ..., 1) (a lower bound that is
    within a few percent after 30 products; matrix products only, no SVD)."""
    v = np.ones(X.shape[1]) / math.sqrt(X.shape[1])
    value = 0.0
    for _ in range(iterations):
        u = X.T @ (X @ v)
        value = float(np.linalg.norm(u))
        if value == 0.0:
            return 0.0
        v = u / value
    return value


def logistic_gd(X: ArrayLike, y: ArrayLike, steps: int, lr: Optional[float] = None,
                records: int = 60, param: Optional[Parameterization] = None,
                theta0: Optional[ArrayLike] = None,
                progress: Optional[Callable[[int, int], None]] = None
                ) -> tuple[NDArray[np.int_], NDArray[np.float64]]:
    """Gradient descent on the empirical logistic risk (1/N) sum_i log(1 + exp(-y_i w . x_i)).

    With ``param`` None, on w itself from w_0 = 0 with step ``lr`` (default 4 / s_max with
    s_max the top eigenvalue of X^T X / N by power iteration: twice the inverse smoothness); with a
    parameterization whose predictor is the weight vector (length d), on theta through
    w = phi(theta) from ``theta0`` (default the plugin's ``init_at_scale(1e-3)``), by the
    pull-back gradient J^T grad ell. Returns (recorded steps, weights of shape (len, d))."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    N, d = X.shape
    loss = Logistic(X, y)
    if lr is None:
        lr = 4.0 / max(_top_eigenvalue(X) / N, 1e-300)
    if param is None:
        point, weights = np.zeros(d), (lambda z: z)
        grad = loss.grad
    else:
        if param.m != d:
            raise ShapeError(f"logistic GD: {param.name}'s predictor has {param.m} entries but "
                             f"the data have d = {d} features; choose sizes with a weight "
                             "vector of length d")
        point = param.init_at_scale(1e-3) if theta0 is None else param.as_theta(theta0)
        weights = param.forward_flat
        grad = pullback(param, loss)[1]
    record = _steps_grid(steps, records)
    out, at = [], 0
    for step in range(int(steps) + 1):
        if step == record[at]:
            out.append(np.array(weights(point), float).ravel())
            at += 1
            if progress is not None:
                progress(at, record.size)
            if at == record.size:
                break
        point = point - lr * grad(point)
    return record, np.array(out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EarlyStopping(Result):
    """Exact 0-1 excess risk of logistic GD along its path (``steps``, ``excess``), at the
    oracle step argmin excess, at the last step, and of the max-margin interpolator
    (None when the sample is not separable)."""

    d: int
    N: int
    flip: float
    bayes_risk: float
    steps: np.ndarray
    excess: np.ndarray
    oracle_step: int
    oracle_excess: float
    final_excess: float
    max_margin_excess: object

    def __str__(self):
        mm = "not separable" if self.max_margin_excess is None \
            else f"{self.max_margin_excess:.4g}"
        return (f"logistic GD, d = {self.d}, N = {self.N}, flips {self.flip:g}: "
                f"Bayes risk {self.bayes_risk:.4g}\n"
                f"  excess 0-1 risk at the oracle step {self.oracle_step}: "
                f"{self.oracle_excess:.4g}\n"
                f"  at the last step {int(self.steps[-1])}: {self.final_excess:.4g}\n"
                f"  max-margin interpolator: {mm}")


def early_stopping(model: GaussianMixture, N: int, steps: int = 2000, lr: Optional[float] = None,
                   seed: int = 0, records: int = 60, param: Optional[Parameterization] = None,
                   interpolator: bool = True,
                   progress: Optional[Callable[[int, int], None]] = None) -> EarlyStopping:
    """Logistic GD on N samples of ``model``, its exact excess 0-1 risk along the path.

    The oracle step t* = argmin_t R(w_t) - R_B over the recorded steps (log-spaced up to
    ``steps``); the max-margin direction w_mm = argmin |w| s.t. y_i w . x_i >= 1 (the limit
    of w_t / |w_t| on separable data, Soudry et al. 2018) gives the interpolator's excess.
    ``param``: train through a parameterization instead of the linear model
    (:func:`logistic_gd`); ``interpolator=False`` skips the max-margin problem."""
    X, y = model.sample(N, np.random.default_rng(seed))
    record, W = logistic_gd(X, y, steps, lr, records, param, progress=progress)
    excess = model.excess_risk(W)
    best = int(np.argmin(excess))
    mm_excess = None
    if interpolator:
        try:
            mm_excess = float(model.excess_risk(max_margin(X, y).direction))
        except ShapeError:  # not linearly separable: there is no interpolator
            pass
    return EarlyStopping(d=model.d, N=int(N), flip=model.flip, bayes_risk=model.bayes_risk,
                         steps=record, excess=excess, oracle_step=int(record[best]),
                         oracle_excess=float(excess[best]), final_excess=float(excess[-1]),
                         max_margin_excess=mm_excess)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RiskRates(Result):
    """Mean excess 0-1 risk over seeds per sample size N at the oracle stop and of the
    max-margin interpolator (printed with their ratio, the interpolator's gap), with power laws
    excess ~ N^-rate fitted to both."""

    sizes: np.ndarray
    oracle: np.ndarray
    oracle_se: np.ndarray
    interpolator: np.ndarray
    oracle_rate: PowerLaw
    interpolator_rate: object

    def __str__(self):
        lines = [f"{'N':>6} {'oracle excess':>14} {'+-':>8} {'max-margin excess':>18} "
                 f"{'ratio':>7}"]
        for n, o, s, i in zip(self.sizes, self.oracle, self.oracle_se, self.interpolator):
            lines.append(f"{int(n):6d} {o:14.4g} {s:8.2g} {i:18.4g} {i / o:7.3g}")
        r = self.oracle_rate
        lines.append(f"oracle-stopped excess ~ N^-{r.exponent:.3f} (+- {r.error:.3f})")
        if self.interpolator_rate is not None:
            q = self.interpolator_rate
            lines.append(f"max-margin excess ~ N^-{q.exponent:.3f} (+- {q.error:.3f})")
        return "\n".join(lines)


def excess_risk_rates(model: GaussianMixture, sizes: Sequence[int],
                      seeds: Sequence[int] = (0, 1, 2),
                      steps: int = 2000, lr: Optional[float] = None,
                      param: Optional[Parameterization] = None, interpolator: bool = True,
                      progress: Optional[Callable[[int, int], None]] = None) -> RiskRates:
    """:func:`early_stopping` for every N in ``sizes`` and seed; mean excess per N and the
    fitted rates (least squares of log excess on log N, standard error of the slope); the
    max-margin interpolator only where N < d (``interpolator=False``: never)."""
    sizes = np.asarray(sorted(int(n) for n in sizes))
    oracle, se, interp = [], [], []
    total, done = len(sizes) * len(seeds), 0
    for n in sizes:
        o: list[Any] = []
        i: list[Any] = []
        for s in seeds:
            res = early_stopping(model, n, steps, lr, s, param=param,
                                 interpolator=interpolator and n < model.d)
            o.append(res.oracle_excess)
            i.append(np.nan if res.max_margin_excess is None else res.max_margin_excess)
            done += 1
            if progress is not None:
                progress(done, total)
        oracle.append(np.mean(o))
        se.append(np.std(o, ddof=1) / math.sqrt(len(o)) if len(o) > 1 else np.nan)
        interp.append(np.nanmean(i) if np.any(np.isfinite(i)) else np.nan)
    oracle, interp = np.array(oracle), np.array(interp)
    rate = power_law_fit(sizes, oracle, sizes[0], sizes[-1])
    ok = np.isfinite(interp) & (interp > 0)
    irate = power_law_fit(sizes[ok], interp[ok], sizes[0], sizes[-1]) if ok.sum() >= 3 else None
    return RiskRates(sizes=sizes, oracle=oracle, oracle_se=np.array(se), interpolator=interp,
                     oracle_rate=rate, interpolator_rate=irate)


# --------------------------------------------------------------------------- spectral filters
def ridge_filter(s: ArrayLike, lam: float) -> NDArray[np.float64]:
    """h(s) = s / (s + lambda) (lambda may be negative, above -min s)."""
    s = np.asarray(s, float)
    return s / (s + lam)


def gd_filter(s: ArrayLike, steps: int, lr: float) -> NDArray[np.float64]:
    """h(s) = 1 - (1 - lr s)^steps: GD from 0 with step lr on (1/2N) |X beta - y|^2."""
    return 1.0 - (1.0 - lr * np.asarray(s, float)) ** steps


def shifted_gd_filter(s: ArrayLike, steps: int, lr: float, shift: float) -> NDArray[np.float64]:
    """h(s) = s (1 - (1 - lr (s - mu))^t) / (s - mu), mu = ``shift`` (lr t s at s = mu): GD on
    the loss with a negative ridge -(mu/2) |beta|^2."""
    s = np.asarray(s, float)
    g = s - shift
    base = 1.0 - lr * g
    small = np.abs(lr * g) < 1e-8
    safe_g = np.where(small, 1.0, g)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # 1 - base^t as -expm1(t log1p(-lr g)) where base > 0 (no cancellation for small lr g)
        powered = np.where(base > 0, -np.expm1(steps * np.log1p(np.maximum(-lr * g, -1.0))),
                           1.0 - base ** steps)
        ratio = np.where(small, lr * steps * (1.0 - 0.5 * (steps - 1) * lr * g),
                         powered / safe_g)
    return s * ratio


def filter_estimator(X: ArrayLike, y: ArrayLike,
                     filt: Callable[[NDArray[np.float64]], Any]) -> NDArray[np.float64]:
    """beta = sum_j (h(s_j) / s_j) (v_j . b) v_j for the filter h = ``filt`` (a function of
    the eigenvalues s_j of X^T X / N; b = X^T y / N); components with s_j = 0 drop out (b has
    none there)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    N = X.shape[0]
    _, sv, Vt = np.linalg.svd(X, full_matrices=False)
    s = sv ** 2 / N
    b = X.T @ y / N
    keep = s > s[0] * 1e-13
    coef = np.zeros_like(s)
    coef[keep] = filt(s[keep]) / s[keep]
    return Vt.T @ (coef * (Vt @ b))


def shifted_gd(X: ArrayLike, y: ArrayLike, steps: int, lr: float,
               shift: float = 0.0) -> NDArray[np.float64]:
    """Iterate beta_{k+1} = beta_k - lr ((Sigma_hat - mu I) beta_k - b) from 0 (``shift`` mu = 0:
    plain GD on (1/2N) |X beta - y|^2)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    N = X.shape[0]
    b = X.T @ y / N
    beta = np.zeros(X.shape[1])
    for _ in range(int(steps)):
        beta = beta - lr * (X.T @ (X @ beta) / N - shift * beta - b)
    return beta


def mp_edges(gamma: float, sigma2: float = 1.0) -> tuple[float, float]:
    """Marchenko-Pastur bulk edges sigma^2 (1 -+ sqrt(gamma))^2 of the nonzero eigenvalues of
    X^T X / N, X with i.i.d. N(0, sigma^2) entries, gamma = d / N (Marchenko, Pastur 1967)."""
    r = math.sqrt(gamma)
    return sigma2 * (1 - r) ** 2, sigma2 * (1 + r) ** 2


#: Largest spike strength relative to sigma^2: beyond about 1e10 the spike feature's ridge
#: (``penalty_fit``) has no root in its bracket in float64; 1e8 leaves a margin.
MAX_SPIKE = 1e8
#: Largest d N of :func:`spiked_filter_risks` (the sample is N x d; its SVD costs N^2 d).
MAX_FILTER_ENTRIES = 10_000_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpikedModel:
    """x ~ N(0, sigma^2 I + spike e_1 e_1^T), y = x . beta* + noise, beta* = signal e_1
    (spike in [0, MAX_SPIKE sigma^2], noise >= 0, all finite)."""

    d: int
    spike: float = 20.0
    sigma2: float = 1.0
    signal: float = 1.0
    noise: float = 0.5

    def __post_init__(self):
        integer(self.d, "d", minimum=2)
        sigma2 = number(self.sigma2, "sigma2", positive=True, maximum=1e50)
        number(self.spike, "spike", maximum=MAX_SPIKE * sigma2)
        number(self.signal, "signal", maximum=1e50)
        number(self.noise, "noise", maximum=1e50)
        if self.spike < 0 or self.noise < 0:
            raise ArgumentError(f"spike and noise must be >= 0, got spike {self.spike}, noise "
                                f"{self.noise}")

    @property
    def beta_star(self):
        out = np.zeros(self.d)
        out[0] = self.signal
        return out

    def sample(self, N: int, rng: Any = None) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        rng = as_rng(rng)
        X = rng.standard_normal((int(N), self.d)) * math.sqrt(self.sigma2)
        X[:, 0] *= math.sqrt((self.sigma2 + self.spike) / self.sigma2)
        y = X @ self.beta_star + self.noise * rng.standard_normal(int(N))
        return X, y

    def risk(self, beta: ArrayLike) -> float:
        """Excess prediction risk (beta - beta*)^T Sigma (beta - beta*)."""
        e = np.asarray(beta, float) - self.beta_star
        return float(self.sigma2 * e @ e + self.spike * e[0] ** 2)

    def risk_in_rows(self, V: NDArray[np.float64], c: ArrayLike) -> float:
        """risk(V^T c) for V with orthonormal rows (k x d), in O(k) after one O(k) product
        per call: with beta* = signal e_1, |V^T c - beta*|^2 = |c|^2 - 2 signal c . V[:, 0] +
        signal^2 and (V^T c - beta*)_1 = c . V[:, 0] - signal."""
        c = np.asarray(c, float)
        first = np.dot(c, V[:, 0])  # numpy scalars: an overflow is inf, as in risk()
        sq = np.dot(c, c) - 2.0 * self.signal * first + self.signal ** 2
        return float(self.sigma2 * np.maximum(sq, 0.0) + self.spike * np.square(first -
                                                                                 self.signal))

    def implicit_penalty(self, N: int) -> float:
        """kappa = sigma^2 (d - N - 2) / N: the ridge the flat bulk puts on the spike.

        The spike coefficient of the min-norm interpolator is a^T (a a^T + G)^-1 y with
        a = X e_1 and G = B B^T the bulk's Gram matrix (Wishart, d - 1 degrees of freedom,
        independent of a), and a^T G^-1 a ~ |a|^2 tr(G^-1) / N with E G^-1 =
        I / (sigma^2 (d - N - 2)): a ridge of N / tr((G/N)^-1) = sigma^2 (d - N - 2) / N,
        the harmonic mean of the bulk eigenvalues, sigma^2 (gamma - 1) to leading order."""
        if self.d <= N + 2:
            raise ShapeError(f"implicit penalty: needs d > N + 2, got d = {self.d}, N = {N}")
        return self.sigma2 * (self.d - N - 2) / N


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpikedFilterRisks(Result):
    """Risks of ridge (over admissible lambda > -s_min), GD (over t) and shifted GD (over shift
    and t) on one sample of a spiked model, with the spectrum's edges and the implicit
    penalty kappa; ``penalty_fit`` is the ridge that matches the min-norm interpolator's spike
    coefficient (the second route to kappa)."""

    d: int
    N: int
    s_min: float
    mp_lower: float
    mp_upper: float
    implicit_penalty: float
    penalty_fit: float
    ridge_risk: float
    ridge_lambda: float
    gd_risk: float
    gd_steps: int
    shifted_risk: float
    shifted_shift: float
    shifted_steps: int
    interpolator_risk: float


def spiked_filter_risks(model: SpikedModel, N: int, seed: int = 0, steps: int = 4000,
                        shifts: Optional[Sequence[float]] = None,
                        lr: Optional[float] = None) -> SpikedFilterRisks:
    """Risks of the three filters on one sample of ``model`` (d > N), minimised over their
    knobs, beside the MP edges, s_min and kappa = sigma^2 (d - 1)/N."""
    from scipy.optimize import brentq, minimize_scalar

    N = integer(N, "N", minimum=2)
    if model.d <= N:
        raise ShapeError(f"spiked filters: need d > N (an over-parameterized sample); got "
                         f"d = {model.d}, N = {N}")
    if model.d * N > MAX_FILTER_ENTRIES:
        raise ArgumentError(
            f"spiked filters: d N = {model.d} x {N} = {model.d * N:.3g} entries, beyond "
            f"{MAX_FILTER_ENTRIES:.0e}: the sample and its SVD (N^2 d operations) would take "
            "minutes and gigabytes; give a smaller d or N")
    X, y = model.sample(N, np.random.default_rng(seed))
    _, sv, Vt = np.linalg.svd(X, full_matrices=False)
    s = sv ** 2 / N
    b = X.T @ y / N
    proj = Vt @ b

    def risk_of(filt):
        return model.risk_in_rows(Vt, filt(s) / s * proj)

    s_min = float(s[-1])
    lo, hi = mp_edges(model.d / N, model.sigma2)
    kappa = model.implicit_penalty(N)
    # the second route to kappa: the ridge on the 1-d spike feature a = X e_1 whose coefficient
    # equals the min-norm interpolator's spike coefficient
    mn = Vt.T @ (proj / s)
    a = X[:, 0]

    def spike_coef(lam):
        return float(a @ y / (a @ a + N * lam)) - mn[0]

    penalty_fit = brentq(spike_coef, -0.9 * float(a @ a) / N, 1e3 * (kappa + 1))
    lr = 1.0 / float(s[0]) if lr is None else lr
    rid = minimize_scalar(lambda t: risk_of(lambda z: ridge_filter(z, -s_min + math.exp(t))),
                          bounds=(-30.0, math.log(10 * s[0])), method="bounded")
    ts = np.unique(np.round(np.geomspace(1, steps, 80)).astype(int))
    gd = [risk_of(lambda z, t=t: gd_filter(z, t, lr)) for t in ts]
    shifts = np.linspace(0.0, 1.5 * kappa, 31) if shifts is None else np.asarray(shifts)
    best = (np.inf, 0.0, 0)
    with np.errstate(over="ignore", invalid="ignore"):  # shifts past s_min diverge late
        for mu in shifts:
            for t in ts:
                r = risk_of(lambda z, t=t, mu=mu: shifted_gd_filter(z, t, lr, mu))
                if np.isfinite(r) and r < best[0]:
                    best = (r, float(mu), int(t))
    return SpikedFilterRisks(
        d=model.d, N=int(N), s_min=s_min, mp_lower=lo, mp_upper=hi, implicit_penalty=kappa,
        penalty_fit=float(penalty_fit), ridge_risk=float(rid.fun),
        ridge_lambda=float(-s_min + math.exp(rid.x)), gd_risk=float(min(gd)),
        gd_steps=int(ts[int(np.argmin(gd))]), shifted_risk=best[0], shifted_shift=best[1],
        shifted_steps=best[2], interpolator_risk=model.risk(mn))
