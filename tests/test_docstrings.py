"""The public entry points read as a reference: Google-style docstrings (summary, ``Args:``
with every parameter of the signature, ``Returns:``, ``Raises:`` naming paramgeo's error
classes, ``Examples:`` with ``>>>`` lines that tests/test_doctests.py runs, rendered as code on
the API pages) and type hints on every parameter and the return value.

Run as a script, it counts over every public function and method of the package: how many
have structured docstrings, how many full type hints, how many run examples::

    python tests/test_docstrings.py

Covers: ``paramgeo.contract.parameterization``, ``paramgeo.linalg.numerics``.
"""

import dataclasses
import importlib
import inspect
import pkgutil
import re

import numpy as np
import pytest

import paramgeo
from paramgeo import errors
from paramgeo.contract.parameterization import Parameterization

#: the entry points a newcomer meets first (the base class's contract methods among them)
ENTRY_POINTS = [
    "paramgeo.get", "paramgeo.register", "paramgeo.rank_at", "paramgeo.generic_rank",
    "paramgeo.horizontal_projection", "paramgeo.kernel", "paramgeo.vertical_space",
    "paramgeo.quotient_metric", "paramgeo.predictor_metric", "paramgeo.check",
    "paramgeo.sweep", "paramgeo.from_torch", "paramgeo.from_jax", "paramgeo.estimate_llc",
    "paramgeo.exact_learning_coefficient", "paramgeo.critical.classify",
    "paramgeo.mirror.mirror", "paramgeo.flows.gradient_flow",
    "Parameterization.forward", "Parameterization.jacobian", "Parameterization.jvp",
    "Parameterization.vjp", "Parameterization.jacobian_derivative",
    "Parameterization.hessian_vp",
    # beyond the first list: the engines' main functions
    "paramgeo.get_class", "paramgeo.critical.search", "paramgeo.critical.strata",
    "paramgeo.critical.loss_point", "paramgeo.quotient.distance", "paramgeo.quotient.align",
    "paramgeo.quotient.barrier", "paramgeo.quotient.teleport",
    "paramgeo.mirror.conservation_laws", "paramgeo.mirror.implicit_bias",
    "paramgeo.flows.gradient_descent", "paramgeo.pacbayes.pacbayes_report",
    "paramgeo.mirror.mirror_potential", "paramgeo.mirror.verify", "paramgeo.quotient.log",
    "paramgeo.pacbayes.certificates", "paramgeo.flows.schedule", "paramgeo.quotient.exp",
    "paramgeo.quotient.geodesic", "paramgeo.sweeps.load_spec", "paramgeo.llc.step_sweep",
    "paramgeo.flows.quotient_flow", "paramgeo.flows.compare_flows",
]
#: public functions with no error of their own to name, or no example that can run without
#: writing a file: every section but those
DOCUMENTED = {
    "paramgeo.available": {"Raises"},
    "paramgeo.symmetry.verify_group": {"Raises"}, "paramgeo.load_plugin_file": {"Examples"},
    "paramgeo.define": {"Examples"}, "paramgeo.undefine": {"Examples"},
}
#: a Google-style section header: a known title alone on its line, ending with a colon
SECTION = re.compile(r"^(\s*)(Args|Returns|Raises|Example|Examples|Attributes|Yields|Note):\s*$",
                     re.M)
def error_classes():
    """The names of paramgeo's error classes (ParamgeoError and its subclasses in every module),
    which a ``Raises:`` entry must name."""
    for _, name, _ in pkgutil.walk_packages(paramgeo.__path__, "paramgeo."):
        if not name.startswith("paramgeo.cli"):
            importlib.import_module(name)
    found, todo = set(), [errors.ParamgeoError]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo += cls.__subclasses__()
    return found


def resolve(path):
    """The function named by ``path`` ("paramgeo.x.name" or "Parameterization.method")."""
    if path.startswith("Parameterization."):
        return getattr(Parameterization, path.split(".", 1)[1])
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def sections(doc):
    """{title: body} of a docstring's Google-style sections (bodies dedented one level)."""
    doc = inspect.cleandoc(doc or "")
    marks = list(SECTION.finditer(doc))
    out = {}
    for k, mark in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(doc)
        out[mark.group(2)] = doc[mark.end():end]
    return out


def documented_args(body):
    """The parameter names listed in an ``Args:`` body (entries ``name: text`` at its first
    indentation; ``*args``/``**kwargs`` without their stars)."""
    lines = [line for line in body.splitlines() if line.strip()]
    if not lines:
        return []
    indent = min(len(line) - len(line.lstrip()) for line in lines)
    names = []
    for line in lines:
        match = re.match(r"\*{0,2}(\w+)( \([^)]*\))?:", line[indent:])
        if len(line) - len(line.lstrip()) == indent and match:
            names.append(match.group(1))
    return names


def parameters(fn):
    """The parameter names of ``fn``'s signature, a method's self or cls aside."""
    names = list(inspect.signature(fn).parameters)
    if "." in fn.__qualname__ and names and names[0] in ("self", "cls"):
        names = names[1:]
    return names


def problems(fn, exempt=()):
    """What the docstring and the signature of ``fn`` lack (sections named in ``exempt``
    aside): a list of sentences."""
    doc = inspect.getdoc(fn) or ""
    found = sections(doc)
    out = []
    if not doc or SECTION.match(doc.splitlines()[0]):
        out.append("no summary line")
    for title in ("Args", "Returns", "Raises", "Examples"):
        if title in exempt:
            continue
        if title not in found and not (title == "Args" and not parameters(fn)):
            out.append(f"no {title}: section")
    listed = documented_args(found.get("Args", ""))
    missing = [name for name in parameters(fn) if name not in listed]
    extra = [name for name in listed if name not in parameters(fn)]
    if missing or extra:
        out.append(f"Args: lacks {missing}, names unknown {extra}")
    raised = re.findall(r"^\s*(\w+):", found.get("Raises", ""), re.M)
    if "Raises" in found and (not raised or set(raised) - error_classes()):
        out.append(f"Raises: names {raised}, not paramgeo error classes")
    if "Examples" not in exempt and ">>>" not in found.get("Examples", ""):
        out.append("Examples: has no >>> line")
    hints = inspect.signature(fn)
    bare = [name for name in parameters(fn)
            if hints.parameters[name].annotation is inspect.Parameter.empty]
    if bare or hints.return_annotation is inspect.Signature.empty:
        out.append(f"type hints missing on {bare}"
                   + (" and the return value" if hints.return_annotation
                      is inspect.Signature.empty else ""))
    return out


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_entry_point_docstring_is_structured_and_typed(path):
    assert problems(resolve(path)) == [], path


@pytest.mark.parametrize("path", sorted(DOCUMENTED))
def test_documented_function_has_its_sections_and_types(path):
    assert problems(resolve(path), exempt=DOCUMENTED[path]) == [], path


def test_the_checker_sees_what_is_missing():
    """The checker against docstrings built to lack one thing each (it can fail)."""

    def full(theta: int, v: int = 0) -> int:
        """Summary.

        Args:
            theta: the point.
            v: a vector.

        Returns:
            A number.

        Raises:
            ShapeError: never.

        Examples:
            >>> 1
            1
        """

    def bare(theta, v=0):
        """Summary.

        Args:
            theta: the point.

        Returns:
            A number.

        Raises:
            ValueError: never.

        Examples:
            1
        """

    assert problems(full) == []
    found = problems(bare)
    assert any("lacks ['v']" in p for p in found)
    assert any("not paramgeo error classes" in p for p in found)
    assert any("no >>> line" in p for p in found)
    assert any("type hints missing on ['theta', 'v'] and the return value" in p for p in found)
    assert sections(full.__doc__).keys() == {"Args", "Returns", "Raises", "Examples"}


def public_functions():
    """{qualified name: function} of every public function and public method of paramgeo: the
    names without a leading underscore that its public modules define or re-export (from_torch
    lives in ``adapters._torch``), and the public methods of the classes among them (the CLI
    aside). Each is counted once, under the module that defines it."""
    names = ["paramgeo"] + sorted(
        name for _, name, _ in pkgutil.walk_packages(paramgeo.__path__, "paramgeo.")
        if not name.startswith("paramgeo.cli"))
    seen = {}
    for name in names:
        if any(part.startswith("_") for part in name.split(".")):
            continue
        module = importlib.import_module(name)
        for attr in list(vars(module)) + list(getattr(module, "__all__", ())):
            obj = getattr(module, attr, None)
            home = getattr(obj, "__module__", None) or ""
            if attr.startswith("_") or not home.startswith("paramgeo"):
                continue
            if inspect.isfunction(obj):
                seen.setdefault(f"{home}.{obj.__qualname__}", obj)
            elif inspect.isclass(obj):
                for meth, fn in vars(obj).items():
                    fn = getattr(fn, "__func__", fn)
                    if not meth.startswith("_") and inspect.isfunction(fn):
                        seen.setdefault(f"{home}.{obj.__qualname__}.{meth}", fn)
    return seen


def counts():
    """{what: how many} over :func:`public_functions`."""
    functions = public_functions()
    structured = typed = examples = 0
    for fn in functions.values():
        found = sections(inspect.getdoc(fn))
        structured += "Returns" in found and ("Args" in found or not parameters(fn))
        sig = inspect.signature(fn)
        typed += (sig.return_annotation is not inspect.Signature.empty
                  and all(sig.parameters[n].annotation is not inspect.Parameter.empty
                          for n in parameters(fn)))
        examples += ">>>" in (fn.__doc__ or "")
    return {"public functions and methods": len(functions), "structured docstrings":
            structured, "full type hints": typed, "with >>> examples": examples}


def test_counts_cover_the_entry_points():
    """The count sees every module-level entry point and counts each as structured."""
    functions = public_functions()
    listed = [path for path in ENTRY_POINTS if not path.startswith("Parameterization.")]
    for path in listed:
        fn = resolve(path)
        assert any(f is fn for f in functions.values()), path
    assert counts()["structured docstrings"] >= len(ENTRY_POINTS)


if __name__ == "__main__":
    for what, count in counts().items():
        print(f"{what}: {count}")


def _dataclasses():
    """(qualified name, class) of every dataclass defined in paramgeo (the CLI included)."""
    out = []
    for _, name, _ in pkgutil.walk_packages(paramgeo.__path__, "paramgeo."):
        for attr, obj in vars(importlib.import_module(name)).items():
            if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and obj.__module__ == name:
                out.append((f"{name}.{attr}", obj))
    return out


def test_every_result_is_built_by_keyword():
    """Every field of every dataclass is keyword-only, so a result cannot be built from a row
    of positional values (a swapped float would be a silent wrong answer)."""
    found = _dataclasses()
    assert len(found) > 50
    positional = [f"{name}.{f.name}" for name, cls in found for f in dataclasses.fields(cls)
                  if f.init and not f.kw_only]
    assert positional == []
    from paramgeo.linalg.numerics import RankDecision

    with pytest.raises(TypeError):
        RankDecision(2, 1e-9, np.ones(2), np.inf, False, np.nan)


#: the results whose every field is documented on its own line in ``Attributes:``
DOCUMENTED_RESULTS = [
    "paramgeo.llc.LLCEstimate", "paramgeo.critical.Classification", "paramgeo.mirror.MirrorReport",
    "paramgeo.linalg.numerics.RankDecision", "paramgeo.reports.contract_check.CheckItem",
    "paramgeo.reports.contract_check.CheckReport", "paramgeo.llc.LearningCoefficient",
    "paramgeo.critical.SearchResult",
    "paramgeo.quotient.Alignment", "paramgeo.critical.LossPoint", "paramgeo.quotient.Teleport",
    "paramgeo.quotient.Barrier", "paramgeo.mirror.ImplicitBias", "paramgeo.pacbayes.PacBayesReport",
    "paramgeo.dynamics.trajectory.Trajectory", "paramgeo.critical.Strata", "paramgeo.sweeps.SweepSummary",
    "paramgeo.pacbayes.Certificates", "paramgeo.symmetry.DiscoveredSymmetry",
]


@pytest.mark.parametrize("path", DOCUMENTED_RESULTS)
def test_result_documents_each_field(path):
    cls = resolve(path)
    listed = documented_args(sections(cls.__doc__).get("Attributes", ""))
    assert listed == [f.name for f in dataclasses.fields(cls)], path
