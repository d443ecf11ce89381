"""A nonparametric minimax lower bound for the excess 0-1 risk of Gaussian mixtures with label
flips (:class:`paramgeo.flows.risk.GaussianMixture`) whose Bayes direction obeys a source
condition tied to the spectrum.

The class. Fix the covariance Sigma = diag(lambda), the flip rate eta and snr. F(R, r) is the
set of mixtures x = y* mu + Sigma^1/2 z, y = y* flipped with probability eta, with whitened
mean mu~ = Sigma^-1/2 mu of length snr and Bayes direction w_B = Sigma^-1 mu in the source
ball |Sigma^-r w_B| <= R, i.e. the ellipsoid sum_j mu~_j^2 / lambda_j^(1 + 2r) <= R^2
(r = 0: |w_B| <= R, the ball gradient descent from 0 works in). Sigma and eta are known to the
estimator. With R = :func:`class_radius` of a model, F contains that model (on its boundary),
so the bound holds for the models the oracle rates are measured on.

The bound (:func:`nonparametric_lower_bound`, Assouad's lemma over a hypercube). In whitened
coordinates the excess of w is G(1 - cos theta), theta the angle between Sigma^1/2 w and mu~,
G(t) = (1 - 2 eta) (Phi(-snr (1 - t)) - Phi(-snr)), increasing, convex on [0, 1], so
G(t) >= G'(0) t with G'(0) = (1 - 2 eta) phi(snr) snr. The hypotheses are
mu~_v = a e_1 + b sum_(j <= K) v_j e_(j+1), v in {+-1}^K, a^2 + K b^2 = snr^2 (e_1 the largest
eigenvalue's coordinate, e_2.. the next K: the cheapest in the ellipsoid). For a unit u,
1 - cos = |u - mu~_v / snr|^2 / 2 >= (b^2 / 2 snr^2) #{j: sign u_(j+1) != v_j}, so the loss is
at least alpha times a Hamming distance, alpha = G'(0) b^2 / (2 snr^2). One sample's KL is at
most |mu~_v - mu~_v'|^2 / 2 (that of (x, y*), data processing through the flips), 2 b^2 for
neighbours, so by Pinsker the N-sample total variation is at most sqrt(N b^2) and Assouad
gives

    inf sup E[R(w-hat) - R_B] >= G'(0) K b^2 / (4 snr^2) (1 - sqrt(N b^2)),

maximised over K < d and b^2 <= min(4 / 9N, snr^2 / K, B / (S_K - K c_1)) with c_j =
lambda_j^-(1 + 2r), S_K = c_2 + .. + c_(K+1), B = R^2 - snr^2 c_1 (the ellipsoid budget).

The rate (:func:`nonparametric_rate`). The free optimum N b^2 = 4/9 gives G'(0) K / (27 snr^2
N); the ellipsoid caps K where S_K ~ 9 N B / 4. Polynomial lambda_j = j^-a, p = 1 + 2r:
S_K ~ K^(ap + 1) / (ap + 1), so K ~ N^(1 / (ap + 1)) and the bound falls like
N^(-ap / (ap + 1)) (0.6 at a = 1.5, r = 0). Exponential lambda_j = e^(-a (j - 1)): S_K ~
e^(apK), so K ~ log N / (ap) and the bound falls like log N / (ap N): rate 1 up to the
logarithm. At finite d, K <= d - 1 and the rate turns to 1 once the cap binds.

The local bound (:func:`local_lower_bound`). The same lemma over a cube around a model's own
whitened mean mu~_0, perturbed on the coordinates where it vanishes with amplitudes beta_j
chosen per coordinate (water filling), in F(R, r) with R a little above the model's radius:
a bound over a neighbourhood of the model rather than over the whole class.

References: Buna, Liu, Rebeschini, early stopping of logistic GD under label-flip noise;
Tsybakov (2009), "Introduction to nonparametric estimation", Lemma 2.12 (Assouad) and
Lemma 2.5 (Pinsker); Caponnetto, De Vito (2007) for source and capacity conditions; Hajek
(1972), Le Cam (1986), Cai & Low (2015) for local minimax benchmarks.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from ..errors import ArgumentError, ShapeError
from ..results import Result
from .structure import PowerLaw, power_law_fit

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from .risk import GaussianMixture


def _parts(model: GaussianMixture) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    lam = np.asarray(model.cov, float)
    whitened = np.asarray(model.mean, float) / np.sqrt(lam)
    return lam, whitened, float(np.linalg.norm(whitened))


def class_radius(model: GaussianMixture, source: float = 0.0) -> float:
    """|Sigma^-r w_B| = sqrt(sum_j mu~_j^2 / lambda_j^(1 + 2r)) of ``model`` (r = ``source``,
    w_B = Sigma^-1 mu, mu~ = Sigma^-1/2 mu): the least radius R for which the class F(R, r) of
    :func:`nonparametric_lower_bound` contains the model. Buna, Liu, Rebeschini; Tsybakov
    (2009)."""
    lam, whitened, _ = _parts(model)
    return float(np.sqrt(np.sum(whitened ** 2 * lam ** -(1 + 2 * float(source)))))


def excess_slope(snr: float, flip: float) -> float:
    """G'(0) = (1 - 2 eta) phi(snr) snr, the slope of the excess 0-1 risk
    G(t) = (1 - 2 eta) (Phi(-snr (1 - t)) - Phi(-snr)) in t = 1 - cos(theta) at theta = 0, and
    its lower bound G(t) >= G'(0) t on [0, 1] (Phi is convex on the negative half-line).
    Buna, Liu, Rebeschini."""
    return float((1 - 2 * flip) * math.exp(-snr * snr / 2) / math.sqrt(2 * math.pi) * snr)


def nonparametric_rate(kind: str, decay: float, source: float = 0.0) -> float:
    """The exponent r of the bound N^-r of :func:`nonparametric_lower_bound` as d -> infinity:
    a p / (a p + 1) for the polynomial spectrum lambda_j = j^-a and 1 (times log N: the bound
    is ~ log N / (a p N)) for the exponential lambda_j = e^(-a (j - 1)), p = 1 + 2 source
    (module docstring). Buna, Liu, Rebeschini; Tsybakov (2009), Sec. 2.7."""
    p = 1 + 2 * float(source)
    if kind == "polynomial":
        return float(decay * p / (decay * p + 1))
    if kind == "exponential":
        return 1.0
    raise ShapeError(f"nonparametric rate: spectrum kind {kind!r} is unknown; choose "
                     f"'polynomial' or 'exponential'")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NonparametricBound(Result):
    """Assouad's lower bound on the minimax excess 0-1 risk over F(``radius``, ``source``)
    per N (``sizes``): ``bound``, the cube's width K (``width``) and squared whitened amplitude
    b^2 (``amplitude``) that attain it, ``capped`` where K = d - 1 (the finite dimension
    binds), and the power law fitted over ``sizes`` (``rate``)."""

    snr: float
    flip: float
    radius: float
    source: float
    d: int
    sizes: np.ndarray
    bound: np.ndarray
    width: np.ndarray
    amplitude: np.ndarray
    capped: np.ndarray
    rate: Optional[PowerLaw]

    def __str__(self):
        lines = [f"Assouad bound over |Sigma^-{self.source:g} w_B| <= {self.radius:.4g} "
                 f"(d = {self.d}, snr {self.snr:g}, flips {self.flip:g})",
                 f"{'N':>8} {'bound':>11} {'K':>5} {'N b^2':>7}"]
        for n, v, k, b2 in zip(self.sizes, self.bound, self.width, self.amplitude):
            lines.append(f"{int(n):8d} {v:11.3e} {int(k):5d} {n * b2:7.3f}")
        if self.rate is not None:
            lines.append(f"rate {self.rate.exponent:.3f} +- {self.rate.error:.3f}")
        return "\n".join(lines)


def nonparametric_lower_bound(model: GaussianMixture, sizes: Sequence[int],
                              radius: Optional[float] = None,
                              source: float = 0.0) -> NonparametricBound:
    """Lower bound on inf_w-hat sup_(P in F) E[R(w-hat) - R_B] from N samples, F = F(R, r)
    the mixtures with ``model``'s Sigma, flip rate eta and snr whose Bayes direction satisfies
    |Sigma^-r w_B| <= R (r = ``source``, R = ``radius``, default :func:`class_radius` of the
    model, so that F contains ``model``; a smaller radius gives a class without it). By
    Assouad over the cube mu~_v = a e_1 +
    b sum_j v_j e_(j+1), v in {+-1}^K (module docstring):

        bound = max_(K, b) G'(0) K b^2 / (4 snr^2) (1 - sqrt(N b^2)),

    G'(0) = (1 - 2 eta) phi(snr) snr, a^2 + K b^2 = snr^2, a^2 c_1 + b^2 S_K <= R^2,
    c_j = lambda_j^-(1 + 2r) in decreasing order of lambda, S_K = c_2 + .. + c_(K+1). It falls
    like N^-(ap / (ap + 1)) for lambda_j = j^-a and like log N / N for lambda_j = e^(-a (j-1))
    (p = 1 + 2r) until K reaches d - 1 (:func:`nonparametric_rate`). References: Buna, Liu,
    Rebeschini; Tsybakov (2009), Lemmas 2.5 and 2.12."""
    lam, _, snr = _parts(model)
    sizes = np.asarray(sorted(int(n) for n in sizes))
    if lam.size < 2 or sizes.size == 0 or sizes[0] < 1:
        raise ShapeError(f"nonparametric bound: needs d >= 2 and sizes >= 1; got d = "
                         f"{lam.size}, sizes {list(sizes)}; give a model with two coordinates "
                         f"or more and positive sample sizes")
    p = 1 + 2 * float(source)
    if not p > 0:
        raise ArgumentError(f"nonparametric bound: source {source:g} <= -1/2 is no ellipsoid; "
                            f"give a source above -1/2")
    R = class_radius(model, source) if radius is None else float(radius)
    cost = np.sort(lam)[::-1] ** -p
    budget = R * R - snr * snr * cost[0]
    if not budget > 1e-12 * R * R:
        raise ArgumentError(f"nonparametric bound: radius {R:.6g} leaves no room beside the top "
                            f"coordinate (needs R > snr lambda_1^-(1/2 + r) = "
                            f"{snr * math.sqrt(cost[0]):.6g}); give a larger radius")
    K = np.arange(1, lam.size)
    excess = np.cumsum(cost[1:]) - K * cost[0]
    with np.errstate(divide="ignore"):
        room = np.where(excess > 0, budget / np.where(excess > 0, excess, 1.0), np.inf)
    cap = np.minimum(snr * snr / K, room)
    slope = excess_slope(snr, model.flip)
    out, width, amp = [], [], []
    for n in sizes:
        x = np.minimum(n * cap, 4.0 / 9.0)
        values = slope * K * x * (1 - np.sqrt(x)) / (4 * snr * snr * n)
        k = int(np.argmax(values))
        out.append(float(values[k]))
        width.append(int(K[k]))
        amp.append(float(x[k] / n))
    bound = np.array(out)
    rate = power_law_fit(sizes, bound, sizes[0], sizes[-1]) if sizes.size >= 3 else None
    return NonparametricBound(snr=snr, flip=float(model.flip), radius=R, source=float(source),
                              d=int(lam.size), sizes=sizes, bound=bound, width=np.array(width),
                              amplitude=np.array(amp), capped=np.array(width) == lam.size - 1,
                              rate=rate)


def cube_means(model: GaussianMixture, width: int,
               amplitude: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The hypotheses of :func:`nonparametric_lower_bound`: for each v in {+-1}^K (K =
    ``width`` <= 16, rows in itertools.product order) the mean mu = Sigma^1/2 mu~_v with
    mu~_v = a e_1 + b sum_j v_j e_(j+1), b^2 = ``amplitude``, a^2 = snr^2 - K b^2, coordinates
    in decreasing order of lambda. Returns (vertices (2^K, K), means (2^K, d)). Buna, Liu,
    Rebeschini; Tsybakov (2009), Lemma 2.12."""
    lam, _, snr = _parts(model)
    K, b2 = int(width), float(amplitude)
    if not 1 <= K <= min(16, lam.size - 1) or not 0 < K * b2 <= snr * snr:
        raise ShapeError(f"cube means: need 1 <= K <= min(16, d - 1) and 0 < K b^2 <= snr^2; "
                         f"got K = {K}, b^2 = {b2:g} (d = {lam.size}, snr {snr:g}); give a "
                         f"smaller width or amplitude")
    order = np.argsort(-lam, kind="stable")
    vertices = np.array(list(itertools.product((-1.0, 1.0), repeat=K)))
    whitened = np.zeros((vertices.shape[0], lam.size))
    whitened[:, order[0]] = math.sqrt(snr * snr - K * b2)
    whitened[:, order[1:K + 1]] = math.sqrt(b2) * vertices
    return vertices, whitened * np.sqrt(lam)


def mixture_kl(first: ArrayLike, second: ArrayLike, flip: float, samples: int = 200_000,
               rng: Optional[np.random.Generator] = None) -> tuple[float, float]:
    """Monte Carlo KL(P_1 || P_2) of one observation (u, y) between two whitened mixtures with
    label flips, p(u, y) = [(1 - eta) phi(u - y m) + eta phi(u + y m)] / 2 (m = ``first`` or
    ``second``): the mean log-likelihood ratio over ``samples`` draws from P_1 and its standard
    error. The bound uses KL <= |m_1 - m_2|^2 / 2 (data processing through the flips; Tsybakov
    2009, Sec. 2.4); this is the check. Buna, Liu, Rebeschini."""
    m1, m2 = np.asarray(first, float), np.asarray(second, float)
    if m1.shape != m2.shape or m1.ndim != 1:
        raise ShapeError(f"mixture KL: give two means of one length; got {m1.shape}, "
                         f"{m2.shape}")
    rng = np.random.default_rng(0) if rng is None else rng
    n = int(samples)
    clean = rng.choice((-1.0, 1.0), size=n)
    u = clean[:, None] * m1 + rng.standard_normal((n, m1.size))
    y = np.where(rng.random(n) < flip, -clean, clean)

    with np.errstate(divide="ignore"):
        logs = np.log([1 - flip, flip])

    def log_p(m):  # log of (1 - eta) e^(y u.m - |m|^2/2) + eta e^(-y u.m - |m|^2/2), common part
        s = y * (u @ m)
        return np.logaddexp(logs[0] + s, logs[1] - s) - m @ m / 2

    ratio = log_p(m1) - log_p(m2)
    return float(ratio.mean()), float(ratio.std(ddof=1) / math.sqrt(n))


@dataclasses.dataclass(frozen=True, kw_only=True)
class LocalBound(Result):
    """Assouad's lower bound on the minimax excess 0-1 risk over the hypotheses near a model
    (:func:`local_lower_bound`) per N (``sizes``): ``bound``, the squared whitened amplitudes
    beta_j^2 of the perturbed coordinates (``amplitudes``, shape (len(sizes), d), zero on the
    model's support), their number (``count``) and the last one in decreasing order of lambda
    (``last``, 1-based), the sine of the largest angle between a hypothesis and the model
    (``reach``) and the power law fitted over ``sizes`` (``rate``; None with fewer than three
    positive bounds). ``radius`` is the class's R, ``model_radius`` the model's own."""

    snr: float
    flip: float
    radius: float
    model_radius: float
    source: float
    d: int
    sizes: np.ndarray
    bound: np.ndarray
    amplitudes: np.ndarray
    count: np.ndarray
    last: np.ndarray
    reach: np.ndarray
    rate: Optional[PowerLaw]

    def __str__(self):
        lines = [f"local Assouad bound around the model (|Sigma^-{self.source:g} w_B| = "
                 f"{self.model_radius:.4g}) in |Sigma^-{self.source:g} w_B| <= "
                 f"{self.radius:.4g} (d = {self.d}, snr {self.snr:g}, flips {self.flip:g})",
                 f"{'N':>8} {'bound':>11} {'coords':>6} {'last':>5} {'reach':>6}"]
        for n, v, k, j, s in zip(self.sizes, self.bound, self.count, self.last, self.reach):
            lines.append(f"{int(n):8d} {v:11.3e} {int(k):6d} {int(j):5d} {s:6.3f}")
        if self.rate is not None:
            lines.append(f"rate {self.rate.exponent:.3f} +- {self.rate.error:.3f}")
        return "\n".join(lines)


def _water_fill(cost: NDArray[np.float64], total: float) -> NDArray[np.float64]:
    """x maximising sum_j x_j (1 - sqrt(x_j)) over 0 <= x_j <= 4/9 with sum_j x_j cost_j <=
    total: x_j = min(4/9, ((1 - mu cost_j)_+ / 1.5)^2), mu >= 0 by bisection (the objective is
    concave, so this KKT point is the maximum; any feasible x gives a valid bound)."""

    def fill(mu):
        return np.minimum(4.0 / 9.0, (np.maximum(1.0 - mu * cost, 0.0) / 1.5) ** 2)

    if float(fill(0.0) @ cost) <= total:
        return fill(0.0)
    positive = cost[cost > 0]
    lo, hi = 0.0, 1.0 / float(positive.min())  # at hi every costly coordinate is off
    for _ in range(200):
        mid = (lo + hi) / 2
        if float(fill(mid) @ cost) > total:
            lo = mid
        else:
            hi = mid
    return fill(hi)


def local_lower_bound(model: GaussianMixture, sizes: Sequence[int], slack: float = 0.1,
                      radius: Optional[float] = None, source: float = 0.0,
                      reach: float = 0.5) -> LocalBound:
    """Lower bound on inf_w-hat sup_(P in U) E[R(w-hat) - R_B] from N samples over a
    neighbourhood U of ``model`` itself: mixtures with its Sigma, eta and snr, whitened means
    within angle arcsin(``reach``) of the model's mu~_0, in the class F(R, r) of
    :func:`nonparametric_lower_bound` with R = ``radius``, default (1 + ``slack``) R_0,
    R_0 = :func:`class_radius` (r = ``source``).

    The cube. On the free coordinates (mu~_0j = 0) mu~_v = s mu~_0 + sum_j v_j beta_j e_j,
    v in {+-1}^J, s^2 = 1 - sum beta_j^2 / snr^2 (snr fixed, every vertex at one angle
    arcsin(sqrt(sum beta^2) / snr) from the model). The ellipsoid holds it iff
    sum_j beta_j^2 (c_j - c0) <= B, c_j = lambda_j^-(1 + 2r), c0 = R_0^2 / snr^2 (the model's
    mean cost), B = R^2 - R_0^2: a neighbourhood of the model on its boundary costs the
    excess c_j - c0 of a coordinate over the model's own.

    Separation. The excess of w is G(1 - cos theta_v), theta_v the angle between u =
    Sigma^1/2 w / |.| and mu~_v; 1 - cos theta_v = |u - mu~_v / snr|^2 / 2, and a coordinate
    moves the Bayes direction by beta_j / snr, so 1 - cos theta_v >=
    sum_(j: sign u_j != v_j) beta_j^2 / (2 snr^2): near the model the excess is quadratic in
    the perturbation, G >= alpha_j per wrong sign, alpha_j = G'(0) beta_j^2 / (2 snr^2)
    (:func:`excess_slope`). Neighbours in coordinate j are 2 beta_j^2 apart in one sample's
    KL, so by Pinsker and Assouad with weights (x_j = N beta_j^2)

        bound = G'(0) / (4 snr^2 N) max_x sum_j x_j (1 - sqrt(x_j)),
        0 <= x_j <= 4/9,  sum_j x_j (c_j - c0) <= N B,

    solved by water filling x_j = min(4/9, ((1 - mu (c_j - c0))_+ / 1.5)^2) (each
    coordinate resolved at N beta_j^2 ~ const, as far as the budget reaches); where
    sum beta^2 > reach^2 snr^2 all x shrink by one factor.

    Rate. The neighbourhood holds the ellipsoid sum beta_j^2 (c_j - c0) <= B on the free
    coordinates, of the class's own shape: for lambda_j = j^-a the window reaches
    J ~ (N B)^(1 / (ap + 1)) and the bound falls like N^-(ap / (ap + 1)), for
    lambda_j = e^(-a (j - 1)) J ~ log(N B) / (ap) and it falls like log N / N
    (:func:`nonparametric_rate`, p = 1 + 2r): a fixed neighbourhood has the class's rate. At
    finite d and N the fitted exponent depends on B (smaller slack: fewer coordinates, a
    flatter bound) and turns to 1 once every free coordinate is in.

    References: Buna, Liu, Rebeschini, early stopping of logistic GD under label-flip noise;
    Tsybakov (2009), Lemmas 2.5 and 2.12; local minimax: Hajek (1972), Le Cam (1986), Cai &
    Low (2015), "A framework for estimation of convex functions"."""
    lam, whitened, snr = _parts(model)
    sizes = np.asarray(sorted(int(n) for n in sizes))
    free = whitened == 0
    if sizes.size == 0 or sizes[0] < 1 or not free.any():
        raise ShapeError(f"local bound: needs sizes >= 1 and a free coordinate (mu~_j = 0); "
                         f"got sizes {list(sizes)}, {int(free.sum())} free of d = {lam.size}; "
                         f"give positive sizes and a model whose support is smaller than d")
    if not (0 < reach <= 1 and slack >= 0):
        raise ArgumentError(f"local bound: reach {reach:g} must lie in (0, 1] and slack "
                            f"{slack:g} be >= 0; give a reach in (0, 1] and a slack >= 0")
    p = 1 + 2 * float(source)
    if not p > 0:
        raise ArgumentError(f"local bound: source {source:g} <= -1/2 is no ellipsoid; give a "
                            f"source above -1/2")
    R0 = class_radius(model, source)
    R = R0 * (1 + float(slack)) if radius is None else float(radius)
    if R < R0 * (1 - 1e-12):
        raise ArgumentError(f"local bound: radius {R:.6g} < the model's {R0:.6g}: the class "
                            f"misses the model; give a radius >= class_radius(model)")
    cost = lam[free] ** -p - R0 * R0 / (snr * snr)
    order = np.argsort(-lam, kind="stable")
    rank = np.empty(lam.size, int)
    rank[order] = np.arange(1, lam.size + 1)
    slope = excess_slope(snr, model.flip)
    out, amps, counts, lasts, reaches = [], [], [], [], []
    for n in sizes:
        x = _water_fill(cost, n * max(R * R - R0 * R0, 0.0))
        x *= min(1.0, n * reach * reach * snr * snr / max(float(x.sum()), 1e-300))
        out.append(slope * float(np.sum(x * (1 - np.sqrt(x)))) / (4 * snr * snr * n))
        beta2 = np.zeros(lam.size)
        beta2[free] = x / n
        on = beta2 > 0
        amps.append(beta2)
        counts.append(int(on.sum()))
        lasts.append(int(rank[on].max()) if on.any() else 0)
        reaches.append(math.sqrt(float(beta2.sum())) / snr)
    bound = np.array(out)
    rate = (power_law_fit(sizes, bound, sizes[0], sizes[-1])
            if int(np.sum(bound > 0)) >= 3 else None)
    return LocalBound(snr=snr, flip=float(model.flip), radius=R, model_radius=R0,
                      source=float(source), d=int(lam.size), sizes=sizes, bound=bound,
                      amplitudes=np.array(amps), count=np.array(counts), last=np.array(lasts),
                      reach=np.array(reaches), rate=rate)


def local_means(model: GaussianMixture, amplitudes: ArrayLike,
                signs: ArrayLike) -> NDArray[np.float64]:
    """The hypotheses of :func:`local_lower_bound`: for each row v of ``signs`` (shape (M, d),
    read where ``amplitudes`` beta_j^2 > 0) the mean mu = Sigma^1/2 mu~_v, mu~_v = s mu~_0 +
    sum_j v_j beta_j e_j, s^2 = 1 - sum beta_j^2 / snr^2 (snr fixed). Returns (M, d). Buna,
    Liu, Rebeschini; Tsybakov (2009), Lemma 2.12."""
    lam, whitened, snr = _parts(model)
    beta2 = np.asarray(amplitudes, float)
    v = np.atleast_2d(np.asarray(signs, float))
    if (beta2.shape != lam.shape or v.shape[1] != lam.size or np.any(beta2 < 0)
            or np.any(beta2[whitened != 0] > 0) or not beta2.sum() < snr * snr):
        raise ShapeError(f"local means: need amplitudes of shape ({lam.size},), >= 0, zero on "
                         f"the model's support, summing below snr^2 = {snr * snr:g}, and signs "
                         f"of shape (M, {lam.size}); got {beta2.shape}, {v.shape}; give the "
                         f"rows of LocalBound.amplitudes")
    s = math.sqrt(1 - float(beta2.sum()) / (snr * snr))
    means = s * whitened + np.sign(v) * np.sqrt(beta2)
    return means * np.sqrt(lam)
