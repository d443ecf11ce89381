"""The mean-field stationary measure of a noisy two-layer ReLU network with weight decay.

The network f(x) = sum_{j<h} a_j relu(w_j . x + b_j) (a_j in R^k) is trained on inputs x_i
in R^d, targets y_i in R^k (i < N) by noisy gradient descent on

    L(theta) = 1/(2N) sum_i |f(x_i) - y_i|^2 + lambda/2 |theta|^2,
    theta <- theta - eta grad L + sigma sqrt(eta) xi,

the Euler-Maruyama scheme of d theta = -grad L dt + sigma dB, whose stationary density is
exp(-L / tau) with the temperature tau = sigma^2 / 2. Each neuron theta = (u, a), u = (w, b),
sees the others only through the residual r_i = f(x_i) - y_i. The mean-field (self-consistent)
stationary density of one neuron is the Gibbs density

    rho(theta) ~ exp(-(V(theta) + int W(theta, theta') rho(d theta')) / tau),
    V(theta) = -(1/N) sum_i y_i . phi_i(theta) + lambda/2 |theta|^2,
    W(theta, theta') = (h/N) sum_i phi_i(theta) . phi_i(theta'),  phi_i = a relu(u . x~_i),

x~_i = (x_i, 1), i.e. rho ~ exp(-((1/N) sum_i r_i . phi_i + lambda/2 |theta|^2) / tau) with
r = h int phi d rho - Y (Mei, Montanari, Nguyen 2018; Chizat, Bach 2018; Hu, Ren, Siska,
Szpruch 2021 for the entropic version). It minimises the convex free energy
F(rho) = 1/(2Nh) |h int phi d rho - Y|^2 + lambda/2 int |theta|^2 d rho + tau int rho log rho.

Given r, rho is Gaussian in a and radial in u. With g(v) = (1/N) sum_i r_i relu(v . x~_i)
(v = u / |u| on the sphere S^d) and the gap c(v) = lambda - |g(v)|^2 / lambda:

    a | u ~ N(-|u| g(v) / lambda, tau / lambda I_k),
    |u| | v has density ~ s^d exp(-s^2 c(v) / (2 tau)),  E[|u|^2 | v] = (d + 1) tau / c(v),
    p(v) ~ c(v)^(-(d+1)/2)                               (the angular density),

normalisable iff max_v |g(v)| < lambda. The fixed point r = h int phi d rho - Y is the unique
minimiser of the convex dual (Fenchel in the quadratic loss)

    G(r) = T log int_{S^d} c_r(v)^(-(d+1)/2) dv + (1/N) (<r, Y> + |r|^2 / 2),  T = h tau,

so only the effective temperature T = h tau enters: f = r + Y = -(T (d+1) / lambda)
E_p[relu(v . x~_i) g(v) / c(v)]. :func:`stationary_measure` minimises G by Newton's method
with a barrier line search on a quasi-uniform grid of S^d (d = 1, 2), then reads the modes of
p (the exact local maxima of |g|, face by face of the hyperplane arrangement),
their masses (steepest-ascent basins), angular widths and ternary activation patterns
sign(v . x~_i) in {-1, 0, +1}. As T -> 0 the mass gathers where |g| reaches lambda: the dual
certificate of the convex reformulation of weight-decayed ReLU networks (Pilanci, Ergen 2020).

Second routes: :func:`linear_response` (large T, the arc-cosine kernel of Cho and Saul 2009),
:func:`single_point_residual` (N = 1, d = 2: closed form) and :func:`particle_langevin` (the
noisy gradient descent itself, at finite width).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations as itertools_combinations
from typing import Optional

import numpy as np
from scipy.optimize import brentq, minimize
from scipy.spatial import cKDTree
from scipy.special import logsumexp

_RING = 1e-5  # rad: a candidate is a local maximum if it beats a ring of this radius


@dataclass(kw_only=True)
class StationaryMeasure:
    """The mean-field stationary measure on a grid of S^d; see :func:`stationary_measure`."""

    width: int
    tau: float
    weight_decay: float
    temperature: float  # T = width * tau
    residual: np.ndarray  # r (N x k)
    predictor: np.ndarray  # f = r + Y (N x k)
    directions: np.ndarray  # grid of S^d (n x (d+1))
    density: np.ndarray  # p per unit area of S^d, int p = 1
    mass: np.ndarray  # p times the grid weight (sums to 1)
    gap: np.ndarray  # c = lambda - |g|^2 / lambda on the grid
    spacing: float  # grid spacing (rad)
    modes: np.ndarray  # the modes' directions (m x (d+1)), by decreasing mass
    mode_masses: np.ndarray
    mode_widths: np.ndarray  # median angle of each basin's mass about its mode (rad)
    mode_patterns: list = field(default_factory=list)  # ternary patterns of the modes
    grid_peaks: int = 0  # strict local maxima of p on the grid's neighbour graph
    newton_steps: int = 0
    gradient_norm: float = 0.0

    @property
    def n_modes(self) -> int:
        """The number of modes of the angular density."""
        return len(self.modes)

    @property
    def occupied(self) -> int:
        """Modes whose expected number of neurons width * mass is at least one."""
        return int(np.sum(self.width * self.mode_masses >= 1.0))

    @property
    def effective(self) -> float:
        """exp of the entropy of the mode masses: the effective number of directions."""
        q = self.mode_masses[self.mode_masses > 0]
        return float(np.exp(-np.sum(q * np.log(q))))

    @property
    def patterns_unique(self) -> bool:
        """Whether the modes' ternary activation patterns are pairwise distinct."""
        return len(set(self.mode_patterns)) == len(self.mode_patterns)


def sphere_grid(d: int, n: int) -> tuple[np.ndarray, float, np.ndarray]:
    """A quasi-uniform grid of n points on S^d (d = 1: equal angles; d = 2: the Fibonacci
    lattice), each of weight |S^d| / n; returns (points, weight, neighbour indices)."""
    if d == 1:
        t = 2 * np.pi * (np.arange(n) + 0.5) / n
        i = np.arange(n)
        return (np.stack([np.cos(t), np.sin(t)], 1), 2 * np.pi / n,
                np.stack([(i - 1) % n, (i + 1) % n], 1))
    if d != 2:
        raise ValueError(f"the grid is built for d = 1, 2 (S^1, S^2), not d = {d}")
    i = np.arange(n)
    z = 1 - (2 * i + 1) / n
    phi = i * np.pi * (3 - np.sqrt(5))
    rad = np.sqrt(1 - z ** 2)
    pts = np.stack([rad * np.cos(phi), rad * np.sin(phi), z], 1)
    _, nb = cKDTree(pts).query(pts, k=7)
    return pts, 4 * np.pi / n, nb[:, 1:]


def _lift(X):
    return np.hstack([X, np.ones((len(X), 1))])


def _gap(V, X1, r, lam):
    """relu(v . x~_i) (n x N), g (n x k) and c (n) at the directions V."""
    R = np.maximum(V @ X1.T, 0.0)
    g = R @ r / len(X1)
    return R, g, lam - np.sum(g * g, 1) / lam


def _objective(r, R, w, Y, lam, T, alpha, hessian):
    """G(r), its gradient and (optionally) Hessian on the grid; None outside the domain."""
    N, k = Y.shape
    g = R @ r / N
    c = lam - np.sum(g * g, 1) / lam
    if np.any(c <= 0):
        return None
    logm = np.log(w) - alpha * np.log(c)
    logI = logsumexp(logm)
    p = np.exp(logm - logI)  # mass per grid point
    G = T * logI + (np.sum(r * Y) + 0.5 * np.sum(r * r)) / N
    Z = (R[:, :, None] * g[:, None, :]).reshape(len(R), N * k)  # R_i g_c
    Ez = (p / c) @ Z
    grad = T * 2 * alpha / (lam * N) * Ez + (Y + r).ravel() / N
    if not hessian:
        return G, grad, p, c, None
    pz = (p / c ** 2)[:, None] * Z
    EZZ = Z.T @ pz
    ERR = R.T @ ((p / c)[:, None] * R)
    s = 2 * alpha / (lam * N)
    H = (2 * alpha / (lam * N * N)) * (np.kron(ERR, np.eye(k)) + (2 / lam) * EZZ)
    H += s * s * (EZZ - np.outer(Ez, Ez))
    return G, grad, p, c, T * H + np.eye(N * k) / N


def _ascend(p, nb):
    """Steepest-ascent basins on the neighbour graph: the local maximum each point climbs to."""
    cand = np.concatenate([np.arange(len(p))[:, None], nb], 1)
    parent = cand[np.arange(len(p)), np.argmax(p[cand], 1)]
    while True:
        nxt = parent[parent]
        if np.array_equal(nxt, parent):
            return parent
        parent = nxt


def _candidates(X1, r, lam):
    """The critical points of |g|^2 that can be local maxima on S^d: in each face of the
    arrangement {v . x~_i = 0} (cells, arcs, vertices) the top eigenvector of the face's
    quadratic form |M_S v|^2, M_S = (1/N) sum_{i in S} r_i x~_i^T, when it lies in the face."""
    N, D = X1.shape
    rng = np.random.default_rng(0)
    out = []
    for size in range(D):
        for J in (itertools_combinations(range(N), size)):
            J = list(J)
            B = np.linalg.svd(X1[J])[2][size:].T if size else np.eye(D)  # basis of x~_J^perp
            if B.shape[1] == 1:
                out += [(B[:, 0], J), (-B[:, 0], J)]
                continue
            pts = rng.standard_normal((40000 if B.shape[1] == 3 else 4000, B.shape[1])) @ B.T
            rest = [i for i in range(N) if i not in J]
            for S in np.unique(pts @ X1[rest].T > 0, axis=0):
                M = (r[rest][S].T @ X1[rest][S]) / N @ B
                vals, vecs = np.linalg.eigh(M.T @ M)
                for v in (B @ vecs[:, -1], -B @ vecs[:, -1]):
                    if np.array_equal(v @ X1[rest].T > 0, S) and np.all(
                            np.abs(v @ X1[rest].T) > 1e-12):
                        out.append((v / np.linalg.norm(v), J))
    return out


def exact_modes(X, r, weight_decay: float) -> list:
    """The modes of the angular density p ~ c_r^(-(d+1)/2), i.e. the strict local maxima of
    |g_r(v)|^2 on S^d (d = 1, 2), with their ternary patterns sign(v . x~_i) (0 for the i
    whose hyperplane the mode lies on): the candidates of :func:`_candidates`, kept when they
    beat every point of a ring of radius 1e-5 rad. The faces are found from the patterns of
    40000 random directions (cells of S^2) and 4000 per great circle (arcs), so a face smaller
    than that resolution, and a mode inside it, can be missed."""
    X1 = _lift(np.asarray(X, float))
    r = np.asarray(r, float).reshape(len(X1), -1)
    D = X1.shape[1]
    found: list = []
    for v, J in _candidates(X1, r, weight_decay):
        if any(abs(v @ u - 1) < 1e-12 for u, _ in found):
            continue
        basis = np.linalg.svd(v[None, :])[2][1:]
        if D == 2:
            ring = np.array([[1.0], [-1.0]])
        else:
            t = np.linspace(0, 2 * np.pi, 144, endpoint=False)
            ring = np.stack([np.cos(t), np.sin(t)], 1)
        U = v + _RING * ring @ basis
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        here = _gap(v[None], X1, r, weight_decay)[2][0]
        if np.all(_gap(U, X1, r, weight_decay)[2] > here):
            z = X1 @ v
            pat = tuple(0 if i in J else int(np.sign(z[i])) for i in range(len(X1)))
            found.append((v, pat))
    return found


def _newton(r, R, w, Y, lam, T, alpha, tol, max_steps):
    """Damped Newton on G from r, the line search keeping c > 0 on the grid (Armijo 1/4)."""
    N, k = Y.shape
    steps = 0
    for steps in range(1, max_steps + 1):
        G, grad, p, c, H = _objective(r, R, w, Y, lam, T, alpha, True)
        step = np.linalg.lstsq(H, grad, rcond=None)[0]
        dec = float(grad @ step)
        if dec < tol * max(1.0, abs(G)):
            break
        t = 1.0
        while True:
            new = _objective(r - t * step.reshape(N, k), R, w, Y, lam, T, alpha, False)
            if new is not None and new[0] <= G - 0.25 * t * dec:
                break
            t *= 0.5
            if t < 1e-14:
                break
        r = r - t * step.reshape(N, k)
    return r, steps


def stationary_measure(X, Y, *, width: int, tau: float, weight_decay: float,
                       n_grid: int = 200_000, r0: Optional[np.ndarray] = None,
                       tol: float = 1e-12, max_steps: int = 200) -> StationaryMeasure:
    """The mean-field stationary measure of noisy GD on the weight-decayed two-layer ReLU net.

    Minimises G(r) = T log int_{S^d} c_r(v)^(-(d+1)/2) dv + (1/N) (<r, Y> + |r|^2 / 2)
    (T = width * tau, c_r = lambda - |g_r|^2 / lambda, g_r(v) = (1/N) sum_i r_i relu(v . x~_i))
    by damped Newton on a grid of S^d from r0 (default: from r = 0 at T' = 1, continued down
    to T by factors of 10), stopping when the Newton decrement falls below ``tol``. The
    minimiser is the residual of the self-consistent Gibbs density rho ~ exp(-(V + int W rho)
    / tau) (module docstring; Mei, Montanari, Nguyen 2018; Hu, Ren, Siska, Szpruch 2021).
    Returns the angular density p ~ c^(-(d+1)/2) on the grid and its modes, the exact local
    maxima of |g_r| (:func:`exact_modes`), by decreasing mass; a mode's mass is that of the
    grid's steepest-ascent basins whose peak climbs to it, its width the median angle of that
    mass about it, its pattern the ternary sign(v . x~_i).
    """
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    if Y.ndim == 1:
        Y = Y[:, None]
    N, d = X.shape
    k = Y.shape[1]
    lam, T, alpha = float(weight_decay), float(width * tau), (d + 1) / 2
    V, w, nb = sphere_grid(d, n_grid)
    X1 = _lift(X)
    R = np.maximum(V @ X1.T, 0.0)
    if r0 is None:  # continuation from T' = 1 down to T by factors of 10, from r = 0
        r = np.zeros((N, k))
        Tc = 1.0
        while Tc > 10 * T:
            r = _newton(r, R, w, Y, lam, Tc, alpha, tol, max_steps)[0]
            Tc /= 10
    else:
        r = np.array(r0, float).reshape(N, k)
        if _objective(r, R, w, Y, lam, T, alpha, False) is None:
            r = np.zeros((N, k))
    r, steps = _newton(r, R, w, Y, lam, T, alpha, tol, max_steps)
    G, grad, p, c, _ = _objective(r, R, w, Y, lam, T, alpha, False)
    top = _ascend(p, nb)
    peaks = np.flatnonzero(p > p[nb].max(1))  # strict local maxima (a plateau is none)
    top = np.where(np.isin(top, peaks), top, -1)  # -1: climbs to a plateau (background)

    exact = exact_modes(X, r, lam)
    F = -c  # |g|^2 / lambda - lambda: increasing with p
    modes = np.array([v for v, _ in exact]).reshape(-1, d + 1)
    Fm = -_gap(modes, X1, r, lam)[2]
    # each grid peak joins the nearest exact mode at least as high (a lattice peak on a ridge
    # lies below the ridge's maximum); -1 stays background
    owner = np.full(len(p), -1)
    for q in peaks:
        up = np.flatnonzero(Fm >= F[q] - 1e-12 * abs(F[q]))
        if len(up):
            owner[q] = up[np.argmax(modes[up] @ V[q])]
    which = np.where(top >= 0, owner[np.maximum(top, 0)], -1)
    masses = np.array([p[which == m].sum() for m in range(len(modes))])
    order = np.argsort(-masses, kind="stable")
    widths = []
    for m in order:
        sel = which == m
        ang = np.arccos(np.clip(V[sel] @ modes[m], -1, 1))
        cum = np.cumsum(p[sel][np.argsort(ang)])
        widths.append(float(np.sort(ang)[np.searchsorted(cum, cum[-1] / 2)]) if sel.any()
                      else 0.0)
    spacing = float(np.sqrt(w))
    patterns = [exact[m][1] for m in order]
    modes = modes[order]
    return StationaryMeasure(
        width=width, tau=tau, weight_decay=lam, temperature=T, residual=r, predictor=r + Y,
        directions=V, density=p / w, mass=p, gap=c, spacing=spacing, modes=np.array(modes),
        mode_masses=masses[order], mode_widths=np.array(widths), mode_patterns=patterns,
        grid_peaks=len(peaks), newton_steps=steps, gradient_norm=float(np.linalg.norm(grad)))


def sample_neurons(measure: StationaryMeasure, X, h: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """h i.i.d. neurons (W, b, a) from the stationary measure: v from the grid's masses moved by
    a tangent Gaussian of std spacing / 2, then |u|^2 c(v) / tau ~ chi^2_{d+1} and
    a ~ N(-|u| g(v) / lambda, tau / lambda I) (module docstring)."""
    X1 = _lift(np.asarray(X, float))
    D = X1.shape[1]
    q = rng.choice(len(measure.mass), size=h, p=measure.mass / measure.mass.sum())
    V0 = measure.directions[q]
    jitter = measure.spacing / 2 * rng.standard_normal((h, D))
    V = V0 + jitter - np.sum(jitter * V0, 1, keepdims=True) * V0  # tangent move
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    lam, tau = measure.weight_decay, measure.tau
    _, g, c = _gap(V, X1, measure.residual, lam)
    c = np.maximum(c, measure.gap.min())
    s = np.sqrt(tau / c * rng.chisquare(D, h))
    a = -s[:, None] * g / lam + np.sqrt(tau / lam) * rng.standard_normal(g.shape)
    U = s[:, None] * V
    return U[:, :-1], U[:, -1], a


def arccos_kernel(X) -> np.ndarray:
    """K_ij = |x~_i||x~_j| (sin t + (pi - t) cos t) / (2 pi), t the angle of x~_i, x~_j: the
    Gaussian mean of relu(u . x~_i) relu(u . x~_j) (Cho, Saul 2009)."""
    X1 = _lift(np.asarray(X, float))
    n = np.linalg.norm(X1, axis=1)
    t = np.arccos(np.clip(X1 @ X1.T / np.outer(n, n), -1, 1))
    return np.outer(n, n) * (np.sin(t) + (np.pi - t) * np.cos(t)) / (2 * np.pi)


def linear_response(X, Y, *, width: int, tau: float, weight_decay: float) -> np.ndarray:
    """The residual at large T = width * tau, where |g| << lambda: the quadratic expansion of G
    about r = 0 gives r = -(I + T K / (lambda^2 N))^(-1) Y with K the arc-cosine kernel (the
    uniform-sphere mean of relu relu is K / (d + 1))."""
    Y = np.asarray(Y, float)
    N = len(Y)
    A = np.eye(N) + width * tau * arccos_kernel(X) / (weight_decay ** 2 * N)
    return -np.linalg.solve(A, Y)


def single_point_residual(x, y, *, width: int, tau: float, weight_decay: float) -> np.ndarray:
    """The exact residual for one input x in R^2: r = -rho y / |y| with rho the root of
    T I'(rho) / I(rho) = |y| - rho, I(rho) = 2 pi (lambda^(-3/2) + lambda^(-1) (lambda -
    rho^2 |x~|^2 / lambda)^(-1/2)) (the sphere integral of c^(-3/2) in closed form)."""
    x1 = np.append(np.asarray(x, float), 1.0)
    y = np.atleast_1d(np.asarray(y, float))
    lam, T, B = weight_decay, width * tau, float(x1 @ x1)

    def eq(rho):
        q = lam - rho ** 2 * B / lam
        dI = rho * B / lam / lam * q ** -1.5
        return T * dI / (lam ** -1.5 + q ** -0.5 / lam) - np.linalg.norm(y) + rho

    rho = brentq(eq, 0.0, lam / np.sqrt(B) * (1 - 1e-15), xtol=1e-15)
    return -rho * y / np.linalg.norm(y)


@dataclass(kw_only=True)
class LangevinRun:
    """Time averages of noisy GD at finite width; see :func:`particle_langevin`."""

    predictor: np.ndarray  # time-averaged f(x_i) over the second half
    directions: np.ndarray  # unit (w, b) of all neurons at the recorded times
    residual: np.ndarray  # predictor - Y


def particle_langevin(X, Y, *, width: int, tau: float, weight_decay: float, steps: int,
                      lr: float, rng: np.random.Generator, alpha: float = 0.1,
                      record_every: int = 100) -> LangevinRun:
    """Noisy GD theta <- theta - lr (grad L) + sqrt(2 tau lr) xi on L = 1/(2N) |f - Y|^2 +
    lambda/2 |theta|^2 (the module's network), from alpha N(0, I); averages over the second
    half: the finite-width route to the stationary measure (Euler-Maruyama of the Langevin
    SDE whose invariant density is exp(-L / tau))."""
    X1 = _lift(np.asarray(X, float))
    Y = np.asarray(Y, float)
    N, k = Y.shape
    U = alpha * rng.standard_normal((width, X1.shape[1]))
    A = alpha * rng.standard_normal((width, k))
    noise = np.sqrt(2 * tau * lr)
    fsum, count, dirs = np.zeros_like(Y), 0, []
    for t in range(steps):
        Z = X1 @ U.T
        act = np.maximum(Z, 0.0)
        f = act @ A
        r = (f - Y) / N
        gA = act.T @ r + weight_decay * A
        gU = ((r @ A.T) * (Z > 0)).T @ X1 + weight_decay * U
        A = A - lr * gA + noise * rng.standard_normal(A.shape)
        U = U - lr * gU + noise * rng.standard_normal(U.shape)
        if t >= steps // 2:
            fsum += f
            count += 1
            if t % record_every == 0:
                dirs.append(U / np.linalg.norm(U, axis=1, keepdims=True))
    pred = fsum / count
    return LangevinRun(predictor=pred, directions=np.concatenate(dirs), residual=pred - Y)


@dataclass(kw_only=True)
class ZeroTemperature:
    """The T -> 0 limit of the fixed point; see :func:`zero_temperature_limit`."""

    residual: np.ndarray  # r* (N x k)
    predictor: np.ndarray  # r* + Y
    modes: np.ndarray  # local maxima of |g_r*| on S^d (m x (d+1))
    heights: np.ndarray  # |g_r*| / lambda at the modes (1 on the limit's support)
    mode_patterns: list = field(default_factory=list)
    cuts: int = 0  # directions in the final cutting-plane constraint set

    @property
    def support(self) -> int:
        """Modes where |g_r*| reaches lambda (to 1e-6): where the limit measure's mass sits."""
        return int(np.sum(self.heights >= 1 - 1e-6))


def zero_temperature_limit(X, Y, *, weight_decay: float, max_rounds: int = 100,
                           tol: float = 1e-9) -> ZeroTemperature:
    """The limit T -> 0 of the minimiser of G: r* = argmin (<r, Y> + |r|^2 / 2) subject to
    max_{v in S^d} |g_r(v)| <= lambda, the dual of the group-lasso (convex) form of the
    weight-decayed network, min (1/2N) |f - Y|^2 + lambda sum_j |u_j| |a_j| (Pilanci, Ergen
    2020). Solved by cutting planes: SLSQP on the directions found so far, each round adding
    the exact local maxima of |g_r| (:func:`exact_modes`) that exceed lambda (1 + tol)."""
    X1 = _lift(np.asarray(X, float))
    Y = np.asarray(Y, float).reshape(len(X1), -1)
    N, k = Y.shape
    lam = float(weight_decay)
    cuts = np.zeros((0, X1.shape[1]))
    r = -Y.copy()  # the unconstrained minimiser
    for _ in range(max_rounds):
        over = [v for v, _ in exact_modes(X, r, lam)
                if -_gap(v[None], X1, r, lam)[2][0] > lam * ((1 + tol) ** 2 - 1)]
        if not over:
            break
        cuts = np.vstack([cuts, over])
        Rc = np.maximum(cuts @ X1.T, 0.0) / N

        def con(x, Rc=Rc):
            return lam ** 2 - np.sum((Rc @ x.reshape(N, k)) ** 2, 1)

        def jac(x, Rc=Rc):
            G = Rc @ x.reshape(N, k)
            return -2 * (Rc[:, :, None] * G[:, None, :]).reshape(len(Rc), N * k)

        res = minimize(lambda x: x @ Y.ravel() + 0.5 * x @ x, r.ravel(),
                       jac=lambda x: Y.ravel() + x, method="SLSQP",
                       constraints=[{"type": "ineq", "fun": con, "jac": jac}],
                       options={"ftol": 1e-15, "maxiter": 500})
        r = res.x.reshape(N, k)
    found = exact_modes(X, r, lam)
    modes = np.array([v for v, _ in found]).reshape(-1, X1.shape[1])
    heights = np.sqrt(np.maximum(lam - _gap(modes, X1, r, lam)[2], 0) * lam) / lam
    order = np.argsort(-heights)
    return ZeroTemperature(residual=r, predictor=r + Y, modes=modes[order],
                           heights=heights[order], mode_patterns=[found[i][1] for i in order],
                           cuts=len(cuts))
