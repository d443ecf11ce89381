"""Safe expressions: user text -> sympy, through Python's ``ast`` and a whitelist.

An expression spec (``paramgeo define SPEC.toml``) writes the predictor as text in the declared
parameter blocks, e.g. ``"u * v"`` or ``"U @ U.T"`` or ``"tanh(w[0]) * a"``. The text is parsed
with ``ast.parse(mode="eval")`` and walked node by node; only these nodes are accepted:

* numbers (int, float; made exact rationals: ``0.1`` -> 1/10), the constant ``pi``;
* names of declared parameter blocks (and size names, which are integers);
* ``+ - * / **`` and ``@`` (matrix product), unary ``-`` and ``+``, parentheses;
* indexing a block with integer constants or constant slices: ``u[0]``, ``U[1, 2]``, ``U[:, 0]``;
* the attribute ``.T`` (transpose);
* calls of the functions in :data:`FUNCTIONS` (elementwise: exp, log, sin, cos, tan, sinh,
  cosh, tanh, sqrt, sigmoid; ``sum`` of all entries), positional arguments only.

Anything else (strings, other names, other calls or attributes, comparisons, lambdas,
comprehensions, keywords, ...) raises :class:`ExpressionError` naming the offending token and its
position (line and column, 1-based). Nothing is ever evaluated by Python: no ``eval``, ``exec``
or sympy's string parser touches the text; the walk builds sympy objects directly.

Values are numpy object arrays of sympy expressions, so arithmetic broadcasts like numpy
(``u * v`` is elementwise, ``@`` is the matrix product) and a block ``U`` of shape (d, r) is the
array of symbols ``U_i_k``.
"""

from __future__ import annotations

import ast
import fractions
import math
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..errors import ParamgeoError

if TYPE_CHECKING:
    from numpy.typing import NDArray

#: Largest allowed absolute value of a numeric exponent (``u ** 1000000`` is refused).
MAX_EXPONENT = 64
#: Longest accepted expression text, in characters.
MAX_LENGTH = 20000
#: Most decimal digits of a constant an expression may compute (``(9**64)**64`` has 3,900).
MAX_CONSTANT_DIGITS = 1000
#: Most nodes of the expression trees of a matrix product (``U@U@U@U`` for a 10 x 10 U has
#: about 1e6; lambdifying and differentiating costs time in proportion).
MAX_NODES = 200_000


class ExpressionError(ParamgeoError, ValueError):
    """An expression uses something outside the whitelist, or is malformed."""


def _functions():
    import sympy

    return {
        "exp": sympy.exp,
        "log": sympy.log,
        "sin": sympy.sin,
        "cos": sympy.cos,
        "tan": sympy.tan,
        "sinh": sympy.sinh,
        "cosh": sympy.cosh,
        "tanh": sympy.tanh,
        "sqrt": sympy.sqrt,
        "sigmoid": lambda x: 1 / (1 + sympy.exp(-x)),
    }


#: Names of the whitelisted functions (elementwise ones, plus ``sum``).
FUNCTIONS = ("exp", "log", "sin", "cos", "tan", "sinh", "cosh", "tanh", "sqrt", "sigmoid", "sum")

_BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
}

_DESCRIBE = {
    ast.Attribute: "attribute access",
    ast.Call: "function call",
    ast.Constant: "constant",
    ast.Compare: "comparison",
    ast.BoolOp: "boolean operator",
    ast.Lambda: "lambda",
    ast.IfExp: "conditional expression",
    ast.ListComp: "list comprehension",
    ast.GeneratorExp: "generator expression",
    ast.Dict: "dict",
    ast.Set: "set",
    ast.List: "list",
    ast.Tuple: "tuple",
    ast.Starred: "starred expression",
    ast.JoinedStr: "f-string",
    ast.NamedExpr: "assignment expression",
}


def parse_expression(text: str, symbols: Mapping[str, Any],
                     where: str = "expression") -> NDArray[Any]:
    """Parse ``text`` into a numpy object array (or 0-d array) of sympy expressions.

    ``symbols`` maps each allowed name to its value: a sympy symbol, a numpy object array of
    symbols (a parameter block), or an int (a size). ``where`` prefixes error messages, e.g.
    ``"predictor"``. Raises :class:`ExpressionError` with the token and its position.
    """
    if not isinstance(text, str):
        raise ExpressionError(f"{where}: expected a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"{where}: expression longer than {MAX_LENGTH} characters")
    if not text.strip():
        raise ExpressionError(f"{where}: the expression is empty")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        col = exc.offset or 0
        raise ExpressionError(
            f"{where}, line {exc.lineno or 1}, column {col}: syntax error: {exc.msg}"
        ) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ExpressionError(f"{where}: cannot parse the expression ({exc})") from None
    walker = _Walker(text.strip(), symbols, where)
    try:
        value = walker.visit(tree.body)
    except RecursionError:
        raise ExpressionError(f"{where}: the expression is nested too deeply") from None
    return np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value


class _Walker:
    def __init__(self, text, symbols, where):
        self.text, self.symbols, self.where = text, dict(symbols), where
        self.functions = _functions()

    # -------------------------------------------------------------- errors
    def fail(self, node, message):
        token = ast.get_source_segment(self.text, node) or type(node).__name__
        if len(token) > 40:
            token = token[:37] + "..."
        line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1
        raise ExpressionError(f"{self.where}, line {line}, column {col}: {token!r} {message}")

    def reject(self, node, extra=""):
        what = _DESCRIBE.get(type(node), type(node).__name__)
        self.fail(node, f"is not allowed: {what}{extra}")

    # -------------------------------------------------------------- nodes
    def visit(self, node):
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.reject(node, " (use numbers, declared symbols, + - * / ** @ and "
                              + ", ".join(FUNCTIONS) + ")")
        return method(node)

    def visit_Constant(self, node):
        import sympy

        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.reject(node, " (only numbers)")
        if isinstance(value, float) and not math.isfinite(value):
            self.reject(node, " (only finite numbers)")
        frac = fractions.Fraction(value) if isinstance(value, int) else fractions.Fraction(
            repr(value))
        return sympy.Rational(frac.numerator, frac.denominator)

    def visit_Name(self, node):
        import sympy

        if node.id == "pi":
            return sympy.pi
        if node.id in FUNCTIONS:
            self.fail(node, "is a function; call it, e.g. exp(u)")
        if node.id not in self.symbols:
            declared = ", ".join(sorted(self.symbols)) or "none"
            self.fail(node, f"is not a declared name (declared: {declared}; constants: pi; "
                            f"functions: {', '.join(FUNCTIONS)})")
        value = self.symbols[node.id]
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return sympy.Integer(int(value))
        return value

    def visit_UnaryOp(self, node):
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return operand
        self.reject(node, " (only unary - and +)")

    def visit_BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.fail(node, "uses an operator that is not allowed (only + - * / ** @)")
        left, right = self.visit(node.left), self.visit(node.right)
        try:
            if op == "+":
                return left + right
            if op == "-":
                return left - right
            if op == "*":
                return left * right
            if op == "/":
                return left / right
            if op == "**":
                self._check_exponent(node, right)
                self._check_constant_power(node, left, right)
                return left ** right
            return self._matmul(node, left, right)
        except ExpressionError:
            raise
        except (ValueError, TypeError) as exc:  # numpy broadcasting / shape mismatch
            self.fail(node, f"combines arrays whose shapes do not fit ({_short(exc)})")

    def _check_exponent(self, node, exponent):
        import sympy

        values = np.ravel(np.asarray(exponent, dtype=object))
        for v in values:
            if isinstance(v, sympy.Basic) and v.is_number and v.is_real is not False:
                if abs(float(v)) > MAX_EXPONENT:
                    self.fail(node.right, f"is too large an exponent (at most {MAX_EXPONENT} "
                                          "in absolute value)")

    def _check_constant_power(self, node, base, exponent):
        """Refuse number ** number whose value has more than MAX_CONSTANT_DIGITS digits:
        digits ~ |exponent| log10 |base| (exact arithmetic would compute every digit)."""
        import sympy

        bases = np.ravel(np.asarray(base, dtype=object))
        exps = np.ravel(np.asarray(exponent, dtype=object))
        for b in bases:
            for e in exps:
                if (isinstance(b, sympy.Basic) and isinstance(e, sympy.Basic) and b.is_number
                        and e.is_number and b.is_real and e.is_real and b != 0):
                    digits = abs(float(e)) * abs(math.log10(abs(float(sympy.N(b, 15)))))
                    if digits > MAX_CONSTANT_DIGITS:
                        self.fail(node, f"computes a constant of about {digits:.3g} digits (at "
                                        f"most {MAX_CONSTANT_DIGITS}); write a smaller number")

    def _matmul(self, node, left, right):
        left, right = np.asarray(left, dtype=object), np.asarray(right, dtype=object)
        if left.ndim == 0 or right.ndim == 0:
            self.fail(node, "needs arrays on both sides of @ (use * for scalars)")
        # every entry of the product is a sum of k products of one entry of each side
        k = left.shape[-1]
        entries = left.size // max(k, 1) * (right.size // max(right.shape[0], 1))
        per = k * (_max_nodes(left) + _max_nodes(right) + 1)
        if entries * per > MAX_NODES:
            self.fail(node, f"builds expressions of about {entries * per:.2g} nodes (at most "
                            f"{MAX_NODES:.2g}): the exact expression tree grows with each "
                            "product; use fewer or smaller factors (or write a Python plugin)")
        return np.matmul(left, right)

    def visit_Attribute(self, node):
        if node.attr != "T":
            self.reject(node, " (only .T, the transpose)")
        value = np.asarray(self.visit(node.value), dtype=object)
        return value.T

    def visit_Subscript(self, node):
        value = self.visit(node.value)
        if not isinstance(value, np.ndarray) or value.ndim == 0:
            self.fail(node, "indexes a scalar")
        index = self._index(node.slice)
        try:
            return value[index]
        except IndexError as exc:
            self.fail(node, f"is out of range ({_short(exc)})")

    def _index(self, node):
        if isinstance(node, ast.Tuple):
            return tuple(self._index_item(elt) for elt in node.elts)
        return self._index_item(node)

    def _index_item(self, node):
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self._int_const(p) for p in
                     (node.lower, node.upper, node.step)]
            return slice(*parts)
        return self._int_const(node)

    def _int_const(self, node):
        sign = 1
        inner = node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            sign, inner = -1, node.operand
        if isinstance(inner, ast.Constant) and isinstance(inner.value, int) and not isinstance(
                inner.value, bool):
            return sign * inner.value
        if isinstance(inner, ast.Name) and isinstance(self.symbols.get(inner.id), (int,
                                                                                   np.integer)):
            return sign * int(self.symbols[inner.id])
        self.fail(node, "is not allowed as an index (use integer constants or slices)")

    def visit_Call(self, node):
        if not isinstance(node.func, ast.Name):
            self.reject(node, " (only calls of " + ", ".join(FUNCTIONS) + ")")
        name = node.func.id
        if name not in FUNCTIONS:
            self.fail(node.func, f"is not an allowed function (allowed: {', '.join(FUNCTIONS)})")
        if node.keywords:
            self.fail(node.keywords[0], f"is not allowed: keyword arguments in {name}()")
        if len(node.args) != 1:
            self.fail(node, f"is not allowed: {name}() takes exactly one argument")
        if isinstance(node.args[0], ast.Starred):
            self.reject(node.args[0])
        arg = self.visit(node.args[0])
        if name == "sum":
            import sympy

            return sympy.Add(*np.ravel(np.asarray(arg, dtype=object)))
        fn = self.functions[name]
        if isinstance(arg, np.ndarray):
            return np.vectorize(fn, otypes=[object])(arg) if arg.size else arg
        return fn(arg)


def expression_nodes(expr: Any, limit: int) -> int:
    """The number of nodes of the sympy tree ``expr``, counted up to ``limit``."""
    import sympy

    if not isinstance(expr, sympy.Basic):
        return 1
    count = 0
    for _ in sympy.preorder_traversal(expr):
        count += 1
        if count >= limit:
            break
    return count


def _max_nodes(arr):
    """The largest tree among the entries of the object array ``arr`` (counted to MAX_NODES)."""
    return max((expression_nodes(e, MAX_NODES) for e in np.ravel(arr)), default=0)


def _short(exc):
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:80]


def block_symbols(name: str, shape: tuple[int, ...]) -> NDArray[Any]:
    """A numpy object array of real sympy symbols ``name_i_j`` of the given shape (0-d: one
    symbol called ``name``)."""
    import sympy

    shape = tuple(shape)
    if not shape:
        return np.asarray(sympy.Symbol(name, real=True), dtype=object)
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        out[idx] = sympy.Symbol(f"{name}_{'_'.join(map(str, idx))}", real=True)
    return out
