"""Parameterizations written as expressions: the safe parser (user text -> sympy through
Python's ``ast`` and a whitelist), the symbolic (sympy) views of a plugin, and ``define``: a
TOML spec turned into a registered plugin."""

from .parser import ExpressionError, parse_expression
from .symbolic import exact_analysis, exact_rank_at, symbolic_form
from .userdefs import define, undefine

__all__ = ["ExpressionError", "define", "exact_analysis", "exact_rank_at", "parse_expression",
           "symbolic_form", "undefine"]
