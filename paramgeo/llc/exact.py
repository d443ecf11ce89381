"""Exact learning coefficients (RLCT lambda and multiplicity m) where theory has them.

The learning coefficient of a model at a true parameter w* is the real log canonical threshold
lambda of the average log-likelihood ratio K(w) near w*, with multiplicity m: the Bayesian free
energy is F_n = n L_n(w*) + lambda log n - (m - 1) log log n + O_p(1) (Watanabe 2009, "Algebraic
geometry and statistical learning theory", Main Theorem 6.2). Every value here assumes a loss
whose Hessian in the predictor is positive definite at phi(w*) (squared loss with a
non-degenerate input covariance, as in regression with Gaussian inputs), so that
K(w) ~ |phi(w) - phi(w*)|^2 and lambda depends on the parameterization phi alone.

Sources, each a function below:

* :func:`reduced_rank_regression`: y = B A x, A: H x M, B: N x H, true rank r (Aoyagi and
  Watanabe 2005, "Stochastic complexities of reduced rank regression in Bayesian estimation",
  Neural Networks 18: 924-933, Theorem 1, four cases).
* :func:`deep_linear_network`: y = W_L ... W_1 x (Aoyagi 2024, "Consideration on the learning
  efficiency of multiple-layered neural networks with linear units", Neural Networks 172).
* :func:`regular`: lambda = d / 2, m = 1, d = rank J(w*), where that rank is the generic rank.
* :func:`normal_crossing_sum`: coordinates that enter K through separate terms add their
  coefficients (lambda = sum lambda_i, m = 1 + sum (m_i - 1)); a monomial term
  prod_j w_j^(2 k_j) has lambda = min_j 1 / (2 k_j) with m = the number of j attaining it
  (Watanabe 2009, Sec. 2.4 and Remark 7.2 on normal crossings).

A plugin declares the capability ``learning_coefficient(theta)`` (returning a
:class:`LearningCoefficient`, or None where it knows no formula at that point);
:func:`exact_learning_coefficient` asks it first and falls back on the regular case.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from ..errors import NotProvidedError, SizeError
from ..results import Result

if TYPE_CHECKING:
    from fractions import Fraction

    import numpy as np
    from numpy.typing import ArrayLike

    from ..linalg.numerics import RankPolicy
    from ..contract.parameterization import Parameterization

AOYAGI_WATANABE_2005 = ("Aoyagi, Watanabe (2005) Stochastic complexities of reduced rank "
                        "regression in Bayesian estimation, Neural Networks 18:924-933, Theorem 1")
AOYAGI_2024 = ("Aoyagi (2024) Consideration on the learning efficiency of multiple-layered neural "
               "networks with linear units, Neural Networks 172:106132, Theorem 1")
WATANABE_2009 = ("Watanabe (2009) Algebraic geometry and statistical learning theory, Cambridge "
                 "University Press (regular models: Sec. 1.4; normal crossings: Sec. 2.4, 7.2)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LearningCoefficient(Result):
    """The learning coefficient at a true parameter: F_n = n L_n + lambda log n - (m - 1) log log n.

    Attributes:
        lam: lambda, the real log canonical threshold.
        multiplicity: m, or None where the source does not give it.
        exact: lambda as an exact fraction, e.g. "3/2".
        case: the case of the formula that applies.
        formula: the formula.
        reference: its source.
    """

    lam: float
    multiplicity: Optional[int]
    exact: str
    case: str
    formula: str
    reference: str

    def __str__(self):
        m = "not given" if self.multiplicity is None else str(self.multiplicity)
        return (f"lambda = {self.exact} = {self.lam:.6g}, multiplicity m = {m}\n"
                f"  case: {self.case}\n  formula: {self.formula}\n  reference: {self.reference}")


@functools.lru_cache(maxsize=1)
def aoyagi_watanabe_piecewise():
    """(lambda, m) of reduced-rank regression as sympy Piecewise expressions in the symbols
    M, H, N, r (Aoyagi and Watanabe 2005, Theorem 1), the case-1 parity written with Mod:

        case 2, M + H < N + r:  lambda = (H M - H r + N r) / 2,       m = 1
        case 3, N + H < M + r:  lambda = (H N - H r + M r) / 2,       m = 1
        case 4, M + N < H + r:  lambda = M N / 2,                     m = 1
        case 1, otherwise:      lambda = (2 (H + r)(M + N) - (M - N)^2 - (H + r)^2 + s) / 8,
                                m = 1 + s,  s = (M + H + N + r) mod 2.

    Case 1 is N + r <= M + H, M + r <= N + H and H + r <= M + N; cases 2-4 exclude each other
    (two of them at once would need r > H or r > M)."""
    import sympy

    M, H, N, r = sympy.symbols("M H N r", integer=True, nonnegative=True)
    s = sympy.Mod(M + H + N + r, 2)
    lam = sympy.Piecewise(
        ((H * M - H * r + N * r) / sympy.Integer(2), M + H < N + r),
        ((H * N - H * r + M * r) / sympy.Integer(2), N + H < M + r),
        (M * N / sympy.Integer(2), M + N < H + r),
        ((2 * (H + r) * (M + N) - (M - N) ** 2 - (H + r) ** 2 + s) / sympy.Integer(8), True))
    mult = sympy.Piecewise((1, M + H < N + r), (1, N + H < M + r), (1, M + N < H + r),
                           (1 + s, True))
    return (M, H, N, r), lam, mult


def _rrr_case(M, H, N, r):
    if M + H < N + r:
        return "2 (M + H < N + r)"
    if N + H < M + r:
        return "3 (N + H < M + r)"
    if M + N < H + r:
        return "4 (M + N < H + r)"
    return f"1, M + H + N + r {'odd' if (M + H + N + r) % 2 else 'even'}"


def reduced_rank_regression(M: int, H: int, N: int, r: int = 0) -> LearningCoefficient:
    """lambda, m of reduced-rank regression y = B A x + noise (A: H x M, B: N x H) at a true
    product B0 A0 of rank r: Aoyagi and Watanabe (2005), Theorem 1, the four cases of
    :func:`aoyagi_watanabe_piecewise`. M is the input dimension, H the hidden (inner)
    dimension, N the output dimension; 0 <= r <= min(M, H, N). For ``uvt`` (phi = U V^T, U m x
    r, V n x r) U = B and V = A^T: M = n, H = r, N = m.

    >>> reduced_rank_regression(5, 3, 5).exact
    '13/2'
    """
    for name, value in (("M", M), ("H", H), ("N", N)):
        if int(value) != value or value < 1:
            raise SizeError(f"reduced-rank regression: {name}={value!r} must be an integer >= 1")
    if int(r) != r or not 0 <= r <= min(M, H, N):
        raise SizeError(f"reduced-rank regression: the true rank r={r!r} must be an integer in "
                        f"[0, min(M, H, N)] = [0, {min(M, H, N)}]")
    symbols, lam, mult = aoyagi_watanabe_piecewise()
    values = dict(zip(symbols, (int(M), int(H), int(N), int(r))))
    exact = lam.subs(values)
    return LearningCoefficient(
        lam=float(exact), multiplicity=int(mult.subs(values)), exact=str(exact),
        case=_rrr_case(M, H, N, r),
        formula=f"Aoyagi-Watanabe reduced-rank regression at (M, H, N, r) = ({M}, {H}, {N}, {r})",
        reference=AOYAGI_WATANABE_2005)


def _aoyagi_subsets(Ms):
    """The index sets Sigma (at least two indices) of Aoyagi (2024)'s Theorem 1 for the list
    M_j = H_j - r: max_{Sigma} M_j < min_{not Sigma} M_k, sum_{Sigma} M_j >= ell max_{Sigma}
    M_j and sum_{Sigma} M_j < ell min_{not Sigma} M_k, ell = |Sigma| - 1."""
    out = []
    idx = range(len(Ms))
    for size in range(2, len(Ms) + 1):
        for sigma in itertools.combinations(idx, size):
            inside = [Ms[j] for j in sigma]
            outside = [Ms[k] for k in idx if k not in sigma]
            ell = size - 1
            total = sum(inside)
            if outside and not max(inside) < min(outside):
                continue
            if total < ell * max(inside):
                continue
            if outside and not total < ell * min(outside):
                continue
            out.append(sigma)
    return out


def _aoyagi_lambda(Ms, sigma, r, H_in, H_out):
    import sympy

    inside = [Ms[j] for j in sigma]
    ell = len(inside) - 1
    total = sum(inside)
    big = -(-total // ell)  # ceil(total / ell)
    a = total - (big - 1) * ell
    pairs = sum(inside[i] * inside[j] for i in range(len(inside))
                for j in range(i + 1, len(inside)))
    lam = (sympy.Rational(-r * r + r * (H_in + H_out), 2) + sympy.Rational(a * (ell - a), 4 * ell)
           - sympy.Rational(ell * (ell - 1), 4) * sympy.Rational(total, ell) ** 2
           + sympy.Rational(pairs, 2))
    return lam, a, ell


def deep_linear_network(widths: Sequence[int], r: int = 0) -> LearningCoefficient:
    """lambda of the deep linear network y = W_L ... W_1 x (widths H_1 = input, ..., H_{L+1} =
    output) at a true product of rank r (Aoyagi 2024, Theorem 1). With M_j = H_j - r, take the
    index set Sigma of :func:`_aoyagi_subsets` (ell + 1 = |Sigma| indices), S = sum_Sigma M_j,
    a = S - (ceil(S / ell) - 1) ell; then

        lambda = (r (H_1 + H_{L+1}) - r^2) / 2 + a (ell - a) / (4 ell)
                 - ell (ell - 1) / 4 (S / ell)^2 + 1/2 sum_{i < j in Sigma} M_i M_j.

    For two layers it is the Aoyagi-Watanabe value (:func:`reduced_rank_regression`, tested on
    a grid), whose multiplicity is reported: m = 1 if a = ell, else 2. For three layers or more
    the multiplicity is reported as None (not given here).
    """
    widths = tuple(int(w) for w in widths)
    if len(widths) < 3 or min(widths) < 1:
        raise SizeError(f"deep linear network: widths={widths} needs at least three widths "
                        "(input, hidden..., output), each >= 1")
    if int(r) != r or not 0 <= r <= min(widths):
        raise SizeError(f"deep linear network: the true rank r={r!r} must be an integer in "
                        f"[0, min(widths)] = [0, {min(widths)}]")
    Ms = [w - int(r) for w in widths]
    subsets = _aoyagi_subsets(Ms)
    if not subsets:  # Aoyagi (2024) proves one exists; reaching this is a bug here
        raise RuntimeError(f"no index set of Aoyagi's theorem for M = {Ms}")
    lam, a, ell = _aoyagi_lambda(Ms, subsets[0], int(r), widths[0], widths[-1])
    if len(widths) == 3:
        mult = 1 if a == ell else 2
    else:
        mult = None
    return LearningCoefficient(
        lam=float(lam), multiplicity=mult, exact=str(lam),
        case=f"Sigma = {[j + 1 for j in subsets[0]]} (ell = {ell}, a = {a})",
        formula=f"Aoyagi deep linear network, widths {widths}, true rank {r}",
        reference=AOYAGI_2024)


def deep_linear_at(weights: Sequence[ArrayLike]) -> Optional[LearningCoefficient]:
    """Aoyagi's lambda of the deep linear network x -> W_L ... W_1 x at the true parameter
    ``weights`` = (W_1, ..., W_L) (each out x in, W_1 first): :func:`deep_linear_network` with
    widths (n_0, ..., n_L) read from the shapes and r0 = rank(W_L ... W_1), at a point where
    every W_l has rank r0 (the deepest true parameters, Aoyagi 2024, Theorem 1); None at other
    points, where the theorem gives no value. Ranks are decided by the default tolerance
    policy (:func:`paramgeo.linalg.numerics.decide_rank`)."""
    import numpy as np

    from ..linalg.numerics import decide_rank

    Ws = [np.asarray(W, float) for W in weights]
    if len(Ws) < 2 or any(W.ndim != 2 for W in Ws) or any(
            b.shape[1] != a.shape[0] for a, b in zip(Ws, Ws[1:])):
        raise SizeError(f"deep_linear_at: give two or more matrices W_1, ..., W_L (out x in) "
                        f"that chain, got shapes {[W.shape for W in Ws]}")
    prod = Ws[0]
    for W in Ws[1:]:
        prod = W @ prod

    def rank(M):
        return decide_rank(np.linalg.svd(M, compute_uv=False), warn=False).rank

    r0 = rank(prod)
    if any(rank(W) != r0 for W in Ws):
        return None
    return deep_linear_network((Ws[0].shape[1],) + tuple(W.shape[0] for W in Ws), r0)


def regular(d: int) -> LearningCoefficient:
    """lambda = d / 2, m = 1 at a true parameter where the map is locally of constant rank d.

    If rank J(w*) equals the generic rank, the rank is constant near w* (it is lower
    semicontinuous and never exceeds the generic rank), so by the constant-rank theorem phi is
    locally a submersion onto a d-dimensional manifold of predictors: in adapted coordinates
    K(w) ~ y_1^2 + ... + y_d^2 with the other n - d coordinates free, whose RLCT is d/2 with
    m = 1 (Watanabe 2009, Sec. 1.4, the regular case, applied on the quotient by the fibre).
    The local dimension is thus rank J(w*), not the number n of parameters."""
    import sympy

    lam = sympy.Rational(int(d), 2)
    return LearningCoefficient(lam=float(lam), multiplicity=1, exact=str(lam),
                               case="regular (rank J = generic rank)",
                               formula=f"d / 2 with d = rank J(w*) = {int(d)}",
                               reference=WATANABE_2009)


def normal_crossing_sum(terms: Sequence[tuple[Any, int]], case: str, formula: str,
                        reference: str = WATANABE_2009) -> LearningCoefficient:
    """lambda = sum_i lambda_i, m = 1 + sum_i (m_i - 1) for K(w) = sum_i K_i(w_(i)) over
    disjoint groups of coordinates, each term given as (lambda_i, m_i) (exact fractions or
    ints); Watanabe (2009), Sec. 7.2 (the zeta function of a sum over separate variables is the
    product of the zeta functions, so the largest poles add and their orders add minus one)."""
    import sympy

    lam = sum((sympy.nsimplify(t[0]) for t in terms), sympy.Integer(0))
    mult = 1 + sum(int(t[1]) - 1 for t in terms)
    return LearningCoefficient(lam=float(lam), multiplicity=mult, exact=str(lam), case=case,
                               formula=formula, reference=reference)


def monomial(exponents: Sequence[int]) -> tuple[Fraction, int]:
    """(lambda, m) of K = prod_j w_j^(2 k_j) near 0 under a prior positive there:
    lambda = min_j 1 / (2 k_j), m = #{j attaining the minimum} (Watanabe 2009, Sec. 2.4)."""
    import sympy

    values = [sympy.Rational(1, 2 * int(k)) for k in exponents if int(k) > 0]
    lam = min(values)
    return lam, sum(1 for v in values if v == lam)


def exact_learning_coefficient(param: Parameterization, theta: ArrayLike,
                               policy: Optional[RankPolicy] = None) -> LearningCoefficient:
    """The exact learning coefficient (RLCT lambda, multiplicity m) at the true parameter theta.

    The Bayesian free energy is F_n = n L_n(w*) + lambda log n - (m - 1) log log n + O_p(1)
    (Watanabe 2009, Main Theorem 6.2), for a loss whose Hessian in the predictor is positive
    definite. Asks the plugin's declared ``learning_coefficient(theta)`` first (Aoyagi and
    Watanabe 2005 for reduced-rank regression, Aoyagi 2024 for deep linear networks, ...),
    else lambda = d / 2, m = 1 with d = rank J(theta) when that rank is the generic rank
    (:func:`regular`), or when the fibre phi^-1(phi(theta)) is smooth of dimension n - d.

    Args:
        param: the parameterization phi: R^n -> R^m.
        theta: the true parameter w*, shape (n,).
        policy: the tolerance policy of the rank decisions; None: the default.

    Returns:
        The :class:`LearningCoefficient`: ``lam``, ``multiplicity``, ``exact`` (a fraction),
        ``case``, ``formula`` and ``reference``.

    Raises:
        NotProvidedError: no formula applies at theta (estimate it with :func:`estimate_llc`).
        ContractError: the plugin's ``learning_coefficient`` returned something else.
        ShapeError: theta is not n finite numbers.

    Examples:
        >>> import numpy as np, paramgeo
        >>> p = paramgeo.get("deep-linear", widths=(2, 1, 1))
        >>> paramgeo.exact_learning_coefficient(p, np.zeros(p.n)).exact   # Aoyagi 2024
        '1/2'
        >>> paramgeo.exact_learning_coefficient(p, np.ones(p.n)).exact    # regular: 2 / 2
        '1'
    """
    from ..geometry.jacobian import generic_rank, rank_at

    theta = param.as_theta(theta)
    if param.provides("learning_coefficient"):
        value = param.learning_coefficient(theta)
        if value is not None and not isinstance(value, LearningCoefficient):
            from ..errors import ContractError

            raise ContractError(
                f"plugin {param.name}: learning_coefficient(theta) returned "
                f"{type(value).__name__}; it must return a paramgeo.llc.LearningCoefficient or "
                "None (fix the plugin's learning_coefficient)")
        if value is not None:
            return value
    d = rank_at(param, theta, policy=policy).rank
    g = generic_rank(param)
    if d == g:
        return regular(d)
    smooth = smooth_fibre(param, theta, d, g)
    if smooth is not None:
        return smooth
    raise NotProvidedError(
        type(param).__name__,
        f"an exact learning coefficient at this point (rank J = {d} is below the generic rank "
        f"{g}, the fibre phi^-1(phi(w*)) is not smooth of dimension n - rank J = "
        f"{param.n - d} at w* (a kernel direction of J leaves it at first order), and the "
        f"plugin {param.name} declares no formula here; estimate it with "
        "paramgeo.llc.estimate_llc or `paramgeo llc estimate`)")


def fibre_departure(param: Parameterization, theta: ArrayLike, rng: np.random.Generator,
                    deltas: Sequence[float] = (1e-2, 1e-3), iters: int = 30) -> list[float]:
    """How far points theta + delta v (v a random unit vector of ker J(theta)) lie from the
    fibre phi^-1(phi(theta)), for each delta: the length of the minimum-norm Gauss-Newton
    path x <- x - J(x)^+ (phi(x) - phi(theta)) from theta + delta v to the fibre. Where the
    fibre is a manifold with tangent space ker J at theta the distance is O(delta^2); where v
    is not tangent to it (a singular fibre), it is of order delta."""
    import numpy as np

    phi0 = np.asarray(param.forward_flat(theta), float)
    J = np.asarray(param.jacobian(theta))
    _, s, Vt = np.linalg.svd(J)
    rank = int(np.sum(s > max(J.shape) * np.finfo(float).eps * max(s[0], 1e-300) * 1e3))
    kernel = Vt[rank:]
    out = []
    v = kernel.T @ rng.standard_normal(len(kernel))
    v /= np.linalg.norm(v)
    for delta in deltas:
        x = theta + delta * v
        start = x.copy()
        for _ in range(iters):
            r = np.asarray(param.forward_flat(x), float) - phi0
            if np.linalg.norm(r) < 1e-14 * max(np.linalg.norm(phi0), 1.0):  # type: ignore[operator]
                break
            x = x - np.linalg.lstsq(np.asarray(param.jacobian(x)), r, rcond=1e-10)[0]
        out.append(float(np.linalg.norm(x - start)))
    return out


def smooth_fibre(param: Parameterization, theta: ArrayLike, d: int, g: int,
                 trials: int = 3) -> Optional[LearningCoefficient]:
    """lambda = d / 2, m = 1 at a true parameter where rank J = d is below the generic rank g
    but the fibre Z = phi^-1(phi(w*)) is near w* a manifold of dimension n - d (its tangent
    space is then ker J(w*)). With K(w) ~ |phi(w) - phi(w*)|^2, K vanishes exactly on Z and its
    Hessian 2 J^T J is non-degenerate on the normal space of Z, so K is Morse-Bott along Z:
    in coordinates (z, y) with Z = {y = 0}, K ~ y_1^2 + ... + y_d^2 (the Morse-Bott lemma;
    Banyaga and Hurtubise 2004, "A proof of the Morse-Bott lemma"), whose RLCT is d / 2 with
    m = 1 (Watanabe 2009, Sec. 2.4: a normal crossing with d squared coordinates). The
    manifold property is checked numerically by :func:`fibre_departure` along random kernel
    directions: the departure must fall like delta^2 (ratio at least 30 between delta = 1e-2
    and 1e-3, where a smooth fibre gives about 100 and a singular one about 10). None where
    it does not."""
    import numpy as np
    import sympy

    rng = np.random.default_rng(0)
    for _ in range(trials):
        far, near = fibre_departure(param, theta, rng)
        if not (far > 0 and far / max(near, 1e-300) >= 30):
            return None
    lam = sympy.Rational(int(d), 2)
    return LearningCoefficient(
        lam=float(lam), multiplicity=1, exact=str(lam),
        case=f"smooth fibre (rank J = {d} below the generic rank {g}; phi^-1(phi(w*)) a "
        f"manifold of dimension n - rank J = {param.n - d} near w*: K is Morse-Bott there)",
        formula=f"rank J(w*) / 2 with rank J(w*) = {int(d)}",
        reference=WATANABE_2009 + "; Banyaga, Hurtubise (2004) A proof of the Morse-Bott lemma")


def block_learning_coefficient(param: Parameterization, theta: ArrayLike,
                               block: Union[str, Sequence[str]],
                               policy: Optional[RankPolicy] = None) -> LearningCoefficient:
    """The exact weight-refined learning coefficient of the block(s) ``block`` at the true
    parameter ``theta`` (the others fixed there), where phi is affine in the block: then the
    restricted model w_b -> phi(w_b, theta_rest) is a linear regression, K(w_b) a quadratic
    form of rank d_b = rank J_b(theta) (J_b the Jacobian's block columns), so lambda = d_b / 2
    with m = 1 (Watanabe 2009, Sec. 1.4; the kernel directions leave K unchanged). In a deep
    linear net phi = W_L ... W_1 is affine in each W_l: phi = A_l W_l B_l with
    A_l = W_L ... W_{l+1}, B_l = W_{l-1} ... W_1, J_l = A_l (x) B_l^T, so
    d_l = rank A_l * rank B_l and lambda_l = rank A_l rank B_l / 2. Affinity is verified by
    the derivative of J_b along random directions of the block (d/dt J_b(theta + t v) = 0);
    NotProvidedError where it fails."""
    import numpy as np
    import sympy

    from ..linalg.numerics import decide_rank
    from .estimate import block_mask

    theta = param.as_theta(theta)
    mask = block_mask(param, block)
    cols = np.flatnonzero(mask)  # type: ignore[arg-type]
    J = np.asarray(param.jacobian(theta))[:, cols]
    rng = np.random.default_rng(0)
    scale = max(float(np.linalg.norm(J)), 1.0)
    for _ in range(2):
        v = np.zeros(param.n)
        v[cols] = rng.standard_normal(cols.size)
        dJ = np.asarray(param.jacobian_derivative(theta, v))[:, cols]
        if np.linalg.norm(dJ) > 1e-8 * scale * np.linalg.norm(v):
            raise NotProvidedError(
                type(param).__name__,
                f"an exact weight-refined learning coefficient of {block!r} ({param.name} is "
                "not affine in that block; estimate it with estimate_llc(..., block=...))")
    d = decide_rank(J, policy, what="the block's Jacobian").rank
    lam = sympy.Rational(int(d), 2)
    names = ", ".join([block] if isinstance(block, str) else block)
    return LearningCoefficient(
        lam=float(lam), multiplicity=1, exact=str(lam),
        case=f"weight-refined, phi affine in {names} (a linear regression in the block)",
        formula=f"rank J_block(w*) / 2 with rank J_block = {int(d)} (deep linear: "
        "rank A_l rank B_l)",
        reference=WATANABE_2009)
