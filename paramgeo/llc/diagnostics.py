"""Diagnostics of the LLC estimator (:func:`paramgeo.llc.estimate_llc`). Before sampling: the
curvature of L_n at w* against the localization gamma (:func:`localization_check`, with the
fraction :func:`retained` of a quadratic direction that the slope estimate reads) and the
relaxation time of the least curved direction at the sampler's step (:func:`mixing_check`).
After sampling: the effective sample size and R-hat of the chains
(:func:`effective_sample_size`) and the notes on drifting or disagreeing chains
(:func:`chain_notes`), and the data-set standard error (:func:`data_set_se`). And the slope's
weights (:func:`slope_weights`) both use."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ._sampler import curvature_spectrum

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization
    from ..losses.predictor import Loss


def slope_weights(nbetas: ArrayLike) -> Any:
    """Weights c_k with lambda_hat = sum_k c_k lambda_k, lambda_k = n beta_k (E_k[L_n] -
    L_n(w*)) the single-temperature estimates: the least-squares slope of
    y_k = lambda_k / (n beta_k) against x_k = 1 / (n beta_k), c_k = (x_k - mean x) /
    (n beta_k sum_j (x_j - mean x)^2); one temperature gives c = (1,)."""
    nbetas = np.asarray(nbetas, float)
    if nbetas.size == 1:
        return (1.0,)
    x = 1.0 / nbetas
    dx = x - x.mean()
    return tuple(float(c) for c in dx / (nbetas * float(dx @ dx)))


#: the fraction of the quadratic prediction the localization may take before the pre-check
#: warns, and the one its suggested gamma keeps
LOCALIZATION_LOSS, SUGGESTED_LOSS = 0.10, 0.05

#: directions with n beta h below gamma times this are flat at this n beta (not counted)
FLAT = 1e-3


def retained(a: ArrayLike, temps: ArrayLike) -> NDArray[np.float64]:
    """The fraction of a quadratic direction's 1/2 that the estimator reads: a direction of
    curvature h (L_n ~ L_n(w*) + h x^2 / 2) under exp(-n beta_k L_n - gamma x^2 / 2) has
    E_k[L_n - L_n(w*)] = h / (2 (n beta_k h + gamma)), so lambda_k = n beta_k E_k[...] =
    a t_k / (2 (a t_k + 1)) with a = n beta h / gamma and n beta_k = t_k n beta, and the slope
    estimate sum_k c_k lambda_k (:func:`slope_weights`) is r(a) / 2 with
    r(a) = sum_k c_k t_k n beta a / (a t_k + 1) (r -> 1 as a -> infinity, since sum c_k = 1).
    For temperatures (1/2, 2): r(1) = 0.22, r(10) = 0.79, r(100) = 0.975."""
    a = np.asarray(a, float)[..., None]
    t = np.asarray(temps, float)
    c = np.asarray(slope_weights(t), float)
    return np.sum(c * a * t / (a * t + 1.0), axis=-1)


def mixing_check(check: dict, eps: Sequence[float], temps: Sequence[float], nbeta: float,
                 gamma: float, burn: int, sampler: str) -> list[str]:
    """The relaxation time of the slowest direction: a Langevin chain of step eps_k on a
    direction of curvature kappa_k = t_k n beta h + gamma forgets its start like
    (1 - eps_k kappa_k / 2)^t, in about 2 / (eps_k kappa_k) steps; the slowest direction is the
    least curved of the curved directions (flat ones, symmetry orbits among them, leave the
    loss unchanged; their wandering shows as drift after sampling). SGLD
    keeps the steps ``eps``; MALA adapts its step, but stays below 2 / kappa_top (beyond it
    the steepest direction is unstable), so its relaxation time is at least kappa_top /
    kappa_slow. Sets ``relaxation`` (steps; a lower bound for MALA) and ``mixing_gamma`` (the
    gamma that brings it to a third of the burn-in) in ``check``; returns a warning where it
    exceeds the burn-in."""
    h, top = check["slowest"], check["top"]
    if not math.isfinite(h):  # no curved direction: nothing the loss resolves to relax
        return []
    if sampler == "mala":
        eps = [2.0 / (t * top + gamma) for t in temps]
    tau = max(2.0 / (e * (t * h + gamma)) for e, t in zip(eps, temps))
    need = max(6.0 / (e * max(burn, 1)) - t * h for e, t in zip(eps, temps))
    check.update(relaxation=float(tau), mixing_gamma=float(max(need, gamma)))
    if tau <= burn:
        return []
    note = (f"mixing-bound: the least curved direction (n beta h = {h:.3g}) relaxes in "
            f"{'at least ' if sampler == 'mala' else ''}about {tau:.3g} steps (the step is "
            f"bounded by the largest curvature, n beta h = {top:.3g}), longer than the burn-in "
            f"of {burn}; run a burn-in of {3 * tau:.3g} steps or more, or raise gamma to "
            f"{need:.3g}")
    if 0 < h and check["suggested_gamma"] < check["gamma"] and need > check["suggested_gamma"]:
        note += (f"; no gamma is both below {check['suggested_gamma']:.3g} (localization) and "
                 f"above {need:.3g} (mixing) at this n: the curvatures span a ratio "
                 f"{top / h:.3g}, so only more samples (n beta h grows against gamma) or far "
                 "longer chains make the estimate reliable")
    return [note]


def localization_check(batch: Any, w_star: NDArray[np.float64], nbeta: float, gamma: float,
                       temps: Sequence[float], rng: np.random.Generator,
                       mask: Optional[NDArray[np.bool_]] = None,
                       k: int = 64) -> tuple[dict, list[str]]:
    """Before sampling: the spectrum of the Hessian H of L_n at w* (Lanczos on Hessian-vector
    products, central differences of the gradient,
    :func:`~paramgeo.llc._sampler.curvature_spectrum`; on the free coordinates of ``mask``)
    against the localization gamma.
    In the quadratic (Laplace) approximation each direction of curvature h contributes
    r(n beta h / gamma) / 2 to the estimate (:func:`retained`), where the learning coefficient
    counts 1/2: where gamma is comparable to n beta h the estimator measures the localizing
    prior, not the loss. Returns (numbers, warnings): ``top`` and ``bottom`` n beta h (largest
    and smallest), ``curved`` (the number of directions with n beta h >= FLAT gamma) and
    ``flat`` (the rest: singular directions, or curvatures below what any gamma resolves at
    this n beta), ``quadratic`` = sum of r / 2 over the curved ones and ``unlocalized`` =
    curved / 2 (the same without localization), ``suggested_gamma`` the largest gamma whose
    quadratic prediction keeps 1 - SUGGESTED_LOSS of ``unlocalized``. A warning says when the
    prediction loses more than LOCALIZATION_LOSS of it, and what to change."""
    free = np.arange(w_star.size) if mask is None else np.flatnonzero(mask)
    step = 1e-5 * (1.0 + float(np.max(np.abs(w_star))))

    def hvp(v):
        d = np.zeros(w_star.size)
        d[free] = v
        _, G = batch(np.stack([w_star + step * d, w_star - step * d]))
        return (np.asarray(G[0]) - np.asarray(G[1]))[free] / (2 * step)

    with np.errstate(over="ignore", invalid="ignore"):
        theta, count = curvature_spectrum(hvp, free.size, rng, k)
    if not np.all(np.isfinite(theta)):
        return {}, ["the loss's curvature at w* is not finite; check that the loss is finite "
                    "and differentiable near w*"]
    a = nbeta * theta / gamma
    curved = a >= FLAT
    n_curved = float(count[curved].sum())
    quad = float(np.sum(count[curved] * retained(a[curved], temps)) / 2)
    ideal = n_curved / 2
    out = dict(top=float(nbeta * theta.max()), bottom=float(nbeta * theta.min()),
               slowest=float(nbeta * theta[curved].min()) if curved.any() else math.nan,
               gamma=float(gamma), curved=n_curved, flat=float(count[~curved].sum()),
               quadratic=quad, unlocalized=ideal, suggested_gamma=float(gamma),
               exact_spectrum=bool(np.all(count == 1)))
    notes = []
    if nbeta * theta.min() < -FLAT * gamma and nbeta * theta.min() < -1e-6 * out["top"]:
        notes.append(f"the loss curves downwards at w* (smallest n beta h = {out['bottom']:.3g}):"
                     " w* is not a local minimum; minimise the loss first (the estimate "
                     "assumes a minimum)")
    if ideal > 0 and quad < (1 - LOCALIZATION_LOSS) * ideal:
        lo, hi = math.log(gamma) - 40.0, math.log(gamma)
        for _ in range(60):  # the largest gamma that keeps 1 - SUGGESTED_LOSS
            mid = 0.5 * (lo + hi)
            kept = float(np.sum(count[curved] * retained(nbeta * theta[curved] / math.exp(mid),
                                                          temps)) / 2)
            lo, hi = (lo, mid) if kept < (1 - SUGGESTED_LOSS) * ideal else (mid, hi)
        out["suggested_gamma"] = math.exp(lo)
        bound = int(np.sum(count[curved][a[curved] < 100]))
        notes.append(
            f"localization-bound: gamma = {gamma:g} is not small against n beta h along "
            f"{bound} of the {n_curved:.0f} curved directions (n beta h from "
            f"{nbeta * theta[curved].min():.3g} to {out['top']:.3g}), so the estimate will read "
            f"about {quad:.3g} where those directions alone give {ideal:.3g} (the quadratic "
            f"approximation at w*); lower gamma to {out['suggested_gamma']:.3g} (keeps 95%) or "
            "give more samples (n beta grows with n), and watch for drift warnings, which a "
            "weaker localization makes more likely. In a singular model the least curved of "
            "these may be singular directions whose 1/2 is not due (then a 4 times larger "
            "gamma changes the estimate little)")
    return out, notes


def effective_sample_size(x: ArrayLike) -> tuple[float, float]:
    """(ESS, split R-hat) of draws x (chains x draws): Gelman et al. (2013), BDA3 Sec. 11.5.
    var+ = (n - 1)/n W + B/n from the within-chain variance W and between-chain variance B;
    rho_t = 1 - (W - mean_chains acov_t) / var+; ESS = m n / (1 + 2 sum_t rho_t) with the sum
    cut by Geyer's initial positive, monotone sequence of pair sums rho_{2k} + rho_{2k+1}."""
    x = np.asarray(x, float)
    m, n = x.shape
    if n < 4:
        return float("nan"), float("nan")
    means = x.mean(axis=1)
    W = float(x.var(axis=1, ddof=1).mean())
    B = n * float(means.var(ddof=1)) if m > 1 else 0.0
    var_plus = (n - 1) / n * W + B / n
    if not var_plus > 0:
        return float(m * n), 1.0
    xc = x - means[:, None]
    f = np.fft.rfft(xc, 2 * n, axis=1)
    acov = np.fft.irfft(f * np.conj(f), axis=1)[:, :n] / n
    rho = 1.0 - (W - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    total, prev = 0.0, math.inf
    for t in range(0, n - 1, 2):
        pair = rho[t] + rho[t + 1]
        if pair < 0:
            break
        prev = min(prev, pair)
        total += prev
    tau = max(-1.0 + 2.0 * total, 1.0 / math.log10(max(m * n, 10)))
    half = n // 2
    split = np.concatenate([x[:, :half], x[:, n - half:]])
    sm = split.mean(axis=1)
    sW = float(split.var(axis=1, ddof=1).mean())
    sB = half * float(sm.var(ddof=1))
    rhat = math.sqrt(((half - 1) / half * sW + sB / half) / sW) if sW > 0 else 1.0
    return float(m * n / tau), rhat


def chain_notes(post: NDArray[np.float64], good: Sequence[int], llc: float, se: float,
                rhat: float) -> list[str]:
    """Notes on the kept traces ``post`` (chains x draws) of the chains ``good``: a chain whose
    first and last thirds differ by more than 4 rough standard errors drifts; R-hat above 1.1;
    an estimate below -2 s.e. (w* not a minimum). Each says what to do."""
    notes = []
    draws = post.shape[1]
    third = max(draws // 3, 2)
    for k, trace in zip(good, post):
        first, last = trace[:third], trace[-third:]
        spread = math.sqrt((first.var() + last.var()) / third) * 4  # rough autocorrelated s.e.
        if spread > 0 and abs(last.mean() - first.mean()) > 4 * spread:
            notes.append(f"chain {k} drifts: mean {first.mean():.4g} in its first third of "
                         f"draws, {last.mean():.4g} in its last; run longer or raise gamma")
    if rhat > 1.1:
        notes.append(f"chains disagree (R-hat {rhat:.3f} > 1.1); run longer (more draws or "
                     "burn-in) or check that w* is a local minimum")
    if llc < -2 * se:
        notes.append(f"negative estimate {llc:.4g}: the chains found loss below L_n(w*); w* is "
                     "not a local minimum of the loss (minimise first)")
    return notes


def data_set_se(param: Parameterization, loss: Loss, states: NDArray[np.float64],
                losses: NDArray[np.float64], nbetas: Sequence[float], weights: Sequence[float],
                f_star: Any) -> float:
    """The data-set standard error of lambda_hat = sum_k c_k n beta_k (E_k[L_n] - L_n(w*))
    (``weights`` c_k) by the infinitesimal jackknife, the linearised bootstrap over samples
    (Jaeckel 1972; Efron 1982, "The jackknife, the bootstrap and other resampling plans",
    Ch. 6; for posterior means Giordano and Broderick 2023, "The Bayesian infinitesimal
    jackknife for variance"). With sample weights omega_i, L_n = (1/N) sum_i omega_i ell_i and
    the posterior exp(-n beta_k L_n) p(w), d E_k[L_n] / d omega_i = (E_k[ell_i]
    - n beta_k Cov_k(ell_i, L_n)) / N and d L_n(w*) / d omega_i = ell_i(w*) / N (w* a
    minimum), so psi_i = d lambda_hat / d omega_i = <Phi_i, v> / N with
    v = sum_k c_k n beta_k (E_k[f] - n beta_k Cov_k(f, L_n) - f(w*)) in the loss's
    per-sample features ell_i = c_i + <Phi_i, f> (``Loss.sample_features``), and
    Var = sum_i (psi_i - mean psi)^2. The posterior moments come from ``states`` (temperatures
    x chains x draws x n, their losses ``losses``); Monte Carlo noise in v would inflate the
    sum of squares, so Var is the mean over pairs of distinct chains g != h of the cross
    products sum_i psi_i^(g) psi_i^(h), psi^(g) from chain g alone (independent chains: an
    unbiased U-statistic; the two halves of the draws stand for two chains when there is one),
    clipped at 0. Not covered: the
    localization centre w* moving with the data set. Returns nan where the loss has no
    features."""
    T, C, D, n = states.shape
    rows = states.reshape(-1, n)
    if param.provides("batched_vjp"):
        phis = np.concatenate([np.reshape(param.batched_vjp(rows[i:i + 4096])[0],
                                          (len(rows[i:i + 4096]), -1))
                               for i in range(0, len(rows), 4096)])
    else:
        phis = np.array([np.asarray(param.forward_flat(r), float) for r in rows])
    f = loss.sample_features(phis)
    if f is None:
        return math.nan
    f = f.reshape(T, C, D, -1)
    if C == 1:  # the two halves of the draws stand for two chains
        f = f[:, :, :D - D % 2].reshape(T, 2, D // 2, -1)
        losses = losses[:, :, :D - D % 2].reshape(T, 2, D // 2)
    v: Any = 0.0  # one v per chain: (chains, F)
    for k, (nb, c) in enumerate(zip(nbetas, weights)):
        fc = f[k] - f[k].mean(axis=1, keepdims=True)
        Lc = losses[k] - losses[k].mean(axis=1, keepdims=True)
        cov = np.einsum("gdf,gd->gf", fc, Lc) / Lc.shape[1]
        v = v + c * nb * (f[k].mean(axis=1) - nb * cov - f_star)
    psi = np.array([loss.sample_pairing(vg) for vg in v]) / loss.N
    psi -= psi.mean(axis=1, keepdims=True)
    G = len(psi)
    total = psi.sum(axis=0)
    cross = (float(total @ total) - float(np.einsum("gi,gi->", psi, psi))) / (G * (G - 1))
    return math.sqrt(max(cross, 0.0))
