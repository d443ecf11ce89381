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

import math

import numpy as np


def curvature(grad_U, w, rng, iters=12):
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


def sample_chains(batch, sampler, w_star, nbs, eps, gamma, L_star, burn, draws, rng, progress,
                  keep=0, keep_rows=None, groups=1):
    """Every chain from w*, all advanced together: row r of the (K, n) state samples
    exp(-nbs[r] L_n(w) - gamma[r] |w - w*|^2 / 2) with the step eps[r] (MALA adapts it every 50
    burn-in steps towards the acceptance 0.574). ``batch`` maps the states to their losses and
    gradients in one call. Returns the traces nbs[r] (L_n(w_t) - L_n(w*)) (K x steps made;
    Ctrl-C after the burn-in ends the run early), the final steps, the acceptance rates after
    burn-in, the step at which each row blew up (-1: never; such a row is reset to w* and its
    trace is NaN from there), whether Ctrl-C stopped it, and up to ``keep`` states of each of
    the first ``keep_rows`` rows (default: all) after burn-in, evenly thinned (``states``,
    keep_rows x kept x n; ``kept_at``, their steps). ``groups`` > 1: the rows are that many
    blocks of equal size that share their random numbers (row r of every block draws the same
    Gaussian and uniform numbers: common random numbers, so that the blocks' differences are
    not blurred by independent noise)."""
    K, total = len(nbs), burn + draws
    keep_rows = K if keep_rows is None else keep_rows
    gamma = np.broadcast_to(np.asarray(gamma, float), (K,))
    gamma_col = gamma[:, None]
    W = np.tile(w_star, (K, 1))
    eps = np.array(eps, float)
    L, G = batch(W)
    gU = nbs[:, None] * G
    losses = np.empty((K, total))  # L_n(w_t); the traces n beta (L_n - L_n(w*)) at the end
    blew_up = np.full(K, -1)
    acc = np.zeros(K)
    every = max(1, 200 // K)  # the progress bar moves every ~200 chain steps
    made, interrupted = 0, False
    thin = max(1, -(-draws // keep)) if keep else 0
    states = np.empty((keep_rows, -(-draws // thin) if keep else 0, W.shape[1]))
    kept_at = []
    nb_col = nbs[:, None]
    L = np.array(L, float)  # updated in place below
    U, half_gamma = nbs * L, 0.5 * gamma  # U(w) = n beta L_n + gamma |w - w*|^2 / 2
    per = K // groups  # rows with their own random numbers
    half, root, two_eps = 0.5 * eps[:, None], np.sqrt(eps)[:, None], 2 * eps
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # a blow-up is reported, not printed
            for t in range(total):
                fwd = (root.reshape(groups, per, 1)  # sqrt(eps) xi
                       * rng.standard_normal((per, W.shape[1]))).reshape(W.shape)
                if sampler == "sgld":
                    W = W - half * gU + fwd
                    L, G = batch(W)
                    gU = nb_col * G + gamma_col * (W - w_star)
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


def auto_step_size(grad_U, w_star, step_scale, rng, rounds=6, pilot=60):
    """eps = step_scale / h, h the largest curvature seen at w* and at the ends of short pilot
    chains, raised until a pilot ends where the curvature is below 1.5 h."""
    with np.errstate(over="ignore", invalid="ignore"):  # a pilot that blows up is retried
        return _step_rounds(grad_U, w_star, step_scale, rng, rounds, pilot)


def _step_rounds(grad_U, w_star, step_scale, rng, rounds, pilot):
    h = max(curvature(grad_U, w_star, rng), 1e-300)
    w = w_star.copy()
    for _ in range(rounds):
        eps = step_scale / h
        for _ in range(pilot):
            w = w - 0.5 * eps * grad_U(w) + math.sqrt(eps) * rng.standard_normal(w.size)
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
