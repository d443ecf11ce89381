"""Ranks of J beyond float64: an exact rational Jacobian and a high-precision route.

A float64 Jacobian carries round-off of about 1e-16 |J|, so a singular value below that is
indistinguishable from 0, and s_R / s_1 = 4e-30 reads as "rank lost" with no way to tell *why*
(near a stratum, or on a critical set of its own). This module decides the same
:class:`~paramgeo.linalg.numerics.RankPolicy` on singular values computed to ``digits`` significant
digits (mpmath), by one of two ways of forming J:

* ``exact`` (plugins declaring ``symbolic`` whose phi is rational in theta: monomial, uut, uvt,
  hadamard, deep-diagonal, deep-linear, expression specs): the float theta is an exact binary
  rational; the entries of the symbolic Jacobian (polynomials or rational functions over Q,
  sympy ``DomainMatrix``) are evaluated at it exactly, the rank over Q is exact, and the
  singular values of the exact matrix are computed with mpmath at ``digits`` digits.
* ``high-precision`` (any other plugin): ``forward`` is evaluated on numpy object arrays of
  mpmath numbers at working precision wp = 2 digits + 10, and J by central differences
  (f(theta + h e_j) - f(theta - h e_j)) / (2 h), h = 10^-(digits + 5): truncation O(h^2),
  round-off O(10^-wp / h) = O(10^-(digits + 5)). The forward must be written with arithmetic
  and numpy functions that work elementwise on object arrays (``+ - * / **``, ``dot``,
  ``matmul``, ``exp``, ``log``, ``sin``, ``cos``, ``tanh``, ``sqrt``, ``maximum``); one that
  casts to float loses the precision, which is detected and refused with the fix.

Error bound (the certificate): by Weyl's inequality |s_i(J') - s_i(J)| <= |J' - J|_2, and the
SVD is backward stable, so with entries rounded to unit u = 10^-digits the singular values are
within (1 + m n) u |J|_F (exact route); the high-precision route adds |J_h - J_2h|_F, the change
of the difference quotient when h doubles (an estimate of its truncation error, 3/4 of which it
is). A rank decided here is reported with route ``exact`` or ``high-precision``, the digits,
the exact rank over Q (exact route) and that bound.

References: Golub and Van Loan, "Matrix computations" (4th ed.), Corollary 8.6.2 (Weyl) and
Section 5.4 (backward stability of the SVD); Johansson et al., mpmath
(https://mpmath.org); the sympy ``DomainMatrix`` for exact linear algebra over Q.
"""

from __future__ import annotations

import dataclasses
import fractions
import math
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from ..errors import ParamgeoError
from ..results import Result

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from ..contract.parameterization import Parameterization
    from ..linalg.numerics import RankDecision, RankPolicy

#: digits of the high-precision route when none are asked for (resolves s_R / s_1 to ~1e-45)
DEFAULT_DIGITS = 50
#: m * n up to which a decision is escalated to high precision without being asked (a doubtful
#: float64 rank, an unexplained critical point): the mpmath SVD costs O(m n min(m, n)) at
#: about 1e5 flops per second
AUTO_MAX_ENTRIES = 4_000
#: relative singular values below this are float64 round-off: a ratio measured there in float64
#: says nothing about its true size (the floor of the near-stratum probe)
FLOAT64_FLOOR = 1e-12


class PrecisionError(ParamgeoError):
    """The high-precision route cannot evaluate this plugin (the message names the plugin, the
    method and the fix)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrecisionCertificate(Result):
    """How a high-precision rank was decided.

    ``route``: ``exact`` (exact rational J) or ``high-precision`` (central differences of the
    forward in mpmath); ``digits``: significant digits of the singular values; ``exact_rank``:
    the rank of J over Q at the binary-rational point (exact route), else None;
    ``error_bound``: bound on |s_i(computed) - s_i(J)| (see the module docstring);
    ``float64_rank``: the float64 decision it replaced (None when asked for directly).
    """

    route: str
    digits: int
    exact_rank: object
    error_bound: float
    float64_rank: object
    seconds: float
    note: str


def exact_available(param: Parameterization) -> bool:
    """Whether the exact route applies: ``symbolic`` declared and phi rational in theta."""
    return param.provides("symbolic") and _exact_entries(param) is not None


def _exact_entries(param):
    """(kind, rows) of the symbolic Jacobian with entries in sympy's sparse polynomial ring
    Q[theta] (kind "poly") or its fraction field Q(theta) (kind "frac"), generators in theta
    order, or None when phi is not rational in theta (cached per class and sizes). Built by
    differentiating ring elements, not expression trees (0.2 s instead of 40 s for monomial
    widths 2,2,2,1, degree 4)."""
    from ..expressions.symbolic import _cached, symbolic_form

    def build():
        import sympy
        from sympy.polys.polyerrors import PolynomialError

        symbols, exprs = symbolic_form(param)
        if not symbols:
            return None
        for kind, make in (("poly", sympy.ring), ("frac", sympy.field)):
            domain, *gens = make(symbols, sympy.QQ)
            try:
                elements = [domain(e) for e in exprs]  # sympy objects, never text
            except (PolynomialError, TypeError, ValueError):
                continue
            return kind, [[e.diff(g) for g in gens] for e in elements]
        return None

    return _cached(param, "exact-entries", build)


def as_rationals(theta: Any) -> list[fractions.Fraction]:
    """theta as exact rationals: floats are binary rationals, converted without rounding."""
    return [x if isinstance(x, fractions.Fraction) else fractions.Fraction(float(x))
            for x in np.ravel(np.asarray(theta, dtype=object))]


def _exact_matrix(param, point):
    """J at a rational point as a list of rows of ``fractions.Fraction`` (exactly): each
    polynomial entry sum_a c_a theta^a is evaluated in integers, with theta_i = N_i / D over
    the common denominator D, degree by degree (sum_a c_a N^a) / D^|a|."""
    import math

    kind, rows = _exact_entries(param)
    D = math.lcm(*(v.denominator for v in point))
    N = [v.numerator * (D // v.denominator) for v in point]
    powers = [[1] for _ in N]

    def power(i, e):
        while len(powers[i]) <= e:
            powers[i].append(powers[i][-1] * N[i])
        return powers[i][e]

    def poly_at(poly):
        by_degree = {}
        for monom, coeff in poly.terms():
            c = _fraction(coeff)
            term = c.numerator
            for i, e in enumerate(monom):
                if e:
                    term *= power(i, e)
            key = (sum(monom), c.denominator)
            by_degree[key] = by_degree.get(key, 0) + term
        return sum((fractions.Fraction(v, q * D ** deg) for (deg, q), v in by_degree.items()),
                   fractions.Fraction(0))

    def at(entry):
        if kind == "poly":
            return poly_at(entry)
        den = poly_at(entry.denom)
        if den == 0:
            raise PrecisionError(f"{param.name}: phi has a pole at this point (a denominator "
                                 "of J vanishes); move the point off it")
        return poly_at(entry.numer) / den

    return [[at(e) for e in row] for row in rows]


def _fraction(q):
    """A ZZ or QQ domain element (python, gmpy) as a ``fractions.Fraction``."""
    return fractions.Fraction(int(q.numerator), int(q.denominator))


def _exact_rank(matrix):
    import sympy
    from sympy.polys.matrices import DomainMatrix

    if not matrix or not matrix[0]:
        return 0
    QQ = sympy.QQ
    dm = DomainMatrix([[QQ(x.numerator, x.denominator) for x in row] for row in matrix],
                      (len(matrix), len(matrix[0])), QQ)
    return int(dm.rank())


class _Real:
    """An mpmath real that numpy's object-array ufuncs can use: ``np.exp(a)`` calls ``a.exp()``
    on each element, which mpmath numbers do not provide."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __float__(self):
        return float(self.v)

    def __repr__(self):
        return f"_Real({self.v})"


def _wrap(x):
    return x.v if isinstance(x, _Real) else x


def _binary(name):
    def op(self, other):
        result = getattr(self.v, name)(_wrap(other))
        return result if isinstance(result, bool) or result is NotImplemented else _Real(result)
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__pow__", "__rpow__", "__lt__", "__le__", "__gt__", "__ge__",
              "__eq__", "__ne__"):
    setattr(_Real, _name, _binary(_name))


def _unary(fn):
    def op(self):
        import mpmath

        return _Real(getattr(mpmath, fn)(self.v))
    return op


for _name, _fn in (("exp", "exp"), ("log", "log"), ("sin", "sin"), ("cos", "cos"),
                   ("tanh", "tanh"), ("sqrt", "sqrt"), ("arctan", "atan"), ("__abs__", "fabs"),
                   ("__neg__", "fneg"), ("__pos__", "mpf"), ("conjugate", "mpf")):
    setattr(_Real, _name, _unary(_fn))
_Real.__hash__ = None  # type: ignore[assignment, method-assign]


def _forward_mp(param, values):
    """phi at an object array of :class:`_Real` (flat list of mpmath numbers out)."""
    theta = np.empty(len(values), dtype=object)
    theta[:] = [_Real(v) for v in values]
    try:
        out = np.ravel(np.asarray(param.forward(theta), dtype=object))
    except (TypeError, AttributeError, ValueError) as exc:
        raise PrecisionError(
            f"{param.name}: forward cannot be evaluated in high precision ({exc}); declare the "
            "capability 'symbolic' (sympy expressions of phi, the exact route) or write forward "
            "with elementwise arithmetic and numpy functions") from None
    if len(out) != param.m or not all(isinstance(x, _Real) for x in out):
        raise PrecisionError(
            f"{param.name}: forward turned the high-precision numbers into floats (it casts "
            "theta or its blocks with dtype=float), so the high-precision route would only "
            "see float64; keep forward free of float casts, or declare the capability "
            "'symbolic' (the exact route)")
    return [x.v for x in out]


def _difference_jacobian(param, point, digits):
    """(J, err) at working precision 2 digits + 10: central differences with step h and the
    difference |J_h - J_2h|_F (see the module docstring)."""
    import mpmath

    base = [mpmath.mpf(x.numerator) / x.denominator for x in point]
    h = mpmath.mpf(10) ** (-(digits + 5))
    cols_h, cols_2h = [], []
    for j in range(param.n):
        for step, cols in ((h, cols_h), (2 * h, cols_2h)):
            plus, minus = list(base), list(base)
            plus[j] += step
            minus[j] -= step
            fp, fm = _forward_mp(param, plus), _forward_mp(param, minus)
            cols.append([(a - b) / (2 * step) for a, b in zip(fp, fm)])
    J = mpmath.matrix(param.m, param.n)
    err = mpmath.mpf(0)
    for j in range(param.n):
        for i in range(param.m):
            J[i, j] = cols_h[j][i]
            err += (cols_h[j][i] - cols_2h[j][i]) ** 2
    return J, mpmath.sqrt(err)


def singular_values(param: Parameterization, theta: Any, digits: int = DEFAULT_DIGITS,
                    route: str = "high-precision",
                    with_exact_rank: bool = False) -> tuple[list[Any], dict[str, Any]]:
    """(s, info): the singular values of J(theta) in decreasing order as mpmath numbers with
    ``digits`` significant digits, and a dict with the route used (``exact`` where
    :func:`exact_available`, else ``high-precision``; ``route="exact"`` insists), the exact
    rank over Q (exact route and ``with_exact_rank``, else None; the singular values beyond it
    are then exactly 0) and the error bound on each s_i. theta: floats
    (taken as the binary rationals they are) or ``fractions.Fraction`` entries."""
    import mpmath

    point = as_rationals(theta)
    if len(point) != param.n:
        raise ParamgeoError(f"{param.name}: a point must have {param.n} entries, got "
                            f"{len(point)}")
    if digits < 16:
        raise ParamgeoError(f"precision must be at least 16 digits (float64 has 16), got "
                            f"{digits}")
    exact = exact_available(param)
    if route == "exact" and not exact:
        raise ParamgeoError(f"{param.name}: the exact route needs the capability 'symbolic' "
                            "with phi rational in theta; use route='high-precision'")
    with mpmath.workdps(2 * digits + 10 if not exact else digits + 10):
        if exact:
            rows = _exact_matrix(param, point)
            exact_rank = _exact_rank(rows) if with_exact_rank else None
            J = mpmath.matrix([[mpmath.mpf(x.numerator) / x.denominator for x in row]
                               for row in rows]) if rows and rows[0] else mpmath.matrix(0, 0)
            extra = mpmath.mpf(0)
        else:
            J, extra = _difference_jacobian(param, point, digits)
            exact_rank = None
        with mpmath.workdps(digits + 10):
            if J.rows == 0 or J.cols == 0:
                s = []
            else:
                s = sorted((abs(x) for x in mpmath.svd_r(J, compute_uv=False)), reverse=True)
            if exact_rank is not None:  # rank over Q = number of nonzero singular values
                s = s[:exact_rank] + [mpmath.mpf(0)] * (len(s) - exact_rank)
            fro = mpmath.sqrt(sum(x ** 2 for x in s)) if s else mpmath.mpf(0)
            bound = extra + (1 + param.m * param.n) * mpmath.mpf(10) ** (-digits) * fro
    return s, {"route": "exact" if exact else "high-precision", "exact_rank": exact_rank,
               "error_bound": float(bound)}


def rank(param: Parameterization, theta: Any, policy: Optional[RankPolicy] = None,
         digits: int = DEFAULT_DIGITS, warn: bool = True, route: str = "high-precision",
         float64: Optional[RankDecision] = None) -> RankDecision:
    """rank J(theta) under the :class:`~paramgeo.linalg.numerics.RankPolicy` on singular values
    computed to ``digits`` digits (:func:`singular_values`): a
    :class:`~paramgeo.linalg.numerics.RankDecision` with ``route`` ``exact`` or ``high-precision`` and a
    :class:`PrecisionCertificate`. ``float64``: the float64 decision this one replaces (its rank
    is recorded). The decision, tolerance, gap and doubt are those of
    :func:`paramgeo.linalg.numerics.decide_rank` (same policy and band); the float values of the
    singular values are accurate to 16 digits, however small."""
    from ..linalg.numerics import decide_rank

    start = time.perf_counter()
    s, info = singular_values(param, theta, digits, route, with_exact_rank=True)
    decision = decide_rank(np.array([float(x) for x in s]), policy, what=f"J of {param.name} "
                           f"({digits} digits)", warn=warn)
    note = ("exact rational J at the binary-rational point, singular values by mpmath"
            if info["route"] == "exact" else
            "J by central differences of forward in mpmath, singular values by mpmath")
    certificate = PrecisionCertificate(route=info["route"], digits=int(digits),
                                       exact_rank=info["exact_rank"],
                                       error_bound=info["error_bound"],
                                       float64_rank=None if float64 is None else int(float64.rank),
                                       seconds=time.perf_counter() - start, note=note)
    return dataclasses.replace(decision, route=info["route"], certificate=certificate)


def escalates(param: Parameterization) -> bool:
    """Whether a decision on ``param`` in doubt is redone in high precision without being asked:
    m * n <= AUTO_MAX_ENTRIES (the route is O(m n min(m, n)) in mpmath)."""
    return param.m * param.n <= AUTO_MAX_ENTRIES


#: a rank tolerance this many times the measured round-off of forward (relative to |phi|):
#: the singular values that round-off alone gives J lie below it
NOISE_MARGIN = 1e3
#: float32's unit round-off 2^-24, to name the precision a measured noise level corresponds to
FLOAT32_UNIT = 2.0 ** -24


def arithmetic_noise(evaluate: Callable[[Any], Any], theta: ArrayLike, rng: np.random.Generator,
                     step: float = 1e-6, points: int = 9, degree: int = 3,
                     lines: int = 2) -> float:
    """The round-off of forward's actual arithmetic, measured, relative to |phi|.

    phi restricted to a line, t -> phi(theta + t v) (v a random unit vector, t in
    [-h, h] at ``points`` equispaced values, h = step (1 + |theta|_2)), is smooth, so a
    polynomial of ``degree`` in t fits it up to the truncation |phi^(degree+1)| h^(degree+1) /
    (degree+1)! (about 1e-24 |phi| for h = 1e-6, degree 3); what the least-squares fit leaves
    is the round-off of the computation:

        noise = min over ``lines`` lines of rms(residual) / rms(phi).

    It is about 1e-17 for a computation in float64 and about 1e-8 for one in float32 (unit
    round-off 2^-24 = 6e-8), whatever the dtype of the interface; the minimum over lines guards
    against a kink of a piecewise-smooth phi inside one segment. 0 where phi vanishes on the
    line; NaN where phi is not finite on every line. ``evaluate``: theta -> phi(theta) as a
    flat float64 array.
    """
    theta = np.asarray(theta, dtype=float)
    h = step * (1.0 + float(np.linalg.norm(theta)))
    t = np.linspace(-1.0, 1.0, points)
    basis = np.vander(t, degree + 1)
    best = np.inf
    for _ in range(lines):
        v = rng.standard_normal(theta.size)
        v /= max(float(np.linalg.norm(v)), 1e-300)
        values = np.stack([np.asarray(evaluate(theta + (h * tj) * v), dtype=float).ravel()
                           for tj in t])
        if not np.all(np.isfinite(values)):  # phi not finite on this line: no measurement
            continue
        scale = float(np.sqrt(np.mean(values ** 2)))
        if scale == 0.0:
            return 0.0
        coef = np.linalg.lstsq(basis, values, rcond=None)[0]
        residual = values - basis @ coef
        best = min(best, float(np.sqrt(np.mean(residual ** 2))) / scale)
    return best if np.isfinite(best) else float("nan")


def noise_policy(noise: float, policy: Optional[RankPolicy] = None) -> RankPolicy:
    """The rank policy for a forward whose measured round-off is ``noise`` (relative, see
    :func:`arithmetic_noise`): rtol = max(policy.rtol, NOISE_MARGIN * noise), so that
    singular values of J that round-off alone produces (about noise * |J|) count as zero.
    Returns ``policy`` (default :data:`~paramgeo.linalg.numerics.DEFAULT_POLICY`) unchanged for
    float64 arithmetic (NOISE_MARGIN * noise below its rtol)."""
    from ..linalg.numerics import DEFAULT_POLICY

    policy = policy or DEFAULT_POLICY
    if not math.isfinite(noise) or NOISE_MARGIN * noise <= policy.rtol:  # NaN: not measured
        return policy
    return dataclasses.replace(policy, rtol=float(NOISE_MARGIN * noise))


def difference_step(param: Parameterization, tol: float) -> tuple[float, float, str]:
    """(h, tolerance, note) of the contract check's finite-difference properties: h = 1e-6
    and max(tol, 1e-5); for a plugin whose measured round-off ``noise`` (a framework model
    computing below float64, :func:`arithmetic_noise`) is above float64's, the step that
    balances truncation h^2 against round-off noise / h, h = noise^(1/3), and the tolerance
    10 noise^(2/3) of that balance (Nocedal and Wright, "Numerical optimization", Sec. 8.1)."""
    noise = getattr(param, "noise", None)
    if noise is None or not np.isfinite(noise) or noise <= 1e-13:
        return 1e-6, max(tol, 1e-5), ""
    h = max(1e-6, float(noise) ** (1 / 3))
    fd_tol = max(tol, 1e-5, 10 * float(noise) ** (2 / 3))
    return h, fd_tol, (f"forward's measured round-off is {noise:.2g}: differences at step "
                       f"{h:.2g}, tolerance {fd_tol:.2g}")
