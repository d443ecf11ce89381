"""Every ``>>>`` example in paramgeo's docstrings runs as written (doctest).

Covers: the ``>>>`` examples of every module of ``paramgeo``.
"""

import doctest
import importlib
import pkgutil

import pytest

import paramgeo

MODULES = ["paramgeo"] + sorted(
    name for _, name, _ in pkgutil.walk_packages(paramgeo.__path__, "paramgeo.")
    if not name.startswith("paramgeo.cli"))


def _has_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return any(t.examples for t in finder.find(module, name))


@pytest.mark.parametrize("name", [m for m in MODULES if _has_examples(m)])
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    assert result.attempted > 0
