"""PAC-Bayes in parameter space versus quotient space, and the orbit-volume implicit-bias prior.

Setting. phi: Theta = R^n -> P is a parameterization with symmetry group G
(phi(g . theta) = phi(theta)). A prior P and a posterior Q on Theta are pushed forward to
predictors: P_bar = phi_# P, Q_bar = phi_# Q. The loss of theta depends on phi(theta) only, so
the Gibbs risks of Q and Q_bar agree, and the chain rule of relative entropy gives

    KL(Q || P) = KL(Q_bar || P_bar) + E_{beta ~ Q_bar} KL(Q(. | beta) || P(. | beta))
               >= KL(Q_bar || P_bar),                                                    (1)

the second term being the part of the parameter-space KL caused only by how P and Q spread
over the parameterizations of one predictor (zero iff the fibre conditionals agree Q_bar-a.e.).
Every PAC-Bayes certificate may use KL(Q_bar || P_bar) in place of KL(Q || P) (Cover and Thomas
2006, Thm 2.5.3 for (1); the data-processing inequality of relative entropy).

Densities on the quotient (coarea formula). Where the fibres are G-orbits, the Lebesgue measure
of Theta disintegrates as  d theta = vol_G(theta) dHaar(g) x d beta / NJ(theta), with

    vol_G(theta) = sqrt det(X^T X),  X = symmetry().generators(theta)   (n x k; the volume of a
                   unit of Haar measure of the orbit through theta),
    NJ(theta)    = product of the nonzero singular values of J(theta) (the normal Jacobian of
                   phi: volume factor from horizontal vectors to predictor tangent vectors),

so the density of P_bar with respect to the Hausdorff measure on the predictor manifold is the
orbit integral  p_bar(beta) = int_G p(g . theta) omega(g . theta) dHaar(g),  omega = vol_G / NJ
(coarea formula: Federer 1969, "Geometric Measure Theory", 3.2.12; the Haar measure is dt in
the exponential coordinates exp(sum_k t_k A_k) of an abelian group, which all built-in
continuous symmetries used here are). Related: Rouchouse, Gonon, Gribonval, Guedj (2025),
"Non-vacuous generalization bounds: can rescaling invariances help?" (arXiv:2509.26149),
which bounds KL in a rescaling-invariant lifted space by data processing.

Implicit-bias prior (the construction used here; the seed paper's exact definition was not
available, see docs/pacbayes.md). For a centred Gaussian neutral prior p, take for each
predictor its canonical parameterization s(beta) = the minimum-norm point of the orbit (where the
moment map mu_k(theta) = <theta, A_k theta> of the orbit vanishes: |u_i| = |v_i| for Hadamard,
U^T U = V^T V for UV^T and QK attention; Kempf and Ness 1979), and weight it by the volume of
its orbit:

    p_bar_IB(beta) = (1/Z) sum_{components c} p(s_c(beta)) omega(s_c(beta)),                  (2)

i.e. the orbit integral of p_bar collapsed onto the canonical point, one unit of Haar measure of
the orbit measured at s(beta). Since |s(beta)|^2 / 2 = R(beta) = min {|theta|^2/2 : phi(theta)
= beta} is the implicit-bias regulariser of gradient descent from small initialisation (l1 for
Hadamard, nuclear norm for matrix factorizations), p_bar_IB ~ exp(-R(beta)/sigma^2) x volume
factor. For Hadamard omega = 1 on the balanced section and (2) is the Laplace density
exp(-|beta_i|/sigma^2) / (2 sigma^2) per coordinate, while the neutral push-forward is
K_0(|beta_i|/sigma^2) / (pi sigma^2). As a prior on Theta, P_IB is the neutral prior tilted by
p_bar_IB / p_bar on predictors (same fibre conditionals as the neutral prior), so that its
parameter-space KL is KL(Q||P) - [KL(Q_bar||P_bar) - KL(Q_bar||P_bar_IB)].

Estimators of KL(Q_bar || P_bar):

* ``quadrature`` (exact up to quadrature error) for *separable bilinear* parameterizations,
  detected generically from J and forward: every predictor coordinate is the product
  theta_a theta_b of its own two parameters. With Q, P Gaussians that are independent across the
  pairs, the quotient KL is a sum of one-dimensional KLs; the density of beta = x y for a
  bivariate Gaussian (x, y) is the one-dimensional integral  f(beta) = sum_{s = +-1} int_R
  f_{x,y}(s e^t, s beta e^{-t}) dt  (t = log|x|; Craig 1936 for the product of normals), done by
  Gauss-Legendre in t on the region where the Gaussian has mass, and the outer KL integral by
  ``scipy.integrate.quad_vec``.
* ``montecarlo`` for the others: KL = E_{theta ~ Q}[log q_bar(phi(theta)) - log p_bar(phi(theta))]
  with the orbit integrals done by ``scipy.integrate.quad`` through theta's own orbit; the
  error bar is the standard error of the mean over the samples. Implemented for groups whose
  continuous part is one-dimensional, abelian and non-compact (exp(t A) with A symmetric), with
  the discrete components found from ``random_element`` by polar decomposition.

Certificates for a loss in [0, 1], n i.i.d. samples, confidence 1 - delta (KL in nats):

* McAllester (1999) in Maurer's (2004) form:  L <= L_hat + sqrt((KL + ln(2 sqrt(n)/delta)) / (2n));
* Maurer-Seeger (Seeger 2002; Maurer 2004):  kl(L_hat || L) <= (KL + ln(2 sqrt(n)/delta)) / n,
  inverted by bisection: L <= sup{p : kl(L_hat || p) <= rhs};
* Catoni (2007, Thm 1.2.6):  L <= (1 - exp(-C L_hat - (KL + ln(1/delta))/n)) / (1 - exp(-C)),
  C over a grid of ``catoni_grid`` values with a union bound (delta / len(grid)).

A union bound over J prior scales chosen before seeing the data replaces delta by delta / J
(each prior scale's certificate then holds simultaneously; report the best).
"""

import dataclasses
import functools
import math
import weakref

import numpy as np
from scipy import integrate, linalg, optimize, special

from .errors import NotProvidedError, ParamgeoError, ShapeError
from .results import Result


class PacBayesInputError(ParamgeoError, ValueError):
    """A PAC-Bayes input (delta, n, scale, risk, KL, distribution) is out of its range."""


# ---------------------------------------------------------------------------- distributions
@dataclasses.dataclass(frozen=True)
class DiagonalGaussian(Result):
    """N(mean, diag(std^2)) on Theta = R^n; ``isotropic(mean, s)`` gives N(mean, s^2 I).

    log density  log q(theta) = -sum_j [ (theta_j - mean_j)^2 / (2 std_j^2) + log(std_j) ]
                                - (n/2) log(2 pi).
    """

    mean: np.ndarray
    std: np.ndarray

    def __post_init__(self):
        mean = np.atleast_1d(np.asarray(self.mean, dtype=float))
        std = np.asarray(self.std, dtype=float)
        if std.ndim == 0:
            std = np.full(mean.shape, float(std))
        if mean.ndim != 1 or std.shape != mean.shape:
            raise ShapeError(
                f"a Gaussian needs a flat mean and a std of the same length (or a scalar std); "
                f"got mean {mean.shape}, std {std.shape}"
            )
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))):
            raise PacBayesInputError("a Gaussian's mean and std must be finite (no NaN or inf)")
        if np.any(std <= 0):
            raise PacBayesInputError(
                f"a Gaussian's std must be positive; got min {std.min():.3g} (use a scale > 0)"
            )
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)

    @classmethod
    def isotropic(cls, mean, scale):
        """N(mean, scale^2 I)."""
        return cls(mean, _positive(scale, "scale"))

    @property
    def n(self):
        return self.mean.size

    def sample(self, rng, size=None):
        """Samples (size x n, or n if size is None) from ``rng`` (a numpy Generator)."""
        shape = (self.n,) if size is None else (int(size), self.n)
        return self.mean + self.std * rng.standard_normal(shape)

    def logpdf(self, theta):
        """log density at theta (shape (..., n))."""
        z = (np.asarray(theta, float) - self.mean) / self.std
        return -0.5 * np.sum(z * z, axis=-1) - np.sum(np.log(self.std)) \
            - 0.5 * self.n * math.log(2 * math.pi)


def _positive(value, what):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise PacBayesInputError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise PacBayesInputError(f"{what} must be a positive finite number, got {value!r}")
    return value


def kl_gaussian(q, p):
    """KL(N(mq, Sq) || N(mp, Sp)) for diagonal Gaussians, in nats:

        1/2 sum_j [ sq_j^2/sp_j^2 + (mq_j - mp_j)^2/sp_j^2 - 1 + 2 log(sp_j/sq_j) ]

    (the Gaussian relative entropy summed over the independent coordinates; Kullback 1959,
    "Information Theory and Statistics"; checked against :func:`kl_mvn` and Monte Carlo).
    """
    if q.n != p.n:
        raise ShapeError(f"posterior has {q.n} entries but prior has {p.n}")
    r = (q.std / p.std) ** 2
    d = ((q.mean - p.mean) / p.std) ** 2
    return float(0.5 * np.sum(r + d - 1.0 - np.log(r)))


def kl_mvn(mq, Sq, mp, Sp):
    """KL(N(mq, Sq) || N(mp, Sp)) for full covariances:
    1/2 [ tr(Sp^-1 Sq) + (mp - mq)^T Sp^-1 (mp - mq) - k + ln det Sp - ln det Sq ]."""
    mq, mp = np.atleast_1d(mq).astype(float), np.atleast_1d(mp).astype(float)
    Sq, Sp = np.atleast_2d(Sq).astype(float), np.atleast_2d(Sp).astype(float)
    cp = linalg.cho_factor(Sp)
    diff = mp - mq
    _, ldq = np.linalg.slogdet(Sq)
    _, ldp = np.linalg.slogdet(Sp)
    return float(0.5 * (np.trace(linalg.cho_solve(cp, Sq)) + diff @ linalg.cho_solve(cp, diff)
                        - len(mq) + ldp - ldq))


@dataclasses.dataclass(frozen=True)
class ChainRule(Result):
    """The three terms of (1) for a linear phi(theta) = A theta and Gaussian Q, P."""

    kl_param: float
    kl_quotient: float
    expected_fibre_kl: float


def gaussian_chain_rule(A, mq, Sq, mp, Sp):
    """Terms of KL(Q||P) = KL(Q_bar||P_bar) + E_{Q_bar} KL(Q(.|beta) || P(.|beta)) for the linear
    map phi(theta) = A theta (A of full row rank) and Gaussians Q = N(mq, Sq), P = N(mp, Sp),
    each computed from its own closed form (Gaussian conditioning, e.g. Bishop 2006, 2.3.1).

    Q_bar = N(A mq, A Sq A^T). With N an orthonormal basis of ker A and theta = A^+ beta + N z,
    z | beta ~ N(c + B beta, C) with C = (N^T S^-1 N)^-1, B = -C N^T S^-1 A^+,
    c = C N^T S^-1 m; the fibre KL is Gaussian in z, and its mean over beta ~ Q_bar uses
    E[delta delta^T] = (a + Bd mu)(a + Bd mu)^T + Bd Sigma Bd^T for delta = a + Bd beta.
    """
    A = np.atleast_2d(np.asarray(A, float))
    Apinv = np.linalg.pinv(A)
    N = linalg.null_space(A)
    kl_param = kl_mvn(mq, Sq, mp, Sp)
    mu, Sig = A @ mq, A @ Sq @ A.T
    kl_quot = kl_mvn(mu, Sig, A @ mp, A @ Sp @ A.T)

    def conditional(m, S):
        Si = np.linalg.inv(S)
        C = np.linalg.inv(N.T @ Si @ N)
        return C @ N.T @ Si @ m, -C @ N.T @ Si @ Apinv, C  # z|beta ~ N(c + B beta, C)

    cq, Bq, Cq = conditional(np.asarray(mq, float), np.asarray(Sq, float))
    cp, Bp, Cp = conditional(np.asarray(mp, float), np.asarray(Sp, float))
    Cpi = np.linalg.inv(Cp)
    k = N.shape[1]
    a, Bd = cq - cp, Bq - Bp
    mean_delta = a + Bd @ mu
    second = np.outer(mean_delta, mean_delta) + Bd @ Sig @ Bd.T
    _, ldq = np.linalg.slogdet(Cq)
    _, ldp = np.linalg.slogdet(Cp)
    fibre = 0.5 * (np.trace(Cpi @ Cq) + np.trace(Cpi @ second) - k + ldp - ldq)
    return ChainRule(kl_param, kl_quot, float(fibre))


# ---------------------------------------------------------------------------- certificates
def _check_cert_inputs(empirical_risk, kl, n, delta):
    try:
        emp, kl, delta = float(empirical_risk), float(kl), float(delta)
    except (TypeError, ValueError):
        raise PacBayesInputError("empirical risk, KL and delta must be numbers") from None
    if isinstance(n, float) and not float(n).is_integer():
        raise PacBayesInputError(f"n must be a positive integer (sample size), got {n!r}")
    try:
        n = int(n)
    except (TypeError, ValueError):
        raise PacBayesInputError(f"n must be a positive integer, got {n!r}") from None
    if n < 1:
        raise PacBayesInputError(f"n must be a positive integer (sample size), got {n}")
    if not (0.0 < delta < 1.0):
        raise PacBayesInputError(f"delta must lie in (0, 1), got {delta!r}; e.g. --delta 0.05")
    if not (0.0 <= emp <= 1.0):
        raise PacBayesInputError(
            f"the empirical risk must lie in [0, 1] (a bounded loss), got {emp!r}"
        )
    if not (math.isfinite(kl) and kl >= 0.0):
        raise PacBayesInputError(f"KL must be finite and >= 0, got {kl!r}")
    return emp, kl, n, delta


def kl_bernoulli(q, p):
    """kl(q || p) = q ln(q/p) + (1-q) ln((1-q)/(1-p)) with 0 ln 0 = 0 (scipy.special.xlogy)."""
    q, p = float(q), float(p)
    if p <= 0.0:
        return 0.0 if q == 0.0 else math.inf
    if p >= 1.0:
        return 0.0 if q == 1.0 else math.inf
    return float(special.xlogy(q, q) - special.xlogy(q, p)
                 + special.xlogy(1 - q, 1 - q) - special.xlogy(1 - q, 1 - p))


def kl_inverse_upper(q, c, tol=1e-12):
    """sup{p in [q, 1] : kl(q || p) <= c} by bisection (kl(q || .) increases on [q, 1])."""
    if c < 0:
        raise PacBayesInputError(f"the kl budget must be >= 0, got {c}")
    lo, hi = float(q), 1.0
    if kl_bernoulli(q, hi) <= c:
        return 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if kl_bernoulli(q, mid) <= c:
            lo = mid
        else:
            hi = mid
    return hi


def mcallester_bound(empirical_risk, kl, n, delta):
    """L <= L_hat + sqrt((KL + ln(2 sqrt(n)/delta)) / (2n))  (McAllester 1999; Maurer 2004,
    whose ln(2 sqrt(n)/delta) form is proved for n >= 8)."""
    emp, kl, n, delta = _check_cert_inputs(empirical_risk, kl, n, delta)
    return emp + math.sqrt((kl + math.log(2 * math.sqrt(n) / delta)) / (2 * n))


def maurer_seeger_bound(empirical_risk, kl, n, delta):
    """L <= kl^{-1}(L_hat, (KL + ln(2 sqrt(n)/delta)) / n)  (Seeger 2002; Maurer 2004)."""
    emp, kl, n, delta = _check_cert_inputs(empirical_risk, kl, n, delta)
    return kl_inverse_upper(emp, (kl + math.log(2 * math.sqrt(n) / delta)) / n)


def catoni_bound(empirical_risk, kl, n, delta, C):
    """L <= (1 - exp(-C L_hat - (KL + ln(1/delta))/n)) / (1 - exp(-C))  for a fixed C > 0
    (Catoni 2007, Theorem 1.2.6)."""
    emp, kl, n, delta = _check_cert_inputs(empirical_risk, kl, n, delta)
    C = _positive(C, "Catoni's C")
    return -math.expm1(-C * emp - (kl + math.log(1 / delta)) / n) / -math.expm1(-C)


DEFAULT_CATONI_GRID = tuple(float(c) for c in np.geomspace(0.1, 20.0, 12))


@dataclasses.dataclass(frozen=True)
class Certificates(Result):
    """The three certificates on the true risk for one (empirical risk, KL, n, delta).

    ``union`` is the number of priors in the union bound (delta_used = delta / union; Catoni's
    grid further divides by its length).
    """

    empirical_risk: float
    kl: float
    n: int
    delta: float
    union: int
    delta_used: float
    mcallester: float
    maurer_seeger: float
    catoni: float
    catoni_C: float


def certificates(empirical_risk, kl, n, delta, union=1, catoni_grid=DEFAULT_CATONI_GRID):
    """McAllester, Maurer-Seeger and Catoni bounds at confidence delta / union (a union bound
    over ``union`` priors fixed before the data), Catoni minimised over ``catoni_grid`` with
    delta / (union * len(grid))."""
    emp, kl, n, delta = _check_cert_inputs(empirical_risk, kl, n, delta)
    if int(union) < 1:
        raise PacBayesInputError(f"union must be a positive number of priors, got {union}")
    d = delta / int(union)
    grid = tuple(catoni_grid)
    cat = [(catoni_bound(emp, kl, n, d / len(grid), C), C) for C in grid]
    best, bestC = min(cat)
    return Certificates(emp, kl, n, delta, int(union), d, mcallester_bound(emp, kl, n, d),
                        maurer_seeger_bound(emp, kl, n, d), best, float(bestC))


# ---------------------------------------------------------------------------- orbit geometry
def lie_algebra_matrices(param):
    """The n x n matrices A_k of the infinitesimal action, generators(theta)[:, k] = A_k theta,
    read off from ``symmetry().generators`` at the basis vectors and checked for linearity at a
    random point. Returns an array (k, n, n)."""
    return _lie_algebra_cached(param)


_CACHE = weakref.WeakKeyDictionary()  # param -> {"A": Lie algebra matrices, "D": components}


def _cache(param):
    return _CACHE.setdefault(param, {})


def _lie_algebra_cached(param):
    cache = _cache(param)
    if "A" in cache:
        return cache["A"]
    if not param.provides("symmetry"):
        raise NotProvidedError(type(param).__name__, "symmetry", "symmetry")
    group = param.symmetry()
    cols = [np.asarray(group.generators(e), float) for e in np.eye(param.n)]
    k = cols[0].shape[1]
    A = np.zeros((k, param.n, param.n))
    for j, g in enumerate(cols):
        A[:, :, j] = g.T
    theta = np.random.default_rng(0).standard_normal(param.n)
    lin = np.einsum("kij,j->ik", A, theta)
    if not np.allclose(lin, group.generators(theta), rtol=1e-9, atol=1e-9):
        raise NotProvidedError(type(group).__name__, "a linear action (generators linear in "
                               "theta), needed for orbit integrals and canonical points")
    cache["A"] = A
    return A


@dataclasses.dataclass(frozen=True)
class OrbitVolume(Result):
    """Volume element of the orbit at theta: sqrt det of the Gram matrix of the generators,
    split into the compact (isometric: skew A_k) and non-compact (symmetric A_k) directions:
    volume = basis_det * compact_volume * noncompact_volume."""

    volume: float
    dim: int
    compact_dim: int
    compact_volume: float
    noncompact_volume: float
    basis_det: float


def orbit_volume(param, theta):
    """vol_G(theta) = sqrt det(X^T X), X = symmetry().generators(theta) (n x k): the volume of
    the orbit through theta per unit of Haar measure (in the plugin's Lie-algebra basis).

    Split: the Lie algebra (as n x n matrices A_k, generators = A_k theta) is divided by the
    transpose into its skew part k (isometries; a compact subgroup K whose orbits have finite
    volume, vol x Haar(K), a constant that cancels when a prior is normalised) and its symmetric
    part p (non-compact directions, orbits of infinite volume: only the element per unit Haar
    measure is meaningful), each with a Frobenius-orthonormal basis. compact_volume =
    sqrt det Gram(K_i theta); noncompact_volume = sqrt det Gram of the P_j theta projected off
    the compact directions (Schur complement); basis_det = |det| of the change from the plugin's
    basis to the orthonormal one (nan if the algebra is not closed under transpose).
    """
    theta = param.as_theta(theta)
    X = np.asarray(param.symmetry().generators(theta), float)
    k = X.shape[1]
    if k == 0:
        return OrbitVolume(1.0, 0, 0, 1.0, 1.0, 1.0)
    vol = float(np.sqrt(max(np.linalg.det(X.T @ X), 0.0)))
    A = lie_algebra_matrices(param)
    n = param.n
    Ks = _basis(((A - A.transpose(0, 2, 1)) / 2).reshape(k, -1))
    Ps = _basis(((A + A.transpose(0, 2, 1)) / 2).reshape(k, -1))
    KX = np.stack([b.reshape(n, n) @ theta for b in Ks], axis=1) if len(Ks) else np.zeros((n, 0))
    PX = np.stack([b.reshape(n, n) @ theta for b in Ps], axis=1) if len(Ps) else np.zeros((n, 0))
    cvol = float(np.sqrt(max(np.linalg.det(KX.T @ KX), 0.0))) if KX.shape[1] else 1.0
    if KX.shape[1]:
        Qk, _ = np.linalg.qr(KX)
        PX = PX - Qk @ (Qk.T @ PX)
    nvol = float(np.sqrt(max(np.linalg.det(PX.T @ PX), 0.0))) if PX.shape[1] else 1.0
    if len(Ks) + len(Ps) == k:
        T = A.reshape(k, -1) @ np.vstack([Ks, Ps]).T
        bdet = float(abs(np.linalg.det(T)))
    else:
        bdet = float("nan")
    return OrbitVolume(vol, k, len(Ks), cvol, nvol, bdet)


def _basis(rows, tol=1e-10):
    if rows.size == 0:
        return np.zeros((0, rows.shape[1]))
    u, s, vt = np.linalg.svd(rows, full_matrices=False)
    return vt[: int(np.sum(s > tol * max(s[0], 1e-300)))] if s.size and s[0] > 0 else \
        np.zeros((0, rows.shape[1]))


def normal_jacobian(param, theta):
    """NJ(theta) = product of the n - dim(orbit) largest singular values of J(theta): the
    volume factor of d phi on the horizontal space (ker J = vertical space at regular points)."""
    theta = param.as_theta(theta)
    return math.exp(_log_nj(param, theta))


def _log_nj(param, theta):
    s = np.linalg.svd(param.jacobian(theta), compute_uv=False)
    k = lie_algebra_matrices(param).shape[0] if param.provides("symmetry") else 0
    return float(np.sum(np.log(s[: param.n - k])))


def log_omega(param, theta):
    """log(vol_G(theta) / NJ(theta)): the orbit-to-predictor density factor of the coarea
    formula (see the module docstring); vol_G from the generators A_k theta (cached A_k)."""
    A = lie_algebra_matrices(param)
    X = A @ np.asarray(theta, float)  # (k, n): generator k at theta
    sign, logdet = np.linalg.slogdet(X @ X.T) if len(X) else (1.0, 0.0)
    if sign <= 0:
        return -math.inf
    return 0.5 * logdet - _log_nj(param, theta)


@dataclasses.dataclass(frozen=True)
class CanonicalPoint(Result):
    """The minimum-norm point of the orbit of theta (moment map <theta, A_k theta> = 0)."""

    theta: np.ndarray
    moment_norm: float
    iterations: int
    converged: bool


def canonical_point(param, theta, tol=1e-12, maxiter=100):
    """Minimum-norm point s of the identity-component orbit {exp(sum_k xi_k A_k) theta}, found by
    damped Newton steps in the Lie algebra, recentred at every step:

        f(xi) = |exp(xi . A) theta|^2,  grad_k = 2 <theta, A_k theta> = 2 mu_k(theta),
        Hess_kl = 2 <A_k theta, A_l theta> + <theta, (A_k A_l + A_l A_k) theta>,

    xi = -Hess^+ grad with backtracking on f. At the minimum the moment map mu vanishes (Kempf and
    Ness 1979); isometric (skew) directions have zero gradient and Hessian and are left alone.
    For Hadamard this is |u_i| = |v_i|, for UV^T-type blocks U^T U = V^T V. Generic: only the
    plugin's generators are used (they are assumed linear in theta; checked).
    """
    theta = param.as_theta(theta).copy()
    A = lie_algebra_matrices(param)
    if A.shape[0] == 0:
        return CanonicalPoint(theta, 0.0, 0, True)
    scale = max(float(theta @ theta), 1e-300)
    for it in range(1, maxiter + 1):
        At = np.einsum("kij,j->ki", A, theta)
        mu = At @ theta
        if np.linalg.norm(mu) <= tol * scale:
            return CanonicalPoint(theta, float(np.linalg.norm(mu)), it - 1, True)
        AA = np.einsum("kij,ljm,m->kli", A, A, theta)  # (A_k A_l theta)_i
        M = np.einsum("i,kli->kl", theta, AA)
        H = 2 * At @ At.T + M + M.T
        step = -np.linalg.lstsq(H, 2 * mu, rcond=1e-12)[0]
        f0, m0 = float(theta @ theta), float(np.linalg.norm(mu))
        t = 1.0
        while t > 1e-12:
            cand = linalg.expm(np.tensordot(t * step, A, axes=1)) @ theta
            mc = float(np.linalg.norm(np.einsum("kij,j->ki", A, cand) @ cand))
            # descent on f; near the minimum, where f stalls at round-off, on |mu|
            if float(cand @ cand) < f0 or mc < 0.5 * m0:
                break
            t *= 0.5
        else:
            break
        theta = cand
    At = np.einsum("kij,j->ki", A, theta)
    mun = float(np.linalg.norm(At @ theta))
    return CanonicalPoint(theta, mun, maxiter, mun <= 1e-8 * scale)


# ---------------------------------------------------------------------------- orbit integrals
def _group_components(param, draws=64, seed=0):
    """Representatives D (n x n orthogonal) of the components of the group, from the polar
    decomposition M = D S of the matrices of random elements (S = exp(sum t_k A_k) > 0)."""
    cache = _cache(param)
    if "D" in cache:
        return cache["D"]
    group = param.symmetry()
    rng = np.random.default_rng(seed)
    reps = [np.eye(param.n)]
    for _ in range(draws):
        g = group.random_element(rng)
        M = np.stack([np.asarray(group.act(g, e), float) for e in np.eye(param.n)], axis=1)
        D, _ = linalg.polar(M)
        D = np.round(D, 8)
        A = lie_algebra_matrices(param)
        if not all(np.allclose(D @ Ak, Ak @ D, atol=1e-8) for Ak in A):
            raise NotProvidedError(type(group).__name__, "components commuting with the "
                                   "continuous part (needed for orbit integrals)")
        if not any(np.allclose(D, R, atol=1e-6) for R in reps):
            reps.append(D)
    cache["D"] = reps
    return reps


def _require_abelian_noncompact_1d(param):
    A = lie_algebra_matrices(param)
    if A.shape[0] != 1 or not np.allclose(A[0], A[0].T, atol=1e-12):
        raise NotProvidedError(
            type(param).__name__,
            "orbit integrals for this symmetry group (the Monte Carlo quotient KL needs a "
            "continuous symmetry that is one-dimensional, abelian and non-compact, such as one "
            "GL(1) or one rescaling; separable bilinear maps use quadrature instead)",
        )
    w, V = np.linalg.eigh(A[0])
    return w, V


def orbit_log_integral(param, theta, logdens, gap=50.0):
    """log int_G dens(g . theta) omega(g . theta) dHaar(g) for a one-dimensional abelian
    non-compact continuous symmetry exp(t A) (A symmetric, Haar measure dt), summed over the
    group's components D:  sum_D int_R dens(D exp(tA) theta) omega(D exp(tA) theta) dt.

    Each integral is done by ``scipy.integrate.quad`` in log-scaled form: the mode t* of the
    log-integrand is found by a grid scan and ``minimize_scalar``, the range is where the
    log-integrand exceeds its maximum minus ``gap`` nats, and t* is passed as a break point.
    ``logdens`` maps a theta to a log density; a list of them gives an array of integrals
    along the same orbit (omega is then evaluated once per t and shared; it is the same on
    every component, since the D are orthogonal symmetries commuting with A).
    """
    many = isinstance(logdens, (list, tuple))
    funcs = list(logdens) if many else [logdens]
    w, V = _require_abelian_noncompact_1d(param)
    theta = param.as_theta(theta)
    c0 = V.T @ theta
    comps = _group_components(param)
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
    res = special.logsumexp(out, axis=1)
    return res if many else float(res[0])


def implicit_bias_log_unnormalized(param, prior, theta):
    """log of sum_D p(D s) omega(D s), s = canonical_point(theta): the unnormalised implicit-bias
    density (2) at phi(theta)."""
    s = canonical_point(param, theta).theta
    terms = [prior.logpdf(D @ s) + log_omega(param, D @ s) for D in _group_components(param)]
    return float(special.logsumexp(terms))


# ---------------------------------------------------------------------------- separable maps
def bilinear_components(param, seed=0):
    """[(i, a, b), ...] if every predictor coordinate i is theta_a * theta_b of its own pair of
    parameters (disjoint pairs), checked from J's sparsity and ``forward`` at two random points;
    else None."""
    rng = np.random.default_rng(seed)
    th = param.random_point(rng)
    J = param.jacobian(th)
    pairs, used = [], set()
    for i in range(param.m):
        cols = np.flatnonzero(np.abs(J[i]) > 0)
        if len(cols) != 2 or used & set(cols):
            return None
        used |= set(cols)
        pairs.append((i, int(cols[0]), int(cols[1])))
    for _ in range(2):
        th = param.random_point(rng)
        f = np.asarray(param.forward_flat(th), float)
        prod = np.array([th[a] * th[b] for _, a, b in pairs])
        if not np.allclose(f, prod, rtol=1e-10, atol=1e-12):
            return None
    return pairs


@functools.lru_cache(maxsize=8)
def _legendre(nodes):
    return special.roots_legendre(nodes)


def product_logpdf(beta, mean, cov, nodes=96, width=12.0):
    """log density of beta = x y for (x, y) ~ N(mean, cov) (a bivariate Gaussian, correlation
    allowed), at the points ``beta`` (beta != 0; the density has a log singularity at 0 when
    both marginals charge 0):

        f(beta) = sum_{s = +-1} int_R f_{s m, C}(e^t, beta e^{-t}) dt     (x = s e^t),

    by Gauss-Legendre with ``nodes`` nodes in t on the interval where x lies within ``width``
    marginal standard deviations of its mean and beta/x within ``width`` of y's (outside it the
    Gaussian has mass < 1e-30 relative). Reference: Craig (1936), "On the frequency function of
    xy"; the centred independent case is K_0(|beta|/(sx sy)) / (pi sx sy).
    """
    b = np.atleast_1d(np.asarray(beta, float))
    mean = np.asarray(mean, float)
    C = np.asarray(cov, float)
    det = C[0, 0] * C[1, 1] - C[0, 1] ** 2
    if det <= 0:
        raise PacBayesInputError("the bivariate covariance must be positive definite")
    sx, sy = math.sqrt(C[0, 0]), math.sqrt(C[1, 1])
    x_nodes, w_nodes = _legendre(int(nodes))
    ab = np.abs(b)
    total = np.full(b.shape, -np.inf)
    for s in (1.0, -1.0):
        mx, my = s * mean[0], s * mean[1]
        xlo, xhi = max(mx - width * sx, 0.0), mx + width * sx
        ylo, yhi = my - width * sy, my + width * sy
        ymin = np.where(b > 0, max(ylo, 0.0), max(-yhi, 0.0))
        ymax = np.where(b > 0, yhi, -ylo)
        ok = (ymax > 0) & (xhi > 0) & (ab > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lo = np.maximum(ab / np.where(ymax > 0, ymax, 1.0), xlo)
            hi = np.minimum(np.where(ymin > 0, ab / np.where(ymin > 0, ymin, 1.0), np.inf), xhi)
        ok &= hi > lo
        lo, hi = np.where(ok, lo, 1.0), np.where(ok, hi, 2.0)
        tlo, thi = np.log(lo), np.log(hi)
        half = 0.5 * (thi - tlo)
        t = (tlo + thi)[:, None] * 0.5 + half[:, None] * x_nodes[None, :]
        x = np.exp(t)
        y = b[:, None] / x
        zx, zy = x - mx, y - my
        quad = (C[1, 1] * zx * zx - 2 * C[0, 1] * zx * zy + C[0, 0] * zy * zy) / det
        logf = -quad / 2 - math.log(2 * math.pi) - 0.5 * math.log(det)
        val = special.logsumexp(logf + np.log(w_nodes)[None, :], axis=1) + np.log(half)
        total = np.logaddexp(total, np.where(ok, val, -np.inf))
    total = np.where(ab == 0, np.inf, total)
    return total


def laplace_ib_logpdf(beta, prior_std):
    """Implicit-bias density (2) of one bilinear coordinate beta = x y under a centred prior
    N(0, diag(sx^2, sy^2)): the minimum-norm points are +-(sqrt|beta|, sign(beta) sqrt|beta|),
    omega = 1 there (vol_G = |(x, -y)| = NJ = |(y, x)|), so p_bar_IB(beta) ~ exp(-lam |beta|),
    lam = (1/sx^2 + 1/sy^2)/2; the normaliser is computed by ``scipy.integrate.quad``
    (closed form lam/2, checked in the tests)."""
    lam = 0.5 * (1 / prior_std[0] ** 2 + 1 / prior_std[1] ** 2)
    return -lam * np.abs(np.asarray(beta, float)) - _laplace_log_norm(lam)


@functools.lru_cache(maxsize=256)
def _laplace_log_norm(lam):
    return math.log(2 * integrate.quad(lambda x: math.exp(-lam * x), 0, math.inf)[0])


def centred_product_logpdf(beta, sx, sy):
    """log density of x y for independent x ~ N(0, sx^2), y ~ N(0, sy^2):
    log K_0(|beta|/(sx sy)) - log(pi sx sy) (Craig 1936; ``scipy.special.k0e`` avoids
    underflow). The neutral prior's push-forward through a bilinear coordinate."""
    z = np.abs(np.asarray(beta, float)) / (sx * sy)
    with np.errstate(divide="ignore"):
        return np.log(special.k0e(z)) - z - math.log(math.pi * sx * sy)


def kl_1d(logq, logps, lo, hi, rtol=1e-7, panels=8, order=16, max_panels=4096):
    """KL(q || p_j) = int q (log q - log p_j) for 1-D densities given as vectorised log-density
    functions, on [lo, 0] and [0, hi], each with the substitution beta = +-L u^2 (u in [0, 1])
    that removes the log singularity the push-forward densities have at 0, by composite
    Gauss-Legendre (``scipy.special.roots_legendre``, ``order`` nodes per panel, fully
    vectorised), doubling the number of panels until two successive results agree to ``rtol``
    (relative to max(1, |KL|)). Returns (kls, q-mass on [lo, hi], error estimate)."""
    x, w = _legendre(int(order))

    def rule(m):
        edges = np.linspace(0.0, 1.0, m + 1)
        half = 0.5 * np.diff(edges)
        u = (0.5 * (edges[:-1] + edges[1:]))[:, None] + half[:, None] * x[None, :]
        wu = (half[:, None] * w[None, :]).ravel()
        u = u.ravel()
        total = np.zeros(1 + len(logps))
        for L, sign in ((hi, 1.0), (-lo, -1.0)):
            if L <= 0:
                continue
            b = sign * L * u * u
            lq = logq(b)
            q = np.where(np.isfinite(lq), np.exp(np.minimum(lq, 700)), 0.0) * 2 * L * u * wu
            total[0] += q.sum()
            for j, lp in enumerate(logps):
                diff = np.where(q > 0, lq - lp(b), 0.0)
                total[1 + j] += np.sum(q * diff)
        return total

    m, prev = int(panels), rule(int(panels))
    while True:
        cur = rule(2 * m)
        err = float(np.max(np.abs(cur - prev) / np.maximum(1.0, np.abs(cur))))
        m *= 2
        if err <= rtol or 2 * m > max_panels:
            return cur[1:], float(cur[0]), err
        prev = cur


def _box(mean, std, width=10.0):
    xs = [mean[0] - width * std[0], mean[0] + width * std[0]]
    ys = [mean[1] - width * std[1], mean[1] + width * std[1]]
    c = [x * y for x in xs for y in ys]
    return min(c), max(c)


# ---------------------------------------------------------------------------- engine
@dataclasses.dataclass(frozen=True)
class PriorKL(Result):
    """KLs of the posterior to one prior: parameter space, quotient space (with error bar)."""

    prior: str
    scale: float
    kl_param: float
    kl_quotient: float
    stderr: float


@dataclasses.dataclass(frozen=True)
class QuotientKLReport(Result):
    """Neutral and implicit-bias priors at each scale, with the estimator used."""

    name: str
    method: str
    detail: str
    priors: tuple


def _as_posterior(param, posterior):
    if not isinstance(posterior, DiagonalGaussian):
        raise PacBayesInputError("the posterior must be a DiagonalGaussian")
    if posterior.n != param.n:
        raise ShapeError(
            f"{param.name}: the posterior has {posterior.n} entries but theta has {param.n} "
            f"(blocks {dict(param.spec.blocks)})"
        )
    return posterior


def quotient_kls(param, posterior, scales, method="auto", samples=200, seed=0):
    """KL(Q || P_s), KL(Q_bar || P_bar_s) for the neutral priors P_s = N(0, s^2 I) and for the
    implicit-bias priors (2) built from them, for each scale s in ``scales``.

    method: ``quadrature`` (separable bilinear maps; error below 1e-6 relative), ``montecarlo``
    (``samples`` posterior samples and as many prior samples for the implicit-bias normaliser,
    stderr = standard error of the mean, delta method for log Z), or ``auto``.
    Returns a :class:`QuotientKLReport`.
    """
    posterior = _as_posterior(param, posterior)
    scales = [_positive(s, "prior scale") for s in np.atleast_1d(scales)]
    pairs = bilinear_components(param)
    if method == "auto":
        method = "quadrature" if pairs is not None else "montecarlo"
    if method == "quadrature":
        if pairs is None:
            raise NotProvidedError(type(param).__name__, "a separable bilinear structure "
                                   "(needed for the quadrature quotient KL; use montecarlo)")
        return _quadrature_report(param, posterior, scales, pairs)
    if method == "montecarlo":
        return _montecarlo_report(param, posterior, scales, samples, seed)
    raise PacBayesInputError(f"unknown method {method!r}; choose auto, quadrature or montecarlo")


def bilinear_component_kls(param, posterior, scales, pairs=None):
    """Per bilinear coordinate beta_i = theta_a theta_b: KL(Q_bar_i || P_bar_i) for the neutral
    prior N(0, s^2 I) (K_0 push-forward) and for the implicit-bias prior (Laplace) at every
    scale s, by :func:`kl_1d`. Returns (neutral, implicit_bias, worst_mass, worst_err) with
    the two arrays of shape (number of coordinates, number of scales); their column sums are the
    quotient KLs (the coordinates are independent under both Q and P)."""
    posterior = _as_posterior(param, posterior)
    scales = [_positive(s, "prior scale") for s in np.atleast_1d(scales)]
    pairs = bilinear_components(param) if pairs is None else pairs
    if pairs is None:
        raise NotProvidedError(type(param).__name__, "a separable bilinear structure "
                               "(needed for the quadrature quotient KL; use montecarlo)")
    neutral = np.zeros((len(pairs), len(scales)))
    ib = np.zeros((len(pairs), len(scales)))
    worst_mass, worst_err = 1.0, 0.0
    for c, (_, a, b) in enumerate(pairs):
        mq = posterior.mean[[a, b]]
        sq = posterior.std[[a, b]]
        Cq = np.diag(sq ** 2)
        logps = []
        for s in scales:
            logps.append(lambda x, s=s: centred_product_logpdf(x, s, s))
            logps.append(lambda x, s=s: laplace_ib_logpdf(x, (s, s)))
        lo, hi = _box(mq, sq)
        kls, mass, err = kl_1d(lambda x: product_logpdf(x, mq, Cq), logps, lo, hi)
        worst_mass = min(worst_mass, mass)
        worst_err = max(worst_err, err)
        neutral[c] = kls[0::2]
        ib[c] = kls[1::2]
    return neutral, ib, worst_mass, worst_err


def _quadrature_report(param, posterior, scales, pairs):
    neutral, ib, worst_mass, worst_err = bilinear_component_kls(param, posterior, scales, pairs)
    return _report(param, posterior, scales, "quadrature", neutral.sum(0), ib.sum(0),
                   np.zeros(len(scales)), np.zeros(len(scales)),
                   f"{len(pairs)} one-dimensional push-forwards; posterior mass in the "
                   f"integration range >= {worst_mass:.9f}; panel-doubling change <= "
                   f"{worst_err:.1e}")


def _report(param, posterior, scales, method, kl_neutral, kl_ib, se_n, se_ib, detail):
    priors = []
    for j, s in enumerate(scales):
        kp = kl_gaussian(posterior, DiagonalGaussian.isotropic(np.zeros(param.n), s))
        priors.append(PriorKL("neutral", s, kp, float(kl_neutral[j]), float(se_n[j])))
        priors.append(PriorKL("implicit-bias", s, kp - float(kl_neutral[j] - kl_ib[j]),
                              float(kl_ib[j]), float(se_ib[j])))
    return QuotientKLReport(param.name, method, detail, tuple(priors))


def _montecarlo_report(param, posterior, scales, samples, seed):
    """Monte Carlo with the chain rule (1) as control variate: for theta_j ~ Q,

        KL(Q_bar || P_bar) = KL(Q || P) - E_Q[ log(q/p)(theta) - log(q_bar/p_bar)(phi theta) ],

    KL(Q||P) in closed form; the bracket is the log fibre-conditional ratio, whose spread is far
    smaller than that of log(q_bar/p_bar). For the implicit-bias prior add
    E_Q[log p_bar - log u_IB] + log Z, Z = E_P[u_IB / p_bar] (delta method for log Z)."""
    rng = np.random.default_rng(seed)
    samples = int(samples)
    if samples < 2:
        raise PacBayesInputError(f"samples must be >= 2, got {samples}")
    priors = [DiagonalGaussian.isotropic(np.zeros(param.n), s) for s in scales]
    thetas = posterior.sample(rng, samples)
    logs = np.array([orbit_log_integral(param, th, [posterior.logpdf] + [p.logpdf for p in priors])
                     for th in thetas])  # (samples, 1 + J)
    lq = logs[:, 0]
    kl_n, kl_ib, se_n, se_ib = [], [], [], []
    rt = math.sqrt(samples)
    for j, prior in enumerate(priors):
        lp = logs[:, 1 + j]
        fibre = (posterior.logpdf(thetas) - prior.logpdf(thetas)) - (lq - lp)
        kp = kl_gaussian(posterior, prior)
        lu = np.array([implicit_bias_log_unnormalized(param, prior, th) for th in thetas])
        pth = prior.sample(rng, samples)
        ratio = np.array([implicit_bias_log_unnormalized(param, prior, th)
                          - orbit_log_integral(param, th, prior.logpdf) for th in pth])
        logZ = float(special.logsumexp(ratio) - math.log(samples))
        wz = np.exp(ratio - ratio.max())
        se_logZ = float(np.std(wz, ddof=1) / rt / np.mean(wz))
        g = -fibre + (lp - lu)
        kl_n.append(kp - fibre.mean())
        kl_ib.append(kp + g.mean() + logZ)
        se_n.append(fibre.std(ddof=1) / rt)
        se_ib.append(math.hypot(g.std(ddof=1) / rt, se_logZ))
    return _report(param, posterior, scales, "montecarlo", np.array(kl_n), np.array(kl_ib),
                   np.array(se_n), np.array(se_ib),
                   f"{samples} posterior samples (chain-rule control variate), {samples} prior "
                   "samples per scale for log Z; orbit integrals by scipy.integrate.quad")


@dataclasses.dataclass(frozen=True)
class PacBayesReport(Result):
    """Both KLs for the neutral and implicit-bias priors and the three certificates of each,
    at confidence delta / len(scales) (union bound over the prior scales)."""

    name: str
    method: str
    n: int
    delta: float
    empirical_risk: float
    scales: tuple
    priors: tuple
    certificates: tuple  # (prior, scale, Certificates) computed from the quotient KL
    best: dict  # per prior: the smallest Maurer-Seeger certificate over the scales


def pacbayes_report(param, posterior, scales, n, delta, empirical_risk, method="auto",
                    samples=200, seed=0):
    """Quotient KLs (see :func:`quotient_kls`) and certificates (see :func:`certificates`) with a
    union bound over the prior scales; the certificates use the quotient KL (for the Monte
    Carlo estimate, the estimate plus two standard errors)."""
    _check_cert_inputs(empirical_risk, 0.0, n, delta)
    kls = quotient_kls(param, posterior, scales, method=method, samples=samples, seed=seed)
    J = len(np.atleast_1d(scales))
    certs, best = [], {}
    for pk in kls.priors:
        kl = max(pk.kl_quotient + 2 * pk.stderr, 0.0)
        c = certificates(empirical_risk, kl, n, delta, union=J)
        certs.append((pk.prior, pk.scale, c))
        if pk.prior not in best or c.maurer_seeger < best[pk.prior]["maurer_seeger"]:
            best[pk.prior] = {"scale": pk.scale, "kl_quotient": pk.kl_quotient,
                              "mcallester": c.mcallester, "maurer_seeger": c.maurer_seeger,
                              "catoni": c.catoni}
    return PacBayesReport(param.name, kls.method, int(n), float(delta), float(empirical_risk),
                          tuple(float(s) for s in np.atleast_1d(scales)), kls.priors,
                          tuple(certs), best)


def load_posterior(param, path):
    """Read a posterior from an .npz file: ``mean`` (n,), ``std`` (n,) or scalar, and
    ``empirical_risk`` (scalar in [0, 1], the Gibbs empirical risk of a bounded loss).
    Returns (DiagonalGaussian, empirical_risk)."""
    import os

    if not os.path.isfile(path):
        raise PacBayesInputError(f"posterior file {path!r} does not exist")
    try:
        data = np.load(path, allow_pickle=False)
        keys = set(data.files)
    except (ValueError, OSError) as exc:
        raise PacBayesInputError(f"posterior file {path!r} is not a readable .npz ({exc})") \
            from None
    missing = {"mean", "std", "empirical_risk"} - keys
    if missing:
        raise PacBayesInputError(
            f"posterior file {path!r} lacks {sorted(missing)}; it needs arrays mean (n,), "
            "std (n,) or scalar, empirical_risk (scalar)"
        )
    mean = np.asarray(data["mean"], float).ravel()
    if mean.size != param.n:
        raise ShapeError(
            f"posterior mean in {path!r} has {mean.size} entries; {param.name} needs {param.n} "
            f"(blocks {dict(param.spec.blocks)})"
        )
    std = np.asarray(data["std"], float)
    if std.size not in (1, param.n):
        raise ShapeError(f"posterior std in {path!r} has {std.size} entries; give 1 or {param.n}")
    std = std.ravel() if std.size == param.n else float(std.ravel()[0])
    emp = np.asarray(data["empirical_risk"], float).ravel()
    if emp.size != 1 or not np.isfinite(emp[0]) or not 0 <= emp[0] <= 1:
        raise PacBayesInputError(
            f"empirical_risk in {path!r} must be one number in [0, 1], got {emp.tolist()}"
        )
    return DiagonalGaussian(mean, std), float(emp[0])
