"""Orbit integrals: the push-forward density p_bar(beta) = int_G p(g . theta) omega(g . theta)
dHaar(g) at beta = phi(theta) (coarea formula, Federer 1969, 3.2.12), by one-dimensional
quadrature or by importance sampling in global Cartan coordinates of the orbit
(:class:`_OrbitChart`); and the unnormalised implicit-bias density

    p_bar_IB(beta) ~ sum_{components D} p(D s(beta)) omega(D s(beta)),                     (2)

s(beta) the canonical (minimum-norm) point of the orbit (see :mod:`paramgeo.pacbayes.engine`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence, Union

import numpy as np
from scipy import integrate, optimize, special

from ..errors import NotProvidedError
from .gaussians import PacBayesInputError
from .groups import group_structure
from .volumes import _basis, canonical_point, lie_algebra_matrices, log_omega

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization
    from .gaussians import DiagonalGaussian


class _OrbitChart:
    """Global coordinates of the orbit component D G_0 s (free action assumed):

        F(psi, x) = D exp(sum_j psi_j B_j) exp(X) s,   X = sum_l x_l P_l,
        psi in prod_j [0, T_j),  x in R^p,

    and the integrand factor of the coarea formula, vectorised over a batch of points z = (psi, x):

        log [ sqrt det(DF^T DF) / NJ(F) ]   with
        sqrt det(DF^T DF) = |det C(x)| sqrt det(W^T W),   W = e^X [A_1 s .. A_k s]  (the orbit
            volume factor sqrt det Gram of the generators, transported to e^X s),
            C(x) = [ e^{-ad X} e_j (j <= c) | phi_1(-ad X) e_{c+l} ],
            phi_1(M) = (e^M - I)/M   (the differential of exp: d exp_X(Y) = e^X phi_1(-ad X) Y),
        NJ(F) = NJ(s) sqrt det(V^T e^{-2X} V)  (J(g s) = J(s) g^{-1} by invariance; V the right
            singular vectors of J(s) for its n - k nonzero singular values).

    The orthogonal factors D exp(psi B) drop out of both volumes. The area formula on DF itself
    (``scipy.linalg.expm_frechet``) is the test oracle for this closed form."""

    def __init__(self, param, struct, s, D):
        self.struct, self.s, self.D = struct, np.asarray(s, float), D
        self.c, self.p = len(struct.compact), len(struct.noncompact)
        self.k = self.c + self.p
        n = param.n
        basis = struct.basis
        sv_u, sv, vt = np.linalg.svd(param.jacobian(self.s), full_matrices=False)
        r0 = n - self.k
        tol = 1e-9 * max(sv[0], 1e-300)
        if r0 > len(sv) or (r0 > 0 and sv[r0 - 1] <= tol) or (r0 < len(sv) and sv[r0] > tol):
            raise NotProvidedError(
                type(param).__name__,
                "orbit integrals at this point (rank J = "
                f"{int(np.sum(sv > tol))} but n - dim G = {r0}: the fibre is larger than the "
                "group orbit or the action is not free here)")
        self.logNJ0 = float(np.sum(np.log(sv[:r0])))
        self.V = vt[:r0].T
        # closed-form exponentials: a Frobenius-orthonormal basis O of the algebra, in which
        # ad X (X symmetric) is a symmetric matrix (the torus exp(psi . B): struct.torus_exp)
        if self.k:
            O = _basis(basis.reshape(self.k, -1)).reshape(-1, n, n)
            self.R = np.einsum("aij,bij->ab", O, basis)  # coords of (B, P) in O
            self.adO = np.einsum("aij,lbij->lab", O, np.einsum(
                "lij,bjk->lbik", struct.noncompact, O) - np.einsum("bij,ljk->lbik", O,
                                                                   struct.noncompact))
            self.As = np.einsum("kij,j->ik", O, self.s)

    def evaluate(self, z):
        """(theta (M, n), log factor (M,)) at the coordinates z (M, k)."""
        z = np.atleast_2d(np.asarray(z, float))
        M, n, c, k = z.shape[0], self.s.size, self.c, self.k
        st = self.struct
        psi, x = z[:, :c], z[:, c:]
        if self.p:
            X = np.einsum("ml,lij->mij", x, st.noncompact)
            lam, Q = np.linalg.eigh(X)
            E = (Q * np.exp(lam)[:, None, :]) @ Q.transpose(0, 2, 1)
            Einv2 = (Q * np.exp(-2 * lam)[:, None, :]) @ Q.transpose(0, 2, 1)
            mu, U = np.linalg.eigh(np.einsum("ml,lab->mab", x, self.adO))
            small = np.abs(mu) < 1e-12
            phi = np.where(small, 1.0, -np.expm1(-mu) / np.where(small, 1.0, mu))
            Ut = U.transpose(0, 2, 1)
            C = np.concatenate([(U * np.exp(-mu)[:, None, :]) @ Ut @ self.R[:, :c],
                                (U * phi[:, None, :]) @ Ut @ self.R[:, c:]], axis=2)
            logC = np.linalg.slogdet(C)[1]
        else:
            E = np.broadcast_to(np.eye(n), (M, n, n))
            Einv2 = E
            logC = np.full(M, np.linalg.slogdet(self.R)[1]) if k else np.zeros(M)
        th = E @ self.s
        if c:
            K = st.torus_exp(psi)
            th = np.einsum("ab,mbc,mc->ma", self.D, K, th)
        else:
            th = th @ self.D.T
        if k:
            W = E @ self.As
            logvol = 0.5 * np.linalg.slogdet(W.transpose(0, 2, 1) @ W)[1]
        else:
            logvol = np.zeros(M)
        G2 = self.V.T @ Einv2 @ self.V
        logNJ = self.logNJ0 + 0.5 * np.linalg.slogdet(G2)[1]
        with np.errstate(invalid="ignore"):  # -inf - -inf at degenerate points: callers map
            return th, logvol + logC - logNJ  # non-finite log factors to weight zero


def _logdens_batch(f, th):
    out = np.asarray(f(th), float)
    if out.shape != (th.shape[0],):
        out = np.array([float(f(t)) for t in th])
    return out


def _importance_log_integral(chart, f, rng, samples, h=1e-5, max_modes=3):
    """log int_cell exp(L(z)) dz, L = log f(F(z)) + log factor, by importance sampling.

    Modes: L is scanned on a psi-grid (x = 0) and at x = +-0.5, +-1.5 along every non-compact
    axis; BFGS runs from the best ``max_modes`` scan points; distinct maxima z_i are kept, each
    with H_i = the Hessian of L by central differences and S_i = (-H_i + diag(4/T_j^2 on psi))^-1
    (the psi-variance capped at (T_j/2)^2). Proposal: the mixture over the modes (weights = their
    Laplace masses exp L(z_i) sqrt det S_i) of 0.8 N(z_i, S_i) + 0.2 N(z_i, 2.25 S_i) (a
    defensive component; Hesterberg 1995), psi wrapped onto the cell (its density summed over
    the shifts m T, |m| <= 6). Returns (log I + relvar/(2M), sqrt(relvar/M)): the log of the
    unbiased estimate I = mean(w) with the delta-method bias correction, and its relative
    standard error, relvar = var(w)/mean(w)^2 over the M = ``samples`` weights w."""
    c, k = chart.c, chart.k

    def L(z):
        th, lg = chart.evaluate(z)
        v = _logdens_batch(f, th) + lg
        return np.where(np.isfinite(v), v, -np.inf)

    modes = _find_modes(L, c, k, chart.struct.periods, h, max_modes)
    if not modes:
        return -math.inf, 0.0
    comps = _laplace_mixture(L, modes, c, k, chart.struct.periods)
    return _mixture_estimate(L, comps, c, k, chart.struct.periods, rng, samples)


def _find_modes(L, c, k, T, h, max_modes):
    """Distinct local maxima (z_i, L(z_i)) of L: a scan on a psi-grid (x = 0) and at
    x = +-0.5, +-1.5 along every non-compact axis, then BFGS (central-difference gradients)
    from the best ``max_modes`` scan points; [] when L is -inf at every scan point."""
    starts = [np.zeros(k)]
    if c:
        G = max(2, int(64 ** (1.0 / c)))
        grid = np.stack(np.meshgrid(*[np.arange(G) * T[j] / G for j in range(c)],
                                    indexing="ij"), -1).reshape(-1, c)
        starts += [np.concatenate([g, np.zeros(k - c)]) for g in grid[1:]]
    for l in range(c, k):
        for a in (-1.5, -0.5, 0.5, 1.5):
            z = np.zeros(k)
            z[l] = a
            starts.append(z)
    starts = np.array(starts)
    vals = L(starts)
    if not np.any(np.isfinite(vals)):
        return []
    eye = np.eye(k)

    def fg(z):
        v = L(np.vstack([z, z + h * eye, z - h * eye]))
        if not np.isfinite(v[0]):
            return math.inf, np.zeros(k)
        g = (v[1:k + 1] - v[k + 1:]) / (2 * h)
        return -v[0], -np.where(np.isfinite(g), g, 0.0)

    modes = []
    for i in np.argsort(-vals)[:max_modes]:
        if not np.isfinite(vals[i]):
            continue
        zm = optimize.minimize(fg, starts[i], jac=True, method="BFGS",
                               options={"gtol": 1e-8, "maxiter": 400}).x
        if c:
            zm[:c] = np.mod(zm[:c], T)
        if all(np.linalg.norm(_wrap_diff(zm - m[0], T, c)) > 1e-3 * (1 + np.linalg.norm(zm))
               for m in modes):
            modes.append((zm, float(L(zm[None])[0])))
    return modes


def _laplace_mixture(L, modes, c, k, T, hh=1e-4):
    """Proposal components (log weight, mean, covariance): per mode z_i, S_i = (-H_i +
    diag(4/T_j^2 on psi))^-1 with H_i the central-difference Hessian of L, weight the Laplace
    mass exp L(z_i) sqrt det S_i, split 0.8 N(z_i, S_i) + 0.2 N(z_i, 2.25 S_i) (Hesterberg 1995)."""
    eye = np.eye(k)
    comps = []
    for zm, Lm in modes:
        pts = [zm]
        for i in range(k):
            for j in range(i, k):
                for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                    pts.append(zm + hh * (si * eye[i] + sj * eye[j]))
        v = L(np.array(pts))
        H = np.zeros((k, k))
        it = 1
        for i in range(k):
            for j in range(i, k):
                H[i, j] = H[j, i] = (v[it] - v[it + 1] - v[it + 2] + v[it + 3]) / (4 * hh * hh)
                it += 4
        H = np.where(np.isfinite(H), H, 0.0)
        w, U = np.linalg.eigh(-0.5 * (H + H.T))
        w = np.maximum(w, 1e-6 * max(w.max(), 1.0))
        Lam = (U * w) @ U.T
        Lam[np.arange(c), np.arange(c)] += 4.0 / T ** 2
        S = np.linalg.inv(Lam)
        S = 0.5 * (S + S.T)
        mass = Lm + 0.5 * np.linalg.slogdet(S)[1]
        comps += [(mass + math.log(0.8), zm, S), (mass + math.log(0.2), zm, 2.25 * S)]
    return comps


def _mixture_estimate(L, comps, c, k, T, rng, samples):
    """(log I + relvar/(2M), sqrt(relvar/M)) for I = mean of the weights exp(L(z) - log q(z)),
    z ~ the mixture ``comps`` with psi wrapped onto the cell (q summed over shifts m T,
    |m| <= 6)."""
    logw = np.array([cm[0] for cm in comps])
    probs = np.exp(logw - special.logsumexp(logw))
    ns = rng.multinomial(int(samples), probs)
    z = np.vstack([rng.multivariate_normal(zm, S, size=nm) for (_, zm, S), nm in zip(comps, ns)])
    if c:
        r = np.arange(-6, 7)
        shifts = np.stack(np.meshgrid(*[r] * c, indexing="ij"), -1).reshape(-1, c) * T
        shifts = np.concatenate([shifts, np.zeros((len(shifts), k - c))], axis=1)
    else:
        shifts = np.zeros((1, k))
    pts = z[:, None, :] + shifts[None, :, :]  # (M, shifts, k)
    logq = []
    for p, (_, zm, S) in zip(probs, comps):
        Li = np.linalg.cholesky(np.linalg.inv(S))
        d = (pts - zm) @ Li
        lq = -0.5 * np.sum(d * d, -1) + np.sum(np.log(np.diag(Li))) \
            - 0.5 * k * math.log(2 * math.pi)
        logq.append(math.log(max(p, 1e-300)) + special.logsumexp(lq, axis=1))
    logq = special.logsumexp(np.array(logq), axis=0)
    lw = L(z) - logq
    M = len(lw)
    logI = float(special.logsumexp(lw) - math.log(M))
    if not math.isfinite(logI):
        return -math.inf, 0.0
    relvar = max(float(np.exp(special.logsumexp(2 * lw) - math.log(M) - 2 * logI)) - 1.0, 0.0)
    return logI + relvar / (2 * M), math.sqrt(relvar / M)


def _wrap_diff(d, T, c):
    d = np.array(d, float)
    if c:
        d[:c] = (d[:c] + T / 2) % T - T / 2
    return d


def _is_one_dim_abelian_noncompact(param):
    A = lie_algebra_matrices(param)
    return A.shape[0] == 1 and np.allclose(A[0], A[0].T, atol=1e-12)


def orbit_log_integral(param: Parameterization, theta: ArrayLike,
                       logdens: Union[Callable, Sequence[Callable]],
                       gap: float = 50.0, method: str = "auto", samples: int = 256, seed: int = 0,
                       return_error: bool = False) -> Any:
    """log p_bar(phi(theta)) = log int_{fibre} dens / NJ dH^k: the push-forward density at
    phi(theta) of the density exp(logdens) on Theta (coarea formula, Federer 1969, 3.2.12),
    with the fibre through theta taken to be its group orbit (generic free action; checked:
    rank J(theta) = n - dim G). Equivalently int_G dens(g . theta) omega(g . theta) dHaar(g).

    ``method``:

    * ``quadrature`` (one-dimensional abelian non-compact continuous part exp(t A), A symmetric,
      Haar measure dt): sum over the components D of int_R dens(D e^{tA} theta) omega dt by
      ``scipy.integrate.quad`` in log-scaled form (mode by a grid scan and ``minimize_scalar``,
      range where the log-integrand is within ``gap`` nats of its maximum). Error ~1e-7 relative.
    * ``importance`` (any group with a :func:`group_structure`: Lie algebra closed under
      transpose, compact part a torus, finitely many components): the orbit in the global
      Cartan coordinates theta = D exp(psi . B) exp(x . P) theta of :class:`_OrbitChart`, whose
      area-formula factor includes the orbit volume sqrt det Gram of the generators; for every
      component D, the integral over the cell prod_j [0, T_j) x R^p by importance sampling
      around the mode (``samples`` draws; :func:`_importance_log_integral`). The estimate of
      the integral is unbiased; its log has the delta-method bias correction, and the reported
      error is the relative standard error of the integral. Assumes each component's integrand
      is dominated by one mode (missed distant modes are not seen by the error bar).
      The uniform covering of K_0 by the psi-cell multiplies every fibre integral by the same
      integer, which cancels in all the density ratios and normalised priors used here.
    * ``auto``: quadrature where it applies, else importance.

    A finite group (dimension 0) is summed over instead, whatever ``method`` says: the density on
    the orbit space Theta / G, see :func:`_orbit_log_integral_finite`. Components are summed
    exactly (:func:`group_structure` enumerates up to ``MAX_COMPONENTS`` of them).

    ``logdens`` maps thetas (shape (..., n)) to log densities; a list of them gives an array of
    integrals along the same orbit. With ``return_error`` also returns the relative standard
    errors (0 for quadrature and exact sums)."""
    many = isinstance(logdens, (list, tuple))
    funcs = list(logdens) if isinstance(logdens, (list, tuple)) else [logdens]
    theta = param.as_theta(theta)
    if method not in ("auto", "quadrature", "importance"):
        raise PacBayesInputError(f"unknown orbit integral method {method!r}; choose auto, "
                                 "quadrature or importance")
    if lie_algebra_matrices(param).shape[0] == 0:
        vals, errs = _orbit_log_integral_finite(param, theta, funcs)
    elif method == "quadrature" or (method == "auto" and _is_one_dim_abelian_noncompact(param)):
        vals, errs = _orbit_log_integral_quad(param, theta, funcs, gap)
    else:
        vals, errs = _orbit_log_integral_is(param, theta, funcs, samples,
                                            np.random.default_rng(seed))
    if many:
        return (vals, errs) if return_error else vals
    return (float(vals[0]), float(errs[0])) if return_error else float(vals[0])


def _orbit_log_integral_is(param, theta, funcs, samples, rng):
    struct = group_structure(param)
    comps = struct.components
    out = np.full((len(funcs), len(comps)), -np.inf)
    var = np.zeros_like(out)
    chart = _OrbitChart(param, struct, theta, np.eye(param.n))
    for ci, D in enumerate(comps):
        chart.D = D
        for fi, f in enumerate(funcs):
            out[fi, ci], rel = _importance_log_integral(chart, f, rng, samples)
            var[fi, ci] = rel ** 2
    return _sum_components(out, var)


def _orbit_log_integral_finite(param, theta, funcs):
    """A finite group G (dimension 0): log sum_{g in G} dens(g . theta), the density of the
    push-forward of dens to the orbit space Theta / G (with respect to Lebesgue measure on a
    fundamental domain; the action is orthogonal, |det g| = 1). No coarea factor: Theta / G is
    n-dimensional, whatever the fibres of phi are, so this quotient lies between Theta and the
    predictors and KL(Q_G || P_G) is sandwiched by the data-processing inequality."""
    comps = group_structure(param).components
    pts = np.einsum("cij,j->ci", np.asarray(comps), theta)
    out = np.array([_logdens_batch(f, pts) for f in funcs])
    return _sum_components(out, np.zeros_like(out))


def _sum_components(out, var):
    """log sum over the components of exp(out) (F, T), and its relative standard error from the
    per-term importance-sampling relative variances ``var``."""
    tot = special.logsumexp(out, axis=1)
    with np.errstate(invalid="ignore"):
        w = np.where(np.isfinite(out), np.exp(out - tot[:, None]), 0.0)
    return tot, np.sqrt(np.sum(w * w * var, axis=1))


def _orbit_log_integral_quad(param, theta, funcs, gap):
    if not _is_one_dim_abelian_noncompact(param):
        raise NotProvidedError(
            type(param).__name__,
            "quadrature orbit integrals for this symmetry group (they need a continuous "
            "symmetry that is one-dimensional, abelian and non-compact, such as one GL(1) or "
            "one rescaling; use the importance method)",
        )
    _OrbitChart(param, group_structure(param), theta, np.eye(param.n))  # free-action check
    w, V = np.linalg.eigh(lie_algebra_matrices(param)[0])
    c0 = V.T @ theta
    comps = group_structure(param).components
    memo = {}

    def omega(t):
        if t not in memo:
            memo[t] = log_omega(param, V @ (np.exp(t * w) * c0))
        return memo[t]

    out = np.full((len(funcs), len(comps)), -np.inf)
    grid = np.linspace(-12, 12, 49)
    for ci, D in enumerate(comps):
        for fi, f in enumerate(funcs):
            def L(t, D=D, f=f):
                return f(D @ (V @ (np.exp(t * w) * c0))) + omega(float(t))

            vals = np.array([L(t) for t in grid])
            i = int(np.nanargmax(vals))
            res = optimize.minimize_scalar(lambda t: -L(t), bounds=(grid[max(i - 1, 0)],
                                                                    grid[min(i + 1, 48)]),
                                           method="bounded", options={"xatol": 1e-9})
            tm, Lm = (res.x, -res.fun) if -res.fun >= vals[i] else (grid[i], vals[i])

            def edge(sign, tm=tm, Lm=Lm, L=L):
                step = 1e-3
                while step < 64:
                    if L(tm + sign * step) < Lm - gap:
                        return tm + sign * step
                    step *= 2
                return tm + sign * step

            lo, hi = edge(-1), edge(+1)
            val, _ = integrate.quad(lambda t, L=L, Lm=Lm: math.exp(L(t) - Lm), lo, hi,
                                    points=[tm], limit=200, epsabs=0.0, epsrel=1e-7)
            out[fi, ci] = Lm + math.log(val) if val > 0 else -math.inf
    return _sum_components(out, np.zeros_like(out))


def implicit_bias_log_unnormalized(param: Parameterization, prior: DiagonalGaussian,
                                   theta: ArrayLike) -> float:
    """log of sum_D p(D s) omega(D s), s = canonical_point(theta), D over the coset
    representatives of G / G_0: the unnormalised implicit-bias density (2) at phi(theta).
    For a finite group the canonical section is the point itself and omega = 1 on Theta / G,
    so this is the neutral density sum_g p(g theta) (the implicit-bias prior equals the neutral
    one)."""
    comps = group_structure(param).components
    finite = lie_algebra_matrices(param).shape[0] == 0
    s = param.as_theta(theta) if finite else canonical_point(param, theta).theta
    terms = [prior.logpdf(D @ s) + (0.0 if finite else log_omega(param, D @ s)) for D in comps]
    return float(special.logsumexp(terms))
