"""Symbolic (sympy) views of parameterizations that declare the ``symbolic`` capability.

``param.symbolic()`` returns ``(symbols, exprs)``: sympy symbols in theta order (length n) and
phi's m entries as sympy expressions in them. This module turns that into numeric callables
(``sympy.lambdify`` with numpy, or with autograd.numpy so autograd can trace them) and exact
objects: the Jacobian matrix, its rank over Q at random rational points, its rank over the field
of rational functions Q(theta) (the generic rank, exactly) and exact kernels. Everything is cached
per parameterization class and sizes, so the symbolic work is done once.

Exact rank over Q uses sympy's ``DomainMatrix`` (fraction-free elimination over ZZ/QQ and
over polynomial rings / their fraction fields), so no floating-point tolerance is involved.
"""

from __future__ import annotations

import dataclasses
import numbers
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ..errors import ParamgeoError, PluginError
from ..results import Result, title

if TYPE_CHECKING:
    from ..contract.parameterization import Parameterization


class ExactComputationError(ParamgeoError, ValueError):
    """An exact (sympy) computation cannot be done for this parameterization or at this size:
    phi is not rational in theta, or the matrix exceeds the size limit. The message names the
    numeric alternative or the limit to raise."""


def _key(param):
    return (type(param), tuple(sorted((k, str(v)) for k, v in param.sizes.items())))


_CACHE: dict = {}


def symbolic_form(param: Parameterization) -> tuple[Any, Any]:
    """(symbols, exprs) of ``param``, validated and cached per class and sizes."""
    key = _key(param)
    if key not in _CACHE:
        _CACHE[key] = _validated(param)
    return _CACHE[key]


def _validated(param):
    """param.symbolic() checked against the contract: a pair (symbols, exprs) of n distinct
    sympy Symbols and m sympy expressions (or plain numbers) in those symbols; anything else is
    a PluginError naming the plugin and what was returned."""
    import sympy

    from ..contract.guard import plugin_label

    def fault(problem):
        return PluginError(plugin_label(param), "symbolic", problem,
                           f"return (symbols, exprs): {param.n} distinct sympy Symbols in theta "
                           f"order and {param.m} sympy expressions of them")

    out = param.symbolic()
    try:
        symbols, exprs = out
        symbols, exprs = list(symbols), list(exprs)
    except (TypeError, ValueError):
        raise fault(f"returned {_describe(out)}, not a pair (symbols, exprs)") from None
    if len(symbols) != param.n or len(exprs) != param.m:
        raise fault(f"returned {len(symbols)} symbols and {len(exprs)} expressions")
    bad = next((x for x in symbols if not isinstance(x, sympy.Symbol)), None)
    if bad is not None:
        raise fault(f"returned {_describe(bad)} among the symbols")
    if len(set(symbols)) != len(symbols):
        raise fault("returned a symbol twice")
    for i, e in enumerate(exprs):
        if isinstance(e, numbers.Number) and not isinstance(e, bool):
            exprs[i] = sympy.sympify(e)  # safe: e is a number (never text), a constant coordinate
        elif not isinstance(e, sympy.Expr):
            raise fault(f"returned {_describe(e)} as expression {i}")
        stray = exprs[i].free_symbols - set(symbols)
        if stray:
            raise fault(f"expression {i} uses {', '.join(sorted(map(str, stray)))}, which are "
                        "not among its symbols")
    return symbols, exprs


def _describe(value):
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


# Derived objects (Jacobian, lambdified functions, exact results) are computed once per class
# and sizes (the key of ``symbolic_form``) and kept in ``_DERIVED``; ``clear_cache()`` forgets.
_DERIVED: dict = {}

#: Largest m * n for which the rank over the field of rational functions Q(theta) is attempted.
SYMBOLIC_RANK_MAX_ENTRIES = 400


def clear_cache() -> None:
    """Forget every cached symbolic form, Jacobian, lambdified function and exact result."""
    _CACHE.clear()
    _DERIVED.clear()


def _cached(param, what, build):
    key = (_key(param), what)
    if key not in _DERIVED:
        _DERIVED[key] = build()
    return _DERIVED[key]


def _autograd_namespace():
    import autograd.numpy as anp

    return {k: v for k, v in vars(anp).items() if not k.startswith("_")}


def lambdify_autograd(symbols: Sequence[Any], exprs: Sequence[Any]) -> Callable[..., Any]:
    """A function theta -> list of the m values, built by ``sympy.lambdify`` with
    ``autograd.numpy`` as the namespace, so autograd can trace it (the forward map of a
    parameterization defined by expressions). ``symbols`` are unpacked from theta in order."""
    import sympy

    return sympy.lambdify([list(symbols)], list(exprs), modules=[_autograd_namespace(), "numpy"])


def exact_jacobian(param: Parameterization) -> Any:
    """The m x n sympy Matrix of partial derivatives d phi_i / d theta_j (cached)."""

    def build():
        import sympy

        symbols, exprs = symbolic_form(param)
        return sympy.Matrix(exprs).jacobian(symbols)

    return _cached(param, "jacobian", build)


def lambdify_parameterization(param: Parameterization) -> Callable[..., Any]:
    """A numpy callable theta -> phi(theta) (flat, length m) built from the sympy expressions
    (``sympy.lambdify``, cached per class and sizes)."""

    def build():
        import sympy

        symbols, exprs = symbolic_form(param)
        fn = sympy.lambdify([symbols], exprs, modules="numpy")
        return lambda theta: np.asarray(fn(np.asarray(theta, float)), dtype=float).ravel()

    return _cached(param, "lambdified", build)


def lambdify_jacobian(param: Parameterization) -> Callable[..., Any]:
    """A numpy callable theta -> J(theta) (m x n) lambdified from the exact Jacobian: the fast
    numeric path for parameterizations given by expressions (cached)."""

    def build():
        import sympy

        symbols, _ = symbolic_form(param)
        J = exact_jacobian(param)
        fn = sympy.lambdify([symbols], J.tolist(), modules="numpy")
        shape = (param.m, param.n)

        def jac(theta):
            # constant entries come back as Python numbers; every entry is a scalar
            return np.asarray(fn(np.asarray(theta, float)), dtype=float).reshape(shape)

        return jac

    return _cached(param, "lambdified-jacobian", build)


def rational_point(param: Parameterization, rng: np.random.Generator, bound: int = 999,
                   max_denominator: int = 97) -> dict[Any, Any]:
    """A random point with exact rational coordinates p/q, p uniform in [-bound, bound] and q in
    [1, max_denominator]; returns {symbol: Rational}. By the Schwartz-Zippel lemma a nonzero
    polynomial of degree D vanishes at such a point with probability at most D / (2 bound + 1)
    per coordinate draw, so the rank there is the generic rank with high probability."""
    import sympy

    symbols, _ = symbolic_form(param)
    nums = rng.integers(-bound, bound + 1, size=len(symbols))
    dens = rng.integers(1, max_denominator + 1, size=len(symbols))
    return {s: sympy.Rational(int(p), int(q)) for s, p, q in zip(symbols, nums, dens)}


def _domain_matrix(matrix):
    from sympy.polys.matrices import DomainMatrix

    return DomainMatrix.from_Matrix(matrix)


def _is_exact(dm):
    """Whether a DomainMatrix's domain is exact: integers, rationals, or polynomial rings /
    rational function fields over them in the parameter symbols (not the domain EX)."""
    import sympy

    dom = dm.domain
    if dom in (sympy.ZZ, sympy.QQ):
        return True
    # generators must be the parameter symbols themselves: sympy also makes rings over
    # generators such as exp(a) or sin(a), cos(a), whose algebraic relations it does not know
    return bool((dom.is_PolynomialRing or dom.is_FractionField)
                and dom.dom in (sympy.ZZ, sympy.QQ) and all(g.is_Symbol for g in dom.symbols))


def exact_rank_at(param: Parameterization, point: Mapping[Any, Any]) -> Any:
    """Rank of J at a rational point (a {symbol: Rational} dict), computed exactly over Q.

    Returns (rank, exact). When phi is not a rational function of theta (exp, sin, ... make the
    entries transcendental) the entries are evaluated to 60 significant digits and the rank
    decided at relative tolerance 1e-40 (``exact`` is then False)."""
    import sympy

    M = exact_jacobian(param).xreplace(point)
    dm = _domain_matrix(M)
    if dm.domain in (sympy.ZZ, sympy.QQ):
        return int(dm.convert_to(sympy.QQ).rank()), True
    import mpmath

    with mpmath.workdps(60):
        A = mpmath.matrix([[mpmath.mpf(sympy.N(x, 60)) for x in row] for row in M.tolist()])
        if A.rows == 0 or A.cols == 0:
            return 0, False
        s = mpmath.svd_r(A, compute_uv=False)
        vals = [abs(x) for x in s]
        top = max(vals) if vals else 0
        return int(sum(1 for x in vals if x > top * mpmath.mpf("1e-40"))), False


def _rational_ranks(param, n_points, seed, progress=None):
    """(ranks, exact, interrupted): exact ranks at ``n_points`` rational points; a
    KeyboardInterrupt stops after the points finished (at least one is needed)."""
    rng = np.random.default_rng(seed)
    ranks, exact = [], True
    try:
        for i in range(n_points):
            r, ok = exact_rank_at(param, rational_point(param, rng))
            ranks.append(r)
            exact = exact and ok
            if progress is not None:
                progress(i + 1, n_points + 1)
    except KeyboardInterrupt:
        if not ranks:
            raise
        return ranks, exact, True
    return ranks, exact, False


def symbolic_rank(param: Parameterization, max_entries: int = SYMBOLIC_RANK_MAX_ENTRIES) -> Any:
    """Rank of J as a matrix over the field of rational functions Q(theta) (exact; it equals
    the generic rank by definition). Returns None when m * n exceeds ``max_entries`` or phi is
    not rational in theta (the rank over the expression domain is not reliable). Cached."""
    if param.m * param.n > max_entries:
        return None

    def build():
        dm = _domain_matrix(exact_jacobian(param))
        if not _is_exact(dm):
            return None
        return int(dm.to_field().rank())

    return _cached(param, "symbolic-rank", build)


def exact_kernel(param: Parameterization, point: Optional[Mapping[Any, Any]] = None,
                 max_entries: int = SYMBOLIC_RANK_MAX_ENTRIES) -> Any:
    """An exact basis of ker J: at a rational ``point`` ({symbol: Rational}, columns over Q), or
    with ``point=None`` over Q(theta) (columns of rational functions; only when m * n <=
    ``max_entries`` and phi is rational). Returns a list of n x 1 sympy matrices. Raises
    :class:`ExactComputationError` (naming the alternative) when phi is not rational in theta
    or J is larger than ``max_entries``."""
    import sympy

    J = exact_jacobian(param)
    if point is not None:
        dm = _domain_matrix(J.xreplace(point))
        if dm.domain not in (sympy.ZZ, sympy.QQ):
            raise ExactComputationError(
                f"{param.name}: J has non-rational entries at this point (phi is not rational "
                "in theta), so its kernel cannot be computed exactly over Q; use "
                "paramgeo.kernel(param, theta) for the numerical kernel")
        ns = dm.convert_to(sympy.QQ).nullspace().to_Matrix()
        return [ns.row(i).T for i in range(ns.rows)]
    if param.m * param.n > max_entries:
        raise ExactComputationError(
            f"{param.name}: the kernel over Q(theta) is computed only for m*n <= {max_entries} "
            f"entries of J, and here m*n = {param.m * param.n}; pass max_entries="
            f"{param.m * param.n} to try anyway, or give a rational point (kernel over Q)")

    def build():
        dm = _domain_matrix(J)
        if not _is_exact(dm):
            raise ExactComputationError(
                f"{param.name}: phi is not rational in theta, so the kernel over Q(theta) "
                "cannot be computed exactly; use paramgeo.kernel(param, theta) at a point")
        ns = dm.to_field().nullspace().to_Matrix()
        return [_primitive(ns.row(i).T) for i in range(ns.rows)]

    return _cached(param, "symbolic-kernel", build)


def _primitive(vec):
    """Scale a vector of rational functions to polynomials with no common factor (so the kernel
    of UU^T comes out as the so(2) generator (U_0_1, -U_0_0, ...))."""
    import sympy

    vec = vec.applyfunc(sympy.cancel)
    dens = [sympy.fraction(e)[1] for e in vec]
    vec = (vec * sympy.lcm_list(dens)).applyfunc(sympy.cancel)
    nonzero = [e for e in vec if e != 0]
    if nonzero:
        vec = (vec / sympy.gcd_list(nonzero)).applyfunc(sympy.cancel)
    return vec


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExactAnalysis(Result):
    """Exact (sympy) analysis of J: ranks over Q at rational points, rank over Q(theta), the
    dimension of the kernel there, and whether everything was exact."""

    name: str
    sizes: dict
    param_dim: int
    predictor_dim: int
    rational_ranks: tuple  # exact rank of J at each random rational point
    generic_rank: int  # max of rational_ranks
    symbolic_rank: object  # rank over Q(theta), or None when too large / not rational
    kernel_dim: int  # n - generic_rank
    exact: bool  # False if transcendental entries forced a 60-digit evaluation
    seconds: float
    points: int = 0  # rational points asked for (len(rational_ranks) of them finished)
    interrupted: bool = False  # Ctrl-C: fewer points, no rank over Q(theta)

    def __str__(self):
        sym = "not computed (too large or not rational)" if self.symbolic_rank is None else \
            str(self.symbolic_rank)
        how = "exact over Q" if self.exact else "60-digit evaluation"
        if self.interrupted:
            how += (f"; INTERRUPTED after {len(self.rational_ranks)} of {self.points} points")
        return (f"{title(self.name, self.sizes)}: n={self.param_dim}, m={self.predictor_dim}\n"
                f"  rank at rational points ({how}): {list(self.rational_ranks)} -> generic rank "
                f"{self.generic_rank}\n"
                f"  rank over Q(theta): {sym}\n"
                f"  kernel dimension at a generic point: {self.kernel_dim}\n"
                f"  {self.seconds:.2f} s")


def exact_analysis(param: Parameterization, n_points: int = 2, seed: int = 0,
                   max_entries: int = SYMBOLIC_RANK_MAX_ENTRIES,
                   progress: Optional[Callable[[int, int], None]] = None) -> ExactAnalysis:
    """Run the exact analysis of ``param`` (which must provide ``symbolic``); cached per class,
    sizes, seed and number of points. See :class:`ExactAnalysis`. ``progress(done, total)`` is
    called after each rational point (total n_points + 1: the rank over Q(theta) is the last
    step); a KeyboardInterrupt after at least one point returns the ranks finished with
    ``interrupted=True`` (not cached)."""
    from ..errors import NotProvidedError

    if not param.provides("symbolic"):
        raise NotProvidedError(type(param).__name__, "symbolic", "symbolic")

    key = ("analysis", n_points, seed, max_entries)
    if (_key(param), key) in _DERIVED:
        return _DERIVED[(_key(param), key)]
    start = time.perf_counter()
    ranks, exact, interrupted = _rational_ranks(param, n_points, seed, progress)
    sym = None
    if not interrupted:
        try:
            sym = symbolic_rank(param, max_entries=max_entries)
        except KeyboardInterrupt:
            interrupted = True
    generic = max(ranks + ([sym] if sym is not None else []))
    result = ExactAnalysis(name=param.name, sizes=dict(param.sizes), param_dim=param.n,
                           predictor_dim=param.m, rational_ranks=tuple(ranks), generic_rank=generic,
                           symbolic_rank=sym, kernel_dim=param.n - generic, exact=exact,
                           seconds=time.perf_counter() - start, points=n_points,
                           interrupted=interrupted)
    if progress is not None and not interrupted:
        progress(n_points + 1, n_points + 1)
    return result if interrupted else _cached(param, key, lambda: result)

