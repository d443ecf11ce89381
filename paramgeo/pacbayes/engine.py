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

The densities on the quotient are orbit integrals (coarea formula; :mod:`.geometry`,
:mod:`.orbits`).
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

Certificates: :mod:`.certificates`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

import numpy as np
from scipy import special

from ..errors import NotProvidedError, ShapeError
from ..results import Result
from .bilinear import bilinear_component_kls, bilinear_components
from .bounds import _check_cert_inputs, certificates
from .gaussians import DiagonalGaussian, PacBayesInputError, _as_posterior, _positive, kl_gaussian
from .groups import group_structure
from .orbits import implicit_bias_log_unnormalized, orbit_log_integral
from .volumes import lie_algebra_matrices

if TYPE_CHECKING:
    import os

    from ..contract.parameterization import Parameterization


@dataclasses.dataclass(frozen=True, kw_only=True)
class PriorKL(Result):
    """KLs of the posterior to one prior: parameter space, quotient space (with error bar)."""

    prior: str
    scale: float
    kl_param: float
    kl_quotient: float
    stderr: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuotientKLReport(Result):
    """Neutral and implicit-bias priors at each scale, with the estimator used."""

    name: str
    method: str
    detail: str
    priors: tuple
    #: True when Ctrl-C (KeyboardInterrupt) stopped the Monte Carlo estimate: ``priors`` holds
    #: the finished ones (the neutral KLs from the posterior samples done)
    interrupted: bool = False


def quotient_kls(param: Parameterization, posterior: DiagonalGaussian, scales: Sequence[float],
                 method: str = "auto", samples: int = 200, seed: int = 0,
                 orbit_method: str = "auto", inner_samples: int = 128,
                 progress: Optional[Callable[[int, int], None]] = None) -> QuotientKLReport:
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
    scales = [_positive(s, "prior scale", bounded=True) for s in np.atleast_1d(scales)]
    if method not in ("auto", "quadrature", "montecarlo"):
        raise PacBayesInputError(f"unknown method {method!r}; choose auto, quadrature or "
                                 "montecarlo")
    if _trivial_group(param):
        kl = np.array([kl_gaussian(posterior, _neutral(param, s)) for s in scales])
        zero = np.zeros(len(scales))
        return _report(param, posterior, scales, "exact", kl, kl, zero, zero,
                       "trivial symmetry group: the quotient is Theta itself, KL_quotient = "
                       "KL_param (closed form)")
    pairs = bilinear_components(param)
    if method == "auto":
        method = "quadrature" if pairs is not None else "montecarlo"
    if method == "quadrature":
        if pairs is None:
            raise NotProvidedError(type(param).__name__, "a separable bilinear structure "
                                   "(needed for the quadrature quotient KL; use montecarlo)")
        return _quadrature_report(param, posterior, scales, pairs)
    return _montecarlo_report(param, posterior, scales, samples, seed, orbit_method,
                              inner_samples, progress)


def _neutral(param, scale):
    return DiagonalGaussian.isotropic(np.zeros(param.n), scale)


def _trivial_group(param):
    """No symmetry declared, or a symmetry group with one element (the identity)."""
    if not param.provides("symmetry"):
        return True
    return lie_algebra_matrices(param).shape[0] == 0 and group_structure(param).n_components == 1



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
        kp = kl_gaussian(posterior, _neutral(param, s))
        priors.append(PriorKL(prior="neutral", scale=s, kl_param=kp,
                              kl_quotient=float(kl_neutral[j]), stderr=float(se_n[j])))
        priors.append(PriorKL(prior="implicit-bias", scale=s,
                              kl_param=kp - float(kl_neutral[j] - kl_ib[j]),
                              kl_quotient=float(kl_ib[j]), stderr=float(se_ib[j])))
    return QuotientKLReport(name=param.name, method=method, detail=detail, priors=tuple(priors))


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
    priors = [_neutral(param, s) for s in scales]
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

    logs = []  # (samples, 1 + J) log orbit integrals of q and of each prior
    try:
        for th in thetas:
            logs.append(orbit(th, [posterior.logpdf] + [p.logpdf for p in priors]))
    except KeyboardInterrupt:  # Ctrl-C: the neutral KLs from the samples finished (>= 2)
        if len(logs) < 2:
            raise
    done = len(logs)
    logs, thetas = np.array(logs), thetas[:done]
    lq = logs[:, 0]
    stopped = done < samples
    priors_kl = []
    rt = math.sqrt(done)
    for j, prior in enumerate(priors):
        lp = logs[:, 1 + j]
        fibre = (posterior.logpdf(thetas) - prior.logpdf(thetas)) - (lq - lp)
        kp = kl_gaussian(posterior, prior)
        kl_n = kp - fibre.mean()
        priors_kl.append(PriorKL(prior="neutral", scale=scales[j], kl_param=kp,
                                 kl_quotient=float(kl_n), stderr=float(fibre.std(ddof=1) / rt)))
        if stopped:
            continue
        try:
            lu = np.array([implicit_bias_log_unnormalized(param, prior, th) for th in thetas])
            pth = prior.sample(rng, samples)
            ratio = np.array([implicit_bias_log_unnormalized(param, prior, th)
                              - orbit(th, [prior.logpdf])[0] for th in pth])
        except KeyboardInterrupt:  # Ctrl-C: the implicit-bias priors of the scales finished
            stopped = True
            continue
        logZ = float(special.logsumexp(ratio) - math.log(samples))
        wz = np.exp(ratio - ratio.max())
        se_logZ = float(np.std(wz, ddof=1) / rt / np.mean(wz))
        g = -fibre + (lp - lu)
        kl_ib = kp + g.mean() + logZ
        priors_kl.append(PriorKL(prior="implicit-bias", scale=scales[j],
                                 kl_param=kp - float(kl_n - kl_ib), kl_quotient=float(kl_ib),
                                 stderr=math.hypot(g.std(ddof=1) / rt, se_logZ)))
    how = _orbit_method_text(param, orbit_method, inner_samples, max(inner))
    detail = (f"{done} posterior samples (chain-rule control variate), {samples} prior "
              f"samples per scale for log Z; orbit integrals by {how}")
    if stopped:
        detail += (f"; INTERRUPTED (Ctrl-C) after {len(inner)} of {total} orbit integrals: "
                   f"{len(priors_kl)} of {2 * len(priors)} priors finished")
    return QuotientKLReport(name=param.name, method="montecarlo", detail=detail,
                            priors=tuple(priors_kl), interrupted=stopped)


def _orbit_method_text(param, orbit_method, inner_samples, worst):
    struct = group_structure(param)
    if lie_algebra_matrices(param).shape[0] == 0:
        how = f"sums over the {struct.n_components} elements of the finite group"
    elif orbit_method == "quadrature" or (orbit_method == "auto" and worst == 0):
        how = "scipy.integrate.quad"
    else:
        how = f"importance sampling ({inner_samples} draws per component)"
    if worst > 0:
        how += (f"; largest relative standard error {worst:.2g}, included in the outer "
                "standard errors")
    return how


@dataclasses.dataclass(frozen=True, kw_only=True)
class PacBayesReport(Result):
    """Both KLs for the neutral and implicit-bias priors and the three certificates of each.

    Attributes:
        name: the plugin's name.
        method: how the quotient KLs were computed.
        n: the number of training samples.
        delta: the confidence level (each certificate at delta / len(scales)).
        empirical_risk: the posterior's empirical risk.
        scales: the prior scales.
        priors: one ``PriorKL`` (KL on theta and on the quotient) per prior and scale.
        certificates: (prior, scale, :class:`Certificates`) from the quotient KL.
        best: per prior, the smallest Maurer-Seeger certificate over the scales.
        detail: how the quotient KL was computed, in words.
        interrupted: Ctrl-C stopped the Monte Carlo estimate; see ``detail``.
    """

    name: str
    method: str
    n: int
    delta: float
    empirical_risk: float
    scales: tuple
    priors: tuple
    certificates: tuple
    best: dict
    detail: str
    interrupted: bool = False


def pacbayes_report(param: Parameterization, posterior: DiagonalGaussian, scales: Sequence[float],
                    n: int, delta: float, empirical_risk: float, method: str = "auto",
                    samples: int = 200, seed: int = 0, orbit_method: str = "auto",
                    inner_samples: int = 128,
                    progress: Optional[Callable[[int, int], None]] = None) -> PacBayesReport:
    """PAC-Bayes certificates of a posterior from its KL on the quotient by the symmetry.

    KL(Q || P) = KL(Q_bar || P_bar) + E_{Q_bar} KL(Q(.|beta) || P(.|beta)) (the chain rule), so
    the KL of the push-forwards to predictors beta = phi(theta) is never larger; it is computed
    for the neutral priors N(0, s^2 I) and their implicit-bias priors (:func:`quotient_kls`)
    and put into the McAllester, Maurer-Seeger and Catoni bounds (:func:`certificates`) at
    confidence delta / len(scales), a union bound over the prior scales (docs/pacbayes.md).

    Args:
        param: a parameterization with a declared symmetry group.
        posterior: the :class:`DiagonalGaussian` posterior Q on theta.
        scales: the prior scales s.
        n: the number of training samples.
        delta: the confidence level, in (0, 1).
        empirical_risk: the posterior's empirical risk, in [0, 1].
        method: "auto", "quadrature" or "montecarlo" (:func:`quotient_kls`).
        samples: posterior samples of the Monte Carlo estimate.
        seed: its seed.
        orbit_method: how the orbit integrals are computed (:func:`orbit_log_integral`).
        inner_samples: samples per orbit integral.
        progress: called as progress(done, total) over the Monte Carlo orbit integrals.

    Returns:
        The :class:`PacBayesReport`; the certificates use the quotient KL (for the Monte Carlo
        estimate, the estimate plus two standard errors). A Ctrl-C after two posterior samples
        returns the priors finished (``interrupted`` True).

    Raises:
        PacBayesInputError: an empirical risk outside [0, 1], n < 1 or delta outside (0, 1),
            or a posterior that does not fit param.

    Examples:
        >>> import numpy as np, paramgeo
        >>> from paramgeo.pacbayes import DiagonalGaussian, pacbayes_report
        >>> p = paramgeo.get("hadamard", p=3)                   # beta = u * v
        >>> Q = DiagonalGaussian(mean=np.array([1.0, 0.5, -0.5, 1.0, 1.0, 1.0]), std=0.2)
        >>> report = pacbayes_report(p, Q, [1.0], n=1000, delta=0.05, empirical_risk=0.1)
        >>> [(k.prior, bool(k.kl_quotient <= k.kl_param)) for k in report.priors]
        [('neutral', True), ('implicit-bias', True)]
    """
    _check_cert_inputs(empirical_risk, 0.0, n, delta)
    kls = quotient_kls(param, posterior, scales, method=method, samples=samples, seed=seed,
                       orbit_method=orbit_method, inner_samples=inner_samples, progress=progress)
    J = len(np.atleast_1d(scales))
    certs: list = []
    best: dict = {}
    for pk in kls.priors:
        kl = max(pk.kl_quotient + 2 * pk.stderr, 0.0)
        c = certificates(empirical_risk, kl, n, delta, union=J)
        certs.append((pk.prior, pk.scale, c))
        if pk.prior not in best or c.maurer_seeger < best[pk.prior]["maurer_seeger"]:
            best[pk.prior] = {"scale": pk.scale, "kl_quotient": pk.kl_quotient,
                              "mcallester": c.mcallester, "maurer_seeger": c.maurer_seeger,
                              "catoni": c.catoni}
    return PacBayesReport(name=param.name, method=kls.method, n=int(n), delta=float(delta),
                          empirical_risk=float(empirical_risk),
                          scales=tuple(float(s) for s in np.atleast_1d(scales)), priors=kls.priors,
                          certificates=tuple(certs), best=best, detail=kls.detail,
                          interrupted=kls.interrupted)


def load_posterior(param: Parameterization,
                   path: Union[str, os.PathLike]) -> tuple[DiagonalGaussian, float]:
    """Read a posterior from an .npz file: ``mean`` (n,), ``std`` (n,) or scalar, and
    ``empirical_risk`` (scalar in [0, 1], the Gibbs empirical risk of a bounded loss).
    Returns (DiagonalGaussian, empirical_risk)."""
    from ..io.npzfile import read_npz

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
    std = std.ravel() if std.size == param.n else np.full(param.n, float(std.ravel()[0]))
    emp = np.asarray(data["empirical_risk"], float).ravel()
    if emp.size != 1 or not np.isfinite(emp[0]) or not 0 <= emp[0] <= 1:
        raise PacBayesInputError(
            f"empirical_risk in {path!r} must be one number in [0, 1], got {emp.tolist()}"
        )
    return DiagonalGaussian(mean=mean, std=std), float(emp[0])
