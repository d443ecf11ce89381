"""Parameterizations defined by an expression spec (``paramgeo define SPEC.toml``).

A spec is a small TOML file (read with the standard library's ``tomllib``; ``tomli`` on 3.10):

    name = "hadamard3"                 # registry name: lower case, digits, - and _
    summary = "beta = u * v, u, v in R^3"
    predictor = "u * v"                # one expression (numpy-style arrays), or a list of them
    references = ["Hoff (2017) ..."]   # optional
    symmetry = "discovered"            # optional: declare the discovered linear symmetries

    [sizes]                            # optional integer sizes with defaults (-p p=5)
    p = 3

    [parameters]                       # blocks with shapes: ints or size names
    u = ["p"]
    v = ["p"]

Top-level keys (``name``, ``summary``, ``predictor``, ``references``) must come before the
first ``[table]`` in TOML; ``[predictor]`` with ``expr = "..."`` (and optionally ``shape``) is
accepted too. The predictor is parsed by :mod:`paramgeo.expressions.parser` (``ast`` with a whitelist; nothing
is evaluated), giving sympy expressions phi_i(theta). From them the class built here gets

* ``forward``: the expressions lambdified with ``autograd.numpy`` (traceable, so JVP, VJP and
  second derivatives come from autograd as for any plugin);
* ``jacobian``: the exact sympy Jacobian lambdified with numpy (the fast path; the contract
  check compares it with autograd's);
* ``symbolic``: the expressions themselves, so exact ranks and kernels work
  (:mod:`paramgeo.expressions.symbolic`);
* ``symmetry`` only with ``symmetry = "discovered"``: the Lie algebra of linear symmetries
  found by :func:`paramgeo.symmetry.discover` becomes the declared group (connected component),
  so vertical spaces, quotient geometry, critical-point causes and conserved quantities of
  flows use it. Without the key nothing is declared and ``describe`` reports what is discovered.

Definitions are saved verbatim in ``<home>/definitions/NAME.toml``, where ``<home>`` is
``$PARAMGEO_HOME`` if set, else ``$XDG_DATA_HOME/paramgeo``, else ``~/.local/share/paramgeo``.
A spec is parsed, compiled and evaluated at a random point *before* it is saved, so a bad spec
leaves nothing behind. The registry lists saved definitions through a provider
(:func:`paramgeo.contract.registry.add_provider`), so ``paramgeo list`` and ``paramgeo.get`` see them.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Optional, Union

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

from ..contract import registry
from ..errors import ContractError, ParamgeoError, PluginError, PluginNotFoundError, approx
from ..io.files import write_file
from .parser import FUNCTIONS, ExpressionError, block_symbols, expression_nodes, parse_expression
from ..contract.parameterization import Parameterization, ParamSpec, Size
from ..symmetry import discovered_group

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_HOME = "PARAMGEO_HOME"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
ALLOWED_KEYS = ("name", "summary", "predictor", "references", "symmetry", "sizes",
                "parameters")


class SpecError(ParamgeoError, ValueError):
    """An expression spec is malformed (bad TOML, missing keys, bad shapes or expressions)."""


# --------------------------------------------------------------------------- storage
def home() -> Path:
    """The per-user data directory: $PARAMGEO_HOME, else $XDG_DATA_HOME/paramgeo, else
    ~/.local/share/paramgeo (not created until something is saved)."""
    if os.environ.get(ENV_HOME):
        return Path(os.environ[ENV_HOME]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "paramgeo"


def definitions_dir() -> Path:
    """Where saved specs live: ``home() / "definitions"``."""
    return home() / "definitions"


def defined() -> dict[str, Path]:
    """{name: path} of every saved definition (sorted by name)."""
    folder = definitions_dir()
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.toml")) if NAME_PATTERN.match(p.stem)}


# --------------------------------------------------------------------------- parsing
def parse_spec(text: str, origin: str = "spec") -> dict[str, Any]:
    """Parse and validate spec text; returns a normalized dict (raises SpecError)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{origin}: not valid TOML: {exc}") from None
    except RecursionError:
        raise SpecError(f"{origin}: arrays or tables nested too deeply for TOML") from None
    unknown = sorted(set(data) - set(ALLOWED_KEYS))
    if unknown:
        raise SpecError(f"{origin}: unknown key(s) {', '.join(unknown)}; a spec has "
                        f"{', '.join(ALLOWED_KEYS)}")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise SpecError(f"{origin}: `name` must be lower case letters, digits, - or _ (starting "
                        f"with a letter, at most 64 characters), got {name!r}")
    sizes = data.get("sizes", {})
    if not isinstance(sizes, dict):
        raise SpecError(f"{origin}: [sizes] must be a table of integer defaults, e.g. p = 3")
    for key, value in sizes.items():
        _check_identifier(origin, "size", key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"{origin}: size {key} = {value!r} must be a positive integer")
    params = data.get("parameters")
    if not isinstance(params, dict) or not params:
        raise SpecError(f"{origin}: a [parameters] table is needed, e.g. u = [3] (a block u "
                        "of shape (3,))")
    blocks = {}
    for key, shape in params.items():
        if key == "predictor" or isinstance(shape, str):
            raise SpecError(f"{origin}: parameter block {key!r} must be a shape like [3] or "
                            "['p'] (a top-level `predictor = ...` must come before the first "
                            "[table] in TOML)")
        _check_identifier(origin, "parameter block", key)
        if key in sizes:
            raise SpecError(f"{origin}: {key!r} is both a size and a parameter block")
        shape = [shape] if isinstance(shape, (int, str)) and not isinstance(shape, bool) \
            else shape
        if not isinstance(shape, list) or not all(
                (isinstance(s, int) and not isinstance(s, bool) and s >= 1)
                or (isinstance(s, str) and s in sizes)
                for s in shape):
            raise SpecError(f"{origin}: block {key} = {params[key]!r} must be a list of positive "
                            f"integers or size names ({', '.join(sizes) or 'no sizes declared'})")
        blocks[key] = list(shape)
    predictor = data.get("predictor")
    declared_shape = None
    if isinstance(predictor, dict):
        extra = sorted(set(predictor) - {"expr", "shape"})
        if extra or "expr" not in predictor:
            raise SpecError(f"{origin}: [predictor] takes `expr` (and optionally `shape`)")
        declared_shape = predictor.get("shape")
        predictor = predictor["expr"]
    if not _is_expr_tree(predictor):
        raise SpecError(f"{origin}: `predictor` must be an expression string or a (nested, at "
                        f"most {MAX_NESTING} deep) list of expression strings, e.g. predictor = "
                        "\"u * v\"")
    refs = data.get("references", [])
    if isinstance(refs, str):
        refs = [refs]
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise SpecError(f"{origin}: `references` must be a list of strings")
    summary = data.get("summary", "")
    if not isinstance(summary, str):
        raise SpecError(f"{origin}: `summary` must be a string")
    symmetry = data.get("symmetry", "none")
    if symmetry not in ("none", "discovered"):
        raise SpecError(f"{origin}: `symmetry` must be \"discovered\" or \"none\", got "
                        f"{symmetry!r}")
    return {"name": name, "summary": summary, "sizes": dict(sizes), "parameters": blocks,
            "predictor": predictor, "predictor_shape": declared_shape,
            "references": list(refs), "symmetry": symmetry}


def _check_identifier(origin, what, key):
    python_name = unicodedata.normalize("NFKC", key) if isinstance(key, str) else key
    if python_name != key:  # Python's parser reads the name in NFKC form: it would merge
        raise SpecError(f"{origin}: {what} name {key!r} is read by Python as {python_name!r} "
                        f"(Unicode NFKC), so it would merge with any name {python_name!r}; "
                        f"write it as {python_name!r}")
    if not key.isidentifier() or key.startswith("_") or key in FUNCTIONS or key == "pi":
        raise SpecError(f"{origin}: {what} name {key!r} must be a Python-style identifier not "
                        f"starting with _ and not one of pi, {', '.join(FUNCTIONS)}")


#: Deepest nesting of lists in a spec's predictor (a predictor is at most a few axes deep).
MAX_NESTING = 32


def _is_expr_tree(value, depth=0):
    if isinstance(value, str):
        return True
    return (depth < MAX_NESTING and isinstance(value, list) and bool(value)
            and all(_is_expr_tree(v, depth + 1) for v in value))


#: Most parameter entries of a spec definition (each is a sympy symbol).
MAX_SYMBOLS = 5000
#: Most entries m n of the sympy Jacobian of a spec definition (differentiating and
#: lambdifying takes about 50 microseconds an entry: a minute at this limit).
MAX_SYMBOLIC_JACOBIAN = 1_000_000


#: Most node visits (expression-tree nodes x parameters) of a spec's exact Jacobian: sum(U@U@U)
#: for a 10 x 10 U has 3e4 nodes and n = 100, 3e6 visits and about 30 s of sympy.
MAX_SYMBOLIC_WORK = 1_000_000


def compile_predictor(spec: Mapping[str, Any], sizes: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """(block arrays of symbols, flat symbols in theta order, predictor object array) for the
    spec at the given integer sizes; raises ExpressionError naming the offending token."""
    shapes = {k: tuple(int(sizes[s]) if isinstance(s, str) else int(s) for s in shape)
              for k, shape in spec["parameters"].items()}
    n = sum(math.prod(shape) for shape in shapes.values())
    if n > MAX_SYMBOLS:
        def short(v):  # a 400-digit size as ~1e+399, not 400 digits
            return approx(v) if isinstance(v, int) and abs(v) >= 10 ** 15 else v

        at = ", ".join(f"{k}={short(v)}" for k, v in sizes.items())
        raise SpecError(f"{spec['name']}: {short(n)} parameters{f' at {at}' if at else ''}; a "
                        f"spec definition makes one sympy symbol per entry, at most "
                        f"{MAX_SYMBOLS}: use smaller sizes (or write a Python plugin, see "
                        "docs/tutorial-register.md)")
    arrays = {k: block_symbols(k, shape) for k, shape in shapes.items()}
    flat = [s for arr in arrays.values() for s in np.ravel(arr)]
    names = [str(s) for s in flat]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})[0]
        raise SpecError(f"{spec['name']}: two parameter entries share the symbol {dup!r}; "
                        "rename a block")
    scope = dict(arrays)
    scope.update({k: int(v) for k, v in sizes.items()})
    value = _compile_tree(spec["predictor"], scope, "predictor")
    return shapes, flat, value


def _compile_tree(tree, scope, where):
    if isinstance(tree, str):
        return parse_expression(tree, scope, where=where)
    parts = [_compile_tree(t, scope, f"{where}[{i}]") for i, t in enumerate(tree)]
    shapes = {p.shape for p in parts}
    if len(shapes) != 1:
        raise SpecError(f"{where}: the entries of the list have different shapes "
                        f"{sorted(shapes)}")
    return np.stack(parts)


# --------------------------------------------------------------------------- the class
class SpecParameterization(Parameterization):
    """Base of classes built from an expression spec (see the module docstring)."""

    spec_data: ClassVar[dict] = {}
    spec_path: ClassVar[str] = ""
    capabilities = frozenset({"symbolic", "jacobian"})

    def validate_sizes(self) -> None:
        import sympy

        shapes, flat, value = compile_predictor(self.spec_data, self.sizes)
        exprs = list(np.ravel(value))
        for i, e in enumerate(exprs):
            if not isinstance(e, sympy.Basic) or e.has(sympy.zoo, sympy.nan, sympy.oo):
                raise SpecError(f"{self.name}: predictor entry {i} is undefined ({e}); check "
                                "for a division by zero")
        declared = self.spec_data.get("predictor_shape")
        if declared is not None and tuple(declared) != value.shape:
            raise SpecError(f"{self.name}: [predictor] shape = {declared} but the expression "
                            f"has shape {list(value.shape)}")
        m, n = len(exprs), len(flat)
        if m * n > MAX_SYMBOLIC_JACOBIAN:
            raise SpecError(f"{self.name}: the exact Jacobian at sizes {dict(self.sizes)} has "
                            f"m x n = {m} x {n} = {m * n} entries; sympy differentiates at most "
                            f"{MAX_SYMBOLIC_JACOBIAN} in reasonable time: use smaller sizes (or "
                            "write a Python plugin, see docs/tutorial-register.md)")
        budget = MAX_SYMBOLIC_WORK // max(n, 1) + 1  # tree nodes the n derivatives may visit
        nodes = 0
        for e in exprs:
            nodes += expression_nodes(e, budget - nodes)
            if nodes >= budget:
                raise SpecError(
                    f"{self.name}: the predictor's expression trees have more than "
                    f"{budget - 1} nodes at sizes {dict(self.sizes)}, and its exact Jacobian "
                    f"differentiates them for each of the n = {n} parameters (more than "
                    f"{MAX_SYMBOLIC_WORK:.0e} node visits, minutes of sympy); use smaller sizes "
                    "or fewer nested products (or write a Python plugin, see "
                    "docs/tutorial-register.md)")
        self._shapes, self._symbols, self._exprs = shapes, flat, exprs
        self._shape = value.shape
        self._forward: Any = None

    def make_spec(self) -> ParamSpec:
        return ParamSpec(self._shapes)

    def make_predictor_shape(self) -> tuple[int, ...]:
        return self._shape

    def forward(self, theta: ArrayLike) -> NDArray[np.float64]:
        import autograd.numpy as anp

        if self._forward is None:
            from .symbolic import lambdify_autograd

            self._forward = lambdify_autograd(self._symbols, self._exprs)
        values = self._forward(theta)
        return anp.reshape(anp.array(values), self._shape) if values else anp.zeros(self._shape)

    def jacobian(self, theta: ArrayLike) -> NDArray[np.float64]:
        from .symbolic import lambdify_jacobian

        return lambdify_jacobian(self)(theta)

    def symbolic(self) -> tuple[list, list]:
        return list(self._symbols), list(self._exprs)


def build_class(spec: Mapping[str, Any],
                path: Union[str, os.PathLike] = "") -> type[SpecParameterization]:
    """A registered-ready SpecParameterization subclass for a parsed spec dict."""
    doc = spec["summary"] or f"defined by expression: {_short(spec['predictor'])}"
    attrs = {
        "__doc__": doc,
        "__module__": __name__,
        "name": spec["name"],
        "size_params": {k: Size("int", default=v, minimum=1, help="size from the spec")
                        for k, v in spec["sizes"].items()},
        "references": tuple(spec["references"]),
        "spec_data": spec,
        "spec_path": str(path),
    }
    if spec.get("symmetry") == "discovered":
        attrs["capabilities"] = SpecParameterization.capabilities | {"symmetry"}
        attrs["symmetry"] = discovered_group
    cls_name = "Spec_" + re.sub(r"\W", "_", spec["name"])
    cls = type(cls_name, (SpecParameterization,), attrs)
    registry.validate_declaration(cls)
    return cls


def _short(tree):
    text = tree if isinstance(tree, str) else "[" + ", ".join(map(_short, tree)) + "]"
    return text if len(text) <= 60 else text[:57] + "..."


def load_text(text: str, origin: str = "spec",
              path: Union[str, os.PathLike] = "") -> type[SpecParameterization]:
    """Parse spec text, build its class and instantiate it at the default sizes, evaluating
    phi and J at a random point (so a spec that cannot run is refused). Returns the class."""
    spec = parse_spec(text, origin)
    cls = build_class(spec, path)
    try:
        param = cls()
        theta = param.random_point(np.random.default_rng(0))
        with np.errstate(all="ignore"):  # non-finite values are reported below
            out = np.asarray(param.forward_flat(theta), dtype=float)
            J = param.jacobian(theta)
    except PluginError as exc:  # the guarded call layer: the spec's phi or J failed
        if exc.problem.startswith(("returned nan", "returned inf")):
            raise SpecError(f"{origin}: the predictor or its Jacobian is not finite at a random "
                            "point (a log or sqrt of a negative number, a division by zero?)"
                            ) from None
        raise SpecError(f"{origin}: the predictor cannot be evaluated: {exc.problem}") from None
    except (ParamgeoError, ExpressionError):
        raise
    except Exception as exc:  # sympy/numpy failures on a syntactically valid spec
        raise SpecError(f"{origin}: the predictor cannot be evaluated: "
                        f"{type(exc).__name__}: {exc}") from None
    if not (np.all(np.isfinite(out)) and np.all(np.isfinite(J))):
        raise SpecError(f"{origin}: the predictor or its Jacobian is not finite at a random "
                        "point (a log or sqrt of a negative number, a division by zero?)")
    return cls


def load_definition(path: Union[str, os.PathLike]) -> type[SpecParameterization]:
    """The class of a saved definition file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read definition {str(path)!r}: {exc}") from None
    return load_text(text, origin=str(path), path=path)


# --------------------------------------------------------------------------- define / undefine
def define(spec_file: Union[str, os.PathLike, None] = None, text: Optional[str] = None,
           replace: bool = False) -> type[Parameterization]:
    """Validate an expression spec and save it in the definitions directory.

    The spec (TOML: ``name``, ``parameters``, ``predictor`` as expression text, optional
    ``sizes``, ``symmetry``, ``summary``, ``references``) becomes a Parameterization whose
    forward is the predictor parsed through a whitelist of syntax (:mod:`paramgeo.expressions.parser`, never
    ``eval``), checked at a random point, saved under :func:`definitions_dir` (``$PARAMGEO_HOME``
    or ``$XDG_DATA_HOME/paramgeo``) and registered, so ``paramgeo.get(name)`` finds it from then
    on.

    Args:
        spec_file: a path to the spec file.
        text: the spec text instead.
        replace: overwrite an existing definition of the same name.

    Returns:
        The defined class.

    Raises:
        SpecError: both or neither of spec_file and text, an unreadable or invalid spec, or a
            name taken (by another parameterization, or by a definition without replace).
        UnsafeFileError: the definitions directory or file is not paramgeo's to write.
    """
    if (spec_file is None) == (text is None):
        raise SpecError("define() takes a spec file or text, not both")
    origin = "spec"
    if spec_file is not None:
        path = Path(spec_file)
        if not path.is_file():
            raise SpecError(f"spec file {str(path)!r} does not exist")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"cannot read spec file {str(path)!r}: {exc}") from None
        origin = str(path)
    cls = load_text(text, origin=origin)  # type: ignore[arg-type]
    name = cls.name
    saved = defined()
    if name in saved and not replace:
        raise SpecError(f"{name!r} is already defined in {saved[name]}; pass --replace to "
                        f"overwrite it or `paramgeo undefine {name}` first")
    if name not in saved and name in registry.available():
        raise SpecError(f"the name {name!r} of {origin} is taken by "
                        f"{registry.origin(name)}; choose another name")
    folder = definitions_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"cannot create the definitions folder {str(folder)!r}: "
                        f"{exc.strerror}; set {ENV_HOME} to a folder you can write to"
                        ) from None
    if not folder.is_dir():  # e.g. a dangling link named like the folder
        raise SpecError(f"the definitions folder {str(folder)!r} is not a folder; set "
                        f"{ENV_HOME} to a folder you can write to")
    target = folder / f"{name}.toml"
    # an existing definition of this name is replaced only with --replace (checked above)
    write_file(target, text, what="definition", replace=replace)  # type: ignore[arg-type]
    registry.unregister(name)
    cls.spec_path = str(target)
    return registry.register(cls, source=f"definition {target}")


def undefine(name: str) -> Path:
    """Delete the saved definition ``name`` (and unregister it in this process).

    Args:
        name: the name of a definition saved by :func:`define`.

    Returns:
        The path of the deleted file.

    Raises:
        SpecError: no definition has that name (a built-in or plugin name is refused).
    """
    saved = defined()
    if name not in saved:
        if name in registry.available():
            raise SpecError(f"{name!r} is not a user definition (it comes from "
                            f"{registry.origin(name)}); only `paramgeo define`d names can be "
                            "undefined")
        raise SpecError(f"no user definition named {name!r}; defined: "
                        f"{', '.join(saved) or 'none'}")
    saved[name].unlink()
    registry.unregister(name)
    return saved[name]


class _DefinitionsProvider:
    """Registry provider: lists and loads the saved definitions (see registry.add_provider)."""

    def names(self):
        return list(defined())

    def load(self, name):
        path = defined().get(name)
        if path is None:
            raise PluginNotFoundError(name, registry.available())
        try:
            cls = load_definition(path)
        except ParamgeoError as exc:
            raise ContractError(f"saved definition {name!r} ({path}) is broken: {exc}; fix it "
                                f"or `paramgeo undefine {name}`") from None
        return cls, f"definition {path}"

    def origin(self, name):
        return f"definition {defined()[name]}"


PROVIDER = _DefinitionsProvider()
registry.add_provider(PROVIDER)
