"""The SGD noise (order eta^2) on the plateau and the escape of one tied |h| head, in the limit
d -> infinity at fixed eta and time t = n / d^2 (Xu, Sagitova, Zdeborova, "Attention-indexed
models"; the leading order in eta is :func:`paramgeo.flows.escape_rate`).

One sample x ~ N(0, I_d) moves the factor of S = a W W^T, a = 1 / sqrt(r d), by
W <- (I - 2 eta a G) W with G = E (x x^T - I) / sqrt(d), E = (|h| - |h*|) sign(h) (the step of
:func:`paramgeo.flows.multihead_sgd`), so exactly

    S <- S - 2 eta a (G S + S G) + 4 eta^2 a^2 G S G.

With m_p = Tr S^p / d, c_p = Tr(S^p S*) / d (c_1 = M, the overlap; m_0 = 1, c_0 = 0 for the
centered teacher) and d^2 samples per unit t, the mean of the first term is the mean flow of
:func:`escape_rate`; the second term and the square of the first leave, as d -> infinity, the
drift (:func:`noise_drift`; E2 = E[E^2] = 2 (Q + P - (4 / pi) sqrt(QP) F(rho)), y = r / d)

    dm_p/dt |noise = (4 eta^2 E2 / y) [p m_1 m_{p-1} + sum_{l=0}^{p-2} (p-1-l)
                     (2 m_{l+1} m_{p-1-l} + m_{l+2} m_{p-2-l} + m_l m_{p-l})],

and dc_p/dt |noise the same with c in place of the second factor of each product
(m_{p-1} -> c_{p-1}, m_{p-1-l} -> c_{p-1-l}, ...). Every term is O(1): the |x|^4 of the step's
square (x^T S x ~ d tau) cancels the 1 / d^2 of a^2. The overlap has no noise term
(dc_1/dt |noise = tau c_0 = 0), so exactly, to first order in M,

    dM/dt = (16 eta / (pi sqrt y)) sqrt(P / Q) tau M - (16 eta / sqrt y) L_Q c_2,
    L_Q = 1/2 - sqrt(P / Q) / pi:

the noise acts through the plateau it sets. The drift of Q = m_2 is -(32 eta / sqrt y) L_Q m_3
+ (4 eta^2 E2 / y) (2 Q + 4 tau^2), which no longer vanishes at L_Q = 0: the plateau lies above
Q = 4 P / pi^2, where L_Q > 0 and the second term of dM/dt slows the escape.

The hierarchy is the moment form of a particle system for the r nonzero eigenvalues f_i of S
and the overlaps nu_i = u_i^T S* u_i of their eigenvectors (nu_0 for the null space; weights
w = y / n for n particles; H_i = w sum_{j != i} f_j / (f_i - f_j)):

    df_i/dt  = -(16 eta / sqrt y) L_Q f_i^2 + (4 eta^2 E2 / y) f_i (1 + 4 H_i),
    dnu_i/dt = (16 eta / (pi sqrt y)) sqrt(P / Q) M (1 + 2 H_i)
               + (4 eta^2 E2 / y) [w sum_j ((f_i + f_j) / (f_i - f_j))^2 (nu_j - nu_i)
                                   + (1 - y) (nu_0 - nu_i)],
    dnu_0/dt = -(16 eta / (pi sqrt y)) sqrt(P / Q) y M + (4 eta^2 E2 / y) w sum_j (nu_j - nu_0),

which :func:`noisy_escape` integrates from the Marchenko-Pastur start. The noise spreads the
spectrum (as f -> 0, f'/f -> -(4 eta^2 E2 / y)(4 y - 1)), so for y > 1/4 there is no stationary
plateau: Q and tau keep drifting slowly, and the growth rate of the overlap is reported along the
way. At finite d the overlap has a further drift, of order eta / d and present at M = 0, from
the fourth and squared third cumulants of the indices' law (:func:`finite_d_drift`).
References: Xu, Sagitova, Zdeborova, "Attention-indexed models" (tied S, online SGD, weak
recovery with Theta(d^2 log d) samples); Ben Arous, Gheissari, Jagannath (2021) (information
exponent 2); Saad, Solla (1995) (order parameters of online learning).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ParamgeoError, ShapeError
from ..linalg.numerics import as_rng
from ..results import Result, to_jsonable
from .multihead import EscapeRate, MultiHeadTeacher, escape_rate

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray


def residual_power(Q: float, M: float = 0.0, P: float = 1.0, noise: float = 0.0) -> float:
    """E2 = E[(|h| - |h*|)^2] + sigma^2 for Gaussian indices with Var h = 2 Q, Var h* = 2 P,
    Cov = 2 M: 2 (Q + P - (4 / pi) sqrt(QP) F(rho)), F(rho) = sqrt(1 - rho^2) + rho arcsin rho,
    rho = M / sqrt(QP) (twice the population loss of :func:`escape_rate`), plus the label
    noise variance sigma^2 = ``noise``^2. It sets the size of the SGD noise, 4 eta^2 E2 / y.
    Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models"."""
    if not (Q > 0 and P > 0):
        raise ParamgeoError(f"residual_power needs Q > 0 and P > 0, got Q = {Q}, P = {P}")
    rho = max(-1.0, min(1.0, M / math.sqrt(Q * P)))
    F = math.sqrt(1 - rho * rho) + rho * math.asin(rho)
    return 2.0 * (Q + P - 4.0 / math.pi * math.sqrt(Q * P) * F) + noise * noise


def noise_drift(moments: ArrayLike, overlaps: ArrayLike, eta: float, ratio: float,
                residual: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The order-eta^2 drift per unit t = n / d^2, as d -> infinity, of m_p = Tr S^p / d and
    c_p = Tr(S^p S*) / d for p = 1..K (module docstring): with m_0 = 1, c_0 = 0 and
    B = 4 eta^2 E2 / y (E2 = ``residual``, see :func:`residual_power`; y = ``ratio``),

        dm_p = B [p m_1 m_{p-1} + sum_{l=0}^{p-2} (p-1-l) (2 m_{l+1} m_{p-1-l}
                  + m_{l+2} m_{p-2-l} + m_l m_{p-l})],

    dc_p the same with the second factor of each product an overlap (c_{p-1}, c_{p-1-l},
    c_{p-2-l}, c_{p-l}). ``moments`` = (m_1..m_K), ``overlaps`` = (c_1..c_K). Returns
    (dm, dc), each of length K. Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models"
    (the online SGD of tied S); the per-sample step of :func:`paramgeo.flows.multihead_sgd`."""
    m = np.concatenate([[1.0], np.asarray(moments, float).ravel()])
    c = np.concatenate([[0.0], np.asarray(overlaps, float).ravel()])
    if len(m) != len(c) or len(m) < 2:
        raise ShapeError("moments and overlaps must have the same length K >= 1")
    if not (0 < ratio <= 1 and eta > 0):
        raise ParamgeoError(f"noise_drift needs eta > 0 and 0 < ratio <= 1, got {eta}, {ratio}")
    B = 4.0 * eta * eta * residual / ratio
    K = len(m) - 1

    def drift(second):
        out = np.empty(K)
        for p in range(1, K + 1):
            s = p * m[1] * second[p - 1]
            for l in range(p - 1):
                s += (p - 1 - l) * (2 * m[l + 1] * second[p - 1 - l]
                                    + m[l + 2] * second[p - 2 - l] + m[l] * second[p - l])
            out[p - 1] = B * s
        return out

    return drift(m), drift(c)


def particle_drift(f: ArrayLike, nu: ArrayLike, nu0: float, eta: float, ratio: float,
                   P: float = 1.0, noise: bool = True) -> tuple[NDArray[np.float64], ...]:
    """The right-hand side of the particle system of the module docstring for eigenvalues
    ``f`` (n particles of weight y / n), their overlaps ``nu`` and the null space's ``nu0``:
    returns (df/dt, dnu/dt, dnu0/dt) (``noise`` False: the mean flow alone, to leading order in
    eta). Linear in the overlaps (M = w sum f nu), as on the plateau before the escape.
    Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models"; :func:`noise_drift` is its
    moment form."""
    f = np.asarray(f, float)
    V = np.asarray(nu, float)
    return _rhs(f, V.reshape(len(f), -1), np.atleast_1d(np.asarray(nu0, float)), eta, ratio,
                P, noise)[:3]


def _rhs(f, V, V0, eta, y, P, noise):
    n = len(f)
    w = y / n
    D = f[:, None] - f[None, :]
    np.fill_diagonal(D, np.inf)
    H = w * (f[None, :] / D).sum(axis=1)
    tau, Q = w * f.sum(), w * (f * f).sum()
    LQ = 0.5 - math.sqrt(P / Q) / math.pi
    E2 = residual_power(Q, 0.0, P)
    B = 4 * eta * eta * E2 / y if noise else 0.0
    A = 16 * eta / (math.pi * math.sqrt(y)) * math.sqrt(P / Q)
    fd = -16 * eta / math.sqrt(y) * LQ * f * f + B * f * (1 + 4 * H)
    M = w * (f @ V)
    Kw = w * ((f[:, None] + f[None, :]) / D) ** 2
    mix = Kw @ V - Kw.sum(axis=1)[:, None] * V + (1 - y) * (V0[None, :] - V)
    Vd = A * (1 + 2 * H)[:, None] * M[None, :] + B * mix
    V0d = -A * y * M + B * (w * V.sum(axis=0) - y * V0)
    info = {"tau": tau, "Q": Q, "LQ": LQ, "E2": E2, "stiff": B * float(Kw.sum(axis=1).max())}
    return fd, Vd, V0d, info


def _mp_quantiles(y, n):
    """n equal-weight eigenvalues of the start S = W W^T / sqrt(r d): the Marchenko-Pastur law
    of ratio y, divided by sqrt(y), at the midpoints of n equal slices of its mass."""
    lo, hi = (1 - math.sqrt(y)) ** 2, (1 + math.sqrt(y)) ** 2
    x = np.linspace(lo, hi, 20001)
    dens = np.sqrt(np.maximum((hi - x) * (x - lo), 0.0)) / (2 * math.pi * y * x)
    cdf = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(x))])
    return np.interp((np.arange(n) + 0.5) / n, cdf / cdf[-1], x) / math.sqrt(y)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoisyEscape(Result):
    """The plateau and the escape of one tied |h| head with the SGD noise, d -> infinity
    (:func:`noisy_escape`): at the record times ``t``, the mean ``tau`` = Tr S / d, the norm
    ``norm`` = Q, L_Q, ``residual`` E2, the overlap profile ``c2_over_c1`` = c_2 / M, the log of
    the cosine's typical size from a random start (``log_cosine``, up to a constant) and its
    growth ``rate``; ``leading`` is :func:`escape_rate` at the same eta."""

    eta: float
    ratio: float
    noise: bool
    t: np.ndarray
    tau: np.ndarray
    norm: np.ndarray
    LQ: np.ndarray
    residual: np.ndarray
    c2_over_c1: np.ndarray
    log_cosine: np.ndarray
    rate: np.ndarray
    leading: EscapeRate

    def window_rate(self, t0: float, t1: float) -> float:
        """The least-squares slope of log C on t over the records with t0 <= t <= t1: the rate
        :func:`paramgeo.flows.overlap_growth` fits to runs whose cosine crosses its window
        between those times."""
        sel = (self.t >= t0) & (self.t <= t1)
        if sel.sum() < 2:
            raise ParamgeoError(f"fewer than 2 records in [{t0}, {t1}]; widen the window or "
                                f"lengthen the horizon (records up to t = {self.t[-1]:.3g})")
        return float(np.polyfit(self.t[sel], self.log_cosine[sel], 1)[0])

    def at(self, t: float) -> dict[str, float]:
        """The record nearest to time t, as a dict of floats."""
        k = int(np.argmin(np.abs(self.t - t)))
        return {n: float(getattr(self, n)[k]) for n in (
            "t", "tau", "norm", "LQ", "residual", "c2_over_c1", "rate")}

    def __str__(self):
        a, b = self.at(3.0), self.at(float(self.t[-1]))
        return (f"tied |h| head, eta = {self.eta:.3g}, r / d = {self.ratio:.3g}, "
                f"{'with' if self.noise else 'without'} SGD noise (d -> infinity): at t = "
                f"{a['t']:.3g} Tr S / d = {a['tau']:.4f}, Tr S^2 / d = {a['norm']:.4f}, "
                f"L_Q = {a['LQ']:.4f}, rate {a['rate']:.4f}; at t = {b['t']:.3g} "
                f"{b['tau']:.4f}, {b['norm']:.4f}, {b['LQ']:.4f}, rate {b['rate']:.4f} "
                f"(leading order {self.leading.rate:.4f})")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({k.name: getattr(self, k.name) for k in dataclasses.fields(self)})


def noisy_escape(eta: float, ratio: float = 0.5, *, horizon: float = 12.0,
                 particles: int = 200, dt: float = 0.004, noise: bool = True,
                 record_every: float = 0.1, probes: int = 16, seed: Any = 0) -> NoisyEscape:
    """Integrate the d -> infinity particle system of the module docstring for one tied |h|
    head (r / d = ``ratio`` = y, the centered Wishart teacher, P = 1) from the start
    S = W W^T / sqrt(r d) (``particles`` Marchenko-Pastur quantiles) to t = ``horizon``, with
    Heun steps of ``dt``: the spectrum with the SGD noise of order eta^2 (``noise`` False: the
    mean flow of :func:`escape_rate` alone), and the overlap linearised in M. The overlap starts
    from ``probes`` random profiles (i.i.d. nu_i, as for a random start) and log C is the log
    of their root mean square cosine C = M / sqrt((Q - tau^2) P); ``rate`` is d log C / dt.

    The growth rate obeys, exactly to first order in M,

        lambda = (16 eta / sqrt y) [tau sqrt(P / Q) / pi - L_Q c_2 / M]
                 - d log sqrt(Q - tau^2) / dt,

    which is :func:`escape_rate`'s 8 eta tau / sqrt y on its plateau (L_Q = 0, Q = 4 P / pi^2);
    the noise holds Q above 4 P / pi^2 (L_Q > 0) and slows the escape.
    Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models" (Theta(d^2 log d) weak
    recovery of tied S); Ben Arous, Gheissari, Jagannath (2021) (information exponent 2)."""
    y = float(ratio)
    if not (0 < y < 1 and math.isfinite(eta) and eta > 0):
        raise ParamgeoError(f"noisy_escape needs eta > 0 and 0 < ratio < 1, got {eta}, {ratio}")
    if not (horizon > 0 and dt > 0 and record_every >= dt and int(particles) >= 8
            and int(probes) >= 1):
        raise ParamgeoError("noisy_escape needs horizon > 0, 0 < dt <= record_every, "
                            "particles >= 8 and probes >= 1")
    P = 1.0
    n = int(particles)
    w = y / n
    f = _mp_quantiles(y, n)
    rng = as_rng(seed)
    V = rng.standard_normal((n, int(probes)))
    V0 = -(w * V.sum(axis=0)) / (1 - y)
    steps = int(round(horizon / dt))
    every = max(1, int(round(record_every / dt)))
    logscale = 0.0
    rec: dict[str, list] = {k: [] for k in ("t", "tau", "norm", "LQ", "residual", "c2", "logc")}
    for k in range(steps + 1):
        fd, Vd, V0d, info = _rhs(f, V, V0, eta, y, P, noise)
        if info["stiff"] * dt > 1.0:
            raise ParamgeoError(f"noisy_escape: dt = {dt:g} is too large for the noise's mixing "
                                f"of the overlaps; lower dt or particles")
        if k % every == 0:
            M = w * (f @ V)
            c2 = w * ((f * f) @ V)
            spread = max(info["Q"] - info["tau"] ** 2, 1e-300)
            rec["t"].append(k * dt)
            rec["tau"].append(info["tau"])
            rec["norm"].append(info["Q"])
            rec["LQ"].append(info["LQ"])
            rec["residual"].append(info["E2"])
            rec["c2"].append(float(M @ c2 / (M @ M)))
            rec["logc"].append(logscale + 0.5 * math.log(float(np.mean(M * M)) / (spread * P)))
        if k == steps:
            break
        f1, V1, V01 = f + dt * fd, V + dt * Vd, V0 + dt * V0d
        fd1, Vd1, V0d1, _ = _rhs(f1, V1, V01, eta, y, P, noise)
        f = f + 0.5 * dt * (fd + fd1)
        V = V + 0.5 * dt * (Vd + Vd1)
        V0 = V0 + 0.5 * dt * (V0d + V0d1)
        if not (np.all(np.isfinite(f)) and np.all(f > 0)):
            raise ParamgeoError(f"noisy_escape: the spectrum left (0, inf) at t = {k * dt:.3g}; "
                                f"lower dt")
        scale = float(np.sqrt(np.mean(V * V)))
        if scale > 1e3 or scale < 1e-3:
            V, V0, logscale = V / scale, V0 / scale, logscale + math.log(scale)
    t = np.asarray(rec["t"])
    logc = np.asarray(rec["logc"])
    return NoisyEscape(eta=float(eta), ratio=y, noise=bool(noise), t=t,
                       tau=np.asarray(rec["tau"]), norm=np.asarray(rec["norm"]),
                       LQ=np.asarray(rec["LQ"]), residual=np.asarray(rec["residual"]),
                       c2_over_c1=np.asarray(rec["c2"]), log_cosine=logc,
                       rate=np.gradient(logc, t), leading=escape_rate(eta, y))


def step_coefficients(W: ArrayLike, teacher: MultiHeadTeacher, samples: int = 20000,
                      rng: Any = None, chunk: int = 2000) -> dict[str, NDArray[np.float64]]:
    """Monte Carlo of one SGD step of a tied |h| head at the factor ``W`` (d x r; the first
    seed and head of ``teacher``, noise-free labels): the step W - eta dell/dW changes
    X in (tau, Q, c_1, c_2) = (Tr S / d, Tr S^2 / d, Tr S S* / d, Tr S^2 S* / d) by the
    polynomial eta a_1 + eta^2 a_2 + ... per sample; returns the means over ``samples`` fresh
    x of d^2 a_1 and d^2 a_2 (``first``, ``second``: the drift per unit t = n / d^2 of each order)
    with their standard errors (``first_se``, ``second_se``) and the mean E2 = E[E^2]
    (``residual``). Exact at finite d, from the step's closed form on v = W^T x, u = W^T S* x
    (the gradient of :func:`paramgeo.flows.multihead_loss_and_grad`); as d -> infinity
    ``second`` tends to :func:`noise_drift` (the corrections are O(1 / d)).
    Reference: Xu, Sagitova, Zdeborova, "Attention-indexed models"."""
    W = np.asarray(W, float)
    Ws = np.asarray(teacher.factors, float)[0, :, 0, :]
    d, r = W.shape
    if Ws.shape[0] != d or int(samples) < 2:
        raise ShapeError(f"W must be d x r with the teacher's d = {Ws.shape[0]}, samples >= 2")
    a, b = 1.0 / math.sqrt(r * d), teacher.scale
    mean_t = float(teacher.means[0, 0]) if teacher.centered else 0.0
    SW = b * (Ws @ (Ws.T @ W)) - mean_t * W
    G = W.T @ W
    K = a * G
    N = a * (W.T @ SW)
    WSW = W.T @ SW
    trG, trWSW, trKG, trGG = np.trace(G), np.trace(WSW), np.trace(K @ G), np.trace(G @ G)
    trKWSW, trGN, trGWSW = np.trace(K @ WSW), np.trace(G @ N), np.trace(G @ WSW)
    trS = b * float((Ws * Ws).sum()) - mean_t * d
    gen = as_rng(rng)
    sums = np.zeros((2, 2, 4))
    e2, done = 0.0, 0
    while done < int(samples):
        X = gen.standard_normal((min(chunk, int(samples) - done), d))
        V, U = X @ W, X @ SW
        h = (a * (V * V).sum(1) - a * trG) / math.sqrt(d)
        hs = (b * ((X @ Ws) ** 2).sum(1) - b * (Ws * Ws).sum()) / math.sqrt(d)
        if teacher.centered:
            hs = hs - mean_t * ((X * X).sum(1) - d) / math.sqrt(d)
        E = (np.abs(h) - np.abs(hs)) * np.sign(h)
        e = 2 * a / math.sqrt(d) * E
        x2, xs = (X * X).sum(1), hs * math.sqrt(d) + trS
        v2, uv = (V * V).sum(1), (U * V).sum(1)
        VG, VK, VN = V @ G, V @ K, V @ N
        vGv, vKv, vNv = (VG * V).sum(1), (VK * V).sum(1), (VN * V).sum(1)
        uKv, uGv = ((U @ K) * V).sum(1), ((U @ G) * V).sum(1)
        vWSWv = ((V @ WSW) * V).sum(1)
        # first order: K1 = -2 a e (v v^T - G), N1 = -a e (u v^T + v u^T - 2 W^T S* W)
        first = [-2 * a * e * (v2 - trG), -4 * a * e * (vKv - trKG), -2 * a * e * (uv - trWSW),
                 -2 * a * e * (uKv - trKWSW) - 2 * a * e * (vNv - trGN)]
        # second order: K2 = a e^2 ((|x|^2 - 2) v v^T + G), N2 = a e^2 (x^T S* x v v^T - u v^T
        # - v u^T + W^T S* W)
        ee = a * e * e
        trK2 = ee * ((x2 - 2) * v2 + trG)
        trK1sq = 4 * a * a * e * e * (v2 * v2 - 2 * vGv + trGG)
        trKK2 = ee * ((x2 - 2) * vKv + trKG)
        trN2 = ee * (xs * v2 - 2 * uv + trWSW)
        trKN2 = ee * (xs * vKv - 2 * uKv + trKWSW)
        trK1N1 = 2 * a * a * e * e * (2 * uv * v2 - 2 * vWSWv - 2 * uGv + 2 * trGWSW)
        trK2N = ee * ((x2 - 2) * vNv + trGN)
        second = [trK2, trK1sq + 2 * trKK2, trN2, trKN2 + trK1N1 + trK2N]
        for o, vals in enumerate((first, second)):
            for j, q in enumerate(vals):
                q = q * d  # (x / d) * d^2
                sums[o, 0, j] += q.sum()
                sums[o, 1, j] += (q * q).sum()
        e2 += float((E * E).sum())
        done += len(X)
    mean = sums[:, 0] / done
    se = np.sqrt(np.maximum(sums[:, 1] / done - mean ** 2, 0.0) / done)
    return {"first": mean[0], "second": mean[1], "first_se": se[0], "second_se": se[1],
            "residual": np.asarray(e2 / done)}


def _density_derivative(k, var):
    """The k-th derivative at 0 of the N(0, var) density: (-1)^k He_k(0) p(0) / var^(k/2)."""
    if k % 2:
        return 0.0
    he = (-1) ** (k // 2) * math.prod(range(1, k, 2))
    return (-1) ** k * he / math.sqrt(2 * math.pi * var) / var ** (k / 2)


def _residual_derivative(a, b, Q, P):
    """E[d^a/dh^a d^b/dh*^b E] for E = h - |h*| sign(h), h ~ N(0, 2Q), h* ~ N(0, 2P)
    independent (rho = 0), as distributions: d sign(h) = 2 delta(h), d^2 |h*| = 2 delta(h*)."""
    lin = 1.0 if (a, b) == (1, 0) else 0.0
    e_sign = 0.0 if a == 0 else 2 * (-1) ** (a - 1) * _density_derivative(a - 1, 2 * Q)
    if b == 0:
        e_abs = math.sqrt(2 * P) * math.sqrt(2 / math.pi)
    elif b == 1:
        e_abs = 0.0
    else:
        e_abs = 2 * (-1) ** b * _density_derivative(b - 2, 2 * P)
    return lin - e_abs * e_sign


def finite_d_drift(S: ArrayLike, S_star: ArrayLike, ratio: float) -> dict[str, float]:
    """The mean drift of the overlap M = Tr S S* / d per unit eta and unit t at finite d, for a
    tied |h| head at S (d x d, rank r = ``ratio`` d) and a traceless teacher S*:
    dM/dt = -(2 eta / sqrt y) E[E z], z = (x^T A x - Tr A) / sqrt(d), A = S S* + S* S. The
    Gaussian part (``gaussian``) is Cov(z, h) E[dE/dh] + Cov(z, h*) E[dE/dh*], the drift of
    :func:`noisy_escape`; the first corrections of the Edgeworth expansion of the law of
    (z, h, h*) are of order 1 / d and survive at M = 0 (the third-cumulant term vanishes there
    by parity):

        E[g] - E_G[g] = (1/24) sum kappa_ijkl E_G[d_ijkl g]
                        + (1/72) sum kappa_ijk kappa_lmn E_G[d_ijklmn g],     g = z E,

    summed over ordered indices in {z, h, h*}, with the joint cumulants of the quadratic forms
    kappa(x^T A_1 x, ..., x^T A_n x) = 2^(n-1) sum_{perm} Tr(A_1 A_p2 ... A_pn) (over the
    orderings of A_2..A_n) divided by d^(n/2), E_G Gaussian at rho = 0, Stein's lemma for the
    derivatives that miss z, and the distributional derivatives of sign and |.|. Returns the
    ``gaussian`` drift, the ``fourth`` and ``third_squared`` corrections and their ``total``,
    each as dM/dt per unit eta (the two corrections together are about 10 / d on the plateau,
    at M = 0 too: a push toward M > 0 of order eta / d, which :func:`noisy_escape`,
    d -> infinity, leaves out).
    Cost: about 100 products of d x d matrices. Reference: Xu, Sagitova, Zdeborova,
    "Attention-indexed models"; Kolassa (2006), "Series approximation methods in statistics"
    (multivariate Edgeworth series)."""
    import itertools

    S = np.asarray(S, float)
    Ss = np.asarray(S_star, float)
    d = S.shape[0]
    if S.shape != (d, d) or Ss.shape != (d, d) or not 0 < ratio <= 1:
        raise ShapeError("S and S_star must be d x d matrices and 0 < ratio <= 1")
    mats = (S @ Ss + Ss @ S, S, Ss)
    Q, P = float(np.trace(S @ S)) / d, float(np.trace(Ss @ Ss)) / d
    if Q <= 0 or P <= 0:
        raise ParamgeoError("finite_d_drift needs S != 0 and S_star != 0")
    words: dict[tuple, float] = {}

    def trace(word):
        if word not in words:
            m = mats[word[0]]
            for i in word[1:]:
                m = m @ mats[i]
            words[word] = float(np.trace(m))
        return words[word]

    cums: dict[tuple, float] = {}

    def cumulant(idx):
        key = tuple(sorted(idx))
        if key not in cums:
            n = len(key)
            tot = sum(trace((key[0],) + p) for p in itertools.permutations(key[1:]))
            cums[key] = 2 ** (n - 1) * tot / d ** (n / 2)
        return cums[key]

    cov_z = (2 * trace((0, 1)) / d, 2 * trace((0, 2)) / d)
    M = trace((1, 2)) / d
    rho = max(-1.0, min(1.0, M / math.sqrt(Q * P)))

    def expect(idx):
        nz, a, b = idx.count(0), idx.count(1), idx.count(2)
        if nz > 1:
            return 0.0
        if nz == 1:
            return _residual_derivative(a, b, Q, P)
        return (cov_z[0] * _residual_derivative(a + 1, b, Q, P)
                + cov_z[1] * _residual_derivative(a, b + 1, Q, P))

    fourth = sum(cumulant(i) * expect(i) for i in itertools.product(range(3), repeat=4)) / 24
    third = {i: cumulant(i) for i in itertools.product(range(3), repeat=3)}
    squared = sum(third[i] * third[j] * expect(i + j) for i in third for j in third) / 72
    LQ = 0.5 - math.sqrt(P * (1 - rho * rho) / Q) / math.pi
    gauss = cov_z[0] * 2 * LQ + cov_z[1] * (-2 / math.pi * math.asin(rho))
    f = -2.0 / math.sqrt(ratio)
    return {"gaussian": f * gauss, "fourth": f * fourth, "third_squared": f * squared,
            "total": f * (gauss + fourth + squared)}
