"""Layout checks on paramgeo/ itself: the import graph has no circle, no module is too long, and
no submodule is shadowed by a name its package binds.

The graph is read with ``ast`` (no import is executed, no dependency added). Every ``import`` and
``from ... import`` counts, including those inside functions: a lazy import still ties two
modules together. Relative imports are resolved against the importing module's package;
``from pkg import name`` is an edge to the submodule ``pkg.name`` when that module exists, else
to ``pkg``. Importing ``a.b.c`` from outside ``a.b`` also executes the package ``a.b``'s
``__init__``, so that edge is added too; a module's own enclosing packages are added only when
it names them (``from . import name`` in a submodule depends on its package's ``__init__``),
not for the implicit import that runs them first.

Covers: the layout of ``paramgeo`` (every module's imports and length).
"""

import ast
import re
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "paramgeo"
MAX_LINES = 600

#: Modules still over MAX_LINES, each with the reason (none since pacbayes became a package).
KNOWN_LONG_MODULES = set()


def _module_name(path):
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    """{dotted module name: (path, is_package)} for every .py file under paramgeo/."""
    return {
        _module_name(path): (path, path.name == "__init__.py")
        for path in sorted(PACKAGE_ROOT.rglob("*.py"))
    }


def _ancestors(name):
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _imported(node, name, is_package, modules):
    """The paramgeo modules an Import/ImportFrom node of module `name` names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = name if is_package else name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    targets = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        targets.append(sub if sub in modules else base)
    return targets


def import_graph():
    """{module: set of paramgeo modules whose import it triggers}."""
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _imported(node, name, is_package, modules):
                # the longest prefix of `target` that is a module of ours
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if not target:
                    continue  # not ours (numpy, click, ...)
                if target != name:
                    edges.add(target)  # named explicitly, even an enclosing package
                own = _ancestors(name) | {name}
                edges |= _ancestors(target) - own
        graph[name] = edges
    return graph


def find_cycle(graph):
    """One import circle as a list [m0, m1, ..., m0], or None (iterative depth-first search)."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        colour[start] = GREY
        while stack:
            node, children = stack[-1]
            for child in children:
                if colour.get(child, BLACK) == GREY:
                    return path[path.index(child):] + [child]
                if colour.get(child) == WHITE:
                    colour[child] = GREY
                    path.append(child)
                    stack.append((child, iter(sorted(graph[child]))))
                    break
            else:
                colour[node] = BLACK
                path.pop()
                stack.pop()
    return None


def test_graph_reader_sees_the_package():
    """The reader finds the modules and resolves relative and in-function imports."""
    graph = import_graph()
    assert {"paramgeo", "paramgeo.cli", "paramgeo.geometry", "paramgeo.mirror"} <= set(graph)
    assert "paramgeo.errors" in graph["paramgeo.geometry.jacobian"]  # `from ..errors import`
    assert "paramgeo.geometry.kinks" in graph["paramgeo.geometry"]  # `from .kinks import ...`
    assert "paramgeo.errors" in graph["paramgeo.cli"]  # `from ..errors import ...`
    # `from ..registry import get` inside a function of paramgeo/cli/_common.py
    assert "paramgeo.contract.registry" in graph["paramgeo.cli._common"]
    # `from .. import mirror` inside a function names the subpackage, not paramgeo itself
    assert "paramgeo.mirror" in graph["paramgeo.flows.push_forward"]
    assert "paramgeo" not in graph["paramgeo.flows.push_forward"]
    # a package's __init__ depends on the submodules it re-exports, not the other way round
    assert "paramgeo.mirror.lie" in graph["paramgeo.mirror"]
    assert "paramgeo.mirror" not in graph["paramgeo.mirror.lie"]


def test_find_cycle_reports_the_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_circle_inside_paramgeo():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_module_over_600_lines():
    modules = _modules()
    long = {
        name: len(path.read_text().splitlines())
        for name, (path, _) in modules.items()
        if len(path.read_text().splitlines()) > MAX_LINES
    }
    unexpected = {name: n for name, n in long.items() if name not in KNOWN_LONG_MODULES}
    assert not unexpected, f"modules over {MAX_LINES} lines: {unexpected}"
    stale = {name for name in KNOWN_LONG_MODULES if name not in long}
    assert not stale, f"no longer long (or gone), remove from KNOWN_LONG_MODULES: {stale}"


def test_every_public_name_resolves_lazily():
    """Each name in paramgeo.__all__ is importable; the lazy ones come from the module
    paramgeo._LAZY says."""
    import importlib

    import paramgeo

    for name in paramgeo.__all__:
        value = getattr(paramgeo, name)
        if name in paramgeo._LAZY:
            module = importlib.import_module(f"paramgeo.{paramgeo._LAZY[name]}")
            assert getattr(module, name) is value, name
    assert set(paramgeo._LAZY) <= set(paramgeo.__all__)


def test_import_paramgeo_and_help_import_nothing_heavy():
    """`import paramgeo` does not import scipy, sympy, geomstats or networkx, and
    `paramgeo --help` does not even import numpy (measured in a fresh interpreter)."""
    import subprocess
    import sys

    code = ("import sys, paramgeo; print(sorted(m for m in ('numpy', 'scipy', 'sympy', "
            "'geomstats', 'networkx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
    code = ("import sys\nfrom paramgeo.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\nprint('numpy' in sys.modules, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "False False"


def test_every_package_is_listed_in_setup_cfg():
    """setup.cfg lists packages by name: a subpackage left out installs everywhere but in an
    editable checkout without its modules."""
    import configparser

    config = configparser.ConfigParser()
    config.read(PACKAGE_ROOT.parent / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    packages = {name for name, (_, is_package) in _modules().items() if is_package}
    assert packages <= listed, f"add to setup.cfg [options] packages: {sorted(packages - listed)}"


def test_every_test_module_names_what_it_covers():
    """Each test module's docstring ends with a ``Covers:`` paragraph naming the modules (or
    files) it tests, so a reader of a module finds its tests by searching for its name; every
    module named must exist."""
    import importlib.util

    tests = Path(__file__).resolve().parent
    missing, unknown = [], []
    for path in sorted(tests.glob("test_*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        covers = doc.split("\nCovers:", 1)[1] if "\nCovers:" in doc else None
        if covers is None:
            missing.append(path.name)
            continue
        for name in re.findall(r"``(paramgeo[\w.]*)``", covers):
            if importlib.util.find_spec(name) is None:
                unknown.append(f"{path.name}: {name}")
    assert not missing, f"add a 'Covers: ``paramgeo.x.y``, ...' paragraph to: {missing}"
    assert not unknown, f"no such module: {unknown}"


def test_no_submodule_is_shadowed_by_a_name_of_its_package():
    """``paramgeo.pkg.mod`` reaches the module: no package binds a function or class under the
    name of one of its submodules (``import paramgeo.pkg.mod as m`` would then bind that
    object, and the API pages could not name the module)."""
    import importlib
    import pkgutil
    import types

    import paramgeo

    shadowed = []
    for info in pkgutil.walk_packages(paramgeo.__path__, "paramgeo."):
        importlib.import_module(info.name)
        parent, _, leaf = info.name.rpartition(".")
        bound = getattr(importlib.import_module(parent), leaf, None)
        if not isinstance(bound, types.ModuleType):
            shadowed.append(f"{info.name} (bound to a {type(bound).__name__})")
    assert not shadowed, f"submodules shadowed by a name of their package: {shadowed}"
