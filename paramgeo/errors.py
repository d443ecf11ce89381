"""One exception hierarchy for paramgeo.

Every error a user can cause derives from :class:`ParamgeoError`; the CLI turns exactly these
into one readable line on stderr and exit code 2 (``paramgeo.cli``), and lets anything else
surface as the bug it is.
"""

from __future__ import annotations


def approx(count: float) -> str:
    """A count for a message, to three digits (``4e+09``); an integer too large for a float
    (a 400-digit size) as ``~1e+399`` instead of an OverflowError."""
    try:
        return f"{count:.3g}"
    except OverflowError:
        return f"~1e+{len(str(abs(int(count)))) - 1}"


class ParamgeoError(Exception):
    """Base class of all errors paramgeo raises on bad input or a broken plugin."""


class PluginNotFoundError(ParamgeoError, LookupError):
    """No parameterization is registered under the requested name."""

    def __init__(self, name, available):
        self.name = name
        self.available = tuple(available)
        names = ", ".join(self.available) or "none"
        super().__init__(
            f"unknown parameterization {name!r}; available: {names} "
            "(load another with --plugin FILE.py or install a plugin package)"
        )


class SizeError(ParamgeoError, ValueError):
    """A size parameter (d, r, widths, ...) is missing, unknown or invalid."""


class BudgetError(ParamgeoError):
    """An engine's cost estimate exceeds the budget the user gave (raise the budget to run)."""


class ShapeError(ParamgeoError, ValueError):
    """An array has the wrong shape or contains non-finite values."""


class ContractError(ParamgeoError):
    """A plugin breaks the parameterization contract (declaration or behaviour)."""


class NotProvidedError(ParamgeoError, NotImplementedError):
    """An optional capability was requested from a plugin that does not provide it."""

    def __init__(self, cls_name, method, capability=None):
        self.cls_name = cls_name
        self.method = method
        cap = f" (declare {capability!r} in `capabilities` and implement it)" if capability else ""
        what = f"{method}()" if method.isidentifier() else method  # a method, or a description
        super().__init__(f"{cls_name} does not provide {what}{cap}")


class NumericalDoubtWarning(UserWarning):
    """A rank decision was made with a singular value close to the tolerance."""


class PluginError(ContractError):
    """A plugin's own method failed: it raised, returned something that is not what the
    contract promises (NaN, complex values, a string, the wrong shape), or cannot be traced by
    autograd. The message names the plugin, the method, the problem and the fix."""

    def __init__(self, plugin, method, problem, fix):
        self.plugin, self.method, self.problem, self.fix = plugin, method, problem, fix
        super().__init__(f"plugin {plugin!r}: {method}() {problem}; fix: {fix}")


class ArgumentError(ParamgeoError, ValueError):
    """An argument of a public function is invalid; the message names the argument and what
    it accepts."""
