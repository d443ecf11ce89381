"""The Langevin kernels of the LLC estimator (:mod:`paramgeo.llc.estimate`): localized SGLD and
MALA chains advanced together as one (K, n) state, and the step size from the curvature of the
potential at w*.

For the potential U(w) = n beta L_n(w) + gamma |w - w*|^2 / 2 a step of size eps is

    SGLD:  w' = w - (eps / 2) grad U(w) + sqrt(eps) xi,   xi ~ N(0, I)
    MALA:  the same proposal p, accepted with probability
           min(1, exp(U(w) - U(p) - (|w - p + (eps/2) grad U(p)|^2 - |sqrt(eps) xi|^2) / (2 eps)))

(Welling and Teh 2011, "Bayesian learning via stochastic gradient Langevin dynamics"; Roberts
and Tweedie 1996, "Exponential convergence of Langevin distributions and their discrete
approximations", for MALA and its optimal acceptance 0.574).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray


def curvature(grad_U: Callable[[Any], Any], w: NDArray[np.float64], rng: np.random.Generator,
              iters: int = 12) -> float:
    """The largest eigenvalue of the Hessian of U at w (power iteration on central differences
    of grad U; the Hessian of a smooth potential is symmetric)."""
    v = rng.standard_normal(w.size)
    v /= np.linalg.norm(v)
    h = 1e-5 * (1.0 + np.max(np.abs(w)))
    est = 0.0
    for _ in range(iters):
        hv = (grad_U(w + h * v) - grad_U(w - h * v)) / (2 * h)
        norm = float(np.linalg.norm(hv))
        if not math.isfinite(norm) or norm == 0:
            break
        est = abs(float(v @ hv))
        v = hv / norm
    return max(est, norm if math.isfinite(norm) else 0.0)


def sample_chains(batches: Any, sampler: str, w_star: NDArray[np.float64], nbs: Any, eps: Any,
                  gamma: Any, L_star: float, burn: int, draws: int, rng: np.random.Generator,
                  progress: Any, keep: int = 0, keep_rows: Any = None, groups: int = 1,
                  pick: Optional[Callable[[], int]] = None, shift: Any = None, mask: Any = None,
                  burn_step: float = 1.0, grad_shift: Any = None,
                  normal: Any = None) -> dict[str, Any]:
    """Every chain from w*, all advanced together: row r of the (K, n) state samples
    exp(-nbs[r] L_n(w) - gamma[r] |w - w*|^2 / 2) with the step eps[r] (MALA adapts it every 50
    burn-in steps towards the acceptance 0.574). ``batches[b]`` maps the states to their losses
    and gradients on batch b in one call; every step uses the batch ``pick()`` (default: batch
    0, the full loss), the same for all chains, and adds ``shift[b]`` = L_n(w*) - L_b(w*) to
    its losses (a control variate: E_b[L_b(w) + shift[b]] = L_n(w) as E_b[L_b] = L_n, with the
    variance of L_b(w) - L_b(w*) instead of that of L_b(w)), and ``grad_shift[b]`` =
    grad L_n(w*) - grad L_b(w*) to its gradients (the same control variate for the gradient,
    Baker, Fearnhead, Fox and Nemeth 2019, "Control variates for stochastic gradient MCMC":
    unbiased, with the variance of grad L_b(w) - grad L_b(w*), small near w*; None: without
    it). ``mask`` (0/1 per coordinate)
    keeps the coordinates where it is 0 at w* (their gradient and noise are zeroed: the chain
    samples the conditional posterior of the others). Returns the traces nbs[r] (L_n(w_t) -
    L_n(w*)) (K x steps made; Ctrl-C after the burn-in ends the run early), the final steps,
    the acceptance rates after burn-in, the step at which each row blew up (-1: never; such a
    row is reset to w* and its trace is NaN from there), whether Ctrl-C stopped it, and up to
    ``keep`` states of each of the first ``keep_rows`` rows (default: all) after burn-in,
    evenly thinned (``states``, keep_rows x kept x n; ``kept_at``, their steps). ``groups`` >
    1: the rows are that many blocks of equal size that share their random numbers (row r of
    every block draws the same Gaussian and uniform numbers: common random numbers, so that the
    blocks' differences are not blurred by independent noise). ``burn_step``: SGLD runs its
    burn-in at ``burn_step`` times the steps eps (then eps for the draws). ``normal(shape)``:
    the source of the Gaussian numbers (default ``rng.standard_normal``).
    """
    K, total = len(nbs), burn + draws
    keep_rows = K if keep_rows is None else keep_rows
    gamma = np.broadcast_to(np.asarray(gamma, float), (K,))
    gamma_col = gamma[:, None]
    W = np.tile(w_star, (K, 1))
    eps = np.array(eps, float)
    pick = pick or (lambda: 0)
    normal = normal or rng.standard_normal

    def batch(W):
        b = pick()
        L, G = batches[b](W)
        if shift is not None:
            L = L + shift[b]
        if grad_shift is not None:
            G = G + grad_shift[b]
        return L, (G if mask is None else G * mask)

    L, G = batch(W)
    gU = nbs[:, None] * G
    losses = np.empty((K, total))  # L_n(w_t); the traces n beta (L_n - L_n(w*)) at the end
    blew_up = np.full(K, -1)
    acc = np.zeros(K)
    every = max(1, 200 // K)  # the progress bar moves every ~200 chain steps
    made, interrupted = 0, False
    thin = max(1, -(-draws // keep)) if keep else 0
    states = np.empty((keep_rows, -(-draws // thin) if keep else 0, W.shape[1]))
    kept_at: list = []
    nb_col = nbs[:, None]
    L = np.array(L, float)  # updated in place below
    U, half_gamma = nbs * L, 0.5 * gamma  # U(w) = n beta L_n + gamma |w - w*|^2 / 2
    per = K // groups  # rows with their own random numbers
    half, root, two_eps = 0.5 * eps[:, None], np.sqrt(eps)[:, None], 2 * eps
    if sampler == "sgld" and burn_step != 1.0 and burn > 0:  # the burn-in's larger step
        half, root = burn_step * half, math.sqrt(burn_step) * root
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # a blow-up is reported, not printed
            for t in range(total):
                if t == burn and sampler == "sgld" and burn_step != 1.0:
                    half, root = 0.5 * eps[:, None], np.sqrt(eps)[:, None]
                fwd = (root.reshape(groups, per, 1)  # sqrt(eps) xi
                       * normal((per, W.shape[1]))).reshape(W.shape)
                if mask is not None:
                    fwd *= mask
                if sampler == "sgld":  # in place: K x n arrays, few temporaries
                    gU *= half
                    W -= gU
                    W += fwd
                    L, G = batch(W)
                    gU = np.subtract(W, w_star, out=gU)
                    gU *= gamma_col
                    gU += nb_col * G
                else:
                    P = W - half * gU
                    P += fwd
                    Lp, Gp = batch(P)
                    Dp = P - w_star
                    gUp = nb_col * Gp
                    gUp += gamma_col * Dp
                    Up = nbs * Lp + half_gamma * np.einsum("ij,ij->i", Dp, Dp)
                    bwd = gU + gUp  # W - P + (eps / 2) grad U(P)
                    bwd *= half
                    bwd -= fwd
                    # log a = U(w) - U(p) - (|bwd|^2 - |fwd|^2) / (2 eps)
                    log_a = U - Up - (np.einsum("ij,ij->i", bwd, bwd)
                                      - np.einsum("ij,ij->i", fwd, fwd)) / two_eps
                    log_u = np.log(rng.uniform(size=per))
                    take = (log_u < log_a.reshape(groups, per)).ravel()  # a NaN proposal: no
                    where = take[:, None]
                    np.copyto(W, P, where=where)
                    np.copyto(gU, gUp, where=where)
                    np.copyto(L, Lp, where=take)
                    np.copyto(U, Up, where=take)
                    acc += take
                    if t < burn and (t + 1) % 50 == 0:  # adapt towards acceptance 0.574
                        eps *= np.exp(acc / 50 - 0.574)
                        half, root, two_eps = 0.5 * eps[:, None], np.sqrt(eps)[:, None], 2 * eps
                        acc[:] = 0
                    if t == burn - 1:
                        acc[:] = 0
                if not math.isfinite(L.sum()):
                    bad = ~np.isfinite(L)
                    blew_up[bad & (blew_up < 0)] = t
                    W[bad], gU[bad] = w_star, 0.0  # out of the run
                    L[bad], U[bad] = L_star, nbs[bad] * L_star
                losses[:, t] = L
                if thin and t >= burn and (t - burn) % thin == 0:
                    states[:, len(kept_at)] = W[:keep_rows]
                    kept_at.append(t)
                made = t + 1
                if progress is not None and made % every == 0:
                    progress(made * K, total * K)
    except KeyboardInterrupt:  # Ctrl-C: the draws made so far, if the burn-in is over
        if made < burn + 4:
            raise
        interrupted = True
    if progress is not None and not interrupted:
        progress(total * K, total * K)
    traces = nb_col * (losses[:, :made] - L_star)
    for k in np.flatnonzero(blew_up >= 0):
        traces[k, blew_up[k]:] = np.nan
    return dict(traces=traces, step=eps, accepted=acc / max(made - burn, 1),
                blew_up=blew_up, interrupted=interrupted, states=states[:, :len(kept_at)],
                kept_at=np.array(kept_at, int))


def auto_step_size(grad_U: Callable[[Any], Any], w_star: NDArray[np.float64], step_scale: float,
                   rng: np.random.Generator, rounds: int = 6, pilot: int = 60,
                   mask: Any = None) -> float:
    """eps = step_scale / h, h the largest curvature seen at w* and at the ends of short pilot
    chains, raised until a pilot ends where the curvature is below 1.5 h (``mask``: the
    coordinates that move, as in :func:`sample_chains`; grad_U is zero on the others)."""
    with np.errstate(over="ignore", invalid="ignore"):  # a pilot that blows up is retried
        return _step_rounds(grad_U, w_star, step_scale, rng, rounds, pilot,
                            1.0 if mask is None else mask)


def _step_rounds(grad_U, w_star, step_scale, rng, rounds, pilot, mask):
    h = max(curvature(grad_U, w_star, rng), 1e-300)
    w = w_star.copy()
    for _ in range(rounds):
        eps = step_scale / h
        for _ in range(pilot):
            w = w - 0.5 * eps * grad_U(w) + math.sqrt(eps) * mask * rng.standard_normal(w.size)
            if not np.all(np.isfinite(w)):
                break
        if not np.all(np.isfinite(w)):
            h, w = 10 * h, w_star.copy()
            continue
        seen = curvature(grad_U, w, rng)
        if seen <= 1.5 * h:
            return step_scale / max(h, seen)
        h = seen
    return step_scale / h


def curvature_spectrum(hvp: Callable[[Any], Any], size: int, rng: np.random.Generator,
                       k: int = 64) -> tuple[NDArray[np.float64], Any]:
    """(theta, count): Ritz values theta_j of the symmetric operator v -> hvp(v) on R^size and
    counts with sum_i f(h_i) ~ sum_j count_j f(theta_j) over its eigenvalues h_i. Lanczos with
    full reorthogonalization, k = min(size, 64) steps from a random unit vector. Where k =
    size the Ritz values are the eigenvalues (count 1 each: exact); otherwise the counts are
    size tau_j^2, tau_j the first entries of the eigenvectors of the tridiagonal matrix
    (stochastic Lanczos quadrature: unbiased over the random start; Golub and Meurant 2010,
    "Matrices, moments and quadrature with applications", Ch. 7; Ubaru, Chen, Saad 2017)."""
    k = max(1, min(int(k), size))
    Q = np.zeros((k, size))
    q = rng.standard_normal(size)
    q /= np.linalg.norm(q)
    alpha, beta = [], []
    for j in range(k):
        Q[j] = q
        z = np.asarray(hvp(q), float)
        a = float(q @ z)
        alpha.append(a)
        z = z - Q[:j + 1].T @ (Q[:j + 1] @ z)
        z = z - Q[:j + 1].T @ (Q[:j + 1] @ z)  # twice is enough (Giraud et al. 2005)
        b = float(np.linalg.norm(z))
        if j == k - 1 or b <= 1e-12 * max(abs(a), 1e-300) or not math.isfinite(b):
            break
        beta.append(b)
        q = z / b
    off = beta[:len(alpha) - 1]
    theta, S = np.linalg.eigh(np.diag(alpha) + np.diag(off, 1) + np.diag(off, -1))
    full = len(alpha) == size
    return theta, (np.ones(len(theta)) if full else size * S[0] ** 2)
