"""Symbolic (sympy) views of parameterizations that declare the ``symbolic`` capability.

``param.symbolic()`` returns ``(symbols, exprs)``: sympy symbols in theta order (length n) and
phi's m entries as sympy expressions in them. This module turns that into numeric callables
(``sympy.lambdify`` with numpy) and exact objects (the Jacobian matrix), caching per instance so
the symbolic work is done once per parameterization and sizes.
"""

import numpy as np

from .errors import ContractError


def _key(param):
    return (type(param), tuple(sorted((k, str(v)) for k, v in param.sizes.items())))


_CACHE = {}


def symbolic_form(param):
    """(symbols, exprs) of ``param``, validated and cached per class and sizes."""
    key = _key(param)
    if key not in _CACHE:
        _CACHE[key] = _validated(param)
    return _CACHE[key]


def _validated(param):
    symbols, exprs = param.symbolic()
    symbols, exprs = list(symbols), list(exprs)
    if len(symbols) != param.n or len(exprs) != param.m:
        raise ContractError(
            f"{type(param).__name__}.symbolic() must return {param.n} symbols and {param.m} "
            f"expressions, got {len(symbols)} and {len(exprs)}"
        )
    return symbols, exprs


def lambdify_parameterization(param):
    """A numpy callable theta -> phi(theta) (flat, length m) built from the sympy expressions."""
    import sympy

    symbols, exprs = symbolic_form(param)
    fn = sympy.lambdify([symbols], exprs, modules="numpy")
    return lambda theta: np.asarray(fn(np.asarray(theta, float)), dtype=float).ravel()


def exact_jacobian(param):
    """The m x n sympy Matrix of partial derivatives d phi_i / d theta_j."""
    import sympy

    symbols, exprs = symbolic_form(param)
    return sympy.Matrix(exprs).jacobian(symbols)
