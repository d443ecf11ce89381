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
(coarea formula: Federer 1969, "Geometric Measure Theory", 3.2.12; for an abelian group the
Haar measure is dt in the coordinates exp(sum_k t_k A_k); for a non-abelian one the orbit is
integrated in Cartan coordinates with the area formula, see :class:`_OrbitChart`).
Related: Rouchouse, Gonon, Gribonval, Guedj (2025),
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
  (with the chain rule (1) as control variate), the orbit integrals through each theta_j done
  by :func:`orbit_log_integral`: ``scipy.integrate.quad`` when the continuous symmetry is
  one-dimensional, abelian and non-compact; otherwise importance sampling over the group in
  global Cartan coordinates theta = D exp(psi . B) exp(x . P) theta_j (compact torus part B,
  symmetric part P, coset representatives D; :func:`group_structure`), the coarea factor
  including the orbit volume sqrt det Gram of the generators and the differential of exp
  (:class:`_OrbitChart`). Covers GL(r) for r <= 2 per head, rescaling tori, O(2); refuses
  groups whose compact part is not abelian (GL(r), O(r) with r >= 3). The error bar is the
  standard error of the mean over the samples (which contains the inner importance-sampling
  noise; the inner log-bias is corrected to second order).

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
from .symmetry import linear_action_matrices


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
    A, linear = linear_action_matrices(group, param.n, sparse=False)
    if len(linear) < len(A):
        raise PacBayesInputError(
            f"the symmetry {group.name} of {param.name} does not act linearly (generators not "
            "linear in theta); orbit integrals and canonical points need a linear action"
        )
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


# ---------------------------------------------------------------------------- group structure
@dataclasses.dataclass(frozen=True)
class GroupStructure(Result):
    """The symmetry group's image in GL(n), in the form the orbit integrals need.

    Cartan decomposition (Knapp 2002, "Lie groups beyond an introduction", Prop. 1.143 and
    Thm 6.31): a linear group G whose Lie algebra g (the n x n matrices A_k of the action) is
    closed under transpose splits as g = k + p (skew + symmetric) and its identity component as
    G_0 = K_0 exp(p), g = k exp(X) uniquely, K_0 = G_0 intersected with O(n). Here K_0 must be
    a torus: ``compact`` holds commuting skew B_1..B_c chosen among the skew parts of the
    plugin's own generators, each with a period T_j (expm(T_j B_j) = I), so that
    psi -> exp(sum_j psi_j B_j) on the cell prod_j [0, T_j) covers K_0 uniformly (a group
    homomorphism of tori, every point hit |ker| times; the constant cancels in every density
    ratio, see :func:`orbit_log_integral`). ``noncompact`` is an orthonormal basis P_1..P_p of p;
    ``ad[l]`` is ad_{P_l} = [P_l, .] as a k x k matrix in the basis (B_1..B_c, P_1..P_p).
    ``components`` are orthogonal coset representatives D of G / G_0 (polar parts of
    ``random_element``s, identified up to K_0 and closed under products)."""

    compact: np.ndarray
    periods: np.ndarray
    noncompact: np.ndarray
    ad: np.ndarray
    components: tuple
    torus_basis: np.ndarray = None  # unitary Vc with B_j = -i Vc diag(torus_weights[j]) Vc^H
    torus_weights: np.ndarray = None

    def torus_exp(self, psi):
        """exp(sum_j psi_j B_j) for a batch psi (M, c), from the joint eigenbasis."""
        ph = np.exp(-1j * (np.atleast_2d(psi) @ self.torus_weights))
        return np.einsum("ia,ma,ja->mij", self.torus_basis, ph, self.torus_basis.conj()).real

    @property
    def basis(self):
        """(k, n, n): the Lie-algebra basis (B_1..B_c, P_1..P_p)."""
        return np.concatenate([self.compact, self.noncompact])


def _rank(rows, tol=1e-9):
    if rows.size == 0:
        return 0
    s = np.linalg.svd(rows, compute_uv=False)
    return int(np.sum(s > tol * max(s[0], 1e-300)))


def _action_matrix(group, g, n):
    return np.stack([np.asarray(group.act(g, e), float) for e in np.eye(n)], axis=1)


def group_structure(param, draws=24, seed=0):
    """:class:`GroupStructure` of ``param.symmetry()``, read from the contract (generators for the
    Lie algebra, ``act`` and ``random_element`` for the components), cached per object.

    Raises NotProvidedError when the algebra is not closed under transpose (no Cartan
    decomposition), when its compact part is not abelian (e.g. GL(r) with r >= 3, whose maximal
    compact subgroup SO(r) is not a torus) or has a generator without a period, or when a polar
    part of a group element is not itself a symmetry."""
    cache = _cache(param)
    if "G" in cache:
        return cache["G"]
    A = lie_algebra_matrices(param)
    k, n = A.shape[0], param.n
    name = type(param).__name__
    skew = (A - A.transpose(0, 2, 1)) / 2
    sym = (A + A.transpose(0, 2, 1)) / 2
    if k and (_rank(A.reshape(k, -1)) != k or _rank(np.vstack(
            [A.reshape(k, -1), skew.reshape(k, -1), sym.reshape(k, -1)])) != k):
        raise NotProvidedError(name, "orbit integrals for this symmetry group (its Lie algebra "
                               "must have independent generators and be closed under "
                               "transpose, i.e. admit a Cartan decomposition k + p)")
    scale = max([float(np.linalg.norm(a)) for a in A] + [1.0])
    B = []
    for S in skew:
        if np.linalg.norm(S) > 1e-10 * scale and \
                _rank(np.array([b.ravel() for b in B + [S]])) == len(B) + 1:
            B.append(S)
    for i in range(len(B)):
        for j in range(i):
            if np.linalg.norm(B[i] @ B[j] - B[j] @ B[i]) > 1e-9 * scale ** 2:
                raise NotProvidedError(
                    name, "orbit integrals for this symmetry group (its compact part is not "
                    "abelian, e.g. SO(r) inside GL(r) or O(r) for r >= 3; the general Monte "
                    "Carlo estimator covers compact parts that are tori: r <= 2)")
    B = np.array(B).reshape(-1, n, n)
    periods = []
    for b in B:
        lam = np.abs(np.linalg.eigvals(b).imag)
        lam_min = lam[lam > 1e-9 * scale].min()
        for mult in range(1, 65):
            T = 2 * math.pi * mult / lam_min
            if np.allclose(linalg.expm(T * b), np.eye(n), atol=1e-8):
                periods.append(T)
                break
        else:
            raise NotProvidedError(name, "orbit integrals for this symmetry group (a compact "
                                   "generator has no period: its one-parameter group is not "
                                   "closed)")
    P = _basis(sym.reshape(k, -1)).reshape(-1, n, n) if k else np.zeros((0, n, n))
    basis = np.concatenate([B, P])
    if len(basis) != k:
        raise NotProvidedError(name, "orbit integrals for this symmetry group (the skew and "
                               "symmetric parts do not split its Lie algebra)")
    flat = basis.reshape(k, -1)
    ad = np.zeros((len(P), k, k))
    for l, Pl in enumerate(P):
        br = np.array([(Pl @ X - X @ Pl).ravel() for X in basis])
        coef, *_ = np.linalg.lstsq(flat.T, br.T, rcond=None)
        if np.linalg.norm(flat.T @ coef - br.T) > 1e-8 * scale ** 2 * max(k, 1):
            raise NotProvidedError(name, "orbit integrals for this symmetry group (its Lie "
                                   "algebra is not closed under brackets)")
        ad[l] = coef
    Vc, lam = np.eye(n, dtype=complex), np.zeros((len(B), n))
    if len(B):
        H = 1j * np.tensordot(np.random.default_rng(0).uniform(1, 2, len(B)), B, axes=1)
        _, Vc = np.linalg.eigh(H)
        lam = np.einsum("ia,jik,ka->ja", Vc.conj(), 1j * B, Vc).real
        for j, b in enumerate(B):  # the joint eigenbasis must diagonalise every B_j
            if not np.allclose(Vc @ np.diag(-1j * lam[j]) @ Vc.conj().T, b, atol=1e-9 * scale):
                raise NotProvidedError(name, "orbit integrals for this symmetry group (no joint "
                                       "eigenbasis of its compact generators)")
    struct = GroupStructure(B, np.array(periods, float), P, ad, (), Vc, lam)
    struct = dataclasses.replace(struct, components=_coset_representatives(param, struct, draws,
                                                                           seed))
    cache["G"] = struct
    return struct


def torus_log(struct, X, tol=1e-7):
    """psi in prod_j [0, T_j) with expm(sum_j psi_j B_j) = X, or None if X is not in K_0:
    grid search over the cell, then ``scipy.optimize.least_squares`` on the Frobenius residual.
    (K_0 abelian, so X must commute with every B_j: checked first.)"""
    B, T = struct.compact, struct.periods
    n = X.shape[0]
    c = len(B)
    if not np.allclose(X @ X.T, np.eye(n), atol=1e-8):
        return None
    if c == 0:
        return np.zeros(0) if np.linalg.norm(X - np.eye(n)) < tol * math.sqrt(n) else None
    if any(np.linalg.norm(X @ b - b @ X) > 1e-7 * max(1.0, np.linalg.norm(b)) for b in B):
        return None
    G = max(8, int(256 ** (1.0 / c)))
    grid = np.stack(np.meshgrid(*[np.arange(G) * T[j] / G for j in range(c)], indexing="ij"),
                    -1).reshape(-1, c)
    err = np.linalg.norm(struct.torus_exp(grid) - X, axis=(1, 2))
    psi0 = grid[int(np.argmin(err))]
    res = optimize.least_squares(lambda p: (struct.torus_exp(p)[0] - X).ravel(), psi0,
                                 xtol=1e-14, ftol=1e-14, gtol=1e-14)
    if np.linalg.norm(res.fun) < tol * math.sqrt(n):
        return np.mod(res.x, T)
    return None


def _coset_representatives(param, struct, draws, seed):
    """Orthogonal representatives D of G / G_0: for random elements g (matrix M of the action),
    the polar part O = M (M^T M)^{-1/2} (whose logarithm X = log(M^T M)/2 must lie in p); two
    are in the same coset iff D_1^T D_2 is in K_0 (:func:`torus_log`). The set is closed
    under products, so that it is the whole component group generated by the draws."""
    group = param.symmetry()
    n = param.n
    name = type(param).__name__
    rng = np.random.default_rng(seed)
    P = struct.noncompact
    reps = [np.eye(n)]
    th = param.random_point(np.random.default_rng(seed + 1))
    f0 = np.asarray(param.forward_flat(th), float)

    def find(O):
        return any(torus_log(struct, D.T @ O) is not None for D in reps)

    def add(O):
        if not np.allclose(param.forward_flat(O @ th), f0, rtol=1e-8, atol=1e-10):
            raise NotProvidedError(name, "orbit integrals for this symmetry group (the polar "
                                   "part of a group element is not a symmetry)")
        reps.append(O)

    for _ in range(int(draws)):
        M = _action_matrix(group, group.random_element(rng), n)
        w, V = np.linalg.eigh(M.T @ M)
        X = (V * (0.5 * np.log(w))) @ V.T
        if len(P):
            coef = np.tensordot(P, X, axes=([1, 2], [0, 1]))
            resid = np.linalg.norm(X - np.tensordot(coef, P, axes=1))
        else:
            resid = np.linalg.norm(X)
        if resid > 1e-7 * max(1.0, np.linalg.norm(X)):
            raise NotProvidedError(name, "orbit integrals for this symmetry group (its "
                                   "elements have no polar decomposition inside the group)")
        O = M @ (V * w ** -0.5) @ V.T
        if not find(O):
            add(O)
    grown = True
    while grown:
        grown = False
        for D1 in list(reps):
            for D2 in list(reps):
                if not find(D1 @ D2):
                    add(D1 @ D2)
                    grown = True
        if len(reps) > 256:
            raise NotProvidedError(name, "orbit integrals for this symmetry group (more than "
                                   "256 components)")
    return tuple(reps)


# ---------------------------------------------------------------------------- orbit integrals
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
    T = chart.struct.periods

    def L(z):
        th, lg = chart.evaluate(z)
        v = _logdens_batch(f, th) + lg
        return np.where(np.isfinite(v), v, -np.inf)

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
        return -math.inf, 0.0
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
    comps = []
    hh = 1e-4
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


def orbit_log_integral(param, theta, logdens, gap=50.0, method="auto", samples=256, seed=0,
                       return_error=False):
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

    ``logdens`` maps thetas (shape (..., n)) to log densities; a list of them gives an array of
    integrals along the same orbit. With ``return_error`` also returns the relative standard
    errors (0 for quadrature)."""
    many = isinstance(logdens, (list, tuple))
    funcs = list(logdens) if many else [logdens]
    theta = param.as_theta(theta)
    if method == "auto":
        method = "quadrature" if _is_one_dim_abelian_noncompact(param) else "importance"
    if method == "quadrature":
        vals, errs = _orbit_log_integral_quad(param, theta, funcs, gap), np.zeros(len(funcs))
    elif method == "importance":
        vals, errs = _orbit_log_integral_is(param, theta, funcs, samples,
                                            np.random.default_rng(seed))
    else:
        raise PacBayesInputError(f"unknown orbit integral method {method!r}; choose auto, "
                                 "quadrature or importance")
    if many:
        return (vals, errs) if return_error else vals
    return (float(vals[0]), float(errs[0])) if return_error else float(vals[0])


def _orbit_log_integral_is(param, theta, funcs, samples, rng):
    struct = group_structure(param)
    out = np.full((len(funcs), len(struct.components)), -np.inf)
    var = np.zeros_like(out)
    chart = _OrbitChart(param, struct, theta, np.eye(param.n))
    for ci, D in enumerate(struct.components):
        chart.D = D
        for fi, f in enumerate(funcs):
            if chart.k == 0:
                th, lg = chart.evaluate(np.zeros((1, 0)))
                out[fi, ci] = float(_logdens_batch(f, th)[0] + lg[0])
            else:
                out[fi, ci], rel = _importance_log_integral(chart, f, rng, samples)
                var[fi, ci] = rel ** 2
    tot = special.logsumexp(out, axis=1)
    w = np.exp(out - tot[:, None])
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
    return special.logsumexp(out, axis=1)


def implicit_bias_log_unnormalized(param, prior, theta):
    """log of sum_D p(D s) omega(D s), s = canonical_point(theta), D over the coset
    representatives of G / G_0: the unnormalised implicit-bias density (2) at phi(theta)."""
    s = canonical_point(param, theta).theta
    terms = [prior.logpdf(D @ s) + log_omega(param, D @ s)
             for D in group_structure(param).components]
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


def quotient_kls(param, posterior, scales, method="auto", samples=200, seed=0,
                 orbit_method="auto", inner_samples=128, progress=None):
    """KL(Q || P_s), KL(Q_bar || P_bar_s) for the neutral priors P_s = N(0, s^2 I) and for the
    implicit-bias priors (2) built from them, for each scale s in ``scales``.

    method: ``quadrature`` (separable bilinear maps; error below 1e-6 relative), ``montecarlo``
    (``samples`` posterior samples and as many prior samples for the implicit-bias normaliser,
    stderr = standard error of the mean, delta method for log Z), or ``auto``.
    ``orbit_method`` and ``inner_samples`` choose the orbit integrals of the Monte Carlo method
    (see :func:`orbit_log_integral`: ``quadrature`` for one-dimensional abelian non-compact
    groups, ``importance`` for general ones, ``auto``). ``progress``: an optional callback
    ``progress(done, total)`` over the orbit integrals of the Monte Carlo method.
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
        return _montecarlo_report(param, posterior, scales, samples, seed, orbit_method,
                                  inner_samples, progress)
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


def _montecarlo_report(param, posterior, scales, samples, seed, orbit_method="auto",
                       inner_samples=128, progress=None):
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
    inner = []
    total = samples * (1 + len(priors))  # posterior samples, then prior samples per scale

    def orbit(th, funcs):
        val, err = orbit_log_integral(param, th, funcs, method=orbit_method,
                                      samples=inner_samples, seed=int(rng.integers(2 ** 31)),
                                      return_error=True)
        inner.append(float(np.max(err)))
        if progress is not None:
            progress(len(inner), total)
        return val

    logs = np.array([orbit(th, [posterior.logpdf] + [p.logpdf for p in priors])
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
                          - orbit(th, [prior.logpdf])[0] for th in pth])
        logZ = float(special.logsumexp(ratio) - math.log(samples))
        wz = np.exp(ratio - ratio.max())
        se_logZ = float(np.std(wz, ddof=1) / rt / np.mean(wz))
        g = -fibre + (lp - lu)
        kl_n.append(kp - fibre.mean())
        kl_ib.append(kp + g.mean() + logZ)
        se_n.append(fibre.std(ddof=1) / rt)
        se_ib.append(math.hypot(g.std(ddof=1) / rt, se_logZ))
    how = ("scipy.integrate.quad" if not inner or max(inner) == 0 else
           f"importance sampling ({inner_samples} draws per component; largest relative "
           f"standard error {max(inner):.2g}, included in the outer standard errors)")
    return _report(param, posterior, scales, "montecarlo", np.array(kl_n), np.array(kl_ib),
                   np.array(se_n), np.array(se_ib),
                   f"{samples} posterior samples (chain-rule control variate), {samples} prior "
                   f"samples per scale for log Z; orbit integrals by {how}")


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
                    samples=200, seed=0, orbit_method="auto", inner_samples=128, progress=None):
    """Quotient KLs (see :func:`quotient_kls`) and certificates (see :func:`certificates`) with a
    union bound over the prior scales; the certificates use the quotient KL (for the Monte
    Carlo estimate, the estimate plus two standard errors)."""
    _check_cert_inputs(empirical_risk, 0.0, n, delta)
    kls = quotient_kls(param, posterior, scales, method=method, samples=samples, seed=seed,
                       orbit_method=orbit_method, inner_samples=inner_samples, progress=progress)
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
    from .npzfile import read_npz

    data = read_npz(path, "posterior file",
                    "write it with np.savez(file, mean=..., std=..., empirical_risk=...)")
    keys = set(data)
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
